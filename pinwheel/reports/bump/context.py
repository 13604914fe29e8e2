"""One variant's comparison: what every step of the bump report reads, and the lookups they share."""
from __future__ import annotations

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from ...abi.cache import AbiCache
from ...index import IndexClient, IndexClientError, metadata_source
from ...manifest import Manifest
from ...plan import Installed, Plan, plan_variant
from ...resolve import InventorySource, Resolver, base_distributions, base_installed, classify_requirements, with_inventory
from ...workspace import Workspace
from .versions import as_version

#: How many versions of a package the fix lookup reads metadata for, per direction.
FIX_LOOKUPS = 16


class Comparison:
    """Today's Plan of one variant, the bumps asked for, and where metadata and wheels come from."""

    def __init__(self, manifest: Manifest, variant: str, bumps: list[Requirement], client: IndexClient,
                 *, offline: bool = False, fix_lookups: int = FIX_LOOKUPS, list_all: bool = False,
                 platform: str | None = None):
        self.m = manifest
        self.workspace = Workspace.of(manifest)
        self.root = self.workspace.root
        self.offline = offline
        self.fix_lookups = fix_lookups
        self.list_all = list_all
        # on a base's environment, today's image starts from the base's committed inventory (step 0);
        # platform: one of the variant's container platforms (None: its own), judged with that target
        self.plan = with_inventory(plan_variant(manifest, variant, platform=platform), self.root)
        self.env = self.plan.target.marker_environment()
        self.bumps = {canonicalize_name(r.name): r for r in bumps}
        self.new = {n: list(r.specifier)[0].version for n, r in self.bumps.items()}
        self.notes: list[str] = []
        # bumped packages whose new version has no file this platform installs: name -> the finding
        self.missing: dict[str, dict] = {}
        self.source = metadata_source(self.plan, client)
        base = base_installed(self.plan)
        if base:  # the base's own packages: their metadata is the inventory's
            self.source = InventorySource(self.source, base_distributions(self.plan))
        self.resolver = Resolver(self.source, self.workspace.wheels_dir, base=base)
        self.abi_cache = AbiCache(self.workspace, client, offline)
        self.today_torch: str | None = None  # torch's version in today's image, once it is read

    def meta(self, plan: Plan, name: str, version: str):
        return self.resolver.meta(plan, name, version)

    def requirements(self, plan: Plan, inst: Installed, include_suppressed: bool = False) -> list[Requirement]:
        """The requirements of an installed package that are active for the target and the extras it has."""
        meta = self.meta(plan, inst.name, inst.version)
        if meta is None:
            return []
        return [a.requirement for a in classify_requirements(meta, self.env, inst.extras)
                if a.active and (include_suppressed or not inst.no_deps)]

    def has_wheel(self, plan: Plan, name: str, version) -> bool:
        return self.source.best_wheel(name, version, plan.target.python, plan.target.platforms()) is not None

    def nearest(self, plan: Plan, name: str, spec: SpecifierSet, current: str | None) -> str | None:
        """The release satisfying ``spec`` closest to ``current`` (the lowest above it, else the highest below)."""
        try:
            versions = sorted(spec.filter(self.source.versions(name)))
        except IndexClientError:
            return None
        cur = as_version(current) if current else None
        above = [v for v in versions if cur is None or v >= cur]
        below = [v for v in reversed(versions) if cur is not None and v < cur]
        for v in (above + below)[:FIX_LOOKUPS]:
            if self.has_wheel(plan, name, v):
                return str(v)
        return None

    def newest(self, plan: Plan, name: str, spec: SpecifierSet) -> str | None:
        """The newest release satisfying ``spec`` with a wheel for the target."""
        try:
            versions = self.source.versions(name)
        except IndexClientError:
            return None
        for v in sorted(spec.filter(versions), reverse=True)[:FIX_LOOKUPS]:
            if self.has_wheel(plan, name, v):
                return str(v)
        return None
