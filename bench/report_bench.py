#!/usr/bin/env python3
"""`report --offline` against `uv pip compile --offline` and `pip-compile` on the same cu130 input.

All tools are timed in one run on one machine, so the ratios are what counts.
Each tool is warmed once first (index pages and metadata cached), then timed
--runs times; the median is reported.

The headline row is the real evaluation: `report` with its answer memo dropped
before every run, so it reads the metadata cache, replays plain pip, judges
every edge and classifies the torch ABI each time. The memo row is `report`
answering from its memo.

    .venv/bin/python bench/report_bench.py [--runs 5] [--variant cu130] [--no-pip-compile]
"""
from __future__ import annotations

import argparse
import os
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
        for _ in range(args.runs):
            for name, (cmd, before) in rows.items():
                times[name] += timed_once(cmd, tmp, before)
    uv_median = statistics.median(times["uv pip compile --offline"])
    print(f"| tool | median of {args.runs} (s) | min (s) | × uv |")
    print("|---|---|---|---|")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"| {name} | {med:.2f} | {min(ts):.2f} | {med / uv_median:.2f}× |")
    return 0


# Python's bytecode cache on, as in any installed environment: the warm-up writes it, the timed runs read it.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed_once(cmd: list[str], cwd: Path, before=None) -> list[float]:
    if before:
        before()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=ENV)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):  # report exits 1 on conflicts, still a full run
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return [elapsed]


if __name__ == "__main__":
    sys.exit(main())
