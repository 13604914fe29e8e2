#!/usr/bin/env python3
"""`make bench`: the build benchmark (bench/build_bench.py), results kept under bench/results/."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build_bench import main  # noqa: E402

if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    sys.exit(main(["--json", str(here / "results" / "build_bench.json"), *sys.argv[1:]]))
