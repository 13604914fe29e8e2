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
import ssl
import tempfile
import urllib.request
from pathlib import Path

from ..fsutil import sha256_file
from ..index import ca_bundle
from .base import StagingError

CHUNK = 1 << 20


class DownloadError(StagingError):
    """A file could not be downloaded, or its bytes are not the ones the manifest pins."""


def _open(url: str, timeout: float):
    context = None
    if url.startswith("https://"):
        ca = ca_bundle()
        context = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
    request = urllib.request.Request(url, headers={"User-Agent": "pinwheel"})
    return urllib.request.urlopen(request, timeout=timeout, context=context)


def download(url: str, cache: Path, timeout: float = 120.0) -> tuple[str, Path]:
    """Download url into the cache; (its sha256, its path there)."""
    name = url.rsplit("/", 1)[1]
    cache.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache, prefix=".download-")
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with _open(url, timeout) as resp:
                    while chunk := resp.read(CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            except OSError as exc:
                raise DownloadError(f"cannot download {url}: {exc}") from None
        found = digest.hexdigest()
        dest = cache / "sha256" / found / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
        return found, dest
    finally:
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
