"""Where a Plan's metadata comes from: the default index, and packages routed to another index.

One function builds it (:func:`metadata_source`), for the report, bump and
lock alike: pip's index for everything, and torch from the variant's extra
index where the variant names one. A variant whose torch comes from an extra
index (a CUDA 12.9 build, say) must not be judged with the default index's
torch metadata.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from packaging.utils import canonicalize_name
from packaging.version import Version

from .client import IndexClient
from .errors import IndexNotConfigured

if TYPE_CHECKING:  # the Plan is only a type here; plan.py imports this package
    from ..plan import Plan

# The package a variant's torch_index_env routes to its extra index.
TORCH = "torch"


class MetadataSource(Protocol):
    """What the resolver asks of an index (IndexClient and RoutedSource both answer it)."""

    def versions(self, name: str) -> list[Version]: ...
    def best_wheel(self, name: str, version: str | Version, python_version: str, platforms: list[str]): ...
    def metadata(self, name: str, version: str | Version, python_version: str | None = None,
                 platforms: list[str] | None = None): ...
    def local_metadata(self, path: Path): ...


class RoutedSource:
    """Reads some packages from another index, or marks them unreadable with a reason.

    A route is another source, or a string: why that package cannot be read
    here (its index variable is unset), raised as IndexNotConfigured on use.
    """

    def __init__(self, default: MetadataSource, routes: dict[str, "MetadataSource | str"]):
        self.default = default
        self.routes = {canonicalize_name(k): v for k, v in routes.items()}
        self.index_url = getattr(default, "index_url", None)

    @property
    def memo_key(self) -> tuple:
        routes = sorted((k, v if isinstance(v, str) else getattr(v, "index_url", repr(v))) for k, v in self.routes.items())
        return (self.index_url, tuple(routes))

    @property
    def indexes(self) -> list[MetadataSource]:
        """Every index this source reads, the default first: what pip sees with the extra indexes."""
        out = [self.default]
        for route in self.routes.values():
            if not isinstance(route, str) and all(route is not s for s in out):
                out.append(route)
        return out

    def source_for(self, name: str) -> MetadataSource:
        route = self.routes.get(canonicalize_name(name))
        if isinstance(route, str):
            raise IndexNotConfigured(route)
        return route or self.default

    def files(self, name):
        return self.source_for(name).files(name)

    def versions(self, name):
        return self.source_for(name).versions(name)

    def best_wheel(self, name, version, python_version, platforms):
        return self.source_for(name).best_wheel(name, version, python_version, platforms)

    def metadata(self, name, version, python_version=None, platforms=None):
        return self.source_for(name).metadata(name, version, python_version, platforms)

    def metadata_many(self, items, python_version=None, platforms=None):
        """Batched metadata, each batch sent to the source its package routes to."""
        batches: dict[int, list] = {}
        sources: dict[int, MetadataSource] = {}
        for item in items:
            source = self.source_for(item[0])
            batches.setdefault(id(source), []).append(item)
            sources[id(source)] = source
        out = {}
        for key, batch in batches.items():
            out.update(sources[key].metadata_many(batch, python_version, platforms))
        return out

    def stats(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for source in self.indexes:
            for k, n in getattr(source, "stats", {}).items():
                total[k] = total.get(k, 0) + n
        return total

    def local_metadata(self, path):
        return self.default.local_metadata(path)


def metadata_source(plan: "Plan", default: IndexClient) -> RoutedSource:
    """The metadata source of a Plan: ``default`` for every package, torch from the variant's extra index
    where it names one, and each package the manifest names to an index from that index (each with the
    default's cache and settings).

    Where the variant's index variable is unset, torch lookups fail with what to set.
    """
    variant = plan.variant
    routes: dict[str, "MetadataSource | str"] = {}
    if variant.torch_index_env:
        url = variant.torch_index_url()
        routes[TORCH] = default.sibling(url) if url else variant.torch_index_unset()
    siblings: dict[str, MetadataSource] = {}
    for p in plan.packages():  # a package named to an index (manifest `index: NAME`) is read from it only
        named = getattr(p, "index", None)
        if named is None:
            continue
        if named.flat:  # a page of links: read as every project's page, keeping the named project's files
            from .flat import FlatPageClient

            routes[p.name] = siblings.setdefault(named.name, FlatPageClient.of(default, named.url))
        else:
            routes[p.name] = siblings.setdefault(named.name, default.sibling(named.url))
    return RoutedSource(default, routes)
