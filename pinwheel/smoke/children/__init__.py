"""The payload's child processes: each a module here, run by the payload's archive path.

`python [-S] [-I] <archive>` with CHILD_ENV naming the child: the archive's entry runs that child's
main() instead of the checks. A child puts the --site directories first (sites.from_env) and leaves the
archive off sys.path first (as_plain_interpreter), so that what it imports is what the image's own
interpreter finds, never a module of the payload.
"""
from __future__ import annotations

import importlib
import os
import sys

from .. import payload, sites

CHILD_ENV = "PINWHEEL_SMOKE_CHILD"
NAMES = ("imports", "findable", "verify")


def command(name: str, **environ: str) -> tuple[list, dict]:
    """(argv, environment) that run the child `name`: this process's environment, the --site directories,
    and `environ`."""
    if name not in NAMES:
        raise ValueError(f"no child {name!r}")
    archive = payload.archive()
    if archive is None:
        raise RuntimeError("the payload's child processes run from its archive (python smoke_payload.pyz)")
    env = {**os.environ, **sites.child_env(), **environ, CHILD_ENV: name}
    return [sys.executable, *sites.python_flags(), archive], env


def as_plain_interpreter() -> None:
    """The archive is sys.path[0] of a process it runs; `python -c` puts '' there instead (nothing under -P,
    which -I implies), so the child searches what a plain interpreter searches."""
    archive = payload.archive()
    if sys.path and archive is not None and os.path.abspath(sys.path[0]) == archive:
        if getattr(sys.flags, "safe_path", False):
            del sys.path[0]
        else:
            sys.path[0] = ""
    sites.from_env()


def run(name: str) -> int:
    """The archive's entry, in a child process: that child's main()."""
    if name not in NAMES:
        print(f"error: {CHILD_ENV}={name!r}: expected one of {', '.join(NAMES)}", file=sys.stderr)
        return 2
    as_plain_interpreter()
    return importlib.import_module(f"{__name__}.{name}").main(sys.argv[1:])
