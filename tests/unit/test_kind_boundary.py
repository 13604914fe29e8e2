"""The step-kind boundary: image/ and lock/ ask a step's kind (StepKind's hooks) and never name a kind.

Read from the source files themselves: an import of a kind's module, a kind's class, or a kind's name
compared with a step's `kind` anywhere under pinwheel/image or pinwheel/lock fails, naming the file and line.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pinwheel
from pinwheel.steps import KINDS

PACKAGE = Path(pinwheel.__file__).parent
SEALED = ("image", "lock")  # the rooms that build and lock whatever kinds the registry lists


def _kind_classes() -> set[str]:
    names = set()
    for name in KINDS:
        tree = ast.parse((PACKAGE / "steps" / f"{name.replace('-', '_')}.py").read_text())
        names |= {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    return names


def _leaks(path: Path, kinds: set[str], classes: set[str]) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if "steps" in parts and parts[-1] in kinds:
                found.append(f"{path.name}:{node.lineno}: imports the kind module {node.module}")
            for alias in node.names:
                if alias.name in classes and "steps" in parts:
                    found.append(f"{path.name}:{node.lineno}: imports the kind class {alias.name}")
                elif alias.name in kinds and parts[-1] == "steps":
                    found.append(f"{path.name}:{node.lineno}: imports the kind module {alias.name}")
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            names_kind = any(isinstance(s, ast.Attribute) and s.attr == "kind" for s in sides)
            literal = [s.value for s in sides if isinstance(s, ast.Constant) and s.value in kinds]
            if names_kind and literal:
                found.append(f"{path.name}:{node.lineno}: compares a step's kind with {literal[0]!r}")
    return found


def test_image_and_lock_name_no_kind():
    kinds, classes = set(KINDS) | {k.replace("-", "_") for k in KINDS}, _kind_classes()
    leaks = [leak for room in SEALED for path in sorted((PACKAGE / room).glob("*.py"))
             for leak in _leaks(path, kinds, classes)]
    assert leaks == []


def test_the_check_finds_a_leak(tmp_path):
    """The scan above sees each kind of leak it looks for (else the first test could not fail)."""
    leaky = tmp_path / "leaky.py"
    leaky.write_text("from ..steps.asset import AssetStep\nfrom ..steps import patch\n"
                     "def f(step):\n    return step.kind == 'git'\n")
    found = _leaks(leaky, set(KINDS), _kind_classes())
    assert [f.split(": ", 1)[1] for f in found] == [
        "imports the kind module steps.asset", "imports the kind class AssetStep", "imports the kind module patch",
        "compares a step's kind with 'git'"]
