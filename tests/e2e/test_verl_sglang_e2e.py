"""verl's stable sglang image from its example manifest (images/verl-sglang/) on the sglang 0.5.12 stand-in
base: the stand-in wheels written, the build's invariant passed, the findings the manifest settles held in
the image, the static smoke passed and the report clean on the real set but for the stand-in wheels' torch ABI.

Run with `make e2e`: it builds the sglang 0.5.12 stand-in first where the engine lacks it (about 10 GB).
"""
from __future__ import annotations

import json

import pytest

from pinwheel.image.engine import Engine

from .examples import STAND_IN_BASES, Example, run_in, tail

pytestmark = [pytest.mark.e2e, pytest.mark.engine, pytest.mark.network, pytest.mark.holds(STAND_IN_BASES)]

EXAMPLE = Example("verl-sglang")
cli = EXAMPLE.cli


@pytest.fixture(scope="module")
def image(engine: Engine) -> str:
    return EXAMPLE.build()


PROBE = """
import importlib.metadata as m, importlib.util as u, json
import megatron.core, omegaconf, hydra
def version(name):
    try:
        return m.version(name)
    except m.PackageNotFoundError:
        return None
print(json.dumps({
    "versions": {n: version(n) for n in ("numpy", "pandas", "packaging", "ml-dtypes", "antlr4-python3-runtime",
        "hydra-core", "omegaconf", "tensordict", "pyvers", "nvidia-nccl-cu13", "nvidia-cudnn-cu13", "flash-attn",
        "trl", "transferqueue", "megatron-core", "megatron-bridge", "mbridge")},
    "gone": [n for n in ("verl", "scipy", "flash-attn-4") if version(n) is not None or u.find_spec(n.replace("-", "_"))],
    "standin": megatron.core.STAND_IN,
}))
"""


def test_the_image_holds_the_settled_set(image: str) -> None:
    probe = run_in(image, PROBE)
    assert probe.returncode == 0, probe.stderr[-3000:]
    found = json.loads(probe.stdout)
    assert found["versions"] == {
        # verl 0.7.1 asks numpy<2; the image keeps the base's numpy and pandas (README.md)
        "numpy": "2.3.5", "pandas": "3.1.1", "ml-dtypes": "0.7.0",
        # pyvers 0.1.0 caps packaging below 26, as the file's install does
        "packaging": "25.0", "pyvers": "0.1.0", "tensordict": "0.10.0",
        # the sdist-only antlr4 runtime that hydra-core and omegaconf pin, built from its hashed sdist
        "antlr4-python3-runtime": "4.9.3", "hydra-core": "1.3.8", "omegaconf": "2.3.1",
        "nvidia-nccl-cu13": "2.32.3", "nvidia-cudnn-cu13": "9.28.1.4", "flash-attn": "2.8.3",
        "trl": "0.27.0", "transferqueue": "0.1.8", "megatron-core": "0.18.0", "megatron-bridge": "0.5.2",
        "mbridge": "0.15.1"}
    assert found["gone"] == [], found["gone"]  # verl, scipy and flash-attn-4 are removed, as the file does
    assert found["standin"] is True


def test_its_static_smoke_passes(image: str) -> None:
    smoke = cli("smoke", "--variant", "cu130", image, "--level", "static")
    assert smoke.returncode == 0, tail(smoke)
    assert "static: PASSED" in smoke.stdout, tail(smoke)


STAND_INS = {"fast-hadamard-transform", "flash-attn", "mbridge", "megatron-bridge", "megatron-core"}


def test_the_report_on_the_real_set_is_clean_but_the_stand_ins_abi(image: str) -> None:
    """Every edge judged and every drop and removal decided; what stays unchecked is exactly the torch ABI of
    the stand-in wheels, which says nothing of the real builds (accepted with --allow-unchecked, by name)."""
    plain = cli("report", "--variant", "cu130", "--json")
    assert plain.returncode == 3, tail(plain)
    proc = cli("report", "--variant", "cu130", "--json", "--allow-unchecked")
    assert proc.returncode == 0, tail(proc)
    data = json.loads(proc.stdout)
    unknown = {r["name"] for r in data["torch_abi"] if r["abi_class"] == "unknown"}
    assert unknown == STAND_INS and all(r["how"] == "stand-in" for r in data["torch_abi"] if r["name"] in unknown)
    assert data["summary"]["unchecked"] == data["summary"]["abi_unknown"] == len(STAND_INS)
    assert data["summary"]["edges"]["unchecked"] == 0 and data["summary"]["conflicts"] == 0
    dropped = data["dropped_requirements"]
    assert dropped and all(d["allowed"] and d["why"] for d in dropped), dropped
    assert {("megatron-bridge", "transformers"), ("megatron-bridge", "hydra-core")} <= {
        (d["package"], d["name"]) for d in dropped}
    unmet = {(e["parent"], e["name"]) for e in data["unmet_by_removal"]}
    assert unmet == {("sglang", "scipy"), ("sglang", "flash-attn-4")}, unmet
    assert {r["package"] for r in data["removals"]} == {"flash-attn-4", "scipy", "verl"}
    assert data["summary"]["verdict"] == "clean" and data["summary"]["unchecked_allowed"], data["next_steps"]
