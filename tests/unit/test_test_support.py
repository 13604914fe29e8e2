"""The tests' own layout: every test directory is a package under `tests`, what test modules share is imported
from tests.support, no test module changes sys.path or imports another test module, and every step kind has
its own test module.

Child interpreters a test starts may be handed a path of their own (a string the test passes them, as
tests/smoke/test_invariant_reuse.py does for the smoke payload): that is code the child runs, not the tests'.
"""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from pinwheel.steps import KINDS

TESTS = Path(__file__).resolve().parents[1]


def python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def package_directories() -> list[Path]:
    return sorted({p.parent for p in python_files()})


def found_outside_tests(name: str) -> bool:
    """Whether the top-level module `name` is importable from somewhere other than tests/ (packaging is both a
    test directory and the library)."""
    spec = importlib.util.find_spec(name)
    places = [spec.origin] if spec and spec.origin else list(spec.submodule_search_locations or ()) if spec else []
    return any(TESTS != Path(place).resolve() and TESTS not in Path(place).resolve().parents for place in places)


def loose_names() -> set[str]:
    """What a test module could import only through a directory put on sys.path: every module and package
    name under tests/ as a top-level name, less those found outside tests/."""
    names = {p.stem for p in python_files() if p.stem != "__init__"} | {d.name for d in package_directories()}
    return {name for name in names - {"tests"} if not found_outside_tests(name)}


def problems(source: str, where: str, loose: set[str]) -> list[str]:
    """Each sys.path use, and each import of a test module or of a module reached through sys.path, in `source`."""
    found = []
    for node in ast.walk(ast.parse(source, where)):
        if isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) \
                and node.value.id == "sys":
            found.append(f"{where}:{node.lineno}: uses sys.path")
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [("." * node.level) + (node.module or "")]
        for name in names:
            parts = name.lstrip(".").split(".")
            if any(part.startswith("test_") or part == "conftest" for part in parts):
                found.append(f"{where}:{node.lineno}: imports the test module {name}")
            elif not name.startswith(".") and parts[0] in loose:
                found.append(f"{where}:{node.lineno}: imports {name} through sys.path (tests.support.{parts[0]}?)")
    return found


def test_every_test_directory_is_a_package():
    missing = [str(d.relative_to(TESTS.parent)) for d in package_directories() if not (d / "__init__.py").is_file()]
    assert not missing, f"directories without __init__.py (their modules would be imported by bare name): {missing}"


def test_no_test_module_changes_sys_path_or_imports_another_test_module():
    loose = loose_names()
    found = [problem for path in python_files()
             for problem in problems(path.read_text(encoding="utf-8"), str(path.relative_to(TESTS.parent)), loose)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("source, expected", [
    ("import sys\nsys.path.insert(0, 'x')\n", "uses sys.path"),
    ("import sys\nsys.path[:0] = ['x']\n", "uses sys.path"),
    ("from test_render import run_scripts\n", "imports the test module test_render"),
    ("from .test_render import run_scripts\n", "imports the test module .test_render"),
    ("from tests.unit.test_render import run_scripts\n", "imports the test module tests.unit.test_render"),
    ("import conftest\n", "imports the test module conftest"),
    ("from manifests import load_text\n", "imports manifests through sys.path"),
], ids=["sys-path-insert", "sys-path-slice", "test-module", "relative-test-module", "packaged-test-module",
        "conftest", "loose-module"])
def test_the_scan_finds_what_it_looks_for(source, expected):
    assert [p.split(": ", 1)[1] for p in problems(source, "t.py", loose_names())][0].startswith(expected)


def test_the_scan_passes_support_imports_and_a_child_interpreters_path():
    source = ("from tests.support.manifests import load_text\nfrom .hostile_index import Static\n"
              "CHILD = 'import sys; sys.path.insert(0, sys.argv[1])'\n")
    assert problems(source, "t.py", loose_names()) == []


def test_every_step_kind_has_its_own_test_module():
    missing = [name for name in KINDS
               if not (TESTS / "unit" / f"test_steps_{name.replace('-', '_')}.py").is_file()]
    assert not missing, f"step kinds without tests/unit/test_steps_<kind>.py: {missing}"


def test_the_test_index_keeps_a_client_s_hangup_off_stderr(tmp_path, capfd):
    """A client that resets its connection is no error of the index's: nothing reaches the output a test
    reads (bump's bad-input test once found socketserver's traceback there)."""
    import socket
    import struct
    import time

    from tests.support.local_index import LocalIndex

    index = LocalIndex(tmp_path)
    url = index.serve()
    try:
        host, port = url.split("//")[1].split("/")[0].split(":")
        with socket.create_connection((host, int(port))) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
        time.sleep(0.3)
    finally:
        index.close()
    assert "Traceback" not in capfd.readouterr().err


def test_the_disk_budget_reclaims_cheapest_first_and_stops_at_the_floor(monkeypatch):
    from tests.support import disk

    free = [10 * disk.GIB]
    done: list[str] = []

    def step(name: str, gain_gib: int):
        def action() -> None:
            done.append(name)
            free[0] += gain_gib * disk.GIB
        return (name, action)

    monkeypatch.setattr(disk, "FLOOR_BYTES", 32 * disk.GIB)
    monkeypatch.setattr(disk, "free_bytes", lambda: free[0])
    monkeypatch.setattr(disk, "answering_engines", lambda: [("main", None)])
    monkeypatch.setattr(disk, "_reclaim_steps", lambda engines: (step("caches", 5), step("test images", 20),
                                                                  step("built images", 40)))
    ledger = disk.DiskLedger()
    disk.keep_floor(ledger, "tests/e2e/test_x.py")
    assert done == ["caches", "test images"]
    assert ledger.reclaims == ["5.0 GiB of caches before tests/e2e/test_x.py (10.0 -> 15.0 GiB free)",
                               "20.0 GiB of test images before tests/e2e/test_x.py (15.0 -> 35.0 GiB free)"]
    disk.keep_floor(ledger, "tests/e2e/test_y.py")  # above the floor: nothing more goes
    assert done == ["caches", "test images"]
