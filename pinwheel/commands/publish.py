"""`publish`: a variant's smoked images pushed (each platform's, then their index), a candidate pushed
for a smoke elsewhere, or an image already in the registry promoted by digest. What may be published is
image/publish.py's and image/smoke_gate.py's; this room reads the arguments and says what happened."""
from __future__ import annotations

import argparse

from .. import manifest as manifest_mod
from ..manifest import Manifest
from ..plan import Plan, plan_platforms, plan_variant
from ..workspace import Workspace
from .common import (
    DEFAULT_REGISTRY, EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEM, UsageError, add_variant_args, engine_or_fail, err,
    escape, out, require_fresh_lock, select_variant,
)


def cmd_publish(args: argparse.Namespace) -> int:
    """Push the variant's image; a variant that lists its platforms pushes each platform's image (every one
    gated on its own smoke before anything is pushed), then one multi-platform index per tag of its own."""
    from ..image.engine import EngineError
    from ..image.publish import PublishRefused, allowances, declared_smoke, publish_platforms, refuse_floating_base
    from ..image.push_progress import PushPrinter
    m = manifest_mod.load(args.manifest)
    name = select_variant(m, args)
    plans = [plan_variant(m, name)] if args.tag else plan_platforms(m, name)
    plan = plans[0]
    for p in plans:
        require_fresh_lock(p, m.path.parent)
    try:
        refuse_floating_base(plan.variant.base, args.allow_floating_base)
    except PublishRefused as exc:
        return publish_failed(exc)
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
        allowed = allowances(args.allow_skipped, args.reason, args.require_gpu)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        results, indexes = publish_platforms(
            engine, tags_of, plan.container_platform, args.registry, ws.smoke_results,
            declared=declared_smoke(ws.dockerfile, m.path.parent), allowed=allowed,
            no_gpu_smoke=plan.variant.no_gpu_smoke, require_gpu=args.require_gpu,
            sboms={p: None if args.tag else ws.sbom_file(tags[-1]) for p, tags in tags_of.items()},
            progress=None if args.quiet else PushPrinter(err()), explicit_tags=bool(args.tag))
    except (PublishRefused, EngineError) as exc:
        return publish_failed(exc)
    print_published(results, indexes, several=len(plans) > 1)
    return EXIT_OK


def print_published(results: dict, indexes: dict[str, str], several: bool) -> None:
    """What each platform's publish did: its notes, the allowance labels it carries, each ref pushed, tagged
    or left unchanged (old → new digest for a tag it moved), then the indexes."""
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
                        + (f" ({platform})" if several else ""))
    for ref, digest in indexes.items():
        out().print(f"[green]pushed index[/green] {escape(ref)} {digest} ({', '.join(results)})")


def moved_digest(result, ref: str) -> str:
    """The digest a tag names now; for a tag this publish moved off another digest: old → new."""
    before = result.previous.get(ref)
    return f"{before} → {result.digests[ref]}" if before else result.digests[ref]


def publish_failed(exc: Exception, refused: str = "not published") -> int:
    """Say why nothing (more) was pushed: a refusal by the publish rules, or the engine's push failing. A smoke
    record that cannot be trusted is bad input (exit 2), as an unreadable manifest is."""
    from ..image.engine import EngineError
    from ..image.publish import BadSmokeRecord
    err().print(f"[red]{'push failed' if isinstance(exc, EngineError) else refused}:[/red] {escape(str(exc))}")
    return EXIT_BAD_INPUT if isinstance(exc, BadSmokeRecord) else EXIT_PROBLEM


def variant_tags(m: Manifest, plan: Plan, engine) -> tuple[str, str]:
    """The dated and immutable tags ``plan``'s build gave its image (the base_variant's image first)."""
    from ..image.build import base_variant_plan, from_base_variant, image_identity, tags_for
    base_plan = base_variant_plan(m, plan)
    base = None if base_plan is None else from_base_variant(variant_tags(m, base_plan, engine))
    return tags_for(plan, image_identity(plan, m.path.parent, engine, base).digest)


def push_candidates(engine, tags_of: dict[str, list[str]], registry: str, ws: Workspace, given: bool) -> int:
    """`publish --candidate`: each platform's image pushed by digest under its content tag only."""
    from ..image.engine import EngineError
    from ..image.publish import PublishRefused, push_candidate
    from ..image.push_progress import PushPrinter
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
    from ..image.build import tags_for
    from ..image.publish import PublishRefused, declared_smoke, promote
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


def add_publish_parser(sub) -> None:
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
