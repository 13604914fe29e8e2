"""The `pinwheel` command line (also `python build.py <command>`).

Exit codes: 0 clean, 1 the thing checked is wrong (conflicts, stale files,
failed build or smoke), 2 bad input (manifest, arguments), 3 could not judge
(the index or its cache could not answer; never reported as clean).
"""
from __future__ import annotations

import argparse
import codecs
import dataclasses
import platform as host_platform
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from . import manifest as manifest_mod
from .commands.common import (
    DEFAULT_REGISTRY, EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEM, EXIT_UNCHECKED, UsageError, add_deadline_arg,
    add_engine_args, add_platform_arg, add_variant_args, emit_json, engine_for, engine_or_fail, err, escape, index_client,
    json_stdout,
    inventory_engine, lock_state, out, plans_for, require_fresh_inventory, require_fresh_lock, select_plan, select_platform_plans, select_variant,
)
from .commands.forensics import add_forensics_parsers
from .commands.conventions import DeprecatedAlias, Parser, add_common_options, add_help_parsers, \
    apply_common_options, option_hint, selected_parser
from .commands.progress import BUILD_PROGRESS, build_log, index_status
from .commands.project import add_project_parsers, locate_manifest
from .commands.render import add_render_parser
from .commands.bump import add_bump_parser
from .commands.build import add_build_parsers, build_variant
from .commands.publish import add_publish_parser
from .commands.report import add_report_parser
from .commands.smoke import add_smoke_parser
from .image.cache_spec import CacheSpec, cache_from_arg, cache_to_arg
from .index.target import container_arch
from .lock import DEFAULT_ENGINE, ENGINES, LockError, check_lock, lock_installs
from .lock.format import ENGINE_HEADER, header_value
from .manifest import Manifest, ManifestError
from .plan import LockState, Plan, plan_platforms, plan_variant
from .resolve import CacheState, ResolveError, memoized, resolve_memoized, wheels_state, with_inventory
from .resolve.memo import torch_abi_memo_key
from .workspace import LockFiles, Workspace

if TYPE_CHECKING:
    from .image.build import BuildCache

# Each command imports what only it needs inside its function: rich, requests, jinja2, the engine adapter
# and the ELF reader cost tens of milliseconds each, and `--help` or `report --json` needs none of them.



# --------------------------------------------------------------- commands


def cmd_asset(args: argparse.Namespace) -> int:
    """`asset add URL`: download a release wheel into the asset cache and print its manifest entry."""
    from .index.transfer import LimitError, check_bounds
    from .steps.asset import AssetError, add as add_asset
    try:
        check_bounds()
        entry = add_asset(args.url, Workspace(Path(args.manifest).parent, "").asset_cache)
    except (AssetError, LimitError) as exc:
        raise UsageError(str(exc)) from None
    sys.stdout.write(entry)
    return EXIT_OK


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
    from .index import IndexClientError
    from .lock import LockUnavailable, lock_variant
    from .lock.pylock import write_pylock
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
        try:
            res = lock_variant(plan, root, engine=args.resolver or default_engine(plan, root), upgrade=args.upgrade,
                               log=lambda msg: err().print(escape(msg)))
        except LockUnavailable as exc:
            unavailable.append(plan.label)
            err().print(f"[red]{plan.label}: cannot lock here:[/red] {escape(str(exc))}")
            continue
        except LockError as exc:
            failed.append(plan.label)
            err().print(f"[red]{plan.label}: lock failed:[/red] {escape(str(exc))}")
            continue
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
        except (LockError, IndexClientError) as exc:
            failed.append(plan.label)
            err().print(f"[red]{plan.label}: pylock not written:[/red] {escape(str(exc))}")
    if failed:
        err().print(f"[red]not locked (resolver failure): {', '.join(failed)}[/red]")
    if unavailable:
        err().print(f"[red]not locked (cannot be made here): {', '.join(unavailable)}[/red]")
    if unavailable:
        return EXIT_BAD_INPUT
    return EXIT_PROBLEM if failed else EXIT_OK


# ------------------------------------------------------------------ parser

MANIFEST_HELP = "the manifest (default: wheels_manifest.yaml here or in the nearest directory above)"


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="pinwheel",
        description=(
            "Build CUDA training images from wheels_manifest.yaml.\n\n"
            "Pipeline: manifest -> resolve (Plan) -> render (Dockerfile) -> build -> smoke -> publish.\n"
            "Typical use:\n"
            "  pinwheel report                     explain the package set, flag conflicts\n"
            "  pinwheel lock                       write hashed locks per variant\n"
            "  pinwheel render                     write images/<image>/Dockerfile\n"
            "  pinwheel build --variant cu130      build the image on the local BuildKit engine\n"
            "  pinwheel smoke --variant cu130      run the smoke (static everywhere, GPU where present)\n"
            "  pinwheel publish --variant cu130    push the tags, only if the smoke passed\n"
            "  pinwheel bump torch==2.14.1         what breaks before anyone bumps torch\n\n"
            "Exit codes: 0 clean, 1 problems found (conflicts, stale files, failed build/smoke), 2 bad input,\n"
            "3 could not judge (index unreachable or not cached; never reported as clean)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        # Parser allows no abbreviations, here and in every command: argparse matches every argument against
        # the top level's options first, so `lock --engine uv` would be an ambiguous --engine-host/--engine-context
    )
    p.add_argument("--manifest", type=Path, default=None, help=MANIFEST_HELP)
    add_engine_args(p)
    add_common_options(p)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_project_parsers(sub)
    add_help_parsers(sub, p)

    add_render_parser(sub)

    add_report_parser(sub)

    add_build_parsers(sub)

    add_smoke_parser(sub)

    add_publish_parser(sub)

    add_bump_parser(sub)
    add_forensics_parsers(sub)

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
    lk.set_defaults(func=cmd_lock)

    asset = sub.add_parser("asset", help="release assets: `asset add URL` prints a manifest entry, sha256 filled in")
    asset_sub = asset.add_subparsers(dest="asset_command", required=True)
    asset_add = asset_sub.add_parser("add", help="download URL (a wheel) into the asset cache and print its entry")
    asset_add.add_argument("url", help="the wheel's URL (https:// or http://)")
    asset_add.set_defaults(func=cmd_asset, needs_manifest=False)
    return p


def _global_options_after_subcommand(parser: argparse.ArgumentParser) -> None:
    """`pinwheel report --manifest X` works as `pinwheel --manifest X report` does; so do --version, -q/-v and
    --color on every command, and the engine options on the commands that use an engine."""
    for action in parser._subparsers._group_actions:  # argparse has no public accessor for subparsers
        for sub in set(action.choices.values()):
            sub.add_argument("--manifest", type=Path, default=argparse.SUPPRESS, help=MANIFEST_HELP)
            if sub.get_default("uses_engine"):
                add_engine_args(sub, default=argparse.SUPPRESS)
            add_common_options(sub, default=argparse.SUPPRESS)
            if sub._subparsers is not None:
                for nested in sub._subparsers._group_actions:
                    for leaf in set(nested.choices.values()):
                        add_common_options(leaf, default=argparse.SUPPRESS)


def _printable_everywhere() -> None:
    """Output never crashes on a narrow encoding (PYTHONIOENCODING=ascii): → becomes ->."""
    def replace(exc: UnicodeError):
        bad = exc.object[exc.start:exc.end]
        return ("".join("->" if ch == "→" else "?" for ch in bad), exc.end)

    try:
        codecs.lookup_error("pinwheel-replace")
    except LookupError:
        codecs.register_error("pinwheel-replace", replace)
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="pinwheel-replace")


def main(argv: Sequence[str] | None = None) -> int:
    _printable_everywhere()
    parser = build_parser()
    _global_options_after_subcommand(parser)
    argv = list(sys.argv[1:] if argv is None else argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the command's own parser, with the nearest of its options
        selected_parser(parser, argv).error(f"unrecognized arguments: {' '.join(unknown)}"
                                            + option_hint(selected_parser(parser, argv), unknown))
    apply_common_options(args)
    try:
        locate_manifest(args, needed=getattr(args, "needs_manifest", True))
        with json_stdout(bool(getattr(args, "json", False))):
            return args.func(args)
    except ManifestError as exc:
        err().print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_BAD_INPUT
    except UsageError as exc:
        err().print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_BAD_INPUT
    except ValueError as exc:  # a value no Dockerfile can hold, a file pinwheel reads back that is not one
        from .fsutil import UnreadableFile
        from .render import RenderError
        from .workspace import OutsideProject
        if not isinstance(exc, (RenderError, UnreadableFile, OutsideProject)):
            raise
        err().print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_BAD_INPUT
    except LockError as exc:  # a committed lock that does not read back is input to fix
        err().print(f"[red]error:[/red] {escape(str(exc))}; run `make lock`")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        err().print("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
