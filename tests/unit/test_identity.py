"""The immutable tag hashes everything that decides the image: each input, changed alone, changes it.

Real files on disk (the manifest, its lock directory, wheels/, a patch), no engine: the base is
pinned by digest, so its digest is read from the reference.
"""
from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from tests.support.manifests import load_text, manifest_yaml, variant
from pinwheel.image.build import image_identity, tags_for
from pinwheel.image.identity import ContentInputs
from pinwheel.plan import plan_variant
from pinwheel.workspace import Workspace

BASE_A = "registry.example/train@sha256:" + "a" * 64
BASE_B = "registry.example/train@sha256:" + "b" * 64
ASSET_A = "1" * 64
ASSET_B = "2" * 64
REV_A = "3" * 40
REV_B = "4" * 40
PATCH = "--- a/six.py\n+++ b/six.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"

STEPS = """\
  - name: core
    kind: wheels
    why: "index wheels"
    packages:
      - {{requirement: "six==1.16.0", why: "tiny"}}
  - name: kernels
    kind: wheels
    why: "in-house wheels"
    packages:
      - requirement: "speedup==1.0"
        why: "a local build"
        local: {{glob: "speedup-*.whl", if_missing: fallback, how_to_provide: "make wheel"}}
        fallback: {{requirement: "speedup-stable==1.0", why: "the index build"}}
  - name: flash-attn
    kind: asset
    why: "a release wheel"
    package: "flash-attn==2.8.3"
    url: {{url: "https://downloads.example.org/flash_attn-2.8.3-cp311-cp311-linux_x86_64.whl", sha256: "{asset}"}}
  - name: bridge
    kind: git
    why: "its fix is on no release yet"
    package: "pw-bridge==0.3.0"
    url: "https://git.example.org/team/pw-bridge.git"
    rev: "{rev}"
  - name: six-fixes
    kind: patch
    why: "a fix upstream has not released"
    patches:
      - {{file: patches/six-fix.patch, applies_to: "six==1.16.0", strip: 1, why: "the x is a y"}}
"""


def project(tmp_path, *, base=BASE_A, asset=ASSET_A, rev=REV_A, patch=PATCH, wheel: bytes | None = b"wheel one"):
    """A manifest with a lock dir, wheels/ and a patch under tmp_path; its cu130 Plan."""
    shutil.rmtree(tmp_path, ignore_errors=True)
    tmp_path.mkdir(parents=True)
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "six-fix.patch").write_text(patch)
    m = load_text(manifest_yaml(steps=STEPS.format(asset=asset, rev=rev), variants=[variant(base=base)], key="steps"), tmp_path)
    plan = plan_variant(m, "cu130")
    lock_dir = Workspace(tmp_path, plan.image).plan_lock_dir(plan)
    lock_dir.mkdir(parents=True)
    (lock_dir / "requirements.txt").write_text("six==1.16.0 --hash=sha256:" + "5" * 64 + "\n")
    (tmp_path / "wheels").mkdir()
    if wheel is not None:
        (tmp_path / "wheels" / "speedup-1.0-py3-none-any.whl").write_bytes(wheel)
    return plan


def identity(tmp_path, **kw) -> ContentInputs:
    plan = project(tmp_path, **kw)
    return image_identity(plan, tmp_path, None)


def immutable(tmp_path, **kw) -> str:
    plan = project(tmp_path, **kw)
    return tags_for(plan, image_identity(plan, tmp_path, None).digest)[1]


def test_the_same_inputs_give_the_same_tag(tmp_path):
    assert immutable(tmp_path / "a") == immutable(tmp_path / "b")
    tag = immutable(tmp_path / "a")
    assert tag.startswith("pinwheel/demo:cu130-") and len(tag.rsplit("-", 1)[1]) == 12


@pytest.mark.parametrize("change", [
    {"wheel": b"wheel two"},  # a replaced local wheel: same name, other bytes
    {"wheel": None},  # the wheel is missing: its fallback stands in
    {"base": BASE_B},
    {"asset": ASSET_B},
    {"rev": REV_B},
    {"patch": PATCH.replace("x = 2", "x = 3")},
], ids=["local-wheel-bytes", "fallback-stands-in", "base-digest", "asset", "git-commit", "patch-bytes"])
def test_each_input_changes_the_immutable_tag(tmp_path, change):
    assert immutable(tmp_path / "before") != immutable(tmp_path / "after", **change)


def test_the_inputs_say_what_they_hashed(tmp_path):
    inputs = identity(tmp_path).to_json()
    import hashlib

    assert inputs["base"] == {"name": BASE_A, "digest": "sha256:" + "a" * 64}
    assert inputs["local_wheels"] == [{"package": "speedup", "glob": "speedup-*.whl",
                                       "wheel": "speedup-1.0-py3-none-any.whl",
                                       "sha256": hashlib.sha256(b"wheel one").hexdigest()}]
    assert inputs["assets"] == [{"step": "flash-attn", "sha256": ASSET_A,
                                 "url": "https://downloads.example.org/flash_attn-2.8.3-cp311-cp311-linux_x86_64.whl"}]
    assert inputs["sources"] == [{"step": "bridge", "url": "https://git.example.org/team/pw-bridge.git",
                                  "commit": REV_A}]
    assert inputs["patches"] == [{"step": "six-fixes", "file": "patches/six-fix.patch",
                                  "sha256": hashlib.sha256(PATCH.encode()).hexdigest()}]
    missing = identity(tmp_path, wheel=None).to_json()["local_wheels"]
    assert missing == [{"package": "speedup", "glob": "speedup-*.whl", "missing": "fallback speedup-stable==1.0"}]
    labels = identity(tmp_path).labels()
    assert json.loads(labels["io.pinwheel.inputs"]) == inputs
    assert labels["io.pinwheel.inputs.sha256"] == identity(tmp_path).digest


def test_the_source_label_comes_from_ci_or_the_origin_remote(tmp_path, monkeypatch):
    import subprocess

    from pinwheel.image.build import source_url

    monkeypatch.delenv("GITHUB_SERVER_URL", raising=False)
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    assert source_url(tmp_path) is None  # not a checkout: nothing says where it comes from
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "remote", "add", "origin", "https://ci:secret@git.example.org/team/pw.git"],
                   check=True)
    assert source_url(tmp_path) == "https://git.example.org/team/pw.git"  # never the credentials
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.example")
    monkeypatch.setenv("GITHUB_REPOSITORY", "team/pw")
    assert source_url(tmp_path) == "https://github.example/team/pw"


def test_the_sbom_names_what_each_kind_added_with_the_hash_that_pins_it(tmp_path, monkeypatch):
    """Each step's kind turns its identity entries into SBOM components (StepKind.sbom)."""
    import datetime as dt
    import types

    from pinwheel.image import sbom

    plan = project(tmp_path)
    monkeypatch.setattr(sbom, "read_lock", lambda _d: types.SimpleNamespace(slices=(), fallbacks=()))
    inputs = image_identity(plan, tmp_path, None)
    doc = json.loads(sbom.render(sbom.make_sbom(plan, tmp_path, inputs, "repo/demo:cu130-x",
                                                dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))))
    by_ref = {c["bom-ref"]: c for c in doc["components"]}
    assert by_ref["asset:flash-attn"]["hashes"] == [{"alg": "SHA-256", "content": ASSET_A}]
    assert by_ref["asset:flash-attn"]["externalReferences"][0]["type"] == "distribution"
    assert by_ref["git:bridge"]["hashes"] == [{"alg": "SHA-1", "content": REV_A}]
    assert by_ref["git:bridge"]["externalReferences"][0]["url"] == "https://git.example.org/team/pw-bridge.git"
    patch = by_ref["patch:six-fixes:patches/six-fix.patch"]
    assert patch["type"] == "file" and patch["hashes"][0]["content"] == hashlib.sha256(PATCH.encode()).hexdigest()


@pytest.mark.parametrize("remote, source", [
    ("git@github.com:org/repo.git", "https://github.com/org/repo.git"),
    ("github.com:org/repo", "https://github.com/org/repo"),
    ("ssh://git@git.example.org:2222/team/pw.git", "https://git.example.org/team/pw.git"),
    ("git+ssh://git@git.example.org/team/pw.git", "https://git.example.org/team/pw.git"),
    ("https://ci:secret@git.example.org/team/pw.git", "https://git.example.org/team/pw.git"),
    ("https://git.example.org/team/pw", "https://git.example.org/team/pw"),
    ("/srv/git/pw.git", None),
    ("file:///srv/git/pw.git", None),
    ("../pw", None),
    ("http://git.example.org/team/pw", None),
])
def test_the_source_label_from_an_ssh_remote_is_its_https_address(remote, source):
    from pinwheel.image.build import https_source

    assert https_source(remote) == source


def test_an_ssh_origin_gives_the_source_label(tmp_path, monkeypatch):
    import subprocess

    from pinwheel.image.build import source_url

    monkeypatch.delenv("GITHUB_SERVER_URL", raising=False)
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "remote", "add", "origin", "git@github.com:org/repo.git"], check=True)
    assert source_url(tmp_path) == "https://github.com/org/repo.git"


class _Images:
    """The two engine calls base_digest_kind makes, answered from a dict (ref -> image id)."""

    def __init__(self, ids: dict[str, str]) -> None:
        self.ids = ids

    def image_exists(self, ref: str) -> bool:
        return ref in self.ids

    def image_id(self, ref: str) -> str:
        return self.ids[ref]


def test_the_base_digest_label_says_whether_it_is_an_image_id():
    from pinwheel.image.build import base_digest_kind

    local = _Images({"pinwheel/base:bookworm-py311": "sha256:" + "1" * 64, "team/cuda:13": "sha256:" + "2" * 64})
    assert base_digest_kind(local, "pinwheel/base:bookworm-py311", "sha256:" + "1" * 64) == "image-id"
    assert base_digest_kind(local, "team/cuda:13", "sha256:" + "9" * 64) == "manifest"  # its registry digest
    assert base_digest_kind(local, "team/cuda:13@sha256:" + "9" * 64, "sha256:" + "9" * 64) == "manifest"
