"""The DESIGN data points, read from the real index (pip's configured URL)."""

from __future__ import annotations

import pytest
from packaging.version import Version

from pinwheel.index import IndexClient, IndexUnavailable, target_environment

pytestmark = pytest.mark.network

TARGET = ("3.12", ["manylinux_2_28_x86_64"])
ENV = target_environment("3.12", "manylinux_2_28_x86_64")


@pytest.fixture(scope="module")
def real_index(tmp_path_factory):
    c = IndexClient(cache_dir=tmp_path_factory.mktemp("index-cache"), retries=2, timeout=20)
    try:
        c.files("sgl-flash-mla")
    except IndexUnavailable as exc:  # a test of the real index fails without it: it checked nothing
        pytest.fail(f"the package index is not reachable, so this test of it checked nothing: {exc}", pytrace=False)
    return c


def by_name(reqs):
    out = {}
    for r in reqs:
        out.setdefault(r.name, []).append(r)
    return out


def test_cudnn_frontend_1_26_cutedsl_pins_cutlass_dsl_4_5(real_index):
    meta = real_index.metadata("nvidia-cudnn-frontend", "1.26.0", *TARGET)
    assert meta.requirements(environment=ENV) == []  # no base requirements
    assert "cutedsl" in meta.provides_extra
    cutedsl = by_name(meta.requirements(["cutedsl"], ENV))
    (dsl,) = cutedsl["nvidia-cutlass-dsl"]
    assert dsl.extras == {"cu13"} and str(dsl.specifier) == "==4.5.0"
    assert {"apache-tvm-ffi", "torch-c-dlpack-ext", "cuda-python"} <= set(cutedsl)


def test_cutlass_dsl_4_6_2_pulls_cu12_libs_without_an_extra(real_index):
    meta = real_index.metadata("nvidia-cutlass-dsl", "4.6.2", *TARGET)
    (libs,) = by_name(meta.requirements(environment=ENV))["nvidia-cutlass-dsl-libs-cu12"]
    assert str(libs.specifier) == "==4.6.2" and libs.marker is None


def test_flashinfer_0_6_15_post1_floor_on_cudnn_frontend(real_index):
    meta = real_index.metadata("flashinfer-python", "0.6.15.post1", *TARGET)
    (fe,) = by_name(meta.requirements(environment=ENV))["nvidia-cudnn-frontend"]
    assert str(fe.specifier) == ">=1.13.0"


def test_sgl_flash_mla_1_0_0_needs_torch_2_14_1(real_index):
    wheel = real_index.best_wheel("sgl-flash-mla", "1.0.0", *TARGET)
    assert wheel is not None and "abi3" in wheel.filename and "x86_64" in wheel.filename
    meta = real_index.metadata("sgl-flash-mla", "1.0.0", *TARGET)
    (torch,) = by_name(meta.requirements(environment=ENV))["torch"]
    assert str(torch.specifier) == ">=2.14.1"


def test_torch_2_13_0_accepts_cuda_bindings_13(real_index):
    wheel = real_index.best_wheel("torch", "2.13.0", *TARGET)
    assert wheel is not None and wheel.filename.startswith("torch-2.13.0-cp312-cp312-manylinux")
    meta = real_index.metadata("torch", "2.13.0", *TARGET)
    assert meta.filename == wheel.filename
    (cb,) = by_name(meta.requirements(environment=ENV))["cuda-bindings"]
    for ok in ("13.0.3", "13.4.4", "13.5.0"):
        assert cb.specifier.contains(ok)
    for bad in ("13.0.2", "14.0.0", "12.9.0"):
        assert not cb.specifier.contains(bad)
    assert Version("2.13.0") in real_index.versions("torch")
