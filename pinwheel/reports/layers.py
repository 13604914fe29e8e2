"""Two builds of the same inputs, layer by layer: which layers are the same bytes, and what differs.

The images may live on two engines (a build on the local engine against one on a
remote builder). Each layer pair is compared by diff id first; a pair that
differs is read entry by entry (``docker save``, never run), and each entry
that differs is classed: ``mtime`` only (the usual cause: the builder stamped
the time it ran), ``content``, ``metadata`` (mode, owner, link target), or
present on one side only.
"""
from __future__ import annotations

import hashlib
import json
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..image.engine import Engine
from ..image.inventory import open_layer


@dataclass(frozen=True)
class Entry:
    mtime: int
    content: str  # sha256 of a file's bytes, a link's target, "" for a directory
    meta: tuple  # type, mode, uid, gid


@dataclass(frozen=True)
class LayerDiff:
    index: int
    created_by: str
    a: str | None  # diff id
    b: str | None
    mtime_only: tuple[str, ...] = ()
    content: tuple[str, ...] = ()
    metadata: tuple[str, ...] = ()
    only_a: tuple[str, ...] = ()
    only_b: tuple[str, ...] = ()

    @property
    def same(self) -> bool:
        return self.a == self.b


@dataclass(frozen=True)
class LayerComparison:
    a: str
    b: str
    layers: tuple[LayerDiff, ...] = field(default_factory=tuple)

    @property
    def same(self) -> bool:
        return all(layer.same for layer in self.layers)

    def to_json(self) -> dict:
        return {"schema": "pinwheel.layers/1", "a": self.a, "b": self.b, "same": self.same,
                "layers": [{"index": d.index, "created_by": d.created_by, "a": d.a, "b": d.b, "same": d.same,
                            "mtime_only": list(d.mtime_only), "content": list(d.content),
                            "metadata": list(d.metadata), "only_a": list(d.only_a), "only_b": list(d.only_b)}
                           for d in self.layers]}


def _entries(layer: tarfile.TarFile) -> dict[str, Entry]:
    entries: dict[str, Entry] = {}
    for member in layer:
        if member.isfile():
            fh = layer.extractfile(member)
            digest = hashlib.sha256()
            assert fh is not None
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
            content = digest.hexdigest()
        else:
            content = member.linkname
        entries[member.name.rstrip("/") or "."] = Entry(
            int(member.mtime), content, (member.type, member.mode, member.uid, member.gid))
    return entries


def _saved_layers(engine: Engine, ref: str, scratch: Path) -> tuple[list[dict[str, Entry]], list[str]]:
    """Each layer's entries, bottom first, and the history lines that made a layer."""
    archive = engine.save(ref, scratch / "image.tar")
    with tarfile.open(archive) as outer:
        manifest = json.load(outer.extractfile("manifest.json"))  # type: ignore[arg-type]
        config = json.load(outer.extractfile(manifest[0]["Config"]))  # type: ignore[arg-type]
        layers = []
        for name in manifest[0]["Layers"]:
            fh = outer.extractfile(name)
            assert fh is not None
            with open_layer(fh) as layer:
                layers.append(_entries(layer))
    created = [h.get("created_by", "") for h in config.get("history", []) if not h.get("empty_layer")]
    archive.unlink()
    return layers, created


def compare_layers(engine_a: Engine, ref_a: str, engine_b: Engine, ref_b: str) -> LayerComparison:
    """``ref_a`` in engine_a against ``ref_b`` in engine_b, layer by layer."""
    ids_a, ids_b = engine_a.layers(ref_a), engine_b.layers(ref_b)
    diffs: list[LayerDiff] = []
    unread = [i for i in range(max(len(ids_a), len(ids_b)))
              if (ids_a[i] if i < len(ids_a) else None) != (ids_b[i] if i < len(ids_b) else None)]
    with tempfile.TemporaryDirectory(prefix="pinwheel-layers-") as tmp:
        layers_a, created = _saved_layers(engine_a, ref_a, Path(tmp)) if unread else ([], [])
        layers_b, _ = _saved_layers(engine_b, ref_b, Path(tmp)) if unread else ([], [])
    for i in range(max(len(ids_a), len(ids_b))):
        a = ids_a[i] if i < len(ids_a) else None
        b = ids_b[i] if i < len(ids_b) else None
        step = created[i] if i < len(created) else ""
        if a == b:
            diffs.append(LayerDiff(i, step, a, b))
            continue
        ea = layers_a[i] if i < len(layers_a) else {}
        eb = layers_b[i] if i < len(layers_b) else {}
        both = sorted(set(ea) & set(eb))
        diffs.append(LayerDiff(
            i, step, a, b,
            mtime_only=tuple(p for p in both if ea[p].mtime != eb[p].mtime
                             and (ea[p].content, ea[p].meta) == (eb[p].content, eb[p].meta)),
            content=tuple(p for p in both if ea[p].content != eb[p].content),
            metadata=tuple(p for p in both if ea[p].meta != eb[p].meta and ea[p].content == eb[p].content),
            only_a=tuple(sorted(set(ea) - set(eb))),
            only_b=tuple(sorted(set(eb) - set(ea)))))
    return LayerComparison(ref_a, ref_b, tuple(diffs))


def format_comparison(cmp: LayerComparison, limit: int = 5) -> list[str]:
    """The comparison as text lines: one per layer, then what differs in each differing one."""
    lines = [f"{cmp.a} vs {cmp.b}: " + ("the same layers" if cmp.same else
             f"{sum(not d.same for d in cmp.layers)} of {len(cmp.layers)} layers differ")]
    for d in cmp.layers:
        step = d.created_by.replace("/bin/sh -c ", "").strip()
        step = step if len(step) <= 70 else step[:67] + "..."
        lines.append(f"  layer {d.index}: {'same' if d.same else 'DIFFERS'}  {(d.a or '-')[:19]}  "
                     f"{(d.b or '-')[:19]}  {step}")
        if d.same:
            continue
        for label, paths in (("mtime only", d.mtime_only), ("content", d.content), ("metadata", d.metadata),
                             ("only in a", d.only_a), ("only in b", d.only_b)):
            if paths:
                shown = ", ".join(paths[:limit]) + (f", ... ({len(paths) - limit} more)" if len(paths) > limit else "")
                lines.append(f"    {label}: {len(paths)}: {shown}")
    return lines
