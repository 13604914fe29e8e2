"""The bump report's values: what it says per package, and the bump it was asked for.

A BumpReport is what ``pinwheel bump --json`` prints (schema ``pinwheel.bump/1``,
documented in docs/bump.md): fields are only ever added within one schema version.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

SCHEMA = "pinwheel.bump/1"
#: Verdicts from the mildest to the most severe; a package shows its most severe one.
VERDICTS = ("ok", "unchecked", "add", "upgrade", "downgrade", "rebuild", "blocked")
SEVERITY = {v: i for i, v in enumerate(VERDICTS)}

BLOCKED_MEANING = ("blocked: the bumped image cannot be installed as the manifest stands, or would break at run "
                   "time; each blocked row names the nearest fix")


class BumpInputError(Exception):
    """A bump the user has to correct (unknown package, bad requirement, version not on the index): exit 2."""


# ------------------------------------------------------------------ input


def parse_bumps(texts: Iterable[str]) -> list[Requirement]:
    """``name==version`` strings as Requirements; BumpInputError for anything else."""
    out: list[Requirement] = []
    seen: set[str] = set()
    for text in texts:
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            raise BumpInputError(f"{text!r} is not a requirement like torch==2.14.1 ({exc})") from None
        specs = list(req.specifier)
        if req.url or req.marker is not None:
            raise BumpInputError(f"{text!r}: give a plain name==version, without URL or marker")
        if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
            raise BumpInputError(f"{text!r}: bump needs an exact version, e.g. {req.name}==2.14.1")
        try:
            Version(specs[0].version)
        except InvalidVersion:
            raise BumpInputError(f"{text!r}: {specs[0].version!r} is not a PEP 440 version") from None
        name = canonicalize_name(req.name)
        if name in seen:
            raise BumpInputError(f"{name} is bumped twice")
        seen.add(name)
        out.append(req)
    if not out:
        raise BumpInputError("nothing to bump: give name==version, e.g. torch==2.14.1")
    return out


# ------------------------------------------------------------------ results


@dataclass
class Fix:
    """The nearest change that unblocks a finding."""

    action: str  # upgrade | downgrade | change-pin | rebuild | keep | none
    package: str
    version: str | None
    text: str
    newest: str | None = None  # the newest version found that would also do
    checked: int = 0  # versions whose metadata was read to find it
    complete: bool = True  # False when lookups were cut short (limit, offline)
    also_needs: list[str] = field(default_factory=list)


@dataclass
class PackageRow:
    name: str
    today: str | None
    after: str | None
    source: str  # index | local | fallback | bump | move
    verdict: str
    to: str | None  # the version an upgrade/downgrade/add goes to
    reasons: list[str] = field(default_factory=list)
    fix: Fix | None = None
    pinned_by_manifest: bool = False
    no_deps: bool = False


@dataclass
class AbiFinding:
    name: str
    version: str
    filename: str | None
    source: str  # local | fallback | index
    abi_class: str  # unstable | stable | none | unknown
    declared_torch: str | None
    local_label: str | None
    built_against: dict | None
    provenance_mismatches: list[str]
    forward_compatible_from: str | None
    sample_unstable_symbols: list[str]
    verdict: str
    detail: str
    checked: str  # classified (ELF read, now or from the ABI cache) | pure-python (not downloaded) | unavailable


@dataclass
class RequirementFinding:
    parent: str
    parent_version: str
    requirement: str
    name: str
    extra: str | None
    enforced: bool  # False: the parent is installed with --no-deps (pip does not check it)
    today: str  # satisfied | violated | missing
    after: str
    change: str  # breaks | unblocks | still-violated | holds
    fix: Fix | None = None


@dataclass
class Move:
    name: str
    today: str | None
    after: str | None
    kind: str  # upgrade | downgrade | add | stays | dropped | conflict
    required_by: list[dict]
    newest_acceptable: str | None
    conflict: str | None = None
    fix: Fix | None = None


@dataclass
class SharedPinFinding:
    requirement: str
    name: str
    version: str
    status: str  # ok | changed-by-bump | unsatisfiable | pre-existing
    violations: list[dict]
    fixes: list[str]


@dataclass
class BumpReport:
    image: str
    variant: str
    target: dict
    installed_from: str  # lock | pip-per-wheel-set
    lock_dir: str | None
    bumps: list[dict]
    packages: list[PackageRow]
    abi: list[AbiFinding]
    requirements: list[RequirementFinding]
    moves: list[Move]
    shared_pins: list[SharedPinFinding]
    notes: list[str]
    summary: dict
    timing: dict
    platform: str = ""  # the container platform judged (linux/arm64)
    # bumped versions with no file this platform installs (a finding each, and the row blocked)
    missing_on_platform: list[dict] = field(default_factory=list)

    @property
    def blocked(self) -> bool:
        return self.summary["blocked"] > 0

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)
        return {"schema": SCHEMA, **data}
