"""`bump`: what a package bump breaks in a variant's image, compared per platform before anything is built."""
from __future__ import annotations

import argparse

from .. import manifest as manifest_mod
from ..plan import plan_platforms
from .common import (
    EXIT_OK, EXIT_PROBLEM, EXIT_UNCHECKED, UsageError, add_deadline_arg, add_platform_arg, add_variant_args,
    emit_json, err, escape, index_client, out, require_fresh_lock, select_plan, select_variant,
)


def cmd_bump(args: argparse.Namespace) -> int:
    """One comparison per platform: --platform's, else each one the variant lists (its own first); exit 1
    when any is blocked. --json of several: the own platform's document, the others under other_platforms."""
    from ..index import IndexClientError
    from ..reports.bump import PAGE_MAX_AGE, BumpInputError, bump_platforms, print_bump
    m = manifest_mod.load(args.manifest)
    variant = select_variant(m, args)
    platforms = [select_plan(m, args).container_platform] if args.platform else \
        [p.container_platform for p in plan_platforms(m, variant)]
    for p in plan_platforms(m, variant):
        if p.container_platform in platforms:
            require_fresh_lock(p, m.path.parent)
    client = index_client(args, m)
    if not args.refresh:
        client.max_age = PAGE_MAX_AGE  # a bump check does not need pages newer than an hour
    try:
        reports = bump_platforms(m, variant, args.requirements, client, offline=args.offline, list_all=args.all,
                                 platform=args.platform)
    except BumpInputError as exc:
        raise UsageError(str(exc)) from None
    except IndexClientError as exc:
        err().print(f"[yellow]could not judge:[/yellow] {escape(str(exc))}")
        return EXIT_UNCHECKED
    if args.json:
        docs = [r.to_json() for r in reports]
        doc = docs[0] if len(docs) == 1 else {**docs[0], "other_platforms": docs[1:]}
        emit_json(doc)
    else:
        for i, report in enumerate(reports):
            if len(reports) > 1:
                out().print(("\n" if i else "") + f"[bold]== {escape(report.platform)} ==[/bold]")
            print_bump(report, out(), show_all=args.all)
        if len(reports) > 1:
            out().print("\n" + "; ".join(f"{r.platform}: {'blocked' if r.blocked else 'nothing blocks'}"
                                         for r in reports))
    return EXIT_PROBLEM if any(r.blocked for r in reports) else EXIT_OK


def add_bump_parser(sub) -> None:
    bp = sub.add_parser(
        "bump", help="what breaks if a package is bumped, before any image is built",
        description=("Compare today's image of a variant (its lock, else one plain pip install per wheel set) with\n"
                     "the image after bumping NAME==VERSION: ABI coupling of compiled wheels to torch (rebuild /\n"
                     "stable ABI), requirements in the image that exclude the new version (with the nearest release\n"
                     "that accepts it) and those it unblocks, what the bumped package's own pins move along, and\n"
                     "shared pins that become unsatisfiable. Verdicts: ok, upgrade/downgrade/add, rebuild, blocked.\n"
                     "Exit 0 nothing blocks, 1 something is blocked, 2 bad input, 3 could not judge (the index or\n"
                     "its cache could not answer). JSON schema: docs/bump.md."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    bp.add_argument("requirements", nargs="+", metavar="NAME==VERSION", help="the bump(s), e.g. torch==2.14.1")
    add_variant_args(bp)
    add_platform_arg(bp, every=True)
    bp.add_argument("--json", action="store_true", help="print the comparison as JSON (schema pinwheel.bump/1)")
    bp.add_argument("--offline", action="store_true", help="use cached index metadata and ABI results only")
    bp.add_argument("--refresh", action="store_true", help="re-read index pages even when the cached ones are fresh")
    bp.add_argument("--all", action="store_true", help="list every package, not only those the bump touches")
    bp.add_argument("--index-url", help="index to read metadata from (default: pip's configuration)")
    add_deadline_arg(bp)
    bp.set_defaults(func=cmd_bump)
