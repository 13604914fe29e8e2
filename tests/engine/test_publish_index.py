"""publish_index on the real registry: one OCI index per tag naming each platform's pushed image by
digest, and a platform published without a GPU smoke (the manifest's no_gpu_smoke) says why in the
index's annotations and in its own entry."""
from __future__ import annotations

import io
import json
import tarfile
import uuid

import pytest

from pinwheel.image.engine import Engine
from pinwheel.image.publish import NO_GPU_SMOKE, Published, publish_index
from pinwheel.image.registry import Registry

pytestmark = pytest.mark.engine

WHY = "no arm64 GPU runner; the static smoke ran under QEMU"


def tiny_image(engine: Engine, tmp_path, ref: str, text: str) -> None:
    tarball = tmp_path / f"{uuid.uuid4().hex[:8]}.tar"
    with tarfile.open(tarball, "w") as tar:
        data = text.encode()
        info = tarfile.TarInfo("identity.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    engine.import_tarball(tarball, ref)


def test_the_index_names_each_platform_and_says_why_one_has_no_gpu_smoke(engine: Engine, registry: str, tmp_path):
    ns = f"index-{uuid.uuid4().hex[:10]}"
    repo = f"{registry}/{ns}/pinwheel-test/identity"
    published = {}
    try:
        for platform, suffix in (("linux/amd64", ""), ("linux/arm64", "-arm64")):
            ref = f"{repo}:cu130-abc{suffix}"
            tiny_image(engine, tmp_path, ref, f"{platform} {uuid.uuid4()}")
            digest = engine.push(ref).digest
            labels = {"io.pinwheel.smoke.allowed-skipped": "import,gpu"} if suffix else {}
            published[platform] = Published(engine.image_id(ref), (ref,), {ref: digest}, engine.image_id(ref), labels)
        got = publish_index([f"{ns}/pinwheel-test/identity:cu130-abc", f"{ns}/pinwheel-test/identity:cu130-dated"],
                            registry, published, {"linux/arm64": WHY},
                            {"org.opencontainers.image.created": "2023-11-14T22:13:20Z", "io.pinwheel.other": "x"})
        reg = Registry(registry)
        digests = set()
        for name in ("cu130-abc", "cu130-dated"):
            index = reg.manifest(f"{ns}/pinwheel-test/identity", name)
            assert index is not None and index.media_type == "application/vnd.oci.image.index.v1+json"
            digests.add(index.digest)
            data = index.data
            found = {f"{m['platform']['os']}/{m['platform']['architecture']}": m["digest"] for m in data["manifests"]}
            assert found == {p: r.digests[r.refs[0]] for p, r in published.items()}
            assert data["annotations"] == {NO_GPU_SMOKE: json.dumps({"linux/arm64": WHY}, separators=(",", ":")),
                                           "org.opencontainers.image.created": "2023-11-14T22:13:20Z"}
            entries = {m["platform"]["architecture"]: m.get("annotations") for m in data["manifests"]}
            assert entries == {"amd64": None, "arm64": {NO_GPU_SMOKE: WHY,
                                                        "io.pinwheel.smoke.allowed-skipped": "import,gpu"}}
        assert set(got.values()) == digests and len(digests) == 1
    finally:
        for suffix in ("", "-arm64"):
            engine.remove(f"{repo}:cu130-abc{suffix}", force=True)
