"""The invariant step's `pip check`: only the requirements --no-deps drops on purpose may be broken."""
from __future__ import annotations

import json
import subprocess
import venv
from pathlib import Path

import pytest

from tests.support.payload_archive import PAYLOAD  # the zipapp the build ships


@pytest.fixture(scope="module")
def broken_env(tmp_path_factory):
    """A venv where `frontend` is installed --no-deps and its `helper>=1` is missing."""
    root = tmp_path_factory.mktemp("pipcheck")
    from tests.support.local_index import build_wheel

    wheels = [build_wheel(root, "frontend", "1.0", requires=["helper>=1", 'winhelper; sys_platform == "win32"']),
              build_wheel(root, "Needs_New", "1.0", requires=["frontend>=2"], extras={"x": ["helper"]})]
    env = root / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    python = env / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps", *map(str, wheels)], check=True)
    return python, root


def test_same_findings_as_pip_check(broken_env):
    python, root = broken_env
    proc = subprocess.run([str(python), "-m", "pip", "check"], capture_output=True, text=True)
    assert proc.returncode == 1
    _, stage = run(python, root, {})
    assert stage["checked_with"] == "pip's packaging"
    assert sorted(stage["unexpected"]) == sorted(proc.stdout.strip().splitlines())


def run(python: Path, root: Path, suppressed: dict, **more) -> tuple[int, dict]:
    expect = root / "expect.json"
    expect.write_text(json.dumps({"pins": {"frontend": "1.0"}, "suppressed": suppressed, **more}))
    out = root / "out.json"
    proc = subprocess.run([str(python), str(PAYLOAD), "--expect", str(expect), "--level", "static", "--check-pip",
                           "--json", str(out)], capture_output=True, text=True)
    doc = json.loads(out.read_text())
    return proc.returncode, next(s for s in doc["stages"] if s["name"] == "pip-check")


def test_suppressed_requirement_is_accepted(broken_env):
    python, root = broken_env
    rc, stage = run(python, root, {"frontend": ["helper>=1"], "needs-new": ["frontend>=2"]})
    assert rc == 0
    assert stage["status"] == "passed"
    assert sorted(stage["accepted_suppressed"]) == ["frontend 1.0 requires helper, which is not installed.",
                                                    "needs-new 1.0 has requirement frontend>=2, but you have frontend 1.0."]


def test_unexpected_broken_requirement_fails_the_build_step(broken_env):
    python, root = broken_env
    rc, stage = run(python, root, {"needs-new": ["frontend>=2"]})
    assert rc == 1
    assert stage["status"] == "failed"
    assert stage["unexpected"] == ["frontend 1.0 requires helper, which is not installed."]


def test_what_a_source_step_allows_unmet_is_accepted_and_nothing_else(broken_env):
    """A git or sdist step's package is in no lock slice, so its requirements are not `suppressed`; what its
    step's allow_missing names (expect.json's allowed_unmet) passes, and any other finding still fails."""
    python, root = broken_env
    rc, stage = run(python, root, {"needs-new": ["frontend>=2"]}, allowed_unmet={"frontend": {"helper": "why"}})
    assert (rc, stage["status"]) == (0, "passed")
    assert "frontend 1.0 requires helper, which is not installed." in stage["accepted_suppressed"]
    rc, stage = run(python, root, {}, allowed_unmet={"frontend": {"helper": "why"}})
    assert rc == 1 and stage["unexpected"] == ["needs-new 1.0 has requirement frontend>=2, but you have frontend 1.0."]
