"""The shipped manifest's report on real index metadata: what the report exists to show."""
from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from pinwheel import cli

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    def run(*extra: str) -> tuple[int, dict]:
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


def edited_copy(tmp_path: Path, old: str, new: str) -> Path:
    """The shipped manifest and its committed lock in a scratch root, with one edit; the index cache is shared."""
    text = (ROOT / "wheels_manifest.yaml").read_text()
    assert old in text
    (tmp_path / "wheels_manifest.yaml").write_text(text.replace(old, new))
    shutil.copytree(ROOT / "images", tmp_path / "images")
    (ROOT / ".cache").mkdir(exist_ok=True)
    (tmp_path / ".cache").symlink_to(ROOT / ".cache")
    return tmp_path / "wheels_manifest.yaml"


def run_json(path: Path, *extra: str) -> tuple[int, dict]:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cli.main(["--manifest", str(path), "report", "--cuda", "13", "--json", *extra])
    return rc, json.loads(buf.getvalue())


def test_a_stale_lock_is_not_used_and_not_clean(tmp_path):
    path = edited_copy(tmp_path, '"flashinfer-python==0.6.15.post1"', '"flashinfer-python==0.7.2.post1"')
    rc, data = run_json(path)
    assert rc == 1
    assert data["locked"] is False and data["lock"]["status"] == "stale" and not data["summary"]["clean"]
    versions = {p["name"]: p["version"] for p in data["packages"]}
    assert versions["flashinfer-python"] == "0.7.2.post1"
    (edge,) = [e for e in data["edges"] if e["parent"] == "flashinfer-python" and e["name"] == "nvidia-cudnn-frontend"]
    assert edge["verdict"] == "violated" and edge["requirement"] == "nvidia-cudnn-frontend>=1.31.0"


def test_sglang_shows_every_clash_in_one_run(tmp_path):
    path = edited_copy(tmp_path, '      - requirement: "torch-c-dlpack-ext==0.1.5"',
                       '      - requirement: "sglang==0.5.23"\n      - requirement: "torch-c-dlpack-ext==0.1.5"')
    rc, data = run_json(path)
    assert rc == 1
    clashes = {c["package"]: c for c in data["clashes"]}
    assert "flashinfer_python[cu13]==0.7.2 (from sglang 0.5.23)" in clashes["flashinfer-python"]["wanted"]
    assert "flashinfer-python==0.6.15.post1 (from the manifest)" in clashes["flashinfer-python"]["wanted"]
    assert "nvidia-cutlass-dsl[cu13]==4.8.0 (from sglang 0.5.23)" in clashes["nvidia-cutlass-dsl"]["wanted"]
    # torch==2.14.1 from sglang moves the torch step's 2.13.0: an order hazard, in the same run
    (torch,) = [h for h in data["hazards"] if h["package"] == "torch"]
    assert (torch["before"], torch["after"], torch["step"]) == ("2.13.0", "2.14.1", "kernels")
    (pin,) = [s for s in data["shared_pins"] if s["name"] == "nvidia-cutlass-dsl"]
    assert pin["broken"]


def test_cudnn_frontend_132_breaks_the_shared_pin_in_report_as_in_bump(tmp_path):
    path = edited_copy(tmp_path, '"nvidia-cudnn-frontend==1.26.0"', '"nvidia-cudnn-frontend==1.32.0"')
    rc, data = run_json(path, "--no-lock")
    assert rc == 1
    (pin,) = [s for s in data["shared_pins"] if s["name"] == "nvidia-cutlass-dsl"]
    assert pin["broken"] and data["summary"]["shared_pins_broken"] >= 1
    assert any("nvidia-cudnn-frontend 1.32.0" in why for why in pin["broken_because"])
