#!/usr/bin/env python3
"""How report, lock and render cost grows with the manifest's size, against `uv pip compile --offline`.

For each size N (10, 50, 200 by default) a seeded generator writes a local index
(tests/support/local_index.py, served over HTTP on 127.0.0.1) of N packages with a
realistic dependency shape, and a manifest that lists those N packages:

- each package requires a few earlier ones, with specifiers that admit the
  version the manifest pins (most requirements point at a handful of early
  "core" packages, as libraries pile onto a few foundations);
- some packages have an extra (some manifest entries ask for it), some
  requirements carry markers (one true for the target, one for another OS on
  a package the index does not have);
- a few entries are `no_deps`, each with an extra whose pin would downgrade a
  shared pin (the cuDNN frontend's shape); a few core packages are shared pins
  with the packages that need them;
- every fifth package ships compiled wheels (three Pythons, two architectures)
  instead of one pure wheel;
- the entries are spread over wheel sets of about ten, in dependency order;
  one set is gated.

With the metadata cache warm (an online report and uv run, then one untimed
round), each round times, in turn: `lock` (uv, the default engine); `report
--offline --json` with the answer memo dropped, twice: first right after the
lock, whose online revalidation rewrote every cached page (so the report
parses each page again and stores it in the parsed cache), then again with
everything parsed (the headline, as bench/report_bench.py's); `render`; and
`uv pip compile --offline` on the same input (requirements and constraints
built as report_bench builds them). The rounds go through every size and
command interleaved, so a slow moment of the machine falls on all of them;
each cell is the median of --runs.

    .venv/bin/python bench/scale_bench.py [--sizes 10,50,200] [--runs 5] [--json bench/results/scale.json]
                                          [--png docs/scale.png] [--real]

--real adds a real manifest to every round: the miles input (bench/miles/), with real metadata from pip's
configured index, locked once online in its own folder. Its `report --offline --json` (memo dropped) and
uv's offline compile are timed in the same rounds, and printed against what each one's fit over the
generated sizes predicts at the miles lock's package count.

Prints a table, the log-log slope of each command over the sizes (1 is linear,
2 quadratic), the time per package at the largest size over the smallest, and
the time each added package costs between sizes (constant when linear: the
fixed start-up is left out). Writes the medians and every run as JSON, and
the plot (matplotlib) unless --no-plot.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PY = "3.11"
PY_TAG = "cp311"
COMPILED_TAGS = [f"{py}-{py}-manylinux_2_17_{arch}.manylinux2014_{arch}"
                 for py in ("cp310", "cp311", "cp312") for arch in ("x86_64", "aarch64")]
VERSIONS = ["1.0", "1.1", "1.2", "2.0", "2.1", "3.0"]
SET_SIZE = 10
METRICS = ("wall", "cpu")
COMMANDS = ("report", "report_after_lock", "lock", "render", "uv")
ROUND = ("lock", "report_after_lock", "report", "render", "uv")  # the order within a round
LABELS = {
    "report": "report --offline --json, memo dropped",
    "report_after_lock": "the same, first after a lock",
    "lock": "lock (uv)",
    "render": "render",
    "uv": "uv pip compile --offline",
}


@dataclass
class Generated:
    """One size's generated input: the packages (name -> pinned version) and the manifest's text."""

    n: int
    pins: dict[str, str]
    manifest: str
    wheels: int = 0
    requirements: int = 0
    no_deps: list[str] = field(default_factory=list)
    shared: list[str] = field(default_factory=list)


def package_name(i: int) -> str:
    return f"scale-{i:03d}"


def _admitting(rng: random.Random, versions: list[str], pinned: str) -> str:
    """A specifier that the pinned version satisfies, in one of the shapes real metadata has."""
    major = int(pinned.split(".")[0])
    lowest = versions[0]
    shapes = [
        "",
        f">={lowest}",
        f">={major}.0,<{major + 1}",
        f"~={pinned}" if pinned.count(".") == 1 and pinned.endswith(".0") else f">={pinned}",
        f">={lowest},!={next((v for v in versions if v != pinned), '9.9')}",
        f"=={pinned}",
    ]
    return rng.choice(shapes)


def generate(index, n: int, seed: int = 17) -> Generated:
    """Publish N packages on `index` (a tests/support/local_index.py LocalIndex) and return the manifest that lists
    them; the same seed and N give the same packages and manifest."""
    rng = random.Random(f"pinwheel-scale-{seed}-{n}")
    versions: dict[int, list[str]] = {}
    pinned: dict[int, str] = {}
    for i in range(n):
        vs = sorted(rng.sample(VERSIONS, rng.randint(2, 4)), key=lambda v: tuple(map(int, v.split("."))))
        versions[i] = vs
        # the manifest pins exactly; mostly the newest, sometimes an older one the resolver must keep
        pinned[i] = vs[-1] if rng.random() < 0.6 else rng.choice(vs[:-1])
    core = max(2, n // 10)  # the foundations most requirements point at
    no_deps = sorted(rng.sample(range(core, n), max(1, n // 20))) if n > core else []
    shared = sorted(rng.sample(range(1, core), max(1, min(core - 1, n // 25))))
    requires: dict[int, list[str]] = {}
    extras: dict[int, dict[str, list[str]]] = {}
    dependents: dict[int, list[int]] = {j: [] for j in range(n)}
    for i in range(n):
        deps: set[int] = set()
        if i:
            for _ in range(rng.choice([0, 1, 2, 2, 3, 3, 4])):
                deps.add(rng.randrange(min(i, core)) if rng.random() < 0.6 else rng.randrange(i))
        reqs = []
        for j in sorted(deps):
            dependents[j].append(i)
            req = f"{package_name(j)}{_admitting(rng, versions[j], pinned[j])}"
            roll = rng.random()
            if roll < 0.08:
                req += f'; python_version >= "3.9"'
            elif roll < 0.12:
                req = f'scale-win-helper>=1; sys_platform == "win32"'
            reqs.append(req)
        requires[i] = reqs
        if i and i not in no_deps and rng.random() < 0.2:
            j = rng.randrange(i)
            dependents[j].append(i)
            extras[i] = {"fast": [f"{package_name(j)}{_admitting(rng, versions[j], pinned[j])}"]}
    for i in no_deps:  # the cuDNN frontend's shape: an extra that would downgrade a shared pin
        j = rng.choice(shared)
        older = [v for v in versions[j] if v != pinned[j]]
        extras[i] = {"dsl": [f"{package_name(j)}=={older[0]}"]} if older else {}
    out = Generated(n=n, pins={package_name(i): pinned[i] for i in range(n)}, manifest="",
                    no_deps=[package_name(i) for i in no_deps], shared=[package_name(j) for j in shared])
    for i in range(n):
        compiled = i % 5 == 4
        for v in versions[i]:
            for tags in (COMPILED_TAGS if compiled else ["py3-none-any"]):
                index.add(package_name(i), v, requires=requires[i], extras=extras.get(i), tags=tags)
                out.wheels += 1
        out.requirements += len(requires[i]) + sum(len(r) for r in extras.get(i, {}).values())
    out.manifest = _manifest(rng, n, extras, no_deps, shared, dependents, pinned)
    return out


def _manifest(rng, n, extras, no_deps, shared, dependents, pinned) -> str:
    lines = [
        "# generated by bench/scale_bench.py",
        "manifest_version: 1",
        "image: {name: scale, repository: pinwheel/scale}",
        "shared_pins:",
    ]
    for j in shared:
        needed = [package_name(i) for i in sorted(set(dependents[j]))[:3]] or [package_name(j)]
        lines.append(f'  - {{requirement: "{package_name(j)}=={pinned[j]}", needed_by: [{", ".join(needed)}], '
                     f'why: "one {package_name(j)} for its dependents"}}')
    lines += [
        "gates:",
        '  ENABLE_CUDA_13: {when: "cuda >= 13", why: "CUDA 13 only"}',
        "variants:",
        f'  cu130: {{cuda: "13.0", torch: "2.13.0", python: "{PY}", platform: manylinux_2_36_x86_64, '
        'base: "pinwheel/base:bookworm-py311", tag: "cu130-{date}"}',
        "wheel_sets:",
    ]
    sets = math.ceil(n / SET_SIZE)
    for s in range(sets):
        lines += [f"  - name: set-{s + 1:02d}", f'    why: "packages {s * SET_SIZE} to {min(n, (s + 1) * SET_SIZE) - 1}"']
        if sets >= 3 and s == sets - 1:
            lines.append("    gate: ENABLE_CUDA_13")
        lines.append("    packages:")
        for i in range(s * SET_SIZE, min(n, (s + 1) * SET_SIZE)):
            name = package_name(i)
            extra = "[fast]" if "fast" in extras.get(i, {}) and rng.random() < 0.5 else ""
            if i in no_deps:
                lines.append(f'      - {{requirement: "{name}=={pinned[i]}", no_deps: true, '
                             f'why: "its dsl extra would downgrade a shared pin"}}')
            else:
                lines.append(f'      - {{requirement: "{name}{extra}=={pinned[i]}"}}')
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ timing


def peer_inputs(manifest_path: Path, variant: str, tmp: Path) -> tuple[Path, Path]:
    """uv's input, as bench/report_bench.py builds it: the index packages as requirements, the shared and
    --no-deps pins as constraints."""
    from pinwheel import manifest
    from pinwheel.plan import plan_variant

    plan = plan_variant(manifest.load(manifest_path), variant)
    reqs = [p.requirement for p in plan.packages() if not p.no_deps and not p.local]
    cons = [f"{n}=={v}" for n, v in plan.shared_pins.items()]
    cons += [p.pinned for p in plan.packages() if p.no_deps]
    (tmp / "requirements.in").write_text("\n".join(reqs) + "\n")
    (tmp / "constraints.txt").write_text("\n".join(sorted(set(cons))) + "\n")
    return tmp / "requirements.in", tmp / "constraints.txt"


@dataclass
class Size:
    n: int
    root: Path
    index: object  # tests/support/local_index.py's LocalIndex, serving this size's packages
    gen: Generated
    env: dict
    commands: dict[str, list[str]]

    @property
    def manifest(self) -> Path:
        return self.root / "project" / "wheels_manifest.yaml"

    def drop_memo(self) -> None:
        shutil.rmtree(self.root / "cache" / "index" / "memo", ignore_errors=True)


def prepare(base: Path, n: int, seed: int) -> Size:
    # the repository root is on the path (main); the tests' index server answers without Nagle's 40 ms wait,
    # as a real index does: with it, a 200-package lock (which revalidates every page one after another) took
    # 12 s instead of 2
    from tests.support.local_index import LocalIndex

    root = base / f"n{n}"
    index = LocalIndex(root / "index")
    gen = generate(index, n, seed)
    url = index.serve()
    project = root / "project"
    project.mkdir(parents=True)
    (project / "wheels_manifest.yaml").write_text(gen.manifest)
    # Python's bytecode cache on, as in any installed environment; every cache in this size's own folder;
    # pip's (and so pinwheel's and uv's) index is the local one and no configuration file adds another.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PIP_INDEX_URL=url, PIP_CONFIG_FILE=os.devnull, PINWHEEL_CACHE_DIR=str(root / "cache"),
               UV_CACHE_DIR=str(root / "uv-cache"), PIP_TOOLS_CACHE_DIR=str(root / "pip-tools-cache"))
    py = sys.executable
    cli = [py, str(ROOT / "build.py"), "--manifest", str(project / "wheels_manifest.yaml")]
    req, con = peer_inputs(project / "wheels_manifest.yaml", "cu130", root)
    uv = [str(Path(py).parent / "uv"), "pip", "compile", "--offline", "--quiet", "--python-version", PY,
          "--index-url", url, "-c", str(con), str(req), "-o", str(root / "uv.txt")]
    commands = {
        "report": cli + ["report", "--variant", "cu130", "--offline", "--json"],
        "report_after_lock": cli + ["report", "--variant", "cu130", "--offline", "--json"],
        "lock": cli + ["lock", "--variant", "cu130"],
        "render": cli + ["render"],
        "uv": uv,
    }
    return Size(n, root, index, gen, env, commands)


@dataclass
class RealInput:
    """The miles input (bench/miles/), real metadata from pip's configured index, locked once (online) in its
    own folder: the check of the generated sizes' fit against a real manifest. Timed: report and uv only."""

    n: int
    root: Path
    env: dict
    commands: dict[str, list[str]]
    manifest = Size.manifest
    drop_memo = Size.drop_memo


def prepare_real(base: Path) -> RealInput:
    root = base / "miles"
    (root / "project").mkdir(parents=True)
    shutil.copy(ROOT / "bench" / "miles" / "wheels_manifest.yaml", root / "project" / "wheels_manifest.yaml")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PINWHEEL_CACHE_DIR=str(root / "cache"), UV_CACHE_DIR=str(root / "uv-cache"))
    from pinwheel.index import default_index_url

    py, man = sys.executable, root / "project" / "wheels_manifest.yaml"
    cli = [py, str(ROOT / "build.py"), "--manifest", str(man)]
    subprocess.run(cli + ["lock", "--variant", "cu130", "--resolver", "uv"], env=env, check=True, capture_output=True)
    req, con = peer_inputs(man, "cu130", root)
    uv = [str(Path(py).parent / "uv"), "pip", "compile", "--offline", "--quiet", "--python-version", PY,
          "--index-url", default_index_url(), "-c", str(con), str(req), "-o", str(root / "uv.txt")]
    real = RealInput(0, root, env, {"report": cli + ["report", "--variant", "cu130", "--offline", "--json"],
                                     "uv": uv})
    real.n = _lock_count(real, "miles-bench")
    return real


def run_once(size: Size, command: str, *, warm: bool = False) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run. The CPU time is the command's user + system time with the
    processes it waited for (lock's uv), not the local index serving it from this process: on a shared
    machine it moves far less with the load than the wall time does."""
    cmd = size.commands[command]
    if warm and command == "uv":  # uv needs one online run to fill its cache before --offline can work
        cmd = [c for c in cmd if c != "--offline"]
    if warm and command == "report":  # the first report fills the metadata cache from the index (online)
        cmd = [c for c in cmd if c != "--offline"]
    if command.startswith("report"):
        size.drop_memo()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=size.manifest.parent, capture_output=True, text=True, env=size.env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in (0, 1):  # report exits 1 on conflicts, still a full run
        raise SystemExit(f"n={size.n}: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def slope(xs: list[float], ys: list[float]) -> float:
    """The least-squares slope of log y against log x: 1 is linear, 2 quadratic."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def variable_exponent(sizes: list[int], ys: list[float]) -> float | None:
    """k of t = a + c·N^k through the smallest, a middle and the largest size: the growth of what the size
    adds, with the fixed start-up left out (1 is linear). None where the times do not rise with the size
    (a flat command, or noise larger than what the size adds)."""
    if len(sizes) < 3:
        return None
    (n1, n2, n3), (t1, t2, t3) = (sizes[0], sizes[len(sizes) // 2], sizes[-1]), (ys[0], ys[len(ys) // 2], ys[-1])
    if not (t3 > t2 > t1):
        return None
    want = (t3 - t2) / (t2 - t1)

    def ratio(k: float) -> float:  # rises with k
        return (n3 ** k - n2 ** k) / (n2 ** k - n1 ** k)

    lo, hi = 0.05, 4.0
    if not ratio(lo) <= want <= ratio(hi):
        return None
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ratio(mid) < want else (lo, mid)
    return (lo + hi) / 2


def summarise(sizes: list[int], medians: dict[str, dict[int, float]]) -> dict:
    lo, hi = sizes[0], sizes[-1]
    growth = {}
    for c in COMMANDS:
        ys = [medians[c][n] for n in sizes]
        a, b = linear_fit(sizes, ys)
        growth[c] = {
            "linear_fit": {"fixed_s": round(a, 4), "ms_per_package": round(1000 * b, 3),
                           "worst_residual_s": round(max(abs(y - a - b * n) for n, y in zip(sizes, ys)), 4)},
            "slope_log_log": round(slope(sizes, ys), 3),
            "variable_exponent": None if (k := variable_exponent(sizes, ys)) is None else round(k, 2),
            "slope_ends": round(math.log(medians[c][hi] / medians[c][lo]) / math.log(hi / lo), 3),
            "per_package_ratio": round((medians[c][hi] / hi) / (medians[c][lo] / lo), 3),
            # the time above the smallest size, per package added: the marginal cost, fixed start-up left out
            "marginal_ms_per_package": {
                f"{a}-{b}": round(1000 * (medians[c][b] - medians[c][a]) / (b - a), 2)
                for a, b in zip(sizes, sizes[1:])
            },
        }
    return growth


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares t = a + b·N: (a, the fixed cost in s; b, the cost per package in s)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def plot(sizes: list[int], medians: dict[str, dict[str, dict[int, float]]], path: Path, title: str) -> None:
    """Left: wall time, log-log, each command with a line proportional to N through its smallest size.
    Right: CPU time, linear axes, each command with its least-squares fixed cost + cost per package."""
    import matplotlib  # only the bench plots; tests and the CLI never import it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (log_ax, lin_ax) = plt.subplots(1, 2, figsize=(11, 4.6), dpi=110)
    markers = {"report": "o", "report_after_lock": "v", "lock": "s", "render": "^", "uv": "D"}
    for c in COMMANDS:
        ys = [medians["wall"][c][n] for n in sizes]
        (line,) = log_ax.plot(sizes, ys, marker=markers[c], label=LABELS[c])
        log_ax.plot(sizes, [ys[0] * n / sizes[0] for n in sizes], linestyle=":", linewidth=0.8, color=line.get_color())
        cpu = [medians["cpu"][c][n] for n in sizes]
        a, b = linear_fit(sizes, cpu)
        lin_ax.plot(sizes, cpu, marker=markers[c], linestyle="none", color=line.get_color(),
                    label=f"{LABELS[c]}: {a:.2f} s + {1000 * b:.1f} ms/package")
        lin_ax.plot([0, sizes[-1]], [a, a + b * sizes[-1]], linestyle="--", linewidth=0.9, color=line.get_color())
    log_ax.set_xscale("log")
    log_ax.set_yscale("log")
    log_ax.set_xticks(sizes, [str(n) for n in sizes])
    log_ax.set_ylabel("wall time, median (s)")
    log_ax.set_title("wall time, log-log; dotted: proportional to N from the smallest size", fontsize=8)
    lin_ax.set_ylabel("CPU time (user + system), median (s)")
    lin_ax.set_title("CPU time, linear; dashed: least-squares fixed cost + cost per package", fontsize=8)
    lin_ax.set_xlim(0, sizes[-1] * 1.05)
    lin_ax.set_ylim(0, None)
    for ax in (log_ax, lin_ax):
        ax.set_xlabel("packages in the manifest")
        ax.grid(True, which="both", linewidth=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})  # no version stamp: a re-run differs only by its figures
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,50,200", help="comma-separated package counts (default 10,50,200)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "scale.json")
    ap.add_argument("--png", type=Path, default=ROOT / "docs" / "scale.png")
    ap.add_argument("--no-plot", action="store_true", help="leave the PNG out (no matplotlib needed)")
    ap.add_argument("--real", action="store_true", help="add the miles input (real metadata, pip's configured "
                    "index; locked online once) to every round: its report and uv against the sizes' fit")
    ap.add_argument("--keep", type=Path, help="generate into this directory and keep it (default: a temporary one)")
    args = ap.parse_args(argv)
    # here, not at import: the generator's test imports this module and must not see build.py as `build`
    sys.path[:0] = [str(ROOT)]  # pinwheel, and the local index the tests serve (tests.support.local_index)
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    base = args.keep or Path(tempfile.mkdtemp(prefix="pinwheel-scale-"))
    if args.keep:
        shutil.rmtree(base, ignore_errors=True)
    prepared: list[Size] = []
    try:
        load_before = os.getloadavg()
        for n in sizes:
            started = time.perf_counter()
            prepared.append(prepare(base, n, args.seed))
            s = prepared[-1]
            print(f"n={n}: {s.gen.wheels} wheels, {s.gen.requirements} requirements, "
                  f"{len(s.gen.no_deps)} no_deps, {len(s.gen.shared)} shared pins "
                  f"(generated in {time.perf_counter() - started:.1f}s)", file=sys.stderr)
        real = prepare_real(base) if args.real else None
        real_times: dict[str, dict[str, list[float]]] = {m: {"report": [], "uv": []} for m in METRICS}
        for c in ("report", "uv") if real else ():  # online first (fills both caches), then one offline run
            run_once(real, c, warm=True)
            run_once(real, c)
        for s in prepared:  # warm-up, untimed: caches filled from the index (online), bytecode written, a round
            for i, c in enumerate(("report", "uv", *ROUND)):
                run_once(s, c, warm=i < 2)
        times: dict[str, dict[str, dict[int, list[float]]]] = {
            m: {c: {n: [] for n in sizes} for c in COMMANDS} for m in METRICS}
        for r in range(args.runs):
            for s in prepared:
                for c in ROUND:
                    for m, value in zip(METRICS, run_once(s, c)):
                        times[m][c][s.n].append(value)
            for c in ("report", "uv") if real else ():
                for m, value in zip(METRICS, run_once(real, c)):
                    real_times[m][c].append(value)
            print(f"round {r + 1}/{args.runs} done", file=sys.stderr)
        load_after = os.getloadavg()
        packages = {s.n: _lock_count(s) for s in prepared}
    finally:
        for s in prepared:
            s.index.close()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    medians = {m: {c: {n: statistics.median(times[m][c][n]) for n in sizes} for c in COMMANDS} for m in METRICS}
    growth = {m: summarise(sizes, medians[m]) for m in METRICS}
    for m in METRICS:
        print_tables(sizes, m, medians[m], growth[m])
    real_doc = print_real(real, real_times, growth) if real else None
    print(f"\nload average {load_before[0]:.2f} before, {load_after[0]:.2f} after; {os.cpu_count()} cores")
    doc = {
        "bench": "scale", "runs": args.runs, "seed": args.seed, "sizes": sizes,
        "machine": {"cores": os.cpu_count(), "load_before": [round(x, 2) for x in load_before],
                    "load_after": [round(x, 2) for x in load_after], "python": platform.python_version()},
        "inputs": {str(s.n): {"wheels": s.gen.wheels, "requirements": s.gen.requirements,
                              "no_deps": len(s.gen.no_deps), "shared_pins": len(s.gen.shared),
                              "wheel_sets": math.ceil(s.n / SET_SIZE), "packages_locked": packages[s.n]}
                   for s in prepared},
        **{m: {
            "median_s": {c: {str(n): round(medians[m][c][n], 4) for n in sizes} for c in COMMANDS},
            "runs_s": {c: {str(n): [round(t, 4) for t in times[m][c][n]] for n in sizes} for c in COMMANDS},
            "ratio_to_uv": {c: {str(n): round(medians[m][c][n] / medians[m]["uv"][n], 3) for n in sizes}
                            for c in COMMANDS if c != "uv"},
            "growth": growth[m],
        } for m in METRICS},
        **({"real": real_doc} if real_doc else {}),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.json}", file=sys.stderr)
    if not args.no_plot:
        plot(sizes, medians, args.png, f"pinwheel: cost against manifest size (medians of {args.runs} interleaved "
                                       f"runs, {os.cpu_count()} cores, load average {load_before[0]:.1f})")
        print(f"wrote {args.png}", file=sys.stderr)
    return 0


def print_tables(sizes: list[int], metric: str, medians: dict[str, dict[int, float]], growth: dict) -> None:
    print(f"\n{metric} time, median (s)\n")
    print(f"| packages | {' | '.join(LABELS[c] for c in COMMANDS)} | report × uv | lock × uv |")
    print("|---|" + "---|" * (len(COMMANDS) + 2))
    for n in sizes:
        cells = " | ".join(f"{medians[c][n]:.3f}" for c in COMMANDS)
        print(f"| {n} | {cells} | {medians['report'][n] / medians['uv'][n]:.2f}× "
              f"| {medians['lock'][n] / medians['uv'][n]:.2f}× |")
    lo, hi = sizes[0], sizes[-1]
    steps = [f"{a}-{b}" for a, b in zip(sizes, sizes[1:])]
    print(f"\n| {metric} | log-log slope ({lo}..{hi}) | exponent of the part that grows | per package, {hi} vs {lo} "
          "| fit: fixed + per package | " + " | ".join(f"ms per added package, {st}" for st in steps) + " |")
    print("|---|---|---|---|---|" + "---|" * len(steps))
    for c in COMMANDS:
        g = growth[c]
        fit = g["linear_fit"]
        k = "flat" if g["variable_exponent"] is None else f"{g['variable_exponent']:.2f}"
        print(f"| {LABELS[c]} | {g['slope_log_log']:.2f} | {k} | {g['per_package_ratio']:.2f}× "
              f"| {fit['fixed_s']:.2f} s + {fit['ms_per_package']:.1f} ms | "
              + " | ".join(f"{g['marginal_ms_per_package'][st]:.1f}" for st in steps) + " |")


def print_real(real: RealInput, times: dict[str, dict[str, list[float]]], growth: dict) -> dict:
    """The miles input's medians against what each command's fit over the generated sizes predicts at its
    package count."""
    doc = {"packages_locked": real.n, "runs_s": times, "median_s": {}, "fit_s": {}}
    print(f"\nreal metadata: the miles input, {real.n} packages locked, against the fit at {real.n}\n")
    print("| metric | command | measured, median (s) | fit: fixed + per package × N (s) | measured / fit |")
    print("|---|---|---|---|---|")
    for m in METRICS:
        for c in ("report", "uv"):
            fit = growth[m][c]["linear_fit"]
            predicted = fit["fixed_s"] + fit["ms_per_package"] / 1000 * real.n
            med = statistics.median(times[m][c])
            doc["median_s"].setdefault(m, {})[c] = round(med, 4)
            doc["fit_s"].setdefault(m, {})[c] = round(predicted, 4)
            print(f"| {m} | {LABELS[c]} | {med:.3f} | {predicted:.3f} | {med / predicted:.2f}× |")
    return doc


def _lock_count(s: Size | RealInput, image: str = "scale") -> int:
    """How many packages the size's lock pins (the bench measures what it says)."""
    text = (s.manifest.parent / "images" / image / "lock" / "cu130" / "requirements.txt").read_text()
    return sum(1 for line in text.splitlines() if line and not line[0].isspace() and not line.startswith("#")
               and "==" in line)


if __name__ == "__main__":
    sys.exit(main())
