"""Names, versions and requirement strings, without `packaging`."""
from __future__ import annotations

import re


def normalize(name: str) -> str:
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


_REQ_RE = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*"
    r"(?:\[(?P<extras>[^\]]*)\])?\s*(?P<rest>.*)$"
)


def parse_requirement(text: str) -> dict:
    """Split a PEP 508 string into name, extras, specifier and marker.

    Only splits; it does not validate. A URL requirement keeps its URL in
    `specifier`.
    """
    req, _, marker = text.partition(";")
    m = _REQ_RE.match(req)
    if not m:
        raise ValueError(f"not a requirement: {text!r}")
    spec = m.group("rest").strip()
    if spec.startswith("(") and spec.endswith(")"):
        spec = spec[1:-1].strip()
    extras = [e.strip() for e in (m.group("extras") or "").split(",") if e.strip()]
    return {
        "name": m.group("name"),
        "normalized": normalize(m.group("name")),
        "extras": extras,
        "specifier": spec,
        "marker": marker.strip() or None,
    }


_SIMPLE_VERSION = re.compile(r"^v?(\d+(?:\.\d+)*)(?:\+([a-z0-9]+(?:[._-][a-z0-9]+)*))?$", re.I)
_SIMPLE_CLAUSE = re.compile(r"^(~=|==|!=|<=|>=|<|>)\s*(\d+(?:\.\d+)*)$")


def _release(text: str):
    m = _SIMPLE_VERSION.match(text.strip())
    if not m:
        return None, None
    return tuple(int(p) for p in m.group(1).split(".")), m.group(2)


def _cmp(a: tuple, b: tuple) -> int:
    n = max(len(a), len(b))
    a = a + (0,) * (n - len(a))
    b = b + (0,) * (n - len(b))
    return (a > b) - (a < b)


def specifier_satisfied(version: str, specifier: str):
    """True/False where both sides are plain release versions, else None.

    Handles ==, !=, <=, >=, <, >, ~= on release-only versions (a local label on
    the installed version is ignored, as PEP 440 does for specifiers without
    one). Anything else (pre/post/dev releases, wildcards, ===, URLs) is not
    evaluated: the caller reports what is installed instead of a verdict.
    """
    rel, _local = _release(version)
    if rel is None:
        return None
    clauses = [c.strip() for c in specifier.split(",") if c.strip()]
    if not clauses:
        return True
    for clause in clauses:
        m = _SIMPLE_CLAUSE.match(clause)
        if not m:
            return None
        op, want = m.group(1), tuple(int(p) for p in m.group(2).split("."))
        c = _cmp(rel, want)
        if op == "==":
            ok = c == 0
        elif op == "!=":
            ok = c != 0
        elif op == "<=":
            ok = c <= 0
        elif op == ">=":
            ok = c >= 0
        elif op == "<":
            ok = c < 0
        elif op == ">":
            ok = c > 0
        else:  # ~=X.Y[.Z]: >= X.Y.Z and same prefix minus the last part
            if len(want) < 2:
                return None
            prefix = want[:-1]
            ok = c >= 0 and tuple(rel[: len(prefix)]) + (0,) * max(0, len(prefix) - len(rel)) == prefix
        if not ok:
            return False
    return True


def pin_matches(installed: str, pinned: str):
    """(matches, note). Exact string, or equal release versions; a pin without a
    local label accepts an installed local label (PEP 440 `==`)."""
    if installed.strip().lower() == pinned.strip().lower():
        return True, None
    irel, ilocal = _release(installed)
    prel, plocal = _release(pinned)
    if irel is None or prel is None:
        return False, None
    if _cmp(irel, prel) != 0:
        return False, None
    if plocal is None:
        return True, (f"local label +{ilocal}" if ilocal else None)
    return (ilocal or "").lower() == plocal.lower(), None


def satisfies(version: str, specifier: str):
    """specifier_satisfied, else pip's vendored packaging where the simple rules cannot tell."""
    sat = specifier_satisfied(version, specifier)
    if sat is None:
        try:
            from pip._vendor.packaging.specifiers import InvalidSpecifier, SpecifierSet  # optional: only if pip is there
        except ImportError:
            return None
        try:
            sat = SpecifierSet(specifier).contains(version, prereleases=True)
        except InvalidSpecifier:
            return None
    return sat
