"""`audit --replay`: the file's installs, in order, as plain pip would run them, judged by the resolver.

It replays the manifest `import` writes for the file, with these changes that
make it a replay of the file rather than a build of the manifest:
- a local wheel the file installs is absent here: it is not installed, and counted;
- an unpinned or range requirement gets the version pip would take today (the
  newest its specifier allows on the index), as `import --pin` would write it;
- with a base inventory (`--base IMAGE` or an inventory JSON), the base's
  distributions are step 0, so "replaces the base's torch" is found;
- the `override: true` import proposes where a pin torch declares is replaced
  is taken out: the file declares none, so the move is reported, not excused;
  a package from an extra index or find-links page may come from the default
  index too, as pip would take it.

Every finding names the Dockerfile line of the step it comes from. Anything that
stops the replay is returned as its `error`, never raised.
"""
from __future__ import annotations

import copy
import dataclasses
import re
from typing import TYPE_CHECKING

import yaml

from ..plan import LockState, plan_variant
from ..steps import ADOPT_PIP_INSTALL, kind_adopting

if TYPE_CHECKING:
    from ..adopt import Adopted
    from ..distributions import Inventory
    from ..index import IndexClient


def replay(adopted: Adopted, client: IndexClient, path, base: Inventory | None = None) -> dict:
    from .. import manifest as manifest_mod
    from ..adopt.pin import pin
    from ..index import IndexClientError, metadata_source
    from ..resolve import ResolveError, resolve

    lines = dict(adopted.step_lines)
    copy_ = _replayable(adopted)
    absent = _without_local_wheels(copy_.manifest)
    notes = [f"local wheel {g} is not here: not installed in the replay" for g in absent]
    on_base = base is not None and copy_.manifest["variants"]["main"].get("environment") == "base"
    installed = {d.name: d.version for d in base.distributions} if on_base else None
    pinned = pin(copy_, client.versions, None, only=("index",), installed=installed)
    notes += [f"as pip would take it today: {d}" for d in pinned.done]
    notes += [f"not replayed: {d}" for d in pinned.left]
    if base is not None and copy_.manifest["variants"]["main"].get("environment") != "base":
        notes.append("the file installs into its own venv: the base's packages are not in it")
    if base is not None:
        notes += _base_python(copy_.manifest["variants"]["main"], base)
    empty = {"hazards": [], "suppressed": [], "clashes": [], "overrides": [], "unchecked": 0, "notes": notes,
             "not_expressed": adopted.listed}
    try:
        m = manifest_mod.parse(yaml.safe_dump(copy_.manifest, sort_keys=False), path.with_name(path.name + ".yaml"))
        plan = plan_variant(m, "main")
        if base is not None:
            plan = plan.with_resolution(base_inventory=base,
                                       inventory_state=LockState("ok", f"the base {base.image}, read for the replay"))
        resolved = resolve(plan, metadata_source(plan, client))
    except (ResolveError, IndexClientError, manifest_mod.ManifestError) as exc:
        return {**empty, "error": _located(str(exc), lines)}
    return {**empty, "hazards": [{**dataclasses.asdict(h), "dockerfile_line": lines.get(h.step)}
                                 for h in resolved.resolution.hazards],
            "replacements": [{**dataclasses.asdict(h), "dockerfile_line": lines.get(h.step)}
                             for h in resolved.resolution.replacements],
            "suppressed": [dataclasses.asdict(e) for e in resolved.resolution.edges if e.verdict == "suppressed"],
            "clashes": [dataclasses.asdict(c) for c in resolved.resolution.clashes],
            "overrides": _overrides(resolved, lines),
            "unchecked": sum(1 for e in resolved.resolution.edges if e.verdict == "unchecked") + len(resolved.resolution.unjudged),
            # the environment the file's installs leave, the base's packages included: `diff` compares it
            "installed": {i.name: i.version for i in sorted(resolved.resolution.installed, key=lambda i: i.name)}}


def _base_python(variant: dict, base: Inventory) -> list[str]:
    """The base's own Python, read from its inventory's sites, in place of the one import guessed: the base's
    packages are its environment only for that Python."""
    found = sorted({m.group(1) for site in base.sites if (m := re.search(r"python(\d+\.\d+)", site))})
    if len(found) != 1 or str(variant.get("python")) == found[0]:
        return []
    was, variant["python"] = variant.get("python"), found[0]
    return [f"the base's Python is {found[0]} (its inventory), not the {was} import guessed: replayed for {found[0]}"]


def _replayable(adopted: Adopted) -> Adopted:
    """A copy of the import whose placeholders the replay may fill in (the import itself is left as it is),
    without the `override: true` import proposes: the file declares no override, so a moved pin is its hazard."""
    replayed = copy.deepcopy(adopted)  # one deep copy: the TODOs keep pointing at the copied steps
    for step in replayed.manifest.get("steps", ()):
        for p in step.get("packages", ()):
            if isinstance(p, dict):
                p.pop("override", None)
    for todo in replayed.todos:  # --extra-index-url, -f: pip took the package from its default index too
        if todo.key.endswith(".index"):
            todo.step["packages"][int(todo.key.split("[", 1)[1].split("]", 1)[0])].pop("index", None)
    return replayed


def _without_local_wheels(manifest: dict) -> list[str]:
    """Local wheels are absent in a replay: a `fail` policy would stop it, so each becomes `skip`."""
    wheels = kind_adopting(ADOPT_PIP_INSTALL).name  # the kind import writes local wheels as
    absent = []
    for step in manifest.get("steps", ()):
        for p in step.get("packages", ()) if step["kind"] == wheels else ():
            local = p.get("local")
            if local:
                absent.append(local["glob"])
                if local["if_missing"] == "fail":
                    local["if_missing"] = "skip"
    return absent


def _overrides(resolved, lines: dict[str, int]) -> list[dict]:
    """Each --no-deps install whose version is outside a pin another installed package declares for it."""
    no_deps = {(p.name, step.name) for step in resolved.steps for p in getattr(step, "packages", ()) if p.no_deps}
    by_name = {i.name: i for i in resolved.resolution.installed}
    out = []
    for e in resolved.resolution.edges:
        if e.verdict != "violated" or e.name not in by_name:
            continue
        inst = by_name[e.name]
        if (e.name, inst.step) in no_deps:
            out.append({"package": e.name, "version": inst.version, "step": inst.step, "line": lines.get(inst.step),
                        "required_by": f"{e.parent} {e.parent_version}", "specifier": e.requirement})
    return out


def _located(message: str, lines: dict[str, int]) -> str:
    """The message, with the Dockerfile line of the first step it names."""
    for name, line in sorted(lines.items(), key=lambda kv: -len(kv[0])):
        if name in message:
            return f"Dockerfile line {line} (step {name}): {message}"
    return message
