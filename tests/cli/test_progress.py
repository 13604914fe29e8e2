"""Progress on a terminal only: `report` shows what it has read from the index while it waits, on stderr
when stderr is a terminal, and never in a pipe or under --json; `build --progress` picks the log."""
from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

from pinwheel.commands import progress

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = """\
manifest_version: 1
image: {name: t, repository: pinwheel/t}
variants:
  t: {cuda: "13.0", torch: "2.13.0", python: "3.11", platform: manylinux_2_36_x86_64,
      base: "pinwheel/base:bookworm-py311", tag: "t-{date}"}
wheel_sets:
  - name: app
    why: "w"
    packages:
      - {requirement: "app==1.0", why: "w"}
"""


def run_with_terminal_stderr(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str, str]:
    """(exit code, stdout through a pipe, what reached the terminal on stderr)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, str(ROOT / "build.py"), *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    seen = b""
    while True:  # bounded: the child exits, and the terminal then reads end of file
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    out = proc.stdout.read().decode()
    code = proc.wait(timeout=60)
    os.close(leader)
    return code, out, seen.decode(errors="replace")


def project(tmp_path: Path, local_index) -> tuple[str, dict[str, str]]:
    local_index.add("app", "1.0", requires=["lib>=1"])
    local_index.add("lib", "1.2")
    (tmp_path / "wheels_manifest.yaml").write_text(MANIFEST)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PYTHONPATH=str(ROOT), PINWHEEL_CACHE_DIR=str(tmp_path / "cache"), TERM="xterm", COLUMNS="200")
    return local_index.serve(), env


def test_report_shows_its_index_reads_on_a_terminal(tmp_path, local_index):
    url, env = project(tmp_path, local_index)
    code, out, terminal = run_with_terminal_stderr(["report", "--index-url", url, "--refresh"], tmp_path, env)
    assert code == 0, terminal
    assert "index pages fetched" in terminal and "metadata read" in terminal
    assert "index pages fetched" not in out  # the report itself is on stdout, without it


def test_no_progress_in_a_pipe_under_json_or_quiet(tmp_path, local_index):
    url, env = project(tmp_path, local_index)
    piped = subprocess.run([sys.executable, str(ROOT / "build.py"), "report", "--index-url", url, "--refresh"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and "index pages fetched" not in piped.stderr + piped.stdout
    for extra in (["--json"], ["-q"]):
        code, out, terminal = run_with_terminal_stderr(["report", "--index-url", url, "--refresh", *extra],
                                                       tmp_path, env)
        assert code == 0 and "index pages fetched" not in terminal, (extra, terminal)
        if extra == ["--json"]:
            assert json.loads(out)["summary"]["verdict"] == "clean"  # exactly one JSON document


def test_build_progress_modes(monkeypatch):
    with progress.build_log("quiet") as (stream, on_log):
        assert (stream, on_log) == (False, None)
    with progress.build_log("plain") as (stream, on_log):
        assert (stream, on_log) == (True, None)
    monkeypatch.setattr(progress, "on_terminal", lambda: False)
    with progress.build_log("auto") as (stream, on_log):
        assert (stream, on_log) == (True, None)  # a log keeps every line


def test_build_progress_auto_on_a_terminal_shows_the_current_step(monkeypatch):
    leader, follower = pty.openpty()
    terminal = os.fdopen(follower, "w")
    monkeypatch.setattr(sys, "stderr", terminal)
    try:
        with progress.build_log("auto") as (stream, on_log):
            assert stream is False and on_log is not None
            on_log("#7 [image 3/9] RUN pip install torch==2.13.0\n")
            on_log("#7 0.512 Collecting torch\n")  # not a step line: the status keeps the step
        terminal.flush()
        seen = b""
        while select.select([leader], [], [], 0.5)[0]:
            seen += os.read(leader, 65536)
        assert b"build: #7 [image 3/9] RUN pip install torch==2.13.0" in seen
        assert b"Collecting torch" not in seen
    finally:
        terminal.close()
        os.close(leader)
