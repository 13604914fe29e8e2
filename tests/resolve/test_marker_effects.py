"""Which extra turns a requirement on: the resolver tries only the extras a marker can name, and gets what
trying every extra in Provides-Extra order gets (the definition), for the markers real wheels carry and for
the ones that defeat the shortcut."""
from __future__ import annotations

from pinwheel.index import parse_metadata, target_environment
from pinwheel.resolve.resolver import marker_effects

EXTRAS = ["all", "cu12", "cu13", "dev", "docs", "fast-path", "1", "test"]
REQUIRES = [
    "plain>=1",
    'win-only; sys_platform == "win32"',
    'linux-only; sys_platform == "linux"',
    'cuda12; extra == "cu12"',
    'cuda13; extra == "cu13" and platform_machine == "x86_64"',
    'arm13; extra == "cu13" and platform_machine == "aarch64"',
    'docs-or-dev; extra == "docs" or extra == "dev"',
    'all-but-docs; extra != "docs" and python_version >= "3.10"',
    'not-dev; extra != "dev"',
    'fast; extra == "fast_path"',  # normalized to fast-path
    'reversed; "test" == extra',
    'numbered; extra == "1"',  # reads as a version: packaging compares it as one
    'nested; (extra == "all" or extra == "test") and python_version < "4"',
    'old-python; extra == "dev" and python_version < "3.8"',
    'nowhere; extra == "nonexistent"',
]


def metadata(requires, extras):
    lines = ["Metadata-Version: 2.1", "Name: demo", "Version: 1.0"]
    lines += [f"Provides-Extra: {e}" for e in extras] + [f"Requires-Dist: {r}" for r in requires]
    return parse_metadata("\n".join(lines) + "\n")


def by_definition(meta, env):
    """Every extra tried in Provides-Extra order: the first whose marker holds turns the requirement on."""
    out = []
    for req in meta.requires_dist:
        if req.marker is None or req.marker.evaluate({**env, "extra": ""}):
            out.append((req, None, False))
            continue
        extra = next((e for e in meta.provides_extra if req.marker.evaluate({**env, "extra": e})), None)
        out.append((req, extra, extra is None))
    return out


def test_shortcut_gives_the_definitions_answer_for_every_target():
    for python, platform in [("3.11", "manylinux_2_28_x86_64"), ("3.12", "manylinux_2_28_aarch64"),
                             ("3.7", "manylinux_2_17_x86_64")]:
        env = target_environment(python, platform)
        for extras in (EXTRAS, list(reversed(EXTRAS)), ["docs"], []):
            meta = metadata(REQUIRES, extras)
            assert marker_effects(meta, env) == by_definition(meta, env), (python, platform, extras)


def test_the_answers_are_the_expected_ones_on_x86_64():
    meta = metadata(REQUIRES, EXTRAS)
    got = {str(req.name): (extra, excluded) for req, extra, excluded in
           marker_effects(meta, target_environment("3.11", "manylinux_2_28_x86_64"))}
    assert got["plain"] == (None, False) and got["linux-only"] == (None, False)
    assert got["win-only"] == (None, True) and got["arm13"] == (None, True) and got["nowhere"] == (None, True)
    assert got["cuda13"] == ("cu13", False) and got["docs-or-dev"] == ("dev", False)
    assert got["all-but-docs"] == (None, False)  # true with no extra at all: a base requirement
    assert got["fast"] == ("fast-path", False) and got["reversed"] == ("test", False)
    assert got["numbered"] == ("1", False) and got["nested"] == ("all", False)
