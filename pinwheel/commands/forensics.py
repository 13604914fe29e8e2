"""Commands for images and Dockerfiles pinwheel did not write: inspect, diff, audit, import."""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from typing import TYPE_CHECKING

from .. import manifest as manifest_mod
from ..distributions import InventoryError
from ..index import IndexClient, IndexClientError, metadata_source
from ..lock import locked_versions
from ..manifest import Manifest
from ..plan import plan_variant
from ..resolve import ResolveError, resolve
from ..workspace import LockFiles, Workspace, inside_project

from .common import EXIT_OK, EXIT_PROBLEM, UsageError, engine_or_fail, err, escape, out

if TYPE_CHECKING:
    from ..image.engine import Engine

# Each command imports its report and the engine's image reader inside its function (as cli.py does).


def image_in_engine(engine: "Engine", ref: str) -> bool:
    """Whether ``ref`` names an image in the engine; a reference the engine cannot parse (`../x`) is bad input
    (UsageError naming it), not the engine's exception."""
    try:
        return engine.image_exists(ref)
    except engine._errors() as exc:
        said = (getattr(exc, "stderr", None) or str(exc)).strip().splitlines()
        raise UsageError(f"{ref}: not an image reference the engine takes ({said[-1] if said else exc})") from None


def cmd_inspect(args: argparse.Namespace) -> int:
    from ..image.inventory import save_and
    from ..reports.inspect import inspect_archive, print_inspection, to_json as inspection_json
    engine = engine_or_fail(args)
    if not image_in_engine(engine, args.image):
        raise UsageError(f"image {args.image} is not in the engine")
    try:
        ins = save_and(engine, args.image, None,
                       lambda archive: inspect_archive(archive, args.image, engine.image_id(args.image)))
    except InventoryError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        sys.stdout.write(json.dumps(inspection_json(ins), indent=2) + "\n")
    else:
        print_inspection(ins, out(), verbose=args.verbose)
    return EXIT_OK


def diff_side(engine: Engine | None, ref: str, m: Manifest | None):
    """An image in the engine, or a lock directory (images/<image>/lock/<variant>) of the manifest."""
    from ..image.inventory import history, save_and
    from ..reports.inspect import Side, side_of_image
    path = Path(ref)
    if path.is_dir() and (path / LockFiles.REQUIREMENTS).exists():
        if m is None:
            raise UsageError(f"{ref} is a lock directory: diffing a lock needs the manifest it was made from")
        inside_project(m.path.parent, path.absolute(), "lock directory")  # OutsideProject: exit 2
        plan = plan_variant(m, path.name) if path.name in m.variants else None
        if plan is None:
            raise UsageError(f"{ref}: {path.name} is not a variant of {m.path.name}")
        versions = locked_versions(plan, path)
        return Side(f"lock {ref}", dict(versions), {}, {})
    if engine is None:
        engine = engine_or_fail()
    if not image_in_engine(engine, ref):
        raise UsageError(f"{ref} is neither an image in the engine nor a lock directory")
    return side_of_image(ref, save_and(engine, ref, None, history).final)


def cmd_diff(args: argparse.Namespace) -> int:
    from ..reports.inspect import diff, print_diff
    m = manifest_mod.load(args.manifest) if Path(args.manifest).exists() else None
    engine = None if all(Path(r).is_dir() for r in (args.a, args.b)) else engine_or_fail(args)
    try:
        data = diff(diff_side(engine, args.a, m), diff_side(engine, args.b, m))
    except InventoryError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        print_diff(data, out())
    return EXIT_OK


def cmd_audit(args: argparse.Namespace) -> int:
    from ..reports.audit import audit, print_audit, print_replay
    if not args.dockerfile.is_file():
        raise UsageError(f"{args.dockerfile}: not a file")
    try:
        result = audit(args.dockerfile)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    replay = replay_audit(args) if args.replay else None
    if args.json:
        sys.stdout.write(json.dumps({**result.to_json(), "replay": replay}, indent=2) + "\n")
    else:
        print_audit(result, out())
        if replay is not None:
            print_replay(replay, out())
    return EXIT_PROBLEM if result.errors or (replay and replay["hazards"]) else EXIT_OK


def replay_audit(args: argparse.Namespace) -> dict:
    """The file's pinned pip installs, in order, as plain pip would run them: hazards and suppressed edges."""
    from ..adopt import adopt, to_yaml as adopted_yaml
    adopted = adopt(args.dockerfile)
    m = manifest_mod.parse(adopted_yaml(adopted, args.dockerfile), args.dockerfile.with_name("(imported).yaml"))
    plan = plan_variant(m, "main")
    client = IndexClient(index_url=args.index_url, cache_dir=Workspace(Path.cwd(), "audit").index_cache,
                         offline=args.offline)
    try:
        resolved = resolve(plan, metadata_source(plan, client))
    except (ResolveError, IndexClientError) as exc:
        return {"error": str(exc), "hazards": [], "suppressed": [], "clashes": []}
    return {"hazards": [dataclasses.asdict(h) for h in resolved.hazards],
            "suppressed": [dataclasses.asdict(e) for e in resolved.edges if e.verdict == "suppressed"],
            "clashes": [dataclasses.asdict(c) for c in resolved.clashes],
            "unchecked": sum(1 for e in resolved.edges if e.verdict == "unchecked") + len(resolved.unjudged),
            "not_expressed": adopted.not_expressed}


def cmd_import(args: argparse.Namespace) -> int:
    from ..adopt import adopt, to_yaml as adopted_yaml
    if not args.dockerfile.is_file():
        raise UsageError(f"{args.dockerfile}: not a file")
    if args.output.exists() and not args.force:
        raise UsageError(f"{args.output} exists; pass --force to replace it")
    try:
        adopted = adopt(args.dockerfile)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    args.output.write_text(adopted_yaml(adopted, args.dockerfile))
    sets = adopted.manifest["wheel_sets"]
    out().print(f"wrote {args.output}: {len(sets)} wheel sets, "
                f"{sum(len(s['packages']) for s in sets)} packages; fill in the TODOs")
    for line in adopted.not_expressed:
        err().print(f"  not expressed: {escape(line)}")
    return EXIT_OK




def cmd_layers(args: argparse.Namespace) -> int:
    """Two builds of the same inputs, layer by layer, on one engine or two."""
    from ..reports.layers import compare_layers, format_comparison
    engine_a = engine_or_fail(args)
    engine_b = engine_a if not (args.b_engine_host or args.b_engine_context) else engine_or_fail(
        argparse.Namespace(engine_host=args.b_engine_host, engine_context=args.b_engine_context))
    for engine, ref in ((engine_a, args.a), (engine_b, args.b)):
        if not engine.image_exists(ref):
            raise UsageError(f"{ref} is not an image in {engine.describe()}")
    cmp = compare_layers(engine_a, args.a, engine_b, args.b)
    if args.json:
        sys.stdout.write(json.dumps(cmp.to_json(), indent=2) + "\n")
    else:
        for line in format_comparison(cmp):
            out().print(escape(line))
    return EXIT_OK if cmp.same else EXIT_PROBLEM


def add_forensics_parsers(sub) -> None:
    ly = sub.add_parser("layers", help="are two builds the same bytes? layer digests compared, and what differs",
                        description="Compare image A (in the engine) with image B (in the same engine, or in the one "
                                    "--b-engine-host names) layer by layer: same diff id, or which entries differ "
                                    "and how (mtime only, content, metadata, on one side only). Exit 0 when every "
                                    "layer is the same, 1 otherwise. JSON schema pinwheel.layers/1.")
    ly.add_argument("a")
    ly.add_argument("b")
    ly.add_argument("--b-engine-host", metavar="URL", help="the engine that holds B (default: A's)")
    ly.add_argument("--b-engine-context", metavar="NAME", help="the docker context that holds B")
    ly.add_argument("--json", action="store_true")
    ly.set_defaults(func=cmd_layers)

    ins = sub.add_parser(
        "inspect", help="what any local image holds, layer by layer (without running it)",
        description=("Read an image's layers through the engine and list, per layer, the Python distributions it\n"
                     "adds, replaces (old → new) and removes; the bytes a later layer shadows (shipped twice);\n"
                     "libraries for another CUDA major; and every requirement judged on the installed set.\n"
                     "Works on images pinwheel did not build. JSON schema pinwheel.inspect/1."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ins.add_argument("image", help="image reference in the local engine")
    ins.add_argument("--json", action="store_true")
    ins.add_argument("--verbose", "-v", action="store_true", help="list every added distribution too")
    ins.set_defaults(func=cmd_inspect)

    df = sub.add_parser("diff", help="what changed between two images, two locks, or an image and a lock",
                        description="Packages added, removed and changed between A and B, with versions, sizes and "
                                    "the layer of B each change is in. A and B are images in the local engine or "
                                    "lock directories (images/<image>/lock/<variant>). JSON schema pinwheel.diff/1.")
    df.add_argument("a")
    df.add_argument("b")
    df.add_argument("--json", action="store_true")
    df.set_defaults(func=cmd_diff)

    au = sub.add_parser("audit", help="audit a hand-written Dockerfile: pip installs and the patterns that break images",
                        description="Read a Dockerfile with BuildKit's own parser; list every pip install per RUN "
                                    "with its flags; flag unguarded wheel globs, unpinned names and ranges, git "
                                    "URLs without a commit, --force-reinstall, loops over patches or checks without "
                                    "a failure path, `|| true` after a check, build args that can leave a commit "
                                    "empty, and secrets passed as build args. Exit 1 on any error-level finding. "
                                    "JSON schema pinwheel.audit/1.")
    au.add_argument("dockerfile", type=Path)
    au.add_argument("--json", action="store_true")
    au.add_argument("--replay", action="store_true",
                    help="replay its pinned pip installs with the resolver, in order (reads the index)")
    au.add_argument("--offline", action="store_true", help="with --replay: cached index metadata only")
    au.add_argument("--index-url", help="with --replay: index to read metadata from (default: pip's configuration)")
    au.set_defaults(func=cmd_audit)

    im = sub.add_parser("import", help="start a wheels_manifest.yaml from a hand-written Dockerfile",
                        description="One wheel set per pip RUN, local wheels with the policy their guard implies, "
                                    "--no-deps flags and gates from `if [ \"${ARG}\" = \"1\" ]` blocks. Every why "
                                    "is left as a TODO; what it cannot express is listed, not dropped.")
    im.add_argument("dockerfile", type=Path)
    im.add_argument("--output", "-o", type=Path, default=Path("wheels_manifest.yaml"))
    im.add_argument("--force", action="store_true", help="replace an existing output file")
    im.set_defaults(func=cmd_import)

