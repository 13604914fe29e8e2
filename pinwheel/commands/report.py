"""`report`: each platform's package set judged as it will be installed, printed or as JSON."""
from __future__ import annotations

import argparse
import dataclasses

from .. import manifest as manifest_mod
from ..lock import lock_installs
from ..manifest import Manifest
from ..plan import LockState, Plan, plan_platforms
from ..resolve import CacheState, ResolveError, memoized, resolve_memoized, wheels_state, with_inventory
from ..resolve.memo import torch_abi_memo_key
from ..workspace import Workspace
from .common import (
    EXIT_OK, EXIT_PROBLEM, EXIT_UNCHECKED, UsageError, add_deadline_arg, add_platform_arg, add_variant_args,
    emit_json, err, escape, index_client, inventory_engine, lock_state, out, select_plan, select_variant,
)
from .progress import index_status


def cmd_report(args: argparse.Namespace) -> int:
    """One report per platform: --platform's, else each one the variant lists (its own first); the exit
    code is the worst of them. --json of several platforms: the own platform's document, and each other
    platform's under "other_platforms"."""
    m = manifest_mod.load(args.manifest)
    plans = [select_plan(m, args)] if getattr(args, "platform", None) else plan_platforms(m, select_variant(m, args))
    docs, codes = [], []
    for i, plan in enumerate(plans):
        if len(plans) > 1 and not args.json:
            out().print(("\n" if i else "") + f"[bold]== {escape(plan.container_platform)} ==[/bold]")
        data, code = report_one(m, plan, args)
        docs.append(data)
        codes.append(code)
    if args.json and (len(plans) > 1 or docs[0]["summary"].get("verdict") != "could-not-judge"):
        doc = docs[0] if len(plans) == 1 else {**docs[0], "other_platforms": docs[1:]}
        emit_json(doc)
    if len(plans) > 1 and not args.json:
        verdicts = {EXIT_OK: "clean", EXIT_PROBLEM: "conflicts", EXIT_UNCHECKED: "could not judge"}
        out().print("\n" + "; ".join(f"{p.container_platform}: {verdicts[c]}" for p, c in zip(plans, codes)))
    return max(codes, key=[EXIT_OK, EXIT_UNCHECKED, EXIT_PROBLEM].index)


def report_one(m: Manifest, plan: Plan, args: argparse.Namespace) -> tuple[dict, int]:
    """One platform's report (printed, or returned for --json) and its exit code. Where the index could not
    answer: a stub that says so, so that the JSON of several platforms still names each one."""
    from ..abi.cache import classifier_key
    from ..index import IndexClientError
    from ..reports.report import missing_on_platform, to_json, torch_abi
    root = m.path.parent
    ws = Workspace.of(m)
    plan = with_inventory(plan, root, inventory_engine(plan))  # a missing or stale one is said first, never clean
    state = LockState("ignored", "--no-lock") if args.no_lock else lock_state(plan, root)
    # A stale lock is never evaluated: the report shows what the manifest asks for now.
    locked = lock_installs(plan, ws.plan_lock_dir(plan), ws.wheels_dir) if state.status == "ok" else None
    plan = plan.with_resolution(lock_state=state)
    try:
        client = index_client(args, m, plan)
        cache_state = CacheState(ws.index_cache)  # one walk of the index cache for both memos
        default_client = getattr(client, "default", client)
        with index_status(plan.label, getattr(default_client, "stats", None), not (args.json or args.quiet)):
            resolved = resolve_memoized(plan, client, ws.index_cache, ws.wheels_dir, locked, refresh=args.refresh,
                                        state=cache_state)
        # keyed by the classifier too: a changed ELF classifier never shows old rows
        abi_key = torch_abi_memo_key(resolved, wheels_state(plan, ws.wheels_dir), client, default_client,
                                     args.offline, classifier_key())
        with index_status(f"{plan.label} ELF imports", getattr(default_client, "stats", None),
                          not (args.json or args.quiet)):
            abi = memoized(ws.index_cache, abi_key,
                           lambda: torch_abi(resolved, client, default_client, ws, args.offline),
                           keep=lambda rows: all(r["abi_class"] != "unknown" for r in rows), refresh=args.refresh,
                           state=cache_state)
        missing = missing_on_platform(resolved, client)
    except ResolveError as exc:
        raise UsageError(str(exc)) from None
    except IndexClientError as exc:
        err().print(f"[yellow]{escape(plan.label)}: could not judge:[/yellow] {escape(str(exc))}")
        return {"variant": plan.variant.name, "platform": plan.container_platform,
                "target": dataclasses.asdict(plan.target), "could_not_judge": str(exc),
                "summary": {"verdict": "could-not-judge", "clean": False}}, EXIT_UNCHECKED
    if args.json:
        data = to_json(resolved, abi, allow_unchecked=args.allow_unchecked, missing=missing)
    else:
        from ..reports.report_printing import print_report  # rich: the table view only
        data = print_report(resolved, out(), verbose=args.verbose, abi=abi, allow_unchecked=args.allow_unchecked,
                            missing=missing)
    return data, {"clean": EXIT_OK, "conflicts": EXIT_PROBLEM, "unchecked": EXIT_UNCHECKED}[data["summary"]["verdict"]]


def add_report_parser(sub) -> None:
    rp = sub.add_parser(
        "report", help="explain the resolved package set and its conflicts",
        description=("Evaluate a variant as it will be installed (from its lock when there is one, else one plain\n"
                     "pip install per wheel set) for the target Python and platform, and judge every requirement:\n"
                     "satisfied, violated, suppressed by --no-deps (with what pip would have done), unchecked,\n"
                     "extra-only or marker-excluded. Also: shared pins and who excludes them, and install-order\n"
                     "hazards (a later wheel set changing what an earlier one installed).\n"
                     "Exit 0 clean, 1 conflicts (a stale lock is one), 2 bad input, 3 could not judge (unchecked)."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_variant_args(rp)
    add_platform_arg(rp, every=True)
    rp.add_argument("--json", action="store_true", help="print the report as JSON (schema pinwheel.report/1)")
    rp.add_argument("--offline", action="store_true", help="use cached index metadata only")
    rp.add_argument("--no-lock", action="store_true", help="ignore the lock: show what plain pip per wheel set does")
    rp.add_argument("--verbose", "-v", action="store_true", default=argparse.SUPPRESS,
                    help="list transitive packages too")
    rp.add_argument("--index-url", help="index to read metadata from (default: pip's configuration)")
    rp.add_argument("--allow-unchecked", action="store_true",
                    help="let requirements that could not be judged pass as clean (they are still listed)")
    rp.add_argument("--refresh", action="store_true", help="ignore the cached pages, metadata and results; rewrite them")
    add_deadline_arg(rp)
    rp.set_defaults(func=cmd_report)
