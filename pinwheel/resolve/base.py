"""Step 0: what the base image's environment already holds, as the resolver sees it.

For a variant with ``environment: base`` (or a venv with
``system_site_packages``) the committed inventory of the base image is the
first step of the image. Its distributions are installed before any step of
the manifest, and their requirements come from the inventory's own
Requires-Dist and Provides-Extra, never from the index: what the base holds may
be a local build, a patched wheel or a release the index no longer has.
"""
from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..distributions import Distribution, Inventory, InventoryError
from ..index.metadata import DistMetadata
from ..plan import LockState, Plan
from ..workspace import Workspace

# The step name and source of everything the base holds.
BASE = "base"


def sees_base(plan: Plan) -> bool:
    """Does the image's Python environment include the base's own packages?"""
    return plan.resolution.base_inventory is not None and reads_base(plan)


def reads_base(plan: Plan) -> bool:
    """Is this a variant whose image's environment includes what its base holds (it needs an inventory)?"""
    return plan.on_base_environment or plan.variant.system_site_packages


def with_inventory(plan: Plan, root: Path | str, engine=None) -> Plan:
    """The Plan with its base's committed inventory and that inventory's state (ok | stale | missing).

    Unchanged for a variant that does not read its base. A base pinned by digest
    is checked against the recorded digest without any engine; otherwise the
    engine's image id is compared where an engine is given. A stale inventory is
    still read (it is the best account of the base there is), and says so.
    """
    if not reads_base(plan):
        return plan
    from ..image.inventory import check_inventory, load_inventory  # the image reader, only for a base that has one

    ws = Workspace(Path(root), plan.image)
    path = ws.inventory_file(plan.variant.name)
    try:
        status, detail = check_inventory(path, plan.variant.base, engine, ws.inventory_checks)
        inventory = load_inventory(path) if status != "missing" else None
    except InventoryError as exc:
        status, detail, inventory = "stale", str(exc), None
    return plan.with_resolution(base_inventory=inventory, inventory_state=LockState(status, detail))


def _site_python(site: str) -> str | None:
    m = re.search(r"python(\d+\.\d+)", site)
    return m[1] if m else None


def base_environment_sites(inventory: Inventory, python: str) -> tuple[str, ...]:
    """The inventory's sites that the target's interpreter reads: those of its Python version, and
    Debian's version-less ``python3/dist-packages``; every site where none names a version."""
    sites = inventory.sites
    mine = tuple(s for s in sites if _site_python(s) == python or (_site_python(s) is None and "python3" in s))
    return mine or sites


def base_distributions(plan: Plan) -> dict[str, Distribution]:
    """name -> distribution of what the image's environment holds before the first step ({} without one).

    Where two of the interpreter's sites hold the same name, the site listed first
    (by path) wins, as an earlier sys.path entry does for imports.
    """
    if not sees_base(plan):
        return {}
    assert plan.resolution.base_inventory is not None
    sites = base_environment_sites(plan.resolution.base_inventory, plan.target.python)
    out: dict[str, Distribution] = {}
    for site in sites:
        for d in plan.resolution.base_inventory.distributions:
            if d.site == site:
                out.setdefault(canonicalize_name(d.name), d)
    return out


def inventory_metadata(d: Distribution) -> DistMetadata:
    """A base distribution's metadata as the resolver reads it, from the inventory."""
    reqs, invalid = [], []
    for line in d.requires_dist:
        try:
            reqs.append(Requirement(line))
        except InvalidRequirement:
            invalid.append(line)
    try:
        version = Version(d.version)
    except InvalidVersion:
        version = Version("0")
    return DistMetadata(canonicalize_name(d.name), version, tuple(reqs), None,
                        tuple(canonicalize_name(e) for e in d.provides_extra), source="inventory",
                        invalid_requires=tuple(invalid))


class InventorySource:
    """A metadata source that answers for the base's own distributions from the inventory.

    Everything else (releases, wheels, file listings, other versions) goes to
    the wrapped source: what pip could install again is what the index has.
    """

    def __init__(self, inner, distributions: dict[str, Distribution]):
        self.inner = inner
        self.distributions = distributions

    def __getattr__(self, name):  # memo_key, index_url, default, files, stats, metadata_many, ...
        return getattr(self.inner, name)

    def _base(self, name: str, version) -> Distribution | None:
        d = self.distributions.get(canonicalize_name(name))
        if d is None:
            return None
        try:
            return d if Version(str(version)) == Version(d.version) else None
        except InvalidVersion:
            return d if str(version) == d.version else None

    def metadata(self, name, version, python_version=None, platforms=None):
        d = self._base(name, version)
        if d is not None:
            return inventory_metadata(d)
        return self.inner.metadata(name, version, python_version, platforms)

    def versions(self, name):
        return self.inner.versions(name)

    def best_wheel(self, name, version, python_version, platforms):
        return self.inner.best_wheel(name, version, python_version, platforms)

    def local_metadata(self, path: Path):
        return self.inner.local_metadata(path)
