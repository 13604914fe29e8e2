"""The project pages of an index client: asked of the index, cached on disk and in the parsed store.

A mixin of IndexClient (index/client.py), which holds the cache, the mode and the HTTP machinery.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from packaging.utils import canonicalize_name
from packaging.version import Version

from ..fsutil import atomic_open
from . import transfer
from .errors import CacheMiss, IndexUnavailable, PackageNotFound, redact
from .files import IndexFile, json_page_entries, parse_html_page, parse_version
from .page import Page
from .parsed import Stat, file_stat, read_with_stat

if TYPE_CHECKING:
    import requests

log = logging.getLogger(__name__)

ACCEPT = (
    "application/vnd.pypi.simple.v1+json, "
    "application/vnd.pypi.simple.v1+html;q=0.2, "
    "text/html;q=0.01"
)
_ANCHOR = re.compile(rb"<a[\s>]", re.IGNORECASE)  # a page's links, counted before any is parsed

class PageCache:
    """Project pages: the parsed store first (offline or fresh enough), else the cached file or the index."""

    def _page_url(self, name: str) -> str:
        return urljoin(self.index_url, f"{canonicalize_name(name)}/")

    def _page_cache_path(self, name: str) -> Path:
        key = hashlib.sha256(self.index_url.encode()).hexdigest()[:16]
        return self.cache_dir / "pages" / key / f"{canonicalize_name(name)}.json"

    def _read_page_cache(self, name: str) -> dict[str, Any] | None:
        path = self._page_cache_path(name)
        try:
            raw, stat = read_with_stat(path)
            record = json.loads(raw)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable cache file %s: %s", path, exc)
            return None
        record["_stat"] = stat  # which file these bytes came from, for the parsed store
        return record

    def _cached_page(self, cname: str, record: dict[str, Any], remember: bool = True) -> Page:
        """The page a cache record lists, remembered parsed for the next run."""
        stat = record.pop("_stat", None)
        page = Page.of_entries(record["files"])
        if stat is not None and remember:
            self._remember_page(cname, page, stat, float(record.get("fetched", 0)))
        return page

    def _remember_page(self, cname: str, page: Page, stat: Stat, fetched: float) -> None:
        """Keep a page parsed for the page file as `stat` describes it (read, or just written)."""
        self._parsed.store_page(self._page_cache_path(cname), stat, fetched, page.stored_groups())

    def _parsed_page(self, cname: str) -> Page | None:
        """The cached page from the parsed store, where it holds the page file as it is now."""
        path = self._page_cache_path(cname)
        found = self._parsed.page(path)
        if found is None:
            return None
        fetched, versions = found
        if not self.offline and (self.max_age is None or time.time() - fetched > self.max_age):
            return None

        def load_group(text: str) -> list[IndexFile | dict]:  # once per version: the Page keeps what it gives
            entries = self._parsed.page_files(path, text)
            if entries is not None:
                return entries  # built into IndexFiles as they are asked for
            record = self._read_page_cache(cname)  # the page file changed since: read it whole
            if record is None:
                raise CacheMiss(f"the cached index page of package {cname!r} went away ({path})", name=cname)
            return self._cached_page(cname, record).files_of(parse_version(text))

        def load_all() -> list[IndexFile]:
            record = self._read_page_cache(cname)
            if record is None:
                raise CacheMiss(f"the cached index page of package {cname!r} went away ({path})", name=cname)
            return self._cached_page(cname, record, remember=False).all()  # to list every file; rows kept

        return Page(versions, load_group, load_all)

    def files(self, name: str) -> list[IndexFile]:
        """All files of a project (wheels and sdists) as the index lists them."""
        return self._page(name).all()

    def _page(self, name: str) -> Page:
        cname = canonicalize_name(name)
        with self._key_lock(f"page:{cname}"):
            if cname not in self._pages:
                self._pages[cname] = self._load_page(cname)
            return self._pages[cname]

    def _load_page(self, cname: str) -> Page:
        if self.offline or (self.max_age is not None and not self.refresh):
            parsed = self._parsed_page(cname)
            if parsed is not None:
                return parsed
        cached = self._read_page_cache(cname)
        url = self._page_url(cname)
        if self.offline:
            if cached is None:
                raise CacheMiss(
                    f"offline: the index page of package {cname!r} is not in the cache "
                    f"({self._page_cache_path(cname)})",
                    name=cname,
                )
            return self._cached_page(cname, cached)
        if cached is not None and self.refresh:
            cached = None  # --refresh: an unconditional request, and the page rewritten
        if cached is not None and self.max_age is not None:
            if time.time() - float(cached.get("fetched", 0)) <= self.max_age:
                return self._cached_page(cname, cached)
        return self._fetch_page(cname, cached, url)

    def _fetch_page(self, cname: str, cached: dict[str, Any] | None, url: str) -> Page:
        """The page from the index (revalidating ``cached`` where there is one), written to the cache."""
        old_stat = cached.pop("_stat", None) if cached is not None else None
        headers = {"Accept": ACCEPT}
        if cached is not None:
            if cached.get("etag"):
                headers["If-None-Match"] = cached["etag"]
            if cached.get("last_modified"):
                headers["If-Modified-Since"] = cached["last_modified"]
        self.stats["page_requests"] += 1
        resp = self._request(url, what=f"index page of package {cname!r}", name=cname, headers=headers)
        with resp:
            if resp.status_code == 304 and cached is not None:
                cached["fetched"] = time.time()
                new_stat = self._write_page(cname, cached)
                if old_stat is not None:  # the same files: the parsed rows follow the rewritten file
                    self._parsed.restat_page(self._page_cache_path(cname), old_stat, new_stat, cached["fetched"])
                return Page.of_entries(cached["files"])
            if resp.status_code == 404:
                raise PackageNotFound(cname, url)
            if resp.status_code != 200:
                raise IndexUnavailable(
                    f"index page of package {cname!r}: {redact(url)} answered HTTP {resp.status_code}",
                    name=cname,
                    url=url,
                )
            page_url = resp.url or url
            entries, fmt = self._page_entries(resp, cname, url, page_url)
            record = {
                "name": cname,
                "index_url": redact(self.index_url),
                "url": redact(page_url),
                "format": fmt,
                "fetched": time.time(),
                "etag": resp.headers.get("ETag"),
                "last_modified": resp.headers.get("Last-Modified"),
                "files": entries,
            }
        new_stat = self._write_page(cname, record)
        page = Page.of_entries(entries)
        if old_stat is not None and cached.get("files") == record["files"] and cached.get("url") == record["url"]:
            # the same files (an index that sends no validators answers 200 with what it gave before)
            self._parsed.restat_page(self._page_cache_path(cname), old_stat, new_stat, record["fetched"])
        else:  # a page new to the cache, or with other files: the rows of the file just written, so that the
            # first offline run after an online one does not parse every page it fetched
            self._remember_page(cname, page, new_stat, record["fetched"])
        return page

    def _write_page(self, cname: str, record: dict[str, Any]) -> Stat:
        """Write a page's cache file; the size and mtime of the file written."""
        with atomic_open(self._page_cache_path(cname)) as fh:
            fh.write(json.dumps(record).encode())
            fh.flush()
            return file_stat(os.fstat(fh.fileno()))

    def _page_entries(self, resp: requests.Response, cname: str, url: str,
                      page_url: str) -> tuple[list[dict[str, Any]], str]:
        """The file entries a project page lists (as IndexFile.to_json writes them), and its format (json or
        html); read within the page's bounds."""
        ctype = resp.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if "json" not in ctype:
            body = self._body(resp, transfer.HTML_PAGE, url)
            transfer.check_count(transfer.PAGE_FILES, url, sum(1 for _ in _ANCHOR.finditer(body)))
            files = parse_html_page(body.decode(resp.encoding or "utf-8", errors="replace"), page_url)
            return [f.to_json() for f in files], "html"
        try:
            doc = json.loads(self._body(resp, transfer.JSON_PAGE, url))
            listed = doc.get("files") if isinstance(doc, dict) else None
            transfer.check_count(transfer.PAGE_FILES, url, len(listed) if isinstance(listed, list) else 0)
            return json_page_entries(doc, page_url), "json"
        except (ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than json reads
            raise IndexUnavailable(f"index page of package {cname!r}: {redact(url)} returned invalid JSON ({exc})",
                                   name=cname, url=url) from None

    def reread(self, name: str) -> list[Version]:
        """A project's versions from the index now, whatever ``max_age`` allows (a cached page may predate a
        release); the page is refreshed on disk and in memory."""
        cname = canonicalize_name(name)
        with self._key_lock(f"page:{cname}"):
            saved, self.max_age = self.max_age, None
            try:
                self._pages[cname] = self._load_page(cname)
            finally:
                self.max_age = saved
        return self.versions(name)
