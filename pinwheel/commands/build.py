"""`build` and `base`: a variant's image on the engine (a base_variant's image first), and its base
image: a bootstrap base made when missing, and the inventory read from its layers."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .. import manifest as manifest_mod
from ..image.builder_features import COMPRESSIONS
from ..image.cache_spec import CacheSpec, cache_from_arg, cache_to_arg
from ..manifest import Manifest
from ..plan import Plan, plan_variant
from ..workspace import Workspace
from .common import (
    DEFAULT_REGISTRY, EXIT_OK, EXIT_PROBLEM, UsageError, add_platform_arg, add_variant_args, emit_json, engine_for,
    engine_or_fail, err, escape, out, plans_for, require_fresh_lock, select_plan, select_variant,
)
from .progress import BUILD_PROGRESS, build_log

if TYPE_CHECKING:
    from ..image.build import BuildCache


def ensure_variant_base(plan: Plan, ws: Workspace, engine, progress: bool = True) -> None:
    from ..image.base import BaseImageError, ensure_base, is_bootstrap, platform_base, suite_for_python
    base = platform_base(plan.variant.base, plan.platform_arch)  # a bootstrap base per architecture
    if engine.image_exists(base):
        return
    if not is_bootstrap(base):
        build_sibling_base(base, ws, engine, progress)
        return
    try:
        ensure_base(base, plan.variant.python, engine, suite=suite_for_python(plan.variant.python),
                    cache_dir=ws.base_cache, progress=progress, arch=plan.platform_arch)
    except BaseImageError as exc:
        raise UsageError(str(exc)) from None


def make_missing_base(plan: Plan, ws: Workspace, args: argparse.Namespace) -> None:
    """A base that pinwheel makes (a bootstrap base, or one another manifest here builds) is made before
    its inventory is judged: a new machine has none, and the committed inventory is checked against it."""
    from ..image.base import is_bootstrap, platform_base
    from ..image.sibling_base import sibling_base
    from ..resolve.base import reads_base
    if not reads_base(plan) or not plan.variant.base:
        return
    engine = engine_for(args)
    if engine.unavailable_reason() is not None or engine.image_exists(platform_base(plan.variant.base,
                                                                                    plan.platform_arch)):
        return
    if is_bootstrap(plan.variant.base) or sibling_base(ws, plan.variant.base) is not None:
        ensure_variant_base(plan, ws, engine, progress=not args.quiet)


def build_sibling_base(base: str, ws: Workspace, engine, progress: bool) -> None:
    """Build ``base`` from the manifest of this repository whose variant tags it (a stand-in base), or say
    that it must be pulled."""
    from ..image.sibling_base import sibling_base
    sibling = sibling_base(ws, base)
    if sibling is None:
        raise UsageError(f"base image {base} is not in the engine; pull it first (`docker pull {base}`)")
    where = sibling.manifest.relative_to(ws.repository_root).as_posix()
    err().print(f"base image {escape(base)} is not in the engine: building it from {escape(where)} "
                f"(variant {sibling.variant})")
    m = manifest_mod.load(sibling.manifest)
    plan = plan_variant(m, sibling.variant)
    ensure_variant_base(plan, Workspace.of(m), engine, progress)  # its own base first, then its inventory
    require_fresh_lock(plan, m.path.parent)
    built = build_variant(m, plan, engine, "image", "auto" if progress else "quiet")
    if built is None or not engine.image_exists(base):
        raise UsageError(f"base image {base}: the build of {where} did not make it")


def build_variant(m: Manifest, plan: Plan, engine, target: str, progress: str, cache: BuildCache | None = None,
                  fresh_checks: bool = False, export=None):
    """The built image, or None when the build failed (its log tail already printed). A variant built on
    another variant's image (base_variant) builds that one first, for the same platform, and starts FROM it.
    ``progress``: --progress auto|plain|quiet; ``cache``: the layer cache refs of this variant's build
    (--cache-from/--cache-to); ``fresh_checks``: the invariant reuses no earlier passing result (--fresh-checks);
    ``export``: the image exporter's compression and rewrite-timestamp (this variant's image only)."""
    from ..image.build import BuildError, base_variant_plan, build_image, from_base_variant
    from ..image.engine import BuildFailed
    base_image = None
    base_plan = base_variant_plan(m, plan)
    if base_plan is not None:
        base = build_variant(m, base_plan, engine, "image", progress, fresh_checks=fresh_checks)
        if base is None:
            return None
        base_image = from_base_variant(base.tags)
    else:
        ensure_variant_base(plan, Workspace.of(m), engine, progress=progress != "quiet")
    try:
        with build_log(progress) as (stream, on_log):
            return build_image(plans_for(m, None), plan, m.path.parent, engine, target=target, progress=stream,
                               base_image=base_image, cache=cache, fresh_checks=fresh_checks, on_log=on_log,
                               export=export)
    except BuildError as exc:
        raise UsageError(str(exc)) from None
    except BuildFailed as exc:
        err().print(f"[red]build failed:[/red] {escape(str(exc))}")
        return None


def cmd_build(args: argparse.Namespace) -> int:
    from ..image.build import BuildError, BuildInputs, check_local_wheels, engine_layering, refuse_todos
    from ..image.builder_features import image_export
    m = manifest_mod.load(args.manifest)
    plan = select_plan(m, args)
    try:
        refuse_todos(plan)
    except BuildError as exc:
        raise UsageError(str(exc)) from None
    make_missing_base(plan, Workspace.of(m), args)
    require_fresh_lock(plan, m.path.parent)
    try:  # on the host, before the engine is touched: a missing required wheel is input to fix
        for warning in check_local_wheels(plan, BuildInputs.for_plan(plan, m.path.parent)):
            err().print(f"[yellow]warning:[/yellow] {escape(warning)}")
    except BuildError as exc:
        raise UsageError(str(exc)) from None
    engine = engine_or_fail(args)
    cache = build_cache(args, plan, engine)
    export, notes = image_export(engine, args.compression)
    for note in [engine_layering(plan, engine).note, *notes]:
        if note:
            err().print(f"note: {escape(note)}")
    built = build_variant(m, plan, engine, args.target, "quiet" if args.quiet else args.progress, cache,
                          fresh_checks=args.fresh_checks, export=export)
    if built is None:
        return EXIT_PROBLEM
    for written in built.cache_exports:
        err().print(f"cache: {written.kind} cache of {escape(engine.describe())} written to {escape(written.ref)}"
                    + (f" (the image, {written.digest})" if written.digest else ""))
    if args.json:
        emit_json({"image_id": built.image_id, "tags": list(built.tags), "labels": built.labels})
    else:
        out().print(f"[green]built[/green] {built.image_id[:19]}")
        for t in built.tags:
            out().print(f"  {escape(t)}")
    return EXIT_OK


def build_cache(args: argparse.Namespace, plan: Plan, engine) -> BuildCache:
    """The layer cache of ``build``: as --cache-from/--cache-to ask (bare: the variant's cache ref); given
    neither, the variant's registry cache read and written where the builder exports one and the registry
    answers (--no-cache-export: none), with a one-line note where it does not answer."""
    from ..image.build import BuildCache, cache_ref
    from ..image.builder_features import default_cache_ref
    to, ref = args.cache_to, cache_ref(plan, args.registry)
    if to is None and not args.cache_from and not args.no_cache_export:
        found, note = default_cache_ref(engine, ref, args.registry)
        if note:
            err().print(f"note: {escape(note)}")
        return BuildCache((found,), found) if found else BuildCache()
    return BuildCache(tuple(spec.ref or ref for spec in args.cache_from),
                      None if to is None or args.no_cache_export else to.ref or ref,
                      to_mode=to.mode if to is not None else "max")


def cmd_base(args: argparse.Namespace) -> int:
    m = manifest_mod.load(args.manifest)
    ws = Workspace.of(m)
    plan = plan_variant(m, select_variant(m, args))
    if args.action == "inventory":
        return base_inventory(plan, ws, args)
    ensure_variant_base(plan, ws, engine_or_fail(args))
    out().print(f"base image {plan.variant.base} is ready")
    return EXIT_OK


def base_inventory(plan: Plan, ws: Workspace, args: argparse.Namespace) -> int:
    """Read the base image's distributions from its layers into images/<image>/inventory/<variant>.json."""
    from ..distributions import InventoryError
    from ..image.inventory import check_inventory, read_image, write_inventory
    path = ws.inventory_file(plan.variant.name)
    if args.check:
        engine = engine_for(args)
        try:
            status, detail = check_inventory(path, plan.variant.base,
                                             None if engine.unavailable_reason() else engine, ws.inventory_checks)
        except InventoryError as exc:
            status, detail = "stale", str(exc)
        if status == "ok":
            out().print(f"{plan.variant.name}: inventory up to date ({escape(detail)})")
            return EXIT_OK
        err().print(f"[red]{plan.variant.name}: inventory {status}: {escape(detail)}; run "
                    f"`build.py base inventory --variant {plan.variant.name}`[/red]")
        return EXIT_PROBLEM
    engine = engine_or_fail(args)
    ensure_variant_base(plan, ws, engine)
    try:
        inv = read_image(engine, plan.variant.base)
    except InventoryError as exc:
        raise UsageError(str(exc)) from None
    write_inventory(inv, path)
    for site in inv.sites:
        count = sum(1 for d in inv.distributions if d.site == site)
        out().print(f"  {escape(site)}: {count} distributions")
    for note in inv.notes:
        err().print(f"[yellow]{escape(note)}[/yellow]")
    out().print(f"wrote {ws.relative(path)} ({len(inv.distributions)} distributions from {inv.layers} layers of "
                f"{escape(plan.variant.base)}, {inv.image_id[:19]})")
    return EXIT_OK


def add_build_parsers(sub) -> None:
    b = sub.add_parser("build", help="build an image variant on the BuildKit engine",
                       description="Build a variant from the rendered Dockerfile and its lock. Creates a local bootstrap "
                                   "base when the manifest names one that is missing. Tags: the dated tag from the "
                                   "manifest, and the content tag <variant>-<hash of every input: manifest, lock, "
                                   "base digest, local wheels, assets, git sources, patches>, which publish never "
                                   "moves to other bytes. Exit 0 built, 1 the build failed, 2 bad input.")
    add_variant_args(b)
    add_platform_arg(b)
    b.add_argument("--target", default="image", help="Dockerfile target (image or smoke)")
    b.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                   help="do not stream the build log (--progress quiet)")
    b.add_argument("--json", action="store_true", help="print image id, tags and labels as JSON")
    b.add_argument("--progress", choices=BUILD_PROGRESS, default="auto",
                   help="the build log: plain (every line, as in a CI log), quiet (none), auto (default: the "
                        "current step on one line on a terminal, plain elsewhere)")
    b.add_argument("--cache-from", action="append", nargs="?", type=cache_from_arg, const=CacheSpec(), default=[],
                   metavar="REF|type=registry,ref=REF",
                   help="read the layer cache from REF (a registry cache or an image with inline cache), bare or as "
                        "buildx writes it; with no value: the variant's cache ref in --registry "
                        "(REGISTRY/REPOSITORY:cache-VARIANT). Repeatable")
    b.add_argument("--cache-to", nargs="?", type=cache_to_arg, const=CacheSpec(), default=None,
                   metavar="REF|type=registry,ref=REF[,mode=min|max]",
                   help="write the layer cache to REF: a registry cache (mode=max unless mode=min) where the builder "
                        "can, else the inline cache with the image pushed to REF; with no value: the variant's "
                        "cache ref")
    b.add_argument("--no-cache-export", action="store_true",
                   help="write no layer cache (by default, on a builder that exports a registry cache, the "
                        "variant's cache ref is read and written when no --cache-from/--cache-to is given)")
    b.add_argument("--compression", choices=COMPRESSIONS, default=None,
                   help="how the image's layers are compressed (default: zstd where the builder keeps them, "
                        "the containerd image store or another driver; gzip on Docker 20.10's engine)")
    b.add_argument("--registry", default=DEFAULT_REGISTRY,
                   help=f"the publish registry, home of the default cache refs (default: {DEFAULT_REGISTRY})")
    b.add_argument("--fresh-checks", action="store_true",
                   help="the invariant runs pip check and the import check again, reusing no earlier passing "
                        "result (by default one is reused while every input it read is unchanged)")
    b.set_defaults(func=cmd_build, uses_engine=True)

    ba = sub.add_parser("base", help="the variant's base image: create a bootstrap base, or read its inventory",
                        description="`base` (or `base ready`) creates the local bootstrap base when the manifest names "
                                    "one that is missing. `base inventory` reads the base image's Python "
                                    "distributions from its layers (without running it) into "
                                    "images/<image>/inventory/<variant>.json; --check compares it with the base "
                                    "(its pinned digest, else the engine's image id), without the network. "
                                    "Exit 0 ready or up to date, 1 stale (--check), 2 bad input.")
    ba.add_argument("action", nargs="?", choices=["ready", "inventory"], default="ready")
    ba.add_argument("--check", action="store_true", help="with inventory: exit 1 when the committed one is stale")
    add_variant_args(ba)
    ba.set_defaults(func=cmd_base, uses_engine=True)
