"""`asset add` against a hostile release server: refused at once, or in bounded time and memory, exit 2, one
line on stderr, nothing on stdout (no entry printed), no traceback."""
from __future__ import annotations

import re

import pytest

from .hostile_index import Drip, Flood, HostileIndex, Static, assert_no_traceback, run_bounded

from tests.support.local_index import build_wheel

NAME = "pw_asset-1.0.0-py3-none-any.whl"


def asset_add(tmp_path, url, env=None, memory_mib=1024):
    manifest = tmp_path / "wheels_manifest.yaml"
    return run_bounded(["--manifest", str(manifest), "asset", "add", url], cwd=tmp_path, env=env,
                       memory_mib=memory_mib, timeout=120)


def refused(run, pattern: str) -> None:
    assert_no_traceback(run)
    assert run.code == 2 and not run.stdout, (run.code, run.stdout, run.stderr)
    assert re.fullmatch(r"error: [^\n]+\n", run.stderr), run.stderr
    assert re.search(pattern, run.stderr), run.stderr


@pytest.mark.parametrize("url", [f"file:///tmp/{NAME}", f"ftp://127.0.0.1/{NAME}", f"http://127.0.0.1/a b/{NAME}",
                                 f'http://127.0.0.1/"{NAME}'])
def test_a_url_the_manifest_would_refuse_is_refused_at_once(tmp_path, url):
    run = asset_add(tmp_path, url)
    refused(run, r"asset add: .* is not a URL of a file this kind downloads \(https:// or http://")
    assert not (tmp_path / ".cache").exists() or not list((tmp_path / ".cache").rglob("*.whl"))


def test_a_gib_of_zeros_is_not_a_wheel(tmp_path):
    with HostileIndex(lifetime=120) as ix:
        ix.route(f"/{NAME}", Flood(b"", "\0" * 65536, 16384, content_type="application/octet-stream",
                                   announce=False, batch=1))
        run = asset_add(tmp_path, f"{ix.base}/{NAME}")
        sent = len(ix.requests)
    refused(run, r"not a wheel: the body does not start as a zip archive does")
    assert sent == 1
    assert not list(tmp_path.rglob(NAME))  # nothing kept


def test_a_zip_without_a_dist_info_is_not_a_wheel(tmp_path):
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("readme.txt", "not a wheel")
    with HostileIndex(lifetime=120) as ix:
        ix.route(f"/{NAME}", Static(buf.getvalue()))
        run = asset_add(tmp_path, f"{ix.base}/{NAME}")
    refused(run, r"not a wheel: the zip has no \.dist-info directory with METADATA and WHEEL")
    assert not list(tmp_path.rglob(NAME))


def test_a_dripped_asset_is_given_up_at_the_minimum_rate(tmp_path):
    wheel = build_wheel(tmp_path / "w", "pw-asset", "1.0.0")
    with HostileIndex(lifetime=120) as ix:
        ix.route(f"/{NAME}", Drip(wheel.read_bytes(), every=1.0, content_type="application/octet-stream"))
        run = asset_add(tmp_path / "w", f"{ix.base}/{NAME}")
    refused(run, r"under the minimum rate of 1024 bytes/s \(lower it with PINWHEEL_MIN_TRANSFER_RATE\)")


def test_a_dripped_asset_is_given_up_at_its_deadline(tmp_path):
    wheel = build_wheel(tmp_path / "w", "pw-asset", "1.0.0")
    with HostileIndex(lifetime=120) as ix:
        ix.route(f"/{NAME}", Drip(wheel.read_bytes(), every=0.5, content_type="application/octet-stream"))
        run = asset_add(tmp_path / "w", f"{ix.base}/{NAME}",
                        env={"PINWHEEL_MIN_TRANSFER_RATE": "0", "PINWHEEL_ASSET_DEADLINE": "3"})
    refused(run, r"gave up at the deadline after \d+ bytes \(raise it with PINWHEEL_ASSET_DEADLINE\)")


def test_an_asset_over_the_download_limit_is_refused(tmp_path):
    wheel = build_wheel(tmp_path / "w", "pw-asset", "1.0.0", payload_size=200_000)
    with HostileIndex(lifetime=120) as ix:
        ix.route(f"/{NAME}", Static(wheel.read_bytes()))
        run = asset_add(tmp_path / "w", f"{ix.base}/{NAME}", env={"PINWHEEL_MAX_DOWNLOAD_BYTES": "100000"})
        ok = asset_add(tmp_path / "w", f"{ix.base}/{NAME}")
    refused(run, r"is over the 100000 bytes limit for a wheel or asset download "
                 r"\(raise it with PINWHEEL_MAX_DOWNLOAD_BYTES=BYTES\)")
    assert ok.code == 0 and "kind: asset" in ok.stdout, ok.stderr
