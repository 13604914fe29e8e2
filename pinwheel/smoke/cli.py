"""pinwheel smoke payload: checks a built image from the inside.

The build ships this package into images as one zipapp, and it runs there, on any host:

    python smoke_payload.pyz --expect expect.json --level gpu --json out.json

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
        and when it passed. pip check's key: this payload's own bytes (the archive), every
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
        its own process; a named check (`check: NAME`, see checks/) runs once
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
import os
import sys

from . import checks, sites
from .cache import FRESH_CHECKS_ENV
from .expect import UsageError
from .levels import LEVELS, run
from .summary import json_safe, summary

CORRUPT_ENV = "PINWHEEL_SMOKE_CORRUPT"


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
    for check in checks.MODULES:
        check.add_arguments(p)
    args = p.parse_args(argv)
    if args.require and LEVELS.index(args.require) > LEVELS.index(args.level):
        p.error(f"--require {args.require} is above --level {args.level}")
    if args.cache_dir and args.level != "static":
        p.error("--cache-dir is for the static level (the build's invariant): a smoke runs every check")
    for check in checks.MODULES:
        error = check.argument_error(args)
        if error:
            p.error(error)
    return args


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    corrupt = os.environ.get(CORRUPT_ENV) or None
    if corrupt is not None and corrupt not in checks.CORRUPTIBLE:
        print(f"error: {CORRUPT_ENV}={corrupt!r}: expected one of {', '.join(checks.CORRUPTIBLE)}", file=sys.stderr)
        return 2
    sites.add(args.site)  # carried packages come first: the host's own copies do not win
    try:
        doc = run(args, corrupt)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(json_safe(doc), indent=2, allow_nan=False)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    print(summary(doc))
    return 0 if doc["ok"] else 1
