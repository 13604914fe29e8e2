"""What the bump changes, one kind of finding per function: moves, requirements, shared pins, ABI coupling."""
from __future__ import annotations

import dataclasses
import re

from packaging.utils import canonicalize_name

from ...abi.cache import built_on_torch, torch_tied, wheel_abi_of
from ...abi.elf import WheelAbi
from ...abi.provenance import parse_local_label, provenance_mismatches
from ...plan import Edge, Installed, Plan, PlannedPackage
from ...resolve import requirement_text
from .context import Comparison
from .fixes import find_fix, shared_fixes
from .model import AbiFinding, Move, RequirementFinding, SharedPinFinding
from .versions import admits, as_version, lower_bound, minor, minor_text, spec_of


# ------------------------------------------------------------ requirements


def requirement_diffs(c: Comparison, before: dict[str, Installed], after: dict[str, Installed], after_plan: Plan,
                      moves: dict[str, Move]) -> list[Move]:
    """Moves, plus every dependency whose requirement a bumped package changed (old vs new Requires-Dist)."""
    out = dict(moves)
    for name in c.new:
        old, new = before.get(name), after[name]
        if old is None or name in c.missing:  # missing on this platform: its requirements are unknown here
            continue
        old_reqs = {canonicalize_name(r.name): r for r in c.requirements(c.plan, dataclasses.replace(old, no_deps=False))}
        new_reqs = {canonicalize_name(r.name): r for r in c.requirements(after_plan, dataclasses.replace(new, no_deps=False))}
        for dep in sorted(set(old_reqs) | set(new_reqs)):
            if dep in out or dep in c.new:
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
            newest = c.newest(after_plan, dep, n.specifier)
            kind = "stays"
            conflict = None
            if old.no_deps and (have is None or not admits(n.specifier, have.version)):
                kind = "conflict"
                conflict = (f"{name} is installed with --no-deps: pip will not "
                            f"{'install' if have is None else 'move'} {dep}")
            out[dep] = Move(dep, have.version if have else None, after[dep].version if dep in after else None,
                            kind, by, newest, conflict=conflict)
    order = {"conflict": 0, "upgrade": 1, "downgrade": 1, "add": 2, "stays": 3, "dropped": 4}
    return sorted(out.values(), key=lambda m: (order.get(m.kind, 5), m.name))


def requirement_findings(c: Comparison, before_edges: list[Edge], after_edges: list[Edge],
                         before: dict[str, Installed], after: dict[str, Installed], changed: set[str],
                         after_plan: Plan) -> list[RequirementFinding]:
    """Requirements in the image on what changed, today and after: breaks, unblocks, still-violated, holds."""
    def key(e: Edge) -> tuple:
        return (e.parent, e.name, e.extra)

    def state(e: Edge | None) -> str:
        if e is None:
            return "absent"
        if e.found is None:
            return "missing"
        return "satisfied" if admits(spec_of(e.requirement), e.found) else "violated"

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
        elif e.name in c.new:
            change = "holds"
        else:
            continue  # a moved package whose consumers still accept it: nothing to say
        rf = RequirementFinding(e.parent, e.parent_version, e.requirement, e.name, e.extra,
                                e.verdict != "suppressed", today, now, change)
        if change == "breaks":
            inst = after[e.parent]
            rf.fix = find_fix(c, after_plan, e.parent, e.parent_version, e.name, after[e.name].version,
                              inst.extras, after)
        out.append(rf)
    order = {"breaks": 0, "unblocks": 1, "still-violated": 2, "holds": 3}
    return sorted(out, key=lambda r: (order[r.change], not r.enforced, r.parent))


# ------------------------------------------------------------ shared pins


def shared_pin_findings(c: Comparison, before_edges: list[Edge], after_edges: list[Edge],
                        before: dict[str, Installed], after: dict[str, Installed],
                        after_plan: Plan) -> list[SharedPinFinding]:
    """Each shared pin after the bump: ok, changed by the bump, unsatisfiable (with fixes) or broken already today."""
    out = []
    for sp in c.m.shared_pins:
        name, version = sp.name, sp.version
        text = str(sp.requirement)
        if name in c.new:
            out.append(SharedPinFinding(text, name, version, "changed-by-bump", [],
                                        [f"update shared_pins to {name}=={c.new[name]}"]))
            continue

        def excluding(edges: list[Edge], installed: dict[str, Installed]) -> dict[tuple, Edge]:
            found = {}
            for e in edges:
                if e.name != name or e.verdict not in ("satisfied", "violated", "suppressed"):
                    continue
                inst = installed.get(e.parent)
                if e.verdict == "suppressed" and e.extra is not None and inst and e.extra not in inst.extras:
                    continue
                if not admits(spec_of(e.requirement), version):
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
                fixes.extend(shared_fixes(c, e, name, version, before, after, after_plan, after_edges))
        blocking = [v for v in violations if v["new"] and (v["enforced"] or v["extra"] is None)]
        status = "unsatisfiable" if blocking else "pre-existing" if violations else "ok"
        if after.get(name) and after[name].version != version and status == "ok":
            status = "unsatisfiable"
            fixes.append(f"{name} is {after[name].version} after the bump, not {version}")
        out.append(SharedPinFinding(text, name, version, status, violations, list(dict.fromkeys(fixes))))
    return out


# ------------------------------------------------------------ ABI coupling


def abi_findings(c: Comparison, after: dict[str, Installed], after_plan: Plan) -> list[AbiFinding]:
    """When torch is bumped: every compiled wheel tied to torch, and whether it survives the new torch."""
    new_torch = c.new.get("torch")
    if new_torch is None:
        return []
    locals_by_name = {p.name: p for p in c.plan.packages() if p.local}
    built = built_on_torch(c.plan)
    tied = torch_tied(after, lambda i: c.requirements(after_plan, i, include_suppressed=True), built)
    return [_abi_one(c, inst, locals_by_name.get(inst.name), new_torch, after_plan, inst.name in built)
            for inst in tied]


def _abi_one(c: Comparison, inst: Installed, planned: PlannedPackage | None, new_torch: str, plan: Plan,
             on_torch: bool = False) -> AbiFinding:
    w, filename, how, built = wheel_abi_of(inst, planned, plan, c.source, c.resolver, c.abi_cache, c.notes)
    if how == "source-build":
        if on_torch:  # compiled in the build against the image's torch: a new torch needs a new build
            return AbiFinding(inst.name, inst.version, None, inst.source, "unknown", _declared(c, inst, plan), None,
                              None, [], None, [], "rebuild",
                              f"built from source ({inst.source} step {inst.step}) without isolation against the "
                              f"image's torch, which it compiles against: rebuild it against torch {new_torch}. Its "
                              "builder stage starts from the layer that installs torch, so the bumped image's build "
                              "rebuilds it; `build.py inspect` classifies the built image's shared objects", how)
        return AbiFinding(inst.name, inst.version, None, inst.source, "unknown", _declared(c, inst, plan), None,
                          None, [], None, [], "unchecked",
                          f"built from source ({inst.source} step {inst.step}) in the build: no wheel of it on the "
                          "host to classify; `build.py inspect` classifies the built image's shared objects", how)
    if how == "pure-python":
        return AbiFinding(inst.name, inst.version, filename, inst.source, "none", _declared(c, inst, plan), None,
                          None, [], None, [], "ok", "pure Python wheel: nothing compiled", how)
    if w is None:
        why = "offline and not in the ABI or wheel cache" if c.offline else "no wheel to classify"
        return AbiFinding(inst.name, inst.version, filename, inst.source, "unknown", _declared(c, inst, plan),
                          None, built, [], None, [], "unchecked", why, how)
    if w.stand_in:
        return AbiFinding(inst.name, inst.version, filename or w.filename, inst.source, "unknown",
                          _declared(c, inst, plan), None, built, [], None, [], "unchecked",
                          "a stand-in wheel: the real wheel's torch linkage is not known here", how)
    mismatches = provenance_mismatches(w, built) if built else []
    label = parse_local_label(w.local_label)
    declared = w.declared_torch
    built_torch = built.get("torch") if built else None
    exact = lower_bound(declared) if declared and declared.startswith("==") else None
    sample = sorted({s for e in w.elf_files for s in e.sample_unstable_symbols})[:3]
    builds = _per_torch_builds(w)
    if w.abi_class == "unstable" and len(builds) > 1:
        # One C++ build per torch release, picked by torch's version at import (torch24 ... torch29).
        new_mm, old_mm = minor_text(new_torch), minor_text(c.today_torch) if c.today_torch else None
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
            if tv and minor(tv) == minor(new_torch):
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
        fwd = lower_bound(declared) or label.torch or built_torch
        if fwd and as_version(new_torch) < as_version(fwd):
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


def _declared(c: Comparison, inst: Installed, plan: Plan) -> str | None:
    reqs = [r for r in c.requirements(plan, inst, include_suppressed=True) if canonicalize_name(r.name) == "torch"]
    return str(reqs[0].specifier) if reqs else None


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
