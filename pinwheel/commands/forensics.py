"""Commands for images and Dockerfiles pinwheel did not write: inspect, diff, audit, import."""
from __future__ import annotations

import argparse
from pathlib import Path

from typing import TYPE_CHECKING

from .. import manifest as manifest_mod
from ..distributions import InventoryError
from ..index import IndexClient
from ..lock import locked_versions, read_lock
from ..manifest import Manifest
from ..plan import plan_variant
from ..workspace import LockFiles, Workspace, inside_project

from .common import EXIT_OK, EXIT_PROBLEM, UsageError, emit_json, engine_or_fail, err, escape, out, program

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
        emit_json(inspection_json(ins))
    else:
        print_inspection(ins, out(), verbose=args.verbose)
    return EXIT_OK


def diff_side(engine: Engine | None, ref: str, m: Manifest | None):
    """An image in the engine, a lock directory (images/<image>/lock/<variant>) of the manifest, or the record
    of a hand-written Dockerfile's replay (`audit --replay --json`)."""
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
        # on a base's environment the image also holds the base's packages that no slice moves
        kept = read_lock(path).expect.get("base_unchanged", {})
        return Side(f"lock {ref}", {**kept, **versions}, {}, {})
    if path.suffix == ".json":  # a record is named so; any other name is an image reference
        return replay_side(path)
    if engine is None:
        engine = engine_or_fail()
    if not image_in_engine(engine, ref):
        raise UsageError(f"{ref} is neither an image in the engine, a lock directory nor an audit --replay record")
    return side_of_image(ref, save_and(engine, ref, None, history).final)


REPLAY_RECORD_LIMIT = 64 << 20  # an audit record of the largest real files is well under a megabyte


def replay_side(path: Path):
    """The side a hand-written Dockerfile's replay gives: `audit --replay --json FILE > record.json`."""
    import json

    from ..fsutil import read_regular_text
    from ..reports.inspect import side_of_replay
    text = read_regular_text(path, REPLAY_RECORD_LIMIT, "replay record")  # UnreadableFile: exit 2
    try:
        side = side_of_replay(str(path), json.loads(text))
    except ValueError as exc:
        raise UsageError(f"{path}: not JSON ({exc})") from None
    if side is None:
        raise UsageError(f"{path}: not an `audit --replay --json` record with its installed set "
                         f"(schema pinwheel.audit/1, replay.installed)")
    return side


def cmd_diff(args: argparse.Namespace) -> int:
    from ..reports.inspect import diff, print_diff
    m = manifest_mod.load(args.manifest) if Path(args.manifest).exists() else None
    engine = None if all(Path(r).is_dir() or Path(r).suffix == ".json" for r in (args.a, args.b)) \
        else engine_or_fail(args)
    try:
        data = diff(diff_side(engine, args.a, m), diff_side(engine, args.b, m))
    except InventoryError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        emit_json(data)
    else:
        print_diff(data, out())
    return EXIT_OK


def cmd_audit(args: argparse.Namespace) -> int:
    from ..dockerfiles import DockerfileError
    from ..reports.audit import audit, print_audit, print_replay
    if not args.dockerfile.is_file():
        raise UsageError(f"{args.dockerfile}: not a file")
    try:
        result = audit(args.dockerfile, args.context)
    except DockerfileError as exc:
        raise UsageError(str(exc)) from None
    replay = replay_audit(args) if args.replay else None
    if args.json:
        emit_json({**result.to_json(), "replay": replay})
    else:
        print_audit(result, out())
        if replay is not None:
            print_replay(replay, out())
    return EXIT_PROBLEM if result.errors or (replay and (replay["hazards"] or replay["overrides"])) else EXIT_OK


def replay_audit(args: argparse.Namespace) -> dict:
    """The file's installs, in order, as plain pip would run them (pinwheel.reports.replay)."""
    from ..adopt import adopt
    from ..dockerfiles import DockerfileError
    from ..reports.replay import replay
    try:
        adopted = adopt(args.dockerfile, context=args.context)
    except DockerfileError as exc:
        raise UsageError(str(exc)) from None
    client = IndexClient(index_url=args.index_url, cache_dir=Workspace(Path.cwd(), "audit").index_cache,
                         offline=args.offline)
    return replay(adopted, client, args.dockerfile, _replay_base(args))


def _replay_base(args: argparse.Namespace):
    """--base: an inventory JSON file, or an image in the engine read without running it; None without it."""
    if not args.base:
        return None
    from ..image.inventory import load_inventory, read_image
    if Path(args.base).is_file():
        try:
            return load_inventory(Path(args.base))
        except InventoryError as exc:
            raise UsageError(str(exc)) from None
    engine = engine_or_fail(args)
    if not image_in_engine(engine, args.base):
        raise UsageError(f"--base {args.base}: neither an inventory file nor an image in the engine")
    try:
        return read_image(engine, args.base)
    except InventoryError as exc:
        raise UsageError(str(exc)) from None


def cmd_import(args: argparse.Namespace) -> int:
    if not args.dockerfile.is_file():
        raise UsageError(f"{args.dockerfile}: not a file")
    if args.output.exists() and not args.force:
        raise UsageError(f"{args.output} exists; pass --force to replace it")
    return import_dockerfile(args.dockerfile, args.output, f"{program()} import", args if args.pin else None,
                             context=args.context)


def import_dockerfile(dockerfile: Path, output: Path, command: str, pin: argparse.Namespace | None = None,
                      context: Path | None = None) -> int:
    """Write the manifest adopted from ``dockerfile`` to ``output``; ``command`` is how its header says it
    was started (`pinwheel import`, `pinwheel init --from`); ``pin``: import --pin's arguments; ``context``:
    the build context its COPYd requirements files are read from."""
    from ..adopt import adopt, to_yaml as adopted_yaml
    from ..dockerfiles import DockerfileError
    if not dockerfile.is_file():
        raise UsageError(f"{dockerfile}: not a file")
    try:
        adopted = adopt(dockerfile, output, context=context)
    except DockerfileError as exc:
        raise UsageError(str(exc)) from None
    if pin is not None:
        _pin(adopted, pin)
    output.write_text(adopted_yaml(adopted, dockerfile, command=command))
    steps = adopted.manifest["steps"]
    out().print(f"wrote {output}: {len(steps)} steps, {len(adopted.manifest.get('todo', []))} TODOs; "
                "fill in the TODOs")
    for line in adopted.listed:
        err().print(f"  not expressed: {escape(line)}")
    out().print(escape(adopted.accounting))
    return EXIT_OK


def _pin(adopted, args: argparse.Namespace) -> None:
    """import --pin: what the index, git and the asset URLs can answer now; the rest stays TODO."""
    from ..adopt.pin import pin
    workspace = Workspace(Path.cwd(), adopted.manifest["image"]["name"])
    client = IndexClient(index_url=args.index_url, cache_dir=workspace.index_cache, offline=False)
    result = pin(adopted, client.versions, workspace.asset_cache)
    for line in result.done:
        out().print(f"  pinned {escape(line)}")
    for line in result.left:
        err().print(f"  still TODO: {escape(line)}")


def cmd_layers(args: argparse.Namespace) -> int:
    """Two builds of the same inputs, layer by layer, on one engine or two."""
    from ..reports.layers import compare_layers, format_comparison
    engine_a = engine_or_fail(args)
    engine_b = engine_a if not (args.b_engine_host or args.b_engine_context) else engine_or_fail(
        argparse.Namespace(engine_host=args.b_engine_host, engine_context=args.b_engine_context))
    for engine, ref in ((engine_a, args.a), (engine_b, args.b)):
        if not image_in_engine(engine, ref):
            raise UsageError(f"{ref} is not an image in {engine.describe()}")
    cmp = compare_layers(engine_a, args.a, engine_b, args.b)
    if args.json:
        emit_json(cmp.to_json())
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
    ly.set_defaults(func=cmd_layers, needs_manifest=False, uses_engine=True)

    ins = sub.add_parser(
        "inspect", help="what any local image holds, layer by layer (without running it)",
        description=("Read an image's layers through the engine and list, per layer, the Python distributions it\n"
                     "adds, replaces (old → new) and removes; the bytes a later layer shadows (shipped twice);\n"
                     "libraries for another CUDA major; and every requirement judged on the installed set.\n"
                     "Works on images pinwheel did not build. JSON schema pinwheel.inspect/1."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ins.add_argument("image", help="image reference in the local engine")
    ins.add_argument("--json", action="store_true")
    ins.add_argument("--verbose", "-v", action="store_true", default=argparse.SUPPRESS,
                     help="list every added distribution too")
    ins.set_defaults(func=cmd_inspect, needs_manifest=False, uses_engine=True)

    df = sub.add_parser("diff", help="what changed between two images, two locks, or an image and a lock",
                        description="Packages added, removed and changed between A and B, with versions, sizes and "
                                    "the layer of B each change is in. A and B are images in the local engine, "
                                    "lock directories (images/<image>/lock/<variant>), or the record of a "
                                    "hand-written Dockerfile's replay, a .json file (`audit --replay --json FILE > "
                                    "record.json`: the environment its installs leave). JSON schema "
                                    "pinwheel.diff/1.")
    df.add_argument("a")
    df.add_argument("b")
    df.add_argument("--json", action="store_true")
    df.set_defaults(func=cmd_diff, needs_manifest=False, uses_engine=True)

    _add_adoption_parsers(sub)


def _add_adoption_parsers(sub) -> None:
    au = sub.add_parser("audit", help="audit a hand-written Dockerfile: pip installs and the patterns that break images",
                        description="Read a Dockerfile with BuildKit's own parser (heredocs included, within "
                                    "size and line bounds); list every pip install per RUN with its flags, read by "
                                    "pip's own option parser. Each finding has a line, a rule id, a severity and a "
                                    "fix: options pip refuses, unguarded wheel globs, unpinned names and ranges, git "
                                    "URLs, clones and checkouts at a branch, HEAD or an empty ARG, downloads without "
                                    "a checksum (curl, wget, ADD, curl | sh), --no-deps and --force-reinstall "
                                    "installs, `|| true` after a build, install or check, retry loops that end in "
                                    "success, loops without a failure path, -r files (read from --context), secrets "
                                    "passed as build args. Exit 1 on any error-level finding. JSON schema "
                                    "pinwheel.audit/1.")
    au.add_argument("dockerfile", type=Path)
    au.add_argument("--json", action="store_true")
    au.add_argument("--replay", action="store_true",
                    help="replay its installs with the resolver, in order, as plain pip would (reads the index): "
                         "moved pins and --no-deps installs outside a declared pin, each at its Dockerfile line")
    au.add_argument("--offline", action="store_true", help="with --replay: cached index metadata only")
    au.add_argument("--base", metavar="IMAGE|INVENTORY",
                    help="with --replay: judge against the base's packages, read from this image in the engine "
                         "(without running it) or from an inventory JSON (`build.py base inventory` writes one)")
    au.add_argument("--context", type=Path, help="the build context, where files the Dockerfile COPYs in (a "
                                                 "requirements file) are read (default: the Dockerfile's directory)")
    au.add_argument("--index-url", help="with --replay: index to read metadata from (default: pip's configuration)")
    au.set_defaults(func=cmd_audit, needs_manifest=False)

    im = sub.add_parser("import", help="start a wheels_manifest.yaml from a hand-written Dockerfile",
                        description="Every instruction becomes steps of today's kinds (apt with .debs, holds, "
                                    "removals and signed sources; wheels with local wheels, fallbacks and named "
                                    "indexes; git; asset; remove; env; run for builds, downloads and symlinks; "
                                    "uv-project; verify snippets) or is listed, with "
                                    "its line, as not expressed; the run ends with `N instructions: E expressed, "
                                    "L listed, 0 dropped`. ARG defaults are filled in; a value import cannot know "
                                    "is a placeholder that loads, with a todo: entry that keeps `report` unclean.")
    im.add_argument("dockerfile", type=Path)
    im.add_argument("--output", "-o", type=Path, default=Path("wheels_manifest.yaml"))
    im.add_argument("--context", type=Path, help="the build context, where a requirements file the Dockerfile "
                    "COPYs in is read (default: the Dockerfile's directory)")
    im.add_argument("--force", action="store_true", help="replace an existing output file")
    im.add_argument("--pin", action="store_true",
                    help="pin what the network can answer (uses it): unpinned and range requirements at the index's "
                         "newest allowed version today, git branches and tags at the commit `git ls-remote` names, "
                         "assets at the sha256 of their download; what cannot be reached stays TODO")
    im.add_argument("--index-url", help="with --pin: the index (default: pip's configuration)")
    im.set_defaults(func=cmd_import, needs_manifest=False)

