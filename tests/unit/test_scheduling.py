"""The suite's spread over workers: modules whole, modules that share an engine's state on one worker."""
from tests.support.scheduling import groups, weight


def test_modules_sharing_a_resource_share_a_group_and_the_others_stay_alone():
    got = groups({
        "tests/a.py": [],
        "tests/b.py": ["modern"],
        "tests/c.py": ["engine2"],
        "tests/d.py": ["modern", "engine2"],
        "tests/e.py": ["sglang-base"],
        "tests/f.py": ["sglang-base"],
    })
    assert got["tests/a.py"] == "tests/a.py"
    assert got["tests/b.py"] == got["tests/c.py"] == got["tests/d.py"] == "tests/b.py"
    assert got["tests/e.py"] == got["tests/f.py"] == "tests/e.py"
    assert len(set(got.values())) == 3


def test_end_to_end_modules_go_first_then_engine_ones():
    assert weight({"e2e", "engine"}) < weight({"engine"}) < weight(set())
