"""The invariant on a base with packages: base packages the manifest leaves alone keep their inventory
versions, removed ones are gone, and `pip check` may find only the baseline and what the manifest declares.

The payload runs as a subprocess against a fake site: hand-written dist-info directories added with
--site, in front of the test interpreter's own (clean) environment.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.payload_archive import PAYLOAD  # the zipapp the build ships

# name, version, Requires-Dist: what the "image" holds after its last step
SITE = [
    ("base-keep", "1.0", []),
    ("base-moved", "2.0", []),  # the inventory says 1.0
    ("base-broken", "1.0", ["base-missing>=1"]),  # already broken in the base
    ("base-user", "1.0", ["base-gone"]),  # needs what the manifest removes
    ("leftover", "3.0", []),  # the manifest removes it, yet it is here
    ("nvidia-cudnn-cu13", "9.22.0.52", []),  # an override
    ("torchish", "2.13.0", ["nvidia-cudnn-cu13==9.20.0.48"]),  # whose pin the override contradicts
    ("cudnn-user", "1.0", ["nvidia-cudnn-cu13<9.21"]),  # another pin on it, which no override names
    ("reinstalled", "2.0", []),  # removed, then installed again by a later step (a pin)
]


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("base-site")
    for name, version, requires in SITE:
        info = root / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
        lines += [f"Requires-Dist: {r}" for r in requires]
        (info / "METADATA").write_text("\n".join(lines) + "\n")
        (info / "RECORD").write_text("")
    return root


def run(tmp_path: Path, site: Path, expect: dict) -> tuple[subprocess.CompletedProcess, dict]:
    expect_path = tmp_path / "expect.json"
    expect_path.write_text(json.dumps({"pins": {}, "suppressed": {}, **expect}))
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, str(PAYLOAD), "--expect", str(expect_path), "--level", "static",
                           "--check-pip", "--site", str(site), "--json", str(out)],
                          capture_output=True, text=True, timeout=120)
    return proc, json.loads(out.read_text())


def stage(doc: dict, name: str) -> dict:
    return next(s for s in doc["stages"] if s["name"] == name)


GOOD = {
    "pins": {"nvidia-cudnn-cu13": "9.22.0.52", "reinstalled": "2.0"},
    "base_unchanged": {"base-keep": "1.0", "base-broken": "1.0", "torchish": "2.13.0"},
    "removed": ["base-gone", "Reinstalled"],
    "baseline_broken": ["base-broken base-missing>=1"],
    "overridden": ["nvidia-cudnn-cu13"],
    "overridden_edges": ["torchish nvidia-cudnn-cu13==9.20.0.48", "cudnn-user nvidia-cudnn-cu13<9.21"],
}


def test_a_base_kept_as_the_manifest_says_passes(tmp_path, site_dir):
    proc, doc = run(tmp_path, site_dir, GOOD)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert stage(doc, "base")["status"] == "passed" and stage(doc, "base")["checked"] == 3
    removed = stage(doc, "removed")
    assert removed["status"] == "passed"
    assert removed["packages"] == ["base-gone"]  # reinstalled is a pin: checked as one, not as removed
    check = stage(doc, "pip-check")
    assert check["status"] == "passed", check
    assert check["accepted_baseline"] == ["base-broken 1.0 requires base-missing, which is not installed."]
    assert check["accepted_removed"] == ["base-user 1.0 requires base-gone, which is not installed."]
    assert sorted(check["accepted_overridden"]) == [
        "cudnn-user 1.0 has requirement nvidia-cudnn-cu13<9.21, but you have nvidia-cudnn-cu13 9.22.0.52.",
        "torchish 2.13.0 has requirement nvidia-cudnn-cu13==9.20.0.48, but you have nvidia-cudnn-cu13 9.22.0.52."]
    assert check["baseline_fixed"] == []
    assert "[   PASS] static/base: 3 base packages at their inventory versions" in proc.stdout
    assert "[   PASS] static/removed: gone: base-gone" in proc.stdout
    assert "base: already broken: base-broken 1.0 requires base-missing" in proc.stdout


def test_with_removal_breaks_a_removal_is_accepted_only_for_the_packages_it_names(tmp_path, site_dir):
    proc, doc = run(tmp_path, site_dir, {**GOOD, "removal_breaks": {"Base_Gone": ["Base-User"]}})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert stage(doc, "pip-check")["accepted_removed"] == ["base-user 1.0 requires base-gone, which is not installed."]
    proc, doc = run(tmp_path, site_dir, {**GOOD, "removal_breaks": {"base-gone": ["someone-else"]}})
    assert proc.returncode == 1
    check = stage(doc, "pip-check")
    assert check["unexpected"] == ["base-user 1.0 requires base-gone, which is not installed."], check


def test_a_base_package_moved_without_the_manifest_saying_so_fails_naming_it(tmp_path, site_dir):
    proc, doc = run(tmp_path, site_dir, {**GOOD, "base_unchanged": {**GOOD["base_unchanged"], "base-moved": "1.0",
                                                                      "base-vanished": "0.1"}})
    assert proc.returncode == 1
    base = stage(doc, "base")
    assert base["status"] == "failed"
    assert "base-moved: the base's 1.0 became 2.0 (at " in base["error"]
    assert "base-vanished: the base's 0.1 is gone, and the manifest does not remove it" in base["error"]
    assert "RESULT: FAILED (static/base)" in proc.stdout


def test_a_removed_package_still_installed_fails_naming_it(tmp_path, site_dir):
    proc, doc = run(tmp_path, site_dir, {**GOOD, "removed": ["base-gone", "Leftover"]})
    assert proc.returncode == 1
    removed = stage(doc, "removed")
    assert removed["status"] == "failed"
    assert removed["error"].startswith("leftover: removed by the manifest, found 3.0 (at ")


def test_pip_check_beyond_the_baseline_and_the_declarations_fails(tmp_path, site_dir):
    # no baseline, no override: both findings are the image's own
    proc, doc = run(tmp_path, site_dir, {**GOOD, "baseline_broken": [], "overridden": []})
    assert proc.returncode == 1
    check = stage(doc, "pip-check")
    assert sorted(check["unexpected"]) == [
        "base-broken 1.0 requires base-missing, which is not installed.",
        "cudnn-user 1.0 has requirement nvidia-cudnn-cu13<9.21, but you have nvidia-cudnn-cu13 9.22.0.52.",
        "torchish 2.13.0 has requirement nvidia-cudnn-cu13==9.20.0.48, but you have nvidia-cudnn-cu13 9.22.0.52.",
    ]
    # a baseline that names another parent does not cover this one
    proc, doc = run(tmp_path, site_dir, {**GOOD, "baseline_broken": ["base-user base-missing>=1"]})
    assert stage(doc, "pip-check")["unexpected"] == ["base-broken 1.0 requires base-missing, which is not installed."]
    assert stage(doc, "pip-check")["baseline_fixed"] == ["base-user base-missing"]


def test_an_override_accepts_exactly_the_edges_expect_names(tmp_path, site_dir):
    """overridden_edges: the findings on an overridden package from other parents are the image's own."""
    proc, doc = run(tmp_path, site_dir, {**GOOD, "overridden_edges": ["torchish nvidia-cudnn-cu13==9.20.0.48"]})
    assert proc.returncode == 1
    check = stage(doc, "pip-check")
    assert check["unexpected"] == [
        "cudnn-user 1.0 has requirement nvidia-cudnn-cu13<9.21, but you have nvidia-cudnn-cu13 9.22.0.52."]
    assert check["accepted_overridden"] == [
        "torchish 2.13.0 has requirement nvidia-cudnn-cu13==9.20.0.48, but you have nvidia-cudnn-cu13 9.22.0.52."]
    # an expect.json from before overridden_edges existed accepts every finding on the overridden package
    old = {k: v for k, v in GOOD.items() if k != "overridden_edges"}
    proc, doc = run(tmp_path, site_dir, old)
    assert proc.returncode == 0 and len(stage(doc, "pip-check")["accepted_overridden"]) == 2


def test_a_baseline_break_the_image_repairs_is_listed_as_fixed_never_failed(tmp_path, site_dir):
    proc, doc = run(tmp_path, site_dir, {**GOOD, "baseline_broken": GOOD["baseline_broken"] + ["base-keep other>=2"]})
    assert proc.returncode == 0, proc.stdout
    assert stage(doc, "pip-check")["baseline_fixed"] == ["base-keep other"]


def test_a_fresh_venv_expect_has_no_base_stages(tmp_path, site_dir):
    proc, doc = run(tmp_path, site_dir, {"pins": {"base-keep": "1.0"}})
    names = [s["name"] for s in doc["stages"]]
    assert "base" not in names and "removed" not in names
    assert "accepted_baseline" not in stage(doc, "pip-check")


@pytest.mark.parametrize("extra,fragment", [
    ({"base_unchanged": {"a": 1}}, "'base_unchanged' must be an object of name -> version strings"),
    ({"removed": "a"}, "'removed' must be a list of names"),
    ({"baseline_broken": ["justaname"]}, "baseline_broken entry 'justaname' is not 'parent requirement'"),
    ({"overridden": [""]}, "'overridden' must be a list of names"),
    ({"overridden_edges": ["torch"]}, "overridden_edges entry 'torch' is not 'parent requirement'"),
])
def test_bad_base_keys_are_usage_errors(tmp_path, site_dir, extra, fragment):
    proc, _ = run_raw(tmp_path, {"pins": {}, **extra})
    assert proc.returncode == 2 and fragment in proc.stderr, proc.stderr


def run_raw(tmp_path: Path, expect: dict):
    expect_path = tmp_path / "expect.json"
    expect_path.write_text(json.dumps(expect))
    proc = subprocess.run([sys.executable, str(PAYLOAD), "--expect", str(expect_path)], capture_output=True,
                          text=True, timeout=120)
    return proc, None
