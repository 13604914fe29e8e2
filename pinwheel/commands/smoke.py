"""`smoke`: the smoke payload run in a built image (the variant's, built first, by default), its result
recorded per image id for `publish`."""
from __future__ import annotations

import argparse
import sys

from .. import manifest as manifest_mod
from ..workspace import Workspace
from .build import build_variant
from .common import (
    EXIT_OK, EXIT_PROBLEM, UsageError, add_platform_arg, add_variant_args, engine_or_fail, escape, out,
    require_fresh_lock, select_plan, select_variant,
)


def cmd_smoke(args: argparse.Namespace) -> int:
    from ..image.smoke import record, run_smoke
    m = manifest_mod.load(args.manifest)
    engine = engine_or_fail(args)
    image = args.image or args.image_opt
    if not image:
        plan = select_plan(m, args)
        require_fresh_lock(plan, m.path.parent)
        built = build_variant(m, plan, engine, "image", "quiet" if args.quiet else "auto")
        if built is None:
            return EXIT_PROBLEM
        image = built.tags[0]
    elif not engine.image_exists(image):
        raise UsageError(f"image {image} is not in the engine")
    gpus = {"auto": None, "yes": True, "no": False}[args.gpus]
    variant = m.variant(select_variant(m, args))
    python = variant.base_python if variant.environment == "base" else "python"
    result = run_smoke(engine, image, gpus=gpus, level=args.level, python=python)
    path = record(result, Workspace.of(m).smoke_results)
    sys.stdout.write(result.output)
    for level, status in result.levels.items():
        colour = {"passed": "green", "failed": "red"}.get(status, "yellow")
        out().print(f"  {level}: [{colour}]{status.upper()}[/{colour}]")
    skipped = [level for level, status in result.levels.items() if status == "skipped"]
    verdict = "[red]FAILED[/red]" if not result.ok else (
        f"[yellow]passed up to the levels that ran; {', '.join(skipped)} SKIPPED (not passed)[/yellow]" if skipped
        else "[green]passed[/green]")
    out().print(f"smoke {verdict} for {escape(image)} ({result.image_id[:19]}); "
                f"recorded in {Workspace.of(m).relative(path)}")
    return EXIT_OK if result.ok else EXIT_PROBLEM


def add_smoke_parser(sub) -> None:
    sm = sub.add_parser("smoke", help="run the smoke checks in a built image",
                        description="Run the smoke payload in the image: static (pins, --no-deps drops, pip check) "
                                    "everywhere; the manifest's driver and GPU checks (the shipped image's: the DSA forward) "
                                    "where a GPU is present, else SKIPPED. "
                                    "The result is recorded per image id for `publish`. "
                                    "Exit 0 passed (a skipped level says SKIPPED), 1 failed, 2 bad input.")
    add_variant_args(sm)
    add_platform_arg(sm)
    sm.add_argument("image", nargs="?", help="image reference (default: build the variant, then smoke it)")
    sm.add_argument("--image", dest="image_opt", help=argparse.SUPPRESS)
    sm.add_argument("--level", default="gpu", choices=["static", "import", "gpu"])
    sm.add_argument("--gpus", default="auto", choices=["auto", "yes", "no"], help="pass the GPUs in (auto: when nvidia-smi exists)")
    sm.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                    help="do not stream the log of the build it runs first")
    sm.set_defaults(func=cmd_smoke, uses_engine=True)
