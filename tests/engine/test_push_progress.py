"""Push progress: the docker CLI's push output as layer events, without an engine.

The CLI writes byte counts only to a terminal, so the adapter runs it under a
pseudo-terminal. A stand-in CLI here prints what `docker push` printed on
this machine (escapes included) only when its stdout is a terminal.
"""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from pinwheel.image.engine import Engine, EngineError, PushEvent, _loopback_registry
from pinwheel.image.push_output import _PushOutputParser, parse_push_line

# Recorded from `docker push` (CLI 28, engine 20.10) on a terminal, 3 layers, one already in the registry.
TTY_OUTPUT = (
    b"The push refers to repository [127.0.0.1:5000/pwexp/t]\r\n\r\n"
    b"\x1b[1A\x1b[2K\rab10f4518ac5: Preparing \r\x1b[1B\r\n"
    b"\x1b[1A\x1b[2K\r9773e58d4c40: Preparing \r\x1b[1B\r\n"
    b"\x1b[1A\x1b[2K\rb2515a7e91cf: Preparing \r\x1b[1B"
    b"\x1b[2A\x1b[2K\r9773e58d4c40: Pushing [>                                                  ]  33.28kB/3MB\r\x1b[2B"
    b"\x1b[3A\x1b[2K\rab10f4518ac5: Pushing [==================================================>]     512B\r\x1b[3B"
    b"\x1b[1A\x1b[2K\rb2515a7e91cf: Layer already exists \r\x1b[1B"
    b"\x1b[2A\x1b[2K\r9773e58d4c40: Pushing [======================>                            ]  1.377MB/3MB\r\x1b[2B"
    b"\x1b[2A\x1b[2K\r9773e58d4c40: Pushing [==================================================>]  3.002MB\r\x1b[2B"
    b"\x1b[3A\x1b[2K\rab10f4518ac5: Pushed \r\x1b[3B"
    b"\x1b[2A\x1b[2K\r9773e58d4c40: Pushed \r\x1b[2B"
    b"1: digest: sha256:c59f6884b9b7579377f57d9817e7371d71b475e984ca47b1e07496f1fdadabf7 size: 946\r\n"
)


def events_of(data: bytes, chunk: int) -> tuple[list[PushEvent], list[str]]:
    events: list[PushEvent] = []
    parser = _PushOutputParser(events.append)
    for i in range(0, len(data), chunk):
        parser.feed(data[i:i + chunk])
    parser.close()
    return events, parser.messages


@pytest.mark.parametrize("chunk", [1, 7, 4096])
def test_terminal_output_becomes_layer_events(chunk: int):
    events, messages = events_of(TTY_OUTPUT, chunk)
    assert [(e.layer, e.status, e.current, e.total) for e in events] == [
        ("ab10f4518ac5", "preparing", None, None),
        ("9773e58d4c40", "preparing", None, None),
        ("b2515a7e91cf", "preparing", None, None),
        ("9773e58d4c40", "pushing", 33_280, 3_000_000),
        ("ab10f4518ac5", "pushing", 512, None),
        ("b2515a7e91cf", "exists", None, None),
        ("9773e58d4c40", "pushing", 1_377_000, 3_000_000),
        ("9773e58d4c40", "pushing", 3_002_000, None),
        ("ab10f4518ac5", "pushed", None, None),
        ("9773e58d4c40", "pushed", None, None),
    ]
    assert messages == ["The push refers to repository [127.0.0.1:5000/pwexp/t]",
                        "1: digest: sha256:c59f6884b9b7579377f57d9817e7371d71b475e984ca47b1e07496f1fdadabf7 size: 946"]


@pytest.mark.parametrize("line, status, current, total", [
    ("0123456789ab: Waiting", "waiting", None, None),
    ("0123456789ab: Mounted from pinwheel/other", "mounted", None, None),
    ("0123456789ab: Retrying in 5 seconds", "retrying", None, None),
    ("0123456789ab: Pushing  1.2GB/5.85GB", "pushing", 1_200_000_000, 5_850_000_000),
    ("0123456789ab: Pushing [=>    ]  10.8MB/190.8MB", "pushing", 10_800_000, 190_800_000),
])
def test_layer_lines(line: str, status: str, current, total):
    event = parse_push_line(line)
    assert event is not None and (event.layer, event.status, event.current, event.total) == (
        "0123456789ab", status, current, total)


def test_other_lines_are_not_layer_events():
    assert parse_push_line("The push refers to repository [x]") is None
    assert parse_push_line("unauthorized: authentication required") is None


def test_loopback_registries():
    assert _loopback_registry("127.0.0.1:5000/a/b:t")
    assert _loopback_registry("localhost:5000/a:t") and _loopback_registry("localhost/a:t")
    assert _loopback_registry("[::1]:5000/a:t")
    assert not _loopback_registry("registry.example:5000/a:t")
    assert not _loopback_registry("pinwheel/train:tag")
    assert not _loopback_registry("10.0.0.1:5000/a:t")


FAKE_CLI = """\
import os, sys
if sys.argv[1:3] != ["image", "push"]:
    sys.exit(9)
if sys.argv[3].endswith(":fail"):
    sys.stdout.write("The push refers to repository [x]\\n")
    sys.stderr.write("unauthorized: authentication required\\n")
    sys.exit(1)
out = sys.stdout.buffer
if os.isatty(1):
    out.write({tty!r})
else:  # what the CLI prints to a pipe: states only, no byte counts
    out.write(b"ab10f4518ac5: Preparing\\nab10f4518ac5: Pushed\\n")
"""


@pytest.fixture
def fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Engine:
    script = tmp_path / "docker.py"
    script.write_text(textwrap.dedent(FAKE_CLI).format(tty=TTY_OUTPUT))
    engine = Engine(client_call=(sys.executable, str(script)))
    layers = ("sha256:b2515a7e91cf" + "0" * 52, "sha256:9773e58d4c40" + "0" * 52, "sha256:ab10f4518ac5" + "0" * 52)
    monkeypatch.setattr(engine, "layers", lambda ref: layers)
    monkeypatch.setattr(engine, "repo_digest", lambda ref: "sha256:" + "c5" * 32)
    return engine


def test_push_runs_the_cli_on_a_terminal_and_reports_each_layer(fake_engine: Engine, monkeypatch):
    blobs = [("sha256:" + "e" * 64, 79_423_770), ("sha256:" + "f" * 64, 3_001_128), ("sha256:" + "d" * 64, 133)]
    monkeypatch.setattr(fake_engine, "_manifest_layers", lambda ref, count: blobs)
    seen: list[PushEvent] = []
    result = fake_engine.push("127.0.0.1:5000/pwexp/t:1", on_event=seen.append)
    assert any(e.status == "pushing" and e.total == 3_000_000 for e in seen), "no byte counts: not on a terminal?"
    assert [(l.state, l.size) for l in result.layers] == [("exists", 79_423_770), ("pushed", 3_001_128), ("pushed", 133)]
    assert (result.bytes_pushed, result.bytes_present, result.sizes_from) == (3_001_261, 79_423_770, "registry")
    assert result.digest == "sha256:" + "c5" * 32


def test_a_push_that_names_layers_by_their_blobs_is_read_by_the_registrys_manifest(fake_engine: Engine, monkeypatch):
    """The containerd image store's push shows each layer by its compressed blob's digest, not its diff id."""
    diff_ids = tuple("sha256:" + c * 64 for c in "123")
    blobs = [("sha256:b2515a7e91cf" + "0" * 52, 79_423_770), ("sha256:9773e58d4c40" + "0" * 52, 3_001_128),
             ("sha256:ab10f4518ac5" + "0" * 52, 133)]
    monkeypatch.setattr(fake_engine, "layers", lambda ref: diff_ids)
    monkeypatch.setattr(fake_engine, "_manifest_layers", lambda ref, count: blobs)
    result = fake_engine.push("127.0.0.1:5000/pwexp/t:1")
    assert [(l.diff_id, l.state, l.size) for l in result.layers] == [
        (diff_ids[0], "exists", 79_423_770), (diff_ids[1], "pushed", 3_001_128), (diff_ids[2], "pushed", 133)]
    assert result.bytes_pushed == 3_001_261


def test_without_the_registrys_sizes_the_progress_totals_are_used(fake_engine: Engine, monkeypatch):
    monkeypatch.setattr(fake_engine, "_manifest_layers", lambda ref, count: None)
    result = fake_engine.push("127.0.0.1:5000/pwexp/t:1")
    assert result.sizes_from == "progress"
    assert [(l.state, l.size) for l in result.layers] == [("exists", None), ("pushed", 3_000_000), ("pushed", None)]


def test_without_a_terminal_the_state_lines_still_arrive(fake_engine: Engine, monkeypatch):
    import pinwheel.image.engine as engine_mod

    monkeypatch.setattr(engine_mod, "_run_in_pty", lambda command, feed: None)
    monkeypatch.setattr(fake_engine, "_manifest_layers", lambda ref, count: None)
    seen: list[PushEvent] = []
    fake_engine.push("127.0.0.1:5000/pwexp/t:1", on_event=seen.append)
    assert [(e.layer, e.status) for e in seen] == [("ab10f4518ac5", "preparing"), ("ab10f4518ac5", "pushed")]


def test_a_failed_push_says_why(fake_engine: Engine):
    with pytest.raises(EngineError, match=r"push of r:fail failed: unauthorized: authentication required"):
        fake_engine.push("r:fail")
