"""Hostile manifests through the CLI: wall time and peak memory of `build.py report` refusing each,
against the peer in the same run: the same command refusing a one-line type error.

    python bench/manifest_bench.py          # writes bench/results/manifest.json and prints a table

Ratios, not absolute seconds, are the figures to compare across machines.
"""
from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOMB = "a: &a ['x','x','x','x','x','x','x','x','x']\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},"
    f"*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n" for i in range(8))
CASES = {
    "peer: a type error": "manifest_version: 1\nimage: 3\n",
    "alias bomb": "manifest_version: 1\n" + BOMB,
    "500-deep nesting": "manifest_version: 1\nimage: " + "[" * 500 + "]" * 500 + "\n",
    "50 MB file": "manifest_version: 1\n# " + "x" * (50 * 2**20) + "\n",
}


def run(path: Path, repeat: int = 5) -> tuple[float, int, int]:
    best, peak, code = float("inf"), 0, 0
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "--manifest", str(path), "report"],
                              capture_output=True, text=True)
        best = min(best, time.perf_counter() - start)
        peak = max(peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before)
        code = proc.returncode
    return best, peak, code


def main() -> int:
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in CASES.items():
            path = Path(tmp) / "wheels_manifest.yaml"
            path.write_text(text)
            rows[name] = run(path)
    peer = rows["peer: a type error"][0]
    out = {name: {"seconds": round(s, 3), "ratio_to_peer": round(s / peer, 2), "peak_rss_kib": rss, "exit": code}
           for name, (s, rss, code) in rows.items()}
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "manifest.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"{'case':24} {'seconds':>8} {'x peer':>7} {'peak MiB':>9} exit")
    for name, r in out.items():
        print(f"{name:24} {r['seconds']:8.3f} {r['ratio_to_peer']:7.2f} {r['peak_rss_kib'] / 1024:9.1f} {r['exit']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
