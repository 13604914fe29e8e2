"""The nearest fix for each finding of the bump report: a release to move to, or a pin to change."""
from __future__ import annotations

from typing import Any, Iterable

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from ...index import IndexClientError
from ...plan import Edge, Installed, Plan
from ...resolve import classify_requirements, requirement_text
from .context import Comparison
from .model import Fix, Move
from .versions import admits, as_version, spec_of


def find_fix(c: Comparison, plan: Plan, parent: str, current: str, child: str, child_version: str,
             extras: Iterable[str], after: dict[str, Installed], *, ceiling: str | None = None) -> Fix:
    """The version of ``parent`` nearest to ``current`` whose requirement on ``child`` admits ``child_version``.

    Versions are read newest first (at most ``fix_lookups`` per direction, in parallel);
    ``ceiling`` keeps the search at or below a version (for a bumped package).
    """
    extras = tuple(extras)
    try:
        versions = c.source.versions(parent)
    except IndexClientError as exc:
        return Fix("none", parent, None, f"cannot list versions of {parent}: {exc}", complete=False)
    cur = as_version(current)
    pre = cur.is_prerelease
    versions = [v for v in versions if (pre or not v.is_prerelease) and v != cur]
    if ceiling is not None:
        versions = [v for v in versions if v <= as_version(ceiling)]
    newer = sorted((v for v in versions if v > cur), reverse=True)
    older = sorted((v for v in versions if v < cur), reverse=True)
    checked = 0
    complete = True

    def accepts(vs: list[Version]) -> list[tuple[Version, Any]]:
        nonlocal checked, complete
        vs = vs[: c.fix_lookups]
        if not vs:
            return []
        got = c.source.metadata_many([(parent, v) for v in vs], plan.target.python, plan.target.platforms())
        checked += len(vs)
        ok = []
        for v in vs:
            meta = got.get((canonicalize_name(parent), v))
            if meta is None or isinstance(meta, Exception):
                if meta is not None and "offline" in str(meta):
                    complete = False
                continue
            reqs = [a.requirement for a in classify_requirements(meta, c.env, extras) if a.active]
            if all(admits(r.specifier, child_version) for r in reqs if canonicalize_name(r.name) == child):
                ok.append((v, meta))
        return ok

    up = accepts(newer)
    if len(newer) > c.fix_lookups:
        complete = complete and bool(up)
    if up:
        nearest, meta = min(up, key=lambda t: t[0])
        newest = max(v for v, _ in up)
        return Fix("upgrade", parent, str(nearest),
                   f"upgrade {parent} to {nearest} (nearest release that accepts {child} {child_version})",
                   newest=str(newest), checked=checked, complete=complete,
                   also_needs=_also_needs(c, meta, extras, after, parent, child))
    down = accepts(older)
    if down:
        nearest, meta = max(down, key=lambda t: t[0])
        return Fix("downgrade", parent, str(nearest),
                   f"downgrade {parent} to {nearest} (nearest release that accepts {child} {child_version}; "
                   "no newer one does)", newest=str(nearest), checked=checked, complete=complete,
                   also_needs=_also_needs(c, meta, extras, after, parent, child))
    scope = f"the {checked} releases checked" if checked else "no other release to check"
    return Fix("none", parent, None,
               f"no release of {parent} accepts {child} {child_version} ({scope}"
               f"{'' if complete else ', search incomplete'})", checked=checked, complete=complete)


def _also_needs(c: Comparison, meta, extras: tuple[str, ...], after: dict[str, Installed], parent: str,
                child: str) -> list[str]:
    """Requirements of a fix version the bumped image does not meet (besides the one it fixes)."""
    out = []
    for a in classify_requirements(meta, c.env, extras):
        if not a.active:
            continue
        n = canonicalize_name(a.requirement.name)
        if n == child:
            continue
        have = after.get(n)
        if have is None or not admits(a.requirement.specifier, have.version):
            pin = (f"shared pin {c.plan.shared_pins[n]}" if n in c.plan.shared_pins
                   else f"image has {have.version}" if have else "not in the image")
            out.append(f"{requirement_text(a.requirement)} ({pin})")
    return out


def blocker_fix(c: Comparison, plan: Plan, child: str, spec: SpecifierSet, pins: dict[str, str]) -> Fix | None:
    """When the newest candidate of `child` is refused only for excluding manifest pins, the fix is those pins."""
    try:
        candidates = sorted(spec.filter(c.source.versions(child)), reverse=True)
    except IndexClientError:
        return None
    if not candidates:
        return None
    blockers = c.resolver.pin_blockers(plan, child, str(candidates[0]), pins)
    if not blockers:
        return None
    dep, req = blockers[0]
    where = "shared_pins" if dep in c.plan.shared_pins else "its wheel set"
    text = (f"{child} {candidates[0]} requires {requirement_text(req)}: move the pin {dep}=={pins[dep]} in {where} "
            f"to a release that satisfies {req.specifier}, or keep the bump off {child} {candidates[0]}")
    also = [f"{child} {candidates[0]} requires {requirement_text(r)} (pinned {d}=={pins[d]})" for d, r in blockers[1:]]
    return Fix("change-pin", dep, None, text, also_needs=also)


def pin_fix(c: Comparison, mv: Move, plan: Plan, after_edges: list[Edge]) -> Fix:
    """For a move that hits a pin: the version the pin would have to become, and who objects to it."""
    spec = SpecifierSet(",".join(str(spec_of(d["requirement"])) for d in mv.required_by))
    target = c.nearest(plan, mv.name, spec, mv.today) or mv.newest_acceptable
    if target is None:
        return Fix("none", mv.name, None, f"no release of {mv.name} satisfies "
                   + ", ".join(d["requirement"] for d in mv.required_by))
    objections = [f"{e.parent} {e.parent_version} requires {e.requirement}" for e in after_edges
                  if e.name == mv.name and e.verdict in ("satisfied", "violated")
                  and e.parent not in {d["parent"] for d in mv.required_by}
                  and not admits(spec_of(e.requirement), target)]
    if mv.name in c.plan.shared_pins:
        text = f"change the pin of {mv.name} to {target} in shared_pins"
    elif mv.name in c.plan.manifest_pins():
        text = f"change the pin of {mv.name} to {target} in its wheel set"
    elif mv.today is None:
        text = f"add {mv.name}=={target} to the manifest (a --no-deps install does not bring it in)"
    else:
        text = f"pin {mv.name}=={target} in the manifest (pip will not move it past a --no-deps install)"
    if objections:
        text += f" (then {'; '.join(objections)} objects)"
    return Fix("change-pin", mv.name, target, text, also_needs=objections)


def shared_fixes(c: Comparison, e: Edge, name: str, version: str, before: dict[str, Installed],
                 after: dict[str, Installed], plan: Plan, after_edges: list[Edge]) -> list[str]:
    """For a requirement that newly excludes shared pin ``name==version``: move its parent, or move the pin."""
    fixes = []
    parent = e.parent
    inst = after.get(parent)
    ceiling = c.new.get(parent)
    start = before[parent].version if parent in c.new and parent in before else e.parent_version
    fix = find_fix(c, plan, parent, start, name, version, inst.extras if inst else (), after, ceiling=ceiling)
    if parent in c.new and fix.action == "upgrade":
        fixes.append(f"bump {parent} only to {fix.newest} (the newest release up to {ceiling} that accepts "
                     f"{name} {version})")
    elif parent in c.new:
        fixes.append(f"no release of {parent} after {start} up to {ceiling} accepts {name} {version}")
    else:
        fixes.append(fix.text)
    target = c.nearest(plan, name, spec_of(e.requirement), version)
    if target:
        objections = [f"{x.parent} {x.parent_version} requires {x.requirement}" for x in after_edges
                      if x.name == name and x.parent != parent and x.verdict in ("satisfied", "violated")
                      and not admits(spec_of(x.requirement), target)]
        text = f"move shared pin {name} to {target}"
        if objections:
            text += f" (but {'; '.join(objections)})"
        else:
            text += f" (every other requirement on {name} in the image accepts it"
            needed = c.plan.shared_pin_needs.get(name, ())
            text += f"; check the pin's other consumers: {', '.join(needed)})" if needed else ")"
        fixes.append(text)
    return fixes
