"""A requirement left out on purpose (manifest `exclude: [{name, why}]`): the lock drops it and whatever only
it reached, with either engine and the same files; expect.json lets the build's pip check accept it; the
report shows it as excluded, and stays clean. Real uv and pip-compile runs against the local HTTP index.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.support.manifests import manifest_yaml, variant
from pinwheel import cli
from pinwheel.lock import parse_requirements

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
WHY = "CUDA 12 libs in a CUDA 13 image"


def steps(exclude: str = "pwt-dsl-libs-cu12", kern_requires_cu12: bool = False) -> str:
    kern = "pwt-kern==1.1" if kern_requires_cu12 else "pwt-kern==1.0"
    return f"""\
  - name: kernels
    why: "a DSL whose CUDA 12 libs come without an extra"
    packages:
      - {{requirement: "{kern}"}}
      - requirement: "pwt-dsl[cu13]==1.5"
        exclude:
          - {{name: {exclude}, why: "{WHY}"}}
"""


@pytest.fixture
def project(local_index, tmp_path, monkeypatch, local_project):
    ix = local_index
    ix.add("pwt-common", "1.0")
    ix.add("pwt-cu12-runtime", "1.0")
    ix.add("pwt-dsl-libs-base", "1.5", requires=["pwt-common"])
    ix.add("pwt-dsl-libs-cu12", "1.5", requires=["pwt-cu12-runtime", "pwt-common"])
    ix.add("pwt-dsl-libs-cu13", "1.5", requires=["pwt-common"])
    ix.add("pwt-dsl", "1.5", requires=["pwt-dsl-libs-base==1.5", "pwt-dsl-libs-cu12==1.5"],
           extras={"cu13": ["pwt-dsl-libs-cu13==1.5"]})
    ix.add("pwt-kern", "1.0", requires=["pwt-common"])
    ix.add("pwt-kern", "1.1", requires=["pwt-common", "pwt-dsl-libs-cu12"])
    root = local_project(ix.serve())
    return root


def write(root: Path, text: str) -> None:
    (root / "wheels_manifest.yaml").write_text(manifest_yaml(steps=text, variants=[variant("cu130", python=PY)]))


def lock(root: Path, *extra: str) -> int:
    return cli.main(["--manifest", str(root / "wheels_manifest.yaml"), "lock", "--variant", "cu130", *extra])


def lock_dir(root: Path) -> Path:
    return root / "images" / "demo" / "lock" / "cu130"


def test_the_excluded_requirement_and_what_only_it_reached_are_not_locked_by_either_engine(project):
    write(project, steps())
    assert lock(project, "--resolver", "pip-compile") == 0
    by_pip = {f.name: f.read_text() for f in lock_dir(project).iterdir()}
    assert lock(project, "--upgrade") == 0  # uv, the default
    by_uv = {f.name: f.read_text() for f in lock_dir(project).iterdir()}

    full = parse_requirements(by_uv["requirements.txt"])
    assert sorted(full) == ["pwt-common", "pwt-dsl", "pwt-dsl-libs-base", "pwt-dsl-libs-cu13", "pwt-kern"]
    assert sorted(parse_requirements(by_pip["requirements.txt"])) == sorted(full)
    for text in (by_pip["requirements.txt"], by_uv["requirements.txt"]):  # no entry, no `# via` line names them
        assert "pwt-dsl-libs-cu12" not in text and "pwt-cu12-runtime" not in text
    # every file but the resolver's own requirements.txt is the same, byte for byte
    assert {n: t for n, t in by_uv.items() if n != "requirements.txt"} == \
        {n: t for n, t in by_pip.items() if n != "requirements.txt"}

    expect = json.loads(by_uv["expect.json"])
    assert expect["excluded"] == {"pwt-dsl": {"pwt-dsl-libs-cu12": WHY}}
    assert expect["suppressed"] == {"pwt-dsl": ["pwt-dsl-libs-cu12==1.5"]}  # what the build's pip check accepts
    assert "pwt-dsl-libs-cu12" not in expect["pins"]
    assert cli.main(["--manifest", str(project / "wheels_manifest.yaml"), "lock", "--check"]) == 0


def test_the_report_shows_it_excluded_and_stays_clean(project, capsys):
    write(project, steps())
    assert lock(project) == 0
    capsys.readouterr()
    rc = cli.main(["--manifest", str(project / "wheels_manifest.yaml"), "report", "--variant", "cu130", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["summary"]["verdict"] == "clean"
    assert report["summary"]["edges"]["excluded"] == 1 and report["summary"]["edges"]["violated"] == 0
    [edge] = report["excluded"]
    assert (edge["parent"], edge["requirement"], edge["verdict"], edge["found"]) == \
        ("pwt-dsl", "pwt-dsl-libs-cu12==1.5", "excluded", None)
    assert WHY in edge["detail"]
    assert not report["dropped_requirements"]
    rc = cli.main(["--manifest", str(project / "wheels_manifest.yaml"), "report", "--variant", "cu130"])
    out = capsys.readouterr().out
    assert rc == 0 and "Excluded on purpose" in out and "1 excluded on purpose" in out


def test_an_exclusion_another_package_still_needs_fails_the_lock_naming_it(project, capsys):
    write(project, steps(kern_requires_cu12=True))
    assert lock(project) == 1
    err = capsys.readouterr().err
    assert "pwt-dsl-libs-cu12 is excluded on pwt-dsl, but another package in the image requires it" in err
    assert not lock_dir(project).exists()


def test_an_exclusion_of_no_requirement_fails_the_lock_naming_it(project, capsys):
    write(project, steps(exclude="pwt-unrelated"))
    assert lock(project) == 1
    err = capsys.readouterr().err
    assert "pwt-dsl 1.5 does not require pwt-unrelated" in err
    assert not lock_dir(project).exists()


def test_the_exclusion_is_a_lock_input(project, capsys):
    write(project, steps())
    assert lock(project) == 0
    write(project, steps().replace(WHY, "another reason"))
    capsys.readouterr()
    assert cli.main(["--manifest", str(project / "wheels_manifest.yaml"), "lock", "--check"]) == 1
    assert "stale" in capsys.readouterr().err
