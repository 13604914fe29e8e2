"""The manifest fuzzer (test_manifest_fuzz) over the step kinds and the file names a manifest names.

The seed holds one step of every kind (remove, apt, wheels with a local wheel,
git, asset, patch, sdist) and a patch file beside it. Mutants: the fuzzer's
structural operations on that seed; a step's kind changed; a field of one kind
moved into a step of another; and hostile file names, for the patch file, the
local wheel glob and the manifest itself (newlines, shell syntax, escapes out
of the project, directories, symlinks to /dev/zero or outside, FIFOs, names too
long for the file system). Every mutant either loads, or is refused with a
ManifestError that names a place on one printable line; through the CLI a
refusal is exit 2 with that line and no traceback, and what loads renders or
is refused the same way. Nothing may hang or raise anything else.
"""
from __future__ import annotations

import copy
import os
import random
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from pinwheel import cli, manifest
from pinwheel.steps import KINDS

from tests.support.manifest_fuzz import Seed, dump, structural

REPO = Path(__file__).resolve().parents[2]
SEED_NUMBER = 1
WANTED = 220
PATCH = "--- a/six.py\n+++ b/six.py\n@@ -1 +1 @@\n-x\n+y\n"
ZERO = "0" * 64
KINDS_MANIFEST = f"""\
manifest_version: 1
image: {{name: kinds, repository: pinwheel/kinds}}
gates:
  ENABLE_CUDA_13: {{when: "cuda >= 13", why: "CUDA 13 only"}}
variants:
  cu130: {{cuda: "13.0", torch: "2.13.0", python: "3.11", platform: "manylinux_2_36_x86_64",
          base: "vendor/trainer:1@sha256:{ZERO}", tag: "cu130-{{date}}", environment: base}}
steps:
  - name: drop-te
    kind: remove
    why: "the base's transformer-engine is replaced by our own"
    packages:
      - {{name: transformer-engine, why: "we install our own"}}
  - name: system
    kind: apt
    why: "RDMA userspace for NCCL"
    packages:
      - {{name: libibverbs1, version: "44.0-2", why: "NCCL's IB transport loads it"}}
  - name: core
    kind: wheels
    why: "pure-python base"
    packages:
      - {{requirement: "six==1.16.0", why: "tiny and stable"}}
      - requirement: "demo-k==1.0"
        why: "built here"
        local: {{glob: "demo_k-1.0-*.whl", if_missing: skip}}
  - name: bridge
    kind: git
    why: "its fix is on no release yet"
    package: "pw-bridge==0.3.0"
    url: "https://git.example.org/team/pw-bridge.git"
    rev: "0123456789abcdef0123456789abcdef01234567"
  - name: flash
    kind: asset
    why: "prebuilt against torch 2.13"
    package: "flash-attn==2.8.3"
    url: {{url: "https://downloads.example.org/flash_attn-2.8.3-cp311-cp311-linux_x86_64.whl", sha256: "{"1" * 64}"}}
  - name: six-fixes
    kind: patch
    why: "a fix upstream has not released"
    gate: ENABLE_CUDA_13
    patches:
      - {{file: patches/six-fix.patch, applies_to: "six==1.16.0", strip: 1, why: "the x is a y"}}
  - name: plain
    kind: sdist
    why: "pure Python, isolated"
    package: "pw-plain==2.0"
    sha256: "{"2" * 64}"
"""
KINDS_DATA = yaml.safe_load(KINDS_MANIFEST)
KINDS_SEED = Seed.of(KINDS_DATA)
PATCH_AT = ("steps", 5, "patches", 0, "file")
GLOB_AT = ("steps", 2, "packages", 1, "local", "glob")

# Hostile names: (the name the manifest gives, what is put at that name: "patch", "dir", "zero", "outside",
# "fifo", "missing").
HOSTILE_NAMES = [
    ("patches/a\nRUN touch pwned.patch", "patch"), ("patches/$(id).patch", "patch"), ("patches/`id`.patch", "patch"),
    ("patches/a b.patch", "patch"), ("patches/-rf.patch", "patch"), ("patches/it's.patch", "patch"),
    ('patches/"q".patch', "patch"), ("patches/\u202eh.patch", "patch"), ("patches/é中.patch", "patch"),
    ("patches/a\\b.patch", "patch"), ("patches/#x.patch", "patch"), ("patches/a;b&c|d.patch", "patch"),
    ("patches/${HOME}.patch", "patch"), ("patches/*.patch", "patch"), ("patches/%s{}.patch", "patch"),
    ("patches/d.patch", "dir"), ("patches/zero.patch", "zero"), ("patches/out.patch", "outside"),
    ("patches/fifo.patch", "fifo"), ("patches/" + "x" * 300 + ".patch", "missing"), ("patches/nul\0.patch", "missing"),
    ("../outside.patch", "missing"), ("/etc/passwd", "missing"), ("patches/../../x.patch", "missing"),
    ("patches/", "missing"), ("", "missing"), (".", "missing"), ("patches/six-fix.patch/", "missing"),
    ("~/x.patch", "missing"), ("patches//six-fix.patch", "missing"), ("./patches/six-fix.patch", "missing"),
]
HOSTILE_GLOBS = ["demo_k-1.0-*.whl\nRUN id", "../*.whl", "/tmp/*.whl", "demo_k-$(id)-*.whl", "**/*.whl", "",
                 "demo_k-1.0-[.whl", "demo_k-1.0-*.whl; rm -rf /", "x" * 400 + ".whl", "demo_k\0.whl", "*"]
MANIFEST_NAMES = ["wheels\nRUN touch pwned.yaml", "$(id).yaml", "-x.yaml", "a b.yaml", "\u202eh.yaml", "é.yaml",
                  "it's.yaml", "#x.yaml", "w.yaml;id", "x" * 240 + ".yaml", "`id`.yaml", "${HOME}.yaml"]


@dataclass
class Mutant:
    label: str
    text: bytes
    files: dict = field(default_factory=dict)  # relative name -> what to put there (see HOSTILE_NAMES)
    name: str = "wheels_manifest.yaml"


def kind_swap(rng: random.Random) -> Mutant:
    data = copy.deepcopy(KINDS_DATA)
    step = rng.choice(data["steps"])
    step["kind"] = rng.choice([k for k in KINDS if k != step["kind"]] + ["Wheels", "wheel", "apt ", "", "patches"])
    return Mutant("kinds:kind-swap", dump(data))


def transplant(rng: random.Random) -> Mutant:
    """A field of one kind in a step of another kind (or the same field twice over)."""
    data = copy.deepcopy(KINDS_DATA)
    giver, taker = rng.sample(data["steps"], 2)
    key = rng.choice([k for k in giver if k not in ("name", "why")])
    taker[key] = copy.deepcopy(giver[key])
    return Mutant("kinds:transplant", dump(data))


def set_at(data, path, value):
    target = data
    for k in path[:-1]:
        target = target[k]
    target[path[-1]] = value


def file_name(rng: random.Random) -> Mutant:
    name, what = rng.choice(HOSTILE_NAMES)
    data = copy.deepcopy(KINDS_DATA)
    set_at(data, PATCH_AT, name)
    return Mutant("kinds:patch-file", dump(data), {name: what})


def glob_name(rng: random.Random) -> Mutant:
    data = copy.deepcopy(KINDS_DATA)
    set_at(data, GLOB_AT, rng.choice(HOSTILE_GLOBS))
    return Mutant("kinds:local-glob", dump(data))


def manifest_name(rng: random.Random) -> Mutant:
    return Mutant("kinds:manifest-name", KINDS_MANIFEST.encode(), name=rng.choice(MANIFEST_NAMES))


def mutants(wanted: int = WANTED) -> list[Mutant]:
    rng = random.Random(SEED_NUMBER)
    seen: set = {(KINDS_MANIFEST.encode(), "wheels_manifest.yaml", ())}
    out: list[Mutant] = []
    for _ in range(wanted * 20):
        if len(out) >= wanted:
            break
        pick = rng.random()
        if pick < 0.4:
            label, text = structural(rng, KINDS_SEED)
            m = Mutant(f"kinds:{label}", text)
        else:
            m = rng.choice([kind_swap, transplant, file_name, glob_name, manifest_name])(rng)
        key = (m.text, m.name, tuple(sorted(m.files.items())))
        if key not in seen:
            seen.add(key)
            m.label = f"{len(out):03d}-{m.label}"
            out.append(m)
    return out


MUTANTS = mutants()


def materialize(m: Mutant, root: Path) -> Path | None:
    """The mutant's project under root: its manifest, the seed's patch, and its hostile files; None where the
    file system itself refuses the manifest's name (too long, a NUL)."""
    root.mkdir(parents=True)
    (root / "patches").mkdir()
    (root / "patches" / "six-fix.patch").write_text(PATCH)
    (root.parent / "outside.txt").write_text(PATCH)
    for name, what in m.files.items():
        target = root / name
        try:
            if what == "patch":
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(PATCH)
            elif what == "dir":
                target.mkdir(parents=True)
            elif what == "zero":
                target.symlink_to("/dev/zero")
            elif what == "outside":
                target.symlink_to(root.parent / "outside.txt")
            elif what == "fifo":
                os.mkfifo(target)
        except (OSError, ValueError):
            pass  # a name the file system refuses: the manifest names a file that is not there
    path = root / m.name
    try:
        path.write_bytes(m.text)
    except (OSError, ValueError):
        return None
    return path


def shown(path: Path) -> str:
    """The path as a located message prints it: on one line, escaped where unprintable."""
    text = str(path)
    return "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode() for c in text)


def located(e: manifest.ManifestError, path: Path) -> bool:
    text = str(e)
    if not text.isprintable():
        return False
    if e.line > 0:
        return text.startswith(f"{shown(path)}:{e.line}: ") and re.match(r"[^:]*\S: \S", text[len(shown(path)):]
                                                                         .split(": ", 1)[1]) is not None
    return e.key == "(file)" and text.startswith(f"{shown(path)}: (file): ")


def test_enough_distinct_mutants_of_every_family():
    assert len(MUTANTS) >= 200
    families = {m.label.split("-", 1)[1].split(":")[1] for m in MUTANTS}
    assert {"kind-swap", "transplant", "patch-file", "local-glob", "manifest-name", "structural"} <= families
    named = {name for m in MUTANTS for name in m.files}
    assert len(named) >= 15, sorted(named)


def test_mutants_are_deterministic():
    assert [m.label for m in mutants(50)] == [m.label for m in MUTANTS[:50]]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """(mutant, path, ManifestError or None) for each mutant the file system could write."""
    base = tmp_path_factory.mktemp("fuzz-kinds")
    out = []
    for i, m in enumerate(MUTANTS):
        path = materialize(m, base / f"{i:03d}" / "project")
        if path is None:
            continue
        try:
            manifest.load(path)
            error = None
        except manifest.ManifestError as e:
            error = e
        except BaseException as exc:  # noqa: BLE001 - anything but a ManifestError is the finding
            pytest.fail(f"{m.label}: manifest.load raised {type(exc).__name__}: {exc!r}"[:2000])
        out.append((m, path, error))
    return out


def test_every_mutant_loads_or_is_refused_with_a_location(results):
    bad = [f"{m.label}: {e!r}" for m, path, e in results if e is not None and not located(e, path)]
    assert not bad, "\n".join(bad[:20])
    refused = sum(1 for *_, e in results if e is not None)
    assert refused >= 120, f"only {refused} of {len(results)} refused: the fuzzer lost its teeth"
    assert len(results) - refused >= 10  # and some hostile names are legal ones: those load


def test_through_the_cli_a_refusal_is_exit_2_and_a_load_renders(results, capsys):
    bad = []
    for m, path, error in results:
        rc = cli.main(["--manifest", str(path), "render", "--stdout"])
        captured = capsys.readouterr()
        if "Traceback" in captured.err:
            bad.append(f"{m.label}: traceback {captured.err[-300:]!r}")
        elif error is not None and (rc != 2 or captured.out or captured.err != f"error: {error}\n"):
            bad.append(f"{m.label}: rc={rc} err={captured.err!r}")
        elif error is None and rc == 0 and not captured.out.startswith("# Rendered by pinwheel"):
            bad.append(f"{m.label}: rendered {captured.out[:100]!r}")
        elif error is None and rc not in (0, 2):
            bad.append(f"{m.label}: rc={rc} err={captured.err!r}")
        elif rc == 2 and not re.fullmatch(r"error: [^\n]+\n", captured.err):
            bad.append(f"{m.label}: not one line: {captured.err!r}")
    assert not bad, "\n".join(bad[:20])


def test_a_sample_through_the_real_cli(results):
    rng = random.Random(SEED_NUMBER)
    for m, path, error in rng.sample(results, 12):
        proc = subprocess.run([sys.executable, str(REPO / "build.py"), "--manifest", str(path), "render", "--stdout"],
                              cwd=path.parent, capture_output=True, text=True, timeout=60)
        assert "Traceback" not in proc.stderr, (m.label, proc.stderr[-2000:])
        if error is not None:
            assert proc.returncode == 2 and proc.stderr == f"error: {error}\n", (m.label, proc.stderr)
        else:
            assert proc.returncode in (0, 2), (m.label, proc.stderr)
