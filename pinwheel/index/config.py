"""pip's configuration as pip itself reads it: settings, the default index URL, the CA bundle."""
from __future__ import annotations

import ast
import functools
import logging
import os
import ssl
import subprocess
import sys
from typing import Sequence

from .errors import IndexClientError

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=None)
def _pip_config(python: str) -> dict[str, str]:
    """``pip config list`` of the given interpreter, as a dict (cached per process)."""
    if python == sys.executable:
        try:  # in-process: the same files and variables pip reads, without a subprocess
            # pip is optional here and its internals move between releases: imported only when asked.
            from pip._internal.configuration import Configuration  # noqa: PLC0415

            config = Configuration(isolated=False)
            config.load()
            merged: dict[str, str] = {}
            for key, value in config.items():
                # pip >= 24 yields (file, {key: value}) in load order; older pips yield (key, value).
                merged.update({k: str(v) for k, v in value.items()} if isinstance(value, dict) else {key: str(value)})
            return merged
        except Exception as exc:  # pip internals moved: fall back to the CLI
            log.debug("in-process pip configuration failed: %s", exc)
    try:
        proc = subprocess.run(
            [python, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.debug("pip config list failed: %s", exc)
        return {}
    out: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        key, sep, value = line.partition("=")
        if not sep:
            continue
        try:
            parsed = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            parsed = value.strip("'\"")
        out[key.strip()] = str(parsed)
    return out


def _pip_default_index_url() -> str:
    try:
        # pip is optional here and its internals move between releases: imported only when asked.
        from pip._internal.models.index import PyPI  # noqa: PLC0415
    except ImportError:
        proc = subprocess.run(
            [sys.executable, "-c", "from pip._internal.models.index import PyPI; print(PyPI.simple_url)"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if proc.returncode != 0 or not proc.stdout.strip():
            raise IndexClientError("cannot determine the default index URL: pip is not available") from None
        return proc.stdout.strip()
    return PyPI.simple_url


def pip_setting(env: str, keys: Sequence[str]) -> str | None:
    """A pip setting as pip itself would see it: its environment variable, else the first configured key."""
    value = os.environ.get(env, "").strip()
    if value:
        return value
    config = _pip_config(sys.executable)
    for key in keys:
        configured = config.get(key, "").strip()
        if configured:
            return configured
    return None


def default_index_url() -> str:
    """The index ``pip install`` would use.

    ``PIP_INDEX_URL``, else pip's configuration (``install.index-url``, which
    pip lets override ``global.index-url`` for installs), else pip's default.
    """
    configured = pip_setting("PIP_INDEX_URL", ("install.index-url", "global.index-url"))
    return configured.split()[0] if configured else _pip_default_index_url()


def ca_bundle() -> str | None:
    """CA bundle to trust: ``PIP_CERT``, ``REQUESTS_CA_BUNDLE``, ``SSL_CERT_FILE``, else the system's.

    Returns None when there is none (then the library default applies).
    """
    for var in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        value = os.environ.get(var, "").strip()
        if value and os.path.isfile(value):
            return value
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile):
        if candidate and os.path.isfile(candidate):
            return candidate
    return None
