"""Slice assignment on a given lock and dependency graph (no index, no resolver)."""
from __future__ import annotations

import pytest
from packaging.requirements import Requirement

from pinwheel import manifest
from pinwheel.lock import LockError, assign_slices, parse_requirements
from pinwheel.plan import plan_variant

MANIFEST = """\
manifest_version: 1
image: {name: demo, repository: pinwheel/demo}
gates:
  ENABLE_CUDA_13: {when: "cuda >= 13", why: "CUDA 13 only"}
variants:
  cu130: {cuda: "13.0", torch: "2.0", python: "3.11", platform: manylinux_2_36_x86_64, base: "b:1", tag: "t-{date}"}
  cu129: {cuda: "12.9", torch: "2.0", python: "3.11", platform: manylinux_2_36_x86_64, base: "b:1", tag: "t-{date}"}
wheel_sets:
  - name: base
    why: "w"
    packages:
      - {requirement: "torch==2.0"}
  - name: kernels
    why: "w"
    packages:
      - {requirement: "kern==1.0"}
      - {requirement: "dsl[cu13]==1.5"}
  - name: frontend
    why: "w"
    gate: ENABLE_CUDA_13
    packages:
      - {requirement: "frontend==1.26", no_deps: true, why: "pins"}
  - name: local
    why: "w"
    packages:
      - requirement: "fastmla==1.0"
        why: "local"
        local: {glob: "fastmla-*.whl", if_missing: fallback}
        fallback: {requirement: "sgl-fastmla==1.0", why: "index build, with its deps"}
      - requirement: "other==1.0"
        why: "local"
        local: {glob: "other-*.whl", if_missing: skip}
  - name: late
    why: "w"
    packages:
      - {requirement: "late==1.0"}
"""

# name -> list of (requirement, extra or None)
GRAPH = {
    "torch": ["common", "cuda-bindings>=13"],
    "common": [],
    "cuda-bindings": [],
    "kern": ["frontend>=1.0", "dsl", "helper", "common", 'winonly; sys_platform == "win32"'],
    "helper": ["common"],
    "dsl": ["dsl-base", 'dsl-cu13; extra == "cu13"', 'dsl-cu12; extra == "cu12"'],
    "dsl-base": [],
    "dsl-cu13": [],
    "dsl-cu12": [],
    "frontend": ['dsl[cu12]==1.0; extra == "x"', "frontend-only-dep"],
    "frontend-only-dep": [],
    "sgl-fastmla": ["mla-runtime", "common"],
    "mla-runtime": [],
    "late": ["mla-runtime", "late-dep[feat]"],
    "late-dep": ['feat-dep; extra == "feat"'],
    "feat-dep": [],
}

ENV = {"sys_platform": "linux", "platform_system": "Linux", "python_version": "3.11"}


def requires(name, version, extras):
    out = []
    for text in GRAPH[name]:
        req = Requirement(text)
        if req.marker is None or any(req.marker.evaluate({**ENV, "extra": e}) for e in {"", *extras}):
            out.append(req)
    return out


@pytest.fixture
def m(tmp_path):
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(MANIFEST)
    return manifest.load(path)


def locked(*names):
    return {n: "1.0" for n in names}


def test_earliest_step_explicit_packages_extras_and_no_deps(m):
    plan = plan_variant(m, "cu130")
    versions = locked("torch", "common", "cuda-bindings", "kern", "helper", "dsl", "dsl-base", "dsl-cu13",
                      "frontend", "sgl-fastmla", "mla-runtime", "late", "late-dep", "feat-dep")
    a = assign_slices(plan, versions, requires)
    assert a.unit_of == {
        "torch": "01-base.txt", "common": "01-base.txt", "cuda-bindings": "01-base.txt",
        # kern reaches common too, but the base step reached it first
        "kern": "02-kernels.txt", "helper": "02-kernels.txt", "dsl": "02-kernels.txt",
        "dsl-base": "02-kernels.txt", "dsl-cu13": "02-kernels.txt",  # the requested extra is followed
        # kern reaches frontend, but the manifest lists it in its own (--no-deps) step
        "frontend": "03-frontend.txt",
        # a later step reaches mla-runtime first among steps: steps win over fallback files,
        # which are installed only when a local wheel is missing
        "mla-runtime": "05-late.txt", "late": "05-late.txt",
        "late-dep": "05-late.txt", "feat-dep": "05-late.txt",  # extras of dependencies are followed too
        "sgl-fastmla": "04-local.fallback-fastmla.txt",
    }
    assert a.reason["common"] == "via torch" and a.reason["frontend"] == "manifest"
    assert a.reason["dsl-cu13"] == "via dsl"
    # requirements come for the target: the win32-only one is not there to follow
    assert a.warnings == ()


def test_no_deps_requirements_are_not_followed(m):
    plan = plan_variant(m, "cu130")
    versions = locked("torch", "common", "cuda-bindings", "kern", "helper", "dsl", "dsl-base", "dsl-cu13",
                      "frontend", "frontend-only-dep", "sgl-fastmla", "mla-runtime", "late", "late-dep", "feat-dep")
    with pytest.raises(LockError, match="frontend-only-dep"):
        assign_slices(plan, versions, requires)


def test_extras_asked_of_a_base_package_are_followed_from_the_base(m):
    """The base holds late-dep and dsl; a step asks late-dep[feat] through late and dsl[cu13] itself: what
    only those extras require is in the lock, and goes to the step that asked (a base environment's
    httpx[http2] -> h2, textual's markdown-it-py[linkify] -> linkify-it-py)."""
    plan = plan_variant(m, "cu130")
    versions = locked("torch", "common", "cuda-bindings", "kern", "helper", "dsl-base", "dsl-cu13",
                      "frontend", "sgl-fastmla", "mla-runtime", "late", "feat-dep")
    a = assign_slices(plan, versions, requires, provided={"late-dep": "1.0", "dsl": "1.5"})
    assert a.unit_of["feat-dep"] == "05-late.txt" and a.reason["feat-dep"] == "via late"
    assert a.unit_of["dsl-cu13"] == "02-kernels.txt"
    assert "late-dep" not in a.unit_of and "dsl" not in a.unit_of  # the base's own stay the base's
    assert a.warnings == ()
    with pytest.raises(LockError, match="feat-dep"):  # without the base's versions nothing reaches it
        assign_slices(plan, versions, requires, provided={})


def test_fallback_dependencies_go_to_the_fallback_file(m):
    # without the late step, mla-runtime is needed by the fallback only
    text = MANIFEST.split("  - name: late")[0]
    path = m.path.parent / "short.yaml"
    path.write_text(text)
    plan = plan_variant(manifest.load(path), "cu130")
    versions = locked("torch", "common", "cuda-bindings", "kern", "helper", "dsl", "dsl-base", "dsl-cu13",
                      "frontend", "sgl-fastmla", "mla-runtime")
    a = assign_slices(plan, versions, requires)
    assert a.unit_of["mla-runtime"] == "04-local.fallback-fastmla.txt"
    assert a.unit_of["common"] == "01-base.txt"


def test_gated_off_step_has_no_roots(m):
    plan = plan_variant(m, "cu129")
    # frontend is not pinned for cu129: kern brings it, with its own dependencies
    versions = locked("torch", "common", "cuda-bindings", "kern", "helper", "dsl", "dsl-base", "dsl-cu13",
                      "frontend", "frontend-only-dep", "sgl-fastmla", "mla-runtime", "late", "late-dep", "feat-dep")
    a = assign_slices(plan, versions, requires)
    assert a.unit_of["frontend"] == "02-kernels.txt"
    assert a.unit_of["frontend-only-dep"] == "02-kernels.txt"
    assert "03-frontend.txt" not in a.unit_of.values()


def test_every_package_in_exactly_one_file(m):
    plan = plan_variant(m, "cu130")
    versions = locked("torch", "common", "cuda-bindings", "kern", "helper", "dsl", "dsl-base", "dsl-cu13",
                      "frontend", "sgl-fastmla", "mla-runtime", "late", "late-dep", "feat-dep")
    a = assign_slices(plan, versions, requires)
    assert sorted(a.unit_of) == sorted(versions)


def test_parse_requirements_formats():
    text = """\
# header
a-pkg==1.0 \\
    --hash=sha256:aa \\
    --hash=sha256:bb
    # via b
B_Pkg[x]==2.0 \\
    --hash=sha256:cc
    # via
    #   -r requirements.in

# The following packages are considered to be unsafe in a requirements file:
setuptools==80.0 \\
    --hash=sha256:dd
"""
    got = parse_requirements(text)
    assert {n: (p.version, p.hashes) for n, p in got.items()} == {
        "a-pkg": ("1.0", ("sha256:aa", "sha256:bb")),
        "b-pkg": ("2.0", ("sha256:cc",)),
        "setuptools": ("80.0", ("sha256:dd",)),
    }
    assert got["a-pkg"].text == "a-pkg==1.0 \\\n    --hash=sha256:aa \\\n    --hash=sha256:bb"
    with pytest.raises(LockError, match="twice"):
        parse_requirements("a==1\na==1\n")


def test_each_package_is_walked_once_however_many_steps_reach_it(tmp_path):
    """Step k's package requires step k-1's, and a dependency of its own: every step reaches the whole chain
    below it, but the requirements of each package are read once (they were read once per step that reached
    it, which grew with steps × packages), and every package still lands where the earliest step puts it."""
    from collections import Counter

    steps = 12
    sets = "".join(f'  - name: s{k}\n    why: "w"\n    packages:\n      - {{requirement: "p{k}==1.0"}}\n'
                   for k in range(steps))
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(MANIFEST.split("wheel_sets:")[0] + "wheel_sets:\n" + sets)
    graph = {f"p{k}": [f"d{k}"] + ([f"p{k - 1}"] if k else []) for k in range(steps)}
    graph.update({f"d{k}": ["shared"] for k in range(steps)}, shared=[])
    reads: Counter = Counter()

    def counted(name, version, extras):
        reads[name, extras] += 1
        return [Requirement(t) for t in graph[name]]

    a = assign_slices(plan_variant(manifest.load(path), "cu130"), locked(*graph), counted)
    assert a.unit_of == {**{f"p{k}": f"{k + 1:02d}-s{k}.txt" for k in range(steps)},
                         **{f"d{k}": f"{k + 1:02d}-s{k}.txt" for k in range(steps)}, "shared": "01-s0.txt"}
    assert a.reason["d5"] == "via p5" and a.reason["shared"] == "via p0"
    assert set(reads.values()) == {1} and len(reads) == len(graph)
