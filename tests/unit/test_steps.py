"""Step kinds as building blocks: the registry and the `steps:` list. Each kind's own tests are in
test_steps_<kind>.py (the wheel set's in test_steps_wheels.py)."""
from __future__ import annotations

import importlib.resources
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pinwheel import manifest
from pinwheel.steps import KINDS

from tests.support.manifests import as_steps, assert_refused_at, load_text
from tests.support.render import GOLDEN, POLICIES

ROOT = Path(__file__).resolve().parents[2]


def test_every_kind_is_its_own_module_with_its_own_partial():
    templates = importlib.resources.files("pinwheel").joinpath("templates", "steps")
    for name, kind in KINDS.items():
        assert kind.name == name
        assert type(kind).__module__ == f"pinwheel.steps.{name.replace('-', '_')}"  # uv-project: uv_project.py
        assert kind.partial == f"steps/{name}.j2"
        assert templates.joinpath(f"{name}.j2").is_file(), name
    assert list(KINDS)[0] == "wheels"


BOTH = POLICIES.replace("wheel_sets:\n", "steps: []\nwheel_sets:\n")
NEITHER = POLICIES[:POLICIES.index("wheel_sets:\n")]
STEPS = as_steps(POLICIES)


def sub(text: str, old: str, new: str) -> str:
    assert text.count(old) >= 1, old
    return text.replace(old, new, 1)


CASES = [
    ("both-spellings", BOTH, 9, "wheel_sets", "two spellings of one list"),
    ("neither", NEITHER, 1, "steps", "required key is missing"),
    ("kind-missing", sub(STEPS, "    kind: wheels\n", ""), 9, "steps[0].kind", "required key is missing (kinds: "),
    ("kind-unknown", sub(STEPS, "kind: wheels", "kind: conda"), 10, "steps[0].kind", "unknown step kind 'conda'"),
    ("kind-not-a-string", sub(STEPS, "kind: wheels", "kind: [wheels]"), 10, "steps[0].kind", "must be a string"),
    ("entry-not-a-mapping", sub(STEPS, "steps:\n", "steps:\n  - core\n"), 9, "steps[0]", "must be a mapping"),
    ("duplicate-step-name", sub(STEPS, "  - name: gated\n", "  - name: core\n"), 14, "steps[1].name",
     "duplicate step name (first on line 9)"),
    ("kind-in-wheel-sets", sub(POLICIES, '    why: "pure-python base"\n', '    why: "pure-python base"\n    kind: wheels\n'),
     11, "wheel_sets[0].kind", "unknown key"),
    ("steps-package-error", sub(STEPS, '"six==1.16.0"', '"six>=1.16"'), 13, "steps[0].packages[0].requirement",
     "must be an exact pin"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_step_list_errors_are_located(case, tmp_path):
    _, text, line, key, fragment = case
    assert_refused_at(text, tmp_path, line, key, fragment)


def test_unknown_kind_lists_the_registry(tmp_path):
    with pytest.raises(manifest.ManifestError, match=re.escape(f"(kinds: {', '.join(KINDS)})")):
        load_text(sub(STEPS, "kind: wheels", "kind: conda"), tmp_path)


@pytest.mark.parametrize("first", ["pinwheel.steps.wheels", "pinwheel.steps", "pinwheel.manifest",
                                   "pinwheel.plan", "pinwheel.render", "pinwheel.lock"])
def test_any_module_may_be_imported_first(first, tmp_path):
    """manifest.load reads through the kinds, and the kinds read with the manifest's reader."""
    code = (f"import {first}\n"
            "from pinwheel import manifest\n"
            "from pinwheel.plan import plan_variant\n"
            "from pinwheel.render import render_dockerfile\n"
            "m = manifest.load(sys.argv[1])\n"
            "print(len(render_dockerfile([plan_variant(m, v) for v in m.variants])))\n")
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(POLICIES)
    proc = subprocess.run([sys.executable, "-c", "import sys\n" + code, str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) == len((GOLDEN / "policies.Dockerfile").read_text())
