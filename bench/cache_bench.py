#!/usr/bin/env python3
"""Layer-cache benchmark: a fresh engine building an image from the registry's cache.

    python bench/cache_bench.py [--variant cu130] [--engine-a URL] [--engine-b URL] [--warm-push] [--json FILE]

In one run, with engine A (the local engine unless --engine-a names one) and
engine B (a second engine, scripts/engine2-up unless --engine-b names one):

cold      engine B, its image store and build cache emptied, builds the variant;
seed      engine A builds it with --cache-to (the variant's cache ref in the
          registry; on the docker driver the inline cache, the image pushed to the ref);
warm      engine B, emptied again, builds it with --cache-from that ref, and loads the
          result into its store (--warm-push: pushes it to the registry instead, so
          that cached layers the registry holds need not move);
pull      engine B, emptied again, pulls engine A's image (pushed after the seed
          build): what moving the image's layers alone costs, the floor under a
          warm build that loads its result into the engine's store.

Both engines start FROM the same base, pushed to the registry and named by digest,
so that its cache key is the same on both (a bootstrap base imported on each
engine is a different image per engine). The project is copied with another
repository name, so no tag of the checkout's images moves. Goal: warm <= 10% of
cold. Exit 0 when it holds, 1 otherwise. Ratios only; every figure is wall-clock
on this machine in this run.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pinwheel import manifest as manifest_mod  # noqa: E402
from pinwheel.image.base import ensure_base, platform_base, suite_for_python  # noqa: E402
from pinwheel.image.build import BuildCache, build_image, cache_ref  # noqa: E402
from pinwheel.image.engine import Engine  # noqa: E402
from pinwheel.plan import plan_variant  # noqa: E402
from pinwheel.workspace import Workspace  # noqa: E402

GOAL_WARM_RATIO = 0.10
BENCH_REPOSITORY = "pinwheel-cache-bench/train"
STEP = re.compile(r"^#\d+ \[(?:[\w-]+\s+)?\d+/\d+\] ")  # "#5 [image  2/12] RUN ...": a Dockerfile step


def say(msg: str) -> None:
    print(f"[cache-bench] {msg}", file=sys.stderr, flush=True)


class LoggedEngine(Engine):
    """An Engine that keeps each build's log, to count the steps BuildKit took from the cache."""

    def __init__(self, *args, push_to: str | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lines: list[str] = []
        self.push_to = push_to  # a registry: builds push their tags there instead of loading

    def build(self, *args, **kwargs):  # type: ignore[override]
        self.lines = []
        kwargs["on_log"] = self.lines.append
        if self.push_to:
            kwargs["push"] = True
            kwargs["tags"] = [f"{self.push_to}/{tag}" for tag in kwargs.get("tags", ())]
        return super().build(*args, **kwargs)

    def steps(self) -> tuple[int, int]:
        """(steps, of which CACHED) of the last build: the Dockerfile's [n/m] vertices."""
        ids = {line.split(" ", 1)[0]: line for line in self.lines if STEP.match(line)}
        cached = {line.split(" ", 1)[0] for line in self.lines if line.rstrip().endswith(" CACHED")}
        return len(ids), len(set(ids) & cached)


def engine_b_host(given: str | None) -> str:
    if given:
        return given
    proc = subprocess.run([str(ROOT / "scripts" / "engine2-up")], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"scripts/engine2-up failed: {proc.stderr.strip()}")
    return proc.stdout.strip().splitlines()[-1]


def empty_store(engine: Engine) -> None:
    """Every image and all of the build cache of engine B gone: a fresh engine."""
    for image in engine.docker.image.list(all=True):
        engine.docker.image.remove(image.id, force=True)
    engine.docker.buildx.prune(all=True)


def bench_project(root: Path, dest: Path) -> Path:
    """The manifest and images/ copied under dest, the repository renamed; its manifest path."""
    text = (root / "wheels_manifest.yaml").read_text()
    m = manifest_mod.load(root / "wheels_manifest.yaml")
    dest.mkdir(parents=True)
    (dest / "wheels_manifest.yaml").write_text(text.replace(f"repository: {m.image.repository}",
                                                            f"repository: {BENCH_REPOSITORY}", 1))
    shutil.copytree(root / "images", dest / "images")
    if (root / "wheels").is_dir():
        shutil.copytree(root / "wheels", dest / "wheels")
    return dest / "wheels_manifest.yaml"


def registry_base(engine: Engine, plan, registry: str, ws: Workspace) -> str:
    """The variant's base pushed to the registry; ``repo@sha256:...``."""
    base = platform_base(plan.variant.base, plan.platform_arch)
    if not engine.image_exists(base):
        ensure_base(base, plan.variant.python, engine, suite=suite_for_python(plan.variant.python),
                    cache_dir=ws.base_cache)
    ref = f"{registry}/pinwheel-cache-bench/base:{base.rsplit(':', 1)[-1]}"
    engine.tag(base, ref)
    try:
        digest = engine.push(ref).digest
    finally:
        engine.remove(ref)  # the tag only: the base stays
    return f"{ref.rsplit(':', 1)[0]}@{digest}"


def timed_build(engine: LoggedEngine, plans, plan, root: Path, base: str, cache: BuildCache | None) -> dict:
    started = time.monotonic()
    built = build_image(plans, plan, root, engine, progress=False, base_image=base, cache=cache)
    seconds = time.monotonic() - started
    steps, cached = engine.steps()
    return {"seconds": round(seconds, 1), "image_id": built.image_id, "tags": list(built.tags), "steps": steps,
            "cached_steps": cached,
            "layers": [] if engine.push_to else list(engine.layers(built.image_id)),
            "cache_exports": [vars(e) for e in built.cache_exports]}


def registry_bytes(engine: Engine, ref: str) -> int | None:
    blobs = engine._manifest_layers(ref, len(engine.layers(ref)))
    return sum(size for _, size in blobs) if blobs else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", default="cu130")
    ap.add_argument("--manifest", type=Path, default=ROOT / "wheels_manifest.yaml")
    ap.add_argument("--engine-a", help="engine A's host (default: the local engine)")
    ap.add_argument("--engine-b", help="engine B's host (default: the one scripts/engine2-up starts)")
    ap.add_argument("--warm-push", action="store_true",
                    help="the warm build pushes its result to the registry instead of loading it")
    ap.add_argument("--registry", default="127.0.0.1:5000")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    engine_a = LoggedEngine(host=args.engine_a)
    engine_b = LoggedEngine(host=engine_b_host(args.engine_b))
    roots = {str(e.docker.system.info().docker_root_dir) for e in (engine_a, engine_b)}
    if len(roots) != 2:
        raise SystemExit("engine B is engine A (same data root); it would be emptied: name another --engine-b")
    with tempfile.TemporaryDirectory(prefix="pinwheel-cache-bench-") as tmp:
        manifest_path = bench_project(args.manifest.resolve().parent, Path(tmp) / "project")
        root = manifest_path.parent
        m = manifest_mod.load(manifest_path)
        plans = [plan_variant(m, v) for v in m.variants]
        plan = plan_variant(m, args.variant)
        base = registry_base(engine_a, plan, args.registry, Workspace.of(m))
        ref = cache_ref(plan, args.registry)
        say(f"base {base}; cache ref {ref}; engine B {engine_b.describe()}")
        result: dict = {"variant": args.variant, "base": base, "cache_ref": ref,
                        "engine_a": engine_a.describe(), "engine_b": engine_b.describe(),
                        "cache_kind_a": engine_a.cache_kind(), "cache_kind_b": engine_b.cache_kind()}

        empty_store(engine_b)
        say("cold: engine B, empty store")
        result["cold"] = timed_build(engine_b, plans, plan, root, base, None)
        say(f"cold: {result['cold']['seconds']} s")

        say("seed: engine A builds with --cache-to and pushes the cache")
        result["seed"] = timed_build(engine_a, plans, plan, root, base, BuildCache(to_ref=ref))
        say(f"seed: {result['seed']['seconds']} s")
        image_ref = f"{args.registry}/{BENCH_REPOSITORY}:seed-{args.variant}"
        engine_a.tag(result["seed"]["image_id"], image_ref)
        engine_a.push(image_ref)

        empty_store(engine_b)
        say("warm: engine B, empty store, --cache-from" + (", pushed" if args.warm_push else ", loaded"))
        engine_b.push_to = f"{args.registry}/pinwheel-cache-bench-warm" if args.warm_push else None
        result["warm"] = timed_build(engine_b, plans, plan, root, base, BuildCache(from_refs=(ref,)))
        result["warm"]["output"] = "push" if args.warm_push else "load"
        engine_b.push_to = None
        say(f"warm: {result['warm']['seconds']} s ({result['warm']['cached_steps']}/{result['warm']['steps']} "
            f"steps cached)")

        empty_store(engine_b)
        started = time.monotonic()
        engine_b.docker.image.pull(image_ref, quiet=True)
        result["pull"] = {"seconds": round(time.monotonic() - started, 1)}
        result["image_bytes_uncompressed"] = engine_b.size(image_ref)
        result["image_bytes_in_registry"] = registry_bytes(engine_b, image_ref)
        empty_store(engine_b)
        for tag in [*result["seed"]["tags"], ref, image_ref]:  # engine A's tags of this run; its layers stay cached
            engine_a.remove(tag, force=True)

    cold, warm = result["cold"]["seconds"], result["warm"]["seconds"]
    result["warm_over_cold"] = round(warm / cold, 3)
    result["pull_over_cold"] = round(result["pull"]["seconds"] / cold, 3)
    result["warm_layers_are_seeds"] = result["warm"]["layers"] == result["seed"]["layers"] if not args.warm_push \
        else None
    result["goal"] = {"warm_over_cold_max": GOAL_WARM_RATIO, "met": result["warm_over_cold"] <= GOAL_WARM_RATIO}
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    return 0 if result["goal"]["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
