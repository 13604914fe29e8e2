"""Image references as real teams write them (a private registry with a port, nested paths, tag and
digest), split by oras' container reference and held to the distribution grammar."""
from __future__ import annotations

import pytest

from pinwheel.imageref import ImageRef, parse_image_ref
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfiles
from tests.support.manifests import assert_refused_at, load_text, manifest_yaml, variant

DIGEST = "sha256:" + "3f" * 32
STEPS = '  - name: base\n    why: "w"\n    packages:\n      - {requirement: "six==1.16.0", why: "w"}\n'


@pytest.mark.parametrize("text, expected", [
    (f"127.0.0.1:5000/x:tag@{DIGEST}", ImageRef("127.0.0.1:5000", "x", "tag", DIGEST)),
    ("registry.corp.example:443/ml/cuda/devel:13.0.1-cudnn", ImageRef("registry.corp.example:443", "ml/cuda/devel",
                                                                       "13.0.1-cudnn", None)),
    (f"localhost:5000/team/base@{DIGEST}", ImageRef("localhost:5000", "team/base", None, DIGEST)),
    ("[::1]:5000/base:py311", ImageRef("[::1]:5000", "base", "py311", None)),
    ("nvidia/cuda:13.0.1-cudnn-devel-ubuntu24.04", ImageRef(None, "nvidia/cuda", "13.0.1-cudnn-devel-ubuntu24.04",
                                                            None)),
    ("pinwheel/base:bookworm-py311", ImageRef(None, "pinwheel/base", "bookworm-py311", None)),
    ("debian", ImageRef(None, "debian", None, None)),
    ("a/b__c/d-e.f:T_1", ImageRef(None, "a/b__c/d-e.f", "T_1", None)),
])
def test_references_split_into_registry_path_tag_and_digest_and_print_back_as_written(text, expected):
    ref = parse_image_ref(text)
    assert ref == expected
    assert str(ref) == text


@pytest.mark.parametrize("text, fragment", [
    ("Nvidia/cuda:13", "name component 'Nvidia'"),
    ("x:ta g", "tag 'ta g'"),
    ("x:-bad", "tag '-bad'"),
    ("x:tag@sha256:abc", "digest 'sha256:abc'"),
    (f"x@md5:{'0' * 32}", "digest"),
    ("a//b", "not one reference"),
    ("x:t:u", "not one reference"),
    ("x$(id):t", "name component"),
    ("bad_host!:5000/x:t", ""),
    (" x:t", "surrounding blanks"),
    ("x:" + "t" * 129, "tag"),
])
def test_malformed_references_are_refused_naming_the_bad_piece(text, fragment):
    with pytest.raises(ValueError) as info:
        parse_image_ref(text)
    assert fragment in str(info.value)


def test_a_base_in_a_private_registry_with_a_port_tag_and_digest_loads_and_renders(tmp_path):
    base = f"127.0.0.1:5000/x:tag@{DIGEST}"
    m = load_text(manifest_yaml(steps=STEPS, variants=[variant(base=base)]), tmp_path)
    plan = plan_variant(m, "cu130")
    assert plan.variant.base == base
    assert f"ARG BASE={base}\n" in render_dockerfiles([plan])["Dockerfile"]


def test_a_bad_base_is_refused_at_its_line_with_the_reason(tmp_path):
    text = manifest_yaml(steps=STEPS, variants=[variant(base="127.0.0.1:5000/X:tag")])
    assert_refused_at(text, tmp_path, 4, "variants.cu130.base", "name component 'X'")


def test_a_git_builder_image_in_a_private_registry_loads(tmp_path):
    rev = "a" * 40
    steps = STEPS.replace("    why:", "    kind: wheels\n    why:", 1) + (f'  - {{name: src, kind: git, why: "w", package: "pw==0.1", url: "https://git.example.org/pw",'
                     f' rev: "{rev}", builder: "registry.corp.example:5000/ml/builder:git@{DIGEST}"}}\n')
    m = load_text(manifest_yaml(steps=steps, key="steps"), tmp_path)
    assert f"FROM registry.corp.example:5000/ml/builder:git@{DIGEST} AS" in render_dockerfiles(
        [plan_variant(m, "cu130")])["Dockerfile"]
