"""Small questions about versions and specifiers that the bump's judging asks again and again."""
from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version


def as_version(text: str | Version) -> Version:
    return text if isinstance(text, Version) else Version(str(text))


def admits(spec: SpecifierSet | str, version: str | None) -> bool:
    """Whether a specifier accepts a version (pre-releases included); never for no version or an invalid one."""
    if version is None:
        return False
    spec = spec if isinstance(spec, SpecifierSet) else SpecifierSet(spec)
    try:
        return spec.contains(as_version(version), prereleases=True)
    except InvalidVersion:
        return False


def spec_of(text: str) -> SpecifierSet:
    """The specifier of a requirement's text; an empty one (anything) when it does not parse."""
    try:
        return Requirement(text).specifier
    except InvalidRequirement:
        return SpecifierSet()


def direction(before: str | None, after: str | None) -> str:
    if before is None:
        return "add"
    if after is None:
        return "dropped"
    a, b = as_version(before), as_version(after)
    return "upgrade" if b > a else "downgrade" if b < a else "stays"


def lower_bound(spec_text: str | None) -> str | None:
    """The smallest version a specifier admits, where it names one (>=X, ==X, ~=X, >X)."""
    if not spec_text:
        return None
    try:
        spec = SpecifierSet(spec_text)
    except Exception:
        return None
    best: Version | None = None
    for s in spec:
        if s.operator in (">=", "==", "~=", "===", ">") and "*" not in s.version:
            try:
                v = Version(s.version)
            except InvalidVersion:
                continue
            best = v if best is None or v > best else best
    return str(best) if best else None


def minor(v: str) -> tuple[int, ...]:
    """(major, minor) of a version; () when it does not parse."""
    try:
        return Version(v).release[:2]
    except InvalidVersion:
        return ()


def minor_text(version: str) -> str:
    """'2.14' for '2.14.1'."""
    return ".".join(str(x) for x in minor(version))


def ordinal(v: Version) -> float:
    """A number that orders releases by distance (major, minor, patch), to find the nearest ones."""
    r = (v.release + (0, 0, 0))[:3]
    return r[0] * 1e6 + r[1] * 1e3 + r[2]
