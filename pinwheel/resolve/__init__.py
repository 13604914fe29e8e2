"""Evaluate a variant as it will be installed, step by step, and judge every edge.

- ``resolver``: the resolver (as plain pip would install it, as the lock does) and the edge rules;
- ``memo``: resolve results remembered on disk for an unchanged index cache.
"""
from ..index.sources import MetadataSource, RoutedSource
from .memo import memoized, resolve_memoized, wheels_state
from .resolver import (
    Applies,
    Resolver,
    ResolveError,
    classify_requirements,
    excludes_shared_pin,
    fully_judged,
    requirement_text,
    resolve,
)

__all__ = [
    "Applies",
    "MetadataSource",
    "ResolveError",
    "Resolver",
    "RoutedSource",
    "classify_requirements",
    "excludes_shared_pin",
    "fully_judged",
    "memoized",
    "requirement_text",
    "resolve",
    "resolve_memoized",
    "wheels_state",
]

