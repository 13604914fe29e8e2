"""Two processes making the same missing base at once (two CI jobs on one machine, two test workers): one
imports it, the other waits for it and finds it there. Real engine, the session's cached root filesystem."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pinwheel.image.engine import Engine

from tests.support.engine import BASE_PYTHON, BASE_SUITE, REPO_ROOT

pytestmark = pytest.mark.engine

MAKE = """
import sys
from pathlib import Path
from pinwheel.image.base import ensure_base
from pinwheel.image.engine import Engine
print(ensure_base(sys.argv[1], sys.argv[2], Engine(), suite=sys.argv[3], cache_dir=Path(sys.argv[4])))
"""


def seed_rootfs(engine: Engine, base_image: str, cache: Path, stem: str) -> None:
    """The cache ensure_base reads: the session's rootfs tarball, else the base's own filesystem exported (an
    import, not a debootstrap, either way)."""
    session = REPO_ROOT / ".cache" / "base"
    if (session / f"{stem}.tar").is_file() and (session / f"{stem}.python").is_file():
        for name in (f"{stem}.tar", f"{stem}.python"):
            try:
                os.link(session / name, cache / name)
            except OSError:  # another filesystem
                shutil.copy2(session / name, cache / name)
        return
    container = subprocess.run(["docker", "create", base_image], capture_output=True, text=True, check=True)
    try:
        subprocess.run(["docker", "export", "-o", str(cache / f"{stem}.tar"), container.stdout.strip()], check=True)
    finally:
        subprocess.run(["docker", "rm", container.stdout.strip()], capture_output=True)
    python = engine.run(base_image, ["-c", "import platform; print(platform.python_version())"],
                        entrypoint="/usr/bin/python3")
    assert python.ok, python.stderr
    (cache / f"{stem}.python").write_text(python.stdout.strip() + "\n")


def test_two_processes_make_a_missing_base_once(engine: Engine, base_image: str, tmp_path: Path):
    cache = tmp_path / "base-cache"
    cache.mkdir()
    stem = f"{BASE_SUITE}-py{BASE_PYTHON.replace('.', '')}"
    seed_rootfs(engine, base_image, cache, stem)
    ref = f"pinwheel-test/base-once:{uuid.uuid4().hex[:10]}"
    args = [sys.executable, "-c", MAKE, ref, BASE_PYTHON, BASE_SUITE, str(cache)]
    try:
        runs = [subprocess.Popen(args, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for _ in range(2)]
        said = [run.communicate(timeout=600) for run in runs]
        assert all(run.returncode == 0 for run in runs), said
        assert sorted(out.strip() for out, _ in said) == ["False", "True"], said
        assert engine.image_exists(ref)
    finally:
        if engine.image_exists(ref):
            engine.remove(ref, force=True)
