#!/usr/bin/env python3
"""`report --offline` against `uv pip compile --offline` and `pip-compile` on the same cu130 input.

All tools are timed in one run on one machine, so the ratios are what counts.
Each tool is warmed once first (index pages and metadata cached), then timed
--runs times; the median is reported, in wall time and in CPU time (user and
system, of the command and its children). CPU time is what a loaded machine
disturbs least; uv runs threads, so its CPU time can exceed its wall time.

The headline row is the real evaluation: `report` with its answer memo dropped
before every run, so it reads the metadata cache, replays plain pip, judges
every edge and classifies the torch ABI each time. The memo row is `report`
answering from its memo.

    .venv/bin/python bench/report_bench.py [--runs 5] [--variant cu130] [--no-pip-compile]
"""
from __future__ import annotations

import argparse
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
from pinwheel.workspace import Workspace  # noqa: E402

MANIFEST = ROOT / "wheels_manifest.yaml"


def inputs(variant: str, tmp: Path) -> tuple[Path, Path]:
    plan = plan_variant(manifest.load(MANIFEST), variant)
    reqs = [p.requirement for p in plan.packages() if not p.no_deps and not p.local]
    cons = [f"{n}=={v}" for n, v in plan.shared_pins.items()]
    cons += [p.pinned for p in plan.packages() if p.no_deps]
    cons += [p.fallback.pinned for p in plan.packages() if p.fallback]
    (tmp / "requirements.in").write_text("\n".join(reqs) + "\n")
    (tmp / "constraints.txt").write_text("\n".join(sorted(set(cons))) + "\n")
    return tmp / "requirements.in", tmp / "constraints.txt"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--variant", default="cu130")
    ap.add_argument("--no-pip-compile", action="store_true", help="leave out the slow pip-compile row")
    args = ap.parse_args()
    py = sys.executable
    bindir = Path(py).parent
    index = default_index_url()
    memo = Workspace.of(manifest.load(MANIFEST)).index_cache / "memo"  # where the report's answers are kept
    report = [py, str(ROOT / "build.py"), "--manifest", str(MANIFEST), "report", "--variant", args.variant,
              "--platform", "linux/amd64", "--offline"]  # one platform, as its peers resolve
    uv = [str(bindir / "uv"), "pip", "compile", "--offline", "--quiet", "--python-version", "3.11",
          "--index-url", index]
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        req, con = inputs(args.variant, tmp)
        uv += ["-c", str(con), str(req), "-o", str(tmp / "uv.txt")]
        # uv needs one online run to fill its cache before --offline can work.
        subprocess.run([c for c in uv if c != "--offline"], cwd=tmp, check=True, capture_output=True)

        def drop_memo() -> None:
            shutil.rmtree(memo, ignore_errors=True)

        rows = {
            "pinwheel report --offline --json, memo dropped": (report + ["--json"], drop_memo),
            "uv pip compile --offline": (uv, None),
            "pinwheel report --offline --json, memo warm": (report + ["--json"], None),
            "pinwheel report --offline (text), memo dropped": (report, drop_memo),
        }
        if not args.no_pip_compile:
            rows["pip-compile"] = ([str(bindir / "pip-compile"), "--quiet", "--no-header", "--index-url", index,
                                    "-c", str(con), str(req), "-o", str(tmp / "pc.txt")], None)
        # Interleaved by run, so a slow moment of the machine is shared by every row.
        for cmd, before in rows.values():
            subprocess.run(cmd, cwd=tmp, capture_output=True, env=ENV)  # warm-up (report exits 1 on conflicts)
        times: dict[str, list[float]] = {name: [] for name in rows}
        cpu: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.runs):
            for name, (cmd, before) in rows.items():
                wall, used = timed_once(cmd, tmp, before)
                times[name].append(wall)
                cpu[name].append(used)
    uv = "uv pip compile --offline"
    uv_median, uv_cpu = statistics.median(times[uv]), statistics.median(cpu[uv])
    print(f"| tool | median of {args.runs} (s) | min (s) | × uv | CPU median (s) | CPU × uv |")
    print("|---|---|---|---|---|---|")
    for name, ts in times.items():
        med, cmed = statistics.median(ts), statistics.median(cpu[name])
        print(f"| {name} | {med:.2f} | {min(ts):.2f} | {med / uv_median:.2f}× | {cmed:.3f} | {cmed / uv_cpu:.2f}× |")
    return 0


# Python's bytecode cache on, as in any installed environment: the warm-up writes it, the timed runs read it.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed_once(cmd: list[str], cwd: Path, before=None) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of cmd."""
    if before:
        before()
    cpu_before = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=ENV)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):  # report exits 1 on conflicts, still a full run
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return elapsed, _children_cpu() - cpu_before


if __name__ == "__main__":
    sys.exit(main())
