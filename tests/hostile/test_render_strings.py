"""Every string the manifest gives the Dockerfile, and the manifest's own file name, made hostile (line breaks,
backslashes, `$`, quotes): what BuildKit's own parser (the `dockerfile` package) reads from the render is the
same instructions as from the plain manifest. A string is refused by the loader, or rendered harmlessly."""
from __future__ import annotations

import re
from pathlib import Path

import dockerfile
import pytest

from tests.support.manifests import CUDA_13_GATE, manifest_yaml
from pinwheel import manifest
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfile

SHA = "ab" * 32
REV = "0123456789abcdef0123456789abcdef01234567"
PATCH = "--- a/six.py\n+++ b/six.py\n@@ -1 +1 @@\n-x\n+y\n"

STEPS = f"""\
  - name: system
    kind: apt
    why: "RDMA userspace"
    packages:
      - {{name: libibverbs1, version: "44.0-2", why: "NCCL's IB transport loads it"}}
  - name: core
    kind: wheels
    why: "pure-python base"
    packages:
      - {{requirement: "six==1.16.0", why: "tiny and stable", verify: {{python: "import six"}}}}
      - {{requirement: "pw-nodeps==1.0", no_deps: true, why: "its pins are stale",
          allow_missing: [{{name: pw-core, why: "the shared one serves"}}]}}
      - requirement: "pw-kern==1.0+inhouse"
        why: "an in-house kernel"
        local: {{glob: "pw_kern-*.whl", if_missing: fallback, how_to_provide: "copy it into wheels/",
                 built_against: {{torch: "2.13.0+cu130", cuda: "13.0", arch_list: ["9.0"]}}}}
        fallback: {{requirement: "pw-kern-index==1.0", why: "the index build"}}
  - name: bridge
    kind: git
    why: "its fix is on no release yet"
    package: "pw-bridge==0.3.0"
    url: "https://git.example.org/team/pw-bridge.git"
    rev: "{REV}"
    env: {{MAX_JOBS: "4"}}
  - name: plain
    kind: sdist
    why: "pure Python, isolated"
    package: "pw-plain==2.0"
    sha256: "{SHA}"
  - name: flash-attn
    kind: asset
    why: "prebuilt against torch"
    package: "flash-attn==2.8.3"
    url: {{url: "https://downloads.example.org/flash_attn-2.8.3-py3-none-any.whl", sha256: "{SHA}"}}
  - name: six-fixes
    kind: patch
    why: "a fix upstream has not released"
    gate: ENABLE_CUDA_13
    patches:
      - {{file: patches/six-fix.patch, applies_to: "six==1.16.0", strip: 1, why: "the x is a y"}}
"""
TEXT = manifest_yaml(steps=STEPS, gates=CUDA_13_GATE, key="steps")
# In YAML's double-quoted escapes: a line that starts an instruction, and the characters quoting is about.
HOSTILE = ("\\nRUN touch /pwned", "\\rRUN touch /pwned", " \\\\ $HOME ${BASE} 'q' \\\" `x` \\\\",
           "\\u2028RUN touch /pwned")
QUOTED = [m.span(1) for m in re.finditer(r'"((?:[^"\\]|\\.)*)"', TEXT)]


def instructions(text: str) -> list[str]:
    return [c.cmd for c in dockerfile.parse_string(text)]


def render(directory: Path, text: str, name: str = "wheels_manifest.yaml") -> str:
    (directory / "patches").mkdir(parents=True, exist_ok=True)
    (directory / "patches" / "six-fix.patch").write_text(PATCH)
    path = directory / name
    path.write_text(text)
    return render_dockerfile([plan_variant(manifest.load(path), "cu130")])


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> list[str]:
    text = render(tmp_path_factory.mktemp("plain"), TEXT)
    found = instructions(text)
    assert {"FROM", "RUN", "COPY", "ARG", "ENV", "CMD"} <= set(found) and len(found) > 30
    return found


def no_injected_instruction(text: str, plain: list[str]) -> None:
    parsed = dockerfile.parse_string(text)
    assert [c.cmd for c in parsed] == plain
    assert not any(c.original.startswith("RUN touch") for c in parsed)


@pytest.mark.parametrize("span", QUOTED, ids=[TEXT[a:b][:24] for a, b in QUOTED])
def test_every_quoted_manifest_string_made_hostile_adds_no_instruction(tmp_path, plain, span):
    assert len(QUOTED) > 30
    start, end = span
    rendered = refused = 0
    for i, hostile in enumerate(HOSTILE):
        text = TEXT[:end] + hostile + TEXT[end:]
        try:
            out = render(tmp_path / str(i), text)
        except manifest.ManifestError as exc:
            assert "\n" not in str(exc)
            refused += 1
            continue
        no_injected_instruction(out, plain)
        rendered += 1
    assert rendered + refused == len(HOSTILE)


@pytest.mark.parametrize("name", ["m\nRUN touch pwned\n#.yaml", "m\rRUN touch pwned.yaml",
                                  "m \\ $HOME ${BASE} 'q' \" `x`.yaml", "m\u2028RUN touch pwned.yaml"])
def test_the_manifest_file_name_made_hostile_adds_no_instruction(tmp_path, plain, name):
    out = render(tmp_path, TEXT, name)
    no_injected_instruction(out, plain)
    first = out.splitlines()[0]
    assert first.startswith("# Rendered by pinwheel from ") and "RUN touch pwned" in first or "$HOME" in first
