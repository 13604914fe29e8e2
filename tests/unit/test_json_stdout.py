"""With --json, stdout is the one document: prints, consoles and child processes go to stderr."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from pinwheel.commands.common import emit_json, json_stdout

PROGRAM = textwrap.dedent("""
    import subprocess, sys
    from pinwheel.commands.common import emit_json, json_stdout
    with json_stdout(True):
        print("base: progress from a print")
        sys.stdout.write("more progress\\n")
        subprocess.run(["sh", "-c", "echo a child process on fd 1"])
        emit_json({"image_id": "sha256:ab", "tags": ["x:1"]})
        print("after the document")
    print("outside --json: stdout again")
""")


def test_only_the_document_reaches_stdout_under_json():
    proc = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    document, rest = proc.stdout.split("}\n", 1)
    assert json.loads(document + "}") == {"image_id": "sha256:ab", "tags": ["x:1"]}
    assert rest == "outside --json: stdout again\n"  # the real stdout is restored after the command
    for noise in ("base: progress from a print", "more progress", "a child process on fd 1", "after the document"):
        assert noise in proc.stderr, proc.stderr


def test_an_in_memory_stdout_gets_the_document_and_nothing_else(capsys):
    with json_stdout(True):
        print("noise")
        emit_json({"a": 1})
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"a": 1}
    assert "noise" in captured.err


def test_the_bootstrap_notes_go_to_stderr(tmp_path, capsys):
    """ensure_base's progress (debootstrap, import) is never on stdout, --json or not."""
    from pinwheel.image import base

    class Engine:
        def image_exists(self, ref):
            return False

        def import_tarball(self, *args, **kwargs):
            pass

    (tmp_path / "bookworm-py311.tar").write_bytes(b"")
    (tmp_path / "bookworm-py311.python").write_text("3.11.2\n")
    assert base.ensure_base("pinwheel/base:bookworm-py311", "3.11", Engine(), cache_dir=tmp_path, progress=True)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "base: imported pinwheel/base:bookworm-py311" in captured.err
