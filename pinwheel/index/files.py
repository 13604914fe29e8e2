"""Project pages of a Simple API index: the files they list (PEP 691 JSON and PEP 503 HTML)."""
from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass
from typing import Any, Mapping
from urllib.parse import urldefrag, urljoin, urlsplit

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    NormalizedName,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=1 << 16)
def parse_version(text: str) -> Version:
    """A version, parsed once per text (a page lists the same versions many times)."""
    return Version(text)


def file_version(filename: str) -> Version:
    """The version a file's name gives; a name IndexFile would reject raises as it does. A wheel name's second
    dash-separated field is its version (the name field has no dashes): far cheaper than parsing every tag."""
    if filename.endswith(".whl"):
        if filename.count("-") not in (4, 5):
            raise InvalidWheelFilename(f"invalid wheel filename: {filename!r}")
        return parse_version(filename.split("-", 2)[1])
    return parse_sdist_filename(filename)[1]


def is_yanked_entry(entry: Mapping[str, Any]) -> bool:
    """IndexFile.is_yanked of a file entry (as IndexFile.to_json writes one), without building the file."""
    yanked = entry.get("yanked", False)
    return yanked is not False and yanked is not None


@functools.lru_cache(maxsize=1024)
def _requires_python(text: str) -> SpecifierSet | None:
    """A Requires-Python value, parsed once per text (most files of a project share a few); None when invalid."""
    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        return None


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
            file_version(self.filename)
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
        return file_version(self.filename) if self.filename.endswith(".whl") else self._parsed[1]

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
        spec = _requires_python(self.requires_python)
        return True if spec is None else spec.contains(python_version, prereleases=True)

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


def _hash_value(value: Any) -> tuple[bool, str | None]:
    """Interpret a PEP 691 ``core-metadata`` / PEP 503 ``data-core-metadata`` value."""
    if value is None or value is False:
        return False, None
    if isinstance(value, dict):
        sha = value.get("sha256")
        return True, sha if isinstance(sha, str) else None
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
    entry = _file_entry(filename, url, sha256, requires_python, yanked, core_metadata, size)
    return None if entry is None else IndexFile.from_json(entry)


def _file_entry(
    filename: str,
    url: str,
    sha256: str | None,
    requires_python: str | None,
    yanked: Any,
    core_metadata: Any,
    size: int | None = None,
) -> dict[str, Any] | None:
    """A listed file as IndexFile.to_json writes it, or None for a name IndexFile rejects: a page lists
    thousands of files and a report looks at a few, so the file itself is built when one is asked for."""
    has_meta, meta_sha = _hash_value(core_metadata)
    if isinstance(yanked, str) and yanked == "":
        yanked = True  # HTML: data-yanked without a reason
    try:
        file_version(filename)
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        log.debug("skipping file with an unrecognised name: %s", filename)
        return None
    return {
        "filename": filename,
        "url": url,
        "sha256": sha256,
        "requires_python": requires_python or None,
        "yanked": (yanked if isinstance(yanked, (bool, str)) else bool(yanked)) if yanked else False,
        "has_metadata": has_meta,
        "metadata_sha256": meta_sha,
        "size": size,
    }


def parse_json_page(data: Mapping[str, Any], page_url: str) -> list[IndexFile]:
    """Files of a PEP 691 project page (json_page_entries, each built)."""
    return [IndexFile.from_json(entry) for entry in json_page_entries(data, page_url)]


def json_page_entries(data: Mapping[str, Any], page_url: str) -> list[dict[str, Any]]:
    """The file entries of a PEP 691 project page, as IndexFile.to_json writes them. A page that is not an
    object with a list of files is a ValueError; an entry that does not read as a file (not an object, no
    string name or URL, a URL that does not parse) is passed over, as a link of an HTML page is."""
    if not isinstance(data, Mapping) or not isinstance(data.get("files", []), list):
        raise ValueError("not a PEP 691 project page (an object with a list of files)")
    entries = []
    for entry in data.get("files", ()):
        e = _json_entry(entry, page_url)
        if e is not None:
            entries.append(e)
    return entries


def _absolute(page_url: str, url: str) -> str:
    """The file's URL against its page, without its fragment. Most indexes give every file an absolute URL
    with nothing to resolve: that one is taken as it is (urljoin's parse was half of reading a page)."""
    if url.startswith(("https://", "http://")) and url.isprintable() and not url.endswith(" ") \
            and "#" not in url and "/." not in url and "\\" not in url:
        return url
    return urldefrag(urljoin(page_url, url))[0]


def _json_entry(entry: Any, page_url: str) -> dict[str, Any] | None:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("filename"), str) \
            or not isinstance(entry.get("url"), str):
        log.debug("skipping a page entry that is not a file: %.200r", entry)
        return None
    try:
        url = _absolute(page_url, entry["url"])
    except ValueError:
        log.debug("skipping a file whose URL does not parse: %.200r", entry["url"])
        return None
    hashes = entry.get("hashes")
    sha256 = hashes.get("sha256") if isinstance(hashes, Mapping) else None
    size = entry.get("size")
    requires_python = entry.get("requires-python")
    return _file_entry(
        entry["filename"],
        url,
        sha256 if isinstance(sha256, str) else None,
        requires_python if isinstance(requires_python, str) else None,
        entry.get("yanked", False),
        entry.get("core-metadata", entry.get("dist-info-metadata")),
        size if isinstance(size, int) and not isinstance(size, bool) else None,
    )


@functools.cache
def _link_parser() -> type:
    """The anchor collector of a PEP 503 page; html.parser loads with the first HTML page read."""
    import html.parser

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

    return _LinkParser


def parse_html_page(text: str, page_url: str) -> list[IndexFile]:
    """Files of a PEP 503 project page."""
    parser = _link_parser()()
    parser.feed(text)
    parser.close()
    try:
        base = urljoin(page_url, parser.base) if parser.base else page_url
    except ValueError:  # a <base> that does not parse: links are read against the page's own URL
        base = page_url
    files = []
    for attrs, label in parser.anchors:
        href = attrs.get("href")
        if not href:
            continue
        try:
            url, frag = urldefrag(urljoin(base, href))
            filename = os.path.basename(urlsplit(url).path) or label
        except ValueError:  # e.g. an unclosed IPv6 host: not a link to a file
            log.debug("skipping a link whose URL does not parse: %.200r", href)
            continue
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

