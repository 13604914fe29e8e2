"""The base-environment manifest that the render tests and the remove kind's tests share: variants that install
into a base's own Python (sys, and top built on it) and one whose venv sees it (seen), with remove steps around
a wheel set. Tests locate errors by its line numbers: edit it only with the tests that count them."""
from __future__ import annotations

from pathlib import Path

from pinwheel.plan import plan_variant

from tests.support.manifests import load_text

MANIFEST = """\
manifest_version: 1
image: {name: demo, repository: pinwheel/demo}
gates:
  ENABLE_CUDA_13: {when: "cuda >= 13", why: "CUDA 13 only"}
variants:
  sys:
    cuda: "13.0"
    torch: "2.13.0"
    python: "3.12"
    platform: manylinux_2_28_x86_64
    base: "lmsysorg/sglang:v0.5.9@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    tag: "sys-{date}"
    environment: base
  top:
    cuda: "12.9"
    torch: "2.13.0"
    python: "3.12"
    platform: manylinux_2_28_x86_64
    base_variant: sys
    tag: "top-{date}"
    environment: base
  seen:
    cuda: "13.0"
    torch: "2.13.0"
    python: "3.12"
    platform: manylinux_2_28_x86_64
    base: "pinwheel/base:bookworm-py311"
    tag: "seen-{date}"
    system_site_packages: true
    interpreter: /usr/local/bin/python3.12
steps:
  - name: drop-te
    kind: remove
    why: "the base's transformer-engine is replaced by our own triplet"
    packages:
      - {name: Transformer_Engine, why: "built against another torch"}
      - {name: flash-attn-4, why: "its kernels clash with flashinfer's"}
  - name: core
    kind: wheels
    why: "pure-python base"
    packages:
      - {requirement: "six==1.16.0", why: "tiny and stable"}
      - {requirement: "nvidia-cudnn-cu13==9.22.0.52", override: true, why: "over torch's exact pin: the fix for X"}
  - name: cuda-only
    kind: remove
    why: "CUDA 13 only"
    gate: ENABLE_CUDA_13
    packages:
      - {name: "old-kernels", why: "it's $(replaced) `later`"}
"""


def plans(text: str, tmp_path: Path):
    m = load_text(text, tmp_path)
    return [plan_variant(m, v) for v in m.variants]


def edited(old: str, new: str) -> str:
    """MANIFEST with its one `old` replaced by `new`."""
    assert MANIFEST.count(old) == 1, old
    return MANIFEST.replace(old, new)


VENV_ONLY = edited("    system_site_packages: true\n    interpreter: /usr/local/bin/python3.12\n", "")
