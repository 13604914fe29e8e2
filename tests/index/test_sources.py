"""The one metadata source of a Plan: the default index, and torch from the variant's extra index."""

from __future__ import annotations

import hashlib

import pytest

from tests.support.local_index import LocalIndex
from tests.support.manifests import manifest_yaml, variant
from pinwheel import manifest
from pinwheel.index import HashMismatch, IndexClient, IndexNotConfigured, RoutedSource, metadata_source
from pinwheel.plan import plan_variant

TARGET = {"python": "3.12", "platform": "manylinux_2_28_x86_64", "base": "pinwheel/base:1"}
MANIFEST = manifest_yaml(
    variants=[variant("cu130", **TARGET), variant("cu129", cuda="12.9", torch_index_env="PWT_TORCH_INDEX", **TARGET)],
    steps="""\
  - name: base
    why: "torch"
    packages:
      - {requirement: "torch==2.13.0"}
""")


@pytest.fixture
def indexes(tmp_path, local_index, monkeypatch):
    monkeypatch.delenv("PWT_TORCH_INDEX", raising=False)
    local_index.add("torch", "2.13.0", ["nvidia-cudnn-cu13==9.20"])
    local_index.add("helper", "1.0")
    torch_index = LocalIndex(tmp_path / "torch-index")
    torch_index.add("torch", "2.13.0+cu129", ["nvidia-cudnn-cu12==9.10"])
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(MANIFEST)
    try:
        yield manifest.load(path), local_index.serve(), torch_index.serve()
    finally:
        torch_index.close()


def test_a_variant_without_an_extra_index_reads_everything_from_the_default(indexes, tmp_path):
    m, url, _ = indexes
    default = IndexClient(url, cache_dir=tmp_path / "cache")
    source = metadata_source(plan_variant(m, "cu130"), default)
    assert isinstance(source, RoutedSource) and source.indexes == [default]
    assert [str(v) for v in source.versions("torch")] == ["2.13.0"]


def test_torch_comes_from_the_variant_index_with_the_default_settings(indexes, tmp_path, monkeypatch):
    m, url, torch_url = indexes
    monkeypatch.setenv("PWT_TORCH_INDEX", torch_url)
    default = IndexClient(url, cache_dir=tmp_path / "cache", offline=False, retries=1, max_age=60, deadline=5,
                          refresh=True)
    source = metadata_source(plan_variant(m, "cu129"), default)
    torch = source.source_for("torch")
    assert torch is not default and torch.index_url == torch_url.rstrip("/") + "/"
    for attr in ("cache_dir", "offline", "retries", "max_age", "deadline", "refresh", "timeout", "backoff"):
        assert getattr(torch, attr) == getattr(default, attr), attr
    assert source.indexes == [default, torch]
    assert [str(v) for v in source.versions("torch")] == ["2.13.0+cu129"]
    assert source.metadata("torch", "2.13.0+cu129", "3.12", ["manylinux_2_28_x86_64"]).requires_dist[0].name \
        == "nvidia-cudnn-cu12"
    assert source.source_for("helper") is default


def test_an_unset_variant_index_says_what_to_set(indexes, tmp_path):
    m, url, _ = indexes
    source = metadata_source(plan_variant(m, "cu129"), IndexClient(url, cache_dir=tmp_path / "cache"))
    with pytest.raises(IndexNotConfigured, match=r"\$PWT_TORCH_INDEX, which is not set"):
        source.versions("torch")
    assert [str(v) for v in source.versions("helper")] == ["1.0"]
    assert len(source.indexes) == 1


def test_download_checks_the_listed_hash(local_index, tmp_path):
    wheel = local_index.add("pkg", "1.0")
    local_index.add("bad", "1.0", listed_sha256="0" * 64)
    c = IndexClient(local_index.serve(), cache_dir=tmp_path / "cache", retries=0)
    (f,) = c.files("pkg")
    dest = tmp_path / "wheels" / f.filename
    assert c.download(f, dest) == wheel.stat().st_size
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == f.sha256
    (bad,) = c.files("bad")
    with pytest.raises(HashMismatch):
        c.download(bad, tmp_path / "wheels" / bad.filename)
    assert sorted(p.name for p in (tmp_path / "wheels").iterdir()) == [f.filename]  # nothing half-written
