"""Render Dockerfiles from Plans: a pure function, byte-for-byte deterministic.

The template decides layout; this module only prepares values for it, and
quotes every manifest string for the shell it lands in. Each step is drawn by
its kind's partial (templates/steps/<kind>.j2) from the view its kind makes.
"""
from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Sequence

import jinja2

from .plan import Plan
from .steps import kind_of
from .steps.wheels import StepView, missing_wheel, multiple_wheels
from .workspace import InImage, LockFiles

__all__ = ["StepView", "missing_wheel", "multiple_wheels", "preflight_checks", "render_dockerfile", "shell_glob",
           "shell_quote"]

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
        steps=[kind_of(s).view(s) for s in first.steps],
        preflight=preflight,
        preflight_gates=[g.name for g in first.gates if any(g.name in c.gates for c in preflight)],
        paths=InImage,
        preflight_dir=posixpath.dirname(InImage.PREFLIGHT_MARK),
        lock_files=LockFiles,
    )
    return text
