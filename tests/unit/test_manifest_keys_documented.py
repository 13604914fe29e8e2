"""Every key the manifest loader accepts is documented in docs/manifest.md, in the section of its kind.

The keys are read from the loader itself: each mapping is checked by `Reader.mapping(node, key, allowed, ...)`,
so the `allowed` argument of every such call under pinwheel/manifest/ and pinwheel/steps/ is the whole list.
A call in pinwheel/steps/<module>.py belongs to that module's kind; a call in pinwheel/manifest/ to the top level.
A loaded manifest cross-checks the reading: each `allowed` the loader passes is the one read from the source.
"""
from __future__ import annotations

import ast
import functools
import re
import sys
from importlib import import_module
from pathlib import Path

import pytest

from pinwheel.model.reader import Reader, StepReading
from pinwheel.steps.registry import KINDS

manifest_load = import_module("pinwheel.manifest.load")  # the module: the package exports its load()

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pinwheel"
DOC = ROOT / "docs" / "manifest.md"
TOP = "top level"  # the section of pinwheel/manifest/'s keys: a heading naming "Top-level keys"


class Unreadable(Exception):
    """An `allowed` argument this test cannot read statically: make it a literal, or teach the test."""


def _assignments(tree: ast.AST) -> dict[str, ast.expr]:
    found: dict[str, ast.expr] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
    return found


def _arguments(func: ast.FunctionDef, tree: ast.AST) -> dict[str, ast.expr]:
    """A parameter stands for what its module's calls of the function pass it (and its default), joined by `|`."""
    params = [a.arg for a in func.args.args]
    defaults = dict(zip(params[len(params) - len(func.args.defaults):], func.args.defaults))
    passed: dict[str, list[ast.expr]] = {name: [default] for name, default in defaults.items()}
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == func.name:
            for name, arg in [*zip(params, call.args), *((k.arg, k.value) for k in call.keywords)]:
                passed.setdefault(name, []).append(arg)
    joined: dict[str, ast.expr] = {}
    for name, values in passed.items():
        expr = values[0]
        for value in values[1:]:
            expr = ast.BinOp(expr, ast.BitOr(), value)
        joined[name] = expr
    return joined


def _keys(expr: ast.expr, scopes: list[dict[str, ast.expr]]) -> set[str]:
    """The key names an `allowed` expression holds; a `set(...)` of names the manifest chooses holds none."""
    if isinstance(expr, (ast.Set, ast.Tuple, ast.List)):
        if not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in expr.elts):
            raise Unreadable(ast.unparse(expr))
        return {e.value for e in expr.elts}
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
        return _keys(expr.left, scopes) | _keys(expr.right, scopes)
    if isinstance(expr, ast.IfExp):
        return _keys(expr.body, scopes) | _keys(expr.orelse, scopes)
    if isinstance(expr, ast.Attribute) and expr.attr == "common_keys":
        return set(StepReading(Reader(Path("m.yaml")), "steps", {}, ()).common_keys)
    if isinstance(expr, ast.Name):
        for scope in scopes:
            if expr.id in scope:
                return _keys(scope[expr.id], scopes)
        raise Unreadable(expr.id)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("set", "frozenset"):
        if not expr.args:
            return set()
        arg = expr.args[0]
        if isinstance(arg, ast.Name) and any(arg.id in s and isinstance(s[arg.id], (ast.Tuple, ast.List, ast.Set))
                                             for s in scopes[1:]):
            return _keys(arg, scopes[1:])  # a module constant, such as asset's ARCHES
        return set()  # the keys are names the manifest chooses (variables, variants): nothing to document
    raise Unreadable(ast.unparse(expr))


@functools.cache
def mapping_calls() -> tuple[tuple[Path, int, int, frozenset[str]], ...]:
    """(file, first line, last line, allowed keys) of every `.mapping(...)` call the loader makes."""
    calls = []
    for path in sorted([*(PACKAGE / "manifest").glob("*.py"), *(PACKAGE / "steps").glob("*.py")]):
        tree = ast.parse(path.read_text(), str(path))
        module_scope = {n.targets[0].id: n.value for n in tree.body
                        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
        funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "mapping"):
                continue
            if len(call.args) < 3:
                raise Unreadable(f"{path}:{call.lineno}: mapping() without its allowed keys")
            inner = [f for f in funcs if f.lineno <= call.lineno and call.end_lineno <= f.end_lineno]
            func = min(inner, key=lambda f: f.end_lineno - f.lineno) if inner else None
            scope = {**_arguments(func, tree), **_assignments(func)} if func else {}
            calls.append((path, call.lineno, call.end_lineno, frozenset(_keys(call.args[2], [scope, module_scope]))))
    return tuple(calls)


# Modules of steps/ that read keys several kinds share: the sections that document them.
SHARED_BY = {"build_env": ("git", "sdist"), "prebuilt": ("git", "sdist")}


def sections_of(path: Path) -> tuple[str, ...]:
    if path.parent.name == "manifest":
        return (TOP,)
    if path.stem in SHARED_BY:
        return SHARED_BY[path.stem]
    kinds = {name.replace("-", "_"): name for name in KINDS}
    assert path.stem in kinds, f"{path.name} checks manifest keys but is no kind's module: which section documents them?"
    return (kinds[path.stem],)


def documented_keys() -> dict[str, set[str]]:
    """section -> every key it needs documented."""
    wanted: dict[str, set[str]] = {}
    for path, _, _, keys in mapping_calls():
        for section in sections_of(path):
            wanted.setdefault(section, set()).update(keys)
    return wanted


def sections(text: str) -> dict[str, str]:
    """A kind's section starts at a heading naming `kind: NAME`, the top level's at one naming "Top-level keys";
    each runs to the next heading of its level or above."""
    lines = text.splitlines()
    heads = [(i, len(m.group(1)), m.group(2)) for i, line in enumerate(lines)
             if (m := re.match(r"^(#{1,6})\s+(.*)$", line))]
    out: dict[str, str] = {}
    for n, (i, level, title) in enumerate(heads):
        kind = re.search(r"`kind: ([a-z-]+)`", title)
        name = kind.group(1) if kind else TOP if "Top-level keys" in title else None
        if name is None:
            continue
        end = next((j for j, lv, _ in heads[n + 1:] if lv <= level), len(lines))
        assert name not in out, f"docs/manifest.md has two sections for {name}"
        out[name] = "\n".join(lines[i:end])
    return out


def test_the_loader_checks_keys_in_every_kind_and_at_the_top():
    wanted = documented_keys()
    assert set(wanted) == {TOP, *KINDS}, "a kind whose keys this test cannot find"
    assert manifest_load.TOP_KEYS <= wanted[TOP]
    assert {"name", "why", "kind"} <= set.intersection(*(wanted[k] for k in KINDS))


def readme_manifest() -> str:
    """The manifest the README shows: its first yaml block."""
    found = re.search(r"^```yaml\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)
    assert found, "the README shows no manifest"
    return found.group(1)


def test_the_keys_read_from_the_source_are_the_ones_the_loader_passes(monkeypatch, tmp_path):
    """The shipped manifest (wheel_sets:) and the README's (steps:, several kinds), loaded with every
    `allowed` recorded: each must be what the source reading found at that call (or part of it, where the
    call's keys depend on the entry, such as a fallback, which has no `local`)."""
    calls = mapping_calls()
    seen: list[tuple[str, int, frozenset[str]]] = []
    real = Reader.mapping

    def recording(self, node, key, allowed, required=frozenset()):
        caller = sys._getframe(1)
        seen.append((caller.f_code.co_filename, caller.f_lineno, frozenset(allowed)))
        return real(self, node, key, allowed, required)

    monkeypatch.setattr(Reader, "mapping", recording)
    manifest_load.load(ROOT / "wheels_manifest.yaml")
    (tmp_path / "wheels_manifest.yaml").write_text(readme_manifest())
    manifest_load.load(tmp_path / "wheels_manifest.yaml")
    assert len({(f, line) for f, line, _ in seen}) > 10
    for filename, line, allowed in seen:
        here = [keys for path, first, last, keys in calls if str(path) == filename and first <= line <= last]
        assert len(here) == 1, f"{filename}:{line}: a mapping call the source reading missed"
        if here[0]:  # a free-form mapping (names the manifest chooses) reads as no keys
            assert allowed <= here[0], f"{filename}:{line}: read {sorted(here[0])}, the loader passes {sorted(allowed)}"


@pytest.mark.parametrize("section", [TOP, *KINDS])
def test_every_accepted_key_is_documented_in_its_section(section):
    documented = sections(DOC.read_text())
    assert section in documented, f"docs/manifest.md has no section for {section}"
    text = documented[section]
    missing = sorted(k for k in documented_keys()[section] if f"`{k}`" not in text)
    assert missing == [], f"docs/manifest.md, section {section}: keys the loader accepts but the doc does not name"
