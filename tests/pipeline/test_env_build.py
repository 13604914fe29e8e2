"""env steps on the real engine: the built image has each variable, a single value referring to the PATH
before it, a per-variant value from its build argument, and a value with quotes, a backslash and dollars
exactly as the manifest wrote it.
"""
from __future__ import annotations

import json

import pytest

from pinwheel.image.engine import Engine

from tests.support.manifests import as_steps
from tests.support.pipeline import Project

pytestmark = pytest.mark.engine

NOTE = 'say "hi" \\ cost $5 $ (x)'
ENV_STEP = """\
  - name: toolchain
    kind: env
    why: "where the toolchain is, for every later step and at run time"
    env:
      - {name: CUDA_HOME, value: /usr/local/cuda, why: "where nvcc and the headers are"}
      - {name: PATH, value: "/usr/local/cuda/bin:${PATH}", why: "nvcc before the base's tools"}
      - name: TORCH_CUDA_ARCH_LIST
        why: "the GPUs the builds target"
        variants: {cu130: "9.0 10.0+PTX"}
      - {name: PINWHEEL_TEST_NOTE, value: 'say "hi" \\ cost $5 $ (x)', why: "quoting, byte for byte"}

"""


def with_env_step(manifest: str) -> str:
    return as_steps(manifest, first=ENV_STEP)


def test_the_image_has_each_variable(project_factory, engine: Engine):
    project: Project = project_factory("env")
    project.manifest.write_text(with_env_step(project.manifest.read_text()))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    built = project.cli("build", "--variant", "cu130", "--quiet", "--json", check=True)
    tag = json.loads(built.stdout)["tags"][0]
    run = engine.run(tag, ["python", "-c", "import json, os; print(json.dumps(dict(os.environ)))"])
    assert run.ok, run.stderr
    env = json.loads(run.stdout)
    assert env["CUDA_HOME"] == "/usr/local/cuda"
    assert env["PATH"].startswith("/usr/local/cuda/bin:/opt/") and env["PATH"].count("/usr/local/cuda/bin") == 1
    assert env["TORCH_CUDA_ARCH_LIST"] == "9.0 10.0+PTX"
    assert env["PINWHEEL_TEST_NOTE"] == NOTE
    inputs = json.loads(engine.labels(tag)["io.pinwheel.inputs"])
    assert {e["name"]: e["value"] for e in inputs["env"]}["TORCH_CUDA_ARCH_LIST"] == "9.0 10.0+PTX"
