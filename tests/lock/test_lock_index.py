"""Named indexes (`indexes: {NAME: {url, why}}`, `index: NAME` on a package) with uv's explicit-index rule:
a package named to an index comes only from it, even where the default index has the same version in other
bytes; its own requirements come from the default. The lock and the pylock record where each file comes from. Real uv runs
against two local HTTP indexes.
"""
from __future__ import annotations

import hashlib
import json
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.manifests import assert_refused_at, manifest_yaml, variant
from pinwheel import cli
from pinwheel.lock import parse_requirements

from tests.support.local_index import LocalIndex

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
WHY = "the kernel cubins are published on the vendor's own page"

STEPS = """\
  - name: kernels
    why: "an app and the cubins it loads"
    packages:
      - {requirement: "pwi-app==1.0"}
      - {requirement: "pwi-cubin==2.0", index: vendor, why: "only the vendor's build matches its kernels"}
"""


@pytest.fixture
def second(tmp_path):
    index = LocalIndex(tmp_path / "vendor-index")
    try:
        yield index
    finally:
        index.close()


@pytest.fixture
def project(local_index, second, local_project):
    local_index.add("pwi-app", "1.0", requires=["pwi-cubin>=1", "pwi-common"])
    local_index.add("pwi-common", "1.0")
    local_index.add("pwi-cubin", "2.0", payload_size=8)  # the same version in other bytes: never taken
    second.add("pwi-cubin", "2.0", requires=["pwi-common"], payload_size=32)
    second.add("pwi-common", "9.0")  # on the vendor's page too: not named there, so not taken from it
    root = local_project(local_index.serve())
    return root, second.serve()


def write(root: Path, vendor_url: str, steps: str = STEPS) -> None:
    head = f'indexes:\n  vendor: {{url: "{vendor_url}", why: "{WHY}"}}\n'
    (root / "wheels_manifest.yaml").write_text(head + manifest_yaml(steps=steps, variants=[variant("cu130", python=PY)]))


def run(root: Path, *args: str) -> int:
    return cli.main(["--manifest", str(root / "wheels_manifest.yaml"), *args])


def test_a_named_package_comes_only_from_its_index_and_the_lock_says_so(project, second, capsys):
    root, vendor = project
    write(root, vendor)
    assert run(root, "lock", "--variant", "cu130") == 0
    lock = root / "images" / "demo" / "lock" / "cu130"
    full = parse_requirements((lock / "requirements.txt").read_text())
    assert {n: p.version for n, p in full.items()} == {"pwi-app": "1.0", "pwi-common": "1.0", "pwi-cubin": "2.0"}
    vendor_file = next(f for f in (second.root / "files").iterdir() if f.name.startswith("pwi_cubin-2.0") and f.name.endswith(".whl"))
    assert full["pwi-cubin"].hashes == (f"sha256:{hashlib.sha256(vendor_file.read_bytes()).hexdigest()}",)
    text = (lock / "01-kernels.txt").read_text()
    assert f"    # from index vendor only: {WHY}" in text
    for f in lock.iterdir():  # the lock names the index, never its URL
        assert vendor not in f.read_text() and "127.0.0.1" not in f.read_text(), f.name

    pylock = tomllib.loads((root / ".pinwheel" / "pylock" / "pylock.cu130.toml").read_text())
    by_name = {p["name"]: p for p in pylock["packages"]}
    [wheel] = by_name["pwi-cubin"]["wheels"]
    assert wheel["url"].startswith(vendor.removesuffix("/simple/")), wheel
    assert not by_name["pwi-common"]["wheels"][0]["url"].startswith(vendor.removesuffix("/simple/"))
    capsys.readouterr()

    assert run(root, "report", "--variant", "cu130", "--json") == 0  # the metadata read from the vendor's index
    report = json.loads(capsys.readouterr().out)
    [edge] = [e for e in report["edges"] if e["parent"] == "pwi-cubin"]
    assert (edge["requirement"], edge["verdict"]) == ("pwi-common", "satisfied")


def test_pip_compile_refuses_named_indexes_by_name(project, capsys):
    root, vendor = project
    write(root, vendor)
    assert run(root, "lock", "--variant", "cu130", "--engine", "pip-compile") != 0
    err = capsys.readouterr().err
    assert "pwi-cubin" in err and "--engine uv" in err and "Traceback" not in err


def test_an_unknown_index_name_is_refused_at_its_line(tmp_path):
    text = 'indexes:\n  vendor: {url: "https://vendor.example/simple/", why: "w"}\n' + manifest_yaml(
        steps=STEPS.replace("index: vendor", "index: vendr"), variants=[variant()])
    assert_refused_at(text, tmp_path, 12, "wheel_sets[0].packages[1].index", "no index named 'vendr' (indexes: vendor)")
