"""`build --cache-to/--cache-from` in buildx's key=value form, checked before anything is built."""
from __future__ import annotations

import pytest

from pinwheel import cli
from pinwheel.image.build import BuildCache, _cache_options
from pinwheel.image.cache_spec import CacheSpec, parse_cache_spec

REF = "127.0.0.1:5000/team/train:cache-cu130"


@pytest.mark.parametrize("text, writing, expected", [
    ("", True, CacheSpec()),
    (REF, True, CacheSpec(REF)),
    (f"type=registry,ref={REF},mode=max", True, CacheSpec(REF, "max")),
    (f"type=registry,ref={REF},mode=min", True, CacheSpec(REF, "min")),
    (f"ref={REF}", True, CacheSpec(REF)),
    (f"type=registry,ref={REF}", False, CacheSpec(REF)),
    (f'"type=registry","ref={REF}"', False, CacheSpec(REF)),  # buildx reads the value as CSV
])
def test_bare_refs_and_buildx_key_value_pairs(text, writing, expected):
    assert parse_cache_spec(text, writing) == expected


@pytest.mark.parametrize("text, writing, fragment", [
    ("type=local,dest=/tmp/cache", True, "type=local is not supported"),
    ("type=gha", False, "type=gha is not supported"),
    ("type=inline", True, "type=inline has no ref"),
    ("type=registry", True, "needs ref=REF"),
    (f"type=registry,ref={REF},mode=all", True, "mode=all is not one of min, max"),
    (f"type=registry,ref={REF},mode=max", False, "unknown key(s) mode"),
    (f"type=registry,ref={REF},compression=zstd", True, "unknown key(s) compression"),
    ("type=registry,ref=Bad/Ref:x", True, "ref 'Bad/Ref:x' is not an image reference"),
    (f"type=registry,ref={REF},ref={REF}", True, "ref is given twice"),
    ("type=registry,,ref=x", True, "is not key=value"),
    ("not a ref", True, "is not an image reference"),
])
def test_what_buildx_would_take_but_pinwheel_cannot_is_refused_naming_it(text, writing, fragment):
    with pytest.raises(ValueError) as info:
        parse_cache_spec(text, writing)
    assert fragment in str(info.value)


def test_a_bad_cache_to_stops_build_before_the_manifest_or_engine_is_read(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no manifest here, no engine asked: the argument alone is refused
    with pytest.raises(SystemExit) as info:
        cli.main(["build", "--cache-to", "type=registry,ref=REG/x:c,mode=max"])
    assert info.value.code == 2
    message = capsys.readouterr().err
    assert "argument --cache-to: ref 'REG/x:c' is not an image reference" in message
    assert "Traceback" not in message


def test_the_mode_reaches_the_engine_call():
    options = _cache_options(BuildCache((REF,), REF, to_mode="min"), on_export=None)
    assert options["cache_to"] == REF and options["cache_mode"] == "min" and options["cache_from"] == (REF,)
