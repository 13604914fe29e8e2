"""The shipped manifest's report on real index metadata: what the report exists to show."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinwheel import cli

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    def run(*extra: str) -> tuple[int, dict]:
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = cli.main(["--manifest", str(ROOT / "wheels_manifest.yaml"), "report", "--cuda", "13", "--json", *extra])
        return rc, json.loads(buf.getvalue())

    return run


def test_locked_cu130_is_clean_and_shows_the_suppressed_cutedsl_pin(report):
    rc, data = report()
    assert data["locked"] is True
    assert rc == 0 and data["summary"]["clean"], data["summary"]
    assert data["summary"]["edges"]["violated"] == 0
    (cutedsl,) = [e for e in data["edges"] if e["parent"] == "nvidia-cudnn-frontend" and e["name"] == "nvidia-cutlass-dsl"]
    assert (cutedsl["verdict"], cutedsl["extra"], cutedsl["parent_version"]) == ("suppressed", "cutedsl", "1.26.0")
    assert cutedsl["detail"] == "would downgrade nvidia-cutlass-dsl 4.6.2 → 4.5.0"
    (pin,) = [s for s in data["shared_pins"] if s["name"] == "nvidia-cutlass-dsl"]
    assert pin["installed"] == "4.6.2"
    assert [x["parent"] for x in pin["excluded_by"]] == ["nvidia-cudnn-frontend"]


def test_the_lock_removes_the_seed_style_churn(report):
    _, data = report()
    assert data["hazards"] == []
    churn = {h["package"]: h for h in data["unlocked_hazards"]}
    bindings = churn["cuda-bindings"]
    assert (bindings["earlier_step"], bindings["step"], bindings["after"]) == ("torch", "kernels", "13.4.4")
    assert bindings["before"] != "13.4.4" and bindings["cause"] == "cuda-python 13.4.4"
    frontend = churn["nvidia-cudnn-frontend"]
    assert (frontend["earlier_step"], frontend["step"], frontend["after"]) == ("kernels", "cudnn-frontend", "1.26.0")
    installed = {p["name"]: p["version"] for p in data["packages"]}
    assert installed["nvidia-cudnn-frontend"] == "1.26.0" and installed["cuda-bindings"] == "13.4.4"


def test_without_the_lock_the_churn_is_a_conflict(report):
    rc, data = report("--no-lock")
    assert rc == 1 and not data["locked"]
    assert {h["package"] for h in data["hazards"]} == {"cuda-bindings", "nvidia-cudnn-frontend"}


def test_torch_abi_of_the_fallback(report):
    _, data = report()
    (mla,) = [r for r in data["torch_abi"] if r["name"] == "sgl-flash-mla"]
    assert (mla["source"], mla["abi_class"], mla["declared_torch"]) == ("fallback", "stable", ">=2.14.1")
