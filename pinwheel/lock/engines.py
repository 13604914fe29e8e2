"""The resolvers a lock is made with, pip-compile and `uv pip compile`: how each is run, and the one run
of a lock, in a scratch directory with relative names, so that annotations carry no paths.

The resolver runs with pip's and uv's own configuration files and ``PIP_*``
index variables switched off: a lock is made from the index and the variant's
extra index only, never from a machine's find-links directory.
"""
from __future__ import annotations

import os
import platform as host_platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

from ..fsutil import find_uv
from ..index import ca_bundle
from ..plan import Plan
from ..workspace import LockFiles
from .format import LockError, LockUnavailable, parse_requirements
from .inputs import LockInputs
from .overrides import PROJECT, overrides_file, project_file

# Environment variables the resolvers may keep (caches, timeouts, TLS); every
# other PIP_*/UV_* variable (index URLs, find-links, constraints) is dropped.
_KEEP_ENV = frozenset({
    "PIP_CACHE_DIR", "PIP_NO_CACHE_DIR", "PIP_DEFAULT_TIMEOUT", "PIP_TIMEOUT", "PIP_RETRIES",
    "PIP_CLIENT_CERT", "PIP_PROXY", "PIP_TRUSTED_HOST", "PIP_TOOLS_CACHE_DIR",
    "UV_CACHE_DIR", "UV_NO_CACHE", "UV_HTTP_TIMEOUT", "UV_NATIVE_TLS", "UV_INSECURE_HOST",
    "UV_CONCURRENT_DOWNLOADS",
})


def engine_env(custom_command: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if (not k.startswith(("PIP_", "UV_")) or k in _KEEP_ENV) and k != "PYTHONPATH"}  # `-m piptools` imports
    # from the venv only: a checkout on PYTHONPATH would shadow pip-tools' own `build` with pinwheel's build.py
    env.update({
        "PIP_CONFIG_FILE": os.devnull,  # no pip.conf: no find-links, extra indexes, constraints
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHONSAFEPATH": "1",  # `python -m piptools` must not import from the cwd
        "CUSTOM_COMPILE_COMMAND": custom_command,
        "UV_CUSTOM_COMPILE_COMMAND": custom_command,
        "UV_NO_CONFIG": "1",
        "UV_PYTHON_DOWNLOADS": "never",
    })
    ca = ca_bundle()
    if ca:
        env["PIP_CERT"] = ca
        env["SSL_CERT_FILE"] = ca
    return env


def _uv_bin() -> str:
    found = find_uv()
    if not found:
        raise LockUnavailable("uv is not installed (pip install uv), so --engine uv cannot run")
    return found


def uv_version() -> str:
    """The version of the uv pinwheel runs: the one the image installs with (image.installer: uv)."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("uv")
        except PackageNotFoundError:
            pass
    except ImportError:  # pragma: no cover - importlib.metadata is stdlib
        pass
    proc = subprocess.run([_uv_bin(), "--version"], capture_output=True, text=True)
    m = re.match(r"uv (\S+)", proc.stdout)
    if proc.returncode != 0 or not m:
        raise LockUnavailable(f"cannot tell uv's version (`uv --version` exit {proc.returncode})")
    return m[1]


def uv_python_platform(platform: str) -> str:
    """uv's --python-platform for a wheel platform tag: manylinux_2_36_x86_64 -> x86_64-manylinux_2_36."""
    m = re.fullmatch(r"manylinux_(\d+)_(\d+)_(x86_64|aarch64)", platform)
    if m:
        return f"{m[3]}-manylinux_{m[1]}_{m[2]}"
    m = re.fullmatch(r"musllinux_\d+_\d+_(x86_64|aarch64)", platform)
    if m:
        return f"{m[1]}-unknown-linux-musl"
    raise LockUnavailable(f"uv cannot resolve for platform {platform!r}")


def check_host_for_pip_compile(plan: Plan) -> None:
    v = plan.variant
    host = f"{sys.version_info.major}.{sys.version_info.minor}"
    if host != v.python:
        raise LockUnavailable(
            f"variant {v.name} targets Python {v.python}, but pip-compile resolves for the interpreter it runs "
            f"on (Python {host}). Use `--engine uv`, which resolves for the target's Python and platform, "
            f"or run pinwheel with a Python {v.python} interpreter."
        )
    arch = v.platform.rsplit("_", 1)[-1] if not v.platform.endswith("x86_64") else "x86_64"
    machine = host_platform.machine().lower().replace("amd64", "x86_64").replace("arm64", "aarch64")
    if not sys.platform.startswith("linux") or machine != arch:
        raise LockUnavailable(
            f"variant {v.name} targets Linux {arch}, but pip-compile resolves for this host "
            f"({sys.platform} {machine}). Use `--engine uv`, which resolves for the target platform."
        )


def compile_command(plan: Plan, engine: str, index_url: str, extra_index: str | None, upgrade: bool,
                     overrides: bool = False, source: str = LockFiles.REQUIREMENTS_IN,
                     refresh: bool = False) -> list[str]:
    v = plan.variant
    if engine == "pip-compile":
        cmd = [
            sys.executable, "-m", "piptools", "compile", "--quiet",
            "--generate-hashes", "--allow-unsafe", "--strip-extras",
            "--no-emit-index-url", "--no-emit-find-links", "--no-emit-trusted-host", "--no-emit-options",
            "--no-config", "--newline", "lf",
            "--index-url", index_url,
        ]
    else:
        cmd = [
            _uv_bin(), "pip", "compile", "--quiet", "--no-config", "--no-progress",
            "--generate-hashes",
            "--python-version", v.python, "--python-platform", uv_python_platform(v.platform),
            "--index-url", index_url,
        ]
    if extra_index:
        cmd += ["--extra-index-url", extra_index]
    if upgrade:
        cmd += ["--upgrade"]
    if refresh:  # no cached page or metadata stands in for the index's answer now
        cmd += ["--refresh"] if engine == "uv" else ["--rebuild", "--pip-args", "--no-cache-dir"]
    if overrides:  # uv only: every other requirement on an overridden package gives way to its pin
        cmd += ["--override", LockFiles.OVERRIDES]
    cmd += ["--constraint", LockFiles.CONSTRAINTS, "--output-file", LockFiles.REQUIREMENTS, source]
    return cmd


def redact(text: str, secrets: Iterable[str]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "<index>")
    return text


@dataclass(frozen=True)
class Compiled:
    """One resolver run: its output, the inputs it read (kept in the lock for review), and how long it took."""
    text: str
    requirements_in: str
    constraints: str
    seconds: float


def compile_lock(plan: Plan, engine: str, inputs: LockInputs, *, index_url: str, extra_index: str | None,
                 upgrade: bool, named: bool, kept: Mapping[str, str], previous: Path, custom: str,
                 log: Callable[[str], None], refresh: bool = False) -> Compiled:
    """Resolve the variant once, in a scratch directory. ``previous``: the committed requirements.txt, whose
    pins are kept where they still fit (unless ``upgrade``); ``kept``: the base's versions, preferred where
    nothing asks for others; ``named``: some packages come from named indexes (a uv project file)."""
    with tempfile.TemporaryDirectory(prefix="pinwheel-lock-") as tmp:
        work = Path(tmp)
        (work / LockFiles.REQUIREMENTS_IN).write_text(_inputs_file(plan, inputs))
        (work / LockFiles.CONSTRAINTS).write_text(_constraints_file(plan, inputs))
        if inputs.overrides:
            (work / LockFiles.OVERRIDES).write_text(overrides_file(plan, inputs))
        if named:  # in the scratch dir only: the lock names no index URL
            (work / PROJECT).write_text(project_file(plan, inputs))
        if previous.exists() and not upgrade:  # keep earlier pins where they still fit
            if refresh:  # the pins without their hashes, which both resolvers would reuse
                earlier = parse_requirements(previous.read_text(), "previous lock")
                _prefer(work / LockFiles.REQUIREMENTS, {n: p.version for n, p in earlier.items()})
            else:
                shutil.copyfile(previous, work / LockFiles.REQUIREMENTS)
        if kept:  # and the base's versions, where nothing asks for others: preferences of the resolve
            _prefer(work / LockFiles.REQUIREMENTS, kept)
        cmd = compile_command(plan, engine, index_url, extra_index, upgrade, bool(inputs.overrides),
                              PROJECT if named else LockFiles.REQUIREMENTS_IN, refresh)
        log(f"{plan.variant.name}: resolving with {engine}")
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=work, env=engine_env(custom), capture_output=True, text=True)
        seconds = time.monotonic() - t0
        if proc.returncode != 0:
            tail = "\n".join((proc.stderr + proc.stdout).strip().splitlines()[-40:])
            raise LockError(f"variant {plan.variant.name}: {engine} failed (exit {proc.returncode}):\n"
                            + redact(tail, [index_url, extra_index or ""]))
        return Compiled((work / LockFiles.REQUIREMENTS).read_text(), (work / LockFiles.REQUIREMENTS_IN).read_text(),
                        (work / LockFiles.CONSTRAINTS).read_text(), seconds)


def _inputs_file(plan: Plan, inputs: LockInputs) -> str:
    lines = [f"# pinwheel: what variant {plan.variant.name} installs from the index with its dependencies",
             "# (generated from the manifest by `build.py lock`; do not edit)."]
    return "\n".join(lines + list(inputs.requirements)) + "\n"


def _prefer(output: Path, versions: Mapping[str, str]) -> None:
    """Seed the resolver's output file with versions it should keep where they still fit (both resolvers
    read an existing output file as preferences, not requirements)."""
    have = parse_requirements(output.read_text(), "previous lock") if output.exists() else {}
    lines = [output.read_text().rstrip("\n")] if output.exists() else []
    lines += [f"{n}=={ver}" for n, ver in sorted(versions.items()) if n not in have]
    output.write_text("\n".join(lines) + "\n")


def _constraints_file(plan: Plan, inputs: LockInputs) -> str:
    lines = [f"# pinwheel: constraints of variant {plan.variant.name}: the shared pins, and what later steps",
             "# install with --no-deps or as fallbacks, so that no step moves an earlier one's pin.",
             "# (generated from the manifest by `build.py lock`; extras stripped: constraints carry none)."]
    return "\n".join(lines + list(inputs.constraints)) + "\n"
