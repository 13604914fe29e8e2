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

from ..fsutil import atomic_write
from ..plan import Clash, Edge, Hazard, Installed, Plan, Removal, Unjudged
from .resolver import resolve


def _cache_state(cache_dir: Path) -> str:
    """A digest of every cached index page and metadata file: any change invalidates memos."""
    digest = hashlib.sha256()
    for sub in ("pages", "metadata"):
        for dirpath, files in _walk(os.path.join(cache_dir, sub)):
            digest.update("".join(f"{dirpath}/{e.name}:{st.st_size}:{st.st_mtime_ns}\n"
                                  for e in files for st in (e.stat(),)).encode())
    return digest.hexdigest()


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
    out = []
    for p in plan.packages(active_only=False):
        if p.local:
            for w in sorted(wheels_dir.glob(p.local.glob)):
                st = w.stat()
                out.append((w.name, st.st_size, st.st_mtime_ns))
    return out


MEMO_VERSION = 4


def memoized(cache_dir: Path, key_material: object, compute, *, keep=lambda value: True, refresh: bool = False):
    """compute(), remembered on disk as JSON under a key, valid while the metadata cache is unchanged.

    The stored state of the whole metadata cache must match, so a refreshed page
    or new metadata always recomputes. A value that `keep` rejects (a failed or
    partial result) is returned but never stored; `refresh` skips the lookup and
    rewrites the entry. `compute` returns JSON data.
    """
    key = hashlib.sha256(repr((key_material, MEMO_VERSION)).encode()).hexdigest()
    memo = cache_dir / "memo" / f"{key}.json"
    if not refresh:
        try:
            stored = json.loads(memo.read_text())
            if stored.get("state") == _cache_state(cache_dir):
                return stored["value"]
        except (OSError, ValueError, AttributeError):  # absent, or from another version: recompute
            pass
    value = compute()
    if keep(value):
        atomic_write(memo, json.dumps({"state": _cache_state(cache_dir), "value": value}).encode())
    return value


_RESOLVED = {"installed": Installed, "edges": Edge, "hazards": Hazard, "unlocked_hazards": Hazard,
             "replacements": Hazard, "removals": Removal, "clashes": Clash, "unjudged": Unjudged}


def record_fields(x) -> dict:
    """A resolved record's fields: each is a string, a number, None or a tuple of strings (what asdict gives,
    without its deep copy of every value)."""
    return {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}


def _resolved_json(plan: Plan) -> dict:
    return {"locked": plan.locked, **{f: [record_fields(x) for x in getattr(plan, f)] for f in _RESOLVED}}


def _resolved_from_json(plan: Plan, data: dict) -> Plan:
    def build(cls, d: dict):
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})

    return dataclasses.replace(plan, locked=data["locked"],
                               **{f: tuple(build(cls, d) for d in data[f]) for f, cls in _RESOLVED.items()})


def resolve_memoized(plan: Plan, source, cache_dir: Path, wheels_dir: Path | None = None,
                     locked: dict[str, dict[str, str]] | None = None, refresh: bool = False) -> Plan:
    """resolve(), remembered for identical Plan, lock, local wheels and index (see memoized).

    Only a fully judged result is remembered: a run that could not read the index
    is computed again next time.
    """
    source_key = getattr(source, "memo_key", None) or getattr(source, "index_url", None)
    key = ("resolve", plan, sorted((locked or {}).items()), wheels_state(plan, wheels_dir), source_key)
    data = memoized(cache_dir, key, lambda: _resolved_json(resolve(plan, source, wheels_dir, locked)),
                    keep=lambda d: not d["unjudged"] and not any(e["verdict"] == "unchecked" for e in d["edges"]),
                    refresh=refresh)
    return _resolved_from_json(plan, data)
