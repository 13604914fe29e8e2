"""What the index package raises on purpose, and URLs made safe for messages."""
from __future__ import annotations

from urllib.parse import urlsplit


def redact(url: str | None) -> str:
    """The URL without a password, for messages, on one line (a page's link may hold any character)."""
    if not url:
        return ""
    if not url.isprintable():
        url = "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii")
                      for c in url)
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        netloc = f"{parts.username}:****@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    except ValueError:  # a netloc urlsplit cannot read: shown without what may be a password
        return url.split("://", 1)[0] + "://(unreadable address)"
    return parts._replace(netloc=netloc).geturl()


class IndexClientError(Exception):
    """Base class for everything this package raises on purpose."""


class IndexUnavailable(IndexClientError):
    """The index (or a file on it) could not be reached after all retries."""

    def __init__(self, message: str, *, name: str | None = None, url: str | None = None):
        super().__init__(message)
        self.name = name
        self.url = url


class IndexNotConfigured(IndexClientError):
    """The variant reads a package from an index whose variable is not set."""


class PackageNotFound(IndexClientError):
    """The index answered 404 for the project page."""

    def __init__(self, name: str, url: str | None = None):
        msg = f"package {name!r} not found on the index"
        if url:
            msg += f" ({redact(url)})"
        super().__init__(msg)
        self.name = name
        self.url = url


class MetadataUnavailable(IndexClientError):
    """No wheel to read METADATA from (sdist only, no compatible wheel, unreadable)."""

    def __init__(self, message: str, *, name: str | None = None, version: str | None = None):
        super().__init__(message)
        self.name = name
        self.version = version


class CacheMiss(IndexClientError):
    """Offline mode and the cache does not hold what was asked for."""

    def __init__(self, message: str, *, name: str | None = None):
        super().__init__(message)
        self.name = name


class HashMismatch(IndexClientError):
    """Downloaded bytes do not match the hash the index (or RECORD) gives."""

    def __init__(self, what: str, url: str, expected: str, actual: str):
        super().__init__(f"hash mismatch for {what} ({redact(url)}): expected sha256 {expected}, got {actual}")
        self.url = url
        self.expected = expected
        self.actual = actual
