"""A variant whose torch comes from an extra index (torch_index_env): read from there, or refuse."""

from __future__ import annotations

import pytest

from tests.support.local_index import LocalIndex
from pinwheel import manifest as manifest_mod
from pinwheel.reports.bump import BumpInputError, bump
from pinwheel.index import IndexClient

MANIFEST = """\
manifest_version: 1
image:
  name: train
  repository: test/train
variants:
  cu129:
    cuda: "12.9"
    torch: "2.13.0"
    python: "3.11"
    platform: manylinux_2_36_x86_64
    base: test/base:1
    tag: "cu129-{date}"
    torch_index_env: PINWHEEL_TEST_TORCH_INDEX
wheel_sets:
  - name: torch
    why: "the base"
    packages:
      - requirement: "torch==2.13.0"
"""


@pytest.fixture
def cu129(tmp_path, local_index, monkeypatch):
    local_index.add("torch", "2.13.0", ["nvidia-cudnn-cu13==9.20.0.48"])  # the default index's CUDA 13 build
    local_index.add("torch", "2.14.1", ["nvidia-cudnn-cu13==9.24.0.43"])
    for v in ("9.20.0.48", "9.24.0.43"):
        local_index.add("nvidia-cudnn-cu13", v)
    for v in ("9.10.2.21", "9.12.0.46"):
        local_index.add("nvidia-cudnn-cu12", v)
    torch_index = LocalIndex(tmp_path / "torch-index")
    torch_index.add("torch", "2.13.0+cu129", ["nvidia-cudnn-cu12==9.10.2.21"])
    torch_index.add("torch", "2.14.1+cu129", ["nvidia-cudnn-cu12==9.12.0.46"])
    root = tmp_path / "repo"
    root.mkdir()
    (root / "wheels_manifest.yaml").write_text(MANIFEST)
    try:
        yield root / "wheels_manifest.yaml", local_index.serve(), torch_index.serve()
    finally:
        torch_index.close()


def test_torch_from_the_variant_index(cu129, monkeypatch) -> None:
    path, url, torch_url = cu129
    m = manifest_mod.load(path)
    client = IndexClient(index_url=url, cache_dir=path.parent / ".cache" / "index")
    with pytest.raises(BumpInputError, match=r"\$PINWHEEL_TEST_TORCH_INDEX, which is not set"):
        bump(m, "cu129", ["torch==2.14.1"], client)
    monkeypatch.setenv("PINWHEEL_TEST_TORCH_INDEX", torch_url)
    report = bump(m, "cu129", ["torch==2.14.1"], client)
    assert report.bumps == [{"name": "torch", "from": "2.13.0+cu129", "to": "2.14.1+cu129", "in_image": True}]
    moves = {mv.name: (mv.today, mv.after, mv.kind) for mv in report.moves}
    assert moves == {"nvidia-cudnn-cu12": ("9.10.2.21", "9.12.0.46", "upgrade")}
    assert any("$PINWHEEL_TEST_TORCH_INDEX" in n for n in report.notes)
