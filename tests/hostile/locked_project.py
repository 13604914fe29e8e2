"""A small project locked against the local HTTP index (tests/support/local_index.py): one wheel set, one platform,
the lock written by the real `lock` command. What the hostile lock, publish and path cases start from."""
from __future__ import annotations

import sys
from pathlib import Path

from tests.support.manifests import manifest_yaml, variant
from pinwheel import cli

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
STEPS = """\
  - name: core
    why: "one package and its dependency"
    packages:
      - requirement: "pwh-top==1.0"
        verify: {python: "import sys; assert sys.version_info >= (3,)"}
"""


def populate(index) -> None:
    index.add("pwh-base", "1.0")
    index.add("pwh-top", "1.0", requires=["pwh-base==1.0"])


def write_manifest(root: Path, steps: str = STEPS, key: str = "wheel_sets", **variant_fields: str) -> Path:
    path = root / "wheels_manifest.yaml"
    path.write_text(manifest_yaml(steps=steps, variants=[variant("cu130", python=PY, **variant_fields)], key=key))
    return path


def lock(root: Path, *extra: str) -> int:
    return cli.main(["--manifest", str(root / "wheels_manifest.yaml"), "lock", "--variant", "cu130", *extra])


def lock_dir(root: Path) -> Path:
    return root / "images" / "demo" / "lock" / "cu130"
