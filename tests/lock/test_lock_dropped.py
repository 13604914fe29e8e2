"""Dropped requirements are decisions: a --no-deps package's base requirement (no extra, or a requested
one; marker true for the target) that the image leaves unmet makes the report unclean, and the lock writes
it into expect.json for the build to fail on, unless the manifest allows it (allow_missing, with a why).

Real uv locks against the local HTTP index.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.support.manifests import manifest_yaml, variant
from pinwheel import cli

PY = f"{sys.version_info.major}.{sys.version_info.minor}"

ALLOW = """
        allow_missing:
          - {name: pwt-onnx, why: "only its export path imports it"}
          - {name: pwt-basey, why: "it declares pwt-basey>=3, and 2.0 is what it was built against"}
          - {name: pwt-exporter, why: "the export extra is requested for its entry points only"}"""


def steps(allow: str = "", provider: str = "") -> str:
    return f"""\
  - name: base
    why: "the torch stand-in"
    packages:
      - {{requirement: "pwt-basey==2.0"}}{provider}
  - name: engine
    why: "the engine, without its pins"
    packages:
      - requirement: "pwt-engine[export]==1.0"
        no_deps: true
        why: "its declared pwt-basey>=3 would replace the base"{allow}
"""


@pytest.fixture
def project(local_index, tmp_path, monkeypatch, local_project):
    ix = local_index
    ix.add("pwt-basey", "2.0")
    ix.add("pwt-onnx", "1.0")
    ix.add("pwt-engine", "1.0", requires=["pwt-onnx>=0.1", "pwt-basey>=3", 'pwt-winonly; sys_platform == "win32"'],
           extras={"export": ["pwt-exporter"], "dev": ["pwt-devtool"]})
    root = local_project(ix.serve())
    return root


def write(root: Path, text: str) -> None:
    (root / "wheels_manifest.yaml").write_text(manifest_yaml(steps=text, variants=[variant("cu130", python=PY)]))


def lock_and_report(root: Path, capsys) -> tuple[dict, dict, int]:
    args = ["--manifest", str(root / "wheels_manifest.yaml")]
    assert cli.main([*args, "lock", "--variant", "cu130", "--resolver", "uv"]) == 0
    expect = json.loads((root / "images" / "demo" / "lock" / "cu130" / "expect.json").read_text())
    capsys.readouterr()
    rc = cli.main([*args, "report", "--variant", "cu130", "--json"])
    return expect, json.loads(capsys.readouterr().out), rc


def test_unmet_dropped_requirements_are_conflicts_and_expected_by_the_build(project, capsys):
    write(project, steps())
    expect, report, rc = lock_and_report(project, capsys)
    # base requirements and the requested extra's; not the unrequested extra, not a false marker
    assert expect["dropped"] == {"pwt-engine": {
        "requires": ["pwt-onnx>=0.1", "pwt-basey>=3", "pwt-exporter"], "allow_missing": {}}}
    assert rc != 0
    s = report["summary"]
    assert (s["verdict"], s["dropped_unmet"], s["dropped_allowed"]) == ("conflicts", 3, 0)
    assert sorted((d["name"], d["found"], d["extra"], d["allowed"]) for d in report["dropped_requirements"]) == [
        ("pwt-basey", "2.0", None, False), ("pwt-exporter", None, "export", False), ("pwt-onnx", None, None, False)]
    assert ("pwt-engine 1.0 is installed --no-deps and requires pwt-onnx>=0.1, but pwt-onnx is not installed: add a "
            "package that provides it, or declare it on pwt-engine in the manifest (allow_missing: [{name: pwt-onnx, "
            "why: ...}])") in report["next_steps"]
    capsys.readouterr()
    cli.main(["--manifest", str(project / "wheels_manifest.yaml"), "report", "--variant", "cu130"])
    out = capsys.readouterr().out
    assert "Dropped and unmet" in out and "3 dropped requirement(s) unmet" in out


def test_allow_missing_makes_them_decisions_listed_in_report_and_expect(project, capsys):
    write(project, steps(allow=ALLOW))
    expect, report, rc = lock_and_report(project, capsys)
    assert expect["dropped"]["pwt-engine"]["allow_missing"] == {
        "pwt-onnx": "only its export path imports it",
        "pwt-basey": "it declares pwt-basey>=3, and 2.0 is what it was built against",
        "pwt-exporter": "the export extra is requested for its entry points only"}
    assert rc == 0, report["next_steps"]
    s = report["summary"]
    assert (s["verdict"], s["dropped_unmet"], s["dropped_allowed"]) == ("clean", 0, 3)
    assert all(d["allowed"] and d["why"] for d in report["dropped_requirements"])


def test_an_explicit_package_that_provides_it_meets_it(project, capsys):
    write(project, steps(allow="\n        allow_missing:\n          - {name: pwt-basey, why: \"built against 2.0\"}"
                               "\n          - {name: pwt-exporter, why: \"entry points only\"}",
                         provider='\n      - {requirement: "pwt-onnx==1.0", why: "the engine needs it at runtime"}'))
    expect, report, rc = lock_and_report(project, capsys)
    assert rc == 0, report["next_steps"]
    assert "pwt-onnx" not in {d["name"] for d in report["dropped_requirements"]}
    assert expect["pins"]["pwt-onnx"] == "1.0"


def test_allow_missing_joins_the_lock_inputs(project, capsys):
    write(project, steps())
    lock_and_report(project, capsys)
    write(project, steps(allow=ALLOW))
    capsys.readouterr()
    assert cli.main(["--manifest", str(project / "wheels_manifest.yaml"), "lock", "--check", "--variant", "cu130"]) != 0
    assert "stale" in capsys.readouterr().err
