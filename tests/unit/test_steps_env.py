"""The env kind: ENV lines with a why per variable, for every variant or per variant. Exact rendered text,
escaping, the build arguments per variant, the identity, and located errors."""
from __future__ import annotations

import pytest

from pinwheel.image.identity import step_sections
from pinwheel.lock.inputs import lock_inputs
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfile
from pinwheel.steps import kind_of
from pinwheel.steps.env import quoted

from tests.support.manifests import assert_refused_at, load_text

ENV = """\
manifest_version: 1
image: {name: demo, repository: pinwheel/demo}
variants:
  cu130: {cuda: "13.0", torch: "2.13.0", python: "3.11", platform: manylinux_2_36_x86_64, base: "pinwheel/base:bookworm-py311", tag: "cu130-{date}"}
  cu129: {cuda: "12.9", torch: "2.13.0", python: "3.11", platform: manylinux_2_36_x86_64, base: "pinwheel/base:bookworm-py311", tag: "cu129-{date}"}
steps:
  - name: cuda-env
    kind: env
    why: "the CUDA toolchain the source builds find"
    env:
      - {name: CUDA_HOME, value: /usr/local/cuda, why: "where nvcc and the headers are"}
      - {name: PATH, value: "/usr/local/cuda/bin:${PATH}", why: "nvcc on the PATH, before the base's"}
      - {name: LD_LIBRARY_PATH, value: '/usr/local/cuda/lib64:$LD_LIBRARY_PATH', why: "the runtime's libraries"}
      - name: TORCH_CUDA_ARCH_LIST
        why: "the GPUs each line builds kernels for"
        variants: {cu130: "9.0 10.0+PTX", cu129: "9.0"}
      - {name: PINWHEEL_NOTE, value: 'say "hi" \\ cost $5 $ (x)', why: "quotes, a backslash and stray dollars"}
  - name: core
    kind: wheels
    why: "pure-python base"
    packages:
      - {requirement: "six==1.16.0", why: "tiny and stable"}
"""

RENDERED = """\

# ---- env step 1/2: cuda-env. the CUDA toolchain the source builds find
#   CUDA_HOME: where nvcc and the headers are
#   PATH: nvcc on the PATH, before the base's
#   LD_LIBRARY_PATH: the runtime's libraries
#   TORCH_CUDA_ARCH_LIST: the GPUs each line builds kernels for
#   PINWHEEL_NOTE: quotes, a backslash and stray dollars
ARG PINWHEEL_ENV_TORCH_CUDA_ARCH_LIST="9.0 10.0+PTX"
ENV CUDA_HOME="/usr/local/cuda" \\
    PATH="/usr/local/cuda/bin:${PATH}" \\
    LD_LIBRARY_PATH="/usr/local/cuda/lib64:$LD_LIBRARY_PATH" \\
    TORCH_CUDA_ARCH_LIST="${PINWHEEL_ENV_TORCH_CUDA_ARCH_LIST}" \\
    PINWHEEL_NOTE="say \\"hi\\" \\\\ cost \\$5 \\$ (x)"

# ---- wheel set 2/2: core. pure-python base
"""


def plans(tmp_path, text=ENV):
    m = load_text(text, tmp_path)
    return [plan_variant(m, v) for v in m.variants]


def test_the_env_step_renders_one_env_instruction_at_its_place(tmp_path):
    text = render_dockerfile(plans(tmp_path))
    start = text.index("\n# ---- env step")
    assert text[start:text.index("# ---- wheel set 2/2") + len("# ---- wheel set 2/2: core. pure-python base\n")] \
        == RENDERED


def test_each_variant_gets_its_own_value_as_a_build_argument(tmp_path):
    cu130, cu129 = plans(tmp_path)
    assert cu130.build_args["PINWHEEL_ENV_TORCH_CUDA_ARCH_LIST"] == "9.0 10.0+PTX"
    assert cu129.build_args["PINWHEEL_ENV_TORCH_CUDA_ARCH_LIST"] == "9.0"
    assert "PINWHEEL_ENV_CUDA_HOME" not in cu130.build_args  # one value: in the ENV line itself


def test_the_values_join_the_identity_and_the_report_names_them(tmp_path):
    cu130, cu129 = plans(tmp_path)
    env130 = dict(step_sections(cu130, tmp_path))["env"]
    env129 = dict(step_sections(cu129, tmp_path))["env"]
    assert {e["name"]: e["value"] for e in env130}["TORCH_CUDA_ARCH_LIST"] == "9.0 10.0+PTX"
    assert {e["name"]: e["value"] for e in env129}["TORCH_CUDA_ARCH_LIST"] == "9.0"
    step = cu130.steps[0]
    effect = kind_of(step).effect(step)
    assert effect.empty and effect.outside[:2] == ("env CUDA_HOME", "env PATH")
    assert not any("kind" in s and s["kind"] == "env" for s in lock_inputs(cu130).layout)  # no lock part


@pytest.mark.parametrize("value,expected", [
    ("plain", '"plain"'),
    ("${PATH}:/x", '"${PATH}:/x"'),
    ("$HOME/bin", '"$HOME/bin"'),
    ("a$", '"a\\$"'),
    ("$1 ${}", '"\\$1 \\${}"'),
    ('"\\', '"\\"\\\\"'),
])
def test_quoting_keeps_references_and_escapes_the_rest(value, expected):
    assert quoted(value, True) == expected


def test_a_per_variant_value_has_no_references_and_is_quoted_whole():
    assert quoted("$PATH", False) == '"\\$PATH"'


ENTRY = "      - {name: CUDA_HOME, value: /usr/local/cuda, why: \"x\"}\n"


@pytest.mark.parametrize("entry,line,key,fragment", [
    ("      - {name: 9LIVES, value: x, why: y}\n", 11, "steps[0].env[0].name", "is not an environment variable name"),
    ("      - {name: PINWHEEL_ENV_X, value: x, why: y}\n", 11, "steps[0].env[0].name", "PINWHEEL_ENV_"),
    ("      - {name: A, why: y}\n", 11, "steps[0].env[0]", "exactly one of `value`"),
    ("      - {name: A, value: x, variants: {cu130: y}, why: y}\n", 11, "steps[0].env[0]", "exactly one of"),
    ("      - {name: A, variants: {cu130: y}, why: z}\n", 11, "steps[0].env[0].variants", "no value for variant cu129"),
    ("      - {name: A, variants: {cu130: y, cu999: y}, why: z}\n", 11, "steps[0].env[0].variants.cu999", "unknown key"),
    ("      - {name: A, variants: {cu130: $P, cu129: y}, why: z}\n", 11, "steps[0].env[0].variants.cu130",
     "refers to a variable"),
    ("      - {name: A, value: \"a\\nb\", why: z}\n", 11, "steps[0].env[0].value", "single line"),
    (ENTRY + ENTRY, 12, "steps[0].env[1].name", "CUDA_HOME is set twice (first on line 11)"),
])
def test_bad_entries_are_refused_at_their_line(tmp_path, entry, line, key, fragment):
    text = ENV.split("    env:\n")[0] + "    env:\n" + entry
    assert_refused_at(text, tmp_path, line, key, fragment)


def test_an_env_step_has_no_gate(tmp_path):
    text = ENV.replace("    why: \"the CUDA toolchain the source builds find\"\n",
                       "    why: \"the CUDA toolchain the source builds find\"\n    gate: X\n", 1)
    assert_refused_at(text, tmp_path, 10, "steps[0].gate", "ENV is not conditional")
