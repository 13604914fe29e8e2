"""Render Dockerfiles from Plans: a pure function, byte-for-byte deterministic.

The template decides layout; this module only prepares values for it, and
quotes every manifest string for the shell it lands in. Each step is drawn by
its kind's partial (templates/steps/<kind>.j2) from the view its kind makes.
"""
from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import dataclass
from typing import Sequence

import jinja2
from packaging.utils import canonicalize_name

from .plan import Plan
from .steps import build_point, kind_of
from .workspace import InContext, InImage, LockFiles

__all__ = ["Layering", "PythonEnvironment", "dockerfile_groups", "dockerfile_name", "preflight_checks", "render_dockerfile", "render_dockerfiles", "shell_glob", "shell_quote"]

# The templates ship inside the package (pinwheel/templates), so an installed
# wheel renders exactly what the checkout does.
TEMPLATES_PACKAGE = ("pinwheel", "templates")


class RenderError(ValueError):
    """A value that no Dockerfile can hold where the template puts it (a line break in a shell word)."""


# What ends or hides a Dockerfile line: line breaks (BuildKit splits on \n, and \r ends a line too), other
# control characters, and the Unicode line and paragraph separators. A tab ends nothing (a script may hold one).
_UNSAFE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")  # a tab is whitespace in a line: kept
_NAMED = {"\n": "\\n", "\r": "\\r"}


def dockerfile_text(value: object) -> str:
    """Every value the templates write passes here (the Environment's finalize): comments included, so a
    manifest's file name or `why` can never end a line and start an instruction. Line breaks and control
    characters are written as visible escapes (\\n, \\x1b); a shell word never holds one (shell_quote)."""
    text = str(value)
    return _UNSAFE.sub(lambda m: _NAMED.get(m.group(), f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256
                                            else f"\\u{ord(m.group()):04x}"), text)


def shell_quote(value: object) -> str:
    """One shell word. A line break inside quotes would still end the Dockerfile line, so it is refused."""
    text = str(value)
    if _UNSAFE.search(text):
        raise RenderError(f"{text!r} holds a line break or control character; it cannot be a word in a RUN line")
    return shlex.quote(text)


def shell_glob(pattern: str) -> str:
    """Quote a wheel glob so that only its wildcards stay active: 'a-'*'.whl'."""
    parts = re.split(r"([*?])", pattern)
    return "".join(p if p in ("*", "?") else (shlex.quote(p) if p else "") for p in parts)


@dataclass(frozen=True)
class PreflightCheck:
    """One wheel the manifest requires (if_missing: fail), checked before anything is installed."""

    glob: str
    directory: str  # where the preflight's mount of wheels/ holds its wheel set's own wheels
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
            level, missing = p.missing_wheel()
            checks.append(PreflightCheck(
                glob=p.local.glob,
                directory=posixpath.join(InImage.WHEELS_MOUNT,
                                         posixpath.relpath(InContext.wheel_set(step.name), InContext.WHEELS)),
                gates=gates,
                condition=" && ".join(f'[ "${{{g}}}" = "1" ]' for g in gates),
                missing_message=f"pinwheel: {level}: {missing}",
                multiple_message=f"pinwheel: ERROR: {p.multiple_wheels()}",
            ))
    return tuple(checks)


@dataclass(frozen=True)
class Segment:
    """A run of the image stage's steps, ending where a later source build starts its builder stage.

    A build that compiles against installed packages (`needs`, without isolation) starts from the image as
    it is after the last step installing them, so the image stage is cut there into named stages; the
    builds that start from one follow it. Without such builds the image is one segment, `image`.
    """

    name: str
    steps: tuple  # (view, the gates first used by that step, declared just before it) of its steps, in order
    builds: tuple  # (view, the step the build starts after) of each build that starts from this segment
    previous: str | None  # the segment it continues; None for the first
    gates: tuple = ()  # the gates declared before this segment starts: a later stage declares them again


def segments(plan: Plan, views: Sequence) -> tuple[Segment, ...]:
    """The image stage cut at every step a later build starts from (see Segment)."""
    starts: dict[int, list] = {}
    for step, view in zip(plan.steps, views):
        point = build_point(step, plan.steps)
        if point is not None:
            starts.setdefault(point.index, []).append((view, point))
    by_name = {g.name: g for g in plan.gates}
    out: list[Segment] = []
    run: list = []
    declared: list = []  # gates in scope so far, in the order they were declared
    in_scope: tuple = ()  # the gates declared when the current segment starts
    for step, view in zip(plan.steps, views):
        new = tuple(by_name[g] for g in step_gates(step) if by_name[g] not in declared)
        declared.extend(new)
        run.append((view, new))
        if step.index in starts and step.index != plan.steps[-1].index:
            out.append(Segment(f"image-{step.name}", tuple(run), tuple(starts[step.index]),
                               out[-1].name if out else None, in_scope))
            run, in_scope = [], tuple(declared)
    out.append(Segment("image", tuple(run), (), out[-1].name if out else None, in_scope))
    return tuple(out)


@dataclass(frozen=True)
class Layering:
    """How one Dockerfile's wheel sets make their layers: parent-free (a stage each, joined with COPY
    --link) or chained; ``note`` says, in one line, why a manifest's parent-free layers are chained here."""

    parent_free: bool
    note: str | None = None

    @classmethod
    def of(cls, plan: Plan, copy_link: bool = True) -> "Layering":
        """What the plan asks (image.layers), on an engine that has COPY --link (``copy_link``) or not."""
        if plan.layers != "parent-free":
            return cls(False)
        if plan.variant.environment != "venv":
            return cls(False, "environment: base: the wheel sets install into the base's own python and share "
                              "its site-packages, so their layers stay chained")
        if not copy_link:
            return cls(False, "the engine has no COPY --link (BuildKit before v0.10): the wheel sets' layers "
                              "are chained")
        return cls(True)


def apart_stages(plan: Plan, views: Sequence, layering: Layering) -> tuple:
    """(view, the gates its install reads) of each step installed in a stage of its own (see Layering)."""
    if not layering.parent_free:
        return ()
    return tuple((view, step_gates(step)) for step, view in zip(plan.steps, views) if kind_of(step).installs_apart)


def step_gates(step) -> tuple[str, ...]:
    """The gates a step's install reads: its own and its packages' (and their fallbacks'), in order.

    Each gate ARG is declared just before the first step that reads it: BuildKit puts every ARG in scope
    into each later RUN's cache key, so variants that differ only in a gate share every layer before it.
    """
    names = [step.gate] + [p.gate for p in getattr(step, "packages", ())]
    return tuple(dict.fromkeys(g for g in names if g))


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(*TEMPLATES_PACKAGE),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        finalize=dockerfile_text,
    )
    env.filters["sh"] = shell_quote
    env.filters["sh_glob"] = shell_glob
    return env


@dataclass(frozen=True)
class PythonEnvironment:
    """Where a Dockerfile's steps install: pinwheel's venv (maybe seeing the base's site), or the base's python.

    The words the templates put in front of pip and the payload, already quoted.
    """

    kind: str  # "venv" | "base"
    venv: str
    system_site_packages: bool
    base_python: str  # the base's interpreter: environment base installs with it, removals run with it
    installer: str = "pip"  # what installs the wheel sets' slices: "uv" or "pip"

    @classmethod
    def of(cls, plan: Plan) -> "PythonEnvironment":
        v = plan.variant
        return cls(v.environment, plan.venv, v.system_site_packages, v.base_python, plan.installer)

    @property
    def uv(self) -> bool:
        return self.installer == "uv"

    @property
    def install(self) -> str:
        """The words in front of `--no-deps ...` in a wheel set's step: uv's pip interface aimed at the
        environment's interpreter, or pip."""
        if not self.uv:
            return f"{self.pip} install"
        target = shell_quote(posixpath.join(self.venv, "bin", "python")) if self.kind == "venv" else \
            shell_quote(self.base_python)
        extra = " --break-system-packages" if self.kind == "base" else ""
        return f"{InImage.UV} pip install --python {target}{extra}"

    @property
    def installer_setup(self) -> str:
        """The installer stage's command: uv from installer.txt, hash-checked, into InImage.INSTALLER_DIR
        (a venv of its own; on a base that installs into its own python, pip --target)."""
        lock = f"{InImage.LOCK_DIR}/{LockFiles.INSTALLER}"
        if self.kind == "base":
            return (f"export PIP_BREAK_SYSTEM_PACKAGES=1; {shell_quote(self.base_python)} -m pip install --no-deps "
                    f"--require-hashes --target {InImage.INSTALLER_DIR} -r {lock}")
        return (f"python3 -m venv {InImage.INSTALLER_DIR}; {InImage.INSTALLER_DIR}/bin/pip install --no-deps "
                f"--require-hashes -r {lock}")

    @property
    def base_packages(self) -> bool:
        """The environment holds the base's packages: the invariant checks them against the inventory."""
        return self.kind == "base" or self.system_site_packages

    @property
    def python(self) -> str:
        """The interpreter that runs the smoke payload: the venv's on PATH, else the base's."""
        return "python" if self.kind == "venv" else shell_quote(self.base_python)

    @property
    def python_json(self) -> str:
        return json.dumps("python" if self.kind == "venv" else self.base_python)

    @property
    def pip(self) -> str:
        """What installs: the venv's pip on PATH, else the base's python -m pip."""
        return "pip" if self.kind == "venv" else f"{shell_quote(self.base_python)} -m pip"

    @property
    def break_system_packages(self) -> bool:
        """pip RUNs into the base's python pass PEP 668's EXTERNALLY-MANAGED marker."""
        return self.kind == "base"

    @property
    def first_command(self) -> str:
        """The first RUN: make the venv, or find the base's python and its pip."""
        if self.kind == "base":
            return f"{shell_quote(self.base_python)} -m pip --version"
        if self.system_site_packages:
            return f"{shell_quote(self.base_python)} -m venv --system-site-packages {shell_quote(self.venv)}"
        return f"python3 -m venv {shell_quote(self.venv)}"

    @property
    def skeleton_command(self) -> str:
        """The first RUN under parent-free layers: the venv without setuptools, as a Python 3.12 venv has
        none. A set whose slice holds setuptools (torch 2.13 requires it) then adds its files instead of
        replacing the skeleton's, which a layer joined with COPY --link cannot remove."""
        pip = shell_quote(posixpath.join(self.venv, "bin", "pip"))
        return f"{self.first_command} && {pip} uninstall --yes --quiet setuptools"


def group_key(plan: Plan) -> tuple:
    """What one Dockerfile cannot vary by ARG: where the steps install."""
    v = plan.variant
    return (v.environment, v.system_site_packages, v.base_python if v.has_base_packages else None)


def dockerfile_groups(plans: Sequence[Plan]) -> dict[str, list[Plan]]:
    """The Dockerfiles of one image, by file name, each with the variants it serves (in manifest order).

    Variants that install into the same kind of environment share one file, gated by ARGs; the file of
    the first variant's group is `Dockerfile`, every other group's is `Dockerfile.<its first variant>`.
    """
    groups: dict[tuple, list[Plan]] = {}
    for plan in plans:
        groups.setdefault(group_key(plan), []).append(plan)
    out: dict[str, list[Plan]] = {}
    for i, members in enumerate(groups.values()):
        out["Dockerfile" if i == 0 else f"Dockerfile.{members[0].variant.name}"] = members
    return out


def dockerfile_name(plans: Sequence[Plan], variant: str) -> str:
    """The file name of the Dockerfile that builds one variant."""
    for name, members in dockerfile_groups(plans).items():
        if any(p.variant.name == variant for p in members):
            return name
    raise ValueError(f"no Plan of variant {variant!r}")


def render_dockerfiles(plans: Sequence[Plan]) -> dict[str, str]:
    """Every Dockerfile of one image, by file name (see dockerfile_groups)."""
    return {name: render_dockerfile(members) for name, members in dockerfile_groups(plans).items()}


def invariant_views(plan: Plan, views: Sequence) -> list:
    """The views whose invariant the image asserts after the last step: not one whose distributions a later
    step of the same gate (or of none) removes again, since the smoke's static level checks those are gone."""
    out = []
    for i, (step, view) in enumerate(zip(plan.steps, views)):
        if not view.invariant:
            continue
        later = {canonicalize_name(n) for s in plan.steps[i + 1:] if s.gate in (None, step.gate)
                 for n in kind_of(s).effect(s).removes}
        if not later & {canonicalize_name(n) for n in kind_of(step).provides(step)}:
            out.append(view)
    return out


def render_dockerfile(plans: Sequence[Plan], copy_link: bool = True) -> str:
    """One Dockerfile for variants of one image that install into one kind of environment; gates select
    per variant. ``copy_link``: whether the engine that builds it has COPY --link (the committed file
    assumes it does; see Layering)."""
    if not plans:
        raise ValueError("render_dockerfile needs at least one Plan")
    first = plans[0]
    if any(p.image != first.image for p in plans):
        raise ValueError("all Plans rendered into one Dockerfile must be of one image")
    if any(group_key(p) != group_key(first) for p in plans):
        raise ValueError("variants that install into different environments need one Dockerfile each: "
                         "render_dockerfiles")
    preflight = preflight_checks(first)
    views = [kind_of(s).view(s) for s in first.steps]
    layering = Layering.of(first, copy_link)
    apart = apart_stages(first, views, layering)
    image_segments = segments(first, views)
    checked = invariant_views(first, views)
    environment = PythonEnvironment.of(first)
    text = _environment().get_template("Dockerfile.j2").render(
        manifest=first.manifest_path,
        image=first.image,
        variants=[p.variant.name for p in plans],
        default_variant=first.variant.name,
        base=first.variant.base,
        base_variant=first.variant.base_variant,
        venv=first.venv,
        environment=environment,
        first_command=environment.skeleton_command if apart else environment.first_command,
        gates=first.gates,
        gate_defaults={g.name: first.build_args[g.name] for g in first.gates},
        build_args=first.build_args,  # a partial's own ARGs default to the first variant's values
        steps=views,
        invariant_steps=checked,
        staged=any(hasattr(v, "stage") for v in views),  # a builder stage precedes the installer's
        segments=image_segments,
        layers_note=layering.note,
        apart_stages=apart,
        apart=frozenset(view.name for view, _gates in apart),
        first_stage=InImage.VENV_STAGE if apart else image_segments[0].name,
        preflight=preflight,
        preflight_gates=[g.name for g in first.gates if any(g.name in c.gates for c in preflight)],
        paths=InImage,
        context_paths=InContext,
        preflight_dir=posixpath.dirname(InImage.PREFLIGHT_MARK),
        lock_files=LockFiles,
    )
    return text
