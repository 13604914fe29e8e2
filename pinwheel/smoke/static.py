"""The static level's own checks: pins, the base's packages, what --no-deps installs drop."""
from __future__ import annotations

from .dists import installed_distributions
from .records import stage
from .requirements import normalize, parse_requirement, pin_matches, satisfies, specifier_satisfied


def run_static(expect: dict) -> list:
    """The static level's own stages: pins, base, removed, no-deps and dropped (pip check and the imports
    are their own modules)."""
    dists = installed_distributions()
    stages = [_pins(expect, dists), *run_base(expect, dists), _no_deps(expect, dists)]
    if expect["dropped"]:
        stages.append(run_dropped(expect, dists))
    return stages


def _pins(expect: dict, dists: dict) -> dict:
    """Every pin installed at exactly its version (the first copy on the path; the others listed)."""
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
    return stage("static", "pins", "failed" if problems else "passed", checked=len(pins), packages=pins,
                 **({"error": "; ".join(problems)} if problems else {}))


def _no_deps(expect: dict, dists: dict) -> dict:
    """What each --no-deps install drops, with what is installed in its place: informational."""
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
    return stage("static", "no-deps", "info",
                 note="requirements dropped by --no-deps installs; informational, never a failure",
                 dropped=n_dropped, present=n_present, packages=nodeps)


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
                sat = satisfies(found, req["specifier"]) if req["specifier"] else True
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
    return stage("static", "dropped", "failed" if problems else "passed", **fields)


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
        stages.append(stage("static", "base", "failed" if problems else "passed", checked=len(checked),
                             packages=checked, **({"error": "; ".join(problems)} if problems else {})))
    # A removed package a later step installs again is one of the pins; the pins check that one.
    removed = sorted({normalize(n) for n in expect["removed"]} - {normalize(n) for n in expect["pins"]})
    if removed:
        left = [{"name": n, "version": dists[n][0]["version"], "location": dists[n][0]["location"]}
                for n in removed if dists.get(n)]
        problems = [f"{d['name']}: removed by the manifest, found {d['version']} (at {d['location']})" for d in left]
        stages.append(stage("static", "removed", "failed" if problems else "passed", checked=len(removed),
                             packages=removed, **({"error": "; ".join(problems)} if problems else {})))
    return stages


