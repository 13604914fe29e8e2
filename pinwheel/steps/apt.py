"""apt steps: Debian packages, each pinned to an exact version with a why.

The building block of kind `apt`:
- manifest: an AptStep of DebianPackages (name, version, why). Names and
  versions follow Debian policy; a package is listed once in the whole manifest;
- plan: it names no Python distributions (Step.packages is empty);
- effect: none on the Python environment; what it installs is named for the report;
- lock: no part (the pins are in the manifest, which the image's identity hashes);
- partial: templates/steps/apt.j2, one RUN of
  `apt-get update && apt-get install -y --no-install-recommends name=version ...`
  that leaves no package lists or archives in its layer;
- invariant: after the last step, `dpkg-query` finds every package installed at
  its pin, or the build fails naming the package, the expected and the found
  version. After the last step, not after its own: a later step that moves a
  Debian package fails the build too, and apt itself takes a pin loosely
  (`name=VERSION` matches the version whatever its letter case).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..manifest.reader import Reader, StepReading
from .base import Effect, KindView, StepKind, read_unique

if TYPE_CHECKING:
    from ..plan import Step

# Debian policy 5.6.1: lowercase letters, digits, '+', '-', '.'; two characters at
# least, the first a letter or digit.
_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
# Debian policy 5.6.12: [epoch:]upstream_version[-debian_revision]. The epoch is an
# unsigned integer; the upstream version starts with a digit and holds letters,
# digits and '.', '+', '~' (and '-' only when a revision follows); the revision
# holds letters, digits and '.', '+', '~'.
_EPOCH = re.compile(r"^[0-9]+$")
_UPSTREAM = re.compile(r"^[0-9][A-Za-z0-9.+~-]*$")
_REVISION = re.compile(r"^[A-Za-z0-9.+~]+$")


@dataclass(frozen=True)
class DebianPackage:
    name: str
    version: str
    why: str
    line: int

    @property
    def pin(self) -> str:
        """What apt-get install is given: name=version."""
        return f"{self.name}={self.version}"


@dataclass(frozen=True)
class AptStep:
    kind: ClassVar[str] = "apt"

    name: str
    why: str
    gate: str | None
    packages: tuple[DebianPackage, ...]
    line: int


def debian_version_problem(version: str) -> str | None:
    """Why a string is not a Debian version under policy 5.6.12, or None if it is one."""
    epoch, colon, rest = version.partition(":")
    if not colon:
        epoch, rest = "", version
    elif not _EPOCH.match(epoch):
        return f"its epoch {epoch!r} is not an unsigned integer"
    upstream, dash, revision = rest.rpartition("-")
    if not dash:
        upstream, revision = rest, ""
    elif not _REVISION.match(revision):
        return f"its revision {revision!r} may hold only letters, digits, '.', '+' and '~'"
    if not _UPSTREAM.match(upstream):
        return (f"its upstream version {upstream!r} must start with a digit and hold only letters, digits, "
                "'.', '+', '~' (and '-' where a revision follows)")
    return None


def _package(r: Reader, node: Any, key: str) -> DebianPackage:
    m = r.mapping(node, key, {"name", "version", "why"}, {"name", "version", "why"}).value
    name = r.string(m["name"], f"{key}.name")
    if not _NAME.match(name):
        raise r.fail(m["name"].line, f"{key}.name", f"{name!r} is not a Debian package name (lowercase letters, "
                                                    "digits, '+', '-', '.'; at least two, the first a letter or digit)")
    version = r.string(m["version"], f"{key}.version")
    problem = debian_version_problem(version)
    if problem:
        raise r.fail(m["version"].line, f"{key}.version", f"{version!r} is not a Debian version "
                                                          f"([epoch:]upstream[-revision]): {problem}")
    return DebianPackage(name, version, r.string(m["why"], f"{key}.why"), node.line)


@dataclass(frozen=True)
class AptView(KindView):
    """An apt step as its partial reads it."""

    spec: AptStep

    @property
    def packages(self) -> tuple[DebianPackage, ...]:
        return self.spec.packages

    @property
    def mismatch_prefix(self) -> str:
        return f"pinwheel: ERROR: apt step {self.step.name}:"



class Apt(StepKind):
    name = "apt"
    noun = "apt step"

    def read(self, node: Any, key: str, reading: StepReading) -> AptStep:
        r = reading.reader
        m = r.mapping(node, key, {"name", "why", "gate", "packages"} | reading.common_keys,
                      {"name", "why", "packages"}).value
        name = reading.name(m["name"], f"{key}.name")
        gate = r.gate(m.get("gate"), f"{key}.gate", reading.gates)
        packages = read_unique(reading, m["packages"], key, self.name, _package, "listed twice")
        return AptStep(name, r.string(m["why"], f"{key}.why"), gate, tuple(packages), node.line)

    def effect(self, step: Step) -> Effect:
        """No Python distribution; the Debian packages, named for the report."""
        assert isinstance(step.spec, AptStep)
        return Effect(outside=tuple(f"apt {p.pin}" for p in step.spec.packages) if step.active else ())

    def invariant(self, step: Step) -> tuple[DebianPackage, ...]:
        """Every package it pins: after the last step, dpkg must find each installed at its version."""
        assert isinstance(step.spec, AptStep)
        return step.spec.packages

    def view(self, step: Step) -> AptView:
        assert isinstance(step.spec, AptStep)
        return AptView(step, step.spec, self)


KIND = Apt()
