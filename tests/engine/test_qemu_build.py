"""A linux/arm64 image built and run on the real engine through QEMU (scripts/qemu-up).

The image is tiny: Debian's busybox-static for arm64, fetched with a separate
apt state from the host's own Debian archive, copied onto scratch. Nothing is
pulled from a registry.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from pinwheel.image.base import BaseImageError, debian_mirror, host_codename
from pinwheel.image.engine import Engine

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]
ARCH_FILE = "/proc/sys/fs/binfmt_misc/qemu-aarch64"

# TARGETARCH is set by BuildKit for the platform being built.
DOCKERFILE = """\
FROM scratch
COPY rootfs/ /
ARG TARGETARCH
RUN ["/bin/busybox", "sh", "-c", "echo ${TARGETARCH} $(/bin/busybox uname -m) > /built-on"]
ENTRYPOINT ["/bin/busybox"]
"""


def qemu_ready() -> None:
    if not (Path(ARCH_FILE).exists() and "F" in Path(ARCH_FILE).read_text()):
        proc = subprocess.run([str(ROOT / "scripts" / "qemu-up")], capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"no QEMU for arm64 here: {proc.stderr.strip()[-300:]}")


def busybox_arm64(cache: Path) -> Path:
    """bin/busybox of Debian's busybox-static:arm64, downloaded once into cache (a separate apt state)."""
    out = cache / "busybox-arm64"
    if (out / "bin" / "busybox").exists():
        return out
    try:
        uri, signed = debian_mirror()
    except BaseImageError as exc:
        pytest.skip(str(exc))
    suite = host_codename() or "bookworm"
    work = cache / "apt-arm64"
    shutil.rmtree(work, ignore_errors=True)
    for d in ("state/lists/partial", "cache/archives/partial", "parts", "pkg"):
        (work / d).mkdir(parents=True)
    (work / "state" / "status").write_text("")
    opts = f"[arch=arm64{' signed-by=' + signed if signed else ''}] "
    (work / "sources.list").write_text(f"deb {opts}{uri} {suite} main\n")
    apt = ["apt-get", "-o", f"Dir::State={work}/state", "-o", f"Dir::State::status={work}/state/status",
           "-o", f"Dir::Cache={work}/cache", "-o", f"Dir::Etc::SourceList={work}/sources.list",
           "-o", f"Dir::Etc::SourceParts={work}/parts", "-o", "APT::Architecture=arm64",
           "-o", "APT::Architectures=arm64", "-o", "Debug::NoLocking=1", "-o", "APT::Sandbox::User=root"]
    for cmd in (apt + ["update", "-qq"], apt + ["download", "busybox-static:arm64"]):
        proc = subprocess.run(cmd, cwd=work / "pkg", capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot fetch busybox-static for arm64: {proc.stderr.strip()[-300:]}")
    (deb,) = (work / "pkg").glob("busybox-static_*_arm64.deb")
    extracted = work / "root"
    subprocess.run(["dpkg", "-x", str(deb), str(extracted)], check=True)
    (out / "bin").mkdir(parents=True)
    shutil.copy2(extracted / "bin" / "busybox", out / "bin" / "busybox")
    shutil.rmtree(work, ignore_errors=True)
    return out


def test_arm64_build_and_run_through_qemu(engine: Engine, tmp_path: Path) -> None:
    qemu_ready()
    rootfs = busybox_arm64(ROOT / ".cache" / "qemu")
    context = tmp_path / "ctx"
    shutil.copytree(rootfs, context / "rootfs")
    (context / "Dockerfile").write_text(DOCKERFILE)
    tag = f"pinwheel-test/qemu:{uuid.uuid4().hex[:12]}"
    try:
        started = time.monotonic()
        image_id = engine.build(context, context / "Dockerfile", tags=[tag], platform="linux/arm64", cache=False)
        seconds = time.monotonic() - started
        assert image_id.startswith("sha256:")
        assert engine.platform(tag) == "linux/arm64"
        # the RUN step ran as aarch64 (under QEMU), with BuildKit's TARGETARCH
        got = engine.run(tag, ["cat", "/built-on"], platform="linux/arm64")
        assert (got.returncode, got.stdout.split()) == (0, ["arm64", "aarch64"]), got
        got = engine.run(tag, ["uname", "-m"], platform="linux/arm64")
        assert got.stdout.strip() == "aarch64"
        print(f"arm64 build through QEMU: {seconds:.1f}s")
    finally:
        engine.remove(tag, force=True)
