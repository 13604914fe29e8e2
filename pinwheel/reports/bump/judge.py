"""The bump report, judged top to bottom: read both images, then give every package its verdict.

Each finding judges the packages it names; a package shows the most severe
verdict it got, with every reason, and the fix of the finding that set it.
"""
from __future__ import annotations

import time
from collections import defaultdict
from typing import Iterable

from ...index import IndexClient
from ...manifest import Manifest
from ..report import missing_text
from .context import FIX_LOOKUPS, Comparison
from .findings import abi_findings, requirement_diffs, requirement_findings, shared_pin_findings
from .fixes import pin_fix
from .images import apply, local_notes, plan_after, today, validate
from .model import (SEVERITY, VERDICTS, AbiFinding, BumpInputError, BumpReport, Fix, Move, PackageRow,
                    RequirementFinding, SharedPinFinding, parse_bumps)

#: How long a cached index page counts as fresh for bump (seconds); --refresh asks again.
PAGE_MAX_AGE = 3600.0


def bump(manifest: Manifest, variant: str, requirements: Iterable[str], client: IndexClient, *,
         offline: bool = False, fix_lookups: int = FIX_LOOKUPS, list_all: bool = False,
         platform: str | None = None) -> BumpReport:
    """Compare today's image of ``variant`` with the image after bumping ``requirements`` (name==version),
    for one of its container platforms (None: its own platform)."""
    reqs = parse_bumps(requirements)
    v = manifest.variant(variant)
    if v.torch_index_env and not v.torch_index_url():
        raise BumpInputError(f"{v.torch_index_unset()}: set it, or pick another variant")
    if platform is not None and platform not in v.container_platforms:
        raise BumpInputError(f"--platform {platform}: variant {variant} is built for "
                             f"{', '.join(v.container_platforms)} (its platforms: key)")
    c = Comparison(manifest, variant, reqs, client, offline=offline, fix_lookups=fix_lookups, list_all=list_all,
                   platform=platform)
    return _Judging(c).build()


def bump_platforms(manifest: Manifest, variant: str, requirements: Iterable[str], client: IndexClient, *,
                   platform: str | None = None, **options) -> list[BumpReport]:
    """One comparison per platform: ``platform``'s, else each one the variant lists (its own first)."""
    v = manifest.variant(variant)
    order = [platform] if platform else [v.default_platform] + [p for p in v.container_platforms
                                                                if p != v.default_platform]
    requirements = list(requirements)
    return [bump(manifest, variant, requirements, client, platform=p, **options) for p in order]


class _Judging:
    """One comparison judged: both images, then the rows of the report, one finding after another."""

    def __init__(self, c: Comparison):
        self.c = c
        self.rows: dict[str, PackageRow] = {}

    def build(self) -> BumpReport:
        t0 = time.perf_counter()
        self.read_images()
        bumps = self.judge_bumps()
        moves = self.judge_moves()
        requirements = self.judge_requirements()
        shared = self.judge_shared_pins()
        abi = self.judge_abi()
        packages = self.packages()
        self.note_what_was_left()
        return self.report(time.perf_counter() - t0, bumps, packages, abi, requirements, moves, shared)

    # ------------------------------------------------------------ the two images

    def read_images(self) -> None:
        """Today's image, the image after the bump, and the requirement edges of each."""
        c = self.c
        validate(c)
        self.before, self.installed_from, self.lock_dir = today(c)
        c.today_torch = self.before["torch"].version if "torch" in self.before else None
        local_notes(c)
        self.before_edges = c.resolver.judge(c.plan, self.before)
        self.after_plan = plan_after(c)
        self.after, self.forced = apply(c, self.before, self.after_plan)
        self.after_edges = c.resolver.judge(self.after_plan, self.after)
        self.changed = {n for n in self.after
                        if n not in self.before or self.after[n].version != self.before[n].version}
        self.pins = self.after_plan.manifest_pins()
        self.pinned_today = c.plan.manifest_pins()

    # ------------------------------------------------------------ rows and verdicts

    def row(self, name: str) -> PackageRow:
        if name not in self.rows:
            b, a = self.before.get(name), self.after.get(name)
            inst = a or b
            source = ("bump" if name in self.c.new else "move" if name in self.changed
                      else inst.source if inst else "index")
            self.rows[name] = PackageRow(name, b.version if b else None, a.version if a else None, source, "ok", None,
                                         pinned_by_manifest=(name in self.pinned_today
                                                             or bool(inst and inst.source != "index")),
                                         no_deps=bool(inst and inst.no_deps))
        return self.rows[name]

    def judge(self, name: str, verdict: str, reason: str, fix: Fix | None = None, to: str | None = None) -> None:
        """Add a reason to a package's row; the most severe verdict wins, and the first fix for it."""
        r = self.row(name)
        if reason and reason not in r.reasons:
            r.reasons.append(reason)
        if SEVERITY[verdict] > SEVERITY[r.verdict]:
            r.verdict, r.to = verdict, to
            if fix is not None:
                r.fix = fix
        elif fix is not None and r.fix is None:
            r.fix = fix

    # ------------------------------------------------------------ findings, in the order they are judged

    def judge_bumps(self) -> list[dict]:
        """The bumped packages themselves; one missing on this platform is blocked, naming the platform."""
        out = []
        for name, version in self.c.new.items():
            b = self.before.get(name)
            out.append({"name": name, "from": b.version if b else None, "to": version, "in_image": b is not None})
            self.judge(name, "ok", f"bumped {b.version} → {version}" if b else f"not in today's image: added at {version}")
            gap = self.c.missing.get(name)
            if gap is not None:
                where = gap["platform"]
                self.judge(name, "blocked", f"{missing_text(gap)}; its requirements were not read there",
                           Fix("keep", name, b.version if b else None,
                               (f"keep {name} at {b.version}" if b else f"leave {name} out")
                               + f" until {version} has a {where} wheel, or take {where} out of the "
                               f"variant's platforms"))
            if b is not None and b.no_deps:
                self.judge(name, "ok", "installed with --no-deps: its requirements are not enforced (see suppressed)")
        return out

    def judge_moves(self) -> list[Move]:
        """What moves along: a move that hits a pin is blocked, with the pin to change; the others move."""
        c = self.c
        moves = requirement_diffs(c, self.before, self.after, self.after_plan, self.forced)
        for mv in moves:
            by = ", ".join(f"{d['parent']} {d['parent_version']} requires {d['requirement']}" for d in mv.required_by)
            if mv.kind == "conflict":
                mv.fix = mv.fix or pin_fix(c, mv, self.after_plan, self.after_edges)
                self.judge(mv.name, "blocked", f"{by}; {mv.conflict}", mv.fix)
            elif mv.kind in ("upgrade", "downgrade", "add"):
                self.judge(mv.name, mv.kind, f"moves along: {by}", to=mv.after)
        return moves

    def judge_requirements(self) -> list[RequirementFinding]:
        """Requirements that exclude the new versions (blocked, or moved by a re-lock), and those the bump meets."""
        after, before = self.after, self.before
        findings = requirement_findings(self.c, self.before_edges, self.after_edges, before, after, self.changed,
                                        self.after_plan)
        for rf in findings:
            text = f"{rf.parent} {rf.parent_version} requires {rf.requirement}"
            if rf.change == "breaks" and rf.enforced:
                parent_pinned = rf.parent in self.pins or (after.get(rf.parent) and after[rf.parent].source != "index")
                if rf.fix and rf.fix.action in ("upgrade", "downgrade") and not parent_pinned and not rf.fix.also_needs:
                    self.judge(rf.parent, rf.fix.action, f"{text}: excludes {rf.name} {after[rf.name].version}; a "
                               f"re-lock moves it to {rf.fix.version}", rf.fix, to=rf.fix.version)
                else:
                    self.judge(rf.parent, "blocked", f"{text}: excludes {rf.name} {after[rf.name].version}", rf.fix)
            elif rf.change == "breaks":
                self.judge(rf.parent, "ok", f"{text}: excludes {rf.name} {after[rf.name].version}, but it is installed "
                           "with --no-deps, so pip does not enforce it (check it at run time)")
            elif rf.change == "unblocks":
                how = "" if rf.enforced else " (today hidden by --no-deps)"
                self.judge(rf.parent, "ok", f"{text}: excluded {rf.name} {before[rf.name].version}{how}; "
                           f"the bump to {after[rf.name].version} satisfies it")
            elif rf.change == "holds" and rf.name in self.c.new:
                self.judge(rf.parent, "ok", f"{text}: still satisfied by {rf.name} {after[rf.name].version}")
            elif rf.change == "still-violated":
                self.judge(rf.parent, "ok", f"{text}: violated today and after the bump (not this bump's doing)")
        return findings

    def judge_shared_pins(self) -> list[SharedPinFinding]:
        """A shared pin the bump makes unsatisfiable blocks each package that newly excludes it."""
        shared = shared_pin_findings(self.c, self.before_edges, self.after_edges, self.before, self.after,
                                     self.after_plan)
        for sp in shared:
            if sp.status == "unsatisfiable":
                for vio in sp.violations:
                    if vio["new"] and (vio["enforced"] or vio["extra"] is None):
                        hidden = "" if vio["enforced"] else " (hidden by --no-deps, needed at run time)"
                        self.judge(vio["parent"], "blocked",
                                   f"{vio['parent']} {vio['parent_version']} requires {vio['requirement']}: shared "
                                   f"pin {sp.requirement} becomes unsatisfiable{hidden}",
                                   Fix("change-pin", vio["parent"], None, "; or ".join(sp.fixes)))
            elif sp.status == "changed-by-bump":
                self.judge(sp.name, "ok", f"the bump moves shared pin {sp.requirement}: update shared_pins in "
                           f"{self.c.m.path.name}")
        return shared

    def judge_abi(self) -> list[AbiFinding]:
        """Compiled wheels tied to torch: rebuild, or blocked when a stable-ABI wheel needs a newer torch."""
        c = self.c
        abi = abi_findings(c, self.after, self.after_plan)
        for f in abi:
            fix = None
            if f.verdict == "rebuild":
                fix = Fix("rebuild", f.name, None,
                          f"rebuild {f.name} against torch {c.new['torch']}"
                          + (f" and update its built_against in {c.m.path.name}" if f.source == "local" else ""))
            elif f.verdict == "blocked":
                fix = Fix("upgrade", "torch", f.forward_compatible_from,
                          f"bump torch to {f.forward_compatible_from} or later, or use a build of {f.name} for "
                          f"torch {c.new['torch']}")
            reason = f"ABI: {f.verdict} ({f.detail})"
            if f.provenance_mismatches:
                reason += f"; provenance: {'; '.join(f.provenance_mismatches)}"
            self.judge(f.name, f.verdict, reason, fix)
        return abi

    # ------------------------------------------------------------ the report

    def packages(self) -> list[PackageRow]:
        """The rows: bumped packages first, then the most severe; every package with --all."""
        if self.c.list_all:
            for name in self.after:
                self.row(name)
        return sorted(self.rows.values(), key=lambda r: (r.source != "bump", -SEVERITY[r.verdict], r.name))

    def note_what_was_left(self) -> None:
        """Notes on what the comparison did not judge: old violations, missing metadata, another torch index."""
        c = self.c
        pre_existing = [e for e in self.after_edges if e.verdict == "violated" and e.name not in self.changed
                        and e.parent not in self.changed]
        if pre_existing:
            c.notes.append(f"{len(pre_existing)} requirement(s) violated today and unchanged by the bump "
                           f"(pinwheel report lists them): " + ", ".join(f"{e.parent} {e.requirement}"
                                                                         for e in pre_existing[:5]))
        unknown = sorted({e.parent for e in self.after_edges if e.verdict == "unchecked"} - set(c.missing))
        if unknown:
            c.notes.append(f"metadata not available for {', '.join(unknown)}: their requirements were not checked")
        if c.plan.variant.torch_index_env:
            c.notes.append(f"variant {c.plan.variant.name} takes torch from the index in "
                           f"${c.plan.variant.torch_index_env}; torch's metadata was read from there")

    def report(self, seconds: float, bumps: list[dict], packages: list[PackageRow], abi: list[AbiFinding],
               requirements: list[RequirementFinding], moves: list[Move],
               shared: list[SharedPinFinding]) -> BumpReport:
        c = self.c
        counts: dict[str, int] = defaultdict(int)
        for r in packages:
            counts[r.verdict] += 1
        summary = {v: counts.get(v, 0) for v in VERDICTS}
        summary["blocked_shared_pins"] = sum(1 for s in shared if s.status == "unsatisfiable")
        summary["moves"] = sum(1 for m in moves if m.kind in ("upgrade", "downgrade", "add"))
        summary["missing_on_platform"] = len(c.missing)
        summary["exit_code"] = 1 if summary["blocked"] else 0
        timing = {"seconds": round(seconds, 3), "index": c.source.stats(), "abi_cache": dict(c.abi_cache.stats)}
        plan = c.plan
        return BumpReport(
            image=plan.image, variant=plan.variant.name,
            target={"python": plan.target.python, "platform": plan.target.platform, "cuda": plan.target.cuda},
            installed_from=self.installed_from,
            lock_dir=str(self.lock_dir.relative_to(c.root)) if self.lock_dir else None,
            bumps=bumps, packages=packages, abi=abi, requirements=requirements, moves=moves,
            shared_pins=shared, notes=c.notes, summary=summary, timing=timing,
            platform=plan.container_platform, missing_on_platform=list(c.missing.values()))
