"""Hostile image archives and image references: a layer member that leaves the image's root (`../`), given to
the reader as a crafted `docker save` archive and loaded into the real engine; an image reference the engine
cannot parse; a lock directory outside the project. Each is exit 2 in one line (or an InventoryError naming the
member), never the engine's exception."""
from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
import uuid
from pathlib import Path

import pytest

from pinwheel.distributions import InventoryError
from pinwheel.image.inventory import extract_files, history, read_save_stream, read_saved

from .bounded import assert_refused, cli

REPO = Path(__file__).resolve().parents[2]


def tar_bytes(members: list[tarfile.TarInfo | tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                tar.addfile(member)
                continue
            name, data = member
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def hardlink(name: str, target: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.LNKTYPE, target
    return info


def saved_archive(path: Path, layer_members: list, layer_name: str = "l1/layer.tar", tag: str = "",
                  compress=None) -> Path:
    """A `docker save` archive of one layer: manifest.json, the config, the layer tar (`compress`ed, as the
    containerd image store saves a compressed layer's blob)."""
    layer = tar_bytes(layer_members)
    if compress is not None:
        layer = compress(layer)
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                         "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer).hexdigest()]}}).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [tag] if tag else None, "Layers": [layer_name]}]).encode()
    path.write_bytes(tar_bytes([("manifest.json", manifest), (config_name, config), (layer_name, layer)]))
    return path


DIST = "usr/lib/python3/dist-packages/pwh-1.0.dist-info/METADATA"
HOSTILE = {
    "dot-dot": [(DIST, b"Name: pwh\nVersion: 1.0\n"), ("../evil.txt", b"evil\n")],
    "dot-dot-inside": [("usr/../../evil.txt", b"evil\n")],
    "dot-dot-wanted": [("usr/lib/python3/dist-packages/../../../../evil.dist-info/METADATA", b"Name: x\n")],
    "hardlink-out": [(DIST, b"Name: pwh\nVersion: 1.0\n"), hardlink("usr/x", "../../etc/passwd")],
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_every_reader_refuses_a_member_that_leaves_the_root(tmp_path, case: str):
    archive = saved_archive(tmp_path / "image.tar", HOSTILE[case])
    for read in (read_saved, history, lambda a: extract_files(a, {"/" + DIST}, tmp_path)):
        with pytest.raises(InventoryError, match="leaves the image's root"):
            read(archive)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["image.tar"]  # nothing extracted


def test_a_layer_named_outside_the_archive_is_refused(tmp_path):
    archive = saved_archive(tmp_path / "image.tar", [(DIST, b"Name: pwh\n")], layer_name="../layer.tar")
    with pytest.raises(InventoryError, match="leaves the image's root"):
        read_saved(archive)


def test_the_plain_archive_reads(tmp_path):
    archive = saved_archive(tmp_path / "image.tar", [("./", b""), (DIST, b"Name: pwh\nVersion: 1.0\n")])
    files, layers = read_saved(archive)
    assert layers == 1 and "/" + DIST in files


def test_a_zstd_layer_reads_with_every_reader_and_a_broken_one_is_refused(tmp_path):
    """A modern builder's zstd layers, as the containerd image store saves them: read like any layer; a
    truncated one is one InventoryError, never zstandard's exception."""
    import zstandard

    members = [("./", b""), (DIST, b"Name: pwh\nVersion: 1.0\n")]
    archive = saved_archive(tmp_path / "image.tar", members, layer_name="blobs/sha256/ab",
                            compress=zstandard.ZstdCompressor().compress)
    files, layers = read_saved(archive)
    assert layers == 1 and files["/" + DIST][1] == b"Name: pwh\nVersion: 1.0\n"
    assert [d.name for d in history(archive).final] == ["pwh"]
    with archive.open("rb") as stream:
        assert "/" + DIST in read_save_stream(stream, "image.tar")[0]
    out = tmp_path / "out"
    out.mkdir()
    (extracted,) = extract_files(archive, {"/" + DIST}, out).values()
    assert extracted.read_bytes().startswith(b"Name: pwh")

    broken = saved_archive(tmp_path / "broken.tar", members, layer_name="blobs/sha256/cd",
                           compress=lambda b: zstandard.ZstdCompressor().compress(b)[:40])
    with broken.open("rb") as stream:
        for read in (read_saved, history, lambda a: extract_files(a, {"/" + DIST}, out),
                     lambda a: read_save_stream(stream, a.name)):
            with pytest.raises(InventoryError, match="broken.tar"):
                read(broken)


@pytest.mark.engine
def test_inspect_and_diff_of_a_crafted_image_loaded_into_the_engine_are_exit_2(engine, tmp_path):
    tag = f"pinwheel-test/crafted-{uuid.uuid4().hex[:10]}:evil"
    archive = saved_archive(tmp_path / "crafted.tar", HOSTILE["dot-dot"], tag=tag)
    engine.docker.image.load(archive)
    try:
        assert engine.image_exists(tag)
        manifest = ["--manifest", str(REPO / "wheels_manifest.yaml")]
        assert_refused(cli(*manifest, "inspect", tag), 2, tag)
        assert_refused(cli(*manifest, "diff", tag, tag), 2, tag)
    finally:
        engine.remove(tag, force=True)


@pytest.mark.engine
@pytest.mark.parametrize("command", [["inspect", "../x"], ["diff", "../../etc/passwd", "../x"]])
def test_a_reference_the_engine_cannot_parse_is_exit_2(engine, command):
    proc = cli("--manifest", str(REPO / "wheels_manifest.yaml"), *command)
    assert_refused(proc, 2, command[1], "not an image reference the engine takes")


def test_diff_of_a_lock_directory_outside_the_project_is_exit_2(tmp_path):
    outside = tmp_path / "lock" / "cu130"
    shutil.copytree(REPO / "images" / "train" / "lock" / "cu130", outside)
    proc = cli("--manifest", str(REPO / "wheels_manifest.yaml"), "diff", str(outside),
               str(REPO / "images" / "train" / "lock" / "cu130"))
    assert_refused(proc, 2, f"lock directory {outside}", "outside the project")
