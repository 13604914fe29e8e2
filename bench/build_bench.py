#!/usr/bin/env python3
"""Build benchmark: pinwheel's rendered image against the hand-written seed peer.

    python bench/build_bench.py [--variant cu130] [--json FILE] [--local-wheel] [--repeat 3] [--keep]

Both images install the same package set on the same base from the same index
(default_index_url(), with the CA bundle as a BuildKit secret). Per image:

cold      a build with --no-cache (Engine.build(cache=False)) under a fresh image
          name, after pruning BuildKit's cache mounts, so pinwheel's pip cache
          mount starts empty just as the seed's PIP_NO_CACHE_DIR pip does;
noop      the same build again with the cache: nothing changed (--repeat
          times, median);
last-pin  the last pin's line edited (same version, so the work is comparable),
          cache mounts pruned first (a real bump downloads a new wheel):
            pinwheel  a comment line appended to the last wheel set's lock file
                      (04-local-kernels.fallback-flash-mla.txt holds the
                      sgl-flash-mla pin the last step installs);
            seed      the `pip install --no-deps sgl-flash-mla==...` RUN line
                      changed (an inert variable in front of it);
          each rebuilds what its layout makes depend on that line (--repeat
          times with a new edit each, median);
size      the image's size as the engine reports it (uncompressed).
With --local-wheel also:
new-wheel an in-house wheel (a stub fast_hadamard_transform) appears in
          wheels/, the way a freshly built kernel is dropped in. pinwheel binds
          wheels/ into the last step only; the seed COPYs wheels/ before torch.

Goals: pinwheel's no-op <= 10 s, its last-pin rebuild <= 1.2x the seed's, its
size <= 0.97x the seed's. Exit 0 when all goals hold, 1 otherwise.
Timings are wall-clock on this machine: cold builds once, the second-scale
rebuilds --repeat times (median, every run kept in the JSON).
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pinwheel import manifest as manifest_mod  # noqa: E402
from pinwheel.image.build import build_image  # noqa: E402
from pinwheel.image.engine import Engine  # noqa: E402
from pinwheel.index import ca_bundle, default_index_url  # noqa: E402
from pinwheel.plan import plan_variant  # noqa: E402

SEED = ROOT / "bench" / "seed.Dockerfile"
GOALS = {"noop_s": 10.0, "last_pin_ratio": 1.2, "new_wheel_ratio": 1.2, "size_ratio": 0.97}
SEED_BUMP = re.compile(r"pip install --no-deps sgl-flash-mla==")


class NoCacheEngine(Engine):
    """Engine whose builds ignore the build cache (docker build --no-cache)."""

    def build(self, *args, **kwargs):  # type: ignore[override]
        kwargs["cache"] = False
        return super().build(*args, **kwargs)


def say(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def prune_cache_mounts(engine: Engine) -> None:
    """Drop BuildKit's cache mounts (pinwheel's pip cache); cache mounts in use are kept by BuildKit."""
    engine.docker.buildx.prune(filters={"type": "exec.cachemount"})


def fmt(runs: list[float]) -> str:
    return ", ".join(f"{x:.1f}" for x in runs) + f" s (median {statistics.median(runs):.1f} s)"


_STEP = re.compile(r"^#(\d+) \[(.+?)\] (.*)$")
_DONE = re.compile(r"^#(\d+) DONE (\d+(?:\.\d+)?)s$")


def steps_run(log: str) -> list[tuple[str, float]]:
    """(step, seconds) of every Dockerfile step BuildKit ran (not CACHED), from a plain progress log."""
    names: dict[str, str] = {}
    out = []
    for line in log.splitlines():
        m = _STEP.match(line)
        if m and not m.group(2).startswith("internal"):
            names[m.group(1)] = f"[{m.group(2)}] {m.group(3)[:60]}"
            continue
        m = _DONE.match(line)
        if m and m.group(1) in names:
            out.append((names[m.group(1)], float(m.group(2))))
    return out


def captured(fn):
    """Run fn with stderr (where the engine streams the build log) captured; return (value, log)."""
    buf, real = io.StringIO(), sys.stderr
    sys.stderr = buf
    try:
        value = fn()
    finally:
        sys.stderr = real
    return value, buf.getvalue()


def timed(fn):
    t0 = time.monotonic()
    value = fn()
    return value, time.monotonic() - t0


def stub_wheel(directory: Path, name: str, version: str) -> Path:
    """A minimal pure-Python wheel (metadata and an empty module), to stand in for an in-house build."""
    dist = re.sub(r"[-_.]+", "_", name).lower()
    path = directory / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    files = {
        f"{dist}/__init__.py": "# benchmark stand-in\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: pinwheel-bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as zf:
        for n, text in files.items():
            zf.writestr(n, text)
    return path


# ------------------------------------------------------------------ pinwheel


class Pinwheel:
    def __init__(self, engine: Engine, variant: str, work: Path, run: str):
        self.engine = engine
        self.root = work / "pinwheel"
        (self.root / "images").mkdir(parents=True)
        shutil.copy2(ROOT / "wheels_manifest.yaml", self.root / "wheels_manifest.yaml")
        m = manifest_mod.load(self.root / "wheels_manifest.yaml")
        shutil.copytree(ROOT / "images" / m.image.name, self.root / "images" / m.image.name)
        (self.root / "wheels").mkdir()
        self.plans = [plan_variant(m, v) for v in m.variants]
        plan = plan_variant(m, variant)
        # A fresh repository: the user's own tags of this image are not moved.
        self.plan = dataclasses.replace(plan, repository=f"pinwheel-bench/pinwheel-{run}")
        self.lock_dir = self.root / "images" / m.image.name / "lock" / variant
        self.image_ids: list[str] = []
        if not (self.lock_dir / "requirements.txt").exists():
            raise SystemExit(f"no lock for {variant}: run `make lock` first")
        self.tag = ""

    def build(self, cache: bool = True) -> float:
        engine = self.engine if cache else NoCacheEngine()
        (built, seconds), self.log = captured(
            lambda: timed(lambda: build_image(self.plans, self.plan, self.root, engine, progress=True)))
        self.tag = built.tags[1]
        self.image_ids.append(built.image_id)
        return seconds

    def bump_last_pin(self, nonce: str) -> str:
        last = self.plan.steps[-1]
        files = sorted(self.lock_dir.glob(f"{last.index:02d}-{last.name}*.txt"))
        if not files:
            raise SystemExit(f"the last wheel set ({last.name}) has no lock file to bump")
        target = files[-1]
        target.write_text(target.read_text() + f"# bench: last pin edited ({nonce})\n")
        return target.name

    def add_local_wheel(self, wheel: Path) -> None:
        shutil.copy2(wheel, self.root / "wheels" / wheel.name)


# ---------------------------------------------------------------------- seed


class Seed:
    def __init__(self, engine: Engine, work: Path, run: str, base: str):
        self.engine = engine
        self.base = base
        self.context = work / "seed"
        (self.context / "wheels").mkdir(parents=True)
        self.dockerfile = self.context / "Dockerfile"
        self.dockerfile.write_text(SEED.read_text())
        self.repository = f"pinwheel-bench/seed-{run}"
        self.builds = 0
        self.tag = ""
        self.image_ids: list[str] = []

    def build(self, cache: bool = True) -> float:
        secrets = {}
        ca = ca_bundle()
        if ca and Path(ca).is_file():
            secrets["ca"] = Path(ca)
        self.builds += 1
        tag = f"{self.repository}:b{self.builds}"
        (image_id, seconds), self.log = captured(lambda: timed(lambda: self.engine.build(
            self.context, self.dockerfile, tags=[tag],
            build_args={"BASE": self.base, "PIP_INDEX_URL": default_index_url()},
            secrets=secrets, cache=cache, progress=True)))
        self.tag = tag
        self.image_ids.append(image_id)
        return seconds

    def bump_last_pin(self, nonce: str) -> str:
        text = self.dockerfile.read_text()
        if not SEED_BUMP.search(text):
            raise SystemExit("bench/seed.Dockerfile has no `pip install --no-deps sgl-flash-mla==` line to bump")
        self.dockerfile.write_text(SEED_BUMP.sub(lambda m: f"PINWHEEL_BENCH_BUMP={nonce} " + m.group(0), text, count=1))
        return "the sgl-flash-mla RUN line"

    def add_local_wheel(self, wheel: Path) -> None:
        shutil.copy2(wheel, self.context / "wheels" / wheel.name)


# ---------------------------------------------------------------------- main


def run(args: argparse.Namespace) -> dict:
    engine = Engine()
    reason = engine.unavailable_reason()
    if reason:
        raise SystemExit(f"no engine: {reason}")
    run_id = uuid.uuid4().hex[:8]
    results: dict = {"variant": args.variant, "engine": str(engine.docker.version().server.version), "run": run_id, "images": {}}
    with tempfile.TemporaryDirectory(prefix="pinwheel-bench-") as tmp:
        work = Path(tmp)
        pw = Pinwheel(engine, args.variant, work, run_id)
        base = pw.plan.variant.base
        if not engine.image_exists(base):
            raise SystemExit(f"base image {base} is missing: run `make base`")
        subjects = {"pinwheel": pw, "seed": Seed(engine, work, run_id, base)}
        stub = stub_wheel(work, "fast-hadamard-transform", "1.0.4.post1") if args.local_wheel else None
        try:
            for name, s in subjects.items():
                r: dict = {}
                say(f"{name}: cold build (no cache, cache mounts pruned)")
                prune_cache_mounts(engine)
                r["cold_s"] = s.build(cache=False)
                r["size_bytes"] = engine.size(s.tag)
                say(f"{name}: cold {r['cold_s']:.1f} s, size {r['size_bytes'] / 1e9:.2f} GB; no-op rebuilds")
                r["noop_runs_s"] = [s.build() for _ in range(args.repeat)]
                r["noop_s"] = statistics.median(r["noop_runs_s"])
                say(f"{name}: no-op {fmt(r['noop_runs_s'])}; last-pin rebuilds")
                r["last_pin_runs_s"] = []
                for i in range(args.repeat):
                    r["bumped"] = s.bump_last_pin(f"{run_id}-{i}")
                    prune_cache_mounts(engine)
                    r["last_pin_runs_s"].append(s.build())
                r["last_pin_s"] = statistics.median(r["last_pin_runs_s"])
                r["last_pin_steps"] = steps_run(s.log)  # of the last repetition
                say(f"{name}: steps the last of them ran: "
                    + "; ".join(f"{step} {sec:.1f} s" for step, sec in r["last_pin_steps"]))
                say(f"{name}: last pin {fmt(r['last_pin_runs_s'])}")
                if stub is not None:
                    s.add_local_wheel(stub)
                    prune_cache_mounts(engine)
                    r["new_wheel_s"] = s.build()
                    say(f"{name}: new local wheel {r['new_wheel_s']:.1f} s")
                results["images"][name] = r
        finally:
            if not args.keep:  # every image this run built, tagged or not
                for s in subjects.values():
                    for image_id in reversed(s.image_ids):
                        if engine.image_exists(image_id):
                            engine.remove(image_id, force=True)
                # Each cold build leaves ~6 GB of layers in BuildKit's cache; a few runs fill a disk.
                engine.docker.buildx.prune(all=True)
    p, s = results["images"]["pinwheel"], results["images"]["seed"]
    results["ratios"] = {
        "cold": p["cold_s"] / s["cold_s"],
        "noop": p["noop_s"] / s["noop_s"],
        "last_pin": p["last_pin_s"] / s["last_pin_s"],
        "size": p["size_bytes"] / s["size_bytes"],
    }
    if "new_wheel_s" in p:
        results["ratios"]["new_wheel"] = p["new_wheel_s"] / s["new_wheel_s"]
    results["goals"] = {
        "noop_s": {"goal": f"<= {GOALS['noop_s']:g} s", "value": p["noop_s"], "met": p["noop_s"] <= GOALS["noop_s"]},
        "last_pin_ratio": {"goal": f"<= {GOALS['last_pin_ratio']:g}x", "value": results["ratios"]["last_pin"],
                           "met": results["ratios"]["last_pin"] <= GOALS["last_pin_ratio"]},
        "size_ratio": {"goal": f"<= {GOALS['size_ratio']:g}x", "value": results["ratios"]["size"],
                       "met": results["ratios"]["size"] <= GOALS["size_ratio"]},
    }
    if "new_wheel" in results["ratios"]:
        results["goals"]["new_wheel_ratio"] = {
            "goal": f"<= {GOALS['new_wheel_ratio']:g}x", "value": results["ratios"]["new_wheel"],
            "met": results["ratios"]["new_wheel"] <= GOALS["new_wheel_ratio"]}
    return results


def table(results: dict) -> str:
    p, s, r = results["images"]["pinwheel"], results["images"]["seed"], results["ratios"]
    g = results["goals"]
    mark = lambda key: "met" if g[key]["met"] else "MISSED"  # noqa: E731
    rows = [
        ("cold build (no cache)", f"{p['cold_s']:.1f} s", f"{s['cold_s']:.1f} s", f"{r['cold']:.2f}x", ""),
        ("no-op rebuild", f"{p['noop_s']:.1f} s", f"{s['noop_s']:.1f} s", f"{r['noop']:.2f}x",
         f"pinwheel <= 10 s: {mark('noop_s')}"),
        ("last pin's line edited, rebuild", f"{p['last_pin_s']:.1f} s", f"{s['last_pin_s']:.1f} s",
         f"{r['last_pin']:.2f}x", f"<= 1.2x: {mark('last_pin_ratio')}"),
    ]
    if "new_wheel" in r:
        rows.append(("new local wheel in wheels/, rebuild", f"{p['new_wheel_s']:.1f} s", f"{s['new_wheel_s']:.1f} s",
                     f"{r['new_wheel']:.2f}x", f"<= 1.2x: {mark('new_wheel_ratio')}"))
    rows.append(("image size", f"{p['size_bytes'] / 1e9:.2f} GB", f"{s['size_bytes'] / 1e9:.2f} GB",
                 f"{r['size']:.3f}x", f"<= 0.97x: {mark('size_ratio')}"))
    out = ["| | pinwheel | seed | pinwheel / seed | goal |", "|---|---:|---:|---:|---|"]
    out += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in rows]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", default="cu130")
    ap.add_argument("--json", type=Path, help="also write the results as JSON here")
    ap.add_argument("--local-wheel", action="store_true", help="also time a new in-house wheel in wheels/")
    ap.add_argument("--keep", action="store_true", help="keep the benchmark images")
    ap.add_argument("--repeat", type=int, default=3, help="no-op and last-pin rebuilds per image (median reported)")
    args = ap.parse_args(argv)
    results = run(args)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    sys.stdout.write(table(results))
    return 0 if all(g["met"] for g in results["goals"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
