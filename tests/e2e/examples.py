"""What the example images' end-to-end tests share: the CLI on an example's own manifest, the example built
with its stand-in wheels, and Python run inside the built image."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The modules that build on the sglang stand-in bases run one after the other (tests/support/scheduling.py):
# one removes a stand-in and builds it again while miles builds on it, and each reads a 10 GB stand-in's
# inventory through `docker save`, which on Docker 20.10 first writes the whole image to disk.
STAND_IN_BASES = "the sglang stand-in bases"


def tail(proc: subprocess.CompletedProcess) -> str:
    return f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"


class Example:
    """images/<name>/: its manifest, run from its own folder as a user would."""

    def __init__(self, name: str) -> None:
        self.dir = ROOT / "images" / name
        self.manifest = self.dir / "wheels_manifest.yaml"

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(ROOT / "build.py"), "--manifest", str(self.manifest), *args],
                              cwd=self.dir, capture_output=True, text=True, env={**os.environ, "COLUMNS": "300"})

    def build(self, variant: str = "cu130") -> str:
        """Its stand-in wheels written, then `build`: the first tag of the image."""
        standins = subprocess.run([sys.executable, str(ROOT / "scripts" / "standin-wheels"), str(self.dir)],
                                  capture_output=True, text=True)
        assert standins.returncode == 0, standins.stderr
        proc = self.cli("build", "--variant", variant, "--quiet", "--json")
        assert proc.returncode == 0, tail(proc)
        return json.loads(proc.stdout)["tags"][0]


def run_in(image: str, code: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "run", "--rm", "--entrypoint", "/usr/bin/python3", image, "-c", code],
                          capture_output=True, text=True, timeout=300)
