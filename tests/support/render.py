"""What the render tests share: the policies manifest behind the golden Dockerfiles, and the shell of each RUN."""
from __future__ import annotations

import re
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[1] / "golden"

POLICIES = """\
manifest_version: 1
image: {name: demo, repository: pinwheel/demo}
gates:
  ENABLE_CUDA_13: {when: "cuda >= 13", why: "CUDA 13 kernels only"}
variants:
  cu130: {cuda: "13.0", torch: "2.13.0", python: "3.11", platform: manylinux_2_36_x86_64, base: "pinwheel/base:bookworm-py311", tag: "cu130-{date}"}
  cu129: {cuda: "12.9", torch: "2.13.0", python: "3.11", platform: manylinux_2_36_x86_64, base: "pinwheel/base:bookworm-py311", tag: "cu129-{date}"}
wheel_sets:
  - name: core
    why: "pure-python base"
    packages:
      - {requirement: "six==1.16.0", why: "tiny and stable"}
  - name: gated
    why: "CUDA 13 only"
    gate: ENABLE_CUDA_13
    packages:
      - {requirement: "idna==3.10", no_deps: true, why: "its extras would pull more"}
  - name: local
    why: "local wheels under every policy"
    packages:
      - requirement: "demo-fail==1.0"
        why: "must be present"
        local: {glob: "demo_fail-*.whl", if_missing: fail, how_to_provide: "run `make wheels` in ../demo"}
      - requirement: "demo-skip==1.0"
        why: "nice to have"
        gate: ENABLE_CUDA_13
        local: {glob: "demo_skip-*.whl", if_missing: skip}
      - requirement: "demo-fallback==1.0"
        why: "index build is fine too"
        local: {glob: "demo_fallback-1.?-*.whl", if_missing: fallback}
        fallback: {requirement: "certifi==2024.8.30", no_deps: true, why: "stand-in from the index"}
"""


def run_scripts(dockerfile: str) -> list[str]:
    """The shell of every RUN, with BuildKit's --mount flags removed."""
    scripts = []
    for run in re.findall(r"^RUN (.*?)(?<!\\)$", dockerfile, flags=re.M | re.S):
        body = run.replace("\\\n", " ")
        body = re.sub(r"--mount=\S+\s*", "", body)
        scripts.append(body.strip())
    return scripts
