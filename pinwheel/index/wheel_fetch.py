"""METADATA read out of a wheel: the zip's tail and its METADATA member over HTTP Range requests, or the
whole wheel where the server ignores Range; and wheel downloads.

A mixin of IndexClient (index/client.py), which holds the HTTP machinery.
"""

from __future__ import annotations

import hashlib
import logging
import re
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ..fsutil import atomic_open
from . import transfer
from .errors import HashMismatch, IndexUnavailable, MetadataUnavailable, redact
from .files import IndexFile
from .metadata import RangeFile, read_metadata_from_zip

if TYPE_CHECKING:
    import requests

log = logging.getLogger(__name__)

# First ranged read takes the tail of the wheel: the end-of-central-directory
# record plus, for most wheels, the whole central directory.
TAIL_BYTES = 64 * 1024
# Whole-wheel downloads stay in memory up to this size, then spill to disk.
SPOOL_BYTES = 32 * 1024 * 1024

# Unadvertised METADATA probes that may find nothing in a row before a client stops asking: an index whose
# pages leave PEP 658 out and that serves no .metadata either would cost a round trip per wheel for nothing.
PROBE_MISSES = 3


class WheelMetadata:
    """METADATA from the wheel itself, and downloads."""

    def _fetch_metadata(self, f: IndexFile) -> tuple[bytes, str]:
        what = f"metadata of package {f.name!r} {f.version}"
        if f.has_metadata or (self.probe_metadata and self.probe_misses < PROBE_MISSES):
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
                        if not f.has_metadata:
                            self.probe_misses = 0  # this index serves what its pages do not advertise
                        return data, "pep658"
                    # an unadvertised probe that answered with something else (an error page)
                    log.debug("%s.metadata is not a METADATA document; reading the wheel", redact(f.url))
                elif f.has_metadata:
                    log.debug("%s.metadata advertised but answered %s", redact(f.url), resp.status_code)
                else:
                    log.debug("%s.metadata answered HTTP %s; reading the wheel", redact(f.url), resp.status_code)
            if not f.has_metadata:
                self.probe_misses += 1
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
