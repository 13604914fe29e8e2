"""Evaluate a variant as it will be installed, step by step, and judge every edge.

- ``resolver``: the resolver (as plain pip would install it, as the lock does) and the edge rules;
- ``base``: step 0, what a base image's environment already holds (from its inventory);
- ``memo``: resolve results remembered on disk for an unchanged index cache.
"""
from ..index.sources import MetadataSource, RoutedSource
from .base import BASE, InventorySource, base_distributions, reads_base, sees_base, with_inventory
from .memo import CacheState, memoized, record_fields, resolve_memoized, wheels_state
from .resolver import (
    Applies,
    Resolver,
    ResolveError,
    base_installed,
    baseline_broken,
    classify_requirements,
    excludes_shared_pin,
    fully_judged,
    intended_change,
    overrides,
    requirement_text,
    resolve,
)

__all__ = [
    "Applies",
    "BASE",
    "CacheState",
    "InventorySource",
    "MetadataSource",
    "ResolveError",
    "Resolver",
    "RoutedSource",
    "base_distributions",
    "base_installed",
    "baseline_broken",
    "classify_requirements",
    "excludes_shared_pin",
    "fully_judged",
    "intended_change",
    "memoized",
    "record_fields",
    "overrides",
    "reads_base",
    "requirement_text",
    "resolve",
    "resolve_memoized",
    "sees_base",
    "wheels_state",
    "with_inventory",
]

