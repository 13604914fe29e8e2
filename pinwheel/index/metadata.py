"""What a wheel declares (its METADATA), read from a METADATA document or out of the wheel itself.

A wheel is read on disk, downloaded, or over HTTP Range requests (only the zip
central directory and the METADATA member); METADATA is checked against the
wheel's RECORD where that can be read cheaply.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

from packaging._parser import Op, Value, Variable
from packaging.markers import Marker, default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, NormalizedName, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from ..fsutil import sha256_file
from .errors import HashMismatch, MetadataUnavailable
from .transfer import METADATA as METADATA_BOUND, TooLarge

if TYPE_CHECKING:
    import zipfile  # imported where a wheel is opened

log = logging.getLogger(__name__)

# Smallest ranged read after the first one (local header + METADATA member).
MIN_RANGE = 16 * 1024


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
    # packaging's metadata module and the email package load only for a document not yet in the parsed store
    import email.parser  # noqa: PLC0415

    from packaging.metadata import Metadata  # noqa: PLC0415

    try:
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


def parsed_fields(meta: DistMetadata) -> dict:
    """What a METADATA document declares, as JSON text: kept by the parsed store (index.parsed).

    Each requirement is kept parsed (requirement_parts), as the one a parse of its text gives, so that a later
    run builds it without tokenizing it again."""
    return {
        "name": meta.name,
        "version": str(meta.version),
        "requires_dist": [requirement_parts(Requirement(str(r))) for r in meta.requires_dist],
        "requires_python": str(meta.requires_python) if meta.requires_python is not None else None,
        "provides_extra": list(meta.provides_extra),
        "invalid_requires": list(meta.invalid_requires),
    }


def from_parsed(data: dict, *, filename: str | None = None, url: str | None = None, sha256: str | None = None,
                source: str = "") -> DistMetadata | None:
    """The DistMetadata that parsed_fields() wrote, or None where it no longer reads back (parse the raw file)."""
    try:
        rp = data["requires_python"]
        return DistMetadata(
            name=canonicalize_name(data["name"]),
            version=Version(data["version"]),
            requires_dist=tuple(requirement_from_parts(r) for r in data["requires_dist"]),
            requires_python=SpecifierSet(rp) if rp is not None else None,
            provides_extra=tuple(canonicalize_name(e) for e in data["provides_extra"]),
            filename=filename,
            url=url,
            sha256=sha256,
            source=source,
            invalid_requires=tuple(data["invalid_requires"]),
        )
    except (KeyError, TypeError, ValueError, IndexError, InvalidRequirement, InvalidSpecifier, InvalidVersion):
        return None


# A requirement kept parsed: [name, url, extras, specifier text, marker tree]. The marker tree is packaging's own
# (markers.Marker._markers, as Requirement builds it): lists and "and"/"or" kept as they are, and each comparison
# as {"c": [left kind, left, op, right kind, right]} with kind "var" or "val". Building a Requirement from it
# skips the tokenizer, which was most of a warm report's METADATA time; packaging is pinned to one release.
_NODE_KINDS = {"var": Variable, "val": Value}


def requirement_parts(req: Requirement) -> list:
    marker = _marker_tree(req.marker._markers) if req.marker is not None else None
    return [req.name, req.url, sorted(req.extras), str(req.specifier), marker]


def requirement_from_parts(parts: list) -> Requirement:
    name, url, extras, specifier, marker = parts
    if not isinstance(name, str) or not isinstance(specifier, str):
        raise TypeError("not a stored requirement")
    req = Requirement.__new__(Requirement)
    req.name, req.url, req.extras = name, url, set(extras)
    req.specifier = _specifier_set(specifier)
    req.marker = None
    if marker is not None:
        req.marker = Marker.__new__(Marker)
        req.marker._markers = _marker_list(marker)
        req.marker._serialized = None
    return req


@functools.lru_cache(maxsize=4096)
def _specifier_set(text: str) -> SpecifierSet:
    """A stored requirement's specifier, parsed once per text: the METADATA of a set repeats a few hundred
    specifiers thousands of times, and nothing changes a requirement's SpecifierSet once it is built."""
    return SpecifierSet(text)


def _marker_tree(atom):
    if isinstance(atom, tuple):
        left, op, right = atom
        return {"c": [_kind(left), left.value, op.value, _kind(right), right.value]}
    if isinstance(atom, str):
        return atom
    return [_marker_tree(a) for a in atom]


def _kind(node) -> str:
    return "var" if isinstance(node, Variable) else "val"


def _marker_list(tree):
    if isinstance(tree, dict):
        lk, left, op, rk, right = tree["c"]
        return (_NODE_KINDS[lk](left), Op(op), _NODE_KINDS[rk](right))
    if tree in ("and", "or"):
        return tree
    if isinstance(tree, list):
        return [_marker_list(a) for a in tree]
    raise TypeError("not a stored marker")


class RangeFile:
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


def read_metadata_from_zip(zf: zipfile.ZipFile, project: str | None, url: str) -> bytes:
    """The METADATA member of an open wheel, checked against its RECORD."""
    member = _find_metadata_member(zf.namelist(), project)
    info = zf.getinfo(member)
    if info.file_size > METADATA_BOUND.value() or info.compress_size > METADATA_BOUND.value():
        raise TooLarge(METADATA_BOUND, f"{url} ({member})", info.file_size)  # refused before a byte of it is read
    data = zf.read(member)  # zipfile checks the CRC, and stops at the declared size
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
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            raw = read_metadata_from_zip(zf, name, uri)
    except zipfile.BadZipFile as exc:
        raise MetadataUnavailable(f"{path.name} is not a readable zip ({exc})", name=name) from None
    return parse_metadata(raw, filename=path.name, url=uri, sha256=sha256_file(path), source="local")

