"""The apt kind beyond the base's sources: a .deb from a URL pinned by sha256, `hold` and `remove`. Exact
rendered text, shellcheck, identity and located errors (the plain pins' tests are test_steps_apt.py)."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from pinwheel.image.identity import step_sections
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfile
from pinwheel.steps import kind_of

from manifests import assert_refused_at, load_text

from test_render import run_scripts

SHA = "b" * 64
HEAD = """\
manifest_version: 1
image: {name: demo, repository: pinwheel/demo}
variants:
  cu130: {cuda: "13.0", torch: "2.13.0", python: "3.11", platform: manylinux_2_36_x86_64, base: "pinwheel/base:bookworm-py311", tag: "cu130-{date}"}
steps:
"""
DEBS = HEAD + f"""\
  - name: profiler
    kind: apt
    why: "the profiler, and no base cuDNN under the wheel's"
    remove:
      - {{name: libcudnn9-cuda-13, why: "the base's held cuDNN; the wheel brings its own"}}
    packages:
      - {{name: libibverbs1, version: "44.0-2", why: "NCCL's IB transport"}}
    debs:
      - {{name: nsight-systems, version: "2025.3.1-1", url: "https://downloads.example.org/nsight-systems_2025.3.1-1_amd64.deb",
         sha256: "{SHA}", why: "on no apt source"}}
    hold: [nsight-systems]
"""

RENDERED = """\

# ---- apt step 1/1: profiler. the profiler, and no base cuDNN under the wheel's
#   libibverbs1=44.0-2: NCCL's IB transport
#   nsight-systems=2025.3.1-1 from https://downloads.example.org/nsight-systems_2025.3.1-1_amd64.deb: on no apt source
#     sha256 bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
#   remove libcudnn9-cuda-13: the base's held cuDNN; the wheel brings its own
#   hold nsight-systems
RUN --mount=type=bind,source=debs/profiler,target=/tmp/pinwheel-debs/profiler \\
    set -eu; \\
    found=$(sha256sum /tmp/pinwheel-debs/profiler/00-nsight-systems_2025.3.1-1_amd64.deb | cut -d ' ' -f 1); \\
    if [ "$found" != bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb ]; then echo 'pinwheel: ERROR: apt step profiler: https://downloads.example.org/nsight-systems_2025.3.1-1_amd64.deb: sha256 mismatch: expected bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, found' "$found" >&2; exit 1; fi; \\
    DEBIAN_FRONTEND=noninteractive apt-get purge -y --allow-change-held-packages \\
      libcudnn9-cuda-13; \\
    apt-get update && \\
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
      libibverbs1=44.0-2 \\
      /tmp/pinwheel-debs/profiler/00-nsight-systems_2025.3.1-1_amd64.deb && \\
    apt-mark hold nsight-systems && \\
    apt-get clean && \\
    rm -rf /var/lib/apt/lists/*
"""


def render(tmp_path, text=DEBS) -> str:
    m = load_text(text, tmp_path)
    return render_dockerfile([plan_variant(m, v) for v in m.variants])


def test_a_deb_a_removal_and_a_hold_render_in_one_run(tmp_path):
    text = render(tmp_path)
    assert RENDERED in text
    invariant = text[text.index("# Invariant of apt step profiler"):]
    assert "    check libibverbs1 44.0-2; \\\n    check nsight-systems 2025.3.1-1; \\\n" in invariant
    assert "libcudnn9-cuda-13': removed by the manifest, still installed'" in invariant
    assert "if ! apt-mark showhold | grep -qx nsight-systems; then" in invariant


def test_shellcheck_every_apt_script(tmp_path):
    if not shutil.which("shellcheck"):
        pytest.fail("shellcheck is not installed: `make tools` (Debian package shellcheck)")
    scripts = [s for s in run_scripts(render(tmp_path)) if "apt-get" in s or "dpkg-query" in s]
    assert len(scripts) == 2
    for script in scripts:
        proc = subprocess.run(["shellcheck", "-s", "sh", "-e", "SC2016", "-"], input=f"#!/bin/sh\n{script}\n",
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}\n{proc.stdout}"


def test_the_deb_joins_the_identity_and_the_report(tmp_path):
    plan = plan_variant(load_text(DEBS, tmp_path), "cu130")
    assert dict(step_sections(plan, tmp_path))["debs"] == ({
        "step": "profiler", "name": "nsight-systems", "version": "2025.3.1-1",
        "url": "https://downloads.example.org/nsight-systems_2025.3.1-1_amd64.deb", "sha256": SHA},)
    step = plan.steps[0]
    assert kind_of(step).effect(step).outside == (
        "apt libibverbs1=44.0-2",
        "apt nsight-systems=2025.3.1-1 from https://downloads.example.org/nsight-systems_2025.3.1-1_amd64.deb "
        "(sha256 bbbbbbbbbbbb)",
        "apt hold nsight-systems",
        "apt remove libcudnn9-cuda-13: the base's held cuDNN; the wheel brings its own")


def test_a_removal_alone_needs_no_package_lists(tmp_path):
    text = HEAD + "  - name: gone\n    kind: apt\n    why: \"w\"\n    remove: [{name: libcudnn9-cuda-13, why: \"x\"}]\n"
    rendered = render(tmp_path, text)
    part = rendered[rendered.index("# ---- apt step 1/1"):rendered.index("# Invariant")]
    assert "apt-get update" not in part and "apt-get purge -y --allow-change-held-packages" in part


def step(body: str) -> str:
    return HEAD + "  - name: x\n    kind: apt\n    why: \"y\"\n" + body


DEB = '{name: pw-deb, version: "1.0-1", url: "https://d.example/pw-deb_1.0-1_all.deb", sha256: "' + SHA + '", why: "w"}'


@pytest.mark.parametrize("body,line,key,fragment", [
    ("    hold: [a1]\n", 6, "steps[0].packages", "needs `packages`, `debs` or `remove`"),
    ("    debs: [" + DEB.replace(".deb", ".tar") + "]\n", 9, "steps[0].debs[0].url", "is not a URL of a .deb file"),
    ("    debs: [" + DEB.replace(SHA, "abc") + "]\n", 9, "steps[0].debs[0].sha256", "is not a sha256"),
    ("    debs: [" + DEB.replace('"1.0-1"', '"x1"') + "]\n", 9, "steps[0].debs[0].version", "is not a Debian version"),
    ("    debs: [" + DEB + ", " + DEB + "]\n", 9, "steps[0].debs[1].name", "pw-deb is listed twice"),
    ("    debs: [" + DEB + "]\n    hold: [other]\n", 10, "steps[0].hold[0]", "other is not installed by this step"),
    ("    debs: [" + DEB + "]\n    remove: [{name: pw-deb, why: z}]\n", 10, "steps[0].remove[0].name",
     "pw-deb is installed by the manifest"),
])
def test_bad_entries_are_refused_at_their_line(tmp_path, body, line, key, fragment):
    assert_refused_at(step(body), tmp_path, line, key, fragment)
