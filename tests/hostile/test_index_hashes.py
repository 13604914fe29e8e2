"""Indexes that lie about hashes. A wrong hash is refused, naming both; and one index's claim never answers
for another: a report against a hostile index, then against the genuine one with the same cache, ends with
the genuine verdict."""
from __future__ import annotations

import hashlib

import pytest

from .hostile_index import HostileIndex, Static, assert_no_traceback, html_page, reasons, run_bounded

from tests.support.local_index import LocalIndex, build_wheel, metadata_text


def report(project, url):
    return run_bounded(["--manifest", str(project), "report", "--json", "--no-lock", "--index-url", url],
                       cwd=project.parent, timeout=120)


def genuine_index(root) -> LocalIndex:
    """app 1.0 wants shared-dsl>=2.0, which the manifest's shared pin (1.5) excludes: violated. No PEP 658
    files: its METADATA is read by range, as from a mirror without them."""
    ix = LocalIndex(root)
    ix.add("shared-dsl", "1.5", metadata_file=False)
    ix.add("app", "1.0", requires=["shared-dsl>=2.0"], metadata_file=False)
    return ix


@pytest.mark.parametrize("order", ["hostile-first", "genuine-only"])
def test_a_hostile_index_does_not_poison_the_shared_cache(project, tmp_path, order):
    genuine = genuine_index(tmp_path / "genuine")
    real_sha = hashlib.sha256((genuine.files_dir / "app-1.0-py3-none-any.whl").read_bytes()).hexdigest()
    # the hostile index: the same file name, harmless METADATA, and the genuine file's sha256 claimed for it
    hostile = LocalIndex(tmp_path / "hostile")
    hostile.add("shared-dsl", "1.5", metadata_file=False)
    hostile.add("app", "1.0", requires=["shared-dsl>=1.0"], metadata_file=False, listed_sha256=real_sha)
    try:
        if order == "hostile-first":
            lied = report(project, hostile.serve())
            assert_no_traceback(lied)
            assert lied.code == 0 and lied.document()["summary"]["clean"] is True  # what that index says
        honest = report(project, genuine.serve())
    finally:
        hostile.close()
        genuine.close()
    assert_no_traceback(honest)
    doc = honest.document()
    assert honest.code == 1, honest.stdout[-3000:]
    assert doc["summary"]["clean"] is False and doc["summary"]["verdict"] == "conflicts"
    violated = [(e["parent"], e["requirement"]) for e in doc["edges"] if e["verdict"] == "violated"]
    assert ("app", "shared-dsl>=2.0") in violated, doc["edges"]
    cache = project.parent / ".cache" / "index" / "metadata"
    assert not list(cache.rglob(f"{real_sha}.METADATA"))  # nothing is kept under a claim nobody checked


def test_a_download_that_does_not_match_the_listed_hash_is_refused(project, tmp_path):
    wheel = build_wheel(tmp_path / "w", "app", "1.0")
    with HostileIndex(lifetime=120) as ix:
        ix.route("/simple/app/", Static(html_page({wheel.name: f"../../files/{wheel.name}#sha256={'1' * 64}"}),
                                        content_type="text/html"))
        ix.route("/simple/shared-dsl/", Static(html_page({}), content_type="text/html"))
        ix.route(f"/files/{wheel.name}", Static(wheel.read_bytes()))  # no Range: the whole wheel is read
        run = report(project, ix.url)
    assert_no_traceback(run)
    assert run.code == 3
    why = reasons(run)
    assert f"hash mismatch for {wheel.name}" in why and "expected sha256 " + "1" * 64 in why, why


def test_a_metadata_file_that_does_not_match_its_listed_hash_is_refused(project, tmp_path):
    wheel = build_wheel(tmp_path / "w", "app", "1.0")
    with HostileIndex(lifetime=120) as ix:
        page = (f'<a href="../../files/{wheel.name}" data-core-metadata="sha256={"2" * 64}">{wheel.name}</a>\n')
        ix.route("/simple/app/", Static(page.encode(), content_type="text/html"))
        ix.route("/simple/shared-dsl/", Static(html_page({}), content_type="text/html"))
        ix.route(f"/files/{wheel.name}.metadata", Static(metadata_text("app", "1.0").encode()))
        run = report(project, ix.url)
    assert_no_traceback(run)
    assert run.code == 3
    why = reasons(run)
    assert f"hash mismatch for {wheel.name}.metadata" in why and "2" * 64 in why, why
