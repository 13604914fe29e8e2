"""The named checks this payload provides, one module each, which a manifest names on the packages they
exercise (`verify: {check: NAME}`).

A check module defines NAME, ENTRY (its `needs` and what it is `about`: its row in NAMED_CHECKS), STAGES
(what PINWHEEL_SMOKE_CORRUPT may name), add_arguments(parser), argument_error(args) and
run(args, corrupt, doc) -> (stages, why it was skipped or None). Adding one is a module and a line here.
"""
from __future__ import annotations

from . import dsa_forward

MODULES = (dsa_forward,)
# The manifest loader reads this table, so a name it accepts is one the payload runs.
NAMED_CHECKS = {m.NAME: m.ENTRY for m in MODULES}
CORRUPTIBLE = tuple(s for m in MODULES for s in m.STAGES)


def module(name: str):
    """The check module named `name` (a key of NAMED_CHECKS)."""
    return next(m for m in MODULES if m.NAME == name)
