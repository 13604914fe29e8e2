#!/usr/bin/env python3
"""Run an image's smoke on a GPU host that is not the image: the host's own Python and torch, the
image's other packages installed from wheels into site directories.

    python3 scripts/smoke_gpu_host.py --expect images/train/lock/cu130/expect.json \
        --site SITE [--old-site SITE_WITH_AN_OLD_CUDNN_FRONTEND] --out DIR

The payload reads the image's own expect.json: its import_skip and verify entries (the manifest's
`needs: driver` packages and per-package checks, the DSA forward among them) are used unchanged. Only
the pins change, because the host supplies torch and the CUDA libraries at its own versions:

- DIR/smoke-h200-image-pins.json: the static level against the image's expect.json as it is, which
  lists every pin the host does not match;
- DIR/smoke-h200-expect.json: that expect.json with its pins cut to the packages found in SITE (at the
  image's versions); the others are listed under "host_provided", unchecked;
- DIR/smoke-h200.json: the smoke with that file, `--level gpu --require gpu`;
- DIR/smoke-h200-failures.json: the same run with each stage's kernel output corrupted, with a pin the
  site does not match, and (with --old-site) with an nvidia-cudnn-frontend that has no cudnn.DSA.

Standard library only, like the payload: it runs where nothing can be installed. It builds the payload
from this checkout into DIR (DIR/smoke_payload.pyz, the bytes a build ships) and runs that.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAYLOAD_NAME = "smoke_payload.pyz"  # the name a build gives it (InContext.SMOKE_PAYLOAD)


def build_payload(out: Path) -> Path:
    """The payload as a build ships it (pinwheel.image.payload: standard library only), from this checkout."""
    sys.path.insert(0, str(ROOT))
    from pinwheel.image import payload

    path = out / PAYLOAD_NAME
    path.write_bytes(payload.build())
    return path


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def site_versions(site: Path) -> dict[str, str]:
    """normalised name -> version of every distribution installed in `site`."""
    out = {}
    for meta in site.glob("*.dist-info/METADATA"):
        fields = dict(line.split(": ", 1) for line in meta.read_text(errors="replace").splitlines()[:20]
                      if ": " in line)
        out[normalize(fields["Name"])] = fields["Version"]
    return out


# The name a requirement string starts with (PEP 508).
REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
NOT_CARRIED = "not carried to the GPU host: the host's own copy, if any, stands in for the image's, unchecked"


def host_expect(image: dict, carried: dict[str, str]) -> dict:
    """The image's expect.json for a host that has only `carried` of its packages: the pins and the base's
    unchanged packages cut to those (the rest listed under host_provided, unchecked), the packages the
    image removes cut to those too (the host's own, such as its scipy, listed under host_kept_removed,
    unchecked), and each --no-deps
    package's dropped requirement on a package that was not carried allowed, saying so."""
    doc = dict(image)
    doc["pins"] = {n: v for n, v in image["pins"].items() if normalize(n) in carried}
    doc["host_provided"] = {n: v for n, v in image["pins"].items() if normalize(n) not in carried}
    if "base_unchanged" in image:
        doc["base_unchanged"] = {n: v for n, v in image["base_unchanged"].items() if normalize(n) in carried}
        doc["host_provided"].update({n: v for n, v in image["base_unchanged"].items() if normalize(n) not in carried})
    if "removed" in image:
        doc["removed"] = [n for n in image["removed"] if normalize(n) in carried]
        doc["host_kept_removed"] = [n for n in image["removed"] if normalize(n) not in carried]
    dropped = {}
    for parent, entry in image.get("dropped", {}).items():
        names = {normalize(m.group(1)) for r in entry.get("requires", []) if (m := REQUIREMENT_NAME.match(r))}
        allowed = {**{n: NOT_CARRIED for n in sorted(names - set(carried))}, **entry.get("allow_missing", {})}
        dropped[parent] = {**entry, "allow_missing": dict(sorted(allowed.items()))}
    if dropped:
        doc["dropped"] = dropped
    return doc


def run(name: str, what: str, expect: Path, out: Path, sites: list[Path], level: str, require: str | None,
        env_extra: dict[str, str] | None = None) -> dict:
    result_path = out / f".{name}.json"
    payload = out / PAYLOAD_NAME  # build_payload's
    cmd = [sys.executable, str(payload), "--expect", str(expect), "--level", level,
           *(["--require", require] if require else []), *[a for s in sites for a in ("--site", str(s))],
           "--json", str(result_path)]
    # PYTHONPATH puts the sites before the host's own packages (a carried cuda-bindings wins over the
    # host's); --site also runs their .pth files, which the CuTe DSL needs
    env = {**os.environ, **(env_extra or {}), "PYTHONPATH": os.pathsep.join(str(s) for s in sites)}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = round(time.perf_counter() - t0, 1)
    print(f"== {name}: exit {proc.returncode} in {seconds} s\n{proc.stdout}{proc.stderr[-2000:]}", flush=True)
    doc = json.loads(result_path.read_text()) if result_path.exists() else None
    result_path.unlink(missing_ok=True)
    shown = " ".join(f"{k}={v}" for k, v in (env_extra or {}).items())
    return {"name": name, "what": what, "command": (shown + " " if shown else "") + " ".join(
                ["python", payload.name, *[expect.name if a == str(expect) else a for a in cmd[2:-1]],
                 f"{name}.json"]),
            "exit_code": proc.returncode, "seconds": seconds,
            "failed_stages": [f"{s['level']}/{s['name']}" for s in (doc or {}).get("stages", [])
                              if s["status"] == "failed"],
            "result": doc}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--expect", type=Path, required=True, help="the image's expect.json")
    p.add_argument("--site", type=Path, required=True, help="the image's packages, installed with --target")
    p.add_argument("--old-site", type=Path, help="the same with an nvidia-cudnn-frontend that has no cudnn.DSA")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    build_payload(args.out)
    image = json.loads(args.expect.read_text())

    pins_doc = run("image-pins", "the image's expect.json unchanged, static level: every pin the host differs on",
                   args.expect, args.out, [args.site], "static", None)
    (args.out / "smoke-h200-image-pins.json").write_text(json.dumps(pins_doc, indent=2) + "\n")

    expect = args.out / "smoke-h200-expect.json"
    expect.write_text(json.dumps(host_expect(image, site_versions(args.site)), indent=2, sort_keys=True) + "\n")
    passing = run("pass", "the smoke with the image's checks", expect, args.out, [args.site], "gpu", "gpu")
    (args.out / "smoke-h200.json").write_text(json.dumps(passing["result"], indent=2) + "\n")

    runs = []
    what = {"indexer": "scales the indexer's scores by 1.001 before the check",
            "topk": "replaces the first index of every row longer than top-k by that row's lowest-scoring valid column",
            "mla": "adds 0.1 to the MLA output"}
    for stage, text in what.items():
        runs.append(run(f"corrupt-{stage}", f"PINWHEEL_SMOKE_CORRUPT={stage} {text}", expect, args.out,
                        [args.site], "gpu", "gpu", {"PINWHEEL_SMOKE_CORRUPT": stage}))
    wrong = json.loads(expect.read_text())
    wrong["pins"]["nvidia-cudnn-frontend"] = "1.32.0"
    wrong_path = args.out / "expect-wrong-pin.json"
    wrong_path.write_text(json.dumps(wrong, indent=2) + "\n")
    frontend = site_versions(args.site).get("nvidia-cudnn-frontend", "another version")
    runs.append(run("static-mismatch", f"nvidia-cudnn-frontend pinned to 1.32.0 while {frontend} is installed",
                    wrong_path, args.out, [args.site], "static", None))
    wrong_path.unlink()
    if args.old_site:
        old = json.loads(expect.read_text())
        older = site_versions(args.old_site)["nvidia-cudnn-frontend"]
        # pinned so wherever the image's expect.json names it: its own pin, or the base's unchanged package
        old["base_unchanged" if "nvidia-cudnn-frontend" in old.get("base_unchanged", {}) else "pins"][
            "nvidia-cudnn-frontend"] = older
        old_path = args.out / "expect-old-frontend.json"
        old_path.write_text(json.dumps(old, indent=2) + "\n")
        runs.append(run("no-dsa", f"nvidia-cudnn-frontend {older} (no cudnn.DSA) in "
                        f"place of {frontend}, pinned so, so the static level passes", old_path, args.out,
                        [args.old_site], "gpu", "gpu"))
        old_path.unlink()
    device = (passing["result"] or {}).get("device")
    (args.out / "smoke-h200-failures.json").write_text(json.dumps(
        {"schema": 1, "device": device, "about": "Failure demonstrations of the smoke payload on the GPU host, run "
         "right after the passing run in docs/smoke-h200.json with the same packages. Each must exit 1 and name "
         "what failed.", "runs": runs}, indent=2) + "\n")
    return 0 if passing["exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
