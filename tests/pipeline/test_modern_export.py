"""`build` on the modern engine (Docker 26, containerd image store, BuildKit v0.13; `make engine-modern`),
as a user runs it: the variant's registry cache read and written with no cache option, zstd layers that
the loopback registry takes, and, with SOURCE_DATE_EPOCH set, layers with the same digests from two
builds of the same inputs with the build cache pruned between them."""
from __future__ import annotations

import json
import re
import socket
import uuid

import pytest

from pinwheel.image.engine import Engine
from pinwheel.image.inventory import read_image

from tests.support.pipeline import Project, registry_get, steps_in

pytestmark = pytest.mark.engine  # the modern engine: the `modern` fixture (conftest.py)

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


@pytest.fixture(scope="module")
def project(project_factory) -> Project:
    return project_factory("modern-export")


def _forget(modern: Engine, *refs: str) -> None:
    """The engine forgets these images and its whole build cache (the tests' own engine)."""
    for ref in refs:
        if modern.image_exists(ref):
            modern.remove(ref, force=True)
    modern.docker.buildx.prune(all=True)


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_a_build_reads_and_writes_the_variants_registry_cache_by_default(
        project: Project, modern: Engine, registry: str) -> None:
    ns = f"{registry}/cache-{uuid.uuid4().hex[:10]}"
    build = ("--engine-host", str(modern.host), "build", "--variant", "cu130", "--json", "--progress", "plain",
             "--registry", ns)
    first = project.cli(*build)
    assert first.returncode == 0, first.output[-3000:]
    built = json.loads(first.stdout)
    cache = f"{ns}/{project.repository}:cache-cu130"
    try:
        assert f"cache: registry cache of engine {modern.host} written to {cache}" in first.stderr, first.stderr[-2000:]
        repository, tag = cache.split("/", 1)[1].rsplit(":", 1)
        status, _, body = registry_get(registry, f"/v2/{repository}/manifests/{tag}", (OCI_INDEX,))
        assert status == 200 and json.loads(body)["mediaType"] == OCI_INDEX  # a cache manifest, not the image
        layers = modern.layers(built["image_id"])

        # A fresh builder: no image, no build cache. The same command reads the cache it wrote.
        _forget(modern, *built["tags"])
        again = project.cli(*build)
        assert again.returncode == 0, again.output[-3000:]
        runs = {h: cached for h, cached in steps_in(again.stderr).items() if re.match(r"\[[\w-]+ +\d+/\d+\] RUN ", h)}
        assert runs and all(runs.values()), runs
        assert modern.layers(json.loads(again.stdout)["image_id"]) == layers

        off = project.cli(*build[:-2], "--quiet", "--no-cache-export", "--registry", ns)
        assert off.returncode == 0 and "cache:" not in off.stderr, off.output[-2000:]
    finally:
        _forget(modern, *built["tags"])


def test_no_registry_answering_is_a_note_not_an_error(project: Project, modern: Engine) -> None:
    closed = _closed_port()
    result = project.cli("--engine-host", str(modern.host), "build", "--variant", "cu130", "--quiet", "--json",
                         "--registry", closed)
    try:
        assert result.returncode == 0, result.output[-3000:]
        notes = [line for line in result.stderr.splitlines() if f"the registry {closed} does not answer" in line]
        assert len(notes) == 1 and notes[0].startswith("note: ") and "cache:" not in result.stderr
    finally:
        if result.returncode == 0:
            _forget(modern, *json.loads(result.stdout)["tags"])


def test_zstd_layers_push_and_source_date_epoch_clamps_every_layers_file_times(
        project: Project, modern: Engine, registry: str, monkeypatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    build = ("--engine-host", str(modern.host), "build", "--variant", "cu130", "--quiet", "--json",
             "--no-cache-export")
    first = project.cli(*build)
    assert first.returncode == 0, first.output[-3000:]
    built = json.loads(first.stdout)
    pushed = f"{registry}/zstd-{uuid.uuid4().hex[:10]}/{project.repository}:one"
    try:
        layers = modern.layers(built["image_id"])
        modern.tag(built["image_id"], pushed)
        result = modern.push(pushed)
        repository, tag = pushed.split("/", 1)[1].rsplit(":", 1)
        _, _, body = registry_get(registry, f"/v2/{repository}/manifests/{tag}", (OCI_INDEX, OCI_MANIFEST))
        index = json.loads(body)
        if "manifests" in index:  # an index: the image's manifest beside its attestations
            image = next(m for m in index["manifests"] if m.get("platform", {}).get("os") == "linux")
            _, _, body = registry_get(registry, f"/v2/{repository}/manifests/{image['digest']}", (OCI_MANIFEST,))
        blobs = json.loads(body)["layers"]
        types = {layer["mediaType"] for layer in blobs}
        assert types == {"application/vnd.oci.image.layer.v1.tar+zstd"}, types
        # the push report has the registry's compressed bytes (read through the index the store pushes)
        assert result.sizes_from == "registry" and [layer.size for layer in result.layers] == [b["size"] for b in blobs]
        # the inventory reads the zstd layers the containerd store saves
        inventory = read_image(modern, pushed)
        assert {"pw-core", "pw-top"} <= {d.name for d in inventory.distributions}, inventory.notes
        # a candidate pushed by digest: the registry holds it as the image the store knows (its id is the
        # digest of the index it pushes, not its config's)
        target = f"{registry}/cand-{uuid.uuid4().hex[:10]}"
        candidate = project.cli("--engine-host", str(modern.host), "publish", "--variant", "cu130", "--candidate",
                                "--registry", target)
        assert candidate.returncode == 0 and f"pushed candidate {target}/" in candidate.stdout, candidate.output[-3000:]

        _forget(modern, *built["tags"])  # the first image stays as `pushed`; the build cache goes
        second = project.cli(*build)
        assert second.returncode == 0, second.output[-3000:]
        assert modern.layers(json.loads(second.stdout)["image_id"]) != layers  # (else the test below tests nothing)
        report = project.cli("--engine-host", str(modern.host), "layers", pushed, built["tags"][0], "--json")
        assert report.returncode == 1, report.output[-3000:]
        compared = json.loads(report.stdout)["layers"]
        # rewrite-timestamp clamped every file time: no layer differs by a time, a mode or a file on one side
        assert not [d for d in compared if d["mtime_only"] or d["metadata"] or d["only_a"] or d["only_b"]], compared
        # what still differs is content written at build time that records it: byte-code (a .pyc holds its
        # source's mtime as the RUN saw it) and uv's own metadata of a local wheel's install
        differ = [d for d in compared if not d["same"]]
        assert differ and all(d["created_by"].startswith("RUN ") for d in differ), differ
        left = {path.rsplit("/", 1)[-1] for d in differ for path in d["content"] if not path.endswith(".pyc")}
        assert left <= {"RECORD", "uv_cache.json"}, left
        copied = [d for d in compared if d["created_by"].startswith("COPY ")]
        assert copied and all(d["same"] for d in copied), copied
    finally:
        _forget(modern, *built["tags"], pushed)


def test_steps_that_read_source_date_epoch_give_identical_layers_after_a_pruned_cache(
        modern: Engine, base_image: str, tmp_path, monkeypatch) -> None:
    """The engine side alone, on a Dockerfile whose stage declares SOURCE_DATE_EPOCH (so that python's
    byte-code is hash-based): two builds, the build cache pruned between them, give the same layers."""
    from pinwheel.image.builder_features import image_export

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    (tmp_path / "hello.txt").write_text("hello\n")
    (tmp_path / "Dockerfile").write_text(
        "ARG BASE\nFROM ${BASE}\nARG SOURCE_DATE_EPOCH\nCOPY hello.txt /opt/hello.txt\n"
        "RUN mkdir -p /opt/app && echo fixed > /opt/app/data\nRUN python3 -m venv /opt/venv\n")
    export, notes = image_export(modern)
    assert export.rewrite_timestamp and export.compression == "zstd" and notes == []
    tag = f"pinwheel-test/repro-{uuid.uuid4().hex[:10]}"
    layers = []
    try:
        for run in ("a", "b"):
            _forget(modern)
            image = modern.build(tmp_path, tmp_path / "Dockerfile", tags=[f"{tag}:{run}", f"{tag}:{run}-2"],
                                 build_args={"BASE": base_image}, export=export)
            assert modern.image_id(f"{tag}:{run}-2") == modern.image_id(f"{tag}:{run}")  # every tag is given
            layers.append(modern.layers(image))
        assert len(layers[0]) == len(modern.layers(base_image)) + 3 and layers[0] == layers[1], layers
    finally:
        _forget(modern, *(f"{tag}:{run}{more}" for run in ("a", "b") for more in ("", "-2")))
