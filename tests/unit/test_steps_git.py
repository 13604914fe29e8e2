"""The git kind: one distribution built from a git repository at a full commit id. Exact rendered text,
shellcheck, located errors, its effect (installed --no-deps, requirements unchecked) and its (absent) lock part."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from pinwheel import manifest
from pinwheel.lock.inputs import lock_inputs
from pinwheel.lock.slicing import units
from pinwheel.manifest import ManifestError
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfile
from pinwheel.resolve import resolve
from pinwheel.steps import kind_of
from pinwheel.steps.base import DirectInstall
from pinwheel.steps.git import GitStep, rev_problem

from tests.support.manifests import CUDA_13_GATE, manifest_yaml
from tests.support.render import run_scripts

REV = "0123456789abcdef0123456789abcdef01234567"
REV_LM = "89abcdef0123456789abcdef0123456789abcdef"

STEPS = f"""\
  - name: core
    kind: wheels
    why: "pure-python base"
    packages:
      - {{requirement: "six==1.16.0", why: "tiny and stable"}}
  - name: bridge
    kind: git
    why: "its fix is on no release yet"
    package: "pw-bridge[fast]==0.3.0"
    url: "https://git.example.org/team/pw-bridge.git"
    rev: "{REV}"
    subdirectory: "python/pkg"
    isolation: false
    env: {{MAX_JOBS: "4", TORCH_CUDA_ARCH_LIST: "9.0;10.0"}}
  - name: lm
    kind: git
    why: "the trainer edits it in place"
    gate: ENABLE_CUDA_13
    package: "pw-lm==1.2.0"
    url: "git://git.example.org/pw-lm"
    rev: "{REV_LM}"
    builder: "pinwheel/builder:git"
    editable: true
    checkout: /opt/src/pw-lm
"""

BRIDGE_STAGE = f"""\
ARG BASE=pinwheel/base:bookworm-py311

# ---- git step 2/3, builder: pw-bridge==0.3.0 from commit {REV}
# of https://git.example.org/team/pw-bridge.git (in python/pkg). Exactly that commit is fetched and checked;
# the wheel built from it is all the image takes from this stage.
FROM ${{BASE}} AS git-bridge
RUN --mount=type=secret,id=ca,target=/run/secrets/ca \\
    --mount=type=secret,id=pipconf,target=/run/secrets/pipconf \\
    set -eu; \\
    mkdir -p /tmp/pinwheel-git/src /tmp/pinwheel-git/wheel; \\
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca GIT_SSL_CAINFO=/run/secrets/ca; fi; \\
    if [ -s /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi; \\
    git init -q /tmp/pinwheel-git/src; \\
    if ! git -C /tmp/pinwheel-git/src fetch -q --depth 1 https://git.example.org/team/pw-bridge.git {REV}; then \\
      echo 'pinwheel: ERROR: git step bridge: cannot fetch commit {REV} from https://git.example.org/team/pw-bridge.git' >&2; exit 1; \\
    fi; \\
    git -C /tmp/pinwheel-git/src checkout -q FETCH_HEAD; \\
    found=$(git -C /tmp/pinwheel-git/src rev-parse HEAD); \\
    if [ "$found" != {REV} ]; then echo 'pinwheel: ERROR: git step bridge: https://git.example.org/team/pw-bridge.git: expected commit {REV}, found' "$found" >&2; exit 1; fi; \\
    export MAX_JOBS=4; \\
    export TORCH_CUDA_ARCH_LIST='9.0;10.0'; \\
    /usr/bin/python3 -m pip wheel --no-deps --no-build-isolation --wheel-dir /tmp/pinwheel-git/wheel /tmp/pinwheel-git/src/python/pkg

# ---- git step 3/3, builder: pw-lm==1.2.0 from commit {REV_LM}
"""

BRIDGE_INSTALL = f"""\

# ---- git step 2/3: bridge. its fix is on no release yet
#   pw-bridge==0.3.0 --no-deps: commit {REV}
RUN --mount=type=bind,from=git-bridge,source=/tmp/pinwheel-git/wheel,target=/tmp/pinwheel-git/wheel \\
    set -eu; \\
    set -- /tmp/pinwheel-git/wheel/*.whl; \\
    if [ ! -e "$1" ] || [ "$#" -gt 1 ]; then echo 'pinwheel: ERROR: git step bridge: the build of commit {REV} made not one wheel:' "$@" >&2; exit 1; fi; \\
    pip install --no-deps "$1"

# Gate ENABLE_CUDA_13: on when cuda >= 13. CUDA 13 only
ARG ENABLE_CUDA_13=1

# ---- git step 3/3: lm. the trainer edits it in place
# Gated by ENABLE_CUDA_13.
#   pw-lm==1.2.0 --no-deps, editable in /opt/src/pw-lm: commit {REV_LM}
COPY --from=git-lm /tmp/pinwheel-git/src /opt/src/pw-lm
"""

LM_INVARIANT = f"""\

# Invariant of git step lm: pw-lm is installed at 1.2.0 after
# the last step (the build fails naming the commit, the expected and the found version).
RUN set -eu; \\
    if [ "${{ENABLE_CUDA_13}}" != "1" ]; then exit 0; fi; \\
    found=$(python -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' pw-lm 2>/dev/null || true); \\
    if [ "$found" != 1.2.0 ]; then echo 'pinwheel: ERROR: git step lm: pw-lm from commit {REV_LM}: expected 1.2.0, found' "${{found:-nothing installed}}" >&2; exit 1; fi
"""


def load(tmp_path, steps: str = STEPS):
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(manifest_yaml(steps=steps, gates=CUDA_13_GATE, key="steps"))
    return manifest.load(path)


def rendered(tmp_path, steps: str = STEPS) -> str:
    return render_dockerfile([plan_variant(load(tmp_path, steps), "cu130")])


def test_git_steps_render_exactly(tmp_path):
    text = rendered(tmp_path)
    assert BRIDGE_STAGE in text
    assert BRIDGE_INSTALL in text
    assert LM_INVARIANT in text
    assert "FROM pinwheel/builder:git AS git-lm\nARG ENABLE_CUDA_13=1\n" in text
    assert "    pip install --no-deps -e /opt/src/pw-lm\n" in text
    # every builder stage comes before the image stage
    assert text.index("AS git-lm") < text.index("FROM ${BASE} AS image")


def test_shellcheck_every_run_script_with_git_steps(tmp_path):
    if not shutil.which("shellcheck"):
        pytest.fail("shellcheck is not installed: `make tools` (Debian package shellcheck)")
    tricky = STEPS.replace('why: "its fix is on no release yet"', "why: \"it's $HOME; `quoted`\"")
    scripts = run_scripts(rendered(tmp_path, tricky))
    assert sum("git -C" in s for s in scripts) == 2
    for script in scripts:
        proc = subprocess.run(["shellcheck", "-s", "sh", "-e", "SC2016", "-"], input=f"#!/bin/sh\n{script}\n",
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}\n{proc.stdout}"


def test_a_git_step_installs_its_package_unchecked_when_the_commit_cannot_be_read_and_has_no_lock_part(tmp_path):
    m = load(tmp_path)
    plan = plan_variant(m, "cu130")
    bridge = plan.steps[1]
    assert (bridge.kind, bridge.packages) == ("git", ())
    assert isinstance(bridge.spec, GitStep) and bridge.spec.extras == ("fast",)
    effect = kind_of(bridge).effect(bridge)
    assert effect.direct == (DirectInstall("pw-bridge", "0.3.0", "git", ("fast",), "its fix is on no release yet"),)
    # the host reads the commit's requirements when the resolver asks; this URL answers nothing, so they stay
    # unchecked, with why
    meta, unread = effect.direct[0].read(None)
    assert meta is None and f"built from commit {REV}" in unread and "cannot fetch" in unread, unread
    step_units, fallbacks = units(plan)
    assert [u.step.name for u in step_units] == ["core"] and not fallbacks
    inputs = lock_inputs(plan)
    assert not any("pw-" in r for r in inputs.requirements + inputs.constraints)


class NoIndex:
    """A metadata source that knows nothing: a git step must not ask it about its package."""

    def _none(self, *args, **kwargs):
        raise LookupError("no index here")

    versions = best_wheel = metadata = local_metadata = _none


def test_the_resolver_installs_a_git_package_with_its_requirements_unchecked(tmp_path):
    only_git = STEPS.split("  - name: bridge\n")[1].split("  - name: lm\n")[0]
    plan = resolve(plan_variant(load(tmp_path, "  - name: bridge\n" + only_git), "cu130"), NoIndex())
    [inst] = plan.resolution.installed
    assert (inst.name, inst.version, inst.source, inst.no_deps, inst.step) == ("pw-bridge", "0.3.0", "git", True,
                                                                               "bridge")
    [edge] = plan.resolution.edges
    assert (edge.parent, edge.verdict) == ("pw-bridge", "unchecked")
    assert f"built from commit {REV}" in edge.detail


def located(tmp_path, steps: str) -> str:
    with pytest.raises(ManifestError) as err:
        load(tmp_path, steps)
    return str(err.value)


def bridge_with(old: str, new: str) -> str:
    assert old in STEPS
    return STEPS.replace(old, new, 1)


@pytest.mark.parametrize("rev, problem", [
    ("main", "it names a branch or tag, which moves"),
    ("v1.2.0", "Pin the commit it points to now (`git ls-remote <url> <rev>` prints it)"),
    ("0123456", "an abbreviated commit id can become ambiguous"),
    (REV.upper(), "a commit id is written in lowercase hex"),
])
def test_a_rev_that_is_not_a_full_commit_is_refused_at_its_line(tmp_path, rev, problem):
    message = located(tmp_path, bridge_with(f'rev: "{REV}"', f'rev: "{rev}"'))
    assert "wheels_manifest.yaml:18: steps[1].rev: " in message
    assert f"is not a full commit id (40 hex digits): " in message and problem in message
    assert rev_problem(REV) is None


@pytest.mark.parametrize("old, new, where, words", [
    ('url: "https://git.example.org/team/pw-bridge.git"', 'url: "file:///srv/pw-bridge"', "17: steps[1].url",
     "is not a git URL this kind fetches"),
    ('url: "https://git.example.org/team/pw-bridge.git"', "url: \"https://x.org/a b'c\"", "17: steps[1].url",
     "no spaces or quotes"),
    ('subdirectory: "python/pkg"', 'subdirectory: "../up"', "19: steps[1].subdirectory",
     "is not a relative path inside the checkout"),
    ('package: "pw-bridge[fast]==0.3.0"', 'package: "pw-bridge>=0.3"', "16: steps[1].package", "must be an exact pin"),
    ("    isolation: false\n", "    isolation: false\n    checkout: /opt/x\n", "21: steps[1].checkout",
     "only with editable: true"),
    ("    checkout: /opt/src/pw-lm\n", "", "22: steps[2].checkout", "needs the path its checkout lives at"),
    ('package: "pw-lm==1.2.0"', 'package: "pw-bridge==0.3.0"', "26: steps[2].package",
     "pw-bridge is built by another git step (line 13)"),
    ('MAX_JOBS: "4"', 'max_jobs: "4"', "21: steps[1].env.max_jobs", "UPPER_CASE letters"),
    ('MAX_JOBS: "4"', "MAX_JOBS: 4", "21: steps[1].env.MAX_JOBS", "must be a string"),
    ('requirement: "six==1.16.0"', 'requirement: "pw-bridge==0.3.0"', "13: steps[1].package",
     "pw-bridge is in a wheel set (line 12) and built from git here"),
])
def test_a_bad_git_step_is_refused_at_its_line(tmp_path, old, new, where, words):
    message = located(tmp_path, bridge_with(old, new))
    assert f"wheels_manifest.yaml:{where}: " in message and words in message, message
