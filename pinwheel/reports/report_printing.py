"""The conflict report as printed: report.py's findings, section by section, on a rich console.

Only the table view imports this module (and rich with it); `report --json` never does.
"""
from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from rich.markup import escape

from ..plan import Hazard, Plan
from ..resolve import BASE
from .report import (
    ABI_MEANING, dropped_text, hazard_text, inventory_problem, missing_text, moved_pins, replaced_pins, required_by,
    to_json,
)

if TYPE_CHECKING:
    from rich.console import Console


def _hazard_line(h: Hazard) -> str:
    return hazard_text(h)


def _evaluated_as(plan: Plan) -> str:
    if plan.resolution.locked:
        return "as locked"
    state = plan.resolution.lock_state.status if plan.resolution.lock_state else "missing"
    return {"stale": "lock is STALE: as the manifest now asks, one plain pip install per wheel set",
            "ignored": "lock ignored (--no-lock): one plain pip install per wheel set"}.get(
        state, "no lock: one plain pip install per wheel set")


# Narrower than this, a table of six columns cuts names; the report prints one package per line instead.
TABLE_MIN_WIDTH = 120


def print_packages(c: Console, rows: list[tuple[str, ...]]) -> None:
    """The packages as a table on a terminal wide enough for one; elsewhere (a pipe, a log, a narrow
    terminal) one package per line, every name in full, so nothing is cut and no line is padded."""
    from rich.table import Table

    if c.is_terminal and c.width >= TABLE_MIN_WIDTH:
        table = Table(title="Packages", show_lines=False)
        for col in ("package", "version", "wheel set", "required by", "verdict", "why"):
            # wrap at spaces; a token too long for its cell ends in an ellipsis, never silently cut
            table.add_column(col, overflow="ellipsis")
        for row in rows:
            table.add_row(*row)
        c.print(table)
        return
    c.print("[bold]Packages[/bold] (package version, wheel set: verdict; required by; why)")
    for name, version, step, req, verdict, why in rows:
        c.print(f"  {name} {version}, {step}: {verdict}" + (f"; required by {req}" if req else "")
                + (f"; why: {why}" if why else ""))


def print_report(plan: Plan, console: Console, verbose: bool = False, abi: list[dict] | None = None,
                 allow_unchecked: bool = False, missing: list[dict] | None = None) -> dict:
    """The report of ``plan`` printed on ``console``; returns its JSON document (report.to_json)."""
    data = to_json(plan, abi, allow_unchecked, missing)
    absent = {d["package"] for d in data["missing_on_platform"]}
    c = console
    print_heading(c, plan)
    print_package_rows(c, plan, absent, verbose)
    base = data["base"]
    if base is not None:
        print_base(c, plan, base)
    print_decided(c, plan, data)
    print_unmet(c, plan, data, absent)
    print_shared_pins(c, data)
    print_torch_abi(c, data)
    print_install_order(c, plan)
    print_summary(c, plan, data, on_base=base is not None)
    return data


def print_heading(c: Console, plan: Plan) -> None:
    """A missing or stale inventory or lock said first, then what is evaluated, for which target."""
    if inventory_problem(plan):
        assert plan.resolution.inventory_state is not None
        c.print(f"[red bold]base inventory of {escape(plan.variant.name)} is {plan.resolution.inventory_state.status}:[/red bold] "
                f"{escape(plan.resolution.inventory_state.detail)}; run `build.py base inventory --variant "
                f"{escape(plan.variant.name)}`.")
    if plan.resolution.lock_state and plan.resolution.lock_state.status == "stale":
        c.print(f"[red bold]lock of {escape(plan.variant.name)} is stale:[/red bold] {escape(plan.resolution.lock_state.detail)}; "
                f"not using it. Run `make lock`.")
    c.print(f"[bold]{escape(plan.image)}:{escape(plan.variant.name)}[/bold]  target: Python {plan.target.python}, "
            f"{plan.target.platform}" + (f" ({plan.container_platform})" if plan.variant.platforms else "")
            + f", CUDA {plan.target.cuda}  ({_evaluated_as(plan)})")


def print_package_rows(c: Console, plan: Plan, absent: set[str], verbose: bool) -> None:
    """One row per installed package the manifest names, that has a problem, or (--verbose) every one."""
    problems = defaultdict(list)
    suppressed: dict[str, int] = defaultdict(int)
    for e in plan.resolution.edges:
        if e.verdict in ("violated", "unchecked"):
            problems[e.parent].append(e)
        if e.verdict == "suppressed":
            suppressed[e.parent] += 1
    replaced = replaced_pins(plan)
    whys = {p.name: p.why for p in plan.packages()}
    for p in plan.packages():
        if p.fallback:
            whys.setdefault(p.fallback.name, p.fallback.why)
    req_by = required_by(plan)
    moved = moved_pins(plan)

    rows = []
    for i in plan.resolution.installed:
        if i.name in absent:
            verdict = f"[red]missing on {escape(plan.container_platform)}[/red]"
        elif problems[i.name]:
            verdict = "[red]" + escape("; ".join(f"{e.verdict}: {e.requirement} ({e.detail})" for e in problems[i.name])) + "[/red]"
        elif i.name in moved:
            m = moved[i.name]
            verdict = f"[red]moved {escape(m['from'])} → {escape(m['to'])} by {escape(m['by'])}[/red]"
        elif i.name in replaced:
            m = replaced[i.name]
            verdict = f"[cyan]replaces the base's {escape(m['from'])} (intended)[/cyan]"
        elif i.no_deps:
            verdict = f"[yellow]--no-deps[/yellow] ({suppressed[i.name]} suppressed)" if suppressed[i.name] else "[yellow]--no-deps[/yellow]"
        else:
            verdict = "[green]ok[/green]"
        explicit = i.name in whys or i.source not in ("index", BASE) or i.name in moved or i.name in replaced
        if not (verbose or explicit or problems[i.name]):
            continue
        rows.append((escape(i.name), escape(i.version), escape(i.step), escape(", ".join(req_by.get(i.name, []))),
                     verdict, escape(whys.get(i.name) or i.why or "")))
    print_packages(c, rows)
    hidden = sum(1 for i in plan.resolution.installed
                 if not (i.name in whys or i.source not in ("index", BASE) or problems[i.name] or i.name in moved
                         or i.name in replaced))
    if hidden and not verbose:
        c.print(f"  ({hidden} transitive or base packages satisfied; --verbose lists them)")


def print_base(c: Console, plan: Plan, base: dict) -> None:
    """What the image does to the base's environment (report.base_findings)."""
    c.print(f"\n[bold]Base environment[/bold] ({escape(str(base['image']))}: {base['packages']} of its packages "
            f"kept as they are)")
    for h in plan.resolution.hazards:
        if h.earlier_step == BASE:
            c.print(f"  [red]{escape(hazard_text(h))}[/red]")
    for h in plan.resolution.replacements:
        what = "the base's " if h.earlier_step == BASE else ""
        c.print(f"  [cyan]wheel set {escape(h.step)} replaces {escape(what)}{escape(h.package)} {escape(h.before)} → "
                f"{escape(h.after)} (intended)[/cyan]")
    for r in plan.resolution.removals:
        had = f"{r.package} {r.version}" if r.version else f"{r.package} (not installed there)"
        c.print(f"  step {escape(r.step)} removes {escape(had)}: {escape(r.why)}")
    for e in plan.resolution.edges:
        if e.verdict == "base-broken":
            c.print(f"  [yellow]base: already broken[/yellow]: {escape(e.parent)} {escape(e.parent_version)} "
                    f"requires {escape(e.requirement)} ({escape(e.detail.removeprefix('base: already broken ').strip('()'))})")
    for k in base["kept_excluded"]:
        c.print(f"  [yellow]kept by the base[/yellow]: {escape(k['package'])} {escape(k['version'])}, excluded on "
                f"{escape(', '.join(k['excluded_on']))} (exclude removes nothing): {escape(k['fix'])}")


def print_decided(c: Console, plan: Plan, data: dict) -> None:
    """What the manifest decided on purpose, and what the resolver does not judge: overrides, --no-deps
    suppressions, exclusions, the steps' changes outside the Python environment."""
    overridden = [e for e in plan.resolution.edges if e.verdict == "overridden"]
    if overridden:  # on a venv too: an override is the manifest's decision, shown wherever it applies
        c.print("\n[bold]Overridden on purpose[/bold] (requirements a pin marked `override: true` contradicts)")
        for e in overridden:
            c.print(f"  [cyan]overridden[/cyan]: {escape(e.detail)}")

    if data["no_deps_features"]:
        c.print("\n[bold]Suppressed by --no-deps[/bold] (what pip would have done, and whether the image provides it)")
        for f in data["no_deps_features"]:
            where = f"extra [{f['extra']}]" if f["extra"] else "base requirements"
            mark = "[green]provided[/green]" if f["provided"] else "[yellow]not fully provided[/yellow]"
            c.print(f"  {escape(f['package'])} {escape(where)}: {mark}")
            for n in f["needs"]:
                have = f"has {n['found']}" if n["found"] else "missing"
                c.print(f"    {escape(n['requirement'])}: {escape(have)}; {escape(n['would'])}")

    if data["excluded"]:
        c.print("\n[bold]Excluded on purpose[/bold] (requirements the manifest leaves out of the image, each with its why)")
        for x in data["excluded"]:
            c.print(f"  [cyan]excluded[/cyan]: {escape(x['parent'])} {escape(x['parent_version'])} requires "
                    f"{escape(x['requirement'])}; {escape(x['detail'])}")

    if data["unmet_by_removal"]:
        c.print("\n[bold]Unmet by a removal[/bold] (requirements on a package a remove step takes out, left unmet on purpose, each with its why)")
        for x in data["unmet_by_removal"]:
            c.print(f"  [cyan]removed[/cyan]: {escape(x['parent'])} {escape(x['parent_version'])} requires "
                    f"{escape(x['requirement'])}; {escape(x['detail'])}")

    if data["outside"]:
        c.print("\n[bold]Outside the Python environment[/bold] (what steps change that the resolver does not judge)")
        for o in data["outside"]:
            c.print(f"  {escape(o['kind'])} step {escape(o['step'])}: {escape(o['what'])}")
            for f in o.get("findings", ()):  # the audit's RUN rules over its script
                color = "red" if f["level"] == "error" else "yellow"
                c.print(f"    [{color}]{f['level']}[/{color}] {escape(f['rule'])} (line {f['line']}): "
                        f"{escape(f['message'])}; fix: {escape(f['fix'])}")
            if "findings" in o and not o["findings"]:
                c.print("    its script: no finding of the audit's RUN rules")


def print_unmet(c: Console, plan: Plan, data: dict, absent: set[str]) -> None:
    """What the image lacks: dropped requirements, clashes, packages missing on the platform, and the
    lookups that could not be judged."""
    if data["dropped_requirements"]:
        c.print("\n[bold]Dropped and unmet[/bold] (base requirements a --no-deps install leaves unmet; the build fails "
                "on any the manifest does not allow)")
        for d in data["dropped_requirements"]:
            if d["allowed"]:
                c.print(f"  [cyan]allowed[/cyan]: {escape(dropped_text(d))}; allow_missing: {escape(d['why'])}")
            else:
                c.print(f"  [red]{escape(dropped_text(d))}[/red]")

    clashes = [cl for cl in plan.resolution.clashes if cl.package not in absent]  # a missing one is listed as missing
    if clashes:
        c.print("\n[bold]Clashes[/bold] (no release satisfies everything a wheel set asks; plain pip stops at the first)")
        for cl in clashes:
            kept = f"; judged with {cl.kept} in its place" if cl.kept else ""
            c.print(f"  [red]{escape(cl.package)} in wheel set {escape(cl.step)}[/red]{escape(kept)}")
            for w in cl.wanted:
                c.print(f"    wants {escape(w)}")
            for r in cl.reasons:
                c.print(f"    {escape(r)}")

    if data["missing_on_platform"]:
        c.print(f"\n[bold]Missing on {escape(plan.container_platform)}[/bold] (no file this platform can install; "
                f"the build stops there)")
        for d in data["missing_on_platform"]:
            c.print(f"  [red]{escape(missing_text(d))}[/red]")
            c.print(f"    the index has: {escape(', '.join(d['wheels']))}")

    unjudged = [u for u in plan.resolution.unjudged if u.package not in absent]
    if unjudged:
        c.print("\n[bold]Could not judge[/bold] (never counted as clean)")
        for u in unjudged:
            c.print(f"  [yellow]{escape(u.package)}[/yellow]: {escape(u.reason)}")


def print_shared_pins(c: Console, data: dict) -> None:
    c.print("\n[bold]Shared pins[/bold]")
    for s in data["shared_pins"]:
        if not s["broken"]:
            state = "[green]held[/green]"
        elif s["installed"] != s["version"]:
            state = f"[red]BROKEN: installed {s['installed'] or 'nothing'}[/red]"
        else:
            state = "[red]BROKEN[/red]"
        c.print(f"  {escape(s['name'])}=={escape(s['version'])} {state}; needed by {escape(', '.join(s['needed_by']))}"
                f"; required in the image by {escape(', '.join(s['required_by']) or 'nothing else')}")
        for x in s["excluded_by"]:
            extra = f" (extra [{x['extra']}])" if x["extra"] else ""
            breaks = " [red](breaks the pin)[/red]" if x["breaks"] else ""
            c.print(f"    excluded by {escape(x['parent'])} {escape(x['parent_version'])}: {escape(x['requirement'])}"
                    f"{escape(extra)}: {x['verdict']}, {escape(x['detail'])}{breaks}")


def print_torch_abi(c: Console, data: dict) -> None:
    if data["torch_abi"]:
        c.print("\n[bold]Tied to torch[/bold] (from each wheel's ELF imports)")
        for row in data["torch_abi"]:
            declared = f"declares torch {row['declared_torch']}" if row["declared_torch"] else "declares no torch requirement"
            label = f", label +{row['local_label']}" if row["local_label"] else ""
            c.print(f"  {escape(row['name'])} {escape(row['version'])} ({row['source']}): [bold]{row['abi_class']}[/bold]"
                    f" — {ABI_MEANING[row['abi_class']]}; {escape(declared)}{escape(label)}")
            for m in row["provenance_mismatches"]:
                c.print(f"    [yellow]{escape(m)}[/yellow]")


def print_install_order(c: Console, plan: Plan) -> None:
    c.print("\n[bold]Install order[/bold]")
    if plan.resolution.hazards:
        for h in plan.resolution.hazards:
            c.print(f"  [red]{escape(_hazard_line(h))}[/red]")
    elif plan.resolution.locked:
        c.print("  [green]no wheel set changes what an earlier one installed[/green] (each package is in one lock slice)")
    if plan.resolution.locked and plan.resolution.unlocked_hazards:
        c.print("  Churn the lock removes (one plain pip install per wheel set would do this):")
        for h in plan.resolution.unlocked_hazards:
            c.print(f"    {escape(_hazard_line(h))}")
    if not plan.resolution.locked and not plan.resolution.hazards:
        c.print("  [green]no wheel set changes what an earlier one installed[/green]")


def print_summary(c: Console, plan: Plan, data: dict, on_base: bool) -> None:
    """The counts, the verdict, and what to do about each finding."""
    s = data["summary"]
    e = s["edges"]
    base_counts = (f", {e['base-broken']} base-broken, {e['overridden']} overridden"
                   if on_base or e["base-broken"] or e["overridden"] else "")
    c.print(f"\n{e['satisfied']} satisfied, {e['violated']} violated, {e['suppressed']} suppressed, "
            f"{e['unchecked']} unchecked, {e['extra-only']} extra-only, {e['marker-excluded']} marker-excluded{base_counts}; "
            f"{s['hazards']} order hazards; {s['shared_pins_broken']} shared pins broken; {s['clashes']} clashes; "
            f"{s['unjudged']} lookups failed"
            + (f"; {s['missing_on_platform']} missing on {plan.container_platform}" if s["missing_on_platform"] else "")
            + (f"; {s['dropped_unmet']} dropped requirement(s) unmet" if s["dropped_unmet"] else "")
            + (f"; {s['dropped_allowed']} allowed unmet" if s["dropped_allowed"] else "")
            + (f"; {e['excluded']} excluded on purpose" if e["excluded"] else "")
            + (f"; {e['removed']} unmet by a removal" if e["removed"] else ""))
    if s["verdict"] == "conflicts":
        c.print(f"[red]{s['conflicts']} conflict(s)[/red]"
                + (f", and {s['unchecked']} could not be judged" if s["unchecked"] else ""))
    elif s["verdict"] == "unchecked" and s.get("todo"):
        c.print(f"[yellow]NOT CLEAN: {len(s['todo'])} TODO(s) left by import[/yellow] (exit 3; fill them in and drop "
                "them from todo:)")
        for item in s["todo"]:
            c.print(f"  TODO {escape(item)}")
    elif s["verdict"] == "unchecked":
        c.print(f"[yellow]NOT CLEAN: {s['unchecked']} could not be judged[/yellow] (exit 3; --allow-unchecked accepts this)")
    elif s["unchecked_allowed"]:
        c.print(f"[green]clean[/green] [yellow]except {s['unchecked']} not judged, allowed by --allow-unchecked[/yellow]")
    else:
        c.print("[green]clean[/green]")
    if data["next_steps"]:
        c.print("\n[bold]What to do[/bold]")
        for step in data["next_steps"]:
            c.print(f"  - {escape(step)}")
