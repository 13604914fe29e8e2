"""The `pinwheel` command line (also `python build.py <command>`).

Exit codes: 0 clean, 1 the thing checked is wrong (conflicts, stale files,
failed build or smoke), 2 bad input (manifest, arguments), 3 could not judge
(the index or its cache could not answer; never reported as clean).
"""
from __future__ import annotations

import argparse
import codecs
import dataclasses
import difflib
import json
import sys
from pathlib import Path
from typing import Sequence

from rich.console import Console
from rich.markup import escape

from . import manifest as manifest_mod
from .adopt import adopt
from .adopt import to_yaml as adopted_yaml
from .image.base import BaseImageError, ensure_base, is_bootstrap, suite_for_python
from .image.build import BuildError, BuildInputs, build_image, check_local_wheels, tags_for
from .image.engine import BuildFailed, Engine, EngineError
from .distributions import InventoryError
from .image.inventory import check_inventory, history, read_image, save_and, write_inventory
from .image.publish import PublishRefused, PushPrinter, declared_smoke, floating_base, parse_allowances, publish
from .image.smoke import record, run_smoke
from .index import DEFAULT_DEADLINE, IndexClient, IndexClientError, metadata_source
from .lock import (DEFAULT_ENGINE, LockError, LockUnavailable, check_lock, lock_installs, lock_sha256, lock_variant,
                   locked_versions)
from .manifest import Manifest, ManifestError
from .plan import LockState, Plan, plan_platforms, plan_variant
from .render import render_dockerfiles
from .reports.bump import PAGE_MAX_AGE, BumpInputError, bump, print_bump
from .reports.audit import audit, print_audit, print_replay
from .reports.inspect import Side, diff, inspect_archive, print_diff, print_inspection, side_of_image
from .reports.inspect import to_json as inspection_json
from .reports.report import print_report, to_json, torch_abi
from .image.inventory import pinned_digest
from .resolve import ResolveError, memoized, reads_base, resolve, resolve_memoized, wheels_state, with_inventory
from .workspace import LockFiles, Workspace

EXIT_OK, EXIT_PROBLEM, EXIT_BAD_INPUT, EXIT_UNCHECKED = 0, 1, 2, 3


class UsageError(Exception):
    """Bad arguments or environment the user must fix; exit 2."""


# Without a terminal (CI logs, pipes) nothing is wrapped or cut: tables take the width they need.
UNBOUNDED_WIDTH = 100_000


def _console(stream) -> Console:
    width = None if stream.isatty() else UNBOUNDED_WIDTH
    # emoji off: a manifest key like ":thumbs_up:" must print as written
    return Console(file=stream, highlight=False, soft_wrap=True, width=width, emoji=False)


def out() -> Console:
    return _console(sys.stdout)


def err() -> Console:
    return _console(sys.stderr)


# ------------------------------------------------------------------ plans


def plans_for(m: Manifest, variant: str | None) -> list[Plan]:
    names = [variant] if variant else list(m.variants)
    return [plan_variant(m, n) for n in names]


def select_variant(m: Manifest, args: argparse.Namespace) -> str:
    """--variant NAME, or --cuda MAJOR (the variant whose CUDA major matches), or the first."""
    if getattr(args, "variant", None):
        if args.variant not in m.variants:
            raise UsageError(f"--variant {args.variant}: no such variant in {m.path.name} "
                             f"(variants: {', '.join(m.variants)})")
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


def add_platform_arg(p: argparse.ArgumentParser, every: bool = False) -> None:
    p.add_argument("--platform", metavar="OS/ARCH",
                   help="one of the variant's platforms, e.g. linux/arm64 (default: "
                        + ("every platform it lists)" if every else "its own platform's tag)"))


def select_plan(m: Manifest, args: argparse.Namespace) -> Plan:
    """The Plan of the selected variant for --platform (default: the variant's own platform)."""
    name = select_variant(m, args)
    platform = getattr(args, "platform", None)
    variant = m.variant(name)
    if platform and platform not in variant.container_platforms:
        raise UsageError(f"--platform {platform}: variant {name} is built for "
                         f"{', '.join(variant.container_platforms)} (its platforms: key)")
    return plan_variant(m, name, platform=platform)


def select_platform_plans(m: Manifest, args: argparse.Namespace) -> list[Plan]:
    """Each selected variant's Plans: the --platform one, else one per platform it lists."""
    if getattr(args, "platform", None):
        names = select_variants(m, args)
        missing = [n for n in names if args.platform not in m.variant(n).container_platforms]
        if missing:
            raise UsageError(f"--platform {args.platform}: not a platform of {', '.join(missing)}")
        return [plan_variant(m, n, platform=args.platform) for n in names]
    return [p for n in select_variants(m, args) for p in plan_platforms(m, n)]


def add_deadline_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--index-deadline", type=float, metavar="SECONDS", default=None,
                   help=f"stop retrying an index that keeps failing after this long (default {DEFAULT_DEADLINE:g})")


def add_variant_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variant", help="variant name from the manifest (e.g. cu130)")
    p.add_argument("--cuda", help="pick the variant by CUDA major version (e.g. 13)")


def index_client(args: argparse.Namespace, m: Manifest, plan: Plan | None = None):
    """Where metadata comes from: pip's index, and torch from the variant's extra index where it names one."""
    client = IndexClient(index_url=getattr(args, "index_url", None), cache_dir=Workspace.of(m).index_cache,
                         offline=getattr(args, "offline", False),
                         deadline=getattr(args, "index_deadline", None) or DEFAULT_DEADLINE,
                         refresh=getattr(args, "refresh", False))
    return client if plan is None else metadata_source(plan, client)


def lock_state(plan: Plan, root: Path):
    """The committed lock against the manifest, compared before anything else reads the lock."""
    check = check_lock(plan, root)
    return LockState(check.status, check.detail)


def inventory_engine(plan: Plan):
    """The engine that tells an unpinned base's identity, where one answers; None for a pinned base."""
    if not reads_base(plan) or pinned_digest(plan.variant.base) or not plan.variant.base:
        return None
    engine = Engine()
    return None if engine.unavailable_reason() else engine


def require_fresh_inventory(plan: Plan, root: Path) -> Plan:
    """build, lock, bump and publish never act on a missing or stale base inventory; the Plan with it."""
    plan = with_inventory(plan, root, inventory_engine(plan))
    state = plan.inventory_state
    if state is not None and state.status != "ok":
        raise UsageError(f"the base inventory of variant {plan.variant.name} is {state.status} ({state.detail}): "
                         f"run `build.py base inventory --variant {plan.variant.name}` and commit it")
    return plan


def require_fresh_lock(plan: Plan, root: Path) -> None:
    """build, bump and publish never act on a stale lock (nor on a stale base inventory)."""
    plan = require_fresh_inventory(plan, root)
    state = lock_state(plan, root)
    if state.status == "stale":
        raise UsageError(f"the lock of variant {plan.variant.name} is stale ({state.detail}): "
                         f"run `make lock` (build.py lock --variant {plan.variant.name})")


def cmd_report(args: argparse.Namespace) -> int:
    m = manifest_mod.load(args.manifest)
    plan = select_plan(m, args)
    root = m.path.parent
    ws = Workspace.of(m)
    plan = with_inventory(plan, root, inventory_engine(plan))  # a missing or stale one is said first, never clean
    state = LockState("ignored", "--no-lock") if args.no_lock else lock_state(plan, root)
    # A stale lock is never evaluated: the report shows what the manifest asks for now.
    locked = lock_installs(plan, ws.plan_lock_dir(plan), ws.wheels_dir) if state.status == "ok" else None
    plan = dataclasses.replace(plan, lock_state=state)
    try:
        client = index_client(args, m, plan)
        resolved = resolve_memoized(plan, client, ws.index_cache, ws.wheels_dir, locked, refresh=args.refresh)
        default_client = getattr(client, "default", client)
        abi = memoized(ws.index_cache, ("torch_abi", resolved.installed, wheels_state(plan, ws.wheels_dir), args.offline),
                       lambda: torch_abi(resolved, client, default_client, ws, args.offline),
                       keep=lambda rows: all(r["abi_class"] != "unknown" for r in rows), refresh=args.refresh)
    except ResolveError as exc:
        raise UsageError(str(exc)) from None
    except IndexClientError as exc:
        err().print(f"[yellow]could not judge:[/yellow] {escape(str(exc))}")
        return EXIT_UNCHECKED
    if args.json:
        data = to_json(resolved, abi, allow_unchecked=args.allow_unchecked)
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
    else:
        data = print_report(resolved, out(), verbose=args.verbose, abi=abi, allow_unchecked=args.allow_unchecked)
    return {"clean": EXIT_OK, "conflicts": EXIT_PROBLEM, "unchecked": EXIT_UNCHECKED}[data["summary"]["verdict"]]


# --------------------------------------------------------------- commands


def cmd_render(args: argparse.Namespace) -> int:
    """images/<image>/Dockerfile, and one Dockerfile.<variant> per other kind of environment (render.py)."""
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


def engine_or_fail():
    engine = Engine()
    reason = engine.unavailable_reason()
    if reason:
        raise UsageError(f"no Docker engine with buildx: {reason}. Run `scripts/engine-up` (or `make engine`).")
    return engine


def ensure_variant_base(plan: Plan, ws: Workspace, engine, progress: bool = True) -> None:
    base = plan.variant.base
    if engine.image_exists(base):
        return
    if not is_bootstrap(base):
        raise UsageError(f"base image {base} is not in the engine; pull it first (`docker pull {base}`)")
    try:
        ensure_base(base, plan.variant.python, engine, suite=suite_for_python(plan.variant.python),
                    cache_dir=ws.base_cache, progress=progress)
    except BaseImageError as exc:
        raise UsageError(str(exc)) from None


def cmd_base(args: argparse.Namespace) -> int:
    m = manifest_mod.load(args.manifest)
    ws = Workspace.of(m)
    plan = plan_variant(m, select_variant(m, args))
    if args.action == "inventory":
        return base_inventory(plan, ws, args.check)
    ensure_variant_base(plan, ws, engine_or_fail())
    out().print(f"base image {plan.variant.base} is ready")
    return EXIT_OK


def base_inventory(plan: Plan, ws: Workspace, check: bool) -> int:
    """Read the base image's distributions from its layers into images/<image>/inventory/<variant>.json."""
    path = ws.inventory_file(plan.variant.name)
    if check:
        engine = Engine()
        status, detail = check_inventory(path, plan.variant.base, None if engine.unavailable_reason() else engine)
        if status == "ok":
            out().print(f"{plan.variant.name}: inventory up to date ({escape(detail)})")
            return EXIT_OK
        err().print(f"[red]{plan.variant.name}: inventory {status}: {escape(detail)}; run "
                    f"`build.py base inventory --variant {plan.variant.name}`[/red]")
        return EXIT_PROBLEM
    engine = engine_or_fail()
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


def build_variant(m: Manifest, plan: Plan, engine, target: str, quiet: bool):
    """The built image, or None when the build failed (its log tail already printed). A variant built on
    another variant's image (base_variant) builds that one first and starts FROM it."""
    base_image = None
    if plan.variant.base_variant:
        base = build_variant(m, plan_variant(m, plan.variant.base_variant), engine, "image", quiet)
        if base is None:
            return None
        base_image = base.image_id
    else:
        ensure_variant_base(plan, Workspace.of(m), engine)
    try:
        return build_image(plans_for(m, None), plan, m.path.parent, engine, target=target, progress=not quiet,
                           base_image=base_image)
    except BuildError as exc:
        raise UsageError(str(exc)) from None
    except BuildFailed as exc:
        err().print(f"[red]build failed:[/red] {escape(str(exc))}")
        return None


def cmd_build(args: argparse.Namespace) -> int:
    m = manifest_mod.load(args.manifest)
    plan = select_plan(m, args)
    require_fresh_lock(plan, m.path.parent)
    try:  # on the host, before the engine is touched: a missing required wheel is input to fix
        for warning in check_local_wheels(plan, BuildInputs.for_plan(plan, m.path.parent)):
            err().print(f"[yellow]warning:[/yellow] {escape(warning)}")
    except BuildError as exc:
        raise UsageError(str(exc)) from None
    built = build_variant(m, plan, engine_or_fail(), args.target, args.quiet)
    if built is None:
        return EXIT_PROBLEM
    if args.json:
        sys.stdout.write(json.dumps({"image_id": built.image_id, "tags": list(built.tags), "labels": built.labels}, indent=2) + "\n")
    else:
        out().print(f"[green]built[/green] {built.image_id[:19]}")
        for t in built.tags:
            out().print(f"  {escape(t)}")
    return EXIT_OK


def cmd_smoke(args: argparse.Namespace) -> int:
    m = manifest_mod.load(args.manifest)
    engine = engine_or_fail()
    image = args.image or args.image_opt
    if not image:
        plan = plan_variant(m, select_variant(m, args))
        require_fresh_lock(plan, m.path.parent)
        built = build_variant(m, plan, engine, "image", args.quiet)
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
    m = manifest_mod.load(args.manifest)
    plan = plan_variant(m, select_variant(m, args))
    require_fresh_lock(plan, m.path.parent)
    floating = floating_base(plan.variant.base)
    if floating and not args.allow_floating_base:
        err().print(f"[red]not published:[/red] {escape(floating)}; pin it (name:tag@sha256:…) or pass "
                    f"--allow-floating-base")
        return EXIT_PROBLEM
    engine = engine_or_fail()
    lock_dir = Workspace.of(m).plan_lock_dir(plan)
    tags = list(args.tag) or list(tags_for(plan, lock_sha256(lock_dir)))
    missing = [t for t in tags if not engine.image_exists(t)]
    if missing:
        raise UsageError(f"not built: {', '.join(missing)}; run `build.py build` and `build.py smoke` first")
    try:
        allowed = parse_allowances(args.allow_skipped, args.reason)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.require_gpu and "gpu" in allowed:
        raise UsageError("--require-gpu and --allow-skipped gpu contradict each other")
    declared = declared_smoke(Workspace.of(m).dockerfile, m.path.parent)
    try:
        result = publish(engine, tags, args.registry, Workspace.of(m).smoke_results, require_gpu=args.require_gpu,
                         declared=declared, allowed=allowed, progress=PushPrinter(err()))
    except PublishRefused as exc:
        err().print(f"[red]not published:[/red] {escape(str(exc))}")
        return EXIT_PROBLEM
    except EngineError as exc:
        err().print(f"[red]push failed:[/red] {escape(str(exc))}")
        return EXIT_PROBLEM
    for note in result.notes:
        err().print(f"note: {escape(note)}")
    if result.labels:
        out().print(f"published image {result.pushed_id[:19]}: the smoked image {result.image_id[:19]} with "
                    f"{', '.join(f'{k}={v}' for k, v in result.labels.items() if k.endswith(('allowed-skipped', 'skip-reason')))}",
                    markup=False)
    for ref in result.refs:
        out().print(f"[green]pushed[/green] {escape(ref)} {result.digests[ref]}")
    return EXIT_OK


def cmd_inspect(args: argparse.Namespace) -> int:
    engine = engine_or_fail()
    if not engine.image_exists(args.image):
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
    path = Path(ref)
    if path.is_dir() and (path / LockFiles.REQUIREMENTS).exists():
        if m is None:
            raise UsageError(f"{ref} is a lock directory: diffing a lock needs the manifest it was made from")
        plan = plan_variant(m, path.name) if path.name in m.variants else None
        if plan is None:
            raise UsageError(f"{ref}: {path.name} is not a variant of {m.path.name}")
        versions = locked_versions(plan, path)
        return Side(f"lock {ref}", dict(versions), {}, {})
    if engine is None:
        engine = engine_or_fail()
    if not engine.image_exists(ref):
        raise UsageError(f"{ref} is neither an image in the engine nor a lock directory")
    return side_of_image(ref, save_and(engine, ref, None, history).final)


def cmd_diff(args: argparse.Namespace) -> int:
    m = manifest_mod.load(args.manifest) if Path(args.manifest).exists() else None
    engine = None if all(Path(r).is_dir() for r in (args.a, args.b)) else engine_or_fail()
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
    if not args.dockerfile.is_file():
        raise UsageError(f"{args.dockerfile}: not a file")
    if args.output.exists() and not args.force:
        raise UsageError(f"{args.output} exists; pass --force to replace it")
    adopted = adopt(args.dockerfile)
    args.output.write_text(adopted_yaml(adopted, args.dockerfile))
    sets = adopted.manifest["wheel_sets"]
    out().print(f"wrote {args.output}: {len(sets)} wheel sets, "
                f"{sum(len(s['packages']) for s in sets)} packages; fill in the TODOs")
    for line in adopted.not_expressed:
        err().print(f"  not expressed: {escape(line)}")
    return EXIT_OK


def cmd_bump(args: argparse.Namespace) -> int:
    m = manifest_mod.load(args.manifest)
    variant = select_variant(m, args)
    require_fresh_lock(plan_variant(m, variant), m.path.parent)
    client = index_client(args, m)
    if not args.refresh:
        client.max_age = PAGE_MAX_AGE  # a bump check does not need pages newer than an hour
    try:
        report = bump(m, variant, args.requirements, client, offline=args.offline, list_all=args.all)
    except BumpInputError as exc:
        raise UsageError(str(exc)) from None
    except IndexClientError as exc:
        err().print(f"[yellow]could not judge:[/yellow] {escape(str(exc))}")
        return EXIT_UNCHECKED
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        print_bump(report, out(), show_all=args.all)
    return EXIT_PROBLEM if report.blocked else EXIT_OK


def select_variants(m: Manifest, args: argparse.Namespace) -> list[str]:
    """--variant NAME or --cuda MAJOR select one variant (see select_variant); neither: all of them."""
    if getattr(args, "variant", None) or getattr(args, "cuda", None):
        return [select_variant(m, args)]
    return list(m.variants)


def cmd_lock(args: argparse.Namespace) -> int:
    m = manifest_mod.load(args.manifest)
    root = m.path.parent
    plans = select_platform_plans(m, args)
    if args.check:
        stale = []
        for plan in plans:
            c = check_lock(plan, root, args.engine)
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
            res = lock_variant(plan, root, engine=args.engine or DEFAULT_ENGINE, upgrade=args.upgrade,
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
    if failed:
        err().print(f"[red]not locked (resolver failure): {', '.join(failed)}[/red]")
    if unavailable:
        err().print(f"[red]not locked (cannot be made here): {', '.join(unavailable)}[/red]")
    if unavailable:
        return EXIT_BAD_INPUT
    return EXIT_PROBLEM if failed else EXIT_OK


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
            "Exit codes: 0 clean, 1 problems found (conflicts, stale files, failed build/smoke), 2 bad input,\n"
            "3 could not judge (index unreachable or not cached; never reported as clean)."
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
                     "Exit 0 clean, 1 conflicts (a stale lock is one), 2 bad input, 3 could not judge (unchecked)."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    add_variant_args(rp)
    add_platform_arg(rp)
    rp.add_argument("--json", action="store_true", help="print the report as JSON (schema pinwheel.report/1)")
    rp.add_argument("--offline", action="store_true", help="use cached index metadata only")
    rp.add_argument("--no-lock", action="store_true", help="ignore the lock: show what plain pip per wheel set does")
    rp.add_argument("--verbose", "-v", action="store_true", help="list transitive packages too")
    rp.add_argument("--index-url", help="index to read metadata from (default: pip's configuration)")
    rp.add_argument("--allow-unchecked", action="store_true",
                    help="let requirements that could not be judged pass as clean (they are still listed)")
    rp.add_argument("--refresh", action="store_true", help="ignore the cached pages, metadata and results; rewrite them")
    add_deadline_arg(rp)
    rp.set_defaults(func=cmd_report)

    b = sub.add_parser("build", help="build an image variant on the BuildKit engine",
                       description="Build a variant from the rendered Dockerfile and its lock. Creates a local bootstrap "
                                   "base when the manifest names one that is missing. Tags: the dated tag from the "
                                   "manifest and an immutable one from the manifest and lock hashes.")
    add_variant_args(b)
    add_platform_arg(b)
    b.add_argument("--target", default="image", help="Dockerfile target (image or smoke)")
    b.add_argument("--quiet", action="store_true", help="do not stream the build log")
    b.add_argument("--json", action="store_true", help="print image id, tags and labels as JSON")
    b.set_defaults(func=cmd_build)

    ba = sub.add_parser("base", help="the variant's base image: create a bootstrap base, or read its inventory",
                        description="`base` (or `base ready`) creates the local bootstrap base when the manifest names "
                                    "one that is missing. `base inventory` reads the base image's Python "
                                    "distributions from its layers (without running it) into "
                                    "images/<image>/inventory/<variant>.json; --check compares it with the base "
                                    "(its pinned digest, else the engine's image id), without the network.")
    ba.add_argument("action", nargs="?", choices=["ready", "inventory"], default="ready")
    ba.add_argument("--check", action="store_true", help="with inventory: exit 1 when the committed one is stale")
    add_variant_args(ba)
    ba.set_defaults(func=cmd_base)

    sm = sub.add_parser("smoke", help="run the smoke checks in a built image",
                        description="Run the smoke payload in the image: static (pins, --no-deps drops, pip check) "
                                    "everywhere; imports and the DSA forward where a GPU is present, else SKIPPED. "
                                    "The result is recorded per image id for `publish`.")
    add_variant_args(sm)
    sm.add_argument("image", nargs="?", help="image reference (default: build the variant, then smoke it)")
    sm.add_argument("--image", dest="image_opt", help=argparse.SUPPRESS)
    sm.add_argument("--level", default="gpu", choices=["static", "import", "gpu"])
    sm.add_argument("--gpus", default="auto", choices=["auto", "yes", "no"], help="pass the GPUs in (auto: when nvidia-smi exists)")
    sm.add_argument("--quiet", action="store_true")
    sm.set_defaults(func=cmd_smoke)

    pb = sub.add_parser("publish", help="push an image's tags, only if every level of its smoke passed",
                        description="Push the variant's tags (or --tag ...) to --registry, only when the smoke recorded "
                                    "for that image id passed every level the image's smoke declares (the Dockerfile's "
                                    "smoke target; every level where nothing declares it: static, import, gpu). "
                                    "A skipped level is not a passed one. --allow-skipped LEVEL with a reason publishes "
                                    "anyway and records the allowance in the pushed image's labels "
                                    "(io.pinwheel.smoke.allowed-skipped, io.pinwheel.smoke.skip-reason). "
                                    "Re-running pushes the same digests again.")
    add_variant_args(pb)
    pb.add_argument("--registry", default="127.0.0.1:5000", help="registry host[:port] (default: 127.0.0.1:5000)")
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
    pb.set_defaults(func=cmd_publish)

    bp = sub.add_parser(
        "bump", help="what breaks if a package is bumped, before any image is built",
        description=("Compare today's image of a variant (its lock, else one plain pip install per wheel set) with\n"
                     "the image after bumping NAME==VERSION: ABI coupling of compiled wheels to torch (rebuild /\n"
                     "stable ABI), requirements in the image that exclude the new version (with the nearest release\n"
                     "that accepts it) and those it unblocks, what the bumped package's own pins move along, and\n"
                     "shared pins that become unsatisfiable. Verdicts: ok, upgrade/downgrade/add, rebuild, blocked.\n"
                     "Exit 0 nothing blocks, 1 something is blocked, 2 bad input. JSON schema: docs/bump.md."),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    bp.add_argument("requirements", nargs="+", metavar="NAME==VERSION", help="the bump(s), e.g. torch==2.14.1")
    add_variant_args(bp)
    bp.add_argument("--json", action="store_true", help="print the comparison as JSON (schema pinwheel.bump/1)")
    bp.add_argument("--offline", action="store_true", help="use cached index metadata and ABI results only")
    bp.add_argument("--refresh", action="store_true", help="re-read index pages even when the cached ones are fresh")
    bp.add_argument("--all", action="store_true", help="list every package, not only those the bump touches")
    bp.add_argument("--index-url", help="index to read metadata from (default: pip's configuration)")
    add_deadline_arg(bp)
    bp.set_defaults(func=cmd_bump)

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
    lk.add_argument("--engine", choices=["pip-compile", "uv"], default=None,
                    help="resolver (default pip-compile; with --check: the engine each lock was made with)")
    lk.add_argument("--check", action="store_true", help="exit 1 naming the variants whose lock is stale (no network)")
    lk.add_argument("--upgrade", action="store_true", help="re-resolve from scratch instead of keeping earlier pins")
    lk.set_defaults(func=cmd_lock)
    return p


def _global_options_after_subcommand(parser: argparse.ArgumentParser) -> None:
    """`pinwheel report --manifest X` works as `pinwheel --manifest X report` does."""
    for action in parser._subparsers._group_actions:  # argparse has no public accessor for subparsers
        for sub in set(action.choices.values()):
            sub.add_argument("--manifest", type=Path, default=argparse.SUPPRESS,
                             help="the manifest (default: ./wheels_manifest.yaml)")


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
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ManifestError as exc:
        err().print(f"[red]error:[/red] {escape(str(exc))}")
        return EXIT_BAD_INPUT
    except UsageError as exc:
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
