"""The verl example's H200 record (images/verl-sglang/smoke-h200/): its GPU checks are the stand-in base's
own (sglang 0.5.12's kernel stack, declared in images/sglang-base-v0512/ and kept through the base
inventory), and they ran and passed; each failure demonstration failed naming its stage."""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "images" / "verl-sglang"


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_the_checks_are_the_base_s_own_and_the_host_expect_is_the_image_s():
    image = load(EXAMPLE / "lock" / "cu130" / "expect.json")
    host = load(EXAMPLE / "smoke-h200" / "smoke-h200-expect.json")
    assert {p: v.get("from") for p, v in image["verify"].items()} == {"flashinfer-python": "base",
                                                                      "nvidia-cudnn-frontend": "base"}
    assert host["verify"] == image["verify"]
    assert set(host["removed"]) | set(host["host_kept_removed"]) == set(image["removed"])
    assert {**host["pins"], **host["base_unchanged"], **host["host_provided"]} == {**image["pins"], **image["base_unchanged"]}


def test_the_h200_run_passed_the_declared_gpu_checks():
    run = load(EXAMPLE / "smoke-h200" / "smoke-h200.json")
    assert {lvl: v["status"] for lvl, v in run["levels"].items()} == {"static": "passed", "import": "passed",
                                                                        "gpu": "passed"}
    stages = {(s["level"], s["name"]): s for s in run["stages"]}
    assert all(stages[("gpu", f"verify:{p}")]["status"] == "passed" for p in ("flashinfer-python", "nvidia-cudnn-frontend"))
    assert stages[("gpu", "flash_mla")]["provider"] == "sgl_kernel.flash_mla"
    assert stages[("import", "sglang-kernel/other-interpreter")]["files"] == ["_mscclpp.cpython-310-x86_64-linux-gnu.so"]


def test_each_h200_failure_demonstration_failed_naming_its_stage():
    runs = {r["name"]: r for r in load(EXAMPLE / "smoke-h200" / "smoke-h200-failures.json")["runs"]}
    for stage in ("indexer", "topk", "mla"):
        r = runs[f"corrupt-{stage}"]
        assert r["exit_code"] == 1 and r["failed_stages"] == [f"gpu/{stage}", "gpu/verify:nvidia-cudnn-frontend"]
    assert runs["static-mismatch"]["failed_stages"] == ["static/pins"]
