"""The `pinwheel` command line (also `python build.py <command>`): the parser and the dispatch. Each
command, its parser and its output live in a room of commands/.

Exit codes: 0 clean, 1 the thing checked is wrong (conflicts, stale files,
failed build or smoke), 2 bad input (manifest, arguments), 3 could not judge
(the index or its cache could not answer; never reported as clean).
"""
from __future__ import annotations

import argparse
import codecs
import sys
from pathlib import Path
from typing import Sequence

from .commands.asset import add_asset_parser
from .commands.build import add_build_parsers
from .commands.bump import add_bump_parser
from .commands.common import EXIT_BAD_INPUT, UsageError, add_engine_args, err, escape, json_stdout
from .commands.conventions import Parser, add_common_options, add_help_parsers, apply_common_options, option_hint, \
    selected_parser
from .commands.forensics import add_forensics_parsers
from .commands.lock import add_lock_parser
from .commands.project import add_project_parsers, locate_manifest
from .commands.publish import add_publish_parser
from .commands.render import add_render_parser
from .commands.report import add_report_parser
from .commands.smoke import add_smoke_parser
from .lock import LockError
from .manifest import ManifestError

# Each command is a room of commands/; it imports what only it needs inside its function: rich, requests,
# jinja2, the engine adapter and the ELF reader cost tens of milliseconds each, and `--help` or
# `report --json` needs none of them.

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
    # the order of `pinwheel --help`'s command list
    add_render_parser(sub)
    add_report_parser(sub)
    add_build_parsers(sub)  # build, base
    add_smoke_parser(sub)
    add_publish_parser(sub)
    add_bump_parser(sub)
    add_forensics_parsers(sub)
    add_lock_parser(sub)
    add_asset_parser(sub)
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
