"""Is a committed lock's every file what `lock` writes from its recorded resolution? No network.

requirements.txt is the recorded resolution: every entry, with its hashes. From it
and the manifest, `lock` writes each slice (the entries of one step, under a header
the Plan decides) and expect.json (pins and fallbacks from the slices, and what the
manifest says). Both are derived here again and compared with what is committed:
a flipped hash, a truncated file, a dropped pin or an edited verify snippet is a
difference that names its file. What the index decided (each --no-deps package's
Requires-Dist in expect.json's ``suppressed`` and ``dropped``) is checked for its
shape and its names only: deriving it needs the index.

Every file is read as a regular file of bounded size (fsutil.read_regular): a
directory or a symlink to a device is an UnreadableFile naming it (exit 2).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from packaging.utils import canonicalize_name

from ..fsutil import read_regular_text
from ..plan import Plan
from ..workspace import LockFiles
from .expect import FROM_THE_INDEX, derived_expect
from .format import LockedPackage, LockError, parse_requirements, resolution_problem
from .slicing import Unit, slice_text, units

MAX_LOCK_FILE_BYTES = 16 * 1024 * 1024  # the shipped cu130 lock's largest file is tens of KiB
_REACHED = re.compile(r"^    # reached from (?P<root>\S.*)$")


def read_lock_file(path: Path) -> str:
    """One lock file's text: a regular file of at most MAX_LOCK_FILE_BYTES, else UnreadableFile."""
    return read_regular_text(path, MAX_LOCK_FILE_BYTES, "lock file")


def lock_problem(plan: Plan, directory: Path) -> str | None:
    """The first way the lock in ``directory`` differs from what `lock` writes from its requirements.txt
    (naming the file), or None when every slice and expect.json are exactly that."""
    full = directory / LockFiles.REQUIREMENTS
    whole = read_lock_file(full)
    try:
        locked = parse_requirements(whole, LockFiles.REQUIREMENTS)
    except LockError as exc:
        return str(exc)
    steps, fallbacks = units(plan)
    placed: dict[str, str] = {}
    in_units: dict[str, list[LockedPackage]] = {}
    for unit in steps + fallbacks:
        text = read_lock_file(directory / unit.file)
        problem = _slice_problem(plan, unit, text, locked, placed)
        if problem:
            return problem
        in_units[unit.file] = list(parse_requirements(text, unit.file).values())
    unplaced = sorted(set(locked) - set(placed))
    if unplaced:
        return f"{LockFiles.REQUIREMENTS}: {', '.join(unplaced)} in no slice; every locked package is in exactly one"
    # Last, so a difference between the files is named first: what is left is an edit every file agrees with.
    return (_expect_problem(plan, read_lock_file(directory / LockFiles.EXPECT), steps, fallbacks, in_units)
            or resolution_problem(whole, LockFiles.REQUIREMENTS))


def _slice_problem(plan: Plan, unit: Unit, text: str, locked: dict[str, LockedPackage],
                   placed: dict[str, str]) -> str | None:
    try:
        entries = parse_requirements(text, unit.file)
    except LockError as exc:
        return str(exc)
    for name, entry in entries.items():
        whole = locked.get(name)
        if whole is None or (whole.version, whole.hashes) != (entry.version, entry.hashes):
            return f"{unit.file}: {entry.pin} is not what {LockFiles.REQUIREMENTS} locks"
        if name in placed:
            return f"{unit.file}: {name} is in {placed[name]} too; every locked package is in exactly one slice"
        placed[name] = unit.file
    reason, last = {}, None
    for line in text.splitlines():  # which package reached each entry: the resolution's graph, as written
        m = _REACHED.match(line)
        if m and last:
            reason[last] = f"via {m['root']}"
        elif line and not line.startswith((" ", "#")):
            last = canonicalize_name(re.split(r"[=\s\[;]", line, 1)[0])
    want = slice_text(plan, unit, [locked[n] for n in entries], reason)
    if want != text:
        line = next((i for i, (a, b) in enumerate(zip(want.splitlines(), text.splitlines()), 1) if a != b),
                    min(len(want.splitlines()), len(text.splitlines())) + 1)
        return f"{unit.file}: line {line} is not what `lock` writes from {LockFiles.REQUIREMENTS}"
    return None


def _expect_problem(plan: Plan, text: str, steps: list[Unit], fallbacks: list[Unit],
                    in_units: dict[str, list[LockedPackage]]) -> str | None:
    where = LockFiles.EXPECT
    try:
        committed = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return f"{where}: not JSON ({str(exc).splitlines()[0][:80]}): truncated or edited"
    if not isinstance(committed, dict):
        return f"{where}: not a JSON object"
    pins = {p.name: p.version for u in steps for p in in_units[u.file]}
    conditional = {p.name: p.version for u in fallbacks for p in in_units[u.file]}
    derived = derived_expect(plan, pins, conditional)
    for key in sorted(set(derived) | set(committed)):
        if key in FROM_THE_INDEX:
            continue
        if key not in derived:
            return f"{where}: {key!r} is not a key `lock` writes for this manifest"
        if committed.get(key) != derived[key]:
            return f"{where}: {key} is not what the manifest and the lock's slices say ({_first_difference(derived[key], committed.get(key))})"
    problem = _index_keys_problem(plan, committed, steps + fallbacks)
    if problem:
        return f"{where}: {problem}"
    if text != json.dumps(committed, indent=2, sort_keys=True) + "\n":
        return f"{where}: not written as `lock` writes it (edited by hand?)"
    return None


def _index_keys_problem(plan: Plan, committed: dict, all_units: list[Unit]) -> str | None:
    no_deps = {p.name: p for u in all_units for p in u.roots if p.no_deps}
    excluded = {p.name for p in plan.packages() if getattr(p, "exclude", ())}
    suppressed = committed.get("suppressed")
    if not isinstance(suppressed, dict) or not all(isinstance(v, list) and all(isinstance(r, str) for r in v)
                                                   for v in suppressed.values()):
        return "suppressed is not {package: [requirement]}"
    if not set(no_deps) <= set(suppressed) <= set(no_deps) | excluded:
        return f"suppressed names {sorted(suppressed)}, where the manifest's --no-deps packages are {sorted(no_deps)}"
    dropped = committed.get("dropped", {})
    if not isinstance(dropped, dict) or not set(dropped) <= set(no_deps):
        return "dropped names packages the manifest does not install with --no-deps"
    for name, entry in dropped.items():
        allowed = {a.name: a.why for a in no_deps[name].allow_missing}
        if not isinstance(entry, dict) or set(entry) != {"requires", "allow_missing"} \
                or not isinstance(entry["requires"], list) or entry["allow_missing"] != allowed:
            return f"dropped.{name} is not what the manifest allows missing ({allowed})"
    return None


def _first_difference(want, found) -> str:
    if isinstance(want, dict) and isinstance(found, dict):
        for k in sorted(set(want) | set(found)):
            if k not in found:
                return f"{k} is missing"
            if k not in want:
                return f"{k} is extra"
            if want[k] != found[k]:
                return f"{k}: {_first_difference(want[k], found[k])}"
    return f"expected {json.dumps(want)[:120]}, found {json.dumps(found)[:120]}"
