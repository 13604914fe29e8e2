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



def cmd_report(args: argparse.Namespace) -> int:
    """One report per platform: --platform's, else each one the variant lists (its own first); the exit
    code is the worst of them. --json of several platforms: the own platform's document, and each other
    platform's under "other_platforms"."""
    m = manifest_mod.load(args.manifest)
    plans = [select_plan(m, args)] if getattr(args, "platform", None) else plan_platforms(m, select_variant(m, args))
    docs, codes = [], []
    for i, plan in enumerate(plans):
        if len(plans) > 1 and not args.json:
            out().print(("\n" if i else "") + f"[bold]== {escape(plan.container_platform)} ==[/bold]")
        data, code = report_one(m, plan, args)
        docs.append(data)
        codes.append(code)
    if args.json and (len(plans) > 1 or docs[0]["summary"].get("verdict") != "could-not-judge"):
        doc = docs[0] if len(plans) == 1 else {**docs[0], "other_platforms": docs[1:]}
        emit_json(doc)
    if len(plans) > 1 and not args.json:
        verdicts = {EXIT_OK: "clean", EXIT_PROBLEM: "conflicts", EXIT_UNCHECKED: "could not judge"}
        out().print("\n" + "; ".join(f"{p.container_platform}: {verdicts[c]}" for p, c in zip(plans, codes)))
    return max(codes, key=[EXIT_OK, EXIT_UNCHECKED, EXIT_PROBLEM].index)


def report_one(m: Manifest, plan: Plan, args: argparse.Namespace) -> tuple[dict, int]:
    """One platform's report (printed, or returned for --json) and its exit code. Where the index could not
    answer: a stub that says so, so that the JSON of several platforms still names each one."""
    from .abi.cache import classifier_key
    from .index import IndexClientError
    from .reports.report import missing_on_platform, print_report, to_json, torch_abi
    root = m.path.parent
    ws = Workspace.of(m)
    plan = with_inventory(plan, root, inventory_engine(plan))  # a missing or stale one is said first, never clean
    state = LockState("ignored", "--no-lock") if args.no_lock else lock_state(plan, root)
    # A stale lock is never evaluated: the report shows what the manifest asks for now.
    locked = lock_installs(plan, ws.plan_lock_dir(plan), ws.wheels_dir) if state.status == "ok" else None
    plan = plan.with_resolution(lock_state=state)
    try:
        client = index_client(args, m, plan)
        cache_state = CacheState(ws.index_cache)  # one walk of the index cache for both memos
        default_client = getattr(client, "default", client)
        with index_status(plan.label, getattr(default_client, "stats", None), not (args.json or args.quiet)):
            resolved = resolve_memoized(plan, client, ws.index_cache, ws.wheels_dir, locked, refresh=args.refresh,
                                        state=cache_state)
        # keyed by the classifier too: a changed ELF classifier never shows old rows
        abi_key = torch_abi_memo_key(resolved, wheels_state(plan, ws.wheels_dir), client, default_client,
                                     args.offline, classifier_key())
        with index_status(f"{plan.label} ELF imports", getattr(default_client, "stats", None),
                          not (args.json or args.quiet)):
            abi = memoized(ws.index_cache, abi_key,
                           lambda: torch_abi(resolved, client, default_client, ws, args.offline),
                           keep=lambda rows: all(r["abi_class"] != "unknown" for r in rows), refresh=args.refresh,
                           state=cache_state)
        missing = missing_on_platform(resolved, client)
    except ResolveError as exc:
        raise UsageError(str(exc)) from None
    except IndexClientError as exc:
        err().print(f"[yellow]{escape(plan.label)}: could not judge:[/yellow] {escape(str(exc))}")
        return {"variant": plan.variant.name, "platform": plan.container_platform,
                "target": dataclasses.asdict(plan.target), "could_not_judge": str(exc),
                "summary": {"verdict": "could-not-judge", "clean": False}}, EXIT_UNCHECKED
    if args.json:
        data = to_json(resolved, abi, allow_unchecked=args.allow_unchecked, missing=missing)
    else:
        data = print_report(resolved, out(), verbose=args.verbose, abi=abi, allow_unchecked=args.allow_unchecked,
                            missing=missing)
    return data, {"clean": EXIT_OK, "conflicts": EXIT_PROBLEM, "unchecked": EXIT_UNCHECKED}[data["summary"]["verdict"]]


# --------------------------------------------------------------- commands


def cmd_render(args: argparse.Namespace) -> int:
    """images/<image>/Dockerfile, and one Dockerfile.<variant> per other kind of environment (render.py)."""
    from .render import render_dockerfiles
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


def ensure_variant_base(plan: Plan, ws: Workspace, engine, progress: bool = True) -> None:
    from .image.base import BaseImageError, ensure_base, is_bootstrap, platform_base, suite_for_python
    base = platform_base(plan.variant.base, plan.platform_arch)  # a bootstrap base per architecture
    if engine.image_exists(base):
        return
    if not is_bootstrap(base):
        raise UsageError(f"base image {base} is not in the engine; pull it first (`docker pull {base}`)")
    try:
        ensure_base(base, plan.variant.python, engine, suite=suite_for_python(plan.variant.python),
                    cache_dir=ws.base_cache, progress=progress, arch=plan.platform_arch)
    except BaseImageError as exc:
        raise UsageError(str(exc)) from None


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
    from .distributions import InventoryError
    from .image.inventory import check_inventory, read_image, write_inventory
    path = ws.inventory_file(plan.variant.name)
    if args.check:
        engine = engine_for(args)
        status, detail = check_inventory(path, plan.variant.base, None if engine.unavailable_reason() else engine)
        if status == "ok":
            out().print(f"{plan.variant.name}: inventory up to date ({escape(detail)})")
            return EXIT_OK
        err().print(f"[red]{plan.variant.name}: inventory {status}: {escape(detail)}; run "
                    f"`build.py base inventory --variant {plan.variant.name}`[/red]")
        return EXIT_PROBLEM
    engine = engine_or_fail(args)
    ensure_variant_base(plan, ws, engine)
    try:
        inv = read_image(engine, plan.variant.base, scratch=ws.cache_root if ws.cache_root.is_dir() else None)
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


def base_variant_plan(m: Manifest, plan: Plan) -> Plan:
    """The Plan of the variant whose image ``plan`` starts FROM, for ``plan``'s platform (the manifest
    refuses a base_variant that is not built for every platform of the variant on it)."""
    return plan_variant(m, plan.variant.base_variant, platform=plan.container_platform)


def build_variant(m: Manifest, plan: Plan, engine, target: str, progress: str, cache: BuildCache | None = None,
                  fresh_checks: bool = False):
    """The built image, or None when the build failed (its log tail already printed). A variant built on
    another variant's image (base_variant) builds that one first, for the same platform, and starts FROM it.
    ``progress``: --progress auto|plain|quiet; ``cache``: the layer cache refs of this variant's build
    (--cache-from/--cache-to); ``fresh_checks``: the invariant reuses no earlier passing result (--fresh-checks)."""
    from .image.build import BuildError, build_image
    from .image.engine import BuildFailed
    base_image = None
    if plan.variant.base_variant:
        base = build_variant(m, base_variant_plan(m, plan), engine, "image", progress, fresh_checks=fresh_checks)
        if base is None:
            return None
        # by its immutable tag: BuildKit resolves FROM as a reference, and an image id is not one
        # (it would look for docker.io/library/sha256); the tag names the image just built
        base_image = base.tags[1]
    else:
        ensure_variant_base(plan, Workspace.of(m), engine)
    try:
        with build_log(progress) as (stream, on_log):
            return build_image(plans_for(m, None), plan, m.path.parent, engine, target=target, progress=stream,
                               base_image=base_image, cache=cache, fresh_checks=fresh_checks, on_log=on_log)
    except BuildError as exc:
        raise UsageError(str(exc)) from None
    except BuildFailed as exc:
        err().print(f"[red]build failed:[/red] {escape(str(exc))}")
        return None


def cmd_build(args: argparse.Namespace) -> int:
    from .image.build import BuildCache, BuildError, BuildInputs, cache_ref, check_local_wheels, refuse_todos
    m = manifest_mod.load(args.manifest)
    plan = select_plan(m, args)
    try:
        refuse_todos(plan)
    except BuildError as exc:
        raise UsageError(str(exc)) from None
    require_fresh_lock(plan, m.path.parent)
    try:  # on the host, before the engine is touched: a missing required wheel is input to fix
        for warning in check_local_wheels(plan, BuildInputs.for_plan(plan, m.path.parent)):
            err().print(f"[yellow]warning:[/yellow] {escape(warning)}")
    except BuildError as exc:
        raise UsageError(str(exc)) from None
    to = args.cache_to
    cache = BuildCache(tuple(spec.ref or cache_ref(plan, args.registry) for spec in args.cache_from),
                       None if to is None else to.ref or cache_ref(plan, args.registry),
                       to_mode=to.mode if to is not None else "max")
    engine = engine_or_fail(args)
    built = build_variant(m, plan, engine, args.target, "quiet" if args.quiet else args.progress, cache,
                          fresh_checks=args.fresh_checks)
    if built is None:
        return EXIT_PROBLEM
    for export in built.cache_exports:
        err().print(f"cache: {export.kind} cache of {escape(engine.describe())} written to {escape(export.ref)}"
                    + (f" (the image, {export.digest})" if export.digest else ""))
    if args.json:
        emit_json({"image_id": built.image_id, "tags": list(built.tags), "labels": built.labels})
    else:
        out().print(f"[green]built[/green] {built.image_id[:19]}")
        for t in built.tags:
            out().print(f"  {escape(t)}")
    return EXIT_OK


def cmd_smoke(args: argparse.Namespace) -> int:
    from .image.smoke import record, run_smoke
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


def cmd_publish(args: argparse.Namespace) -> int:
    """Push the variant's image; a variant that lists its platforms pushes each platform's image (every one
    gated on its own smoke before anything is pushed), then one multi-platform index per tag of its own."""
    from .image.engine import EngineError
    from .image.publish import PublishRefused, PushPrinter, declared_smoke, floating_base, parse_allowances, \
        publish, publish_index
    m = manifest_mod.load(args.manifest)
    name = select_variant(m, args)
    plans = [plan_variant(m, name)] if args.tag else plan_platforms(m, name)
    plan = plans[0]
    for p in plans:
        require_fresh_lock(p, m.path.parent)
    floating = floating_base(plan.variant.base)
    if floating and not args.allow_floating_base:
        err().print(f"[red]not published:[/red] {escape(floating)}; pin it (name:tag@sha256:…) or pass "
                    f"--allow-floating-base")
        return EXIT_PROBLEM
    ws = Workspace.of(m)
    if args.digest:
        return promote_digest(args, m, plan, ws)
    engine = engine_or_fail(args)
    tags_of = {p.container_platform: list(args.tag) or list(variant_tags(m, p, engine)) for p in plans}
    if args.candidate:
        return push_candidates(engine, tags_of, args.registry, ws, bool(args.tag))
    missing = [t for tags in tags_of.values() for t in tags if not engine.image_exists(t)]
    if missing:
        raise UsageError(f"not built: {', '.join(missing)}; run `build.py build` and `build.py smoke` first")
    try:
        allowed = parse_allowances(args.allow_skipped, args.reason)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.require_gpu and "gpu" in allowed:
        raise UsageError("--require-gpu and --allow-skipped gpu contradict each other")
    declared = declared_smoke(ws.dockerfile, m.path.parent)
    results = {}
    # Another platform than the variant's own skips its GPU levels only where the manifest says why
    # (no_gpu_smoke); --allow-skipped is for the variant's own platform.
    no_gpu = {p: why for p, why in plan.variant.no_gpu_smoke if p in tags_of}
    try:
        for check_only in ((True, False) if len(plans) > 1 else (False,)):
            for platform, tags in tags_of.items():
                sbom = ws.sbom_file(tags[-1]) if not args.tag else None  # beside the image its build wrote
                own = dict(allowed) if platform == plan.container_platform else {}
                if platform in no_gpu:
                    own.update({"import": no_gpu[platform], "gpu": no_gpu[platform]})
                result = publish(engine, tags, args.registry, ws.smoke_results, require_gpu=args.require_gpu
                                 and platform not in no_gpu, declared=declared, allowed=own,
                                 progress=None if args.quiet else PushPrinter(err()), check_only=check_only, sbom=sbom,
                                 explicit_tags=bool(args.tag))
                if result is not None:
                    results[platform] = result
        indexes = publish_index(tags_of[plan.container_platform], args.registry, results, no_gpu,
                                engine.labels(tags_of[plan.container_platform][0])) if len(plans) > 1 else {}
    except (PublishRefused, EngineError) as exc:
        return publish_failed(exc)
    for platform, result in results.items():
        for note in result.notes:
            err().print(f"note: {escape(note)}")
        if result.labels:
            out().print(f"published image {result.pushed_id[:19]}: the smoked image {result.image_id[:19]} with "
                        f"{', '.join(f'{k}={v}' for k, v in result.labels.items() if k.endswith(('allowed-skipped', 'skip-reason')))}",
                        markup=False)
        for ref in result.refs:
            verb = "pushed" if ref == result.refs[0] else ("tagged" if ref in result.moved else "unchanged")
            out().print(f"[green]{verb}[/green] {escape(ref)} {moved_digest(result, ref)}"
                        + (f" ({platform})" if len(plans) > 1 else ""))
    for ref, digest in indexes.items():
        out().print(f"[green]pushed index[/green] {escape(ref)} {digest} ({', '.join(results)})")
    return EXIT_OK


def moved_digest(result, ref: str) -> str:
    """The digest a tag names now; for a tag this publish moved off another digest: old → new."""
    before = result.previous.get(ref)
    return f"{before} → {result.digests[ref]}" if before else result.digests[ref]


def publish_failed(exc: Exception, refused: str = "not published") -> int:
    """Say why nothing (more) was pushed: a refusal by the publish rules, or the engine's push failing. A smoke
    record that cannot be trusted is bad input (exit 2), as an unreadable manifest is."""
    from .image.engine import EngineError
    from .image.publish import BadSmokeRecord
    err().print(f"[red]{'push failed' if isinstance(exc, EngineError) else refused}:[/red] {escape(str(exc))}")
    return EXIT_BAD_INPUT if isinstance(exc, BadSmokeRecord) else EXIT_PROBLEM


def variant_tags(m: Manifest, plan: Plan, engine) -> tuple[str, str]:
    """The dated and immutable tags ``plan``'s build gave its image (the base_variant's image first)."""
    from .image.build import image_identity, tags_for
    base = None
    if plan.variant.base_variant:
        base_tags = variant_tags(m, plan_variant(m, plan.variant.base_variant), engine)
        base = base_tags[1]  # build_variant builds FROM the base variant's immutable tag
    return tags_for(plan, image_identity(plan, m.path.parent, engine, base).digest)


def push_candidates(engine, tags_of: dict[str, list[str]], registry: str, ws: Workspace, given: bool) -> int:
    """`publish --candidate`: each platform's image pushed by digest under its content tag only."""
    from .image.engine import EngineError
    from .image.publish import PublishRefused, PushPrinter, push_candidate
    try:
        for platform, tags in tags_of.items():
            if not engine.image_exists(tags[-1]):
                raise UsageError(f"not built: {tags[-1]}; run `build.py build` first")
            ref, digest = push_candidate(engine, tags[-1], registry, None if given else ws.sbom_file(tags[-1]),
                                         PushPrinter(err()))
            out().print(f"[green]pushed candidate[/green] {escape(ref)} {digest} ({platform})")
    except (PublishRefused, EngineError) as exc:
        return publish_failed(exc, refused="not pushed")
    return EXIT_OK


def promote_digest(args: argparse.Namespace, m: Manifest, plan: Plan, ws: Workspace) -> int:
    """`publish --digest sha256:...`: point the variant's tags (or --tag) at that image in the registry."""
    from .image.build import tags_for
    from .image.publish import PublishRefused, declared_smoke, promote
    if args.allow_skipped or args.reason:
        raise UsageError("--digest promotes an image whose smoke passed; --allow-skipped needs the engine "
                         "(its labels record the allowance), so publish without --digest")
    names = list(args.tag) or [tags_for(plan, "0" * 12)[0]]  # the dated tag: its name needs no inputs
    ref = f"{args.registry.rstrip('/')}/{plan.repository}@{args.digest}"
    try:
        result = promote(ref, names, ws.smoke_results, declared_smoke(ws.dockerfile, m.path.parent),
                         require_gpu=args.require_gpu)
    except PublishRefused as exc:
        return publish_failed(exc)
    for note in result.notes:
        err().print(f"note: {escape(note)}")
    for tag in result.digests:
        out().print(f"[green]{'tagged' if tag in result.moved else 'unchanged'}[/green] {escape(tag)} "
                    f"{moved_digest(result, tag)}")
    return EXIT_OK


def cmd_bump(args: argparse.Namespace) -> int:
    """One comparison per platform: --platform's, else each one the variant lists (its own first); exit 1
    when any is blocked. --json of several: the own platform's document, the others under other_platforms."""
    from .index import IndexClientError
    from .reports.bump import PAGE_MAX_AGE, BumpInputError, bump_platforms, print_bump
    m = manifest_mod.load(args.manifest)
    variant = select_variant(m, args)
    platforms = [select_plan(m, args).container_platform] if args.platform else \
        [p.container_platform for p in plan_platforms(m, variant)]
    for p in plan_platforms(m, variant):
        if p.container_platform in platforms:
            require_fresh_lock(p, m.path.parent)
    client = index_client(args, m)
    if not args.refresh:
        client.max_age = PAGE_MAX_AGE  # a bump check does not need pages newer than an hour
    try:
        reports = bump_platforms(m, variant, args.requirements, client, offline=args.offline, list_all=args.all,
                                 platform=args.platform)
    except BumpInputError as exc:
        raise UsageError(str(exc)) from None
    except IndexClientError as exc:
        err().print(f"[yellow]could not judge:[/yellow] {escape(str(exc))}")
        return EXIT_UNCHECKED
    if args.json:
        docs = [r.to_json() for r in reports]
        doc = docs[0] if len(docs) == 1 else {**docs[0], "other_platforms": docs[1:]}
        emit_json(doc)
    else:
        for i, report in enumerate(reports):
            if len(reports) > 1:
                out().print(("\n" if i else "") + f"[bold]== {escape(report.platform)} ==[/bold]")
            print_bump(report, out(), show_all=args.all)
        if len(reports) > 1:
            out().print("\n" + "; ".join(f"{r.platform}: {'blocked' if r.blocked else 'nothing blocks'}"
                                         for r in reports))
    return EXIT_PROBLEM if any(r.blocked for r in reports) else EXIT_OK


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

    r = sub.add_parser("render", help="render the Dockerfile from the manifest",
                       description="Render images/<image>/Dockerfile. --check fails (exit 1) when the committed file differs. "
                                   "Exit 0 written or up to date, 1 stale (--check), 2 bad input.")
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
                     "Exit 0 clean, 1 conflicts (a stale lock is one), 2 bad input, 3 could not judge (unchecked)."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_variant_args(rp)
    add_platform_arg(rp, every=True)
    rp.add_argument("--json", action="store_true", help="print the report as JSON (schema pinwheel.report/1)")
    rp.add_argument("--offline", action="store_true", help="use cached index metadata only")
    rp.add_argument("--no-lock", action="store_true", help="ignore the lock: show what plain pip per wheel set does")
    rp.add_argument("--verbose", "-v", action="store_true", default=argparse.SUPPRESS,
                    help="list transitive packages too")
    rp.add_argument("--index-url", help="index to read metadata from (default: pip's configuration)")
    rp.add_argument("--allow-unchecked", action="store_true",
                    help="let requirements that could not be judged pass as clean (they are still listed)")
    rp.add_argument("--refresh", action="store_true", help="ignore the cached pages, metadata and results; rewrite them")
    add_deadline_arg(rp)
    rp.set_defaults(func=cmd_report)

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

    pb = sub.add_parser("publish", help="push an image's tags, only if every level of its smoke passed",
                        description="Push the variant's tags (or --tag ...) to --registry, only when the smoke recorded "
                                    "for that image id passed every level the image's smoke declares (the Dockerfile's "
                                    "smoke target; every level where nothing declares it: static, import, gpu). "
                                    "A skipped level is not a passed one. --allow-skipped LEVEL with a reason publishes "
                                    "anyway and records the allowance in the pushed image's labels "
                                    "(io.pinwheel.smoke.allowed-skipped, io.pinwheel.smoke.skip-reason). "
                                    "Re-running pushes the same digests again. The content tag is immutable: other "
                                    "bytes under it are refused (publish them with --tag); a tag that moves prints "
                                    "old digest -> new. Exit 0 published, 1 refused, 2 bad input.")
    add_variant_args(pb)
    pb.add_argument("--registry", default=DEFAULT_REGISTRY, help=f"registry host[:port] (default: {DEFAULT_REGISTRY})")
    pb.add_argument("--tag", action="append", default=[], help="a local tag to publish (repeatable)")
    pb.add_argument("--allow-floating-base", action="store_true",
                    help="publish although the variant's base is not pinned by digest")
    pb.add_argument("--require-gpu", action="store_true",
                    help="refuse unless the GPU level passed, even where the image's smoke does not declare it "
                         "(the shipped image declares it, so this is the default there)")
    pb.add_argument("--allow-skipped", action="append", default=[], metavar="LEVEL[=REASON]",
                    help="publish although this required level (static, import, gpu) was skipped; needs a reason "
                         "(here or --reason), recorded in the pushed image's labels. Repeatable; LEVEL,LEVEL works. "
                         "A failed level is never allowed")
    pb.add_argument("--reason", help="why the --allow-skipped levels may be published without passing")
    pb.add_argument("--candidate", action="store_true",
                    help="only push the built image by digest under its content tag (<variant>-<hash>), for a "
                         "smoke on another host; no other tag is made, so no smoke is needed yet")
    pb.add_argument("--digest", metavar="SHA256",
                    help="promote the image already in --registry by this digest (sha256:...): its tags are "
                         "pointed at it once the smoke recorded for it passed; no engine needed")
    pb.set_defaults(func=cmd_publish, uses_engine=True)

    bp = sub.add_parser(
        "bump", help="what breaks if a package is bumped, before any image is built",
        description=("Compare today's image of a variant (its lock, else one plain pip install per wheel set) with\n"
                     "the image after bumping NAME==VERSION: ABI coupling of compiled wheels to torch (rebuild /\n"
                     "stable ABI), requirements in the image that exclude the new version (with the nearest release\n"
                     "that accepts it) and those it unblocks, what the bumped package's own pins move along, and\n"
                     "shared pins that become unsatisfiable. Verdicts: ok, upgrade/downgrade/add, rebuild, blocked.\n"
                     "Exit 0 nothing blocks, 1 something is blocked, 2 bad input, 3 could not judge (the index or\n"
                     "its cache could not answer). JSON schema: docs/bump.md."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    bp.add_argument("requirements", nargs="+", metavar="NAME==VERSION", help="the bump(s), e.g. torch==2.14.1")
    add_variant_args(bp)
    add_platform_arg(bp, every=True)
    bp.add_argument("--json", action="store_true", help="print the comparison as JSON (schema pinwheel.bump/1)")
    bp.add_argument("--offline", action="store_true", help="use cached index metadata and ABI results only")
    bp.add_argument("--refresh", action="store_true", help="re-read index pages even when the cached ones are fresh")
    bp.add_argument("--all", action="store_true", help="list every package, not only those the bump touches")
    bp.add_argument("--index-url", help="index to read metadata from (default: pip's configuration)")
    add_deadline_arg(bp)
    bp.set_defaults(func=cmd_bump)

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
