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

The pages (index/page_cache.py) and METADATA read out of wheels (index/wheel_fetch.py) are the client's
mixins; this module holds the client's state, its HTTP requests, and the questions the resolver asks.

Nothing here touches the network or runs pip at import time.
"""

from __future__ import annotations

import json
import logging
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence
from urllib.parse import urlsplit

from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from . import transfer
from .config import ca_bundle, default_index_url
from .errors import CacheMiss, IndexClientError, IndexUnavailable, MetadataUnavailable, redact
from .files import IndexFile
from .metacache import MetadataCache
from .metadata import DistMetadata, local_metadata, parse_metadata
from .page import Page, may_match, tag_parts, tag_priority
from .page_cache import PageCache
from .parsed import ParsedStore
from .target import python_tuple
from .wheel_fetch import WheelMetadata

if TYPE_CHECKING:
    import requests

log = logging.getLogger(__name__)

RETRY_STATUS = transfer.RETRY_STATUS
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


class IndexClient(PageCache, WheelMetadata):
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
        self.probe_misses = 0  # unadvertised probes that found no METADATA, none found since (wheel_fetch.py)
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
        if not wheels:  # pip and uv build it: its metadata is the sdist's own, or what its backend prepares
            return self.sdist_metadata(min(files, key=lambda f: (f.is_yanked, f.filename)))
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
            written = self._metadata_cache.store(f, raw, source, self.index_url)
        meta = parse_metadata(raw, filename=f.filename, url=f.url, sha256=f.sha256, source=source)
        self._metadata_cache.remember(*written, meta)
        if meta.name != f.name or meta.version != f.version:
            log.warning(
                "%s declares %s %s, the file name says %s %s", f.filename, meta.name, meta.version, f.name, f.version
            )
        return meta

    def sdist_metadata(self, f: IndexFile) -> DistMetadata:
        """METADATA of a release published only as this sdist (index/sdist_metadata.py): cache, else the
        sdist downloaded (sha256 checked) and its static PKG-INFO read or its metadata hook run."""
        from .sdist_metadata import prepared_metadata  # noqa: PLC0415 - only sdist-only releases need it

        failed = self._metadata_cache.paths(f)[-1].with_suffix(".failed")  # why the last preparation failed
        with self._key_lock(f"meta:{f.url}"):
            if not (self.refresh and not self.offline):
                cached = self._metadata_cache.read(f)
                if cached is not None:
                    return cached
                if failed.is_file():  # the same answer offline and online, until --refresh tries again
                    raise MetadataUnavailable(failed.read_text(), name=f.name, version=str(f.version))
            if self.offline:
                raise CacheMiss(f"offline: metadata of package {f.name!r} {f.version} (sdist {f.filename}) is "
                                "not in the cache", name=f.name)
            with tempfile.TemporaryDirectory(prefix="pinwheel-sdist-") as tmp:
                path = Path(tmp) / f.filename
                self.download(f, path)
                try:
                    raw = prepared_metadata(path, self.index_url, self.verify if isinstance(self.verify, str)
                                            else None)
                except MetadataUnavailable as exc:
                    why = (f"package {f.name!r} {f.version} is published as an sdist only ({f.filename}), and its "
                           f"metadata: {exc}")
                    failed.parent.mkdir(parents=True, exist_ok=True)
                    failed.write_text(why)
                    raise MetadataUnavailable(why, name=f.name, version=str(f.version)) from None
            failed.unlink(missing_ok=True)
            written = self._metadata_cache.store(f, raw, "sdist", self.index_url)
        meta = parse_metadata(raw, filename=f.filename, url=f.url, sha256=f.sha256, source="sdist")
        self._metadata_cache.remember(*written, meta)
        return meta

    # -- local files -------------------------------------------------------

    def local_metadata(self, path: Path | str) -> DistMetadata:
        """METADATA of a wheel on disk."""
        return local_metadata(path)

