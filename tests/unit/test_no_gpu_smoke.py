"""`no_gpu_smoke:` in a variant: the platforms published without a GPU smoke, each with its reason;
anything else is a located error."""
from __future__ import annotations

from tests.support.manifests import assert_refused_at, load_text, manifest_yaml

STEPS = '  - {name: core, why: "index wheels", packages: [{requirement: "six==1.16.0"}]}\n'


def manifest(extra: str) -> str:
    variants = ('  cu130:\n    cuda: "13.0"\n    torch: "2.13.0"\n    python: "3.11"\n'
                '    platform: manylinux_2_36_x86_64\n    base: pinwheel/base:bookworm-py311\n'
                '    tag: "cu130-{date}"\n    platforms: [linux/amd64, linux/arm64]\n' + extra)
    return manifest_yaml(steps=STEPS, variants=variants)


def test_a_platform_and_its_reason(tmp_path):
    m = load_text(manifest('    no_gpu_smoke:\n      linux/arm64: "no arm64 GPU runner;\n        QEMU static only"\n'),
                  tmp_path)
    assert m.variant("cu130").no_gpu_smoke == (("linux/arm64", "no arm64 GPU runner; QEMU static only"),)
    plain = load_text(manifest(""), tmp_path)
    assert plain.variant("cu130").no_gpu_smoke == ()


def test_a_platform_the_variant_does_not_build_is_refused(tmp_path):
    assert_refused_at(manifest('    no_gpu_smoke:\n      linux/ppc64le: "why"\n'), tmp_path, 13,
                      "variants.cu130.no_gpu_smoke.linux/ppc64le", "is not one of the variant's platforms")


def test_a_reason_is_required(tmp_path):
    assert_refused_at(manifest('    no_gpu_smoke:\n      linux/arm64: "  "\n'), tmp_path, 13,
                      "variants.cu130.no_gpu_smoke.linux/arm64", "must not be empty")
    assert_refused_at(manifest('    no_gpu_smoke: []\n'), tmp_path, 12, "variants.cu130.no_gpu_smoke", "must map")
