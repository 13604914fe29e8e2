"""Files the manifest names, read through a symlinked directory or a symlink out of the project: refused with
exit 2 and one line, whatever command reads them first. Inside the project, a symlinked directory is fine."""
from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from .bounded import assert_refused, cli
from .locked_project import write_manifest

PATCH_STEPS = """\
  - name: core
    kind: wheels
    why: "one package"
    packages:
      - requirement: "six==1.16.0"
  - name: fixes
    kind: patch
    why: "a fix upstream has not released"
    patches:
      - {file: linkdir/passwd, applies_to: "six==1.16.0", why: "a hostile one"}
"""
LOCAL_STEPS = """\
  - name: core
    why: "an in-house kernel"
    packages:
      - requirement: "pwh-kern==1.0+inhouse"
        why: "built in-house"
        local: {glob: "pwh_kern-*.whl", if_missing: fail}
"""


def manifest_args(root: Path, *args: str) -> list[str]:
    return ["--manifest", str(root / "wheels_manifest.yaml"), *args]


def make_wheel(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("pwh_kern-1.0+inhouse.dist-info/METADATA", "Metadata-Version: 2.1\nName: pwh-kern\nVersion: 1.0+inhouse\n")
    return path


@pytest.mark.parametrize("target", ["/etc", "outside"])
def test_a_patch_through_a_symlinked_directory_outside_is_refused(tmp_path, target: str):
    root = tmp_path / "project"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text("--- a/six.py\n+++ b/six.py\n@@ -1 +1 @@\n-x\n+y\n")
    os.symlink("/etc" if target == "/etc" else outside, root / "linkdir")
    write_manifest(root, PATCH_STEPS, key="steps")
    for command in (["render", "--stdout"], ["report", "--offline", "--no-lock"]):
        proc = cli(*manifest_args(root, *command))
        assert_refused(proc, 2, "wheels_manifest.yaml:", "patch linkdir/passwd resolves to", "outside the project")


def test_a_patch_through_a_symlinked_directory_inside_loads(tmp_path):
    root = tmp_path / "project"
    (root / "patches").mkdir(parents=True)
    (root / "patches" / "passwd").write_text("--- a/six.py\n+++ b/six.py\n@@ -1 +1 @@\n-x\n+y\n")
    os.symlink(root / "patches", root / "linkdir")
    write_manifest(root, PATCH_STEPS, key="steps")
    proc = cli(*manifest_args(root, "render", "--stdout"))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("how", ["wheel-symlink", "wheels-dir-symlink"])
def test_a_local_wheel_outside_the_project_is_refused(tmp_path, how: str):
    root = tmp_path / "project"
    root.mkdir()
    wheel = make_wheel(tmp_path / "outside" / "pwh_kern-1.0+inhouse-py3-none-any.whl")
    if how == "wheel-symlink":
        (root / "wheels").mkdir()
        os.symlink(wheel, root / "wheels" / wheel.name)
    else:
        os.symlink(wheel.parent, root / "wheels")
    write_manifest(root, LOCAL_STEPS)
    proc = cli(*manifest_args(root, "report", "--offline", "--no-lock"))
    assert_refused(proc, 2, f"local wheel {root / 'wheels' / wheel.name} resolves to {wheel}", "outside the project")
