"""A package from a find-links page on the real engine (tilelang's nightly `-f` page is the model): a page of
links served over HTTPS on the bridge address (the test CA the pipeline trusts), named as a flat index
(`indexes: {nightly: {url, flat: true}}`, `index: nightly` on the package). The lock takes the file from the
page, hash-pinned; the build installs it from there (its pip.conf's find-links), and the image holds it.
"""
from __future__ import annotations

import functools
import hashlib
import http.server
import json
import ssl
import threading
from typing import Iterator

import pytest

from pinwheel.image.engine import Engine

from tests.support.local_index import build_wheel
from tests.support.pipeline import LOCAL_WHEELS, Project, TLSIndex, _TLSServer

pytestmark = pytest.mark.engine

NIGHTLY_SET = """
  - name: nightly
    why: "a nightly build published only on a page of links"
    packages:
      - requirement: "pwf-tile==0.3.0.dev20260101"
        index: nightly
        why: "the kernels need the nightly's fix"
"""


class LoggedHandler(http.server.SimpleHTTPRequestHandler):
    requests: list[str]

    def log_message(self, format, *args):  # noqa: A002: record, do not print
        self.requests.append(self.path)


@pytest.fixture(scope="module")
def nightly_page(tls_index: TLSIndex, tmp_path_factory) -> Iterator[tuple[str, list[str], str]]:
    """(the page's URL, the paths requested of its server, the wheel's sha256)."""
    root = tmp_path_factory.mktemp("find-links")
    (root / "whl").mkdir()
    wheel = build_wheel(root / "whl", "pwf-tile", "0.3.0.dev20260101", requires=["pw-core>=1.0"], payload_size=16)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (root / "whl" / "nightly.html").write_text(
        "<!DOCTYPE html>\n<html><body>\n"
        f'<a href="{wheel.name}#sha256={digest}">{wheel.name}</a><br>\n'
        "</body></html>\n")
    seen: list[str] = []
    handler = functools.partial(type("Handler", (LoggedHandler,), {"requests": seen}), directory=str(root))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(tls_index.ca.cert), str(tls_index.ca.key))
    server = _TLSServer((tls_index.host, 0), handler, context)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"https://{tls_index.host}:{server.server_address[1]}/whl/nightly.html", seen, digest
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def project(project_factory, nightly_page) -> Project:
    url, _seen, _digest = nightly_page
    project = project_factory("find-links")
    text = project.manifest.read_text()
    head = f'indexes:\n  nightly: {{url: "{url}", flat: true, why: "the nightly builds\' page of links"}}\n'
    text = text.replace("\nvariants:\n", "\n" + head + "variants:\n", 1)
    project.manifest.write_text(text.replace("\n  - name: local\n", NIGHTLY_SET + "\n  - name: local\n", 1))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    project.set_wheels(*LOCAL_WHEELS)
    return project


def test_the_package_comes_from_the_find_links_page_into_the_image(project: Project, nightly_page, engine: Engine):
    _url, seen, digest = nightly_page
    slice_text = next(f.read_text() for f in project.lock_dir.glob("*-nightly.txt"))
    assert "pwf-tile==0.3.0.dev20260101" in slice_text and f"--hash=sha256:{digest}" in slice_text, slice_text
    seen.clear()
    built = project.cli("build", "--variant", "cu130", "--quiet", "--json", check=True)
    tag = json.loads(built.stdout)["tags"][0]
    ran = engine.run(tag, ["python", "-c", "import importlib.metadata as m; print(m.version('pwf-tile'))"])
    assert ran.ok and ran.stdout.strip() == "0.3.0.dev20260101", ran
    # the build read the page and fetched the wheel from it
    assert any(p.startswith("/whl/nightly.html") for p in seen), seen
    assert any(p.startswith("/whl/pwf_tile-0.3.0.dev20260101") for p in seen), seen
    report = json.loads(project.cli("report", "--variant", "cu130", "--json").stdout)
    [row] = [p for p in report["packages"] if p["name"] == "pwf-tile"]
    assert row["version"] == "0.3.0.dev20260101"
