"""expect.json: what the build expects of the image, read and checked before anything runs."""
from __future__ import annotations

import json

from .checks import NAMED_CHECKS


class UsageError(Exception):
    pass


def _str_map(value) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def _lists(data: dict, path: str) -> dict:
    lists = {}
    for key, what in (("removed", "names"), ("baseline_broken", "'parent requirement' strings"),
                      ("overridden", "names"), ("overridden_edges", "'parent requirement' strings")):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            raise UsageError(f"{path}: '{key}' must be a list of {what}")
        lists[key] = value
    for key in ("baseline_broken", "overridden_edges"):
        for entry in lists[key]:
            if len(entry.split(None, 1)) != 2:
                raise UsageError(f"{path}: {key} entry {entry!r} is not 'parent requirement'")
    return lists


def _dropped(data: dict, path: str) -> dict:
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
    return dropped


def verify_entries(data: dict, path: str) -> dict:
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
    return verify


def load_expect(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read --expect {path}: {exc}") from exc
    pins = data.get("pins") if isinstance(data, dict) else None
    if not _str_map(pins):
        raise UsageError(f"{path}: 'pins' must be an object of name -> version strings")
    suppressed = data.get("suppressed", {})
    if not isinstance(suppressed, dict) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(r, str) for r in v)
        for k, v in suppressed.items()
    ):
        raise UsageError(f"{path}: 'suppressed' must be an object of name -> list of requirement strings")
    # On a base with packages (all optional; absent on a fresh venv):
    base_unchanged = data.get("base_unchanged", {})  # base packages the manifest leaves alone, at their versions
    if not _str_map(base_unchanged):
        raise UsageError(f"{path}: 'base_unchanged' must be an object of name -> version strings")
    lists, dropped = _lists(data, path), _dropped(data, path)
    import_skip = data.get("import_skip", {})  # distribution -> why its modules import only with a driver
    if not _str_map(import_skip):
        raise UsageError(f"{path}: 'import_skip' must be an object of name -> reason")
    verify = verify_entries(data, path)
    allowed_unmet = data.get("allowed_unmet", {})  # source-built package -> {requirement name: why}
    if not isinstance(allowed_unmet, dict) or not all(isinstance(k, str) and _str_map(v) for k, v in allowed_unmet.items()):
        raise UsageError(f"{path}: 'allowed_unmet' must be an object of name -> {{requirement name: why}}")
    # removed package -> the packages its removal leaves unmet on purpose (the remove step's breaks); absent in a
    # lock with no breaks: then every finding that names a removed package as missing is accepted
    removal_breaks = data.get("removal_breaks")
    if removal_breaks is not None and not (isinstance(removal_breaks, dict) and all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(n, str) for n in v)
            for k, v in removal_breaks.items())):
        raise UsageError(f"{path}: 'removal_breaks' must be an object of name -> list of package names")
    fallbacks = data.get("fallbacks", {})  # installed only without their local wheel: never pins
    if not _str_map(fallbacks):
        raise UsageError(f"{path}: 'fallbacks' must be an object of name -> version")
    return {"pins": pins, "suppressed": suppressed, "base_unchanged": base_unchanged, "dropped": dropped,
            "import_skip": import_skip, "verify": verify, "fallbacks": fallbacks, "allowed_unmet": allowed_unmet,
            "removal_breaks": removal_breaks, **lists,
            # absent (every finding on an overridden package accepted) in a lock made before the key existed
            "has_overridden_edges": "overridden_edges" in data}
