"""Every bump verdict on compiled wheels of each ABI class, served by the local test index."""

from __future__ import annotations

import pytest

from pinwheel import manifest as manifest_mod
from pinwheel.reports.bump import BumpInputError, BumpReport, bump, parse_bumps
from pinwheel.index import IndexClient


def run(world, *reqs: str, manifest=None, offline: bool = False) -> BumpReport:
    m = manifest_mod.load(manifest or world.manifest)
    client = IndexClient(index_url=world.url, cache_dir=m.path.parent / ".cache" / "index", offline=offline,
                         max_age=3600)
    return bump(m, "cu130", reqs, client, offline=offline)


def rows(report: BumpReport) -> dict:
    return {r.name: r for r in report.packages}


def test_torch_bump_every_verdict(bump_world) -> None:
    report = run(bump_world, "torch==2.14.1")
    assert report.installed_from == "lock"
    assert report.lock_dir == "images/train/lock/cu130"
    assert report.bumps == [{"name": "torch", "from": "2.13.0", "to": "2.14.1", "in_image": True}]
    r = rows(report)

    # a local wheel on the unstable C++ ABI: rebuild, with its provenance
    assert r["fancy-ext"].verdict == "rebuild"
    assert r["fancy-ext"].fix.action == "rebuild"
    abi = {f.name: f for f in report.abi}
    fancy = abi["fancy-ext"]
    assert (fancy.source, fancy.abi_class, fancy.local_label) == ("local", "unstable", "cu130torch2.13")
    assert fancy.declared_torch == ">=2.13"
    assert fancy.built_against == {"torch": "2.13.0+cu130", "cuda": "13.0", "arch_list": []}
    assert fancy.provenance_mismatches == []
    assert "2.13.0+cu130" in fancy.detail and "undefined symbol" in fancy.detail
    assert fancy.sample_unstable_symbols and all(s.startswith("_Z") for s in fancy.sample_unstable_symbols)

    # a local wheel on the stable ABI: ok, forward compatible; its manifest provenance disagrees
    stable = abi["stable-local"]
    assert (stable.abi_class, stable.verdict, stable.forward_compatible_from) == ("stable", "ok", "2.13")
    assert stable.detail == "stable ABI, forward compatible from torch 2.13"
    assert stable.provenance_mismatches == [
        "stable-local 1.0: manifest says it was built against torch 2.12.0, but the wheel requires torch>=2.13"]
    assert r["stable-local"].verdict == "ok"

    # index wheels that require torch: downloaded and classified
    assert (abi["unstable-kern"].abi_class, abi["unstable-kern"].verdict) == ("unstable", "rebuild")
    assert abi["unstable-kern"].source == "index"
    assert (abi["stable-kern"].abi_class, abi["stable-kern"].verdict) == ("stable", "ok")
    # one build per torch release, picked at import: 2.13 is there, 2.14 is not
    assert (abi["multi-kern"].abi_class, abi["multi-kern"].verdict) == ("unstable", "rebuild")
    assert "one build per torch release (2.12 and 2.13): today's 2.13 is covered, 2.14 is not" in abi["multi-kern"].detail
    assert r["unstable-kern"].verdict == "rebuild"
    # pure-Python wheels that name torch are not downloaded
    assert (abi["oldpin-ext"].abi_class, abi["oldpin-ext"].checked) == ("none", "pure-python")

    # the fallback (local flash_x wheel missing): stable ABI, and the bump unblocks its torch>=2.14.1
    fb = abi["flash-fallback"]
    assert (fb.source, fb.abi_class, fb.verdict, fb.forward_compatible_from) == ("fallback", "stable", "ok", "2.14.1")
    unblocks = [x for x in report.requirements if x.change == "unblocks"]
    assert [(x.parent, x.requirement, x.enforced, x.today, x.after) for x in unblocks] == [
        ("flash-fallback", "torch>=2.14.1", False, "violated", "satisfied")]
    assert any("missing" in n and "flash-fallback==1.0.0" in n for n in report.notes)

    # a manifest pin on the old torch: blocked, nearest fix found by reading newer releases
    assert r["oldpin-ext"].verdict == "blocked"
    fix = r["oldpin-ext"].fix
    assert (fix.action, fix.version, fix.newest) == ("upgrade", "1.2", "1.2")
    assert fix.checked == 3  # 1.1, 1.2 and 1.3 were read
    breaks = {x.parent: x for x in report.requirements if x.change == "breaks"}
    assert breaks["oldpin-ext"].requirement == "torch==2.13.0"
    assert (breaks["oldpin-ext"].today, breaks["oldpin-ext"].after) == ("satisfied", "violated")

    # a transitive package from the lock that excludes the new torch: a re-lock moves it
    assert (r["transitive-ext"].verdict, r["transitive-ext"].to) == ("upgrade", "2.1")
    assert r["transitive-ext"].fix.newest == "2.2"

    # the stand-in's own pins move along
    moves = {m.name: m for m in report.moves}
    assert (moves["nvidia-cudnn-cu13"].today, moves["nvidia-cudnn-cu13"].after, moves["nvidia-cudnn-cu13"].kind) == \
        ("9.20.0.48", "9.24.0.43", "upgrade")
    assert moves["nvidia-cudnn-cu13"].required_by == [
        {"parent": "torch", "parent_version": "2.14.1", "requirement": "nvidia-cudnn-cu13==9.24.0.43",
         "was": "nvidia-cudnn-cu13==9.20.0.48"}]
    assert (moves["triton"].today, moves["triton"].after, moves["triton"].newest_acceptable) == ("3.7.1", "3.8.1", "3.8.1")
    assert (r["triton"].verdict, r["triton"].to) == ("upgrade", "3.8.1")
    assert "filelock" not in moves  # unchanged requirement, unchanged version

    # ... and one of them runs into the shared pin: unsatisfiable
    cb = moves["cuda-bindings"]
    assert cb.kind == "conflict" and cb.conflict == "shared pin cuda-bindings==13.4.4"
    assert cb.fix.version == "13.5.0" and cb.fix.also_needs == ["consumer 1.0 requires cuda-bindings~=13.4.4"]
    assert r["cuda-bindings"].verdict == "blocked"
    shared = {s.name: s for s in report.shared_pins}
    assert shared["cuda-bindings"].status == "unsatisfiable"
    assert shared["cuda-bindings"].violations == [
        {"parent": "torch", "parent_version": "2.14.1", "requirement": "cuda-bindings>=13.5.0", "extra": None,
         "enforced": True, "new": True}]
    assert any("move shared pin cuda-bindings to 13.5.0 (but consumer 1.0 requires cuda-bindings~=13.4.4)" in f
               for f in shared["cuda-bindings"].fixes)
    assert "no release of torch after 2.13.0 up to 2.14.1 accepts cuda-bindings 13.4.4" in shared["cuda-bindings"].fixes

    # so the bump itself is blocked, and says by what
    assert report.packages[0].name == "torch" and r["torch"].verdict == "blocked"
    assert any("shared pin cuda-bindings==13.4.4 becomes unsatisfiable" in x for x in r["torch"].reasons)
    assert report.summary["blocked"] == 3 and report.summary["rebuild"] == 3
    assert report.summary["exit_code"] == 1 and report.blocked


def test_stable_abi_needs_a_newer_torch_blocks(bump_world) -> None:
    report = run(bump_world, "torch==2.14.0")
    fb = {f.name: f for f in report.abi}["flash-fallback"]
    assert (fb.verdict, fb.forward_compatible_from) == ("blocked", "2.14.1")
    row = {r.name: r for r in report.packages}["flash-fallback"]
    assert row.verdict == "blocked"
    assert (row.fix.action, row.fix.package, row.fix.version) == ("upgrade", "torch", "2.14.1")
    # --no-deps hides its torch>=2.14.1 from pip: still violated, not this bump's new break
    req = [x for x in report.requirements if x.parent == "flash-fallback"]
    assert [(x.change, x.enforced) for x in req] == [("still-violated", False)]


def test_clean_bump_blocks_nothing(bump_world) -> None:
    report = run(bump_world, "torch==2.14.1", manifest=bump_world.clean_manifest)
    assert report.installed_from == "pip-per-wheel-set"
    assert not report.blocked and report.summary["exit_code"] == 0
    r = {x.name: x for x in report.packages}
    assert (r["nvidia-cudnn-cu13"].verdict, r["nvidia-cudnn-cu13"].to) == ("upgrade", "9.24.0.43")
    assert r["stable-kern"].verdict == "ok"
    # with no lock, today's cuda-bindings is the newest that torch 2.13.0 allows, which 2.14.1 keeps
    assert "cuda-bindings" not in {m.name for m in report.moves if m.kind != "stays"}


def test_warm_run_reads_only_caches(bump_world) -> None:
    cold = run(bump_world, "torch==2.14.1")
    assert cold.timing["abi_cache"]["downloads"] == 4  # unstable-kern, stable-kern, multi-kern, flash-fallback
    warm = run(bump_world, "torch==2.14.1")
    assert warm.timing["index"] == {"page_requests": 0, "metadata_requests": 0, "range_requests": 0, "downloads": 0}
    assert warm.timing["abi_cache"]["downloads"] == 0
    assert warm.timing["abi_cache"]["classified"] == 0
    assert warm.timing["abi_cache"]["hits"] == 6  # 2 local + 4 index wheels, by sha256
    offline = run(bump_world, "torch==2.14.1", offline=True)
    strip = lambda rep: {k: v for k, v in rep.to_json().items() if k != "timing"}  # noqa: E731
    assert strip(offline) == strip(warm) == strip(cold)


def test_offline_without_cache_is_bad_input(bump_world) -> None:
    with pytest.raises(Exception) as exc:
        run(bump_world, "torch==2.14.1", offline=True)
    assert "offline" in str(exc.value)


@pytest.mark.parametrize("text,message", [
    ("torch", "exact version"),
    ("torch>=2.14", "exact version"),
    ("torch==2.14.*", "exact version"),
    ("torch==", "not a requirement"),
    ("torch==2.14.1; python_version > '3'", "without URL or marker"),
])
def test_parse_bumps_rejects(text, message) -> None:
    with pytest.raises(BumpInputError, match=message):
        parse_bumps([text])


def test_unknown_package_and_version(bump_world) -> None:
    with pytest.raises(BumpInputError, match="unknown package 'nope'"):
        run(bump_world, "nope==1.0")
    with pytest.raises(BumpInputError, match=r"torch 2\.14\.9 is not on the index \(nearest: .*2\.14\.1"):
        run(bump_world, "torch==2.14.9")
