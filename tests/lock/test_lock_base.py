"""A lock made against a base's inventory (environment: base), with uv on the local HTTP index.

The base's packages are preferences of the resolve: kept at their installed
versions where they still fit, and then in no slice. A base package the
manifest pins at another version is resolved and sliced, and the report shows
the replacement as intended; one that a manifest package's requirement forces to
move is sliced too, and the report names the move. A changed inventory makes
the lock stale.
"""
from __future__ import annotations

import dataclasses
import json

import pytest

from pinwheel import cli, manifest
from pinwheel.distributions import Distribution, Inventory
from pinwheel.image.inventory import write_inventory
from pinwheel.lock import check_lock, parse_requirements
from pinwheel.plan import plan_variant
from pinwheel.workspace import LockFiles, Workspace

SITE = "/usr/lib/python3/dist-packages"
DIGEST = "sha256:" + "ef" * 32

MANIFEST = f"""\
manifest_version: 1
image: {{name: demo, repository: pinwheel/demo}}
variants:
  t: {{cuda: "13.0", torch: "2.0", python: "3.11", platform: manylinux_2_28_x86_64,
      base: "vendor/trainer:1@{DIGEST}", tag: "t-{{date}}", environment: base}}
steps:
  - name: kernels
    kind: wheels
    why: "kernels on the base's torch"
    packages:
      - {{requirement: "pwt-kern==1.0"}}
      - {{requirement: "pwt-torchy==2.0"}}
  - name: libs
    kind: wheels
    why: "a newer common library than the base has"
    packages:
      - {{requirement: "pwt-common==1.1"}}
"""


def dist(name, version, requires=()):
    return Distribution(name, version, tuple(requires), (), "pip", None, (name.replace("-", "_"),), 10, SITE, 0)


BASE = Inventory("vendor/trainer:1", "sha256:" + "22" * 32, f"vendor/trainer@{DIGEST}", (
    dist("pwt-torchy", "2.0", ["pwt-util>=1"]),
    dist("pwt-util", "1.0"),
    dist("pwt-common", "1.0"),
    dist("vendor-only", "3.1", ["pwt-missing>=1"]),  # not on the index, and already broken
), layers=2)


@pytest.fixture
def demo(local_index, tmp_path, monkeypatch):
    ix = local_index
    ix.add("pwt-util", "1.0")
    ix.add("pwt-util", "1.1")
    ix.add("pwt-common", "1.0")
    ix.add("pwt-common", "1.1")
    ix.add("pwt-torchy", "2.0", requires=["pwt-util>=1"])
    ix.add("pwt-torchy", "2.1", requires=["pwt-util>=1"])
    ix.add("pwt-kern", "1.0", requires=["pwt-torchy>=2", "pwt-util>=1", "pwt-common>=1", "pwt-extra>=1"])
    ix.add("pwt-extra", "1.0")
    url = ix.serve()
    root = tmp_path / "repo"
    root.mkdir()
    monkeypatch.setenv("PIP_INDEX_URL", url)
    monkeypatch.setenv("PINWHEEL_CACHE_DIR", str(tmp_path / "pinwheel-cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    path = root / "wheels_manifest.yaml"
    path.write_text(MANIFEST)
    m = manifest.load(path)
    write_inventory(BASE, Workspace.of(m).inventory_file("t"))
    return m, url


def test_lock_against_the_inventory(demo, capsys):
    m, url = demo
    assert cli.main(["--manifest", str(m.path), "lock", "--variant", "t", "--resolver", "uv"]) == 0, \
        capsys.readouterr().err
    d = Workspace.of(m).lock_dir("t")
    constraints = (d / LockFiles.CONSTRAINTS).read_text()
    # the base's packages are preferences, not constraints: newer pwt-torchy 2.1 and pwt-util 1.1 exist,
    # and the lock still keeps the base's (below)
    assert "pwt-torchy" not in constraints and "pwt-util" not in constraints
    locked = parse_requirements((d / LockFiles.REQUIREMENTS).read_text())
    # slices install only what the base lacks (pwt-kern, pwt-extra) or what the manifest changes (pwt-common)
    assert {n: p.version for n, p in locked.items()} == {"pwt-kern": "1.0", "pwt-extra": "1.0", "pwt-common": "1.1"}
    kernels = parse_requirements((d / "01-kernels.txt").read_text())
    libs = parse_requirements((d / "02-libs.txt").read_text())
    assert set(kernels) == {"pwt-kern", "pwt-extra"} and set(libs) == {"pwt-common"}
    expect = json.loads((d / LockFiles.EXPECT).read_text())
    assert expect["pins"] == {"pwt-kern": "1.0", "pwt-extra": "1.0", "pwt-common": "1.1"}
    assert expect["base_unchanged"] == {"pwt-torchy": "2.0", "pwt-util": "1.0", "vendor-only": "3.1"}
    assert expect["removed"] == []
    assert expect["baseline_broken"] == ["vendor-only pwt-missing>=1"]
    assert check_lock(plan_variant(m, "t"), m.path.parent).status == "ok"

    # the report, as locked: the base's pwt-common replaced on purpose, the baseline not held against the image
    capsys.readouterr()
    rc = cli.main(["--manifest", str(m.path), "report", "--variant", "t", "--json", "--index-url", url])
    data = json.loads(capsys.readouterr().out)
    assert data["locked"] is True
    assert [(r["package"], r["before"], r["after"]) for r in data["replacements"]] == [("pwt-common", "1.0", "1.1")]
    assert data["summary"]["edges"]["base-broken"] == 1
    by = {p["name"]: p for p in data["packages"]}
    assert by["pwt-torchy"]["source"] == "base" and by["pwt-kern"]["step"] == "kernels"
    assert rc == 0, data["next_steps"]

    # a changed base inventory makes the lock stale
    write_inventory(dataclasses.replace(BASE, distributions=BASE.distributions + (dist("pwt-new", "1.0"),)),
                    Workspace.of(m).inventory_file("t"))
    c = check_lock(plan_variant(m, "t"), m.path.parent)
    assert c.status == "stale" and "inputs changed" in c.detail


def test_a_move_the_manifest_forces_on_a_base_package_is_sliced_and_named(demo, local_index, capsys):
    m, url = demo
    local_index.add("pwt-wants-new-util", "1.0", requires=["pwt-util>=1.1"])
    m.path.write_text(m.path.read_text() + """\
  - name: newer
    kind: wheels
    why: "wants a newer pwt-util than the base's"
    packages:
      - {requirement: "pwt-wants-new-util==1.0"}
""")
    m = manifest.load(m.path)
    assert cli.main(["--manifest", str(m.path), "lock", "--variant", "t", "--resolver", "uv"]) == 0, \
        capsys.readouterr().err
    d = Workspace.of(m).lock_dir("t")
    expect = json.loads((d / LockFiles.EXPECT).read_text())
    assert expect["pins"]["pwt-util"] == "1.1" and "pwt-util" not in expect["base_unchanged"]
    capsys.readouterr()
    rc = cli.main(["--manifest", str(m.path), "report", "--variant", "t", "--json", "--index-url", url])
    data = json.loads(capsys.readouterr().out)
    (move,) = [h for h in data["hazards"] if h["package"] == "pwt-util"]
    assert (move["earlier_step"], move["before"], move["after"]) == ("base", "1.0", "1.1")
    assert rc == 1  # a move of a base package the manifest does not pin is a finding


def test_the_base_s_own_import_skips_hold_for_what_the_image_keeps_from_it(demo, capsys):
    """A base pinwheel built names its driver-bound packages (its expect.json, kept in the inventory): the
    image's invariant skips them as well, but not a package the image installs again (pwt-common here)."""
    m, _ = demo
    skips = (("pwt-common", "needs: driver: the base's build"), ("pwt-torchy", "needs: driver: links libcuda"))
    write_inventory(dataclasses.replace(BASE, import_skip=skips), Workspace.of(m).inventory_file("t"))
    assert cli.main(["--manifest", str(m.path), "lock", "--variant", "t", "--resolver", "uv"]) == 0, \
        capsys.readouterr().err
    expect = json.loads((Workspace.of(m).lock_dir("t") / LockFiles.EXPECT).read_text())
    assert expect["import_skip"] == {"pwt-torchy": "needs: driver: links libcuda (the base's own manifest)"}


def test_the_base_s_own_checks_hold_for_what_the_image_keeps_from_it(demo, capsys):
    """A base pinwheel built declares checks of its own packages (its expect.json's verify, kept in the
    inventory): the image's expect.json keeps them, marked as the base's, for what it keeps from the base,
    and not for a package it installs again (pwt-common)."""
    m, _ = demo
    own = {"import": [], "python": "import pwt_torchy", "needs": "cpu"}
    checks = (("pwt-common", {**own, "python": "import pwt_common"}), ("pwt-torchy", own))
    write_inventory(dataclasses.replace(BASE, verify=checks), Workspace.of(m).inventory_file("t"))
    assert cli.main(["--manifest", str(m.path), "lock", "--variant", "t", "--resolver", "uv"]) == 0, \
        capsys.readouterr().err
    expect = json.loads((Workspace.of(m).lock_dir("t") / LockFiles.EXPECT).read_text())
    assert expect["verify"] == {"pwt-torchy": {**own, "from": "base"}}
