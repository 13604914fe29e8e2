"""miles' CUDA 13 image from its example manifest (images/miles-cu13/) on the sglang stand-in base: the
stand-in wheels written, the build's invariant passed, the findings the manifest settles held in the image,
the static smoke passed and the report clean on the real set but for the stand-in wheels' torch ABI.

Run with `make e2e`: it builds the sglang stand-in first where the engine lacks it (about 10 GB).
"""
from __future__ import annotations

import json

import pytest

from pinwheel.image.engine import Engine

from .examples import STAND_IN_BASES, Example, run_in, tail

pytestmark = [pytest.mark.e2e, pytest.mark.engine, pytest.mark.network, pytest.mark.holds(STAND_IN_BASES)]

EXAMPLE = Example("miles-cu13")
cli = EXAMPLE.cli


@pytest.fixture(scope="module")
def image(engine: Engine) -> str:
    return EXAMPLE.build()


PROBE = """
import importlib.metadata as m, importlib.util as u, json, pathlib
import flashinfer, flash_qla, multistorageclient
te = pathlib.Path(u.find_spec("transformer_engine").submodule_search_locations[0])
print(json.dumps({
    "versions": {n: m.version(n) for n in ("tilelang", "apache-tvm-ffi", "nvidia-cutlass-dsl-libs-cu13",
        "flashinfer-python", "torch-memory-saver", "transformer-engine", "nvidia-cudnn-cu13", "xattr")},
    "ring": u.find_spec("ring_flash_attn") is not None,
    "standin": flash_qla.STAND_IN,
    "patched": 'backward_override == "dequantized"' in (te / "pytorch/module/linear.py").read_text(),
}))
"""


def test_the_image_holds_the_settled_set(image: str) -> None:
    probe = run_in(image, PROBE)
    assert probe.returncode == 0, probe.stderr[-3000:]
    found = json.loads(probe.stdout)
    assert found["versions"] == {
        "tilelang": "0.1.9", "apache-tvm-ffi": "0.1.11", "nvidia-cutlass-dsl-libs-cu13": "4.6.2",
        "flashinfer-python": "0.6.15.post1", "torch-memory-saver": "0.0.9.post1", "transformer-engine": "2.17.0",
        "nvidia-cudnn-cu13": "9.22.0.52", "xattr": "1.3.1"}
    assert found["ring"] is False and found["standin"] is True and found["patched"] is True


def test_its_static_smoke_passes(image: str) -> None:
    smoke = cli("smoke", "--variant", "cu130", image, "--level", "static")
    assert smoke.returncode == 0, tail(smoke)
    assert "static: PASSED" in smoke.stdout, tail(smoke)


# the local and prebuilt wheels that are stand-ins here (standins.yaml): their torch ABI is not the real one's
STAND_INS = {"apex", "causal-conv1d", "emerging-optimizers", "fake-int4-quant-cuda", "fast-hadamard-transform",
             "flash-attn", "flash-attn-3", "flash-qla", "flashinfer-cubin", "flashinfer-jit-cache", "mamba-ssm",
             "mbridge", "megatron-bridge", "mooncake-transfer-engine-cuda13", "nvidia-resiliency-ext",
             "torch-memory-saver", "transformer-engine-torch"}


def test_the_report_on_the_real_set_is_clean_but_the_stand_ins_abi_with_every_drop_decided(image: str) -> None:
    """Every edge judged and every drop decided; what stays unchecked is exactly the stand-in wheels' torch ABI,
    which says nothing of the real builds (accepted with --allow-unchecked)."""
    plain = cli("report", "--variant", "cu130", "--json")
    assert plain.returncode == 3, tail(plain)
    proc = cli("report", "--variant", "cu130", "--json", "--allow-unchecked")
    assert proc.returncode == 0, tail(proc)
    data = json.loads(proc.stdout)
    unknown = {r["name"] for r in data["torch_abi"] if r["abi_class"] == "unknown"}
    assert unknown == STAND_INS and all(r["how"] == "stand-in" for r in data["torch_abi"] if r["name"] in unknown)
    assert data["summary"]["unchecked"] == data["summary"]["abi_unknown"] == len(STAND_INS)
    assert data["summary"]["verdict"] == "clean" and data["summary"]["conflicts"] == 0
    dropped = data["dropped_requirements"]
    assert dropped and all(d["allowed"] and d["why"] for d in dropped), dropped
    assert {("flash-qla", "apache-tvm-ffi"), ("flashinfer-python", "nccl4py")} <= {(d["package"], d["name"])
                                                                                  for d in dropped}
