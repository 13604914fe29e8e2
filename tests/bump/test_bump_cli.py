"""`build.py bump`: exit codes, the rich table, the JSON schema (docs/bump.md), --offline."""

from __future__ import annotations

import json
import re

import pytest

from pinwheel.cli import main

TOP_KEYS = {"schema", "image", "variant", "target", "installed_from", "lock_dir", "bumps", "packages", "abi",
            "requirements", "moves", "shared_pins", "notes", "summary", "timing", "platform", "missing_on_platform"}
PACKAGE_KEYS = {"name", "today", "after", "source", "verdict", "to", "reasons", "fix", "pinned_by_manifest", "no_deps"}
FIX_KEYS = {"action", "package", "version", "text", "newest", "checked", "complete", "also_needs"}
ABI_KEYS = {"name", "version", "filename", "source", "abi_class", "declared_torch", "local_label", "built_against",
            "provenance_mismatches", "forward_compatible_from", "sample_unstable_symbols", "verdict", "detail", "checked"}
REQ_KEYS = {"parent", "parent_version", "requirement", "name", "extra", "enforced", "today", "after", "change", "fix"}
MOVE_KEYS = {"name", "today", "after", "kind", "required_by", "newest_acceptable", "conflict", "fix"}
SHARED_KEYS = {"requirement", "name", "version", "status", "violations", "fixes"}
SUMMARY_KEYS = {"ok", "unchecked", "add", "upgrade", "downgrade", "rebuild", "blocked", "blocked_shared_pins", "moves",
                "missing_on_platform", "exit_code"}


def bump_json(world, capsys, *args, manifest=None) -> tuple[int, dict]:
    rc = main(world.argv(*args, "--variant", "cu130", "--json", manifest=manifest))
    return rc, json.loads(capsys.readouterr().out)


def test_json_schema_and_exit_1(bump_world, capsys) -> None:
    rc, data = bump_json(bump_world, capsys, "torch==2.14.1")
    assert rc == 1
    assert data["schema"] == "pinwheel.bump/1"
    assert set(data) == TOP_KEYS
    assert data["summary"]["exit_code"] == 1 and set(data["summary"]) == SUMMARY_KEYS
    assert data["target"] == {"python": "3.11", "platform": "manylinux_2_36_x86_64", "cuda": "13.0"}
    for p in data["packages"]:
        assert set(p) == PACKAGE_KEYS
        assert p["verdict"] in ("ok", "unchecked", "add", "upgrade", "downgrade", "rebuild", "blocked")
        if p["fix"] is not None:
            assert set(p["fix"]) == FIX_KEYS
        if p["verdict"] == "blocked":
            assert p["fix"] and p["fix"]["text"], p  # every blocked row names its nearest fix
    assert all(set(a) == ABI_KEYS for a in data["abi"])
    assert all(set(r) == REQ_KEYS for r in data["requirements"])
    assert all(set(m) == MOVE_KEYS for m in data["moves"])
    assert all(set(s) == SHARED_KEYS for s in data["shared_pins"])
    assert set(data["timing"]) == {"seconds", "index", "abi_cache"}


def test_exit_0_when_nothing_blocks(bump_world, capsys) -> None:
    rc, data = bump_json(bump_world, capsys, "torch==2.14.1", manifest=bump_world.clean_manifest)
    assert rc == 0 and data["summary"]["blocked"] == 0


def test_table(bump_world, capsys) -> None:
    rc = main(bump_world.argv("torch==2.14.1", "--cuda", "13"))
    text = capsys.readouterr().out
    assert rc == 1
    assert text.startswith("bump torch 2.13.0 → 2.14.1 in train:cu130 (Python 3.11, manylinux_2_36_x86_64, CUDA 13.0)")
    for needle in ("Packages", "ABI coupling", "Requirements on what the bump changes", "What moves along",
                   "Shared pins", "upgrade to 9.24.0.43", "rebuild", "blocked", "fix: upgrade oldpin-ext to 1.2",
                   "cuda-bindings==13.4.4: unsatisfiable", "each blocked row names the nearest fix"):
        assert needle in text, needle
    assert re.search(r"checked in \d+\.\d\d s", text)


@pytest.mark.parametrize("args,message", [
    (["nope==1.0"], "unknown package 'nope'"),
    (["torch==2.14.9"], "torch 2.14.9 is not on the index (nearest:"),
    (["torch>=2.14"], "bump needs an exact version"),
    (["torch==oops"], "is not a requirement"),
    (["torch==2.14.1", "torch==2.15.0"], "torch is bumped twice"),
])
def test_bad_input_exits_2(bump_world, capsys, args, message) -> None:
    rc = main(bump_world.argv(*args, "--variant", "cu130"))
    captured = capsys.readouterr()
    assert rc == 2
    assert message in " ".join(captured.err.split())
    assert "Traceback" not in captured.err + captured.out


def test_unknown_variant_exits_2(bump_world, capsys) -> None:
    assert main(bump_world.argv("torch==2.14.1", "--variant", "cu999")) == 2
    assert "--variant cu999: no such variant" in capsys.readouterr().err


def test_offline(bump_world, capsys) -> None:
    # nothing cached yet: could not judge (exit 3), with a clear message
    assert main(bump_world.argv("torch==2.14.1", "--variant", "cu130", "--offline")) == 3
    assert "offline" in capsys.readouterr().err
    rc, online = bump_json(bump_world, capsys, "torch==2.14.1")
    rc_off, offline = bump_json(bump_world, capsys, "torch==2.14.1", "--offline")
    assert rc == rc_off == 1
    assert offline["timing"]["index"]["page_requests"] == 0 and offline["timing"]["abi_cache"]["downloads"] == 0
    online.pop("timing"), offline.pop("timing")
    assert online == offline


def test_unreadable_lock_exits_2(bump_world, capsys) -> None:
    lock = bump_world.root / "images" / "train" / "lock" / "cu130" / "requirements.txt"
    lock.write_text("torch==2.13.0\n")  # no pinwheel-inputs header
    assert main(bump_world.argv("torch==2.14.1", "--variant", "cu130")) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "the lock of variant cu130 is stale" in err and "no pinwheel-inputs header" in err
    assert "Traceback" not in err
