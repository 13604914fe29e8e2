"""Reusing earlier passing results (the build's invariant, --cache-dir).

`pip check` and the import check are the invariant's slow part, and a rebuild after one lock line
changed mostly re-checks what did not change. A passing result is stored under a key over everything
its answer depends on, and reused only while every one of those inputs is provably the same; anything
else runs the check again. Stat, not content: torch alone is GBs. Size, mtime and ctime together: an
install writes new files, so new times, and the kernel sets ctime on any write, which no installer can
preserve.
"""
from __future__ import annotations

import csv
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

from . import children, payload, sites

FRESH_CHECKS_ENV = "PINWHEEL_FRESH_CHECKS"  # "1": reuse nothing (`build.py build --fresh-checks`)
CACHE_SCHEMA = 1
CACHE_KEEP = 32  # stored results per check kind; the oldest beyond that are removed
_HOST_ONLY = ("/proc/", "/sys/", "/dev/")  # no files: the host they describe is in the key (os.uname)
FINDABLE_TIMEOUT_S = 120  # looking for the absent names again: as long as one module's import alone


def sha(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=repr).encode()).hexdigest()


def _stat(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _listing(path: str):
    """The digest the import process records for a directory it listed (children.imports: Recorder.names)."""
    try:
        return hashlib.sha256(json.dumps(sorted(os.listdir(path))).encode()).hexdigest()
    except OSError:
        return None


def interpreter() -> dict:
    """What an import or a requirement marker can see of the interpreter and the host."""
    uname = os.uname()  # less the node name: like HOSTNAME, it names the container, new on every run
    return {"executable": sys.executable, "version": sys.version, "flags": list(sys.flags),
            "uname": [uname.sysname, uname.release, uname.version, uname.machine],
            "platform": platform.platform(), "cwd": os.getcwd(), "sites": list(sites.SITES),
            "environ": sorted((k, v) for k, v in os.environ.items() if k not in (FRESH_CHECKS_ENV, "HOSTNAME"))}


def _metadata_dirs() -> list:
    """Every dist-info/egg-info directory importlib.metadata sees, in its order (None where one is not a path)."""
    return [str(getattr(dist, "_path", "")) or None for dist in importlib.metadata.distributions()]


def _read_bytes(path: str, name: str) -> bytes | None:
    try:
        with open(os.path.join(path, name), "rb") as fh:
            return fh.read()
    except OSError:
        return None


def metadata_key(files=("METADATA", "PKG-INFO")) -> str | None:
    """sha256 over this payload's own bytes and every distribution's metadata directory name and metadata
    bytes; None when one is not on disk."""
    dirs = _metadata_dirs()
    if None in dirs:
        return None
    h = hashlib.sha256(payload.digest().encode())
    for d in sorted(dirs):
        h.update(d.encode() + b"\0")
        if os.path.isfile(d):  # an egg-info file: the metadata itself
            h.update(_read_bytes(os.path.dirname(d), os.path.basename(d)) or b"\2")
            continue
        for name in files:
            data = _read_bytes(d, name)
            h.update(name.encode() + (b"\1" + data if data is not None else b"\2") + b"\0")
    return h.hexdigest()


class ResultCache:
    """Passing results under --cache-dir: one JSON file per check and key, written atomically."""

    def __init__(self, root: str, fresh: bool):
        self.root, self.fresh = root, fresh

    def _path(self, kind: str, key: str) -> str:
        return os.path.join(self.root, f"{kind}-{key}.json")

    def load(self, kind: str, key: str):
        if self.fresh:
            return None
        try:
            with open(self._path(kind, key), encoding="utf-8") as fh:
                entry = json.load(fh)
        except (OSError, ValueError):
            return None
        return entry if isinstance(entry, dict) and entry.get("schema") == CACHE_SCHEMA and entry.get("key") == key \
            else None

    def store(self, kind: str, key: str, entry: dict) -> str | None:
        """Write the entry (temp file + rename); the reason it was not stored, or None."""
        entry = {**entry, "schema": CACHE_SCHEMA, "key": key,
                 "passed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        try:
            os.makedirs(self.root, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=f".{kind}-", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(entry, fh)
            os.replace(tmp, self._path(kind, key))
            old = sorted((e for e in os.scandir(self.root) if e.name.startswith(kind + "-")),
                         key=lambda e: e.stat().st_mtime_ns)
            for e in old[:-CACHE_KEEP]:
                os.unlink(e.path)
        except OSError as exc:
            return f"not stored: {exc}"
        return None


class _Owners:
    """Which distribution (its metadata directory) lists a file in its RECORD."""

    def __init__(self):
        self.by_file: dict = {}
        self.record_of: dict = {}
        for d in _metadata_dirs():
            if d is None or not d.endswith(".dist-info"):
                continue
            files = _record_files(d)
            if files is None:
                continue
            self.record_of[d] = files
            for f in files:
                self.by_file.setdefault(f, d)


def _record_files(dist_info: str) -> list | None:
    """The absolute paths a dist-info's RECORD lists, or None without a RECORD."""
    data = _read_bytes(dist_info, "RECORD")
    if data is None:
        return None
    base, join, norm = os.path.dirname(dist_info), os.path.join, os.path.normpath
    lines = data.decode("utf-8", "replace").splitlines()
    if any('"' in line for line in lines):  # a quoted path (a comma in it): the csv module's reading
        return [norm(join(base, row[0])) for row in csv.reader(lines) if row and row[0]]
    return [norm(join(base, line.rsplit(",", 2)[0])) for line in lines if line.rsplit(",", 2)[0]]


def distribution_fingerprint(dist_info: str) -> str | None:
    """sha256 over a distribution's RECORD bytes and (path, size, mtime, ctime) of each file it lists."""
    data = _read_bytes(dist_info, "RECORD")
    if data is None:
        return None
    return sha([data.decode("utf-8", "replace"), [(f, _stat(f)) for f in _record_files(dist_info)]])


def import_inputs(seen: dict) -> dict:
    """What the imports read (the import processes' records), fingerprinted: each distribution owning a file
    they read, every other file they read by its stat when first read, every directory they listed by its
    names, the .pth files of their sys.path, and the names no finder found."""
    owners = _Owners()
    dists, files = set(), {}
    for f, state in seen["read"].items():
        if f.startswith(_HOST_ONLY):
            continue
        owner = owners.by_file.get(os.path.normpath(f))
        if owner is not None:
            dists.add(owner)
        else:
            files[f] = state
    return {"distributions": {d: distribution_fingerprint(d) for d in sorted(dists)},
            "files": dict(sorted(files.items())),
            "directories": {d: h for d, h in sorted(seen["listed"].items()) if not d.startswith(_HOST_ONLY)},
            "pth": _pth_files(seen["sys_path"]), "absent": seen["absent"], "sys_path": seen["sys_path"]}


def _pth_files(sys_path: list) -> dict:
    """The .pth files site ran before any import (path -> stat)."""
    out = {}
    for d in sys_path:
        try:
            names = os.listdir(d) if d else []
        except OSError:
            continue
        out.update((os.path.join(d, n), _stat(os.path.join(d, n))) for n in sorted(names) if n.endswith(".pth"))
    return out


def unchanged_since(stored: dict) -> str | None:
    """None when every input recorded with a passing import result is the same now; else what changed."""
    for d, fp in stored["distributions"].items():
        if distribution_fingerprint(d) != fp:
            return f"distribution {os.path.basename(d)} changed"
    for f, st in stored["files"].items():
        if _stat(f) != st:
            return f"file {f} changed"
    for d, listing in stored["directories"].items():
        if _listing(d) != listing:
            return f"directory {d} changed"
    if _pth_files(stored["sys_path"]) != stored["pth"]:
        return ".pth files changed"
    argv, env = children.command("findable", PYTHONDONTWRITEBYTECODE="1")
    try:
        proc = subprocess.run(argv, input=json.dumps(stored["absent"]), capture_output=True, text=True,
                              timeout=FINDABLE_TIMEOUT_S, env=env)
        now = json.loads(proc.stdout)
    except (subprocess.TimeoutExpired, ValueError) as exc:
        return f"cannot look for the absent names: {exc}"
    if now["found"]:
        return f"{', '.join(now['found'])} can be imported now"
    if now["sys_path"] != stored["sys_path"]:
        return "sys.path changed"
    return None
