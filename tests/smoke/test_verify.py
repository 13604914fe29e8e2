"""Per-package checks (manifest `verify:`, expect.json "verify"): cpu ones run at the static level (the
build's invariant), driver and gpu ones in the smoke; each result is its own stage; a skip is SKIPPED.

The payload runs as a subprocess against a fake site.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.payload_archive import PAYLOAD  # the zipapp the build ships


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("verify-site")
    info = site / "pwv_ffi-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pwv-ffi\nVersion: 1.0\n")
    (info / "RECORD").write_text("pwv_ffi/__init__.py,,\n")
    (site / "pwv_ffi").mkdir()
    (site / "pwv_ffi" / "__init__.py").write_text("def make_kwargs_wrapper(f, map_dataclass_to_tuple=False):\n"
                                                  "    return f\n")
    return site


def run(tmp_path: Path, site: Path, verify: dict, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    expect = tmp_path / "expect.json"
    expect.write_text(json.dumps({"pins": {}, "verify": verify}))
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "-S", str(PAYLOAD), "--expect", str(expect), "--site", str(site),
                           "--json", str(out), *args], capture_output=True, text=True, timeout=120)
    return proc, json.loads(out.read_text())


def stages(doc: dict) -> dict:
    return {(s["level"], s["name"]): s for s in doc["stages"] if s["name"].startswith("verify:")}


PASSING = {"import": ["pwv_ffi"], "python": "import inspect, pwv_ffi\n"
           "assert 'map_dataclass_to_tuple' in inspect.signature(pwv_ffi.make_kwargs_wrapper).parameters\n",
           "needs": "cpu"}


def test_a_passing_snippet_passes(tmp_path, site_dir):
    proc, doc = run(tmp_path, site_dir, {"pwv-ffi": PASSING}, "--check-imports")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert stages(doc)[("static", "verify:pwv-ffi")]["status"] == "passed"


def test_a_failing_snippet_fails_naming_the_package_and_last_line(tmp_path, site_dir):
    failing = {**PASSING, "python": "import pwv_ffi\nassert hasattr(pwv_ffi, 'MooncakeBundleTransfer'), 'no put/get'\n"}
    proc, doc = run(tmp_path, site_dir, {"pwv-ffi": failing})
    assert proc.returncode == 1
    s = stages(doc)[("static", "verify:pwv-ffi")]
    assert s["status"] == "failed"
    assert s["error"] == "pwv-ffi: verify (exit 1): AssertionError: no put/get"


def test_driver_and_gpu_checks_are_skipped_at_build_time_and_on_a_host_without_a_driver(tmp_path, site_dir):
    verify = {"pwv-ffi": {**PASSING, "needs": "driver"}, "pwv-gone": {"import": ["x"], "python": None, "needs": "gpu"}}
    proc, doc = run(tmp_path, site_dir, verify, "--check-imports")
    assert proc.returncode == 0
    got = stages(doc)
    assert {k: v["status"] for k, v in got.items()} == {("static", "verify:pwv-ffi"): "skipped",
                                                        ("static", "verify:pwv-gone"): "skipped"}
    assert "runs in the smoke's import level" in got[("static", "verify:pwv-ffi")]["reason"]
    proc, doc = run(tmp_path, site_dir, verify, "--level", "gpu")
    got = stages(doc)
    assert got[("import", "verify:pwv-ffi")]["status"] == "skipped"
    assert got[("gpu", "verify:pwv-gone")]["status"] == "skipped"
    assert doc["levels"]["import"]["status"] == "skipped"  # never passed


def test_the_driver_hook_runs_driver_checks_at_the_import_level(tmp_path, site_dir):
    expect = tmp_path / "expect.json"
    expect.write_text(json.dumps({"pins": {}, "verify": {"pwv-ffi": {**PASSING, "needs": "driver"}}}))
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "-S", str(PAYLOAD), "--expect", str(expect), "--site", str(site_dir),
                           "--level", "import", "--json", str(out)], capture_output=True, text=True, timeout=300,
                          env={"PINWHEEL_SMOKE_ASSUME_DRIVER": "1", "PATH": "/usr/bin:/bin"})
    doc = json.loads(out.read_text())
    assert stages(doc)[("import", "verify:pwv-ffi")]["status"] == "passed", proc.stdout
