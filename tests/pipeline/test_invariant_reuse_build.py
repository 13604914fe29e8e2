"""The invariant's reuse on the real engine: after the last wheel set's lock file changes, that step
runs again and the invariant reuses its earlier passing pip check and import check (the step installs only
a `needs: driver` package, which the CPU import check never imports, as the shipped image's last step
does); after a local wheel that an imported module loads is replaced by a broken build of the same
version, the import check runs afresh and fails the build naming it; `--fresh-checks` reuses nothing.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.local_index import build_wheel
from tests.support.pipeline import LOCAL_VERSION, LOCAL_WHEELS, Project, TLSIndex

pytestmark = pytest.mark.engine

DRIVER_SET = """
  - name: driver-kernel
    why: "a kernel whose extension needs the driver: the last step, as in the shipped image"
    packages:
      - requirement: "pw-drvkern==1.0.0"
        no_deps: true
        why: "its import loads the driver; it declares no requirements"
        needs: driver
        needs_why: "its extension links libpwdriver.so.1, which only a GPU host has"
"""
REUSED_IMPORTS = "modules passed (unchanged since a passing import at "
REUSED_PIP = "no unexpected findings (unchanged since a passing pip check at "
FRESH_IMPORTS = "modules imported on the CPU in "


@pytest.fixture(scope="module")
def project(project_factory, tls_index: TLSIndex, tmp_path_factory: pytest.TempPathFactory) -> Project:
    tls_index.add("pw-drvkern", "1.0.0", payload_size=16,
                  module_source="raise ImportError('libpwdriver.so.1: cannot open shared object file')\n")
    project = project_factory("reuse")
    project.manifest.write_text(project.manifest.read_text().rstrip("\n") + "\n" + DRIVER_SET)
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    project.set_wheels(*LOCAL_WHEELS)
    return project


def build(project: Project, *args: str):
    result = project.cli("build", "--variant", "cu130", *args)
    return result, result.output


def last_lock_file(project: Project) -> Path:
    _, _, plan = project.load()
    last = plan.steps[-1]
    assert last.name == "driver-kernel"
    files = sorted(project.lock_dir.glob(f"{last.index:02d}-{last.name}*.txt"))
    assert files, list(project.lock_dir.iterdir())
    return files[-1]


def test_unchanged_inputs_reuse_and_a_changed_wheel_checks_afresh(project: Project, tmp_path: Path):
    result, log = build(project)
    assert result.returncode == 0, log[-4000:]
    assert FRESH_IMPORTS in log and REUSED_IMPORTS not in log, log[-4000:]

    # the last step's lock file changed trivially (a hand edit is refused as a stale lock, so through the
    # manifest: its --no-deps why is a comment of the slice): that step installs pw-drvkern again, nothing it
    # touches is imported on the CPU, so both slow checks are reused, and say so
    lock = last_lock_file(project)
    before = lock.read_text()
    project.manifest.write_text(project.manifest.read_text().replace(
        "it declares no requirements", "it declares no requirements, and needs none"))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    assert last_lock_file(project).read_text() != before
    result, log = build(project)
    assert result.returncode == 0, log[-4000:]
    assert REUSED_IMPORTS in log and REUSED_PIP in log, log[-4000:]
    assert FRESH_IMPORTS not in log
    assert "cache key sha256:" in log

    # --fresh-checks: the same inputs, every check run again
    result, log = build(project, "--fresh-checks")
    assert result.returncode == 0, log[-4000:]
    assert FRESH_IMPORTS in log and REUSED_IMPORTS not in log and REUSED_PIP not in log, log[-4000:]

    # a local wheel the import check loads, rebuilt broken under the same name and version
    name = "pw-kern-fail"
    broken = build_wheel(tmp_path, name, LOCAL_VERSION, payload_size=16,
                         module_source="raise ImportError('libkern.so.2: cannot open shared object file')\n")
    project.local_wheels = {**project.local_wheels, name: broken}
    project.set_wheels(*LOCAL_WHEELS)
    result, log = build(project)
    assert result.returncode == 1, log[-4000:]
    assert REUSED_IMPORTS not in log
    assert ("pw-kern-fail: import pw_kern_fail: ImportError: libkern.so.2: cannot open shared object file"
            in log), log[-4000:]
