"""An override on the real engine: a fake torch pins its cuDNN, the manifest installs a newer one with
`override: true`; the lock resolves it through uv's overrides, the report calls the edge overridden on purpose,
and the build's invariant (pip check) accepts exactly that edge and nothing else.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinwheel.image.engine import Engine

from tests.support.pipeline import LOCAL_WHEELS, Project, TLSIndex

pytestmark = pytest.mark.engine

WHY = "the cuDNN with the fix our kernels need; the framework runs on it"
OVERRIDE_SETS = f"""
  - name: framework
    why: "a framework that pins its cuDNN exactly"
    packages:
      - requirement: "pwo-torch==2.13.0"

  - name: cudnn
    why: "a newer cuDNN than the framework pins"
    packages:
      - requirement: "pwo-cudnn==9.22.0.52"
        override: true
        why: "{WHY}"
"""


@pytest.fixture(scope="module")
def project(project_factory, tls_index: TLSIndex) -> Project:
    tls_index.add("pwo-cudnn", "9.20.0.48", payload_size=16)
    tls_index.add("pwo-cudnn", "9.22.0.52", payload_size=16)
    tls_index.add("pwo-torch", "2.13.0", requires=["pwo-cudnn==9.20.0.48"], payload_size=16)
    project = project_factory("override")
    text = project.manifest.read_text()
    project.manifest.write_text(text.replace("\n  - name: local\n", OVERRIDE_SETS + "\n  - name: local\n", 1))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    project.set_wheels(*LOCAL_WHEELS)
    return project


def test_the_override_is_locked_reported_and_accepted_by_the_invariant(project: Project, engine: Engine):
    expect = json.loads((project.lock_dir / "expect.json").read_text())
    assert expect["pins"]["pwo-cudnn"] == "9.22.0.52"
    assert expect["overridden_edges"] == ["pwo-torch pwo-cudnn==9.20.0.48"]
    report = json.loads(project.cli("report", "--variant", "cu130", "--json").stdout)
    [edge] = [e for e in report["edges"] if e["parent"] == "pwo-torch"]
    assert edge["verdict"] == "overridden" and report["summary"]["edges"]["violated"] == 0
    assert edge["detail"].startswith("overridden on purpose: pwo-torch 2.13.0 requires pwo-cudnn==9.20.0.48")
    text = project.cli("report", "--variant", "cu130").stdout
    assert "overridden on purpose: pwo-torch 2.13.0 requires pwo-cudnn==9.20.0.48" in " ".join(text.split())

    built = project.cli("build", "--variant", "cu130", "--quiet", "--json", check=True)
    tag = json.loads(built.stdout)["tags"][0]
    run = engine.run(tag, ["sh", "-c", "python /opt/pinwheel/smoke_payload.pyz --expect /opt/pinwheel/expect.json "
                                       "--check-pip --json /tmp/out.json >/dev/null; cat /tmp/out.json"])
    assert run.ok, run.stderr
    check = next(s for s in json.loads(run.stdout)["stages"] if s["name"] == "pip-check")
    assert check["status"] == "passed", check
    assert check["accepted_overridden"] == [
        "pwo-torch 2.13.0 has requirement pwo-cudnn==9.20.0.48, but you have pwo-cudnn 9.22.0.52."]
    versions = engine.run(tag, ["python", "-c", "import importlib.metadata as m; print(m.version('pwo-cudnn'))"])
    assert versions.stdout.strip() == "9.22.0.52"


def test_an_edge_the_lock_does_not_name_fails_the_invariant(project: Project, tmp_path: Path):
    """The same image with expect.json naming no overridden edge: the build's pip check fails on it."""
    other = project.copy(tmp_path / "unnamed")
    path = other.lock_dir / "expect.json"
    expect = json.loads(path.read_text())
    expect["overridden_edges"] = []
    path.write_text(json.dumps(expect, indent=2, sort_keys=True) + "\n")
    result = other.cli("build", "--variant", "cu130", "--quiet")
    assert result.returncode == 1, result.output[-3000:]
    assert "pwo-torch 2.13.0 has requirement pwo-cudnn==9.20.0.48" in result.stderr, result.stderr[-3000:]
