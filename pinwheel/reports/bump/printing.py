"""The bump report as rich tables, for a terminal or a CI log."""
from __future__ import annotations

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .model import BLOCKED_MEANING, BumpReport, PackageRow

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


def print_bump(report: BumpReport, console: Console, show_all: bool = False) -> None:
    """The comparison as rich tables: packages, ABI coupling, requirements, moves, shared pins, notes."""
    c = console
    if not c.is_terminal and c.width < LOG_WIDTH:
        c.width = LOG_WIDTH
    bumps = ", ".join(f"{b['name']} {b['from'] or '(new)'} → {b['to']}" for b in report.bumps)
    t = report.target
    source = (f"its lock {report.lock_dir}" if report.installed_from == "lock"
              else "one plain pip install per wheel set (no lock)")
    c.print(f"[bold]bump {escape(bumps)}[/bold] in {escape(report.image)}:{escape(report.variant)} "
            f"(Python {t['python']}, {t['platform']}, CUDA {t['cuda']}); today's image: {escape(source)}")

    quiet = set() if show_all else _quiet_adds(report)
    _print_packages(report, c, quiet)
    _print_abi(report, c)
    _print_requirements(report, c)
    _print_moves(report, c, quiet)
    _print_shared_pins(report, c)
    _print_ending(report, c)


def _print_packages(report: BumpReport, c: Console, quiet: set) -> None:
    table = Table(title="Packages", title_justify="left")
    table.add_column("package", overflow="fold")
    table.add_column("version", overflow="fold")
    table.add_column("verdict", overflow="fold")
    table.add_column("why, and the nearest fix", overflow="fold", ratio=1)
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


def _print_abi(report: BumpReport, c: Console) -> None:
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


def _print_requirements(report: BumpReport, c: Console) -> None:
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


def _print_moves(report: BumpReport, c: Console, quiet: set) -> None:
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


def _print_shared_pins(report: BumpReport, c: Console) -> None:
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


def _print_ending(report: BumpReport, c: Console) -> None:
    """Gaps on other platforms, notes, the summary line and what the check cost."""
    for gap in report.missing_on_platform:
        c.print(f"[bold red]missing on {escape(gap['platform'])}:[/bold red] {escape(gap['package'])} "
                f"{escape(gap['version'])} has no wheel for Python {escape(gap['python'])} on {escape(gap['target'])}; "
                f"the index has: {escape(', '.join(gap['wheels']))}")
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
