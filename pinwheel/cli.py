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


def select_variant(m: Manifest, args: argparse.Namespace) -> str:
    """--variant NAME, or --cuda MAJOR (the variant whose CUDA major matches), or the first."""
    if getattr(args, "variant", None):
        m.variant(args.variant)
        return args.variant
    cuda = getattr(args, "cuda", None)
    if cuda:
        try:
            major = int(str(cuda).split(".")[0])
        except ValueError:
            raise UsageError(f"--cuda {cuda!r}: expected a CUDA major version like 13") from None
        hits = [v.name for v in m.variants.values() if v.cuda_major == major]
        if len(hits) != 1:
            known = ", ".join(f"{v.name} (CUDA {v.cuda})" for v in m.variants.values())
            raise UsageError(f"--cuda {cuda}: {'no' if not hits else 'more than one'} variant matches; variants: {known}")
        return hits[0]
    return next(iter(m.variants))


def add_variant_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variant", help="variant name from the manifest (e.g. cu130)")
    p.add_argument("--cuda", help="pick the variant by CUDA major version (e.g. 13)")


def index_client(args: argparse.Namespace, m: Manifest):
    from .index import IndexClient

    cache = m.path.parent / ".cache" / "index"
    return IndexClient(index_url=getattr(args, "index_url", None), cache_dir=cache, offline=getattr(args, "offline", False))


def cmd_report(args: argparse.Namespace) -> int:
    from .index import IndexClientError
    from .report import needed_by, print_report, to_json
    from .resolve import ResolveError, read_lock_slices, resolve

    m = manifest_mod.load(args.manifest)
    plan = plan_variant(m, select_variant(m, args))
    lock_dir = image_dir(m) / "lock" / plan.variant.name
    locked = None if args.no_lock else read_lock_slices(plan, lock_dir)
    try:
        resolved = resolve(plan, index_client(args, m), m.path.parent / "wheels", locked)
    except (ResolveError, IndexClientError) as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        data = to_json(resolved, needed_by(m))
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
    else:
        data = print_report(resolved, needed_by(m), out(), verbose=args.verbose)
    return EXIT_OK if data["summary"]["clean"] else EXIT_PROBLEM


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

    rp = sub.add_parser(
        "report", help="explain the resolved package set and its conflicts",
        description=("Evaluate a variant as it will be installed (from its lock when there is one, else one plain\n"
                     "pip install per wheel set) for the target Python and platform, and judge every requirement:\n"
                     "satisfied, violated, suppressed by --no-deps (with what pip would have done), unchecked,\n"
                     "extra-only or marker-excluded. Also: shared pins and who excludes them, and install-order\n"
                     "hazards (a later wheel set changing what an earlier one installed).\n"
                     "Exit 0 clean, 1 conflicts, 2 bad input."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_variant_args(rp)
    rp.add_argument("--json", action="store_true", help="print the report as JSON (schema pinwheel.report/1)")
    rp.add_argument("--offline", action="store_true", help="use cached index metadata only")
    rp.add_argument("--no-lock", action="store_true", help="ignore the lock: show what plain pip per wheel set does")
    rp.add_argument("--verbose", "-v", action="store_true", help="list transitive packages too")
    rp.add_argument("--index-url", help="index to read metadata from (default: pip's configuration)")
    rp.set_defaults(func=cmd_report)

    for name, helptext in (
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
