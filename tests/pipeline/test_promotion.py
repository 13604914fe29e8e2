"""Content identity and promotion on the real engine and registry.

One tiny image A is built and its smoke recorded as passed; then one local wheel is replaced by a
wheel of the same name with other bytes and B is built. B gets another immutable tag; the human
(dated) tag in the registry names A's digest only, and B's bytes cannot get it, by any route.
Each test publishes into its own registry namespace.
"""
from __future__ import annotations

import hashlib
import json
import uuid

import pytest

from pinwheel.image.engine import Engine
from pinwheel.image.sbom import validate
from pinwheel.workspace import Workspace

from tests.support.local_index import build_wheel
from tests.support.pipeline import IMAGE_MANIFEST_TYPES, LOCAL_VERSION, Project, pushed_image, registry_get
from tests.support.smoke_records import ALL_PASSED, record_smoke

pytestmark = pytest.mark.engine

ACCEPT = IMAGE_MANIFEST_TYPES  # the containerd image store pushes an index
EPOCH = "1700000000"  # 2023-11-14T22:13:20Z


@pytest.fixture(scope="module")
def project(project_factory) -> Project:
    made = project_factory("promote")
    made.env["SOURCE_DATE_EPOCH"] = EPOCH  # not a git checkout: `created` would otherwise be the clock's
    return made


def build(project: Project) -> dict:
    return json.loads(project.cli("build", "--variant", "cu130", "--quiet", "--json", check=True).stdout)


@pytest.fixture(scope="module")
def builds(project: Project, tmp_path_factory) -> dict[str, dict]:
    """A with the session's wheels (its smoke passed), then B: pw-kern-skip replaced by other bytes."""
    a = build(project)
    record_smoke(project.root, a["image_id"], ALL_PASSED)
    wheels = project.root / "wheels"
    old = wheels / project.local_wheels["pw-kern-skip"].name
    other = build_wheel(tmp_path_factory.mktemp("other-wheel"), "pw-kern-skip", LOCAL_VERSION, payload_size=64)
    assert other.name == old.name and other.read_bytes() != old.read_bytes()
    saved = old.read_bytes()
    old.write_bytes(other.read_bytes())
    try:
        b = build(project)
    finally:
        old.write_bytes(saved)  # the tests below publish A again: its inputs back
    a_again = build(project)  # a cache hit: the same image id and tags as A
    assert a_again["image_id"] == a["image_id"] and a_again["tags"] == a["tags"]
    return {"a": a, "b": b, "b_wheel_sha256": hashlib.sha256(other.read_bytes()).hexdigest(),
            "a_wheel_sha256": hashlib.sha256(saved).hexdigest()}


def manifest_digest(registry: str, repository: str, tag: str) -> str | None:
    status, headers, body = registry_get(registry, f"/v2/{repository}/manifests/{tag}", ACCEPT)
    if status == 404:
        return None
    assert status == 200, body
    return headers["Docker-Content-Digest"]


def config_of(registry: str, repository: str, tag: str) -> dict:
    status, _, body = registry_get(registry, f"/v2/{repository}/manifests/{tag}", ACCEPT)
    assert status == 200, body
    return json.loads(body)


def test_a_replaced_local_wheel_changes_the_immutable_tag(builds: dict):
    a, b = builds["a"], builds["b"]
    assert a["image_id"] != b["image_id"]
    assert a["tags"][0] == b["tags"][0], "the dated tag is the same pattern on the same day"
    assert a["tags"][1] != b["tags"][1], "same manifest, same lock: only the wheel's bytes differ"
    wheels_a = {w["package"]: w for w in json.loads(a["labels"]["io.pinwheel.inputs"])["local_wheels"]}
    wheels_b = {w["package"]: w for w in json.loads(b["labels"]["io.pinwheel.inputs"])["local_wheels"]}
    assert wheels_a["pw-kern-skip"]["sha256"] == builds["a_wheel_sha256"]
    assert wheels_b["pw-kern-skip"]["sha256"] == builds["b_wheel_sha256"]
    assert wheels_a["pw-kern-fail"] == wheels_b["pw-kern-fail"]
    assert a["tags"][1].endswith("-" + a["labels"]["io.pinwheel.inputs.sha256"][:12])
    assert a["labels"]["io.pinwheel.content-tag"] == a["tags"][1].split(":", 1)[1]
    # the labels the image says about itself
    labels = a["labels"]
    assert labels["org.opencontainers.image.base.digest"].startswith("sha256:")
    assert labels["org.opencontainers.image.created"] == "2023-11-14T22:13:20Z"  # from SOURCE_DATE_EPOCH
    assert labels["org.opencontainers.image.version"] == a["tags"][0].split(":", 1)[1]


def test_the_sbom_is_written_beside_the_image_and_valid(project: Project, builds: dict):
    a = builds["a"]
    path = Workspace(project.root, "tiny").sbom_file(a["tags"][1])
    text = path.read_text()
    assert validate(text) is None  # cyclonedx-python-lib's own validator, CycloneDX 1.6 JSON schema
    assert hashlib.sha256(text.encode()).hexdigest() == a["labels"]["io.pinwheel.sbom.sha256"]
    doc = json.loads(text)
    by_name = {c["name"]: c for c in doc["components"]}
    assert by_name["pw-kern-skip"]["hashes"] == [{"alg": "SHA-256", "content": builds["a_wheel_sha256"]}]
    for name in ("pw-core", "pw-top", "pw-util", "pw-nodeps"):  # from the lock, each with its sha256
        assert by_name[name]["hashes"] and all(h["alg"] == "SHA-256" for h in by_name[name]["hashes"]), name
    assert all(c.get("hashes") for c in doc["components"]), "every component carries its hash"


def test_tags_name_only_the_smoked_digest(project: Project, builds: dict, registry: str, engine: Engine):
    a, b = builds["a"], builds["b"]
    ns = f"promo-{uuid.uuid4().hex[:10]}"
    target = f"{registry}/{ns}"
    repository = f"{ns}/{project.repository}"
    dated, immutable_a = (t.split(":", 1)[1] for t in a["tags"])
    immutable_b = b["tags"][1].split(":", 1)[1]

    first = project.cli("publish", "--variant", "cu130", "--registry", target)
    assert first.returncode == 0, first.output[-3000:]
    digest_a = manifest_digest(registry, repository, immutable_a)
    assert manifest_digest(registry, repository, dated) == digest_a
    assert a["image_id"] in pushed_image(registry, repository, dated)[3]
    sbom = config_of(registry, repository, f"{immutable_a}.sbom")
    assert sbom["artifactType"] == "application/vnd.cyclonedx+json"
    status, _, blob = registry_get(registry, f"/v2/{repository}/blobs/{sbom['layers'][0]['digest']}")
    assert status == 200 and blob == Workspace(project.root, "tiny").sbom_file(a["tags"][1]).read_bytes()

    # publishing again changes nothing: the same digests, no tag moved, no layer sent
    again = project.cli("publish", "--variant", "cu130", "--registry", target)
    assert again.returncode == 0, again.output[-3000:]
    assert f"unchanged {target}/{a['tags'][0]} {digest_a}" in again.stdout, again.stdout
    assert "0 pushed (0 B)" in again.stderr, again.stderr
    assert manifest_digest(registry, repository, dated) == digest_a

    # B, un-smoked, as the local dated tag: refused, and the registry's dated tag still names A
    engine.tag(b["image_id"], a["tags"][0])
    engine.tag(b["image_id"], b["tags"][1])
    try:
        refused = project.cli("publish", "--variant", "cu130", "--registry", target, "--tag", a["tags"][0])
        assert refused.returncode == 1 and "no smoke result" in refused.stderr, refused.output[-3000:]
        assert manifest_digest(registry, repository, dated) == digest_a
        # B pushed as a candidate (its content tag only), then promoted by its digest: refused too
        candidate = project.cli("publish", "--variant", "cu130", "--registry", target, "--candidate",
                                "--tag", b["tags"][1])
        assert candidate.returncode == 0, candidate.output[-3000:]
        digest_b = manifest_digest(registry, repository, immutable_b)
        assert digest_b and digest_b != digest_a
        assert f"pushed candidate {target}/{b['tags'][1]} {digest_b}" in candidate.stdout
        promoted = project.cli("publish", "--variant", "cu130", "--registry", target, "--digest", digest_b)
        assert promoted.returncode == 1 and "no smoke result" in promoted.stderr, promoted.output[-3000:]
        assert manifest_digest(registry, repository, dated) == digest_a
    finally:
        engine.tag(a["image_id"], a["tags"][0])

    # A promoted by its digest (as CI does after the GPU smoke): the tag already names it, nothing moves
    by_digest = project.cli("publish", "--variant", "cu130", "--registry", target, "--digest", digest_a)
    assert by_digest.returncode == 0, by_digest.output[-3000:]
    assert f"unchanged {target}/{a['tags'][0]} {digest_a}" in by_digest.stdout, by_digest.stdout
    assert manifest_digest(registry, repository, dated) == digest_a
