#!/usr/bin/env python3
"""`report` against `uv pip compile` (and `pip-compile`) on the same input, in three cache states.

Inputs (--input, one or more, comma-separated; each in a scratch directory of its own, one after the other):
- shipped: the shipped manifest's cu130 variant;
- miles: bench/miles/wheels_manifest.yaml, a real-size manifest shaped like the miles training image (about
  200 packages of real metadata from the index, extras, markers, shared pins, `--no-deps` sets). It is copied
  into a scratch directory and locked there once (online, untimed), so `report` judges a locked set.
- miles-cu13: the miles example itself (images/miles-cu13/), judged in place with its committed lock and base
  inventory (its stand-in wheels written first); uv gets that lock's own requirements, constraints and
  overrides, with the base's packages as preferences, as `lock` gives them.

Both tools get the manifest's index packages as requirements and its shared, `--no-deps` and fallback pins as
constraints, and each keeps its cache in the scratch directory (PINWHEEL_CACHE_DIR, uv's --cache-dir), so the
states are the bench's own. The index is pip's configured one. States (--states):
- warm: `--offline`, everything cached and parsed. pinwheel's headline row drops its answer memo before each
  run, so it reads the metadata cache, replays plain pip, judges every edge and classifies the torch ABI; the
  memo row answers from the memo. (uv has no answer memo.)
- after-online: the first `--offline` run after an online one (each timed run follows an untimed online run
  of the same tool; pinwheel's online run revalidates and so rewrites every page it read);
- cold: online with an empty cache on both sides (each tool's cold rows have a cache of their own, removed
  before each run, so the other states' caches stay warm).

A timed run must be a whole one: an offline report that could not read its cache (could-not-judge), or a uv
run that failed, stops the bench instead of being timed.

All rows are timed in one run of this program, interleaved (one of each row per round), so a slow moment of
the machine falls on every row alike; each row gives the median wall time and the median CPU time (user and
system of the command and its children; uv runs threads, so its CPU can exceed its wall time). Python's
bytecode cache is on, as in any installed environment.

    .venv/bin/python bench/report_bench.py [--input shipped,miles] [--states warm,after-online,cold]
                                           [--runs 5] [--variant cu130] [--pip-compile] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pinwheel import manifest  # noqa: E402
from pinwheel.index import default_index_url  # noqa: E402
from pinwheel.plan import plan_variant  # noqa: E402

INPUTS = {"shipped": ROOT / "wheels_manifest.yaml", "miles": ROOT / "bench" / "miles" / "wheels_manifest.yaml",
          "miles-cu13": ROOT / "images" / "miles-cu13" / "wheels_manifest.yaml"}
# Inputs judged where they are, with their committed locks: uv gets what `lock` gave it (the lock folder's
# requirements.in, constraints.txt and overrides.txt) and the base's packages as preferences, as `lock` does.
IN_PLACE = {"shipped", "miles-cu13"}
STATES = ("warm", "after-online", "cold")
# Python's bytecode cache on, as in any installed environment: the warm-up writes it, the timed runs read it.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def lock_folder_inputs(manifest_path: Path, variant: str, tmp: Path) -> list[str]:
    """uv's arguments for an example judged in place: its lock's own inputs, and its base's packages (its
    committed inventory) as preferences in the output file uv starts from."""
    lock = manifest_path.parent / "lock" / variant
    args = ["-c", str(lock / "constraints.txt"), str(lock / "requirements.in")]
    if (lock / "overrides.txt").exists():
        args[:0] = ["--override", str(lock / "overrides.txt")]
    inventory = manifest_path.parent / "inventory" / f"{variant}.json"
    if inventory.exists():
        dists = json.loads(inventory.read_text())["distributions"]
        (tmp / "uv.txt").write_text("".join(f"{d['name']}=={d['version']}\n" for d in dists
                                            if "dist-packages" in d["site"] or "site-packages" in d["site"]))
    return args


def inputs(manifest_path: Path, variant: str, tmp: Path) -> tuple[Path, Path]:
    plan = plan_variant(manifest.load(manifest_path), variant)
    reqs = [p.requirement for p in plan.packages() if not p.no_deps and not p.local]
    cons = [f"{n}=={v}" for n, v in plan.shared_pins.items()]
    cons += [p.pinned for p in plan.packages() if p.no_deps]
    cons += [p.fallback.pinned for p in plan.packages() if p.fallback]
    (tmp / "requirements.in").write_text("\n".join(reqs) + "\n")
    (tmp / "constraints.txt").write_text("\n".join(sorted(set(cons))) + "\n")
    return tmp / "requirements.in", tmp / "constraints.txt"


class Bench:
    """The commands of one input, with their caches in one scratch directory."""

    def __init__(self, args: argparse.Namespace, tmp: Path):
        self.tmp, self.py = tmp, sys.executable
        self.pw_cache, self.uv_cache = tmp / "pinwheel-cache", tmp / "uv-cache"
        self.env = dict(ENV, PINWHEEL_CACHE_DIR=str(self.pw_cache))
        # the cold rows have caches of their own, so that emptying them leaves the warm ones warm
        self.pw_cold, self.uv_cold = tmp / "pinwheel-cache-cold", tmp / "uv-cache-cold"
        self.cold_env = dict(ENV, PINWHEEL_CACHE_DIR=str(self.pw_cold))
        source, self.in_place = INPUTS[args.input], args.input in IN_PLACE
        if self.in_place:
            self.manifest = source  # its lock is committed beside it
        else:
            self.manifest = tmp / "project" / "wheels_manifest.yaml"
            self.manifest.parent.mkdir()
            shutil.copy(source, self.manifest)
        req, con = inputs(self.manifest, args.variant, tmp)
        uv_inputs = (lock_folder_inputs(self.manifest, args.variant, tmp) if args.input in IN_PLACE - {"shipped"}
                     else ["-c", str(con), str(req)])
        index = default_index_url()
        self.report = [self.py, str(ROOT / "build.py"), "--manifest", str(self.manifest), "report",
                       "--variant", args.variant, "--platform", "linux/amd64", "--json"]  # one platform, as uv
        self.uv = [str(Path(self.py).parent / "uv"), "pip", "compile", "--quiet", "--python-version", "3.11",
                   "--index-url", index, "--cache-dir", str(self.uv_cache), *uv_inputs,
                   "-o", str(tmp / "uv.txt")]
        self.uv_cold_cmd = [str(self.uv_cold) if c == str(self.uv_cache) else c for c in self.uv]
        self.pip_compile = [str(Path(self.py).parent / "pip-compile"), "--quiet", "--no-header", "--index-url",
                            index, "-c", str(con), str(req), "-o", str(tmp / "pc.txt")]
        self.variant = args.variant

    def fill(self) -> None:
        """Online runs of both tools (and the lock of a copied manifest), so that --offline can answer."""
        if not self.in_place:
            run_checked([self.py, str(ROOT / "build.py"), "--manifest", str(self.manifest), "lock",
                         "--variant", self.variant, "--resolver", "uv"], self)
        elif (self.manifest.parent / "standins.yaml").exists():  # its local wheels, as `make report` writes them
            run_checked([self.py, str(ROOT / "scripts" / "standin-wheels"), str(self.manifest.parent)], self)
        run_checked(self.report, self)
        run_checked(self.uv, self)

    def drop_memo(self) -> None:
        shutil.rmtree(self.pw_cache / "index" / "memo", ignore_errors=True)

    def after_online(self) -> None:
        """An online report that reads every page (its memo dropped, or it would answer from it), then the memo
        dropped again, so that the offline run evaluates."""
        self.drop_memo()
        run_checked(self.report, self)
        self.drop_memo()

    def empty_cold_caches(self) -> None:
        # The whole cache: index pages, METADATA, the parsed store, memos, ABI results and the wheels read for them.
        shutil.rmtree(self.pw_cold, ignore_errors=True)
        shutil.rmtree(self.uv_cold, ignore_errors=True)

    def rows(self, states: list[str], with_pip_compile: bool) -> dict[str, tuple[list[str], object, dict]]:
        """name -> (command, what to do untimed before each run, its environment)."""
        offline_report, offline_uv, env = self.report + ["--offline"], self.uv + ["--offline"], self.env
        rows: dict[str, tuple[list[str], object, dict]] = {}
        if "warm" in states:
            rows["warm: pinwheel report --offline --json, memo dropped"] = (offline_report, self.drop_memo, env)
            rows["warm: uv pip compile --offline"] = (offline_uv, None, env)
            rows["warm: pinwheel report --offline --json, memo warm"] = (offline_report, None, env)
            if with_pip_compile:
                rows["warm: pip-compile"] = (self.pip_compile, None, env)
        if "after-online" in states:
            rows["after-online: pinwheel report --offline --json"] = (offline_report, self.after_online, env)
            rows["after-online: uv pip compile --offline"] = (offline_uv, lambda: run_checked(self.uv, self), env)
        if "cold" in states:
            rows["cold: pinwheel report --json"] = (self.report, self.empty_cold_caches, self.cold_env)
            rows["cold: uv pip compile"] = (self.uv_cold_cmd, self.empty_cold_caches, env)
        return rows


def run_checked(cmd: list[str], bench: Bench) -> None:
    check(cmd, subprocess.run(cmd, cwd=bench.tmp, capture_output=True, text=True, env=bench.env))


def check(cmd: list[str], proc: subprocess.CompletedProcess) -> None:
    """A timed run must be a whole one: report may exit 1 (conflicts) or 3 (unchecked requirements), but not
    for a cache it could not read (an offline run on an empty cache answers could-not-judge quickly); uv 0."""
    ok = (0,) if cmd[0].endswith("uv") else (0, 1, 3)
    if proc.returncode not in ok or '"could_not_judge"' in proc.stdout:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed_once(cmd: list[str], bench: Bench, before=None, env: dict | None = None) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of cmd; `before` runs untimed first."""
    if before:
        before()
    cpu_before = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=bench.tmp, capture_output=True, text=True, env=env or bench.env)
    elapsed = time.perf_counter() - start
    check(cmd, proc)
    return elapsed, _children_cpu() - cpu_before


def measure(rows: dict, bench: Bench, runs: int) -> dict[str, dict[str, list[float]]]:
    for cmd, before, env in rows.values():  # warm-up: bytecode, and each state's own preparation
        timed_once(cmd, bench, before, env)
    got = {name: {"wall": [], "cpu": []} for name in rows}
    for _ in range(runs):  # interleaved by run, so a slow moment of the machine is shared by every row
        for name, (cmd, before, env) in rows.items():
            wall, used = timed_once(cmd, bench, before, env)
            got[name]["wall"].append(wall)
            got[name]["cpu"].append(used)
    return got


def print_table(results: dict[str, dict[str, dict[str, list[float]]]], runs: int) -> None:
    print(f"| input | state: tool | wall, median of {runs} (s) | min (s) | × uv, wall | CPU median (s) | × uv, CPU |")
    print("|---|---|---|---|---|---|---|")
    for input_name, got in results.items():
        for name, t in got.items():
            state = name.split(":")[0]
            uv = next(v for k, v in got.items() if k.startswith(state + ": uv"))
            med, cmed = statistics.median(t["wall"]), statistics.median(t["cpu"])
            uv_med, uv_cmed = statistics.median(uv["wall"]), statistics.median(uv["cpu"])
            print(f"| {input_name} | {name} | {med:.2f} | {min(t['wall']):.2f} | {med / uv_med:.2f}× | {cmed:.3f} | "
                  f"{cmed / uv_cmed:.2f}× |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default="shipped", help=f"comma-separated, of: {', '.join(sorted(INPUTS))}")
    ap.add_argument("--states", default="warm", help=f"comma-separated, of: {', '.join(STATES)}")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--variant", default="cu130")
    ap.add_argument("--pip-compile", action="store_true", help="add the slow pip-compile row (warm)")
    ap.add_argument("--json", type=Path, help="write every run's figures here")
    args = ap.parse_args()
    states = [s for s in args.states.split(",") if s]
    if not states or set(states) - set(STATES):
        ap.error(f"--states takes {', '.join(STATES)}")
    names = [n for n in args.input.split(",") if n]
    if not names or set(names) - set(INPUTS):
        ap.error(f"--input takes {', '.join(sorted(INPUTS))}")
    results, clock = {}, []
    for name in names:  # one input after the other, each in a scratch directory of its own
        clock.append({"input": name, "start": time.strftime("%H:%M:%S", time.gmtime()), "load": os.getloadavg()[0]})
        with tempfile.TemporaryDirectory() as t:
            bench = Bench(argparse.Namespace(**{**vars(args), "input": name}), Path(t))
            bench.fill()
            results[name] = measure(bench.rows(states, args.pip_compile), bench, args.runs)
        clock[-1].update(end=time.strftime("%H:%M:%S", time.gmtime()), end_load=os.getloadavg()[0])
    print_table(results, args.runs)
    for c in clock:
        print(f"{c['input']}: {c['start']}–{c['end']} UTC, load average {c['load']:.1f} to {c['end_load']:.1f}")
    if args.json:
        args.json.write_text(json.dumps({"inputs": results, "clock": clock}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
