"""Every verdict of the resolver, reproduced on a local HTTP index with generated wheels."""
from __future__ import annotations

import json

import pytest

from pinwheel import cli, manifest
from pinwheel.index import IndexClient
from pinwheel.plan import plan_variant
from pinwheel.resolve import resolve

MANIFEST = """\
manifest_version: 1
image: {name: demo, repository: pinwheel/demo}
shared_pins:
  - {requirement: "shared-dsl==1.5", needed_by: [app], why: "one DSL for everyone"}
variants:
  t: {cuda: "13.0", torch: "2.13.0", python: "3.11", platform: manylinux_2_28_x86_64,
      base: "pinwheel/base:bookworm-py311", tag: "t-{date}"}
wheel_sets:
  - name: one
    why: "the app"
    packages:
      - {requirement: "app==1.0"}
      - {requirement: "shared-dsl==1.5"}
  - name: two
    why: "pins an older base-lib"
    packages:
      - {requirement: "pinner==1.0"}
  - name: three
    why: "no-deps installs"
    packages:
      - {requirement: "frontend==1.0", no_deps: true, why: "its dsl extra pins shared-dsl==1.0"}
      - {requirement: "mystery==1.0", no_deps: true, why: "sdist only"}
  - name: four
    why: "moves base-lib back up"
    packages:
      - {requirement: "base-lib==2.0", no_deps: true, why: "needs the new base-lib"}
"""


@pytest.fixture
def demo(local_index, tmp_path):
    local_index.add("base-lib", "1.0")
    local_index.add("base-lib", "2.0")
    local_index.add("shared-dsl", "1.0")
    local_index.add("shared-dsl", "1.5")
    local_index.add("shared-dsl", "2.0")
    local_index.add("helper", "1.0")
    local_index.add("speedup", "1.0")
    local_index.add("app", "1.0", requires=["base-lib>=1.0", "shared-dsl>=1.0", 'pywin-thing; sys_platform == "win32"'],
                    extras={"fast": ["speedup"]})
    local_index.add("pinner", "1.0", requires=["base-lib==1.0"])
    local_index.add("frontend", "1.0", requires=["helper>=1"], extras={"dsl": ["shared-dsl==1.0"]})
    local_index.add_sdist("mystery", "1.0")
    url = local_index.serve()
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(MANIFEST)
    client = IndexClient(index_url=url, cache_dir=tmp_path / "cache", retries=0)
    return manifest.load(path), client, url


def edge(plan, parent, dep):
    hits = [e for e in plan.resolution.edges if e.parent == parent and e.name == dep]
    assert len(hits) == 1, (parent, dep, plan.resolution.edges)
    return hits[0]


def test_every_verdict(demo):
    m, client, _ = demo
    plan = resolve(plan_variant(m, "t"), client)
    versions = {i.name: i.version for i in plan.resolution.installed}
    assert versions == {"app": "1.0", "shared-dsl": "1.5", "base-lib": "2.0", "pinner": "1.0",
                        "frontend": "1.0", "mystery": "1.0"}

    assert edge(plan, "app", "base-lib").verdict == "satisfied"
    assert edge(plan, "app", "pywin-thing").verdict == "marker-excluded"
    assert edge(plan, "app", "speedup").verdict == "extra-only"

    violated = edge(plan, "pinner", "base-lib")
    assert (violated.verdict, violated.found) == ("violated", "2.0")

    base = edge(plan, "frontend", "helper")
    assert (base.verdict, base.detail) == ("suppressed", "would install helper 1.0")
    dsl = edge(plan, "frontend", "shared-dsl")
    assert (dsl.verdict, dsl.extra, dsl.detail) == ("suppressed", "dsl", "would downgrade shared-dsl 1.5 → 1.0")

    unknown = [e for e in plan.resolution.edges if e.parent == "mystery"]
    assert [e.verdict for e in unknown] == ["unchecked"]
    assert "sdist" in unknown[0].detail

    hazards = [(h.step, h.package, h.before, h.after, h.earlier_step) for h in plan.resolution.hazards]
    assert hazards == [("two", "base-lib", "2.0", "1.0", "one"), ("four", "base-lib", "1.0", "2.0", "two")]
    assert plan.resolution.hazards[0].cause == "pinner 1.0"


def test_lock_removes_order_hazards_but_remembers_them(demo):
    m, client, _ = demo
    locked = {"one": {"app": "1.0", "shared-dsl": "1.5", "base-lib": "2.0"}, "two": {"pinner": "1.0"},
              "three": {}, "four": {}}
    plan = resolve(plan_variant(m, "t"), client, locked=locked)
    assert plan.resolution.locked and plan.resolution.hazards == ()
    assert [h.package for h in plan.resolution.unlocked_hazards] == ["base-lib", "base-lib"]


def test_a_package_in_two_slices_is_a_hazard(demo):
    m, client, _ = demo
    locked = {"one": {"app": "1.0", "shared-dsl": "1.5", "base-lib": "2.0"}, "two": {"pinner": "1.0", "base-lib": "1.0"},
              "three": {}, "four": {}}
    plan = resolve(plan_variant(m, "t"), client, locked=locked)
    assert [(h.package, h.before, h.after) for h in plan.resolution.hazards][0] == ("base-lib", "2.0", "1.0")


def test_report_json_and_exit_code(demo, capsys, monkeypatch, tmp_path):
    m, _, url = demo
    monkeypatch.chdir(tmp_path)
    rc = cli.main(["--manifest", str(m.path), "report", "--variant", "t", "--json", "--index-url", url])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert data["schema"] == "pinwheel.report/1"
    assert data["summary"]["edges"]["violated"] == 1
    assert data["summary"]["hazards"] == 2
    (pin,) = data["shared_pins"]
    assert pin["name"] == "shared-dsl" and pin["installed"] == "1.5"
    assert [(x["parent"], x["verdict"], x["extra"]) for x in pin["excluded_by"]] == [("frontend", "suppressed", "dsl")]
    features = {(f["package"], f["extra"]): f for f in data["no_deps_features"]}
    assert features[("frontend", None)]["missing"] == ["helper>=1"]
    assert features[("frontend", "dsl")]["provided"] is False


def test_report_offline_from_cache(demo, capsys, tmp_path):
    m, _, url = demo
    assert cli.main(["--manifest", str(m.path), "report", "--variant", "t", "--json", "--index-url", url]) == 1
    first = capsys.readouterr().out
    assert cli.main(["--manifest", str(m.path), "report", "--variant", "t", "--json", "--index-url", url,
                     "--offline"]) == 1
    assert capsys.readouterr().out == first


def test_nothing_satisfies_is_a_finding_not_bad_input(local_index, tmp_path, capsys):
    local_index.add("app", "1.0", requires=["missing-dep>=1"])
    local_index.add("missing-dep", "0.5")
    url = local_index.serve()
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(MANIFEST.split("  - name: two")[0].replace('      - {requirement: "shared-dsl==1.5"}\n', ""))
    rc = cli.main(["--manifest", str(path), "report", "--variant", "t", "--index-url", url, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    (clash,) = data["clashes"]
    assert clash["package"] == "missing-dep" and clash["wanted"] == ["missing-dep>=1 (from app 1.0)"]
    assert clash["reasons"] == ["no release of missing-dep satisfies >=1 (newest: 0.5)"]


TORCH_FROM_EXTRA = """\
manifest_version: 1
image: {name: demo, repository: pinwheel/demo}
variants:
  cu129: {cuda: "12.9", torch: "2.13.0", python: "3.11", platform: manylinux_2_28_x86_64,
          base: "pinwheel/base:bookworm-py311", tag: "t-{date}", torch_index_env: DEMO_TORCH_INDEX}
wheel_sets:
  - name: torch
    why: "torch from the variant's own index"
    packages:
      - {requirement: "torch==2.13.0"}
"""


def test_torch_from_the_variants_extra_index(local_index, tmp_path, capsys, monkeypatch):
    local_index.add("torch", "2.13.0", requires=["nvidia-cudnn-cu13==9.20.0.48"])  # the default index's build
    default_url = local_index.serve()
    extra = type(local_index)(tmp_path / "extra-index")
    try:
        extra.add("torch", "2.13.0+cu129", requires=["nvidia-cudnn-cu12==9.10.2.21"])
        extra.add("nvidia-cudnn-cu12", "9.10.2.21")
        local_index.add("nvidia-cudnn-cu12", "9.10.2.21")
        path = tmp_path / "wheels_manifest.yaml"
        path.write_text(TORCH_FROM_EXTRA)
        monkeypatch.delenv("DEMO_TORCH_INDEX", raising=False)
        # torch cannot be read without its index: could not judge, which is never clean
        assert cli.main(["--manifest", str(path), "report", "--json", "--index-url", default_url]) == 3
        data = json.loads(capsys.readouterr().out)
        assert data["summary"]["verdict"] == "unchecked" and data["summary"]["clean"] is False
        (torch_edge,) = [e for e in data["edges"] if e["parent"] == "torch"]
        assert torch_edge["verdict"] == "unchecked"
        assert "$DEMO_TORCH_INDEX, which is not set" in torch_edge["detail"]

        monkeypatch.setenv("DEMO_TORCH_INDEX", extra.serve())
        assert cli.main(["--manifest", str(path), "report", "--json", "--index-url", default_url]) == 0
        data = json.loads(capsys.readouterr().out)
        assert {p["name"]: p["version"] for p in data["packages"]} == {"torch": "2.13.0+cu129",
                                                                       "nvidia-cudnn-cu12": "9.10.2.21"}
    finally:
        extra.close()


def test_online_the_picks_of_suppressed_edges_are_made_before_judging(demo):
    """prefetch_suppressed reads what judging's would_do asks for (helper's page and METADATA, the extra's
    shared-dsl 1.0), so that judging after it asks the index nothing, and says what it said without it."""
    from pinwheel.resolve.resolver import Resolver

    m, client, url = demo
    plan = plan_variant(m, "t")
    resolver = Resolver(client)
    installed, _hazards, _clashes, _unjudged = resolver.as_pip_would(plan)
    resolver.prefetch_suppressed(plan, installed)
    asked = dict(client.stats)
    edges = resolver.judge(plan, installed)
    assert dict(client.stats) == asked
    alone = Resolver(IndexClient(index_url=url, cache_dir=client.cache_dir, retries=0))
    assert alone.judge(plan, installed) == edges
    helper = next(e for e in edges if e.parent == "frontend" and e.name == "helper")
    assert helper.detail == "would install helper 1.0"
