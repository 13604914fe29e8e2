"""--site directories: first on the path here, and in every child process the payload starts."""
from __future__ import annotations

import os
import site
import sys

SITES_ENV = "PINWHEEL_IMPORT_SITES"  # how a child process learns them
SITES: list = []  # the --site directories of this run, absolute, in the order given


def put_first(dirs) -> None:
    """site.addsitedir each one (its .pth files honoured), then move what they added ahead of the host's own
    packages: carried packages win, as a user who carries them means."""
    before = list(sys.path)
    for d in dirs:
        site.addsitedir(d)
    sys.path[:] = [p for p in sys.path if p not in before] + before


def add(dirs) -> None:
    """This run's --site directories (main, before anything is imported)."""
    dirs = [os.path.abspath(d) for d in dirs]
    put_first(dirs)
    SITES.extend(dirs)


def child_env() -> dict:
    return {SITES_ENV: os.pathsep.join(SITES)}


def from_env() -> None:
    """In a child process: the parent's --site directories, first on the path."""
    put_first([d for d in os.environ.get(SITES_ENV, "").split(os.pathsep) if d])


def python_flags() -> list:
    """-S and -I as this interpreter runs: a child sees the packages this process sees."""
    return (["-S"] if sys.flags.no_site else []) + (["-I"] if sys.flags.isolated else [])
