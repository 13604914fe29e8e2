"""The levels, run in order into one result document.

static any host; import needs an NVIDIA driver; gpu needs a GPU (see the cli module's docstring).
"""
from __future__ import annotations

import os
import platform
import sys
import time

from . import checks
from .cache import FRESH_CHECKS_ENV, ResultCache
from .dists import dist_version
from .driver import ASSUME_DRIVER_ENV, probe_driver
from .expect import load_expect
from .imports import run_driver_imports, run_imports
from .pip_check import run_pip_check
from .records import level_status, stage
from .requirements import normalize
from .static import run_static
from .verify import run_verify, skipped_verify

SCHEMA = 1
LEVELS = ("static", "import", "gpu")
# Distributions whose versions are worth reporting whenever they are present.
REPORTED_DISTS = (
    "torch",
    "nvidia-cudnn-frontend",
    "nvidia-cudnn-cu13",
    "nvidia-cudnn-cu12",
    "nvidia-cutlass-dsl",
    "nvidia-cutlass-dsl-libs-base",
    "nvidia-cutlass-dsl-libs-core",
    "nvidia-cutlass-dsl-libs-cu13",
    "nvidia-cutlass-dsl-libs-cu12",
    "apache-tvm-ffi",
    "torch-c-dlpack-ext",
    "flashinfer-python",
    "sgl-flash-mla",
    "cuda-bindings",
    "cuda-python",
)


def package_results(stages: list) -> dict:
    """Per package: the stages that checked it (its verify stages, its modules' imports) by outcome.
    status: failed if any failed; skipped if none ran; partial if some passed and some were SKIPPED;
    passed only if every one passed."""
    out: dict = {}
    for st in stages:
        pkg = st.get("package")
        if pkg is None or "in_check" in st:
            continue
        entry = out.setdefault(pkg, {"passed": [], "failed": [], "skipped": []})
        if st["status"] in entry:
            entry[st["status"]].append(f"{st['level']}/{st['name']}")
    for entry in out.values():
        entry["status"] = ("failed" if entry["failed"] else "skipped" if not entry["passed"]
                           else "partial" if entry["skipped"] else "passed")
    return dict(sorted(out.items()))


def collect_versions(expect: dict) -> dict:
    names = list(REPORTED_DISTS) + sorted(expect["pins"])
    out = {}
    for n in names:
        v = dist_version(n)
        if v is not None:
            out[normalize(n)] = v
    out["python"] = platform.python_version()
    return out


def run(args, corrupt) -> dict:
    """Every requested level, in order: the result document (its shape is SCHEMA's)."""
    requested = LEVELS[: LEVELS.index(args.level) + 1]
    expect = load_expect(args.expect)
    doc = {
        "schema": SCHEMA,
        "requested": args.level,
        "required": args.require,
        "levels": {},
        "stages": [],
        "versions": {},
        "device": None,
        "host": {"python": sys.version.split()[0], "platform": platform.platform(), "sites": list(args.site)},
        "hooks": {"corrupt": corrupt, "assume_driver": os.environ.get(ASSUME_DRIVER_ENV) == "1"},
        "ok": False,
    }
    t0 = time.perf_counter()
    cache = (ResultCache(args.cache_dir, args.fresh_checks or os.environ.get(FRESH_CHECKS_ENV) == "1")
             if args.cache_dir else None)  # --cache-dir: the build's invariant, a BuildKit cache mount
    _record(doc, "static", run_static(expect) + ([run_pip_check(expect, cache)] if args.check_pip else [])
            + ([run_imports(expect, cache)] if args.check_imports else [])
            + run_verify(expect, "static", "cpu")
            + (skipped_verify(expect, "static", ("driver", "gpu"), "not at build time") if args.check_imports else []))
    if "import" in requested:
        _above_static(doc, expect, args, corrupt, "gpu" in requested)
    doc["packages"] = package_results(doc["stages"])
    doc["versions"] = collect_versions(expect)
    doc["seconds"] = round(time.perf_counter() - t0, 2)
    return _verdict(doc, requested, LEVELS[: LEVELS.index(args.require) + 1] if args.require else ())


def _record(doc: dict, level: str, stages: list, reason=None) -> str:
    """A level's stages into the document, and its status (with why, when it was skipped)."""
    doc["stages"].extend(stages)
    entry = {"status": level_status(stages)}
    if entry["status"] == "skipped" and not reason:
        reason = "; ".join(dict.fromkeys(s.get("reason", "") for s in stages if "in_check" not in s))
    if reason:
        entry["reason"] = reason
    doc["levels"][level] = entry
    return entry["status"]


def _above_static(doc: dict, expect: dict, args, corrupt, gpu: bool) -> None:
    """The import level, and the gpu level when `gpu`: SKIPPED without a usable driver."""
    driver = probe_driver()
    doc["host"]["driver"] = driver
    if not driver.get("present"):
        reason = f"no usable NVIDIA driver: {driver.get('reason')}"
        _record(doc, "import", [stage("import", "imports", "skipped", reason=reason)]
                + skipped_verify(expect, "import", ("driver",), reason), reason)
        if gpu:
            _record(doc, "gpu", [stage("gpu", "checks", "skipped", reason=reason)]
                    + skipped_verify(expect, "gpu", ("gpu",), reason), reason)
        return
    imports = run_driver_imports(expect) + run_verify(expect, "import", "driver")
    imp = _record(doc, "import", imports, None if imports else
                  "nothing to import: expect.json names no `needs: driver` package and no driver check")
    if not gpu:
        return
    if not any(v["needs"] == "gpu" for v in expect["verify"].values()):
        _record(doc, "gpu", [], "nothing to run: expect.json declares no gpu check (manifest `verify:` "
                                "with needs: gpu)")
    elif imp == "failed":
        reason = "the import level failed"
        _record(doc, "gpu", skipped_verify(expect, "gpu", ("gpu",), reason), reason)
    else:
        _record(doc, "gpu", run_verify(expect, "gpu", "gpu",
                                       lambda name: checks.module(name).run(args, corrupt, doc)))


def _verdict(doc: dict, requested: tuple, required: tuple) -> dict:
    failed = [lv for lv in requested if doc["levels"][lv]["status"] == "failed"]
    skipped_required = [lv for lv in required if doc["levels"].get(lv, {}).get("status") == "skipped"]
    doc["failed_levels"] = failed
    doc["skipped_levels"] = [lv for lv in requested if doc["levels"][lv]["status"] == "skipped"]
    doc["ok"] = not failed and not skipped_required
    if skipped_required:
        doc["error"] = f"--require {doc['required']}: level(s) {', '.join(skipped_required)} were skipped"
    return doc
