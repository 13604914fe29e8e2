"""The in-image smoke payload, run as a subprocess the way an image runs it.

Everything here runs on a host without a GPU and without torch, except the one
test marked `gpu`, which is skipped (reported as SKIPPED) where no GPU is found.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.payload_archive import PAYLOAD, load  # the zipapp the build ships, and its modules

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
REQUESTS_VERSION = importlib.metadata.version("requests")
# The shipped cu130 image's expect.json: its checks (import_skip, verify) are what the smoke runs.
SHIPPED_EXPECT = json.loads((ROOT / "images" / "train" / "lock" / "cu130" / "expect.json").read_text())
SHIPPED_CHECKS = {"pins": {}, "import_skip": SHIPPED_EXPECT["import_skip"], "verify": SHIPPED_EXPECT["verify"]}


checks = load("checks")
dsa = load("checks.dsa_forward")
req = load("requirements")


def _has_driver() -> bool:
    for lib in ("libcuda.so.1", "libcuda.so"):
        try:
            ctypes.CDLL(lib)
            return True
        except OSError:
            continue
    return False


def _strict_json(text: str):
    def bad(token):
        raise ValueError(f"non-standard JSON constant {token}")

    return json.loads(text, parse_constant=bad)


def _gpu_sites() -> list:
    """--site for each directory in PINWHEEL_SMOKE_SITE (the kernel packages on a GPU host)."""
    return [a for d in filter(None, os.environ.get("PINWHEEL_SMOKE_SITE", "").split(os.pathsep)) for a in ("--site", d)]


def run_payload(tmp_path, expect, *args, env_extra=None, python=None):
    expect_path = tmp_path / "expect.json"
    expect_path.write_text(json.dumps(expect))
    out = tmp_path / "out.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINWHEEL_SMOKE_")}
    env.update(env_extra or {})
    proc = subprocess.run(
        [python or sys.executable, str(PAYLOAD), "--expect", str(expect_path), "--json", str(out), *args],
        capture_output=True, text=True, env=env, timeout=600,
    )
    doc = _strict_json(out.read_text()) if out.exists() else None
    return proc, doc


def stage(doc, level, name):
    matches = [s for s in doc["stages"] if s["level"] == level and s["name"] == name]
    assert len(matches) == 1, [f"{s['level']}/{s['name']}" for s in doc["stages"]]
    return matches[0]


# ---------------------------------------------------------------------------
# standalone

# ---------------------------------------------------------------------------
# static level

def test_static_passes_on_real_installed_versions(tmp_path):
    proc, doc = run_payload(tmp_path, {"pins": {"requests": REQUESTS_VERSION, "PyYAML": "6.0.3"}})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert doc["schema"] == 1 and doc["ok"] is True
    assert doc["levels"] == {"static": {"status": "passed"}}
    pins = stage(doc, "static", "pins")
    assert {p["name"]: p["found"] for p in pins["packages"]} == {"requests": REQUESTS_VERSION, "PyYAML": "6.0.3"}
    assert "RESULT: OK" in proc.stdout


def test_static_fails_on_version_mismatch_naming_package_expected_found(tmp_path):
    proc, doc = run_payload(tmp_path, {"pins": {"requests": "0.0.1"}})
    assert proc.returncode == 1
    assert doc["ok"] is False and doc["levels"]["static"]["status"] == "failed"
    msg = stage(doc, "static", "pins")["error"]
    assert f"requests: expected 0.0.1, found {REQUESTS_VERSION}" in msg
    assert f"requests: expected 0.0.1, found {REQUESTS_VERSION}" in proc.stdout
    assert "RESULT: FAILED (static/pins)" in proc.stdout


def test_static_fails_on_missing_package(tmp_path):
    proc, doc = run_payload(tmp_path, {"pins": {"no-such-dist-for-pinwheel": "1.0"}})
    assert proc.returncode == 1
    assert "no-such-dist-for-pinwheel: expected 1.0, found not installed" in stage(doc, "static", "pins")["error"]


def test_static_normalizes_names(tmp_path):
    proc, doc = run_payload(tmp_path, {"pins": {"PyYaml": "6.0.3", "Requests": REQUESTS_VERSION}})
    assert proc.returncode == 0, proc.stdout


def test_no_deps_drops_are_listed_with_what_is_present(tmp_path):
    expect = {
        "pins": {},
        "suppressed": {
            "requests": [
                "urllib3<3,>=1.21.1",
                "idna<1",
                "no-such-dist-for-pinwheel[cu13]==4.5.0; extra == \"cutedsl\"",
            ]
        },
    }
    proc, doc = run_payload(tmp_path, expect)
    assert proc.returncode == 0, proc.stdout  # informational, never a failure
    nd = stage(doc, "static", "no-deps")
    assert nd["status"] == "info" and nd["dropped"] == 3 and nd["present"] == 2
    items = {i["name"]: i for i in nd["packages"]["requests"]["dropped"]}
    urllib3 = importlib.metadata.version("urllib3")
    assert items["urllib3"]["installed"] == urllib3 and items["urllib3"]["satisfies"] is True
    assert items["urllib3"]["state"].startswith(f"present {urllib3}")
    assert items["idna"]["satisfies"] is False and "does not satisfy <1" in items["idna"]["state"]
    missing = items["no-such-dist-for-pinwheel"]
    assert missing["present"] is False and missing["extras"] == ["cu13"] and missing["marker"] == 'extra == "cutedsl"'
    assert missing["state"].startswith("absent")


def test_bad_expect_is_a_usage_error(tmp_path):
    proc, _ = run_payload(tmp_path, {"pins": ["requests"]})
    assert proc.returncode == 2 and "pins" in proc.stderr


# ---------------------------------------------------------------------------
# levels that need a driver / GPU, on a host without one

no_driver = pytest.mark.skipif(_has_driver(), reason="this host has an NVIDIA driver: the skip path cannot be shown")


@no_driver
def test_gpu_level_without_gpu_is_skipped_not_passed(tmp_path):
    proc, doc = run_payload(tmp_path, {"pins": {"requests": REQUESTS_VERSION}}, "--level", "gpu")
    assert proc.returncode == 0, proc.stdout
    assert doc["levels"]["static"]["status"] == "passed"
    for level in ("import", "gpu"):
        assert doc["levels"][level]["status"] == "skipped"
        assert "no usable NVIDIA driver" in doc["levels"][level]["reason"]
    assert doc["skipped_levels"] == ["import", "gpu"]
    assert not [s for s in doc["stages"] if s["level"] != "static" and s["status"] == "passed"]
    assert "SKIPPED" in proc.stdout and "NOT a pass" in proc.stdout
    assert "RESULT: OK (with skips)" in proc.stdout


@no_driver
def test_require_gpu_turns_the_skip_into_a_failure(tmp_path):
    proc, doc = run_payload(tmp_path, {"pins": {}}, "--level", "gpu", "--require", "gpu")
    assert proc.returncode == 1
    assert doc["ok"] is False and doc["levels"]["gpu"]["status"] == "skipped"
    assert "--require gpu" in doc["error"]
    assert "RESULT: FAILED (required level skipped)" in proc.stdout


def test_require_above_level_is_rejected(tmp_path):
    proc, _ = run_payload(tmp_path, {"pins": {}}, "--level", "static", "--require", "gpu")
    assert proc.returncode == 2


def _dist_info(site_dir: Path, name: str, version: str, modules=()) -> None:
    info = site_dir / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text("".join(f"{m}/__init__.py,,\n" for m in modules))


def _fake_site(tmp_path, body: str) -> Path:
    site_dir = tmp_path / "site"
    (site_dir / "cudnn").mkdir(parents=True)
    (site_dir / "cudnn" / "__init__.py").write_text(body)
    _dist_info(site_dir, "nvidia-cudnn-frontend", "1.0", ["cudnn"])
    return site_dir


# the shipped image's declaration, on the one package these tests install
DSA_CHECK = {"pins": {}, "verify": {"nvidia-cudnn-frontend": {"check": "dsa-forward", "needs": "gpu"}}}


def test_cudnn_without_dsa_fails_the_declared_dsa_check_clearly(tmp_path):
    site_dir = _fake_site(tmp_path, '__version__ = "1.12.0"\n')
    proc, doc = run_payload(
        tmp_path, DSA_CHECK, "--level", "gpu", "--site", str(site_dir),
        env_extra={"PINWHEEL_SMOKE_ASSUME_DRIVER": "1"},
    )
    assert proc.returncode == 1
    assert doc["levels"]["gpu"]["status"] == "failed"
    assert doc["hooks"]["assume_driver"] is True
    dsa = stage(doc, "gpu", "cudnn.DSA")
    assert dsa["status"] == "failed" and dsa["in_check"] == "dsa-forward"
    assert "cudnn.DSA is missing" in dsa["error"]
    assert "nvidia-cudnn-frontend 1.12.0" in dsa["error"] and "does not provide DSA" in dsa["error"]
    assert "cannot import name 'DSA'" in dsa["error"]
    verify = stage(doc, "gpu", "verify:nvidia-cudnn-frontend")
    assert verify["status"] == "failed" and verify["error"].startswith("nvidia-cudnn-frontend: check dsa-forward: ")
    assert "cudnn.DSA is missing" in verify["error"]
    assert stage(doc, "gpu", "dsa-forward") == {"level": "gpu", "name": "dsa-forward", "status": "skipped",
                                                "reason": "not run: an import failed", "in_check": "dsa-forward"}
    assert doc["packages"]["nvidia-cudnn-frontend"]["status"] == "failed"
    assert "gpu/cudnn.DSA" in proc.stdout and "cudnn.DSA is missing" in proc.stdout


def test_dsa_whose_kernels_cannot_load_fails_naming_the_wrapper(tmp_path):
    body = (
        '__version__ = "1.26.0"\n'
        "class _NS:\n"
        "    def __getattr__(self, name):\n"
        "        raise ImportError(\"No module named 'cutlass'\")\n"
        "DSA = _NS()\n"
    )
    site_dir = _fake_site(tmp_path, body)
    proc, doc = run_payload(
        tmp_path, DSA_CHECK, "--level", "gpu", "--site", str(site_dir),
        env_extra={"PINWHEEL_SMOKE_ASSUME_DRIVER": "1"},
    )
    assert proc.returncode == 1
    err = stage(doc, "gpu", "cudnn.DSA")["error"]
    assert "cudnn.DSA.indexer_forward_wrapper failed to load" in err and "cutlass" in err


def test_site_dirs_honour_pth_files(tmp_path):
    """--site uses site.addsitedir, so a .pth file there (how the CuTe DSL finds its package) works."""
    site_dir = tmp_path / "site"
    pkgs = tmp_path / "elsewhere"
    (pkgs / "cudnn").mkdir(parents=True)
    (pkgs / "cudnn" / "__init__.py").write_text('__version__ = "9.9.9"\n')
    site_dir.mkdir()
    _dist_info(site_dir, "nvidia-cudnn-frontend", "9.9.9")
    (site_dir / "extra.pth").write_text(str(pkgs) + "\n")
    proc, doc = run_payload(
        tmp_path, DSA_CHECK, "--level", "gpu", "--site", str(site_dir),
        env_extra={"PINWHEEL_SMOKE_ASSUME_DRIVER": "1"},
    )
    assert "nvidia-cudnn-frontend 9.9.9" in stage(doc, "gpu", "cudnn.DSA")["error"]


# ---------------------------------------------------------------------------
# the import and gpu levels run what expect.json declares, and nothing else

def _module(site_dir: Path, name: str, body: str) -> None:
    (site_dir / name).mkdir(parents=True, exist_ok=True)
    (site_dir / name / "__init__.py").write_text(body)


def _run_bare(tmp_path, expect, *args):
    """The payload with -S: the given site alone, not this interpreter's packages."""
    path = tmp_path / "expect.json"
    path.write_text(json.dumps(expect))
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "-S", str(PAYLOAD), "--expect", str(path), "--json", str(out), *args],
                          capture_output=True, text=True, timeout=300,
                          env={"PINWHEEL_SMOKE_ASSUME_DRIVER": "1", "PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    return proc, _strict_json(out.read_text())


def test_the_import_level_imports_the_declared_driver_modules_and_checks_and_nothing_else(tmp_path):
    site_dir = tmp_path / "site"
    _module(site_dir, "pwx_kernel", "LOADED = True\n")
    _dist_info(site_dir, "pwx-kernel", "1.0", ["pwx_kernel"])
    expect = {"pins": {},
              "import_skip": {"pwx-kernel": "needs: driver: links libcuda.so.1", "pwx-local": "needs: driver: x"},
              "verify": {"pwx-kernel": {"import": ["pwx_kernel"], "python": "import pwx_kernel; assert pwx_kernel.LOADED",
                                        "needs": "driver"}}}
    proc, doc = _run_bare(tmp_path, expect, "--level", "import", "--site", str(site_dir))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    imports = [s for s in doc["stages"] if s["level"] == "import"]
    assert [(s["name"], s["status"]) for s in imports] == [
        ("pwx_kernel", "passed"), ("pwx-local", "skipped"), ("verify:pwx-kernel", "passed")]
    assert imports[0]["package"] == "pwx-kernel" and imports[0]["version"] == "1.0"
    assert imports[1]["reason"] == "pwx-local is not installed"
    assert doc["levels"]["import"] == {"status": "passed"}
    assert doc["packages"] == {
        "pwx-kernel": {"passed": ["import/pwx_kernel", "import/verify:pwx-kernel"], "failed": [], "skipped": [],
                       "status": "passed"},
        "pwx-local": {"passed": [], "failed": [], "skipped": ["import/pwx-local"], "status": "skipped"}}
    assert "package pwx-local: SKIPPED (1 skipped); SKIPPED: import/pwx-local" in proc.stdout


def test_a_level_with_nothing_declared_is_skipped_never_passed(tmp_path):
    proc, doc = _run_bare(tmp_path, {"pins": {}}, "--level", "gpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert doc["levels"]["import"]["status"] == "skipped"
    assert doc["levels"]["import"]["reason"].startswith("nothing to import: expect.json names no `needs: driver`")
    assert doc["levels"]["gpu"]["status"] == "skipped"
    assert doc["levels"]["gpu"]["reason"].startswith("nothing to run: expect.json declares no gpu check")
    assert [s for s in doc["stages"] if s["level"] != "static"] == []  # nothing hard-coded ran
    proc, doc = _run_bare(tmp_path, {"pins": {}}, "--level", "gpu", "--require", "gpu")
    assert proc.returncode == 1 and doc["ok"] is False


def _fake_dsa_stack(site_dir: Path) -> None:
    """torch that sees no CUDA device, a cudnn with DSA and both wrappers, a flash_mla with its kernel."""
    _module(site_dir, "torch", '__version__ = "0.0+fake"\nfrom . import cuda, version\n')
    (site_dir / "torch" / "cuda.py").write_text("def is_available():\n    return False\n")
    (site_dir / "torch" / "version.py").write_text("cuda = None\n")
    _module(site_dir, "cudnn", '__version__ = "1.26.0"\nclass DSA:\n    indexer_forward_wrapper = None\n'
                               "    indexer_top_k_wrapper = None\n")
    _module(site_dir, "flash_mla", "def flash_mla_sparse_fwd(*a, **k):\n    raise AssertionError('not called')\n")
    _dist_info(site_dir, "nvidia-cudnn-frontend", "1.26.0", ["cudnn"])
    _dist_info(site_dir, "sgl-flash-mla", "1.0.0", ["flash_mla"])


def test_dsa_forward_takes_sglangs_copy_of_the_sparse_mla_where_flash_mla_is_not_installed(tmp_path):
    site_dir = tmp_path / "site"
    _fake_dsa_stack(site_dir)
    for leftover in site_dir.glob("*flash_mla*"):
        shutil.rmtree(leftover)
    _module(site_dir, "sgl_kernel", "")
    (site_dir / "sgl_kernel" / "flash_mla.py").write_text("def flash_mla_sparse_fwd(*a, **k):\n    raise AssertionError\n")
    _dist_info(site_dir, "sglang-kernel", "0.4.5", ["sgl_kernel"])
    expect = {"pins": {}, "verify": {"nvidia-cudnn-frontend": {"check": "dsa-forward", "import": [], "needs": "gpu",
                                                               "python": None}}}
    proc, doc = _run_bare(tmp_path, expect, "--level", "gpu", "--site", str(site_dir))
    mla = stage(doc, "gpu", "flash_mla")
    assert mla["status"] == "passed", mla
    assert (mla["provider"], mla["version"], mla["legacy_kernels"]) == ("sgl_kernel.flash_mla", "0.4.5", None)
    # with neither provider, the import fails and names the last one tried
    shutil.rmtree(site_dir / "sgl_kernel")
    proc, doc = _run_bare(tmp_path, expect, "--level", "gpu", "--site", str(site_dir))
    mla = stage(doc, "gpu", "flash_mla")
    assert mla["status"] == "failed" and "sgl_kernel" in mla["error"], mla


def test_a_named_check_runs_once_for_every_package_declaring_it_and_a_device_skip_stays_skipped(tmp_path):
    site_dir = tmp_path / "site"
    _fake_dsa_stack(site_dir)
    expect = {"pins": {}, "verify": SHIPPED_EXPECT["verify"]}  # the shipped image's declarations
    assert {k for k, v in expect["verify"].items() if v.get("check") == "dsa-forward"} == {
        "nvidia-cudnn-frontend", "flash-mla", "sgl-flash-mla"}
    proc, doc = _run_bare(tmp_path, expect, "--level", "gpu", "--require", "gpu", "--site", str(site_dir))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a required level that was skipped
    gpu = [(s["name"], s["status"]) for s in doc["stages"] if s["level"] == "gpu"]
    assert gpu == [("verify:flash-mla", "skipped"),
                   ("torch", "passed"), ("cudnn.DSA", "passed"), ("flash_mla", "passed"), ("dsa-forward", "skipped"),
                   ("verify:nvidia-cudnn-frontend", "skipped"), ("verify:sgl-flash-mla", "skipped")]
    assert stage(doc, "gpu", "verify:flash-mla")["reason"] == "flash-mla is not installed"
    for pkg in ("nvidia-cudnn-frontend", "sgl-flash-mla"):
        v = stage(doc, "gpu", f"verify:{pkg}")
        assert v["reason"] == "check dsa-forward: torch sees no CUDA device"
        assert v["stages"] == ["gpu/torch", "gpu/cudnn.DSA", "gpu/flash_mla", "gpu/dsa-forward"]
    # its imports passed, and still the level is not passed: the forward did not run
    assert doc["levels"]["gpu"] == {"status": "skipped", "reason": "flash-mla is not installed; "
                                    "check dsa-forward: torch sees no CUDA device"}
    assert {p: e["status"] for p, e in doc["packages"].items()} == {
        "flash-mla": "skipped", "nvidia-cudnn-frontend": "skipped", "sgl-flash-mla": "skipped", "torch": "skipped"}
    assert "RESULT: FAILED (required level skipped)" in proc.stdout


def test_named_checks_is_the_check_modules_own_entries():
    """One table: NAMED_CHECKS is each check module's ENTRY, and every module under checks/ is one of them."""
    shipped = {n.split("/")[-1][:-3] for n in zipfile.ZipFile(PAYLOAD).namelist()
               if n.startswith("pinwheel_smoke/checks/") and not n.endswith("/__init__.py")}
    assert {m.__name__.rsplit(".", 1)[-1] for m in checks.MODULES} == shipped == {"dsa_forward"}
    assert checks.NAMED_CHECKS == {"dsa-forward": dsa.ENTRY} and dsa.ENTRY["needs"] == "gpu"
    assert checks.module("dsa-forward") is dsa and callable(dsa.run)
    from pinwheel.smoke import NAMED_CHECKS  # what the manifest reader reads: the same table
    assert NAMED_CHECKS == checks.NAMED_CHECKS


def test_an_unknown_named_check_is_a_usage_error(tmp_path):
    proc, _ = run_payload(tmp_path, {"pins": {}, "verify": {"x": {"check": "dsa-backward", "needs": "gpu"}}})
    assert proc.returncode == 2 and "'dsa-backward' is not a check this payload provides (dsa-forward)" in proc.stderr
    proc, _ = run_payload(tmp_path, {"pins": {}, "verify": {"x": {"check": "dsa-forward", "needs": "cpu"}}})
    assert proc.returncode == 2 and "check dsa-forward needs gpu, not cpu" in proc.stderr


# ---------------------------------------------------------------------------
# the corrupt hook

def test_corrupt_hook_rejects_unknown_stage(tmp_path):
    proc, doc = run_payload(tmp_path, {"pins": {}}, env_extra={"PINWHEEL_SMOKE_CORRUPT": "softmax"})
    assert proc.returncode == 2 and doc is None
    assert "PINWHEEL_SMOKE_CORRUPT" in proc.stderr and "indexer, topk, mla" in proc.stderr


@pytest.mark.parametrize("stage_name", ["indexer", "topk", "mla"])
def test_corrupt_hook_is_recorded_and_never_turns_a_skip_into_a_pass(tmp_path, stage_name):
    proc, doc = run_payload(tmp_path, SHIPPED_CHECKS, "--level", "gpu", *_gpu_sites(),
                            env_extra={"PINWHEEL_SMOKE_CORRUPT": stage_name})
    assert doc["hooks"]["corrupt"] == stage_name
    if doc["levels"]["gpu"]["status"] == "skipped":
        assert proc.returncode == 0
    else:  # a GPU host with the kernels: the corrupted stage must fail
        assert proc.returncode == 1 and stage(doc, "gpu", stage_name)["status"] == "failed"


# ---------------------------------------------------------------------------
# plain-python pieces: verdicts, requirement strings, versions

def test_judge_indexer():
    ok, msg = dsa.judge_indexer({"max_rel_err": 2.7e-7, "mask_mismatch": 0})
    assert ok and "2.7e-07" in msg
    assert not dsa.judge_indexer({"max_rel_err": 1e-3, "mask_mismatch": 0})[0]
    ok, msg = dsa.judge_indexer({"max_rel_err": 0.0, "mask_mismatch": 5})
    assert not ok and "causal mask" in msg
    assert not dsa.judge_indexer({"max_rel_err": float("nan"), "mask_mismatch": 0})[0]
    assert not dsa.judge_indexer({"max_rel_err": float("inf"), "mask_mismatch": 0})[0]


def test_judge_topk():
    clean = {k: 0 for k in ("count_mismatch_rows", "out_of_range", "duplicate_rows", "value_mismatch_rows",
                            "returned_value_mismatch", "reference_violation_rows")}
    assert dsa.judge_topk(dict(clean, rows=4096, reference_overlap=1.0))[0]
    for key in clean:
        ok, msg = dsa.judge_topk(dict(clean, **{key: 3}))
        assert not ok and msg.startswith("topk: 3 ")


def test_judge_mla():
    good = {"max_abs_err": 0.01, "max_err_over_bound": 0.2, "rows_checked": 4093, "nonfinite": 0}
    assert dsa.judge_mla(good)[0]
    assert not dsa.judge_mla(dict(good, max_err_over_bound=1.01))[0]
    assert not dsa.judge_mla(dict(good, max_err_over_bound=float("nan")))[0]
    assert not dsa.judge_mla(dict(good, nonfinite=1))[0]
    assert not dsa.judge_mla(dict(good, rows_checked=0))[0]


def _markdown_tables(text: str, heading: str) -> list[dict[str, str]]:
    """The rows of the table under a `## heading`, as {column: cell}, `\\|` unescaped."""
    section = re.split(r"^## .*$", text.split(f"\n## {heading}\n", 1)[1], maxsplit=1, flags=re.M)[0]
    lines = [l.strip() for l in section.splitlines() if l.strip().startswith("|")]
    assert len(lines) >= 3, f"no table under '## {heading}' in docs/smoke.md"

    def cells(line: str) -> list[str]:
        return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]

    header = cells(lines[0])
    assert set(lines[1]) <= set("|-: "), lines[1]
    return [dict(zip(header, cells(l), strict=True)) for l in lines[2:]]


def _power_of_two(text: str) -> float:
    match = re.fullmatch(r"2\^(-?\d+)", text)
    assert match, text
    return 2.0 ** int(match.group(1))


def test_tolerances_are_the_documented_ones():
    """docs/smoke.md's tolerance table, parsed, against the payload's constants."""
    doc = (DOCS / "smoke.md").read_text()
    rows = {r["stage"]: r for r in _markdown_tables(doc, "Tolerances, and why")}
    assert {"indexer", "topk", "mla"} <= set(rows), sorted(rows)

    assert float(rows["indexer"]["tolerance"]) == dsa.INDEXER_REL_TOL

    topk = re.fullmatch(r"exactly (\S+)", rows["topk"]["tolerance"])
    assert topk, rows["topk"]["tolerance"]
    assert float(topk.group(1)) == dsa.TOPK_VALUE_TOL

    # the check states the bound's factor; the tolerance and reason say it is 4x the first-order error
    factor = re.search(r"≤ (2\^-?\d+)·\(", rows["mla"]["check"])
    assert factor, rows["mla"]["check"]
    assert _power_of_two(factor.group(1)) == dsa.MLA_BOUND_FACTOR
    times = re.fullmatch(r"(\d+)× first order", rows["mla"]["tolerance"])
    unit = re.search(r"error of at most (2\^-?\d+)·", rows["mla"]["reason"])
    assert times and unit, (rows["mla"]["tolerance"], rows["mla"]["reason"])
    assert int(times.group(1)) * _power_of_two(unit.group(1)) == dsa.MLA_BOUND_FACTOR

    # the H200 results quote the same tolerances
    results = {r["stage"]: r for r in _markdown_tables(doc, "What ran on an H200 (`docs/smoke-h200.json`)")}
    assert float(results["indexer"]["tolerance"]) == dsa.INDEXER_REL_TOL
    assert results["topk"]["tolerance"] == "exact" and dsa.TOPK_VALUE_TOL == 0.0


def test_parse_requirement():
    r = req.parse_requirement('nvidia-cutlass-dsl[cu13]==4.5.0; extra == "cutedsl"')
    assert r == {"name": "nvidia-cutlass-dsl", "normalized": "nvidia-cutlass-dsl", "extras": ["cu13"],
                 "specifier": "==4.5.0", "marker": 'extra == "cutedsl"'}
    assert req.parse_requirement("Foo_Bar.baz (>=1.0)")["specifier"] == ">=1.0"
    assert req.parse_requirement("Foo_Bar.baz")["normalized"] == "foo-bar-baz"


@pytest.mark.parametrize("version,spec,want", [
    ("2.11.0+cu130", ">=2.14.1", False),
    ("2.14.1", ">=2.14.1", True),
    ("4.6.2", "==4.5.0", False),
    ("0.1.11", "<0.2,>=0.1.6", True),
    ("13.4.4", "~=13.4.4", True),
    ("13.5.0", "~=13.4.4", False),
    ("1.0", "==1.0.0", True),
    ("2.11.0+cu130", ">2.11.0", False),
    ("0.1.11", "!=0.1.8,!=0.1.8.post0,<0.2", None),  # post release: not evaluated
    ("0.6.15.post1", ">=0.6", None),
    ("1.0", "==1.*", None),
])
def test_specifier_satisfied(version, spec, want):
    assert req.specifier_satisfied(version, spec) is want


@pytest.mark.parametrize("installed,pinned,want", [
    ("2.11.0+cu130", "2.11.0", True),
    ("2.11.0+cu130", "2.11.0+cu130", True),
    ("2.11.0+cu129", "2.11.0+cu130", False),
    ("1.26.0", "1.32.0", False),
    ("0.6.15.post1", "0.6.15.post1", True),
    ("0.6.15.post1", "0.6.15", False),
])
def test_pin_matches(installed, pinned, want):
    assert req.pin_matches(installed, pinned)[0] is want


# ---------------------------------------------------------------------------
# the committed H200 results

def test_committed_h200_pass_is_a_real_gpu_pass():
    doc = json.loads((DOCS / "smoke-h200.json").read_text())
    assert doc["schema"] == 1 and doc["ok"] is True and doc["requested"] == "gpu" and doc["required"] == "gpu"
    assert {lv: v["status"] for lv, v in doc["levels"].items()} == {
        "static": "passed", "import": "passed", "gpu": "passed"}
    assert doc["device"]["name"] == "NVIDIA H200" and doc["device"]["capability"] == "9.0"
    assert doc["hooks"] == {"corrupt": None, "assume_driver": False}
    forward = {s["name"]: s for s in doc["stages"] if s.get("in_check") == "dsa-forward"}
    assert set(forward) == {"torch", "cudnn.DSA", "flash_mla", "indexer", "topk", "mla"}
    assert all(s["status"] == "passed" for s in forward.values())
    assert dsa.judge_indexer(forward["indexer"]["metrics"])[0]
    assert dsa.judge_topk(forward["topk"]["metrics"])[0]
    assert dsa.judge_mla(forward["mla"]["metrics"])[0]
    for s in (forward[n] for n in dsa.STAGES):
        assert s["corrupted"] is False
        assert s["kernel"]["median_ms"] > 0 and s["reference"]["median_ms"] > 0
    # per package: what the shipped image declares, run; the local FlashMLA wheel was not there
    assert {p: e["status"] for p, e in doc["packages"].items()} == {
        "flash-mla": "skipped", "nvidia-cudnn-frontend": "passed", "sgl-flash-mla": "passed", "torch": "passed"}
    assert doc["packages"]["sgl-flash-mla"]["passed"] == ["import/flash_mla", "gpu/verify:sgl-flash-mla"]
    assert doc["packages"]["torch"]["passed"] == ["import/verify:torch"]


def test_committed_h200_run_used_the_shipped_images_checks():
    """The GPU host's expect.json differs from the image's in its pins only (the host supplies torch)."""
    host = json.loads((DOCS / "smoke-h200-expect.json").read_text())
    assert host["verify"] == SHIPPED_EXPECT["verify"] and host["import_skip"] == SHIPPED_EXPECT["import_skip"]
    # That run predates the manifest's exclusion of nvidia-cutlass-dsl-libs-cu12 (the host had none installed,
    # and its DSA forward passed): the shipped expect.json differs from it by exactly that exclusion.
    shipped = {k: v for k, v in SHIPPED_EXPECT.items() if k not in ("pins", "excluded")}
    shipped["suppressed"] = {k: v for k, v in shipped["suppressed"].items() if k != "nvidia-cutlass-dsl"}
    assert {k: list(v) for k, v in SHIPPED_EXPECT["excluded"].items()} == {"nvidia-cutlass-dsl": ["nvidia-cutlass-dsl-libs-cu12"]}
    assert SHIPPED_EXPECT["suppressed"]["nvidia-cutlass-dsl"] == ["nvidia-cutlass-dsl-libs-cu12==4.6.2"]
    assert {k: v for k, v in host.items() if k not in ("pins", "host_provided")} == shipped
    assert {**host["pins"], **host["host_provided"]} == {**SHIPPED_EXPECT["pins"], "nvidia-cutlass-dsl-libs-cu12": "4.6.2"}


def test_committed_h200_failure_demos_fail_where_they_should():
    runs = {r["name"]: r for r in json.loads((DOCS / "smoke-h200-failures.json").read_text())["runs"]}
    declaring = ["gpu/verify:nvidia-cudnn-frontend", "gpu/verify:sgl-flash-mla"]
    for st in ("indexer", "topk", "mla"):
        r = runs[f"corrupt-{st}"]
        assert r["exit_code"] == 1 and r["failed_stages"] == [f"gpu/{st}"] + declaring
        assert r["result"]["hooks"]["corrupt"] == st
        others = [s for s in r["result"]["stages"] if s.get("in_check") and s["name"] != st]
        assert len(others) == 5 and all(s["status"] == "passed" for s in others)
    r = runs["static-mismatch"]
    assert r["exit_code"] == 1 and r["failed_stages"] == ["static/pins"]
    assert "nvidia-cudnn-frontend: expected 1.32.0, found 1.26.0" in r["result"]["stages"][0]["error"]
    r = runs["no-dsa"]
    assert r["exit_code"] == 1 and r["failed_stages"] == ["gpu/cudnn.DSA"] + declaring
    assert r["result"]["levels"]["static"]["status"] == "passed"
    assert r["result"]["levels"]["import"]["status"] == "passed"
    err = [s for s in r["result"]["stages"] if s["name"] == "cudnn.DSA"][0]["error"]
    assert "cudnn.DSA is missing" in err and "1.12.0" in err


# ---------------------------------------------------------------------------
# on a GPU host: the whole thing

def _gpu_python():
    py = os.environ.get("PINWHEEL_SMOKE_PYTHON", sys.executable)
    if not _has_driver():
        return None, "no NVIDIA driver on this host"
    probe = subprocess.run([py, "-c", "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 3)"],
                           capture_output=True)
    if probe.returncode != 0:
        return None, f"{py} has no CUDA-enabled torch (set PINWHEEL_SMOKE_PYTHON)"
    return py, None


@pytest.mark.gpu
def test_gpu_level_passes_on_a_gpu_host(tmp_path):
    py, why = _gpu_python()
    if py is None:
        pytest.skip(why)
    proc, doc = run_payload(tmp_path, SHIPPED_CHECKS, "--level", "gpu", "--require", "gpu", *_gpu_sites(), python=py)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert doc["levels"]["gpu"]["status"] == "passed"
    assert {s["name"] for s in doc["stages"] if s.get("in_check") == "dsa-forward" and s["status"] == "passed"} == {
        "torch", "cudnn.DSA", "flash_mla", "indexer", "topk", "mla"}
    assert doc["packages"]["nvidia-cudnn-frontend"]["status"] == "passed"


def test_site_dirs_come_before_the_hosts_own_packages(tmp_path):
    """--site carries packages to a host that has its own copies (the GPU host's cuda-bindings and protobuf):
    the carried ones are imported, in the payload and in its import and verify children."""
    host_dir, site_dir = tmp_path / "host", tmp_path / "site"
    _module(host_dir, "pwx_dup", "WHERE = 'host'\n")
    _module(site_dir, "pwx_dup", "WHERE = 'carried'\n")
    _dist_info(site_dir, "pwx-dup", "1.0", ["pwx_dup"])
    expect = {"pins": {}, "import_skip": {"pwx-dup": "needs: driver: x"},
              "verify": {"pwx-dup": {"import": ["pwx_dup"], "needs": "driver",
                                     "python": "import pwx_dup; assert pwx_dup.WHERE == 'carried', pwx_dup.WHERE"}}}
    path = tmp_path / "expect.json"
    path.write_text(json.dumps(expect))
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "-S", str(PAYLOAD), "--expect", str(path), "--json", str(out),
                           "--level", "import", "--site", str(site_dir)], capture_output=True, text=True, timeout=300,
                          env={"PINWHEEL_SMOKE_ASSUME_DRIVER": "1", "PYTHONPATH": str(host_dir),
                               "PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    doc = _strict_json(out.read_text())
    verify = [s for s in doc["stages"] if s["name"] == "verify:pwx-dup"]
    assert [s["status"] for s in verify] == ["passed"], proc.stdout + proc.stderr


def test_the_no_deps_line_says_why_a_package_is_absent(tmp_path):
    """An absent --no-deps package is a fallback whose local wheel was present, or a missing pin: the line
    names which, and never calls a missing pin a fallback."""
    expect = {"pins": {"pwx-gone": "1.0"}, "fallbacks": {"pwx-fb": "2.0"},
              "suppressed": {"pwx-gone": ["pwx-dep>=1"], "pwx-fb": ["pwx-dep>=1"]}}
    proc, doc = _run_bare(tmp_path, expect, "--level", "static")
    (line,) = [l for l in proc.stdout.splitlines() if "static/no-deps" in l]
    assert "pwx-fb: a fallback, not installed: its local wheel was present" in line, line
    assert "pwx-gone: not installed: its absence is the pins check's finding" in line, line
    assert "pwx-gone not installed (a fallback" not in line
