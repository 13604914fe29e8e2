"""The conflict report: a view of a resolved Plan, as a rich table or stable JSON.

JSON schema "pinwheel.report/1" is documented in the README; fields are only
ever added, never renamed or removed, within one schema version.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .plan import Edge, Hazard, Plan

SCHEMA = "pinwheel.report/1"


def required_by(plan: Plan) -> dict[str, list[str]]:
    """Who asks for each installed package: parents by active edges, plus the manifest."""
    out: dict[str, list[str]] = defaultdict(list)
    for p in plan.packages():
        out[p.name].append("manifest")
    for name in plan.shared_pins:
        if "manifest" not in out[name]:
            out[name].append("shared pin")
    for e in plan.edges:
        if e.verdict in ("satisfied", "violated"):
            out[e.name].append(f"{e.parent} ({e.requirement.removeprefix(e.name) or 'any'})")
    return out


def shared_pin_findings(plan: Plan, needed_by_manifest: dict[str, tuple[str, ...]]) -> list[dict]:
    installed = {i.name: i.version for i in plan.installed}
    out = []
    for name, version in plan.shared_pins.items():
        relying = [e for e in plan.edges if e.name == name and e.verdict in ("satisfied", "violated", "suppressed")]
        excluding = [e for e in relying if not Requirement(e.requirement).specifier.contains(version, prereleases=True)]
        out.append({
            "name": name,
            "version": version,
            "installed": installed.get(name),
            "needed_by": list(needed_by_manifest.get(name, ())),
            "required_by": sorted({f"{e.parent} {e.parent_version}" for e in relying if e not in excluding}),
            "excluded_by": [
                {"parent": e.parent, "parent_version": e.parent_version, "requirement": e.requirement,
                 "verdict": e.verdict, "extra": e.extra, "detail": e.detail}
                for e in excluding
            ],
        })
    return out


def no_deps_features(plan: Plan) -> list[dict]:
    """For each --no-deps package: what each of its requirement groups needs, and what the image has."""
    groups: dict[tuple[str, str | None], list[Edge]] = defaultdict(list)
    for e in plan.edges:
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


def summarize(plan: Plan, shared: list[dict]) -> dict:
    count = defaultdict(int)
    for e in plan.edges:
        count[e.verdict] += 1
    shared_broken = [s for s in shared if s["installed"] != s["version"]
                     or any(x["verdict"] == "violated" for x in s["excluded_by"])]
    conflicts = count["violated"] + len(plan.hazards) + len(shared_broken)
    return {
        "edges": {k: count[k] for k in ("satisfied", "violated", "suppressed", "unchecked", "extra-only", "marker-excluded")},
        "hazards": len(plan.hazards),
        "hazards_removed_by_lock": len(plan.unlocked_hazards) if plan.locked else 0,
        "shared_pins_broken": len(shared_broken),
        "conflicts": conflicts,
        "clean": conflicts == 0,
    }


def to_json(plan: Plan, needed_by_manifest: dict[str, tuple[str, ...]], abi: list[dict] | None = None) -> dict:
    shared = shared_pin_findings(plan, needed_by_manifest)
    req_by = required_by(plan)
    return {
        "schema": SCHEMA,
        "image": plan.image,
        "variant": plan.variant.name,
        "manifest_sha256": plan.manifest_sha256,
        "locked": plan.locked,
        "target": dataclasses.asdict(plan.target),
        "packages": [
            {**dataclasses.asdict(i), "extras": list(i.extras), "required_by": req_by.get(i.name, [])}
            for i in plan.installed
        ],
        "edges": [dataclasses.asdict(e) for e in plan.edges],
        "no_deps_features": no_deps_features(plan),
        "shared_pins": shared,
        "hazards": [dataclasses.asdict(h) for h in plan.hazards],
        "unlocked_hazards": [dataclasses.asdict(h) for h in plan.unlocked_hazards],
        "torch_abi": abi or [],
        "summary": summarize(plan, shared),
    }


def torch_abi(plan: Plan, source, client, root, wheels_dir, offline: bool) -> list[dict]:
    """Which compiled wheels in the image are tied to torch's ABI, and how (from their ELF imports)."""
    from packaging.requirements import Requirement as Req

    from .abi import provenance_mismatches
    from .bump import AbiCache, torch_tied, wheel_abi_of
    from .resolve import Resolver

    by_name = {i.name: i for i in plan.installed}
    torch_reqs: dict[str, list] = defaultdict(list)
    for e in plan.edges:
        if e.name == "torch" and e.verdict != "marker-excluded":
            torch_reqs[e.parent].append(Req(e.requirement))
    locals_by_name = {p.name: p for p in plan.packages() if p.local}
    cache, resolver, notes = AbiCache(root, client, offline), Resolver(source, wheels_dir), []
    rows = []
    for inst in torch_tied(by_name, lambda i: torch_reqs.get(i.name, [])):
        w, filename, how, built = wheel_abi_of(inst, locals_by_name.get(inst.name), plan, source, resolver, cache, notes)
        rows.append({
            "name": inst.name, "version": inst.version, "source": inst.source, "wheel": filename,
            "abi_class": "none" if how == "pure-python" else (w.abi_class if w else "unknown"),
            "declared_torch": ", ".join(str(r.specifier) or "any" for r in torch_reqs.get(inst.name, [])) or None,
            "local_label": w.local_label if w else None,
            "built_against": built,
            "provenance_mismatches": provenance_mismatches(w, built) if (w and built) else [],
            "how": how,
        })
    return rows


ABI_MEANING = {
    "unstable": "imports torch's C++ ABI (c10/at/torch symbols): rebuild for every torch bump",
    "stable": "LibTorch stable ABI only (aoti_torch_*): forward compatible from the torch it was built for",
    "none": "no torch linkage",
    "unknown": "not classified (offline without a cached wheel, or no wheel for the target)",
}


def _hazard_line(h: Hazard) -> str:
    return (f"{h.package} {h.before} → {h.after}: installed by wheel set {h.earlier_step}, "
            f"changed by {h.step} ({h.cause})")


def print_report(plan: Plan, needed_by_manifest: dict[str, tuple[str, ...]], console: Console,
                 verbose: bool = False, abi: list[dict] | None = None) -> dict:
    data = to_json(plan, needed_by_manifest, abi)
    c = console
    c.print(f"[bold]{escape(plan.image)}:{escape(plan.variant.name)}[/bold]  target: Python {plan.target.python}, "
            f"{plan.target.platform}, CUDA {plan.target.cuda}  "
            f"({'as locked' if plan.locked else 'no lock: one plain pip install per wheel set'})")

    problems = defaultdict(list)
    for e in plan.edges:
        if e.verdict in ("violated", "unchecked"):
            problems[e.parent].append(e)
    suppressed = defaultdict(int)
    for e in plan.edges:
        if e.verdict == "suppressed":
            suppressed[e.parent] += 1
    whys = {p.name: p.why for p in plan.packages()}
    for p in plan.packages():
        if p.fallback:
            whys.setdefault(p.fallback.name, p.fallback.why)
    req_by = required_by(plan)

    table = Table(title="Packages", show_lines=False)
    for col in ("package", "version", "wheel set", "required by", "verdict", "why"):
        table.add_column(col, overflow="fold")
    for i in plan.installed:
        if problems[i.name]:
            verdict = "[red]" + escape("; ".join(f"{e.verdict}: {e.requirement} ({e.detail})" for e in problems[i.name])) + "[/red]"
        elif i.no_deps:
            verdict = f"[yellow]--no-deps[/yellow] ({suppressed[i.name]} suppressed)" if suppressed[i.name] else "[yellow]--no-deps[/yellow]"
        else:
            verdict = "[green]ok[/green]"
        explicit = i.name in whys or i.source != "index"
        if not (verbose or explicit or problems[i.name]):
            continue
        table.add_row(escape(i.name), escape(i.version), escape(i.step), escape(", ".join(req_by.get(i.name, []))[:120]),
                      verdict, escape(whys.get(i.name) or i.why or ""))
    c.print(table)
    hidden = sum(1 for i in plan.installed if not (i.name in whys or i.source != "index" or problems[i.name]))
    if hidden and not verbose:
        c.print(f"  ({hidden} transitive packages satisfied; --verbose lists them)")

    if data["no_deps_features"]:
        c.print("\n[bold]Suppressed by --no-deps[/bold] (what pip would have done, and whether the image provides it)")
        for f in data["no_deps_features"]:
            where = f"extra [{f['extra']}]" if f["extra"] else "base requirements"
            mark = "[green]provided[/green]" if f["provided"] else "[yellow]not fully provided[/yellow]"
            c.print(f"  {escape(f['package'])} {escape(where)}: {mark}")
            for n in f["needs"]:
                have = f"has {n['found']}" if n["found"] else "missing"
                c.print(f"    {escape(n['requirement'])}: {escape(have)}; {escape(n['would'])}")

    c.print("\n[bold]Shared pins[/bold]")
    for s in data["shared_pins"]:
        state = "[green]held[/green]" if s["installed"] == s["version"] else f"[red]installed {s['installed']}[/red]"
        c.print(f"  {escape(s['name'])}=={escape(s['version'])} {state}; needed by {escape(', '.join(s['needed_by']))}"
                f"; required in the image by {escape(', '.join(s['required_by']) or 'nothing else')}")
        for x in s["excluded_by"]:
            extra = f" (extra [{x['extra']}])" if x["extra"] else ""
            c.print(f"    excluded by {escape(x['parent'])} {escape(x['parent_version'])}: {escape(x['requirement'])}"
                    f"{escape(extra)}: {x['verdict']}, {escape(x['detail'])}")

    if data["torch_abi"]:
        c.print("\n[bold]Tied to torch[/bold] (from each wheel's ELF imports)")
        for row in data["torch_abi"]:
            declared = f"declares torch {row['declared_torch']}" if row["declared_torch"] else "declares no torch requirement"
            label = f", label +{row['local_label']}" if row["local_label"] else ""
            c.print(f"  {escape(row['name'])} {escape(row['version'])} ({row['source']}): [bold]{row['abi_class']}[/bold]"
                    f" — {ABI_MEANING[row['abi_class']]}; {escape(declared)}{escape(label)}")
            for m in row["provenance_mismatches"]:
                c.print(f"    [yellow]{escape(m)}[/yellow]")

    c.print("\n[bold]Install order[/bold]")
    if plan.hazards:
        for h in plan.hazards:
            c.print(f"  [red]{escape(_hazard_line(h))}[/red]")
    elif plan.locked:
        c.print("  [green]no wheel set changes what an earlier one installed[/green] (each package is in one lock slice)")
    if plan.locked and plan.unlocked_hazards:
        c.print("  Churn the lock removes (one plain pip install per wheel set would do this):")
        for h in plan.unlocked_hazards:
            c.print(f"    {escape(_hazard_line(h))}")
    if not plan.locked and not plan.hazards:
        c.print("  [green]no wheel set changes what an earlier one installed[/green]")

    s = data["summary"]
    e = s["edges"]
    c.print(f"\n{e['satisfied']} satisfied, {e['violated']} violated, {e['suppressed']} suppressed, "
            f"{e['unchecked']} unchecked, {e['extra-only']} extra-only, {e['marker-excluded']} marker-excluded; "
            f"{s['hazards']} order hazards; {s['shared_pins_broken']} shared pins broken")
    c.print("[green]clean[/green]" if s["clean"] else f"[red]{s['conflicts']} conflict(s)[/red]")
    return data


def needed_by(manifest) -> dict[str, tuple[str, ...]]:
    return {canonicalize_name(p.requirement.name): p.needed_by for p in manifest.shared_pins}
