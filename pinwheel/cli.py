"""The `pinwheel` command line (also `python build.py <command>`).

Exit codes: 0 clean, 1 the thing checked is wrong (conflicts, stale files,
failed build or smoke), 2 bad input (manifest, arguments).
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path
from typing import Callable, Sequence

from rich.console import Console
from rich.markup import escape

from . import manifest as manifest_mod
from .manifest import Manifest, ManifestError
from .plan import Plan, plan_variant

EXIT_OK, EXIT_PROBLEM, EXIT_BAD_INPUT = 0, 1, 2


class UsageError(Exception):
    """Bad arguments or environment the user must fix; exit 2."""


def out() -> Console:
    return Console(highlight=False, soft_wrap=True)


def err() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


# ------------------------------------------------------------------ paths


def image_dir(m: Manifest) -> Path:
    return m.path.parent / "images" / m.image.name


def plans_for(m: Manifest, variant: str | None) -> list[Plan]:
    names = [variant] if variant else list(m.variants)
    return [plan_variant(m, n) for n in names]


# --------------------------------------------------------------- commands


def cmd_render(args: argparse.Namespace) -> int:
    from .render import render_dockerfile

    m = manifest_mod.load(args.manifest)
    target = image_dir(m) / "Dockerfile"
    text = render_dockerfile(plans_for(m, None))
    if args.check:
        current = target.read_text() if target.exists() else ""
        if current == text:
            out().print(f"{target.relative_to(m.path.parent)} is up to date")
            return EXIT_OK
        diff = difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                    f"{target} (committed)", f"{target} (rendered)")
        sys.stdout.writelines(diff)
        err().print(f"[red]{target.relative_to(m.path.parent)} is out of date: run `make render`[/red]")
        return EXIT_PROBLEM
    if args.stdout:
        sys.stdout.write(text)
        return EXIT_OK
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    out().print(f"wrote {target.relative_to(m.path.parent)}")
    return EXIT_OK


def not_yet(name: str) -> Callable[[argparse.Namespace], int]:
    def run(_: argparse.Namespace) -> int:
        err().print(f"[red]`{name}` is not implemented yet[/red]")
        return EXIT_BAD_INPUT

    return run


# ------------------------------------------------------------------ parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
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
            "Exit codes: 0 clean, 1 problems found (conflicts, stale files, failed build/smoke), 2 bad input."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--manifest", type=Path, default=Path("wheels_manifest.yaml"),
                   help="the manifest (default: ./wheels_manifest.yaml)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    r = sub.add_parser("render", help="render the Dockerfile from the manifest",
                       description="Render images/<image>/Dockerfile. --check fails (exit 1) when the committed file differs.")
    r.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    r.add_argument("--stdout", action="store_true", help="print instead of writing")
    r.set_defaults(func=cmd_render)

    for name, helptext in (
        ("report", "explain the resolved package set and its conflicts"),
        ("lock", "write hashed locks per variant"),
        ("build", "build an image variant on the BuildKit engine"),
        ("smoke", "run the smoke checks against a built image"),
        ("publish", "push an image's tags after its smoke passed"),
        ("bump", "compare the Plan before and after bumping a package"),
        ("base", "create the local bootstrap base image"),
    ):
        s = sub.add_parser(name, help=helptext, description=helptext)
        s.add_argument("rest", nargs=argparse.REMAINDER)
        s.set_defaults(func=not_yet(name))
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ManifestError as exc:
        err().print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_BAD_INPUT
    except UsageError as exc:
        err().print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        err().print("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
