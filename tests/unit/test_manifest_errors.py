"""Bad manifests: each must exit 2 naming file, line and key, with no traceback."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pinwheel import cli, manifest

BASE = textwrap.dedent('''\
    manifest_version: 1
    image:
      name: train
      repository: pinwheel/train
      venv: /opt/venv
    shared_pins:
      - requirement: "nvidia-cutlass-dsl[cu13]==4.6.2"
        needed_by: [sglang]
        why: "shared"
    gates:
      ENABLE_CUDA_13:
        when: "cuda >= 13"
        why: "cuda 13 only"
    variants:
      cu130:
        cuda: "13.0"
        torch: "2.13.0"
        python: "3.11"
        platform: manylinux_2_36_x86_64
        base: pinwheel/base:bookworm-py311
        tag: "cu130-torch213-{date}"
    wheel_sets:
      - name: torch
        why: "base"
        packages:
          - requirement: "torch==2.13.0"
      - name: kernels
        why: "kernels"
        gate: ENABLE_CUDA_13
        packages:
          - requirement: "nvidia-cutlass-dsl[cu13]==4.6.2"
          - requirement: "nvidia-cudnn-frontend==1.26.0"
            no_deps: true
            why: "cutedsl extra pins an older dsl"
          - requirement: "flash-mla==1.0.0"
            why: "local build"
            local:
              glob: "flash_mla-*.whl"
              if_missing: fallback
            fallback:
              requirement: "sgl-flash-mla==1.0.0"
              no_deps: true
              why: "stable ABI"
    ''')


def sub(old: str, new: str, count: int = 1) -> str:
    assert BASE.count(old) >= 1, old
    return BASE.replace(old, new, count)


AM = '        why: "cutedsl extra pins an older dsl"\n'

# (id, manifest text, expected line, expected key, expected message fragment)
CASES = [
    ("yaml-syntax", sub("  name: train\n", "  name: [train\n"), 4, "(yaml)", "not valid YAML"),
    ("yaml-tab-indent", sub("  name: train\n", "\tname: train\n"), 3, "(yaml)", "not valid YAML"),
    ("empty", "", 1, "(top)", "empty"),
    ("top-not-mapping", "- a\n- b\n", 1, "(top)", "must be a mapping"),
    ("unknown-top-key", sub("manifest_version: 1\n", "manifest_version: 1\nwheelsets: []\n"), 2, "wheelsets", "did you mean 'wheel_sets'"),
    ("missing-variants", BASE.replace(BASE[BASE.index("variants:"):BASE.index("wheel_sets:")], ""), 1, "variants", "required key is missing"),
    ("bad-manifest-version", sub("manifest_version: 1", "manifest_version: 2"), 1, "manifest_version", "must be 1"),
    ("version-as-string", sub("manifest_version: 1", 'manifest_version: "1"'), 1, "manifest_version", "must be 1"),
    ("duplicate-key", sub("  venv: /opt/venv\n", "  venv: /opt/venv\n  venv: /usr\n"), 6, "image.venv", "duplicate key (first on line 5)"),
    ("image-unknown-key", sub("  venv: /opt/venv\n", "  venv: /opt/venv\n  registry: x\n"), 6, "image.registry", "unknown key"),
    ("image-bad-name", sub("  name: train", "  name: Train!"), 3, "image.name", "not a valid image name"),
    ("image-bad-repository", sub("  repository: pinwheel/train", "  repository: pinwheel/Train;rm"), 4, "image.repository", "not a valid image repository"),
    ("image-relative-venv", sub("  venv: /opt/venv", "  venv: opt/venv"), 5, "image.venv", "not a valid absolute path"),
    ("image-venv-injection", sub("  venv: /opt/venv", '  venv: "/opt/venv; rm -rf /"'), 5, "image.venv", "not a valid absolute path"),
    ("shared-not-list", BASE.replace(BASE[BASE.index("shared_pins:"):BASE.index("gates:")], "shared_pins: x\n"), 6, "shared_pins", "must be a list"),
    ("shared-bad-pep508", sub('"nvidia-cutlass-dsl[cu13]==4.6.2"\n    needed_by', '"nvidia-cutlass-dsl[cu13===4.6.2"\n    needed_by'), 7, "shared_pins[0].requirement", "not a PEP 508 requirement"),
    ("shared-not-exact", sub('"nvidia-cutlass-dsl[cu13]==4.6.2"\n    needed_by', '"nvidia-cutlass-dsl[cu13]>=4.6.2"\n    needed_by'), 7, "shared_pins[0].requirement", "must be an exact pin"),
    ("shared-missing-why", sub('    why: "shared"\n', ""), 7, "shared_pins[0].why", "required key is missing"),
    ("shared-empty-needed-by", sub("needed_by: [sglang]", "needed_by: []"), 8, "shared_pins[0].needed_by", "at least 1"),
    ("shared-duplicate", sub('    why: "shared"\n', '    why: "shared"\n  - requirement: "nvidia_cutlass_dsl==4.6.2"\n    needed_by: [x]\n    why: "again"\n'), 10, "shared_pins[1].requirement", "already a shared pin"),
    ("shared-marker", sub('"nvidia-cutlass-dsl[cu13]==4.6.2"\n    needed_by', '"nvidia-cutlass-dsl[cu13]==4.6.2; python_version > \'3\'"\n    needed_by'), 7, "shared_pins[0].requirement", "markers are not allowed"),
    ("shared-url", sub('"nvidia-cutlass-dsl[cu13]==4.6.2"\n    needed_by', '"nvidia-cutlass-dsl @ file:///tmp/x.whl"\n    needed_by'), 7, "shared_pins[0].requirement", "direct URL"),
    ("shared-disagrees", sub('- requirement: "nvidia-cutlass-dsl[cu13]==4.6.2"\n      - requirement: "nvidia-cudnn', '- requirement: "nvidia-cutlass-dsl[cu13]==4.5.0"\n      - requirement: "nvidia-cudnn'), 31, "wheel_sets[1].packages[0].requirement", "shared pin (line 7) is ==4.6.2"),
    ("gate-lowercase", sub("  ENABLE_CUDA_13:\n", "  enable_cuda_13:\n"), 11, "gates.enable_cuda_13", "ARG names"),
    ("gate-bad-expr", sub('when: "cuda >= 13"', 'when: "cuda is new"'), 12, "gates.ENABLE_CUDA_13.when", "not a gate expression"),
    ("gate-unknown-var", sub('when: "cuda >= 13"', 'when: "gpu >= 13"'), 12, "gates.ENABLE_CUDA_13.when", "not a gate expression"),
    ("gate-bad-spec", sub('when: "cuda >= 13"', 'when: "cuda >= 13..x"'), 12, "gates.ENABLE_CUDA_13.when", "not a PEP 440 specifier"),
    ("gate-missing-why", sub('    why: "cuda 13 only"\n', ""), 11, "gates.ENABLE_CUDA_13.why", "required key is missing"),
    ("gate-shell-injection", sub('when: "cuda >= 13"', 'when: "cuda >= 13; rm -rf /"'), 12, "gates.ENABLE_CUDA_13.when", "not a PEP 440 specifier"),
    ("variants-empty", BASE.replace(BASE[BASE.index("variants:"):BASE.index("wheel_sets:")], "variants: {}\n"), 14, "variants", "at least one variant"),
    ("variant-bad-name", sub("  cu130:\n", "  CU 130:\n"), 15, "variants.CU 130", "lowercase"),
    ("variant-unknown-key", sub('    tag: "cu130', '    cudnn: "9"\n    tag: "cu130'), 21, "variants.cu130.cudnn", "unknown key"),
    ("variant-missing-cuda", sub('    cuda: "13.0"\n', ""), 15, "variants.cu130.cuda", "required key is missing"),
    ("variant-cuda-float", sub('    cuda: "13.0"', "    cuda: 13.0"), 16, "variants.cu130.cuda", "quote it"),
    ("variant-cuda-not-version", sub('    cuda: "13.0"', '    cuda: "thirteen"'), 16, "variants.cu130.cuda", "not a PEP 440 version"),
    ("variant-torch-bad", sub('    torch: "2.13.0"', '    torch: "2.13.0+"'), 17, "variants.cu130.torch", "not a PEP 440 version"),
    ("variant-python-patch", sub('    python: "3.11"', '    python: "3.11.7"'), 18, "variants.cu130.python", "MAJOR.MINOR"),
    ("variant-bad-platform", sub("    platform: manylinux_2_36_x86_64", "    platform: win_amd64"), 19, "variants.cu130.platform", "wheel platform"),
    ("variant-bad-base", sub("    base: pinwheel/base:bookworm-py311", '    base: "pinwheel/base:$(id)"'), 20, "variants.cu130.base", "image reference"),
    ("variant-tag-placeholder", sub('"cu130-torch213-{date}"', '"cu130-{when}"'), 21, "variants.cu130.tag", "unknown placeholder {when}"),
    ("variant-tag-chars", sub('"cu130-torch213-{date}"', '"cu130 torch"'), 21, "variants.cu130.tag", "valid image tag"),
    ("variant-tag-brace", sub('"cu130-torch213-{date}"', '"cu130-{date"'), 21, "variants.cu130.tag", "bad tag pattern"),
    ("variant-index-env", sub('    tag: "cu130-torch213-{date}"\n', '    tag: "cu130-torch213-{date}"\n    torch_index_env: "lower-case"\n'), 22, "variants.cu130.torch_index_env", "environment variable"),
    ("wheel-sets-empty", BASE[:BASE.index("wheel_sets:")] + "wheel_sets: []\n", 22, "wheel_sets", "at least 1"),
    ("set-missing-why", sub('    why: "base"\n', ""), 23, "wheel_sets[0].why", "required key is missing"),
    ("set-bad-name", sub("  - name: torch\n", "  - name: Torch Set\n"), 23, "wheel_sets[0].name", "not a valid step name"),
    ("set-duplicate-name", sub("  - name: kernels\n", "  - name: torch\n"), 27, "wheel_sets[1].name", "duplicate wheel set name (first on line 23)"),
    ("set-unknown-gate", sub("    gate: ENABLE_CUDA_13\n", "    gate: ENABLE_CUDA_14\n"), 29, "wheel_sets[1].gate", "unknown gate 'ENABLE_CUDA_14'"),
    ("set-unknown-key", sub('    why: "kernels"\n', '    why: "kernels"\n    order: 2\n'), 29, "wheel_sets[1].order", "unknown key"),
    ("package-unknown-key", sub('      - requirement: "torch==2.13.0"\n', '      - requirement: "torch==2.13.0"\n        nodeps: true\n'), 27, "wheel_sets[0].packages[0].nodeps", "did you mean 'no_deps'"),
    ("package-not-pinned", sub('"torch==2.13.0"', '"torch>=2.13"'), 26, "wheel_sets[0].packages[0].requirement", "must be an exact pin"),
    ("package-wildcard-pin", sub('"torch==2.13.0"', '"torch==2.13.*"'), 26, "wheel_sets[0].packages[0].requirement", "must be an exact pin"),
    ("package-bad-version", sub('"torch==2.13.0"', '"torch===banana"'), 26, "wheel_sets[0].packages[0].requirement", "invalid PEP 440 version"),
    ("package-shell-name", sub('"torch==2.13.0"', '"torch;rm==2.13.0"'), 26, "wheel_sets[0].packages[0].requirement", "not a PEP 508 requirement"),
    ("package-no-deps-not-bool", sub("no_deps: true\n        why: \"cutedsl", "no_deps: yes please\n        why: \"cutedsl"), 33, "wheel_sets[1].packages[1].no_deps", "true or false"),
    ("package-no-deps-without-why", sub('        why: "cutedsl extra pins an older dsl"\n', ""), 32, "wheel_sets[1].packages[1].why", "must say why"),
    ("package-duplicate-diff-pin", sub('      - requirement: "nvidia-cudnn-frontend==1.26.0"', '      - requirement: "torch==2.14.1"'), 32, "wheel_sets[1].packages[1].requirement", "pinned twice with different versions"),
    ("package-duplicate-same-pin", sub('      - requirement: "nvidia-cudnn-frontend==1.26.0"', '      - requirement: "torch==2.13.0"'), 32, "wheel_sets[1].packages[1].requirement", "listed twice"),
    ("package-unknown-gate", sub('        why: "local build"\n', '        why: "local build"\n        gate: CUDA13\n'), 37, "wheel_sets[1].packages[2].gate", "unknown gate"),
    ("package-not-mapping", sub('      - requirement: "torch==2.13.0"\n', '      - "torch==2.13.0"\n'), 26, "wheel_sets[0].packages[0]", "must be a mapping"),
    ("local-path-traversal", sub('glob: "flash_mla-*.whl"', 'glob: "../flash_mla-*.whl"'), 38, "wheel_sets[1].packages[2].local.glob", "not a safe wheel glob"),
    ("local-shell-glob", sub('glob: "flash_mla-*.whl"', 'glob: "flash_mla-$(id)*.whl"'), 38, "wheel_sets[1].packages[2].local.glob", "not a safe wheel glob"),
    ("local-not-whl", sub('glob: "flash_mla-*.whl"', 'glob: "flash_mla-*.tar.gz"'), 38, "wheel_sets[1].packages[2].local.glob", "not a safe wheel glob"),
    ("local-glob-wrong-name", sub('glob: "flash_mla-*.whl"', 'glob: "deep_gemm-*.whl"'), 38, "wheel_sets[1].packages[2].local.glob", "cannot match wheels of flash-mla"),
    ("local-bad-policy", sub("if_missing: fallback", "if_missing: ignore"), 39, "wheel_sets[1].packages[2].local.if_missing", "not one of: fail, skip, fallback"),
    ("local-fallback-missing", BASE[:BASE.index("        fallback:")], 39, "wheel_sets[1].packages[2].local.if_missing", "needs a 'fallback' package"),
    ("local-fallback-unused", sub("if_missing: fallback", "if_missing: skip"), 40, "wheel_sets[1].packages[2].fallback", "never uses the fallback"),
    ("local-missing-why", sub('        why: "local build"\n', ""), 35, "wheel_sets[1].packages[2].why", "must say why"),
    ("local-bad-arch", sub("          if_missing: fallback\n", "          if_missing: fallback\n          built_against: {arch_list: [sm90]}\n"), 40, "wheel_sets[1].packages[2].local.built_against.arch_list[0]", "CUDA arch"),
    ("local-bad-built-torch", sub("          if_missing: fallback\n", "          if_missing: fallback\n          built_against: {torch: \"two\"}\n"), 40, "wheel_sets[1].packages[2].local.built_against.torch", "not a PEP 440 version"),
    ("fallback-without-local", sub('      - requirement: "torch==2.13.0"\n', '      - requirement: "torch==2.13.0"\n        fallback: {requirement: "torch==2.12.0"}\n'), 27, "wheel_sets[0].packages[0].fallback", "needs a local wheel"),
    ("fallback-gated", sub('          why: "stable ABI"\n', '          why: "stable ABI"\n          gate: ENABLE_CUDA_13\n'), 44, "wheel_sets[1].packages[2].fallback.gate", "follows its package's gate"),
    ("fallback-nested-local", sub('          why: "stable ABI"\n', '          why: "stable ABI"\n          local: {glob: "x-*.whl", if_missing: skip}\n'), 44, "wheel_sets[1].packages[2].fallback.local", "unknown key"),
    ("fallback-dup-of-package", sub('requirement: "sgl-flash-mla==1.0.0"', 'requirement: "torch==2.14.1"'), 41, "wheel_sets[1].packages[2].requirement", "pinned twice"),
    ("multiline-why", sub('why: "kernels"', 'why: "kernels\\nsecond line"'), 28, "wheel_sets[1].why", "single line"),
    ("empty-why", sub('why: "kernels"', 'why: "  "'), 28, "wheel_sets[1].why", "must not be empty"),
    ("needs-unknown", sub('      - requirement: "torch==2.13.0"\n', '      - requirement: "torch==2.13.0"\n        needs: gpu\n        needs_why: "x"\n'), 27, "wheel_sets[0].packages[0].needs", "not one of: driver"),
    ("needs-without-why", sub('      - requirement: "torch==2.13.0"\n', '      - requirement: "torch==2.13.0"\n        needs: driver\n'), 27, "wheel_sets[0].packages[0].needs_why", "say why"),
    ("needs-why-alone", sub('      - requirement: "torch==2.13.0"\n', '      - requirement: "torch==2.13.0"\n        needs_why: "x"\n'), 27, "wheel_sets[0].packages[0].needs_why", "goes with needs"),
    ("verify-empty", sub('      - requirement: "torch==2.13.0"\n', '      - requirement: "torch==2.13.0"\n        verify: {needs: cpu}\n'), 27, "wheel_sets[0].packages[0].verify", "say what to check"),
    ("verify-bad-needs", sub('      - requirement: "torch==2.13.0"\n', '      - requirement: "torch==2.13.0"\n        verify: {import: [torch], needs: tpu}\n'), 27, "wheel_sets[0].packages[0].verify.needs", "not one of: cpu, driver, gpu"),
    ("verify-bad-module", sub('      - requirement: "torch==2.13.0"\n', '      - requirement: "torch==2.13.0"\n        verify: {import: ["torch; rm"]}\n'), 27, "wheel_sets[0].packages[0].verify.import[0]", "not a valid module name"),
    ("verify-unknown-check", sub('      - requirement: "torch==2.13.0"\n', '      - requirement: "torch==2.13.0"\n        verify: {check: dsa-backward}\n'), 27, "wheel_sets[0].packages[0].verify.check", "not a check the smoke payload provides (one of: dsa-forward)"),
    ("verify-check-with-python", sub('      - requirement: "torch==2.13.0"\n', '      - requirement: "torch==2.13.0"\n        verify: {check: dsa-forward, python: "import torch"}\n'), 27, "wheel_sets[0].packages[0].verify.check", "a named check stands alone"),
    ("verify-check-wrong-needs", sub('      - requirement: "torch==2.13.0"\n', '      - requirement: "torch==2.13.0"\n        verify: {check: dsa-forward, needs: driver}\n'), 27, "wheel_sets[0].packages[0].verify.needs", "check dsa-forward needs gpu, not driver"),
    ("verify-bad-python", sub('      - requirement: "torch==2.13.0"\n', '      - requirement: "torch==2.13.0"\n        verify: {python: "import (torch"}\n'), 27, "wheel_sets[0].packages[0].verify.python", "not valid Python"),
    ("allow-missing-without-no-deps", sub('      - requirement: "torch==2.13.0"\n', '      - requirement: "torch==2.13.0"\n        allow_missing: [{name: numpy, why: "x"}]\n'), 27, "wheel_sets[0].packages[0].allow_missing", "installed without its requirements only"),
    ("allow-missing-no-why", sub(AM, AM + '        allow_missing:\n          - name: helper\n'), 36, "wheel_sets[1].packages[1].allow_missing[0].why", "required key is missing"),
    ("allow-missing-bad-name", sub(AM, AM + '        allow_missing:\n          - {name: "help er", why: "x"}\n'), 36, "wheel_sets[1].packages[1].allow_missing[0].name", "not a valid project name"),
    ("allow-missing-twice", sub(AM, AM + '        allow_missing:\n          - {name: helper, why: "x"}\n          - {name: Helper, why: "y"}\n'), 37, "wheel_sets[1].packages[1].allow_missing[1].name", "allowed twice (first on line 36)"),
    ("allow-missing-empty", sub(AM, AM + '        allow_missing: []\n'), 35, "wheel_sets[1].packages[1].allow_missing", "at least 1"),
    ("exclude-no-why", sub('      - requirement: "torch==2.13.0"\n', '      - requirement: "torch==2.13.0"\n        exclude:\n          - name: numpy\n'), 28, "wheel_sets[0].packages[0].exclude[0].why", "required key is missing"),
    ("exclude-twice", sub('      - requirement: "torch==2.13.0"\n', '      - requirement: "torch==2.13.0"\n        exclude:\n          - {name: numpy, why: "x"}\n          - {name: NumPy, why: "y"}\n'), 29, "wheel_sets[0].packages[0].exclude[1].name", "excluded twice (first on line 28)"),
    ("exclude-itself", sub('      - requirement: "torch==2.13.0"\n', '      - requirement: "torch==2.13.0"\n        exclude:\n          - {name: Torch, why: "x"}\n'), 28, "wheel_sets[0].packages[0].exclude[0].name", "cannot exclude itself"),
    ("exclude-what-the-manifest-pins", sub('      - requirement: "torch==2.13.0"\n', '      - requirement: "torch==2.13.0"\n        exclude:\n          - {name: nvidia_cutlass_dsl, why: "x"}\n'), 28, "wheel_sets[0].packages[0].exclude[0].name", "the manifest installs or pins it (line 33)"),
    ("exclude-on-no-deps", sub(AM, AM + '        exclude: [{name: helper, why: "x"}]\n'), 35, "wheel_sets[1].packages[1].exclude", "no_deps or local install"),
    ("installer-unknown", sub("  venv: /opt/venv\n", "  venv: /opt/venv\n  installer: conda\n"), 6, "image.installer", "not one of: uv, pip"),
    ("allow-missing-unknown-key", sub(AM, AM + '        allow_missing:\n          - {name: helper, why: "x", version: "1"}\n'), 36, "wheel_sets[1].packages[1].allow_missing[0].version", "unknown key"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_manifest_exits_2_with_location(case, tmp_path, capsys):
    _, text, line, key, fragment = case
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(text)
    with pytest.raises(manifest.ManifestError) as info:
        manifest.load(path)
    e = info.value
    assert (e.line, e.key) == (line, key), str(e)
    assert fragment in e.message, str(e)
    rc = cli.main(["--manifest", str(path), "render", "--stdout"])
    captured = capsys.readouterr()
    assert rc == 2
    assert f"{path}:{line}: {key}:" in captured.err.replace("\n", "")
    assert "Traceback" not in captured.err + captured.out


def test_at_least_fifty_distinct_cases():
    assert len({c[0] for c in CASES}) >= 50
    assert len({c[1] for c in CASES}) == len(CASES), "two cases share one manifest text"


def test_base_manifest_is_valid(tmp_path):
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(BASE)
    m = manifest.load(path)
    assert [ws.name for ws in m.wheel_sets] == ["torch", "kernels"]


def test_missing_manifest_file(tmp_path, capsys):
    rc = cli.main(["--manifest", str(tmp_path / "nope.yaml"), "render", "--stdout"])
    assert rc == 2
    assert "nope.yaml" in capsys.readouterr().err


def test_not_utf8(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_bytes(b"manifest_version: 1\nimage: \xff\n")
    with pytest.raises(manifest.ManifestError, match="not UTF-8"):
        manifest.load(path)


def test_real_process_prints_no_traceback(tmp_path):
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(sub('"torch==2.13.0"', '"torch>=2.13"'))
    proc = subprocess.run([sys.executable, "build.py", "--manifest", str(path), "render", "--stdout"],
                          cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True)
    assert proc.returncode == 2
    assert f"{path}:26: wheel_sets[0].packages[0].requirement:" in proc.stderr.replace("\n", "")
    assert "Traceback" not in proc.stderr


def test_unknown_variant_is_an_argument_error(tmp_path, capsys):
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(BASE)
    rc = cli.main(["--manifest", str(path), "report", "--variant", "cu999"])
    err = capsys.readouterr().err.replace("\n", "")
    assert rc == 2
    assert "--variant cu999: no such variant in wheels_manifest.yaml (variants: cu130)" in err
    assert ":0:" not in err
