"""A package from a second index on the real engine: `index: vendor` takes it only from the vendor's index
(the default index has the same version in other bytes), in the lock, in the build's install (hash-checked)
and in the image.
"""
from __future__ import annotations

import hashlib
import json
from typing import Iterator

import pytest

from pinwheel.image.engine import Engine

from tests.support.pipeline import LOCAL_WHEELS, Project, TLSIndex

pytestmark = pytest.mark.engine

VENDOR_SET = """
  - name: vendor
    why: "a package published on its vendor's own index"
    packages:
      - requirement: "pwv-cubin==2.0"
        index: vendor
        why: "only the vendor's build matches the kernels"
"""


@pytest.fixture(scope="module")
def vendor_index(tls_index: TLSIndex, tmp_path_factory) -> Iterator[TLSIndex]:
    index = TLSIndex(tmp_path_factory.mktemp("vendor-index"), tls_index.host, tls_index.ca)
    index.add("pwv-cubin", "2.0", requires=["pw-core>=1.0"], payload_size=16)
    index.serve()
    try:
        yield index
    finally:
        index.close()


@pytest.fixture(scope="module")
def project(project_factory, tls_index: TLSIndex, vendor_index: TLSIndex) -> Project:
    tls_index.add("pwv-cubin", "2.0", payload_size=24)  # the same version on the default index, other bytes
    project = project_factory("index")
    text = project.manifest.read_text()
    head = f'indexes:\n  vendor: {{url: "{vendor_index.build_url}", why: "the vendor publishes its own wheels"}}\n'
    text = text.replace("\nvariants:\n", "\n" + head + "variants:\n", 1)
    project.manifest.write_text(text.replace("\n  - name: local\n", VENDOR_SET + "\n  - name: local\n", 1))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    project.set_wheels(*LOCAL_WHEELS)
    return project


def test_the_package_comes_from_the_second_index_into_the_image(project: Project, vendor_index: TLSIndex,
                                                                engine: Engine):
    wheel = next(f for f in (vendor_index.root / "files").iterdir() if f.name.endswith(".whl"))
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    slice_text = next(f.read_text() for f in project.lock_dir.glob("*-vendor.txt"))
    assert f"--hash=sha256:{digest}" in slice_text and "# from index vendor only" in slice_text
    built = project.cli("build", "--variant", "cu130", "--quiet", "--json", check=True)
    tag = json.loads(built.stdout)["tags"][0]
    record = engine.run(tag, ["python", "-c", "import importlib.metadata as m; "
                                             "d = m.distribution('pwv-cubin'); print(d.version, d.read_text('RECORD') is not None)"])
    assert record.ok and record.stdout.split() == ["2.0", "True"], record
    # the install is hash-checked against the vendor's file, and fetched it from the vendor's index
    fetched = [r.path for r in vendor_index.requests_for("/files/pwv_cubin") if r.path.endswith(".whl")]
    assert fetched, "the build did not fetch the wheel from the vendor's index"
