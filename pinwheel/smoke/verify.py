"""Each package's own check (manifest `verify:`), at the level its `needs` says.

A snippet check runs in its own process (children.verify): its imports, then its snippet, which must
exit 0. A named check (`check: NAME`, one of NAMED_CHECKS) is run once however many packages declare it,
and its verdict stands for each of them.
"""
from __future__ import annotations

import subprocess
import time

from . import children
from .dists import installed_distributions
from .records import stage
from .requirements import normalize

VERIFY_TIMEOUT_S = 120
_WHERE = {"cpu": "the build's invariant", "driver": "the smoke's import level (needs a driver)",
          "gpu": "the smoke's gpu level (needs a GPU)"}


def run_verify(expect: dict, level: str, needs: str, named=None) -> list:
    """Each package's own check that needs `needs`. A named check is run by `named(NAME)`; its own stages
    are listed too, marked `in_check`. A package that is not installed is SKIPPED, and so is every package
    whose named check did not get to its point."""
    dists = installed_distributions()
    stages = []
    ran: dict = {}  # check name -> (its stages, why it was skipped or None)
    for pkg, v in sorted(expect["verify"].items()):
        if v["needs"] != needs:
            continue
        if not dists.get(normalize(pkg)):
            stages.append(stage(level, f"verify:{pkg}", "skipped", package=pkg, needs=needs,
                                **({"check": v["check"]} if v.get("check") else {}),
                                reason=f"{pkg} is not installed"))
        elif v.get("check"):
            if v["check"] not in ran:
                sub, skip_reason = named(v["check"])
                for st in sub:
                    st["in_check"] = v["check"]
                stages.extend(sub)
                ran[v["check"]] = (sub, skip_reason)
            stages.append(_named_verdict(level, pkg, needs, v["check"], *ran[v["check"]]))
        else:
            stages.append(_snippet(level, pkg, needs, v))
    return stages


def _named_verdict(level: str, pkg: str, needs: str, check: str, sub: list, skip_reason) -> dict:
    """A package's verify stage for its named check: that check's verdict."""
    fields = {"package": pkg, "needs": needs, "check": check, "stages": [f"{st['level']}/{st['name']}" for st in sub]}
    if any(st["status"] == "failed" for st in sub):
        return stage(level, f"verify:{pkg}", "failed", error=f"{pkg}: check {check}: " + "; ".join(
            st.get("error") or st.get("message") or "failed" for st in sub if st["status"] == "failed"), **fields)
    if skip_reason:
        return stage(level, f"verify:{pkg}", "skipped", reason=f"check {check}: {skip_reason}", **fields)
    return stage(level, f"verify:{pkg}", "passed", **fields)


def _snippet(level: str, pkg: str, needs: str, v: dict) -> dict:
    """A snippet check, in its own process: its imports, then its snippet; it passes when that exits 0."""
    t0 = time.perf_counter()
    argv, env = children.command("verify")
    try:
        proc = subprocess.run([*argv, *v.get("import", [])], input=v.get("python") or "", capture_output=True,
                              text=True, timeout=VERIFY_TIMEOUT_S, env=env)
        rc, tail = proc.returncode, (proc.stderr.strip().splitlines() or [""])[-1]
    except subprocess.TimeoutExpired:
        rc, tail = None, f"timed out after {VERIFY_TIMEOUT_S} s"
    fields = {"package": pkg, "needs": needs, "imports": v.get("import", []), "python": v.get("python"),
              "seconds": round(time.perf_counter() - t0, 2)}
    if rc == 0:
        return stage(level, f"verify:{pkg}", "passed", **fields)
    what = f"exit {rc}" if rc is not None else "timeout"
    return stage(level, f"verify:{pkg}", "failed", error=f"{pkg}: verify ({what}): {tail}", **fields)


def skipped_verify(expect: dict, level: str, needs: tuple, reason: str) -> list:
    return [stage(level, f"verify:{pkg}", "skipped", package=pkg, needs=v["needs"],
                  **({"check": v["check"]} if v.get("check") else {}),
                  reason=f"{reason}; runs in {_WHERE[v['needs']]}")
            for pkg, v in sorted(expect["verify"].items()) if v["needs"] in needs]
