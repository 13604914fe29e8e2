"""A test of the real index that cannot reach it fails, saying so: it checked nothing, so it never skips."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the socket is: nothing listens there


def test_the_real_index_tests_fail_when_the_index_is_out_of_reach(tmp_path):
    env = {**os.environ, "PIP_INDEX_URL": f"http://127.0.0.1:{closed_port()}/simple/",
           "PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": "", "PINWHEEL_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                           "tests/index/test_index_network.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "the package index is not reachable, so this test of it checked nothing" in proc.stdout
    assert " skipped" not in proc.stdout.splitlines()[-1]
