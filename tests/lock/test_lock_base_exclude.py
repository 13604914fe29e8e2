"""`exclude` on a base environment that already holds the excluded package (environment: base).

The rule: `exclude` suppresses a manifest package's requirement edge; it installs and removes nothing.
A distribution the base already holds stays: the lock records it as kept by the base (expect.json's
`base_kept_excluded`), and the report names it with the way to drop it, a `remove` step. With the
step, the lock lists it as removed and the report is clean of it.
"""
from __future__ import annotations

import json

import pytest

from pinwheel import cli, manifest
from pinwheel.distributions import Distribution, Inventory
from pinwheel.image.inventory import write_inventory
from pinwheel.lock import parse_requirements
from pinwheel.workspace import LockFiles, Workspace

SITE = "/usr/lib/python3/dist-packages"
DIGEST = "sha256:" + "ab" * 32

MANIFEST = f"""\
manifest_version: 1
image: {{name: demo, repository: pinwheel/demo}}
variants:
  t: {{cuda: "13.0", torch: "2.0", python: "3.11", platform: manylinux_2_28_x86_64,
      base: "vendor/trainer:1@{DIGEST}", tag: "t-{{date}}", environment: base}}
steps:
@REMOVE@  - name: kernels
    kind: wheels
    why: "the shared DSL"
    packages:
      - requirement: "pwx-dsl==@DSL@"
        exclude:
          - name: pwx-libs-cu12
            why: "CUDA 12 libs a CUDA 13 image does not load"
"""
REMOVE = """\
  - name: drop-cu12
    kind: remove
    why: "the base's CUDA 12 libs"
    packages:
      - {name: pwx-libs-cu12, why: "excluded on pwx-dsl; the base installed it"}
"""


def dist(name, version, requires=()):
    return Distribution(name, version, tuple(requires), (), "pip", None, (name.replace("-", "_"),), 10, SITE, 0)


def base_with(dsl: str) -> Inventory:
    return Inventory("vendor/trainer:1", "sha256:" + "33" * 32, f"vendor/trainer@{DIGEST}", (
        dist("pwx-dsl", dsl, [f"pwx-libs-base=={dsl}", f"pwx-libs-cu12=={dsl}"]),
        dist("pwx-libs-base", dsl),
        dist("pwx-libs-cu12", dsl, [f"pwx-libs-base=={dsl}"]),
    ), layers=2)


@pytest.fixture
def project(local_index, tmp_path, monkeypatch):
    ix = local_index
    for v in ("1.0", "2.0"):
        ix.add("pwx-libs-base", v)
        ix.add("pwx-libs-cu12", v, requires=[f"pwx-libs-base=={v}"])
        ix.add("pwx-dsl", v, requires=[f"pwx-libs-base=={v}", f"pwx-libs-cu12=={v}"])
    url = ix.serve()
    root = tmp_path / "repo"
    root.mkdir()
    monkeypatch.setenv("PIP_INDEX_URL", url)
    monkeypatch.setenv("PINWHEEL_CACHE_DIR", str(tmp_path / "pinwheel-cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))

    def make(base_dsl: str, pinned: str, remove: bool = False):
        path = root / "wheels_manifest.yaml"
        path.write_text(MANIFEST.replace("@DSL@", pinned).replace("@REMOVE@", REMOVE if remove else ""))
        m = manifest.load(path)
        write_inventory(base_with(base_dsl), Workspace.of(m).inventory_file("t"))
        return m, url
    return make


def lock_and_report(m, url, capsys):
    rc = cli.main(["--manifest", str(m.path), "lock", "--variant", "t", "--engine", "uv"])
    lock_err = capsys.readouterr().err
    assert rc == 0, lock_err
    expect = json.loads((Workspace.of(m).lock_dir("t") / LockFiles.EXPECT).read_text())
    rc = cli.main(["--manifest", str(m.path), "report", "--variant", "t", "--json", "--index-url", url])
    return lock_err, expect, rc, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("base_dsl", ["1.0", "2.0"])
def test_the_base_keeps_an_excluded_package_and_the_lock_and_report_name_it(project, capsys, base_dsl):
    m, url = project(base_dsl, "1.0")
    lock_err, expect, rc, data = lock_and_report(m, url, capsys)
    assert expect["base_kept_excluded"] == {"pwx-libs-cu12": {"version": base_dsl, "excluded_on": ["pwx-dsl"]}}
    assert "pwx-libs-cu12" in lock_err and "remove" in lock_err  # said at lock time, with the way out
    kept = data["base"]["kept_excluded"]
    assert [(k["package"], k["version"]) for k in kept] == [("pwx-libs-cu12", base_dsl)]
    assert "remove" in kept[0]["fix"]
    locked = parse_requirements((Workspace.of(m).lock_dir("t") / LockFiles.REQUIREMENTS).read_text())
    assert "pwx-libs-cu12" not in locked
    if base_dsl == "2.0":  # the base's 2.0 libs need libs-base 2.0, which the pin moves to 1.0: a real break
        assert rc == 1


def test_a_remove_step_drops_it(project, capsys):
    m, url = project("2.0", "1.0", remove=True)
    _, expect, rc, data = lock_and_report(m, url, capsys)
    assert "base_kept_excluded" not in expect
    assert "pwx-libs-cu12" in expect["removed"]
    assert data["base"]["kept_excluded"] == []
    assert not any(h["package"] == "pwx-libs-cu12" for h in data["hazards"]), data["hazards"]
