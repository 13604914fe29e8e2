"""`render`: the Dockerfiles from the manifest, written, printed, or compared with the committed ones."""
from __future__ import annotations

import argparse
import sys

from .. import manifest as manifest_mod
from ..workspace import Workspace
from .common import EXIT_OK, EXIT_PROBLEM, err, out, plans_for


def cmd_render(args: argparse.Namespace) -> int:
    """images/<image>/Dockerfile, and one Dockerfile.<variant> per other kind of environment (render.py)."""
    from ..render import render_dockerfiles
    m = manifest_mod.load(args.manifest)
    ws = Workspace.of(m)
    rendered = render_dockerfiles(plans_for(m, None))
    if args.check:
        stale = 0
        for name, text in rendered.items():
            target = ws.image_dir / name
            current = target.read_text() if target.exists() else ""
            if current == text:
                out().print(f"{ws.relative(target)} is up to date")
                continue
            import difflib

            diff = difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                        f"{target} (committed)", f"{target} (rendered)")
            sys.stdout.writelines(diff)
            err().print(f"[red]{ws.relative(target)} is out of date: run `make render`[/red]")
            stale += 1
        return EXIT_PROBLEM if stale else EXIT_OK
    if args.stdout:
        for name, text in rendered.items():
            if len(rendered) > 1:
                sys.stdout.write(f"# ==> {name} <==\n")
            sys.stdout.write(text)
        return EXIT_OK
    for name, text in rendered.items():
        target = ws.image_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        out().print(f"wrote {ws.relative(target)}")
    return EXIT_OK


def add_render_parser(sub) -> None:
    r = sub.add_parser("render", help="render the Dockerfile from the manifest",
                       description="Render images/<image>/Dockerfile. --check fails (exit 1) when the committed file differs. "
                                   "Exit 0 written or up to date, 1 stale (--check), 2 bad input.")
    r.add_argument("--check", action="store_true", help="compare with the committed file instead of writing")
    r.add_argument("--stdout", action="store_true", help="print instead of writing")
    r.set_defaults(func=cmd_render)
