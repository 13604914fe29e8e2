"""The lock's text: requirement entries with their hashes, the headers pinwheel writes, its errors."""
from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from typing import Sequence

from packaging.utils import canonicalize_name

ENGINES = ("pip-compile", "uv")
DEFAULT_ENGINE = "uv"  # pip-compile stays selectable (--engine pip-compile): same pins, same hashes
EXPECT_SCHEMA = 1

INPUTS_HEADER = "# pinwheel-inputs: "
ENGINE_HEADER = "# pinwheel-engine: "
# sha256 of requirements.txt without this line: an edit after `lock` (a hash changed the same way in a slice
# and here, which every derived file then agrees with) is a difference the host finds, not only the installer.
RESOLUTION_HEADER = "# pinwheel-resolution: "


class LockError(Exception):
    """The lock could not be made or read: a resolver failure, an inconsistency."""


class LockUnavailable(LockError):
    """The lock cannot be made here (missing extra index, wrong interpreter, no engine)."""


class StaleLockHashes(LockError):
    """The resolver locked hashes the index no longer lists: it answered from a cached page, older than a file
    replaced in place (an index that lets a version be uploaded again). Locking with a refresh mends it."""


_REQ_LINE = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)(?:\[[^\]]*\])?\s*===?\s*"
    r"(?P<version>[^\s;\\]+)[^\\]*?(?P<cont>\\)?\s*$"
)
_HASH_LINE = re.compile(r"^\s+--hash=(?P<hash>[a-z0-9]+:[0-9a-fA-F]+)\s*(?P<cont>\\)?\s*$")
# Option lines a resolver may write; they never stay in a lock.
OPTION_LINE = re.compile(r"^\s*(-i\s|--index-url|--extra-index-url|-f\s|--find-links|--trusted-host|--no-index)")


@dataclass(frozen=True)
class LockedPackage:
    """One pinned distribution and its hashes, as written in the lock."""

    name: str
    version: str
    hashes: tuple[str, ...]  # "sha256:<hex>", in file order
    text: str  # the requirement line and its --hash lines, exactly as in the files

    @property
    def pin(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class Entry:
    package: LockedPackage
    start: int  # line index of the requirement line
    end: int  # one past the last line of the block (hash and annotation lines)


def parse_entries(lines: Sequence[str], where: str) -> list[Entry]:
    """Every ``name==version`` block of a requirements file, with its hashes and line span."""
    entries: list[Entry] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _REQ_LINE.match(line)
        if not m or line[:1].isspace():
            i += 1
            continue
        start = i
        block = [line.rstrip()]
        hashes: list[str] = []
        cont = bool(m["cont"])
        i += 1
        while i < len(lines) and lines[i][:1].isspace() and lines[i].strip():
            h = _HASH_LINE.match(lines[i])
            if h and cont:
                hashes.append(h["hash"].lower())
                block.append(lines[i].rstrip())
                cont = bool(h["cont"])
            elif h:
                raise LockError(f"{where}:{i + 1}: --hash line after a line without a continuation")
            i += 1
        name = canonicalize_name(m["name"])
        entries.append(Entry(LockedPackage(name, m["version"], tuple(hashes), "\n".join(block)), start, i))
    return entries


def parse_requirements(text: str, where: str = "requirements") -> dict[str, LockedPackage]:
    """``name==version`` entries with their hashes from a pip-compile/uv style file.

    A text that parses is parsed once per process: a report checks the lock and then reads it, which asked
    for each slice three times and for requirements.txt twice (its hash lines are most of a lock; 38 ms of
    parsing for the 192 packages of a real-size lock). What went wrong is parsed again, to name `where`."""
    try:
        return dict(_parsed_requirements(text))
    except LockError:
        return _parse_requirements(text, where)


@functools.lru_cache(maxsize=64)
def _parsed_requirements(text: str) -> dict[str, LockedPackage]:
    return _parse_requirements(text, "requirements")


def _parse_requirements(text: str, where: str) -> dict[str, LockedPackage]:
    out: dict[str, LockedPackage] = {}
    for e in parse_entries(text.splitlines(), where):
        if e.package.name in out:
            raise LockError(f"{where}: {e.package.name} appears twice")
        out[e.package.name] = e.package
    return out


def entry_text(name: str, version: str, hashes: Sequence[str]) -> str:
    """A requirement line and its --hash lines, as pip-compile writes them."""
    if not hashes:
        return f"{name}=={version}"
    lines = [f"{name}=={version} \\"]
    for i, h in enumerate(hashes):
        lines.append(f"    --hash={h}" + (" \\" if i < len(hashes) - 1 else ""))
    return "\n".join(lines)


def resolution_digest(text: str) -> str:
    """The sha256 of a requirements.txt's text, its own pinwheel-resolution line left out."""
    kept = "".join(line for line in text.splitlines(keepends=True) if not line.startswith(RESOLUTION_HEADER))
    return hashlib.sha256(kept.encode()).hexdigest()


def with_resolution_digest(text: str) -> str:
    """``text`` with its pinwheel-resolution line after the engine header (the digest of the rest)."""
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(ENGINE_HEADER)) + 1
    return "".join(lines[:at] + [f"{RESOLUTION_HEADER}{resolution_digest(text)}\n"] + lines[at:])


def resolution_problem(text: str, where: str) -> str | None:
    """Why a requirements.txt is not the text `lock` wrote (its digest line absent or not its digest), or None."""
    recorded = header_value(text, RESOLUTION_HEADER)
    if recorded is None:
        return f"{where}: no '{RESOLUTION_HEADER.strip()}' header; regenerate it with `build.py lock`"
    found = resolution_digest(text)
    if recorded != found:
        return (f"{where}: edited after `build.py lock` wrote it (its pinwheel-resolution header says "
                f"{recorded[:12]}, its text is {found[:12]}); regenerate it with `build.py lock`")
    return None


def header_value(text: str, prefix: str) -> str | None:
    """The value of a ``# prefix`` line in a file's leading comment block."""
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        if line.startswith(prefix):
            return line[len(prefix):].strip()
    return None

