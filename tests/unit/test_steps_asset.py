"""The asset kind: one release wheel pinned by sha256, per architecture if need be. Exact rendered text,
shellcheck, located errors, its effect, and the host side: the content-addressed cache, verification and labels."""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import pytest

from pinwheel import manifest
from pinwheel.image.build import stage_steps, step_labels
from pinwheel.steps.asset import AssetError, add
from pinwheel.steps.downloads import fetch
from pinwheel.lock.slicing import units
from pinwheel.manifest import ManifestError
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfile
from pinwheel.steps import kind_of
from pinwheel.steps.asset import wheel_problem

from tests.support.file_server import serve_files
from tests.support.local_index import build_wheel
from tests.support.manifests import CUDA_13_GATE, manifest_yaml, variant
from tests.support.render import run_scripts

A, B, C = "1" * 64, "2" * 64, "3" * 64
URL = "https://downloads.example.org/v2.8.3/flash_attn-2.8.3-cp311-cp311-linux_x86_64.whl"
STEPS = f"""\
  - name: flash-attn
    kind: asset
    why: "prebuilt against torch 2.13"
    package: "flash-attn==2.8.3"
    url: {{url: "{URL}", sha256: "{A}"}}
  - name: apex
    kind: asset
    why: "one build per architecture"
    gate: ENABLE_CUDA_13
    package: "apex==0.1"
    url:
      amd64: {{url: "https://downloads.example.org/apex-0.1-cp311-cp311-linux_x86_64.whl", sha256: "{B}"}}
      arm64: {{url: "https://downloads.example.org/apex-0.1-cp311-cp311-linux_aarch64.whl", sha256: "{C}"}}
"""

FLASH = f"""\

# ---- asset step 1/2: flash-attn. prebuilt against torch 2.13
#   flash-attn==2.8.3 --no-deps: {URL}
#     sha256 {A}
RUN --mount=type=bind,source=assets/flash-attn,target=/tmp/pinwheel-assets/flash-attn \\
    set -eu; \\
    want={A}; \\
    set -- /tmp/pinwheel-assets/flash-attn/*.whl; \\
    if [ ! -e "$1" ] || [ "$#" -gt 1 ]; then echo 'pinwheel: ERROR: asset step flash-attn: not one wheel in assets/flash-attn of the build context:' "$@" >&2; exit 1; fi; \\
    found=$(sha256sum "$1" | cut -d ' ' -f 1); \\
    if [ "$found" != "$want" ]; then echo 'pinwheel: ERROR: asset step flash-attn: sha256 mismatch: expected' "$want, found $found" >&2; exit 1; fi; \\
    pip install --no-deps "$1"
"""

APEX_ARCH = f"""\
ARG TARGETARCH
RUN --mount=type=bind,source=assets/apex,target=/tmp/pinwheel-assets/apex \\
    set -eu; \\
    if [ "${{ENABLE_CUDA_13}}" != "1" ]; then echo 'pinwheel: ENABLE_CUDA_13=0: skipping asset step apex'; exit 0; fi; \\
    case "${{TARGETARCH:-}}" in \\
      amd64) want={B} ;; \\
      arm64) want={C} ;; \\
      *) echo 'pinwheel: ERROR: asset step apex: no asset for architecture' "${{TARGETARCH:-unknown}}" >&2; exit 1 ;; \\
    esac; \\
"""


def load(tmp_path, steps: str = STEPS, variants=None, gates: str = CUDA_13_GATE):
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(manifest_yaml(steps=steps, gates=gates, key="steps", variants=variants))
    return manifest.load(path)


def test_asset_steps_render_exactly(tmp_path):
    text = render_dockerfile([plan_variant(load(tmp_path), "cu130")])
    assert FLASH in text
    assert APEX_ARCH in text
    assert "#   apex==0.1 --no-deps on arm64: https://downloads.example.org/apex-0.1-cp311-cp311-linux_aarch64.whl\n" \
        in text


def test_shellcheck_every_run_script_with_asset_steps(tmp_path):
    if not shutil.which("shellcheck"):
        pytest.fail("shellcheck is not installed: `make tools` (Debian package shellcheck)")
    scripts = run_scripts(render_dockerfile([plan_variant(load(tmp_path), "cu130")]))
    assert sum("sha256sum" in s for s in scripts) == 2
    for script in scripts:
        proc = subprocess.run(["shellcheck", "-s", "sh", "-e", "SC2016", "-"], input=f"#!/bin/sh\n{script}\n",
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}\n{proc.stdout}"


def test_an_asset_step_installs_its_package_unchecked_and_has_no_lock_slice(tmp_path):
    plan = plan_variant(load(tmp_path), "cu130")
    flash = plan.steps[0]
    [d] = kind_of(flash).effect(flash).direct
    assert (d.name, d.version, d.source, d.metadata) == ("flash-attn", "2.8.3", "asset", None)
    assert A[:12] in d.unread
    step_units, _ = units(plan)
    assert step_units == [] or all(u.step.kind == "wheels" for u in step_units)
    labels = json.loads(step_labels(plan)["io.pinwheel.assets"])
    assert labels == {"flash-attn": {"package": "flash-attn==2.8.3", "url": URL, "sha256": A},
                      "apex": {"package": "apex==0.1", "url": "https://downloads.example.org/apex-0.1-cp311-cp311-"
                                                              "linux_x86_64.whl", "sha256": B}}


def located(tmp_path, steps: str, variants=None) -> str:
    with pytest.raises(ManifestError) as err:
        load(tmp_path, steps, variants)
    return str(err.value)


@pytest.mark.parametrize("old, new, where, words", [
    (f'sha256: "{A}"', 'sha256: "abc"', "12: steps[0].url.sha256", "is not a sha256 (64 lowercase hex digits)"),
    ("flash_attn-2.8.3-cp311", "flash_attn-2.8.4-cp311", "12: steps[0].url.url", "is version 2.8.4, not 2.8.3"),
    ("/flash_attn-2.8.3-cp311", "/apex-2.8.3-cp311", "12: steps[0].url.url", "is a wheel of apex, not flash-attn"),
    ("linux_x86_64.whl\", sha256: \"1", "linux_x86_64.tar.gz\", sha256: \"1", "12: steps[0].url.url",
     "is not a wheel file name"),
    ('package: "flash-attn==2.8.3"', 'package: "flash-attn[x]==2.8.3"', "11: steps[0].package",
     "extras change nothing"),
    ('      arm64: {url: "https://downloads.example.org/apex-0.1-cp311-cp311-linux_aarch64.whl", sha256: "' + C + '"}\n',
     "", None, None),
    ("amd64: {url", "riscv: {url", "19: steps[1].url.riscv", "unknown key"),
])
def test_a_bad_asset_step_is_refused_at_its_line(tmp_path, old, new, where, words):
    assert old in STEPS
    steps = STEPS.replace(old, new, 1)
    if where is None:  # an arm64 variant needs an arm64 asset
        message = located(tmp_path, steps, [variant("cu130"), variant("arm", platform="manylinux_2_36_aarch64")])
        assert "wheels_manifest.yaml:19: steps[1].url: variant arm is built for arm64 (linux/arm64), which has no " \
               "asset here" in message, message
        return
    message = located(tmp_path, steps)
    assert f"wheels_manifest.yaml:{where}: " in message and words in message, message


def test_every_platform_a_variant_lists_needs_its_asset(tmp_path):
    """The variant's own platform is amd64, but it lists arm64 too: the arm64 build has no asset, and that is
    found when the manifest is read, not when the arm64 build reaches the step."""
    amd64_only = STEPS.replace(
        '      arm64: {url: "https://downloads.example.org/apex-0.1-cp311-cp311-linux_aarch64.whl", sha256: "' + C
        + '"}\n', "", 1)
    both = variant("cu130", platforms=["linux/amd64", "linux/arm64"])
    message = located(tmp_path, amd64_only, [both])
    assert "wheels_manifest.yaml:18: steps[1].url: variant cu130 is built for arm64 (linux/arm64), which has no " \
           "asset here" in message, message
    load(tmp_path, STEPS, [both])  # with its arm64 asset it loads


def test_a_gate_on_the_architecture_is_judged_per_platform(tmp_path):
    """An asset gated to arm64 only needs an arm64 wheel: the amd64 build of the same variant skips it."""
    arm_only = STEPS.replace("gate: ENABLE_CUDA_13", "gate: ONLY_ARM").replace(
        '      amd64: {url: "https://downloads.example.org/apex-0.1-cp311-cp311-linux_x86_64.whl", sha256: "' + B
        + '"}\n', "", 1)
    gates = CUDA_13_GATE + '  ONLY_ARM: {when: "arch == arm64", why: "GB200 nodes"}\n'
    both = variant("cu130", platforms=["linux/amd64", "linux/arm64"])
    m = load(tmp_path, arm_only, [both], gates=gates)
    assert [s.name for s in plan_variant(m, "cu130").steps if s.active] == ["flash-attn"]


def test_wheel_names_must_match_the_package_and_version():
    assert wheel_problem("pw_asset-1.0.0-py3-none-any.whl", "pw-asset", "1.0.0") is None
    assert wheel_problem("pw_asset-1.0-py3-none-any.whl", "pw-asset", "1.0.0") is None  # PEP 440 equal


@pytest.fixture
def served(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    with serve_files(root) as url:
        yield root, url


def test_the_cache_is_content_addressed_verified_and_names_both_digests(served, tmp_path):
    root, base = served
    name = "pw_asset-1.0.0-py3-none-any.whl"
    (root / name).write_bytes(b"the release")
    good = hashlib.sha256(b"the release").hexdigest()
    cache = tmp_path / "cache"
    path = fetch(f"{base}/{name}", good, cache)
    assert path == cache / "sha256" / good / name and path.read_bytes() == b"the release"
    # a cached file is hashed again before use: bytes changed in the cache are fetched again
    path.write_bytes(b"changed in the cache")
    assert fetch(f"{base}/{name}", good, cache).read_bytes() == b"the release"
    # the server's bytes changed: refused, naming the expected and the found digest, and nothing cached
    (root / name).write_bytes(b"tampered")
    shutil.rmtree(cache)
    with pytest.raises(AssetError) as err:
        fetch(f"{base}/{name}", good, cache)
    assert str(err.value) == (f"{base}/{name}: sha256 mismatch: expected {good}, "
                              f"found {hashlib.sha256(b'tampered').hexdigest()}")
    assert not list((cache / "sha256").rglob("*.whl"))
    with pytest.raises(AssetError, match="cannot download"):
        fetch(f"{base}/missing-1.0-py3-none-any.whl", good, cache)


def test_asset_add_prints_an_entry_the_manifest_accepts(served, tmp_path):
    root, base = served
    name = build_wheel(root, "pw-asset", "1.0.0").name  # a real wheel: `asset add` opens it
    entry = add(f"{base}/{name}", tmp_path / "cache")
    assert f'sha256: "{hashlib.sha256((root / name).read_bytes()).hexdigest()}"' in entry
    m = load(tmp_path, entry)
    plan = plan_variant(m, "cu130")
    context = tmp_path / "context"
    stage_steps(plan, tmp_path, context)  # the cache is the workspace's; the file comes from the server again
    assert sorted(p.name for p in (context / "assets" / "pw-asset").iterdir()) == [name]
    assert (context / "assets" / "pw-asset" / name).read_bytes() == (root / name).read_bytes()
