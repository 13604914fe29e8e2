"""A source step's prebuilt wheel: the local wheel when the context holds it, else the step's own build.

One distribution, two ways to get it: a wheel built elsewhere (a CI artifact in wheels/) and the git commit or
sdist it was built from. A git or sdist step names the wheel with `prebuilt: {glob, why}`; there is one entry
for the distribution, so nothing is listed twice. The choice is made by what the build context holds:
- the builder stage bind-mounts the context's wheels/<step>/ (which holds only this step's matching wheel)
  and, when the wheel is there, takes it as the stage's wheel and neither fetches nor builds; else it
  builds from the source as it would without `prebuilt` (templates/steps/prebuilt.j2, an existence guard
  like a wheel set's local wheels);
- the resolver judges the wheel's own metadata when it is on the host, else the source's
  (DirectInstall.local), and the report names which (source `local` or the step's kind) and why;
- the identity names the choice: the wheel's file and sha256, or that it was missing and the source built.
The lock holds no choice: it does not depend on wheels/, so `lock --check` is the same whichever is there (an
sdist step's lock inputs name the glob: adding or dropping `prebuilt` makes its lock stale).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..fsutil import sha256_file
from ..workspace import InContext, InImage, Workspace
from .base import StagingError, Staging
from .wheels import read_allow_missing, read_wheel_glob
from .build_env import case_message

if TYPE_CHECKING:
    from ..plan import Plan, Step


@dataclass(frozen=True)
class Prebuilt:
    """The wheel in wheels/ that takes a source step's build's place when it is there."""

    glob: str
    why: str
    line: int

    @property
    def how_to_provide(self) -> str:  # what the resolver says when more than one wheel matches
        return f"keep one wheel matching {self.glob} in wheels/"


def read_prebuilt(r, node: Any, key: str, package: str) -> Prebuilt:
    m = r.mapping(node, key, {"glob", "why"}, {"glob", "why"}).value
    glob = read_wheel_glob(r, m["glob"], f"{key}.glob", package)
    return Prebuilt(glob, r.string(m["why"], f"{key}.why"), node.line)


def found_wheels(step: Step, plan: Plan, root) -> list:
    """The wheels in the project's wheels/ that the step's prebuilt glob matches, for the Plan's platform."""
    prebuilt = getattr(step.spec, "prebuilt", None)
    if prebuilt is None:
        return []
    return [w for w in plan.local_wheels(Workspace(root, plan.image).wheels_dir, prebuilt.glob) if w.is_file()]


def stage_prebuilt(step: Step, staging: Staging, noun: str) -> None:
    """The step's prebuilt wheel, if wheels/ holds it, into the context's wheels/<step>/ (made even empty:
    the builder stage mounts it all the same). More than one match is refused: the build would pick one."""
    if getattr(step.spec, "prebuilt", None) is None:
        return
    directory = staging.context / InContext.wheel_set(step.name)
    directory.mkdir(parents=True, exist_ok=True)
    found = found_wheels(step, staging.plan, staging.root) if step.active else []
    if len(found) > 1:
        raise StagingError(f"{noun} {step.name}: more than one wheel in wheels/ matches {step.spec.prebuilt.glob}; "
                           "keep one: " + " ".join(w.name for w in found))
    for wheel in found:
        (directory / wheel.name).write_bytes(wheel.read_bytes())


def prebuilt_identity(step: Step, plan: Plan, root, built_from: str) -> dict:
    """What the identity says of the choice: the wheel taken (file, sha256), or that it was missing and what
    was built instead. Empty for a step without `prebuilt`."""
    prebuilt = getattr(step.spec, "prebuilt", None)
    if prebuilt is None:
        return {}
    found = found_wheels(step, plan, root)
    if found:
        return {"prebuilt": {"glob": prebuilt.glob, "wheel": found[0].name, "sha256": sha256_file(found[0])}}
    return {"prebuilt": {"glob": prebuilt.glob, "missing": f"built from {built_from}"}}


@dataclass(frozen=True)
class PrebuiltGuard:
    """What templates/steps/prebuilt.j2 reads: where the wheel is mounted, and its messages."""

    prebuilt: Prebuilt
    directory: str  # the context's wheels/<step>/
    wheel_dir: str  # where the builder stage keeps the wheel the image installs
    multiple_message: str
    found_message: str
    missing_message: str

    @property
    def mount(self) -> str:
        return f"{InImage.WHEELS_MOUNT}-prebuilt"


def prebuilt_guard(step: Step, noun: str, wheel_dir: str, built_from: str) -> PrebuiltGuard | None:
    prebuilt = getattr(step.spec, "prebuilt", None)
    if prebuilt is None:
        return None
    where = f"wheels/{prebuilt.glob}"
    return PrebuiltGuard(
        prebuilt, InContext.wheel_set(step.name), wheel_dir,
        multiple_message=f"pinwheel: ERROR: {noun} {step.name}: more than one wheel matches {where}; keep one:",
        found_message=f"pinwheel: {noun} {step.name}: {where} is in the context: installing it instead of "
                      f"building {built_from}",
        missing_message=f"pinwheel: {noun} {step.name}: {where} is missing: building {built_from}",
    )


class SourceBuildView:
    """What a source build's view (git, sdist) says of its build environment and its prebuilt wheel, for the
    templates: mixed into the kind's KindView, which names ``wheel_dir`` and ``built_instead``."""

    wheel_dir: str  # where the builder stage leaves the wheel
    built_instead: str  # what is built when the prebuilt wheel is absent, for the log

    @property
    def env_cases(self) -> tuple:
        """The rows of its build environment per variant and architecture (build_env.py); empty without
        overrides: `env` is exported as it is."""
        return self.spec.env_cases

    @property
    def env_case_message(self) -> str:
        return case_message(self.kind.noun, self.step.name)

    @property
    def prebuilt(self):
        """The existence guard of its prebuilt wheel (templates/steps/prebuilt.j2); None without one."""
        return prebuilt_guard(self.step, self.kind.noun, self.wheel_dir, self.built_instead)


def read_source_allow_missing(r, m: dict, key: str) -> tuple:
    """A source step's `allow_missing`: the requirements its --no-deps install may leave unmet, each with a
    why (the keys of a wheel set package's)."""
    return read_allow_missing(r, m["allow_missing"], f"{key}.allow_missing") if "allow_missing" in m else ()


def source_allowances(step: Step) -> dict[str, dict[str, str]]:
    """An active source step's package -> {requirement name: why} from its `allow_missing`."""
    allowed = getattr(step.spec, "allow_missing", ())
    if not step.active or not allowed:
        return {}
    return {step.spec.package: {a.name: a.why for a in allowed}}
