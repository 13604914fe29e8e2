"""A dependency's pin overridden on purpose (`override: true` with a why on a package): the lock resolves
through uv's overrides and holds the overriding version; the report names the edge "overridden on purpose",
not as a conflict; expect.json lets the build's pip check accept exactly that edge. Real uv runs against the
local HTTP index, with a fake torch that pins its cuDNN the way torch 2.13.0 pins nvidia-cudnn-cu13.
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
WHY = "the cuDNN with the fix our kernels need; torch works with it"


def steps(override: bool = True) -> str:
    flag = "override: true, " if override else ""
    return f"""\
  - name: torch
    why: "the framework"
    packages:
      - {{requirement: "pwo-torch==2.13.0", why: "the trainer's torch"}}
  - name: cudnn
    why: "a newer cuDNN than torch pins"
    packages:
      - {{requirement: "pwo-cudnn==9.22.0.52", {flag}why: "{WHY}"}}
"""


@pytest.fixture
def project(local_index, local_project):
    ix = local_index
    ix.add("pwo-cudnn", "9.20.0.48")
    ix.add("pwo-cudnn", "9.22.0.52")
    ix.add("pwo-torch", "2.13.0", requires=["pwo-cudnn==9.20.0.48", "pwo-filelock"])
    ix.add("pwo-filelock", "3.0")
    return local_project(ix.serve())


def write(root: Path, text: str) -> None:
    (root / "wheels_manifest.yaml").write_text(manifest_yaml(steps=text, variants=[variant("cu130", python=PY)]))


def run(root: Path, *args: str) -> int:
    return cli.main(["--manifest", str(root / "wheels_manifest.yaml"), *args])


def lock_dir(root: Path) -> Path:
    return root / "images" / "demo" / "lock" / "cu130"


def test_without_override_the_pin_is_unsatisfiable(project, capsys):
    write(project, steps(override=False))
    assert run(project, "lock", "--variant", "cu130") != 0
    assert "pwo-cudnn" in capsys.readouterr().err


def test_the_lock_holds_the_overriding_version_and_expect_accepts_exactly_that_edge(project, capsys):
    write(project, steps())
    assert run(project, "lock", "--variant", "cu130") == 0
    full = parse_requirements((lock_dir(project) / "requirements.txt").read_text())
    assert {n: p.version for n, p in full.items()} == {
        "pwo-cudnn": "9.22.0.52", "pwo-filelock": "3.0", "pwo-torch": "2.13.0"}
    cudnn = (lock_dir(project) / "02-cudnn.txt").read_text()  # its own step's slice, the why under it
    assert "pwo-cudnn==9.22.0.52" in cudnn and f"    # override: {WHY}" in cudnn
    assert "pwo-cudnn" not in (lock_dir(project) / "01-torch.txt").read_text()
    assert (lock_dir(project) / "overrides.txt").read_text().splitlines()[-1] == "pwo-cudnn==9.22.0.52"
    expect = json.loads((lock_dir(project) / "expect.json").read_text())
    assert expect["overridden"] == ["pwo-cudnn"]
    assert expect["overridden_edges"] == ["pwo-torch pwo-cudnn==9.20.0.48"]
    capsys.readouterr()

    assert run(project, "report", "--variant", "cu130", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["summary"]["verdict"] == "clean" and report["summary"]["edges"]["violated"] == 0
    edges = [e for e in report["edges"] if e["parent"] == "pwo-torch" and e["requirement"].startswith("pwo-cudnn")]
    assert [e["verdict"] for e in edges] == ["overridden"]
    assert edges[0]["detail"].startswith("overridden on purpose: pwo-torch 2.13.0 requires pwo-cudnn==9.20.0.48")
    assert run(project, "report", "--variant", "cu130") == 0
    text = " ".join(capsys.readouterr().out.split())
    assert (f"overridden: overridden on purpose: pwo-torch 2.13.0 requires pwo-cudnn==9.20.0.48; pwo-cudnn "
            f"9.22.0.52 is installed: {WHY}") in text


def test_the_pip_compile_engine_refuses_an_override_by_name(project, capsys):
    write(project, steps())
    assert run(project, "lock", "--variant", "cu130", "--engine", "pip-compile") == 2
    err = capsys.readouterr().err
    assert "pwo-cudnn" in err and "uv" in err and "Traceback" not in err


# ---- on a base that holds the framework: the override contradicts a base package's pin

BASE_MANIFEST = """\
manifest_version: 1
image: {name: demo, repository: pinwheel/demo}
variants:
  t: {cuda: "13.0", torch: "2.13.0", python: "3.11", platform: manylinux_2_28_x86_64,
      base: "vendor/trainer:1@sha256:%s", tag: "t-{date}", environment: base}
steps:
  - name: cudnn
    kind: wheels
    why: "a newer cuDNN than the base's torch pins"
    packages:
      - {requirement: "pwo-cudnn==9.22.0.52", override: true, why: "%s"}
""" % ("ef" * 32, WHY)


def test_on_a_base_environment_the_base_packages_edge_is_named(local_index, local_project, capsys):
    from pinwheel import manifest
    from pinwheel.distributions import Distribution, Inventory
    from pinwheel.image.inventory import write_inventory
    from pinwheel.workspace import Workspace

    local_index.add("pwo-cudnn", "9.20.0.48")
    local_index.add("pwo-cudnn", "9.22.0.52")
    root = local_project(local_index.serve())
    (root / "wheels_manifest.yaml").write_text(BASE_MANIFEST)
    m = manifest.load(root / "wheels_manifest.yaml")
    site = "/usr/lib/python3/dist-packages"
    base = Inventory("vendor/trainer:1", "sha256:" + "22" * 32, "vendor/trainer@sha256:" + "ef" * 32, (
        Distribution("pwo-torch", "2.13.0", ("pwo-cudnn==9.20.0.48",), (), "pip", None, ("pwo_torch",), 10, site, 0),
        Distribution("pwo-cudnn", "9.20.0.48", (), (), "pip", None, ("pwo_cudnn",), 10, site, 0),
    ), layers=2)
    write_inventory(base, Workspace.of(m).inventory_file("t"))
    assert run(root, "lock", "--variant", "t") == 0, capsys.readouterr().err
    lock = root / "images" / "demo" / "lock" / "t"
    expect = json.loads((lock / "expect.json").read_text())
    assert expect["pins"] == {"pwo-cudnn": "9.22.0.52"}
    assert expect["base_unchanged"] == {"pwo-torch": "2.13.0"}
    assert expect["overridden_edges"] == ["pwo-torch pwo-cudnn==9.20.0.48"]  # the base's torch, named
    capsys.readouterr()
    assert run(root, "report", "--variant", "t", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    [edge] = [e for e in report["edges"] if e["parent"] == "pwo-torch"]
    assert edge["verdict"] == "overridden" and edge["found"] == "9.22.0.52"
