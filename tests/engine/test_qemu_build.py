"""A linux/arm64 image built and run on the real engine through QEMU (scripts/qemu-up), and one
multi-platform index (amd64 + arm64) pushed to the loopback registry and read back.

The image is tiny: Debian's busybox-static for arm64, fetched with a separate
apt state from the host's own Debian archive, copied onto scratch. Nothing is
pulled from a registry.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
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


def busybox(cache: Path, arch: str = "arm64") -> Path:
    """bin/busybox of Debian's busybox-static for arch, downloaded once into cache (a separate apt state)."""
    out = cache / f"busybox-{arch}"
    if (out / "bin" / "busybox").exists():
        return out
    try:
        uri, signed = debian_mirror()
    except BaseImageError as exc:
        pytest.skip(str(exc))
    suite = host_codename() or "bookworm"
    work = cache / f"apt-{arch}"
    shutil.rmtree(work, ignore_errors=True)
    for d in ("state/lists/partial", "cache/archives/partial", "parts", "pkg"):
        (work / d).mkdir(parents=True)
    (work / "state" / "status").write_text("")
    opts = f"[arch={arch}{' signed-by=' + signed if signed else ''}] "
    (work / "sources.list").write_text(f"deb {opts}{uri} {suite} main\n")
    apt = ["apt-get", "-o", f"Dir::State={work}/state", "-o", f"Dir::State::status={work}/state/status",
           "-o", f"Dir::Cache={work}/cache", "-o", f"Dir::Etc::SourceList={work}/sources.list",
           "-o", f"Dir::Etc::SourceParts={work}/parts", "-o", f"APT::Architecture={arch}",
           "-o", f"APT::Architectures={arch}", "-o", "Debug::NoLocking=1", "-o", "APT::Sandbox::User=root"]
    for cmd in (apt + ["update", "-qq"], apt + ["download", f"busybox-static:{arch}"]):
        proc = subprocess.run(cmd, cwd=work / "pkg", capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot fetch busybox-static for {arch}: {proc.stderr.strip()[-300:]}")
    (deb,) = (work / "pkg").glob(f"busybox-static_*_{arch}.deb")
    extracted = work / "root"
    subprocess.run(["dpkg", "-x", str(deb), str(extracted)], check=True)
    (out / "bin").mkdir(parents=True)
    shutil.copy2(extracted / "bin" / "busybox", out / "bin" / "busybox")
    shutil.rmtree(work, ignore_errors=True)
    return out


def test_arm64_build_and_run_through_qemu(engine: Engine, tmp_path: Path) -> None:
    qemu_ready()
    rootfs = busybox(ROOT / ".cache" / "qemu")
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


INDEX_TYPES = ("application/vnd.docker.distribution.manifest.list.v2+json, "
               "application/vnd.oci.image.index.v1+json")


def test_multi_platform_index_in_the_loopback_registry(engine: Engine, registry: str, tmp_path: Path) -> None:
    """amd64 and arm64 images pushed, then one index per tag made of them and read back from the registry."""
    qemu_ready()
    repo = f"{registry}/pinwheel-test/multiarch-{uuid.uuid4().hex[:8]}"
    digests: dict[str, str] = {}
    refs = []
    for platform in ("linux/amd64", "linux/arm64"):
        arch = platform.split("/")[1]
        context = tmp_path / arch
        shutil.copytree(busybox(ROOT / ".cache" / "qemu", arch), context / "rootfs")
        (context / "Dockerfile").write_text(DOCKERFILE)
        ref = f"{repo}:t1-{arch}"
        engine.build(context, context / "Dockerfile", tags=[ref], platform=platform)
        assert engine.platform(ref) == platform
        digests[platform] = engine.push(ref).digest
        refs.append(ref)
    try:
        index_digest = engine.push_index(f"{repo}:t1", refs)
        name = repo.split("/", 1)[1]
        req = urllib.request.Request(f"http://{registry}/v2/{name}/manifests/t1", headers={"Accept": INDEX_TYPES})
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
            assert resp.headers["Docker-Content-Digest"] == index_digest
        index = json.loads(body)
        assert index["mediaType"] in INDEX_TYPES.split(", ")
        found = {f"{m['platform']['os']}/{m['platform']['architecture']}": m["digest"] for m in index["manifests"]}
        assert found == digests  # both platforms, each the digest of the image built and pushed for it
    finally:
        for ref in refs:
            engine.remove(ref, force=True)
