"""The invariant on what --no-deps drops: each base requirement (expect.json "dropped") is met in the image,
or the manifest allows it to stay unmet (allow_missing, with its why); anything else fails the build step.

The payload runs as a subprocess against a fake site: hand-written dist-info directories added with --site.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.payload_archive import PAYLOAD  # the zipapp the build ships

# name, version: what the "image" holds after its last step
SITE = [("engine", "2.0"), ("helper", "1.5"), ("torchlike", "2.13.0"), ("kernel", "1.0")]


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dropped-site")
    for name, version in SITE:
        info = root / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "RECORD").write_text("")
    return root


def run(tmp_path: Path, site: Path, dropped: dict) -> tuple[subprocess.CompletedProcess, dict]:
    expect_path = tmp_path / "expect.json"
    expect_path.write_text(json.dumps({"pins": {}, "suppressed": {}, "dropped": dropped}))
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, str(PAYLOAD), "--expect", str(expect_path), "--level", "static",
                           "--site", str(site), "--json", str(out)], capture_output=True, text=True, timeout=120)
    return proc, json.loads(out.read_text())


def stage(doc: dict) -> dict:
    return next(s for s in doc["stages"] if s["name"] == "dropped")


def test_met_requirements_pass(tmp_path, site_dir):
    proc, doc = run(tmp_path, site_dir, {"engine": {"requires": ["helper>=1,<2", "torchlike"], "allow_missing": {}}})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    s = stage(doc)
    assert (s["status"], s["met"], s["allowed"]) == ("passed", 2, [])
    assert "static/dropped: 2 dropped base requirement(s) met" in proc.stdout


def test_a_missing_requirement_fails_naming_package_and_requirement(tmp_path, site_dir):
    proc, doc = run(tmp_path, site_dir, {"engine": {"requires": ["helper>=1", "onnxlike>=0.1"], "allow_missing": {}}})
    assert proc.returncode == 1
    s = stage(doc)
    assert s["status"] == "failed"
    assert s["error"] == ("engine 2.0 is installed --no-deps and requires onnxlike>=0.1, but onnxlike is not "
                          "installed: add a package that provides it, or declare allow_missing for onnxlike on "
                          "engine in the manifest")
    assert "[   FAIL] static/dropped: engine 2.0 is installed --no-deps and requires onnxlike>=0.1" in proc.stdout


def test_a_wrong_version_fails_too(tmp_path, site_dir):
    proc, doc = run(tmp_path, site_dir, {"kernel": {"requires": ["torchlike>=2.14.1"], "allow_missing": {}}})
    assert proc.returncode == 1
    assert "but torchlike 2.13.0 is installed" in stage(doc)["error"]


def test_allowed_unmet_requirements_pass_and_are_listed(tmp_path, site_dir):
    proc, doc = run(tmp_path, site_dir, {
        "kernel": {"requires": ["torchlike>=2.14.1"], "allow_missing": {"torchlike": "stable ABI build"}},
        "engine": {"requires": ["Onnx_Like"], "allow_missing": {"onnx-like": "only its export path uses it"}},
    })
    assert proc.returncode == 0, proc.stdout + proc.stderr
    s = stage(doc)
    assert s["status"] == "passed"
    assert s["allowed"] == [
        "engine 2.0 is installed --no-deps and requires Onnx_Like, but onnx-like is not installed; "
        "allowed: only its export path uses it",
        "kernel 1.0 is installed --no-deps and requires torchlike>=2.14.1, but torchlike 2.13.0 is installed; "
        "allowed: stable ABI build",
    ]
    assert s["packages"]["kernel"]["requires"] == [
        {"requirement": "torchlike>=2.14.1", "found": "2.13.0", "ok": False, "allowed": True, "why": "stable ABI build"}]


def test_a_package_that_is_not_installed_has_nothing_to_check(tmp_path, site_dir):
    """A fallback whose local wheel was present: its requirements are not the image's."""
    proc, doc = run(tmp_path, site_dir, {"absent-fallback": {"requires": ["nothing-here"], "allow_missing": {}}})
    assert proc.returncode == 0, proc.stdout
    assert stage(doc)["packages"]["absent-fallback"]["installed"] is None


def test_no_dropped_key_adds_no_stage(tmp_path, site_dir):
    proc, doc = run(tmp_path, site_dir, {})
    assert proc.returncode == 0
    assert not [s for s in doc["stages"] if s["name"] == "dropped"]


def test_a_malformed_dropped_entry_is_a_usage_error(tmp_path, site_dir):
    expect_path = tmp_path / "expect.json"
    expect_path.write_text(json.dumps({"pins": {}, "dropped": {"engine": ["helper"]}}))
    proc = subprocess.run([sys.executable, str(PAYLOAD), "--expect", str(expect_path)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "'dropped' must be an object" in proc.stderr
