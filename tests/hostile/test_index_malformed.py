"""Pages that are not what they claim: JSON nested past what the parser reads, the wrong shapes, links that do
not parse, hashes that are not hashes. Each is could not judge (exit 3) or passed over, never a traceback, and
a page's text never becomes a path in the cache."""
from __future__ import annotations

import pytest

from .hostile_index import JSON, HostileIndex, Static, assert_no_traceback, reasons, run_bounded

WHEEL = "app-1.0-py3-none-any.whl"
PAGES = {
    "deep-json": (b'{"files": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", JSON),
    "files-not-a-list": (b'{"meta": {"api-version": "1.1"}, "files": 5}', JSON),
    "page-not-an-object": (b"[1, 2, 3]", JSON),
    "entries-of-every-type": (b'{"files": ["x", 1, null, [], {"filename": 5, "url": []}, '
                              b'{"filename": "' + WHEEL.encode() + b'", "url": "../../files/' + WHEEL.encode() +
                              b'", "hashes": [], "core-metadata": {"sha256": 7}, "yanked": {"a": 1}, "size": "big"}]}',
                              JSON),
    "href-that-does-not-parse": (b'<a href="http://[::1/x.whl">x</a><base href="http://[">'
                                 b'<a href="' + WHEEL.encode() + b'#sha256=zz">' + WHEEL.encode() + b"</a>",
                                 "text/html"),
    "links-to-other-schemes": (f'<a href="file:///etc/{WHEEL}">a</a><a href="ftp://127.0.0.1/{WHEEL}">b</a>'
                               f'<a href="javascript:x/{WHEEL}">c</a>'.encode(), "text/html"),
    "control-characters-in-a-link": (f'<a href="a\x01b\x1b[31m/{WHEEL}">{WHEEL}</a>'.encode(), "text/html"),
    # main kept METADATA at <cache>/metadata/<sha[:2]>/<sha>.METADATA: this one landed beside the manifest
    "hash-that-is-a-path": (b'<a href="../../files/' + WHEEL.encode() + b'#sha256=../../escaped">' + WHEEL.encode()
                            + b"</a>", "text/html"),
}


@pytest.mark.parametrize("case", sorted(PAGES))
def test_a_malformed_page_is_could_not_judge_without_a_traceback(project, case):
    body, content_type = PAGES[case]
    with HostileIndex(lifetime=120) as ix:
        ix.route("/simple/app/", Static(body, content_type=content_type))
        ix.route("/simple/shared-dsl/", Static(body, content_type=content_type))
        ix.route(f"/files/{WHEEL}.metadata", Static(b"Metadata-Version: 2.1\nName: app\nVersion: 1.0\n"))
        run = run_bounded(["--manifest", str(project), "report", "--json", "--no-lock", "--index-url", ix.url],
                          cwd=project.parent, timeout=120)
    assert_no_traceback(run)
    assert run.code == 3, (run.code, run.stderr[-2000:])
    doc = run.document()
    assert doc["summary"]["clean"] is False
    reasons(run)  # each one printable line
    cache = project.parent / ".cache" / "index"
    assert all(p.resolve().is_relative_to(cache.resolve()) for p in cache.rglob("*"))
    assert not list(project.parent.rglob("escaped*"))  # nothing written where a page's text points
