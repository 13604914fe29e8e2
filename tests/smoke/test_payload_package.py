"""The payload package (pinwheel/smoke) and the one zipapp file the build ships it as."""
from __future__ import annotations

import ast
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support.payload_archive import PAYLOAD

from pinwheel.image import payload
from pinwheel.workspace import InContext, InImage

PACKAGE = Path(__file__).resolve().parents[2] / "pinwheel" / "smoke"
# Imported inside functions, on purpose: what the checks exercise in the image (torch and the kernel
# packages), and pip's own packaging where pip is there. Never at module level.
CHECKED_IN_THE_IMAGE = {"torch", "cudnn", "flash_mla", "pip"}


def _imports(tree: ast.AST):
    """(top-level name, line, at module level) of every import; relative ones are the package's own."""
    top = {id(n) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
           and not any(isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for p in _parents(tree, n))}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0], node.lineno, id(node) in top
        elif isinstance(node, ast.ImportFrom) and not node.level:
            yield (node.module or "").split(".")[0], node.lineno, id(node) in top


def _parents(tree: ast.AST, target: ast.AST) -> list:
    """The nodes enclosing `target`, outermost first."""
    def walk(node, chain):
        for child in ast.iter_child_nodes(node):
            if child is target:
                return chain + [node]
            found = walk(child, chain + [node])
            if found is not None:
                return found
        return None
    return walk(tree, []) or []


def test_the_package_imports_only_the_standard_library_and_itself():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 10
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    found, bad = set(), []
    for path in modules:
        for name, line, at_top in _imports(ast.parse(path.read_text(), str(path))):
            found.add(name)
            where = f"{path.relative_to(PACKAGE)}:{line}: import {name}"
            if name == payload.ARCHIVE_PACKAGE or name in stdlib:
                continue
            if at_top or name not in CHECKED_IN_THE_IMAGE:
                bad.append(where)
    assert bad == []
    assert "pinwheel" not in found and "packaging" not in found
    assert CHECKED_IN_THE_IMAGE <= found  # the allowance is used, so it cannot hide a stray import


def test_the_import_test_sees_a_third_party_import():
    """The AST walk above finds a module-level import of a third-party package (it would fail the test)."""
    tree = ast.parse("import os\nimport yaml\ndef f():\n    import torch\n")
    assert sorted(_imports(tree)) == [("os", 1, True), ("torch", 4, False), ("yaml", 2, True)]


def test_the_archive_is_the_same_bytes_every_time_and_holds_the_package():
    first, second = payload.build(), payload.build()
    assert first == second == PAYLOAD.read_bytes()
    assert first.startswith(b"#!/usr/bin/env python3\n")
    with zipfile.ZipFile(PAYLOAD) as archive:
        infos = archive.infolist()
        names = [i.filename for i in infos]
        assert names[0] == "__main__.py" and names[1:] == sorted(names[1:])
        assert all(i.date_time == (1980, 1, 1, 0, 0, 0) and i.compress_type == zipfile.ZIP_STORED for i in infos)
        assert archive.read("__main__.py") == (PACKAGE / "archive_main.py").read_bytes()
        shipped = {n.removeprefix(f"{payload.ARCHIVE_PACKAGE}/") for n in names[1:]}
        assert shipped == {str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")} - {"archive_main.py"}
    assert hashlib.sha256(first).hexdigest() == hashlib.sha256(PAYLOAD.read_bytes()).hexdigest()


def test_the_archive_runs_as_the_image_runs_it():
    proc = subprocess.run([sys.executable, str(PAYLOAD), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "--expect" in proc.stdout and "--level {static,import,gpu}" in proc.stdout
    proc = subprocess.run([sys.executable, "-I", str(PAYLOAD), "--level", "gpu"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "--expect" in proc.stderr and "Traceback" not in proc.stderr


def test_the_image_gets_the_archive_under_its_one_name():
    assert InImage.SMOKE_PAYLOAD.endswith("/" + InContext.SMOKE_PAYLOAD) and PAYLOAD.name == InContext.SMOKE_PAYLOAD
