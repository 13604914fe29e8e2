"""remove steps: take distributions out of the base's Python environment, each with a why.

The building block of kind `remove`:
- manifest: a RemoveStep of RemovedPackages (name, why). Names are PEP 508
  names, compared canonically; a package is removed once in the whole manifest.
  A variant the step is active in must see the base's packages (environment:
  base, or a venv with system_site_packages): a fresh venv holds nothing to
  remove, and the manifest says so at the step's line;
- plan: it names no distribution it installs (Step.packages is empty);
- effect: it removes its packages (Effect.removes, canonical names);
- lock: no slice; the lock lists what stays removed after the last step
  (expect.json's `removed`);
- partial: templates/steps/remove.j2, one RUN of
  `<the base's python> -m pip uninstall -y <names>`. The removal runs with the
  interpreter whose site holds the packages: the base's own (environment base,
  and a venv with system_site_packages, whose pip would refuse to touch a
  package outside the venv), with PIP_BREAK_SYSTEM_PACKAGES=1 for the
  EXTERNALLY-MANAGED marker of Debian's and Ubuntu's pythons;
- breaks: a removed package's `breaks` ({name, why} each) names the packages that require it and are left
  with that requirement unmet on purpose: the report judges those edges `removed`, with the why; any other
  requirement on it stays a violation;
- invariant: after the last step, each removed distribution is gone
  (importlib.metadata finds it nowhere), unless a later step installs it again;
  the smoke payload's static level checks expect.json's `removed`, naming the
  package.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from packaging.utils import canonicalize_name

from ..model.reader import Reader, StepReading
from ..model.source import show
from .base import ADOPT_PIP_UNINSTALL, Effect, KindView, StepKind, read_unique

if TYPE_CHECKING:
    from ..plan import Step

_PACKAGE_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)  # PEP 508


@dataclass(frozen=True)
class BrokenBy:
    """A package that requires the removed one and is left with that requirement unmet on purpose."""
    name: str  # canonical (PEP 503)
    why: str
    line: int


@dataclass(frozen=True)
class RemovedPackage:
    name: str  # canonical (PEP 503)
    why: str
    line: int
    breaks: tuple[BrokenBy, ...] = ()


@dataclass(frozen=True)
class RemoveStep:
    kind: ClassVar[str] = "remove"

    name: str
    why: str
    gate: str | None
    packages: tuple[RemovedPackage, ...]
    line: int


def _name(r: Reader, node: Any, key: str) -> str:
    name = r.string(node, key)
    if not _PACKAGE_NAME.fullmatch(name):
        raise r.fail(node.line, key, f"{show(name)} is not a package name (PEP 508: letters, digits, '.', '_', '-')")
    return canonicalize_name(name)


def _breaks(r: Reader, node: Any, key: str, removed: str) -> tuple[BrokenBy, ...]:
    out: list[BrokenBy] = []
    for i, item in enumerate(r.sequence(node, key, 1)):
        m = r.mapping(item, f"{key}[{i}]", {"name", "why"}, {"name", "why"}).value
        name = _name(r, m["name"], f"{key}[{i}].name")
        if name == removed or any(b.name == name for b in out):
            raise r.fail(m["name"].line, f"{key}[{i}].name", f"{name} is named twice, or is the removed package")
        out.append(BrokenBy(name, r.string(m["why"], f"{key}[{i}].why"), item.line))
    return tuple(out)


def _package(r: Reader, node: Any, key: str) -> RemovedPackage:
    m = r.mapping(node, key, {"name", "why", "breaks"}, {"name", "why"}).value
    name = _name(r, m["name"], f"{key}.name")
    breaks = _breaks(r, m["breaks"], f"{key}.breaks", name) if "breaks" in m else ()
    return RemovedPackage(name, r.string(m["why"], f"{key}.why"), node.line, breaks)


@dataclass(frozen=True)
class RemoveView(KindView):
    """A remove step as its partial reads it."""

    spec: RemoveStep

    @property
    def packages(self) -> tuple[RemovedPackage, ...]:
        return self.spec.packages



class Remove(StepKind):
    name = "remove"
    noun = "remove step"
    adopts = ADOPT_PIP_UNINSTALL

    def read(self, node: Any, key: str, reading: StepReading) -> RemoveStep:
        r = reading.reader
        m = r.mapping(node, key, {"name", "why", "gate", "packages"} | reading.common_keys,
                      {"name", "why", "packages"}).value
        name = reading.name(m["name"], f"{key}.name")
        gate = r.gate(m.get("gate"), f"{key}.gate", reading.gates)
        packages = read_unique(reading, m["packages"], key, self.name, _package, "removed twice")
        step = RemoveStep(name, r.string(m["why"], f"{key}.why"), gate, tuple(packages), node.line)
        for variant in reading.builds(gate):
            if not variant.has_base_packages:
                raise r.fail(node.line, key, f"variant {variant.name} installs into a fresh venv, which holds "
                                             "nothing to remove: remove steps need environment: base, or a venv "
                                             "with system_site_packages: true")
        return step

    def effect(self, step: Step) -> Effect:
        """It takes its packages out of the environment (canonical names), when its gate is on."""
        assert isinstance(step.spec, RemoveStep)
        return Effect(removes=tuple(p.name for p in step.spec.packages) if step.active else ())

    def view(self, step: Step) -> RemoveView:
        assert isinstance(step.spec, RemoveStep)
        return RemoveView(step, step.spec, self)


KIND = Remove()
