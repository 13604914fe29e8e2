"""The apt kind: Debian packages pinned with a why. Exact rendered text, shellcheck, located errors,
its (empty) effect on the Python environment and its (absent) lock part."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pinwheel.lock.inputs import lock_inputs
from pinwheel.lock.slicing import units
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfile
from pinwheel.steps import kind_of
from pinwheel.steps.apt import AptStep, DebianPackage, debian_version_problem

from tests.support.manifests import assert_refused_at, load_text

from tests.support.render import run_scripts

APT = """\
manifest_version: 1
image: {name: demo, repository: pinwheel/demo}
gates:
  ENABLE_CUDA_13: {when: "cuda >= 13", why: "CUDA 13 only"}
variants:
  cu130: {cuda: "13.0", torch: "2.13.0", python: "3.11", platform: manylinux_2_36_x86_64, base: "pinwheel/base:bookworm-py311", tag: "cu130-{date}"}
  cu129: {cuda: "12.9", torch: "2.13.0", python: "3.11", platform: manylinux_2_36_x86_64, base: "pinwheel/base:bookworm-py311", tag: "cu129-{date}"}
steps:
  - name: system
    kind: apt
    why: "RDMA userspace for NCCL's InfiniBand transport"
    packages:
      - {name: libibverbs1, version: "44.0-2", why: "NCCL's IB transport loads it"}
      - {name: libstdc++6, version: "1:12.2.0~rc1-14+b1", why: "epoch, tilde and plus, quoted"}
  - name: core
    kind: wheels
    why: "pure-python base"
    packages:
      - {requirement: "six==1.16.0", why: "tiny and stable"}
  - name: cuda-tools
    kind: apt
    why: "CUDA 13 only"
    gate: ENABLE_CUDA_13
    packages:
      - {name: hello, version: "2.10-3", why: "a greeting"}
"""

SYSTEM = """\

# ---- apt step 1/3: system. RDMA userspace for NCCL's InfiniBand transport
#   libibverbs1=44.0-2: NCCL's IB transport loads it
#   libstdc++6=1:12.2.0~rc1-14+b1: epoch, tilde and plus, quoted
RUN set -eu; \\
    apt-get update && \\
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
      libibverbs1=44.0-2 \\
      'libstdc++6=1:12.2.0~rc1-14+b1' && \\
    apt-get clean && \\
    rm -rf /var/lib/apt/lists/*

# ---- wheel set 2/3: core. pure-python base
"""

CUDA_TOOLS = """\

# ---- apt step 3/3: cuda-tools. CUDA 13 only
# Gated by ENABLE_CUDA_13.
#   hello=2.10-3: a greeting
RUN set -eu; \\
    if [ "${ENABLE_CUDA_13}" != "1" ]; then echo 'pinwheel: ENABLE_CUDA_13=0: skipping apt step cuda-tools'; exit 0; fi; \\
    apt-get update && \\
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
      hello=2.10-3 && \\
    apt-get clean && \\
    rm -rf /var/lib/apt/lists/*

# Invariant of apt step system: every package it pinned is installed at its
# pin after the last step (the build fails naming the package, the expected and
# the found version).
RUN set -eu; \\
    bad=0; \\
    check() { \\
      found=$(dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true); \\
      if [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" != installed ]; then found=''; fi; \\
      if [ "$found" != "$2" ]; then \\
        echo 'pinwheel: ERROR: apt step system:' "$1: expected $2, found ${found:-nothing installed}" >&2; bad=1; \\
      fi; \\
    }; \\
    check libibverbs1 44.0-2; \\
    check libstdc++6 '1:12.2.0~rc1-14+b1'; \\
    exit "$bad"

# Invariant of apt step cuda-tools: every package it pinned is installed at its
# pin after the last step (the build fails naming the package, the expected and
# the found version).
RUN set -eu; \\
    if [ "${ENABLE_CUDA_13}" != "1" ]; then exit 0; fi; \\
    bad=0; \\
    check() { \\
      found=$(dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true); \\
      if [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" != installed ]; then found=''; fi; \\
      if [ "$found" != "$2" ]; then \\
        echo 'pinwheel: ERROR: apt step cuda-tools:' "$1: expected $2, found ${found:-nothing installed}" >&2; bad=1; \\
      fi; \\
    }; \\
    check hello 2.10-3; \\
    exit "$bad"

# Invariants: every pin is still what the lock says after all steps (the build
"""


def render(text: str, tmp_path: Path) -> str:
    m = load_text(text, tmp_path)
    return render_dockerfile([plan_variant(m, v) for v in m.variants])


def between(text: str, start: str, end: str) -> str:
    a = text.index(start)
    return text[a:text.index(end, a + len(start)) + len(end)]


def test_apt_steps_render_exactly(tmp_path):
    text = render(APT, tmp_path)
    assert between(text, "\n# ---- apt step 1/3", "# ---- wheel set 2/3: core. pure-python base\n") == SYSTEM
    assert between(text, "\n# ---- apt step 3/3", "# Invariants: every pin is still what the lock says after all steps "
                                                 "(the build\n") == CUDA_TOOLS


def test_shellcheck_every_run_script_with_apt_steps(tmp_path):
    if not shutil.which("shellcheck"):
        pytest.fail("shellcheck is not installed: `make tools` (Debian package shellcheck)")
    scripts = [s for s in run_scripts(render(APT, tmp_path)) if "apt-get" in s or "dpkg-query" in s]
    assert len(scripts) == 4
    for script in scripts:
        proc = subprocess.run(["shellcheck", "-s", "sh", "-e", "SC2016", "-"], input=f"#!/bin/sh\n{script}\n",
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}\n{proc.stdout}"


def test_an_apt_step_is_a_plan_step_with_no_python_effect_and_no_lock_part(tmp_path):
    m = load_text(APT, tmp_path)
    assert [s.kind for s in m.steps] == ["apt", "wheels", "apt"]
    assert [s.name for s in m.wheel_sets] == ["core"]
    assert [ws.name for ws, _ in m.packages()] == ["core"]
    system = m.steps[0]
    assert system == AptStep("system", "RDMA userspace for NCCL's InfiniBand transport", None, (
        DebianPackage("libibverbs1", "44.0-2", "NCCL's IB transport loads it", 13),
        DebianPackage("libstdc++6", "1:12.2.0~rc1-14+b1", "epoch, tilde and plus, quoted", 14)), 9)
    for variant, tools_on in (("cu130", True), ("cu129", False)):
        plan = plan_variant(m, variant)
        apt_steps = [plan.steps[0], plan.steps[2]]
        assert [s.packages for s in apt_steps] == [(), ()]
        assert apt_steps[1].active is tools_on
        for step in apt_steps:
            effect = kind_of(step).effect(step)
            assert effect.empty and not effect.installs and not effect.removes
            assert kind_of(step).slice_packages(step) == ()
        assert kind_of(apt_steps[0]).effect(apt_steps[0]).outside == ("apt libibverbs1=44.0-2",
                                                                      "apt libstdc++6=1:12.2.0~rc1-14+b1")
        assert kind_of(apt_steps[1]).effect(apt_steps[1]).outside == (("apt hello=2.10-3",) if tools_on else ())
        # the lock: the wheel set's slice keeps its step number; apt steps add no file and no requirement
        step_units, fallbacks = units(plan)
        assert [u.file for u in step_units] == ["02-core.txt"] and not fallbacks
        inputs = lock_inputs(plan)
        assert inputs.requirements == ("six==1.16.0",)
        assert [s["packages"] for s in inputs.layout] == [[], [inputs.layout[1]["packages"][0]], []]


@pytest.mark.parametrize("version", ["44.0-2", "1:2.0", "2.10", "0.9~rc1", "1.0+dfsg-3+b1", "7.2-1+deb12u1",
                                     "1.2-3-4", "2.2.5-3+B1", "590-2.1~deb12u2", "1:1.99.1-7.3"])
def test_debian_versions_policy_allows(version):
    assert debian_version_problem(version) is None


@pytest.mark.parametrize("version,problem", [
    ("v1.0", "must start with a digit"),
    ("a:1.0", "epoch 'a'"),
    ("1.0-", "revision ''"),
    ("1.0-rc_1", "revision 'rc_1'"),
    ("1.0_1", "upstream version '1.0_1'"),
    ("1:2:3", "upstream version '2:3'"),
    ("1.0 beta", "upstream version '1.0 beta'"),
    ("1.0*", "upstream version '1.0*'"),
    ("-1", "upstream version ''"),
])
def test_debian_versions_policy_refuses(version, problem):
    assert problem in (debian_version_problem(version) or "")


def sub(old: str, new: str) -> str:
    assert APT.count(old) == 1, old
    return APT.replace(old, new)


# (id, manifest text, expected line, expected key, expected message fragment)
CASES = [
    ("name-upper", sub("name: libibverbs1,", "name: LibIBVerbs1,"), 13, "steps[0].packages[0].name",
     "'LibIBVerbs1' is not a Debian package name"),
    ("name-one-char", sub("name: hello,", "name: h,"), 25, "steps[2].packages[0].name", "not a Debian package name"),
    ("name-shell", sub("name: hello,", 'name: "hello;id",'), 25, "steps[2].packages[0].name",
     "not a Debian package name"),
    ("name-arch-qualified", sub("name: hello,", 'name: "hello:amd64",'), 25, "steps[2].packages[0].name",
     "not a Debian package name"),
    ("version-unquoted-number", sub('version: "2.10-3"', "version: 2.10"), 25, "steps[2].packages[0].version",
     "must be a string, got float (quote it)"),
    ("version-not-debian", sub('version: "2.10-3"', 'version: "latest"'), 25, "steps[2].packages[0].version",
     "'latest' is not a Debian version ([epoch:]upstream[-revision]): its upstream version 'latest' must start"),
    ("version-bad-epoch", sub('version: "2.10-3"', 'version: "x:2.10-3"'), 25, "steps[2].packages[0].version",
     "its epoch 'x' is not an unsigned integer"),
    ("version-shell", sub('version: "2.10-3"', 'version: "2.10-3$(id)"'), 25, "steps[2].packages[0].version",
     "is not a Debian version"),
    ("version-wildcard", sub('version: "2.10-3"', 'version: "2.10-*"'), 25, "steps[2].packages[0].version",
     "revision '*'"),
    ("package-missing-why", sub(', why: "a greeting"', ""), 25, "steps[2].packages[0].why", "required key is missing"),
    ("package-empty-why", sub('why: "a greeting"', 'why: " "'), 25, "steps[2].packages[0].why", "must not be empty"),
    ("package-unknown-key", sub('why: "a greeting"', 'why: "a greeting", arch: amd64'), 25,
     "steps[2].packages[0].arch", "unknown key"),
    ("package-not-mapping", sub('- {name: hello, version: "2.10-3", why: "a greeting"}', '- "hello=2.10-3"'), 25,
     "steps[2].packages[0]", "must be a mapping"),
    ("duplicate-in-step", sub('      - {name: libstdc++6,', '      - {name: libibverbs1,'), 14,
     "steps[0].packages[1].name", "libibverbs1 is listed twice (first on line 13)"),
    ("duplicate-across-steps", sub("name: hello,", "name: libibverbs1,"), 25, "steps[2].packages[0].name",
     "libibverbs1 is listed twice (first on line 13)"),
    ("packages-empty", sub('    packages:\n      - {name: hello, version: "2.10-3", why: "a greeting"}\n',
                           "    packages: []\n"), 24, "steps[2].packages", "needs at least 1 item"),
    ("step-missing-why", sub('    why: "CUDA 13 only"\n', ""), 20, "steps[2].why", "required key is missing"),
    ("step-unknown-gate", sub("gate: ENABLE_CUDA_13", "gate: ENABLE_CUDA_14"), 23, "steps[2].gate",
     "unknown gate 'ENABLE_CUDA_14'"),
    ("step-unknown-key", sub("    gate: ENABLE_CUDA_13\n", "    gate: ENABLE_CUDA_13\n    update: false\n"), 24,
     "steps[2].update", "unknown key"),
    ("step-duplicate-name", sub("  - name: cuda-tools\n", "  - name: system\n"), 20, "steps[2].name",
     "duplicate step name (first on line 9)"),
    ("apt-in-wheel-sets", APT.replace("steps:\n", "wheel_sets:\n"), 10, "wheel_sets[0].kind", "unknown key"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_apt_steps_are_refused_with_file_line_and_key(case, tmp_path):
    _, text, line, key, fragment = case
    assert_refused_at(text, tmp_path, line, key, fragment)


def test_manifest_strings_cannot_inject_shell_through_an_apt_step(tmp_path):
    evil = sub('why: "a greeting"', "why: \"it's $(touch /tmp/pwned) `id`\"")
    text = render(evil, tmp_path)
    line = next(l for l in text.splitlines() if "touch /tmp/pwned" in l)
    assert line.startswith("#   hello=2.10-3: ")  # a comment, and only there
