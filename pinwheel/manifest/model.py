"""The typed manifest: what load() returns once every value is validated.

Plain frozen dataclasses. Each step's model lives with its kind
(pinwheel/steps/<kind>.py), which reads and checks it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from .source import ManifestError

if TYPE_CHECKING:
    from ..steps.wheels import Package, WheelSet

MANIFEST_VERSION = 1
GATE_VARIABLES = ("cuda", "python", "torch")
TAG_FIELDS = ("date", "variant", "cuda", "torch", "python")
# The base's python where a variant names none (Debian, Ubuntu and the images built on them).
DEFAULT_INTERPRETER = "/usr/bin/python3"


@dataclass(frozen=True)
class Gate:
    name: str
    when: str
    variable: str
    specifier: SpecifierSet
    why: str
    line: int

    def holds(self, variant: "Variant") -> bool:
        value = {"cuda": variant.cuda, "python": variant.python, "torch": variant.torch}[self.variable]
        return self.specifier.contains(value, prereleases=True)


@dataclass(frozen=True)
class SharedPin:
    requirement: Requirement
    needed_by: tuple[str, ...]
    why: str
    line: int

    @property
    def name(self) -> str:
        return canonicalize_name(self.requirement.name)

    @property
    def version(self) -> str:
        return pinned_version(self.requirement) or ""


@dataclass(frozen=True)
class Variant:
    name: str
    cuda: str
    torch: str
    python: str
    platform: str
    base: str  # an image reference, pinned by digest where it ends in @sha256:...
    tag: str
    torch_index_env: str | None
    line: int
    # Where packages go: "venv" (a fresh venv, pinwheel's own) or "base" (the base image's interpreter).
    environment: str = "venv"
    system_site_packages: bool = False  # venv only: see the base's packages
    # The base's python, when it is not /usr/bin/python3: environment base installs into it; a venv with
    # system_site_packages is made from it, and removals take packages out of it.
    interpreter: str | None = None
    base_variant: str | None = None  # the base is this other variant's image, built first

    @property
    def base_python(self) -> str:
        """The base image's interpreter: the declared one, else the system python."""
        return self.interpreter or DEFAULT_INTERPRETER

    @property
    def has_base_packages(self) -> bool:
        """Whether the environment sees the base's packages, so that a step can remove one of them."""
        return self.environment == "base" or self.system_site_packages

    @property
    def cuda_major(self) -> int:
        return Version(self.cuda).major

    def torch_index_url(self) -> str | None:
        """The extra index torch comes from, read from the variable the manifest names; None if unset."""
        if not self.torch_index_env:
            return None
        return os.environ.get(self.torch_index_env, "").strip() or None

    def torch_index_unset(self) -> str:
        return f"torch for variant {self.name} comes from the index in ${self.torch_index_env}, which is not set"


@dataclass(frozen=True)
class ImageSpec:
    name: str
    repository: str
    title: str
    venv: str


class StepSpec(Protocol):
    """One entry of the manifest's step list, in the model of its kind."""

    kind: ClassVar[str]  # the registry's name for its kind
    name: str
    why: str
    gate: str | None
    line: int


@dataclass(frozen=True)
class Manifest:
    path: Path
    sha256: str
    image: ImageSpec
    shared_pins: tuple[SharedPin, ...]
    gates: dict[str, Gate]
    variants: dict[str, Variant]
    steps: tuple[StepSpec, ...]  # in install order, of every kind

    def variant(self, name: str) -> Variant:
        if name not in self.variants:
            known = ", ".join(self.variants)
            raise ManifestError(self.path, 0, "variants", f"no variant {name!r} (known: {known})")
        return self.variants[name]

    @property
    def wheel_sets(self) -> tuple[WheelSet, ...]:
        """The steps that are wheel sets, in order."""
        return tuple(s for s in self.steps if s.kind == "wheels")  # type: ignore[misc]

    def packages(self) -> list[tuple[WheelSet, Package]]:
        return [(ws, p) for ws in self.wheel_sets for p in ws.packages]


def pinned_version(req: Requirement) -> str | None:
    """The version an exact `==` pin names, else None."""
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        return specs[0].version
    return None
