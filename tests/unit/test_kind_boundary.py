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


# ---------------------------------------------------------------- the whole package, outside steps/

# The leaks (file: what, the line left out) that are a kind's own room outside steps/, each with why.
OWN_ROOMS: dict[str, str] = {
    "commands/asset.py: imports the kind module steps.asset": "`asset add URL`, the asset kind's own command",
}


def _is_kind_read(node: ast.AST) -> bool:
    """`x.kind`, `x["kind"]` or `x.get("kind")`: a step's (or a manifest entry's) kind."""
    if isinstance(node, ast.Attribute):
        return node.attr == "kind"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "kind"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "kind"
    return False


def _constants(node: ast.AST) -> list:
    """The constants of `node`, or of the tuple, list or set it is."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [i.value for i in items if isinstance(i, ast.Constant)]


def _names_a_kind(path: Path, shown: str, kinds: set[str], classes: set[str]) -> list[str]:
    """Each place in the file that names a kind: its module or class imported (or a private name from any
    steps module), its class looked up, or its name used as a kind's (compared with a step's kind, written
    as a manifest entry's `kind:`, looked up in the registry, kept as a *KIND* constant)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        at = f"{shown}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.ImportFrom) and node.module and "steps" in node.module.split("."):
            parts = node.module.split(".")
            if parts[-1] in kinds:
                found.append(f"{at}: imports the kind module {node.module}")
            for alias in node.names:
                if alias.name in classes:
                    found.append(f"{at}: imports the kind class {alias.name}")
                elif alias.name in kinds and parts[-1] == "steps":
                    found.append(f"{at}: imports the kind module {alias.name}")
                elif alias.name.startswith("_"):
                    found.append(f"{at}: imports the private {alias.name} from {node.module}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if "steps" in parts and parts[-1] in kinds:
                    found.append(f"{at}: imports the kind module {alias.name}")
        elif isinstance(node, ast.Attribute) and node.attr in classes:
            found.append(f"{at}: reaches the kind class {node.attr}")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            literal = [c for s in sides if not _is_kind_read(s) for c in _constants(s) if c in kinds]
            if literal and any(_is_kind_read(s) for s in sides):
                found.append(f"{at}: compares a kind with {literal[0]!r}")
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "kind" and value_in(value, kinds):
                    found.append(f"{at}: writes the kind {value.value!r}")
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "KINDS":
            if value_in(node.slice, kinds):
                found.append(f"{at}: looks up the kind {node.slice.value!r}")
        elif isinstance(node, ast.Assign) and value_in(node.value, kinds):
            if any(isinstance(t, ast.Name) and "KIND" in t.id.upper() for t in node.targets):
                found.append(f"{at}: keeps the kind name {node.value.value!r}")
    return found


def value_in(node: ast.AST | None, kinds: set[str]) -> bool:
    return isinstance(node, ast.Constant) and node.value in kinds


def _outside_steps() -> list[tuple[Path, str]]:
    return [(path, str(path.relative_to(PACKAGE))) for path in sorted(PACKAGE.rglob("*.py"))
            if path.relative_to(PACKAGE).parts[0] not in ("steps", "templates")]


def _unlined(leak: str) -> str:
    where, what = leak.split(": ", 1)
    return f"{where.rsplit(':', 1)[0]}: {what}"


def test_nothing_outside_steps_names_a_kind():
    """A kind module defines everything the rest of the package needs about it: no kind name used as a kind,
    no kind module or class, no private name of steps/, anywhere else (the templates aside)."""
    kinds, classes = set(KINDS) | {k.replace("-", "_") for k in KINDS}, _kind_classes()
    found = [leak for path, shown in _outside_steps() for leak in _names_a_kind(path, shown, kinds, classes)]
    assert [leak for leak in found if _unlined(leak) not in OWN_ROOMS] == []
    assert sorted(OWN_ROOMS) == sorted({_unlined(leak) for leak in found})  # no exemption outlives its leak


def test_the_package_scan_finds_each_leak(tmp_path):
    """Each shape the scan above looks for, seen in a file (else the test above could not fail)."""
    leaky = tmp_path / "leaky.py"
    leaky.write_text(
        "import pinwheel.steps.git\n"
        "from ..steps.wheels import _WHEEL, StepView\n"
        "from .steps import apt\n"
        "THE_KIND = 'wheels'\n"
        "def f(step, spec, kinds):\n"
        "    a = step['kind'] in ('wheels', 'git')\n"
        "    b = 'run' == spec.kind\n"
        "    c = {'name': '', 'kind': 'remove'}\n"
        "    d = KINDS['asset']\n"
        "    e = isinstance(spec, wheels.WheelSet)\n"
        "    g = step.get('kind') != 'sdist'\n"
        "    h = {'wheels': 1}['wheels'], step.source == 'git', 'apt' in ('apt-get', 'apt')\n")
    kinds = set(KINDS) | {k.replace("-", "_") for k in KINDS}
    found = [f.split(": ", 1)[1] for f in _names_a_kind(leaky, "leaky.py", kinds, _kind_classes())]
    assert sorted(found) == sorted([
        "imports the kind module pinwheel.steps.git", "imports the kind module steps.wheels",
        "imports the private _WHEEL from steps.wheels",
        "imports the kind class StepView", "imports the kind module apt", "keeps the kind name 'wheels'",
        "compares a kind with 'wheels'", "compares a kind with 'run'", "writes the kind 'remove'",
        "looks up the kind 'asset'", "reaches the kind class WheelSet", "compares a kind with 'sdist'"])
