"""The hostile suite's project: one manifest whose one package comes from the index under test."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.manifests import manifest_yaml, variant

APP_SET = """\
  - name: one
    why: "the app"
    packages:
      - {requirement: "app==1.0"}
"""
SHARED_DSL = '  - {requirement: "shared-dsl==1.5", needed_by: [app], why: "one DSL for everyone"}\n'


@pytest.fixture
def project(tmp_path) -> Path:
    """A manifest asking for app==1.0 (with shared-dsl pinned at 1.5), its index cache under tmp_path."""
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(manifest_yaml(variants=[variant("t", platform="manylinux_2_28_x86_64")], shared_pins=SHARED_DSL,
                                  steps=APP_SET + '      - {requirement: "shared-dsl==1.5"}\n'))
    return path
