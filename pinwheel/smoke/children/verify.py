"""A package's verify check (manifest `verify:`): its imports, then its snippet, in a process of its own.

The modules are the command line's; the snippet is stdin (empty: none). The snippet runs as a script's
own code (its globals a fresh __main__), so it may assert, raise or sys.exit: a non-zero exit fails it.
"""
from __future__ import annotations

import importlib
import sys


def main(modules) -> int:
    snippet = sys.stdin.read()
    scope = {"__name__": "__main__"}
    for mod in modules:  # as `import a.b` would: a.b imported, `a` bound for the snippet
        importlib.import_module(mod)
        top = mod.split(".")[0]
        scope[top] = sys.modules[top]
    if snippet:
        exec(compile(snippet, "<verify>", "exec"), scope)
    return 0
