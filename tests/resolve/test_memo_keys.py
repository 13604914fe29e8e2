"""Every memo key holds every input of its answer: each input changed alone is a miss (compute runs again),
and the same inputs are a hit. The torch-ABI memo once left out the platform, so an arm64 report gave the
amd64 one its aarch64 wheels."""
from __future__ import annotations

import dataclasses

import pytest

from tests.support.manifests import load_text, two_platform_manifest
from pinwheel.plan import Installed, plan_platforms
from pinwheel.resolve import memoized
from pinwheel.resolve.memo import resolve_memo_key, torch_abi_memo_key


class Source:
    def __init__(self, *urls: str):
        self.memo_key = tuple(urls)


@pytest.fixture
def plans(tmp_path):
    m = load_text(two_platform_manifest("pwt-kern==1.0", base_why="base", kernel_why="kernels"), tmp_path)
    amd64, arm64 = plan_platforms(m, "cu130")
    assert amd64.target != arm64.target and amd64.container_platform != arm64.container_platform
    installed = (Installed("pwt-torchy", "2.0", "base", "index", False, (), None),
                 Installed("pwt-kern", "1.0", "kernels", "index", False, (), None))
    return [p.with_resolution(installed=installed) for p in (amd64, arm64)]


def misses(tmp_path, baseline: tuple, variants: dict[str, tuple]) -> dict[str, bool]:
    """Whether each variant key missed the memo that `baseline` filled."""
    computed = []

    def compute(label):
        return lambda: computed.append(label) or label

    cache = tmp_path / "cache"
    assert memoized(cache, baseline, compute("baseline")) == "baseline"
    assert memoized(cache, baseline, compute("again")) == "baseline" and computed == ["baseline"]  # a hit
    result = {}
    for name, key in variants.items():
        before = len(computed)
        memoized(cache, key, compute(name))
        result[name] = len(computed) > before
    return result


def test_the_resolve_key_misses_when_any_input_changes_alone(tmp_path, plans):
    amd64, arm64 = plans
    args = dict(plan=amd64, locked={"kernels": {"pwt-kern": "1.0"}}, wheels=[("k.whl", 10, 1)],
                source=Source("http://127.0.0.1:1/simple"))
    changed = dict(plan=arm64, locked={"kernels": {"pwt-kern": "1.1"}}, wheels=[("k.whl", 11, 1)],
                   source=Source("http://127.0.0.1:2/simple"))
    baseline = resolve_memo_key(**args)
    found = misses(tmp_path, baseline, {name: resolve_memo_key(**{**args, name: value})
                                        for name, value in changed.items()})
    assert found == dict.fromkeys(changed, True)


def test_the_torch_abi_key_misses_when_any_input_changes_alone(tmp_path, plans):
    amd64, arm64 = plans
    other_version = amd64.with_resolution(installed=amd64.resolution.installed[:1] + (
        dataclasses.replace(amd64.resolution.installed[1], version="1.1"),))
    args = dict(resolved=amd64, wheels=[], source=Source("http://127.0.0.1:1/simple"),
                default_source=Source("http://127.0.0.1:1/simple"), offline=False, classifier="abc")
    changed = {"resolved (platform)": ("resolved", arm64), "resolved (a version)": ("resolved", other_version),
               "wheels": ("wheels", [("k.whl", 10, 1)]), "source": ("source", Source("http://127.0.0.1:2/simple")),
               "default_source": ("default_source", Source("http://127.0.0.1:3/simple")),
               "offline": ("offline", True), "classifier": ("classifier", "def")}
    baseline = torch_abi_memo_key(**args)
    found = misses(tmp_path, baseline, {label: torch_abi_memo_key(**{**args, name: value})
                                        for label, (name, value) in changed.items()})
    assert found == dict.fromkeys(changed, True)
    assert set(args) == {name for name, _ in changed.values()}  # every input is varied
