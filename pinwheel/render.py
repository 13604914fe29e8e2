"""Render Dockerfiles from Plans: a pure function, byte-for-byte deterministic.

The template decides layout; this module only prepares values for it, and
quotes every manifest string for the shell it lands in.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Sequence

import jinja2

from .plan import Plan, PlannedPackage, Step

# The templates ship inside the package (pinwheel/templates), so an installed
# wheel renders exactly what the checkout does.
TEMPLATES_PACKAGE = ("pinwheel", "templates")


def shell_quote(value: object) -> str:
    return shlex.quote(str(value))


def shell_glob(pattern: str) -> str:
    """Quote a wheel glob so that only its wildcards stay active: 'a-'*'.whl'."""
    parts = re.split(r"([*?])", pattern)
    return "".join(p if p in ("*", "?") else (shlex.quote(p) if p else "") for p in parts)


@dataclass(frozen=True)
class LocalView:
    package: PlannedPackage
    fallback_lock_file: str | None
    multiple_message: str
    missing_message: str

    def __getattr__(self, name: str):  # the template reads package fields directly
        return getattr(self.package, name)


@dataclass(frozen=True)
class StepView:
    step: Step
    packages: tuple[PlannedPackage | LocalView, ...]
    locals: tuple[LocalView, ...]

    @property
    def index_packages(self) -> tuple[PlannedPackage, ...]:
        return tuple(p for p in self.step.packages if not p.local)

    @property
    def gate_off_message(self) -> str:
        return f"pinwheel: {self.step.gate}=0: skipping wheel set {self.step.name}"

    def __getattr__(self, name: str):
        return getattr(self.step, name)


def fallback_lock_file(step: Step, package: PlannedPackage) -> str:
    return f"{step.index:02d}-{step.name}.fallback-{package.name}.txt"


def missing_wheel(p: PlannedPackage) -> tuple[str, str]:
    """(ERROR or WARNING, what it means) for a missing local wheel under its policy.

    The same words in the image's guards and in `build`'s check on the host.
    """
    assert p.local is not None
    where = f"wheels/{p.local.glob}"
    if p.local.if_missing == "fallback" and p.fallback:
        flags = " --no-deps" if p.fallback.no_deps else ""
        return "WARNING", f"{where} is missing; installing fallback {p.fallback.requirement}{flags}"
    if p.local.if_missing == "skip":
        return "WARNING", f"{where} is missing; skipping {p.name}. To include it: {p.local.how_to_provide}"
    return "ERROR", f"{where} is missing and {p.name} is required. {p.local.how_to_provide}"


def multiple_wheels(p: PlannedPackage) -> str:
    assert p.local is not None
    return f"more than one wheel in wheels/ matches {p.local.glob}; keep one:"


def _local_view(step: Step, p: PlannedPackage) -> LocalView:
    level, missing = missing_wheel(p)
    return LocalView(
        package=p,
        fallback_lock_file=fallback_lock_file(step, p) if p.fallback else None,
        multiple_message=f"pinwheel: ERROR: {multiple_wheels(p)}",
        missing_message=f"pinwheel: {level}: {missing}",
    )


@dataclass(frozen=True)
class PreflightCheck:
    """One wheel the manifest requires (if_missing: fail), checked before anything is installed."""

    glob: str
    gates: tuple[str, ...]  # the wheel set's gate and the package's: the check runs when all are on
    condition: str  # those gates as one shell test; empty when ungated
    missing_message: str
    multiple_message: str


def preflight_checks(plan: Plan) -> tuple[PreflightCheck, ...]:
    """Every fail-policy local wheel of every step, active in this variant or not (gates decide in the build)."""
    checks = []
    for step in plan.steps:
        for p in step.packages:
            if not (p.local and p.local.if_missing == "fail"):
                continue
            gates = tuple(dict.fromkeys(g for g in (step.gate, p.gate) if g))
            level, missing = missing_wheel(p)
            checks.append(PreflightCheck(
                glob=p.local.glob,
                gates=gates,
                condition=" && ".join(f'[ "${{{g}}}" = "1" ]' for g in gates),
                missing_message=f"pinwheel: {level}: {missing}",
                multiple_message=f"pinwheel: ERROR: {multiple_wheels(p)}",
            ))
    return tuple(checks)


def _step_view(step: Step) -> StepView:
    locals_ = tuple(_local_view(step, p) for p in step.packages if p.local)
    by_name = {lv.package.name: lv for lv in locals_}
    return StepView(step, tuple(by_name.get(p.name, p) for p in step.packages), locals_)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(*TEMPLATES_PACKAGE),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["sh"] = shell_quote
    env.filters["sh_glob"] = shell_glob
    return env


def render_dockerfile(plans: Sequence[Plan]) -> str:
    """One Dockerfile for every variant of one image; gates select per variant."""
    if not plans:
        raise ValueError("render_dockerfile needs at least one Plan")
    first = plans[0]
    if any(p.image != first.image for p in plans):
        raise ValueError("all Plans rendered into one Dockerfile must be of one image")
    preflight = preflight_checks(first)
    text = _environment().get_template("Dockerfile.j2").render(
        manifest=first.manifest_path,
        image=first.image,
        variants=[p.variant.name for p in plans],
        default_variant=first.variant.name,
        base=first.variant.base,
        venv=first.venv,
        gates=first.gates,
        gate_defaults={g.name: first.build_args[g.name] for g in first.gates},
        steps=[_step_view(s) for s in first.steps],
        preflight=preflight,
        preflight_gates=[g.name for g in first.gates if any(g.name in c.gates for c in preflight)],
    )
    return text
