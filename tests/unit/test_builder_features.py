"""What a build asks of its builder's exporter, decided before it starts (builder_features): the registry
cache by default where the builder exports one and the registry answers, zstd layers, rewrite-timestamp
under SOURCE_DATE_EPOCH; on a builder without them (Docker 20.10) nothing changes but one line of note.
The real engines' side is tests/pipeline/test_modern_export.py."""
from __future__ import annotations

import http.server
import threading

import pytest

from pinwheel.image.builder_features import ImageExport, buildx_output, default_cache_ref, image_export, \
    registry_answers


class Builder:
    """An engine as the decisions see it: its cache kind, driver and version."""

    def __init__(self, kind: str, driver: str = "docker", version: tuple[int, int] = (26, 1)) -> None:
        self.kind, self.driver, self.version = kind, driver, version

    def cache_kind(self) -> str:
        return self.kind

    def builder_driver(self) -> str:
        return self.driver

    def engine_version(self) -> tuple[int, int]:
        return self.version


class _V2(http.server.BaseHTTPRequestHandler):
    code = 200

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(self.code)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def registry():
    def serve(code: int) -> str:
        handler = type("Handler", (_V2,), {"code": code})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"127.0.0.1:{server.server_address[1]}"
    servers: list = []
    yield serve
    for server in servers:
        server.shutdown()


def _closed_port() -> str:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_a_registry_answers_with_200_or_401_and_not_when_nothing_listens(registry) -> None:
    assert registry_answers(registry(200)) and registry_answers(registry(401))
    assert not registry_answers(registry(500))
    assert not registry_answers(_closed_port(), timeout=1)


def test_the_default_cache_is_the_variants_ref_on_a_modern_builder_with_a_registry(registry) -> None:
    reg = registry(200)
    ref = f"{reg}/demo/tiny:cache-cu130"
    assert default_cache_ref(Builder("registry"), ref, reg) == (ref, None)
    assert default_cache_ref(Builder("registry", "docker-container"), ref, reg) == (ref, None)


def test_no_registry_answering_is_a_note_and_no_cache(registry) -> None:
    reg = _closed_port()
    found, note = default_cache_ref(Builder("registry"), f"{reg}/demo/tiny:cache-cu130", reg)
    assert found is None and note and f"the registry {reg} does not answer" in note and "\n" not in note


def test_docker_20_10_gets_no_default_cache_and_no_note() -> None:
    assert default_cache_ref(Builder("inline", version=(20, 10)), "r/x:cache-a", "r") == (None, None)


def test_a_modern_builder_exports_zstd_and_rewrites_timestamps_under_source_date_epoch() -> None:
    export, notes = image_export(Builder("registry"), None, {"SOURCE_DATE_EPOCH": "1700000000"})
    assert export == ImageExport("zstd", True, "1700000000") and notes == []
    export, notes = image_export(Builder("registry"), "gzip", {})
    assert export.default and notes == []


def test_docker_20_10_keeps_gzip_and_its_times_with_a_note_each() -> None:
    export, notes = image_export(Builder("inline", version=(20, 10)), "zstd", {"SOURCE_DATE_EPOCH": "1"})
    assert export.default and len(notes) == 2
    assert "gzip layers only" in notes[0] and "rewrite-timestamp" in notes[1]
    assert image_export(Builder("inline", version=(20, 10)), None, {}) == (ImageExport(), [])


def test_an_engine_before_26_with_the_containerd_store_has_zstd_but_no_rewrite() -> None:
    export, notes = image_export(Builder("registry", version=(25, 0)), None, {"SOURCE_DATE_EPOCH": "5"})
    assert export.compression == "zstd" and not export.rewrite_timestamp
    assert len(notes) == 1 and "Docker before 26" in notes[0]


def test_the_output_loads_an_oci_tarball_only_for_rewrite_on_the_docker_driver() -> None:
    rewrite = ImageExport("zstd", True, "1")
    assert buildx_output(rewrite, ["a:1", "a:2"], False, "/t/image.tar") == {
        "type": "oci", "dest": "/t/image.tar", "name": "a:1", "rewrite-timestamp": "true",
        "compression": "zstd", "force-compression": "true"}
    assert buildx_output(rewrite, ["a:1"], True, "/t/image.tar")["type"] == "image"  # a push: the exporter's own
    assert buildx_output(ImageExport("zstd"), ["a:1"], False, None) == {
        "type": "image", "name": "a:1", "compression": "zstd", "force-compression": "true"}
