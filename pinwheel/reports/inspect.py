"""What any image holds, layer by layer: distributions added, replaced and removed, the bytes a
later layer shadows, libraries built for another CUDA major, and every requirement judged on the
installed set. Works on images pinwheel did not build; nothing in them is run.
"""
from __future__ import annotations

import dataclasses
import re
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..abi.elf import classify_elf
from ..distributions import Distribution
from ..image.inventory import LayerChange, extract_files, history, record_paths
from ..index.target import target_environment
from ..resolve import classify_requirements, requirement_text
from .report import ABI_MEANING

SCHEMA = "pinwheel.inspect/1"
_CUDA_SUFFIX = re.compile(r"-cu(\d{2,3})$")
_SITE_PYTHON = re.compile(r"/lib/python(3\.\d+)/")
# Markers are judged for this platform: a Linux image on the architecture pinwheel builds for.
PLATFORM = "manylinux_2_28_x86_64"


@dataclass(frozen=True)
class Inspection:
    image: str
    image_id: str
    layers: int
    distributions: tuple[Distribution, ...]
    changes: tuple[LayerChange, ...]
    notes: tuple[str, ...] = ()
    abi: tuple[dict, ...] = ()  # torch-tied distributions' ELF classes


def inspect_archive(archive: Path, image: str, image_id: str) -> Inspection:
    """Replay a saved image, then classify the shared objects of every distribution that requires torch."""
    h = history(archive)
    tied = [d for d in h.final if d.name != "torch" and any(_req_name(r) == "torch" for r in d.requires_dist)]
    wanted = {d.name: record_paths(h.files, d) for d in tied}
    rows = []
    with tempfile.TemporaryDirectory(dir=archive.parent) as tmp:
        extracted = extract_files(archive, {p for paths in wanted.values() for p in paths}, Path(tmp))
        for d in tied:
            elfs = [classify_elf(extracted[p], p.rsplit("/", 1)[-1]) for p in wanted[d.name] if p in extracted]
            own = [e for e in elfs if not e.vendored]
            cls = ("unstable" if any(e.abi_class == "unstable" for e in own) else
                   "stable" if any(e.abi_class == "stable" for e in own) else "none")
            rows.append({"name": d.name, "version": d.version, "abi_class": cls if elfs else "none",
                         "shared_objects": len(elfs), "meaning": ABI_MEANING[cls if elfs else "none"]})
    return Inspection(image, image_id, h.layers, tuple(h.final), tuple(h.changes), tuple(h.notes), tuple(rows))


def cuda_major(dists: list[Distribution]) -> int | None:
    """The image's CUDA major: torch's own -cuNN dependencies, else the most common -cuNN suffix."""
    torch = next((d for d in dists if d.name == "torch"), None)
    if torch is not None:
        majors = Counter(int(m.group(1)[:2]) for r in torch.requires_dist
                         if (m := _CUDA_SUFFIX.search(_req_name(r))))
        if majors:
            return majors.most_common(1)[0][0]
    majors = Counter(int(m.group(1)[:2]) for d in dists if (m := _CUDA_SUFFIX.search(d.name)))
    return majors.most_common(1)[0][0] if majors else None


def _req_name(text: str) -> str:
    try:
        return canonicalize_name(Requirement(text).name)
    except InvalidRequirement:
        return ""


def wrong_cuda(dists: list[Distribution], major: int | None) -> list[dict]:
    if major is None:
        return []
    return [{"name": d.name, "version": d.version, "size": d.size, "cuda": int(m.group(1)[:2]), "image_cuda": major}
            for d in dists if (m := _CUDA_SUFFIX.search(d.name)) and int(m.group(1)[:2]) != major]


def judge(dists: list[Distribution]) -> list[dict]:
    """Every Requires-Dist of every distribution, judged against what is installed next to it (same site).

    No extra is known to be requested in an image pinwheel did not build, so
    extras are reported as extra-only and never as satisfied.
    """
    by_site: dict[str, dict[str, Distribution]] = defaultdict(dict)
    for d in dists:
        by_site[d.site][d.name] = d
    edges = []
    for site, installed in sorted(by_site.items()):
        py = _SITE_PYTHON.search(site + "/")
        env = target_environment(py.group(1) if py else "3.11", PLATFORM)
        # Debian's /usr/lib/python3/dist-packages also serves /usr/local's packages: judge them together.
        visible = {**by_site.get("/usr/lib/python3/dist-packages", {}), **installed}
        for d in sorted(installed.values(), key=lambda d: d.name):
            meta = SimpleNamespace(requires_dist=[Requirement(r) for r in d.requires_dist if _req_name(r)],
                                   provides_extra=list(d.provides_extra))
            for a in classify_requirements(meta, env, ()):
                dep = canonicalize_name(a.requirement.name)
                have = visible.get(dep)
                if a.marker_excluded:
                    verdict = "marker-excluded"
                elif not a.active:
                    verdict = "extra-only"
                elif have is not None and a.requirement.specifier.contains(have.version, prereleases=True):
                    verdict = "satisfied"
                else:
                    verdict = "violated"
                edges.append({"site": site, "parent": d.name, "parent_version": d.version,
                              "requirement": requirement_text(a.requirement), "name": dep, "extra": a.extra,
                              "found": have.version if have else None, "verdict": verdict})
    return edges


def to_json(ins: Inspection) -> dict:
    dists = list(ins.distributions)
    major = cuda_major(dists)
    edges = judge(dists)
    shadowed = sum(c.shadowed for c in ins.changes)
    counts = Counter(e["verdict"] for e in edges)
    return {
        "schema": SCHEMA,
        "image": ins.image,
        "image_id": ins.image_id,
        "layers": ins.layers,
        "cuda_major": major,
        "distributions": [dataclasses.asdict(d) | {"requires_dist": list(d.requires_dist),
                                                   "provides_extra": list(d.provides_extra),
                                                   "top_level": list(d.top_level)} for d in dists],
        "changes": [dataclasses.asdict(c) for c in ins.changes],
        "churn": [dataclasses.asdict(c) for c in ins.changes if c.change != "added"],
        "wrong_cuda": wrong_cuda(dists, major),
        "torch_abi": list(ins.abi),
        "edges": edges,
        "notes": list(ins.notes),
        "summary": {"distributions": len(dists), "shadowed_bytes": shadowed,
                    "replaced": sum(1 for c in ins.changes if c.change == "replaced"),
                    "removed": sum(1 for c in ins.changes if c.change == "removed"),
                    "wrong_cuda_bytes": sum(w["size"] for w in wrong_cuda(dists, major)),
                    "edges": {k: counts[k] for k in ("satisfied", "violated", "extra-only", "marker-excluded")}},
    }


def _mb(n: int) -> str:
    """Decimal units, as the engine prints them."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def print_inspection(ins: Inspection, console: Console, verbose: bool = False) -> dict:
    data = to_json(ins)
    c = console
    s = data["summary"]
    c.print(f"[bold]{escape(ins.image)}[/bold] ({ins.image_id[:19]}): {s['distributions']} Python distributions "
            f"in {ins.layers} layers" + (f", CUDA {data['cuda_major']}" if data["cuda_major"] else ""))
    table = Table(title="Layer by layer", show_lines=False)
    for col in ("layer", "package", "change", "size", "shadowed below"):
        table.add_column(col, overflow="ellipsis")
    for ch in ins.changes:
        if ch.change == "added" and not verbose:
            continue
        what = {"added": f"+ {ch.after}", "removed": f"- {ch.before}", "replaced": f"{ch.before} → {ch.after}"}[ch.change]
        table.add_row(str(ch.layer), escape(ch.name), escape(what), _mb(ch.size) if ch.size else "",
                      f"[yellow]{_mb(ch.shadowed)}[/yellow]" if ch.shadowed else "")
    added = sum(1 for ch in ins.changes if ch.change == "added")
    c.print(table)
    if not verbose:
        c.print(f"  ({added} distributions added; --verbose lists them by layer)")
    c.print(f"\n{s['replaced']} replaced and {s['removed']} removed by a later layer: "
            f"[bold]{_mb(s['shadowed_bytes'])}[/bold] shipped in lower layers and shadowed")
    for w in data["wrong_cuda"]:
        c.print(f"  [yellow]{escape(w['name'])} {escape(w['version'])}: CUDA {w['cuda']} libraries "
                f"({_mb(w['size'])}) in a CUDA {w['image_cuda']} image[/yellow]")
    violated = [e for e in data["edges"] if e["verdict"] == "violated"]
    for e in violated:
        found = f"{e['name']} {e['found']} is installed" if e["found"] else f"{e['name']} is not installed"
        c.print(f"  [red]{escape(e['parent'])} {escape(e['parent_version'])} requires {escape(e['requirement'])}: "
                f"{escape(found)}[/red]")
    e = s["edges"]
    c.print(f"\n{e['satisfied']} satisfied, {e['violated']} violated, {e['extra-only']} extra-only, "
            f"{e['marker-excluded']} marker-excluded (extras an image requests are not recorded in it)")
    if ins.abi:
        c.print("\n[bold]Tied to torch[/bold] (from the installed shared objects' ELF imports)")
        for row in ins.abi:
            c.print(f"  {escape(row['name'])} {escape(row['version'])}: [bold]{row['abi_class']}[/bold] — "
                    f"{row['meaning']} ({row['shared_objects']} shared objects)")
    for note in ins.notes:
        c.print(f"  note: {escape(note)}")
    return data


# ------------------------------------------------------------------ diff


@dataclass(frozen=True)
class Side:
    """One side of a diff: an image's distributions, or what a lock installs (no sizes or layers)."""

    label: str
    versions: dict[str, str]
    sizes: dict[str, int]
    layers: dict[str, int]


def side_of_image(label: str, dists: list[Distribution]) -> Side:
    return Side(label, {d.name: d.version for d in dists}, {d.name: d.size for d in dists},
                {d.name: d.layer for d in dists})


AUDIT_SCHEMA = "pinwheel.audit/1"


def side_of_replay(label: str, doc: object) -> Side | None:
    """The environment a hand-written Dockerfile's installs leave (`audit --replay --json`'s replay.installed,
    the base's packages included); None where the document is no such record."""
    replay = doc.get("replay") if isinstance(doc, dict) and doc.get("schema") == AUDIT_SCHEMA else None
    installed = replay.get("installed") if isinstance(replay, dict) else None
    if not isinstance(installed, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in installed.items()):
        return None
    return Side(f"replay of {doc.get('path') or label}", dict(installed), {}, {})


def diff(a: Side, b: Side) -> dict:
    rows = []
    for name in sorted(set(a.versions) | set(b.versions)):
        va, vb = a.versions.get(name), b.versions.get(name)
        if va == vb:
            continue
        change = "added" if va is None else "removed" if vb is None else "changed"
        rows.append({"name": name, "change": change, "a": va, "b": vb,
                     "size_a": a.sizes.get(name), "size_b": b.sizes.get(name),
                     "layer_b": b.layers.get(name) if vb else None})
    return {"schema": "pinwheel.diff/1", "a": a.label, "b": b.label, "changes": rows,
            "summary": {k: sum(1 for r in rows if r["change"] == k) for k in ("added", "removed", "changed")}}


def print_diff(data: dict, console: Console) -> None:
    table = Table(title=f"{data['a']} → {data['b']}")
    for col in ("package", "change", "a", "b", "size", "layer in b"):
        table.add_column(col, overflow="ellipsis")
    for r in data["changes"]:
        size = "" if r["size_b"] is None and r["size_a"] is None else _mb(r["size_b"] or r["size_a"] or 0)
        table.add_row(escape(r["name"]), r["change"], escape(r["a"] or ""), escape(r["b"] or ""), size,
                      "" if r["layer_b"] is None else str(r["layer_b"]))
    console.print(table)
    s = data["summary"]
    console.print(f"{s['changed']} changed, {s['added']} added, {s['removed']} removed")
