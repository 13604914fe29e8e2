#!/usr/bin/env python3
"""Where `report --offline --json` spends its time, with the answer memo dropped: CPU milliseconds per phase.

Each run is a fresh interpreter (so imports are counted as a command pays them), with Python's bytecode
cache on; the table gives the median of --runs. The phases nest as the evaluation does: index pages and
METADATA are read inside the plain-pip replay and the judging, and are counted once, in their own rows
(each row is its own time, less that of the rows inside it).

    .venv/bin/python bench/report_profile.py [--runs 5] [--variant cu130] [--imports] [--cold] [--manifest PATH]

--manifest takes another locked manifest whose index cache is filled (PINWHEEL_CACHE_DIR, as the command
reads it), such as a copy of bench/miles/ that `lock` has run on.

--cold times an online report on an empty cache (a scratch PINWHEEL_CACHE_DIR per run) step by step: wall
time and the CPU time of all threads, so a step's waits show as wall time its CPU does not fill.

--imports adds the imports by package (`python -X importtime`, self times summed per top-level package;
importtime's own overhead inflates them, so read them as shares).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ONE_RUN = r"""
import dataclasses, json, sys, time
T = time.process_time
start = T()
import pinwheel.cli  # noqa: F401  (what the command imports before it reads anything)
from pinwheel.abi import cache as _abi  # noqa: F401
from pinwheel.reports.report import to_json, torch_abi
from pinwheel.commands.common import indented_json
imports = T() - start
from pinwheel import manifest
from pinwheel.commands.common import index_client, lock_state
from pinwheel.index.client import IndexClient
from pinwheel.lock import lock_installs
from pinwheel.plan import plan_variant
from pinwheel.resolve import resolve, with_inventory
from pinwheel.resolve.resolver import Resolver
from pinwheel.workspace import Workspace

spent, stack = {}, []  # exclusive CPU per key: a timed call's time less that of the timed calls inside it
def timed(cls, name, key):
    inner = getattr(cls, name)
    def wrapper(*args, **kwargs):
        began = T()
        stack.append([key, 0.0])
        try:
            return inner(*args, **kwargs)
        finally:
            took = T() - began
            _, inside = stack.pop()
            spent[key] = spent.get(key, 0.0) + took - inside
            if stack:
                stack[-1][1] += took
    setattr(cls, name, wrapper)
timed(IndexClient, "_load_page", "pages")
timed(IndexClient, "versions", "versions")
timed(IndexClient, "best_wheel", "wheel")
timed(IndexClient, "metadata_for", "metadata")
timed(Resolver, "classify", "markers")
timed(Resolver, "as_pip_would", "replay")
timed(Resolver, "judge", "judge")
timed(Resolver, "as_locked", "locked")

class Args:
    offline, refresh, index_url, index_deadline = True, False, None, None

began = T()
m = manifest.load(sys.argv[1])
plan = plan_variant(m, sys.argv[2])
ws = Workspace.of(m)
plan = with_inventory(plan, m.path.parent, None)
state = lock_state(plan, m.path.parent)
locked = lock_installs(plan, ws.plan_lock_dir(plan), ws.wheels_dir) if state.status == "ok" else None
plan = plan.with_resolution(lock_state=state)
planned = T() - began
began = T(); client = index_client(Args(), m, plan); client.index_url; configured = T() - began
began = T(); resolved = resolve(plan, client, ws.wheels_dir, locked); resolving = T() - began
READS = ("pages", "versions", "wheel", "metadata", "markers")
def reads():
    return sum(spent.get(k, 0.0) for k in READS)
resolve_reads, resolve_timed = reads(), sum(spent.values())
began = T(); abi = torch_abi(resolved, client, getattr(client, "default", client), ws, True); abi_s = T() - began
began = T(); indented_json(to_json(resolved, abi)); view = T() - began
print(json.dumps({
    "imports": imports,
    "manifest, Plan, lock check and read": planned,
    "pip's configuration (index URL)": configured,
    "index pages (cache reads)": spent.get("pages", 0.0),
    "version lists (parsing a page's versions)": spent.get("versions", 0.0),
    "choosing a wheel (a version's files built)": spent.get("wheel", 0.0),
    "METADATA (cache reads, parsing)": spent.get("metadata", 0.0),
    "markers (each METADATA's, evaluated once)": spent.get("markers", 0.0),
    "plain-pip replay, its own": spent.get("replay", 0.0),
    "the image as locked, its own": spent.get("locked", 0.0),
    "judging every edge, its own": spent.get("judge", 0.0),
    "the rest of resolve (Plan of the result)": resolving - resolve_timed,
    "torch ABI (classification cache)": abi_s - (reads() - resolve_reads),
    "JSON view": view,
    "total": T() - start,
}))
"""

# --cold: an online report on an empty cache. Its reads run in the client's threads, so rows are the command's
# own steps, each with its wall time and the CPU time of the whole process meanwhile (threads included).
COLD_RUN = r"""
import json, sys, time
W, C = time.perf_counter, time.process_time
start = (W(), C())
import pinwheel.cli  # noqa: F401
from pinwheel.abi import cache as _abi  # noqa: F401
from pinwheel.reports.report import to_json, torch_abi
from pinwheel.commands.common import index_client, indented_json, lock_state
from pinwheel import manifest
from pinwheel.lock import lock_installs
from pinwheel.plan import plan_variant
from pinwheel.resolve import resolve, resolver as resolver_module, with_inventory
from pinwheel.resolve.resolver import Resolver
from pinwheel.workspace import Workspace
rows = {"imports": (W() - start[0], C() - start[1])}
def step(name, fn):
    def wrapper(*args, **kwargs):
        began = (W(), C())
        try:
            return fn(*args, **kwargs)
        finally:
            wall, cpu = rows.get(name, (0.0, 0.0))
            rows[name] = (wall + W() - began[0], cpu + C() - began[1])
    return wrapper
resolver_module.prefetch_locked = step("the locked set's pages and METADATA, in parallel", resolver_module.prefetch_locked)
Resolver.as_pip_would = step("plain-pip replay (pages and METADATA the lock does not name)", Resolver.as_pip_would)
Resolver.as_locked = step("the image as locked", Resolver.as_locked)
Resolver.prefetch_suppressed = step("suppressed edges' picks, in parallel", Resolver.prefetch_suppressed)
Resolver.judge = step("judging every edge", Resolver.judge)
class Args:
    offline, refresh, index_url, index_deadline = False, False, None, None
began = (W(), C())
m = manifest.load(sys.argv[1])
plan = plan_variant(m, sys.argv[2])
ws = Workspace.of(m)
plan = with_inventory(plan, m.path.parent, None)
state = lock_state(plan, m.path.parent)
locked = lock_installs(plan, ws.plan_lock_dir(plan), ws.wheels_dir) if state.status == "ok" else None
plan = plan.with_resolution(lock_state=state)
client = index_client(Args(), m, plan); client.index_url
rows["manifest, Plan, lock, pip's configuration"] = (W() - began[0], C() - began[1])
resolved = resolve(plan, client, ws.wheels_dir, locked)
abi = step("torch ABI (the wheels it reads)", torch_abi)(resolved, client, getattr(client, "default", client), ws, False)
step("JSON view", lambda: indented_json(to_json(resolved, abi)))()
step("parsed store written (one transaction)", lambda: [c.flush() for c in getattr(client, "indexes", [client])])()
rows["total"] = (W() - start[0], C() - start[1])
print(json.dumps(rows))
"""


def cold(args: argparse.Namespace, env: dict[str, str]) -> None:
    import shutil
    import tempfile

    runs = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as cache:
            cmd = [sys.executable, "-c", COLD_RUN, str(args.manifest.resolve()), args.variant]
            proc = subprocess.run(cmd, cwd=ROOT, env=dict(env, PINWHEEL_CACHE_DIR=cache), capture_output=True,
                                  text=True)
            shutil.rmtree(cache, ignore_errors=True)
        if proc.returncode:
            raise SystemExit(proc.stderr[-2000:])
        runs.append(json.loads(proc.stdout.splitlines()[-1]))
    print(f"| step (cold, online) | wall s (median of {args.runs}) | CPU s, all threads | CPU / wall |")
    print("|---|---|---|---|")
    rest = {k: [r["total"][i] - sum(v[i] for n, v in r.items() if n != "total") for r in runs] for i, k in
            enumerate(("wall", "cpu"))}
    for name in list(runs[0]) + ["the rest"]:
        wall = statistics.median(r[name][0] for r in runs) if name != "the rest" else statistics.median(rest["wall"])
        cpu = statistics.median(r[name][1] for r in runs) if name != "the rest" else statistics.median(rest["cpu"])
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {cpu / wall if wall else 0:.2f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--variant", default="cu130")
    ap.add_argument("--imports", action="store_true", help="also the imports by package")
    ap.add_argument("--manifest", type=Path, default=ROOT / "wheels_manifest.yaml")
    ap.add_argument("--cold", action="store_true", help="an online report on an empty cache, step by step")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if args.cold:
        cold(args, env)
        return 0
    cmd = [sys.executable, "-c", ONE_RUN, str(args.manifest.resolve()), args.variant]
    subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True)  # warm-up: bytecode, parsed cache
    runs = []
    for _ in range(args.runs):
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(proc.stderr[-2000:])
        runs.append(json.loads(proc.stdout.splitlines()[-1]))
    total = statistics.median(r["total"] for r in runs)
    print(f"| phase | CPU ms (median of {args.runs}) | share |")
    print("|---|---|---|")
    for phase in runs[0]:
        ms = statistics.median(r[phase] for r in runs)
        print(f"| {phase} | {ms * 1000:.0f} | {ms / total:.0%} |")
    if args.imports:
        print_imports(args, env)
    return 0


def print_imports(args: argparse.Namespace, env: dict[str, str]) -> None:
    cmd = [sys.executable, "-X", "importtime", str(ROOT / "build.py"), "--manifest", str(args.manifest.resolve()),
           "report", "--variant", args.variant, "--platform", "linux/amd64", "--offline", "--json"]
    runs = []
    for _ in range(args.runs):
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        by_package: dict[str, int] = {}
        for line in proc.stderr.splitlines():
            m = re.match(r"import time:\s+(\d+) \|\s+\d+ \| \s*(\S+)", line)
            if m:
                top = m.group(2).split(".")[0]
                group = "standard library" if top.lstrip("_") in sys.stdlib_module_names or top in (
                    "encodings", "site", "zipimport") else top
                by_package[group] = by_package.get(group, 0) + int(m.group(1))
        runs.append(by_package)
    groups = sorted({g for r in runs for g in r}, key=lambda g: -statistics.median(r.get(g, 0) for r in runs))
    print(f"\n| package | import self time, ms (median of {args.runs}, under -X importtime) |")
    print("|---|---|")
    for g in groups:
        ms = statistics.median(r.get(g, 0) for r in runs) / 1000
        if ms >= 1:
            print(f"| {g} | {ms:.0f} |")


if __name__ == "__main__":
    sys.exit(main())
