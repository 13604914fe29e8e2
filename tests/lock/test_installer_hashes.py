"""The two installers of a lock slice agree: `uv pip install` and `pip install`, each with --no-deps
--require-hashes, install a pinned, hashed requirement and not its dependencies, and refuse a wrong hash, a
missing one and an unpinned requirement, installing nothing. Real uv (the one pinwheel pins) and real pip,
into fresh venvs, against the local HTTP index.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pinwheel.lock.engines import _uv_bin


@pytest.fixture
def index(local_index):
    local_index.add("pwt-dep", "1.0")
    wheel = local_index.add("pwt-top", "1.0", requires=["pwt-dep>=1.0"])
    url = local_index.serve()
    return url, hashlib.sha256(wheel.read_bytes()).hexdigest()


def clean_env(tmp_path: Path) -> dict[str, str]:
    """No pip or uv configuration from this machine: only what the command line says."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update(PIP_CONFIG_FILE=os.devnull, UV_NO_CONFIG="1", UV_CACHE_DIR=str(tmp_path / "uv-cache"),
               PIP_NO_CACHE_DIR="1", UV_PYTHON_DOWNLOADS="never")
    return env


def install(installer: str, tmp_path: Path, url: str, requirements: str) -> tuple[subprocess.CompletedProcess, set]:
    venv = tmp_path / f"venv-{installer}"
    if not venv.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    req = tmp_path / "slice.txt"
    req.write_text(requirements)
    if installer == "uv":
        cmd = [_uv_bin(), "pip", "install", "--python", str(python), "--index-url", url]
    else:
        cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "--isolated",
               "--disable-pip-version-check", "--index-url", url]
    proc = subprocess.run([*cmd, "--no-deps", "--require-hashes", "-r", str(req)], capture_output=True, text=True,
                          env=clean_env(tmp_path), timeout=300)
    site = subprocess.run([str(python), "-c", "import importlib.metadata as m; "
                           "print('\\n'.join(d.metadata['Name'] for d in m.distributions()))"],
                          capture_output=True, text=True, check=True).stdout.split()
    return proc, {n for n in site if n.startswith("pwt-")}


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_a_hashed_pin_installs_without_its_dependencies(index, tmp_path, installer):
    url, sha = index
    proc, installed = install(installer, tmp_path, url, f"pwt-top==1.0 \\\n    --hash=sha256:{sha}\n")
    assert proc.returncode == 0, proc.stderr
    assert installed == {"pwt-top"}  # --no-deps: pwt-dep is not installed


@pytest.mark.parametrize("installer", ["uv", "pip"])
@pytest.mark.parametrize("case", ["tampered-hash", "no-hash", "unpinned"])
def test_a_slice_that_does_not_hold_is_refused_and_installs_nothing(index, tmp_path, installer, case):
    url, sha = index
    tampered = ("0" if sha[0] != "0" else "1") + sha[1:]
    text = {
        "tampered-hash": f"pwt-top==1.0 \\\n    --hash=sha256:{tampered}\n",
        "no-hash": f"pwt-top==1.0 \\\n    --hash=sha256:{sha}\npwt-dep==1.0\n",
        "unpinned": f"pwt-top>=1.0 \\\n    --hash=sha256:{sha}\n",
    }[case]
    proc, installed = install(installer, tmp_path, url, text)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert installed == set()
    said = (proc.stdout + proc.stderr).lower()
    if case == "tampered-hash":
        assert tampered in said and sha in said  # both name the expected and the actual digest
    else:
        assert "hash" in said or "pinned" in said or "==" in said
