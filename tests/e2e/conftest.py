"""End-to-end tests: the real images from the shipped manifest (several GB, many minutes).

They run only when asked for with ``-m e2e`` (``make e2e``); any other run
reports them SKIPPED with the reason. Once asked for, a missing engine or
registry skips them with the reason, or fails them when ``CI`` is set.
"""
from __future__ import annotations

import os
import re
import urllib.request

import pytest

from pinwheel.engine import Engine

REGISTRY_ADDR = os.environ.get("PINWHEEL_TEST_REGISTRY_ADDR", "127.0.0.1:5000")


def e2e_requested(config: pytest.Config) -> bool:
    """True when the -m expression asks for e2e (and does not negate it)."""
    expr = config.getoption("markexpr") or ""
    return bool(re.search(r"(?<!not )\be2e\b", expr))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if e2e_requested(config):
        return
    skip = pytest.mark.skip(reason="SKIPPED (e2e): builds the real multi-GB image; run `make e2e` "
                                   "(pytest -m e2e tests/e2e) to include it")
    for item in items:
        if item.get_closest_marker("e2e"):
            item.add_marker(skip)


def unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"e2e tests need a working engine and registry in CI: {reason}", pytrace=False)
    pytest.skip(f"SKIPPED (no engine): {reason}")


@pytest.fixture(scope="session")
def e2e_engine() -> Engine:
    eng = Engine()
    try:
        reason = eng.unavailable_reason()
    except Exception as exc:  # e.g. no docker CLI at all: python-on-whales raises ClientNotFoundError
        reason = f"{type(exc).__name__}: {exc}"
    if reason is not None:
        unavailable(reason)
    return eng


@pytest.fixture(scope="session")
def e2e_registry(e2e_engine: Engine) -> str:
    try:
        with urllib.request.urlopen(f"http://{REGISTRY_ADDR}/v2/", timeout=5) as resp:
            if resp.status == 200:
                return REGISTRY_ADDR
    except OSError as exc:
        unavailable(f"no registry answers at {REGISTRY_ADDR} ({exc}); run scripts/registry-up (make registry)")
    unavailable(f"the registry at {REGISTRY_ADDR} does not answer /v2/")
    raise AssertionError("unreachable")
