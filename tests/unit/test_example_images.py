"""Example images beside the root's own: a manifest in images/<name>/ keeps its files next to it, and a
base that another manifest of the repository builds is found by its repository and literal tag."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pinwheel import manifest
from pinwheel.image.sibling_base import sibling_base
from pinwheel.workspace import Workspace

from tests.support.manifests import manifest_yaml, variant

ROOT = Path(__file__).resolve().parents[2]
STEPS = '  - name: core\n    why: "tiny"\n    packages:\n      - {requirement: "six==1.16.0", why: "tiny"}\n'


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def repo(tmp_path: Path, sibling_tag: str = "v1-cu130") -> Path:
    write(tmp_path / "wheels_manifest.yaml", manifest_yaml(steps=STEPS, image="train"))
    write(tmp_path / "images" / "sb" / "wheels_manifest.yaml",
          manifest_yaml(steps=STEPS, image="sb", variants=[variant("cu130", tag=sibling_tag)]))
    write(tmp_path / "images" / "ex" / "wheels_manifest.yaml",
          manifest_yaml(steps=STEPS, image="ex", variants=[variant("cu130", base=f"pinwheel/sb:{sibling_tag}")]))
    return tmp_path


def test_an_example_manifest_keeps_its_files_next_to_it(tmp_path):
    root = repo(tmp_path)
    ws = Workspace.of(manifest.load(root / "images" / "ex" / "wheels_manifest.yaml"))
    assert ws.image_dir == root / "images" / "ex"
    assert ws.dockerfile == root / "images" / "ex" / "Dockerfile"
    assert ws.lock_dir("cu130") == root / "images" / "ex" / "lock" / "cu130"
    assert ws.repository_root == root
    top = Workspace.of(manifest.load(root / "wheels_manifest.yaml"))
    assert top.image_dir == root / "images" / "train" and top.repository_root == root
    assert ws.manifests() == top.manifests() == [
        root / "wheels_manifest.yaml", root / "images" / "ex" / "wheels_manifest.yaml",
        root / "images" / "sb" / "wheels_manifest.yaml"]


def test_an_example_manifest_named_bare_from_its_own_directory_is_still_the_example(tmp_path, monkeypatch):
    """`cd images/ex && build.py --manifest wheels_manifest.yaml report`: the manifest's directory is "."."""
    root = repo(tmp_path)
    monkeypatch.chdir(root / "images" / "ex")
    ws = Workspace.of(manifest.load("wheels_manifest.yaml"))
    assert ws.image_dir.resolve() == root / "images" / "ex"
    assert ws.lock_dir("cu130").resolve() == root / "images" / "ex" / "lock" / "cu130"
    assert ws.repository_root == root


def test_a_manifest_in_a_directory_of_another_name_is_not_an_example(tmp_path):
    path = write(tmp_path / "images" / "other" / "wheels_manifest.yaml", manifest_yaml(steps=STEPS, image="ex"))
    ws = Workspace.of(manifest.load(path))
    assert ws.image_dir == path.parent / "images" / "ex"
    assert ws.repository_root == path.parent


def test_the_base_another_manifest_builds_is_found_by_repository_and_tag(tmp_path):
    root = repo(tmp_path)
    ws = Workspace.of(manifest.load(root / "images" / "ex" / "wheels_manifest.yaml"))
    found = sibling_base(ws, "pinwheel/sb:v1-cu130")
    assert found is not None and found.manifest == root / "images" / "sb" / "wheels_manifest.yaml"
    assert found.variant == "cu130"
    assert sibling_base(ws, "pinwheel/sb:v2-cu130") is None
    assert sibling_base(ws, "pinwheel/other:v1-cu130") is None
    assert sibling_base(ws, "pinwheel/sb") is None  # no tag, nothing to match


def test_a_dated_tag_names_no_base_and_a_broken_sibling_is_passed_over(tmp_path):
    root = repo(tmp_path, sibling_tag="cu130-{date}")
    ws = Workspace.of(manifest.load(root / "wheels_manifest.yaml"))
    assert sibling_base(ws, "pinwheel/sb:cu130-{date}") is None
    write(root / "images" / "sb" / "wheels_manifest.yaml", "manifest_version: [")
    assert sibling_base(ws, "pinwheel/sb:v1-cu130") is None


@pytest.mark.parametrize("example", sorted(p.parent.name for p in (ROOT / "images").glob("*/wheels_manifest.yaml")))
def test_each_shipped_example_is_rendered_and_locked_from_its_manifest(example):
    path = ROOT / "images" / example / "wheels_manifest.yaml"
    for check in (["render", "--check"], ["lock", "--check"]):
        done = subprocess.run([sys.executable, str(ROOT / "build.py"), "--manifest", str(path), *check],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (check, done.stdout, done.stderr)
