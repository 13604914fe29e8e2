"""Cut the lock into the files the Dockerfile installs: one slice per step, one file per fallback.

A package the manifest lists goes to its own step; any other to the earliest
step whose roots reach it through the locked versions' Requires-Dist (read for
the target python and platform, following requested extras, never through a
``--no-deps`` package). Every locked package lands in exactly one slice (or one
fallback file), and that is checked.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ..plan import Plan, PlannedPackage, Step
from ..steps import kind_of
from ..workspace import LockFiles
from .format import LockedPackage, LockError


@dataclass(frozen=True)
class Unit:
    """A file the Dockerfile installs with --no-deps: a step's slice or a fallback file."""

    file: str
    step: Step
    roots: tuple[PlannedPackage, ...]  # the manifest packages installed from this file
    fallback_for: str | None = None


@dataclass(frozen=True)
class Assignment:
    """Which file installs each locked package, and why it is there."""

    unit_of: dict[str, str]  # package -> file
    reason: dict[str, str]  # package -> "manifest" | "via <root>"
    warnings: tuple[str, ...] = ()


def units(plan: Plan) -> tuple[list[Unit], list[Unit]]:
    """The files of a Plan's lock that the Dockerfile installs: (step slices, fallback files), in step order."""
    steps: list[Unit] = []
    fallbacks: list[Unit] = []
    for s in plan.steps:
        index_pkgs = kind_of(s).slice_packages(s)
        if index_pkgs:
            steps.append(Unit(LockFiles.step(s.index, s.name), s, tuple(p for p in index_pkgs if p.active)))
        for p in s.packages:
            if p.local is not None and p.fallback is not None:
                roots = (p.fallback,) if p.active else ()
                fallbacks.append(Unit(LockFiles.fallback(s.index, s.name, p.name), s, roots, fallback_for=p.name))
    return steps, fallbacks


RequiresFn = Callable[[str, str, frozenset], Iterable[Requirement]]


def _reach(
    roots: Sequence[PlannedPackage],
    versions: Mapping[str, str],
    requires: RequiresFn,
    no_deps: set[str],
    missing: dict[tuple[str, str], str],
    walked: dict[str, set[str]],
    provided: Mapping[str, str] = {},
) -> dict[str, str]:
    """Every locked package the roots reach -> the root that reached it first (BFS), short of what an earlier
    unit already walked.

    ``walked`` (name -> the extras followed from it) is shared by the units of one pass, in step order. A
    package an earlier unit walked with these extras has its whole closure placed by then (in that unit or
    before), so a later unit stops there: each package's requirements are read once per pass rather than once
    per step that reaches it, which grew with steps × packages."""
    reached: dict[str, str] = {}
    queue: deque[tuple[str, frozenset, str]] = deque()
    for r in roots:
        queue.append((r.name, frozenset(canonicalize_name(e) for e in Requirement(r.requirement).extras), r.name))
    while queue:
        name, extras, root = queue.popleft()
        in_base = name not in versions and name in provided
        if name not in versions and not (in_base and extras):
            continue
        if not in_base:
            reached.setdefault(name, root)
        if name in no_deps:
            continue
        done = walked.setdefault(name, set())
        # a base package asked for with extras: what only the extras require is the lock's to place
        todo = (set(extras) if in_base else {""} | set(extras)) - done
        if not todo:
            continue
        done |= todo
        for req in requires(name, versions.get(name) or provided[name], frozenset(extras)):
            dep = canonicalize_name(req.name)
            if dep not in versions and not (dep in provided and req.extras):
                missing.setdefault((name, dep), str(req))
                continue
            queue.append((dep, frozenset(canonicalize_name(e) for e in req.extras), root))
    return reached


def assign_slices(plan: Plan, versions: Mapping[str, str], requires: RequiresFn,
                  provided: Mapping[str, str] = {}) -> Assignment:
    """Assign every locked package to exactly one slice or fallback file.

    ``versions`` is the lock (name -> version); ``requires(name, version, extras)``
    gives the requirements that apply on the target for those extras.  A package
    the manifest lists goes to its own step; any other to the earliest step whose
    roots reach it, else to the first fallback file that reaches it. ``provided``
    names what the base already holds, with its version: requirements on it are met without a slice, and
    the extras a step asks of such a package are followed from there.
    """
    versions = {canonicalize_name(k): v for k, v in versions.items()}
    steps, fallbacks = units(plan)
    no_deps = {p.name for u in steps + fallbacks for p in u.roots if p.no_deps}
    unit_of: dict[str, str] = {}
    reason: dict[str, str] = {}
    for u in steps + fallbacks:
        for p in u.roots:
            if p.name in versions:
                if p.name in unit_of and unit_of[p.name] != u.file:
                    raise LockError(f"{p.name} is listed in both {unit_of[p.name]} and {u.file}")
                unit_of[p.name] = u.file
                reason[p.name] = "manifest"
    missing: dict[tuple[str, str], str] = {}
    walked: dict[str, set[str]] = {}
    for u in steps + fallbacks:
        for name, root in _reach(u.roots, versions, requires, no_deps, missing, walked, provided).items():
            if name not in unit_of:
                unit_of[name] = u.file
                reason[name] = f"via {root}"
    unreached = sorted(set(versions) - set(unit_of))
    if unreached:
        raise LockError(
            f"variant {plan.variant.name}: the lock holds {', '.join(unreached)}, which no step reaches "
            "through the locked dependency graph (a requirement the resolver saw and the target does not?)"
        )
    warnings = tuple(
        f"{parent} requires {req}, which is not in the lock (excluded by a marker for the target?)"
        for (parent, dep), req in sorted(missing.items()) if dep not in provided
    )
    return Assignment(unit_of, reason, warnings)


def reached(plan: Plan, versions: Mapping[str, str], requires: RequiresFn) -> set[str]:
    """Every locked package some step's or fallback's roots reach (what assign_slices can place)."""
    versions = {canonicalize_name(k): v for k, v in versions.items()}
    steps, fallbacks = units(plan)
    no_deps = {p.name for u in steps + fallbacks for p in u.roots if p.no_deps}
    out: set[str] = set()
    walked: dict[str, set[str]] = {}
    for u in steps + fallbacks:
        out |= set(_reach(u.roots, versions, requires, no_deps, {}, walked))
    return out


def _slice_header(plan: Plan, unit: Unit) -> list[str]:
    s = unit.step
    # Nothing of the variant or of later steps: a slice's bytes key its layer, so two variants with the
    # same slice share it, and adding a step leaves the slices before it alone.
    where = f"wheel set {s.index} ({s.name})"
    if unit.fallback_for:
        lines = [f"# pinwheel lock: fallback for {unit.fallback_for} in {where}.",
                 f"# Installed only when its local wheel is missing, with: pip install --no-deps --require-hashes -r {unit.file}"]
    else:
        lines = [f"# pinwheel lock slice: {where}.",
                 f"# Installed with: pip install --no-deps --require-hashes -r {unit.file}"]
    lines.append("# Generated by `build.py lock` with requirements.txt; every locked package is in exactly one file.")
    if not s.active:
        lines.append(f"# Gated off for this variant ({s.gate}=0): this step installs nothing.")
    elif not unit.roots:
        what = f"{unit.fallback_for} is" if unit.fallback_for else "every package of this step is"
        lines.append(f"# Gated off for this variant: {what} gated off, so nothing is installed from here.")
    return lines


def slice_text(plan: Plan, unit: Unit, entries: Sequence[LockedPackage], reason: Mapping[str, str]) -> str:
    """One slice file as `lock` writes it: its header, then each entry (its text as in requirements.txt) with
    why it is here (its --no-deps why, or the package that reached it)."""
    lines = _slice_header(plan, unit)
    no_deps = {p.name: p for p in unit.roots if p.no_deps}
    overriding = {p.name: p for p in unit.roots if p.override}
    from_index = {p.name: p for p in unit.roots if getattr(p, "index", None) is not None}
    for e in entries:
        lines.append(e.text)
        r = reason.get(e.name, "")
        if e.name in overriding:
            lines.append(f"    # override: {overriding[e.name].why}")
        if e.name in from_index:
            lines.append(f"    # from index {from_index[e.name].index.name} only: {from_index[e.name].index.why}")
        if e.name in no_deps:
            lines.append(f"    # --no-deps: {no_deps[e.name].why}")
        elif r.startswith("via "):
            lines.append(f"    # reached from {r[4:]}")
    return "\n".join(lines) + "\n"
