"""The ids an image in a registry is known by on each image store: the classic store names an image by its
config's digest, the containerd store by the digest of the manifest or index it pushes. The publish gate
matches a smoke record and a pushed image by either, never by anything else."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pinwheel.image.publish import _smoked_id
from pinwheel.image.registry import Manifest
from pinwheel.workspace import Workspace

from tests.support.smoke_records import record_smoke

CONFIG = "sha256:" + "c" * 64


def manifest(doc) -> Manifest:
    raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    return Manifest("sha256:" + hashlib.sha256(raw).hexdigest(), "application/vnd.oci.image.manifest.v1+json", raw)


def test_an_image_manifest_is_known_by_its_config_then_its_own_digest():
    m = manifest({"schemaVersion": 2, "config": {"digest": CONFIG}, "layers": []})
    assert m.image_ids() == [CONFIG, m.digest]


def test_an_index_or_bytes_that_are_no_manifest_are_known_by_their_digest_only():
    index = manifest({"schemaVersion": 2, "manifests": [{"digest": CONFIG}]})
    assert index.config_digest is None and index.image_ids() == [index.digest]
    for raw in (b"not json", b"[1, 2]", json.dumps({"config": {"digest": 7}}).encode()):
        junk = manifest(raw)
        assert junk.config_digest is None and junk.image_ids() == [junk.digest]


def test_promote_takes_the_record_of_whichever_id_the_smoke_ran_under(tmp_path: Path):
    results = Workspace(tmp_path, "").smoke_results
    m = manifest({"schemaVersion": 2, "config": {"digest": CONFIG}, "layers": []})
    assert _smoked_id(m, results) == (CONFIG, None)  # no record: the config digest, and the gate refuses
    record_smoke(tmp_path, m.digest, {"static": "passed"})  # a containerd-store engine smoked it
    image_id, smoke = _smoked_id(m, results)
    assert image_id == m.digest and smoke is not None and smoke["image_id"] == m.digest
    index = manifest({"schemaVersion": 2, "manifests": []})
    assert _smoked_id(index, results) == (None, None)  # an index no smoke ran on is no one image
