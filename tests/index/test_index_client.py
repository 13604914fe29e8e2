"""IndexClient against the local test index: pages, metadata paths, retries, cache, targets."""

from __future__ import annotations

import hashlib
import socket
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag
from packaging.version import Version

from pinwheel.index.metacache import origin_of
from pinwheel.index import (
    CacheMiss,
    HashMismatch,
    IndexClient,
    IndexUnavailable,
    MetadataUnavailable,
    PackageNotFound,
    expand_platforms,
    local_metadata,
    parse_metadata,
    target_environment,
    target_tags,
)

PY312_X86 = ("3.12", ["manylinux_2_28_x86_64"])


def client(url: str, cache: Path, **kw) -> IndexClient:
    kw.setdefault("backoff", 0)
    kw.setdefault("retries", 3)
    kw.setdefault("timeout", 5)
    return IndexClient(url, cache_dir=cache, **kw)


def wheel_requests(index, name_part: str):
    return [r for r in index.requests_for(name_part) if r.path.endswith(".whl")]


def plain(reqs) -> list[str]:
    """Requirements as text without their markers."""
    return [str(r).split(";")[0].strip() for r in reqs]


def sent_bytes(reqs) -> int:
    return sum(r.body_bytes for r in reqs)


# -- project pages ---------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "html"])
def test_files_from_json_and_html_pages(local_index, tmp_path, fmt):
    local_index.add("Demo_Pkg", "1.0.0", requires_python=">=3.9")
    local_index.add("demo-pkg", "1.1.0", metadata_file=False, tags="cp312-cp312-manylinux_2_28_x86_64")
    local_index.add("demo-pkg", "0.9", yanked="broken build")
    local_index.add_sdist("demo-pkg", "1.1.0")
    local_index.formats = (fmt,)
    c = client(local_index.serve(), tmp_path / "cache")

    files = {f.filename: f for f in c.files("DEMO.pkg")}
    assert set(files) == {
        "demo_pkg-1.0.0-py3-none-any.whl",
        "demo_pkg-1.1.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        "demo_pkg-0.9-py3-none-any.whl",
        "demo_pkg-1.1.0.tar.gz",
    }
    f = files["demo_pkg-1.0.0-py3-none-any.whl"]
    assert f.url == local_index.url.replace("/simple/", "/files/") + f.filename  # absolute
    assert f.sha256 == hashlib.sha256((local_index.files_dir / f.filename).read_bytes()).hexdigest()
    assert f.requires_python == ">=3.9"
    assert f.has_metadata and f.metadata_sha256
    assert f.yanked is False
    assert f.name == "demo-pkg" and f.version == Version("1.0.0")
    assert f.tags == frozenset({Tag("py3", "none", "any")})
    assert not files["demo_pkg-1.1.0-cp312-cp312-manylinux_2_28_x86_64.whl"].has_metadata
    assert files["demo_pkg-0.9-py3-none-any.whl"].yanked == "broken build"
    sdist = files["demo_pkg-1.1.0.tar.gz"]
    assert not sdist.is_wheel and sdist.tags == frozenset()

    page = local_index.requests_for("/simple/demo-pkg/")
    assert len(page) == 1 and page[0].status == 200
    assert c.versions("demo-pkg") == [Version("1.0.0"), Version("1.1.0")]
    assert c.versions("demo-pkg", include_yanked=True) == [Version("0.9"), Version("1.0.0"), Version("1.1.0")]
    assert len(local_index.requests_for("/simple/demo-pkg/")) == 1  # memoised per client


def test_unknown_project_is_package_not_found(local_index, tmp_path):
    c = client(local_index.serve(), tmp_path / "cache")
    with pytest.raises(PackageNotFound) as err:
        c.files("no-such-thing")
    assert err.value.name == "no-such-thing"
    assert "no-such-thing" in str(err.value)


# -- metadata paths ----------------------------------------------------------


def test_metadata_from_pep658_file(local_index, tmp_path):
    local_index.add(
        "nvidia-cudnn-frontend",
        "1.26.0",
        extras={"cutedsl": ["nvidia-cutlass-dsl[cu13]==4.5.0", "apache-tvm-ffi"]},
        payload_size=200_000,
    )
    c = client(local_index.serve(), tmp_path / "cache")
    meta = c.metadata("nvidia-cudnn-frontend", "1.26.0", *PY312_X86)
    assert meta.source == "pep658"
    assert meta.name == "nvidia-cudnn-frontend" and meta.version == Version("1.26.0")
    assert meta.provides_extra == ("cutedsl",)
    assert meta.requirements() == []  # no base requirements
    assert plain(meta.requirements(["cutedsl"])) == ["nvidia-cutlass-dsl[cu13]==4.5.0", "apache-tvm-ffi"]
    assert wheel_requests(local_index, "nvidia_cudnn_frontend") == []


@pytest.mark.parametrize("dist_info_first", [False, True])
def test_metadata_by_range_when_pep658_absent(local_index, tmp_path, dist_info_first):
    wheel = local_index.add(
        "nvidia-cutlass-dsl",
        "4.6.2",
        requires=["nvidia-cutlass-dsl-libs-cu12==4.6.2"],
        extras={"cu13": ["nvidia-cutlass-dsl-libs-cu13==4.6.2"]},
        metadata_file=False,
        payload_size=1_000_000,
        dist_info_first=dist_info_first,
    )
    c = client(local_index.serve(), tmp_path / "cache")
    meta = c.metadata("nvidia-cutlass-dsl", "4.6.2", *PY312_X86)
    assert meta.source == "range"
    assert [str(r) for r in meta.requirements()] == ["nvidia-cutlass-dsl-libs-cu12==4.6.2"]
    assert meta.provides_extra == ("cu13",)
    reqs = wheel_requests(local_index, "nvidia_cutlass_dsl")
    assert reqs and all(r.status == 206 and r.range for r in reqs)
    assert len(reqs) == (2 if dist_info_first else 1)  # tail (+ the METADATA member when far away)
    assert sent_bytes(reqs) < wheel.stat().st_size / 4
    probes = [r for r in local_index.requests_for(".metadata")]
    assert [r.status for r in probes] == [404]  # probed once, not advertised


def test_advertised_metadata_that_answers_404_falls_back(local_index, tmp_path):
    local_index.add("pkg", "1.0", requires=["dep>=2"], metadata_file=False, advertise_metadata=True)
    c = client(local_index.serve(), tmp_path / "cache")
    f = c.files("pkg")[0]
    assert f.has_metadata
    meta = c.metadata("pkg", "1.0")
    assert meta.source == "range"
    assert [str(r) for r in meta.requires_dist] == ["dep>=2"]


def test_unadvertised_probe_answering_junk_falls_back(local_index, tmp_path):
    wheel = local_index.add("pkg", "1.0", requires=["dep>=2"], metadata_file=False)
    wheel.with_name(wheel.name + ".metadata").write_text("<html>soft 404</html>\n")
    c = client(local_index.serve(), tmp_path / "cache")
    meta = c.metadata("pkg", "1.0")
    assert meta.source == "range" and [str(r) for r in meta.requires_dist] == ["dep>=2"]


def test_probe_can_be_turned_off(local_index, tmp_path):
    local_index.add("pkg", "1.0", requires=["dep>=2"], metadata_file=False)
    c = client(local_index.serve(), tmp_path / "cache", probe_metadata=False)
    assert c.metadata("pkg", "1.0").source == "range"
    assert local_index.requests_for(".metadata") == []


def test_probing_stops_after_misses_in_a_row_and_goes_on_while_probes_find_metadata(local_index, tmp_path):
    # An index whose pages leave PEP 658 out and that serves no .metadata costs a probe per wheel for nothing:
    # after PROBE_MISSES misses in a row the client reads the wheels alone. One that serves them keeps probing.
    from pinwheel.index.wheel_fetch import PROBE_MISSES

    for n in range(PROBE_MISSES + 3):
        local_index.add(f"bare{n}", "1.0", requires=["dep>=2"], metadata_file=False, advertise_metadata=False)
        local_index.add(f"served{n}", "1.0", requires=["dep>=3"], advertise_metadata=False)
    url = local_index.serve()
    bare = client(url, tmp_path / "bare")
    assert {bare.metadata(f"bare{n}", "1.0").source for n in range(PROBE_MISSES + 3)} == {"range"}
    assert len(local_index.requests_for(".metadata")) == PROBE_MISSES
    served = client(url, tmp_path / "served")
    assert {served.metadata(f"served{n}", "1.0").source for n in range(PROBE_MISSES + 3)} == {"pep658"}
    assert served.probe_misses == 0


def test_whole_download_when_server_ignores_range(local_index, tmp_path):
    wheel = local_index.add("pkg", "1.0", requires=["dep>=2"], metadata_file=False, payload_size=300_000)
    local_index.ignore_range = True
    c = client(local_index.serve(), tmp_path / "cache")
    meta = c.metadata("pkg", "1.0")
    assert meta.source == "download"
    assert [str(r) for r in meta.requires_dist] == ["dep>=2"]
    reqs = wheel_requests(local_index, "pkg-1.0")
    assert [r.status for r in reqs] == [200]  # the ranged attempt's answer is the download
    assert reqs[0].body_bytes == wheel.stat().st_size


def test_hash_mismatch_on_download(local_index, tmp_path):
    local_index.add("pkg", "1.0", metadata_file=False, listed_sha256="0" * 64)
    local_index.ignore_range = True
    c = client(local_index.serve(), tmp_path / "cache")
    with pytest.raises(HashMismatch) as err:
        c.metadata("pkg", "1.0")
    assert "pkg-1.0-py3-none-any.whl" in str(err.value) and "0" * 64 in str(err.value)
    assert not list((tmp_path / "cache").glob("metadata/**/*.METADATA"))  # nothing bad cached


def test_hash_mismatch_on_metadata_file(local_index, tmp_path):
    wheel = local_index.add("pkg", "1.0", requires=["dep"])
    wheel.with_name(wheel.name + ".metadata").write_text("Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n\n")
    c = client(local_index.serve(), tmp_path / "cache")
    with pytest.raises(HashMismatch, match=r"\.metadata"):
        c.metadata("pkg", "1.0")


def test_ranged_metadata_checked_against_record(local_index, tmp_path):
    # METADATA that differs from the hash RECORD lists: a corrupt or tampered wheel
    wheel = local_index.add("pkg", "1.0", requires=["dep"], metadata_file=False)
    with zipfile.ZipFile(wheel) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    members["pkg-1.0.dist-info/METADATA"] += b"Requires-Dist: evil\n"
    with zipfile.ZipFile(wheel, "w") as zf:
        for n, d in members.items():
            zf.writestr(n, d)
    c = client(local_index.serve(), tmp_path / "cache")
    with pytest.raises(HashMismatch, match="RECORD"):
        c.metadata("pkg", "1.0")


# -- retries -----------------------------------------------------------------


def test_retries_on_500_then_success(local_index, tmp_path):
    local_index.add("pkg", "1.0", requires=["dep"])
    local_index.fail_next(2, status=500, path_contains="/simple/pkg/")
    local_index.fail_next(1, status=503, path_contains=".metadata")
    c = client(local_index.serve(), tmp_path / "cache", retries=3)
    assert [str(r) for r in c.metadata("pkg", "1.0").requires_dist] == ["dep"]
    assert [r.status for r in local_index.requests_for("/simple/pkg/")] == [500, 500, 200]
    assert [r.status for r in local_index.requests_for(".metadata")] == [503, 200]


def test_gives_up_with_a_clear_error(local_index, tmp_path):
    local_index.add("pkg", "1.0")
    local_index.fail_next(100, status=502)
    c = client(local_index.serve(), tmp_path / "cache", retries=2)
    with pytest.raises(IndexUnavailable) as err:
        c.files("pkg")
    msg = str(err.value)
    assert "'pkg'" in msg and local_index.url + "pkg/" in msg and "3 attempts" in msg and "HTTP 502" in msg
    assert err.value.name == "pkg" and err.value.url == local_index.url + "pkg/"
    assert len(local_index.requests_for("/simple/pkg/")) == 3


def test_connection_refused_is_index_unavailable(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    c = client(f"http://127.0.0.1:{port}/simple/", tmp_path / "cache", retries=1)
    with pytest.raises(IndexUnavailable, match=r"'torch'.*2 attempts.*ConnectionError"):
        c.files("torch")


# -- cache and offline -------------------------------------------------------


def test_offline_from_cache(local_index, tmp_path):
    local_index.add("pkg", "1.0", requires=["dep>=1"], metadata_file=False)
    local_index.add("pkg", "1.1", requires=["dep>=2"])
    url = local_index.serve()
    cache = tmp_path / "cache"
    online = client(url, cache)
    m10 = online.metadata("pkg", "1.0")
    m11 = online.metadata("pkg", "1.1")
    local_index.close()  # nothing answers any more

    offline = client(url, cache, offline=True)
    assert offline.versions("pkg") == [Version("1.0"), Version("1.1")]
    again10 = offline.metadata("pkg", "1.0")
    assert again10 == m10 and again10.source == "cache"
    assert offline.metadata("pkg", "1.1") == m11
    # cache layout: page by index + name; metadata by what was verified: 1.1's PEP 658 file by its own
    # sha256, 1.0's ranged read (nothing verified) by its URL, each with its origin beside it
    assert len(list(cache.glob("pages/*/pkg.json"))) == 1
    f10, f11 = sorted(offline.files("pkg"), key=lambda f: f.version)
    core = cache / "metadata" / "core" / f11.metadata_sha256[:2] / f"{f11.metadata_sha256}.METADATA"
    assert core.is_file() and origin_of(core)["verified_by"] and origin_of(core)["source"] == "pep658"
    (ranged,) = (cache / "metadata" / "url").rglob("*.METADATA")
    assert origin_of(ranged) | {"fetched": 0} == {
        "url": f10.url, "index_url": url, "filename": f10.filename, "claimed_sha256": f10.sha256,
        "source": "range", "verified_by": None, "fetched": 0}
    assert not list(cache.glob(f"metadata/**/{f10.sha256}.METADATA"))  # never under the page's claim


def test_offline_cache_miss_names_the_package(local_index, tmp_path):
    local_index.add("pkg", "1.0")
    local_index.add("pkg", "2.0")
    url = local_index.serve()
    cache = tmp_path / "cache"
    client(url, cache).metadata("pkg", "1.0")  # page + 1.0 cached, 2.0 not

    offline = client(url, cache, offline=True)
    with pytest.raises(CacheMiss, match="'other'") as err:
        offline.files("other")
    assert err.value.name == "other"
    with pytest.raises(CacheMiss, match=r"'pkg' 2\.0"):
        offline.metadata("pkg", "2.0")
    n = len(local_index.requests)
    offline.metadata("pkg", "1.0")
    assert len(local_index.requests) == n  # offline never asks


def test_online_refreshes_pages_unless_fresh_enough(local_index, tmp_path):
    local_index.add("pkg", "1.0")
    url = local_index.serve()
    cache = tmp_path / "cache"
    assert client(url, cache).versions("pkg") == [Version("1.0")]
    local_index.add("pkg", "1.1")
    assert client(url, cache).versions("pkg") == [Version("1.0"), Version("1.1")]
    local_index.add("pkg", "1.2")
    assert client(url, cache, max_age=3600).versions("pkg") == [Version("1.0"), Version("1.1")]
    assert client(url, cache, max_age=0).versions("pkg")[-1] == Version("1.2")


def test_metadata_cache_avoids_the_network(local_index, tmp_path):
    local_index.add("pkg", "1.0", requires=["dep"], metadata_file=False)
    url = local_index.serve()
    cache = tmp_path / "cache"
    client(url, cache).metadata("pkg", "1.0")
    before = len(local_index.requests)
    assert client(url, cache).metadata("pkg", "1.0").source == "cache"
    assert [r.path for r in local_index.requests[before:]] == ["/simple/pkg/"]  # page refresh only


def test_metadata_many_in_parallel(local_index, tmp_path):
    for i in range(12):
        local_index.add(f"p{i}", "1.0", requires=[f"p{i + 1}"], metadata_file=bool(i % 2))
    c = client(local_index.serve(), tmp_path / "cache")
    got = c.metadata_many([(f"p{i}", "1.0") for i in range(12)] + [("missing", "1.0")], *PY312_X86)
    assert isinstance(got[("missing", Version("1.0"))], PackageNotFound)
    for i in range(12):
        meta = got[(f"p{i}", Version("1.0"))]
        assert [str(r) for r in meta.requires_dist] == [f"p{i + 1}"]


# -- target wheel selection ----------------------------------------------------


def test_best_wheel_for_target_not_host(local_index, tmp_path):
    add = local_index.add
    add("torchish", "2.13.0", requires=["host-cp311"], tags="cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64")
    add("torchish", "2.13.0", requires=["cp312-2_17"], tags="cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64")
    add("torchish", "2.13.0", requires=["cp312-2_28"], tags="cp312-cp312-manylinux_2_28_x86_64", metadata_file=False)
    add("torchish", "2.13.0", requires=["cp312-arm"], tags="cp312-cp312-manylinux_2_28_aarch64")
    add("torchish", "2.13.0", requires=["cp312-mac"], tags="cp312-cp312-macosx_14_0_arm64")
    add("torchish", "2.13.0", requires=["cp312-musl"], tags="cp312-cp312-musllinux_1_2_x86_64")
    c = client(local_index.serve(), tmp_path / "cache")

    def pick(py, plats):
        f = c.best_wheel("torchish", "2.13.0", py, plats)
        return f.filename if f else None

    assert pick("3.12", ["manylinux_2_28_x86_64"]) == "torchish-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert pick("3.12", ["manylinux_2_17_x86_64"]).startswith("torchish-2.13.0-cp312-cp312-manylinux_2_17_x86_64")
    assert pick("3.12", ["manylinux2014_x86_64"]).startswith("torchish-2.13.0-cp312-cp312-manylinux_2_17_x86_64")
    assert pick("3.11", ["manylinux_2_28_x86_64"]).startswith("torchish-2.13.0-cp311-cp311-")
    assert pick("3.12", ["manylinux_2_28_aarch64"]).endswith("manylinux_2_28_aarch64.whl")
    assert pick("3.12", ["macosx_15_0_arm64"]).endswith("macosx_14_0_arm64.whl")
    assert pick("3.12", ["musllinux_1_2_x86_64"]).endswith("musllinux_1_2_x86_64.whl")
    assert pick("3.13", ["manylinux_2_28_x86_64"]) is None
    assert pick("3.12", ["manylinux_2_12_x86_64"]) is None
    assert pick("3.12", ["win_amd64"]) is None

    meta = c.metadata("torchish", "2.13.0", "3.12", ["manylinux_2_28_x86_64"])
    assert [str(r) for r in meta.requires_dist] == ["cp312-2_28"]
    assert meta.filename == "torchish-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    with pytest.raises(MetadataUnavailable, match="no wheel for python 3.13"):
        c.metadata("torchish", "2.13.0", "3.13", ["manylinux_2_28_x86_64"])


def test_best_wheel_prefers_specific_over_abi3_and_any(local_index, tmp_path):
    local_index.add("fmla", "1.0.0", tags="cp310-abi3-manylinux2014_x86_64", ext_module=True)
    local_index.add("fmla", "1.0.0", tags="py3-none-any")
    local_index.add("fmla", "1.0.0", tags="py3-none-any", build="1", requires_python=">=3.13")
    c = client(local_index.serve(), tmp_path / "cache")
    assert c.best_wheel("fmla", "1.0.0", "3.12", ["manylinux_2_28_x86_64"]).filename == (
        "fmla-1.0.0-cp310-abi3-manylinux2014_x86_64.whl"
    )
    # an abi3 wheel does not serve an older interpreter; the build-tagged wheel needs 3.13
    assert c.best_wheel("fmla", "1.0.0", "3.9", ["manylinux_2_28_x86_64"]).filename == "fmla-1.0.0-py3-none-any.whl"
    assert c.best_wheel("fmla", "1.0.0", "3.13", ["win_amd64"]).filename == "fmla-1.0.0-1-py3-none-any.whl"


def test_sdist_only_is_metadata_unavailable(local_index, tmp_path):
    local_index.add_sdist("old-thing", "0.1")
    c = client(local_index.serve(), tmp_path / "cache")
    assert c.versions("old-thing") == [Version("0.1")]
    assert c.best_wheel("old-thing", "0.1", *PY312_X86) is None
    with pytest.raises(MetadataUnavailable, match=r"'old-thing' 0\.1 is published as an sdist only"):
        c.metadata("old-thing", "0.1", *PY312_X86)
    with pytest.raises(MetadataUnavailable, match="no files for version 9"):
        c.metadata("old-thing", "9")


def test_expand_platforms_and_target_tags():
    plats = expand_platforms(["manylinux_2_28_x86_64"])
    assert plats[0] == "manylinux_2_28_x86_64"
    assert plats.index("manylinux_2_17_x86_64") < plats.index("manylinux2014_x86_64") < plats.index("manylinux1_x86_64")
    assert "manylinux_2_29_x86_64" not in plats and "linux_x86_64" not in plats
    assert expand_platforms(["manylinux2014_aarch64"])[:2] == ["manylinux_2_17_aarch64", "manylinux2014_aarch64"]
    assert expand_platforms(["musllinux_1_2_x86_64"]) == [
        "musllinux_1_2_x86_64",
        "musllinux_1_1_x86_64",
        "musllinux_1_0_x86_64",
    ]
    tags = target_tags("3.12", ["manylinux_2_28_x86_64"])
    assert tags[0] == Tag("cp312", "cp312", "manylinux_2_28_x86_64")
    assert Tag("cp310", "abi3", "manylinux2014_x86_64") in tags
    assert tags.index(Tag("cp312", "abi3", "manylinux_2_28_x86_64")) < tags.index(Tag("py3", "none", "any"))
    assert tags[-1] == Tag("py30", "none", "any")
    assert target_tags("cp312", ["x"]) == target_tags((3, 12), ["x"])


# -- local wheels and parsing ----------------------------------------------------


def test_local_metadata(local_index):
    wheel = local_index.add(
        "sgl-flash-mla",
        "1.0.0",
        requires=["torch>=2.14.1", 'einops; python_version >= "3.10"'],
        extras={"test": ["pytest"]},
        tags="cp310-abi3-manylinux2014_x86_64",
        requires_python=">=3.10",
        ext_module=True,
    )
    meta = local_metadata(wheel)
    assert meta.name == "sgl-flash-mla" and meta.version == Version("1.0.0")
    assert meta.requires_python == SpecifierSet(">=3.10")
    assert meta.source == "local" and meta.filename == wheel.name
    assert meta.sha256 == hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert meta.url == wheel.resolve().as_uri()
    assert Requirement("torch>=2.14.1") in meta.requires_dist
    assert [r.name for r in meta.requirements(environment={"python_version": "3.9"})] == ["torch"]
    assert [r.name for r in meta.requirements(["test"], {"python_version": "3.12"})] == ["torch", "einops", "pytest"]
    assert IndexClient("http://127.0.0.1:9/simple/", cache_dir=Path("unused")).local_metadata(wheel) == meta


def test_lenient_parse_keeps_what_it_can():
    text = (
        "Metadata-Version: 2.1\nName: Odd_Pkg\nVersion: 1.0\n"
        "Requires-Dist: good>=1\nRequires-Dist: this is not a requirement !!\n"
        "Provides-Extra: Fancy.Extra\nLicense-File: LICENSE\n\n"
    )
    meta = parse_metadata(text)
    assert meta.name == "odd-pkg"
    assert [str(r) for r in meta.requires_dist] == ["good>=1"]
    assert meta.invalid_requires == ("this is not a requirement !!",)
    assert meta.provides_extra == ("fancy-extra",)


def test_target_environment_for_markers():
    env = target_environment("3.12", "manylinux_2_28_x86_64")
    assert env["python_version"] == "3.12" and env["python_full_version"] == "3.12.0"
    assert (env["platform_system"], env["sys_platform"], env["platform_machine"]) == ("Linux", "linux", "x86_64")
    assert target_environment("3.12.4", "macosx_14_0_arm64")["python_full_version"] == "3.12.4"
    assert target_environment("3.12", "macosx_14_0_arm64")["platform_system"] == "Darwin"
    assert target_environment("3.12", "win_amd64")["sys_platform"] == "win32"
    meta = parse_metadata(
        "Metadata-Version: 2.1\nName: t\nVersion: 1\n"
        'Requires-Dist: cuda-bindings<14,>=13.0.3; platform_system == "Linux" and python_version < "3.15"\n\n'
    )
    assert [r.name for r in meta.requirements(environment=env)] == ["cuda-bindings"]
    assert meta.requirements(environment=target_environment("3.12", "macosx_14_0_arm64")) == []
    assert meta.requirements(environment=target_environment("3.15", "manylinux_2_28_x86_64")) == []
