"""How `make test` spreads the suite over its workers (pytest-xdist, `-n 2 --dist loadgroup`).

A module runs whole on one worker, so its module-scoped fixtures (a test index, a project, an example's
multi-GB image) are set up once. Modules that change something others read run on the same worker, one after
the other: the second and modern engines (tests empty them or prune their build cache), and whatever a module
declares with ``pytest.mark.holds("name")`` (the sglang stand-in bases: tests/e2e/examples.py says why). The
slowest kinds of module go first, so that no worker is left alone with a long e2e build at the end.

The groups are worked out where the items are, on the workers (which fixtures a module uses), and written to
a file the controller's scheduler reads: xdist's own loadgroup renames node ids, which pytest 9 no longer
lets a plugin do.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Iterable, Mapping

# Fixtures whose engine some tests empty or prune: every module using one runs on the same worker.
SHARED_FIXTURES = ("engine2", "modern")
GROUPS_FILE = "pinwheel_groups"  # the workerinput key naming the file


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def groups(resources: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """module -> its worker group: the module itself, or, for modules holding a shared resource, one group
    per set of modules linked through the resources they hold (named after its first module)."""
    parent = {module: module for module in resources}

    def root(module: str) -> str:
        while parent[module] != module:
            module = parent[module]
        return module

    holder: dict[str, str] = {}
    for module in sorted(resources):
        for resource in sorted(set(resources[module])):
            if resource in holder:
                a, b = sorted((root(holder[resource]), root(module)))
                parent[b] = a
            else:
                holder[resource] = module
    return {module: root(module) for module in resources}


def weight(markers: set[str]) -> int:
    """The order modules are handed out in: end-to-end builds, then engine modules, then the rest."""
    return 0 if "e2e" in markers else 1 if "engine" in markers else 2


def plan(items: list) -> dict[str, str]:
    """Group the collected items' modules, and order the items: the slowest kinds of group first, each
    group's items together in their own order. Returns module -> group."""
    resources: dict[str, set[str]] = {}
    markers: dict[str, set[str]] = {}
    for item in items:
        module = module_of(item.nodeid)
        held = resources.setdefault(module, set())
        held.update(f for f in SHARED_FIXTURES if f in item.fixturenames)
        held.update(str(m.args[0]) for m in item.iter_markers("holds"))
        markers.setdefault(module, set()).update(m.name for m in item.iter_markers())
    group = groups(resources)
    rank: dict[str, int] = {}
    for module, name in group.items():
        rank[name] = min(rank.get(name, 2), weight(markers[module]))
    items.sort(key=lambda item: (rank[group[module_of(item.nodeid)]], group[module_of(item.nodeid)]))
    return group


def new_groups_file() -> Path:
    return Path(tempfile.mkdtemp(prefix="pinwheel-test-groups-")) / "groups.json"


def write_groups(path: Path, group: Mapping[str, str]) -> None:
    """Both workers collect the same items and write the same map: atomically, so the reader sees one."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(dict(group), sort_keys=True))
    os.replace(tmp, path)


def scheduler(config, log, path: Path):
    """xdist's scope scheduler, its scope the module's group, its order the workers' collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroupScheduling(LoadScopeScheduling):
        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:  # first asked once every worker has collected (and written the map)
                try:
                    self._groups = json.loads(path.read_text())
                except (OSError, ValueError):
                    self._groups = {}
            module = module_of(nodeid)
            return self._groups.get(module, module)

    config.option.loadscopereorder = False
    return ModuleGroupScheduling(config, log)
