"""The cached pages and METADATA as parsed, in one sqlite database beside them.

Reading a big project's page means loading megabytes of JSON and building an
object per file; reading METADATA means parsing and validating the whole
document. Both answers are stored here, parsed, so that a later run reads only
the rows it asks for: a page's versions, then the files of one version, and a
wheel's requirements as strings.

Every row is keyed by the raw cache file it was parsed from and by that file's
size and modification time, taken from the open file that was read (a rename
puts a new file in place, so a refreshed page or a rewritten METADATA never
matches an old row). The raw files stay the record: this database is never the
only copy of anything, and a run that cannot open or write it (read-only,
locked by another process, corrupt) reads the raw files instead.
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Sequence

log = logging.getLogger(__name__)

# The database under the index cache.
DATABASE = "parsed.sqlite"
# Bumped when what a row holds changes: rows of another layout are never read.
# 3: a page's version list is one row (page_heads), in ascending version order.
# 4: a METADATA row keeps each requirement parsed (metadata.requirement_parts).
LAYOUT = 4

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS page_versions (path TEXT, size INTEGER, mtime INTEGER, version TEXT, "
    "unyanked TEXT, files TEXT, PRIMARY KEY (path, version))",
    # versions: JSON [[version text, its first unyanked file's version text or null], ...]; one query a page
    "CREATE TABLE IF NOT EXISTS page_heads (path TEXT PRIMARY KEY, size INTEGER, mtime INTEGER, fetched REAL, "
    "versions TEXT)",
    "CREATE TABLE IF NOT EXISTS metadata (path TEXT PRIMARY KEY, size INTEGER, mtime INTEGER, parsed TEXT)",
)

Stat = tuple[int, int]  # (size, mtime_ns) of the raw file a row was parsed from


def file_stat(st: os.stat_result) -> Stat:
    return (st.st_size, st.st_mtime_ns)


def read_with_stat(path: Path) -> tuple[bytes, Stat]:
    """A file's bytes, and the size and mtime of the very file those bytes came from."""
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        return fh.read(), file_stat(st)


def current_stat(path: Path) -> Stat | None:
    try:
        return file_stat(os.stat(path))
    except OSError:
        return None


class ParsedStore:
    """Parsed pages and METADATA of one index cache (``<cache>/parsed.sqlite``), shared by its clients' threads."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = Path(cache_dir)
        self._db: sqlite3.Connection | None = None
        self._broken = False
        self._lock = threading.Lock()
        self._pending: list[tuple[str, Sequence[Any]]] = []
        self._pending_keys: set[str] = set()

    def _key(self, path: Path) -> str:
        return f"{LAYOUT}:{Path(path).relative_to(self.cache_dir).as_posix()}"

    def _conn(self) -> sqlite3.Connection | None:
        if self._db is None and not self._broken:
            try:
                self.cache_dir.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.cache_dir / DATABASE, timeout=1.0, check_same_thread=False,
                                     isolation_level=None)
                for statement in _SCHEMA:
                    db.execute(statement)
                self._db = db
            except (sqlite3.Error, OSError) as exc:
                log.debug("parsed index cache unavailable (%s); reading the raw cache files", exc)
                self._broken = True
        return self._db

    def _query(self, sql: str, args: Sequence[Any]) -> list[tuple] | None:
        """Rows of a read whose first argument is the row's key."""
        if args[0] in self._pending_keys:
            self.flush()
        with self._lock:
            db = self._conn()
            if db is None:
                return None
            try:
                return db.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                log.debug("parsed index cache read failed (%s)", exc)
                return None

    def _write(self, key: str, statements: list[tuple[str, Sequence[Any]]]) -> None:
        """Queue statements on the row ``key``. flush() writes every queued statement in one transaction: at
        exit, or before this store reads a row they touch. One commit per run, not one per page or METADATA (a
        commit waits for the disk: 4 to 13 ms each on a busy one)."""
        with self._lock:
            if self._broken:
                return
            if not self._pending:
                atexit.register(self.flush)
            self._pending.extend(statements)
            self._pending_keys.add(key)

    def flush(self) -> None:
        """Write the queued statements, in one transaction."""
        with self._lock:
            statements, self._pending, self._pending_keys = self._pending, [], set()
            atexit.unregister(self.flush)
            if not statements or (self._db is None and not self.cache_dir.is_dir()):
                return  # nothing queued, or the cache went away meanwhile: nothing to keep
            self._commit(statements)

    def _commit(self, statements: list[tuple[str, Sequence[Any]]]) -> None:
        db = self._conn()
        if db is None:
            return
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                for sql, args in statements:
                    db.execute(sql, args)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:  # another process holds it, or the disk is full: next time
            log.debug("parsed index cache write failed (%s)", exc)

    # -- pages ---------------------------------------------------------------

    def page(self, path: Path) -> tuple[float, dict[str, str | None]] | None:
        """(fetched, {version text: its first unyanked file's version text, or None}) of the page file as it is
        now, or None where no row holds it."""
        stat = current_stat(path)
        if stat is None:
            return None
        head = self._query("SELECT fetched, versions FROM page_heads WHERE path = ? AND size = ? AND mtime = ?",
                           (self._key(path), *stat))
        if not head:
            return None
        fetched, versions = head[0]
        try:
            return fetched, dict(json.loads(versions))
        except (TypeError, ValueError):  # a row that does not read back: parse the raw file
            return None

    def page_files(self, path: Path, version: str) -> list[dict[str, Any]] | None:
        """The file entries of one version of the page file as it is now (as IndexFile.to_json wrote them)."""
        stat = current_stat(path)
        if stat is None:
            return None
        rows = self._query("SELECT files FROM page_versions WHERE path = ? AND size = ? AND mtime = ? AND version = ?",
                           (self._key(path), *stat, version))
        return json.loads(rows[0][0]) if rows else None

    def store_page(self, path: Path, stat: Stat, fetched: float,
                   groups: dict[str, tuple[str | None, list[dict]]]) -> None:
        """Remember a page file read with ``stat``: per version text, its first unyanked file's version text
        (None when all are yanked) and its files; page() gives the versions back in the order of ``groups``."""
        key = self._key(path)
        versions = json.dumps([[version, unyanked] for version, (unyanked, _files) in groups.items()])
        self._write(key, [("DELETE FROM page_versions WHERE path = ?", (key,)),
                     ("INSERT OR REPLACE INTO page_heads VALUES (?, ?, ?, ?, ?)", (key, *stat, fetched, versions))]
                    + [("INSERT INTO page_versions VALUES (?, ?, ?, ?, ?, ?)",
                        (key, *stat, version, unyanked, json.dumps(files)))
                       for version, (unyanked, files) in groups.items()])

    def restat_page(self, path: Path, old: Stat, new: Stat, fetched: float) -> None:
        """The page file read with ``old`` was rewritten as ``new`` with the same files and a new fetch time (the
        index answered 304): its rows, where held, now describe the new file, so the next run reads them and
        does not parse the page again."""
        key = self._key(path)
        self._write(key, [
            ("UPDATE page_heads SET size = ?, mtime = ?, fetched = ? WHERE path = ? AND size = ? AND mtime = ?",
             (*new, fetched, key, *old)),
            ("UPDATE page_versions SET size = ?, mtime = ? WHERE path = ? AND size = ? AND mtime = ?",
             (*new, key, *old))])

    # -- metadata ------------------------------------------------------------

    def metadata(self, path: Path) -> dict[str, Any] | None:
        """The parsed fields of the METADATA file as it is now, or None."""
        stat = current_stat(path)
        if stat is None:
            return None
        rows = self._query("SELECT parsed FROM metadata WHERE path = ? AND size = ? AND mtime = ?",
                           (self._key(path), *stat))
        return json.loads(rows[0][0]) if rows else None

    def store_metadata(self, path: Path, stat: Stat, parsed: dict[str, Any]) -> None:
        key = self._key(path)
        self._write(key, [("INSERT OR REPLACE INTO metadata VALUES (?, ?, ?, ?)", (key, *stat, json.dumps(parsed)))])
