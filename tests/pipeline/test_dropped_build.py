"""The onnxscript class of accident on the real engine: a --no-deps package whose runtime requirement is not
in the image. The report is unclean and the build fails, naming both; declared with allow_missing, the
same image builds and the report and the build's invariant list it.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinwheel.image.engine import Engine

from tests.support.pipeline import LOCAL_WHEELS, Project, TLSIndex

pytestmark = pytest.mark.engine

ENGINE_SET = """
  - name: engine
    why: "the engine, installed without its declared requirements"
    packages:
      - requirement: "pw-engine==1.0.0"
        no_deps: true
        why: "its declared pw-core>=1.0 is the shared pin already; nothing else is wanted"{allow}
"""
ALLOW = """
        allow_missing:
          - {name: pw-onnx, why: "only its export path imports pw-onnx, and this image never exports"}"""


def with_engine(project: Project, allow: str) -> Project:
    text = project.manifest.read_text()
    project.manifest.write_text(text.replace("\n  - name: local\n", ENGINE_SET.format(allow=allow) + "\n  - name: local\n", 1))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    project.set_wheels(*LOCAL_WHEELS)
    return project


@pytest.fixture(scope="module")
def base_project(project_factory, tls_index: TLSIndex) -> Project:
    # pw-onnx is on no index: nothing can install it by accident
    tls_index.add("pw-engine", "1.0.0", requires=["pw-core>=1.0", "pw-onnx>=1.0"], payload_size=16)
    return project_factory("dropped")


def test_a_dropped_missing_requirement_is_unclean_and_fails_the_build(base_project: Project, tmp_path: Path):
    project = with_engine(base_project.copy(tmp_path / "missing"), allow="")
    report = project.cli("report", "--variant", "cu130", "--json")
    assert report.returncode == 1, report.output[-3000:]
    data = json.loads(report.stdout)
    assert data["summary"]["dropped_unmet"] == 1 and data["summary"]["verdict"] == "conflicts"
    assert [(d["package"], d["name"], d["allowed"]) for d in data["dropped_requirements"]
            if not d["allowed"]] == [("pw-engine", "pw-onnx", False)]
    assert json.loads((project.lock_dir / "expect.json").read_text())["dropped"]["pw-engine"] == {
        "requires": ["pw-core>=1.0", "pw-onnx>=1.0"], "allow_missing": {}}

    result = project.cli("build", "--variant", "cu130", "--quiet")
    assert result.returncode == 1, result.output[-3000:]
    assert ("pw-engine 1.0.0 is installed --no-deps and requires pw-onnx>=1.0, but pw-onnx is not installed"
            in result.stderr), result.stderr[-3000:]


def test_the_same_with_allow_missing_builds_and_lists_it(base_project: Project, tmp_path: Path, engine: Engine):
    project = with_engine(base_project.copy(tmp_path / "allowed"), allow=ALLOW)
    # (the test image's report has another finding of its own: pw-nodeps's suppressed pw-core==0.9.0 excludes
    # the shared pin; only the dropped requirements are judged here)
    data = json.loads(project.cli("report", "--variant", "cu130", "--json").stdout)
    assert data["summary"]["dropped_unmet"] == 0
    allowed = [d for d in data["dropped_requirements"] if d["package"] == "pw-engine"]
    assert [(d["name"], d["allowed"], d["why"]) for d in allowed] == [
        ("pw-onnx", True, "only its export path imports pw-onnx, and this image never exports")]
    text = project.cli("report", "--variant", "cu130").stdout
    assert "allowed: pw-engine 1.0.0 is installed --no-deps and requires pw-onnx>=1.0, but pw-onnx is not installed" in text

    built = project.cli("build", "--variant", "cu130", "--quiet", "--json", check=True)
    tag = json.loads(built.stdout)["tags"][0]
    run = engine.run(tag, ["sh", "-c", "python /opt/pinwheel/smoke_payload.pyz --expect /opt/pinwheel/expect.json "
                                       "--json /tmp/out.json >/dev/null && cat /tmp/out.json"])
    assert run.ok, run.stderr
    dropped = next(s for s in json.loads(run.stdout)["stages"] if s["name"] == "dropped")
    assert dropped["status"] == "passed"
    assert any("requires pw-onnx>=1.0, but pw-onnx is not installed; allowed: only its export path" in a
               for a in dropped["allowed"]), dropped
