"""Files downloaded on the host for a step: into a content-addressed cache, verified before each use.

The cache holds each file at <cache>/sha256/<digest>/<file name>. A file is
moved there only once its bytes hash to the digest, and is hashed again each
time it is used: a mismatch, from the server or in the cache, fails naming the
URL, the expected and the found digest. Kinds that download (asset, run) share it.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from ..fsutil import sha256_file
from ..index import IndexClientError, ca_bundle, transfer
from .base import StagingError

# Every wheel is a zip whose first member's local header comes first.
ZIP_MAGIC = b"PK\x03\x04"
RETRIES = 3


class DownloadError(StagingError):
    """A file could not be downloaded, or its bytes are not the ones the manifest pins."""


def download(url: str, cache: Path, timeout: float = 60.0, clock: transfer.Clock | None = None,
             expect_zip: bool = False) -> tuple[str, Path]:
    """Download url into the cache; (its sha256, its path there). The transfer is bounded as the index's are
    (index/transfer.py): retries, a deadline, a minimum rate, the download size limit; with ``expect_zip``, a
    body that does not start as a zip is refused at its first bytes (a pinned digest needs no such guess)."""
    import requests  # noqa: PLC0415 - only a build with downloads, or `asset add`, downloads

    name = url.rsplit("/", 1)[1]
    clock = clock or transfer.Clock(transfer.ASSET_DEADLINE.value())
    cache.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache, prefix=".download-")
    digest = hashlib.sha256()
    head = bytearray()

    def take(chunk: bytes) -> None:
        if expect_zip and len(head) < len(ZIP_MAGIC):
            head.extend(chunk[: len(ZIP_MAGIC) - len(head)])
            if not ZIP_MAGIC.startswith(bytes(head)):
                raise DownloadError(f"{url}: not a wheel: the body does not start as a zip archive does")
        digest.update(chunk)
        out.write(chunk)

    session = transfer.mount_retries(requests.Session(), RETRIES, 0.5, clock.ends())
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with transfer.get(session, url, clock.ends(), transfer.ASSET_DEADLINE.env,
                                  timeout=min(timeout, max(clock.remaining(), 0.1)), verify=ca_bundle() or True,
                                  headers={"User-Agent": "pinwheel"}) as resp:
                    if resp.status_code != 200:
                        raise DownloadError(f"cannot download {url}: HTTP {resp.status_code}")
                    transfer.receive(resp, bound=transfer.DOWNLOAD, ends=clock.ends(), url=url, sink=take,
                                     raise_with=transfer.ASSET_DEADLINE.env)
            except (requests.RequestException, IndexClientError) as exc:
                raise DownloadError(f"cannot download {url}: {exc}") from None
        found = digest.hexdigest()
        dest = cache / "sha256" / found / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
        return found, dest
    finally:
        session.close()
        if os.path.exists(tmp):
            os.unlink(tmp)


def fetch(url: str, sha256: str, cache: Path) -> Path:
    """The verified file of url in the cache: downloaded when missing; a mismatch is a DownloadError."""
    name = url.rsplit("/", 1)[1]
    cached = cache / "sha256" / sha256 / name
    if cached.is_file():
        found = sha256_file(cached)
        if found == sha256:
            return cached
        cached.unlink()  # not the bytes its name promises: fetch it again
    found, path = download(url, cache)
    if found != sha256:
        path.unlink()
        raise DownloadError(f"{url}: sha256 mismatch: expected {sha256}, found {found}")
    return path


def stage_file(url: str, sha256: str, cache: Path, dest: Path) -> Path:
    """The verified file of url copied to dest (in a build context), checked again there: the copy is what
    the build reads."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(fetch(url, sha256, cache), dest)
    found = sha256_file(dest)
    if found != sha256:
        raise DownloadError(f"{url}: sha256 mismatch in the build context: expected {sha256}, found {found}")
    return dest
