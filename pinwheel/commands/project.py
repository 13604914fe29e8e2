"""Starting a project and finding it: `init`, and the manifest looked for upward from the current
directory, as git and uv look for theirs."""
from __future__ import annotations

import argparse
from importlib import resources
from pathlib import Path

from ..workspace import MANIFEST_FILE, find_manifest
from .common import EXIT_OK, UsageError, escape, out, program

STARTER = ("templates", "init", MANIFEST_FILE)  # package data: the commented CUDA 13 manifest


def starter_manifest() -> str:
    """The commented starting manifest for a CUDA 13 image that `init` writes."""
    return resources.files("pinwheel").joinpath(*STARTER).read_text(encoding="utf-8")


def shown(directory: Path) -> str:
    """A directory as a shell user writes it: ~/... under the home directory."""
    try:
        inside = Path(directory).resolve().relative_to(Path.home().resolve()).as_posix()
    except (ValueError, RuntimeError):
        return str(directory)
    return "~" if inside == "." else f"~/{inside}"


def not_a_project(start: Path) -> UsageError:
    return UsageError(f"no {MANIFEST_FILE} in {shown(start)} or any directory above it: this is not a pinwheel "
                      f"project. Start one with `pinwheel init` (a commented CUDA 13 manifest), or "
                      f"`pinwheel init --from Dockerfile` to start from a hand-written Dockerfile; "
                      f"or name one with --manifest PATH")


def locate_manifest(args: argparse.Namespace, needed: bool) -> None:
    """Fill in args.manifest when --manifest was not given: the nearest manifest upward from the current
    directory. A command that needs one and finds none is refused (exit 2) with how to start a project."""
    if getattr(args, "manifest", None) is not None:
        return
    found = find_manifest(Path.cwd())
    if found is None and needed:
        raise not_a_project(Path.cwd())
    args.manifest = found or Path(MANIFEST_FILE)


def cmd_init(args: argparse.Namespace) -> int:
    """Write a starting manifest in the current directory (or --output): the commented CUDA 13 one, or
    one imported from a Dockerfile (--from). An existing file is never replaced without --force."""
    target: Path = args.output
    if target.exists() and not args.force:
        raise UsageError(f"{target} exists; pass --force to replace it")
    if args.from_dockerfile is not None:
        from .forensics import import_dockerfile
        return import_dockerfile(args.from_dockerfile, target, command=f"{program()} init --from")
    target.write_text(starter_manifest(), encoding="utf-8")
    out().print(f"wrote {escape(str(target))}: a CUDA 13 image (torch 2.13.0, flashinfer); next:")
    for command, what in (("report", "explain the package set and its conflicts"),
                          ("lock", "pin it, hashed, per variant"), ("render", "write images/train/Dockerfile")):
        out().print(f"  {program()} {command:<8} {what}")
    return EXIT_OK


def add_project_parsers(sub) -> None:
    ini = sub.add_parser("init", help=f"start a project: write a commented {MANIFEST_FILE}",
                         description=f"Write a commented starting {MANIFEST_FILE} for a CUDA 13 image (torch, "
                                     "flashinfer) in the current directory; it loads, reports and renders as "
                                     "written. --from DOCKERFILE starts it from a hand-written Dockerfile "
                                     "instead, as `import` does. Exit 0 written, 2 the file exists (--force "
                                     "replaces it) or the Dockerfile cannot be read.")
    ini.add_argument("--from", dest="from_dockerfile", type=Path, metavar="DOCKERFILE",
                     help="start from this Dockerfile (through `import`)")
    ini.add_argument("--output", "-o", type=Path, default=Path(MANIFEST_FILE),
                     help=f"where to write it (default: ./{MANIFEST_FILE})")
    ini.add_argument("--force", action="store_true", help="replace an existing file")
    ini.set_defaults(func=cmd_init, needs_manifest=False)
