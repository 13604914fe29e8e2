"""Release assets on the host: downloaded into a content-addressed cache, verified before use, staged into the
build context (assets/<step>/<file>), and named in the image's labels.

The cache holds each file at <cache>/sha256/<digest>/<file name>. A file is
moved there only once its bytes hash to the digest, and is hashed again each
time it is used: a mismatch, from the server or in the cache, fails naming the
URL, the expected and the found digest.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import ssl
import tempfile
import urllib.request
from pathlib import Path

from ..fsutil import sha256_file
from ..index import ca_bundle
from ..plan import Plan
from ..steps.asset import KIND as ASSET, AssetStep, context_dir, plan_assets
from .labels import PREFIX

CHUNK = 1 << 20
ASSETS_LABEL = f"{PREFIX}.assets"


class AssetError(Exception):
    """An asset could not be downloaded, or its bytes are not the ones the manifest pins."""


def _open(url: str, timeout: float):
    context = None
    if url.startswith("https://"):
        ca = ca_bundle()
        context = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
    request = urllib.request.Request(url, headers={"User-Agent": "pinwheel"})
    return urllib.request.urlopen(request, timeout=timeout, context=context)


def download(url: str, cache: Path, timeout: float = 120.0) -> tuple[str, Path]:
    """Download url into the cache; (its sha256, its path there)."""
    name = url.rsplit("/", 1)[1]
    cache.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache, prefix=".download-")
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with _open(url, timeout) as resp:
                    while chunk := resp.read(CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            except OSError as exc:
                raise AssetError(f"cannot download {url}: {exc}") from None
        found = digest.hexdigest()
        dest = cache / "sha256" / found / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
        return found, dest
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def fetch(url: str, sha256: str, cache: Path) -> Path:
    """The verified file of url in the cache: downloaded when missing; a mismatch is an AssetError."""
    name = url.rsplit("/", 1)[1]
    cached = cache / "sha256" / sha256 / name
    if cached.is_file():
        found = sha256_file(cached)
        if found == sha256:
            return cached
        cached.unlink()  # not the bytes its name promises: fetch it again
    found, path = download(url, cache)
    if found != sha256:
        path.unlink()
        raise AssetError(f"{url}: sha256 mismatch: expected {sha256}, found {found}")
    return path


def stage_assets(plan: Plan, context: Path, cache: Path) -> dict[str, Path]:
    """Put each active asset step's verified wheel in the context's assets/<step>/; step name -> its file.

    Every asset step gets its directory, active or not: the Dockerfile mounts it whatever the gates say.
    """
    for step in plan.steps:
        if step.kind == ASSET.name:
            (context / context_dir(step.name)).mkdir(parents=True, exist_ok=True)
    staged = {}
    for step, asset in plan_assets(plan):
        path = fetch(asset.url, asset.sha256, cache)
        dest = context / context_dir(step.name) / asset.filename
        shutil.copy2(path, dest)
        if sha256_file(dest) != asset.sha256:  # the copy is what the build reads
            raise AssetError(f"{asset.url}: sha256 mismatch in the build context: expected {asset.sha256}, "
                             f"found {sha256_file(dest)}")
        staged[step.name] = dest
    return staged


def asset_labels(plan: Plan) -> dict[str, str]:
    """The label naming every asset the image installs: step -> package, url, sha256."""
    found = {step.name: {"package": f"{step.spec.package}=={step.spec.version}", "url": asset.url,
                         "sha256": asset.sha256}
             for step, asset in plan_assets(plan) if isinstance(step.spec, AssetStep)}
    return {ASSETS_LABEL: json.dumps(found, sort_keys=True, separators=(",", ":"))} if found else {}


def manifest_entry(url: str, sha256: str, package: str, step: str) -> str:
    """A manifest entry for an asset, its digest filled in (what `build.py asset add` prints)."""
    return (f"  - name: {step}\n"
            f"    kind: asset\n"
            f'    why: "TODO: why this wheel comes from a release and not the index"\n'
            f'    package: "{package}"\n'
            f'    url: {{url: "{url}", sha256: "{sha256}"}}\n')


def add(url: str, cache: Path) -> str:
    """Download url, and the manifest entry that pins it."""
    from ..steps.asset import _WHEEL  # the wheel file name rule the manifest applies

    name = url.rsplit("/", 1)[-1]
    m = _WHEEL.fullmatch(name)
    if not m:
        raise AssetError(f"{name!r} is not a wheel file name (name-version-python-abi-platform.whl)")
    sha256, _ = download(url, cache)
    package = f"{m['name'].replace('_', '-').lower()}=={m['version']}"
    step = m["name"].replace("_", "-").replace(".", "-").lower()
    return manifest_entry(url, sha256, package, step)
