"""One builder for the manifests tests write: the header and variants they share, the steps they vary.

    manifest_yaml(steps=WHEEL_SETS, variants=[variant("cu130"), variant("cu129", cuda="12.9")], gates=CUDA_13_GATE)
"""
from __future__ import annotations

import json
import re

CUDA_13_GATE = '  ENABLE_CUDA_13: {when: "cuda >= 13", why: "CUDA 13 only"}\n'


def variant(name: str = "cu130", *, cuda: str = "13.0", torch: str = "2.13.0", python: str = "3.11",
            platform: str = "manylinux_2_36_x86_64", base: str = "pinwheel/base:bookworm-py311",
            tag: str | None = None, **extra: str) -> str:
    """One variant as a YAML flow mapping line (JSON strings are valid YAML scalars)."""
    fields = {"cuda": cuda, "torch": torch, "python": python, "platform": platform, "base": base,
              "tag": tag or f"{name}-{{date}}", **extra}
    return f"  {name}: {{" + ", ".join(f"{k}: {json.dumps(v)}" for k, v in fields.items()) + "}\n"


def manifest_yaml(*, steps: str, variants: list[str] | str | None = None, gates: str = "", shared_pins: str = "",
             image: str = "demo", key: str = "wheel_sets") -> str:
    """A whole manifest: `steps` is the YAML of the step list's items (indented two spaces)."""
    chosen = variants if variants is not None else [variant()]
    text = f"manifest_version: 1\nimage: {{name: {image}, repository: pinwheel/{image}}}\n"
    if shared_pins:
        text += "shared_pins:\n" + shared_pins
    if gates:
        text += "gates:\n" + gates
    text += "variants:\n" + ("".join(chosen) if isinstance(chosen, list) else chosen)
    return text + f"{key}:\n" + steps


def load_text(text: str, tmp_path):
    """The manifest `text`, written to tmp_path/wheels_manifest.yaml and loaded."""
    from pinwheel import manifest  # the builder above needs no pinwheel; only loading does

    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(text)
    return manifest.load(path)


def assert_refused_at(text: str, tmp_path, line: int, key: str, fragment: str) -> None:
    """Loading `text` fails as file:line: key: message, with `fragment` in the message."""
    import pytest

    from pinwheel import manifest

    with pytest.raises(manifest.ManifestError) as info:
        load_text(text, tmp_path)
    e = info.value
    assert (e.line, e.key) == (line, key), str(e)
    assert fragment in e.message, str(e)
    assert str(e).startswith(f"{tmp_path / 'wheels_manifest.yaml'}:{line}: {key}: ")


def two_platform_manifest(kernel: str, *, base_why: str, kernel_why: str) -> str:
    """A cu130 variant on linux/amd64 and linux/arm64 (installer pip: the test index has the host's uv only):
    a `base` set with the pwt-torchy stand-in, then a `kernels` set holding `kernel`."""
    import sys

    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    return f"""\
manifest_version: 1
image: {{name: demo, repository: pinwheel/demo, installer: pip}}  # the test index has the host's uv only
variants:
  cu130: {{cuda: "13.0", torch: "2.0", python: "{py}", platform: manylinux_2_36_x86_64,
          platforms: [linux/amd64, linux/arm64], base: "pinwheel/base:bookworm-py311", tag: "cu130-{{date}}"}}
wheel_sets:
  - name: base
    why: "{base_why}"
    packages:
      - {{requirement: "pwt-torchy==2.0"}}
  - name: kernels
    why: "{kernel_why}"
    packages:
      - {{requirement: "{kernel}"}}
"""


def as_steps(text: str, *, first: str = "", last: str = "") -> str:
    """A wheel_sets: manifest spelled as a steps: list of kind wheels, with the step entries `first` before the
    wheel sets and `last` after them (a blank line between)."""
    steps = re.sub(r"^  - name: (\S+)\n", r"  - name: \1\n    kind: wheels\n", text, flags=re.M)
    assert steps.count("wheel_sets:\n") == 1
    steps = steps.replace("wheel_sets:\n", "steps:\n" + first)
    return steps.rstrip("\n") + "\n\n" + last if last else steps
