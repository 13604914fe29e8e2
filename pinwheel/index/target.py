"""The target an image is built for: its wheel tags and its PEP 508 marker environment.

Markers and wheel tags are evaluated for the target (a CPython version and a
platform tag), never for the host that runs pinwheel.
"""
from __future__ import annotations

import functools
import re
from typing import Iterable, Sequence

from packaging.tags import Tag, compatible_tags, cpython_tags, mac_platforms


def python_tuple(python_version: str | Sequence[int]) -> tuple[int, int]:
    """(major, minor) of "3.12", "312", "cp312" or (3, 12)."""
    if isinstance(python_version, str):
        text = python_version.strip()
        text = re.sub(r"^(cp|py)", "", text)
        if "." not in text and len(text) >= 2:  # "312"
            text = f"{text[0]}.{text[1:]}"
        parts = text.split(".")
        try:
            return int(parts[0]), int(parts[1])
        except (IndexError, ValueError):
            raise ValueError(f"python version must look like '3.12', got {python_version!r}") from None
    major, minor = tuple(python_version)[:2]
    return int(major), int(minor)


_LEGACY_MANYLINUX = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}
_LEGACY_ARCHS = {
    (2, 17): {"x86_64", "i686", "aarch64", "armv7l", "ppc64", "ppc64le", "s390x"},
    (2, 12): {"x86_64", "i686"},
    (2, 5): {"x86_64", "i686"},
}


def expand_platforms(platforms: Iterable[str]) -> list[str]:
    """Expand target platforms to every platform tag they can install, most specific first.

    ``manylinux_2_28_x86_64`` also accepts older glibc tags (down to 2.5) and the
    legacy aliases; ``musllinux_1_2`` accepts 1.1 and 1.0; ``macosx_14_0_arm64``
    accepts older macOS and universal2.  Other tags are kept as given.
    """
    out: list[str] = []

    def add(tag: str) -> None:
        if tag not in out:
            out.append(tag)

    for plat in platforms:
        legacy = re.fullmatch(r"(manylinux2014|manylinux2010|manylinux1)_(.+)", plat)
        m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(.+)", plat)
        if legacy:
            major, minor = _LEGACY_MANYLINUX[legacy.group(1)]
            arch = legacy.group(2)
        elif m:
            major, minor, arch = int(m.group(1)), int(m.group(2)), m.group(3)
        else:
            major = minor = -1
            arch = ""
        if major >= 2:
            lowest = 5 if major == 2 else 0
            for mi in range(minor, lowest - 1, -1):
                add(f"manylinux_{major}_{mi}_{arch}")
                if major == 2 and arch in _LEGACY_ARCHS.get((2, mi), ()):
                    alias = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}[mi]
                    add(f"{alias}_{arch}")
            continue
        mm = re.fullmatch(r"musllinux_(\d+)_(\d+)_(.+)", plat)
        if mm:
            major, minor, arch = int(mm.group(1)), int(mm.group(2)), mm.group(3)
            for mi in range(minor, -1, -1):
                add(f"musllinux_{major}_{mi}_{arch}")
            continue
        mac = re.fullmatch(r"macosx_(\d+)_(\d+)_(.+)", plat)
        if mac:
            for tag in mac_platforms((int(mac.group(1)), int(mac.group(2))), mac.group(3)):
                add(tag)
            continue
        add(plat)
    return out


def target_platforms(platform: str) -> list[str]:
    """The platform tags a target's pip accepts, most specific first.

    A manylinux target also takes plain ``linux_<arch>`` wheels (local builds).
    """
    return list(_target_platforms(platform))


@functools.lru_cache(maxsize=64)
def _target_platforms(platform: str) -> tuple[str, ...]:  # asked for on every wheel lookup
    arch = platform.split("_", 3)[-1] if platform.startswith("manylinux_") else ""
    return tuple(expand_platforms([platform]) + ([f"linux_{arch}"] if arch else []))


def target_tags(python_version: str | Sequence[int], platforms: Iterable[str]) -> list[Tag]:
    """Supported tags of a CPython target, most preferred first (independent of the host)."""
    return list(_target_tags(str(python_version) if isinstance(python_version, str) else tuple(python_version),
                             tuple(platforms)))


@functools.lru_cache(maxsize=64)
def _target_tags(python_version, platforms: tuple[str, ...]) -> tuple[Tag, ...]:
    major, minor = python_tuple(python_version)
    plats = expand_platforms(platforms)
    interp = f"cp{major}{minor}"
    tags: list[Tag] = []
    seen: set[Tag] = set()
    for tag in [
        *cpython_tags((major, minor), abis=[interp], platforms=plats),
        *compatible_tags((major, minor), interpreter=interp, platforms=plats),
    ]:
        if tag not in seen:
            seen.add(tag)
            tags.append(tag)
    return tuple(tags)


def target_environment(python_version: str | Sequence[int], platform: str) -> dict[str, str]:
    """PEP 508 marker environment of a CPython target given by a platform tag.

    ``target_environment("3.12", "manylinux_2_28_x86_64")`` gives Linux/x86_64
    values, whatever the host is.  Pass it to :meth:`DistMetadata.requirements`.
    """
    major, minor = python_tuple(python_version)
    full = python_version if isinstance(python_version, str) and python_version.count(".") == 2 else f"{major}.{minor}.0"
    m = re.fullmatch(r"(manylinux\d*(?:_\d+_\d+)?|musllinux_\d+_\d+|linux|macosx_\d+_\d+|win)_?(.*)", platform)
    family, machine = (m.group(1), m.group(2)) if m else (platform, "")
    if family.startswith(("manylinux", "musllinux", "linux")):
        system, sys_platform, os_name = "Linux", "linux", "posix"
    elif family.startswith("macosx"):
        system, sys_platform, os_name = "Darwin", "darwin", "posix"
    elif family == "win" or platform.startswith("win"):
        system, sys_platform, os_name = "Windows", "win32", "nt"
        machine = {"amd64": "AMD64", "arm64": "ARM64", "32": "x86"}.get(machine, machine or "AMD64")
    else:
        system, sys_platform, os_name = "", platform, ""
    return {
        "implementation_name": "cpython",
        "implementation_version": full,
        "os_name": os_name,
        "platform_machine": machine,
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": system,
        "platform_version": "",
        "python_full_version": full,
        "python_version": f"{major}.{minor}",
        "sys_platform": sys_platform,
    }


# Container platforms (OCI os/arch, Docker's TARGETARCH) and the machine their wheel tags name.
CONTAINER_MACHINES = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}
_PLATFORM_TAG = re.compile(r"^((?:manylinux|musllinux)_\d+_\d+)_([a-z0-9_]+)$")


def platform_machine(platform: str) -> str:
    """The machine a platform tag names: manylinux_2_36_x86_64 -> x86_64."""
    m = _PLATFORM_TAG.fullmatch(platform)
    if not m:
        raise ValueError(f"{platform!r} is not a platform tag like manylinux_2_28_x86_64")
    return m.group(2)


def container_platform(platform: str) -> str:
    """The container platform of a platform tag: manylinux_2_36_aarch64 -> linux/arm64."""
    machine = platform_machine(platform)
    for name, m in CONTAINER_MACHINES.items():
        if m == machine:
            return name
    raise ValueError(f"{platform!r}: no container platform runs {machine}")


def container_arch(platform: str) -> str:
    """Docker's TARGETARCH for a platform tag: amd64 or arm64."""
    return container_platform(platform).split("/", 1)[1]


def platform_for(platform: str, container: str) -> str:
    """The platform tag for another container platform at the same libc level:
    (manylinux_2_36_x86_64, linux/arm64) -> manylinux_2_36_aarch64."""
    if container not in CONTAINER_MACHINES:
        raise ValueError(f"{container!r} is not one of {', '.join(CONTAINER_MACHINES)}")
    m = _PLATFORM_TAG.fullmatch(platform)
    if not m:
        raise ValueError(f"{platform!r} is not a platform tag like manylinux_2_28_x86_64")
    return f"{m.group(1)}_{CONTAINER_MACHINES[container]}"
