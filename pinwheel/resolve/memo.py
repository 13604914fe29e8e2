"""Resolve results remembered on disk, valid while the index cache they were computed from is unchanged.

Memos live under the index cache (``<index cache>/memo/<key>.json``); the key
holds everything the result depends on, and each entry records a digest of the
cached pages and metadata, so any refreshed page or new metadata recomputes.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

from ..fsutil import atomic_write, files_written
from ..plan import Clash, Edge, Hazard, Installed, Plan, Removal, Unjudged
from ..steps import kind_of
from .resolver import resolve


def _cache_state(cache_dir: Path) -> str:
    """A digest of every cached index page and metadata file: any change invalidates memos."""
    digest = hashlib.sha256()
    for sub in ("pages", "metadata"):
        for dirpath, files in _walk(os.path.join(cache_dir, sub)):
            digest.update("".join(f"{dirpath}/{e.name}:{st.st_size}:{st.st_mtime_ns}\n"
                                  for e in files for st in (e.stat(),)).encode())
    return digest.hexdigest()


class CacheState:
    """The state of one index cache (_cache_state) for one command: walked when first asked, and again only
    after this process has written a file since. The index client writes pages and METADATA through
    fsutil.atomic_open, so its writes are seen; another process's write after the walk is seen by the next
    command, as it would be had it come a moment later."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir
        self._digest: str | None = None
        self._walked_at = -1  # files_written() when the digest was taken

    def digest(self) -> str:
        if self._digest is None or self._walked_at != files_written():
            self._walked_at = files_written()
            self._digest = _cache_state(self.cache_dir)
        return self._digest

    def wrote_memo(self) -> None:
        """A memo file (not a page or METADATA) was just written: where it is the only write since the walk,
        the digest stays current."""
        if self._digest is not None and self._walked_at == files_written() - 1:
            self._walked_at += 1


def _walk(top: str) -> list[tuple[str, list[os.DirEntry]]]:
    """(directory, its entries that are not directories, by name) under top, by directory path: what
    sorted(os.walk(top)) lists, read with one scandir per directory (os.walk's lists cost a stat more per
    file)."""
    found, todo = [], [top]
    while todo:
        d = todo.pop()
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except OSError:  # as os.walk: an unreadable directory is passed by
            continue
        for e in entries:
            if e.is_dir() and not e.is_symlink():
                todo.append(e.path)
        found.append((d, sorted((e for e in entries if not e.is_dir()), key=lambda e: e.name)))
    return sorted(found, key=lambda x: x[0])


def wheels_state(plan: Plan, wheels_dir: Path | None) -> list[tuple[str, int, int]]:
    """(name, size, mtime) of each local wheel on the host that the Plan may install: part of memo keys."""
    if not wheels_dir or not wheels_dir.is_dir():
        return []
    globs = [p.local.glob for p in plan.packages(active_only=False) if p.local]
    globs += [d.local.glob for step in plan.steps for d in kind_of(step).effect(step).direct
              if d.local is not None]  # a source step's prebuilt wheel, which the resolver prefers to the build
    out = []
    for glob in globs:
        for w in sorted(wheels_dir.glob(glob)):
            st = w.stat()
            out.append((w.name, st.st_size, st.st_mtime_ns))
    return out


MEMO_VERSION = 5


def source_memo_key(source) -> object:
    """What names an index source in a memo key: its own memo_key (index URLs and their order), else its URL."""
    return getattr(source, "memo_key", None) or getattr(source, "index_url", None)


# Every memo key holds every input of its answer (tests/resolve/test_memo_keys.py changes each one alone).

def resolve_memo_key(plan: Plan, locked: dict[str, dict[str, str]] | None, wheels: list, source) -> tuple:
    """resolve()'s inputs: the Plan (its platform target included), the lock, the local wheels, the index."""
    return ("resolve", plan, sorted((locked or {}).items()), wheels, source_memo_key(source))


def torch_abi_memo_key(resolved: Plan, wheels: list, source, default_source, offline: bool, classifier: str) -> tuple:
    """reports.report.torch_abi()'s inputs: the whole resolved Plan (which wheels, for which platform target:
    an arm64 answer names aarch64 wheels), the local wheels, both indexes it reads, --offline, and the ELF
    classifier's version."""
    return ("torch_abi", resolved, wheels, source_memo_key(source), source_memo_key(default_source), offline,
            classifier)


def memoized(cache_dir: Path, key_material: object, compute, *, keep=lambda value: True, refresh: bool = False,
             state: CacheState | None = None):
    """compute(), remembered on disk as JSON under a key, valid while the metadata cache is unchanged.

    The stored state of the whole metadata cache must match, so a refreshed page
    or new metadata always recomputes. A value that `keep` rejects (a failed or
    partial result) is returned but never stored; `refresh` skips the lookup and
    rewrites the entry. `compute` returns JSON data. A command that asks for several
    memos passes one `state`, so the cache is walked once while nothing is written.
    """
    state = state if state is not None else CacheState(cache_dir)
    key = hashlib.sha256(repr((key_material, MEMO_VERSION)).encode()).hexdigest()
    memo = cache_dir / "memo" / f"{key}.json"
    if not refresh:
        try:
            stored = json.loads(memo.read_text())
            if stored.get("state") == state.digest():
                return stored["value"]
        except (OSError, ValueError, AttributeError):  # absent, or from another version: recompute
            pass
    value = compute()
    if keep(value):
        atomic_write(memo, json.dumps({"state": state.digest(), "value": value}).encode())
        state.wrote_memo()
    return value


_RESOLVED = {"installed": Installed, "edges": Edge, "hazards": Hazard, "unlocked_hazards": Hazard,
             "replacements": Hazard, "removals": Removal, "clashes": Clash, "unjudged": Unjudged}


def record_fields(x) -> dict:
    """A resolved record's fields: each is a string, a number, None or a tuple of strings (what asdict gives,
    without its deep copy of every value)."""
    return {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}


def _resolved_json(plan: Plan) -> dict:
    return {"locked": plan.resolution.locked, **{f: [record_fields(x) for x in getattr(plan.resolution, f)] for f in _RESOLVED}}


def _resolved_from_json(plan: Plan, data: dict) -> Plan:
    def build(cls, d: dict):
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})

    return plan.with_resolution(locked=data["locked"],
                                **{f: tuple(build(cls, d) for d in data[f]) for f, cls in _RESOLVED.items()})


def resolve_memoized(plan: Plan, source, cache_dir: Path, wheels_dir: Path | None = None,
                     locked: dict[str, dict[str, str]] | None = None, refresh: bool = False,
                     state: CacheState | None = None) -> Plan:
    """resolve(), remembered for identical Plan, lock, local wheels and index (see memoized).

    Only a fully judged result is remembered: a run that could not read the index
    is computed again next time.
    """
    key = resolve_memo_key(plan, locked, wheels_state(plan, wheels_dir), source)
    data = memoized(cache_dir, key, lambda: _resolved_json(resolve(plan, source, wheels_dir, locked)),
                    keep=lambda d: not d["unjudged"] and not any(e["verdict"] == "unchecked" for e in d["edges"]),
                    refresh=refresh, state=state)
    return _resolved_from_json(plan, data)
