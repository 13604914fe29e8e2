#!/usr/bin/env python3
"""pinwheel smoke payload: checks a built image from the inside.

This file is copied into images and run there, on any host:

    python smoke_payload.py --expect expect.json --level gpu --json out.json

It is standalone on purpose: only the standard library is imported at module
level; torch and the kernel packages are imported inside functions, and nothing
from pinwheel is imported at all.

Levels are cumulative (``--level gpu`` runs static, import and gpu):

static  any host. Every pin in expect.json is installed at exactly that
        version (importlib.metadata, names normalised per PEP 503). For each
        package installed with --no-deps, its dropped requirements are listed
        with what is installed in their place; each base requirement it drops
        (expect.json "dropped": no extra or a requested one, marker true for
        the target) must be met in the image, absent or at a version outside
        its specifier fails, unless the manifest allows it (allow_missing,
        listed with its why). On a base with packages, every
        base package the manifest leaves alone (base_unchanged) is at its
        inventory version and every removed one (removed) is gone; with
        --check-pip, pip check may find only the --no-deps drops (suppressed),
        what the base already broke (baseline_broken: "parent requirement"),
        requirements on an overridden package, and ones on a removed package.
        With --check-imports (the build's invariant), the top-level modules of
        every installed distribution (top_level.txt, else its RECORD) are
        imported on the CPU: one process for all of them, then each failed or
        unreached one again alone, each under a timeout. A failure names the
        distribution, the module and the error's last line. Distributions
        expect.json lists under "import_skip" (manifest `needs: driver`) are
        skipped with their reason, and left to the import level.
        With --cache-dir DIR (the build's invariant, a BuildKit cache mount),
        a passing pip check or import check is stored there and reused while
        every input it read is unchanged; the stage says "reused" with its key
        and when it passed. pip check's key: this payload's own bytes, every
        distribution's metadata directory name and bytes, the interpreter,
        the host, pip's version.
        The import check's: those and the module and skip lists, then what the
        import processes read, recorded by an audit hook and a last finder:
        each distribution owning a file they loaded (its RECORD, and size,
        mtime, ctime of every file it lists), every other file by its stat
        when first read, every directory listed, the loader's search paths,
        the .pth files, and every name no finder found, which must still be
        unfindable. Anything else runs the check again. --fresh-checks (or
        PINWHEEL_FRESH_CHECKS=1) reuses nothing; other levels never do.
import  needs an NVIDIA driver. What the manifest declares, nothing else: the top-level
        modules of each import_skip distribution (manifest `needs: driver`), and each
        package's verify check with needs: driver (its imports, then its snippet).
gpu     needs a GPU. Each package's verify check with needs: gpu. A snippet runs in
        its own process; a named check (`check: NAME`, see NAMED_CHECKS) runs once
        however many packages declare it, and its verdict stands for each of them.
        dsa-forward (declared by the shipped image on nvidia-cudnn-frontend and
        FlashMLA): torch, ``from cudnn import DSA`` with both wrappers and flash_mla
        are imported, then on a Hopper (SM90) or Blackwell (SM100) GPU one DeepSeek
        sparse attention forward runs: lightning indexer -> top-k -> sparse MLA, each
        stage checked against a float32 PyTorch reference and timed against it.

Results per package are under "packages" in the JSON: the stages that checked it,
by outcome. A level with nothing declared for it is SKIPPED with that reason.

Without a driver or a suitable GPU the levels above static are SKIPPED, never
passed. Exit status: 0 when no requested level failed (skips allowed unless
``--require LEVEL`` names them), 1 on any failure or required skip, 2 on a
usage error.

Test-only hooks (recorded in the JSON under "hooks"):
  PINWHEEL_SMOKE_CORRUPT=indexer|topk|mla  perturb that stage's kernel output
      before its check, to show the failure path on real hardware.
  PINWHEEL_SMOKE_ASSUME_DRIVER=1  run the import level even where no driver
      is found, so that import failures can be shown on a host without a GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import site
import subprocess
import sys
import time
import traceback

SCHEMA = 1
LEVELS = ("static", "import", "gpu")
GPU_STAGES = ("indexer", "topk", "mla")
CORRUPT_ENV = "PINWHEEL_SMOKE_CORRUPT"
# Checks this payload provides, which a manifest names (`verify: {check: NAME}`) on the packages they
# exercise. The manifest loader reads this table, so a name it accepts is one the payload runs.
NAMED_CHECKS = {
    "dsa-forward": {
        "needs": "gpu",
        "about": "one DeepSeek sparse attention forward on an SM90/SM100 GPU: cudnn.DSA lightning indexer, "
                 "cudnn.DSA top-k, FlashMLA sparse MLA, each against a float32 PyTorch reference",
    },
}
ASSUME_DRIVER_ENV = "PINWHEEL_SMOKE_ASSUME_DRIVER"

# ---------------------------------------------------------------------------
# Tolerances. Each one is stated with the reasoning that sets it.
#
# indexer: the kernel and the reference use the same bf16 inputs and both
#   accumulate in fp32 (WGMMA accumulators / cuBLAS sgemm with TF32 off); they
#   differ only in summation order over 128 dims x 64 heads, a few fp32 ulps of
#   the largest term (~1e-7 relative). 1e-4 (max |kernel - ref| over the
#   unmasked scores, divided by max |ref|) leaves a 100x margin yet sits 40x
#   below one bf16 rounding (unit roundoff 2^-8 ~ 3.9e-3), so a bf16 output, a
#   missing head, a wrong weight or a wrong scale all fail. The causal mask (-inf
#   pattern) must match exactly.
INDEXER_REL_TOL = 1e-4
# topk: a selection computes nothing, so the values it picks must equal
#   torch.topk's values on the same input exactly (sorted; ties may pick other
#   indices but never other values). Against the float32 reference scores a
#   selected column may sit below the reference's k-th score by at most
#   2*e, e = max |kernel scores - reference scores| (every reference top-k
#   column scores >= ref_kth - e in the kernel's scores, so kernel_kth >=
#   ref_kth - e, and a selected x has ref(x) >= kernel(x) - e >= ref_kth - 2e).
TOPK_VALUE_TOL = 0.0
# mla: out = sum_j p_j v_j. The kernel rounds the attention weights p to bf16
#   before the P.V product (error <= u * sum_j p_j |v_j|) and rounds the output
#   to bf16 (error <= u * |out|), u = 2^-8 the bf16 unit roundoff; everything
#   else (fp32 logits, exp2, rescaling) is orders of magnitude smaller.
#   Elementwise the error must stay within 4x that first-order bound:
#       |out - ref| <= 2^-6 * (|ref| + sum_j p_j |v_j|)
#   checked on query rows with at least one valid index (a row with none has
#   no defined output).
MLA_BOUND_FACTOR = 2.0 ** -6

# Problem size of the gpu level: one sequence of 4096 queries, indexer with 64
# heads of 128 and a 4:1 compressed KV (1024 keys), top-512 (a multiple of 128,
# as the SM90 FlashMLA kernel needs), MLA with 64 heads, d_qk 576, d_v 512.
GPU_SHAPE = {
    "batch": 1,
    "seq_q": 4096,
    "index_heads": 64,
    "index_dim": 128,
    "ratio": 4,
    "topk": 512,
    "mla_heads": 64,
    "mla_d_qk": 576,
    "mla_d_v": 512,
}

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


# The gpu level's torch device. Only a development harness changes it (to run
# the stage plumbing with stand-in kernels on a CPU); the payload never does.
_DEVICE = "cuda"


class UsageError(Exception):
    pass


# ---------------------------------------------------------------------------
# Names, versions and requirement strings, without `packaging`.

def normalize(name: str) -> str:
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


_REQ_RE = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*"
    r"(?:\[(?P<extras>[^\]]*)\])?\s*(?P<rest>.*)$"
)


def parse_requirement(text: str) -> dict:
    """Split a PEP 508 string into name, extras, specifier and marker.

    Only splits; it does not validate. A URL requirement keeps its URL in
    `specifier`.
    """
    req, _, marker = text.partition(";")
    m = _REQ_RE.match(req)
    if not m:
        raise ValueError(f"not a requirement: {text!r}")
    spec = m.group("rest").strip()
    if spec.startswith("(") and spec.endswith(")"):
        spec = spec[1:-1].strip()
    extras = [e.strip() for e in (m.group("extras") or "").split(",") if e.strip()]
    return {
        "name": m.group("name"),
        "normalized": normalize(m.group("name")),
        "extras": extras,
        "specifier": spec,
        "marker": marker.strip() or None,
    }


_SIMPLE_VERSION = re.compile(r"^v?(\d+(?:\.\d+)*)(?:\+([a-z0-9]+(?:[._-][a-z0-9]+)*))?$", re.I)
_SIMPLE_CLAUSE = re.compile(r"^(~=|==|!=|<=|>=|<|>)\s*(\d+(?:\.\d+)*)$")


def _release(text: str):
    m = _SIMPLE_VERSION.match(text.strip())
    if not m:
        return None, None
    return tuple(int(p) for p in m.group(1).split(".")), m.group(2)


def _cmp(a: tuple, b: tuple) -> int:
    n = max(len(a), len(b))
    a = a + (0,) * (n - len(a))
    b = b + (0,) * (n - len(b))
    return (a > b) - (a < b)


def specifier_satisfied(version: str, specifier: str):
    """True/False where both sides are plain release versions, else None.

    Handles ==, !=, <=, >=, <, >, ~= on release-only versions (a local label on
    the installed version is ignored, as PEP 440 does for specifiers without
    one). Anything else (pre/post/dev releases, wildcards, ===, URLs) is not
    evaluated: the caller reports what is installed instead of a verdict.
    """
    rel, _local = _release(version)
    if rel is None:
        return None
    clauses = [c.strip() for c in specifier.split(",") if c.strip()]
    if not clauses:
        return True
    for clause in clauses:
        m = _SIMPLE_CLAUSE.match(clause)
        if not m:
            return None
        op, want = m.group(1), tuple(int(p) for p in m.group(2).split("."))
        c = _cmp(rel, want)
        if op == "==":
            ok = c == 0
        elif op == "!=":
            ok = c != 0
        elif op == "<=":
            ok = c <= 0
        elif op == ">=":
            ok = c >= 0
        elif op == "<":
            ok = c < 0
        elif op == ">":
            ok = c > 0
        else:  # ~=X.Y[.Z]: >= X.Y.Z and same prefix minus the last part
            if len(want) < 2:
                return None
            prefix = want[:-1]
            ok = c >= 0 and tuple(rel[: len(prefix)]) + (0,) * max(0, len(prefix) - len(rel)) == prefix
        if not ok:
            return False
    return True


def pin_matches(installed: str, pinned: str):
    """(matches, note). Exact string, or equal release versions; a pin without a
    local label accepts an installed local label (PEP 440 `==`)."""
    if installed.strip().lower() == pinned.strip().lower():
        return True, None
    irel, ilocal = _release(installed)
    prel, plocal = _release(pinned)
    if irel is None or prel is None:
        return False, None
    if _cmp(irel, prel) != 0:
        return False, None
    if plocal is None:
        return True, (f"local label +{ilocal}" if ilocal else None)
    return (ilocal or "").lower() == plocal.lower(), None


def installed_distributions() -> dict:
    """normalised name -> [{"name", "version", "location"}], in sys.path order."""
    import importlib.metadata  # here, not at the top: pinwheel's manifest reader imports this file's NAMED_CHECKS

    found: dict = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        try:
            location = str(dist.locate_file(""))
        except Exception:  # pragma: no cover - exotic finders
            location = None
        found.setdefault(normalize(name), []).append(
            {"name": name, "version": dist.version, "location": location}
        )
    return found


def load_expect(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read --expect {path}: {exc}") from exc
    pins = data.get("pins") if isinstance(data, dict) else None
    if not isinstance(pins, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in pins.items()
    ):
        raise UsageError(f"{path}: 'pins' must be an object of name -> version strings")
    suppressed = data.get("suppressed", {})
    if not isinstance(suppressed, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(r, str) for r in v)
        for k, v in suppressed.items()
    ):
        raise UsageError(f"{path}: 'suppressed' must be an object of name -> list of requirement strings")
    # On a base with packages (all optional; absent on a fresh venv):
    base_unchanged = data.get("base_unchanged", {})  # base packages the manifest leaves alone, at their versions
    if not isinstance(base_unchanged, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in base_unchanged.items()
    ):
        raise UsageError(f"{path}: 'base_unchanged' must be an object of name -> version strings")
    lists = {}
    for key, what in (("removed", "names"), ("baseline_broken", "'parent requirement' strings"),
                      ("overridden", "names")):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise UsageError(f"{path}: '{key}' must be a list of {what}")
        lists[key] = value
    for entry in lists["baseline_broken"]:
        if len(entry.split(None, 1)) != 2:
            raise UsageError(f"{path}: baseline_broken entry {entry!r} is not 'parent requirement'")
    dropped = data.get("dropped", {})  # --no-deps package -> its base requirements and what may stay unmet
    if not isinstance(dropped, dict) or not all(
        isinstance(k, str) and isinstance(v, dict)
        and isinstance(v.get("requires"), list) and all(isinstance(r, str) for r in v["requires"])
        and isinstance(v.get("allow_missing", {}), dict)
        and all(isinstance(a, str) and isinstance(w, str) for a, w in v.get("allow_missing", {}).items())
        for k, v in dropped.items()
    ):
        raise UsageError(f"{path}: 'dropped' must be an object of name -> "
                         "{requires: [requirement], allow_missing: {name: why}}")
    import_skip = data.get("import_skip", {})  # distribution -> why its modules import only with a driver
    if not isinstance(import_skip, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                    for k, v in import_skip.items()):
        raise UsageError(f"{path}: 'import_skip' must be an object of name -> reason")
    # package -> {import: [module], python: snippet|null, check: NAMED_CHECKS key (optional), needs: cpu|driver|gpu}
    verify = data.get("verify", {})
    if not isinstance(verify, dict) or not all(
        isinstance(k, str) and isinstance(v, dict) and v.get("needs") in ("cpu", "driver", "gpu")
        and isinstance(v.get("import", []), list) and all(isinstance(m, str) for m in v.get("import", []))
        and isinstance(v.get("python"), (str, type(None))) and isinstance(v.get("check"), (str, type(None)))
        for k, v in verify.items()
    ):
        raise UsageError(f"{path}: 'verify' must be an object of name -> {{import: [module], python: snippet, "
                         "check: name, needs: cpu|driver|gpu}")
    for pkg, v in verify.items():
        check = v.get("check")
        if check is not None and check not in NAMED_CHECKS:
            raise UsageError(f"{path}: verify.{pkg}.check: {check!r} is not a check this payload provides "
                             f"({', '.join(sorted(NAMED_CHECKS))})")
        if check is not None and v["needs"] != NAMED_CHECKS[check]["needs"]:
            raise UsageError(f"{path}: verify.{pkg}: check {check} needs {NAMED_CHECKS[check]['needs']}, "
                             f"not {v['needs']}")
    fallbacks = data.get("fallbacks", {})  # installed only without their local wheel: never pins
    if not (isinstance(fallbacks, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in fallbacks.items())):
        raise UsageError(f"{path}: 'fallbacks' must be an object of name -> version")
    return {"pins": pins, "suppressed": suppressed, "base_unchanged": base_unchanged, "dropped": dropped,
            "import_skip": import_skip, "verify": verify, "fallbacks": fallbacks, **lists}


# ---------------------------------------------------------------------------
# Stage records

def _stage(level: str, name: str, status: str, **fields) -> dict:
    rec = {"level": level, "name": name, "status": status}
    rec.update(fields)
    return rec


def _exc_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _exc_tail(limit: int = 6) -> list:
    return traceback.format_exc().strip().splitlines()[-limit:]


# ---------------------------------------------------------------------------
# static level

def run_static(expect: dict) -> list:
    dists = installed_distributions()
    pins = []
    problems = []
    for name, want in sorted(expect["pins"].items()):
        copies = dists.get(normalize(name), [])
        rec = {"name": name, "expected": want}
        if not copies:
            rec.update(found=None, ok=False)
            problems.append(f"{name}: expected {want}, found not installed")
        else:
            first = copies[0]
            ok, note = pin_matches(first["version"], want)
            rec.update(found=first["version"], location=first["location"], ok=ok)
            if note:
                rec["note"] = note
            if len(copies) > 1:
                rec["shadowed"] = [{"version": c["version"], "location": c["location"]} for c in copies[1:]]
            if not ok:
                problems.append(f"{name}: expected {want}, found {first['version']} (at {first['location']})")
        pins.append(rec)
    stages = [
        _stage(
            "static",
            "pins",
            "failed" if problems else "passed",
            checked=len(pins),
            packages=pins,
            **({"error": "; ".join(problems)} if problems else {}),
        )
    ]

    stages.extend(run_base(expect, dists))

    nodeps = {}
    n_dropped = n_present = 0
    for pkg, reqs in sorted(expect["suppressed"].items()):
        items = []
        for text in reqs:
            try:
                req = parse_requirement(text)
            except ValueError as exc:
                items.append({"requirement": text, "error": str(exc)})
                continue
            copies = dists.get(req["normalized"], [])
            item = {
                "requirement": text,
                "name": req["name"],
                "specifier": req["specifier"] or None,
                "extras": req["extras"],
                "marker": req["marker"],
                "present": bool(copies),
                "installed": copies[0]["version"] if copies else None,
            }
            if copies:
                sat = specifier_satisfied(copies[0]["version"], req["specifier"]) if req["specifier"] else True
                item["satisfies"] = sat
                state = f"present {copies[0]['version']}"
                if req["specifier"]:
                    state += {True: " (satisfies {})", False: " (does not satisfy {})",
                              None: " (specifier {} not evaluated)"}[sat].format(req["specifier"])
                if req["extras"]:
                    state += f"; extras [{','.join(req['extras'])}] not checked"
                n_present += 1
            else:
                item["satisfies"] = None
                state = "absent"
            if req["marker"]:
                state += f"; only where {req['marker']}"
            item["state"] = state
            n_dropped += 1
            items.append(item)
        installed = (dists.get(normalize(pkg)) or [{"version": None}])[0]["version"]
        nodeps[pkg] = {"installed": installed, "dropped": items,
                       **({} if installed else {"note": absent_note(expect, pkg)})}
    stages.append(
        _stage(
            "static",
            "no-deps",
            "info",
            note="requirements dropped by --no-deps installs; informational, never a failure",
            dropped=n_dropped,
            present=n_present,
            packages=nodeps,
        )
    )
    if expect["dropped"]:
        stages.append(run_dropped(expect, dists))
    return stages


def _satisfies(version: str, specifier: str):
    """specifier_satisfied, else pip's vendored packaging where the simple rules cannot tell."""
    sat = specifier_satisfied(version, specifier)
    if sat is None:
        try:
            from pip._vendor.packaging.specifiers import InvalidSpecifier, SpecifierSet  # optional: only if pip is there
        except ImportError:
            return None
        try:
            sat = SpecifierSet(specifier).contains(version, prereleases=True)
        except InvalidSpecifier:
            return None
    return sat


def absent_note(expect: dict, pkg: str) -> str:
    """Why a --no-deps package the image lacks has nothing to check: a fallback not needed, or a missing pin."""
    if pkg in expect.get("fallbacks", {}):
        return "a fallback, not installed: its local wheel was present"
    return "not installed: its absence is the pins check's finding"


def run_dropped(expect: dict, dists: dict) -> dict:
    """Every base requirement a --no-deps install drops is met in the image, or the manifest allows it
    to stay unmet (allow_missing, with its why). A package that is not installed has nothing to check
    here: a fallback whose local wheel was present, or a pin whose absence the pins stage judges."""
    met, allowed, problems, packages = 0, [], [], {}
    for pkg, entry in sorted(expect["dropped"].items()):
        mine = dists.get(normalize(pkg))
        if not mine:
            packages[pkg] = {"installed": None, "note": absent_note(expect, pkg)}
            continue
        allow = {normalize(n): why for n, why in entry.get("allow_missing", {}).items()}
        items = []
        for text in entry["requires"]:
            label = f"{pkg} {mine[0]['version']} is installed --no-deps and requires {text}"
            try:
                req = parse_requirement(text)
            except ValueError as exc:
                items.append({"requirement": text, "ok": False, "error": str(exc)})
                problems.append(f"{label}: cannot read it ({exc})")
                continue
            copies = dists.get(req["normalized"], [])
            found = copies[0]["version"] if copies else None
            if found is None:
                sat, why_not = False, f"{req['normalized']} is not installed"
            else:
                sat = _satisfies(found, req["specifier"]) if req["specifier"] else True
                why_not = (f"{req['normalized']} {found} is installed" if sat is False
                           else f"{req['normalized']} {found} is installed, and {req['specifier']} could not be evaluated")
            item = {"requirement": text, "found": found, "ok": sat is True}
            if sat is True:
                met += 1
            elif req["normalized"] in allow:
                item.update(allowed=True, why=allow[req["normalized"]])
                allowed.append(f"{label}, but {why_not}; allowed: {allow[req['normalized']]}")
            else:
                problems.append(f"{label}, but {why_not}: add a package that provides it, or declare "
                                f"allow_missing for {req['normalized']} on {pkg} in the manifest")
            items.append(item)
        packages[pkg] = {"installed": mine[0]["version"], "requires": items}
    fields = {"met": met, "allowed": allowed, "packages": packages}
    if problems:
        fields["error"] = "; ".join(problems)
    return _stage("static", "dropped", "failed" if problems else "passed", **fields)


IMPORT_TIMEOUT_S = 300  # the one process over every module; a module alone gets IMPORT_ALONE_TIMEOUT_S
IMPORT_ALONE_TIMEOUT_S = 120
_IMPORT_CHILD = r"""
import importlib, json, os, site, sys, traceback
_before = list(sys.path)
for d in filter(None, os.environ.get("PINWHEEL_IMPORT_SITES", "").split(os.pathsep)):
    site.addsitedir(d)
_carried = [p for p in sys.path if p not in _before]  # --site dirs first: carried packages win over the host's
sys.path[:] = _carried + _before
_record = os.environ.get("PINWHEEL_IMPORT_RECORD")
if _record:  # what the imports read, as it was when first read, for reusing a passing result (see import_inputs)
    import hashlib
    _read, _listed, _written, _absent, _opaque, _inside = {}, {}, set(), set(), [], []
    _abspath, _fsdecode, _stat, _listdir = os.path.abspath, os.fsdecode, os.stat, os.listdir
    def _state(path):
        try:
            st = _stat(path)
        except OSError:
            return None
        return [st.st_size, st.st_mtime_ns, st.st_ctime_ns]
    def _names(path):
        try:
            return hashlib.sha256(json.dumps(sorted(_listdir(path))).encode()).hexdigest()
        except OSError:
            return None
    def _audit(event, args):
        if _inside or event not in _EVENTS:
            return
        _inside.append(1)  # the hook's own listdir raises the event again
        try:
            _note(event, args)
        except Exception as exc:  # never in the way of the import itself; the record is then not trusted
            _opaque.append(f"{event}: {exc!r}")
        finally:
            _inside.pop()
    _SPAWN = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "pty.spawn")
    _EVENTS = ("open", "os.listdir", "os.scandir", "ctypes.dlopen", *_SPAWN)
    def _note(event, args):
        if event == "open":
            path, mode, flags = args
            if isinstance(path, int):
                return
            path = _abspath(_fsdecode(path))
            if path in _read or path in _written:
                return
            if (mode is None and flags & os.O_TRUNC and flags & (os.O_WRONLY | os.O_RDWR)) or (
                    isinstance(mode, str) and ("w" in mode or "x" in mode)):
                _written.add(path)  # created or emptied: what is read from it later, this run wrote
            else:
                _read[path] = _state(path)
        elif event == "subprocess.Popen":
            _spawned(*args)
        elif event in _SPAWN:  # what another program reads is not seen here
            _opaque.append(f"an import ran another program ({event} {str(args[0])[:200]})")
        elif event == "ctypes.dlopen":
            if isinstance(args[0], (str, bytes)) and os.sep in _fsdecode(args[0]):
                path = _abspath(_fsdecode(args[0]))
                _read.setdefault(path, _state(path))
        elif isinstance(args[0], int):
            _opaque.append(f"{event} of a file descriptor")
        else:
            path = _abspath(_fsdecode(args[0] if args[0] is not None else "."))
            if path not in _listed:
                _listed[path] = _names(path)
    def _spawned(executable, argv, cwd, env):
        # what another program reads is not seen here: only a program that is not there (its absence is
        # what the import saw, by every path it was looked for on) or `ldconfig -p` (it prints
        # /etc/ld.so.cache, which is recorded) keeps the record whole
        argv = [argv] if isinstance(argv, (str, bytes)) else list(argv or [])
        prog = _fsdecode(executable if executable is not None else (argv[0] if argv else ""))
        where = [prog] if os.sep in prog else [os.path.join(d or ".", prog) for d in
                                                (env or os.environ).get("PATH", os.defpath).split(os.pathsep)]
        found = [p for p in map(_abspath, where) if os.path.isfile(p)]
        if not found:
            for p in map(_abspath, where):
                _read.setdefault(p, None)
        elif os.path.basename(found[0]) == "ldconfig" and [_fsdecode(a) for a in argv[1:]] == ["-p"]:
            _read.setdefault(found[0], _state(found[0]))
            _read.setdefault("/etc/ld.so.cache", _state("/etc/ld.so.cache"))
        else:
            _opaque.append(f"an import ran another program ({found[0]})")
    sys.addaudithook(_audit)
    class _AbsentNames:  # last on sys.meta_path: asked only when no finder before it found the name
        @staticmethod
        def find_spec(name, path=None, target=None):
            _absent.add((name, tuple(path) if path is not None and name.count(".") else None))
            return None
    sys.meta_path.append(_AbsentNames)
    _sys_path = list(sys.path)  # as site left it: what the imports searched from
for mod in sys.argv[1:]:
    print(json.dumps({"module": mod, "started": True}), flush=True)
    try:
        importlib.import_module(mod)
        rec = {"module": mod, "ok": True}
    except BaseException as exc:
        lines = traceback.format_exception_only(type(exc), exc)
        rec = {"module": mod, "ok": False, "error": (lines[-1] if lines else repr(exc)).strip()}
    print(json.dumps(rec), flush=True)
if _record:
    _inside.append(1)  # what follows is the record's own reading
    for m in list(sys.modules.values()):
        try:
            f = getattr(m, "__file__", None)
        except Exception:
            f = None
        if isinstance(f, str):
            f = _abspath(f)
            if f not in _written:
                _read.setdefault(f, _state(f))
        for d in (getattr(m, "__path__", None) or ()) if not f else ():
            if isinstance(d, str):
                _listed.setdefault(_abspath(d), _names(_abspath(d)))
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                part = line.split(None, 5)
                if len(part) == 6 and part[5].startswith("/") and not part[5].rstrip().endswith("(deleted)"):
                    path = part[5].rstrip("\n")
                    if path not in _written:
                        _read.setdefault(path, _state(path))
                        _listed.setdefault(os.path.dirname(path), _names(os.path.dirname(path)))
    except OSError:
        _opaque.append("no /proc/self/maps: shared objects loaded by the imports are unknown")
    # where the dynamic loader looks for a library by its name: a library absent then may be there now
    _read.setdefault("/etc/ld.so.cache", _state("/etc/ld.so.cache"))
    _arch = getattr(sys.implementation, "_multiarch", "")
    for d in [*os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep), "/lib", "/lib64", "/usr/lib", "/usr/lib64",
              "/usr/local/lib", *([f"/lib/{_arch}", f"/usr/lib/{_arch}"] if _arch else [])]:
        if d:
            _listed.setdefault(_abspath(d), _names(_abspath(d)))
    for name in ("sitecustomize", "usercustomize"):  # site looked for them before this ran
        if name not in sys.modules:
            _absent.add((name, None))
    tmp = _record + ".tmp"
    with open(tmp, "w") as fh:
        json.dump({"read": _read, "listed": _listed, "absent": sorted(_absent, key=repr),
                   "sys_path": _sys_path, "opaque": _opaque}, fh)
    os.replace(tmp, _record)
"""
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SITES: list = []  # --site directories, added in the import processes too


def top_level_modules(dist) -> list:
    """A distribution's top-level modules: top_level.txt, else the first path part of its RECORD."""
    names = []
    text = dist.read_text("top_level.txt")
    if text:
        names = [line.strip().replace("/", ".") for line in text.splitlines() if line.strip()]
        # only what is there: a top_level.txt may name a directory it never shipped (Debian's setuptools: debian)
        names = [n for n in names if _on_disk(dist, n.split(".")[0])]
    else:
        for f in dist.files or ():  # only here: parsing a RECORD into paths is most of this function's time
            parts = f.parts
            if not parts or parts[0] in ("..", "__pycache__") or parts[0].endswith((".dist-info", ".data", ".pth")):
                continue
            if len(parts) == 1:
                if parts[0].endswith(".py"):
                    names.append(parts[0][:-3])
                elif parts[0].endswith(".so"):
                    names.append(parts[0].split(".", 1)[0])
            elif parts[-1].endswith((".py", ".so")) and _IDENT.match(parts[0]):  # not numpy.libs/ (auditwheel)
                names.append(parts[0])
    return sorted({n for n in names if all(_IDENT.match(x) for x in n.split("."))})


def _on_disk(dist, name: str) -> bool:
    """A top-level package directory, module or extension named `name` next to the distribution's metadata."""
    try:
        base = str(dist.locate_file(""))
        return (os.path.isdir(os.path.join(base, name)) or os.path.exists(os.path.join(base, name + ".py"))
                or any(f.startswith(name + ".") and f.endswith(".so") for f in os.listdir(base)))
    except (OSError, TypeError, NotImplementedError):
        return True  # cannot tell: import it, and let the import say


def _import_batch(modules: list, timeout: float, record: str | None = None) -> tuple:
    """({module: (ok, error)}, the module it was importing when the process died or timed out, or None).

    With `record`, the process writes there what its imports read (see import_inputs)."""
    results, current = {}, None
    try:
        flags = (["-S"] if sys.flags.no_site else []) + (["-I"] if sys.flags.isolated else [])  # as this one runs
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PINWHEEL_IMPORT_SITES": os.pathsep.join(_SITES)}
        if record:
            env["PINWHEEL_IMPORT_RECORD"] = record
        proc = subprocess.run([sys.executable, *flags, "-c", _IMPORT_CHILD, *modules], capture_output=True, text=True,
                              timeout=timeout, env=env)
        out, died = proc.stdout, (f"the import process exited {proc.returncode}" if proc.returncode else None)
        tail = (proc.stderr.strip().splitlines() or [""])[-1]
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        died, tail = f"timed out after {timeout:.0f} s", ""
    for line in out.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("started"):
            current = rec["module"]
        else:
            results[rec["module"]] = (rec["ok"], rec.get("error"))
            current = None
    if current is not None:
        results[current] = (False, died + (f": {tail}" if tail else "") if died else "the import process stopped")
    return results, current


def run_imports(expect: dict, cache=None) -> dict:
    """Import every installed distribution's top-level modules on the CPU (see the module docstring)."""
    import importlib.metadata

    t0 = time.perf_counter()
    skip = {normalize(k): v for k, v in expect["import_skip"].items()}
    owners: dict = {}
    skipped = []
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        mods = top_level_modules(dist)
        if normalize(name) in skip:
            skipped.append({"distribution": name, "modules": mods, "reason": skip[normalize(name)]})
            continue
        for m in mods:
            owners.setdefault(m, set()).add(name)
    skipped_modules = {m for s in skipped for m in s["modules"]}
    modules = sorted(m for m in owners if m not in skipped_modules)
    key, cache_fields = None, {"reused": False}
    if cache is not None:
        meta = metadata_key(("METADATA", "PKG-INFO", "entry_points.txt"))
        if meta is None:
            cache_fields["cache"] = "not used: a distribution's metadata is not a directory on disk"
        else:
            key = _sha({"interpreter": _interpreter(), "metadata": meta, "modules": modules, "skipped": skipped})
            entry = cache.load("imports", key)
            try:
                changed = ("--fresh-checks" if cache.fresh else "no passing result under this key") \
                    if entry is None else unchanged_since(entry["inputs"])
                reused = {} if changed else {**entry["result"], "cache_key": entry["cache_key"],
                                             "passed_at": entry["passed_at"]}
            except (KeyError, TypeError, AttributeError, ValueError) as exc:
                changed = f"the stored result is not readable ({exc!r})"
            if changed is None:
                return _stage("static", "imports", "passed", **reused, processes=0, reused=True,
                              seconds=round(time.perf_counter() - t0, 2))
            cache_fields["fresh_because"] = changed
    records = []
    results: dict = {}
    processes = 0
    pending = list(modules)
    while pending:  # one process; where it died, the rest in a new one
        records.append(_record_path(cache, key))
        got, died_on = _import_batch(pending, IMPORT_TIMEOUT_S, records[-1])
        processes += 1
        results.update(got)
        pending = [m for m in pending if m not in results]
        if died_on is None and pending:  # it ended without reaching them
            for m in pending:
                results[m] = (False, "not reached: the import process ended early")
            pending = []
    failures, after_others = [], []
    for m in [m for m in modules if not results[m][0]]:  # each failure again alone, so none hides another
        records.append(_record_path(cache, key))
        alone, _ = _import_batch([m], IMPORT_ALONE_TIMEOUT_S, records[-1])
        processes += 1
        ok, error = alone.get(m, (False, "the import process stopped"))
        if ok:  # it imports on its own: it failed only after the others (listed, not a failure)
            after_others.append({"module": m, "error": results[m][1]})
            results[m] = (True, None)
            continue
        failures.append({"distribution": ", ".join(sorted(owners[m])), "module": m, "error": error})
    fields = {"imported": sum(1 for m in modules if results[m][0]), "processes": processes,
              "seconds": round(time.perf_counter() - t0, 2), "failed": failures, "skipped": skipped,
              "failed_only_after_others": after_others}
    if failures:
        fields["error"] = "; ".join(f"{f['distribution']}: import {f['module']}: {f['error']}" for f in failures)
    elif key is not None:  # only a passing result is stored
        cache_fields.update(_store_imports(cache, key, records, fields))
    for r in records:
        if r is not None and os.path.exists(r):
            os.unlink(r)
    fields["seconds"] = round(time.perf_counter() - t0, 2)
    return _stage("static", "imports", "failed" if failures else "passed", **fields, **cache_fields)


def _record_path(cache, key) -> str | None:
    """Where one import process writes what it read: only when its result may be stored."""
    if key is None:
        return None
    import tempfile

    fd, path = tempfile.mkstemp(prefix="pinwheel-imports-", suffix=".json")
    os.close(fd)
    os.unlink(path)  # the process creates it at its end: a process that died leaves none
    return path


def _store_imports(cache, key: str, records: list, result: dict) -> dict:
    seen = {"read": {}, "listed": {}, "absent": set(), "sys_path": None}
    for r in records:
        try:
            with open(r, encoding="utf-8") as fh:
                one = json.load(fh)
        except (OSError, ValueError):
            return {"cache": "not stored: an import process wrote no record of what it read"}
        if one["opaque"]:
            return {"cache": f"not stored: {'; '.join(one['opaque'])}"}
        if seen["sys_path"] not in (None, one["sys_path"]):
            return {"cache": "not stored: the import processes had different sys.path"}
        seen["sys_path"] = one["sys_path"]
        for what in ("read", "listed"):  # as the first process found it
            for path, state in one[what].items():
                seen[what].setdefault(path, state)
        seen["absent"].update((n, tuple(p) if p is not None else None) for n, p in one["absent"])
    seen["absent"] = sorted(([n, list(p) if p is not None else None] for n, p in seen["absent"]), key=repr)
    inputs = import_inputs(seen)
    cache_key = "sha256:" + _sha([key, inputs])
    stored = {k: v for k, v in result.items() if k not in ("seconds", "processes")}
    why = cache.store("imports", key, {"inputs": inputs, "result": stored, "cache_key": cache_key})
    return {"cache": why or "stored", "cache_key": cache_key}


# ---------------------------------------------------------------------------
# Reusing earlier passing results (the build's invariant, --cache-dir)
#
# `pip check` and the import check are the invariant's slow part, and a rebuild
# after one lock line changed mostly re-checks what did not change. A passing
# result is stored under a key over everything its answer depends on, and
# reused only while every one of those inputs is provably the same; anything
# else runs the check again. Stat, not content: torch alone is GBs. Size,
# mtime and ctime together: an install writes new files, so new times, and
# the kernel sets ctime on any write, which no installer can preserve.

FRESH_CHECKS_ENV = "PINWHEEL_FRESH_CHECKS"  # "1": reuse nothing (`build.py build --fresh-checks`)
CACHE_SCHEMA = 1
CACHE_KEEP = 32  # stored results per check kind; the oldest beyond that are removed
_HOST_ONLY = ("/proc/", "/sys/", "/dev/")  # no files: the host they describe is in the key (os.uname)


def _sha(obj) -> str:
    import hashlib

    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=repr).encode()).hexdigest()


def _stat(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _listing(path: str):
    """The digest the import process records for a directory it listed (its _names)."""
    import hashlib

    try:
        return hashlib.sha256(json.dumps(sorted(os.listdir(path))).encode()).hexdigest()
    except OSError:
        return None


def _interpreter() -> dict:
    """What an import or a requirement marker can see of the interpreter and the host."""
    uname = os.uname()  # less the node name: like HOSTNAME, it names the container, new on every run
    return {"executable": sys.executable, "version": sys.version, "flags": list(sys.flags),
            "uname": [uname.sysname, uname.release, uname.version, uname.machine],
            "platform": platform.platform(), "cwd": os.getcwd(), "sites": list(_SITES),
            "environ": sorted((k, v) for k, v in os.environ.items() if k not in (FRESH_CHECKS_ENV, "HOSTNAME"))}


def _metadata_dirs() -> list:
    """Every dist-info/egg-info directory importlib.metadata sees, in its order (None where one is not a path)."""
    import importlib.metadata

    return [str(getattr(dist, "_path", "")) or None for dist in importlib.metadata.distributions()]


def _read_bytes(path: str, name: str) -> bytes | None:
    try:
        with open(os.path.join(path, name), "rb") as fh:
            return fh.read()
    except OSError:
        return None


def metadata_key(files=("METADATA", "PKG-INFO")) -> str | None:
    """sha256 over this payload's own bytes and every distribution's metadata directory name and metadata
    bytes; None when one is not on disk."""
    import hashlib

    dirs = _metadata_dirs()
    if None in dirs:
        return None
    h = hashlib.sha256(_payload_digest().encode())
    for d in sorted(dirs):
        h.update(d.encode() + b"\0")
        if os.path.isfile(d):  # an egg-info file: the metadata itself
            h.update(_read_bytes(os.path.dirname(d), os.path.basename(d)) or b"\2")
            continue
        for name in files:
            data = _read_bytes(d, name)
            h.update(name.encode() + (b"\1" + data if data is not None else b"\2") + b"\0")
    return h.hexdigest()


def _payload_digest() -> str:
    """This file's own sha256: a result stored by another version of these checks is not this one's."""
    import hashlib

    with open(os.path.abspath(__file__), "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


class ResultCache:
    """Passing results under --cache-dir: one JSON file per check and key, written atomically."""

    def __init__(self, root: str, fresh: bool):
        self.root, self.fresh = root, fresh

    def _path(self, kind: str, key: str) -> str:
        return os.path.join(self.root, f"{kind}-{key}.json")

    def load(self, kind: str, key: str):
        if self.fresh:
            return None
        try:
            with open(self._path(kind, key), encoding="utf-8") as fh:
                entry = json.load(fh)
        except (OSError, ValueError):
            return None
        return entry if isinstance(entry, dict) and entry.get("schema") == CACHE_SCHEMA and entry.get("key") == key \
            else None

    def store(self, kind: str, key: str, entry: dict) -> str | None:
        """Write the entry (temp file + rename); the reason it was not stored, or None."""
        import tempfile

        entry = {**entry, "schema": CACHE_SCHEMA, "key": key,
                 "passed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        try:
            os.makedirs(self.root, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=f".{kind}-", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(entry, fh)
            os.replace(tmp, self._path(kind, key))
            old = sorted((e for e in os.scandir(self.root) if e.name.startswith(kind + "-")),
                         key=lambda e: e.stat().st_mtime_ns)
            for e in old[:-CACHE_KEEP]:
                os.unlink(e.path)
        except OSError as exc:
            return f"not stored: {exc}"
        return None


def pip_check_key() -> str | None:
    """What `pip check` answers from: every distribution's metadata, the interpreter and host, pip's own version."""
    meta = metadata_key()
    if meta is None:
        return None
    import importlib.metadata

    try:
        pip_version = importlib.metadata.version("pip")
    except importlib.metadata.PackageNotFoundError:
        pip_version = None
    return _sha({"metadata": meta, "interpreter": _interpreter(), "pip": pip_version})


class _Owners:
    """Which distribution (its metadata directory) lists a file in its RECORD."""

    def __init__(self):
        self.by_file: dict = {}
        self.record_of: dict = {}
        for d in _metadata_dirs():
            if d is None or not d.endswith(".dist-info"):
                continue
            files = _record_files(d)
            if files is None:
                continue
            self.record_of[d] = files
            for f in files:
                self.by_file.setdefault(f, d)


def _record_files(dist_info: str) -> list | None:
    """The absolute paths a dist-info's RECORD lists, or None without a RECORD."""
    import csv

    data = _read_bytes(dist_info, "RECORD")
    if data is None:
        return None
    base, join, norm = os.path.dirname(dist_info), os.path.join, os.path.normpath
    lines = data.decode("utf-8", "replace").splitlines()
    if any('"' in line for line in lines):  # a quoted path (a comma in it): the csv module's reading
        return [norm(join(base, row[0])) for row in csv.reader(lines) if row and row[0]]
    return [norm(join(base, line.rsplit(",", 2)[0])) for line in lines if line.rsplit(",", 2)[0]]


def distribution_fingerprint(dist_info: str) -> str | None:
    """sha256 over a distribution's RECORD bytes and (path, size, mtime, ctime) of each file it lists."""
    data = _read_bytes(dist_info, "RECORD")
    if data is None:
        return None
    return _sha([data.decode("utf-8", "replace"), [(f, _stat(f)) for f in _record_files(dist_info)]])


def import_inputs(seen: dict) -> dict:
    """What the imports read (the import processes' records), fingerprinted: each distribution owning a file
    they read, every other file they read by its stat when first read, every directory they listed by its
    names, the .pth files of their sys.path, and the names no finder found."""
    owners = _Owners()
    dists, files = set(), {}
    for f, state in seen["read"].items():
        if f.startswith(_HOST_ONLY):
            continue
        owner = owners.by_file.get(os.path.normpath(f))
        if owner is not None:
            dists.add(owner)
        else:
            files[f] = state
    return {"distributions": {d: distribution_fingerprint(d) for d in sorted(dists)},
            "files": dict(sorted(files.items())),
            "directories": {d: h for d, h in sorted(seen["listed"].items()) if not d.startswith(_HOST_ONLY)},
            "pth": _pth_files(seen["sys_path"]), "absent": seen["absent"], "sys_path": seen["sys_path"]}


def _pth_files(sys_path: list) -> dict:
    """The .pth files site ran before any import (path -> stat)."""
    out = {}
    for d in sys_path:
        try:
            names = os.listdir(d) if d else []
        except OSError:
            continue
        out.update((os.path.join(d, n), _stat(os.path.join(d, n))) for n in sorted(names) if n.endswith(".pth"))
    return out


_FINDABLE_CHILD = r"""
import importlib.machinery, json, os, site, sys
_before = list(sys.path)
for d in filter(None, os.environ.get("PINWHEEL_IMPORT_SITES", "").split(os.pathsep)):
    site.addsitedir(d)
_carried = [p for p in sys.path if p not in _before]  # --site dirs first: carried packages win over the host's
sys.path[:] = _carried + _before
found = []
for name, path in json.loads(sys.stdin.read()):
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        try:
            spec = find(name, path) if find else None
        except Exception:
            spec = None
        if spec is not None:
            found.append(name)
            break
print(json.dumps({"found": found, "sys_path": sys.path}))
"""


def unchanged_since(stored: dict) -> str | None:
    """None when every input recorded with a passing import result is the same now; else what changed."""
    for d, fp in stored["distributions"].items():
        if distribution_fingerprint(d) != fp:
            return f"distribution {os.path.basename(d)} changed"
    for f, st in stored["files"].items():
        if _stat(f) != st:
            return f"file {f} changed"
    for d, listing in stored["directories"].items():
        if _listing(d) != listing:
            return f"directory {d} changed"
    if _pth_files(stored["sys_path"]) != stored["pth"]:
        return ".pth files changed"
    flags = (["-S"] if sys.flags.no_site else []) + (["-I"] if sys.flags.isolated else [])
    try:
        proc = subprocess.run([sys.executable, *flags, "-c", _FINDABLE_CHILD], input=json.dumps(stored["absent"]),
                              capture_output=True, text=True, timeout=IMPORT_ALONE_TIMEOUT_S,
                              env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
                                   "PINWHEEL_IMPORT_SITES": os.pathsep.join(_SITES)})
        now = json.loads(proc.stdout)
    except (subprocess.TimeoutExpired, ValueError) as exc:
        return f"cannot look for the absent names: {exc}"
    if now["found"]:
        return f"{', '.join(now['found'])} can be imported now"
    if now["sys_path"] != stored["sys_path"]:
        return "sys.path changed"
    return None


VERIFY_TIMEOUT_S = 120
_WHERE = {"cpu": "the build's invariant", "driver": "the smoke's import level (needs a driver)",
          "gpu": "the smoke's gpu level (needs a GPU)"}


def run_verify(expect: dict, level: str, needs: str, named=None) -> list:
    """Each package's own check (manifest `verify:`) that needs `needs`. A snippet check runs in its own
    process: its imports, then its snippet, which must exit 0. A named check (`check: NAME`, one of
    NAMED_CHECKS) is run once by `named(NAME)` however many packages declare it, and its verdict stands
    for each of them; its own stages are listed too, marked `in_check`. A package that is not installed
    is SKIPPED, and so is every package whose named check did not get to its point."""
    dists = installed_distributions()
    stages = []
    ran: dict = {}  # check name -> (its stages, why it was skipped or None)
    for pkg, v in sorted(expect["verify"].items()):
        if v["needs"] != needs:
            continue
        name = f"verify:{pkg}"
        if not dists.get(normalize(pkg)):
            stages.append(_stage(level, name, "skipped", package=pkg, needs=needs,
                                 **({"check": v["check"]} if v.get("check") else {}),
                                 reason=f"{pkg} is not installed"))
            continue
        if v.get("check"):
            check = v["check"]
            if check not in ran:
                sub, skip_reason = named(check)
                for st in sub:
                    st["in_check"] = check
                stages.extend(sub)
                ran[check] = (sub, skip_reason)
            sub, skip_reason = ran[check]
            fields = {"package": pkg, "needs": needs, "check": check,
                      "stages": [f"{st['level']}/{st['name']}" for st in sub]}
            if any(st["status"] == "failed" for st in sub):
                stages.append(_stage(level, name, "failed", error=f"{pkg}: check {check}: " + "; ".join(
                    st.get("error") or st.get("message") or "failed" for st in sub if st["status"] == "failed"),
                    **fields))
            elif skip_reason:
                stages.append(_stage(level, name, "skipped", reason=f"check {check}: {skip_reason}", **fields))
            else:
                stages.append(_stage(level, name, "passed", **fields))
            continue
        code = ("import os, site, sys\n_before = list(sys.path)\n"
                "for _d in filter(None, os.environ.get('PINWHEEL_IMPORT_SITES', '').split(os.pathsep)):"
                "\n    site.addsitedir(_d)\n"
                "sys.path[:] = [p for p in sys.path if p not in _before] + _before\n"
                + "".join(f"import {m}\n" for m in v.get("import", [])) + (v.get("python") or ""))
        t0 = time.perf_counter()
        flags = (["-S"] if sys.flags.no_site else []) + (["-I"] if sys.flags.isolated else [])
        try:
            proc = subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True,
                                  timeout=VERIFY_TIMEOUT_S,
                                  env={**os.environ, "PINWHEEL_IMPORT_SITES": os.pathsep.join(_SITES)})
            rc, tail = proc.returncode, (proc.stderr.strip().splitlines() or [""])[-1]
        except subprocess.TimeoutExpired:
            rc, tail = None, f"timed out after {VERIFY_TIMEOUT_S} s"
        fields = {"package": pkg, "needs": needs, "imports": v.get("import", []), "python": v.get("python"),
                  "seconds": round(time.perf_counter() - t0, 2)}
        if rc == 0:
            stages.append(_stage(level, name, "passed", **fields))
        else:
            what = f"exit {rc}" if rc is not None else "timeout"
            stages.append(_stage(level, name, "failed", error=f"{pkg}: verify ({what}): {tail}", **fields))
    return stages


def skipped_verify(expect: dict, level: str, needs: tuple, reason: str) -> list:
    return [_stage(level, f"verify:{pkg}", "skipped", package=pkg, needs=v["needs"],
                   **({"check": v["check"]} if v.get("check") else {}),
                   reason=f"{reason}; runs in {_WHERE[v['needs']]}")
            for pkg, v in sorted(expect["verify"].items()) if v["needs"] in needs]


def run_base(expect: dict, dists: dict) -> list:
    """On a base with packages: the ones the manifest leaves alone are at their inventory versions, and
    every removed one is gone (importlib.metadata finds it nowhere). Nothing on a fresh venv."""
    stages = []
    if expect["base_unchanged"]:
        checked, problems = [], []
        for name, want in sorted(expect["base_unchanged"].items()):
            copies = dists.get(normalize(name), [])
            found = copies[0]["version"] if copies else None
            ok = bool(copies) and pin_matches(found, want)[0]
            checked.append({"name": name, "expected": want, "found": found, "ok": ok})
            if not copies:
                problems.append(f"{name}: the base's {want} is gone, and the manifest does not remove it")
            elif not ok:
                problems.append(f"{name}: the base's {want} became {found} (at {copies[0]['location']}), "
                                "and the manifest does not change it")
        stages.append(_stage("static", "base", "failed" if problems else "passed", checked=len(checked),
                             packages=checked, **({"error": "; ".join(problems)} if problems else {})))
    # A removed package a later step installs again is one of the pins; the pins check that one.
    removed = sorted({normalize(n) for n in expect["removed"]} - {normalize(n) for n in expect["pins"]})
    if removed:
        left = [{"name": n, "version": dists[n][0]["version"], "location": dists[n][0]["location"]}
                for n in removed if dists.get(n)]
        problems = [f"{d['name']}: removed by the manifest, found {d['version']} (at {d['location']})" for d in left]
        stages.append(_stage("static", "removed", "failed" if problems else "passed", checked=len(removed),
                             packages=removed, **({"error": "; ".join(problems)} if problems else {})))
    return stages


# ---------------------------------------------------------------------------
# driver probe (ctypes only: no third-party import)

def probe_driver() -> dict:
    import ctypes

    if os.environ.get(ASSUME_DRIVER_ENV) == "1":
        return {"present": True, "assumed": True, "reason": f"{ASSUME_DRIVER_ENV}=1 (test hook)"}
    for lib in ("libcuda.so.1", "libcuda.so"):
        try:
            cuda = ctypes.CDLL(lib)
        except OSError:
            continue
        info = {"library": lib}
        try:
            rc = cuda.cuInit(0)
            ver = ctypes.c_int(0)
            cuda.cuDriverGetVersion(ctypes.byref(ver))
            info["cuda_driver_api"] = f"{ver.value // 1000}.{(ver.value % 1000) // 10}"
            count = ctypes.c_int(0)
            if rc == 0:
                cuda.cuDeviceGetCount(ctypes.byref(count))
            info.update(cu_init=rc, device_count=count.value, present=(rc == 0))
            if rc != 0:
                info["reason"] = f"cuInit returned {rc} (driver present but unusable)"
        except Exception as exc:  # pragma: no cover - broken driver installs
            info.update(present=False, reason=f"driver API call failed: {_exc_text(exc)}")
        return info
    return {"present": False, "reason": "libcuda.so.1 cannot be loaded: no NVIDIA driver on this host"}


# ---------------------------------------------------------------------------
# import level

def _dist_version(*names):
    import importlib.metadata

    for n in names:
        try:
            return importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _timed_import(level, name, body) -> dict:
    t0 = time.perf_counter()
    try:
        fields = body()
        return _stage(level, name, "passed", seconds=round(time.perf_counter() - t0, 3), **fields)
    except _StageFailure as exc:
        return _stage(level, name, "failed", seconds=round(time.perf_counter() - t0, 3), error=str(exc), **exc.fields)
    except BaseException as exc:  # noqa: BLE001 - any import error is a finding
        if isinstance(exc, KeyboardInterrupt):
            raise
        return _stage(
            level, name, "failed", seconds=round(time.perf_counter() - t0, 3),
            error=_exc_text(exc), traceback=_exc_tail(),
        )


class _StageFailure(Exception):
    def __init__(self, message, **fields):
        super().__init__(message)
        self.fields = fields


def _import_torch():
    import torch

    return {
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": bool(torch.cuda.is_available()),
    }


def _import_cudnn_dsa():
    import cudnn

    version = getattr(cudnn, "__version__", None) or _dist_version("nvidia-cudnn-frontend")
    where = os.path.dirname(getattr(cudnn, "__file__", "") or "") or "?"
    try:
        from cudnn import DSA  # noqa: F401
    except ImportError as exc:
        raise _StageFailure(
            f"cudnn.DSA is missing: the cudnn module ({where}, nvidia-cudnn-frontend {version or 'unknown'}) "
            f"does not provide DSA, so the DeepSeek sparse attention kernels cannot run "
            f"(an nvidia-cudnn-frontend that ships cudnn.DSA is needed). {_exc_text(exc)}",
            version=version,
            location=where,
        ) from exc
    loaded = []
    for attr in ("indexer_forward_wrapper", "indexer_top_k_wrapper"):
        try:
            getattr(DSA, attr)
        except Exception as exc:  # noqa: BLE001
            raise _StageFailure(
                f"cudnn.DSA.{attr} failed to load (nvidia-cudnn-frontend {version}; the DSA kernels need the "
                f"CuTe DSL: nvidia-cutlass-dsl, cuda-bindings, apache-tvm-ffi): {_exc_text(exc)}",
                version=version,
                location=where,
            ) from exc
        loaded.append(attr)
    return {
        "version": version,
        "location": where,
        "loaded": loaded,
        "cutlass_dsl": _dist_version("nvidia-cutlass-dsl"),
    }


def _import_flash_mla():
    import flash_mla

    if not hasattr(flash_mla, "flash_mla_sparse_fwd"):
        raise _StageFailure("flash_mla has no flash_mla_sparse_fwd")
    legacy = None
    try:
        from flash_mla import _loader

        legacy = bool(_loader.has_legacy())
    except Exception:  # noqa: BLE001 - older builds have no loader
        pass
    return {
        "version": getattr(flash_mla, "__version__", None) or _dist_version("sgl-flash-mla", "flash-mla"),
        "legacy_kernels": legacy,
    }


def run_driver_imports(expect: dict) -> list:
    """The import level's own part: the top-level modules of every distribution expect.json's
    import_skip names (manifest `needs: driver`), each imported here, where the driver is. One that is
    not installed (a local wheel whose fallback was installed instead) is SKIPPED."""
    import importlib.metadata

    skip = {normalize(k): k for k in expect["import_skip"]}
    found: dict = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name and normalize(name) in skip:
            found.setdefault(normalize(name), dist)
    stages = []
    for key, pkg in sorted(skip.items()):
        dist = found.get(key)
        if dist is None:
            stages.append(_stage("import", pkg, "skipped", package=pkg, reason=f"{pkg} is not installed"))
            continue
        for mod in top_level_modules(dist):
            rec = _timed_import("import", mod, lambda m=mod: (importlib.import_module(m), {})[1])
            rec.update(package=pkg, version=dist.version)
            stages.append(rec)
    return stages


def run_dsa_forward(args, corrupt, doc) -> tuple:
    """The named check `dsa-forward`: (stages, why it was skipped or None). Its imports first (a missing
    or broken module is a failure, named), then the device (no CUDA device, or one that is neither SM90
    nor SM100, is a skip), then the forward."""
    stages = [
        _timed_import("gpu", "torch", _import_torch),
        _timed_import("gpu", "cudnn.DSA", _import_cudnn_dsa),
        _timed_import("gpu", "flash_mla", _import_flash_mla),
    ]
    if any(st["status"] == "failed" for st in stages):
        return stages + [_stage("gpu", "dsa-forward", "skipped", reason="not run: an import failed")], None
    import torch

    reason = None
    if not torch.cuda.is_available():
        reason = "torch sees no CUDA device"
    else:
        doc["device"] = device_info(torch)  # named in the record even where the forward does not run
        cap = torch.cuda.get_device_capability()
        if cap[0] not in (9, 10):
            reason = f"the DSA kernels are built for SM90 and SM100; this GPU is sm_{cap[0]}{cap[1]}"
    if reason:
        return stages + [_stage("gpu", "dsa-forward", "skipped", reason=reason)], reason
    forward, _ = run_gpu(args, corrupt)
    return stages + forward, None


# NAMED_CHECKS' runners: (args, corrupt, doc) -> (stages, why it was skipped or None)
CHECK_RUNNERS = {"dsa-forward": run_dsa_forward}


# ---------------------------------------------------------------------------
# gpu level: verdicts are plain Python over metrics, so they can be tested
# without torch; metrics are computed with torch on the GPU.

def judge_indexer(m: dict) -> tuple:
    """(ok, message) for indexer metrics {max_rel_err, mask_mismatch, nonfinite_valid}."""
    rel = m.get("max_rel_err")
    bad = []
    if m.get("mask_mismatch", 0):
        bad.append(f"{m['mask_mismatch']} scores disagree with the causal mask (-inf pattern)")
    if rel is None or not math.isfinite(rel) or rel > INDEXER_REL_TOL:
        bad.append(f"max relative error {rel:.3g} > tolerance {INDEXER_REL_TOL:g}" if rel is not None
                   else "no relative error computed")
    if bad:
        return False, "indexer: " + "; ".join(bad)
    return True, f"indexer: max relative error {rel:.3g} <= {INDEXER_REL_TOL:g}, mask exact"


def judge_topk(m: dict) -> tuple:
    """(ok, message) for top-k metrics."""
    bad = []
    for key, what in (
        ("count_mismatch_rows", "rows with a wrong number of valid indices"),
        ("out_of_range", "indices outside the row's valid length"),
        ("duplicate_rows", "rows with a repeated index"),
        ("value_mismatch_rows", "rows whose selected scores differ from torch.topk"),
        ("returned_value_mismatch", "returned values that differ from the scores at their indices"),
        ("reference_violation_rows", "rows selecting a column below the reference k-th score - 2e"),
    ):
        if m.get(key, 0):
            bad.append(f"{m[key]} {what}")
    if bad:
        return False, "topk: " + "; ".join(bad)
    return True, (
        f"topk: selections equal torch.topk on {m.get('rows', '?')} rows "
        f"(overlap with reference top-k {m.get('reference_overlap', float('nan')):.4f})"
    )


def judge_mla(m: dict) -> tuple:
    """(ok, message) for MLA metrics {max_abs_err, max_err_over_bound, rows_checked, nonfinite}."""
    ratio = m.get("max_err_over_bound")
    bad = []
    if not m.get("rows_checked"):
        bad.append("no query row had a valid index")
    if m.get("nonfinite", 0):
        bad.append(f"{m['nonfinite']} non-finite outputs in checked rows")
    if ratio is None or not math.isfinite(ratio) or ratio > 1.0:
        bad.append(
            f"error exceeds the bound 2^-6*(|ref|+sum p|v|) by {ratio:.3g}x (max abs error {m.get('max_abs_err', float('nan')):.3g})"
            if ratio is not None else "no error computed"
        )
    if bad:
        return False, "mla: " + "; ".join(bad)
    return True, (
        f"mla: max abs error {m['max_abs_err']:.3g}, at most {ratio:.3f} of the elementwise bound"
    )


def _time_cuda(torch, fn, warmup: int, reps: int) -> dict:
    import statistics  # here, not at the top: the manifest reader imports this module for NAMED_CHECKS
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return {"median_ms": round(statistics.median(times), 4), "min_ms": round(min(times), 4), "reps": reps, "warmup": warmup}


def _first_call(torch, fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, round(time.perf_counter() - t0, 3)


def indexer_reference(torch, q, k, w, ratio: int, sm_scale: float):
    """float32 scores (B, S_q, S_k): sm_scale * sum_h relu(q_h . k) * w_h, -inf
    where key t >= (s + 1) // ratio (the kernel's ratio causal mask)."""
    qf = q.float()
    kf = k.float()[:, :, 0, :]
    logits = torch.einsum("bshd,btd->bsht", qf, kf)
    scores = (logits.relu_() * w.float().unsqueeze(-1)).sum(dim=2) * sm_scale
    return scores.masked_fill(~causal_mask(torch, q.shape[1], k.shape[1], ratio, q.device), float("-inf"))


def causal_mask(torch, s_q: int, s_k: int, ratio: int, device):
    limit = (torch.arange(s_q, device=device) + 1) // ratio
    return torch.arange(s_k, device=device)[None, :] < limit[:, None]


def mla_reference(torch, q, kv, indices, sm_scale: float, d_v: int, with_bound: bool = False):
    """float32 sparse MLA: out[s, h] = softmax_j(q[s,h].kv[idx[s,j]] * sm_scale) . v[idx[s,j]];
    indices < 0 or >= s_kv are invalid. Optionally also sum_j p_j |v_j| for the bound."""
    s_kv = kv.shape[0]
    idx = indices[:, 0, :].long()
    invalid = (idx < 0) | (idx >= s_kv)
    gathered = kv[:, 0, :].float()[idx.clamp(0, s_kv - 1)]  # (S_q, topk, d_qk)
    logits = torch.bmm(q.float(), gathered.transpose(1, 2)) * sm_scale  # (S_q, H, topk)
    logits.masked_fill_(invalid[:, None, :], float("-inf"))
    p = torch.softmax(logits, dim=-1)
    v = gathered[..., :d_v]
    out = torch.bmm(p, v)
    if with_bound:
        return out, torch.bmm(p, v.abs())
    return out


def device_info(torch) -> dict:
    """The CUDA device the gpu level runs on, as the result document records it."""
    dev = torch.device(_DEVICE)
    cap = torch.cuda.get_device_capability()
    props = torch.cuda.get_device_properties(dev)
    return {
        "name": torch.cuda.get_device_name(dev),
        "capability": f"{cap[0]}.{cap[1]}",
        "multiprocessors": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2 ** 30, 1),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
    }


def run_gpu(args, corrupt) -> tuple:
    """Returns (stages, device_info)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    from cudnn import DSA
    import flash_mla

    dev = torch.device(_DEVICE)
    shape = dict(GPU_SHAPE)
    shape["seq_q"] = args.seq_q
    shape["topk"] = args.topk
    B, S, H, D = shape["batch"], shape["seq_q"], shape["index_heads"], shape["index_dim"]
    ratio, topk = shape["ratio"], shape["topk"]
    T = S // ratio
    device = device_info(torch)
    warm, reps = args.warmup, args.reps
    stages = []

    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)

    def randn(*size, scale=1.0):
        return (torch.randn(*size, generator=gen, device=dev) * scale).to(torch.bfloat16)

    # ---- stage 1: lightning indexer
    sm_scale_idx = D ** -0.5
    q = randn(B, S, H, D)
    k = randn(B, T, 1, D)
    w = randn(B, S, H, scale=H ** -0.5)
    cfg1 = {"q": [B, S, H, D], "k": [B, T, 1, D], "w": [B, S, H], "ratio": ratio, "sm_scale": sm_scale_idx}
    scores = ref_scores = None
    try:
        def kern1():
            return DSA.indexer_forward_wrapper(q, k, w, ratio=ratio, sm_scale=sm_scale_idx)["scores"]

        scores, first_s = _first_call(torch, kern1)
        t_kernel = _time_cuda(torch, kern1, warm, reps)
        ref_scores = indexer_reference(torch, q, k, w, ratio, sm_scale_idx)
        t_ref = _time_cuda(torch, lambda: indexer_reference(torch, q, k, w, ratio, sm_scale_idx), warm, reps)
        scores = scores[..., :T].contiguous()  # SM100 pads S_k for TMA
        if corrupt == "indexer":
            scores = scores * (1.0 + 1e-3)
        valid = causal_mask(torch, S, T, ratio, dev).expand(B, S, T)
        finite = torch.isfinite(scores)
        mask_mismatch = int((finite != valid).sum())
        diff = torch.nan_to_num((scores - ref_scores).abs()[valid], nan=float("inf"))
        max_abs = float(diff.max())
        ref_max = float(ref_scores[valid].abs().max())
        metrics = {
            "max_abs_err": max_abs,
            "ref_max_abs": ref_max,
            "max_rel_err": max_abs / ref_max if ref_max > 0 else float("inf"),
            "mask_mismatch": mask_mismatch,
            "tolerance_rel": INDEXER_REL_TOL,
        }
        ok, msg = judge_indexer(metrics)
        stages.append(_stage("gpu", "indexer", "passed" if ok else "failed", message=msg, metrics=metrics,
                             config=cfg1, first_call_s=first_s, kernel=t_kernel, reference=t_ref,
                             corrupted=corrupt == "indexer"))
    except Exception as exc:  # noqa: BLE001
        stages.append(_stage("gpu", "indexer", "failed", error=_exc_text(exc), traceback=_exc_tail(), config=cfg1))
        scores = None

    # ---- stage 2: top-k over the kernel's scores
    idx = None
    if scores is None:
        stages.append(_stage("gpu", "topk", "skipped", reason="not run: the indexer stage raised"))
    else:
        cfg2 = {"rows": B * S, "cols": T, "topk": topk}
        try:
            scores2d = scores.reshape(B * S, T).contiguous()
            ref2d = ref_scores.reshape(B * S, T)
            lens = causal_mask(torch, S, T, ratio, dev).sum(-1).to(torch.int32).repeat(B).contiguous()

            def kern2():
                return DSA.indexer_top_k_wrapper(scores2d, lens, topk)

            res, first_s = _first_call(torch, kern2)
            t_kernel = _time_cuda(torch, kern2, warm, reps)
            t_ref = _time_cuda(torch, lambda: torch.topk(scores2d, topk, dim=1), warm, reps)
            idx, vals = res["indices"], res["values"]
            long_rows = lens > topk
            if corrupt == "topk":
                idx = idx.clone()
                low = scores2d.masked_fill(~torch.isfinite(scores2d), float("inf")).argmin(dim=1).to(idx.dtype)
                idx[:, 0] = torch.where(long_rows, low, idx[:, 0])
            sel = idx >= 0
            idx_l = idx.long().clamp(min=0)
            want_n = lens.clamp(max=topk)
            count_bad = int((sel.sum(-1) != want_n).sum())
            out_of_range = int((sel & (idx.long() >= lens[:, None].long())).sum())
            marked = torch.where(sel, idx_l, -1 - torch.arange(topk, device=dev)[None, :])
            srt = torch.sort(marked, dim=1).values
            dup_rows = int((srt[:, 1:] == srt[:, :-1]).any(dim=1).sum())
            got = torch.gather(scores2d, 1, idx_l).masked_fill(~sel, float("-inf"))
            got_sorted = torch.sort(got, dim=1, descending=True).values
            ref_top = torch.topk(scores2d, topk, dim=1).values
            value_bad_rows = int((got_sorted != ref_top).any(dim=1).sum())
            returned_bad = int(((vals != got) & sel).sum()) if vals is not None else 0
            # against the float32 reference scores
            valid2d = causal_mask(torch, S, T, ratio, dev).repeat(B, 1)
            e = float(torch.nan_to_num((scores2d - ref2d).abs()[valid2d], nan=float("inf")).max())
            ref_topk = torch.topk(ref2d, topk, dim=1)
            kth_ref = ref_topk.values[:, -1]
            sel_ref_min = torch.gather(ref2d, 1, idx_l).masked_fill(~sel, float("inf")).min(dim=1).values
            viol = int(((sel_ref_min < kth_ref - 2 * e) & long_rows).sum())
            in_ref = torch.zeros_like(scores2d, dtype=torch.bool).scatter_(1, ref_topk.indices, True)
            overlap_rows = torch.gather(in_ref, 1, idx_l) & sel
            n_long = int(long_rows.sum())
            overlap = float(overlap_rows[long_rows].sum()) / (n_long * topk) if n_long else 1.0
            metrics = {
                "rows": B * S,
                "rows_longer_than_topk": n_long,
                "count_mismatch_rows": count_bad,
                "out_of_range": out_of_range,
                "duplicate_rows": dup_rows,
                "value_mismatch_rows": value_bad_rows,
                "returned_value_mismatch": returned_bad,
                "reference_violation_rows": viol,
                "reference_eps": 2 * e,
                "reference_overlap": overlap,
                "tolerance_value": TOPK_VALUE_TOL,
            }
            ok, msg = judge_topk(metrics)
            stages.append(_stage("gpu", "topk", "passed" if ok else "failed", message=msg, metrics=metrics,
                                 config=cfg2, first_call_s=first_s, kernel=t_kernel,
                                 reference=dict(t_ref, what="torch.topk on the same scores"),
                                 corrupted=corrupt == "topk"))
        except Exception as exc:  # noqa: BLE001
            stages.append(_stage("gpu", "topk", "failed", error=_exc_text(exc), traceback=_exc_tail(), config=cfg2))
            idx = None
    del ref_scores

    # ---- stage 3: sparse MLA over the selected indices
    if idx is None:
        stages.append(_stage("gpu", "mla", "skipped", reason="not run: an earlier stage raised"))
        return stages, device
    Hm, dqk, dv = shape["mla_heads"], shape["mla_d_qk"], shape["mla_d_v"]
    sm_scale_mla = dqk ** -0.5
    cfg3 = {"q": [S, Hm, dqk], "kv": [T, 1, dqk], "indices": [S, 1, topk], "d_v": dv,
            "sm_scale": sm_scale_mla, "use_legacy": True}
    try:
        worst = {"max_abs_err": 0.0, "max_err_over_bound": 0.0, "rows_checked": 0, "nonfinite": 0}
        timing = None
        for b in range(B):
            qm = randn(S, Hm, dqk)
            kv = randn(T, 1, dqk)
            ind = idx.view(B, S, topk)[b].unsqueeze(1).contiguous()

            def kern3():
                return flash_mla.flash_mla_sparse_fwd(qm, kv, ind, sm_scale_mla, d_v=dv, use_legacy=True)

            res, first_s = _first_call(torch, kern3)
            if b == 0:
                timing = (first_s, _time_cuda(torch, kern3, warm, reps),
                          _time_cuda(torch, lambda: mla_reference(torch, qm, kv, ind, sm_scale_mla, dv), warm, reps))
            out = res[0]
            if corrupt == "mla":
                out = out + 0.1
            ref, absbound = mla_reference(torch, qm, kv, ind, sm_scale_mla, dv, with_bound=True)
            rows = (ind[:, 0, :] >= 0).any(dim=-1)
            err = (out.float() - ref).abs()[rows]
            nonfinite = int((~torch.isfinite(err)).sum())
            err = torch.nan_to_num(err, nan=float("inf"))
            bound = MLA_BOUND_FACTOR * (ref.abs() + absbound)[rows]
            worst["max_abs_err"] = max(worst["max_abs_err"], float(err.max()))
            worst["max_err_over_bound"] = max(worst["max_err_over_bound"], float((err / bound).max()))
            worst["rows_checked"] += int(rows.sum())
            worst["nonfinite"] += nonfinite
            worst["ref_max_abs"] = max(worst.get("ref_max_abs", 0.0), float(ref[rows].abs().max()))
            worst["bound_min"] = min(worst.get("bound_min", float("inf")), float(bound.min()))
            worst["bound_max"] = max(worst.get("bound_max", 0.0), float(bound.max()))
            del ref, absbound, err, bound
        worst["rows_total"] = B * S
        worst["bound_factor"] = MLA_BOUND_FACTOR
        ok, msg = judge_mla(worst)
        stages.append(_stage("gpu", "mla", "passed" if ok else "failed", message=msg, metrics=worst, config=cfg3,
                             first_call_s=timing[0], kernel=timing[1], reference=timing[2],
                             corrupted=corrupt == "mla"))
    except Exception as exc:  # noqa: BLE001
        stages.append(_stage("gpu", "mla", "failed", error=_exc_text(exc), traceback=_exc_tail(), config=cfg3))
    return stages, device


# ---------------------------------------------------------------------------
# driver of the levels

def _level_status(stages: list) -> str:
    """failed, skipped (nothing ran) or passed. A named check's own stages (in_check) are judged through
    its verify stage: its imports passing never make a level whose forward was skipped pass."""
    sts = [s["status"] for s in stages if "in_check" not in s]
    if any(s == "failed" for s in sts):
        return "failed"
    if all(s == "skipped" for s in sts):  # nothing judged, or every one skipped
        return "skipped"
    return "passed"


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
        v = _dist_version(n)
        if v is not None:
            out[normalize(n)] = v
    out["python"] = platform.python_version()
    return out


_PIP_CHECK_LINE = re.compile(
    r"^(?P<pkg>\S+) (?P<ver>\S+) (?:has requirement (?P<req>.+?), but you have (?P<have>.+)"
    r"|requires (?P<missing>\S+), which is not installed)\.$"
)


def broken_requirements() -> tuple[list, str]:
    """`pip check`'s findings, in its own words: (lines, how they were had).

    pip's own vendored `packaging` evaluates the requirements in-process with
    pip check's rules (markers with no extra, installed version against the
    specifier); importing all of pip for `python -m pip check` costs the
    invariant step most of a second on every rebuild. Without it, run pip check.
    """
    import importlib.metadata

    try:
        from pip._vendor.packaging.requirements import InvalidRequirement, Requirement
        from pip._vendor.packaging.utils import canonicalize_name
    except ImportError:
        proc = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
        lines = [l.strip() for l in proc.stdout.splitlines()
                 if l.strip() and l.strip() != "No broken requirements found."]
        if proc.returncode not in (0, 1):
            lines.append(f"pip check exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
        return lines, "pip check"
    dists = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            dists.setdefault(canonicalize_name(name), dist)
    lines = []
    for key, dist in sorted(dists.items()):
        for text in dist.requires or []:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            have = dists.get(canonicalize_name(req.name))
            label = f"{key} {dist.version}"
            if have is None:
                lines.append(f"{label} requires {canonicalize_name(req.name)}, which is not installed.")
            elif not req.specifier.contains(have.version, prereleases=True):
                lines.append(f"{label} has requirement {req}, but you have "
                             f"{canonicalize_name(have.metadata['Name'])} {have.version}.")
    return lines, "pip's packaging"


def _baseline(expect: dict) -> dict:
    """expect.json's baseline_broken ("parent requirement") as parent -> the names it requires, broken."""
    out: dict = {}
    for entry in expect["baseline_broken"]:
        parent, requirement = entry.split(None, 1)
        try:
            dep = parse_requirement(requirement)["normalized"]
        except ValueError:
            dep = normalize(re.split(r"[\s\[<>=!~;(]", requirement.strip(), maxsplit=1)[0])
        out.setdefault(normalize(parent), set()).add(dep)
    return out


def run_pip_check(expect: dict, cache=None) -> dict:
    """`pip check`, allowing exactly what is known: the baseline and what the manifest declares.

    pip check ignores extras, so it only ever reports the base requirements of a
    --no-deps package; each one it reports must be in expect.json's "suppressed".
    On a base with packages, a finding is also allowed when the base already had
    it (baseline_broken), when its requirement names a package the manifest
    replaces on purpose (overridden) or removes (removed). A baseline finding the
    image no longer has is listed as fixed: never a failure.
    """
    t0 = time.perf_counter()
    entry, cache_fields = None, {"reused": False}
    key = pip_check_key() if cache is not None else None
    if cache is not None and key is None:
        cache_fields["cache"] = "not used: a distribution's metadata is not a directory on disk"
    if key is not None:
        entry = cache.load("pip-check", key)
        if entry is not None and not (isinstance(entry.get("found"), list) and isinstance(entry.get("how"), str)
                                      and isinstance(entry.get("passed_at"), str)):
            entry = None
        if entry is not None:
            cache_fields = {"reused": True, "cache_key": "sha256:" + key, "passed_at": entry["passed_at"]}
        else:
            cache_fields["fresh_because"] = "--fresh-checks" if cache.fresh else "no passing result under this key"
    found, how = (entry["found"], entry["how"]) if entry is not None else broken_requirements()
    allowed = {normalize(pkg): {parse_requirement(r)["normalized"] for r in reqs}
               for pkg, reqs in expect["suppressed"].items()}
    baseline = _baseline(expect)
    overridden = {normalize(n) for n in expect["overridden"]}
    removed = {normalize(n) for n in expect["removed"]}
    accepted, unexpected = [], []
    accepted_baseline, accepted_overridden, accepted_removed = [], [], []
    seen_baseline = set()
    for line in found:
        m = _PIP_CHECK_LINE.match(line)
        if m:
            dep = m["missing"] or m["req"]
            dep_name = normalize(re.split(r"[\s\[<>=!~;]", dep, maxsplit=1)[0])
            parent = normalize(m["pkg"])
            if dep_name in allowed.get(parent, set()):
                accepted.append(line)
                continue
            if dep_name in baseline.get(parent, set()):
                accepted_baseline.append(line)
                seen_baseline.add((parent, dep_name))
                continue
            if dep_name in overridden:
                accepted_overridden.append(line)
                continue
            if dep_name in removed and m["missing"]:
                accepted_removed.append(line)
                continue
        unexpected.append(line)
    status = "failed" if unexpected else "passed"
    fields = {"accepted_suppressed": accepted, "unexpected": unexpected, "checked_with": how}
    if expect["baseline_broken"] or overridden or removed:
        fields.update(accepted_baseline=accepted_baseline, accepted_overridden=accepted_overridden,
                      accepted_removed=accepted_removed,
                      baseline_fixed=sorted(f"{p} {d}" for p, deps in baseline.items() for d in deps
                                            if (p, d) not in seen_baseline))
    if unexpected:
        fields["error"] = "pip check: " + "; ".join(unexpected)
    elif key is not None and entry is None:  # only the findings of a passing check are stored
        why = cache.store("pip-check", key, {"found": found, "how": how})
        cache_fields.update(cache=why or "stored", cache_key="sha256:" + key)
    fields["seconds"] = round(time.perf_counter() - t0, 2)
    return _stage("static", "pip-check", status, **fields, **cache_fields)


def run(args, corrupt) -> dict:
    requested = LEVELS[: LEVELS.index(args.level) + 1]
    required = LEVELS[: LEVELS.index(args.require) + 1] if args.require else ()
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

    def record(level, stages, reason=None):
        doc["stages"].extend(stages)
        entry = {"status": _level_status(stages)}
        if entry["status"] == "skipped" and not reason:
            reason = "; ".join(dict.fromkeys(s.get("reason", "") for s in stages if "in_check" not in s))
        if reason:
            entry["reason"] = reason
        doc["levels"][level] = entry
        return entry["status"]

    t0 = time.perf_counter()
    cache = (ResultCache(args.cache_dir, args.fresh_checks or os.environ.get(FRESH_CHECKS_ENV) == "1")
             if args.cache_dir else None)  # --cache-dir: the build's invariant, a BuildKit cache mount
    record("static", run_static(expect) + ([run_pip_check(expect, cache)] if args.check_pip else [])
           + ([run_imports(expect, cache)] if args.check_imports else [])
           + run_verify(expect, "static", "cpu")
           + (skipped_verify(expect, "static", ("driver", "gpu"), "not at build time") if args.check_imports else []))

    if "import" in requested:
        driver = probe_driver()
        doc["host"]["driver"] = driver
        if not driver.get("present"):
            reason = f"no usable NVIDIA driver: {driver.get('reason')}"
            record("import", [_stage("import", "imports", "skipped", reason=reason)]
                   + skipped_verify(expect, "import", ("driver",), reason), reason)
            if "gpu" in requested:
                record("gpu", [_stage("gpu", "checks", "skipped", reason=reason)]
                       + skipped_verify(expect, "gpu", ("gpu",), reason), reason)
        else:
            imports = run_driver_imports(expect) + run_verify(expect, "import", "driver")
            imp = record("import", imports, None if imports else
                         "nothing to import: expect.json names no `needs: driver` package and no driver check")
            if "gpu" in requested:
                if not any(v["needs"] == "gpu" for v in expect["verify"].values()):
                    record("gpu", [], "nothing to run: expect.json declares no gpu check (manifest `verify:` "
                                      "with needs: gpu)")
                elif imp == "failed":
                    reason = "the import level failed"
                    record("gpu", skipped_verify(expect, "gpu", ("gpu",), reason), reason)
                else:
                    record("gpu", run_verify(expect, "gpu", "gpu",
                                             lambda name: CHECK_RUNNERS[name](args, corrupt, doc)))

    doc["packages"] = package_results(doc["stages"])
    doc["versions"] = collect_versions(expect)
    doc["seconds"] = round(time.perf_counter() - t0, 2)
    failed = [lv for lv in requested if doc["levels"][lv]["status"] == "failed"]
    skipped_required = [lv for lv in required if doc["levels"].get(lv, {}).get("status") == "skipped"]
    doc["failed_levels"] = failed
    doc["skipped_levels"] = [lv for lv in requested if doc["levels"][lv]["status"] == "skipped"]
    doc["ok"] = not failed and not skipped_required
    if skipped_required:
        doc["error"] = f"--require {args.require}: level(s) {', '.join(skipped_required)} were skipped"
    return doc


def _fmt_ms(t):
    return f"{t['median_ms']:.3f} ms" if t else "?"


def summary(doc: dict) -> str:
    lines = [f"pinwheel smoke (schema {doc['schema']}), requested level: {doc['requested']}"]
    d = doc.get("device")
    if d:
        lines.append(f"device: {d['name']} (sm {d['capability']}), torch {d['torch']} (CUDA {d['torch_cuda']})")
    else:
        drv = doc["host"].get("driver")
        lines.append("device: none" + (f" ({drv.get('reason')})" if drv and not drv.get("present") else ""))
    for s in doc["stages"]:
        tag = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIPPED", "info": "info"}[s["status"]]
        name = f"{s['level']}/{s['name']}"
        if s["name"] == "pins":
            text = (f"{s['checked']} pins checked" if s["status"] == "passed" else s.get("error", ""))
        elif s["name"] == "no-deps":
            parts = []
            for pkg, info in s["packages"].items():
                if info["installed"] is None:
                    parts.append(f"{pkg}: {info['note']}")
                    continue
                dropped = ", ".join(f"{i.get('name', i['requirement'])}: {i.get('state', i.get('error'))}"
                                    for i in info["dropped"])
                parts.append(f"{pkg} drops [{dropped}]")
            text = "; ".join(parts) if parts else "no --no-deps packages declared"
        elif s["name"] == "pip-check" and s.get("reused") and "error" in s:  # stored findings, judged anew
            text = (f"{s['error']} (the findings of the passing pip check at {s['passed_at']}, reused: the installed "
                    f"metadata is unchanged, cache key {s['cache_key']}; this expect.json does not allow them)")
        elif s["name"] in ("imports", "pip-check") and s.get("reused") and s["status"] == "passed":
            what = (f"{s['imported']} modules passed" if s["name"] == "imports" else "no unexpected findings")
            text = (f"{what} (unchanged since a passing {'import' if s['name'] == 'imports' else 'pip check'} "
                    f"at {s['passed_at']}: cache key {s['cache_key']}; inputs checked in {s['seconds']:.2f} s)"
                    + "".join(f"; SKIPPED {k['distribution']} ({', '.join(k['modules'])}): {k['reason']}"
                              for k in s.get("skipped", ()))
                    + ("; base: already broken: " + "; ".join(s["accepted_baseline"])
                       if s.get("accepted_baseline") else ""))
        elif s["name"] == "imports" and s["status"] == "passed":
            text = (f"{s['imported']} modules imported on the CPU in {s['seconds']:.2f} s ({s['processes']} process(es))"
                    + "".join(f"; SKIPPED {k['distribution']} ({', '.join(k['modules'])}): {k['reason']}"
                              for k in s["skipped"]))
        elif s["name"] == "dropped" and s["status"] == "passed":
            text = f"{s['met']} dropped base requirement(s) met" + (
                "; allowed unmet: " + "; ".join(s["allowed"]) if s["allowed"] else "")
        elif s["name"] in ("base", "removed") and s["status"] == "passed":
            text = (f"{s['checked']} base packages at their inventory versions" if s["name"] == "base"
                    else f"gone: {', '.join(s['packages'])}")
        elif s["name"] == "pip-check" and s["status"] == "passed" and s.get("accepted_baseline"):
            text = "base: already broken: " + "; ".join(s["accepted_baseline"])
        elif s["status"] == "skipped":
            text = s.get("reason", "")
        elif s.get("check") and s["status"] == "passed":
            text = f"check {s['check']} passed ({', '.join(s['stages'])})"
        elif s["name"].startswith("verify:") and s["status"] == "passed":
            text = ((f"imported {', '.join(s['imports'])}; " if s.get("imports") else "")
                    + ("snippet exited 0 " if s.get("python") else "") + f"({s.get('seconds', 0):.2f} s)")
        elif "error" in s:
            text = s["error"]
        elif "message" in s:
            text = s["message"]
            if s.get("kernel") and s.get("reference"):
                text += f" | kernel {_fmt_ms(s['kernel'])} vs reference {_fmt_ms(s['reference'])}"
        else:
            text = f"{s.get('version') or ''} ({s.get('seconds', 0):.2f} s)".strip()
        lines.append(f"[{tag:>7}] {name}: {text}")
    for pkg, entry in doc.get("packages", {}).items():
        parts = [f"{len(entry[k])} {k}" for k in ("passed", "failed", "skipped") if entry[k]]
        lines.append(f"package {pkg}: {entry['status'].upper()} ({', '.join(parts)})"
                     + (f"; SKIPPED: {', '.join(entry['skipped'])}" if entry["skipped"] else ""))
    if doc.get("skipped_levels"):
        lines.append(
            f"!!! SKIPPED: level(s) {', '.join(doc['skipped_levels'])} did not run. A skip is NOT a pass"
            + ("." if doc.get("required") else "; use --require gpu to make it an error.")
        )
    if doc.get("error"):
        lines.append(f"error: {doc['error']}")
    if doc["failed_levels"]:
        failed = [f"{s['level']}/{s['name']}" for s in doc["stages"] if s["status"] == "failed"]
        lines.append(f"RESULT: FAILED ({', '.join(failed)})")
    elif not doc["ok"]:
        lines.append("RESULT: FAILED (required level skipped)")
    else:
        lines.append("RESULT: OK" + (" (with skips)" if doc.get("skipped_levels") else ""))
    return "\n".join(lines)


def _json_safe(obj):
    """Strict JSON: non-finite floats become the strings "inf", "-inf", "nan"."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def parse_args(argv):
    p = argparse.ArgumentParser(description="pinwheel smoke payload (runs inside an image)")
    p.add_argument("--expect", required=True, help="expect.json: {pins: {name: version}, suppressed: {name: [req, ...]}, "
                        "base_unchanged: {name: version}, removed: [name], baseline_broken: ['parent req'], "
                        "overridden: [name]}")
    p.add_argument("--level", choices=LEVELS, default="static", help="highest level to run (cumulative)")
    p.add_argument("--require", choices=LEVELS, help="treat a skip at or below this level as a failure")
    p.add_argument("--json", help="write the JSON result here")
    p.add_argument("--check-pip", action="store_true",
                   help="static level: also run `pip check`, allowing only the requirements --no-deps drops")
    p.add_argument("--check-imports", action="store_true",
                   help="static level: import every installed distribution's top-level modules on the CPU, "
                        "except those expect.json's import_skip leaves to a host with a driver")
    p.add_argument("--cache-dir", metavar="DIR",
                   help="static level: reuse a passing pip check / import check whose inputs are unchanged, and "
                        "store passing results here (the build's invariant; a BuildKit cache mount)")
    p.add_argument("--fresh-checks", action="store_true",
                   help=f"with --cache-dir: run every check, reuse nothing (also {FRESH_CHECKS_ENV}=1)")
    p.add_argument("--site", action="append", default=[], metavar="DIR",
                   help="site.addsitedir(DIR) before anything is imported, ahead of the host's own packages on the path "
                        "(repeatable; .pth files are honoured)")
    p.add_argument("--seq-q", dest="seq_q", type=int, default=GPU_SHAPE["seq_q"], help="gpu level: query tokens")
    p.add_argument("--topk", type=int, default=GPU_SHAPE["topk"], help="gpu level: top-k (a multiple of 128)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.require and LEVELS.index(args.require) > LEVELS.index(args.level):
        p.error(f"--require {args.require} is above --level {args.level}")
    if args.cache_dir and args.level != "static":
        p.error("--cache-dir is for the static level (the build's invariant): a smoke runs every check")
    if args.topk % 128 or args.topk <= 0:
        p.error("--topk must be a positive multiple of 128")
    if args.seq_q % (GPU_SHAPE["ratio"] * 128) or args.seq_q <= 0:
        p.error(f"--seq-q must be a positive multiple of {GPU_SHAPE['ratio'] * 128}")
    return args


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    corrupt = os.environ.get(CORRUPT_ENV) or None
    if corrupt is not None and corrupt not in GPU_STAGES:
        print(f"error: {CORRUPT_ENV}={corrupt!r}: expected one of {', '.join(GPU_STAGES)}", file=sys.stderr)
        return 2
    before = list(sys.path)
    for d in args.site:
        site.addsitedir(os.path.abspath(d))
        _SITES.append(os.path.abspath(d))
    # carried packages come first, as a user who carries them means: the host's own copies do not win
    sys.path[:] = [p for p in sys.path if p not in before] + before
    try:
        doc = run(args, corrupt)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(_json_safe(doc), indent=2, allow_nan=False)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    print(summary(doc))
    return 0 if doc["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
