"""The reuse check's child: which of the names on stdin (JSON [[name, path], ...]) a finder finds now.

Prints {"found": [name, ...], "sys_path": [...]}: a name no finder found when a passing import result
was stored must still be unfindable, from the same sys.path, for that result to be reused.
"""
from __future__ import annotations

import json
import sys


def main(argv) -> int:
    found = []
    for name, path in json.loads(sys.stdin.read()):
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            try:
                spec = find(name, path) if find else None
            except Exception:
                spec = None
            if spec is not None:
                found.append(name)
                break
    print(json.dumps({"found": found, "sys_path": sys.path}))
    return 0
