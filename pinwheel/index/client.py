"""The index client: project pages, wheel selection for a target, METADATA, with a cache and retries.

The resolver asks three questions of the index: which files does a project
have (``files``/``versions``), which wheel would a *target* interpreter and
platform install (``best_wheel``), and what does that wheel declare
(``metadata``).  Answers come from the Simple API (PEP 691 JSON, falling back to
PEP 503 HTML), from PEP 658 ``.metadata`` files, and where those are missing
from the wheel itself, read through HTTP Range requests (only the zip central
directory and the METADATA member), or downloaded whole when the server ignores
Range.

Everything is cached on disk so that a resolve can be repeated offline::

    <cache_dir>/pages/<index-key>/<project>.json      parsed project page + fetch time
    <cache_dir>/metadata/<kind>/<key[:2]>/<key>.METADATA  raw METADATA of a wheel, and its origin

``index-key`` is a short hash of the index URL; metadata is kept under a key
its reader verified (index/metacache.py): shared between indexes where a hash
was checked, per URL where nothing was.

Nothing here touches the network or runs pip at import time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Iterable, Mapping, Sequence
from urllib.parse import urljoin, urlsplit

from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from ..fsutil import atomic_open
from . import transfer
from .config import ca_bundle, default_index_url
from .errors import (
    CacheMiss,
    HashMismatch,
    IndexClientError,
    IndexUnavailable,
    MetadataUnavailable,
    PackageNotFound,
    redact,
)
from .files import IndexFile, file_or_none, parse_html_page, parse_json_page, parse_version
from .metacache import MetadataCache
from .metadata import DistMetadata, RangeFile, local_metadata, parse_metadata, read_metadata_from_zip
from .page import Page, may_match, tag_parts, tag_priority
from .parsed import ParsedStore, Stat, file_stat, read_with_stat
from .target import python_tuple

if TYPE_CHECKING:
    import requests

log = logging.getLogger(__name__)

ACCEPT = (
    "application/vnd.pypi.simple.v1+json, "
    "application/vnd.pypi.simple.v1+html;q=0.2, "
    "text/html;q=0.01"
)
# First ranged read takes the tail of the wheel: the end-of-central-directory
# record plus, for most wheels, the whole central directory.
TAIL_BYTES = 64 * 1024
# Whole-wheel downloads stay in memory up to this size, then spill to disk.
SPOOL_BYTES = 32 * 1024 * 1024
RETRY_STATUS = transfer.RETRY_STATUS
_ANCHOR = re.compile(rb"<a[\s>]", re.IGNORECASE)  # a page's links, counted before any is parsed
# Total seconds one command spends on the network, retries and bodies included (report --index-deadline).
DEFAULT_DEADLINE = 600.0


def _retried_errors() -> tuple[type[Exception], ...]:
    """What a request raises once urllib3's Retry has given up on a connection, a timeout or a broken body."""
    import requests  # requests loads with the first request: an offline run never needs it

    return (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
            requests.exceptions.RetryError)


def _network_errors() -> tuple[type[Exception], ...]:
    """Those, and anything else requests raises on purpose (a URL it cannot send, a header it cannot read)."""
    import requests  # see _retried_errors

    return _retried_errors() + (requests.RequestException,)


def _reason(exc: Exception) -> str:
    """The cause urllib3 gave up on, rather than its 'Max retries exceeded' wrapper."""
    inner = exc.args[0] if exc.args else None
    reason = getattr(inner, "reason", None)
    return str(reason if reason is not None else exc)


class IndexClient:
    """Reads a Simple API index, with retries and an on-disk cache.

    ``retries`` is the number of *additional* attempts after the first one; the
    waits before them are ``backoff``, ``2*backoff``, ``4*backoff``... seconds.
    ``max_age`` (seconds), when set, lets a cached project page be used without
    asking the index; by default each page is refreshed once per client when
    online (with If-None-Match/If-Modified-Since where the server gave an ETag or
    Last-Modified).  ``offline=True`` never touches the network and raises
    :class:`CacheMiss` for anything the cache lacks.  ``verify`` defaults to
    :func:`ca_bundle`.  ``probe_metadata`` asks for ``<wheel>.metadata`` even when
    the page does not advertise it.  ``cache_dir`` is the repository's index cache
    (``Workspace.index_cache``), so that every command shares one.
    """

    def __init__(
        self,
        index_url: str | None = None,
        *,
        cache_dir: Path | str,
        offline: bool = False,
        session: requests.Session | None = None,
        retries: int = 4,
        backoff: float = 0.5,
        timeout: float = 30,
        max_age: float | None = None,
        verify: str | bool | None = None,
        probe_metadata: bool = True,
        deadline: float | None = DEFAULT_DEADLINE,
        refresh: bool = False,
        clock: transfer.Clock | None = None,
    ) -> None:
        self._index_url = index_url.rstrip("/") + "/" if index_url else None
        self.cache_dir = Path(cache_dir)
        self.offline = offline
        self._session = session
        self._verify = verify
        self.retries = max(0, int(retries))
        self.backoff = backoff
        self.timeout = timeout
        self.max_age = max_age
        # Try <url>.metadata even when the page does not advertise it: some
        # mirrors drop the PEP 658 attributes but still serve the files.
        self.probe_metadata = probe_metadata
        self.deadline = deadline
        self.clock = clock or transfer.Clock(deadline)  # siblings share it: the deadline is the command's
        self.refresh = refresh
        self._single_session: requests.Session | None = None
        self._failed_hosts: set[str] = set()
        self._pages: dict[str, Page] = {}
        self._parsed = ParsedStore(self.cache_dir)
        self._metadata_cache = MetadataCache(self.cache_dir, self._parsed)
        self._lock = threading.Lock()
        self._name_locks: dict[str, threading.Lock] = {}
        self.stats = {"page_requests": 0, "metadata_requests": 0, "range_requests": 0, "downloads": 0}

    def flush(self) -> None:
        """Write what this client parsed into the parsed store now, rather than at exit."""
        self._parsed.flush()

    def sibling(self, index_url: str) -> "IndexClient":
        """A client of another index with this one's cache, mode, retries and deadline."""
        return IndexClient(
            index_url, cache_dir=self.cache_dir, offline=self.offline, retries=self.retries, backoff=self.backoff,
            timeout=self.timeout, max_age=self.max_age, verify=self._verify, probe_metadata=self.probe_metadata,
            deadline=self.deadline, refresh=self.refresh, clock=self.clock,
        )

    # -- plumbing ----------------------------------------------------------

    @property
    def index_url(self) -> str:
        if self._index_url is None:
            self._index_url = default_index_url(self.cache_dir).rstrip("/") + "/"
        return self._index_url

    @property
    def session(self) -> requests.Session:
        if self._session is None:
            import requests  # see _network_errors

            self._session = requests.Session()
        if not getattr(self._session, "_pinwheel_retries", False):
            transfer.mount_retries(self._session, self.retries, self.backoff, self.clock.ends())
            self._session._pinwheel_retries = True  # type: ignore[attr-defined]
        return self._session

    @property
    def _single(self) -> requests.Session:
        """The session for a host that failed every attempt: one attempt per request from then on."""
        if self._single_session is None:
            import requests  # see _network_errors

            self._single_session = transfer.mount_retries(requests.Session(), 0, 0, self.clock.ends())
        return self._single_session

    @property
    def verify(self) -> str | bool:
        if self._verify is None:
            self._verify = ca_bundle() or True
        return self._verify

    def _key_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._name_locks.setdefault(key, threading.Lock())

    def _request(
        self,
        url: str,
        *,
        what: str,
        name: str | None,
        headers: Mapping[str, str] | None = None,
    ) -> requests.Response:
        """GET, its body left to read with transfer.receive: urllib3's Retry retries 5xx/429, connection errors
        and timeouts, within the command's deadline (a host that failed every attempt gets one from then on)."""
        if self.offline:
            raise CacheMiss(f"offline: {what} is not in the cache ({redact(url)})", name=name)
        host = urlsplit(url).netloc
        if urlsplit(url).scheme.lower() not in ("http", "https"):  # a page may link anywhere: only HTTP is read
            raise IndexUnavailable(f"index {redact(self.index_url)}: {what}: {redact(url)} is not an http(s) URL",
                                   name=name, url=url)
        remaining = self.clock.remaining()
        if remaining <= 0:
            raise IndexUnavailable(f"index {redact(self.index_url)}: {what}: {redact(url)} {self._deadline_why()}",
                                   name=name, url=url)
        session = self._single if host in self._failed_hosts else self.session
        ends = self.clock.request_ends()  # the status line, the headers and the body, together
        attempts = 1 if host in self._failed_hosts else self.retries + 1
        try:
            resp = transfer.get(session, url, ends, f"--index-deadline or "
                                f"{transfer.REQUEST_DEADLINE.env}", headers=dict(headers or {}), verify=self.verify,
                                timeout=min(self.timeout, remaining))
        except transfer.TooSlow as exc:
            self._failed_hosts.add(host)
            raise IndexUnavailable(f"index {redact(self.index_url)}: {what}: {exc}", name=name, url=url) from None
        except _network_errors() as exc:
            last = f"{type(exc).__name__}: {_reason(exc)}"
            if not isinstance(exc, _retried_errors()):  # a URL requests refuses: no attempt was made
                raise IndexUnavailable(f"index {redact(self.index_url)}: {what}: {redact(url)} cannot be "
                                       f"requested ({last})", name=name, url=url) from None
            self._failed_hosts.add(host)
            why = self._deadline_why(last) if self.clock.remaining() <= 0 else \
                f"unavailable after {attempts} attempt{'s' if attempts != 1 else ''} ({last})"
            raise IndexUnavailable(f"index {redact(self.index_url)}: {what}: {redact(url)} {why}",
                                   name=name, url=url) from None
        if resp.status_code in RETRY_STATUS:
            history = getattr(getattr(resp.raw, "retries", None), "history", ())
            tried = len(history) + 1
            resp.close()
            self._failed_hosts.add(host)
            last = f"HTTP {resp.status_code}"
            why = self._deadline_why(last) if self.clock.remaining() <= 0 else \
                f"unavailable after {tried} attempt{'s' if tried != 1 else ''} ({last})"
            raise IndexUnavailable(f"index {redact(self.index_url)}: {what}: {redact(url)} {why}",
                                   name=name, url=url)
        self._failed_hosts.discard(host)
        resp.pinwheel_ends = ends  # type: ignore[attr-defined]  # when its body must be in (_ends)
        return resp

    def _ends(self, resp: requests.Response) -> float:
        return getattr(resp, "pinwheel_ends", None) or self.clock.request_ends()

    def _deadline_why(self, last: str = "") -> str:
        return (f"gave up at the {self.clock.seconds:g} s network deadline (--index-deadline)"
                + (f" (last error: {last})" if last else ""))

    def _body(self, resp: requests.Response, bound, url: str) -> bytes:
        """A response's whole body, within the request's deadline, the minimum rate and the bound's size."""
        return transfer.receive(resp, bound=bound, ends=self._ends(resp), url=url)

    # -- project pages -----------------------------------------------------

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
        page = Page.of([f for f in map(file_or_none, record["files"]) if f is not None])
        if stat is not None and remember:
            groups = {text: (page._versions[text], [f.to_json() for f in group]) for text, group in page._groups.items()}
            self._parsed.store_page(self._page_cache_path(cname), stat, float(record.get("fetched", 0)), groups)
        return page

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
                return Page.of([f for f in map(file_or_none, cached["files"]) if f is not None])
            if resp.status_code == 404:
                raise PackageNotFound(cname, url)
            if resp.status_code != 200:
                raise IndexUnavailable(
                    f"index page of package {cname!r}: {redact(url)} answered HTTP {resp.status_code}",
                    name=cname,
                    url=url,
                )
            page_url = resp.url or url
            files, fmt = self._page_files(resp, cname, url, page_url)
            record = {
                "name": cname,
                "index_url": redact(self.index_url),
                "url": redact(page_url),
                "format": fmt,
                "fetched": time.time(),
                "etag": resp.headers.get("ETag"),
                "last_modified": resp.headers.get("Last-Modified"),
                "files": [f.to_json() for f in files],
            }
        new_stat = self._write_page(cname, record)
        if old_stat is not None and cached.get("files") == record["files"] and cached.get("url") == record["url"]:
            # the same files (an index that sends no validators answers 200 with what it gave before)
            self._parsed.restat_page(self._page_cache_path(cname), old_stat, new_stat, record["fetched"])
        return Page.of(files)

    def _write_page(self, cname: str, record: dict[str, Any]) -> Stat:
        """Write a page's cache file; the size and mtime of the file written."""
        with atomic_open(self._page_cache_path(cname)) as fh:
            fh.write(json.dumps(record).encode())
            fh.flush()
            return file_stat(os.fstat(fh.fileno()))

    def _page_files(self, resp: requests.Response, cname: str, url: str, page_url: str) -> tuple[list[IndexFile], str]:
        """The files a project page lists, and its format (json or html); read within the page's bounds."""
        ctype = resp.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if "json" not in ctype:
            body = self._body(resp, transfer.HTML_PAGE, url)
            transfer.check_count(transfer.PAGE_FILES, url, sum(1 for _ in _ANCHOR.finditer(body)))
            return parse_html_page(body.decode(resp.encoding or "utf-8", errors="replace"), page_url), "html"
        try:
            doc = json.loads(self._body(resp, transfer.JSON_PAGE, url))
            listed = doc.get("files") if isinstance(doc, dict) else None
            transfer.check_count(transfer.PAGE_FILES, url, len(listed) if isinstance(listed, list) else 0)
            return parse_json_page(doc, page_url), "json"
        except (ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than json reads
            raise IndexUnavailable(f"index page of package {cname!r}: {redact(url)} returned invalid JSON ({exc})",
                                   name=cname, url=url) from None

    def versions(self, name: str, *, include_yanked: bool = False) -> list[Version]:
        """Versions of a project, ascending; versions whose files are all yanked are left out."""
        return sorted(self._page(name).versions(include_yanked))

    def best_wheel(
        self,
        name: str,
        version: str | Version,
        python_version: str,
        platforms: Sequence[str],
    ) -> IndexFile | None:
        """The wheel a CPython ``python_version`` on ``platforms`` would install, or None.

        Chooses by the target's tag priority (not the host's); skips files whose
        Requires-Python excludes the target; prefers unyanked files, then higher
        build numbers.
        """
        want = version if isinstance(version, Version) else Version(str(version))
        page = self._page(name)
        asked = (want, python_version, tuple(platforms))
        if asked in page.best:  # the replay and the metadata lookup ask the same question
            return page.best[asked]
        priority = tag_priority(python_version, tuple(platforms))
        interpreters, plats = tag_parts(python_version, tuple(platforms))
        py = ".".join(str(p) for p in python_tuple(python_version))
        best: tuple[tuple, IndexFile] | None = None
        for f in page.wheels_of(want, lambda filename: may_match(filename, interpreters, plats)):
            ranks = [priority[t] for t in f.tags if t in priority]
            if not ranks or not f.requires_python_allows(py):
                continue
            # higher build numbers win; a file without a build tag ranks below any build
            build_rank = (-int(f.build[0]), str(f.build[1])) if f.build else (1, "")
            key = (f.is_yanked, min(ranks), build_rank)
            if best is None or key < best[0]:
                best = (key, f)
        page.best[asked] = best[1] if best else None
        return page.best[asked]

    # -- metadata ----------------------------------------------------------

    def metadata(
        self,
        name: str,
        version: str | Version,
        python_version: str | None = None,
        platforms: Sequence[str] | None = None,
    ) -> DistMetadata:
        """METADATA of the wheel the target would install.

        With ``python_version``/``platforms`` left out, any wheel of that version
        is used (a pure-Python one if there is one).
        """
        cname = canonicalize_name(name)
        want = version if isinstance(version, Version) else Version(str(version))
        targeted = python_version is not None and platforms is not None
        if targeted:
            chosen = self.best_wheel(cname, want, python_version, platforms)
            if chosen is not None:  # the usual case: the version's other files are never built
                return self.metadata_for(chosen)
        files = self._page(cname).files_of(want)
        wheels = [f for f in files if f.is_wheel]
        if not files:
            raise MetadataUnavailable(f"package {cname!r} has no files for version {want}", name=cname, version=str(want))
        if not wheels:
            raise MetadataUnavailable(
                f"package {cname!r} {want} is published as an sdist only "
                f"({', '.join(f.filename for f in files)}); pinwheel reads metadata from wheels",
                name=cname,
                version=str(want),
            )
        if targeted:  # best_wheel found none
            raise MetadataUnavailable(
                f"package {cname!r} {want} has no wheel for python {python_version} on "
                f"{', '.join(platforms)} (wheels: {', '.join(f.filename for f in wheels)})",
                name=cname,
                version=str(want),
            )

        def generic(f: IndexFile) -> tuple:
            return (f.is_yanked, not any(t.platform == "any" for t in f.tags), f.filename)

        return self.metadata_for(min(wheels, key=generic))

    def metadata_many(
        self,
        items: Iterable[tuple[str, str | Version]],
        python_version: str | None = None,
        platforms: Sequence[str] | None = None,
        *,
        max_workers: int = 8,
    ) -> dict[tuple[NormalizedName, Version], DistMetadata | IndexClientError]:
        """Metadata of many (name, version) pairs in parallel; errors are returned, not raised."""
        pairs = [(canonicalize_name(n), v if isinstance(v, Version) else Version(str(v))) for n, v in items]

        def one(pair: tuple[NormalizedName, Version]) -> DistMetadata | IndexClientError:
            try:
                return self.metadata(pair[0], pair[1], python_version, platforms)
            except IndexClientError as exc:
                return exc

        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415 - only batch lookups run threads

        with ThreadPoolExecutor(max_workers=max_workers) as pool:
            return dict(zip(pairs, pool.map(one, pairs)))

    def metadata_for(self, f: IndexFile) -> DistMetadata:
        """METADATA of one listed wheel: cache, PEP 658, ranged read, whole download."""
        if not f.is_wheel:
            raise MetadataUnavailable(
                f"{f.filename} is an sdist; pinwheel reads metadata from wheels", name=f.name, version=str(f.version)
            )
        with self._key_lock(f"meta:{f.url}"):
            if not (self.refresh and not self.offline):
                cached = self._metadata_cache.read(f)
                if cached is not None:
                    return cached
            if self.offline:
                raise CacheMiss(
                    f"offline: metadata of package {f.name!r} {f.version} ({f.filename}) is not in the cache",
                    name=f.name,
                )
            raw, source = self._fetch_metadata(f)
            self._metadata_cache.store(f, raw, source, self.index_url)
        meta = parse_metadata(raw, filename=f.filename, url=f.url, sha256=f.sha256, source=source)
        if meta.name != f.name or meta.version != f.version:
            log.warning(
                "%s declares %s %s, the file name says %s %s", f.filename, meta.name, meta.version, f.name, f.version
            )
        return meta

    def _fetch_metadata(self, f: IndexFile) -> tuple[bytes, str]:
        what = f"metadata of package {f.name!r} {f.version}"
        if f.has_metadata or self.probe_metadata:
            self.stats["metadata_requests"] += 1
            resp = self._request(f.url + ".metadata", what=what, name=f.name)
            with resp:
                if resp.status_code == 200:
                    data = self._body(resp, transfer.METADATA, f.url + ".metadata")
                    if f.metadata_sha256:
                        actual = hashlib.sha256(data).hexdigest()
                        if actual != f.metadata_sha256.lower():
                            raise HashMismatch(f"{f.filename}.metadata", f.url + ".metadata", f.metadata_sha256, actual)
                    if f.has_metadata or data.lstrip()[:17].lower() == b"metadata-version:":
                        return data, "pep658"
                    # an unadvertised probe that answered with something else (an error page)
                    log.debug("%s.metadata is not a METADATA document; reading the wheel", redact(f.url))
                elif f.has_metadata:
                    log.debug("%s.metadata advertised but answered %s", redact(f.url), resp.status_code)
                else:
                    log.debug("%s.metadata answered HTTP %s; reading the wheel", redact(f.url), resp.status_code)
        return self._metadata_from_wheel(f)

    def _metadata_from_wheel(self, f: IndexFile) -> tuple[bytes, str]:
        what = f"wheel of package {f.name!r} {f.version}"
        # One request answers both questions: a 206 starts a ranged read, a 200
        # means the server ignores Range and is already sending the whole wheel.
        resp = self._request(f.url, what=what, name=f.name, headers={"Range": f"bytes=-{TAIL_BYTES}"})
        with resp:
            if resp.status_code == 404:
                raise MetadataUnavailable(f"{what}: {redact(f.url)} answered 404", name=f.name, version=str(f.version))
            if resp.status_code == 206:
                total = self._content_range_total(resp)
                if total is not None:
                    tail = self._ranged_body(resp, f, TAIL_BYTES)
                    self.stats["range_requests"] += 1
                    return self._metadata_ranged(f, tail, total), "range"
            elif resp.status_code == 200:
                return self._metadata_download(f, resp), "download"
            else:
                raise IndexUnavailable(f"{what}: {redact(f.url)} answered HTTP {resp.status_code}", name=f.name, url=f.url)
        # 206 without a usable Content-Range: download the whole wheel
        resp = self._request(f.url, what=what, name=f.name)
        with resp:
            if resp.status_code != 200:
                raise IndexUnavailable(f"{what}: {redact(f.url)} answered HTTP {resp.status_code}", name=f.name, url=f.url)
            return self._metadata_download(f, resp), "download"

    def _ranged_body(self, resp: requests.Response, f: IndexFile, want: int) -> bytes:
        """The body of a 206: what was asked for, and a server that sends more is refused before it is all in."""
        if want > transfer.METADATA.value():  # the zip directory or METADATA member is read whole
            raise transfer.TooLarge(transfer.METADATA, f.url, want)
        try:
            return transfer.receive(resp, bound=transfer.METADATA, ends=self._ends(resp), url=f.url,
                                    limit=want)
        except transfer.TooLarge:
            raise IndexUnavailable(f"wheel of package {f.name!r} {f.version}: {redact(f.url)} sent more than the "
                                   f"{want} bytes of the range asked for", name=f.name, url=f.url) from None

    @staticmethod
    def _content_range_total(resp: requests.Response) -> int | None:
        m = re.fullmatch(r"\s*bytes\s+(\d+)-(\d+)/(\d+)\s*", resp.headers.get("Content-Range", ""))
        if not m:
            return None
        return int(m.group(3))

    def _metadata_ranged(self, f: IndexFile, tail: bytes, total: int) -> bytes:
        what = f"wheel of package {f.name!r} {f.version}"

        def fetch(start: int, end: int) -> bytes:
            self.stats["range_requests"] += 1
            r = self._request(f.url, what=what, name=f.name, headers={"Range": f"bytes={start}-{end}"})
            with r:
                if r.status_code == 206:
                    data = self._ranged_body(r, f, end - start + 1)
                elif r.status_code == 200:  # server stopped honouring Range: slice the body's start
                    data = transfer.receive(r, bound=transfer.DOWNLOAD, ends=self._ends(r), url=f.url,
                                            upto=end + 1)[start : end + 1]
                else:
                    raise IndexUnavailable(f"{what}: {redact(f.url)} answered HTTP {r.status_code}", name=f.name, url=f.url)
            if len(data) != end - start + 1:
                raise IndexUnavailable(
                    f"{what}: {redact(f.url)} returned {len(data)} bytes for range {start}-{end}", name=f.name, url=f.url
                )
            return data

        import zipfile  # where a wheel is read: a run from the cache never is

        rf = RangeFile(fetch, total, tail)
        try:
            with zipfile.ZipFile(rf) as zf:  # type: ignore[arg-type]
                return read_metadata_from_zip(zf, f.name, f.url)
        except zipfile.BadZipFile as exc:
            raise MetadataUnavailable(f"{what}: {redact(f.url)} is not a readable zip ({exc})", name=f.name) from None

    def _metadata_download(self, f: IndexFile, resp: requests.Response) -> bytes:
        what = f"wheel of package {f.name!r} {f.version}"
        self.stats["downloads"] += 1
        import zipfile

        with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as tmp:
            self._receive(f, resp, tmp)
            tmp.seek(0)
            try:
                with zipfile.ZipFile(tmp) as zf:  # type: ignore[arg-type]
                    return read_metadata_from_zip(zf, f.name, f.url)
            except zipfile.BadZipFile as exc:
                raise MetadataUnavailable(f"{what}: {redact(f.url)} is not a readable zip ({exc})", name=f.name) from None

    def _receive(self, f: IndexFile, resp: requests.Response, out: IO[bytes]) -> int:
        """Write a file's body to ``out``, checked against the sha256 the index lists; the bytes written."""
        digest = hashlib.sha256()
        size = 0

        def take(chunk: bytes) -> None:
            nonlocal size
            digest.update(chunk)
            size += len(chunk)
            out.write(chunk)

        # a whole file may take longer than a document: its body is bounded by the command's deadline and the rate
        transfer.receive(resp, bound=transfer.DOWNLOAD, ends=self.clock.ends(), url=f.url, sink=take,
                         raise_with="--index-deadline")
        if f.sha256 and digest.hexdigest() != f.sha256.lower():
            raise HashMismatch(f.filename, f.url, f.sha256, digest.hexdigest())
        return size

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

    def download(self, f: IndexFile, dest: Path) -> int:
        """Download one listed file to ``dest`` (retries, deadline, sha256 checked); the bytes written.

        The file appears under its name only once it is whole and verified.
        """
        resp = self._request(f.url, what=f"file {f.filename}", name=f.name)
        with resp:
            if resp.status_code != 200:
                raise IndexUnavailable(f"download of {f.filename}: {redact(f.url)} answered HTTP {resp.status_code}",
                                       name=f.name, url=f.url)
            with atomic_open(dest) as fh:
                return self._receive(f, resp, fh)

    # -- local files -------------------------------------------------------

    def local_metadata(self, path: Path | str) -> DistMetadata:
        """METADATA of a wheel on disk."""
        return local_metadata(path)

