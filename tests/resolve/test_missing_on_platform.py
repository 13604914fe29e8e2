"""A package with only an x86_64 wheel, in a variant built for linux/amd64 and linux/arm64 (local HTTP index).

On amd64 it is an ordinary package; on arm64 the report names it and the platform as its own finding, a
conflict, not a lookup that could not be judged. `report` without --platform judges each platform.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pinwheel import cli

from tests.support.manifests import two_platform_manifest

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
CP = f"cp{sys.version_info.major}{sys.version_info.minor}"

MANIFEST = two_platform_manifest("pwt-x86only==1.0", base_why="the torch stand-in, one wheel per architecture", kernel_why="a kernel built for x86_64 only")


@pytest.fixture
def project(local_index, tmp_path, monkeypatch, local_project):
    local_index.add("pwt-torchy", "2.0", tags=f"{CP}-{CP}-manylinux_2_28_x86_64")
    local_index.add("pwt-torchy", "2.0", tags=f"{CP}-{CP}-manylinux_2_28_aarch64")
    local_index.add("pwt-x86only", "1.0", requires=["pwt-common"], tags=f"{CP}-{CP}-manylinux_2_28_x86_64")
    local_index.add("pwt-common", "1.0")
    root = local_project(local_index.serve())
    (root / "wheels_manifest.yaml").write_text(MANIFEST)
    return root


def run(root: Path, *args: str) -> int:
    return cli.main(["--manifest", str(root / "wheels_manifest.yaml"), *args])


def test_report_names_the_package_and_the_platform(project, capsys):
    code = run(project, "report", "--variant", "cu130", "--platform", "linux/arm64", "--json")
    data = json.loads(capsys.readouterr().out)
    assert code == 1  # a conflict: the arm64 build would stop there
    assert data["platform"] == "linux/arm64"
    (missing,) = data["missing_on_platform"]
    assert missing == {"package": "pwt-x86only", "version": "1.0", "step": "kernels", "platform": "linux/arm64",
                       "target": "manylinux_2_36_aarch64", "python": PY, "wheels_for": ["x86_64"],
                       "wheels": [f"pwt_x86only-1.0-{CP}-{CP}-manylinux_2_28_x86_64.whl"]}
    s = data["summary"]
    assert (s["verdict"], s["missing_on_platform"], s["conflicts"], s["unchecked"]) == ("conflicts", 1, 1, 0)
    assert s["unjudged"] == 0  # not also a failed lookup
    assert data["next_steps"][0].startswith(
        "pwt-x86only 1.0 is missing on linux/arm64: no wheel for Python " + PY + " on manylinux_2_36_aarch64 "
        "(the index has wheels for x86_64 only): pin a version of pwt-x86only that has a linux/arm64 wheel")


def test_the_text_report_lists_it_under_its_own_heading(project, capsys):
    assert run(project, "report", "--variant", "cu130", "--platform", "linux/arm64") == 1
    out = capsys.readouterr().out
    assert "Missing on linux/arm64 (no file this platform can install; the build stops there)\n" \
           f"  pwt-x86only 1.0 is missing on linux/arm64: no wheel for Python {PY} on manylinux_2_36_aarch64 " \
           "(the index has wheels for x86_64 only)\n" \
           f"    the index has: pwt_x86only-1.0-{CP}-{CP}-manylinux_2_28_x86_64.whl\n" in out
    assert "Could not judge" not in out
    assert "0 satisfied, 0 violated, 0 suppressed, 0 unchecked, 0 extra-only, 0 marker-excluded; 0 order hazards; " \
           "0 shared pins broken; 0 clashes; 0 lookups failed; 1 missing on linux/arm64\n1 conflict(s)\n" in out


def test_amd64_is_clean_and_report_judges_every_platform(project, capsys):
    assert run(project, "report", "--variant", "cu130", "--platform", "linux/amd64", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["summary"]["verdict"], data["missing_on_platform"]) == ("clean", [])
    # no --platform: each platform the variant lists, the exit code the worst of them
    assert run(project, "report", "--variant", "cu130") == 1
    out = capsys.readouterr().out
    assert "== linux/amd64 ==" in out and "== linux/arm64 ==" in out
    assert out.rstrip().endswith("linux/amd64: clean; linux/arm64: conflicts")
    assert run(project, "report", "--variant", "cu130", "--json") == 1
    data = json.loads(capsys.readouterr().out)
    assert data["platform"] == "linux/amd64" and data["summary"]["verdict"] == "clean"
    (arm,) = data["other_platforms"]
    assert arm["platform"] == "linux/arm64" and arm["summary"]["verdict"] == "conflicts"
    assert [d["package"] for d in arm["missing_on_platform"]] == ["pwt-x86only"]


def test_a_wheel_for_a_newer_libc_is_missing_there_too_and_says_why(project, local_index, capsys):
    local_index.add("pwt-newlibc", "1.0", tags=f"{CP}-{CP}-manylinux_2_99_x86_64")
    (project / "wheels_manifest.yaml").write_text(MANIFEST.replace(
        '      - {requirement: "pwt-x86only==1.0"}\n', '      - {requirement: "pwt-newlibc==1.0"}\n'))
    assert run(project, "report", "--variant", "cu130", "--platform", "linux/amd64", "--json") == 1
    (missing,) = json.loads(capsys.readouterr().out)["missing_on_platform"]
    assert (missing["package"], missing["platform"], missing["wheels_for"]) == ("pwt-newlibc", "linux/amd64", ["x86_64"])
    assert run(project, "report", "--variant", "cu130", "--platform", "linux/amd64") == 1
    assert f"pwt-newlibc 1.0 is missing on linux/amd64: no wheel for Python {PY} on manylinux_2_36_x86_64 (its " \
           "x86_64 wheels are for another Python or a newer libc)\n" in capsys.readouterr().out


def test_an_index_that_fails_leaves_each_platform_named_and_never_clean(project, local_index, capsys):
    local_index.fail_next(10_000, status=503)
    code = run(project, "report", "--variant", "cu130", "--json", "--index-deadline", "0.5")
    data = json.loads(capsys.readouterr().out)
    assert code == 3
    found = [(d["platform"], d["summary"]["verdict"], d["missing_on_platform"])
             for d in [data, *data["other_platforms"]]]
    assert found == [("linux/amd64", "unchecked", []), ("linux/arm64", "unchecked", [])]  # unread is not missing


def test_a_dependency_without_an_arm64_release_is_named_not_a_bare_clash(project, local_index, capsys):
    local_index.add("pwt-kern", "1.0", requires=["pwt-x86only"])  # unpinned: no release installs on arm64
    (project / "wheels_manifest.yaml").write_text(MANIFEST.replace(
        '      - {requirement: "pwt-x86only==1.0"}\n', '      - {requirement: "pwt-kern==1.0"}\n'))
    assert run(project, "report", "--variant", "cu130", "--platform", "linux/arm64", "--json") == 1
    data = json.loads(capsys.readouterr().out)
    assert [(d["package"], d["version"], d["step"], d["wheels_for"]) for d in data["missing_on_platform"]] == \
        [("pwt-x86only", "1.0", "kernels", ["x86_64"])]
    assert [c["package"] for c in data["clashes"]] == ["pwt-x86only"]  # the resolver's own record, kept
    s = data["summary"]
    # counted once, as missing: not also as a clash, nor as pwt-kern's requirement left unmet
    assert (s["missing_on_platform"], s["clashes"], s["edges"]["violated"], s["conflicts"]) == (1, 0, 0, 1)
    assert len(data["next_steps"]) == 1 and data["next_steps"][0].startswith("pwt-x86only 1.0 is missing on")
    assert run(project, "report", "--variant", "cu130", "--platform", "linux/arm64") == 1
    out = capsys.readouterr().out
    assert "Missing on linux/arm64" in out and "\nClashes" not in out
    assert run(project, "report", "--variant", "cu130", "--platform", "linux/amd64", "--json") == 0
    capsys.readouterr()
