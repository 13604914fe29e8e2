"""The miles example's H200 record (images/miles-cu13/smoke-h200/): the checks that ran are the image's own,
and the host's expect.json differs from the image's only where the host is not the image."""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "images" / "miles-cu13"
HOST_KEYS = ("pins", "base_unchanged", "dropped", "host_provided")


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_the_host_expect_is_the_images_own_but_for_what_was_not_carried():
    image = load(EXAMPLE / "lock" / "cu130" / "expect.json")
    host = load(EXAMPLE / "smoke-h200" / "smoke-h200-expect.json")
    assert {k: v for k, v in host.items() if k not in HOST_KEYS} == {k: v for k, v in image.items() if k not in HOST_KEYS}
    # every pin and unchanged base package is checked or named host-provided, none dropped or changed
    assert {**host["pins"], **host["base_unchanged"], **host["host_provided"]} == {**image["pins"], **image["base_unchanged"]}
    assert set(host["pins"]) | set(host["base_unchanged"]) and not set(host["pins"]) & set(host["host_provided"])
    for parent, entry in image["dropped"].items():
        mine = host["dropped"][parent]
        assert mine["requires"] == entry["requires"]
        added = {n: why for n, why in mine["allow_missing"].items() if n not in entry["allow_missing"]}
        assert all(why.startswith("not carried to the GPU host") for why in added.values()), added
        assert {n: mine["allow_missing"][n] for n in entry["allow_missing"]} == entry["allow_missing"]


def test_the_h200_run_passed_the_images_declared_gpu_checks():
    run = load(EXAMPLE / "smoke-h200" / "smoke-h200.json")
    assert {lvl: v["status"] for lvl, v in run["levels"].items()} == {"static": "passed", "import": "passed",
                                                                        "gpu": "passed"}
    stages = {(s["level"], s["name"]): s for s in run["stages"]}
    declared = {p for p, v in load(EXAMPLE / "lock" / "cu130" / "expect.json")["verify"].items() if v["needs"] == "gpu"}
    assert declared == {"nvidia-cutlass-dsl", "flashinfer-python"}
    assert all(stages[("gpu", f"verify:{p}")]["status"] == "passed" for p in declared)
    assert stages[("gpu", "flash_mla")]["provider"] == "sgl_kernel.flash_mla"
    assert all(stages[("gpu", n)]["status"] == "passed" for n in ("indexer", "topk", "mla"))
    assert run["device"]["capability"] == "9.0"


def test_each_h200_failure_demonstration_failed_naming_its_stage():
    runs = {r["name"]: r for r in load(EXAMPLE / "smoke-h200" / "smoke-h200-failures.json")["runs"]}
    for stage in ("indexer", "topk", "mla"):
        r = runs[f"corrupt-{stage}"]
        assert r["exit_code"] == 1 and r["failed_stages"] == [f"gpu/{stage}", "gpu/verify:nvidia-cutlass-dsl"]
    assert runs["static-mismatch"]["failed_stages"] == ["static/pins"]
    assert "gpu/cudnn.DSA" in runs["no-dsa"]["failed_stages"] and runs["no-dsa"]["exit_code"] == 1
