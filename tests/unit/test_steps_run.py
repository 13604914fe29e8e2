"""The run kind: a script the resolver does not judge. Exact rendered text (builder stage, outputs, checked
downloads, cache mounts, verify), shellcheck over every RUN, the script run as written (quotes, dollars),
identity, the opaque effect, and located errors."""
from __future__ import annotations

import hashlib
import shutil
import subprocess

import pytest

from pinwheel.image.identity import step_sections
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfile
from pinwheel.steps import kind_of

from tests.support.manifests import assert_refused_at, load_text

from tests.support.render import run_scripts

SHA = "a" * 64
HEAD = """\
manifest_version: 1
image: {name: demo, repository: pinwheel/demo}
gates:
  ENABLE_CUDA_13: {when: "cuda >= 13", why: "CUDA 13 only"}
variants:
  cu130: {cuda: "13.0", torch: "2.13.0", python: "3.11", platform: manylinux_2_36_x86_64, base: "pinwheel/base:bookworm-py311", tag: "cu130-{date}"}
steps:
"""
RUN = HEAD + f"""\
  - name: helm
    kind: run
    why: "the deploy tool, a static binary"
    builder: base
    downloads:
      - {{url: "https://downloads.example.org/helm-v3.16.1-linux-amd64.tar.gz", sha256: "{SHA}", dest: /tmp/helm.tgz}}
    workdir: /tmp/helm
    env: {{GREETING: "it's $HOME"}}
    cache: [/root/.cache/helm]
    script: |
      tar -xzf /tmp/helm.tgz
      install -m 0755 linux-amd64/helm /usr/local/bin/helm
    outputs: [/usr/local/bin/helm]
    verify: {{paths: [/usr/local/bin/helm], command: "helm version --short"}}
  - name: links
    kind: run
    why: "the names the launch scripts use"
    gate: ENABLE_CUDA_13
    script: ln -sf /usr/bin/python3 /usr/local/bin/python-train
"""

STAGE = """\
# ---- run step 1/2, builder: helm in base; the image takes
# only /usr/local/bin/helm from this stage.
FROM ${BASE} AS run-helm
RUN --mount=type=cache,target=/root/.cache/helm,sharing=locked \\
    --mount=type=bind,source=runs/helm,target=/tmp/pinwheel-run/helm/downloads \\
    set -eu; \\
    command -v bash >/dev/null 2>&1 || { echo 'pinwheel: ERROR: run step helm: bash is not in the image it runs in' >&2; exit 1; }; \\
    found=$(sha256sum /tmp/pinwheel-run/helm/downloads/00-helm-v3.16.1-linux-amd64.tar.gz | cut -d ' ' -f 1); \\
    if [ "$found" != aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa ]; then echo 'pinwheel: ERROR: run step helm: https://downloads.example.org/helm-v3.16.1-linux-amd64.tar.gz: sha256 mismatch: expected aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, found' "$found" >&2; exit 1; fi; \\
    mkdir -p /tmp && cp /tmp/pinwheel-run/helm/downloads/00-helm-v3.16.1-linux-amd64.tar.gz /tmp/helm.tgz; \\
    printf '%s\\n' \\
      'tar -xzf /tmp/helm.tgz' \\
      'install -m 0755 linux-amd64/helm /usr/local/bin/helm' \\
      > /tmp/pinwheel-run-helm.sh; \\
    export GREETING='it'"'"'s $HOME'; \\
    mkdir -p /tmp/helm && cd /tmp/helm; \\
    rc=0; bash -euo pipefail /tmp/pinwheel-run-helm.sh || rc=$?; \\
    rm -f /tmp/pinwheel-run-helm.sh; \\
    if [ "$rc" != 0 ]; then echo 'pinwheel: ERROR: run step helm: its script failed with exit' "$rc" >&2; exit 1; fi
"""

INSTALL = """\

# ---- run step 1/2: helm. the deploy tool, a static binary
# Not judged by the resolver: the invariant's pins and pip check see what it changes.
#   /tmp/helm.tgz: https://downloads.example.org/helm-v3.16.1-linux-amd64.tar.gz
#     sha256 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa
#   from stage run-helm: /usr/local/bin/helm
RUN --mount=type=bind,from=run-helm,source=/,target=/tmp/pinwheel-run/helm/from-builder \\
    set -eu; \\
    if [ ! -e /tmp/pinwheel-run/helm/from-builder/usr/local/bin/helm ]; then echo 'pinwheel: ERROR: run step helm: output /usr/local/bin/helm is not in its builder stage' >&2; exit 1; fi; \\
    mkdir -p /usr/local/bin && cp -a /tmp/pinwheel-run/helm/from-builder/usr/local/bin/helm /usr/local/bin/; \\
    true
"""

INVARIANT = """\

# Invariant of run step helm: what its verify names is there after the last step.
RUN set -eu; \\
    if [ ! -e /usr/local/bin/helm ]; then echo 'pinwheel: ERROR: run step helm: verify: missing' /usr/local/bin/helm >&2; exit 1; fi; \\
    rc=0; bash -euo pipefail -c 'helm version --short' || rc=$?; \\
    if [ "$rc" != 0 ]; then echo 'pinwheel: ERROR: run step helm: verify: its command failed with exit' "$rc" >&2; exit 1; fi; \\
    true
"""


def render(tmp_path, text=RUN) -> str:
    m = load_text(text, tmp_path)
    return render_dockerfile([plan_variant(m, v) for v in m.variants])


def test_a_builder_step_renders_its_stage_its_copy_and_its_verify(tmp_path):
    text = render(tmp_path)
    assert STAGE in text
    assert INSTALL in text
    assert INVARIANT in text
    assert text.index(STAGE) < text.index("FROM scratch AS lock") < text.index(INSTALL) < text.index(INVARIANT)


def test_a_step_without_builder_runs_in_the_image_behind_its_gate(tmp_path):
    text = render(tmp_path)
    part = text[text.index("# ---- run step 2/2: links."):]
    part = part[:part.index("\n\n", 1)]
    assert "# Gated by ENABLE_CUDA_13." in part
    assert "if [ \"${ENABLE_CUDA_13}\" != \"1\" ]; then echo 'pinwheel: ENABLE_CUDA_13=0: skipping run step links'; exit 0; fi" in part
    assert "      'ln -sf /usr/bin/python3 /usr/local/bin/python-train' \\" in part
    assert "AS run-links" not in text


def test_shellcheck_every_run_script(tmp_path):
    if not shutil.which("shellcheck"):
        pytest.fail("shellcheck is not installed: `make tools` (Debian package shellcheck)")
    scripts = [s for s in run_scripts(render(tmp_path)) if "pinwheel-run" in s or "run step" in s]
    assert len(scripts) == 4
    for script in scripts:
        proc = subprocess.run(["shellcheck", "-s", "sh", "-e", "SC2016", "-"], input=f"#!/bin/sh\n{script}\n",
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}\n{proc.stdout}"


def test_the_script_is_written_out_exactly_as_the_manifest_holds_it(tmp_path):
    """The printf of the rendered RUN, run by a real shell, writes the script byte for byte."""
    script = 'echo "a  b" \'c\' $HOME \\\\n `x`\n\tif true; then :; fi'
    text = HEAD + "  - name: odd\n    kind: run\n    why: \"quoting\"\n    script: |\n" + \
        "".join(f"      {line}\n" for line in script.split("\n"))
    rendered = render(tmp_path, text)
    run = next(s for s in run_scripts(rendered) if "pinwheel-run-odd.sh" in s)
    printf = run[run.index("printf"):run.index("> /tmp/pinwheel-run-odd.sh")]
    out = subprocess.run(["sh", "-c", printf], capture_output=True, text=True, check=True).stdout
    assert out == script + "\n"


def test_identity_and_the_opaque_effect(tmp_path):
    m = load_text(RUN, tmp_path)
    plan = plan_variant(m, "cu130")
    [entry, links] = dict(step_sections(plan, tmp_path))["runs"]
    script = "tar -xzf /tmp/helm.tgz\ninstall -m 0755 linux-amd64/helm /usr/local/bin/helm"
    assert entry == {"step": "helm", "script_sha256": hashlib.sha256(script.encode()).hexdigest(), "builder": "base",
                     "outputs": ["/usr/local/bin/helm"], "downloads": [
                         {"url": "https://downloads.example.org/helm-v3.16.1-linux-amd64.tar.gz", "sha256": SHA,
                          "dest": "/tmp/helm.tgz"}]}
    assert links["step"] == "links"
    step = plan.steps[0]
    effect = kind_of(step).effect(step)
    assert effect.empty
    assert effect.outside == ("not judged by the resolver (a script in builder base, copying "
                              "/usr/local/bin/helm, 1 checked download(s)): the deploy tool, a static binary",)


def entry(body: str) -> str:
    return HEAD + "  - name: x\n    kind: run\n    why: \"y\"\n" + body


@pytest.mark.parametrize("body,line,key,fragment", [
    ("    script: \"\"\n", 11, "steps[0].script", "non-empty string"),
    ("    script: \"a\\u0007b\"\n", 11, "steps[0].script", "control character U+0007"),
    ("    script: ls\n    builder: base\n", 12, "steps[0].outputs", "needs `outputs`"),
    ("    script: ls\n    outputs: [/opt/x]\n", 12, "steps[0].outputs", "set `builder`"),
    ("    script: ls\n    builder: \"Bad Ref\"\n    outputs: [/x]\n", 12, "steps[0].builder", "not a valid builder"),
    ("    script: ls\n    workdir: tmp/x\n", 12, "steps[0].workdir", "is not an absolute path"),
    ("    script: ls\n    cache: [/a/../b]\n", 12, "steps[0].cache[0]", "no '.' or '..' parts"),
    ("    script: ls\n    downloads: [{url: \"ftp://x/y\", sha256: \"" + SHA + "\", dest: /y}]\n", 12,
     "steps[0].downloads[0].url", "is not a URL"),
    ("    script: ls\n    downloads: [{url: \"https://x.example/y\", sha256: \"abc\", dest: /y}]\n", 12,
     "steps[0].downloads[0].sha256", "is not a sha256"),
    ("    script: ls\n    downloads: [{url: \"https://x.example/y\", sha256: \"" + SHA + "\", dest: \"/a b\"}]\n", 12,
     "steps[0].downloads[0].dest", "is not an absolute path"),
    ("    script: ls\n    env: {\"1X\": a}\n", 12, "steps[0].env.1X", "not an environment variable name"),
    ("    script: ls\n    verify: {}\n", 12, "steps[0].verify", "needs `paths`, `command` or both"),
])
def test_bad_entries_are_refused_at_their_line(tmp_path, body, line, key, fragment):
    assert_refused_at(entry(body), tmp_path, line, key, fragment)
