"""With --json, stdout is one JSON document and nothing else, from a cold state too.

Cold here: the project's bootstrap base is not in the engine (its tag is new to this run), pinwheel's
index cache is empty, and no inventory or build has been made. On the way, `build` creates the base
and prints its progress (`base: ...`): that goes to stderr. A machine that keeps its images hides
this path, which is why the test names a base that cannot already exist.
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import pytest

from pinwheel.image.engine import Engine

from tests.support.pipeline import REPO_ROOT, make_project

pytestmark = pytest.mark.engine


def one_document(stdout: str, what: str) -> object:
    """stdout parsed whole: json.loads refuses anything before or after the document."""
    try:
        return json.loads(stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"{what}: stdout is not one JSON document ({exc}):\n{stdout[:2000]}") from None


def seed_rootfs_cache(project_root: Path) -> None:
    """Hard-link the bootstrap rootfs tarball the session's base fixture made, so creating this project's
    base imports it instead of running debootstrap again (the note path is the same; only the 40 s differ)."""
    source = REPO_ROOT / ".cache" / "base"
    dest = project_root / ".cache" / "base"
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("bookworm-py311.tar", "bookworm-py311.python"):
        if (source / name).is_file():
            try:
                os.link(source / name, dest / name)
            except OSError:
                shutil.copy2(source / name, dest / name)


def test_every_json_command_prints_one_document_from_a_cold_state(engine: Engine, base_image: str,
                                                                   pipeline_env, host_env, local_wheel_files,
                                                                   tmp_path: Path):
    run = uuid.uuid4().hex[:10]
    cold_base = f"pinwheel/base:bookworm-py311-cold{run}"
    assert not engine.image_exists(cold_base)
    env = {**pipeline_env, "PINWHEEL_CACHE_DIR": str(tmp_path / "cold-cache")}
    project = make_project(tmp_path / "p", f"pinwheel-test/json-cold-{run}", cold_base, local_wheel_files,
                           env, {**host_env, "PINWHEEL_CACHE_DIR": str(tmp_path / "cold-cache")})
    seed_rootfs_cache(project.root)
    try:
        built = project.cli("build", "--json")  # not --quiet: the build's own log must not reach stdout either
        assert built.returncode == 0, built.output[-4000:]
        doc = one_document(built.stdout, "build --json")
        assert engine.image_exists(cold_base)  # the base was created on the way ...
        assert f"base: imported {cold_base}" in built.stderr  # ... and said so, on stderr
        image = doc["tags"][0]

        for args in (("report", "--json"), ("bump", "pw-core==1.0.0", "--json"),
                     ("inspect", image, "--json"), ("diff", image, str(project.lock_dir), "--json"),
                     ("layers", image, image, "--json")):
            result = project.cli(*args)
            assert result.returncode in (0, 1), (args, result.output[-3000:])
            one_document(result.stdout, " ".join(args))
        dockerfile = project.root / "Dockerfile.hand"
        dockerfile.write_text("FROM debian\nRUN pip install pw-core==1.0.0\n")
        audit = project.cli("audit", str(dockerfile), "--json")
        one_document(audit.stdout, "audit --json")
    finally:
        for image in engine.docker.image.list(repository_or_tag=project.repository):
            for tag in image.repo_tags:
                engine.remove(tag, force=True)
        if engine.image_exists(cold_base):
            engine.remove(cold_base, force=True)
