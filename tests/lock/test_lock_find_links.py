"""A find-links page (`indexes: {NAME: {url, flat: true}}`, `index: NAME`): one HTML page of links to the files
of several projects, served on loopback. uv resolves from it but writes its pins without hashes (it hashes no
file of a page it reads over HTTP); the lock takes each file's sha256 from its link, and the report reads the
package's requirements through the page like any index's. Real uv runs; tests/pipeline/test_find_links_build.py
builds from such a page on the engine.
"""
from __future__ import annotations

import functools
import hashlib
import http.server
import json
import sys
import threading
from pathlib import Path

import pytest

from tests.support.manifests import manifest_yaml, variant
from pinwheel import cli
from pinwheel.index.client import IndexClient
from pinwheel.index.flat import FlatPageClient
from pinwheel.lock import parse_requirements

from tests.support.local_index import build_wheel

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
STEPS = """\
  - name: kernels
    why: "a nightly from its page of links"
    packages:
      - {requirement: "pwf-tile==0.3.0.dev1", index: nightly, why: "the nightly has the fix"}
"""


@pytest.fixture
def page(tmp_path):
    """(the page's URL, {filename: sha256}) of a page linking pwf-tile 0.3.0.dev1 and 0.2.0, and pwf-other."""
    www = tmp_path / "www"
    www.mkdir()
    wheels = [build_wheel(www, "pwf-tile", "0.3.0.dev1", requires=["pwf-common>=1"]),
              build_wheel(www, "pwf-tile", "0.2.0"), build_wheel(www, "pwf-other", "1.0")]
    digests = {w.name: hashlib.sha256(w.read_bytes()).hexdigest() for w in wheels}
    (www / "nightly.html").write_text("<html><body>\n" + "".join(
        f'<a href="{name}#sha256={sha}">{name}</a><br>\n' for name, sha in digests.items()) + "</body></html>\n")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/nightly.html", digests
    finally:
        server.shutdown()
        server.server_close()


def test_the_page_is_read_as_each_projects_page(page, tmp_path):
    url, digests = page
    client = FlatPageClient.of(IndexClient("http://127.0.0.1:9/simple/", cache_dir=tmp_path / "cache"), url)
    files = client.files("PWF_Tile")
    assert sorted(f.filename for f in files) == sorted(n for n in digests if n.startswith("pwf_tile-"))
    assert {f.filename: f.sha256 for f in files} == {n: d for n, d in digests.items() if n.startswith("pwf_tile-")}
    assert [str(v) for v in client.versions("pwf-other")] == ["1.0"]


def test_the_lock_hashes_the_pages_file_and_the_report_judges_its_requirements(page, local_index, local_project,
                                                                               capsys):
    url, digests = page
    local_index.add("pwf-common", "1.2")
    root = local_project(local_index.serve())
    head = f'indexes:\n  nightly: {{url: "{url}", flat: true, why: "the nightly page"}}\n'
    (root / "wheels_manifest.yaml").write_text(head + manifest_yaml(steps=STEPS, variants=[variant("cu130", python=PY)]))
    assert cli.main(["--manifest", str(root / "wheels_manifest.yaml"), "lock", "--variant", "cu130"]) == 0
    lock = root / "images" / "demo" / "lock" / "cu130"
    full = parse_requirements((lock / "requirements.txt").read_text())
    assert full["pwf-tile"].version == "0.3.0.dev1"
    assert full["pwf-tile"].hashes == (f"sha256:{digests['pwf_tile-0.3.0.dev1-py3-none-any.whl']}",)
    assert full["pwf-common"].version == "1.2" and full["pwf-common"].hashes
    assert "pwf-tile==0.3.0.dev1 \\\n    --hash=sha256:" in (lock / "01-kernels.txt").read_text()
    capsys.readouterr()
    assert cli.main(["--manifest", str(root / "wheels_manifest.yaml"), "lock", "--variant", "cu130", "--check"]) == 0
    capsys.readouterr()
    cli.main(["--manifest", str(root / "wheels_manifest.yaml"), "report", "--variant", "cu130", "--json"])
    report = json.loads(capsys.readouterr().out)
    [edge] = [e for e in report["edges"] if e["parent"] == "pwf-tile"]
    assert (edge["name"], edge["verdict"], edge["found"]) == ("pwf-common", "satisfied", "1.2")
