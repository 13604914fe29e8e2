"""Where the index URL and the CA bundle come from."""

from __future__ import annotations

import json
import os
import socket

import pytest
import requests
from pip._internal.models.index import PyPI

from pinwheel.index import IndexClient, IndexUnavailable, ca_bundle, config, default_index_url


@pytest.fixture
def pip_env(monkeypatch, tmp_path):
    """No inherited pip configuration; a fresh ``pip config`` read per test."""
    for var in ("PIP_INDEX_URL", "PIP_CONFIG_FILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # pip: load no config files at all
    config._pip_config.cache_clear()
    yield monkeypatch
    config._pip_config.cache_clear()


def test_index_url_from_environment(pip_env):
    pip_env.setenv("PIP_INDEX_URL", "http://127.0.0.1:1/env/simple")
    assert default_index_url() == "http://127.0.0.1:1/env/simple"


def test_index_url_from_pip_config(pip_env, tmp_path):
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = http://127.0.0.1:1/configured/simple/\n")
    pip_env.setenv("PIP_CONFIG_FILE", str(conf))
    assert default_index_url() == "http://127.0.0.1:1/configured/simple/"


def test_install_section_overrides_global(pip_env, tmp_path):
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = http://127.0.0.1:1/g/simple\n[install]\nindex-url = http://127.0.0.1:1/i/simple\n")
    pip_env.setenv("PIP_CONFIG_FILE", str(conf))
    assert default_index_url() == "http://127.0.0.1:1/i/simple"


def test_index_url_defaults_to_pips_own(pip_env):
    assert default_index_url() == PyPI.simple_url


def test_client_resolves_index_url_lazily(pip_env, tmp_path):
    c = IndexClient(cache_dir=tmp_path)
    pip_env.setenv("PIP_INDEX_URL", "http://127.0.0.1:1/late/simple")
    assert c.index_url == "http://127.0.0.1:1/late/simple/"


def test_ca_bundle_order(monkeypatch, tmp_path):
    files = {}
    for var in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        files[var] = tmp_path / f"{var}.pem"
        files[var].write_text("not really a certificate\n")
        monkeypatch.setenv(var, str(files[var]))
    assert ca_bundle() == str(files["PIP_CERT"])
    monkeypatch.setenv("PIP_CERT", str(tmp_path / "missing.pem"))  # a missing file is skipped
    assert ca_bundle() == str(files["REQUESTS_CA_BUNDLE"])
    monkeypatch.delenv("REQUESTS_CA_BUNDLE")
    assert ca_bundle() == str(files["SSL_CERT_FILE"])


def test_ca_bundle_falls_back_to_the_system(monkeypatch):
    for var in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        monkeypatch.delenv(var, raising=False)
    found = ca_bundle()
    assert found is None or os.path.isfile(found)


def test_client_verifies_with_the_ca_bundle(monkeypatch, tmp_path):
    pem = tmp_path / "ca.pem"
    pem.write_text("x\n")
    monkeypatch.setenv("PIP_CERT", str(pem))
    assert IndexClient("http://127.0.0.1:1/simple/", cache_dir=tmp_path).verify == str(pem)
    assert IndexClient("http://127.0.0.1:1/simple/", cache_dir=tmp_path, verify=False).verify is False


def test_requests_carry_the_bundle(local_index, monkeypatch, tmp_path):
    seen = []

    class Recording(requests.Session):
        def request(self, method, url, *args, **kwargs):
            seen.append(kwargs.get("verify"))
            return super().request(method, url, *args, **kwargs)

    pem = tmp_path / "ca.pem"
    pem.write_text("x\n")
    monkeypatch.setenv("PIP_CERT", str(pem))
    local_index.add("pkg", "1.0")
    c = IndexClient(local_index.serve(), cache_dir=tmp_path / "cache", session=Recording())
    c.metadata("pkg", "1.0")
    assert seen and all(v == str(pem) for v in seen)


def test_errors_do_not_show_passwords(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = IndexClient(f"http://user:hunter2@127.0.0.1:{port}/simple/", cache_dir=tmp_path, retries=0)
    with pytest.raises(IndexUnavailable) as err:
        c.files("pkg")
    assert "hunter2" not in str(err.value) and "user:****@127.0.0.1" in str(err.value)


def test_pips_answer_is_remembered_until_what_pip_read_changes(pip_env, tmp_path):
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = http://127.0.0.1:1/first/simple\n")
    pip_env.setenv("PIP_CONFIG_FILE", str(conf))
    memo_dir = tmp_path / "cache"
    assert default_index_url(memo_dir) == "http://127.0.0.1:1/first/simple"
    memo = memo_dir / config.PIP_ANSWERS
    stored = json.loads(memo.read_text())
    assert str(conf) in stored["answers"]["files"]  # pip's own list of the files it considered
    # a fresh process reads the remembered answer, not pip (shown by an answer pip never gave)
    stored["answers"]["config"]["global.index-url"] = "http://127.0.0.1:1/remembered/simple"
    memo.write_text(json.dumps(stored))
    config._pip_config.cache_clear()
    assert default_index_url(memo_dir) == "http://127.0.0.1:1/remembered/simple"
    # a changed configuration file is read by pip again
    conf.write_text("[global]\nindex-url = http://127.0.0.1:1/second/simple/\n")
    config._pip_config.cache_clear()
    assert default_index_url(memo_dir) == "http://127.0.0.1:1/second/simple/"
    # and so is a changed environment
    other = tmp_path / "other.conf"
    other.write_text("[install]\nindex-url = http://127.0.0.1:1/third/simple\n")
    pip_env.setenv("PIP_CONFIG_FILE", str(other))
    config._pip_config.cache_clear()
    assert default_index_url(memo_dir) == "http://127.0.0.1:1/third/simple"
    assert default_index_url() == "http://127.0.0.1:1/third/simple"  # without a memo: pip, as before
