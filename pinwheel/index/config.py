"""pip's configuration as pip itself reads it: settings, the default index URL, the CA bundle."""
from __future__ import annotations

import ast
import functools
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from .errors import IndexClientError

log = logging.getLogger(__name__)


# pip's answers remembered in the index cache (IndexClient passes it): importing pip's configuration code
# costs more than a whole offline report's evaluation, and its answer only changes with what it read.
PIP_ANSWERS = "pip-answers.json"


def _pip_inputs() -> dict:
    """What pip's configuration is read from, short of the files: the interpreter, pip itself, the environment
    (PIP_* settings, and the variables that place the configuration files)."""
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.find_spec("pip")
    origin = spec.origin if spec and spec.origin else ""
    env = {k: v for k, v in os.environ.items()
           if k.startswith(("PIP_", "XDG_")) or k in ("HOME", "APPDATA", "LOCALAPPDATA", "USERPROFILE")}
    return {"python": sys.executable, "prefix": sys.prefix, "pip": [origin, *_file_state(origin)], "env": env}


def _file_state(path: str) -> list:
    try:
        st = os.stat(path)
    except OSError:
        return [None, None]
    return [st.st_size, st.st_mtime_ns]


def _read_pip() -> dict:
    """pip's configuration, default index and the files it considered, read in-process."""
    # pip is optional here and its internals move between releases: imported only when asked.
    from pip._internal.configuration import Configuration, get_configuration_files  # noqa: PLC0415
    from pip._internal.models.index import PyPI  # noqa: PLC0415

    config = Configuration(isolated=False)
    config.load()
    merged: dict[str, str] = {}
    for key, value in config.items():
        # pip >= 24 yields (file, {key: value}) in load order; older pips yield (key, value).
        merged.update({k: str(v) for k, v in value.items()} if isinstance(value, dict) else {key: str(value)})
    files = {f for _, names in config.iter_config_files() for f in names}
    files |= {f for names in get_configuration_files().values() for f in names}
    return {"config": merged, "default_index": PyPI.simple_url,
            "files": {f: _file_state(f) for f in sorted(files)}}


def _pip_answers(memo_dir: Path | None) -> dict:
    """pip's answers for this interpreter, from the memo in ``memo_dir`` while nothing pip read has changed."""
    memo = Path(memo_dir) / PIP_ANSWERS if memo_dir is not None else None
    inputs = _pip_inputs() if memo is not None else None
    if memo is not None:
        try:
            stored = json.loads(memo.read_text())
            if stored.get("inputs") == inputs and all(
                    _file_state(f) == state for f, state in stored["answers"]["files"].items()):
                return stored["answers"]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):  # absent or unreadable: ask pip
            pass
    answers = _read_pip()
    if memo is not None:
        from ..fsutil import atomic_write  # noqa: PLC0415

        try:
            atomic_write(memo, json.dumps({"inputs": inputs, "answers": answers}).encode())
        except OSError as exc:  # a read-only cache still answers, only slower next time
            log.debug("cannot remember pip's answers in %s: %s", memo, exc)
    return answers


@functools.lru_cache(maxsize=None)
def _pip_config(python: str, memo_dir: Path | None = None) -> dict[str, str]:
    """``pip config list`` of the given interpreter, as a dict (cached per process)."""
    if python == sys.executable:
        try:  # in-process: the same files and variables pip reads, without a subprocess
            return dict(_pip_answers(memo_dir)["config"])
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


def _pip_default_index_url(memo_dir: Path | None = None) -> str:
    if memo_dir is not None:
        try:
            return str(_pip_answers(memo_dir)["default_index"])
        except Exception as exc:  # pip internals moved: ask pip below
            log.debug("in-process pip default index failed: %s", exc)
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


def pip_setting(env: str, keys: Sequence[str], memo_dir: Path | None = None) -> str | None:
    """A pip setting as pip itself would see it: its environment variable, else the first configured key.

    With ``memo_dir`` (an index cache), pip's answer is remembered there while what it read is unchanged."""
    value = os.environ.get(env, "").strip()
    if value:
        return value
    config = _pip_config(sys.executable, memo_dir)
    for key in keys:
        configured = config.get(key, "").strip()
        if configured:
            return configured
    return None


def default_index_url(memo_dir: Path | None = None) -> str:
    """The index ``pip install`` would use.

    ``PIP_INDEX_URL``, else pip's configuration (``install.index-url``, which
    pip lets override ``global.index-url`` for installs), else pip's default.
    With ``memo_dir`` (an index cache), pip's answer is remembered there (see ``pip_setting``).
    """
    configured = pip_setting("PIP_INDEX_URL", ("install.index-url", "global.index-url"), memo_dir)
    return configured.split()[0] if configured else _pip_default_index_url(memo_dir)


def ca_bundle() -> str | None:
    """CA bundle to trust: ``PIP_CERT``, ``REQUESTS_CA_BUNDLE``, ``SSL_CERT_FILE``, else the system's.

    Returns None when there is none (then the library default applies).
    """
    for var in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        value = os.environ.get(var, "").strip()
        if value and os.path.isfile(value):
            return value
    import ssl  # only a run that talks to an index asks for the bundle

    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile):
        if candidate and os.path.isfile(candidate):
            return candidate
    return None
