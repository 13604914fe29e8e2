"""The typed manifest: what load() returns once every value is validated.

Plain frozen dataclasses. Each step's model lives with its kind
(pinwheel/steps/<kind>.py), which reads and checks it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from ..index.target import container_arch, container_platform, platform_for
from .source import ManifestError

if TYPE_CHECKING:
    from .packages import Package

MANIFEST_VERSION = 1
GATE_VARIABLES = ("cuda", "python", "torch", "arch")
# What `arch` is compared with: the container architecture (Docker's TARGETARCH).
GATE_ARCHES = ("amd64", "arm64")
TAG_FIELDS = ("date", "variant", "cuda", "torch", "python")
# The base's python where a variant names none (Debian, Ubuntu and the images built on them).
DEFAULT_INTERPRETER = "/usr/bin/python3"


@dataclass(frozen=True)
class ArchSpec:
    """`arch == arm64` or `arch != amd64`: architectures are names, not versions."""

    operator: str  # == or !=
    arch: str

    def contains(self, value: str, prereleases: bool = True) -> bool:
        return (value == self.arch) == (self.operator == "==")

    def __str__(self) -> str:
        return f"{self.operator}{self.arch}"


@dataclass(frozen=True)
class Gate:
    name: str
    when: str
    variable: str
    specifier: SpecifierSet | ArchSpec
    why: str
    line: int

    def holds(self, variant: "Variant") -> bool:
        """For the variant's platform: a per-platform Plan's variant carries that platform's tag."""
        value = {"cuda": variant.cuda, "python": variant.python, "torch": variant.torch,
                 "arch": variant.arch}[self.variable]
        return self.specifier.contains(value, prereleases=True)


@dataclass(frozen=True)
class NamedIndex:
    """A package index (or a find-links page, `flat`) the manifest names; a package that names it comes only
    from it (uv's explicit-index rule)."""

    name: str
    url: str
    why: str
    flat: bool  # a find-links page of links to files, not a PEP 503 simple index
    line: int


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
    # The container platforms it is built for (linux/amd64, linux/arm64); () is `platform`'s own only.
    platforms: tuple[str, ...] = ()
    # Platforms published without a GPU smoke (none runs there), and why: (linux/arm64, reason).
    no_gpu_smoke: tuple[tuple[str, str], ...] = ()

    @property
    def arch(self) -> str:
        """The container architecture of `platform` (amd64, arm64): what gates test as `arch`."""
        return container_arch(self.platform)

    @property
    def default_platform(self) -> str:
        """The container platform of `platform` (linux/amd64 for manylinux_2_36_x86_64)."""
        return container_platform(self.platform)

    @property
    def container_platforms(self) -> tuple[str, ...]:
        """Every container platform the variant is built for, in the manifest's order."""
        return self.platforms or (self.default_platform,)

    def for_platform(self, container: str) -> "Variant":
        """The variant as built for one of its container platforms: `platform` is that platform's tag."""
        if container not in self.container_platforms:
            raise ValueError(f"variant {self.name} is not built for {container} "
                             f"(platforms: {', '.join(self.container_platforms)})")
        if container == self.default_platform:
            return self
        return replace(self, platform=platform_for(self.platform, container))

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
    # What installs each lock slice in the image: uv (bind-mounted from a stage of its own, so it is in
    # no layer of the image) or pip. Both install --no-deps --require-hashes.
    installer: str = "uv"
    # How the wheel sets' layers are made: "chained" (each set's install runs on the image as the sets before
    # left it) or "parent-free" (each set installs in a stage of its own from the venv's skeleton, and the
    # image joins them with COPY --link, where the engine has it).
    layers: str = "chained"


INSTALLERS = ("uv", "pip")
LAYERS = ("chained", "parent-free")


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
    # What a person still has to fill in ("at: what"), as `import` writes it: never clean while any is left.
    todos: tuple[str, ...] = ()

    def variant(self, name: str) -> Variant:
        if name not in self.variants:
            known = ", ".join(self.variants)
            raise ManifestError(self.path, 0, "variants", f"no variant {name!r} (known: {known})")
        return self.variants[name]

    @property
    def wheel_sets(self) -> tuple[StepSpec, ...]:
        """The steps that are wheel sets, in order."""
        return tuple(s for s in self.steps if getattr(s, "is_wheel_set", False))  # type: ignore[misc]

    def packages(self) -> list[tuple[StepSpec, Package]]:
        return [(ws, p) for ws in self.wheel_sets for p in ws.packages]


def pinned_version(req: Requirement) -> str | None:
    """The version an exact `==` pin names, else None."""
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        return specs[0].version
    return None
