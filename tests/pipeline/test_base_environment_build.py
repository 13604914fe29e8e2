"""environment: base on the real engine: a third-party base with packages in its system python, a removal,
a declared move of a base package, and a requirement the base already broke.

The base is built here from a hand-written Dockerfile, the way a team's own image is made: packages from the
test index pip-installed into the system interpreter (no venv), one of them --no-deps with its requirement
missing (the baseline), and an entrypoint that is not python. On it goes a manifest variant with
`environment: base`: remove pw-top, move pw-core 1.0.0 -> 1.1.0 on purpose. The lock's expect.json gets the
base's part (base_unchanged, removed, baseline_broken) written here from the committed inventory, so this
test shows the build side whatever the lock writes. Two builds; the second reuses every layer but the last.
"""
from __future__ import annotations

import json
import re
import shutil
import uuid

import pytest

from pinwheel.image.engine import Engine

from tests.support.pipeline import Project

pytestmark = pytest.mark.engine

SYSTEM_SITE = "/usr/local/lib/python3.11/dist-packages"

THIRD_PARTY = """\
FROM {base}
# a team's own base: packages in the system python, no venv; pw-orphan's pw-absent is missing.
# (The wheels are the test index's files: Debian's pip 23.0.1 cannot read a PEP 691 page's
# dist-info-metadata object, so it is given the files.)
RUN --mount=type=bind,source=wheels,target=/tmp/w \\
    python3 -m pip install --break-system-packages --no-cache-dir --no-index --find-links /tmp/w \\
      pw-core==1.0.0 pw-util==0.5.0 pw-top==2.0.0 && \\
    python3 -m pip install --break-system-packages --no-cache-dir --no-index --find-links /tmp/w \\
      --no-deps pw-orphan==1.0.0
ENTRYPOINT ["/bin/sh", "-c", "echo not python; exit 3"]
"""

MANIFEST = """\
manifest_version: 1
image:
  name: tiny
  repository: {repository}
variants:
  cu130:
    cuda: "13.0"
    torch: "2.13.0"
    python: "3.11"
    platform: manylinux_2_36_x86_64
    base: {base}
    tag: "cu130-base-{{date}}"
    environment: base
steps:
  - name: drop
    kind: remove
    why: "pw-top is replaced by the image's own stack"
    packages:
      - {{name: pw-top, why: "built against the old pw-core"}}
  - name: core
    kind: wheels
    why: "a newer pw-core than the base's"
    packages:
      - requirement: "pw-core==1.1.0"
        why: "moves the base's 1.0.0 on purpose"
"""


def printed(log: str, text: str) -> bool:
    return bool(re.search(r"^#\d+ \d+\.\d+ .*" + re.escape(text), log, re.M))


def test_a_variant_on_a_third_party_base_builds_and_its_invariant_holds_the_base_to_the_inventory(
        project_factory, engine: Engine, base_image: str, tls_index, tmp_path):
    tls_index.add("pw-orphan", "1.0.0", requires=["pw-absent>=1"], payload_size=16)
    base_tag = f"pinwheel-test/third-party:{uuid.uuid4().hex[:8]}"
    ctx = tmp_path / "base"
    ctx.mkdir()
    (ctx / "wheels").mkdir()
    for wheel in tls_index.files_dir.glob("*.whl"):
        shutil.copy2(wheel, ctx / "wheels" / wheel.name)
    (ctx / "Dockerfile").write_text(THIRD_PARTY.format(base=base_image))
    engine.build(ctx, ctx / "Dockerfile", tags=[base_tag])
    project: Project = project_factory("base-env")
    images: list[str] = []
    try:
        project.manifest.write_text(MANIFEST.format(repository=project.repository, base=base_tag))
        project.cli("render", check=True)
        dockerfile = (project.root / "images" / "tiny" / "Dockerfile").read_text()
        assert "python3 -m venv" not in dockerfile and "VIRTUAL_ENV" not in dockerfile
        assert "    /usr/bin/python3 -m pip uninstall -y pw-top\n" in dockerfile

        project.cli("base", "inventory", "--variant", "cu130", check=True)
        inventory = json.loads((project.root / "images" / "tiny" / "inventory" / "cu130.json").read_text())
        base = {d["name"]: d["version"] for d in inventory["distributions"] if d["site"] == SYSTEM_SITE}
        assert base == {"pw-core": "1.0.0", "pw-util": "0.5.0", "pw-top": "2.0.0", "pw-orphan": "1.0.0"}

        project.cli("lock", "--variant", "cu130", check=True)
        expect_path = project.lock_dir / "expect.json"
        expect = json.loads(expect_path.read_text())
        assert expect["pins"].get("pw-core") == "1.1.0", expect
        # the base's part, from the inventory: what the manifest leaves alone, what it removes, what was broken
        assert expect["base_unchanged"]["pw-util"] == "0.5.0" and expect["base_unchanged"]["pw-orphan"] == "1.0.0"
        assert "pw-core" not in expect["base_unchanged"] and "pw-top" not in expect["base_unchanged"]
        assert expect["removed"] == ["pw-top"]
        assert expect["baseline_broken"] == ["pw-orphan pw-absent>=1"]

        built = project.cli("build", "--variant", "cu130", "--json")
        assert built.returncode == 0, built.output[-4000:]
        image = json.loads(built.stdout)
        images.append(image["image_id"])
        log = built.stderr
        kept = len(expect["base_unchanged"])
        assert printed(log, f"[   PASS] static/base: {kept} base packages at their inventory versions"), log[-3000:]
        assert printed(log, "[   PASS] static/removed: gone: pw-top"), log[-3000:]
        assert printed(log, "base: already broken: pw-orphan 1.0.0 requires pw-absent, which is not installed."), \
            log[-3000:]
        listed = engine.run(image["image_id"], ["-m", "pip", "list", "--format", "json"],
                            entrypoint="/usr/bin/python3")  # the base's entrypoint is not python
        versions = {p["name"]: p["version"] for p in json.loads(listed.stdout)}
        assert versions["pw-core"] == "1.1.0" and versions["pw-util"] == "0.5.0" and "pw-top" not in versions
        assert not any(p.startswith("/opt/venv") for p in listed.stdout.split('"'))
        # the smoke runs through the base's interpreter, whatever the image's entrypoint is
        smoke = project.cli("smoke", image["tags"][0], "--variant", "cu130", "--level", "static", "--gpus", "no")
        assert smoke.returncode == 0, smoke.output[-3000:]
        assert "static: PASSED" in smoke.stdout

        # The same image judged against an expect.json that never said pw-core moves, nor that pw-orphan came
        # broken: the build refuses such a file before the engine (it is not what the manifest and the lock
        # say), and the image's own invariant, run on it, fails naming both.
        expect.update(base_unchanged={**expect["base_unchanged"], "pw-core": "1.0.0"}, baseline_broken=[])
        expect["pins"].pop("pw-core")
        edited = json.dumps(expect, indent=2, sort_keys=True) + "\n"
        saved = expect_path.read_text()
        expect_path.write_text(edited)
        try:
            refused = project.cli("build", "--variant", "cu130", "--json")
        finally:
            expect_path.write_text(saved)
        assert refused.returncode == 2, refused.output[-3000:]
        assert "expect.json: base_unchanged is not what the manifest and the lock's slices say" in refused.stderr
        script = ('printf %s "$EXPECT" > /tmp/edited.json && exec /usr/bin/python3 /opt/pinwheel/smoke_payload.pyz '
                  '--expect /tmp/edited.json --level static --check-pip')
        failed = engine.run(image["image_id"], ["-c", script], env={"EXPECT": edited}, entrypoint="/bin/sh")
        said = failed.stdout + failed.stderr
        assert failed.returncode != 0, said[-3000:]
        assert "pw-core: the base's 1.0.0 became 1.1.0" in said, said[-3000:]
        assert "pw-orphan 1.0.0 requires pw-absent, which is not installed." in said, said[-3000:]
    finally:
        for ref in images + [base_tag]:
            if engine.image_exists(ref):
                engine.remove(ref, force=True)
