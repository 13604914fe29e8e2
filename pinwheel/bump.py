"""What a version bump breaks, before a single image is built: two Plans compared.

``pinwheel bump torch==2.14.1 --cuda 13`` takes today's image for one variant
(from its committed lock when there is one, else one plain pip install per
wheel set, exactly as ``pinwheel report`` sees it) and the same image with the
bump applied, then says per package what has to happen:

``ok``                nothing to do (a stable-ABI wheel, a requirement that still holds);
``upgrade``/``downgrade``/``add``
                      the package moves along by itself: the bumped package's own
                      pins demand it, or a re-lock would pick the nearest version
                      that accepts the bump;
``rebuild``           a compiled wheel imports torch's unstable C++ ABI and was built
                      against another torch: it fails with ``undefined symbol``;
``blocked``           the bumped image cannot be installed as the manifest stands, or
                      would break at run time (a pin or a package excludes the new
                      version, a shared pin becomes unsatisfiable, a stable-ABI wheel
                      needs a newer torch); every blocked row carries the nearest fix;
``unchecked``         the facts were not available (offline and not cached).

Only changes the bump forces are shown as moves: a package keeps today's version
unless a changed package's requirements exclude it, so a week-old lock does not
turn into a list of unrelated upgrades.

Index metadata comes from the index cache that ``report`` shares; compiled wheels
are classified through ``pinwheel.abi.cache``. A warm run reads only cached files.
"""
from __future__ import annotations

import dataclasses
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from .abi.cache import AbiCache, torch_tied, wheel_abi_of
from .abi.elf import WheelAbi
from .abi.provenance import parse_local_label, provenance_mismatches
from .index import IndexClient, IndexClientError, PackageNotFound
from .lock import LockError, check_lock, read_lock
from .manifest import Manifest
from .plan import Edge, Installed, Plan, PlannedPackage, plan_variant
from .resolve import Resolver, ResolveError, RoutedSource, classify_requirements, requirement_text
from .workspace import LockFiles, Workspace

SCHEMA = "pinwheel.bump/1"
VERDICTS = ("ok", "unchecked", "add", "upgrade", "downgrade", "rebuild", "blocked")
SEVERITY = {v: i for i, v in enumerate(VERDICTS)}
#: How many versions of a package the fix lookup reads metadata for, per direction.
FIX_LOOKUPS = 16
#: How long a cached index page counts as fresh for bump (seconds); --refresh asks again.
PAGE_MAX_AGE = 3600.0

BLOCKED_MEANING = ("blocked: the bumped image cannot be installed as the manifest stands, or would break at run "
                   "time; each blocked row names the nearest fix")


class BumpInputError(Exception):
    """A bump the user has to correct (unknown package, bad requirement, version not on the index): exit 2."""


# ------------------------------------------------------------------ results


@dataclass
class Fix:
    """The nearest change that unblocks a finding."""

    action: str  # upgrade | downgrade | change-pin | rebuild | keep | none
    package: str
    version: str | None
    text: str
    newest: str | None = None  # the newest version found that would also do
    checked: int = 0  # versions whose metadata was read to find it
    complete: bool = True  # False when lookups were cut short (limit, offline)
    also_needs: list[str] = field(default_factory=list)


@dataclass
class PackageRow:
    name: str
    today: str | None
    after: str | None
    source: str  # index | local | fallback | bump | move
    verdict: str
    to: str | None  # the version an upgrade/downgrade/add goes to
    reasons: list[str] = field(default_factory=list)
    fix: Fix | None = None
    pinned_by_manifest: bool = False
    no_deps: bool = False


@dataclass
class AbiFinding:
    name: str
    version: str
    filename: str | None
    source: str  # local | fallback | index
    abi_class: str  # unstable | stable | none | unknown
    declared_torch: str | None
    local_label: str | None
    built_against: dict | None
    provenance_mismatches: list[str]
    forward_compatible_from: str | None
    sample_unstable_symbols: list[str]
    verdict: str
    detail: str
    checked: str  # classified (ELF read, now or from .cache/abi) | pure-python (not downloaded) | unavailable


@dataclass
class RequirementFinding:
    parent: str
    parent_version: str
    requirement: str
    name: str
    extra: str | None
    enforced: bool  # False: the parent is installed with --no-deps (pip does not check it)
    today: str  # satisfied | violated | missing
    after: str
    change: str  # breaks | unblocks | still-violated | holds
    fix: Fix | None = None


@dataclass
class Move:
    name: str
    today: str | None
    after: str | None
    kind: str  # upgrade | downgrade | add | stays | dropped | conflict
    required_by: list[dict]
    newest_acceptable: str | None
    conflict: str | None = None
    fix: Fix | None = None


@dataclass
class SharedPinFinding:
    requirement: str
    name: str
    version: str
    status: str  # ok | changed-by-bump | unsatisfiable | pre-existing
    violations: list[dict]
    fixes: list[str]


@dataclass
class BumpReport:
    image: str
    variant: str
    target: dict
    installed_from: str  # lock | pip-per-wheel-set
    lock_dir: str | None
    bumps: list[dict]
    packages: list[PackageRow]
    abi: list[AbiFinding]
    requirements: list[RequirementFinding]
    moves: list[Move]
    shared_pins: list[SharedPinFinding]
    notes: list[str]
    summary: dict
    timing: dict

    @property
    def blocked(self) -> bool:
        return self.summary["blocked"] > 0

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)
        return {"schema": SCHEMA, **data}


# ----------------------------------------------------------------- helpers


def _v(text: str | Version) -> Version:
    return text if isinstance(text, Version) else Version(str(text))


def _contains(spec: SpecifierSet | str, version: str | None) -> bool:
    if version is None:
        return False
    spec = spec if isinstance(spec, SpecifierSet) else SpecifierSet(spec)
    try:
        return spec.contains(_v(version), prereleases=True)
    except InvalidVersion:
        return False


def _spec_of(text: str) -> SpecifierSet:
    try:
        return Requirement(text).specifier
    except InvalidRequirement:
        return SpecifierSet()


def _direction(before: str | None, after: str | None) -> str:
    if before is None:
        return "add"
    if after is None:
        return "dropped"
    a, b = _v(before), _v(after)
    return "upgrade" if b > a else "downgrade" if b < a else "stays"


def _lower_bound(spec_text: str | None) -> str | None:
    """The smallest version a specifier admits, where it names one (>=X, ==X, ~=X, >X)."""
    if not spec_text:
        return None
    try:
        spec = SpecifierSet(spec_text)
    except Exception:
        return None
    best: Version | None = None
    for s in spec:
        if s.operator in (">=", "==", "~=", "===", ">") and "*" not in s.version:
            try:
                v = Version(s.version)
            except InvalidVersion:
                continue
            best = v if best is None or v > best else best
    return str(best) if best else None


def _minor(v: str) -> tuple[int, ...]:
    try:
        return Version(v).release[:2]
    except InvalidVersion:
        return ()


def parse_bumps(texts: Iterable[str]) -> list[Requirement]:
    """``name==version`` strings as Requirements; BumpInputError for anything else."""
    out: list[Requirement] = []
    seen: set[str] = set()
    for text in texts:
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            raise BumpInputError(f"{text!r} is not a requirement like torch==2.14.1 ({exc})") from None
        specs = list(req.specifier)
        if req.url or req.marker is not None:
            raise BumpInputError(f"{text!r}: give a plain name==version, without URL or marker")
        if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
            raise BumpInputError(f"{text!r}: bump needs an exact version, e.g. {req.name}==2.14.1")
        try:
            Version(specs[0].version)
        except InvalidVersion:
            raise BumpInputError(f"{text!r}: {specs[0].version!r} is not a PEP 440 version") from None
        name = canonicalize_name(req.name)
        if name in seen:
            raise BumpInputError(f"{name} is bumped twice")
        seen.add(name)
        out.append(req)
    if not out:
        raise BumpInputError("nothing to bump: give name==version, e.g. torch==2.14.1")
    return out


# ------------------------------------------------------------ the comparison


class _Bump:
    """One variant's comparison; build() returns the BumpReport."""

    def __init__(self, manifest: Manifest, variant: str, bumps: list[Requirement], client: IndexClient,
                 *, offline: bool = False, fix_lookups: int = FIX_LOOKUPS, torch_client: IndexClient | None = None,
                 list_all: bool = False):
        self.m = manifest
        self.workspace = Workspace.of(manifest)
        self.root = self.workspace.root
        self.client = client
        self.offline = offline
        self.fix_lookups = fix_lookups
        self.list_all = list_all
        self.plan = plan_variant(manifest, variant)
        self.env = self.plan.target.marker_environment()
        self.bumps = {canonicalize_name(r.name): r for r in bumps}
        self.new = {n: list(r.specifier)[0].version for n, r in self.bumps.items()}
        self.notes: list[str] = []
        self.source = RoutedSource(client, {"torch": torch_client} if torch_client is not None else {})
        self.resolver = Resolver(self.source, self.workspace.wheels_dir)
        self.abi_cache = AbiCache(self.workspace, client, offline)
        self.today_torch: str | None = None

    # ------------------------------------------------------------ inputs

    def validate(self) -> None:
        for name, version in list(self.new.items()):
            client = self.source.source_for(name)
            try:
                versions = client.versions(name)
            except PackageNotFound:
                local = [p for p in self.plan.packages(active_only=False) if p.name == name and p.local]
                if local:
                    raise BumpInputError(
                        f"{name} is a local wheel ({local[0].local.glob}), not on the index: rebuild it, put the wheel "
                        f"into wheels/ and update its pin in {self.m.path.name}") from None
                raise BumpInputError(f"unknown package {name!r}: the index has no project of that name") from None
            want = Version(version)
            exact = SpecifierSet(f"=={version}")
            if not any(exact.contains(v, prereleases=True) for v in versions) and not self.offline \
                    and client.max_age is not None:
                fresh = IndexClient(index_url=client.index_url, cache_dir=client.cache_dir)
                versions = fresh.versions(name)  # the cached page may predate the release
                pages = getattr(client, "_pages", None)
                if isinstance(pages, dict):  # forget the stale in-memory page, re-read the refreshed file
                    pages.pop(name, None)
            if want not in versions:
                # ==2.14.1 also matches a local build such as 2.14.1+cu129, as pip would take it
                local_builds = sorted(v for v in versions if exact.contains(v, prereleases=True))
                if local_builds:
                    want = local_builds[-1]
                    self.new[name] = str(want)
            if want not in versions:
                finals = [v for v in versions if not v.is_prerelease]
                near = sorted(finals or versions, key=lambda v: (abs(_ordinal(v) - _ordinal(want)), v))[:4]
                hint = f" (nearest: {', '.join(str(v) for v in sorted(near))})" if near else ""
                raise BumpInputError(f"{name} {version} is not on the index{hint}")
            f = client.best_wheel(name, want, self.plan.target.python, self.plan.target.platforms())
            if f is None:
                raise BumpInputError(f"{name} {version} has no wheel for Python {self.plan.target.python} on "
                                     f"{self.plan.target.platform} (variant {self.plan.variant.name})")

    # ------------------------------------------------------------ states

    def today(self) -> tuple[dict[str, Installed], str, Path | None]:
        lock_dir = self.workspace.lock_dir(self.plan.variant.name)
        locked = self.read_locked(lock_dir)
        try:
            if locked is not None:
                installed, _ = self.resolver.as_locked(self.plan, locked)
                return installed, "lock", lock_dir
            installed, _, clashes, unjudged = self.resolver.as_pip_would(self.plan)
            if unjudged:
                raise IndexClientError("; ".join(f"{u.package}: {u.reason}" for u in unjudged))
            if clashes:
                raise ResolveError("; ".join(f"wheel set {c.step}: {c.package}: {', '.join(c.wanted)} cannot all hold"
                                             + (f" ({'; '.join(c.reasons)})" if c.reasons else "") for c in clashes))
        except ResolveError as exc:
            raise BumpInputError(f"today's image {self.plan.image}:{self.plan.variant.name} does not resolve, "
                                 f"so there is nothing to compare with: {exc}") from None
        self.notes.append(f"no lock at {lock_dir.relative_to(self.root)}: today's image is what one plain pip install "
                          "per wheel set gives (pinwheel lock writes the lock)")
        return installed, "pip-per-wheel-set", None

    def read_locked(self, lock_dir: Path) -> dict[str, dict[str, str]] | None:
        """step name -> {package: version} as the committed lock installs it; None without a lock.

        Read with ``pinwheel.lock.read_lock``: slices per step, and the fallback files
        of local wheels that are missing.
        """
        if not (lock_dir / LockFiles.REQUIREMENTS).exists():
            return None
        try:
            state = check_lock(self.plan, self.root)
            if state.status != "ok":
                self.notes.append(f"the lock is {state.status} ({state.detail}): today's image is read from it as "
                                  "committed; `pinwheel lock` brings it up to date")
        except (LockError, OSError) as exc:
            self.notes.append(f"could not check whether the lock is up to date: {exc}")
        try:
            lock = read_lock(lock_dir)
        except LockError as exc:
            raise BumpInputError(f"the lock at {lock_dir.relative_to(self.root)} cannot be read, so today's image "
                                 f"is unknown: {exc}") from None
        locked: dict[str, dict[str, str]] = {s.name: {} for s in self.plan.steps}
        for sl in lock.slices:
            if sl.active:
                locked.setdefault(sl.step, {}).update(sl.versions)
        missing = {p.name for p in self.plan.packages() if p.local and self.resolver.local_wheel(p) is None}
        for fb in lock.fallbacks:
            if fb.fallback_for and canonicalize_name(fb.fallback_for) in missing:
                locked.setdefault(fb.step, {}).update(fb.versions)
        return locked

    def local_notes(self) -> None:
        for p in self.plan.packages():
            if not p.local or self.resolver.local_wheel(p) is not None:
                continue
            what = {"fallback": f"the image installs its fallback {p.fallback.pinned if p.fallback else '?'}",
                    "skip": "it is not in the image (policy skip)",
                    "fail": "the build fails (policy fail)"}[p.local.if_missing]
            self.notes.append(f"local wheel wheels/{p.local.glob} for {p.name} is missing: {what}")

    def plan_after(self) -> Plan:
        """The Plan with the bumped requirements (and the variant's torch, when torch is bumped)."""
        def bump_pkg(p: PlannedPackage) -> PlannedPackage:
            fb = bump_pkg(p.fallback) if p.fallback else None
            if p.name in self.bumps:
                req = Requirement(p.requirement)
                text = p.name + (f"[{','.join(sorted(req.extras))}]" if req.extras else "") + f"=={self.new[p.name]}"
                return dataclasses.replace(p, requirement=text, version=self.new[p.name], fallback=fb)
            return dataclasses.replace(p, fallback=fb)

        steps = tuple(dataclasses.replace(s, packages=tuple(bump_pkg(p) for p in s.packages)) for s in self.plan.steps)
        variant = self.plan.variant
        if "torch" in self.new:
            variant = dataclasses.replace(variant, torch=self.new["torch"])
            for g in self.plan.gates:
                if g.holds(self.plan.variant) != g.holds(variant):
                    state = "on" if g.holds(variant) else "off"
                    self.notes.append(f"gate {g.name} ({g.when}) turns {state} with torch {self.new['torch']}: "
                                      "the packages it gates change too; this comparison keeps today's set")
        return dataclasses.replace(self.plan, variant=variant, steps=steps)

    def meta(self, plan: Plan, name: str, version: str):
        return self.resolver.meta(plan, name, version)

    def requirements(self, plan: Plan, inst: Installed, include_suppressed: bool = False) -> list[Requirement]:
        meta = self.meta(plan, inst.name, inst.version)
        if meta is None:
            return []
        return [a.requirement for a in classify_requirements(meta, self.env, inst.extras)
                if a.active and (include_suppressed or not inst.no_deps)]

    # ------------------------------------------------------------ moves

    def apply(self, before: dict[str, Installed], after_plan: Plan) -> tuple[dict[str, Installed], dict[str, Move]]:
        """The image after the bump: bumped packages, then every move they force (to a fixpoint)."""
        after = dict(before)
        pins = after_plan.manifest_pins()
        for name, version in self.new.items():
            cur = before.get(name)
            req = self.bumps[name]
            extras = tuple(sorted(set(cur.extras if cur else ()) | {canonicalize_name(e) for e in req.extras}))
            after[name] = Installed(name, version, cur.step if cur else "(bump)", "index",
                                    cur.no_deps if cur else False, extras, cur.why if cur else None)
            if self.meta(after_plan, name, version) is None:
                err = self.resolver.meta_error(name, version)
                raise BumpInputError(f"cannot read the metadata of {name} {version}: {err}")
        changed = set(self.new)
        moves: dict[str, Move] = {}
        for _ in range(12):
            demands: dict[str, list[tuple[Installed, Requirement]]] = defaultdict(list)
            for inst in after.values():
                for r in self.requirements(after_plan, inst):
                    demands[canonicalize_name(r.name)].append((inst, r))
            progressed = False
            for child, reqs in sorted(demands.items()):
                if child in self.new or not any(p.name in changed for p, _ in reqs):
                    continue
                cur = after.get(child)
                unmet = [(p, r) for p, r in reqs if cur is None or not _contains(r.specifier, cur.version)]
                extras = tuple(sorted(set(cur.extras if cur else ()) | {canonicalize_name(e) for _, r in reqs
                                                                       for e in r.extras}))
                if cur is not None and not unmet:
                    if set(extras) != set(cur.extras):
                        after[child] = dataclasses.replace(cur, extras=extras)
                        progressed = True
                    continue
                forced = [(p, r) for p, r in unmet if p.name in changed]
                if not forced:
                    continue  # only unchanged packages disagree: an old conflict, not this bump's
                if child in moves and moves[child].kind == "conflict":
                    continue
                required_by = [self._demand(before, after_plan, p, r, child) for p, r in reqs if p.name in changed]
                pinned_how = self._pinned(child, pins, cur)
                if pinned_how:
                    spec = SpecifierSet(",".join(str(r.specifier) for p, r in forced))
                    moves[child] = Move(child, before[child].version if child in before else None,
                                        cur.version if cur else None, "conflict", required_by,
                                        self._newest(after_plan, child, spec),
                                        conflict=f"{pinned_how} {child}=={cur.version if cur else '?'}")
                    continue
                spec_all = SpecifierSet(",".join(str(r.specifier) for _, r in reqs))
                spec_forced = SpecifierSet(",".join(str(r.specifier) for _, r in forced))
                version = self.resolver.pick(after_plan, child, spec_all, pins) or \
                    self.resolver.pick(after_plan, child, spec_forced, pins)
                if version is None:
                    # Name the real cause: usually a candidate's own requirement against a manifest pin.
                    causes = self.resolver.refusals(after_plan, child, spec_forced, pins)
                    moves[child] = Move(child, cur.version if cur else None, cur.version if cur else None, "conflict",
                                        required_by, None, conflict="; ".join(causes) or
                                        f"no version of {child} satisfies {spec_forced}",
                                        fix=self._blocker_fix(after_plan, child, spec_forced, pins))
                    continue
                first = next(p for p, _ in forced)
                after[child] = Installed(child, version, cur.step if cur else first.step, "index", False, extras,
                                         cur.why if cur else None)
                changed.add(child)
                before_v = before[child].version if child in before else None
                moves[child] = Move(child, before_v, version, _direction(before_v, version), required_by,
                                    self._newest(after_plan, child, spec_all) or version)
                progressed = True
            if not progressed:
                break
        return after, moves

    def _blocker_fix(self, plan: Plan, child: str, spec: SpecifierSet, pins: dict[str, str]) -> Fix | None:
        """When the newest candidate of `child` is refused only for excluding manifest pins, the fix is those pins."""
        try:
            candidates = sorted(spec.filter(self.source.versions(child)), reverse=True)
        except IndexClientError:
            return None
        if not candidates:
            return None
        blockers = self.resolver.pin_blockers(plan, child, str(candidates[0]), pins)
        if not blockers:
            return None
        dep, req = blockers[0]
        where = "shared_pins" if dep in self.plan.shared_pins else "its wheel set"
        text = (f"{child} {candidates[0]} requires {requirement_text(req)}: move the pin {dep}=={pins[dep]} in {where} "
                f"to a release that satisfies {req.specifier}, or keep the bump off {child} {candidates[0]}")
        also = [f"{child} {candidates[0]} requires {requirement_text(r)} (pinned {d}=={pins[d]})" for d, r in blockers[1:]]
        return Fix("change-pin", dep, None, text, also_needs=also)

    def _pinned(self, name: str, pins: dict[str, str], cur: Installed | None) -> str | None:
        if name in self.plan.shared_pins:
            return "shared pin"
        if name in pins:
            return "manifest pin"
        if cur is not None and cur.source in ("local", "fallback"):
            return f"{cur.source} wheel"
        return None

    def _demand(self, before: dict[str, Installed], after_plan: Plan, parent: Installed, req: Requirement,
                child: str) -> dict:
        was = None
        old = before.get(parent.name)
        if old is not None and old.version != parent.version:
            reqs = [r for r in self.requirements(self.plan, old) if canonicalize_name(r.name) == child]
            was = ", ".join(requirement_text(r) for r in reqs) if reqs else "not required"
        return {"parent": parent.name, "parent_version": parent.version, "requirement": requirement_text(req), "was": was}

    def _nearest(self, plan: Plan, name: str, spec: SpecifierSet, current: str | None) -> str | None:
        """The release satisfying ``spec`` closest to ``current`` (the lowest above it, else the highest below)."""
        try:
            versions = sorted(spec.filter(self.source.versions(name)))
        except IndexClientError:
            return None
        cur = _v(current) if current else None
        above = [v for v in versions if cur is None or v >= cur]
        below = [v for v in reversed(versions) if cur is not None and v < cur]
        for v in (above + below)[:FIX_LOOKUPS]:
            if self.source.best_wheel(name, v, plan.target.python, plan.target.platforms()) is not None:
                return str(v)
        return None

    def _newest(self, plan: Plan, name: str, spec: SpecifierSet) -> str | None:
        try:
            versions = self.source.versions(name)
        except IndexClientError:
            return None
        for v in sorted(spec.filter(versions), reverse=True)[:FIX_LOOKUPS]:
            if self.source.best_wheel(name, v, plan.target.python, plan.target.platforms()) is not None:
                return str(v)
        return None

    # -------------------------------------------------------------- fixes

    def find_fix(self, plan: Plan, parent: str, current: str, child: str, child_version: str,
                 extras: Iterable[str], after: dict[str, Installed], *, ceiling: str | None = None) -> Fix:
        """The version of ``parent`` nearest to ``current`` whose requirement on ``child`` admits ``child_version``.

        Versions are read newest first (at most ``fix_lookups`` per direction, in parallel);
        ``ceiling`` keeps the search at or below a version (for a bumped package).
        """
        extras = tuple(extras)
        try:
            versions = self.source.versions(parent)
        except IndexClientError as exc:
            return Fix("none", parent, None, f"cannot list versions of {parent}: {exc}", complete=False)
        cur = _v(current)
        pre = cur.is_prerelease
        versions = [v for v in versions if (pre or not v.is_prerelease) and v != cur]
        if ceiling is not None:
            versions = [v for v in versions if v <= _v(ceiling)]
        newer = sorted((v for v in versions if v > cur), reverse=True)
        older = sorted((v for v in versions if v < cur), reverse=True)
        checked = 0
        complete = True

        def accepts(vs: list[Version]) -> list[tuple[Version, Any]]:
            nonlocal checked, complete
            vs = vs[: self.fix_lookups]
            if not vs:
                return []
            got = self.source.metadata_many([(parent, v) for v in vs], plan.target.python, plan.target.platforms())
            checked += len(vs)
            ok = []
            for v in vs:
                meta = got.get((canonicalize_name(parent), v))
                if meta is None or isinstance(meta, Exception):
                    if meta is not None and "offline" in str(meta):
                        complete = False
                    continue
                reqs = [a.requirement for a in classify_requirements(meta, self.env, extras) if a.active]
                if all(_contains(r.specifier, child_version) for r in reqs if canonicalize_name(r.name) == child):
                    ok.append((v, meta))
            return ok

        up = accepts(newer)
        if len(newer) > self.fix_lookups:
            complete = complete and bool(up)
        if up:
            nearest, meta = min(up, key=lambda t: t[0])
            newest = max(v for v, _ in up)
            return Fix("upgrade", parent, str(nearest),
                       f"upgrade {parent} to {nearest} (nearest release that accepts {child} {child_version})",
                       newest=str(newest), checked=checked, complete=complete,
                       also_needs=self._also_needs(meta, extras, after, parent, child))
        down = accepts(older)
        if down:
            nearest, meta = max(down, key=lambda t: t[0])
            return Fix("downgrade", parent, str(nearest),
                       f"downgrade {parent} to {nearest} (nearest release that accepts {child} {child_version}; "
                       "no newer one does)", newest=str(nearest), checked=checked, complete=complete,
                       also_needs=self._also_needs(meta, extras, after, parent, child))
        scope = f"the {checked} releases checked" if checked else "no other release to check"
        return Fix("none", parent, None,
                   f"no release of {parent} accepts {child} {child_version} ({scope}"
                   f"{'' if complete else ', search incomplete'})", checked=checked, complete=complete)

    def _also_needs(self, meta, extras: tuple[str, ...], after: dict[str, Installed], parent: str,
                    child: str) -> list[str]:
        """Requirements of a fix version the bumped image does not meet (besides the one it fixes)."""
        out = []
        for a in classify_requirements(meta, self.env, extras):
            if not a.active:
                continue
            n = canonicalize_name(a.requirement.name)
            if n == child:
                continue
            have = after.get(n)
            if have is None or not _contains(a.requirement.specifier, have.version):
                pin = (f"shared pin {self.plan.shared_pins[n]}" if n in self.plan.shared_pins
                       else f"image has {have.version}" if have else "not in the image")
                out.append(f"{requirement_text(a.requirement)} ({pin})")
        return out

    # -------------------------------------------------------------- ABI

    def abi_findings(self, after: dict[str, Installed], after_plan: Plan) -> list[AbiFinding]:
        new_torch = self.new.get("torch")
        if new_torch is None:
            return []
        locals_by_name = {p.name: p for p in self.plan.packages() if p.local}
        tied = torch_tied(after, lambda i: self.requirements(after_plan, i, include_suppressed=True))
        return [self._abi_one(inst, locals_by_name.get(inst.name), new_torch, after_plan) for inst in tied]

    def _abi_one(self, inst: Installed, planned: PlannedPackage | None, new_torch: str, plan: Plan) -> AbiFinding:
        w, filename, how, built = wheel_abi_of(inst, planned, plan, self.source, self.resolver, self.abi_cache,
                                               self.notes)
        if how == "pure-python":
            return AbiFinding(inst.name, inst.version, filename, inst.source, "none", self._declared(inst, plan), None,
                              None, [], None, [], "ok", "pure Python wheel: nothing compiled", how)
        if w is None:
            why = "offline and not in .cache/abi or .cache/wheels" if self.offline else "no wheel to classify"
            return AbiFinding(inst.name, inst.version, filename, inst.source, "unknown", self._declared(inst, plan),
                              None, built, [], None, [], "unchecked", why, how)
        mismatches = provenance_mismatches(w, built) if built else []
        label = parse_local_label(w.local_label)
        declared = w.declared_torch
        built_torch = built.get("torch") if built else None
        exact = _lower_bound(declared) if declared and declared.startswith("==") else None
        sample = sorted({s for e in w.elf_files for s in e.sample_unstable_symbols})[:3]
        builds = _per_torch_builds(w)
        if w.abi_class == "unstable" and len(builds) > 1:
            # One C++ build per torch release, picked by torch's version at import (torch24 ... torch29).
            new_mm, old_mm = _mm(new_torch), _mm(self.today_torch) if self.today_torch else None
            span = f"{builds[0]} to {builds[-1]}" if len(builds) > 2 else " and ".join(builds)
            if new_mm in builds:
                verdict, detail = "ok", f"unstable C++ ABI, one build per torch release ({span}): it ships one for {new_mm}"
            elif old_mm in builds:
                verdict = "rebuild"
                detail = (f"unstable C++ ABI, one build per torch release ({span}): today's {old_mm} is covered, "
                          f"{new_mm} is not; needs a release with a torch {new_mm} build")
            else:
                verdict = "ok"
                detail = (f"unstable C++ ABI, one build per torch release ({span}), picked by torch's version at "
                          f"import: none for today's torch {old_mm} either, so the bump changes nothing here")
            fwd = None
        elif w.abi_class == "unstable":
            evidence = [("manifest built_against", built_torch), ("version label", label.torch), ("exact torch pin", exact)]
            for what, tv in evidence:
                if tv and _minor(tv) == _minor(new_torch):
                    verdict, detail = "ok", f"unstable C++ ABI, built for torch {tv} ({what}), same minor as {new_torch}"
                    break
            else:
                was = next((f"torch {tv} ({what})" for what, tv in evidence if tv), "an unknown torch")
                where = "rebuild the wheel" if inst.source == "local" else "needs a release built against it"
                verdict = "rebuild"
                detail = (f"imports torch's unstable C++ ABI ({', '.join(sample) or 'c10/at symbols'}); built against "
                          f"{was}: fails with 'undefined symbol' on torch {new_torch}; {where}")
            fwd = None
        elif w.abi_class == "stable":
            fwd = _lower_bound(declared) or label.torch or built_torch
            if fwd and _v(new_torch) < _v(fwd):
                verdict = "blocked"
                detail = f"stable ABI, forward compatible from torch {fwd} only: torch {new_torch} is older"
            else:
                verdict = "ok"
                detail = f"stable ABI, forward compatible from torch {fwd or 'the one it was built with'}"
        else:
            fwd = None
            verdict = "ok"
            detail = "no torch symbols imported" if w.is_compiled else "no compiled code"
        return AbiFinding(inst.name, inst.version, filename or w.filename, inst.source, w.abi_class, declared,
                          w.local_label, built, mismatches, fwd, sample, verdict, detail, "classified")

    def _declared(self, inst: Installed, plan: Plan) -> str | None:
        reqs = [r for r in self.requirements(plan, inst, include_suppressed=True) if canonicalize_name(r.name) == "torch"]
        return str(reqs[0].specifier) if reqs else None

    # -------------------------------------------------------------- build

    def build(self) -> BumpReport:
        t0 = time.perf_counter()
        self.validate()
        before, installed_from, lock_dir = self.today()
        self.today_torch = before["torch"].version if "torch" in before else None
        self.local_notes()
        before_edges = self.resolver.judge(self.plan, before)
        after_plan = self.plan_after()
        after, moves = self.apply(before, after_plan)
        after_edges = self.resolver.judge(after_plan, after)
        changed = {n for n in after if n not in before or after[n].version != before[n].version}

        rows: dict[str, PackageRow] = {}
        pins = after_plan.manifest_pins()
        pinned_today = self.plan.manifest_pins()

        def row(name: str) -> PackageRow:
            if name not in rows:
                b, a = before.get(name), after.get(name)
                inst = a or b
                source = "bump" if name in self.new else "move" if name in changed else (inst.source if inst else "index")
                rows[name] = PackageRow(name, b.version if b else None, a.version if a else None, source, "ok", None,
                                        pinned_by_manifest=name in pinned_today or bool(inst and inst.source != "index"),
                                        no_deps=bool(inst and inst.no_deps))
            return rows[name]

        def judge(name: str, verdict: str, reason: str, fix: Fix | None = None, to: str | None = None) -> None:
            r = row(name)
            if reason and reason not in r.reasons:
                r.reasons.append(reason)
            if SEVERITY[verdict] > SEVERITY[r.verdict]:
                r.verdict, r.to = verdict, to
                if fix is not None:
                    r.fix = fix
            elif fix is not None and r.fix is None:
                r.fix = fix

        bumps_info = []
        for name, version in self.new.items():
            b = before.get(name)
            bumps_info.append({"name": name, "from": b.version if b else None, "to": version, "in_image": b is not None})
            judge(name, "ok", f"bumped {b.version} → {version}" if b else f"not in today's image: added at {version}")
            if b is not None and b.no_deps:
                judge(name, "ok", "installed with --no-deps: its requirements are not enforced (see suppressed)")

        # 3. what moves along
        move_list = self._requirement_diffs(before, after, after_plan, moves)
        for mv in move_list:
            if mv.kind == "conflict":
                fix = mv.fix or self._pin_fix(mv, after_plan, after_edges)
                mv.fix = fix
                judge(mv.name, "blocked", f"{', '.join(d['parent'] + ' ' + d['parent_version'] + ' requires ' + d['requirement'] for d in mv.required_by)}; "
                      f"{mv.conflict}", fix)
            elif mv.kind in ("upgrade", "downgrade", "add"):
                by = ", ".join(f"{d['parent']} {d['parent_version']} requires {d['requirement']}" for d in mv.required_by)
                judge(mv.name, mv.kind, f"moves along: {by}", to=mv.after)

        # 2. requirements that exclude the new versions (and the reverse)
        req_findings = self._requirement_findings(before_edges, after_edges, before, after, changed, after_plan)
        for rf in req_findings:
            text = f"{rf.parent} {rf.parent_version} requires {rf.requirement}"
            if rf.change == "breaks" and rf.enforced:
                parent_pinned = rf.parent in pins or (after.get(rf.parent) and after[rf.parent].source != "index")
                if rf.fix and rf.fix.action in ("upgrade", "downgrade") and not parent_pinned and not rf.fix.also_needs:
                    judge(rf.parent, rf.fix.action, f"{text}: excludes {rf.name} {after[rf.name].version}; a re-lock "
                          f"moves it to {rf.fix.version}", rf.fix, to=rf.fix.version)
                else:
                    judge(rf.parent, "blocked", f"{text}: excludes {rf.name} {after[rf.name].version}", rf.fix)
            elif rf.change == "breaks":
                judge(rf.parent, "ok", f"{text}: excludes {rf.name} {after[rf.name].version}, but it is installed "
                      "with --no-deps, so pip does not enforce it (check it at run time)")
            elif rf.change == "unblocks":
                how = "" if rf.enforced else " (today hidden by --no-deps)"
                judge(rf.parent, "ok", f"{text}: excluded {rf.name} {before[rf.name].version}{how}; "
                      f"the bump to {after[rf.name].version} satisfies it")
            elif rf.change == "holds" and rf.name in self.new:
                judge(rf.parent, "ok", f"{text}: still satisfied by {rf.name} {after[rf.name].version}")
            elif rf.change == "still-violated":
                judge(rf.parent, "ok", f"{text}: violated today and after the bump (not this bump's doing)")

        # 4. shared pins
        shared = self._shared_pins(before_edges, after_edges, before, after, after_plan)
        for sp in shared:
            if sp.status == "unsatisfiable":
                for vio in sp.violations:
                    if vio["new"] and (vio["enforced"] or vio["extra"] is None):
                        hidden = "" if vio["enforced"] else " (hidden by --no-deps, needed at run time)"
                        judge(vio["parent"], "blocked",
                              f"{vio['parent']} {vio['parent_version']} requires {vio['requirement']}: shared pin "
                              f"{sp.requirement} becomes unsatisfiable{hidden}",
                              Fix("change-pin", vio["parent"], None, "; or ".join(sp.fixes)))
            elif sp.status == "changed-by-bump":
                judge(sp.name, "ok", f"the bump moves shared pin {sp.requirement}: update shared_pins in "
                      f"{self.m.path.name}")

        # 1. ABI coupling
        abi = self.abi_findings(after, after_plan)
        for f in abi:
            fix = None
            if f.verdict == "rebuild":
                fix = Fix("rebuild", f.name, None,
                          f"rebuild {f.name} against torch {self.new['torch']}"
                          + (f" and update its built_against in {self.m.path.name}" if f.source == "local" else ""))
            elif f.verdict == "blocked":
                fix = Fix("upgrade", "torch", f.forward_compatible_from,
                          f"bump torch to {f.forward_compatible_from} or later, or use a build of {f.name} for "
                          f"torch {self.new['torch']}")
            reason = f"ABI: {f.verdict} ({f.detail})"
            if f.provenance_mismatches:
                reason += f"; provenance: {'; '.join(f.provenance_mismatches)}"
            judge(f.name, f.verdict, reason, fix)

        if self.list_all:
            for name in after:
                row(name)
        packages = sorted(rows.values(), key=lambda r: (r.source != "bump", -SEVERITY[r.verdict], r.name))
        counts = defaultdict(int)
        for r in packages:
            counts[r.verdict] += 1
        pre_existing = [e for e in after_edges if e.verdict == "violated" and e.name not in changed
                        and e.parent not in changed]
        if pre_existing:
            self.notes.append(f"{len(pre_existing)} requirement(s) violated today and unchanged by the bump "
                              f"(pinwheel report lists them): " + ", ".join(f"{e.parent} {e.requirement}"
                                                                            for e in pre_existing[:5]))
        unknown = sorted({e.parent for e in after_edges if e.verdict == "unchecked"})
        if unknown:
            self.notes.append(f"metadata not available for {', '.join(unknown)}: their requirements were not checked")
        if self.plan.variant.torch_index_env:
            self.notes.append(f"variant {self.plan.variant.name} takes torch from the index in "
                              f"${self.plan.variant.torch_index_env}; torch's metadata was read from there")
        summary = {v: counts.get(v, 0) for v in VERDICTS}
        summary["blocked_shared_pins"] = sum(1 for s in shared if s.status == "unsatisfiable")
        summary["moves"] = sum(1 for m in move_list if m.kind in ("upgrade", "downgrade", "add"))
        summary["exit_code"] = 1 if summary["blocked"] else 0
        timing = {"seconds": round(time.perf_counter() - t0, 3), "index": self.source.stats(),
                  "abi_cache": dict(self.abi_cache.stats)}
        return BumpReport(
            image=self.plan.image, variant=self.plan.variant.name,
            target={"python": self.plan.target.python, "platform": self.plan.target.platform,
                    "cuda": self.plan.target.cuda},
            installed_from=installed_from,
            lock_dir=str(lock_dir.relative_to(self.root)) if lock_dir else None,
            bumps=bumps_info, packages=packages, abi=abi, requirements=req_findings, moves=move_list,
            shared_pins=shared, notes=self.notes, summary=summary, timing=timing)

    # ------------------------------------------------------- sub-reports

    def _requirement_diffs(self, before: dict[str, Installed], after: dict[str, Installed], after_plan: Plan,
                           moves: dict[str, Move]) -> list[Move]:
        """Moves, plus every dependency whose requirement a bumped package changed (old vs new Requires-Dist)."""
        out = dict(moves)
        for name in self.new:
            old, new = before.get(name), after[name]
            if old is None:
                continue
            old_reqs = {canonicalize_name(r.name): r for r in self.requirements(self.plan, dataclasses.replace(old, no_deps=False))}
            new_reqs = {canonicalize_name(r.name): r for r in self.requirements(after_plan, dataclasses.replace(new, no_deps=False))}
            for dep in sorted(set(old_reqs) | set(new_reqs)):
                if dep in out or dep in self.new:
                    continue
                o, n = old_reqs.get(dep), new_reqs.get(dep)
                if o is not None and n is not None and requirement_text(o) == requirement_text(n):
                    continue
                have = before.get(dep)
                by = [{"parent": name, "parent_version": new.version,
                       "requirement": requirement_text(n) if n else "not required",
                       "was": requirement_text(o) if o else "not required"}]
                if n is None:
                    out[dep] = Move(dep, have.version if have else None, have.version if have else None, "dropped", by,
                                    None)
                    continue
                newest = self._newest(after_plan, dep, n.specifier)
                kind = "stays"
                conflict = None
                if old.no_deps and (have is None or not _contains(n.specifier, have.version)):
                    kind = "conflict"
                    conflict = (f"{name} is installed with --no-deps: pip will not "
                                f"{'install' if have is None else 'move'} {dep}")
                out[dep] = Move(dep, have.version if have else None, after[dep].version if dep in after else None,
                                kind, by, newest, conflict=conflict)
        order = {"conflict": 0, "upgrade": 1, "downgrade": 1, "add": 2, "stays": 3, "dropped": 4}
        return sorted(out.values(), key=lambda m: (order.get(m.kind, 5), m.name))

    def _pin_fix(self, mv: Move, plan: Plan, after_edges: list[Edge]) -> Fix:
        """For a move that hits a pin: the version the pin would have to become, and who objects to it."""
        spec = SpecifierSet(",".join(_spec_of(d["requirement"]).__str__() for d in mv.required_by))
        target = self._nearest(plan, mv.name, spec, mv.today) or mv.newest_acceptable
        if target is None:
            return Fix("none", mv.name, None, f"no release of {mv.name} satisfies "
                       + ", ".join(d["requirement"] for d in mv.required_by))
        objections = [f"{e.parent} {e.parent_version} requires {e.requirement}" for e in after_edges
                      if e.name == mv.name and e.verdict in ("satisfied", "violated")
                      and e.parent not in {d["parent"] for d in mv.required_by}
                      and not _contains(_spec_of(e.requirement), target)]
        if mv.name in self.plan.shared_pins:
            text = f"change the pin of {mv.name} to {target} in shared_pins"
        elif mv.name in self.plan.manifest_pins():
            text = f"change the pin of {mv.name} to {target} in its wheel set"
        elif mv.today is None:
            text = f"add {mv.name}=={target} to the manifest (a --no-deps install does not bring it in)"
        else:
            text = f"pin {mv.name}=={target} in the manifest (pip will not move it past a --no-deps install)"
        if objections:
            text += f" (then {'; '.join(objections)} objects)"
        return Fix("change-pin", mv.name, target, text, also_needs=objections)

    def _requirement_findings(self, before_edges: list[Edge], after_edges: list[Edge], before: dict[str, Installed],
                              after: dict[str, Installed], changed: set[str], after_plan: Plan) -> list[RequirementFinding]:
        def key(e: Edge) -> tuple:
            return (e.parent, e.name, e.extra)

        def state(e: Edge | None) -> str:
            if e is None:
                return "absent"
            if e.found is None:
                return "missing"
            return "satisfied" if _contains(_spec_of(e.requirement), e.found) else "violated"

        counted = ("satisfied", "violated", "suppressed")
        old = {key(e): e for e in before_edges if e.verdict in counted}
        out = []
        for e in after_edges:
            if e.verdict not in counted or e.name not in changed or e.parent in changed:
                continue
            if e.verdict == "suppressed" and e.extra is not None and e.extra not in after[e.parent].extras:
                continue  # an extra the image never asks for
            b = old.get(key(e))
            today, now = state(b), state(e)
            if now == "violated" and today != "violated":
                change = "breaks"
            elif now == "satisfied" and today in ("violated", "missing"):
                change = "unblocks"
            elif now == "violated":
                change = "still-violated"
            elif e.name in self.new:
                change = "holds"
            else:
                continue  # a moved package whose consumers still accept it: nothing to say
            rf = RequirementFinding(e.parent, e.parent_version, e.requirement, e.name, e.extra,
                                    e.verdict != "suppressed", today, now, change)
            if change == "breaks":
                inst = after[e.parent]
                rf.fix = self.find_fix(after_plan, e.parent, e.parent_version, e.name, after[e.name].version,
                                       inst.extras, after)
            out.append(rf)
        order = {"breaks": 0, "unblocks": 1, "still-violated": 2, "holds": 3}
        return sorted(out, key=lambda r: (order[r.change], not r.enforced, r.parent))

    def _shared_pins(self, before_edges: list[Edge], after_edges: list[Edge], before: dict[str, Installed],
                     after: dict[str, Installed], after_plan: Plan) -> list[SharedPinFinding]:
        out = []
        for sp in self.m.shared_pins:
            name, version = sp.name, sp.version
            text = str(sp.requirement)
            if name in self.new:
                out.append(SharedPinFinding(text, name, version, "changed-by-bump", [],
                                            [f"update shared_pins to {name}=={self.new[name]}"]))
                continue

            def excluding(edges: list[Edge], installed: dict[str, Installed]) -> dict[tuple, Edge]:
                found = {}
                for e in edges:
                    if e.name != name or e.verdict not in ("satisfied", "violated", "suppressed"):
                        continue
                    inst = installed.get(e.parent)
                    if e.verdict == "suppressed" and e.extra is not None and inst and e.extra not in inst.extras:
                        continue
                    if not _contains(_spec_of(e.requirement), version):
                        found[(e.parent, e.extra)] = e
                return found

            old = excluding(before_edges, before)
            new = excluding(after_edges, after)
            violations = []
            fixes: list[str] = []
            for k, e in sorted(new.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
                was = old.get(k)
                is_new = was is None or was.requirement != e.requirement or was.parent_version != e.parent_version
                violations.append({"parent": e.parent, "parent_version": e.parent_version, "requirement": e.requirement,
                                   "extra": e.extra, "enforced": e.verdict != "suppressed", "new": is_new})
                if is_new:
                    fixes.extend(self._shared_fixes(e, name, version, before, after, after_plan, after_edges))
            blocking = [v for v in violations if v["new"] and (v["enforced"] or v["extra"] is None)]
            status = "unsatisfiable" if blocking else "pre-existing" if violations else "ok"
            if after.get(name) and after[name].version != version and status == "ok":
                status = "unsatisfiable"
                fixes.append(f"{name} is {after[name].version} after the bump, not {version}")
            out.append(SharedPinFinding(text, name, version, status, violations, list(dict.fromkeys(fixes))))
        return out

    def _shared_fixes(self, e: Edge, name: str, version: str, before: dict[str, Installed],
                      after: dict[str, Installed], plan: Plan, after_edges: list[Edge]) -> list[str]:
        fixes = []
        parent = e.parent
        inst = after.get(parent)
        ceiling = self.new.get(parent)
        start = before[parent].version if parent in self.new and parent in before else e.parent_version
        fix = self.find_fix(plan, parent, start, name, version, inst.extras if inst else (), after,
                            ceiling=ceiling)
        if parent in self.new and fix.action == "upgrade":
            fixes.append(f"bump {parent} only to {fix.newest} (the newest release up to {ceiling} that accepts "
                         f"{name} {version})")
        elif parent in self.new:
            fixes.append(f"no release of {parent} after {start} up to {ceiling} accepts {name} {version}")
        else:
            fixes.append(fix.text)
        target = self._nearest(plan, name, _spec_of(e.requirement), version)
        if target:
            objections = [f"{x.parent} {x.parent_version} requires {x.requirement}" for x in after_edges
                          if x.name == name and x.parent != parent and x.verdict in ("satisfied", "violated")
                          and not _contains(_spec_of(x.requirement), target)]
            text = f"move shared pin {name} to {target}"
            if objections:
                text += f" (but {'; '.join(objections)})"
            else:
                text += f" (every other requirement on {name} in the image accepts it"
                needed = self.plan.shared_pin_needs.get(name, ())
                text += f"; check the pin's other consumers: {', '.join(needed)})" if needed else ")"
            fixes.append(text)
        return fixes


_TORCH_BUILD_RE = re.compile(r"(?:torch|pt)[-_.]?(\d)[._]?(\d{1,2})(?!\d)")


def _per_torch_builds(w: WheelAbi) -> list[str]:
    """Torch releases a wheel carries separate C++ builds for, read from its ELF file names."""
    found = set()
    for e in w.elf_files:
        if e.vendored or e.abi_class != "unstable":
            continue
        m = _TORCH_BUILD_RE.search(e.path_in_wheel.rsplit("/", 1)[-1])
        if m:
            found.add(f"{m[1]}.{int(m[2])}")
    return sorted(found, key=lambda v: tuple(int(x) for x in v.split(".")))


def _mm(version: str) -> str:
    return ".".join(str(x) for x in _minor(version))


def _ordinal(v: Version) -> float:
    r = (v.release + (0, 0, 0))[:3]
    return r[0] * 1e6 + r[1] * 1e3 + r[2]


# ------------------------------------------------------------------ entry


def bump(manifest: Manifest, variant: str, requirements: Iterable[str], client: IndexClient, *,
         offline: bool = False, fix_lookups: int = FIX_LOOKUPS, list_all: bool = False) -> BumpReport:
    """Compare today's image of ``variant`` with the image after bumping ``requirements`` (name==version)."""
    reqs = parse_bumps(requirements)
    v = manifest.variant(variant)
    torch_client = None
    if v.torch_index_env:
        url = v.torch_index_url()
        if not url:
            raise BumpInputError(f"{v.torch_index_unset()}: set it, or pick another variant")
        torch_client = IndexClient(index_url=url, cache_dir=client.cache_dir, offline=offline, max_age=client.max_age)
    return _Bump(manifest, variant, reqs, client, offline=offline, fix_lookups=fix_lookups,
                 torch_client=torch_client, list_all=list_all).build()


# ------------------------------------------------------------------ output


_STYLE = {"ok": "green", "unchecked": "yellow", "add": "cyan", "upgrade": "cyan", "downgrade": "cyan",
          "rebuild": "magenta", "blocked": "bold red"}
#: Output that is not a terminal (CI logs, files) is printed at least this wide.
LOG_WIDTH = 160


def verdict_text(r: PackageRow) -> str:
    if r.verdict in ("upgrade", "downgrade") and r.to:
        return f"{r.verdict} to {r.to}"
    if r.verdict == "add" and r.to:
        return f"add {r.to}"
    return r.verdict


def _quiet_adds(report: BumpReport) -> set[str]:
    """Packages added only as dependencies of other added packages: counted, not listed, unless --all."""
    bumped = {b["name"] for b in report.bumps}
    return {m.name for m in report.moves
            if m.kind == "add" and not any(d["parent"] in bumped for d in m.required_by)}


def _span(today: str | None, after: str | None) -> str:
    if today == after:
        return today or "-"
    return f"{today or '-'} → {after or '-'}"


def _short(req_text: str | None, name: str) -> str:
    """A requirement without its own package name when that name is the row's ('==9.24.0.43')."""
    if not req_text:
        return "-"
    try:
        req = Requirement(req_text)
    except InvalidRequirement:
        return req_text
    if canonicalize_name(req.name) != name:
        return req_text
    extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
    return (extras + str(req.specifier)) or "any version"


def print_bump(report: BumpReport, console, show_all: bool = False) -> None:
    """The comparison as rich tables: packages, ABI coupling, requirements, moves, shared pins, notes."""
    from rich.markup import escape
    from rich.table import Table

    c = console
    if not c.is_terminal and c.width < LOG_WIDTH:
        c.width = LOG_WIDTH
    bumps = ", ".join(f"{b['name']} {b['from'] or '(new)'} → {b['to']}" for b in report.bumps)
    t = report.target
    source = (f"its lock {report.lock_dir}" if report.installed_from == "lock"
              else "one plain pip install per wheel set (no lock)")
    c.print(f"[bold]bump {escape(bumps)}[/bold] in {escape(report.image)}:{escape(report.variant)} "
            f"(Python {t['python']}, {t['platform']}, CUDA {t['cuda']}); today's image: {escape(source)}")

    table = Table(title="Packages", title_justify="left")
    table.add_column("package", overflow="fold")
    table.add_column("version", overflow="fold")
    table.add_column("verdict", overflow="fold")
    table.add_column("why, and the nearest fix", overflow="fold", ratio=1)
    quiet = set() if show_all else _quiet_adds(report)
    for r in report.packages:
        if r.verdict == "add" and r.name in quiet:
            continue
        style = _STYLE.get(r.verdict, "")
        why = escape("\n".join(r.reasons))
        if r.fix and r.verdict != "ok":
            also = r.fix.also_needs if r.fix.action != "change-pin" else []  # a pin fix names its objectors itself
            fix = r.fix.text + (f"; also needs {', '.join(also)}" if also else "")
            why += f"\n[bold]fix:[/bold] {escape(fix)}"
        name = r.name + (" (--no-deps)" if r.no_deps else "")
        table.add_row(escape(name), escape(_span(r.today, r.after)), f"[{style}]{escape(verdict_text(r))}[/{style}]",
                      why)
    c.print(table)
    hidden = sum(1 for r in report.packages if r.verdict == "add" and r.name in quiet)
    if hidden:
        c.print(f"  (+{hidden} more packages added as dependencies of added packages; --all lists them)")

    if report.abi:
        torch_to = next((b["to"] for b in report.bumps if b["name"] == "torch"), "?")
        at = Table(title=f"ABI coupling: compiled wheels tied to torch, against torch {torch_to}", title_justify="left")
        for col in ("wheel", "ABI", "declares torch", "label", "built against", "verdict"):
            at.add_column(col, overflow="fold")
        for f in report.abi:
            style = _STYLE.get(f.verdict, "")
            built = (f.built_against or {}).get("torch") or "-"
            if f.provenance_mismatches:
                built += "\n" + "\n".join(f.provenance_mismatches)
            at.add_row(escape(f"{f.name} {f.version} ({f.source})"), f.abi_class,
                       escape(f.declared_torch if f.declared_torch is not None else "-"), escape(f.local_label or "-"),
                       escape(built), f"[{style}]{escape(f.verdict)}[/{style}] ({escape(f.detail)})")
        c.print(at)

    if report.requirements:
        rt = Table(title="Requirements on what the bump changes", title_justify="left")
        for col in ("package", "requires", "today → after", "change", "nearest fix"):
            rt.add_column(col, overflow="fold")
        for rf in report.requirements:
            who = f"{rf.parent} {rf.parent_version}" + ("" if rf.enforced else " (--no-deps, not enforced)")
            req = rf.requirement + (f" [extra {rf.extra}]" if rf.extra else "")
            style = "red" if rf.change == "breaks" else "green" if rf.change == "unblocks" else ""
            change = f"[{style}]{rf.change}[/{style}]" if style else rf.change
            fix = rf.fix.text if rf.fix else ""
            if rf.fix and rf.fix.newest and rf.fix.newest != rf.fix.version:
                fix += f"; newest that accepts: {rf.fix.newest}"
            if rf.fix and rf.fix.also_needs:
                fix += f"; also needs {', '.join(rf.fix.also_needs)}"
            rt.add_row(escape(who), escape(req), f"{rf.today} → {rf.after}", change, escape(fix))
        c.print(rt)

    moves = [m for m in report.moves if m.name not in quiet]
    if moves:
        mt = Table(title="What moves along (the changed packages' own requirements, new and was)", title_justify="left")
        for col in ("package", "required by", "version", "newest acceptable", "note"):
            mt.add_column(col, overflow="fold")
        for m in moves:
            by = "\n".join(f"{d['parent']} {d['parent_version']}: {_short(d['requirement'], m.name)}"
                           + (f" (was {_short(d['was'], m.name)})" if d.get("was") else "") for d in m.required_by)
            note = escape(m.kind) if m.kind != "conflict" else f"[bold red]blocked[/bold red]: {escape(m.conflict or '')}"
            if m.fix:
                note += f"\nfix: {escape(m.fix.text)}"
            mt.add_row(escape(m.name), escape(by), escape(_span(m.today, m.after)), escape(m.newest_acceptable or "-"),
                       note)
        c.print(mt)
    hidden_moves = len(report.moves) - len(moves)
    if hidden_moves:
        c.print(f"  (+{hidden_moves} more added dependencies; --all lists them)")

    c.print("[bold]Shared pins[/bold]")
    for sp in report.shared_pins:
        style = {"ok": "green", "changed-by-bump": "cyan", "pre-existing": "yellow"}.get(sp.status, "bold red")
        c.print(f"  {escape(sp.requirement)}: [{style}]{sp.status}[/{style}]")
        for v in sp.violations:
            tags = ", ".join(x for x in ("new" if v["new"] else "already today",
                                          None if v["enforced"] else "--no-deps, not enforced",
                                          f"extra {v['extra']}" if v["extra"] else None) if x)
            c.print(f"    {escape(v['parent'])} {escape(v['parent_version'])} requires {escape(v['requirement'])} "
                    f"({escape(tags)})")
        for fx in sp.fixes:
            c.print(f"    fix: {escape(fx)}")

    for n in report.notes:
        c.print(f"[dim]note: {escape(n)}[/dim]")
    s = report.summary
    parts = [f"{s[v]} {v}" for v in ("blocked", "rebuild", "upgrade", "downgrade", "add", "unchecked", "ok") if s[v]]
    c.print(f"\n{', '.join(parts)}; {s['moves']} move(s); {s['blocked_shared_pins']} shared pin(s) unsatisfiable")
    if s["blocked"]:
        c.print(f"[bold red]{escape(BLOCKED_MEANING)}[/bold red]")
    else:
        c.print("[green]nothing blocks this bump[/green]" + (" (rebuild the wheels marked rebuild first)"
                                                            if s["rebuild"] else ""))
    tm = report.timing
    c.print(f"[dim]checked in {tm['seconds']:.2f} s; index requests: {tm['index'].get('page_requests', 0)} pages, "
            f"{tm['index'].get('metadata_requests', 0)} metadata, {tm['index'].get('range_requests', 0)} ranged; "
            f"ABI cache: {tm['abi_cache']['hits']} hit(s), {tm['abi_cache']['classified']} classified, "
            f"{tm['abi_cache']['downloads']} download(s)[/dim]")
