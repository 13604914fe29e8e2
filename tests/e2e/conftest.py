"""End-to-end tests: the real images from the shipped manifest (several GB, many minutes).

They run when asked for with ``--e2e`` (``make test``, and so CI, runs every test) or ``-m e2e``
(``make e2e``, these alone); any other run reports them SKIPPED with the reason. Once asked for, a missing engine or
registry skips them with the reason, or fails them when ``CI`` is set.
"""
from __future__ import annotations

import re

import pytest


def e2e_requested(config: pytest.Config) -> bool:
    """True with --e2e (`make test`, and so CI), or when the -m expression asks for e2e (and does not
    negate it)."""
    if config.getoption("--e2e", default=False):
        return True
    expr = config.getoption("markexpr") or ""
    return bool(re.search(r"(?<!not )\be2e\b", expr))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if e2e_requested(config):
        return
    skip = pytest.mark.skip(reason="SKIPPED (e2e): builds the real multi-GB image; run `make test` or `make e2e` "
                                   "(pytest -m e2e tests/e2e) to include it")
    for item in items:
        if item.get_closest_marker("e2e"):
            item.add_marker(skip)


# The engine and registry fixtures come from tests/conftest.py.
