"""A Python distribution as the manifest pins it (Package) and as a Plan installs it (PlannedPackage).

Plain frozen dataclasses below the step kinds: a wheel set reads Packages, and every stage after the
manifest (the resolver, the lock, the reports) works with PlannedPackages, whichever kind named them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .manifest import pinned_version


@dataclass(frozen=True)
class Provenance:
    torch: str | None
    cuda: str | None
    arch_list: tuple[str, ...]


@dataclass(frozen=True)
class LocalWheel:
    glob: str
    built_against: Provenance
    if_missing: str
    how_to_provide: str
    line: int


@dataclass(frozen=True)
class AllowMissing:
    """A base requirement of a --no-deps package that the image may leave unmet (absent, or at a
    version outside its specifier), and why that is intended."""

    name: str  # canonical project name of the requirement
    why: str
    line: int


@dataclass(frozen=True)
class Exclude:
    """A requirement of a package that the image leaves out on purpose, and why: the lock drops it (and
    whatever only it reached), the report shows the edge as excluded, the build's pip check allows it."""

    name: str  # canonical project name of the requirement
    why: str
    line: int


@dataclass(frozen=True)
class Verify:
    """A package's own check: modules to import and/or a Python snippet that must exit 0, and where it runs."""

    imports: tuple[str, ...]
    python: str | None
    needs: str  # cpu: the build's invariant; driver: the smoke's import level; gpu: its gpu level
    line: int
    check: str | None = None  # a check the smoke payload provides (NAMED_CHECKS), run once for all who name it


@dataclass(frozen=True)
class Package:
    requirement: Requirement
    no_deps: bool
    why: str | None
    gate: str | None
    local: LocalWheel | None
    fallback: "Package | None"
    line: int
    # A deliberate replacement that contradicts another package's requirement (judged `overridden`,
    # not `violated`); it must say why. Rendering does not change with it.
    override: bool = False
    # Base requirements --no-deps drops that the image may leave unmet; any other unmet one fails the build.
    allow_missing: tuple[AllowMissing, ...] = ()
    # `needs: driver`: its modules import only with a GPU driver; the build skips them (with needs_why),
    # the smoke's import level imports them
    needs: str | None = None
    needs_why: str | None = None
    verify: Verify | None = None
    # Requirements left out of the image on purpose (manifest `exclude:`), each with its why.
    exclude: tuple[Exclude, ...] = ()
    index: Any = None  # the NamedIndex it comes from, only (manifest `index: NAME`); None: the default index

    @property
    def name(self) -> str:
        return canonicalize_name(self.requirement.name)

    @property
    def version(self) -> str | None:
        return pinned_version(self.requirement)


def _of_package(field_name: str, default: Any) -> property:
    """A PlannedPackage's view of one field of the Package it came from; ``default`` where there is none."""
    return property(lambda self: getattr(self.package, field_name) if self.package else default,
                    doc=f"the Package's {field_name}")


@dataclass(frozen=True)
class PlannedPackage:
    """A package as a Plan installs it: the manifest's Package it came from (None for what a kind installs
    directly: a git commit, an asset, an sdist) and what the Plan decides beside it. The stages after the
    manifest may set its requirement, version, --no-deps, why and fallback (a local wheel's version read from
    its metadata, a bump's new pin); everything else is the Package's own."""

    name: str
    requirement: str
    version: str | None
    no_deps: bool
    why: str | None
    fallback: "PlannedPackage | None"
    active: bool  # False when its gate (or its wheel set's) is off for this variant
    package: Package | None = None  # what the manifest says of it, where a manifest package named it

    # What the manifest says of it, read from its Package (a direct install has none: the defaults).
    gate = _of_package("gate", None)
    local = _of_package("local", None)
    override = _of_package("override", False)  # a deliberate replacement that contradicts a requirement
    allow_missing = _of_package("allow_missing", ())  # dropped base requirements the image may leave unmet
    needs = _of_package("needs", None)  # "driver": its modules are imported by the smoke, not at build time
    needs_why = _of_package("needs_why", None)
    verify = _of_package("verify", None)  # its own check (manifest `verify:`)
    exclude = _of_package("exclude", ())  # its requirements left out on purpose (manifest `exclude:`)
    index = _of_package("index", None)  # the NamedIndex it comes from, only (manifest `index: NAME`)

    @property
    def pinned(self) -> str:
        return f"{self.name}=={self.version}" if self.version else self.requirement

    def missing_wheel(self) -> tuple[str, str]:
        """(ERROR or WARNING, what it means) for its local wheel missing, under its policy.

        The same words in the image's guards and in `build`'s check on the host.
        """
        assert self.local is not None
        where = f"wheels/{self.local.glob}"
        if self.local.if_missing == "fallback" and self.fallback:
            flags = " --no-deps" if self.fallback.no_deps else ""
            return "WARNING", f"{where} is missing; installing fallback {self.fallback.requirement}{flags}"
        if self.local.if_missing == "skip":
            return "WARNING", f"{where} is missing; skipping {self.name}. To include it: {self.local.how_to_provide}"
        return "ERROR", f"{where} is missing and {self.name} is required. {self.local.how_to_provide}"

    def multiple_wheels(self) -> str:
        """What it means that more than one wheel in wheels/ matches its local wheel's glob."""
        assert self.local is not None
        return f"more than one wheel in wheels/ matches {self.local.glob}; keep one:"
