"""`lock`: each variant's hashed lock per platform written (pip-compile or uv), or checked against the
manifest without the network."""
from __future__ import annotations

import argparse
import platform as host_platform
from pathlib import Path

from .. import manifest as manifest_mod
from ..index.target import container_arch
from ..lock import DEFAULT_ENGINE, ENGINES, LockError, check_lock
from ..lock.format import ENGINE_HEADER, header_value
from ..plan import Plan
from ..workspace import LockFiles, Workspace
from .common import (
    EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEM, add_platform_arg, add_variant_args, err, escape, index_client, out,
    require_fresh_inventory, select_platform_plans,
)
from .conventions import DeprecatedAlias


def default_engine(plan: Plan, root: Path) -> str:
    """The resolver when --resolver is left out: the one the committed lock was made with (a re-lock keeps it),
    else uv for an architecture other than the host's (pip-compile resolves for the host only)."""
    lock = Workspace(root, plan.image).plan_lock_dir(plan) / LockFiles.REQUIREMENTS
    recorded = header_value(lock.read_text(), ENGINE_HEADER) if lock.is_file() else None
    if recorded in ENGINES:
        return recorded
    host = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(host_platform.machine().lower())
    return "uv" if host != container_arch(plan.target.platform) else DEFAULT_ENGINE


def cmd_lock(args: argparse.Namespace) -> int:
    m = manifest_mod.load(args.manifest)
    root = m.path.parent
    plans = select_platform_plans(m, args)
    if args.check:
        stale = []
        for plan in plans:
            c = check_lock(plan, root, args.resolver)
            if c.status == "ok":
                out().print(f"{c.variant}: {escape(c.detail)}")
            elif c.status == "missing" and c.needs_env:
                out().print(f"[yellow]{c.variant}: not locked ({escape(c.detail)}); locking it needs "
                            f"${c.needs_env} (its extra index)[/yellow]")
            else:
                stale.append(c.variant)
                err().print(f"[red]{c.variant}: {c.status}: {escape(c.detail)}[/red]")
        if stale:
            err().print(f"[red]stale lock(s): {', '.join(stale)}: run `make lock`[/red]")
            return EXIT_PROBLEM
        return EXIT_OK
    failed: list[str] = []
    unavailable: list[str] = []
    plans = [require_fresh_inventory(plan, root) for plan in plans]
    for plan in plans:
        outcome = _lock_one(args, m, plan, root)
        if outcome == "stale-hashes" and not args.refresh:
            err().print(f"{plan.label}: the lock names hashes the index no longer lists (from a cached index page "
                        f"or the earlier lock's hash lines); locking again with --refresh")
            outcome = _lock_one(argparse.Namespace(**{**vars(args), "refresh": True}), m, plan, root)
        if outcome == "unavailable":
            unavailable.append(plan.label)
        elif outcome != "locked":
            failed.append(plan.label)
    if failed:
        err().print(f"[red]not locked (resolver failure): {', '.join(failed)}[/red]")
    if unavailable:
        err().print(f"[red]not locked (cannot be made here): {', '.join(unavailable)}[/red]")
    if unavailable:
        return EXIT_BAD_INPUT
    return EXIT_PROBLEM if failed else EXIT_OK


def _lock_one(args: argparse.Namespace, m, plan: Plan, root: Path) -> str:
    """Lock one plan and write its pylock: "locked", "unavailable", "failed", or "stale-hashes" (the resolver
    locked hashes the index no longer lists)."""
    from ..index import IndexClientError
    from ..lock import LockUnavailable, StaleLockHashes, lock_variant
    from ..lock.pylock import write_pylock
    try:
        res = lock_variant(plan, root, engine=args.resolver or default_engine(plan, root), upgrade=args.upgrade,
                           refresh=args.refresh, log=lambda msg: err().print(escape(msg)))
    except LockUnavailable as exc:
        err().print(f"[red]{plan.label}: cannot lock here:[/red] {escape(str(exc))}")
        return "unavailable"
    except LockError as exc:
        err().print(f"[red]{plan.label}: lock failed:[/red] {escape(str(exc))}")
        return "failed"
    for w in res.warnings:
        err().print(f"[yellow]{res.variant}: {escape(w)}[/yellow]")
    rel = res.dir.relative_to(root).as_posix()
    out().print(f"{plan.label}: locked {res.packages} packages with {res.engine} into {rel} "
                f"(resolve {res.compile_seconds:.1f}s, total {res.total_seconds:.1f}s)")
    for file, names in res.slices.items():
        out().print(f"  {file}: {len(names)} package(s)")
    try:  # the same lock in the standard format (PEP 751), beside the build outputs
        pylock = write_pylock(plan, root, index_client(args, m, plan).indexes)
        out().print(f"  {Workspace.of(m).relative(pylock)}: PEP 751")
    except StaleLockHashes as exc:  # made again with --refresh when this run did not refresh
        colour = "red" if args.refresh else "yellow"
        err().print(f"[{colour}]{plan.label}: pylock not written:[/{colour}] {escape(str(exc))}")
        return "stale-hashes"
    except (LockError, IndexClientError) as exc:
        err().print(f"[red]{plan.label}: pylock not written:[/red] {escape(str(exc))}")
        return "failed"
    return "locked"


def add_lock_parser(sub) -> None:
    lk = sub.add_parser(
        "lock", help="write hashed locks per variant",
        description=("Resolve each variant once (pip-compile, or uv for another target Python/platform), with the\n"
                     "shared, --no-deps and fallback pins as constraints, and write images/<image>/lock/<variant>/:\n"
                     "requirements.txt (whole lock, hashed), one NN-<set>.txt slice per wheel set, fallback files\n"
                     "and expect.json. --check compares the inputs digest with the manifest, without the network.\n"
                     "Exit 0 done/up to date, 1 stale (--check) or resolver failure, 2 a variant cannot be locked here."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_variant_args(lk)
    add_platform_arg(lk, every=True)
    lk.add_argument("--resolver", choices=sorted(ENGINES), default=None,
                    help="the resolver (default uv, or the one the committed lock was made with; with --check: "
                         "the one each lock was made with)")
    # its name until --resolver: `--engine` reads as Docker's, beside --engine-host
    lk.add_argument("--engine", choices=sorted(ENGINES), dest="resolver", action=DeprecatedAlias, new="--resolver",
                    help=argparse.SUPPRESS)
    lk.add_argument("--check", action="store_true", help="exit 1 naming the variants whose lock is stale (no network)")
    lk.add_argument("--upgrade", action="store_true", help="re-resolve from scratch instead of keeping earlier pins")
    lk.add_argument("--refresh", action="store_true",
                    help="re-read every index page; no cached page or metadata is trusted (a lock whose hashes the "
                         "index no longer lists is made again this way by itself)")
    lk.set_defaults(func=cmd_lock)
