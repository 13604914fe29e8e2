"""The import check (the build's invariant, --check-imports) and the import level's own imports.

Every installed distribution's top-level modules (top_level.txt, else its RECORD) are imported on the CPU:
one process for all of them, then each failed or unreached one again alone, each under a timeout. A
failure names the distribution, the module and the error's last line. The import_skip distributions
(manifest `needs: driver`) are left to the import level, which imports them where the driver is.
"""
from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import subprocess
import sys
import time

from . import children
from .cache import import_inputs, interpreter, metadata_key, sha, unchanged_since
from .children import imports as child
from .dists import foreign_extensions, top_level_modules
from .records import stage, timed_import
from .requirements import normalize

IMPORT_TIMEOUT_S = 300  # the one process over every module; a module alone gets IMPORT_ALONE_TIMEOUT_S
IMPORT_ALONE_TIMEOUT_S = 120


def _import_batch(modules: list, timeout: float, record: str | None = None) -> tuple:
    """({module: (ok, error)}, the module it was importing when the process died or timed out, or None).

    With `record`, the process writes there what its imports read (see import_inputs)."""
    results, current = {}, None
    try:
        argv, env = children.command("imports", PYTHONDONTWRITEBYTECODE="1",
                                     **({child.RECORD_ENV: record} if record else {}))
        proc = subprocess.run([*argv, *modules], capture_output=True, text=True, timeout=timeout, env=env)
        out, died = proc.stdout, (f"the import process exited {proc.returncode}" if proc.returncode else None)
        tail = (proc.stderr.strip().splitlines() or [""])[-1]
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        died, tail = f"timed out after {timeout:.0f} s", ""
    for line in out.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("started"):
            current = rec["module"]
        else:
            results[rec["module"]] = (rec["ok"], rec.get("error"))
            current = None
    if current is not None:
        results[current] = (False, died + (f": {tail}" if tail else "") if died else "the import process stopped")
    return results, current


def _modules(expect: dict, foreign: list | None = None) -> tuple[dict, list, list]:
    """(module -> the distributions owning it, the import_skip distributions with their modules and why,
    the modules to import); `foreign` gets each distribution's extensions for another interpreter."""
    skip = {normalize(k): v for k, v in expect["import_skip"].items()}
    owners: dict = {}
    skipped = []
    listings: dict = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        mods = top_level_modules(dist)
        other = foreign_extensions(dist, listings) if foreign is not None else []
        if other:
            foreign.append({"distribution": name, "files": other})
        if normalize(name) in skip:
            skipped.append({"distribution": name, "modules": mods, "reason": skip[normalize(name)]})
            continue
        for m in mods:
            owners.setdefault(m, set()).add(name)
    skipped_modules = {m for s in skipped for m in s["modules"]}
    return owners, skipped, sorted(m for m in owners if m not in skipped_modules)


def _stored(cache, modules: list, skipped: list) -> tuple:
    """(key, the stored result to reuse or None, the cache's fields for the stage)."""
    key, cache_fields = None, {"reused": False}
    meta = metadata_key(("METADATA", "PKG-INFO", "entry_points.txt"))
    if meta is None:
        cache_fields["cache"] = "not used: a distribution's metadata is not a directory on disk"
        return key, None, cache_fields
    key = sha({"interpreter": interpreter(), "metadata": meta, "modules": modules, "skipped": skipped})
    entry = cache.load("imports", key)
    try:
        changed = ("--fresh-checks" if cache.fresh else "no passing result under this key") \
            if entry is None else unchanged_since(entry["inputs"])
        reused = {} if changed else {**entry["result"], "cache_key": entry["cache_key"],
                                     "passed_at": entry["passed_at"]}
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        changed = f"the stored result is not readable ({exc!r})"
    if changed is None:
        return key, reused, cache_fields
    cache_fields["fresh_because"] = changed
    return key, None, cache_fields


def _import_all(modules: list, records: list, cache, key) -> tuple[dict, int]:
    """({module: (ok, error)}, processes): one process; where it died, the rest in a new one."""
    results: dict = {}
    processes = 0
    pending = list(modules)
    while pending:
        records.append(_record_path(cache, key))
        got, died_on = _import_batch(pending, IMPORT_TIMEOUT_S, records[-1])
        processes += 1
        results.update(got)
        pending = [m for m in pending if m not in results]
        if died_on is None and pending:  # it ended without reaching them
            for m in pending:
                results[m] = (False, "not reached: the import process ended early")
            pending = []
    return results, processes


def _again_alone(modules: list, results: dict, owners: dict, records: list, cache, key) -> tuple:
    """Each failure again alone, so none hides another: (failures, failed only after the others, processes)."""
    failures, after_others, processes = [], [], 0
    for m in [m for m in modules if not results[m][0]]:
        records.append(_record_path(cache, key))
        alone, _ = _import_batch([m], IMPORT_ALONE_TIMEOUT_S, records[-1])
        processes += 1
        ok, error = alone.get(m, (False, "the import process stopped"))
        if ok:  # it imports on its own: it failed only after the others (listed, not a failure)
            after_others.append({"module": m, "error": results[m][1]})
            results[m] = (True, None)
            continue
        failures.append({"distribution": ", ".join(sorted(owners[m])), "module": m, "error": error})
    return failures, after_others, processes


def run_imports(expect: dict, cache=None) -> dict:
    """Import every installed distribution's top-level modules on the CPU (see the cli module's docstring)."""
    t0 = time.perf_counter()
    foreign: list = []
    owners, skipped, modules = _modules(expect, foreign)
    key, cache_fields = None, {"reused": False}
    if cache is not None:
        key, reused, cache_fields = _stored(cache, modules, skipped)
        if reused is not None:
            return stage("static", "imports", "passed", **reused, processes=0, reused=True,
                         seconds=round(time.perf_counter() - t0, 2))
    records = []
    results, processes = _import_all(modules, records, cache, key)
    failures, after_others, again = _again_alone(modules, results, owners, records, cache, key)
    fields = {"imported": sum(1 for m in modules if results[m][0]), "processes": processes + again,
              "seconds": round(time.perf_counter() - t0, 2), "failed": failures, "skipped": skipped,
              "failed_only_after_others": after_others, "other_interpreter": foreign}
    if failures:
        fields["error"] = "; ".join(f"{f['distribution']}: import {f['module']}: {f['error']}" for f in failures)
    elif key is not None:  # only a passing result is stored
        cache_fields.update(_store_imports(cache, key, records, fields))
    for r in records:
        if r is not None and os.path.exists(r):
            os.unlink(r)
    fields["seconds"] = round(time.perf_counter() - t0, 2)
    return stage("static", "imports", "failed" if failures else "passed", **fields, **cache_fields)


def _record_path(cache, key) -> str | None:
    """Where one import process writes what it read: only when its result may be stored."""
    if key is None:
        return None
    import tempfile

    fd, path = tempfile.mkstemp(prefix="pinwheel-imports-", suffix=".json")
    os.close(fd)
    os.unlink(path)  # the process creates it at its end: a process that died leaves none
    return path


def _store_imports(cache, key: str, records: list, result: dict) -> dict:
    seen = {"read": {}, "listed": {}, "absent": set(), "sys_path": None}
    for r in records:
        try:
            with open(r, encoding="utf-8") as fh:
                one = json.load(fh)
        except (OSError, ValueError):
            return {"cache": "not stored: an import process wrote no record of what it read"}
        if one["opaque"]:
            return {"cache": f"not stored: {'; '.join(one['opaque'])}"}
        if seen["sys_path"] not in (None, one["sys_path"]):
            return {"cache": "not stored: the import processes had different sys.path"}
        seen["sys_path"] = one["sys_path"]
        for what in ("read", "listed"):  # as the first process found it
            for path, state in one[what].items():
                seen[what].setdefault(path, state)
        seen["absent"].update((n, tuple(p) if p is not None else None) for n, p in one["absent"])
    seen["absent"] = sorted(([n, list(p) if p is not None else None] for n, p in seen["absent"]), key=repr)
    inputs = import_inputs(seen)
    cache_key = "sha256:" + sha([key, inputs])
    stored = {k: v for k, v in result.items() if k not in ("seconds", "processes")}
    why = cache.store("imports", key, {"inputs": inputs, "result": stored, "cache_key": cache_key})
    return {"cache": why or "stored", "cache_key": cache_key}


def run_driver_imports(expect: dict) -> list:
    """The import level's own part: the top-level modules of every distribution expect.json's
    import_skip names (manifest `needs: driver`), each imported here, where the driver is. One that is
    not installed (a local wheel whose fallback was installed instead) is SKIPPED."""
    skip = {normalize(k): k for k in expect["import_skip"]}
    found: dict = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name and normalize(name) in skip:
            found.setdefault(normalize(name), dist)
    stages = []
    for key, pkg in sorted(skip.items()):
        dist = found.get(key)
        if dist is None:
            stages.append(stage("import", pkg, "skipped", package=pkg, reason=f"{pkg} is not installed"))
            continue
        for mod in top_level_modules(dist):
            rec = timed_import("import", mod, lambda m=mod: (importlib.import_module(m), {})[1])
            rec.update(package=pkg, version=dist.version)
            stages.append(rec)
        stages.extend(foreign_stage("import", pkg, dist))
    return stages


def foreign_stage(level: str, pkg: str, dist) -> list:
    """One info stage naming the extensions `dist` ships for another interpreter: not imported (nothing
    here can), and said, so that a module the wheel meant to provide never disappears without a word."""
    files = foreign_extensions(dist)
    if not files:
        return []
    return [stage(level, f"{pkg}/other-interpreter", "info", package=pkg, files=files,
                  message=f"{', '.join(files)}: built for another Python than this one "
                         f"({sys.implementation.cache_tag}), so no import here can load it; not imported")]
