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
import tempfile
from pathlib import Path

from ..fsutil import sha256_file
from ..index import IndexClientError, ca_bundle
from ..index import transfer
from ..plan import Plan
from ..steps.asset import KIND as ASSET, AssetStep, context_dir, plan_assets
from .labels import PREFIX

ASSETS_LABEL = f"{PREFIX}.assets"
# Every wheel is a zip whose first member's local header comes first.
ZIP_MAGIC = b"PK\x03\x04"
RETRIES = 3


class AssetError(Exception):
    """An asset could not be downloaded, or its bytes are not the ones the manifest pins."""


def download(url: str, cache: Path, timeout: float = 60.0, clock: transfer.Clock | None = None,
             expect_zip: bool = False) -> tuple[str, Path]:
    """Download url into the cache; (its sha256, its path there). The transfer is bounded as the index's are
    (index/transfer.py): retries, a deadline, a minimum rate, the download size limit; with ``expect_zip``, a
    body that does not start as a zip is refused at its first bytes (a pinned digest needs no such guess)."""
    import requests  # noqa: PLC0415 - only a build with assets, or `asset add`, downloads

    name = url.rsplit("/", 1)[1]
    clock = clock or transfer.Clock(transfer.ASSET_DEADLINE.value())
    cache.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache, prefix=".download-")
    digest = hashlib.sha256()
    head = bytearray()

    def take(chunk: bytes) -> None:
        if expect_zip and len(head) < len(ZIP_MAGIC):
            head.extend(chunk[: len(ZIP_MAGIC) - len(head)])
            if not ZIP_MAGIC.startswith(bytes(head)):
                raise AssetError(f"{url}: not a wheel: the body does not start as a zip archive does")
        digest.update(chunk)
        out.write(chunk)

    session = transfer.mount_retries(requests.Session(), RETRIES, 0.5, clock.ends())
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with transfer.get(session, url, clock.ends(), transfer.ASSET_DEADLINE.env,
                                  timeout=min(timeout, max(clock.remaining(), 0.1)), verify=ca_bundle() or True,
                                  headers={"User-Agent": "pinwheel"}) as resp:
                    if resp.status_code != 200:
                        raise AssetError(f"cannot download {url}: HTTP {resp.status_code}")
                    transfer.receive(resp, bound=transfer.DOWNLOAD, ends=clock.ends(), url=url, sink=take,
                                     raise_with=transfer.ASSET_DEADLINE.env)
            except (requests.RequestException, IndexClientError) as exc:
                raise AssetError(f"cannot download {url}: {exc}") from None
        found = digest.hexdigest()
        dest = cache / "sha256" / found / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
        return found, dest
    finally:
        session.close()
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
    """Download url, check that it is a wheel, and the manifest entry that pins it. The URL is checked by the
    manifest's own rules first, so that nothing is downloaded for an entry the manifest would refuse."""
    from ..steps.asset import _WHEEL, url_problem  # the rules the manifest applies

    problem = url_problem(url)
    if problem:
        raise AssetError(f"asset add: {problem}")
    name = url.rsplit("/", 1)[-1]
    m = _WHEEL.fullmatch(name)
    if not m:
        raise AssetError(f"{name!r} is not a wheel file name (name-version-python-abi-platform.whl)")
    sha256, path = download(url, cache, expect_zip=True)
    problem = wheel_content_problem(path)
    if problem:
        path.unlink()
        raise AssetError(f"{url}: {problem}")
    package = f"{m['name'].replace('_', '-').lower()}=={m['version']}"
    step = m["name"].replace("_", "-").replace(".", "-").lower()
    return manifest_entry(url, sha256, package, step)


def wheel_content_problem(path: Path) -> str | None:
    """Why a downloaded file is not a wheel (a zip with a .dist-info holding METADATA and WHEEL), or None."""
    import zipfile  # noqa: PLC0415 - only `asset add` opens one

    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except (zipfile.BadZipFile, OSError) as exc:
        return f"not a wheel: not a readable zip archive ({exc})"
    infos = {n.split("/", 1)[0] for n in names if n.count("/") == 1 and n.split("/", 1)[0].endswith(".dist-info")}
    if not any(f"{d}/METADATA" in names and f"{d}/WHEEL" in names for d in infos):
        return "not a wheel: the zip has no .dist-info directory with METADATA and WHEEL"
    return None
