"""Evaluate a variant as it will be installed, step by step, and judge every edge.

Two views of the same Plan:
- as built: the lock's slices (each package in exactly one step, --no-deps,
  hashed), local wheels and fallbacks. This is what the image will contain.
- as plain pip would do it: one `pip install` per wheel set in Dockerfile
  order, pip's only-if-needed strategy. This is what a hand-written file does,
  and it shows the churn between layers that the final `pip list` hides.

Every requirement of every installed package is then judged for the TARGET
environment (python, platform), with the extras the image requests.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Protocol

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from .plan import Edge, Hazard, Installed, Plan, PlannedPackage, Step


class MetadataSource(Protocol):
    def versions(self, name: str) -> list[Version]: ...
    def best_wheel(self, name: str, version: str | Version, python_version: str, platforms: list[str]): ...
    def metadata(self, name: str, version: str | Version, python_version: str | None = None,
                 platforms: list[str] | None = None): ...
    def local_metadata(self, path: Path): ...


class ResolveError(Exception):
    """The set cannot be evaluated: nothing satisfies a requirement, or input is missing."""


@dataclass(frozen=True)
class Applies:
    """How one Requires-Dist line applies to the target."""

    requirement: Requirement
    extra: str | None  # the extra that turns it on, None for a base requirement
    active: bool  # applies given the extras the image requests
    marker_excluded: bool  # its environment marker is false for the target


def classify_requirements(meta, target_env: dict[str, str], requested: Iterable[str]) -> list[Applies]:
    requested = {canonicalize_name(e) for e in requested}
    out = []
    for req in meta.requires_dist:
        if req.marker is None:
            out.append(Applies(req, None, True, False))
            continue
        if req.marker.evaluate({**target_env, "extra": ""}):
            out.append(Applies(req, None, True, False))
            continue
        extra = next((e for e in meta.provides_extra if req.marker.evaluate({**target_env, "extra": e})), None)
        if extra is not None:
            out.append(Applies(req, extra, extra in requested, False))
        else:
            out.append(Applies(req, None, False, True))
    return out


def _requirement_text(req: Requirement) -> str:
    text = req.name + (f"[{','.join(sorted(req.extras))}]" if req.extras else "") + str(req.specifier)
    return text


class Resolver:
    def __init__(self, source: MetadataSource, wheels_dir: Path | None = None, max_candidates: int = 40):
        self.source = source
        self.wheels_dir = wheels_dir
        self.max_candidates = max_candidates
        self._meta: dict[tuple[str, str], object] = {}

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

    def meta_error(self, name: str, version: str) -> str | None:
        value = self._meta.get((canonicalize_name(name), version))
        return str(value) if isinstance(value, Exception) else None

    def local_wheel(self, pkg: PlannedPackage) -> Path | None:
        if not pkg.local or not self.wheels_dir or not self.wheels_dir.is_dir():
            return None
        matches = sorted(self.wheels_dir.glob(pkg.local.glob))
        if len(matches) > 1:
            raise ResolveError(f"more than one wheel in {self.wheels_dir.name}/ matches {pkg.local.glob}: "
                               + ", ".join(m.name for m in matches))
        return matches[0] if matches else None

    # ------------------------------------------------- what gets installed

    def step_packages(self, plan: Plan, step: Step) -> list[tuple[PlannedPackage, str, str | None]]:
        """(package, source, local path) of what this step installs explicitly, policies applied."""
        out = []
        for p in step.packages:
            if not p.active:
                continue
            if p.local:
                path = self.local_wheel(p)
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
        return out

    def as_pip_would(self, plan: Plan) -> tuple[dict[str, Installed], list[Hazard]]:
        """One `pip install` per wheel set, in order, as a hand-written Dockerfile does."""
        installed: dict[str, Installed] = {}
        hazards: list[Hazard] = []
        env = plan.target.marker_environment()
        for step in plan.steps:
            if not step.active:
                continue
            explicit = self.step_packages(plan, step)
            pins = {p.name: p.version for p, _, _ in explicit if p.version}
            chosen: dict[str, Installed] = {}
            constraints: dict[str, list[tuple[Requirement, str]]] = {}
            queue: list[tuple[Requirement, str]] = []
            for p, source, path in explicit:
                if p.no_deps or source == "local":
                    chosen[p.name] = Installed(p.name, p.version or "", step.name, source, True, (), p.why)
                else:
                    queue.append((Requirement(p.requirement), "(manifest)"))
            while queue:
                req, via = queue.pop(0)
                name = canonicalize_name(req.name)
                if name in chosen and chosen[name].no_deps and chosen[name].step == step.name:
                    continue  # installed with --no-deps in this very step: pip would not touch it
                constraints.setdefault(name, []).append((req, via))
                spec = SpecifierSet(",".join(str(r.specifier) for r, _ in constraints[name] if str(r.specifier)))
                current = chosen.get(name) or installed.get(name)
                extras = tuple(sorted(set(req.extras) | set(current.extras if current else ())))
                if current and spec.contains(current.version, prereleases=True) and set(req.extras) <= set(current.extras):
                    continue
                if current and spec.contains(current.version, prereleases=True):
                    version = current.version
                else:
                    version = self.pick(plan, name, spec, pins)
                    if version is None:
                        wanted = ", ".join(f"{_requirement_text(r)} (from {v})" for r, v in constraints[name])
                        raise ResolveError(f"wheel set {step.name}: no version of {name} satisfies {wanted}")
                chosen[name] = Installed(name, version, step.name, "index", False, extras, None)
                meta = self.meta(plan, name, version)
                if meta is None:
                    continue
                for a in classify_requirements(meta, env, extras):
                    if a.active:
                        queue.append((a.requirement, f"{name} {version}"))
            for name, inst in chosen.items():
                before = installed.get(name)
                if before and before.version != inst.version:
                    causes = [v for r, v in constraints.get(name, [])]
                    cause = "explicit --no-deps install" if inst.no_deps else ", ".join(sorted(set(causes))) or "manifest"
                    hazards.append(Hazard(step.name, name, before.version, inst.version, before.step, cause))
            installed.update(chosen)
        return installed, hazards

    def pick(self, plan: Plan, name: str, spec: SpecifierSet, pins: dict[str, str]) -> str | None:
        """Newest version with a wheel for the target whose own requirements keep this step's pins."""
        if name in pins and spec.contains(pins[name], prereleases=True):
            # `==2.13.0` also matches local builds such as 2.13.0+cu129: take what
            # the index has, as pip would (the highest match).
            try:
                available = self.source.versions(name)
            except Exception:  # unreadable here: judged as unchecked later
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
                for a in classify_requirements(meta, env, ()) if a.active
            )
            if not clash:
                return str(v)
        return None

    def as_locked(self, plan: Plan, locked: dict[str, dict[str, str]]) -> tuple[dict[str, Installed], list[Hazard]]:
        """The image as the lock installs it: slices per step, then local wheels and fallbacks."""
        installed: dict[str, Installed] = {}
        hazards: list[Hazard] = []
        for step in plan.steps:
            if not step.active:
                continue
            entries = [(n, v, "lock") for n, v in locked.get(step.name, {}).items()]
            explicit = {p.name: (p, src) for p, src, _ in self.step_packages(plan, step)}
            for p, src in explicit.values():
                if src in ("local", "fallback"):
                    entries.append((p.name, p.version or "", src))
            for name, version, src in entries:
                p = explicit.get(name, (None, None))[0]
                extras = tuple(sorted(Requirement(p.requirement).extras)) if p else ()
                no_deps = bool(p and (p.no_deps or src != "lock"))
                before = installed.get(name)
                if before and before.version != version:
                    hazards.append(Hazard(step.name, name, before.version, version, before.step,
                                          f"{name} is in the lock of both {before.step} and {step.name}"))
                installed[name] = Installed(name, version, step.name, src if src != "lock" else "index",
                                            no_deps, extras, p.why if p else None)
        return installed, hazards

    # ------------------------------------------------------------ edges

    def judge(self, plan: Plan, installed: dict[str, Installed]) -> list[Edge]:
        env = plan.target.marker_environment()
        edges: list[Edge] = []
        for inst in sorted(installed.values(), key=lambda i: i.name):
            meta = self.meta(plan, inst.name, inst.version)
            if meta is None:
                edges.append(Edge(inst.name, inst.version, "*", "*", "unchecked", None,
                                  f"metadata unknown: {self.meta_error(inst.name, inst.version) or 'not read'}"))
                continue
            for a in classify_requirements(meta, env, inst.extras):
                dep = canonicalize_name(a.requirement.name)
                have = installed.get(dep)
                found = have.version if have else None
                text = _requirement_text(a.requirement)
                ok = found is not None and a.requirement.specifier.contains(found, prereleases=True)
                if a.marker_excluded:
                    edges.append(Edge(inst.name, inst.version, text, dep, "marker-excluded", found,
                                      f"marker {a.requirement.marker} is false for the target", a.extra))
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
                    edges.append(Edge(inst.name, inst.version, text, dep, "violated", found, detail, a.extra))
        return edges

    def would_do(self, plan: Plan, req: Requirement, have: Installed | None) -> str:
        """What pip would have done with this requirement without --no-deps."""
        name = canonicalize_name(req.name)
        if have is not None and req.specifier.contains(have.version, prereleases=True):
            return f"satisfied anyway by {name} {have.version}"
        try:
            version = self.pick(plan, name, req.specifier, {})
        except Exception as exc:  # the index may not know it; say so
            return f"would need {_requirement_text(req)}; index lookup failed: {exc}"
        if version is None:
            return f"would need {_requirement_text(req)}, which no release satisfies"
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
    resolver = Resolver(source, wheels_dir)
    pip_installed, pip_hazards = resolver.as_pip_would(plan)
    if locked is not None:
        installed, hazards = resolver.as_locked(plan, locked)
    else:
        installed, hazards = pip_installed, pip_hazards
    edges = resolver.judge(plan, installed)
    return dataclasses.replace(
        plan,
        installed=tuple(sorted(installed.values(), key=lambda i: (_step_index(plan, i.step), i.name))),
        edges=tuple(edges),
        hazards=tuple(hazards),
        unlocked_hazards=tuple(pip_hazards),
        locked=locked is not None,
    )


def _step_index(plan: Plan, step: str) -> int:
    return next((s.index for s in plan.steps if s.name == step), 0)


def read_lock_slices(plan: Plan, lock_dir: Path) -> dict[str, dict[str, str]] | None:
    """step name -> {package: version} from a variant's committed lock; None when not locked."""
    from .lock import read_lock

    if not (lock_dir / "requirements.txt").exists():
        return None
    lock = read_lock(lock_dir)
    by_step = {s.name: {} for s in plan.steps}
    for piece in lock.slices:
        by_step.setdefault(piece.step, {}).update(piece.versions)
    return by_step


def _cache_state(cache_dir: Path) -> str:
    """A digest of every cached index page and metadata file: any change invalidates memos."""
    import hashlib

    digest = hashlib.sha256()
    for sub in ("pages", "metadata"):
        for dirpath, _, files in sorted(os.walk(cache_dir / sub)):
            for f in sorted(files):
                st = os.stat(os.path.join(dirpath, f))
                digest.update(f"{dirpath}/{f}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def wheels_state(plan: Plan, wheels_dir: Path | None) -> list[tuple[str, int, int]]:
    if not wheels_dir or not wheels_dir.is_dir():
        return []
    out = []
    for p in plan.packages(active_only=False):
        if p.local:
            for w in sorted(wheels_dir.glob(p.local.glob)):
                st = w.stat()
                out.append((w.name, st.st_size, st.st_mtime_ns))
    return out


def memoized(cache_dir: Path, key_material: object, compute):
    """compute(), remembered on disk under a key, valid while the metadata cache is unchanged.

    The stored state of the whole metadata cache must match, so a refreshed page
    or new metadata always recomputes.
    """
    import hashlib
    import pickle

    key = hashlib.sha256(repr((key_material, 2)).encode()).hexdigest()
    memo = cache_dir / "memo" / f"{key}.pickle"
    state = _cache_state(cache_dir)
    if memo.exists():
        try:
            stored_state, value = pickle.loads(memo.read_bytes())
            if stored_state == state:
                return value
        except Exception:  # a memo from another version of pinwheel: recompute
            pass
    value = compute()
    memo.parent.mkdir(parents=True, exist_ok=True)
    tmp = memo.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(pickle.dumps((_cache_state(cache_dir), value)))
    tmp.replace(memo)
    return value


def resolve_memoized(plan: Plan, source, cache_dir: Path, wheels_dir: Path | None = None,
                     locked: dict[str, dict[str, str]] | None = None) -> Plan:
    """resolve(), remembered for identical Plan, lock, local wheels and index (see memoized)."""
    source_key = getattr(source, "memo_key", None) or getattr(source, "index_url", None)
    key = ("resolve", plan, sorted((locked or {}).items()), wheels_state(plan, wheels_dir), source_key)
    return memoized(cache_dir, key, lambda: resolve(plan, source, wheels_dir, locked))


class RoutedSource:
    """Reads some packages from another index, or marks them unreadable with a reason.

    A variant whose torch comes from an extra index (a CUDA 12.9 build, say)
    must not be judged with the default index's torch metadata.
    """

    def __init__(self, default: MetadataSource, routes: dict[str, "MetadataSource | str"]):
        self.default = default
        self.routes = {canonicalize_name(k): v for k, v in routes.items()}
        self.index_url = getattr(default, "index_url", None)

    @property
    def memo_key(self) -> tuple:
        routes = sorted((k, v if isinstance(v, str) else getattr(v, "index_url", repr(v))) for k, v in self.routes.items())
        return (self.index_url, tuple(routes))

    def source_for(self, name: str) -> MetadataSource:
        route = self.routes.get(canonicalize_name(name))
        if isinstance(route, str):
            raise ResolveError(route)
        return route or self.default

    def versions(self, name):
        return self.source_for(name).versions(name)

    def best_wheel(self, name, version, python_version, platforms):
        return self.source_for(name).best_wheel(name, version, python_version, platforms)

    def metadata(self, name, version, python_version=None, platforms=None):
        return self.source_for(name).metadata(name, version, python_version, platforms)

    def metadata_many(self, items, python_version=None, platforms=None):
        """Batched metadata, each batch sent to the source its package routes to."""
        batches: dict[int, list] = {}
        sources: dict[int, MetadataSource] = {}
        for item in items:
            source = self.source_for(item[0])
            batches.setdefault(id(source), []).append(item)
            sources[id(source)] = source
        out = {}
        for key, batch in batches.items():
            out.update(sources[key].metadata_many(batch, python_version, platforms))
        return out

    def stats(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for source in [self.default, *(r for r in self.routes.values() if not isinstance(r, str))]:
            for k, n in getattr(source, "stats", {}).items():
                total[k] = total.get(k, 0) + n
        return total

    def local_metadata(self, path):
        return self.default.local_metadata(path)
