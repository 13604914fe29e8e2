"""pinwheel's modules import each other without a circle: each can be imported first, in a fresh interpreter,
with no import deferred into a function to dodge a cycle.

Read from the source files: every import (at a module's top level or in a function; a `TYPE_CHECKING` block
aside, which never runs) is an edge, and importing a.b.c first imports the packages a and a.b. The graph must
have no cycle.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pinwheel

PACKAGE = Path(pinwheel.__file__).parent


def _module_name(path: Path) -> str:
    parts = ("pinwheel",) + path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(tree: ast.Module):
    """Every import statement of a module, at its top level or deferred into a function (a deferral that dodges
    a circle is a circle all the same); those under `if TYPE_CHECKING:` aside, which never run."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skipped:
            yield node


def _imported(name: str, path: Path, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The pinwheel modules an import statement imports, each with the packages above it."""
    if isinstance(node, ast.Import):
        targets = [a.name for a in node.names]
    else:
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        if node.level:
            base = package.split(".")
            base = base[: len(base) - node.level + 1]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        targets = [module] + [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in modules]
    out = set()
    for target in targets:
        parts = target.split(".")
        out |= {".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in modules}
    own = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    # A module's own packages are already being imported when it runs: importing them again is no edge.
    return {t for t in out if t != name and not (own == t or own.startswith(t + "."))}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text())):
            edges |= _imported(name, path, node, modules)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_package_imports_without_a_circle():
    assert cycles(import_graph()) == []


def test_the_graph_sees_the_layers():
    """The edges the layering rests on are seen (else a graph of no edges would pass the test above)."""
    graph = import_graph()
    assert "pinwheel.steps.registry" in graph["pinwheel.manifest.load"]  # the loader reads with the kinds
    assert "pinwheel.model.reader" in graph["pinwheel.steps.base"]  # the kinds read with the model
    assert "pinwheel.model" in graph["pinwheel.steps.base"]  # and so import its package first
    assert not {m for m in graph["pinwheel.model.manifest"] if m.startswith(("pinwheel.steps", "pinwheel.plan"))}


def test_a_circle_is_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_each_room_imports_first_in_a_fresh_interpreter():
    """The rooms below everything and at the top each import first, on their own, in a new interpreter."""
    first = ["pinwheel.model.manifest", "pinwheel.model.reader", "pinwheel.steps.base", "pinwheel.steps.wheels",
             "pinwheel.manifest.load", "pinwheel.plan", "pinwheel.manifest"]
    for module in first:
        proc = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, (module, proc.stderr[-2000:])
