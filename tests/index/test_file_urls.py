"""A page's file URL is taken as it is where urljoin would leave it so, and resolved by urljoin otherwise."""
from __future__ import annotations

from urllib.parse import urldefrag, urljoin

import pytest

from pinwheel.index.files import _absolute, parse_json_page

PAGE = "https://index.example/simple/pkg/"
URLS = ["https://files.example/a/pkg-1.0-py3-none-any.whl", "http://h:8080/x.whl", "HTTPS://H/x.whl",
        "https://f.example/a/./b.whl", "https://f.example/a/../b.whl#sha256=00", "../../files/b.whl", "b.whl",
        "/files/b.whl", "https://h/x%2F.whl", "https://h/a b.whl", "https://h/x.whl ", "https://h/x\t.whl",
        "https://h/x\n.whl", "https://h/x\\..\\y.whl", "https://h/x?q=1", "https://h//x.whl", "https://[::1]/x.whl"]


@pytest.mark.parametrize("url", URLS)
def test_a_file_url_reads_as_urljoin_reads_it(url):
    assert _absolute(PAGE, url) == urldefrag(urljoin(PAGE, url))[0]


def test_a_page_s_files_keep_their_absolute_urls_and_resolve_relative_ones():
    files = parse_json_page({"files": [
        {"filename": "pkg-1.0-py3-none-any.whl", "url": "https://files.example/p/pkg-1.0-py3-none-any.whl"},
        {"filename": "pkg-1.1-py3-none-any.whl", "url": "../../f/pkg-1.1-py3-none-any.whl#sha256=ab"}]}, PAGE)
    assert [f.url for f in files] == ["https://files.example/p/pkg-1.0-py3-none-any.whl",
                                      "https://index.example/f/pkg-1.1-py3-none-any.whl"]
