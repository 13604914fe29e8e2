"""METADATA on disk, each file under a key its reader verified, with a record of where it came from.

A page's sha256 is only what that index claims. Keying METADATA read by range
by it let one index that claims another file's hash answer for the genuine file
on every index after it. So a file is kept under what was checked::

    metadata/core/<m[:2]>/<m>.METADATA      PEP 658 file whose bytes hash to the page's core-metadata sha256 m
    metadata/wheel/<w[:2]>/<w>.METADATA     read out of a whole download whose bytes hash to w
    metadata/url/<u[:2]>/<u>.METADATA       anything else (a ranged read, an unhashed PEP 658 file): unverified,
                                            keyed by the file's URL and its claimed sha256 together, so that it
                                            answers only for that URL on that index

and each has ``<key>.origin.json`` beside it: the URL, the index, how it was
read, and what was verified. A lookup tries the verified keys first.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path

from ..fsutil import atomic_open, atomic_write
from .errors import redact
from .files import IndexFile
from .metadata import DistMetadata, from_parsed, parse_metadata, parsed_fields
from .parsed import ParsedStore, Stat, file_stat, read_with_stat

_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
VERIFIED_BY = {"core": "the page's core-metadata sha256", "wheel": "the sha256 of the whole wheel"}


def _path(root: Path, kind: str, key: str) -> Path:
    return root / "metadata" / kind / key[:2] / f"{key}.METADATA"


def _hex(value: str | None) -> str | None:
    """A sha256 as a cache key: 64 hex digits, else None (a page's text never becomes a path)."""
    return value.lower() if value and _SHA256.fullmatch(value) else None


def _url_key(f: IndexFile) -> str:
    return hashlib.sha256(f"{f.url}\n{(f.sha256 or '').lower()}".encode()).hexdigest()


class MetadataCache:
    def __init__(self, cache_dir: Path, parsed: ParsedStore) -> None:
        self.cache_dir = cache_dir
        self._parsed = parsed

    def paths(self, f: IndexFile) -> list[Path]:
        """Where f's METADATA may be, verified keys first."""
        found = []
        if _hex(f.metadata_sha256):
            found.append(_path(self.cache_dir, "core", _hex(f.metadata_sha256)))
        if _hex(f.sha256):
            found.append(_path(self.cache_dir, "wheel", _hex(f.sha256)))
        found.append(_path(self.cache_dir, "url", _url_key(f)))
        return found

    def read(self, f: IndexFile) -> DistMetadata | None:
        """f's METADATA from the cache, or None."""
        for path in self.paths(f):
            parsed = self._parsed.metadata(path)
            if parsed is not None:
                meta = from_parsed(parsed, filename=f.filename, url=f.url, sha256=f.sha256, source="cache")
                if meta is not None:
                    return meta
            try:
                raw, stat = read_with_stat(path)
            except FileNotFoundError:
                continue
            meta = parse_metadata(raw, filename=f.filename, url=f.url, sha256=f.sha256, source="cache")
            self._parsed.store_metadata(path, stat, parsed_fields(meta))
            return meta
        return None

    def store(self, f: IndexFile, raw: bytes, source: str, index_url: str) -> tuple[Path, Stat]:
        """Keep raw under the key that was verified for it (see the module's docstring), its origin beside it;
        the path and the size and mtime of the file written."""
        if source == "pep658" and _hex(f.metadata_sha256):
            kind, key = "core", _hex(f.metadata_sha256)
        elif source == "download" and _hex(f.sha256):  # the download's bytes were checked against it
            kind, key = "wheel", _hex(f.sha256)
        else:
            kind, key = "url", _url_key(f)
        path = _path(self.cache_dir, kind, key)
        origin = {"url": redact(f.url), "index_url": redact(index_url), "filename": f.filename,
                  "claimed_sha256": f.sha256, "source": source, "verified_by": VERIFIED_BY.get(kind),
                  "fetched": time.time()}
        atomic_write(path.with_name(f"{key}.origin.json"), json.dumps(origin, indent=1).encode())
        with atomic_open(path) as fh:
            fh.write(raw)
            fh.flush()
            stat = file_stat(os.fstat(fh.fileno()))
        return path, stat

    def remember(self, path: Path, stat: Stat, meta: DistMetadata) -> None:
        """Keep a METADATA document just fetched parsed, for the file store() wrote: the first offline run
        after an online one reads the row, as for a file it parsed itself."""
        self._parsed.store_metadata(path, stat, parsed_fields(meta))


def origin_of(path: Path) -> dict | None:
    """The origin record kept beside a cached METADATA file."""
    try:
        return json.loads(path.with_name(path.name[: -len(".METADATA")] + ".origin.json").read_text())
    except (OSError, ValueError):
        return None
