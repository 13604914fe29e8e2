"""Today's image and the image after the bump, each as {package: Installed}.

Today's image is what the committed lock installs (else one plain pip install
per wheel set, as ``pinwheel report`` sees it). The image after the bump is
today's with the bumped versions, then every move they force, to a fixpoint: a
package keeps today's version unless a changed package's requirements exclude it.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from ...index import IndexClientError, PackageNotFound
from ...lock import LockError, check_lock, lock_installs
from ...plan import Installed, Plan, PlannedPackage
from ...resolve import ResolveError, requirement_text
from ...workspace import LockFiles
from ..report import platform_gap
from .context import Comparison
from .fixes import blocker_fix
from .model import BumpInputError, Move
from .versions import admits, direction, ordinal


# ------------------------------------------------------------ inputs


def validate(c: Comparison) -> None:
    for name, version in list(c.new.items()):
        client = c.source.source_for(name)
        try:
            versions = client.versions(name)
        except PackageNotFound:
            local = [p for p in c.plan.packages(active_only=False) if p.name == name and p.local]
            if local:
                raise BumpInputError(
                    f"{name} is a local wheel ({local[0].local.glob}), not on the index: rebuild it, put the wheel "
                    f"into wheels/ and update its pin in {c.m.path.name}") from None
            raise BumpInputError(f"unknown package {name!r}: the index has no project of that name") from None
        want = Version(version)
        exact = SpecifierSet(f"=={version}")
        if not any(exact.contains(v, prereleases=True) for v in versions) and not c.offline \
                and client.max_age is not None:
            versions = client.reread(name)  # the cached page may predate the release
        if want not in versions:
            # ==2.14.1 also matches a local build such as 2.14.1+cu129, as pip would take it
            local_builds = sorted(v for v in versions if exact.contains(v, prereleases=True))
            if local_builds:
                want = local_builds[-1]
                c.new[name] = str(want)
        if want not in versions:
            finals = [v for v in versions if not v.is_prerelease]
            near = sorted(finals or versions, key=lambda v: (abs(ordinal(v) - ordinal(want)), v))[:4]
            hint = f" (nearest: {', '.join(str(v) for v in sorted(near))})" if near else ""
            raise BumpInputError(f"{name} {version} is not on the index{hint}")
        f = client.best_wheel(name, want, c.plan.target.python, c.plan.target.platforms())
        if f is None:
            gap = missing_here(c, client, name, want)
            if gap is None:
                raise BumpInputError(f"{name} {version} has no wheel for Python {c.plan.target.python} on "
                                     f"{c.plan.target.platform} (variant {c.plan.variant.name})")
            c.missing[name] = gap


def missing_here(c: Comparison, client, name: str, version: Version) -> dict | None:
    """The finding for a bumped version with no file this platform installs while the index has wheels of
    it for others (linux/arm64 missing, x86_64 there); None when it has no wheel at all (bad input)."""
    gap = platform_gap(c.plan, name, [f for f in client.files(name) if f.version == version])
    if gap is not None:
        del gap["step"]  # the bump's finding names no step
    return gap


# ------------------------------------------------------------ today


def today(c: Comparison) -> tuple[dict[str, Installed], str, Path | None]:
    """(today's image, how it was had, the lock directory when it came from the lock)."""
    lock_dir = c.workspace.plan_lock_dir(c.plan)  # the platform's own lock
    locked = read_locked(c, lock_dir)
    try:
        if locked is not None:
            installed, _ = c.resolver.as_locked(c.plan, locked)
            return installed, "lock", lock_dir
        installed, _, clashes, unjudged = c.resolver.as_pip_would(c.plan)
        if unjudged:
            raise IndexClientError("; ".join(f"{u.package}: {u.reason}" for u in unjudged))
        if clashes:
            raise ResolveError("; ".join(f"wheel set {cl.step}: {cl.package}: {', '.join(cl.wanted)} cannot all hold"
                                         + (f" ({'; '.join(cl.reasons)})" if cl.reasons else "") for cl in clashes))
    except ResolveError as exc:
        raise BumpInputError(f"today's image {c.plan.image}:{c.plan.variant.name} does not resolve, "
                             f"so there is nothing to compare with: {exc}") from None
    c.notes.append(f"no lock at {lock_dir.relative_to(c.root)}: today's image is what one plain pip install "
                   "per wheel set gives (pinwheel lock writes the lock)")
    return installed, "pip-per-wheel-set", None


def read_locked(c: Comparison, lock_dir: Path) -> dict[str, dict[str, str]] | None:
    """step name -> {package: version} as the committed lock installs it; None without a lock.

    Read with ``pinwheel.lock.lock_installs``: slices per step, and the fallback files
    of local wheels that are missing.
    """
    if not (lock_dir / LockFiles.REQUIREMENTS).exists():
        return None
    try:
        state = check_lock(c.plan, c.root)
        if state.status != "ok":
            c.notes.append(f"the lock is {state.status} ({state.detail}): today's image is read from it as "
                           "committed; `pinwheel lock` brings it up to date")
    except (LockError, OSError) as exc:
        c.notes.append(f"could not check whether the lock is up to date: {exc}")
    try:
        return lock_installs(c.plan, lock_dir, c.workspace.wheels_dir)
    except LockError as exc:
        raise BumpInputError(f"the lock at {lock_dir.relative_to(c.root)} cannot be read, so today's image "
                             f"is unknown: {exc}") from None


def local_notes(c: Comparison) -> None:
    for p in c.plan.packages():
        if not p.local or c.resolver.local_wheel(p, c.plan) is not None:  # this platform's wheels only
            continue
        what = {"fallback": f"the image installs its fallback {p.fallback.pinned if p.fallback else '?'}",
                "skip": "it is not in the image (policy skip)",
                "fail": "the build fails (policy fail)"}[p.local.if_missing]
        c.notes.append(f"local wheel wheels/{p.local.glob} for {p.name} is missing: {what}")


# ------------------------------------------------------------ after


def plan_after(c: Comparison) -> Plan:
    """The Plan with the bumped requirements (and the variant's torch, when torch is bumped)."""
    def bump_pkg(p: PlannedPackage) -> PlannedPackage:
        fb = bump_pkg(p.fallback) if p.fallback else None
        if p.name in c.bumps:
            req = Requirement(p.requirement)
            text = p.name + (f"[{','.join(sorted(req.extras))}]" if req.extras else "") + f"=={c.new[p.name]}"
            return dataclasses.replace(p, requirement=text, version=c.new[p.name], fallback=fb)
        return dataclasses.replace(p, fallback=fb)

    steps = tuple(dataclasses.replace(s, packages=tuple(bump_pkg(p) for p in s.packages)) for s in c.plan.steps)
    variant = c.plan.variant
    if "torch" in c.new:
        variant = dataclasses.replace(variant, torch=c.new["torch"])
        for g in c.plan.gates:
            if g.holds(c.plan.variant) != g.holds(variant):
                state = "on" if g.holds(variant) else "off"
                c.notes.append(f"gate {g.name} ({g.when}) turns {state} with torch {c.new['torch']}: "
                               "the packages it gates change too; this comparison keeps today's set")
    return dataclasses.replace(c.plan, variant=variant, steps=steps)


def apply(c: Comparison, before: dict[str, Installed], after_plan: Plan) -> tuple[dict[str, Installed], dict[str, Move]]:
    """The image after the bump: bumped packages, then every move they force (to a fixpoint)."""
    after = dict(before)
    pins = after_plan.manifest_pins()
    for name, version in c.new.items():
        cur = before.get(name)
        req = c.bumps[name]
        extras = tuple(sorted(set(cur.extras if cur else ()) | {canonicalize_name(e) for e in req.extras}))
        after[name] = Installed(name, version, cur.step if cur else "(bump)", "index",
                                cur.no_deps if cur else False, extras, cur.why if cur else None)
        if name in c.missing:  # nothing of it to read on this platform: its finding says so
            continue
        if c.meta(after_plan, name, version) is None:
            err = c.resolver.meta_error(name, version)
            raise BumpInputError(f"cannot read the metadata of {name} {version}: {err}")
    changed = set(c.new)
    moves: dict[str, Move] = {}
    for _ in range(12):
        demands: dict[str, list[tuple[Installed, Requirement]]] = defaultdict(list)
        for inst in after.values():
            for r in c.requirements(after_plan, inst):
                demands[canonicalize_name(r.name)].append((inst, r))
        progressed = False
        for child, reqs in sorted(demands.items()):
            if child in c.new or not any(p.name in changed for p, _ in reqs):
                continue
            cur = after.get(child)
            unmet = [(p, r) for p, r in reqs if cur is None or not admits(r.specifier, cur.version)]
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
            required_by = [_demand(c, before, after_plan, p, r, child) for p, r in reqs if p.name in changed]
            pinned_how = _pinned(c, child, pins, cur)
            if pinned_how:
                spec = SpecifierSet(",".join(str(r.specifier) for p, r in forced))
                moves[child] = Move(child, before[child].version if child in before else None,
                                    cur.version if cur else None, "conflict", required_by,
                                    c.newest(after_plan, child, spec),
                                    conflict=f"{pinned_how} {child}=={cur.version if cur else '?'}")
                continue
            spec_all = SpecifierSet(",".join(str(r.specifier) for _, r in reqs))
            spec_forced = SpecifierSet(",".join(str(r.specifier) for _, r in forced))
            version = c.resolver.pick(after_plan, child, spec_all, pins) or \
                c.resolver.pick(after_plan, child, spec_forced, pins)
            if version is None:
                # Name the real cause: usually a candidate's own requirement against a manifest pin.
                causes = c.resolver.refusals(after_plan, child, spec_forced, pins)
                moves[child] = Move(child, cur.version if cur else None, cur.version if cur else None, "conflict",
                                    required_by, None, conflict="; ".join(causes) or
                                    f"no version of {child} satisfies {spec_forced}",
                                    fix=blocker_fix(c, after_plan, child, spec_forced, pins))
                continue
            first = next(p for p, _ in forced)
            after[child] = Installed(child, version, cur.step if cur else first.step, "index", False, extras,
                                     cur.why if cur else None)
            changed.add(child)
            before_v = before[child].version if child in before else None
            moves[child] = Move(child, before_v, version, direction(before_v, version), required_by,
                                c.newest(after_plan, child, spec_all) or version)
            progressed = True
        if not progressed:
            break
    return after, moves


def _pinned(c: Comparison, name: str, pins: dict[str, str], cur: Installed | None) -> str | None:
    if name in c.plan.shared_pins:
        return "shared pin"
    if name in pins:
        return "manifest pin"
    if cur is not None and cur.source in ("local", "fallback"):
        return f"{cur.source} wheel"
    return None


def _demand(c: Comparison, before: dict[str, Installed], after_plan: Plan, parent: Installed, req: Requirement,
            child: str) -> dict:
    was = None
    old = before.get(parent.name)
    if old is not None and old.version != parent.version:
        reqs = [r for r in c.requirements(c.plan, old) if canonicalize_name(r.name) == child]
        was = ", ".join(requirement_text(r) for r in reqs) if reqs else "not required"
    return {"parent": parent.name, "parent_version": parent.version, "requirement": requirement_text(req), "was": was}
