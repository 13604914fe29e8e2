"""The Plan: the typed value every stage after the manifest works from.

A Plan is one variant of one image, as the manifest decides it: the target
environment, the ordered install steps (each of a kind, pinwheel/steps) with
their packages and gates, the pins. Its Resolution is what later stages add:
every requirement edge with its verdict once resolved, the lock's and the base
inventory's state; each returns a new Plan (with_resolution).
Render, build, smoke, publish and the reports read it; none of them reaches
back into the manifest.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from .index.target import container_arch, container_platform, target_environment, target_platforms, target_tags
from .distributions import Inventory
from .manifest import Gate, Manifest, ManifestError, StepSpec, Variant
from .steps import KINDS
from .model.packages import PlannedPackage  # the Plan's package; other stages import it from here
from .workspace import LockFiles, inside_project

Verdict = Literal["satisfied", "violated", "suppressed", "unchecked", "marker-excluded", "extra-only",
                  "base-broken", "overridden", "excluded", "removed"]


@dataclass(frozen=True)
class Target:
    """Where the image runs: markers and wheel tags are evaluated for this, not the host."""

    python: str
    platform: str
    cuda: str

    def platforms(self) -> list[str]:
        """The platform tags the target's pip accepts, most specific first."""
        return target_platforms(self.platform)

    def marker_environment(self) -> dict[str, str]:
        """PEP 508 marker values of the target (not the host)."""
        return target_environment(self.python, self.platform)


@dataclass(frozen=True)
class Step:
    """One install step of the Plan, of one kind: pinwheel.steps.kind_of(step) is its building block."""

    index: int
    name: str
    why: str
    gate: str | None
    packages: tuple[PlannedPackage, ...]  # the Python distributions it names (wheel sets); none for other kinds
    active: bool
    kind: str  # its kind's name in the registry
    spec: StepSpec  # its manifest entry, in its kind's model

    @property
    def lock_file(self) -> str:
        return LockFiles.step(self.index, self.name)


@dataclass(frozen=True)
class Edge:
    """One requirement of one installed package, judged for the target."""

    parent: str
    parent_version: str
    requirement: str
    name: str
    verdict: Verdict
    found: str | None
    detail: str
    extra: str | None = None


@dataclass(frozen=True)
class Installed:
    """One distribution in the finished image, and the step that put it there."""

    name: str
    version: str
    step: str
    source: str  # index | local | fallback
    no_deps: bool
    extras: tuple[str, ...]
    why: str | None


@dataclass(frozen=True)
class Hazard:
    """A later install step that changes what an earlier one installed."""

    step: str
    package: str
    before: str
    after: str
    earlier_step: str
    cause: str


@dataclass(frozen=True)
class Removal:
    """A step that takes a distribution out (of the base, or of what an earlier step installed)."""

    step: str
    package: str
    version: str | None  # what was installed before; None: nothing by that name was there
    earlier_step: str | None
    why: str
    # the packages left with their requirement on it unmet on purpose: name -> why (the remove step's breaks)
    breaks: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Clash:
    """No release of a package satisfies everything one install step asks of it.

    Plain pip stops at the first of these; the report lists every one, each
    naming all the requirements involved and why each candidate was refused.
    """

    step: str
    package: str
    wanted: tuple[str, ...]  # "flashinfer-python==0.6.15.post1 (from the manifest)", ...
    reasons: tuple[str, ...]  # why each candidate release was refused
    kept: str | None  # the version judged in its place: the step's own pin, else what an earlier step installed


@dataclass(frozen=True)
class Unjudged:
    """Something the resolver needed and could not read (index unreachable, cache miss)."""

    package: str
    reason: str


@dataclass(frozen=True)
class LockState:
    """How the variant's committed lock relates to the manifest: ok, stale, missing or ignored."""

    status: str
    detail: str


@dataclass(frozen=True)
class Resolution:
    """What resolving, the lock and the base's inventory add to a Plan. Each stage that fills a part of it
    returns a new Plan with a new Resolution (Plan.with_resolution); none changes the one it was given."""

    # Filled by resolve(): the image as it will be installed.
    installed: tuple[Installed, ...] = ()
    edges: tuple[Edge, ...] = ()
    hazards: tuple[Hazard, ...] = ()
    # The churn one plain `pip install` per wheel set would cause; a lock removes it.
    unlocked_hazards: tuple[Hazard, ...] = ()
    # Base packages the manifest replaces on purpose (it pins them itself, or marks them override).
    replacements: tuple[Hazard, ...] = ()
    removals: tuple[Removal, ...] = ()
    locked: bool = False  # resolved as the committed lock installs it (else as plain pip would)
    clashes: tuple[Clash, ...] = ()
    unjudged: tuple[Unjudged, ...] = ()
    # Set by the lock check: how the committed lock relates to the manifest.
    lock_state: LockState | None = None
    # Set from the committed inventory, for environment: base — what the base image already holds (step 0).
    base_inventory: Inventory | None = None
    inventory_state: LockState | None = None  # ok | stale | missing, as for the lock


@dataclass(frozen=True)
class Plan:
    """What the manifest decides for one variant on one platform; ``resolution`` is what later stages add."""

    image: str
    repository: str
    title: str
    venv: str
    manifest_path: str
    manifest_sha256: str
    variant: Variant
    target: Target
    gates: tuple[Gate, ...]
    build_args: dict[str, str]
    steps: tuple[Step, ...]
    shared_pins: dict[str, str]
    # Who needs each shared pin (the manifest's needed_by), by pin name.
    shared_pin_needs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # The manifest's todo: list (values import could not know): each one is unchecked, never clean.
    todos: tuple[str, ...] = ()
    # A platform other than the variant's own `platform` (variant.platform is then that platform's tag):
    # its container architecture (arm64), which names its lock directory. None: the variant's own platform.
    platform_arch: str | None = None
    # What installs the lock slices in the image: "uv" (the lock pins it, installer.txt) or "pip".
    installer: str = "uv"
    # How the wheel sets' layers are made (ImageSpec.layers): "chained" or "parent-free".
    layers: str = "chained"
    resolution: Resolution = field(default_factory=Resolution)

    def with_resolution(self, **changes) -> Plan:
        """This Plan with those parts of its Resolution replaced (the resolver's, the lock's, the inventory's)."""
        return replace(self, resolution=replace(self.resolution, **changes))

    @property
    def container_platform(self) -> str:
        """The container platform it is built for (linux/amd64, linux/arm64)."""
        return container_platform(self.target.platform)

    @property
    def label(self) -> str:
        """The variant's name, with the platform where it is not the variant's own: cu130, cu130 linux/arm64."""
        return self.variant.name + (f" {self.container_platform}" if self.platform_arch else "")

    @property
    def on_base_environment(self) -> bool:
        return self.variant.environment == "base"

    def local_wheels(self, wheels_dir: Path, glob: str) -> list[Path]:
        """What a local package's glob matches in wheels_dir, for this Plan's platform.

        A variant that lists its platforms keeps only the wheels its target can install, so an x86_64
        and an aarch64 wheel side by side are one match for each platform. Other variants: every match.
        """
        matches = sorted(wheels_dir.glob(glob)) if wheels_dir.is_dir() else []
        for match in matches:  # wheels_dir is Workspace.wheels_dir, <root>/wheels: nothing outside <root> is read
            inside_project(wheels_dir.parent, match, "local wheel")
        if not self.variant.platforms:
            return matches
        tags = frozenset(target_tags(self.target.python, self.target.platforms()))

        def fits(path: Path) -> bool:
            try:
                return bool(parse_wheel_filename(path.name)[3] & tags)
            except InvalidWheelFilename:
                return True  # not a wheel name: left for the checks that name it

        return [w for w in matches if fits(w)]

    def packages(self, active_only: bool = True) -> list[PlannedPackage]:
        return [p for s in self.steps for p in s.packages if p.active or not active_only]

    def manifest_pins(self) -> dict[str, str]:
        """Every exact version the manifest demands for this variant."""
        pins = dict(self.shared_pins)
        for p in self.packages():
            if p.version and not p.local:
                pins[p.name] = p.version
        return pins


def plan_platforms(manifest: Manifest, variant_name: str) -> list[Plan]:
    """One unresolved Plan per container platform of the variant, its own platform first."""
    variant = manifest.variant(variant_name)
    order = [variant.default_platform] + [p for p in variant.container_platforms if p != variant.default_platform]
    return [plan_variant(manifest, variant_name, platform=p) for p in order]


def plan_variant(manifest: Manifest, variant_name: str, platform: str | None = None) -> Plan:
    """The unresolved Plan: steps, gates and pins, before any metadata is read.

    ``platform`` (linux/arm64) picks one of the variant's container platforms; None is its own
    (`platform`'s). Gates, the target and the lock are that platform's.
    """
    declared = manifest.variant(variant_name)
    try:
        variant = declared.for_platform(platform or declared.default_platform)
    except ValueError as exc:
        raise ManifestError(manifest.path, declared.line, f"variants.{variant_name}.platforms", str(exc)) from None
    gate_on = {name: g.holds(variant) for name, g in manifest.gates.items()}
    steps = []
    for i, spec in enumerate(manifest.steps, start=1):
        step_on = gate_on[spec.gate] if spec.gate else True
        packages = KINDS[spec.kind].packages(spec, gate_on, step_on)
        steps.append(Step(i, spec.name, spec.why, spec.gate, packages, step_on, spec.kind, spec))
    return Plan(
        image=manifest.image.name,
        repository=manifest.image.repository,
        title=manifest.image.title,
        venv=manifest.image.venv,
        manifest_path=manifest.path.name,
        manifest_sha256=manifest.sha256,
        variant=variant,
        target=Target(variant.python, variant.platform, variant.cuda),
        gates=tuple(manifest.gates.values()),
        build_args={"VARIANT": variant.name, **{k: "1" if v else "0" for k, v in gate_on.items()},
                    **{k: v for spec in manifest.steps for k, v in KINDS[spec.kind].build_args(spec, variant).items()}},
        steps=tuple(steps),
        shared_pins={p.name: p.version for p in manifest.shared_pins},
        shared_pin_needs={p.name: p.needed_by for p in manifest.shared_pins},
        platform_arch=container_arch(variant.platform) if variant is not declared else None,
        installer=manifest.image.installer,
        layers=manifest.image.layers,
        todos=manifest.todos,
    )

