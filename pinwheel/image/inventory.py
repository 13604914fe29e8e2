"""What Python distributions an image holds, read from its layers without running it.

`docker save` gives the image's layer tars in order. Each layer is replayed
onto a map of the files that matter (every `*.dist-info` directory's
METADATA, RECORD, INSTALLER, direct_url.json and top_level.txt), honouring
whiteouts (`.wh.<name>` deletes a path, `.wh..wh..opq` empties a directory),
so a package a later layer uninstalled is gone. No interpreter in the image is
needed: a base without python on PATH, or with an entrypoint that is not
python, is read the same way.

The inventory is one value with three uses: step 0 of the resolver for a base
with an environment, the build's plan-vs-as-built check, and `inspect`/`diff`.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import posixpath
import re
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterable, Iterator

from packaging.metadata import Metadata
from packaging.utils import canonicalize_name

from ..distributions import Distribution, Inventory, InventoryError
from ..fsutil import atomic_write
from ..smoke.expect import UsageError as ExpectError
from ..smoke.expect import verify_entries as expect_verify
from ..workspace import InImage
from .engine import Engine, EngineError

WANTED = frozenset({"METADATA", "RECORD", "INSTALLER", "direct_url.json", "top_level.txt"})
# <prefix>/lib/pythonX.Y/{site,dist}-packages/<name>-<version>.dist-info/<file>, and Debian's
# /usr/lib/python3/dist-packages, where the interpreter's version is not in the path.
_DIST_INFO = re.compile(
    r"^(?P<site>(?P<prefix>.*?)/lib/python(?P<py>3(?:\.\d+)?)/(?:site|dist)-packages)/"
    r"(?P<dir>[^/]+\.dist-info)/(?P<file>[^/]+)$")
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
# Bytes read from one metadata file at most: a hostile base must not exhaust memory.
MAX_FILE_BYTES = 8 * 1024 * 1024


# ------------------------------------------------------------------ layers


def member_path(name: str, where: str) -> str:
    """The in-image path (/a/b) of an archive member, refused (InventoryError) when its name leaves the
    archive's root: a `..` component or a NUL (`./`, the root itself, is fine). Every member of every layer
    is read here first, whether or not it is wanted, so a crafted archive is refused whole."""
    parts = name.removeprefix("./").lstrip("/").split("/")
    if "\0" in name or ".." in parts:
        raise InventoryError(f"{where}: the member {name!r} leaves the image's root; a layer holds paths "
                             "inside it only")
    return "/" + "/".join(p for p in parts if p not in ("", "."))


def _hardlink_checked(member: tarfile.TarInfo, where: str) -> None:
    if member.islnk():  # a hard link names another member of the archive: the same rule holds
        member_path(member.linkname, where)


@dataclass
class LayerDelta:
    """What one layer does to the files that matter: the wanted files it writes, the paths it whites out,
    the directories it makes opaque, and the wanted paths it turns into links."""

    files: dict[str, bytes]
    whiteouts: list[str]
    opaque: list[str]
    links: list[str]


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def open_layer(fh: IO[bytes]) -> tarfile.TarFile:
    """A saved layer blob as a streamed tar: plain and gzip as tarfile reads them, zstd (what the containerd
    image store saves of a zstd-compressed layer) through zstandard."""
    if getattr(fh, "peek", None) and fh.peek(4)[:4] == ZSTD_MAGIC:  # type: ignore[attr-defined]
        import zstandard  # lazy: only a zstd layer needs it

        return tarfile.open(fileobj=zstandard.ZstdDecompressor().stream_reader(fh), mode="r|")
    return tarfile.open(fileobj=fh, mode="r|*")


def layer_errors() -> tuple[type[Exception], ...]:
    """What reading a broken layer raises; called only in an except clause, so zstandard loads only then."""
    import zstandard

    return (tarfile.TarError, zstandard.ZstdError)


def layer_delta(stream: IO[bytes], where: str) -> LayerDelta:
    """Read one layer tar as it streams past; every member's path is checked (member_path)."""
    delta = LayerDelta({}, [], [], [])
    with open_layer(stream) as layer:
        for member in layer:
            path = member_path(member.name, where)
            _hardlink_checked(member, where)
            parent, base = posixpath.split(path)
            if base == OPAQUE:
                delta.opaque.append(parent)
            elif base.startswith(WHITEOUT):
                delta.whiteouts.append(posixpath.join(parent, base[len(WHITEOUT):]))
            elif path == InImage.EXPECT or ((m := _DIST_INFO.match(path)) and m["file"] in WANTED):
                if member.isfile():
                    fh = layer.extractfile(member)
                    data = fh.read(MAX_FILE_BYTES + 1) if fh else b""
                    if len(data) > MAX_FILE_BYTES:
                        raise InventoryError(f"{path} in {where} is over {MAX_FILE_BYTES} bytes")
                    delta.files[path] = data
                elif member.issym() or member.islnk():
                    delta.links.append(path)
    return delta


def apply_layer(files: dict[str, tuple[int, bytes]], delta: LayerDelta, index: int) -> None:
    """A layer over the ones below it: its whiteouts and opaque directories remove what lower layers wrote
    (OCI's rule), then its files are written; a link is not a record pinwheel trusts."""
    for parent in delta.opaque:
        _drop_under(files, parent, keep_layer=index)
    for path in delta.whiteouts:
        _drop_under(files, path)
    for path, data in delta.files.items():
        files[path] = (index, data)
    for path in delta.links:
        files.pop(path, None)


def replay_layers(layers: Iterable[IO[bytes]], after_layer=None) -> tuple[dict[str, tuple[int, bytes]], int]:
    """path -> (layer index, bytes) of every wanted dist-info file in the final filesystem (and the
    expect.json of a base pinwheel built).

    `after_layer(index, files)`, where given, sees the state after each layer.
    """
    files: dict[str, tuple[int, bytes]] = {}
    count = 0
    for index, stream in enumerate(layers):
        count += 1
        apply_layer(files, layer_delta(stream, f"layer {index}"), index)
        if after_layer is not None:
            after_layer(index, files)
    return files, count


def _drop_under(files: dict[str, tuple[int, bytes]], path: str, keep_layer: int | None = None) -> None:
    """A whiteout of `path` removes it and everything below it (an opaque dir keeps its own layer's files)."""
    prefix = path.rstrip("/") + "/"
    for p in [p for p, (layer, _) in files.items() if (p == path or p.startswith(prefix))
              and (keep_layer is None or layer != keep_layer)]:
        del files[p]


def distributions(files: dict[str, tuple[int, bytes]],
                  parsed: dict | None = None) -> tuple[list[Distribution], list[str]]:
    """Group the replayed files by dist-info directory; a dist-info without METADATA is noted, not guessed.
    (A base pinwheel built also holds its expect.json: base_declared reads it, this leaves it out.)

    `parsed`, when given, remembers each dist-info by the layers its files came from, so replaying an
    image layer by layer parses a distribution once, not once per layer after it.
    """
    groups: dict[tuple[str, str], dict[str, tuple[int, bytes]]] = {}
    for path, value in files.items():
        m = _DIST_INFO.match(path)
        if m is None:
            continue
        groups.setdefault((m["site"], m["dir"]), {})[m["file"]] = value
    out, notes = [], []
    for (site, dirname), parts in sorted(groups.items()):
        if "METADATA" not in parts:
            notes.append(f"{site}/{dirname} has no METADATA; left out")
            continue
        layer, raw = parts["METADATA"]
        key = (site, dirname, tuple(sorted((f, v[0]) for f, v in parts.items())))
        if parsed is not None and key in parsed:
            out.append(parsed[key])
            continue
        try:
            meta = Metadata.from_email(raw, validate=False)
        except Exception as exc:  # packaging raises an ExceptionGroup for several problems at once
            notes.append(f"{site}/{dirname}/METADATA is unreadable ({exc}); left out")
            continue
        record = _record(parts.get("RECORD", (0, b""))[1])
        top = parts.get("top_level.txt", (0, b""))[1].decode(errors="replace").split()
        dist = Distribution(
            name=canonicalize_name(str(meta.name)),
            version=str(meta.version),
            requires_dist=tuple(str(r) for r in meta.requires_dist or ()),
            provides_extra=tuple(str(e) for e in meta.provides_extra or ()),
            installer=parts["INSTALLER"][1].decode(errors="replace").strip() or None if "INSTALLER" in parts else None,
            direct_url=_direct_url(parts.get("direct_url.json", (0, b""))[1]),
            top_level=tuple(sorted(set(top) or _top_level_from_record(record))),
            size=sum(size for _, size in record),
            site=site,
            layer=layer,
        )
        if parsed is not None:
            parsed[key] = dist
        out.append(dist)
    return out, notes


def _record(raw: bytes) -> list[tuple[str, int]]:
    rows = []
    for row in csv.reader(io.StringIO(raw.decode(errors="replace"))):
        if row and len(row) >= 3:
            rows.append((row[0], int(row[2]) if row[2].isdigit() else 0))
    return rows


def _top_level_from_record(record: list[tuple[str, int]]) -> set[str]:
    """Importable names from RECORD where top_level.txt is absent: package dirs and single modules."""
    names = set()
    for path, _ in record:
        head, sep, _rest = path.partition("/")
        if sep:
            if not head.endswith((".dist-info", ".data")) and head not in ("..", "__pycache__", "bin"):
                names.add(head)
        elif head.endswith(".py"):
            names.add(head[:-3])
        elif ".cpython-" in head or head.endswith(".abi3.so"):
            names.add(head.split(".", 1)[0])
    return names


def _direct_url(raw: bytes) -> str | None:
    if not raw:
        return None
    try:
        return str(json.loads(raw).get("url")) or None
    except (ValueError, AttributeError):
        return None


# ------------------------------------------------------------------ archives


def read_saved(archive: Path, after_layer=None) -> tuple[dict[str, tuple[int, bytes]], int]:
    """Replay the layers of a `docker save` archive, in the order its manifest.json gives."""
    try:
        with tarfile.open(archive) as outer:
            manifest = json.load(outer.extractfile("manifest.json"))  # type: ignore[arg-type]
            layer_names = manifest[0]["Layers"]

            def streams() -> Iterator[IO[bytes]]:
                for name in layer_names:
                    member_path(str(name), f"{archive.name}: manifest.json")
                    fh = outer.extractfile(name)
                    if fh is None:
                        raise InventoryError(f"{archive.name}: layer {name} is missing")
                    yield fh

            return replay_layers(streams(), after_layer)
    except (KeyError, IndexError, ValueError, *layer_errors()) as exc:
        raise InventoryError(f"{archive.name} is not a docker save archive ({exc})") from None


def base_declared(files: dict[str, tuple[int, bytes]]) -> tuple[dict[str, str], dict[str, dict], list[str]]:
    """What the expect.json of a base pinwheel built declares of its own packages: their import skips (its
    manifest's `needs: driver`) and their own checks (its `verify:`), each in the shape the smoke reads;
    a note where that file is there but unreadable; ({}, {}, []) for any other base."""
    if InImage.EXPECT not in files:
        return {}, {}, []
    try:
        data = json.loads(files[InImage.EXPECT][1])
        skip = data.get("import_skip", {})
        verify = expect_verify(data, InImage.EXPECT)
        if isinstance(skip, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in skip.items()):
            return dict(sorted(skip.items())), dict(sorted(verify.items())), []
    except (ValueError, AttributeError, ExpectError):
        pass
    return {}, {}, [f"{InImage.EXPECT} is unreadable: no import skips or checks taken from it"]


def read_save_stream(stream: IO[bytes], where: str) -> tuple[dict[str, tuple[int, bytes]], int]:
    """Replay the layers of a `docker save` stream without writing it anywhere. The archive lists its
    layers' order in manifest.json, which may come after them: each layer's delta is read as it passes
    (a member that is no tar, such as an OCI config blob, is none), then they are applied in that order."""
    deltas: dict[str, LayerDelta] = {}
    manifest = None
    try:
        with tarfile.open(fileobj=stream, mode="r|") as outer:
            for member in outer:
                name = member.name
                member_path(name, f"{where}: the archive")
                if not member.isfile():
                    continue
                fh = outer.extractfile(member)
                if name == "manifest.json" and fh is not None:
                    manifest = json.loads(fh.read(MAX_FILE_BYTES))
                elif fh is not None and (name.endswith("/layer.tar") or name.startswith("blobs/")):
                    try:
                        deltas[name] = layer_delta(fh, f"{where}: {name}")
                    except tarfile.ReadError:
                        continue  # a blob that is not a layer (an OCI manifest or config)
        order = [str(n) for n in manifest[0]["Layers"]] if manifest else None
    except (KeyError, IndexError, TypeError, ValueError, *layer_errors()) as exc:
        raise InventoryError(f"{where} is not a docker save archive ({exc})") from None
    if order is None:
        raise InventoryError(f"{where} is not a docker save archive (no manifest.json)")
    files: dict[str, tuple[int, bytes]] = {}
    for index, name in enumerate(order):
        if name not in deltas:
            raise InventoryError(f"{where}: layer {name} is missing")
        apply_layer(files, deltas[name], index)
    return files, len(order)


def read_image(engine: Engine, ref: str) -> Inventory:
    """The inventory of an image in the engine, from its layers as `docker save` streams them (the image is
    never run, and the archive is written nowhere)."""
    try:
        with engine.save_stream(ref) as stream:
            files, count = read_save_stream(stream, f"image {ref}")
    except engine._errors() + (EngineError,) as exc:
        said = (getattr(exc, "stderr", None) or str(exc)).strip().splitlines()
        raise InventoryError(f"the engine cannot save image {ref} to read it: "
                             f"{said[-1] if said else type(exc).__name__}") from None
    dists, notes = distributions(files)
    skip, verify, declared_notes = base_declared(files)
    return Inventory(ref, engine.image_id(ref), engine.repo_digest(ref), tuple(dists), count,
                     tuple(notes + declared_notes), import_skip=tuple(skip.items()), verify=tuple(verify.items()))


# ------------------------------------------------------------------ committed inventories


def write_inventory(inv: Inventory, path: Path) -> Path:
    """The committed form: stable JSON, sorted, one distribution per entry."""
    data = inv.to_json()
    data["distributions"].sort(key=lambda d: (d["site"], d["name"]))
    atomic_write(Path(path), (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())
    return Path(path)


def load_inventory(path: Path) -> Inventory:
    try:
        return Inventory.from_json(json.loads(Path(path).read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InventoryError(f"{path}: unreadable inventory ({exc})") from None


def pinned_digest(ref: str) -> str | None:
    """The sha256 digest a reference pins (name:tag@sha256:...), or None."""
    _, at, digest = ref.partition("@")
    return digest if at else None


def check_inventory(path: Path, base: str, engine: Engine | None,
                    verified: Path | None = None) -> tuple[str, str]:
    """(ok | stale | missing, detail) for a committed inventory, against the base it was read from.

    A base pinned by digest is compared with the recorded digest, without any
    engine or network. Otherwise the local engine's image id of the base is the
    identity, when an engine is at hand and holds the base (else it is not checked). A base whose id moved (a bootstrap or
    stand-in base rebuilt on a new machine) is read again and is ok when it
    holds what the inventory says; `verified` keeps that verdict per image id.
    """
    if not Path(path).exists():
        return "missing", f"no inventory at {path.name}"
    inv = load_inventory(path)
    pinned = pinned_digest(base)
    if pinned:
        recorded = pinned_digest(inv.digest or "") or inv.digest
        if recorded != pinned:
            return "stale", f"base is pinned to {pinned[:19]}, the inventory was read from {str(recorded)[:19]}"
        return "ok", f"{len(inv.distributions)} distributions, base {pinned[:19]}"
    if engine is None:
        return "ok", f"{len(inv.distributions)} distributions (base not pinned by digest: identity not checked)"
    current = engine.local_image_id(base)
    if current is None:
        # nothing to compare with: the committed inventory is the account of the base, as with no engine;
        # `build` makes or pulls the base first and checks it then
        return "ok", (f"{len(inv.distributions)} distributions (base {base} is not in the engine, or no engine "
                      "answers: identity not checked)")
    if current != inv.image_id:
        return _read_again(path, inv, engine, base, current, verified)
    return "ok", f"{len(inv.distributions)} distributions, base {current[:19]}"


def _content(inv: Inventory) -> dict:
    """What an inventory says of its image, without the ids a rebuild of the same recipe changes."""
    data = inv.to_json()
    data.pop("image_id", None)
    data.pop("digest", None)
    data["distributions"].sort(key=lambda d: (d["site"], d["name"]))
    return data


def _read_again(path: Path, inv: Inventory, engine: Engine, base: str, current: str,
                verified: Path | None) -> tuple[str, str]:
    """The verdict on a base whose image id is not the inventory's: ok when its layers hold the same."""
    moved = f"base {base} is now {current[:19]}, the inventory was read from {inv.image_id[:19]}"
    committed = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    memo = verified / f"{current.partition(':')[2] or current}-{committed}" if verified else None
    same = f"{len(inv.distributions)} distributions, base {current[:19]} (rebuilt; it holds what the inventory says)"
    if memo is not None and memo.exists():
        return "ok", same
    # a large base takes minutes here (Docker 20.10 writes the whole image out before streaming it): say why
    print(f"inventory: {moved}; reading it again to compare", file=sys.stderr, flush=True)
    fresh = read_image(engine, base)
    if _content(fresh) != _content(inv):
        was = {(d.name, d.version) for d in inv.distributions}
        now = {(d.name, d.version) for d in fresh.distributions}
        differ = sorted(was ^ now)
        first = f"; first difference: {differ[0][0]} {differ[0][1]}" if differ else ""
        return "stale", f"{moved}, and what it holds differs{first}"
    if memo is not None:
        memo.parent.mkdir(parents=True, exist_ok=True)
        memo.touch()
    return "ok", same


# ------------------------------------------------------------------ layer by layer


@dataclass(frozen=True)
class LayerChange:
    """What one layer did to one distribution."""

    layer: int
    name: str
    change: str  # added | replaced | removed
    before: str | None
    after: str | None
    size: int  # bytes of the version this layer wrote (added, replaced), else 0
    shadowed: int  # bytes of the earlier version that stay in a lower layer (replaced, removed)


@dataclass(frozen=True)
class History:
    final: list[Distribution]
    changes: list[LayerChange]
    layers: int
    notes: list[str]
    files: dict[str, tuple[int, bytes]]  # the final dist-info files, for record_paths


def history(archive: Path) -> History:
    """The final distributions, and per layer what each added, replaced and removed."""
    changes: list[LayerChange] = []
    seen: dict[tuple[str, str], Distribution] = {}  # (site, name) -> as the previous layer left it
    parsed: dict = {}  # each dist-info parsed once, however many layers come after it

    def after_layer(index: int, files: dict[str, tuple[int, bytes]]) -> None:
        now = {(d.site, d.name): d for d in distributions(files, parsed)[0]}
        for key in sorted(set(seen) | set(now), key=lambda k: (k[1], k[0])):
            old, new = seen.get(key), now.get(key)
            if old is None and new is not None:
                changes.append(LayerChange(index, new.name, "added", None, new.version, new.size, 0))
            elif old is not None and new is None:
                changes.append(LayerChange(index, old.name, "removed", old.version, None, 0, old.size))
            elif old is not None and new is not None and new.layer == index and old.layer != index:
                changes.append(LayerChange(index, new.name, "replaced", old.version, new.version, new.size, old.size))
        seen.clear()
        seen.update(now)

    files, count = read_saved(archive, after_layer)
    final, notes = distributions(files, parsed)
    return History(final, changes, count, notes, files)


def extract_files(archive: Path, wanted: set[str], dest: Path, max_bytes: int = 2 * 1024**3) -> dict[str, Path]:
    """Copy the final version of each wanted path out of the layers into dest (whiteouts honoured); an archive
    with a member outside its root is refused (InventoryError) and leaves nothing in dest."""
    found: dict[str, Path] = {}
    try:
        try:
            return _extract(archive, wanted, dest, max_bytes, found)
        except layer_errors() as exc:
            raise InventoryError(f"{archive.name}: a layer is unreadable ({exc})") from None
    except InventoryError:
        for path in found.values():
            path.unlink(missing_ok=True)
        raise


def _extract(archive: Path, wanted: set[str], dest: Path, max_bytes: int, found: dict[str, Path]) -> dict[str, Path]:
    with tarfile.open(archive) as outer:
        manifest = json.load(outer.extractfile("manifest.json"))  # type: ignore[arg-type]
        for index, name in enumerate(manifest[0]["Layers"]):
            member_path(str(name), f"{archive.name}: manifest.json")
            fh = outer.extractfile(name)
            if fh is None:
                continue
            with open_layer(fh) as layer:
                for member in layer:
                    path = member_path(member.name, f"layer {index}")
                    _hardlink_checked(member, f"layer {index}")
                    parent, base = posixpath.split(path)
                    if base.startswith(WHITEOUT):
                        gone = posixpath.join(parent, base[len(WHITEOUT):]) if base != OPAQUE else parent
                        for p in [p for p in found if p == gone or p.startswith(gone.rstrip("/") + "/")]:
                            found.pop(p).unlink(missing_ok=True)
                        continue
                    if path not in wanted or not member.isfile() or member.size > max_bytes:
                        continue
                    target = dest / f"{len(found):05d}-{base}"
                    with layer.extractfile(member) as src, open(target, "wb") as out:  # type: ignore[union-attr]
                        while chunk := src.read(1 << 20):
                            out.write(chunk)
                    if path in found:
                        found[path].unlink(missing_ok=True)
                    found[path] = target
    return found


def record_paths(files: dict[str, tuple[int, bytes]], dist: Distribution, suffixes=(".so",)) -> list[str]:
    """Absolute in-image paths of a distribution's files with these suffixes, from its RECORD."""
    for path, (_, raw) in files.items():
        m = _DIST_INFO.match(path)
        if m and m["site"] == dist.site and m["file"] == "RECORD" and \
                canonicalize_name(m["dir"].removesuffix(".dist-info").rsplit("-", 1)[0]) == dist.name:
            rows = _record(raw)
            return [posixpath.normpath(f"{dist.site}/{p}") for p, _ in rows
                    if p.endswith(suffixes) or ".so." in p.rsplit("/", 1)[-1]]
    return []


def save_and(engine: Engine, ref: str, scratch: Path | None, use):
    """Run `use(archive)` on a `docker save` of `ref` in a scratch directory removed afterwards. An engine
    that cannot save it (a layer whose members it cannot read back, as a crafted `../` member) is an
    InventoryError naming the image, not the engine's exception."""
    with tempfile.TemporaryDirectory(dir=scratch, prefix="inventory-") as tmp:
        try:
            archive = engine.save(ref, Path(tmp) / "image.tar")
        except engine._errors() as exc:
            said = (getattr(exc, "stderr", None) or str(exc)).strip().splitlines()
            raise InventoryError(f"the engine cannot save image {ref} to read it: "
                                 f"{said[-1] if said else type(exc).__name__}") from None
        return use(archive)
