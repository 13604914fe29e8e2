"""What the real-engine fixtures share (tests/conftest.py holds the fixtures)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
BASE_SUITE = "bookworm"
BASE_PYTHON = "3.11"
REGISTRY_ADDR = os.environ.get("PINWHEEL_TEST_REGISTRY_ADDR", "127.0.0.1:5000")


def engine_unavailable(reason: str) -> None:
    """Skip (saying why) where there is no engine; fail in CI, which must provide one."""
    if os.environ.get("CI"):
        pytest.fail(f"these tests need a working engine and registry in CI: {reason}", pytrace=False)
    pytest.skip(f"SKIPPED (no engine): {reason}")


def second_engine():
    """The second engine (scripts/engine2-up starts it when none answers): an Engine on its socket."""
    import subprocess

    from pinwheel.image.engine import Engine

    proc = subprocess.run([str(REPO_ROOT / "scripts" / "engine2-up")], capture_output=True, text=True)
    if proc.returncode != 0:
        engine_unavailable(f"scripts/engine2-up failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    engine = Engine(host=proc.stdout.strip().splitlines()[-1])
    reason = engine.unavailable_reason()
    if reason:
        engine_unavailable(f"the second engine at {engine.host} does not answer: {reason}")
    return engine


def carry_base(engine, remote, base_image: str, registry: str) -> None:
    """Put ``base_image`` on ``remote`` where it lacks it: through the registry, so both engines hold the same
    image (a bootstrap base is made on this machine's main engine only)."""
    import uuid

    if remote.image_exists(base_image):
        return
    ref = f"{registry}/pinwheel-test/base-{uuid.uuid4().hex[:10]}:{base_image.rsplit(':', 1)[-1]}"
    engine.tag(base_image, ref)
    try:
        engine.push(ref)
        remote.docker.image.pull(ref, quiet=True)
        remote.tag(ref, base_image)
        remote.remove(ref)
    finally:
        engine.remove(ref)

