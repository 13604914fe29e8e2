"""Local bootstrap base images, built from Debian packages with debootstrap.

Used where no container registry is reachable to pull a base from. The
Debian mirror comes from the machine's own apt sources, read at run time.
The root filesystem tarball is cached (in Workspace.base_cache), so a
second bootstrap only re-imports it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from . import labels
from .engine import Engine
from .rootfs import write_rootfs_tar

__all__ = [
    "AptSource",
    "BaseImageError",
    "SUITE_PYTHON",
    "apt_sources",
    "base_ref",
    "debian_mirror",
    "ensure_base",
    "host_codename",
    "suite_for_python",
]

# The python3 each Debian suite ships (major.minor).
SUITE_PYTHON: dict[str, str] = {
    "bullseye": "3.9",
    "bookworm": "3.11",
    "trixie": "3.13",
}

BASE_PACKAGES: tuple[str, ...] = ("python3", "python3-venv", "python3-pip", "ca-certificates")

LABEL_SUITE = labels.BASE_SUITE
LABEL_PYTHON = labels.BASE_PYTHON


class BaseImageError(RuntimeError):
    """The base image cannot be made as asked."""


@dataclass(frozen=True)
class AptSource:
    types: tuple[str, ...]
    uris: tuple[str, ...]
    suites: tuple[str, ...]
    components: tuple[str, ...]
    signed_by: str | None
    origin: str  # file the entry came from


# --- versions ----------------------------------------------------------------


def _major_minor(version: str) -> str:
    parts = version.strip().split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        raise BaseImageError(f"python version {version!r} is not of the form X.Y or X.Y.Z")
    return f"{int(parts[0])}.{int(parts[1])}"


def _shipped() -> str:
    return ", ".join(f"{suite} ships {py}" for suite, py in SUITE_PYTHON.items())


def suite_for_python(python_version: str) -> str:
    """The Debian suite whose python3 is ``python_version`` (X.Y)."""
    want = _major_minor(python_version)
    for suite, py in SUITE_PYTHON.items():
        if py == want:
            return suite
    raise BaseImageError(f"no known Debian suite ships Python {want} ({_shipped()})")


BOOTSTRAP_REPOSITORY = "pinwheel/base"


def platform_base(ref: str, arch: str | None) -> str:
    """The local bootstrap base for another architecture: pinwheel/base:bookworm-py311-arm64.
    Other bases are kept: a registry tag names an index that holds every platform."""
    return f"{ref}-{arch}" if arch and is_bootstrap(ref) else ref


def is_bootstrap(ref: str) -> bool:
    """A base pinwheel builds itself from Debian packages (never pulled, so it cannot float upstream)."""
    return ref.startswith(BOOTSTRAP_REPOSITORY + ":")


def base_ref(suite: str, python_version: str) -> str:
    """The conventional local base name, e.g. ``pinwheel/base:bookworm-py311``."""
    return f"{BOOTSTRAP_REPOSITORY}:{suite}-py{_major_minor(python_version).replace('.', '')}"


def _check_suite_python(suite: str, python_version: str) -> str:
    want = _major_minor(python_version)
    have = SUITE_PYTHON.get(suite)
    if have is None:
        raise BaseImageError(f"unknown Debian suite {suite!r}; known: {_shipped()}")
    if have != want:
        hint = ""
        try:
            hint = f"; use suite {suite_for_python(want)!r} for Python {want}"
        except BaseImageError:
            hint = f"; no known Debian suite ships Python {want}, so use a base image that has it"
        raise BaseImageError(
            f"Debian {suite} ships Python {have}, not {want} ({_shipped()}){hint}"
        )
    return have


# --- apt sources --------------------------------------------------------------


def _deb822_stanzas(text: str) -> list[dict[str, str]]:
    stanzas: list[dict[str, str]] = []
    current: dict[str, str] = {}
    key: str | None = None
    for raw in text.splitlines():
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if current:
                stanzas.append(current)
            current, key = {}, None
            continue
        if raw[0] in " \t" and key is not None:
            current[key] += " " + raw.strip()
            continue
        name, sep, value = raw.partition(":")
        if not sep:
            continue
        key = name.strip().lower()
        current[key] = value.strip()
    if current:
        stanzas.append(current)
    return stanzas


def _parse_deb822(text: str, origin: str) -> list[AptSource]:
    out: list[AptSource] = []
    for st in _deb822_stanzas(text):
        if st.get("enabled", "yes").lower() == "no":
            continue
        out.append(
            AptSource(
                types=tuple(st.get("types", "").split()),
                uris=tuple(st.get("uris", "").split()),
                suites=tuple(st.get("suites", "").split()),
                components=tuple(st.get("components", "").split()),
                signed_by=st.get("signed-by") or None,
                origin=origin,
            )
        )
    return out


def _parse_one_line(text: str, origin: str) -> list[AptSource]:
    out: list[AptSource] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        kind, rest = words[0], words[1:]
        if kind not in ("deb", "deb-src"):
            continue
        signed_by: str | None = None
        if rest and rest[0].startswith("["):
            opts: list[str] = []
            while rest:
                word = rest.pop(0)
                opts.append(word.strip("[]"))
                if word.endswith("]"):
                    break
            for opt in opts:
                if opt.startswith("signed-by="):
                    signed_by = opt.split("=", 1)[1]
        if len(rest) < 2:
            continue
        out.append(AptSource((kind,), (rest[0],), (rest[1],), tuple(rest[2:]), signed_by, origin))
    return out


def apt_sources(apt_dir: Path = Path("/etc/apt")) -> list[AptSource]:
    """All enabled entries of the machine's apt sources, deb822 and one-line style."""
    apt_dir = Path(apt_dir)
    sources: list[AptSource] = []
    one_line = [apt_dir / "sources.list", *sorted((apt_dir / "sources.list.d").glob("*.list"))]
    for path in one_line:
        if path.is_file():
            sources += _parse_one_line(path.read_text(errors="replace"), str(path))
    for path in sorted((apt_dir / "sources.list.d").glob("*.sources")):
        sources += _parse_deb822(path.read_text(errors="replace"), str(path))
    return sources


def host_codename(os_release: Path = Path("/etc/os-release")) -> str | None:
    try:
        text = Path(os_release).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"') or None
    return None


def debian_mirror(
    codename: str | None = None, apt_dir: Path = Path("/etc/apt")
) -> tuple[str, str | None]:
    """The Debian archive URI (and its Signed-By keyring) from the apt sources.

    Picks the first binary entry whose suites include ``codename`` itself
    (else the host's suite), so ``-updates``/``-security`` and third-party
    repositories are skipped. ``PINWHEEL_DEBIAN_MIRROR`` overrides it.
    """
    override = os.environ.get("PINWHEEL_DEBIAN_MIRROR")
    if override:
        return override, None
    # One archive serves every suite: prefer an entry for the suite asked,
    # then the host's own suite, then any known Debian suite.
    wanted: list[str] = []
    for suite in (codename, host_codename(), *SUITE_PYTHON):
        if suite and suite not in wanted:
            wanted.append(suite)
    sources = apt_sources(apt_dir)
    for suite in wanted:
        for src in sources:
            if "deb" in src.types and suite in src.suites and src.uris:
                return src.uris[0].rstrip("/"), src.signed_by
    raise BaseImageError(
        f"no Debian archive for {'/'.join(wanted)} in the apt sources under {apt_dir}; "
        "set PINWHEEL_DEBIAN_MIRROR to a Debian mirror URL"
    )


# --- bootstrap -----------------------------------------------------------------


def _ensure_debootstrap() -> str:
    found = shutil.which("debootstrap")
    if found:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise BaseImageError(
            "debootstrap is missing; install it (Debian/Ubuntu package 'debootstrap') "
            "or provide the base image another way"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "debootstrap"]
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=True, capture_output=True)
        subprocess.run(install, env=env, check=True, capture_output=True)
    found = shutil.which("debootstrap")
    if not found:
        raise BaseImageError("installed debootstrap but it is not on PATH")
    return found


def bootstrap_rootfs(
    suite: str,
    target: Path,
    mirror: str,
    keyring: str | None = None,
    include: Sequence[str] = BASE_PACKAGES,
    arch: str | None = None,
) -> str:
    """debootstrap a minbase ``suite`` into ``target``; return the python3 version it holds.
    ``arch`` (arm64): a Debian architecture other than the host's, its second stage run through QEMU."""
    if os.geteuid() != 0:
        raise BaseImageError("debootstrap needs root; run as root or provide the base image")
    cmd = [_ensure_debootstrap(), "--variant=minbase", f"--include={','.join(include)}"]
    if arch:
        cmd.append(f"--arch={arch}")
    if keyring and Path(keyring).is_file():
        cmd.append(f"--keyring={keyring}")
    cmd += [suite, str(target), mirror]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        log = target / "debootstrap" / "debootstrap.log"
        detail = log.read_text(errors="replace")[-3000:] if log.is_file() else proc.stderr[-3000:]
        raise BaseImageError(f"debootstrap {suite} failed (exit {proc.returncode}):\n{detail}")
    # Keep the image small and free of this machine's identity.
    for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for entry in (target / sub).glob("*"):
            if entry.is_file():
                entry.unlink()
    (target / "etc" / "hostname").write_text("")
    version = subprocess.run(
        ["chroot", str(target), "python3", "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
    )
    if version.returncode != 0:
        raise BaseImageError(f"python3 does not run in the {suite} root filesystem: {version.stderr}")
    return version.stdout.strip()


def ensure_base(
    ref: str,
    python_version: str,
    engine: Engine,
    suite: str = "bookworm",
    *,
    cache_dir: Path,
    progress: bool = False,
    arch: str | None = None,
) -> bool:
    """Make sure the local base image ``ref`` exists; True when it had to be created.

    ``arch`` (arm64) bootstraps that Debian architecture (through QEMU on another host, see
    scripts/qemu-up) and imports it as linux/<arch>; None: the host's.

    The image is a minbase Debian ``suite`` with python3, venv, pip and CA
    certificates. ``python_version`` must be the suite's python3 (X.Y).
    ``cache_dir`` keeps the root filesystem tarball (Workspace.base_cache).
    """
    expected = _check_suite_python(suite, python_version)
    if engine.image_exists(ref):
        return False
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    stem = f"{suite}-py{expected.replace('.', '')}" + (f"-{arch}" if arch else "")

    def note(msg: str) -> None:
        if progress:
            print(f"base: {msg}", file=sys.stderr, flush=True)  # progress, never the command's output

    # Two builds on one machine (CI jobs, test workers) may both find the base missing: one makes it, and
    # the other, once the lock is its, finds it there.
    with open(cache / f"{stem}.lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if engine.image_exists(ref):
            return False
        tarball, version_file = _rootfs_tarball(suite, expected, cache, stem, arch, note)
        _import_base(engine, ref, suite, tarball, version_file, arch)
    note(f"imported {ref}")
    return True


def _rootfs_tarball(suite: str, expected: str, cache: Path, stem: str, arch: str | None,
                    note) -> tuple[Path, Path]:
    """The cached root filesystem tarball of ``stem`` and its Python version file, bootstrapped when missing."""
    tarball = cache / f"{stem}.tar"
    version_file = cache / f"{stem}.python"
    if not (tarball.is_file() and version_file.is_file()):
        mirror, keyring = debian_mirror(suite)
        note(f"debootstrap {suite} (python3 {expected}) from the host's Debian archive")
        started = time.monotonic()
        rootfs = Path(tempfile.mkdtemp(prefix=f"rootfs-{stem}-", dir=cache))
        try:
            full_version = bootstrap_rootfs(suite, rootfs, mirror, keyring, arch=arch)
            if _major_minor(full_version) != expected:
                raise BaseImageError(
                    f"Debian {suite} root filesystem holds Python {full_version}, expected {expected}"
                )
            write_rootfs_tar(rootfs, tarball)
            version_file.write_text(full_version + "\n")
        finally:
            shutil.rmtree(rootfs, ignore_errors=True)
        note(f"root filesystem ready in {time.monotonic() - started:.0f}s: {tarball}")
    return tarball, version_file


def _import_base(engine: Engine, ref: str, suite: str, tarball: Path, version_file: Path, arch: str | None) -> None:
    full_version = version_file.read_text().strip()
    changes = [
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV LANG=C.UTF-8",
        f"LABEL {LABEL_SUITE}={suite} {LABEL_PYTHON}={full_version}",
        'CMD ["/bin/bash"]',
    ]
    engine.import_tarball(tarball, ref, changes, platform=f"linux/{arch}" if arch else None)
