"""The index configuration uv installs from: a `uvconf` secret holding pip's own index URL (as pip.conf does),
the variant's extra index and pip's trusted hosts; read back as TOML. `installer: pip` writes none."""
from __future__ import annotations

import dataclasses
import tomllib

from pinwheel.image.build import write_secrets
from pinwheel.plan import plan_variant

from tests.support.manifests import load_text, manifest_yaml, variant

MANIFEST = manifest_yaml(variants=[variant("cu130"), variant("cu129", cuda="12.9", torch_index_env="PW_TEST_EXTRA")],
                         steps="""\
  - name: core
    why: "pure-python base"
    packages:
      - {requirement: "six==1.16.0", why: "tiny and stable"}
""")


def test_uv_reads_the_index_pip_is_configured_for(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.invalid/simple/")
    monkeypatch.setenv("PIP_TRUSTED_HOST", "mirror.invalid other.invalid")
    monkeypatch.setenv("PW_TEST_EXTRA", "https://extra.invalid/whl/cu129")
    m = load_text(MANIFEST, tmp_path)
    (tmp_path / "s130").mkdir()
    secrets = write_secrets(plan_variant(m, "cu130"), tmp_path / "s130")
    uv = tomllib.loads(secrets["uvconf"].read_text())
    assert uv == {"allow-insecure-host": ["mirror.invalid", "other.invalid"],
                  "pip": {"index-url": "https://mirror.invalid/simple/"}}
    assert "index-url = https://mirror.invalid/simple/" in secrets["pipconf"].read_text()  # one source, both files
    assert oct(secrets["uvconf"].stat().st_mode & 0o777) == "0o600"
    (tmp_path / "s129").mkdir()
    uv = tomllib.loads(write_secrets(plan_variant(m, "cu129"), tmp_path / "s129")["uvconf"].read_text())
    assert uv["pip"] == {"index-url": "https://mirror.invalid/simple/",
                         "extra-index-url": ["https://extra.invalid/whl/cu129"]}


def test_the_pip_installer_gets_no_uv_configuration(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.invalid/simple/")
    plan = dataclasses.replace(plan_variant(load_text(MANIFEST, tmp_path), "cu130"), installer="pip")
    (tmp_path / "s").mkdir()
    assert "uvconf" not in write_secrets(plan, tmp_path / "s")


def test_an_index_url_with_quotes_and_a_backslash_reads_back_from_the_uv_configuration(tmp_path, monkeypatch):
    odd = 'https://mirror.invalid/simple/?token="a\\b"'  # quotes and a backslash survive the TOML
    monkeypatch.setenv("PIP_INDEX_URL", odd)
    m = load_text(MANIFEST, tmp_path)
    (tmp_path / "s").mkdir()
    assert tomllib.loads(write_secrets(plan_variant(m, "cu130"), tmp_path / "s")["uvconf"].read_text()) == \
        {"pip": {"index-url": odd}}
