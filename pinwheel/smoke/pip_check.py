"""pip check (the build's invariant, --check-pip), allowing exactly what is known."""
from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import time

from .cache import interpreter, metadata_key, sha
from .records import stage
from .requirements import normalize, parse_requirement

def pip_check_key() -> str | None:
    """What `pip check` answers from: every distribution's metadata, the interpreter and host, pip's own version."""
    meta = metadata_key()
    if meta is None:
        return None
    try:
        pip_version = importlib.metadata.version("pip")
    except importlib.metadata.PackageNotFoundError:
        pip_version = None
    return sha({"metadata": meta, "interpreter": interpreter(), "pip": pip_version})


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


def _baseline(expect: dict, key: str = "baseline_broken") -> dict:
    """expect.json's baseline_broken (or overridden_edges: "parent requirement") as parent -> the names it
    requires, broken."""
    out: dict = {}
    for entry in expect.get(key, []):
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
    key, entry, cache_fields = _stored(cache)
    found, how = (entry["found"], entry["how"]) if entry is not None else broken_requirements()
    fields = _judge(expect, found, how)
    if fields["unexpected"]:
        fields["error"] = "pip check: " + "; ".join(fields["unexpected"])
    elif key is not None and entry is None:  # only the findings of a passing check are stored
        why = cache.store("pip-check", key, {"found": found, "how": how})
        cache_fields.update(cache=why or "stored", cache_key="sha256:" + key)
    fields["seconds"] = round(time.perf_counter() - t0, 2)
    return stage("static", "pip-check", "failed" if fields["unexpected"] else "passed", **fields, **cache_fields)


def _stored(cache) -> tuple:
    """(key, the stored findings to reuse or None, the cache's fields for the stage)."""
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
    return key, entry, cache_fields


def _judge(expect: dict, found: list, how: str) -> dict:
    """pip check's findings, each accepted for its reason or unexpected."""
    allowed = {normalize(pkg): {parse_requirement(r)["normalized"] for r in reqs}
               for pkg, reqs in expect["suppressed"].items()}
    for pkg, names in expect.get("allowed_unmet", {}).items():  # a source step's, declared with a why
        allowed.setdefault(normalize(pkg), set()).update(normalize(n) for n in names)
    baseline = _baseline(expect)
    overridden = {normalize(n) for n in expect["overridden"]}
    # With overridden_edges (a lock made since it exists), only those edges: "parent requirement" each.
    overridden_edges = _baseline(expect, "overridden_edges") if expect.get("has_overridden_edges") else None
    removed = {normalize(n) for n in expect["removed"]}
    breaks = expect.get("removal_breaks")  # with it, a removal is accepted only where its step's breaks names it
    breaks = None if breaks is None else {normalize(d): {normalize(p) for p in ps} for d, ps in breaks.items()}
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
            if dep_name in overridden and (overridden_edges is None
                                           or dep_name in overridden_edges.get(parent, set())):
                accepted_overridden.append(line)
                continue
            if dep_name in removed and m["missing"] and (breaks is None or parent in breaks.get(dep_name, ())):
                accepted_removed.append(line)
                continue
        unexpected.append(line)
    fields = {"accepted_suppressed": accepted, "unexpected": unexpected, "checked_with": how}
    if expect["baseline_broken"] or overridden or removed:
        fields.update(accepted_baseline=accepted_baseline, accepted_overridden=accepted_overridden,
                      accepted_removed=accepted_removed,
                      baseline_fixed=sorted(f"{p} {d}" for p, deps in baseline.items() for d in deps
                                            if (p, d) not in seen_baseline))
    return fields
