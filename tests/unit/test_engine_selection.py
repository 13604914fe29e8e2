"""Where engine commands run and where the cache goes, as the CLI reads it (no engine needed)."""
from __future__ import annotations

import argparse

import pytest

from pinwheel.cli import _global_options_after_subcommand, build_parser
from pinwheel.commands.common import UsageError, engine_for
from pinwheel.image.build import cache_ref
from pinwheel.image.cache_spec import CacheSpec
from pinwheel.image.engine import Engine, EngineError


def parse(*argv: str) -> argparse.Namespace:
    parser = build_parser()
    _global_options_after_subcommand(parser)  # as main() does
    return parser.parse_args(list(argv))


def test_engine_options_before_or_after_the_command():
    before = parse("--engine-host", "unix:///run/b.sock", "--builder", "ci", "build")
    assert (before.engine_host, before.builder) == ("unix:///run/b.sock", "ci")
    after = parse("build", "--engine-host", "unix:///run/b.sock", "--builder", "ci")
    assert (after.engine_host, after.builder) == ("unix:///run/b.sock", "ci")


def test_cache_flags_bare_or_with_a_ref():
    bare = parse("build", "--cache-from", "--cache-to")
    assert bare.cache_from == [CacheSpec()] and bare.cache_to == CacheSpec()  # ref None: the variant's default
    named = parse("build", "--cache-from", "r/a:c", "--cache-from", "r/b:c", "--cache-to", "r/a:c")
    assert [c.ref for c in named.cache_from] == ["r/a:c", "r/b:c"] and named.cache_to == CacheSpec("r/a:c")
    neither = parse("build")
    assert neither.cache_from == [] and neither.cache_to is None and neither.registry == "127.0.0.1:5000"


def test_engine_for_reads_flags_then_variables(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PINWHEEL_BUILDER", "from-env")
    monkeypatch.setenv("PINWHEEL_ENGINE_HOST", "tcp://env-host:2376")
    engine = engine_for(argparse.Namespace())
    assert (engine.builder, engine.host) == ("from-env", "tcp://env-host:2376")
    engine = engine_for(argparse.Namespace(builder="flag", engine_host="unix:///run/flag.sock"))
    assert (engine.builder, engine.host) == ("flag", "unix:///run/flag.sock")
    assert engine.describe() == "builder flag on engine unix:///run/flag.sock"
    monkeypatch.delenv("PINWHEEL_ENGINE_HOST")
    with pytest.raises(UsageError, match="two engines"):
        engine_for(argparse.Namespace(engine_host="unix:///a.sock", engine_context="other"))


def test_every_cli_call_names_the_engine():
    assert Engine(host="unix:///run/b.sock")._client_call == ["docker", "--host", "unix:///run/b.sock"]
    assert Engine(context="remote")._client_call == ["docker", "--context", "remote"]
    assert Engine()._client_call == ["docker"] and Engine().describe() == "the local engine"
    with pytest.raises(EngineError):
        Engine(host="unix:///a.sock", context="b")


def test_default_cache_ref_per_variant_and_platform():
    from pinwheel import manifest
    from pinwheel.plan import plan_variant
    from pathlib import Path

    m = manifest.load(Path(__file__).resolve().parents[2] / "wheels_manifest.yaml")
    assert cache_ref(plan_variant(m, "cu130"), "127.0.0.1:5000/ns") == "127.0.0.1:5000/ns/pinwheel/train:cache-cu130"
    assert cache_ref(plan_variant(m, "cu129"), "registry.invalid:5000") == "registry.invalid:5000/pinwheel/train:cache-cu129"
