"""Running the CLI the way a hostile case is judged: a real subprocess under an address-space limit, whose
refusal must be its exit code and one line on stderr, with no traceback."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

MEMORY_KB = 2_000_000  # `ulimit -v`: a read that grows without bound fails here, not on the machine
TIME_S = 120  # a safety net for a hang (the subprocess is killed), not a timing assertion


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
        memory_kb: int = MEMORY_KB) -> subprocess.CompletedProcess:
    """`python -m pinwheel.cli ARGS` in a shell that first limits its virtual memory."""
    argv = " ".join(shlex.quote(a) for a in (sys.executable, "-m", "pinwheel.cli", *args))
    return subprocess.run(["bash", "-c", f"ulimit -v {memory_kb}; exec {argv}"], cwd=cwd,
                          env=dict(os.environ if env is None else env, PYTHONIOENCODING="utf-8", COLUMNS="400"),
                          capture_output=True, text=True, timeout=TIME_S)


def assert_refused(proc: subprocess.CompletedProcess, code: int, *fragments: str) -> str:
    """Exit `code`, exactly one line on stderr holding every fragment, and no traceback anywhere."""
    output = proc.stdout + proc.stderr
    assert "Traceback" not in output and "MemoryError" not in output, output[-3000:]
    assert proc.returncode == code, output[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-3000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]
