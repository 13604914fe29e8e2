"""The conflict report: a view of a resolved Plan, its findings and stable JSON (report_printing.py
prints them as a rich table).

JSON schema "pinwheel.report/1" is documented in docs/report.md; fields are only
ever added, never renamed or removed, within one schema version.
"""
from __future__ import annotations

import dataclasses
import re
from collections import defaultdict

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

from ..abi.cache import AbiCache, built_on_torch, torch_tied, wheel_abi_of
from ..abi.provenance import provenance_mismatches
from ..index import IndexClientError, target_tags
from ..lock.inputs import base_kept_excluded
from ..plan import Edge, Hazard, Plan
from ..resolve import BASE, Resolver, excludes_shared_pin, record_fields
from ..steps.registry import kind_of, step_allowances
from ..workspace import Workspace

SCHEMA = "pinwheel.report/1"


def required_by(plan: Plan) -> dict[str, list[str]]:
    """Who asks for each installed package: parents by active edges, plus the manifest."""
    out: dict[str, list[str]] = defaultdict(list)
    for p in plan.packages():
        out[p.name].append("manifest")
        if p.fallback:
            out[p.fallback.name].append(f"manifest (fallback for {p.name})")
    for name in plan.shared_pins:
        if "manifest" not in out[name]:
            out[name].append("shared pin")
    for e in plan.resolution.edges:
        if e.verdict in ("satisfied", "violated", "base-broken", "overridden"):
            out[e.name].append(f"{e.parent} ({e.requirement.removeprefix(e.name) or 'any'})")
    return out


def inventory_problem(plan: Plan) -> bool:
    """A base-environment variant whose committed inventory is missing or stale: never clean."""
    return plan.resolution.inventory_state is not None and plan.resolution.inventory_state.status != "ok"


def base_findings(plan: Plan) -> dict | None:
    """What the image does to the base's environment: moves, intended replacements, removals, baseline."""
    if not (plan.on_base_environment or plan.variant.system_site_packages):
        return None
    inv = plan.resolution.base_inventory
    state = plan.resolution.inventory_state
    return {
        "image": inv.image if inv else plan.variant.base,
        "image_id": inv.image_id if inv else None,
        "digest": inv.digest if inv else None,
        "inventory": dataclasses.asdict(state) if state else None,
        "packages": sum(1 for i in plan.resolution.installed if i.source == BASE),
        "moved": [dataclasses.asdict(h) for h in plan.resolution.hazards if h.earlier_step == BASE],
        "intended": [dataclasses.asdict(h) for h in plan.resolution.replacements],
        "removed": [dataclasses.asdict(r) for r in plan.resolution.removals],
        "already_broken": [dataclasses.asdict(e) for e in plan.resolution.edges if e.verdict == "base-broken"],
        "overridden": [dataclasses.asdict(e) for e in plan.resolution.edges if e.verdict == "overridden"],
        "kept_excluded": kept_excluded(plan),
    }


def kept_excluded(plan: Plan) -> list[dict]:
    """Packages an `exclude:` leaves out that the base holds anyway: the base keeps them (exclude removes
    nothing), so they are named, with the step that drops them."""
    installed_by_steps = {i.name for i in plan.resolution.installed if i.source != BASE}
    return [{"package": name, "version": k["version"], "excluded_on": k["excluded_on"],
             "fix": f"add a `remove` step for {name} to drop the base's copy, or drop the exclusion"}
            for name, k in base_kept_excluded(plan, installed_by_steps).items()]


def hazard_text(h: Hazard) -> str:
    """One line per move: a base package by name ("moves the base's X a → b"), else the earlier step's."""
    if h.earlier_step == BASE:
        return f"wheel set {h.step} moves the base's {h.package} {h.before} → {h.after} (cause: {h.cause})"
    return (f"{h.package} {h.before} → {h.after}: installed by wheel set {h.earlier_step}, "
            f"changed by {h.step} ({h.cause})")


def shared_pin_findings(plan: Plan) -> list[dict]:
    by_name = {i.name: i for i in plan.resolution.installed}
    installed = {i.name: i.version for i in plan.resolution.installed}
    out = []
    for name, version in plan.shared_pins.items():
        relying = [e for e in plan.resolution.edges if e.name == name and e.verdict in ("satisfied", "violated", "suppressed")]
        excluding = [e for e in relying if not Requirement(e.requirement).specifier.contains(version, prereleases=True)]
        breaking = [e for e in excluding if excludes_shared_pin(e, by_name, version)]
        reasons = []
        if installed.get(name) != version:
            reasons.append(f"installed {installed.get(name) or 'nothing'}, not {version}")
        reasons += [f"excluded by {e.parent} {e.parent_version}: {e.requirement}"
                    + (" (suppressed by --no-deps, still a base requirement)" if e.verdict == "suppressed" else "")
                    for e in breaking]
        out.append({
            "name": name,
            "version": version,
            "installed": installed.get(name),
            "broken": bool(reasons),
            "broken_because": reasons,
            "needed_by": list(plan.shared_pin_needs.get(name, ())),
            "required_by": sorted({f"{e.parent} {e.parent_version}" for e in relying if e not in excluding}),
            "excluded_by": [
                {"parent": e.parent, "parent_version": e.parent_version, "requirement": e.requirement,
                 "verdict": e.verdict, "extra": e.extra, "detail": e.detail, "breaks": e in breaking}
                for e in excluding
            ],
        })
    return out


def no_deps_features(plan: Plan) -> list[dict]:
    """For each --no-deps package: what each of its requirement groups needs, and what the image has."""
    groups: dict[tuple[str, str | None], list[Edge]] = defaultdict(list)
    for e in plan.resolution.edges:
        if e.verdict == "suppressed":
            groups[(e.parent, e.extra)].append(e)
    out = []
    for (parent, extra), edges in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        needs = [{"requirement": e.requirement, "found": e.found,
                  "satisfied": e.found is not None and Requirement(e.requirement).specifier.contains(e.found, prereleases=True),
                  "would": e.detail} for e in edges]
        out.append({"package": parent, "extra": extra, "needs": needs,
                    "provided": all(n["satisfied"] for n in needs),
                    "missing": [n["requirement"] for n in needs if n["found"] is None]})
    return out


def allowances(plan: Plan) -> dict[str, dict[str, str]]:
    """--no-deps package -> {requirement name: why} from its manifest `allow_missing` (fallbacks, and the
    packages source steps build, too)."""
    out: dict[str, dict[str, str]] = step_allowances(plan)
    for p in plan.packages():
        for q in (p, p.fallback) if getattr(p, "fallback", None) else (p,):
            for a in getattr(q, "allow_missing", ()):
                out.setdefault(q.name, {})[a.name] = a.why
    return out


def dropped_requirements(plan: Plan) -> list[dict]:
    """Each base requirement (no extra, or one the image requests; marker true for the target) that a
    --no-deps install drops and the image leaves unmet: absent, or at a version outside its specifier.
    `allowed` holds when the manifest declares it (`allow_missing` with a why); any other one is a conflict,
    and the build's invariant fails on it."""
    extras = {i.name: set(i.extras) for i in plan.resolution.installed}
    allowed = allowances(plan)
    out = []
    for e in plan.resolution.edges:
        if e.verdict != "suppressed" or (e.extra is not None and e.extra not in extras.get(e.parent, ())):
            continue
        if e.found is not None and Requirement(e.requirement).specifier.contains(e.found, prereleases=True):
            continue
        why = allowed.get(e.parent, {}).get(e.name)
        out.append({"package": e.parent, "version": e.parent_version, "requirement": e.requirement,
                    "name": e.name, "found": e.found, "extra": e.extra, "allowed": why is not None, "why": why})
    return out


_MACHINE = re.compile(r"(x86_64|aarch64|i686|ppc64le|s390x|armv7l|universal2|arm64|amd64|win32)$")


def machine_of(platform_tag: str) -> str:
    """The machine a wheel's platform tag is for: manylinux_2_28_x86_64 -> x86_64, any -> any."""
    m = _MACHINE.search(platform_tag)
    return m.group(1) if m else platform_tag


def platform_gap(plan: Plan, package: str, files: list, step: str | None = None) -> dict | None:
    """The missing-on-platform finding for ``files`` (one package's index files: one version's, or every
    release), or None: where none is a wheel, or any is one the target installs (or an sdist it can build)."""
    tags = frozenset(target_tags(plan.target.python, plan.target.platforms()))
    wheels = [f for f in files if f.is_wheel]
    if not wheels or any(not f.is_wheel or f.tags & tags for f in files):
        return None
    newest = max(f.version for f in wheels)
    last = [f for f in wheels if f.version == newest]
    return {"package": package, "version": str(newest), "step": step, "platform": plan.container_platform,
            "target": plan.target.platform, "python": plan.target.python,
            "wheels_for": sorted({machine_of(t.platform) for f in last for t in f.tags}),
            "wheels": sorted(f.filename for f in last)}


def missing_on_platform(plan: Plan, source) -> list[dict]:
    """Index packages of the image with no file the target can install, while the index has that version
    for other platforms: missing on this platform (linux/arm64), its own finding and a conflict (its
    build stops there), not a lookup that failed. A package whose files cannot be read is left to the
    lookups that say so. Only packages whose metadata the resolver could not read are looked up (a
    missing one is among them), so a clean report asks the index nothing more."""
    unread = {e.parent for e in plan.resolution.edges if e.verdict == "unchecked"} | {u.package for u in plan.resolution.unjudged}
    out = []
    for inst in plan.resolution.installed:
        if inst.source not in ("index", "fallback") or inst.name not in unread:
            continue
        try:
            want = Version(inst.version)
            gap = platform_gap(plan, inst.name, [f for f in source.files(inst.name) if f.version == want], inst.step)
        except (IndexClientError, InvalidVersion, OSError):
            continue
        if gap is not None:
            out.append(gap)
    # A dependency no release of which this platform installs is a clash (pip would stop there); when the
    # index has its wheels for other platforms only, that is what the clash is: named here, counted once.
    for clash in plan.resolution.clashes:
        if clash.package in {d["package"] for d in out}:
            continue
        try:
            gap = platform_gap(plan, clash.package, source.files(clash.package), clash.step)
        except (IndexClientError, OSError):
            continue
        if gap is not None:
            out.append(gap)
    return out


def unmet_by_absence(e: Edge, absent: set[str]) -> bool:
    """A requirement unmet only because its package is missing on the platform (said by that finding)."""
    return e.verdict == "violated" and e.found is None and e.name in absent


def missing_why(d: dict) -> str:
    """What the index has instead: wheels for other machines, or for this one but another Python or libc."""
    if machine_of(d["target"]) in d["wheels_for"]:
        return f"its {machine_of(d['target'])} wheels are for another Python or a newer libc"
    return f"the index has wheels for {', '.join(d['wheels_for'])} only"


def missing_text(d: dict) -> str:
    return (f"{d['package']} {d['version']} is missing on {d['platform']}: no wheel for Python {d['python']} on "
            f"{d['target']} ({missing_why(d)})")


def summarize(plan: Plan, shared: list[dict], allow_unchecked: bool = False, abi: list[dict] | None = None,
              missing: list[dict] | None = None) -> dict:
    """Counts and the verdict. Unchecked is never clean: it is its own verdict unless allowed."""
    count = defaultdict(int)
    for e in plan.resolution.edges:
        count[e.verdict] += 1
    shared_broken = [s for s in shared if s["broken"]]
    stale = plan.resolution.lock_state is not None and plan.resolution.lock_state.status == "stale"
    dropped = dropped_requirements(plan)
    dropped_unmet = sum(1 for d in dropped if not d["allowed"])
    absent = {d["package"] for d in missing or ()}
    # A missing package's clash, and the requirements on it left unmet, are its finding: counted once.
    clashes = [c for c in plan.resolution.clashes if c.package not in absent]
    count["violated"] = sum(1 for e in plan.resolution.edges if e.verdict == "violated" and not unmet_by_absence(e, absent))
    # an error the audit's RUN rules find in a step's script (curl | sh, a masked failure) is a conflict
    script_errors = sum(1 for found in script_findings(plan).values() for f in found if f.level == "error")
    conflicts = (count["violated"] + len(plan.resolution.hazards) + len(shared_broken) + len(clashes) + int(stale)
                 + int(inventory_problem(plan)) + dropped_unmet + len(absent) + script_errors)
    # A package missing on the platform has no metadata there: that is its finding, not a failed lookup.
    abi_unknown = sum(1 for row in abi or () if row["abi_class"] == "unknown" and row["name"] not in absent)
    # A failed lookup already behind an unchecked edge is counted once.
    unchecked_edges = [e for e in plan.resolution.edges if e.verdict == "unchecked" and e.parent not in absent]
    unchecked_parents = {e.parent for e in unchecked_edges}
    lookups = len({u.package for u in plan.resolution.unjudged} - unchecked_parents - absent)
    unchecked = len(unchecked_edges) + lookups + abi_unknown + len(plan.todos)
    count["unchecked"] = len(unchecked_edges)
    if conflicts:
        verdict = "conflicts"
    elif plan.todos or unchecked and not allow_unchecked:  # a TODO left by import is never allowed
        verdict = "unchecked"
    else:
        verdict = "clean"
    return {
        "edges": {k: count[k] for k in ("satisfied", "violated", "suppressed", "unchecked", "extra-only", "marker-excluded",
                                        "base-broken", "overridden", "excluded", "removed")},
        "missing_on_platform": len(absent),  # their unchecked edges are counted here, not under edges
        "hazards": len(plan.resolution.hazards),
        "hazards_removed_by_lock": len(plan.resolution.unlocked_hazards) if plan.resolution.locked else 0,
        "shared_pins_broken": len(shared_broken),
        "clashes": len(clashes),
        "unjudged": len([u for u in plan.resolution.unjudged if u.package not in absent]),
        "abi_unknown": abi_unknown,
        "lock": plan.resolution.lock_state.status if plan.resolution.lock_state else None,
        "inventory": plan.resolution.inventory_state.status if plan.resolution.inventory_state else None,
        "base_moved": sum(1 for h in plan.resolution.hazards if h.earlier_step == BASE),
        "base_replaced": len(plan.resolution.replacements),
        "removed": len(plan.resolution.removals),
        "dropped_unmet": dropped_unmet,
        "dropped_allowed": len(dropped) - dropped_unmet,
        "conflicts": conflicts,
        "unchecked": unchecked,
        "todo": list(plan.todos),
        "unchecked_allowed": bool(unchecked and allow_unchecked and not plan.todos),
        "verdict": verdict,
        "clean": verdict == "clean",
    }


def to_json(plan: Plan, abi: list[dict] | None = None, allow_unchecked: bool = False,
            missing: list[dict] | None = None) -> dict:
    shared = shared_pin_findings(plan)
    req_by = required_by(plan)
    moved = moved_pins(plan)
    summary = summarize(plan, shared, allow_unchecked, abi, missing)
    return {
        "schema": SCHEMA,
        "image": plan.image,
        "variant": plan.variant.name,
        "manifest_sha256": plan.manifest_sha256,
        "locked": plan.resolution.locked,
        "lock": dataclasses.asdict(plan.resolution.lock_state) if plan.resolution.lock_state else None,
        "target": dataclasses.asdict(plan.target),
        "platform": plan.container_platform,
        "packages": [
            {**dataclasses.asdict(i), "extras": list(i.extras), "required_by": req_by.get(i.name, []),
             "moved": moved.get(i.name)}
            for i in plan.resolution.installed
        ],
        "edges": [record_fields(e) for e in plan.resolution.edges],  # flat records: asdict's deep copy costs more
        "no_deps_features": no_deps_features(plan),
        "dropped_requirements": dropped_requirements(plan),
        # requirements the manifest leaves out on purpose (exclude:, with a why): suppressed edges, not conflicts
        "excluded": [dataclasses.asdict(e) for e in plan.resolution.edges if e.verdict == "excluded"],
        # requirements on a package a remove step takes out, left unmet on purpose (its `breaks`, with a why)
        "unmet_by_removal": [dataclasses.asdict(e) for e in plan.resolution.edges if e.verdict == "removed"],
        "shared_pins": shared,
        "hazards": [dataclasses.asdict(h) for h in plan.resolution.hazards],
        "base": base_findings(plan),
        "replacements": [dataclasses.asdict(h) for h in plan.resolution.replacements],
        "removals": [dataclasses.asdict(r) for r in plan.resolution.removals],
        "unlocked_hazards": [dataclasses.asdict(h) for h in plan.resolution.unlocked_hazards],
        "clashes": [{**dataclasses.asdict(c), "wanted": list(c.wanted), "reasons": list(c.reasons)}
                    for c in plan.resolution.clashes],
        "unjudged": [dataclasses.asdict(u) for u in plan.resolution.unjudged],
        # what each step changes outside the Python environment (its kind's Effect.outside): Debian packages,
        # patches, environment variables, scripts the resolver does not judge; listed, never hidden
        "outside": outside_effects(plan),
        "missing_on_platform": list(missing or ()),
        "torch_abi": abi or [],
        "next_steps": next_steps(plan, shared, summary, abi, missing),
        "summary": summary,
    }


def outside_effects(plan: Plan) -> list[dict]:
    """{step, kind, what} for each thing an active step changes outside the Python environment; a step that
    runs scripts (StepKind.scripts) has their audit findings on its first entry, {line, level, rule, message,
    fix} each."""
    from ..steps import kind_of

    found = script_findings(plan)
    out = []
    for s in plan.steps:
        for i, what in enumerate(kind_of(s).effect(s).outside):
            out.append({"step": s.name, "kind": s.kind, "what": what,
                        **({"findings": [dataclasses.asdict(f) for f in found[s.name]]}
                           if i == 0 and s.name in found else {})})
    return out


def script_findings(plan: Plan) -> dict[str, list]:
    """step -> the audit's RUN-rule findings over the scripts it runs (StepKind.scripts); only steps with one."""
    from ..steps import kind_of

    scripts = {s.name: kind_of(s).scripts(s) for s in plan.steps}
    if not any(scripts.values()):
        return {}
    from .audit import audit_script  # the Dockerfile parser loads only for a manifest that runs scripts

    return {name: [f for line, script in found for f in audit_script(script, line)]
            for name, found in scripts.items() if found}


def moved_pins(plan: Plan) -> dict[str, dict]:
    """Packages that a later step moved off what an earlier step installed: never shown as ok."""
    return {h.package: {"from": h.before, "to": h.after, "by": h.step, "pinned_in": h.earlier_step, "cause": h.cause}
            for h in plan.resolution.hazards}


def replaced_pins(plan: Plan) -> dict[str, dict]:
    """Base packages the manifest replaces on purpose: shown, never counted as a conflict."""
    return {h.package: {"from": h.before, "to": h.after, "by": h.step, "pinned_in": h.earlier_step, "cause": h.cause}
            for h in plan.resolution.replacements}


def next_steps(plan: Plan, shared: list[dict], summary: dict, abi: list[dict] | None = None,
               missing: list[dict] | None = None) -> list[str]:
    """What to do about each finding, in the order the report lists them."""
    steps = []
    for d in missing or ():
        steps.append(f"{missing_text(d)}: pin a version of {d['package']} that has a {d['platform']} wheel, gate "
                     f"it off there (a gate on arch), or take {d['platform']} out of the variant's platforms")
    if inventory_problem(plan):
        assert plan.resolution.inventory_state is not None
        steps.append(f"the base inventory of {plan.variant.name} is {plan.resolution.inventory_state.status} "
                     f"({plan.resolution.inventory_state.detail}): run `build.py base inventory --variant {plan.variant.name}` "
                     f"and commit it")
    if plan.resolution.lock_state and plan.resolution.lock_state.status == "stale":
        steps.append(f"the lock of {plan.variant.name} is stale ({plan.resolution.lock_state.detail}): "
                     f"run `make lock` (build.py lock --variant {plan.variant.name}) and commit it")
    for c in plan.resolution.clashes:
        if c.package in {d["package"] for d in missing or ()}:
            continue  # said above: missing on the platform
        steps.append(f"wheel set {c.step}: make {c.package} satisfiable: " + "; ".join(c.wanted)
                     + (f" cannot all hold ({'; '.join(c.reasons)})" if c.reasons else " cannot all hold")
                     + "; change one of these pins, or move the package that asks for it to its own wheel set")
    steps += violated_and_moved_steps(plan, {d["package"] for d in missing or ()})
    for d in dropped_requirements(plan):
        if not d["allowed"]:
            steps.append(f"{dropped_text(d)}: add a package that provides it, or declare it on {d['package']} in the "
                         f"manifest (allow_missing: [{{name: {d['name']}, why: ...}}])")
    for sp in shared:
        if sp["broken"]:
            steps.append(f"shared pin {sp['name']}=={sp['version']} is broken ({'; '.join(sp['broken_because'])}): "
                         f"move the pin, or choose releases whose requirements admit it")
    if plan.todos:
        steps.append(f"{len(plan.todos)} TODO(s) left by import (the manifest's todo: list): fill each in and drop "
                     "it from the list")
    stand_ins = sorted(row["name"] for row in abi or () if row["how"] == "stand-in")
    if stand_ins:  # not a failed lookup: the wheel there is not the real one
        steps.append(f"{len(stand_ins)} stand-in wheel(s) whose torch ABI says nothing of the real build "
                     f"({', '.join(stand_ins)}): put the real wheels in {plan.image}'s wheels/ folder, or pass "
                     "--allow-unchecked to accept them knowingly")
    if summary["unchecked"] - len(plan.todos) - len(stand_ins) > 0:
        names = sorted(({e.parent for e in plan.resolution.edges if e.verdict == "unchecked"} | {u.package for u in plan.resolution.unjudged}
                        | {row["name"] for row in abi or () if row["abi_class"] == "unknown" and row["how"] != "stand-in"})
                       - {d["package"] for d in missing or ()})
        steps.append(f"{summary['unchecked'] - len(plan.todos) - len(stand_ins)} requirement(s) could not be judged "
                     f"({', '.join(names)}): {unchecked_advice(plan)}, or pass --allow-unchecked to accept them "
                     f"knowingly")
    return steps


def violated_and_moved_steps(plan: Plan, absent: set[str]) -> list[str]:
    """What to do about each violated requirement (but those a package missing on the platform explains) and
    each pin a later step moves (next_steps)."""
    steps = []
    for e in plan.resolution.edges:
        if unmet_by_absence(e, absent):
            continue
        if e.verdict == "violated" and e.parent in base_names(plan):
            steps.append(f"the base's {e.parent} {e.parent_version} requires {e.requirement}, but {e.detail}: keep "
                         f"{e.name} at a version it accepts, or mark the package that replaces it `override: true` "
                         f"with a why")
        elif e.verdict == "violated":
            steps.append(f"{e.parent} {e.parent_version} requires {e.requirement}, but {e.detail}: pin {e.name} to a "
                         f"version that satisfies it, or pick a release of {e.parent} that accepts what is installed")
    pins = plan.manifest_pins()
    for h in plan.resolution.hazards:
        if h.earlier_step == BASE:
            steps.append(f"{hazard_text(h)}: pin {h.package} in the manifest (the replacement is then intended), or "
                         f"choose releases that accept the base's {h.before}")
        elif pins.get(h.package) == h.before:
            steps.append(f"{h.package} {h.before} → {h.after}: wheel set {h.step} moves the manifest's pin "
                         f"{h.package}=={h.before} (wanted by {h.cause}): move the pin to {h.after}, or choose "
                         f"releases that accept {h.before}")
        else:
            steps.append(f"{h.package} {h.before} → {h.after}: wheel set {h.step} moves what {h.earlier_step} "
                         f"installed (wanted by {h.cause}): pin {h.package}=={h.after} in {h.earlier_step}, or install "
                         f"the later package --no-deps with a why")
    return steps


def unchecked_advice(plan: Plan) -> str:
    """What to do about lookups that failed, by why they failed: an unset index variable, a cache an
    --offline run could not answer from, or the index itself."""
    reasons = [u.reason for u in plan.resolution.unjudged] + [e.detail for e in plan.resolution.edges if e.verdict == "unchecked"]
    unset = sorted(set(re.findall(r"\$([A-Z_][A-Z0-9_]*), which is not set", " ".join(reasons))))
    advice = [f"set ${v} (the index the variant reads torch from)" for v in unset]
    if any("offline: " in r for r in reasons):
        advice.append("run once without --offline (what was asked is not in the cache yet)")
    if not advice or any("offline: " not in r and "which is not set" not in r for r in reasons):
        advice.append("check the index and the network, run again (--refresh re-reads the index)")
    return "; ".join(advice)


def dropped_text(d: dict) -> str:
    """One unmet dropped requirement, in the words the build's invariant uses."""
    have = "is not installed" if d["found"] is None else f"{d['found']} is installed"
    extra = f" (extra [{d['extra']}], requested)" if d["extra"] else ""
    return f"{d['package']} {d['version']} is installed --no-deps and requires {d['requirement']}{extra}, but {d['name']} {have}"


def base_names(plan: Plan) -> set[str]:
    """The installed packages that are still the base's own."""
    return {i.name for i in plan.resolution.installed if i.source == BASE}


def torch_abi(plan: Plan, source, client, workspace: Workspace, offline: bool) -> list[dict]:
    """Which compiled wheels in the image are tied to torch's ABI, and how (from their ELF imports)."""
    by_name = {i.name: i for i in plan.resolution.installed}
    torch_reqs: dict[str, list] = defaultdict(list)
    for e in plan.resolution.edges:
        if e.name == "torch" and e.verdict != "marker-excluded":
            torch_reqs[e.parent].append(Requirement(e.requirement))
    # local wheels, and the prebuilt wheels that take a source step's build's place when the host has them
    locals_by_name = {**{d.name: d for s in plan.steps if s.active for d in kind_of(s).effect(s).direct
                         if d.local is not None},
                      **{p.name: p for p in plan.packages() if p.local}}
    cache, resolver, notes = AbiCache(workspace, client, offline), Resolver(source, workspace.wheels_dir), []
    rows = []
    for inst in torch_tied(by_name, lambda i: torch_reqs.get(i.name, []), built_on_torch(plan)):
        w, filename, how, built = wheel_abi_of(inst, locals_by_name.get(inst.name), plan, source, resolver, cache, notes)
        rows.append({
            "name": inst.name, "version": inst.version, "source": inst.source, "wheel": filename,
            "abi_class": "none" if how == "pure-python" else (w.abi_class if w and not w.stand_in else "unknown"),
            "declared_torch": ", ".join(str(r.specifier) or "any" for r in torch_reqs.get(inst.name, [])) or None,
            "local_label": w.local_label if w else None,
            "built_against": built,
            "provenance_mismatches": provenance_mismatches(w, built) if (w and built) else [],
            "how": "stand-in" if w and w.stand_in else how,
        })
    return rows


ABI_MEANING = {
    "unstable": "imports torch's C++ ABI (c10/at/torch symbols): rebuild for every torch bump",
    "stable": "LibTorch stable ABI only (aoti_torch_*): forward compatible from the torch it was built for",
    "none": "no torch linkage",
    "unknown": "not classified (offline without a cached wheel, no wheel for the target, a stand-in wheel, or "
               "built from source in the build: `build.py inspect` classifies the built image's)",
}
