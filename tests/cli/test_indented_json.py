"""indented_json (commands/common.py): the one JSON document of a --json command, as json.dumps(indent=2)
writes it, byte for byte."""
from __future__ import annotations

import enum
import json
import random

import pytest

from pinwheel.commands.common import indented_json


class Level(enum.IntEnum):
    LOW = 1


def _value(rng: random.Random, depth: int):
    kinds = ["str", "int", "float", "none", "bool"] + (["list", "tuple", "dict"] * 2 if depth < 5 else [])
    kind = rng.choice(kinds)
    if kind == "str":
        return "".join(rng.choice('ab"\\\n\té→\u2028😀 ') for _ in range(rng.randrange(6)))
    if kind == "int":
        return rng.choice([0, -7, 2**70, Level.LOW])
    if kind == "float":
        return rng.choice([0.1, -2.5e-300, 1e22, float("nan"), float("inf"), -float("inf")])
    if kind == "none":
        return None
    if kind == "bool":
        return rng.choice([True, False])
    items = [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == "list":
        return items
    if kind == "tuple":
        return tuple(items)
    keys = [rng.choice(["k", "é", 3, 2.5, True, False, None, Level.LOW]) for _ in items]
    return dict(zip(keys, items))


@pytest.mark.parametrize("seed", range(40))
def test_it_writes_what_json_dumps_writes(seed):
    doc = _value(random.Random(seed), 0)
    assert indented_json(doc) == json.dumps(doc, indent=2)


def test_empty_containers_and_scalars_at_the_top():
    for doc in ([], {}, (), "s", 1, 1.5, None, True, {"a": {}, "b": [[], {}]}):
        assert indented_json(doc) == json.dumps(doc, indent=2)


def test_what_json_rejects_it_rejects_as_json_does():
    with pytest.raises(TypeError, match="not JSON serializable"):
        indented_json({"a": [1, object()]})
    with pytest.raises(TypeError, match="keys must be"):
        indented_json({(1, 2): "tuple key"})
