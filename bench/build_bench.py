#!/usr/bin/env python3
"""Build benchmark: pinwheel's rendered image, installed by uv and by pip, against the hand-written seed.

    python bench/build_bench.py [--variant cu130] [--json FILE] [--pairs 3] [--repeat 3] [--local-wheel] [--keep]
                                [--layers parent-free|chained]

The engine is the docker CLI's (DOCKER_HOST picks another, e.g. the modern engine's socket). --layers sets
image.layers for pinwheel's two images: parent-free stages joined with COPY --link, where the engine has it.

Three images install the same package set on the same base from the same
index (default_index_url(), with the CA bundle as a BuildKit secret):
pinwheel    the rendered Dockerfile and the committed lock (uv installs the
            slices: image.installer's default);
pinwheel-pip the same lock and manifest with `image.installer: pip`, rendered
            again here (today's pip-based render);
seed        bench/seed.Dockerfile.
Per image:

cold      a build with --no-cache (Engine.build(cache=False)) under a fresh image
          name, after pruning BuildKit's cache mounts, so no installer cache
          starts warm (the seed runs pip with PIP_NO_CACHE_DIR); --pairs rounds
          of one cold build per image in the order above (A B C A B C ...),
          ratios within each round, the median reported;
noop      the same build again with the cache: nothing changed (--repeat
          times, median);
last-pin  the last pin's line edited (same version, so the work is comparable),
          cache mounts pruned first (a real bump downloads a new wheel), all but
          the invariant's passing results (the editor's engine has them):
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
          the last set's own wheels/<set>/ into its step only; the seed COPYs
          wheels/ before torch.

Goals (pinwheel, uv): cold build <= 0.6x the seed's (median of the rounds),
no-op <= 10 s, last-pin rebuild <= 1.2x the seed's, size <= 0.87x the seed's.
Exit 0 when all goals hold, 1 otherwise. Timings are wall-clock on this
machine; every run is kept in the JSON, written after each round.
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
from pinwheel.render import render_dockerfiles  # noqa: E402
from pinwheel.workspace import InImage  # noqa: E402

SEED = ROOT / "bench" / "seed.Dockerfile"
GOALS = {"cold_ratio": 0.6, "noop_s": 10.0, "last_pin_ratio": 1.2, "new_wheel_ratio": 1.2, "size_ratio": 0.87}
SEED_BUMP = re.compile(r"pip install --no-deps sgl-flash-mla==")
IMAGE_BLOCK = re.compile(r"^image:\n", re.M)
SUBJECTS = ("pinwheel", "pinwheel-pip", "seed")  # pinwheel installs with uv (the default), pinwheel-pip with pip


class NoCacheEngine(Engine):
    """Engine whose builds ignore the build cache (docker build --no-cache)."""

    def build(self, *args, **kwargs):  # type: ignore[override]
        kwargs["cache"] = False
        return super().build(*args, **kwargs)


def say(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def prune_cache_mounts(engine: Engine, keep_invariant: bool = False) -> None:
    """Drop BuildKit's cache mounts (pinwheel's pip cache); cache mounts in use are kept by BuildKit.

    keep_invariant (the rebuild rows): all but the invariant's, which holds the passing results of this
    image's earlier builds, as the engine of whoever edits the lock holds them; an installer's cache is
    still dropped, because a real bump downloads a wheel nobody has cached."""
    if not keep_invariant:
        engine.docker.buildx.prune(filters={"type": "exec.cachemount"})
        return
    from python_on_whales.utils import run as docker_run

    records = docker_run(engine.docker.buildx.docker_cmd + ["buildx", "du", "--verbose"]).split("\n\n")
    for record in records:
        fields = dict(line.split(":", 1) for line in record.splitlines() if ":" in line)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        if fields.get("Type") == "exec.cachemount" and not fields.get("Description", "").startswith(
                f"cached mount {InImage.INVARIANT_CACHE} "):
            engine.docker.buildx.prune(filters={"id": fields["ID"]})


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
    """The rendered image; installer "pip" renders it again from the manifest with `image.installer: pip`."""

    def __init__(self, engine: Engine, variant: str, work: Path, run: str, installer: str = "uv",
                 layers: str | None = None):
        self.engine = engine
        self.root = work / f"pinwheel-{installer}"
        (self.root / "images").mkdir(parents=True)
        text = (ROOT / "wheels_manifest.yaml").read_text()
        settings = {k: v for k, v in (("installer", None if installer == "uv" else installer), ("layers", layers)) if v}
        if settings:  # image: settings of the bench's own, in the manifest's image block
            if not IMAGE_BLOCK.search(text):
                raise SystemExit("wheels_manifest.yaml has no `image:` block to set the installer in")
            text = IMAGE_BLOCK.sub(lambda m: m.group(0) + "".join(f"  {k}: {v}\n" for k, v in settings.items()),
                                   text, count=1)
        (self.root / "wheels_manifest.yaml").write_text(text)
        m = manifest_mod.load(self.root / "wheels_manifest.yaml")
        shutil.copytree(ROOT / "images" / m.image.name, self.root / "images" / m.image.name)
        (self.root / "wheels").mkdir()
        self.plans = [plan_variant(m, v) for v in m.variants]
        if settings:  # the same lock, rendered with those settings
            for name, text in render_dockerfiles(self.plans).items():
                (self.root / "images" / m.image.name / name).write_text(text)
        plan = plan_variant(m, variant)
        # A fresh repository: the user's own tags of this image are not moved.
        self.plan = dataclasses.replace(plan, repository=f"pinwheel-bench/pinwheel-{installer}-{run}")
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


def remove_images(engine: Engine, subject) -> None:
    for image_id in reversed(subject.image_ids):
        if engine.image_exists(image_id):
            engine.remove(image_id, force=True)
    subject.image_ids.clear()


def cold_rounds(engine: Engine, subjects: dict, pairs: int, results: dict, save) -> None:
    """`pairs` rounds of one cold build per image, in the same order every round (A B C A B C ...). The
    first cold build warms the index's caches for the later ones, so one run says little: the ratios are
    taken within each round, and the median of the rounds is reported."""
    results["cold_rounds"] = []
    for i in range(pairs):
        row: dict = {}
        for name, s in subjects.items():
            say(f"round {i + 1}/{pairs}: {name} cold build (no cache, cache mounts pruned)")
            prune_cache_mounts(engine)
            seconds = s.build(cache=False)
            row[name] = {"cold_s": seconds, "size_bytes": engine.size(s.tag)}
            say(f"round {i + 1}/{pairs}: {name} cold {seconds:.1f} s, size {row[name]['size_bytes'] / 1e9:.2f} GB")
        results["cold_rounds"].append(row)
        save(results)
        if i < pairs - 1:  # each cold build leaves ~6 GB of layers behind; a few rounds fill a disk
            for s in subjects.values():
                remove_images(engine, s)
            engine.docker.buildx.prune(all=True)


def rebuilds(engine: Engine, name: str, s, args: argparse.Namespace, run_id: str, stub) -> dict:
    """No-op and last-pin rebuilds (and a new local wheel) on top of the subject's last cold build."""
    r: dict = {}
    r["noop_runs_s"] = [s.build() for _ in range(args.repeat)]
    r["noop_s"] = statistics.median(r["noop_runs_s"])
    say(f"{name}: no-op {fmt(r['noop_runs_s'])}; last-pin rebuilds")
    r["last_pin_runs_s"] = []
    for i in range(args.repeat):
        r["bumped"] = s.bump_last_pin(f"{run_id}-{i}")
        prune_cache_mounts(engine, keep_invariant=True)
        r["last_pin_runs_s"].append(s.build())
    r["last_pin_s"] = statistics.median(r["last_pin_runs_s"])
    r["last_pin_steps"] = steps_run(s.log)  # of the last repetition
    # pinwheel's invariant: whether the last repetition reused its earlier passing checks (the seed has none)
    r["last_pin_reused"] = [check for check, said in (("pip-check", "unchanged since a passing pip check"),
                                                      ("imports", "unchanged since a passing import")) if said in s.log]
    say(f"{name}: steps the last of them ran: " + "; ".join(f"{step} {sec:.1f} s" for step, sec in r["last_pin_steps"]))
    say(f"{name}: last pin {fmt(r['last_pin_runs_s'])}")
    if stub is not None:
        s.add_local_wheel(stub)
        prune_cache_mounts(engine, keep_invariant=True)
        r["new_wheel_s"] = s.build()
        say(f"{name}: new local wheel {r['new_wheel_s']:.1f} s")
    return r


def run(args: argparse.Namespace) -> dict:
    engine = Engine()
    reason = engine.unavailable_reason()
    if reason:
        raise SystemExit(f"no engine: {reason}")
    run_id = uuid.uuid4().hex[:8]
    results: dict = {"variant": args.variant, "engine": str(engine.docker.version().server.version), "run": run_id,
                     "pairs": args.pairs, "layers": args.layers or "as the manifest says", "images": {}}

    def save(partial: dict) -> None:  # after every round: an interrupted run keeps what it measured
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(partial, indent=2) + "\n")

    with tempfile.TemporaryDirectory(prefix="pinwheel-bench-") as tmp:
        work = Path(tmp)
        pw = Pinwheel(engine, args.variant, work, run_id, layers=args.layers)
        base = pw.plan.variant.base
        if not engine.image_exists(base):
            raise SystemExit(f"base image {base} is missing: run `make base`")
        subjects = {"pinwheel": pw,
                    "pinwheel-pip": Pinwheel(engine, args.variant, work, run_id, installer="pip", layers=args.layers),
                    "seed": Seed(engine, work, run_id, base)}
        stub = stub_wheel(work, "fast-hadamard-transform", "1.0.4.post1") if args.local_wheel else None
        try:
            cold_rounds(engine, subjects, args.pairs, results, save)
            for name, s in subjects.items():
                last = results["cold_rounds"][-1][name]
                results["images"][name] = {
                    "cold_runs_s": [row[name]["cold_s"] for row in results["cold_rounds"]],
                    "cold_s": statistics.median(row[name]["cold_s"] for row in results["cold_rounds"]),
                    "size_bytes": last["size_bytes"],
                    **rebuilds(engine, name, s, args, run_id, stub),
                }
                save(results)
        finally:
            if not args.keep:  # every image this run built, tagged or not
                for s in subjects.values():
                    remove_images(engine, s)
                # Each cold build leaves ~6 GB of layers in BuildKit's cache; a few runs fill a disk.
                engine.docker.buildx.prune(all=True)
    images = results["images"]
    seed = images["seed"]
    per_round = lambda a, b: [row[a]["cold_s"] / row[b]["cold_s"] for row in results["cold_rounds"]]  # noqa: E731
    results["ratios"] = {}
    for name in ("pinwheel", "pinwheel-pip"):
        p = images[name]
        results["ratios"][name] = {
            "cold_per_round": per_round(name, "seed"),
            "cold": statistics.median(per_round(name, "seed")),
            "noop": p["noop_s"] / seed["noop_s"],
            "last_pin": p["last_pin_s"] / seed["last_pin_s"],
            "size": p["size_bytes"] / seed["size_bytes"],
            **({"new_wheel": p["new_wheel_s"] / seed["new_wheel_s"]} if "new_wheel_s" in p else {}),
        }
    results["ratios"]["uv_over_pip_cold_per_round"] = per_round("pinwheel", "pinwheel-pip")
    r = results["ratios"]["pinwheel"]
    p = images["pinwheel"]
    results["goals"] = {
        "cold_ratio": {"goal": f"<= {GOALS['cold_ratio']:g}x", "value": r["cold"], "met": r["cold"] <= GOALS["cold_ratio"]},
        "noop_s": {"goal": f"<= {GOALS['noop_s']:g} s", "value": p["noop_s"], "met": p["noop_s"] <= GOALS["noop_s"]},
        "last_pin_ratio": {"goal": f"<= {GOALS['last_pin_ratio']:g}x", "value": r["last_pin"],
                           "met": r["last_pin"] <= GOALS["last_pin_ratio"]},
        "size_ratio": {"goal": f"<= {GOALS['size_ratio']:g}x", "value": r["size"], "met": r["size"] <= GOALS["size_ratio"]},
    }
    if "new_wheel" in r:
        results["goals"]["new_wheel_ratio"] = {
            "goal": f"<= {GOALS['new_wheel_ratio']:g}x", "value": r["new_wheel"],
            "met": r["new_wheel"] <= GOALS["new_wheel_ratio"]}
    save(results)
    return results


def table(results: dict) -> str:
    im, r, g = results["images"], results["ratios"], results["goals"]
    p, q, s = im["pinwheel"], im["pinwheel-pip"], im["seed"]
    rp, rq = r["pinwheel"], r["pinwheel-pip"]
    mark = lambda key: "met" if g[key]["met"] else "MISSED"  # noqa: E731
    rows = [
        (f"cold build (no cache), median of {results['pairs']} rounds", f"{p['cold_s']:.1f} s", f"{q['cold_s']:.1f} s",
         f"{s['cold_s']:.1f} s", f"{rp['cold']:.2f}x", f"{rq['cold']:.2f}x", f"<= {GOALS['cold_ratio']:g}x: {mark('cold_ratio')}"),
        ("no-op rebuild", f"{p['noop_s']:.1f} s", f"{q['noop_s']:.1f} s", f"{s['noop_s']:.1f} s", f"{rp['noop']:.2f}x",
         f"{rq['noop']:.2f}x", f"uv <= 10 s: {mark('noop_s')}"),
        ("last pin's line edited, rebuild", f"{p['last_pin_s']:.1f} s", f"{q['last_pin_s']:.1f} s",
         f"{s['last_pin_s']:.1f} s", f"{rp['last_pin']:.2f}x", f"{rq['last_pin']:.2f}x",
         f"<= {GOALS['last_pin_ratio']:g}x: {mark('last_pin_ratio')}"),
    ]
    if "new_wheel" in rp:
        rows.append(("new local wheel in wheels/, rebuild", f"{p['new_wheel_s']:.1f} s", f"{q['new_wheel_s']:.1f} s",
                     f"{s['new_wheel_s']:.1f} s", f"{rp['new_wheel']:.2f}x", f"{rq['new_wheel']:.2f}x",
                     f"<= {GOALS['new_wheel_ratio']:g}x: {mark('new_wheel_ratio')}"))
    rows.append(("image size", f"{p['size_bytes'] / 1e9:.2f} GB", f"{q['size_bytes'] / 1e9:.2f} GB",
                 f"{s['size_bytes'] / 1e9:.2f} GB", f"{rp['size']:.3f}x", f"{rq['size']:.3f}x",
                 f"<= {GOALS['size_ratio']:g}x: {mark('size_ratio')}"))
    out = ["| | pinwheel (uv) | pinwheel (pip) | seed | uv / seed | pip / seed | goal |",
           "|---|---:|---:|---:|---:|---:|---|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    out += ["", "| round | " + " | ".join(f"{n} cold" for n in SUBJECTS) + " | uv / seed | pip / seed | uv / pip |",
            "|---|" + "---:|" * (len(SUBJECTS) + 3)]
    for i, row in enumerate(results["cold_rounds"]):
        out.append(f"| {i + 1} | " + " | ".join(f"{row[n]['cold_s']:.1f} s" for n in SUBJECTS) + " | "
                   f"{rp['cold_per_round'][i]:.2f}x | {rq['cold_per_round'][i]:.2f}x | "
                   f"{r['uv_over_pip_cold_per_round'][i]:.2f}x |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variant", default="cu130")
    ap.add_argument("--json", type=Path, help="also write the results as JSON here")
    ap.add_argument("--local-wheel", action="store_true", help="also time a new in-house wheel in wheels/")
    ap.add_argument("--keep", action="store_true", help="keep the benchmark images")
    ap.add_argument("--repeat", type=int, default=3, help="no-op and last-pin rebuilds per image (median reported)")
    ap.add_argument("--layers", choices=["parent-free", "chained"],
                    help="image.layers for pinwheel's two images (default: the manifest's own)")
    ap.add_argument("--pairs", type=int, default=3, help="rounds of cold builds, one per image each (median reported)")
    args = ap.parse_args(argv)
    results = run(args)
    sys.stdout.write(table(results))
    return 0 if all(g["met"] for g in results["goals"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
