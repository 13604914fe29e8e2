"""An image's Python distributions, read from its layers: hand-made archives, and a real image."""
from __future__ import annotations

import io
import json
import sys
import tarfile
import uuid
from pathlib import Path

import pytest

from pinwheel.image.engine import Engine, EngineError
from pinwheel.distributions import Inventory, InventoryError
from pinwheel.image.inventory import (
    base_declared, check_inventory, distributions, read_image, read_save_stream, read_saved, write_inventory,
)

SITE = "/usr/local/lib/python3.11/dist-packages"


def metadata(name: str, version: str, requires: tuple[str, ...] = (), extras: tuple[str, ...] = ()) -> bytes:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Provides-Extra: {e}" for e in extras] + [f"Requires-Dist: {r}" for r in requires]
    return ("\n".join(lines) + "\n").encode()


def layer(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def archive(tmp_path: Path, layers: list[dict[str, bytes]]) -> Path:
    path = tmp_path / "image.tar"
    with tarfile.open(path, "w") as outer:
        names = []
        for i, files in enumerate(layers):
            data = layer(files)
            info = tarfile.TarInfo(f"{i:04d}/layer.tar")
            info.size = len(data)
            outer.addfile(info, io.BytesIO(data))
            names.append(info.name)
        manifest = json.dumps([{"Config": "c.json", "RepoTags": [], "Layers": names}]).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        outer.addfile(info, io.BytesIO(manifest))
    return path


def dist_info(name: str, version: str, **kw) -> dict[str, bytes]:
    d = f"{SITE}/{name.replace('-', '_')}-{version}.dist-info"
    record = f"{name.replace('-', '_')}/__init__.py,sha256=x,1200\n{d.rsplit('/', 1)[1]}/METADATA,,\n".encode()
    return {f"{d}/METADATA": metadata(name, version, **kw), f"{d}/RECORD": record, f"{d}/INSTALLER": b"pip\n"}


def test_layers_replay_in_order_with_whiteouts(tmp_path):
    first = {**dist_info("apache-tvm-ffi", "0.1.11"), **dist_info("torch", "2.13.0", requires=("filelock",)),
             **dist_info("gone", "1.0")}
    # a later layer downgrades tvm-ffi (pip removes the old dist-info, adds the new one) and uninstalls `gone`
    old = f"{SITE}/apache_tvm_ffi-0.1.11.dist-info"
    second = {**dist_info("apache-tvm-ffi", "0.1.9"),
              f"{SITE}/.wh.apache_tvm_ffi-0.1.11.dist-info": b"",
              f"{SITE}/.wh.gone-1.0.dist-info": b""}
    files, count = read_saved(archive(tmp_path, [first, second]))
    assert count == 2 and not any(p.startswith(old) for p in files)
    dists, notes = distributions(files)
    by_name = {d.name: d for d in dists}
    assert set(by_name) == {"apache-tvm-ffi", "torch"} and notes == []
    tvm = by_name["apache-tvm-ffi"]
    assert (tvm.version, tvm.layer, tvm.installer, tvm.site) == ("0.1.9", 1, "pip", SITE)
    assert by_name["torch"].requires_dist == ("filelock",)
    assert by_name["torch"].size == 1200 and by_name["torch"].top_level == ("torch",)


def test_an_opaque_directory_hides_what_lower_layers_had(tmp_path):
    first = dist_info("old-env-pkg", "1.0")
    second = {f"{SITE}/.wh..wh..opq": b"", **dist_info("new-pkg", "2.0")}
    files, _ = read_saved(archive(tmp_path, [first, second]))
    assert [d.name for d in distributions(files)[0]] == ["new-pkg"]


def test_a_dist_info_without_metadata_is_noted_not_guessed(tmp_path):
    d = f"{SITE}/half-1.0.dist-info"
    files, _ = read_saved(archive(tmp_path, [{f"{d}/RECORD": b""}]))
    dists, notes = distributions(files)
    assert dists == [] and "has no METADATA" in notes[0]


def test_not_an_archive_is_a_clear_error(tmp_path):
    bad = tmp_path / "x.tar"
    bad.write_bytes(b"not a tar")
    with pytest.raises(InventoryError, match="not a docker save archive"):
        read_saved(bad)


def test_inventory_json_round_trip():
    inv = Inventory("img:1", "sha256:abc", None, tuple(distributions(
        {f"{SITE}/a-1.0.dist-info/METADATA": (0, metadata("a", "1.0", requires=("b>=1",)))})[0]), 1)
    assert Inventory.from_json(json.loads(json.dumps(inv.to_json()))) == inv


RMSNORM = {"import": [], "python": "import flashinfer", "needs": "gpu"}


def test_a_base_pinwheel_built_keeps_its_import_skips_and_checks_and_an_unreadable_one_is_noted(tmp_path):
    expect = json.dumps({"import_skip": {"sglang-kernel": "needs: driver: links libcuda.so.1"},
                         "verify": {"flashinfer-python": RMSNORM}}).encode()
    files, _ = read_saved(archive(tmp_path, [{**dist_info("sglang-kernel", "0.4.5"),
                                               "/opt/pinwheel/expect.json": expect}]))
    assert base_declared(files) == ({"sglang-kernel": "needs: driver: links libcuda.so.1"},
                                    {"flashinfer-python": RMSNORM}, [])
    dists, notes = distributions(files)
    assert [d.name for d in dists] == ["sglang-kernel"] and notes == []  # the file is no distribution
    inv = Inventory("img:1", "sha256:abc", None, tuple(dists), 1, import_skip=(("sglang-kernel", "why"),),
                    verify=(("flashinfer-python", RMSNORM),))
    assert Inventory.from_json(json.loads(json.dumps(inv.to_json()))) == inv
    bare = Inventory("img:1", "sha256:abc", None, tuple(dists), 1).to_json()
    assert "import_skip" not in bare and "verify" not in bare
    unreadable = ["/opt/pinwheel/expect.json is unreadable: no import skips or checks taken from it"]
    for raw in (b"{not json", b'{"import_skip": {"a": 1}}', b"[]",
                b'{"verify": {"a": {"needs": "tpu"}}}', b'{"verify": {"a": {"needs": "gpu", "check": "nope"}}}'):
        assert base_declared({"/opt/pinwheel/expect.json": (0, raw)}) == ({}, {}, unreadable), raw
    assert base_declared({}) == ({}, {}, [])


def oci_archive(tmp_path: Path, layers: list[dict[str, bytes]], manifest_first: bool) -> Path:
    """An archive in the OCI layout newer engines save: layers and a JSON config under blobs/sha256/."""
    path = tmp_path / "oci.tar"
    members = [(f"blobs/sha256/{i:064x}", layer(files)) for i, files in enumerate(layers)]
    members.append(("blobs/sha256/" + "c" * 64, b'{"config": "not a layer"}'))
    manifest = ("manifest.json", json.dumps([{"Config": members[-1][0], "Layers": [n for n, _ in members[:-1]]}])
                .encode())
    with tarfile.open(path, "w") as outer:
        for name, data in ([manifest] + members) if manifest_first else (members + [manifest]):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            outer.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.parametrize("manifest_first", [False, True])
def test_a_streamed_save_replays_like_an_archive_on_disk_in_either_layout(tmp_path, manifest_first):
    layers = [{**dist_info("torch", "2.13.0"), **dist_info("gone", "1.0")},
              {f"{SITE}/.wh.gone-1.0.dist-info": b"", **dist_info("six", "1.17.0")}]
    on_disk = read_saved(archive(tmp_path, layers))
    with open(archive(tmp_path, layers), "rb") as fh:
        assert read_save_stream(fh, "image x") == on_disk
    with open(oci_archive(tmp_path, layers, manifest_first), "rb") as fh:
        files, count = read_save_stream(fh, "image x")
    assert (files, count) == on_disk and count == 2
    assert sorted(d.name for d in distributions(files)[0]) == ["six", "torch"]


def test_a_streamed_save_without_its_layers_or_manifest_is_a_clear_error(tmp_path):
    path = oci_archive(tmp_path, [dist_info("six", "1.17.0")], manifest_first=False)
    with tarfile.open(path) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    for drop, message in (("manifest.json", "no manifest.json"), (next(n for n in members if n.endswith("0")),
                                                                  "is missing")):
        broken = tmp_path / "broken.tar"
        with tarfile.open(broken, "w") as outer:
            for name, data in members.items():
                if name != drop:
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    outer.addfile(info, io.BytesIO(data))
        with open(broken, "rb") as fh, pytest.raises(InventoryError, match=message):
            read_save_stream(fh, "image x")
    with pytest.raises(InventoryError, match="not a docker save archive"):
        read_save_stream(io.BytesIO(b"not a tar at all" * 64), "image x")


# ------------------------------------------------------------------ real engine

BASE_DOCKERFILE = """\
FROM {base}
# a third-party base: packages in the system interpreter (no venv), written by hand in
# layers, one later layer downgrading a package and one uninstalling another, and an
# entrypoint that is not python
RUN set -e; d={site}; for spec in apache_tvm_ffi:0.1.11 torch:2.13.0 gone:1.0; do \\
      n=${{spec%%:*}}; v=${{spec#*:}}; mkdir -p "$d/$n-$v.dist-info" "$d/$n"; \\
      printf 'Metadata-Version: 2.1\\nName: %s\\nVersion: %s\\n' "$n" "$v" > "$d/$n-$v.dist-info/METADATA"; \\
      printf 'pip\\n' > "$d/$n-$v.dist-info/INSTALLER"; \\
      printf '%s/__init__.py,,10\\n' "$n" > "$d/$n-$v.dist-info/RECORD"; touch "$d/$n/__init__.py"; done
RUN set -e; d={site}; rm -rf "$d/apache_tvm_ffi-0.1.11.dist-info" "$d/gone-1.0.dist-info"; \\
    mkdir -p "$d/apache_tvm_ffi-0.1.9.dist-info"; \\
    printf 'Metadata-Version: 2.1\\nName: apache-tvm-ffi\\nVersion: 0.1.9\\n' > "$d/apache_tvm_ffi-0.1.9.dist-info/METADATA"
ENTRYPOINT ["/bin/false"]
"""


@pytest.mark.engine
def test_read_a_real_image_without_running_it(engine: Engine, base_image: str, tmp_path: Path):
    tag = f"pinwheel-test/inventory:{uuid.uuid4().hex[:8]}"
    (tmp_path / "Dockerfile").write_text(BASE_DOCKERFILE.format(base=base_image, site=SITE))
    engine.build(tmp_path, tmp_path / "Dockerfile", tags=[tag])
    try:
        inv = read_image(engine, tag)
        found = {d.name: d.version for d in inv.distributions if d.site == SITE}
        assert found == {"apache-tvm-ffi": "0.1.9", "torch": "2.13.0"}
        assert inv.image_id == engine.image_id(tag) and inv.layers >= 3
        # the base's own Debian python packages are read too, from their own site
        assert any(d.site != SITE for d in inv.distributions)
    finally:
        engine.remove(tag, force=True)


@pytest.mark.engine
def test_a_rebuilt_base_that_holds_the_same_keeps_its_inventory_and_a_changed_one_is_stale(
        engine: Engine, base_image: str, tmp_path: Path, capsys):
    """A new machine rebuilds a bootstrap or stand-in base under a new image id: the committed inventory
    still stands when the layers hold what it says (kept per id), and is stale when they do not."""
    tag = f"pinwheel-test/inventory-rebuilt:{uuid.uuid4().hex[:8]}"
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(BASE_DOCKERFILE.format(base=base_image, site=SITE) + "LABEL build=first\n")
    engine.build(tmp_path, dockerfile, tags=[tag])
    committed = write_inventory(read_image(engine, tag), tmp_path / "cu130.json")
    verified = tmp_path / "checks"
    try:
        assert check_inventory(committed, tag, engine, verified)[0] == "ok"
        dockerfile.write_text(BASE_DOCKERFILE.format(base=base_image, site=SITE) + "LABEL build=second\n")
        engine.build(tmp_path, dockerfile, tags=[tag])  # a new id, the same distributions
        status, detail = check_inventory(committed, tag, engine, verified)
        assert status == "ok" and "rebuilt; it holds what the inventory says" in detail, detail
        assert "the inventory was read from" in capsys.readouterr().err  # the minutes a large base takes, said
        assert len(list(verified.iterdir())) == 1  # the next check of this id reads nothing
        assert check_inventory(committed, tag, engine, verified)[0] == "ok"
        assert capsys.readouterr().err == ""
        dockerfile.write_text(BASE_DOCKERFILE.format(base=base_image, site=SITE).replace("0.1.9", "0.1.7"))
        engine.build(tmp_path, dockerfile, tags=[tag])
        status, detail = check_inventory(committed, tag, engine, verified)
        assert status == "stale" and "what it holds differs; first difference: apache-tvm-ffi 0.1." in detail
    finally:
        engine.remove(tag, force=True)
    # a fresh clone's report or lock, before `build` made the base: the inventory stands, unchecked, and says so
    status, detail = check_inventory(committed, tag, engine, verified)
    assert status == "ok" and f"base {tag} is not in the engine, or no engine answers: identity not checked" in detail, detail


# ------------------------------------------------------------------ inspect

SEED_STYLE = """\
FROM {base}
# hand-written, seed style: one layer installs a set, the next replaces part of it
RUN set -e; d={site}; mk() {{ mkdir -p "$d/$1-$2.dist-info"; \\
      printf 'Metadata-Version: 2.1\\nName: %s\\nVersion: %s\\n%b' "$1" "$2" "$4" > "$d/$1-$2.dist-info/METADATA"; \\
      head -c "$3" /dev/zero > "$d/$1-$2.dist-info/blob"; \\
      printf '%s-%s.dist-info/blob,,%s\\n' "$1" "$2" "$3" > "$d/$1-$2.dist-info/RECORD"; }}; \\
    mk torch 2.13.0 1000 'Requires-Dist: nvidia-cudnn-cu13==9.20.0.48\\nRequires-Dist: apache-tvm-ffi>=0.1.11\\n'; \\
    mk nvidia_cudnn_cu13 9.20.0.48 1000 ''; \\
    mk nvidia_cutlass_dsl_libs_cu12 4.6.2 224000 ''; \\
    mk apache_tvm_ffi 0.1.15.post2 5000 ''; mk protobuf 7.36.2 3000 ''
RUN set -e; d={site}; rm -rf "$d/apache_tvm_ffi-0.1.15.post2.dist-info" "$d/protobuf-7.36.2.dist-info"; \\
    mkdir -p "$d/apache_tvm_ffi-0.1.10.dist-info"; \\
    printf 'Metadata-Version: 2.1\\nName: apache-tvm-ffi\\nVersion: 0.1.10\\n' > "$d/apache_tvm_ffi-0.1.10.dist-info/METADATA"
ENTRYPOINT ["/bin/false"]
"""


@pytest.mark.engine
def test_inspect_reports_churn_shadowed_bytes_wrong_cuda_and_verdicts(engine: Engine, base_image: str, tmp_path: Path):
    tag = f"pinwheel-test/seed-style:{uuid.uuid4().hex[:8]}"
    (tmp_path / "Dockerfile").write_text(SEED_STYLE.format(base=base_image, site=SITE))
    engine.build(tmp_path, tmp_path / "Dockerfile", tags=[tag])
    try:
        from pinwheel import cli

        proc = cli_json(cli, ["inspect", tag, "--json"])
        churn = {(c["name"], c["change"]): c for c in proc["churn"]}
        tvm = churn[("apache-tvm-ffi", "replaced")]
        assert (tvm["before"], tvm["after"], tvm["shadowed"]) == ("0.1.15.post2", "0.1.10", 5000)
        assert churn[("protobuf", "removed")]["shadowed"] == 3000
        assert proc["summary"]["shadowed_bytes"] == 8000
        assert proc["cuda_major"] == 13
        assert [(w["name"], w["cuda"], w["size"]) for w in proc["wrong_cuda"]] == [("nvidia-cutlass-dsl-libs-cu12", 12, 224000)]
        (edge,) = [e for e in proc["edges"] if e["parent"] == "torch" and e["name"] == "apache-tvm-ffi"]
        assert (edge["verdict"], edge["found"]) == ("violated", "0.1.10")
    finally:
        engine.remove(tag, force=True)


def cli_json(cli, argv: list[str]) -> dict:
    import contextlib
    import io as _io

    buf = _io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert cli.main(argv) == 0
    return json.loads(buf.getvalue())


@pytest.mark.engine
def test_diff_two_builds_that_differ_in_one_pin(engine: Engine, base_image: str, tmp_path: Path):
    """Two images whose Dockerfiles differ in one pin: diff shows exactly that package, in its layer."""
    from pinwheel import cli

    tags = []
    for version in ("0.1.10", "0.1.11"):
        d = tmp_path / version
        d.mkdir()
        (d / "Dockerfile").write_text(SEED_STYLE.format(base=base_image, site=SITE).replace("0.1.10", version))
        tag = f"pinwheel-test/diff:{version}-{uuid.uuid4().hex[:6]}"
        engine.build(d, d / "Dockerfile", tags=[tag])
        tags.append(tag)
    try:
        data = cli_json(cli, ["diff", *tags, "--json"])
        assert [(r["name"], r["change"], r["a"], r["b"], r["layer_b"]) for r in data["changes"]] == [
            ("apache-tvm-ffi", "changed", "0.1.10", "0.1.11", 2)]
    finally:
        for tag in tags:
            engine.remove(tag, force=True)


TORCH_TIED = """\
FROM {base}
COPY unstable.so stable.so /tmp/so/
RUN set -e; d={site}; for spec in fancy_ext:unstable stable_ext:stable; do n=${{spec%%:*}}; k=${{spec#*:}}; \\
      mkdir -p "$d/$n-1.0.dist-info" "$d/$n"; cp "/tmp/so/$k.so" "$d/$n/_C.so"; \\
      printf 'Metadata-Version: 2.1\\nName: %s\\nVersion: 1.0\\nRequires-Dist: torch>=2.13\\n' "$n" \\
        > "$d/$n-1.0.dist-info/METADATA"; \\
      printf '%s/_C.so,,1\\n%s/__init__.py,,0\\n' "$n" "$n" > "$d/$n-1.0.dist-info/RECORD"; done; rm -rf /tmp/so
"""


@pytest.mark.engine
def test_inspect_classifies_the_installed_shared_objects(engine: Engine, base_image: str, tmp_path: Path):
    import shutil
    import subprocess

    if not shutil.which("g++"):
        pytest.skip("g++ not found: this test compiles its own shared objects")
    from tests.support.abi_builders import EMPTY_C, STABLE_CPP, UNSTABLE_CPP

    def build(name: str, source: str, compiler: str, extra: list[str], soname: str | None = None) -> Path:
        src = tmp_path / (name + (".cpp" if compiler == "g++" else ".c"))
        src.write_text(source)
        out = tmp_path / name
        subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-o", str(out), str(src), *extra,
                        *([f"-Wl,-soname,{soname}"] if soname else [])], check=True, capture_output=True)
        return out

    build("libc10.so", EMPTY_C, "gcc", [], "libc10.so")
    build("libtorch.so", EMPTY_C, "gcc", [], "libtorch.so")
    link = ["-L" + str(tmp_path), "-Wl,--no-as-needed", "-lc10", "-ltorch"]
    build("unstable.so", UNSTABLE_CPP, "g++", link)
    build("stable.so", STABLE_CPP, "g++", link)
    (tmp_path / "Dockerfile").write_text(TORCH_TIED.format(base=base_image, site=SITE))
    tag = f"pinwheel-test/torch-tied:{uuid.uuid4().hex[:8]}"
    engine.build(tmp_path, tmp_path / "Dockerfile", tags=[tag])
    try:
        from pinwheel import cli

        data = cli_json(cli, ["inspect", tag, "--json"])
        classes = {row["name"]: (row["abi_class"], row["shared_objects"]) for row in data["torch_abi"]}
        assert classes == {"fancy-ext": ("unstable", 1), "stable-ext": ("stable", 1)}
    finally:
        engine.remove(tag, force=True)


def test_a_save_that_fails_before_its_first_byte_says_the_engine_s_words(tmp_path: Path):
    """A daemon out of space for its export writes nothing and exits 1: the reader's "empty file" would
    hide that, so the engine's own last line is the error."""
    fake = tmp_path / "docker"
    fake.write_text("import sys\nsys.stderr.write('Error response from daemon: write /var/lib/docker/tmp/x: "
                    "no space left on device\\n')\nsys.exit(1)\n")
    engine = Engine(client_call=(sys.executable, str(fake)))
    with pytest.raises(EngineError, match="no space left on device"):
        with engine.save_stream("pinwheel/x:1") as stream:
            read_save_stream(stream, "image pinwheel/x:1")
