"""`lock` without --engine, for a variant with two platforms (local HTTP index, real pip-compile and uv runs).

The host's own platform is locked with the default engine, another platform with uv (pip-compile resolves
for the host only), and a re-lock keeps the engine each platform's lock was made with.
"""
from __future__ import annotations

import platform
import sys
from pathlib import Path

import pytest

from pinwheel import cli
from pinwheel.lock import DEFAULT_ENGINE

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
HOST = {"x86_64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(platform.machine().lower())
OWN = {"x86_64": "linux/amd64", "aarch64": "linux/arm64"}
OTHER = {"x86_64": ("linux/arm64", "arm64"), "aarch64": ("linux/amd64", "amd64")}

pytestmark = pytest.mark.skipif(HOST is None or not sys.platform.startswith("linux"),
                                reason="needs a Linux x86_64 or aarch64 host")


@pytest.fixture
def project(local_index, tmp_path, monkeypatch, local_project):
    local_index.add("pwt-pure", "1.0")
    root = local_project(local_index.serve())
    (root / "wheels_manifest.yaml").write_text(f"""\
manifest_version: 1
image: {{name: demo, repository: pinwheel/demo, installer: pip}}  # the test index has the host's uv only
variants:
  cu130: {{cuda: "13.0", torch: "2.0", python: "{PY}", platform: manylinux_2_36_{HOST},
          platforms: [linux/amd64, linux/arm64], base: "pinwheel/base:bookworm-py311", tag: "cu130-{{date}}"}}
wheel_sets:
  - name: core
    why: "one pure wheel"
    packages:
      - {{requirement: "pwt-pure==1.0"}}
""")
    return root


def engine_of(lock_dir: Path) -> str:
    (line,) = [x for x in (lock_dir / "requirements.txt").read_text().splitlines() if x.startswith("# pinwheel-engine: ")]
    return line.split(": ", 1)[1]


def run(root: Path, *args: str) -> int:
    return cli.main(["--manifest", str(root / "wheels_manifest.yaml"), *args])


def test_the_other_platform_is_locked_with_uv_and_a_relock_keeps_each_engine(project, capsys):
    other_platform, other_arch = OTHER[HOST]
    own, other = project / "images/demo/lock/cu130", project / "images/demo/lock/cu130" / other_arch
    assert run(project, "lock") == 0
    assert (engine_of(own), engine_of(other)) == (DEFAULT_ENGINE, "uv")
    switched = "uv" if DEFAULT_ENGINE == "pip-compile" else "pip-compile"
    assert run(project, "lock", "--resolver", switched, "--platform", OWN[HOST]) == 0
    assert run(project, "lock") == 0  # each platform keeps the engine its lock was made with
    assert (engine_of(own), engine_of(other)) == (switched, "uv")
    capsys.readouterr()
    assert run(project, "lock", "--check") == 0
    out = capsys.readouterr().out
    assert f"cu130: up to date ({switched}" in out and f"cu130 {other_platform}: up to date (uv" in out
