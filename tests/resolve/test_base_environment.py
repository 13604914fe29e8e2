"""Step 0: a base image that already holds a Python environment, on the local index.

The base is a synthetic Inventory (no engine): its packages are installed
before the first step, their requirements come from the inventory, and every
later step's effect on them is a named finding.
"""
from __future__ import annotations

import dataclasses
import io
import json

import pytest
from rich.console import Console

from pinwheel import cli, manifest
from pinwheel.distributions import Distribution, Inventory
from pinwheel.image.inventory import write_inventory
from pinwheel.index import IndexClient
from pinwheel.plan import LockState, plan_variant
from pinwheel.reports.report import to_json
from pinwheel.reports.report_printing import print_report
from pinwheel.resolve import baseline_broken, resolve
from pinwheel.workspace import Workspace

SITE = "/usr/local/lib/python3.11/dist-packages"
DIGEST = "sha256:" + "ab" * 32

HEAD = f"""\
manifest_version: 1
image: {{name: demo, repository: pinwheel/demo}}
variants:
  t: {{cuda: "13.0", torch: "2.13.0", python: "3.11", platform: manylinux_2_28_x86_64,
      base: "vendor/trainer:1@{DIGEST}", tag: "t-{{date}}", environment: base}}
"""


def dist(name, version, requires=(), extras=()):
    return Distribution(name, version, tuple(requires), tuple(extras), "pip", None, (name.replace("-", "_"),),
                        1000, SITE, 0)


# The base the miles training image starts from, in miniature: flashinfer needs the base's tvm-ffi 0.1.11,
# and one requirement (broken-tool -> missing-helper) is already broken in the base alone.
BASE = Inventory("vendor/trainer:1", "sha256:" + "11" * 32, f"vendor/trainer@{DIGEST}", (
    dist("apache-tvm-ffi", "0.1.11"),
    dist("flashinfer-python", "0.6.15.post1", ["apache-tvm-ffi<0.2,>=0.1.11"]),
    dist("trainer", "1.0", ["nvidia-cudnn-cu13==9.20.0.48", "shared-lib>=1.0"]),
    dist("nvidia-cudnn-cu13", "9.20.0.48"),
    dist("shared-lib", "1.0"),
    dist("transformer-engine", "1.0"),
    dist("te-user", "1.0", ["transformer-engine>=1"]),
    dist("broken-tool", "2.0", ["missing-helper>=1"]),
), layers=3)


@pytest.fixture
def index(local_index):
    for v in ("0.1.9", "0.1.10", "0.1.11"):
        local_index.add("apache-tvm-ffi", v)
    local_index.add("old-kernel", "1.0", requires=["apache-tvm-ffi<0.1.11"])
    local_index.add("shared-lib", "1.0")
    local_index.add("shared-lib", "2.0")
    local_index.add("nvidia-cudnn-cu13", "9.20.0.48")
    local_index.add("nvidia-cudnn-cu13", "9.22.0.52")
    local_index.add("te-own", "2.0")
    return local_index


def setup(index, tmp_path, steps: str, inventory: Inventory | None = BASE):
    url = index.serve()
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(HEAD + steps)
    m = manifest.load(path)
    if inventory is not None:
        write_inventory(inventory, Workspace.of(m).inventory_file("t"))
    client = IndexClient(index_url=url, cache_dir=tmp_path / "cache", retries=0)
    return m, client, url


def resolved(m, client, inventory=BASE, **plan_changes):
    plan = plan_variant(m, "t")
    plan = plan.with_resolution(base_inventory=inventory, inventory_state=LockState("ok", "test"), **plan_changes)
    return resolve(plan, client)


def edge(plan, parent, dep):
    hits = [e for e in plan.resolution.edges if e.parent == parent and e.name == dep]
    assert len(hits) == 1, (parent, dep, plan.resolution.edges)
    return hits[0]


def text_of(plan) -> str:
    buf = io.StringIO()
    print_report(plan, Console(file=buf, width=400, highlight=False, emoji=False))
    return buf.getvalue()


KERNELS = """\
steps:
  - name: kernels
    kind: wheels
    why: "an old kernel library"
    packages:
      - {requirement: "old-kernel==1.0"}
"""


def test_the_miles_hazard_by_name(index, tmp_path):
    """A later wheel set drags the base's apache-tvm-ffi 0.1.11 down to 0.1.10: named, and not clean."""
    m, client, _ = setup(index, tmp_path, KERNELS)
    plan = resolved(m, client)
    by = {i.name: i for i in plan.resolution.installed}
    assert (by["apache-tvm-ffi"].version, by["apache-tvm-ffi"].step) == ("0.1.10", "kernels")
    assert (by["flashinfer-python"].source, by["flashinfer-python"].step) == ("base", "base")
    (h,) = plan.resolution.hazards
    assert (h.step, h.package, h.before, h.after, h.earlier_step, h.cause) == (
        "kernels", "apache-tvm-ffi", "0.1.11", "0.1.10", "base", "old-kernel 1.0")
    broken = edge(plan, "flashinfer-python", "apache-tvm-ffi")
    assert (broken.verdict, broken.found) == ("violated", "0.1.10")
    text = text_of(plan)
    assert "wheel set kernels moves the base's apache-tvm-ffi 0.1.11 → 0.1.10 (cause: old-kernel 1.0)" in text
    data = to_json(plan)
    assert data["summary"]["verdict"] == "conflicts" and not data["summary"]["clean"]
    assert data["summary"]["base_moved"] == 1
    assert [x["package"] for x in data["base"]["moved"]] == ["apache-tvm-ffi"]
    # the base's own packages were read from the inventory, never from the index
    assert not index.requests_for("flashinfer") and not index.requests_for("/trainer/")


def test_base_metadata_comes_from_the_inventory(index, tmp_path):
    m, client, _ = setup(index, tmp_path, KERNELS)
    plan = resolved(m, client)
    assert edge(plan, "trainer", "shared-lib").verdict == "satisfied"
    assert {i.name for i in plan.resolution.installed if i.source == "base"} >= {"trainer", "flashinfer-python", "shared-lib"}


def test_baseline_is_base_broken_and_does_not_make_the_image_unclean(index, tmp_path):
    m, client, _ = setup(index, tmp_path, """\
steps:
  - name: app
    kind: wheels
    why: "something harmless"
    packages:
      - {requirement: "te-own==2.0"}
""")
    plan = resolved(m, client)
    e = edge(plan, "broken-tool", "missing-helper")
    assert e.verdict == "base-broken" and e.detail.startswith("base: already broken")
    assert [(x.parent, x.requirement) for x in baseline_broken(plan)] == [("broken-tool", "missing-helper>=1")]
    data = to_json(plan)
    assert data["summary"]["edges"]["base-broken"] == 1
    assert data["summary"]["verdict"] == "clean", data["next_steps"]
    assert "base: already broken" in text_of(plan)


def test_the_image_breaking_a_base_requirement_is_a_conflict(index, tmp_path):
    """trainer requires shared-lib>=1.0 (fine in the base); a wheel set removing it breaks it: violated."""
    m, client, _ = setup(index, tmp_path, KERNELS)
    plan = resolved(m, client)
    assert edge(plan, "broken-tool", "missing-helper").verdict == "base-broken"
    assert edge(plan, "flashinfer-python", "apache-tvm-ffi").verdict == "violated"


def test_a_manifest_pin_makes_the_replacement_intended(index, tmp_path):
    m, client, _ = setup(index, tmp_path, """\
steps:
  - name: libs
    kind: wheels
    why: "the newer shared-lib"
    packages:
      - {requirement: "shared-lib==2.0"}
""")
    plan = resolved(m, client)
    assert plan.resolution.hazards == ()
    (r,) = plan.resolution.replacements
    assert (r.package, r.before, r.after, r.earlier_step, r.step) == ("shared-lib", "1.0", "2.0", "base", "libs")
    data = to_json(plan)
    assert data["summary"]["verdict"] == "clean"
    assert data["summary"]["base_replaced"] == 1
    assert "wheel set libs replaces the base's shared-lib 1.0 → 2.0 (intended)" in text_of(plan)


CUDNN = """\
steps:
  - name: cudnn
    kind: wheels
    why: "a newer cuDNN than torch pins"
    packages:
      - {requirement: "nvidia-cudnn-cu13==9.22.0.52"%s}
"""


def _override(plan):
    """The plan with every cudnn package marked override (until the manifest spells it)."""
    from pinwheel.plan import PlannedPackage

    fields = {f.name for f in dataclasses.fields(PlannedPackage)}
    if "override" in fields:
        mark = lambda p: dataclasses.replace(p, override=True)  # noqa: E731
    else:
        @dataclasses.dataclass(frozen=True)
        class Overriding(PlannedPackage):
            override: bool = True

        mark = lambda p: Overriding(**{f: getattr(p, f) for f in fields})  # noqa: E731
    steps = tuple(dataclasses.replace(s, packages=tuple(mark(p) if p.name == "nvidia-cudnn-cu13" else p
                                                        for p in s.packages)) for s in plan.steps)
    return dataclasses.replace(plan, steps=steps)


def test_override_is_overridden_not_violated(index, tmp_path):
    m, client, _ = setup(index, tmp_path, CUDNN % ', why: "9.22 fixes the attention kernels"')
    plain = resolved(m, client)
    e = edge(plain, "trainer", "nvidia-cudnn-cu13")
    assert (e.verdict, e.found) == ("violated", "9.22.0.52")
    assert to_json(plain)["summary"]["verdict"] == "conflicts"

    plan = plan_variant(m, "t")
    plan = _override(plan.with_resolution(base_inventory=BASE, inventory_state=LockState("ok", "test")))
    over = resolve(plan, client)
    e = edge(over, "trainer", "nvidia-cudnn-cu13")
    assert (e.verdict, e.found, e.requirement) == ("overridden", "9.22.0.52", "nvidia-cudnn-cu13==9.20.0.48")
    assert "on purpose" in e.detail
    data = to_json(over)
    assert data["summary"]["edges"]["overridden"] == 1
    assert data["summary"]["verdict"] == "clean", data["next_steps"]
    assert [(x["parent"], x["name"]) for x in data["base"]["overridden"]] == [("trainer", "nvidia-cudnn-cu13")]


REMOVE = """\
steps:
  - name: drop-te
    kind: remove
    why: "the base's transformer-engine is replaced by our own"
    packages:
      - {name: transformer-engine, why: "we install our own triplet"}
  - name: after
    kind: wheels
    why: "our own"
    packages:
      - {requirement: "te-own==2.0"}
"""


def test_a_removal_takes_the_base_package_out(index, tmp_path):
    from pinwheel.steps import KINDS

    if "remove" not in KINDS:
        pytest.skip("the remove step kind is not registered yet")
    m, client, _ = setup(index, tmp_path, REMOVE)
    plan = resolved(m, client)
    names = {i.name for i in plan.resolution.installed}
    assert "transformer-engine" not in names
    (r,) = plan.resolution.removals
    assert (r.step, r.package, r.version, r.earlier_step, r.why) == (
        "drop-te", "transformer-engine", "1.0", "base", "we install our own triplet")
    e = edge(plan, "te-user", "transformer-engine")
    assert (e.verdict, e.found) == ("violated", None)
    data = to_json(plan)
    assert data["summary"]["removed"] == 1 and data["removals"][0]["package"] == "transformer-engine"
    assert "step drop-te removes transformer-engine 1.0: we install our own triplet" in text_of(plan)


def test_a_removal_that_breaks_a_package_on_purpose_is_removed_not_violated(index, tmp_path):
    steps = REMOVE.replace('      - {name: transformer-engine, why: "we install our own triplet"}',
                           '      - name: transformer-engine\n        why: "we install our own triplet"\n'
                           '        breaks: [{name: te-user, why: "its TE path is unused here"}]')
    m, client, _ = setup(index, tmp_path, steps)
    plan = resolved(m, client)
    e = edge(plan, "te-user", "transformer-engine")
    assert (e.verdict, e.found) == ("removed", None)
    assert e.detail == "removed on purpose by step drop-te: its TE path is unused here"
    data = to_json(plan)
    assert data["summary"]["edges"]["removed"] == 1 and data["summary"]["edges"]["violated"] == 0
    assert data["summary"]["verdict"] == "clean", data["next_steps"]
    assert [x["parent"] for x in data["unmet_by_removal"]] == ["te-user"]
    text = text_of(plan)
    assert "1 unmet by a removal" in text and "removed: te-user 1.0 requires transformer-engine>=1" in text


def test_report_says_a_missing_or_stale_inventory_first(index, tmp_path, capsys):
    m, _, url = setup(index, tmp_path, KERNELS.replace("old-kernel==1.0", "shared-lib==2.0"), inventory=None)
    rc = cli.main(["--manifest", str(m.path), "report", "--variant", "t", "--index-url", url])
    out = capsys.readouterr().out
    assert rc == 1
    assert out.splitlines()[0].startswith("base inventory of t is missing")
    assert "build.py base inventory --variant t" in out

    stale = dataclasses.replace(BASE, digest="vendor/trainer@sha256:" + "cd" * 32)
    write_inventory(stale, Workspace.of(m).inventory_file("t"))
    rc = cli.main(["--manifest", str(m.path), "report", "--variant", "t", "--index-url", url, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert data["summary"]["inventory"] == "stale" and data["summary"]["verdict"] == "conflicts"
    assert data["next_steps"][0].startswith("the base inventory of t is stale")

    write_inventory(BASE, Workspace.of(m).inventory_file("t"))
    rc = cli.main(["--manifest", str(m.path), "report", "--variant", "t", "--index-url", url, "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["inventory"] == "ok", data["next_steps"]
    assert {p["name"]: p["source"] for p in data["packages"]}["flashinfer-python"] == "base"
    assert data["replacements"][0]["package"] == "shared-lib"
    assert rc == 0, data["next_steps"]


@pytest.mark.parametrize("command", [["build"], ["lock"], ["bump", "shared-lib==2.0"]])
def test_commands_refuse_a_missing_inventory(index, tmp_path, capsys, command):
    m, _, _ = setup(index, tmp_path, KERNELS, inventory=None)
    rc = cli.main(["--manifest", str(m.path), *command, "--variant", "t"])
    assert rc == 2
    assert "build.py base inventory --variant t" in capsys.readouterr().err


def test_venv_variant_is_unchanged_by_an_inventory(index, tmp_path):
    """A plain venv does not see the base: an inventory changes nothing."""
    m, client, _ = setup(index, tmp_path, KERNELS)
    plan = plan_variant(m, "t")
    venv = dataclasses.replace(plan, variant=dataclasses.replace(plan.variant, environment="venv")).with_resolution(
        base_inventory=BASE)
    r = resolve(venv, client)
    assert not any(i.source == "base" for i in r.resolution.installed)
    assert r.resolution.hazards == () and to_json(r)["base"] is None


def test_bump_on_a_base_environment_starts_from_the_base(index, tmp_path, capsys):
    """bump reads today's image from step 0 too: the base's shared-lib is what it bumps from."""
    m, _, url = setup(index, tmp_path, KERNELS)
    rc = cli.main(["--manifest", str(m.path), "bump", "shared-lib==2.0", "--variant", "t", "--json",
                   "--index-url", url])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0, data
    (bumped,) = data["bumps"]
    assert (bumped["from"], bumped["to"], bumped["in_image"]) == ("1.0", "2.0", True)
    by = {p["name"]: p for p in data["packages"]}
    assert by["trainer"]["source"] == "base" and by["trainer"]["verdict"] == "ok"
