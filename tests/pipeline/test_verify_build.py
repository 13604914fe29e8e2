"""Per-package checks on the real engine: a `verify.python` snippet (needs: cpu) runs in the build's
invariant; one that fails fails the build naming the package and its error, one that passes is in the
invariant's JSON as passed.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinwheel.image.engine import Engine

from tests.support.pipeline import LOCAL_WHEELS, Project

pytestmark = pytest.mark.engine

TOP = '      - requirement: "pw-top==2.0.0"\n'
VERIFY = TOP + """        verify:
          import: [pw_top]
          python: "import pw_top; assert pw_top.__version__ == {want!r}, 'pw_top is ' + pw_top.__version__"
"""


def with_verify(project: Project, want: str) -> Project:
    text = project.manifest.read_text()
    assert text.count(TOP) == 1
    project.manifest.write_text(text.replace(TOP, VERIFY.format(want=want)))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    project.set_wheels(*LOCAL_WHEELS)
    return project


@pytest.fixture(scope="module")
def base_project(project_factory) -> Project:
    return project_factory("verify")


def test_a_failing_verify_snippet_fails_the_build(base_project: Project, tmp_path: Path):
    project = with_verify(base_project.copy(tmp_path / "fails"), want="9.9.9")
    result = project.cli("build", "--variant", "cu130", "--quiet")
    assert result.returncode == 1, result.output[-3000:]
    assert "pw-top: verify (exit 1): AssertionError: pw_top is 2.0.0" in result.stderr, result.stderr[-3000:]


def test_a_passing_verify_snippet_passes(base_project: Project, tmp_path: Path, engine: Engine):
    project = with_verify(base_project.copy(tmp_path / "passes"), want="2.0.0")
    assert json.loads((project.lock_dir / "expect.json").read_text())["verify"]["pw-top"]["needs"] == "cpu"
    built = project.cli("build", "--variant", "cu130", "--quiet", "--json", check=True)
    tag = json.loads(built.stdout)["tags"][0]
    run = engine.run(tag, ["sh", "-c", "python /opt/pinwheel/smoke_payload.pyz --expect /opt/pinwheel/expect.json "
                                       "--check-imports --json /tmp/out.json >/dev/null && cat /tmp/out.json"])
    assert run.ok, run.stderr
    verify = next(s for s in json.loads(run.stdout)["stages"] if s["name"] == "verify:pw-top")
    assert verify["status"] == "passed" and verify["imports"] == ["pw_top"]
