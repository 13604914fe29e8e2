"""The parsed store (index/parsed.py): cached pages and METADATA kept parsed in one sqlite database, answering
exactly as the raw cache files do, and only for the raw file it was parsed from."""
from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from pinwheel.index.metacache import origin_of
from pinwheel.index import CacheMiss, IndexClient
from pinwheel.index.metadata import requirement_parts
from pinwheel.index.parsed import DATABASE

TARGET = ("3.11", ["manylinux_2_28_x86_64"])


def client(url: str, cache: Path, **kw) -> IndexClient:
    return IndexClient(url, cache_dir=cache, retries=0, backoff=0, timeout=5, **kw)


def answers(c: IndexClient) -> dict:
    """Everything the resolver asks of a cached project, as comparable values."""
    return {
        "files": [f.to_json() for f in c.files("pkg")],
        "versions": c.versions("pkg"),
        "with_yanked": c.versions("pkg", include_yanked=True),
        "best": {v: getattr(c.best_wheel("pkg", v, *TARGET), "filename", None) for v in ("1.0", "1.1", "2.0")},
        "metadata": [c.metadata("pkg", v, *TARGET) for v in ("1.0", "2.0")],
        "requires": [[str(r) for r in c.metadata("pkg", v, *TARGET).requires_dist] for v in ("1.0", "2.0")],
    }


@pytest.fixture
def cached(local_index, tmp_path):
    """A project with wheels for two platforms, a yanked release, extras and markers, read once online."""
    local_index.add("pkg", "1.0", requires=["dep>=1", 'win-only; sys_platform == "win32"'],
                    extras={"fast": ["speedup>=2"], "cuda": ["cu-lib==13.0; platform_machine == 'x86_64'"]})
    local_index.add("pkg", "1.0", tags="cp311-cp311-manylinux_2_17_x86_64")
    local_index.add("pkg", "1.1", yanked="broken")
    local_index.add("pkg", "2.0", requires=["dep>=2"], requires_python=">=3.10")
    url = local_index.serve()
    cache = tmp_path / "cache"
    online = client(url, cache)
    for v in ("1.0", "2.0"):
        online.metadata("pkg", v, *TARGET)
    local_index.close()  # from here on nothing answers
    return url, cache


def test_the_store_answers_as_the_raw_files_do(cached):
    url, cache = cached
    first = client(url, cache, offline=True)
    from_raw = answers(first)  # parses the raw files and fills the store
    first.flush()  # as its exit would
    assert (cache / DATABASE).is_file()
    from_store = answers(client(url, cache, offline=True))
    assert from_store == from_raw
    assert from_raw["versions"] == [Version("1.0"), Version("2.0")]  # the yanked 1.1 only with include_yanked
    assert from_raw["with_yanked"] == [Version("1.0"), Version("1.1"), Version("2.0")]
    assert from_raw["best"]["1.0"] == "pkg-1.0-cp311-cp311-manylinux_2_17_x86_64.whl"
    (cache / DATABASE).unlink()
    assert answers(client(url, cache, offline=True)) == from_raw


def test_a_row_serves_only_the_raw_file_it_was_parsed_from(cached):
    url, cache = cached
    c = client(url, cache, offline=True)
    meta = c.metadata("pkg", "2.0", *TARGET)
    assert [str(r) for r in meta.requires_dist] == ["dep>=2"]
    c.flush()  # the rows it parsed, written now rather than at exit
    raw = next(p for p in (cache / "metadata").rglob("*.METADATA") if origin_of(p)["filename"] == meta.filename)
    db = sqlite3.connect(cache / DATABASE)
    (stored,) = db.execute("SELECT parsed FROM metadata WHERE path LIKE ?", (f"%{raw.name}",)).fetchone()
    forged = {**json.loads(stored), "requires_dist": [requirement_parts(Requirement("forged>=9"))]}
    with db:
        db.execute("UPDATE metadata SET parsed = ? WHERE path LIKE ?", (json.dumps(forged), f"%{raw.name}"))
    # the store answers for the unchanged raw file (this is what makes it fast) ...
    assert [str(r) for r in client(url, cache, offline=True).metadata("pkg", "2.0").requires_dist] == ["forged>=9"]
    # ... and never once the raw file is replaced, whatever its bytes
    replacement = raw.with_name(raw.name + ".new")
    replacement.write_bytes(raw.read_bytes())
    os.replace(replacement, raw)
    os.utime(raw, ns=(raw.stat().st_atime_ns, raw.stat().st_mtime_ns + 1_000_000))
    assert [str(r) for r in client(url, cache, offline=True).metadata("pkg", "2.0").requires_dist] == ["dep>=2"]


def test_a_refreshed_page_is_read_again(local_index, tmp_path):
    local_index.add("pkg", "1.0")
    url = local_index.serve()
    cache = tmp_path / "cache"
    client(url, cache).versions("pkg")
    parsing = client(url, cache, offline=True)
    assert parsing.versions("pkg") == [Version("1.0")]
    parsing.flush()  # now held parsed, as at its exit
    local_index.add("pkg", "1.1")
    assert client(url, cache, refresh=True).versions("pkg") == [Version("1.0"), Version("1.1")]  # page rewritten
    assert client(url, cache, offline=True).versions("pkg") == [Version("1.0"), Version("1.1")]
    assert client(url, cache, max_age=3600).versions("pkg") == [Version("1.0"), Version("1.1")]


def test_the_store_is_never_the_only_copy(cached):
    url, cache = cached
    c = client(url, cache, offline=True)
    c.versions("pkg")
    page = next((cache / "pages").rglob("pkg.json"))
    page.unlink()
    with pytest.raises(CacheMiss, match="'pkg'"):
        client(url, cache, offline=True).versions("pkg")


def test_an_unreadable_store_reads_the_raw_files(cached):
    url, cache = cached
    expected = answers(client(url, cache, offline=True))
    (cache / DATABASE).write_bytes(b"not a database" * 100)
    assert answers(client(url, cache, offline=True)) == expected


def test_a_page_replaced_while_a_run_reads_it_is_read_whole(local_index, tmp_path):
    local_index.add("pkg", "1.0")
    url = local_index.serve()
    cache = tmp_path / "cache"
    client(url, cache).versions("pkg")
    parsing = client(url, cache, offline=True)
    parsing.versions("pkg")
    parsing.flush()  # the store now holds the page, as at the exit of the run that parsed it
    reader = client(url, cache, offline=True)
    assert reader.versions("pkg") == [Version("1.0")]  # from the store's rows; no version's files read yet
    local_index.add("pkg", "1.0", tags="cp311-cp311-manylinux_2_17_x86_64")
    client(url, cache, refresh=True).versions("pkg")  # another run rewrites the page file meanwhile
    best = reader.best_wheel("pkg", "1.0", *TARGET)
    assert best is not None and best.filename == "pkg-1.0-cp311-cp311-manylinux_2_17_x86_64.whl"


def test_a_page_the_index_answers_unchanged_is_not_parsed_again(local_index, tmp_path):
    # An online run revalidates each page: a 304 rewrites the page file (its fetch time) with the same files,
    # and the rows parsed from it follow the new file, so the next offline run reads them and not the file.
    local_index.add("pkg", "1.0")
    url = local_index.serve()
    cache = tmp_path / "cache"
    client(url, cache).versions("pkg")
    parsing = client(url, cache, offline=True)
    parsing.versions("pkg")
    parsing.flush()
    online = client(url, cache)
    assert online.versions("pkg") == [Version("1.0")]
    online.flush()
    assert [r.status for r in local_index.requests if r.path.startswith("/simple/")][-1] == 304
    page = next((cache / "pages").rglob("pkg.json"))
    db = sqlite3.connect(cache / DATABASE)
    st = page.stat()
    assert db.execute("SELECT count(*) FROM page_heads WHERE size = ? AND mtime = ?",
                      (st.st_size, st.st_mtime_ns)).fetchone() == (1,)
    assert db.execute("SELECT count(*) FROM page_versions WHERE size = ? AND mtime = ?",
                      (st.st_size, st.st_mtime_ns)).fetchone() == (1,)
    assert client(url, cache, offline=True).versions("pkg") == [Version("1.0")]


def test_a_page_fetched_online_is_kept_parsed_for_the_file_written(local_index, tmp_path):
    # A page new to the cache (or with other files) is parsed from the index's answer; its rows are kept for
    # the page file as written, so the first offline run after an online one reads them and not the file.
    local_index.add("pkg", "1.0")
    local_index.add("pkg", "2.0", yanked="broken")
    url = local_index.serve()
    cache = tmp_path / "cache"
    online = client(url, cache)
    assert online.versions("pkg") == [Version("1.0")]
    online.flush()
    page = next((cache / "pages").rglob("pkg.json"))
    st = page.stat()
    db = sqlite3.connect(cache / DATABASE)
    assert db.execute("SELECT count(*) FROM page_heads WHERE size = ? AND mtime = ?",
                      (st.st_size, st.st_mtime_ns)).fetchone() == (1,)
    assert db.execute("SELECT count(*) FROM page_versions WHERE size = ? AND mtime = ?",
                      (st.st_size, st.st_mtime_ns)).fetchone() == (2,)
    local_index.close()
    offline = client(url, cache, offline=True)
    assert offline.versions("pkg") == [Version("1.0")]
    assert offline.versions("pkg", include_yanked=True) == [Version("1.0"), Version("2.0")]
    assert [f.to_json() for f in offline.files("pkg")] == json.loads(page.read_text())["files"]


def test_metadata_fetched_online_is_kept_parsed_for_the_file_written(local_index, tmp_path):
    local_index.add("pkg", "1.0", requires=["dep>=1", 'win-only; sys_platform == "win32"'], extras={"fast": ["x>=2"]})
    url = local_index.serve()
    cache = tmp_path / "cache"
    online = client(url, cache)
    fetched = online.metadata("pkg", "1.0", *TARGET)
    online.flush()
    local_index.close()
    files = [p for p in (cache / "metadata").rglob("*.METADATA")]
    assert len(files) == 1
    st = files[0].stat()
    db = sqlite3.connect(cache / DATABASE)
    assert db.execute("SELECT count(*) FROM metadata WHERE size = ? AND mtime = ?",
                      (st.st_size, st.st_mtime_ns)).fetchone() == (1,)
    again = client(url, cache, offline=True).metadata("pkg", "1.0", *TARGET)
    assert [str(r) for r in again.requires_dist] == [str(r) for r in fetched.requires_dist]
    assert (again.name, again.version, again.provides_extra) == (fetched.name, fetched.version, fetched.provides_extra)


def test_a_fetched_page_builds_only_the_files_asked_for(local_index, tmp_path, monkeypatch):
    # A page lists every file of every release; choosing one version's wheel builds that version's candidates
    # and no other file, while the page file and a listing of every file still hold them all, in page order.
    from pinwheel.index.files import IndexFile

    for v in ("1.0", "2.0", "3.0"):
        local_index.add("pkg", v)
        local_index.add("pkg", v, tags="cp311-cp311-manylinux_2_17_x86_64")
    url = local_index.serve()
    built = []
    post_init = IndexFile.__post_init__
    monkeypatch.setattr(IndexFile, "__post_init__", lambda self: (built.append(self.filename), post_init(self)))
    online = client(url, tmp_path / "cache")
    assert online.best_wheel("pkg", "2.0", *TARGET).filename == "pkg-2.0-cp311-cp311-manylinux_2_17_x86_64.whl"
    assert built and all(name.startswith("pkg-2.0-") for name in built)
    listed = json.loads(next((tmp_path / "cache" / "pages").rglob("pkg.json")).read_text())["files"]
    assert len(listed) == 6
    assert [f.to_json() for f in online.files("pkg")] == listed
