#!/usr/bin/env python3
"""Warm `report` against `uv pip compile --offline` and `pip-compile` on the same cu130 input.

All three are timed in one run on one machine, so the ratios are what counts.
Each tool is warmed once first (index pages and metadata cached), then timed
--runs times; the median is reported.

    .venv/bin/python bench/report_bench.py [--runs 5] [--variant cu130]
"""
from __future__ import annotations

import argparse
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


def inputs(variant: str, tmp: Path) -> tuple[Path, Path]:
    plan = plan_variant(manifest.load(ROOT / "wheels_manifest.yaml"), variant)
    reqs = [p.requirement for p in plan.packages() if not p.no_deps and not p.local]
    cons = [f"{n}=={v}" for n, v in plan.shared_pins.items()]
    cons += [p.pinned for p in plan.packages() if p.no_deps]
    cons += [p.fallback.pinned for p in plan.packages() if p.fallback]
    (tmp / "requirements.in").write_text("\n".join(reqs) + "\n")
    (tmp / "constraints.txt").write_text("\n".join(sorted(set(cons))) + "\n")
    return tmp / "requirements.in", tmp / "constraints.txt"


MEMO = ROOT / ".cache" / "index" / "memo"


def timed(cmd: list[str], runs: int, cwd: Path, before=None) -> list[float]:
    subprocess.run(cmd, cwd=cwd, capture_output=True)  # warm-up (report exits 1 on conflicts)
    times = []
    for _ in range(runs):
        if before:
            before()
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if proc.returncode not in (0, 1):  # report exits 1 on conflicts, still a full run
            raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--variant", default="cu130")
    args = ap.parse_args()
    py = sys.executable
    bindir = Path(py).parent
    index = default_index_url()
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        req, con = inputs(args.variant, tmp)
        peers = {
            "pinwheel report (warm, --offline)": [py, str(ROOT / "build.py"), "--manifest", str(ROOT / "wheels_manifest.yaml"),
                                                  "report", "--variant", args.variant, "--platform", "linux/amd64",
                                                  "--offline", "--json"],  # one platform, as its peers resolve
            "uv pip compile --offline": [str(bindir / "uv"), "pip", "compile", "--offline", "--quiet", "--python-version",
                                         "3.11", "--index-url", index, "-c", str(con), str(req), "-o", str(tmp / "uv.txt")],
            "pip-compile": [str(bindir / "pip-compile"), "--quiet", "--no-header", "--index-url", index, "-c", str(con),
                            str(req), "-o", str(tmp / "pc.txt")],
        }
        # uv needs one online run to fill its cache before --offline can work.
        subprocess.run([c for c in peers["uv pip compile --offline"] if c != "--offline"], cwd=tmp, check=True,
                       capture_output=True)
        results = {name: timed(cmd, args.runs, tmp) for name, cmd in peers.items()}
        # The same report with only the metadata cache warm: its resolution memo dropped before each run.
        results["pinwheel report (metadata cache only)"] = timed(
            peers["pinwheel report (warm, --offline)"], args.runs, tmp, before=lambda: shutil.rmtree(MEMO, ignore_errors=True))
    base = statistics.median(results["pinwheel report (warm, --offline)"])
    print(f"| tool | median of {args.runs} (s) | min (s) | × pinwheel report |")
    print("|---|---|---|---|")
    for name, times in results.items():
        med = statistics.median(times)
        print(f"| {name} | {med:.2f} | {min(times):.2f} | {med / base:.1f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
