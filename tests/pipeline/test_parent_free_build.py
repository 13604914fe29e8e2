"""Parent-free wheel-set layers (image.layers: parent-free) on the modern engine (Docker 26, containerd
image store, BuildKit with COPY --link), started beside the others by `make engine-modern`.

The pipeline image with a fifth set, `leaf`, whose package has a console script and a .pth file, and which
installs setuptools (the venv's skeleton holds none to replace). A pin
change in that last set re-runs its own stage only: the build log shows every other set's stage CACHED,
and the image's other layers keep their digests. The joined image holds the script (its shebang the
venv's python), the .pth's effect and RECORD paths that all exist; the invariant (pip check and imports)
ran once over it in the build. On the 20.10 engine, which has no COPY --link, the same project builds
the chained rendering, and says so.
"""
from __future__ import annotations

import re

import pytest

from pinwheel.image.build import build_image, engine_layering
from pinwheel.image.engine import Engine

from tests.support.pipeline import Project, steps_in

pytestmark = pytest.mark.engine  # the modern engine: the `modern` fixture (conftest.py)

DIST_INFO = "pw_leaf-{version}.dist-info"
LEAF_FILES = {
    "pw_leaf_boot.pth": b"import os; os.environ.setdefault('PW_LEAF_PTH', 'read')\n",
}
LEAF_SET = """
  - name: leaf
    why: "the last set, whose pin the test changes"
    packages:
      - requirement: "pw-leaf=={version}"
      - requirement: "setuptools==99.0.0"
        why: "a set that installs setuptools, as torch 2.13's does: the venv's skeleton has none to replace"
"""
# What the joined image must show of the leaf set: its script on PATH, run by the venv's python; the .pth
# read at start-up; every file its RECORD names present (the byte-code too: RECORD paths are relative).
CHECK = """\
import importlib.metadata as md, os, shutil, sys
script = shutil.which("pw-leaf-hello")
print("shebang", open(script).readline().strip())
print("pth", os.environ.get("PW_LEAF_PTH"))
files = md.distribution("pw-leaf").files
print("record", len(files), sum(not f.locate().exists() for f in files))
print("setuptools", md.version("setuptools"), len(list(md.distributions(name="setuptools"))))
"""


def _leaf(tls_index, version: str) -> None:
    entry_points = b"[console_scripts]\npw-leaf-hello = pw_leaf:hello\n"
    tls_index.add("pw-leaf", version, payload_size=16,
                  module_source=f'__version__ = "{version}"\n\ndef hello():\n    print("hello", __version__)\n',
                  files={**LEAF_FILES, f"{DIST_INFO.format(version=version)}/entry_points.txt": entry_points})


@pytest.fixture(scope="module")
def leaf_wheels(tls_index) -> None:
    _leaf(tls_index, "1.0.0")
    _leaf(tls_index, "1.1.0")
    tls_index.add("setuptools", "99.0.0", module_source='__version__ = "99.0.0"\n')


@pytest.fixture(scope="module", params=["uv", "pip"])
def project(request, project_factory, leaf_wheels) -> Project:
    project = project_factory(f"parent-free-{request.param}")
    image = "  venv: /opt/venv\n  layers: parent-free\n" + ("  installer: pip\n" if request.param == "pip" else "")
    text = project.manifest.read_text().replace("  venv: /opt/venv\n", image, 1)
    project.manifest.write_text(text + LEAF_SET.format(version="1.0.0"))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    return project


def _pin_leaf(project: Project, version: str) -> None:
    text = re.sub(r'"pw-leaf==[^"]+"', f'"pw-leaf=={version}"', project.manifest.read_text())
    project.manifest.write_text(text)
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)


def _set_stage_runs(steps: dict[str, bool]) -> dict[str, bool]:
    """Each wheel set's install RUN in its own stage -> whether it was CACHED."""
    out = {}
    for header, cached in steps.items():
        found = re.match(r"\[wheel-set-([a-z0-9-]+) +\d+/\d+\] RUN ", header)
        if found:
            out[found.group(1)] = cached
    return out


def _remove_images(modern: Engine, *refs: str) -> None:
    for ref in refs:
        if modern.image_exists(ref):
            modern.remove(ref, force=True)


def test_a_pin_change_in_the_last_set_rebuilds_its_stage_only(project: Project, modern: Engine, capsys) -> None:
    dockerfile = (project.root / "images" / "tiny" / "Dockerfile").read_text()
    assert dockerfile.count("COPY --link --from=wheel-set-") == 5
    _, plans, plan = project.load()
    first = build_image(plans, plan, project.root, modern, progress=False)
    try:
        _pin_leaf(project, "1.1.0")
        _, plans, plan = project.load()
        capsys.readouterr()
        second = build_image(plans, plan, project.root, modern, progress=True)
        log = capsys.readouterr().err
        try:
            runs = _set_stage_runs(steps_in(log))
            assert runs == {"core": True, "top": True, "nodeps": True, "local": True, "leaf": False}, log[-4000:]

            base_layers = len(modern.layers(plan.variant.base))
            before, after = modern.layers(first.image_id), modern.layers(second.image_id)
            assert len(before) == len(after) == base_layers + 1 + 5 + 3  # venv, 5 sets, expect, payload, checks
            # the base, the venv, the first four sets and the smoke payload (joined with --link too) keep
            # their digests; the leaf set's own layer and expect.json (it holds the new pin) do not
            leaf = base_layers + 1 + 4
            differ = [i for i in range(len(after)) if before[i] != after[i]]
            assert differ[:2] == [leaf, leaf + 1] and set(differ) <= {leaf, leaf + 1, leaf + 3}, (differ, leaf)

            result = modern.run(second.image_id, ["python", "-c", CHECK])
            assert result.ok, result.stderr
            lines = dict(line.split(" ", 1) for line in result.stdout.strip().splitlines())
            assert re.fullmatch(r"#!/opt/venv/bin/python(3(\.\d+)?)?", lines["shebang"]), lines  # uv: python, pip: python3
            assert lines["pth"] == "read"
            assert lines["setuptools"] == "99.0.0 1", lines  # the set's, added: the skeleton held none
            count, missing = map(int, lines["record"].split())
            assert count >= 5 and missing == 0, lines["record"]
            hello = modern.run(second.image_id, ["pw-leaf-hello"])
            assert hello.ok and hello.stdout.strip() == "hello 1.1.0", hello.stderr
        finally:
            _remove_images(modern, *second.tags)
    finally:
        _remove_images(modern, *first.tags)
        modern.docker.buildx.prune(all=True)  # this engine's build cache is the tests' own


def test_the_20_10_engine_builds_the_chained_rendering_and_says_so(project: Project, engine: Engine,
                                                                    capsys) -> None:
    if engine.copy_link():
        pytest.skip("SKIPPED: the main engine has COPY --link; the chained fallback is for engines without it")
    _, plans, plan = project.load()
    layering = engine_layering(plan, engine)
    assert not layering.parent_free and "no COPY --link" in (layering.note or "")
    built = project.cli("build", "--variant", "cu130", "--progress", "plain")
    assert built.returncode == 0, built.output[-4000:]
    assert "note: the engine has no COPY --link" in built.stderr
    steps = steps_in(built.stderr)
    assert any(re.match(r"\[image +\d+/\d+\] RUN .*02-top\.txt", h) for h in steps), sorted(steps)
    assert not any("COPY --link" in h or h.startswith("[wheel-set-") for h in steps), sorted(steps)
