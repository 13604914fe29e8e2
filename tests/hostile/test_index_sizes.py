"""Documents over their limit: a page of a million links, a 200 MB METADATA, read or announced. Each is refused
early, within a memory bound, naming the limit and the variable that raises it; the verdict stays honest
(could not judge, exit 3) and stdout is one JSON document."""
from __future__ import annotations

import hashlib
import json
import re
import zipfile

import pytest

from .hostile_index import JSON, Flood, HostileIndex, Static, assert_no_traceback, html_page, reasons, \
    run_bounded

from tests.support.local_index import build_wheel, metadata_text

LINK = '<a href="../../files/app-1.0.{i}-py3-none-any.whl#sha256=' + "0" * 64 + '">app-1.0.{i}-py3-none-any.whl</a>\n'
JSON_FILE = ('{{"filename": "app-1.0.{i}-py3-none-any.whl", "url": "../../files/app-1.0.{i}-py3-none-any.whl", '
             '"hashes": {{"sha256": "' + "0" * 64 + '"}}}},')
MILLION = 1_000_000
# main read a page of a million links whole and parsed it: 1.9-2.3 GB; this bound is far under that
MEMORY_MIB = 1024


def report(project, url, env=None):
    return run_bounded(["--manifest", str(project), "report", "--json", "--no-lock", "--index-url", url],
                       cwd=project.parent, memory_mib=MEMORY_MIB, env=env, timeout=170)


@pytest.mark.parametrize("announce", [True, False], ids=["content-length", "chunked"])
def test_a_page_of_a_million_links_is_refused(project, announce):
    with HostileIndex(lifetime=170) as ix:
        flood = Flood(b"<!DOCTYPE html><html><body>\n", LINK, MILLION, b"</body></html>\n", announce=announce)
        ix.route("/simple/app/", flood)
        ix.route("/simple/shared-dsl/", flood)
        run = report(project, ix.url)
    assert_no_traceback(run)
    assert run.code == 3, run.stderr[-2000:]
    why = reasons(run)
    assert "over the 32 MiB limit for an HTML index page (raise it with PINWHEEL_MAX_HTML_PAGE_BYTES=BYTES)" in why
    assert ix.url + "app/" in why


def test_a_page_of_short_links_under_the_size_limit_is_refused_by_its_count(project):
    """300,000 links of 45 bytes fit in 14 MB; parsed, each costs far more than its bytes."""
    with HostileIndex(lifetime=170) as ix:
        flood = Flood(b"<html>", '<a href="a-1.{i}-py3-none-any.whl">a</a>\n', 300_000, b"</html>", announce=True)
        ix.route("/simple/app/", flood)
        ix.route("/simple/shared-dsl/", flood)
        run = report(project, ix.url)
    assert_no_traceback(run)
    assert run.code == 3, run.stderr[-2000:]
    assert "(300000 files) is over the 250000 files limit for one index page (raise it with " \
           "PINWHEEL_MAX_PAGE_FILES=FILES)" in reasons(run), reasons(run)


def test_a_json_page_of_a_million_files_is_refused(project):
    with HostileIndex(lifetime=170) as ix:
        flood = Flood(b'{"meta": {"api-version": "1.1"}, "name": "app", "files": [', JSON_FILE, MILLION, b"{}]}",
                      content_type=JSON)
        ix.route("/simple/app/", flood)
        ix.route("/simple/shared-dsl/", flood)
        run = report(project, ix.url)
    assert_no_traceback(run)
    assert run.code == 3, run.stderr[-2000:]
    assert "over the 32 MiB limit for a JSON index page (raise it with PINWHEEL_MAX_JSON_PAGE_BYTES=BYTES)" \
        in reasons(run)


def test_the_page_limit_can_be_raised(project, tmp_path):
    """The same refusal at a lowered limit, and a raised one lets a real page through: the variable is read."""
    wheel = build_wheel(tmp_path / "w", "app", "1.0")
    page = html_page({wheel.name: f"../../files/{wheel.name}"})
    with HostileIndex(lifetime=120) as ix:
        ix.route("/simple/app/", Static(page, content_type="text/html"))
        ix.route("/simple/shared-dsl/", Static(html_page({}), content_type="text/html"))
        ix.route(f"/files/{wheel.name}", Static(wheel.read_bytes(), ranges=True))
        low = report(project, ix.url, env={"PINWHEEL_MAX_HTML_PAGE_BYTES": str(len(page) - 1)})
        high = report(project, ix.url, env={"PINWHEEL_MAX_HTML_PAGE_BYTES": str(len(page))})
    assert_no_traceback(low)
    assert f"over the {len(page) - 1} bytes limit for an HTML index page" in reasons(low)
    assert "limit" not in json.dumps(high.document()), high.stdout[-2000:]


def _huge_metadata_wheel(directory, size: int):
    """A wheel whose METADATA is `size` bytes (deflated to a little): what a ranged read meets."""
    path = directory / "app-1.0-py3-none-any.whl"
    directory.mkdir(parents=True, exist_ok=True)
    head = metadata_text("app", "1.0").rstrip("\n") + "\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("app/__init__.py", "")
        with zf.open("app-1.0.dist-info/METADATA", "w", force_zip64=True) as out:
            out.write(head.encode())
            filler = b"Classifier: x\n" * 4096
            for _ in range((size - len(head)) // len(filler)):
                out.write(filler)
        zf.writestr("app-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    return path


HUGE = 200 * 1024 * 1024


@pytest.mark.parametrize("announce", [True, False], ids=["content-length", "chunked"])
def test_a_200_mb_metadata_file_is_refused_early(project, announce):
    with HostileIndex(lifetime=170) as ix:
        name = "app-1.0-py3-none-any.whl"
        page = f'<a href="../../files/{name}" data-core-metadata="true">{name}</a>\n'.encode()
        ix.route("/simple/app/", Static(page, content_type="text/html"))
        ix.route("/simple/shared-dsl/", Static(html_page({}), content_type="text/html"))
        ix.route(f"/files/{name}.metadata", Flood(metadata_text("app", "1.0").encode(), "Classifier: x{i}\n",
                                                  HUGE // 20, content_type="text/plain", announce=announce))
        run = report(project, ix.url)
    assert_no_traceback(run)
    assert run.code == 3, run.stderr[-2000:]
    assert "over the 16 MiB limit for a METADATA file (raise it with PINWHEEL_MAX_METADATA_BYTES=BYTES)" \
        in reasons(run)


def test_a_200_mb_metadata_member_is_refused_before_it_is_read(project, tmp_path):
    wheel = _huge_metadata_wheel(tmp_path / "w", HUGE)
    data = wheel.read_bytes()
    with HostileIndex(lifetime=170) as ix:
        page = html_page({wheel.name: f"../../files/{wheel.name}#sha256={hashlib.sha256(data).hexdigest()}"})
        ix.route("/simple/app/", Static(page, content_type="text/html"))
        ix.route("/simple/shared-dsl/", Static(html_page({}), content_type="text/html"))
        ix.route(f"/files/{wheel.name}", Static(data, ranges=True))
        run = report(project, ix.url)
        ranged = [r for path, r in ix.requests if path.endswith(".whl")]
    assert_no_traceback(run)
    assert run.code == 3, run.stderr[-2000:]
    assert re.search(r"METADATA\) \(2097\d{5} bytes\) is over the 16 MiB limit for a METADATA file "
                     r"\(raise it with PINWHEEL_MAX_METADATA_BYTES=BYTES\)", reasons(run)), reasons(run)
    assert ranged and all(r for r in ranged)  # only ranges were asked for: the member was never read
