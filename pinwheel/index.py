"""Package index metadata: project pages, wheel selection for a target, METADATA.

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
    <cache_dir>/metadata/<sha256[:2]>/<sha256>.METADATA   raw METADATA of a wheel

``index-key`` is a short hash of the index URL; metadata is keyed by the wheel's
sha256, so it is shared between indexes serving the same file.

Nothing here touches the network or runs pip at import time.
"""

from __future__ import annotations

import ast
import base64
import email.parser
import functools
import hashlib
import html.parser
import json
import logging
import os
import re
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence
from urllib.parse import urldefrag, urljoin, urlsplit

import requests
from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag, compatible_tags, cpython_tags, mac_platforms
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from .fsutil import atomic_write

log = logging.getLogger(__name__)

__all__ = [
    "CacheMiss",
    "DistMetadata",
    "HashMismatch",
    "IndexClient",
    "IndexClientError",
    "IndexFile",
    "IndexUnavailable",
    "MetadataUnavailable",
    "PackageNotFound",
    "ca_bundle",
    "default_index_url",
    "expand_platforms",
    "local_metadata",
    "parse_metadata",
    "target_environment",
    "target_tags",
]

JSON_CONTENT_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = (
    "application/vnd.pypi.simple.v1+json, "
    "application/vnd.pypi.simple.v1+html;q=0.2, "
    "text/html;q=0.01"
)
# First ranged read takes the tail of the wheel: the end-of-central-directory
# record plus, for most wheels, the whole central directory.
TAIL_BYTES = 64 * 1024
# Smallest ranged read after that (local header + METADATA member).
MIN_RANGE = 16 * 1024
# Whole-wheel downloads stay in memory up to this size, then spill to disk.
SPOOL_BYTES = 32 * 1024 * 1024
RETRY_STATUS = frozenset({429}) | frozenset(range(500, 600))
# Total seconds a client waits on the network, retries included (report --index-deadline).
DEFAULT_DEADLINE = 60.0


def _redact(url: str | None) -> str:
    """The URL without a password, for messages."""
    if not url:
        return ""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:****@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=netloc).geturl()


# --------------------------------------------------------------------------
# errors


class IndexClientError(Exception):
    """Base class for everything this module raises on purpose."""


class IndexUnavailable(IndexClientError):
    """The index (or a file on it) could not be reached after all retries."""

    def __init__(self, message: str, *, name: str | None = None, url: str | None = None):
        super().__init__(message)
        self.name = name
        self.url = url


class PackageNotFound(IndexClientError):
    """The index answered 404 for the project page."""

    def __init__(self, name: str, url: str | None = None):
        msg = f"package {name!r} not found on the index"
        if url:
            msg += f" ({_redact(url)})"
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
        super().__init__(f"hash mismatch for {what} ({_redact(url)}): expected sha256 {expected}, got {actual}")
        self.url = url
        self.expected = expected
        self.actual = actual


# --------------------------------------------------------------------------
# configuration from pip


@functools.lru_cache(maxsize=None)
def _pip_config(python: str) -> dict[str, str]:
    """``pip config list`` of the given interpreter, as a dict (cached per process)."""
    if python == sys.executable:
        try:  # in-process: the same files and variables pip reads, without a subprocess
            from pip._internal.configuration import Configuration  # noqa: PLC0415

            config = Configuration(isolated=False)
            config.load()
            merged: dict[str, str] = {}
            for key, value in config.items():
                # pip >= 24 yields (file, {key: value}) in load order; older pips yield (key, value).
                merged.update({k: str(v) for k, v in value.items()} if isinstance(value, dict) else {key: str(value)})
            return merged
        except Exception as exc:  # pip internals moved: fall back to the CLI
            log.debug("in-process pip configuration failed: %s", exc)
    try:
        proc = subprocess.run(
            [python, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.debug("pip config list failed: %s", exc)
        return {}
    out: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        try:
            parsed = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            parsed = value.strip("'\"")
        out[key.strip()] = str(parsed)
    return out


def _pip_default_index_url() -> str:
    try:
        from pip._internal.models.index import PyPI  # noqa: PLC0415 - lazy on purpose
    except ImportError:
        proc = subprocess.run(
            [sys.executable, "-c", "from pip._internal.models.index import PyPI; print(PyPI.simple_url)"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if proc.returncode != 0 or not proc.stdout.strip():
            raise IndexClientError("cannot determine the default index URL: pip is not available") from None
        return proc.stdout.strip()
    return PyPI.simple_url


def pip_setting(env: str, keys: Sequence[str]) -> str | None:
    """A pip setting as pip itself would see it: its environment variable, else the first configured key."""
    value = os.environ.get(env, "").strip()
    if value:
        return value
    config = _pip_config(sys.executable)
    for key in keys:
        configured = config.get(key, "").strip()
        if configured:
            return configured
    return None


def default_index_url() -> str:
    """The index ``pip install`` would use.

    ``PIP_INDEX_URL``, else pip's configuration (``install.index-url``, which
    pip lets override ``global.index-url`` for installs), else pip's default.
    """
    configured = pip_setting("PIP_INDEX_URL", ("install.index-url", "global.index-url"))
    return configured.split()[0] if configured else _pip_default_index_url()


def ca_bundle() -> str | None:
    """CA bundle to trust: ``PIP_CERT``, ``REQUESTS_CA_BUNDLE``, ``SSL_CERT_FILE``, else the system's.

    Returns None when there is none (then the library default applies).
    """
    for var in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        value = os.environ.get(var, "").strip()
        if value and os.path.isfile(value):
            return value
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile):
        if candidate and os.path.isfile(candidate):
            return candidate
    return None


# --------------------------------------------------------------------------
# target tags


def _py_tuple(python_version: str | Sequence[int]) -> tuple[int, int]:
    if isinstance(python_version, str):
        text = python_version.strip()
        text = re.sub(r"^(cp|py)", "", text)
        if "." not in text and len(text) >= 2:  # "312"
            text = f"{text[0]}.{text[1:]}"
        parts = text.split(".")
        try:
            return int(parts[0]), int(parts[1])
        except (IndexError, ValueError):
            raise ValueError(f"python version must look like '3.12', got {python_version!r}") from None
    major, minor = tuple(python_version)[:2]
    return int(major), int(minor)


_LEGACY_MANYLINUX = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}
_LEGACY_ARCHS = {
    (2, 17): {"x86_64", "i686", "aarch64", "armv7l", "ppc64", "ppc64le", "s390x"},
    (2, 12): {"x86_64", "i686"},
    (2, 5): {"x86_64", "i686"},
}


def expand_platforms(platforms: Iterable[str]) -> list[str]:
    """Expand target platforms to every platform tag they can install, most specific first.

    ``manylinux_2_28_x86_64`` also accepts older glibc tags (down to 2.5) and the
    legacy aliases; ``musllinux_1_2`` accepts 1.1 and 1.0; ``macosx_14_0_arm64``
    accepts older macOS and universal2.  Other tags are kept as given.
    """
    out: list[str] = []

    def add(tag: str) -> None:
        if tag not in out:
            out.append(tag)

    for plat in platforms:
        legacy = re.fullmatch(r"(manylinux2014|manylinux2010|manylinux1)_(.+)", plat)
        m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(.+)", plat)
        if legacy:
            major, minor = _LEGACY_MANYLINUX[legacy.group(1)]
            arch = legacy.group(2)
        elif m:
            major, minor, arch = int(m.group(1)), int(m.group(2)), m.group(3)
        else:
            major = minor = -1
            arch = ""
        if major >= 2:
            lowest = 5 if major == 2 else 0
            for mi in range(minor, lowest - 1, -1):
                add(f"manylinux_{major}_{mi}_{arch}")
                if major == 2 and arch in _LEGACY_ARCHS.get((2, mi), ()):
                    alias = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}[mi]
                    add(f"{alias}_{arch}")
            continue
        mm = re.fullmatch(r"musllinux_(\d+)_(\d+)_(.+)", plat)
        if mm:
            major, minor, arch = int(mm.group(1)), int(mm.group(2)), mm.group(3)
            for mi in range(minor, -1, -1):
                add(f"musllinux_{major}_{mi}_{arch}")
            continue
        mac = re.fullmatch(r"macosx_(\d+)_(\d+)_(.+)", plat)
        if mac:
            for tag in mac_platforms((int(mac.group(1)), int(mac.group(2))), mac.group(3)):
                add(tag)
            continue
        add(plat)
    return out


def target_tags(python_version: str | Sequence[int], platforms: Iterable[str]) -> list[Tag]:
    """Supported tags of a CPython target, most preferred first (independent of the host)."""
    return list(_target_tags(str(python_version) if isinstance(python_version, str) else tuple(python_version),
                             tuple(platforms)))


@functools.lru_cache(maxsize=64)
def _target_tags(python_version, platforms: tuple[str, ...]) -> tuple[Tag, ...]:
    major, minor = _py_tuple(python_version)
    plats = expand_platforms(platforms)
    interp = f"cp{major}{minor}"
    tags: list[Tag] = []
    seen: set[Tag] = set()
    for tag in [
        *cpython_tags((major, minor), abis=[interp], platforms=plats),
        *compatible_tags((major, minor), interpreter=interp, platforms=plats),
    ]:
        if tag not in seen:
            seen.add(tag)
            tags.append(tag)
    return tuple(tags)


def target_environment(python_version: str | Sequence[int], platform: str) -> dict[str, str]:
    """PEP 508 marker environment of a CPython target given by a platform tag.

    ``target_environment("3.12", "manylinux_2_28_x86_64")`` gives Linux/x86_64
    values, whatever the host is.  Pass it to :meth:`DistMetadata.requirements`.
    """
    major, minor = _py_tuple(python_version)
    full = python_version if isinstance(python_version, str) and python_version.count(".") == 2 else f"{major}.{minor}.0"
    m = re.fullmatch(r"(manylinux\d*(?:_\d+_\d+)?|musllinux_\d+_\d+|linux|macosx_\d+_\d+|win)_?(.*)", platform)
    family, machine = (m.group(1), m.group(2)) if m else (platform, "")
    if family.startswith(("manylinux", "musllinux", "linux")):
        system, sys_platform, os_name = "Linux", "linux", "posix"
    elif family.startswith("macosx"):
        system, sys_platform, os_name = "Darwin", "darwin", "posix"
    elif family == "win" or platform.startswith("win"):
        system, sys_platform, os_name = "Windows", "win32", "nt"
        machine = {"amd64": "AMD64", "arm64": "ARM64", "32": "x86"}.get(machine, machine or "AMD64")
    else:
        system, sys_platform, os_name = "", platform, ""
    return {
        "implementation_name": "cpython",
        "implementation_version": full,
        "os_name": os_name,
        "platform_machine": machine,
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": system,
        "platform_version": "",
        "python_full_version": full,
        "python_version": f"{major}.{minor}",
        "sys_platform": sys_platform,
    }


# --------------------------------------------------------------------------
# data


def _file_or_none(data: Mapping[str, Any]) -> "IndexFile | None":
    try:
        return IndexFile.from_json(data)
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None


@functools.lru_cache(maxsize=4096)
def _parse_version(text: str) -> Version:
    return Version(text)


@dataclass(frozen=True)
class IndexFile:
    """One file listed on a project page."""

    filename: str
    url: str  # absolute, without the #hash fragment
    sha256: str | None
    requires_python: str | None
    yanked: bool | str  # False, True, or the yank reason
    has_metadata: bool  # PEP 658/714 advertised
    metadata_sha256: str | None = None
    size: int | None = None

    def __post_init__(self) -> None:
        # Reject malformed names now (cheaply); the tags are parsed on first use.
        if self.filename.endswith(".whl"):
            if self.filename.count("-") not in (4, 5):
                raise InvalidWheelFilename(f"invalid wheel filename: {self.filename!r}")
            self.version  # noqa: B018 - parses, raising InvalidVersion
        else:
            self._parsed  # noqa: B018 - sdists are few; parse fully

    # Parsed on first use: an index page of a big project lists tens of thousands
    # of files, and most of them are never looked at.
    @functools.cached_property
    def _parsed(self) -> tuple[NormalizedName, Version, tuple, frozenset[Tag]]:
        if self.filename.endswith(".whl"):
            name, version, build, tags = parse_wheel_filename(self.filename)
            return name, version, tuple(build), frozenset(tags)
        name, version = parse_sdist_filename(self.filename)
        return name, version, (), frozenset()

    @property
    def name(self) -> NormalizedName:
        return self._parsed[0]

    @functools.cached_property
    def version(self) -> Version:
        if self.filename.endswith(".whl"):
            # A wheel name's second dash-separated field is its version (the name
            # field has no dashes); far cheaper than parsing every tag.
            return _parse_version(self.filename.split("-", 2)[1])
        return self._parsed[1]

    @property
    def build(self) -> tuple:
        return self._parsed[2]

    @property
    def tags(self) -> frozenset[Tag]:
        return self._parsed[3]

    @property
    def is_wheel(self) -> bool:
        return self.filename.endswith(".whl")

    @property
    def is_yanked(self) -> bool:
        return self.yanked is not False and self.yanked is not None

    def requires_python_allows(self, python_version: str) -> bool:
        if not self.requires_python:
            return True
        try:
            return SpecifierSet(self.requires_python).contains(python_version, prereleases=True)
        except InvalidSpecifier:
            return True

    def to_json(self) -> dict[str, Any]:
        return {
            "filename": self.filename,
            "url": self.url,
            "sha256": self.sha256,
            "requires_python": self.requires_python,
            "yanked": self.yanked,
            "has_metadata": self.has_metadata,
            "metadata_sha256": self.metadata_sha256,
            "size": self.size,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IndexFile:
        return cls(
            filename=data["filename"],
            url=data["url"],
            sha256=data.get("sha256"),
            requires_python=data.get("requires_python"),
            yanked=data.get("yanked", False),
            has_metadata=bool(data.get("has_metadata")),
            metadata_sha256=data.get("metadata_sha256"),
            size=data.get("size"),
        )


@dataclass(frozen=True)
class DistMetadata:
    """What a wheel declares (its METADATA), plus where it came from."""

    name: NormalizedName
    version: Version
    requires_dist: tuple[Requirement, ...]
    requires_python: SpecifierSet | None
    provides_extra: tuple[NormalizedName, ...]
    filename: str | None = None
    url: str | None = None
    sha256: str | None = None
    # how METADATA was obtained: pep658 | range | download | local | cache
    source: str = field(default="", compare=False)
    # Requires-Dist lines that did not parse (kept so that nothing is silently lost)
    invalid_requires: tuple[str, ...] = field(default=(), compare=False)

    def requirements(
        self, extras: Iterable[str] = (), environment: Mapping[str, str] | None = None
    ) -> list[Requirement]:
        """Requirements that apply for the given extras in the given (target) environment.

        ``environment`` overrides keys of the host's marker environment, e.g.
        ``{"python_version": "3.12", "platform_machine": "x86_64", "sys_platform": "linux"}``.
        """
        env: dict[str, str] = dict(default_environment())
        if environment:
            env.update(environment)
        wanted = [""] + [canonicalize_name(e) for e in extras]
        out = []
        for req in self.requires_dist:
            if req.marker is None:
                out.append(req)
                continue
            if any(req.marker.evaluate({**env, "extra": extra}) for extra in wanted):
                out.append(req)
        return out


def parse_metadata(
    data: bytes | str,
    *,
    filename: str | None = None,
    url: str | None = None,
    sha256: str | None = None,
    source: str = "",
) -> DistMetadata:
    """Parse a METADATA document (strictly with packaging, else leniently)."""
    if isinstance(data, bytes):
        text = data.decode("utf-8", errors="surrogateescape")
    else:
        text = data
    try:
        from packaging.metadata import Metadata

        meta = Metadata.from_email(text, validate=True)
        return DistMetadata(
            name=canonicalize_name(meta.name),
            version=meta.version,
            requires_dist=tuple(meta.requires_dist or ()),
            requires_python=meta.requires_python,
            provides_extra=tuple(canonicalize_name(e) for e in (meta.provides_extra or ())),
            filename=filename,
            url=url,
            sha256=sha256,
            source=source,
        )
    except Exception as exc:  # InvalidMetadata / ExceptionGroup: parse leniently
        log.debug("strict METADATA parse failed for %s: %s", filename or url, exc)
    msg = email.parser.HeaderParser().parsestr(text)
    name = msg.get("Name")
    version = msg.get("Version")
    if not name or not version:
        raise MetadataUnavailable(f"METADATA of {filename or url} has no Name/Version")
    reqs: list[Requirement] = []
    bad: list[str] = []
    for line in msg.get_all("Requires-Dist") or ():
        try:
            reqs.append(Requirement(line))
        except InvalidRequirement:
            bad.append(line)
            log.warning("ignoring unparsable Requires-Dist %r in %s", line, filename or url)
    rp = msg.get("Requires-Python")
    try:
        requires_python = SpecifierSet(rp) if rp else None
    except InvalidSpecifier:
        requires_python = None
    try:
        parsed_version = Version(version)
    except InvalidVersion:
        raise MetadataUnavailable(f"METADATA of {filename or url} has invalid Version {version!r}") from None
    return DistMetadata(
        name=canonicalize_name(name),
        version=parsed_version,
        requires_dist=tuple(reqs),
        requires_python=requires_python,
        provides_extra=tuple(canonicalize_name(e) for e in (msg.get_all("Provides-Extra") or ())),
        filename=filename,
        url=url,
        sha256=sha256,
        source=source,
        invalid_requires=tuple(bad),
    )


# --------------------------------------------------------------------------
# project page parsing


def _hash_value(value: Any) -> tuple[bool, str | None]:
    """Interpret a PEP 691 ``core-metadata`` / PEP 503 ``data-core-metadata`` value."""
    if value is None or value is False:
        return False, None
    if isinstance(value, dict):
        return True, value.get("sha256")
    if isinstance(value, str):
        if value.lower() in ("", "false"):
            return False, None
        algo, sep, digest = value.partition("=")
        if sep and algo.lower() == "sha256":
            return True, digest
        return True, None
    return bool(value), None


def _make_file(
    filename: str,
    url: str,
    sha256: str | None,
    requires_python: str | None,
    yanked: Any,
    core_metadata: Any,
    size: int | None = None,
) -> IndexFile | None:
    has_meta, meta_sha = _hash_value(core_metadata)
    if isinstance(yanked, str) and yanked == "":
        yanked = True  # HTML: data-yanked without a reason
    try:
        return IndexFile(
            filename=filename,
            url=url,
            sha256=sha256,
            requires_python=requires_python or None,
            yanked=yanked if yanked else False,
            has_metadata=has_meta,
            metadata_sha256=meta_sha,
            size=size,
        )
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        log.debug("skipping file with an unrecognised name: %s", filename)
        return None


def parse_json_page(data: Mapping[str, Any], page_url: str) -> list[IndexFile]:
    """Files of a PEP 691 project page."""
    files = []
    for entry in data.get("files", ()):
        url, _ = urldefrag(urljoin(page_url, entry["url"]))
        core = entry.get("core-metadata", entry.get("dist-info-metadata"))
        f = _make_file(
            entry["filename"],
            url,
            (entry.get("hashes") or {}).get("sha256"),
            entry.get("requires-python"),
            entry.get("yanked", False),
            core,
            entry.get("size"),
        )
        if f is not None:
            files.append(f)
    return files


class _LinkParser(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.anchors: list[tuple[dict[str, str | None], str]] = []
        self._current: dict[str, str | None] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")
        elif tag == "a":
            self._current = dict(attrs)
            self._text = []

    def handle_data(self, data: str) -> None:
        if self._current is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._current is not None:
            self.anchors.append((self._current, "".join(self._text).strip()))
            self._current = None


def parse_html_page(text: str, page_url: str) -> list[IndexFile]:
    """Files of a PEP 503 project page."""
    parser = _LinkParser()
    parser.feed(text)
    parser.close()
    base = urljoin(page_url, parser.base) if parser.base else page_url
    files = []
    for attrs, label in parser.anchors:
        href = attrs.get("href")
        if not href:
            continue
        url, frag = urldefrag(urljoin(base, href))
        filename = os.path.basename(urlsplit(url).path) or label
        sha256 = None
        if frag:
            algo, _, digest = frag.partition("=")
            if algo.lower() == "sha256":
                sha256 = digest
        if "data-core-metadata" in attrs:
            core = attrs.get("data-core-metadata")
        else:
            core = attrs.get("data-dist-info-metadata")
        if core is None and ("data-core-metadata" in attrs or "data-dist-info-metadata" in attrs):
            core = "true"
        yanked: Any = False
        if "data-yanked" in attrs:
            yanked = attrs.get("data-yanked") or True
        f = _make_file(filename, url, sha256, attrs.get("data-requires-python"), yanked, core)
        if f is not None:
            files.append(f)
    return files


# --------------------------------------------------------------------------
# reading a zip over HTTP Range


class _RangeFile:
    """A read-only, seekable file over HTTP Range requests, for :mod:`zipfile`.

    Fetched spans are kept, so zipfile's many small reads cost few requests.
    """

    def __init__(self, fetch: Callable[[int, int], bytes], size: int, tail: bytes) -> None:
        self._fetch = fetch  # (start, end_inclusive) -> bytes
        self._size = size
        self._pos = 0
        self._spans: list[tuple[int, bytes]] = [(size - len(tail), tail)]
        self.requests = 1

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 0:
            pos = offset
        elif whence == 1:
            pos = self._pos + offset
        elif whence == 2:
            pos = self._size + offset
        else:
            raise ValueError(f"bad whence {whence}")
        if pos < 0:
            raise OSError("negative seek position")
        self._pos = pos
        return pos

    def _cached(self, pos: int, n: int) -> bytes | None:
        for start, blob in self._spans:
            if start <= pos and pos + n <= start + len(blob):
                return blob[pos - start : pos - start + n]
        return None

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = self._size - self._pos
        n = min(n, self._size - self._pos)
        if n <= 0:
            return b""
        data = self._cached(self._pos, n)
        if data is None:
            end = min(self._size, self._pos + max(n, MIN_RANGE))
            blob = self._fetch(self._pos, end - 1)
            self.requests += 1
            self._spans.append((self._pos, blob))
            data = blob[:n]
        self._pos += len(data)
        return data

    def close(self) -> None:
        self._spans.clear()


def _find_metadata_member(names: Sequence[str], project: str | None) -> str:
    candidates = [n for n in names if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
    if not candidates:
        raise MetadataUnavailable("wheel has no *.dist-info/METADATA")
    if len(candidates) > 1 and project:
        for n in candidates:
            dist = n.split("/")[0][: -len(".dist-info")]
            if canonicalize_name(dist.rsplit("-", 1)[0]) == canonicalize_name(project):
                return n
    return candidates[0]


def _read_metadata_from_zip(zf: zipfile.ZipFile, project: str | None, url: str) -> bytes:
    member = _find_metadata_member(zf.namelist(), project)
    data = zf.read(member)  # zipfile checks the CRC
    # Check METADATA against the wheel's RECORD when the record can be read cheaply.
    record_name = member.rsplit("/", 1)[0] + "/RECORD"
    try:
        info = zf.getinfo(record_name)
    except KeyError:
        return data
    if info.file_size > 8 * 1024 * 1024:
        return data
    record = zf.read(record_name).decode("utf-8", errors="replace")
    for line in record.splitlines():
        parts = line.rsplit(",", 2)
        if len(parts) == 3 and parts[0] == member and parts[1].startswith("sha256="):
            expected = parts[1][len("sha256=") :]
            actual = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            if expected.rstrip("=") != actual:
                raise HashMismatch(f"{member} (per RECORD)", url, expected, actual)
    return data


# --------------------------------------------------------------------------
# the client


def _default_cache_dir() -> Path:
    env = os.environ.get("PINWHEEL_CACHE_DIR")
    if env:
        return Path(env) / "index"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pinwheel" / "index"


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
    the page does not advertise it.
    """

    def __init__(
        self,
        index_url: str | None = None,
        cache_dir: Path | str | None = None,
        offline: bool = False,
        session: requests.Session | None = None,
        retries: int = 4,
        backoff: float = 0.5,
        timeout: float = 30,
        *,
        max_age: float | None = None,
        verify: str | bool | None = None,
        probe_metadata: bool = True,
        deadline: float | None = DEFAULT_DEADLINE,
        refresh: bool = False,
    ) -> None:
        self._index_url = index_url.rstrip("/") + "/" if index_url else None
        self.cache_dir = Path(cache_dir) if cache_dir is not None else _default_cache_dir()
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
        self.refresh = refresh
        self._failing_since: float | None = None
        self._failed_hosts: set[str] = set()
        self._pages: dict[str, list[IndexFile]] = {}
        self._lock = threading.Lock()
        self._name_locks: dict[str, threading.Lock] = {}
        self.stats = {"page_requests": 0, "metadata_requests": 0, "range_requests": 0, "downloads": 0}

    # -- plumbing ----------------------------------------------------------

    @property
    def index_url(self) -> str:
        if self._index_url is None:
            self._index_url = default_index_url().rstrip("/") + "/"
        return self._index_url

    @property
    def session(self) -> requests.Session:
        if self._session is None:
            self._session = requests.Session()
        return self._session

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
        stream: bool = False,
    ) -> requests.Response:
        """GET with retries on 5xx/429, connection errors and timeouts, within the client's deadline."""
        if self.offline:
            raise CacheMiss(f"offline: {what} is not in the cache ({_redact(url)})", name=name)
        host = urlsplit(url).netloc
        last = ""
        attempts = 1 if host in self._failed_hosts else self.retries + 1
        tried = 0
        for attempt in range(attempts):
            if attempt:
                delay = min(self.backoff * (2 ** (attempt - 1)), self._remaining())
                log.debug("retrying %s in %.2fs (%s)", _redact(url), delay, last)
                if delay > 0:
                    time.sleep(delay)
            remaining = self._remaining()
            if remaining <= 0:
                break
            tried += 1
            try:
                resp = self.session.get(
                    url,
                    headers=dict(headers or {}),
                    stream=stream,
                    timeout=min(self.timeout, remaining),
                    verify=self.verify,
                )
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
                last = f"{type(exc).__name__}: {exc}"
                self._failing_since = self._failing_since or time.monotonic()
                continue
            if resp.status_code in RETRY_STATUS:
                last = f"HTTP {resp.status_code}"
                resp.close()
                self._failing_since = self._failing_since or time.monotonic()
                continue
            self._failed_hosts.discard(host)
            self._failing_since = None
            return resp
        self._failed_hosts.add(host)
        if self._remaining() <= 0:
            why = f"gave up at the {self.deadline:g} s network deadline" + (f" (last error: {last})" if last else "")
        else:
            why = f"unavailable after {tried} attempt{'s' if tried != 1 else ''} ({last})"
        raise IndexUnavailable(f"index {_redact(self.index_url)}: {what}: {_redact(url)} {why}", name=name, url=url)

    def _remaining(self) -> float:
        if self.deadline is None:
            return float("inf")
        if self._failing_since is None:
            return self.deadline
        return self.deadline - (time.monotonic() - self._failing_since)

    # -- project pages -----------------------------------------------------

    def _page_url(self, name: str) -> str:
        return urljoin(self.index_url, f"{canonicalize_name(name)}/")

    def _page_cache_path(self, name: str) -> Path:
        key = hashlib.sha256(self.index_url.encode()).hexdigest()[:16]
        return self.cache_dir / "pages" / key / f"{canonicalize_name(name)}.json"

    def _read_page_cache(self, name: str) -> dict[str, Any] | None:
        path = self._page_cache_path(name)
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable cache file %s: %s", path, exc)
            return None

    def files(self, name: str) -> list[IndexFile]:
        """All files of a project (wheels and sdists) as the index lists them."""
        cname = canonicalize_name(name)
        with self._key_lock(f"page:{cname}"):
            if cname in self._pages:
                return list(self._pages[cname])
            files = self._load_page(cname)
            self._pages[cname] = files
            return list(files)

    def _load_page(self, cname: str) -> list[IndexFile]:
        cached = self._read_page_cache(cname)
        url = self._page_url(cname)
        if self.offline:
            if cached is None:
                raise CacheMiss(
                    f"offline: the index page of package {cname!r} is not in the cache "
                    f"({self._page_cache_path(cname)})",
                    name=cname,
                )
            return [f for f in map(_file_or_none, cached["files"]) if f is not None]
        if cached is not None and self.refresh:
            cached = None  # --refresh: an unconditional request, and the page rewritten
        if cached is not None and self.max_age is not None:
            if time.time() - float(cached.get("fetched", 0)) <= self.max_age:
                return [f for f in map(_file_or_none, cached["files"]) if f is not None]
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
                atomic_write(self._page_cache_path(cname), json.dumps(cached).encode())
                return [f for f in map(_file_or_none, cached["files"]) if f is not None]
            if resp.status_code == 404:
                raise PackageNotFound(cname, url)
            if resp.status_code != 200:
                raise IndexUnavailable(
                    f"index page of package {cname!r}: {_redact(url)} answered HTTP {resp.status_code}",
                    name=cname,
                    url=url,
                )
            ctype = resp.headers.get("Content-Type", "").split(";")[0].strip().lower()
            page_url = resp.url or url
            if "json" in ctype:
                try:
                    files = parse_json_page(resp.json(), page_url)
                except ValueError as exc:
                    raise IndexUnavailable(
                        f"index page of package {cname!r}: {_redact(url)} returned invalid JSON ({exc})",
                        name=cname,
                        url=url,
                    ) from None
                fmt = "json"
            else:
                files = parse_html_page(resp.text, page_url)
                fmt = "html"
            record = {
                "name": cname,
                "index_url": _redact(self.index_url),
                "url": _redact(page_url),
                "format": fmt,
                "fetched": time.time(),
                "etag": resp.headers.get("ETag"),
                "last_modified": resp.headers.get("Last-Modified"),
                "files": [f.to_json() for f in files],
            }
        atomic_write(self._page_cache_path(cname), json.dumps(record).encode())
        return files

    def versions(self, name: str, *, include_yanked: bool = False) -> list[Version]:
        """Versions of a project, ascending; versions whose files are all yanked are left out."""
        found: set[Version] = set()
        for f in self.files(name):
            if include_yanked or not f.is_yanked:
                found.add(f.version)
        return sorted(found)

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
        priority = {tag: i for i, tag in enumerate(target_tags(python_version, platforms))}
        py = ".".join(str(p) for p in _py_tuple(python_version))
        best: tuple[tuple, IndexFile] | None = None
        for f in self.files(name):
            if not f.is_wheel or f.version != want:
                continue
            ranks = [priority[t] for t in f.tags if t in priority]
            if not ranks or not f.requires_python_allows(py):
                continue
            # higher build numbers win; a file without a build tag ranks below any build
            build_rank = (-int(f.build[0]), str(f.build[1])) if f.build else (1, "")
            key = (f.is_yanked, min(ranks), build_rank)
            if best is None or key < best[0]:
                best = (key, f)
        return best[1] if best else None

    # -- metadata ----------------------------------------------------------

    def _meta_cache_path(self, f: IndexFile) -> Path:
        key = f.sha256 or "url-" + hashlib.sha256(f.url.encode()).hexdigest()
        return self.cache_dir / "metadata" / key[:2] / f"{key}.METADATA"

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
        files = [f for f in self.files(cname) if f.version == want]
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
        if python_version is not None and platforms is not None:
            chosen = self.best_wheel(cname, want, python_version, platforms)
            if chosen is None:
                raise MetadataUnavailable(
                    f"package {cname!r} {want} has no wheel for python {python_version} on "
                    f"{', '.join(platforms)} (wheels: {', '.join(f.filename for f in wheels)})",
                    name=cname,
                    version=str(want),
                )
        else:
            def generic(f: IndexFile) -> tuple:
                return (f.is_yanked, not any(t.platform == "any" for t in f.tags), f.filename)

            chosen = min(wheels, key=generic)
        return self.metadata_for(chosen)

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

        with ThreadPoolExecutor(max_workers=max_workers) as pool:
            return dict(zip(pairs, pool.map(one, pairs)))

    def metadata_for(self, f: IndexFile) -> DistMetadata:
        """METADATA of one listed wheel: cache, PEP 658, ranged read, whole download."""
        if not f.is_wheel:
            raise MetadataUnavailable(
                f"{f.filename} is an sdist; pinwheel reads metadata from wheels", name=f.name, version=str(f.version)
            )
        path = self._meta_cache_path(f)
        with self._key_lock(f"meta:{path.name}"):
            try:
                raw = None if (self.refresh and not self.offline) else path.read_bytes()
            except FileNotFoundError:
                raw = None
            if raw is not None:
                return parse_metadata(raw, filename=f.filename, url=f.url, sha256=f.sha256, source="cache")
            if self.offline:
                raise CacheMiss(
                    f"offline: metadata of package {f.name!r} {f.version} ({f.filename}) is not in the cache",
                    name=f.name,
                )
            raw, source = self._fetch_metadata(f)
            atomic_write(path, raw)
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
                    data = resp.content
                    if f.metadata_sha256:
                        actual = hashlib.sha256(data).hexdigest()
                        if actual != f.metadata_sha256.lower():
                            raise HashMismatch(f"{f.filename}.metadata", f.url + ".metadata", f.metadata_sha256, actual)
                    if f.has_metadata or data.lstrip()[:17].lower() == b"metadata-version:":
                        return data, "pep658"
                    # an unadvertised probe that answered with something else (an error page)
                    log.debug("%s.metadata is not a METADATA document; reading the wheel", _redact(f.url))
                elif f.has_metadata:
                    log.debug("%s.metadata advertised but answered %s", _redact(f.url), resp.status_code)
                else:
                    log.debug("%s.metadata answered HTTP %s; reading the wheel", _redact(f.url), resp.status_code)
        return self._metadata_from_wheel(f)

    def _metadata_from_wheel(self, f: IndexFile) -> tuple[bytes, str]:
        what = f"wheel of package {f.name!r} {f.version}"
        # One request answers both questions: a 206 starts a ranged read, a 200
        # means the server ignores Range and is already sending the whole wheel.
        resp = self._request(f.url, what=what, name=f.name, headers={"Range": f"bytes=-{TAIL_BYTES}"}, stream=True)
        with resp:
            if resp.status_code == 404:
                raise MetadataUnavailable(f"{what}: {_redact(f.url)} answered 404", name=f.name, version=str(f.version))
            if resp.status_code == 206:
                total = self._content_range_total(resp)
                if total is not None:
                    tail = resp.content
                    self.stats["range_requests"] += 1
                    return self._metadata_ranged(f, tail, total), "range"
            elif resp.status_code == 200:
                return self._metadata_download(f, resp), "download"
            else:
                raise IndexUnavailable(f"{what}: {_redact(f.url)} answered HTTP {resp.status_code}", name=f.name, url=f.url)
        # 206 without a usable Content-Range: download the whole wheel
        resp = self._request(f.url, what=what, name=f.name, stream=True)
        with resp:
            if resp.status_code != 200:
                raise IndexUnavailable(f"{what}: {_redact(f.url)} answered HTTP {resp.status_code}", name=f.name, url=f.url)
            return self._metadata_download(f, resp), "download"

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
                    data = r.content
                elif r.status_code == 200:  # server stopped honouring Range: slice the body
                    data = r.content[start : end + 1]
                else:
                    raise IndexUnavailable(f"{what}: {_redact(f.url)} answered HTTP {r.status_code}", name=f.name, url=f.url)
            if len(data) != end - start + 1:
                raise IndexUnavailable(
                    f"{what}: {_redact(f.url)} returned {len(data)} bytes for range {start}-{end}", name=f.name, url=f.url
                )
            return data

        rf = _RangeFile(fetch, total, tail)
        try:
            with zipfile.ZipFile(rf) as zf:  # type: ignore[arg-type]
                return _read_metadata_from_zip(zf, f.name, f.url)
        except zipfile.BadZipFile as exc:
            raise MetadataUnavailable(f"{what}: {_redact(f.url)} is not a readable zip ({exc})", name=f.name) from None

    def _metadata_download(self, f: IndexFile, resp: requests.Response) -> bytes:
        what = f"wheel of package {f.name!r} {f.version}"
        self.stats["downloads"] += 1
        digest = hashlib.sha256()
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as tmp:
            try:
                for chunk in resp.iter_content(chunk_size=1 << 20):
                    digest.update(chunk)
                    tmp.write(chunk)
            except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError) as exc:
                raise IndexUnavailable(f"{what}: download of {_redact(f.url)} failed ({exc})", name=f.name, url=f.url) from None
            if f.sha256 and digest.hexdigest() != f.sha256.lower():
                raise HashMismatch(f.filename, f.url, f.sha256, digest.hexdigest())
            tmp.seek(0)
            try:
                with zipfile.ZipFile(tmp) as zf:  # type: ignore[arg-type]
                    return _read_metadata_from_zip(zf, f.name, f.url)
            except zipfile.BadZipFile as exc:
                raise MetadataUnavailable(f"{what}: {_redact(f.url)} is not a readable zip ({exc})", name=f.name) from None

    # -- local files -------------------------------------------------------

    def local_metadata(self, path: Path | str) -> DistMetadata:
        """METADATA of a wheel on disk."""
        return local_metadata(path)


def local_metadata(path: Path | str) -> DistMetadata:
    """METADATA of a wheel on disk (hash computed from the file).

    The path may be relative (the user's --manifest is taken as given); only the
    file URI recorded for it is made absolute."""
    path = Path(path)
    uri = path.resolve().as_uri()
    try:
        name, _version, _build, _tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        raise MetadataUnavailable(f"{path.name} is not a wheel file name ({exc})") from None
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    try:
        with zipfile.ZipFile(path) as zf:
            raw = _read_metadata_from_zip(zf, name, uri)
    except zipfile.BadZipFile as exc:
        raise MetadataUnavailable(f"{path.name} is not a readable zip ({exc})", name=name) from None
    return parse_metadata(raw, filename=path.name, url=uri, sha256=digest.hexdigest(), source="local")

