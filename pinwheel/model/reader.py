"""Typed getters over the composed YAML: each returns a checked value or raises a located error.

Every top-level section and every step kind reads its entries with a Reader,
so every error has one shape: file:line: key: message.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from .manifest import Gate, SharedPin, pinned_version
from .source import BAD_CATEGORIES, ManifestError, Node, Scalar, join, show

# Names that end up in image references, ARGs, paths and shell words: keep them
# to characters no shell or Dockerfile gives a meaning to.
STEP_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")


class Reader:
    """Walks the composed tree with typed getters that raise located errors."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, line: int, key: str, message: str) -> ManifestError:
        return ManifestError(self.path, line, key, message)

    def mapping(self, node: Any, key: str, allowed: set[str], required: set[str] = frozenset()) -> Node:
        if not isinstance(node, Node) or not isinstance(node.value, dict):
            raise self.fail(node.line, key, f"must be a mapping, got {node_kind(node)}")
        for k in node.value:
            if k not in allowed:
                hint = closest(k, allowed)
                raise self.fail(node.lines[k], join(key, k), f"unknown key{hint}; allowed: {', '.join(sorted(allowed))}")
        for k in sorted(required):
            if k not in node.value:
                raise self.fail(node.key_line, join(key, k), "required key is missing")
        return node

    def sequence(self, node: Any, key: str, min_items: int = 0) -> list[Any]:
        if not isinstance(node, Node) or not isinstance(node.value, list):
            raise self.fail(node.line, key, f"must be a list, got {node_kind(node)}")
        if len(node.value) < min_items:
            raise self.fail(node.line, key, f"needs at least {min_items} item(s)")
        return node.value

    def string(self, node: Any, key: str, pattern: re.Pattern[str] | None = None, what: str = "") -> str:
        if not isinstance(node, Scalar) or not isinstance(node.value, str):
            # Numbers like 13.0 would silently become floats: insist on quotes.
            raise self.fail(node.line, key, f"must be a string, got {node_kind(node)} (quote it)")
        value = node.value
        if not value.strip():
            raise self.fail(node.line, key, "must not be empty")
        if "\n" in value or "\r" in value:
            raise self.fail(node.line, key, "must be a single line")
        bad = next((c for c in value if unicodedata.category(c) in BAD_CATEGORIES), None)
        if bad is not None:
            raise self.fail(node.line, key, f"holds the control character U+{ord(bad):04X}; only printable text is allowed")
        if pattern and not pattern.match(value):
            raise self.fail(node.line, key, f"{show(value)} is not a valid {what or 'value'}")
        return value

    def image_ref(self, node: Any, key: str) -> str:
        """A container image reference, as written (it is valid as a Dockerfile FROM)."""
        from ..imageref import WHAT, parse_image_ref
        value = self.string(node, key)
        try:
            parse_image_ref(value)
        except ValueError as exc:
            raise self.fail(node.line, key, f"{show(value)} is not a valid {WHAT}: {exc}") from None
        return value

    def boolean(self, node: Any, key: str) -> bool:
        if not isinstance(node, Scalar) or not isinstance(node.value, bool):
            raise self.fail(node.line, key, f"must be true or false, got {node_kind(node)}")
        return node.value

    def requirement(self, node: Any, key: str) -> Requirement:
        text = self.string(node, key)
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            reason = str(exc).splitlines()[0] if str(exc) else "unparsable"
            raise self.fail(node.line, key, f"not a PEP 508 requirement: {reason}") from None
        if req.url:
            raise self.fail(node.line, key, "direct URL requirements are not allowed; use a local wheel")
        if req.marker is not None:
            raise self.fail(node.line, key, "environment markers are not allowed here; use a gate")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", req.name):
            raise self.fail(node.line, key, f"unsafe package name {req.name!r}")
        if pinned_version(req) is None:
            raise self.fail(node.line, key, f"{text!r} must be an exact pin (name==version)")
        try:
            Version(pinned_version(req) or "")
        except InvalidVersion:
            raise self.fail(node.line, key, f"{text!r} pins an invalid PEP 440 version") from None
        return req

    def version(self, node: Any, key: str) -> str:
        text = self.string(node, key)
        try:
            Version(text)
        except InvalidVersion:
            raise self.fail(node.line, key, f"{text!r} is not a PEP 440 version") from None
        return text

    def gate(self, node: Any, key: str, gates: dict[str, Any]) -> str | None:
        """The name of a declared gate, or None where the key is absent."""
        if node is None:
            return None
        name = self.string(node, key)
        if name not in gates:
            known = ", ".join(gates) or "none declared"
            raise self.fail(node.line, key, f"unknown gate {name!r} (gates: {known})")
        return name


def node_kind(node: Any) -> str:
    if isinstance(node, Node):
        return "a mapping" if isinstance(node.value, dict) else "a list"
    value = getattr(node, "value", None)
    return "nothing" if value is None else type(value).__name__


def closest(key: str, allowed: set[str]) -> str:
    import difflib  # only a bad key pays for it

    match = difflib.get_close_matches(key, sorted(allowed), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


@dataclass
class StepReading:
    """What the entries of the manifest's step list share while they are read.

    A kind reads each of its entries with ``reader``; ``name`` checks a step's
    name (unique over the whole list), and ``claims`` is each kind's record of
    what its steps have taken so far (a package listed twice is refused).
    """

    reader: Reader
    key: str  # "steps", or "wheel_sets": the older spelling, whose entries are all wheel sets
    gates: dict[str, Gate]
    shared_pins: tuple[SharedPin, ...]
    variants: dict[str, Any] = field(default_factory=dict)  # name -> Variant: where a step's packages go
    indexes: dict[str, Any] = field(default_factory=dict)  # name -> NamedIndex: where a package may come from
    names: dict[str, int] = field(default_factory=dict)
    claims: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def common_keys(self) -> set[str]:
        """Keys an entry may hold besides its kind's own: `kind`, where the list names kinds."""
        return {"kind"} if self.key == "steps" else set()

    @property
    def noun(self) -> str:
        return "step" if self.key == "steps" else "wheel set"

    def name(self, node: Any, key: str) -> str:
        name = self.reader.string(node, key, STEP_NAME, "step name (lowercase letters, digits, '-')")
        if name in self.names:
            raise self.reader.fail(node.line, key, f"duplicate {self.noun} name (first on line {self.names[name]})")
        self.names[name] = node.line
        return name

    def claimed(self, kind: str) -> dict[str, Any]:
        return self.claims.setdefault(kind, {})

    def builds(self, gate: str | None = None) -> list[Any]:
        """Each variant as built for each of its container platforms, where ``gate`` (if any) holds.

        A platform selects inputs (an asset per architecture, a gate on `arch`), so a step is checked
        against every platform a variant lists, not only against the variant's own `platform`."""
        every = [v.for_platform(p) for v in self.variants.values() for p in v.container_platforms]
        return [v for v in every if gate is None or self.gates[gate].holds(v)]
