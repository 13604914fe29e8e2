"""The build-time CPU import check on the real engine: a package whose import fails fails the build,
naming the distribution and the module; marked `needs: driver`, the same image builds and its modules
are SKIPPED with the reason. The import step's cost on the test image is printed (-s shows it).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinwheel.image.engine import Engine

from tests.support.pipeline import LOCAL_WHEELS, Project, TLSIndex

pytestmark = pytest.mark.engine

GPU_SET = """
  - name: gpu-only
    why: "a kernel package whose extension needs the driver"
    packages:
      - requirement: "pw-gpuonly==1.0.0"
        why: "its import loads the driver"{needs}
"""
NEEDS = """
        needs: driver
        needs_why: "its extension links libpwdriver.so.1, which only a GPU host has\""""


def with_gpu_set(project: Project, needs: str) -> Project:
    text = project.manifest.read_text()
    project.manifest.write_text(text.replace("\n  - name: local\n", GPU_SET.format(needs=needs) + "\n  - name: local\n", 1))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    project.set_wheels(*LOCAL_WHEELS)
    return project


@pytest.fixture(scope="module")
def base_project(project_factory, tls_index: TLSIndex) -> Project:
    tls_index.add("pw-gpuonly", "1.0.0", payload_size=16,
                  module_source="raise ImportError('libpwdriver.so.1: cannot open shared object file: "
                                "No such file or directory')\n")
    return project_factory("imports")


def test_a_failing_import_fails_the_build_naming_distribution_and_module(base_project: Project, tmp_path: Path):
    project = with_gpu_set(base_project.copy(tmp_path / "fails"), needs="")
    result = project.cli("build", "--variant", "cu130", "--quiet")
    assert result.returncode == 1, result.output[-3000:]
    assert ("pw-gpuonly: import pw_gpuonly: ImportError: libpwdriver.so.1: cannot open shared object file: "
            "No such file or directory") in result.stderr, result.stderr[-3000:]


def test_needs_driver_skips_it_with_its_reason(base_project: Project, tmp_path: Path, engine: Engine):
    project = with_gpu_set(base_project.copy(tmp_path / "skips"), needs=NEEDS)
    assert json.loads((project.lock_dir / "expect.json").read_text())["import_skip"] == {
        "pw-gpuonly": "needs: driver: its extension links libpwdriver.so.1, which only a GPU host has"}
    built = project.cli("build", "--variant", "cu130", "--quiet", "--json", check=True)
    tag = json.loads(built.stdout)["tags"][0]
    run = engine.run(tag, ["sh", "-c", "python /opt/pinwheel/smoke_payload.pyz --expect /opt/pinwheel/expect.json "
                                       "--check-imports --json /tmp/out.json >/dev/null && cat /tmp/out.json"])
    assert run.ok, run.stderr
    imports = next(s for s in json.loads(run.stdout)["stages"] if s["name"] == "imports")
    assert imports["status"] == "passed", imports
    assert imports["skipped"] == [{"distribution": "pw-gpuonly", "modules": ["pw_gpuonly"],
                                   "reason": "needs: driver: its extension links libpwdriver.so.1, which only a GPU "
                                             "host has"}]
    # every other distribution's modules were imported: the pw-* packages, pip and setuptools of the venv
    assert imports["imported"] >= 8
    print(f"\nCPU import step on the pipeline test image: {imports['imported']} modules, "
          f"{imports['seconds']:.2f} s, {imports['processes']} process(es); "
          f"failed only after others: {imports['failed_only_after_others']}")
