"""A `verify` snippet that Python's compiler cannot take (nested thousands deep) is a located manifest error,
exit 2 in one line, never a RecursionError traceback."""
from __future__ import annotations

import pytest

from .bounded import assert_refused, cli
from .locked_project import write_manifest


@pytest.mark.parametrize("snippet", ["-" * 3990 + "1", "~" * 3990 + "1", "+-" * 1995 + "1"])
def test_a_deeply_nested_verify_snippet_is_refused_at_its_line(tmp_path, snippet: str):
    steps = f"""\
  - name: core
    why: "a package whose check is nested too deep"
    packages:
      - requirement: "pwh-top==1.0"
        verify: {{python: "{snippet}"}}
"""
    manifest = write_manifest(tmp_path, steps)
    line = manifest.read_text().splitlines().index(f'        verify: {{python: "{snippet}"}}') + 1
    proc = cli("--manifest", str(manifest), "report", "--offline")
    assert_refused(proc, 2, f"{manifest}:{line}:", "verify.python", "nested too deeply")
