"""Bounded HTTP: retries through urllib3's Retry, a deadline per command and per request, a minimum transfer
rate, and a size limit per kind of document.

An index or a release server is input like any other: a server that drips one
byte a second, or sends a page of a million links, gets a clear error in
bounded time and memory, never a hang. Each limit is read from its variable
when it is used (nothing is read at import time), and each error names the
limit and the variable that raises it.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Callable

from .errors import IndexClientError, IndexUnavailable, redact

if TYPE_CHECKING:
    import requests

MiB = 1 << 20
CHUNK = 1 << 16
RETRY_STATUS = frozenset({429}) | frozenset(range(500, 600))


@dataclass(frozen=True)
class Bound:
    """One limit: what it bounds, its default, the variable that overrides it, and its unit."""

    what: str
    env: str
    default: float
    unit: str = "bytes"

    def value(self) -> float:
        raw = os.environ.get(self.env, "").strip()
        if not raw:
            return self.default
        try:
            found = float(raw)
        except ValueError:
            found = -1.0
        if found < 0 or found != found:
            raise LimitError(f"{self.env}={raw!r}: not a number of {self.unit} (the limit for {self.what})")
        return found

    def shown(self, value: float | None = None) -> str:
        v = self.value() if value is None else value
        if self.unit == "bytes":
            return f"{v / MiB:g} MiB" if v >= MiB else f"{v:g} bytes"
        return f"{v:g} {self.unit}"


HTML_PAGE = Bound("an HTML index page", "PINWHEEL_MAX_HTML_PAGE_BYTES", 32 * MiB)
JSON_PAGE = Bound("a JSON index page", "PINWHEEL_MAX_JSON_PAGE_BYTES", 32 * MiB)
PAGE_FILES = Bound("one index page", "PINWHEEL_MAX_PAGE_FILES", 250_000, "files")
METADATA = Bound("a METADATA file", "PINWHEEL_MAX_METADATA_BYTES", 16 * MiB)
DOWNLOAD = Bound("a wheel or asset download", "PINWHEEL_MAX_DOWNLOAD_BYTES", 8 * 1024 * MiB)
REQUEST_DEADLINE = Bound("one index request's body", "PINWHEEL_REQUEST_DEADLINE", 120.0, "seconds")
ASSET_DEADLINE = Bound("one release asset download", "PINWHEEL_ASSET_DEADLINE", 1800.0, "seconds")
MIN_RATE = Bound("the slowest transfer accepted", "PINWHEEL_MIN_TRANSFER_RATE", 1024.0, "bytes/s")
# The rate is judged only after this long into a body: a short pause at the start is not a slow server.
RATE_GRACE = 5.0


def check_count(bound: Bound, url: str, count: int) -> None:
    """Refuse a document listing more than the bound's count (files on a page), before each is parsed."""
    if count > bound.value():
        raise TooLarge(bound, url, count)


def check_bounds() -> None:
    """Read every bound's variable once, so that a command with one that does not read stops before any
    request (a LimitError naming it)."""
    for bound in (HTML_PAGE, JSON_PAGE, PAGE_FILES, METADATA, DOWNLOAD, REQUEST_DEADLINE, ASSET_DEADLINE, MIN_RATE):
        bound.value()


class LimitError(IndexClientError):
    """A document is larger than its limit, or a limit's variable does not read."""


class TooLarge(LimitError):
    def __init__(self, bound: Bound, url: str, size: int | None = None):
        found = f" ({size} {bound.unit})" if size is not None else ""
        super().__init__(f"{redact(url)}{found} is over the {bound.shown()} limit for {bound.what} "
                         f"(raise it with {bound.env}={bound.unit.upper()})")
        self.url = url


class TooSlow(IndexUnavailable):
    """A transfer ran past its deadline or fell below the minimum rate."""


class Clock:
    """One command's network deadline, shared by every client of the command (None: no deadline)."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._ends = None if seconds is None else time.monotonic() + seconds

    def remaining(self) -> float:
        return float("inf") if self._ends is None else self._ends - time.monotonic()

    def ends(self) -> float:
        """When the command's network time ends, as a monotonic time."""
        return float("inf") if self._ends is None else self._ends

    def request_ends(self) -> float:
        """When a request started now must end: the request deadline, within the command's."""
        return min(time.monotonic() + REQUEST_DEADLINE.value(), self.ends())


def retry_policy(retries: int, backoff: float, ends: float):
    """urllib3's Retry: retries more attempts after the first, waiting backoff, 2*backoff, 4*backoff...; it also
    stops where the next wait would pass ``ends`` (a monotonic time), and never sleeps past it (a server's
    Retry-After included)."""
    from urllib3.util.retry import Retry  # noqa: PLC0415 - loads with the first request, as requests does

    class DeadlineRetry(Retry):
        def new(self, **kw):
            retry = super().new(**kw)
            retry.ends = self.ends
            return retry

        def is_exhausted(self) -> bool:
            return super().is_exhausted() or time.monotonic() + self.get_backoff_time() >= self.ends

        def sleep(self, response=None) -> None:
            wait = self.get_backoff_time()
            if response is not None and self.respect_retry_after_header:
                wait = max(wait, self.get_retry_after(response) or 0)
            wait = min(wait, self.ends - time.monotonic())
            if wait > 0:
                time.sleep(wait)

    policy = DeadlineRetry(total=retries, connect=retries, read=retries, status=retries, other=retries,
                           backoff_factor=backoff, backoff_max=30, status_forcelist=RETRY_STATUS,
                           allowed_methods=frozenset({"GET", "HEAD"}), raise_on_status=False,
                           raise_on_redirect=False, respect_retry_after_header=True)
    policy.ends = ends
    return policy


def mount_retries(session: "requests.Session", retries: int, backoff: float, ends: float) -> "requests.Session":
    """session, its http and https adapters retrying by retry_policy (a pool per client: connections are
    kept between requests)."""
    from requests.adapters import HTTPAdapter  # noqa: PLC0415 - requests loads with the first request

    adapter = HTTPAdapter(max_retries=retry_policy(retries, backoff, ends), pool_maxsize=16)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def get(session: "requests.Session", url: str, ends: float, raise_with: str, **kw) -> "requests.Response":
    """session.get(url, stream=True, ...) that returns by ``ends`` (a monotonic time), however slowly a server
    sends its status line and headers: the request runs in a daemon thread, and one past the deadline is left
    to the socket's own timeout while the command goes on."""
    import threading  # noqa: PLC0415 - the first request pays for it

    answer: list = []
    done = threading.Event()

    def run() -> None:
        try:
            answer.append(("ok", session.get(url, stream=True, **kw)))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            answer.append(("error", exc))
        done.set()

    threading.Thread(target=run, name="pinwheel-request", daemon=True).start()
    if not done.wait(max(ends - time.monotonic(), 0)):
        raise TooSlow(f"{redact(url)}: no answer before the deadline (raise it with {raise_with})", url=url)
    kind, value = answer[0]
    if kind == "error":
        raise value
    return value


def declared_size(resp: "requests.Response") -> int | None:
    try:
        size = int(resp.headers.get("Content-Length", ""))
    except ValueError:
        return None
    return size if size >= 0 else None


def receive(resp: "requests.Response", *, bound: Bound, ends: float, url: str,
            sink: Callable[[bytes], object] | None = None, limit: float | None = None,
            upto: int | None = None, raise_with: str = f"--index-deadline or {REQUEST_DEADLINE.env}") -> bytes:
    """The body of resp (or, with sink, each chunk passed to it and b"" returned), read within ``ends`` (a
    monotonic time), at the minimum rate, and refused once over its limit (``limit``, else the bound's);
    decoded bytes are what count, so a compressed bomb is refused too. ``upto`` stops reading once that many
    bytes are in (the start of a body that is longer than the caller needs). ``raise_with`` names what sets
    the deadline, for the message."""
    cap = bound.value() if limit is None else limit
    size = declared_size(resp)
    if size is not None and size > cap and resp.headers.get("Content-Encoding", "identity") == "identity":
        raise TooLarge(bound, url, size)
    min_rate = MIN_RATE.value()
    parts: list[bytes] = []
    got = 0
    started = time.monotonic()
    raw = resp.raw
    while True:
        chunk = _read_some(raw, url)
        if not chunk:
            break
        got += len(chunk)
        if upto is not None and got >= upto:
            parts.append(chunk)
            break
        if got > cap:
            raise TooLarge(bound, url)
        if sink is None:
            parts.append(chunk)
        else:
            sink(chunk)
        now = time.monotonic()
        if now > ends:
            raise TooSlow(f"{redact(url)}: gave up at the deadline after {got} bytes (raise it with {raise_with})",
                          url=url)
        if now - started > RATE_GRACE and got < min_rate * (now - started):
            raise TooSlow(f"{redact(url)}: {got} bytes in {now - started:.0f} s is under the minimum rate of "
                          f"{MIN_RATE.shown(min_rate)} (lower it with {MIN_RATE.env})", url=url)
    return b"".join(parts)


def _read_some(raw, url: str) -> bytes:
    """What the socket has now (up to CHUNK): read1 returns as soon as any bytes arrive, so the deadline and
    the rate are checked between arrivals, not once at the end of a dripped body."""
    from requests.exceptions import ChunkedEncodingError, ConnectionError as RequestsConnectionError  # noqa
    from urllib3.exceptions import HTTPError as Urllib3Error  # noqa: PLC0415

    try:
        return raw.read1(CHUNK, decode_content=True)
    except (OSError, Urllib3Error, ChunkedEncodingError, RequestsConnectionError) as exc:
        raise IndexUnavailable(f"{redact(url)}: the transfer failed ({type(exc).__name__}: {exc})",
                               url=url) from None


def write_to(out: IO[bytes]) -> Callable[[bytes], object]:
    return out.write
