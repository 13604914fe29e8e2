"""Reading a committed lock: its files as a typed Lock, and what it installs, step by step.

``lock_installs`` is the one answer to "what does the lock install": the
report, bump and build all ask it.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from ..fsutil import UnreadableFile, read_regular
from ..plan import Plan
from ..workspace import LockFiles
from .verify import MAX_LOCK_FILE_BYTES, read_lock_file
from .format import DEFAULT_ENGINE, ENGINE_HEADER, INPUTS_HEADER, LockedPackage, LockError, header_value, parse_requirements


@dataclass(frozen=True)
class LockSlice:
    """One file the Dockerfile installs with --no-deps --require-hashes."""

    file: str
    step: str
    index: int
    active: bool
    fallback_for: str | None
    packages: tuple[LockedPackage, ...]

    @property
    def versions(self) -> dict[str, str]:
        return {p.name: p.version for p in self.packages}


@dataclass(frozen=True)
class Lock:
    """A variant's lock as committed: read it with :func:`read_lock`."""

    dir: Path
    variant: str
    engine: str
    inputs_digest: str
    packages: dict[str, LockedPackage]  # everything in requirements.txt
    slices: tuple[LockSlice, ...]  # one per step that installs from the index, in step order
    fallbacks: tuple[LockSlice, ...]  # installed only when their local wheel is missing
    expect: dict

    @property
    def versions(self) -> dict[str, str]:
        """name -> version of every package in the lock, fallbacks included."""
        return {n: p.version for n, p in self.packages.items()}


def lock_sha256(directory: Path | str) -> str:
    """Digest over every file of a variant's lock dir, in sorted order (names and contents)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise LockError(f"{directory} is not a lock directory")
    # Images are labelled with it (io.pinwheel.lock.sha256).
    h = hashlib.sha256()
    for path in LockFiles.of_platform(directory):  # not the other platforms' lock directories inside it
        h.update(path.relative_to(directory).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(read_regular(path, MAX_LOCK_FILE_BYTES, "lock file")).digest())
    return h.hexdigest()


# The names LockFiles.step and LockFiles.fallback write, read back.
_SLICE_FILE = re.compile(r"^(?P<index>\d{2,})-(?P<step>[a-z0-9][a-z0-9-]*)\.txt$")
_FALLBACK_FILE = re.compile(r"^(?P<index>\d{2,})-(?P<step>[a-z0-9][a-z0-9-]*)\.fallback-(?P<pkg>[a-z0-9][a-z0-9._-]*)\.txt$")


def read_lock(directory: Path | str) -> Lock:
    """Read a variant's committed lock dir into a typed Lock (no network)."""
    directory = Path(directory)
    full = directory / LockFiles.REQUIREMENTS
    text = read_lock_file(full)
    digest = header_value(text, INPUTS_HEADER)
    engine = header_value(text, ENGINE_HEADER) or DEFAULT_ENGINE
    if not digest:
        raise LockError(f"{full}: no '{INPUTS_HEADER.strip()}' header; regenerate it with `build.py lock`")
    packages = parse_requirements(text, str(full))
    slices: list[LockSlice] = []
    fallbacks: list[LockSlice] = []
    for path in sorted(directory.glob("*.txt")):
        fb = _FALLBACK_FILE.match(path.name)
        sm = _SLICE_FILE.match(path.name)
        if not fb and not sm:
            continue
        m = fb or sm
        assert m is not None
        body = read_lock_file(path)
        pkgs = parse_requirements(body, str(path))
        for name, p in pkgs.items():
            whole = packages.get(name)
            if whole is None or whole.version != p.version or whole.hashes != p.hashes:
                raise LockError(f"{path}: {p.pin} does not match {LockFiles.REQUIREMENTS}")
        active = "# gated off" not in body.lower()
        item = LockSlice(path.name, m["step"], int(m["index"]), active, fb["pkg"] if fb else None, tuple(pkgs.values()))
        (fallbacks if fb else slices).append(item)
    try:
        expect = json.loads(read_lock_file(directory / LockFiles.EXPECT))
    except UnreadableFile:
        raise
    except (OSError, ValueError, RecursionError) as exc:
        raise LockError(f"{directory / LockFiles.EXPECT}: cannot read ({exc})") from None
    variant = expect.get("variant") if isinstance(expect, dict) else None
    return Lock(
        dir=directory,
        variant=variant or directory.name,
        engine=engine,
        inputs_digest=digest,
        packages=packages,
        slices=tuple(slices),
        fallbacks=tuple(fallbacks),
        expect=expect,
    )



def missing_local_wheels(plan: Plan, wheels_dir: Path) -> set[str]:
    """The active local packages of a Plan that no file in ``wheels_dir`` matches."""
    return {p.name for p in plan.packages() if p.local and not plan.local_wheels(wheels_dir, p.local.glob)}


def lock_installs(plan: Plan, directory: Path | str, wheels_dir: Path | None = None) -> dict[str, dict[str, str]] | None:
    """What the committed lock installs, step by step: step name -> {package: version}; None without a lock.

    Each active step's slice and, for each local wheel missing from ``wheels_dir``,
    the fallback file the image installs in its place. Without ``wheels_dir`` every
    local wheel counts as present: the image that expect.json's pins describe.
    """
    directory = Path(directory)
    if not (directory / LockFiles.REQUIREMENTS).exists() and not (directory / LockFiles.REQUIREMENTS).is_symlink():
        return None
    lock = read_lock(directory)
    missing = missing_local_wheels(plan, wheels_dir) if wheels_dir is not None else set()
    by_step: dict[str, dict[str, str]] = {s.name: {} for s in plan.steps}
    for piece in lock.slices:
        if piece.active:
            by_step.setdefault(piece.step, {}).update(piece.versions)
    for piece in lock.fallbacks:
        if piece.fallback_for and canonicalize_name(piece.fallback_for) in missing:
            by_step.setdefault(piece.step, {}).update(piece.versions)
    return by_step


def locked_versions(plan: Plan, directory: Path | str) -> dict[str, str]:
    """name -> version of everything the lock installs when every local wheel is present ({} without a lock)."""
    by_step = lock_installs(plan, directory) or {}
    return {name: version for versions in by_step.values() for name, version in versions.items()}
