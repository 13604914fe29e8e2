"""Hashed, fully pinned locks per variant, sliced per install step.

For one variant, the lock is one resolve of every package the image installs
from the index, made by pip-compile (pip-tools) or ``uv pip compile``, and then
cut into one slice per wheel set so that each Dockerfile step installs exactly
its own packages with ``pip install --no-deps --require-hashes``. The files of
``Workspace.lock_dir(variant)`` (names in ``workspace.LockFiles``)::

    requirements.in                      the resolver's inputs (generated, for review)
    constraints.txt                      shared pins + --no-deps and fallback pins
    requirements.txt                     the whole lock (compile output + --no-deps section)
    NN-<set>.txt                         one slice per step that installs from the index
    NN-<set>.fallback-<pkg>.txt          what a missing local wheel falls back to
    expect.json                          pins and suppressed requirements for the smoke

- ``format``: the lock's text (entries with hashes, headers) and its errors;
- ``inputs``: what a lock is made from, and the digest that marks it stale;
- ``slicing``: which file installs each locked package;
- ``make``: a lock made: the resolve, the --no-deps pins, the slices, the files;
- ``engines``: the resolver runs (pip-compile, uv); ``swap``: the directory replaced whole;
- ``read``: a committed lock as a typed value, and what it installs, step by step;
- ``check``: is a committed lock made from the manifest as it is now (no network).
"""
from .check import LockCheck, check_lock
from .format import (
    DEFAULT_ENGINE, ENGINES, LockedPackage, LockError, LockUnavailable, StaleLockHashes, parse_requirements,
)
from .inputs import LOCK_FORMAT, LockInputs, lock_inputs, lock_inputs_digest
from .read import Lock, LockSlice, lock_installs, lock_sha256, locked_versions, missing_local_wheels, read_lock
from .slicing import Assignment, assign_slices

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "LOCK_FORMAT",
    "Assignment",
    "Lock",
    "LockCheck",
    "LockError",
    "LockInputs",
    "LockResult",
    "LockSlice",
    "LockUnavailable",
    "LockedPackage",
    "StaleLockHashes",
    "assign_slices",
    "check_lock",
    "lock_inputs",
    "lock_inputs_digest",
    "lock_installs",
    "lock_sha256",
    "lock_variant",
    "locked_versions",
    "missing_local_wheels",
    "parse_requirements",
    "read_lock",
]

# The lock maker (pip-compile and uv runs) loads when a lock is made; checking or reading one needs none of it.
_MAKE = ("LockResult", "lock_variant")


def __getattr__(name: str):
    if name in _MAKE:
        from . import make

        return getattr(make, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
