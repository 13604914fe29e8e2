"""`audit --replay --base IMAGE` with a real engine: the base image's packages, read from its layers, are step 0."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from pinwheel import cli
from pinwheel.image.engine import Engine

SITE = "usr/local/lib/python3.12/dist-packages"


@pytest.mark.engine
def test_replay_against_a_base_image_finds_what_replaces_its_torch(engine: Engine, tmp_path: Path, local_index,
                                                                    capsys):
    context = tmp_path / "base"
    info = context / SITE / "torch-2.12.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.12.0\n")
    (info / "RECORD").write_text("torch/__init__.py,,10\n")
    (context / "Dockerfile").write_text(f"FROM scratch\nCOPY {SITE}/ /{SITE}/\n")
    tag = f"pinwheel-test/adopt-base:{uuid.uuid4().hex[:8]}"
    engine.build(context, context / "Dockerfile", tags=[tag])
    try:
        local_index.add("torch", "2.13.0")
        url = local_index.serve()
        path = tmp_path / "Dockerfile"
        path.write_text(f"FROM {tag}\nRUN pip install torch==2.13.0\n")
        cli.main(["audit", str(path), "--replay", "--json", "--index-url", url, "--base", tag])
        replay = json.loads(capsys.readouterr().out)["replay"]
        changes = replay["hazards"] + replay["replacements"]
        assert [(c["package"], c["before"], c["after"], c["earlier_step"], c["dockerfile_line"]) for c in changes] \
            == [("torch", "2.12.0", "2.13.0", "base", 2)]
    finally:
        engine.remove(tag, force=True)
