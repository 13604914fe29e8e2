"""Evaluate a variant as it will be installed, step by step, and judge every edge.

Two views of the same Plan:
- as built: the lock's slices (each package in exactly one step, --no-deps,
  hashed), local wheels and fallbacks. This is what the image will contain.
- as plain pip would do it: one `pip install` per wheel set in Dockerfile
  order, pip's only-if-needed strategy. This is what a hand-written file does,
  and it shows the churn between layers that the final `pip list` hides.

Every requirement of every installed package is then judged for the TARGET
environment (python, platform), with the extras the image requests.

On a base that already holds a Python environment (pinwheel.resolve.base),
both views start from step 0, the base's inventory: every later step's effect
on a base package is named (a move, an intended replacement, a removal), a
requirement already broken in the base alone is `base-broken`, and one that a
package marked `override` contradicts on purpose is `overridden`.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..index.errors import IndexClientError
from ..index.sources import MetadataSource
from ..plan import Clash, Edge, Hazard, Installed, Plan, PlannedPackage, Removal, Step, Unjudged
from ..steps import kind_of
from .base import BASE, InventorySource, base_distributions
from .pip_replay import StepReplay


class ResolveError(Exception):
    """The set cannot be evaluated because input is wrong or missing (exit 2)."""


@dataclass(frozen=True)
class Applies:
    """How one Requires-Dist line applies to the target."""

    requirement: Requirement
    extra: str | None  # the extra that turns it on, None for a base requirement
    active: bool  # applies given the extras the image requests
    marker_excluded: bool  # its environment marker is false for the target


def classify_requirements(meta, target_env: dict[str, str], requested: Iterable[str]) -> list[Applies]:
    requested = {canonicalize_name(e) for e in requested}
    return [Applies(req, extra, extra is None and not excluded or extra in requested, excluded)
            for req, extra, excluded in marker_effects(meta, target_env)]


def marker_effects(meta, target_env: dict[str, str]) -> list[tuple[Requirement, str | None, bool]]:
    """(requirement, the extra that turns it on, marker-excluded) for each Requires-Dist line, for the target:
    a base requirement has neither an extra nor an exclusion. Independent of the extras an image requests."""
    out = []
    for req in meta.requires_dist:
        if req.marker is None or req.marker.evaluate({**target_env, "extra": ""}):
            out.append((req, None, False))
        else:
            extra = next((e for e in _extras_to_try(str(req.marker), meta.provides_extra)
                          if req.marker.evaluate({**target_env, "extra": e})), None)
            out.append((req, extra, extra is None))
    return out


_EXTRA_TEST = re.compile(r'\bextra (==|!=) "([^"]*)"')
_EXTRA_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


def _extras_to_try(marker: str, provides_extra: Iterable[str]) -> list[str]:
    """The extras that can turn on a marker that is false without one, in Provides-Extra order.

    Where a marker compares `extra` only by == or != with extra names (as its text shows them), an extra it
    does not name evaluates exactly as no extra did, so only those it names are tried; a marker that never
    names `extra` is false for all of them. Anything else (another operator, a name that reads as a version,
    whose comparison packaging makes by version) tries every extra."""
    names = {m.group(2) for m in _EXTRA_TEST.finditer(marker)}
    if "extra" in _EXTRA_TEST.sub("", marker) or not all(_EXTRA_NAME.match(n) and not _reads_as_version(n)
                                                         for n in names):
        return list(provides_extra)
    return [e for e in provides_extra if e in names]


def _reads_as_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def requirement_text(req: Requirement) -> str:
    """name[extras]specifier, without the marker."""
    return req.name + (f"[{','.join(sorted(req.extras))}]" if req.extras else "") + str(req.specifier)


def excludes_shared_pin(edge: Edge, installed: dict[str, Installed], version: str) -> bool:
    """Does this edge exclude a shared pin's version in a way that breaks the image?

    Any base requirement of an installed package counts, whether or not
    --no-deps suppresses it; an extra counts when the image requests it.
    Report and bump both judge shared pins through this one rule.
    """
    if edge.verdict not in ("satisfied", "violated", "suppressed"):
        return False
    if Requirement(edge.requirement).specifier.contains(version, prereleases=True):
        return False
    if edge.verdict == "suppressed" and edge.extra is not None:
        parent = installed.get(edge.parent)
        return bool(parent and edge.extra in parent.extras)
    return True


def exclusions(plan: Plan) -> dict[str, dict[str, str]]:
    """name -> {requirement name: why} of each active package's manifest `exclude:`."""
    return {p.name: {x.name: x.why for x in p.exclude} for p in plan.packages() if getattr(p, "exclude", ())}


def overrides(plan: Plan) -> dict[str, str]:
    """name -> why of each active package the manifest marks `override: true`."""
    return {p.name: p.why or "" for p in plan.packages() if p.override}


def intended_change(plan: Plan, h: Hazard) -> bool:
    """Is this move one the manifest asks for? A package marked override always is; a base package is
    when the manifest names it itself (a shared pin, a package of a step, or what a step builds) and admits the
    new version."""
    if h.package in overrides(plan):
        return True
    if h.earlier_step != BASE:
        return False
    wanted = [Requirement(p.requirement) for p in plan.packages() if p.name == h.package]
    if any(d.name == h.package and d.version == h.after for d in _built_by_steps(plan)):
        return True  # a step builds or fetches this very version itself (a git commit, an sdist, an asset)
    if h.package in plan.shared_pins:
        wanted.append(Requirement(f"{h.package}=={plan.shared_pins[h.package]}"))
    return bool(wanted) and all(r.specifier.contains(h.after, prereleases=True) for r in wanted)


def _built_by_steps(plan: Plan):
    """What the Plan's active steps install from outside the index (Effect.direct), each with its version."""
    for s in plan.steps:
        if s.active:
            yield from kind_of(s).effect(s).direct


def removal_why(step: Step, name: str) -> str:
    """The why a remove step gives for one package, else the step's own why."""
    for entry in getattr(step.spec, "packages", ()) or ():
        if canonicalize_name(str(getattr(entry, "name", ""))) == name and getattr(entry, "why", None):
            return str(entry.why)
    return step.why


def removal_breaks(step: Step, name: str) -> tuple[tuple[str, str], ...]:
    """(package, why) of each package a remove step leaves with its requirement on `name` unmet on purpose."""
    for entry in getattr(step.spec, "packages", ()) or ():
        if canonicalize_name(str(getattr(entry, "name", ""))) == name:
            return tuple((b.name, b.why) for b in getattr(entry, "breaks", ()) or ())
    return ()


class Resolver:
    def __init__(self, source: MetadataSource, wheels_dir: Path | None = None, max_candidates: int = 40,
                 base: dict[str, Installed] | None = None):
        self.source = source
        self.wheels_dir = wheels_dir
        self.max_candidates = max_candidates
        self.base: dict[str, Installed] = dict(base or {})  # step 0: what the base's environment holds
        self.removals: list[Removal] = []  # as locked
        self.pip_removals: list[Removal] = []  # as plain pip would
        self._meta: dict[tuple[str, str], object] = {}
        self._fixed: set[str] = set()  # members of a fixed set (DirectInstall.no_deps False): judged with their deps
        self._effects: dict[int, tuple[object, dict[str, str], list]] = {}  # id(meta) -> (meta, env, effects)
        self.failures: list[Unjudged] = []  # lookups that failed where a verdict does not already say so

    # --------------------------------------------------------- metadata

    def meta(self, plan: Plan, name: str, version: str):
        key = (canonicalize_name(name), version)
        if key not in self._meta:
            try:
                self._meta[key] = self.source.metadata(name, version, plan.target.python, plan.target.platforms())
            except Exception as exc:  # unknown metadata is a verdict, not a crash
                self._meta[key] = exc
        value = self._meta[key]
        return None if isinstance(value, Exception) else value

    def classify(self, meta, target_env: dict[str, str], requested: Iterable[str]) -> list[Applies]:
        """classify_requirements, with each metadata's markers evaluated once per Resolver (they are asked for
        again by every view and every candidate)."""
        entry = self._effects.get(id(meta))
        if entry is None or entry[0] is not meta or entry[1] != target_env:
            entry = (meta, dict(target_env), marker_effects(meta, target_env))
            self._effects[id(meta)] = entry
        wanted = {canonicalize_name(e) for e in requested}
        return [Applies(req, extra, extra is None and not excluded or extra in wanted, excluded)
                for req, extra, excluded in entry[2]]

    def meta_error(self, name: str, version: str) -> str | None:
        value = self._meta.get((canonicalize_name(name), version))
        return str(value) if isinstance(value, Exception) else None

    def local_wheel(self, pkg: PlannedPackage, plan: Plan | None = None) -> Path | None:
        if not pkg.local or not self.wheels_dir or not self.wheels_dir.is_dir():
            return None
        matches = (plan.local_wheels(self.wheels_dir, pkg.local.glob) if plan is not None
                   else sorted(self.wheels_dir.glob(pkg.local.glob)))  # the Plan's platform only
        if len(matches) > 1:
            raise ResolveError(f"more than one wheel in {self.wheels_dir.name}/ matches {pkg.local.glob}: "
                               + ", ".join(m.name for m in matches))
        return matches[0] if matches else None

    def prebuilt_wheel(self, plan: Plan, step: Step, d) -> tuple[PlannedPackage, str, str | None] | None:
        """A source step's prebuilt wheel (DirectInstall.local) when the host has it, as a local install; None
        when it has none (the step builds). A wheel of another version than the step pins is refused."""
        path = self.local_wheel(d, plan) if d.local is not None else None
        if path is None:
            return None
        meta = self.source.local_metadata(path)
        if canonicalize_name(meta.name) != d.name or str(meta.version) != d.version:
            raise ResolveError(f"step {step.name}: its prebuilt wheel {path.name} is {meta.name} {meta.version}, "
                               f"but the step pins {d.name}=={d.version}")
        self._meta[(d.name, d.version)] = meta
        extras = f"[{','.join(d.extras)}]" if d.extras else ""
        why = f"{d.why} (prebuilt: {path.name} matches wheels/{d.local.glob}, installed instead of the build)"
        return (PlannedPackage(d.name, f"{d.name}{extras}=={d.version}", d.version, True, why, None, True),
                "local", path.name)

    # ------------------------------------------------- what gets installed

    def step_packages(self, plan: Plan, step: Step) -> list[tuple[PlannedPackage, str, str | None]]:
        """(package, source, local path) of what this step installs explicitly, policies applied."""
        out = []
        for p in step.packages:
            if not p.active:
                continue
            if p.local:
                path = self.local_wheel(p, plan)
                if path is not None:
                    meta = self.source.local_metadata(path)
                    self._meta[(meta.name, str(meta.version))] = meta
                    out.append((dataclasses.replace(p, version=str(meta.version), no_deps=True), "local", path.name))
                elif p.local.if_missing == "fallback" and p.fallback:
                    out.append((p.fallback, "fallback", None))
                elif p.local.if_missing == "fail":
                    raise ResolveError(f"local wheel wheels/{p.local.glob} for {p.name} is missing and its policy is "
                                       f"'fail': {p.local.how_to_provide}")
                continue
            out.append((p, "index", None))
        for d in kind_of(step).effect(step).direct:  # a git commit, a release asset: --no-deps, metadata as read
            prebuilt = self.prebuilt_wheel(plan, step, d)
            if prebuilt is not None:
                out.append(prebuilt)
                continue
            if (d.name, d.version) not in self._meta:
                meta, unread = (d.metadata, d.unread) if d.read is None else d.read(self.source)
                self._meta[(d.name, d.version)] = meta if meta is not None else LookupError(unread)
            extras = f"[{','.join(d.extras)}]" if d.extras else ""
            if not d.no_deps:
                self._fixed.add(d.name)
            why = d.why if d.local is None else f"{d.why} (no wheel matches wheels/{d.local.glob}: built from {d.source})"
            out.append((PlannedPackage(d.name, f"{d.name}{extras}=={d.version}", d.version, d.no_deps, why, None,
                                       True), d.source, None))
        return out

    def as_pip_would(self, plan: Plan) -> tuple[dict[str, Installed], list[Hazard], list[Clash], list[Unjudged]]:
        """One `pip install` per wheel set, in order, as a hand-written Dockerfile does.

        Where pip would stop at a clash, this records it and goes on, so one run
        shows every clash; a lookup that fails is recorded as unjudged.
        """
        installed: dict[str, Installed] = dict(self.base)
        hazards: list[Hazard] = []
        clashes: list[Clash] = []
        unjudged: list[Unjudged] = []
        for step in plan.steps:
            if not step.active:
                continue
            self.remove(step, installed, self.pip_removals)
            replay = StepReplay(self, plan, step, installed, clashes, unjudged)
            replay.run()
            for name, inst in replay.chosen.items():
                before = installed.get(name)
                if before and before.version != inst.version:
                    causes = [v for r, v in replay.constraints.get(name, [])]
                    cause = "explicit --no-deps install" if inst.no_deps else ", ".join(sorted(set(causes))) or "manifest"
                    hazards.append(Hazard(step.name, name, before.version, inst.version, before.step, cause))
            installed.update(replay.chosen)
        return installed, hazards, clashes, unjudged + self.failures

    def remove(self, step: Step, installed: dict[str, Installed], record: list[Removal]) -> None:
        """Take out what the step removes (its kind's effect), and record each removal."""
        for raw in kind_of(step).effect(step).removes:
            name = canonicalize_name(raw)
            before = installed.pop(name, None)
            removal = Removal(step.name, name, before.version if before else None, before.step if before else None,
                              removal_why(step, name), removal_breaks(step, name))
            record.append(removal)

    def clash(self, plan: Plan, step: str, name: str, wanted: list[tuple[Requirement, str]],
              pins: dict[str, str], earlier: Installed | None) -> Clash:
        spec = SpecifierSet(",".join(str(r.specifier) for r, _ in wanted if str(r.specifier)))
        kept = pins.get(name) or (earlier.version if earlier else None)
        return Clash(step, name, tuple(f"{requirement_text(r)} (from {v})" for r, v in wanted),
                     tuple(self.refusals(plan, name, spec, pins)), kept)

    def refusals(self, plan: Plan, name: str, spec: SpecifierSet, pins: dict[str, str], limit: int = 4) -> list[str]:
        """Why no release of `name` satisfies `spec` here: the same rules as pick(), spelled out."""
        try:
            available = self.source.versions(name)
        except Exception as exc:
            return [f"cannot list releases of {name}: {exc}"]
        candidates = sorted(spec.filter(available), reverse=True)
        if not candidates:
            newest = ", ".join(str(v) for v in sorted(available, reverse=True)[:3]) or "none"
            together = " together" if len(spec) > 1 else ""
            return [f"no release of {name} satisfies {spec or 'any'}{together} (newest: {newest})"]
        out = []
        for v in candidates[:limit]:
            if self.source.best_wheel(name, v, plan.target.python, plan.target.platforms()) is None:
                out.append(f"{name} {v} has no wheel for Python {plan.target.python} on {plan.target.platform}")
            elif self.meta(plan, name, str(v)) is None:
                out.append(f"{name} {v}: metadata unreadable ({self.meta_error(name, str(v))})")
            else:
                out += [f"{name} {v} requires {requirement_text(req)}, but the manifest pins {dep}=={pins[dep]}"
                        for dep, req in self.pin_blockers(plan, name, str(v), pins)]
        return out

    def pin_blockers(self, plan: Plan, name: str, version: str, pins: dict[str, str]) -> list[tuple[str, Requirement]]:
        """(pinned package, requirement) for each requirement of name==version that excludes a pin."""
        meta = self.meta(plan, name, version)
        if meta is None:
            return []
        out = []
        for a in self.classify(meta, plan.target.marker_environment(), ()):
            dep = canonicalize_name(a.requirement.name)
            if a.active and dep in pins and not a.requirement.specifier.contains(pins[dep], prereleases=True):
                out.append((dep, a.requirement))
        return out

    def pick(self, plan: Plan, name: str, spec: SpecifierSet, pins: dict[str, str]) -> str | None:
        """Newest version with a wheel for the target whose own requirements keep this step's pins."""
        if name in pins and spec.contains(pins[name], prereleases=True):
            # `==2.13.0` also matches local builds such as 2.13.0+cu129: take what
            # the index has, as pip would (the highest match).
            try:
                available = self.source.versions(name)
            except Exception as exc:  # unreadable: take the pin as written, and say the lookup failed
                self.failures.append(Unjudged(name, f"cannot list releases of {name}: {exc}"))
                return pins[name]
            exact = SpecifierSet(f"=={pins[name]}")
            matches = sorted((v for v in available if exact.contains(v, prereleases=True)
                              and spec.contains(v, prereleases=True)), reverse=True)
            return str(matches[0]) if matches else pins[name]
        env = plan.target.marker_environment()
        # SpecifierSet.filter applies PEP 440: pre-releases only when nothing final fits.
        candidates = sorted(spec.filter(self.source.versions(name)), reverse=True)
        for v in candidates[: self.max_candidates]:
            if self.source.best_wheel(name, v, plan.target.python, plan.target.platforms()) is None:
                continue
            meta = self.meta(plan, name, str(v))
            if meta is None:
                return str(v)
            clash = any(
                canonicalize_name(a.requirement.name) in pins
                and not a.requirement.specifier.contains(pins[canonicalize_name(a.requirement.name)], prereleases=True)
                for a in self.classify(meta, env, ()) if a.active
            )
            if not clash:
                return str(v)
        return None

    def as_locked(self, plan: Plan, locked: dict[str, dict[str, str]]) -> tuple[dict[str, Installed], list[Hazard]]:
        """The image as the lock installs it: slices per step, then local wheels and fallbacks."""
        installed: dict[str, Installed] = dict(self.base)
        hazards: list[Hazard] = []
        for step in plan.steps:
            if not step.active:
                continue
            self.remove(step, installed, self.removals)
            entries = [(n, v, "lock") for n, v in locked.get(step.name, {}).items()]
            explicit = {p.name: (p, src) for p, src, _ in self.step_packages(plan, step)}
            for p, src in explicit.values():
                if src != "index":
                    entries.append((p.name, p.version or "", src))
            for name, version, src in entries:
                p = explicit.get(name, (None, None))[0]
                extras = tuple(sorted(Requirement(p.requirement).extras)) if p else ()
                no_deps = bool(p and (p.no_deps or (src != "lock" and name not in self._fixed)))
                before = installed.get(name)
                if before and before.version != version:
                    cause = (f"the lock of {step.name} replaces the base's {name}" if before.step == BASE else
                             f"{name} is in the lock of both {before.step} and {step.name}")
                    hazards.append(Hazard(step.name, name, before.version, version, before.step, cause))
                installed[name] = Installed(name, version, step.name, src if src != "lock" else "index",
                                            no_deps, extras, p.why if p else None)
        return installed, hazards

    # ------------------------------------------------------------ edges

    def judge(self, plan: Plan, installed: dict[str, Installed],
              baseline: set[tuple[str, str, str]] | None = None) -> list[Edge]:
        """Every requirement of every installed package, judged. `baseline` holds the (parent, version,
        requirement) already broken in the base alone: those are `base-broken`, not violated."""
        env = plan.target.marker_environment()
        edges: list[Edge] = []
        baseline = baseline or set()
        overriding = overrides(plan)
        excluding = exclusions(plan)
        # what a remove step takes out and nothing installs again -> {package it leaves unmet on purpose: why}
        taken_out = {r.package: {parent: (r.step, why) for parent, why in r.breaks}
                     for r in (self.removals or self.pip_removals) if r.package not in installed}
        for inst in sorted(installed.values(), key=lambda i: i.name):
            meta = self.meta(plan, inst.name, inst.version)
            if meta is None:
                edges.append(Edge(inst.name, inst.version, "*", "*", "unchecked", None,
                                  f"metadata unknown: {self.meta_error(inst.name, inst.version) or 'not read'}"))
                continue
            for a in self.classify(meta, env, inst.extras):
                dep = canonicalize_name(a.requirement.name)
                have = installed.get(dep)
                found = have.version if have else None
                text = requirement_text(a.requirement)
                ok = found is not None and a.requirement.specifier.contains(found, prereleases=True)
                if a.marker_excluded:
                    edges.append(Edge(inst.name, inst.version, text, dep, "marker-excluded", found,
                                      f"marker {a.requirement.marker} is false for the target", a.extra))
                elif a.active and dep in excluding.get(inst.name, {}):
                    anyway = f"; {dep} {found} is installed anyway" if found is not None else ""
                    edges.append(Edge(inst.name, inst.version, text, dep, "excluded", found,
                                      f"left out on purpose: {excluding[inst.name][dep]}{anyway}", a.extra))
                elif inst.no_deps and (a.active or inst.source in ("local", "fallback") or a.extra):
                    edges.append(Edge(inst.name, inst.version, text, dep, "suppressed", found,
                                      self.would_do(plan, a.requirement, have), a.extra))
                elif not a.active:
                    edges.append(Edge(inst.name, inst.version, text, dep, "extra-only", found,
                                      f"only with extra [{a.extra}], which the image does not request", a.extra))
                elif ok:
                    edges.append(Edge(inst.name, inst.version, text, dep, "satisfied", found, "", a.extra))
                else:
                    detail = f"{dep} is not installed" if found is None else f"{dep} {found} is installed"
                    if (inst.name, inst.version, text) in baseline:
                        edges.append(Edge(inst.name, inst.version, text, dep, "base-broken", found,
                                          f"base: already broken ({detail})", a.extra))
                    elif found is None and inst.name in taken_out.get(dep, {}):
                        step_name, why = taken_out[dep][inst.name]
                        edges.append(Edge(inst.name, inst.version, text, dep, "removed", found,
                                          f"removed on purpose by step {step_name}: {why}", a.extra))
                    elif found is not None and dep in overriding:
                        edges.append(Edge(inst.name, inst.version, text, dep, "overridden", found,
                                          f"overridden on purpose: {inst.name} {inst.version} requires {text}; "
                                          f"{dep} {found} is installed: {overriding[dep]}", a.extra))
                    else:
                        edges.append(Edge(inst.name, inst.version, text, dep, "violated", found, detail, a.extra))
        return edges

    def prefetch_suppressed(self, plan: Plan, installed: dict[str, Installed]) -> None:
        """The picks `would_do` makes for the requirements a --no-deps install leaves unmet, made first in a
        thread pool: on an online run each is a page and a METADATA read (some a wheel's ranged read), which
        judging would ask for one after another. Judging then picks again, from what these read."""
        env, wanted = plan.target.marker_environment(), {}
        for inst in installed.values():
            meta = self.meta(plan, inst.name, inst.version) if inst.no_deps else None
            for a in self.classify(meta, env, inst.extras) if meta is not None else ():
                have = installed.get(canonicalize_name(a.requirement.name))
                if a.marker_excluded or not (a.active or a.extra or inst.source in ("local", "fallback")):
                    continue
                if have is None or not a.requirement.specifier.contains(have.version, prereleases=True):
                    wanted[(canonicalize_name(a.requirement.name), str(a.requirement.specifier))] = a.requirement

        def one(req: Requirement) -> None:
            try:
                self.pick(plan, canonicalize_name(req.name), req.specifier, {})
            except Exception:  # noqa: BLE001 - judging asks again and says why
                pass

        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415 - online runs only

        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(one, wanted.values()))

    def would_do(self, plan: Plan, req: Requirement, have: Installed | None) -> str:
        """What pip would have done with this requirement without --no-deps."""
        name = canonicalize_name(req.name)
        if have is not None and req.specifier.contains(have.version, prereleases=True):
            return f"satisfied anyway by {name} {have.version}"
        try:
            version = self.pick(plan, name, req.specifier, {})
        except Exception as exc:  # the index may not know it; say so
            return f"would need {requirement_text(req)}; index lookup failed: {exc}"
        if version is None:
            return f"would need {requirement_text(req)}, which no release satisfies"
        if have is None:
            return f"would install {name} {version}"
        direction = "downgrade" if Version(version) < Version(have.version) else "upgrade"
        return f"would {direction} {name} {have.version} → {version}"


def resolve(plan: Plan, source: MetadataSource, wheels_dir: Path | None = None,
            locked: dict[str, dict[str, str]] | None = None) -> Plan:
    """The Plan with installed versions, every edge judged and the order hazards found.

    With `locked` (step name -> {package: version}) the image is evaluated as the
    lock installs it, and the plain-pip view is kept to show the churn it removes.
    """
    base = base_installed(plan)
    online = is_online(source)
    if online:
        prefetch_locked(source, plan, locked)
    if base:  # the base's own packages are read from its inventory, not the index
        source = InventorySource(source, base_distributions(plan))
    resolver = Resolver(source, wheels_dir, base=base)
    pip_installed, pip_hazards, clashes, unjudged = resolver.as_pip_would(plan)
    if locked is not None:
        installed, hazards = resolver.as_locked(plan, locked)
        clashes = []  # the lock resolved the set as a whole; per-step pip clashes are not the image's
    else:
        installed, hazards = pip_installed, pip_hazards
    baseline = {(e.parent, e.parent_version, e.requirement) for e in resolver.judge(plan, base)
                if e.verdict == "violated"}
    if online:
        resolver.prefetch_suppressed(plan, installed)
    edges = resolver.judge(plan, installed, baseline)
    replaced = [h for h in hazards if intended_change(plan, h)]
    return plan.with_resolution(
        installed=tuple(sorted(installed.values(), key=lambda i: (_step_index(plan, i.step), i.name))),
        edges=tuple(edges),
        hazards=tuple(h for h in hazards if h not in replaced),
        replacements=tuple(replaced),
        removals=tuple(resolver.removals if locked is not None else resolver.pip_removals),
        unlocked_hazards=tuple(pip_hazards),
        locked=locked is not None,
        clashes=tuple(clashes),
        unjudged=tuple(unjudged),
    )


def is_online(source: MetadataSource) -> bool:
    """Whether any index of the source may be asked (offline, the cache answers as fast without threads)."""
    return any(getattr(s, "offline", True) is False for s in getattr(source, "indexes", [source]))


def prefetch_locked(source: MetadataSource, plan: Plan, locked: dict[str, dict[str, str]] | None) -> None:
    """On an online run, the locked set's pages and METADATA are fetched first, in parallel (the client's
    thread pool), so the walk below reads them from the cache instead of asking one after another. A lookup
    that fails here is asked again by the walk, which says why."""
    if locked is None:
        return
    pins = sorted({(name, version) for versions in locked.values() for name, version in versions.items()})
    try:
        source.metadata_many(pins, plan.target.python, plan.target.platforms())
    except IndexClientError:
        return


def base_installed(plan: Plan) -> dict[str, Installed]:
    """Step 0 as installed packages (source and step "base"); empty without a base environment."""
    return {name: Installed(name, d.version, BASE, BASE, False, (), None)
            for name, d in base_distributions(plan).items()}


def baseline_broken(plan: Plan) -> list[Edge]:
    """The requirements already broken in the base alone, judged from its inventory only (no index)."""
    base = base_installed(plan)
    if not base:
        return []
    resolver = Resolver(InventorySource(_NoIndex(), base_distributions(plan)), None, base=base)
    return [e for e in resolver.judge(plan, base) if e.verdict == "violated"]


class _NoIndex:
    """A source that knows nothing: the baseline is judged from the inventory alone."""

    def _none(self, *args, **kwargs):
        raise LookupError("not in the base's inventory")

    versions = best_wheel = metadata = local_metadata = _none


def fully_judged(plan: Plan) -> bool:
    """True when every lookup succeeded and no edge is unchecked: only then may a result be remembered."""
    return not plan.resolution.unjudged and not any(e.verdict == "unchecked" for e in plan.resolution.edges)


def _step_index(plan: Plan, step: str) -> int:
    return next((s.index for s in plan.steps if s.name == step), 0)
