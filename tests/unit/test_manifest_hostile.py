"""Hostile manifests: each ends in exit 2 with a one-line located reason, fast, in bounded memory."""
from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from pinwheel import cli, manifest

REPO = Path(__file__).resolve().parents[2]
SHIPPED = (REPO / "wheels_manifest.yaml").read_text()


def shipped(old: str, new: str) -> str:
    assert SHIPPED.count(old) >= 1, old
    return SHIPPED.replace(old, new, 1)


def line_of(text: str, fragment: str) -> int:
    return text[: text.index(fragment)].count("\n") + 1


def refused(path: Path, line: int, key: str, fragment: str, capsys) -> manifest.ManifestError:
    """load() raises a located ManifestError fast, and the CLI prints it as one line and exits 2."""
    start = time.perf_counter()
    with pytest.raises(manifest.ManifestError) as info:
        manifest.load(path)
    assert time.perf_counter() - start < 0.5
    e = info.value
    assert (e.line, e.key) == (line, key), str(e)
    assert fragment in e.message, str(e)
    rc = cli.main(["--manifest", str(path), "report"])
    captured = capsys.readouterr()
    assert rc == 2
    assert captured.err.count("\n") == 1 and captured.err.startswith("error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    return e


def write(tmp_path: Path, text: str | bytes, name: str = "wheels_manifest.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


BOMB = """\
manifest_version: 1
image: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""

# ------------------------------------------------------------ anchors and aliases


def test_alias_bomb_alone(tmp_path, capsys):
    tracemalloc.start()
    try:
        refused(write(tmp_path, BOMB), 2, "image", "anchors and aliases are not allowed", capsys)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20


def test_alias_bomb_inside_the_shipped_manifest(tmp_path, capsys):
    items = ['"lol"'] + [", ".join([f"*l{i - 1}"] * 9) for i in range(1, 10)]
    bomb = "".join(f"  x{i}: &l{i} [{item}]\n" for i, item in enumerate(items))
    text = shipped("  venv: /opt/venv\n", "  venv: /opt/venv\n" + bomb)
    refused(write(tmp_path, text), line_of(text, "  x0:"), "image.x0", "anchors and aliases are not allowed", capsys)


def test_a_lone_alias_is_refused_too(tmp_path, capsys):
    text = shipped('  title: "GPU', '  title: &t "GPU').replace("  venv: /opt/venv", "  venv: *t")
    refused(write(tmp_path, text), line_of(text, "&t"), "image.title", "anchors and aliases are not allowed", capsys)


def test_merge_keys_need_anchors_and_are_refused(tmp_path, capsys):
    text = SHIPPED.replace("  cu129:\n", "  cu129:\n    <<: *cu130\n").replace("  cu130:\n", "  cu130: &cu130\n")
    refused(write(tmp_path, text), line_of(text, "&cu130"), "variants.cu130", "anchors and aliases are not allowed",
            capsys)


def test_bomb_exits_2_through_the_cli_in_bounded_memory_and_cpu(tmp_path):
    path = write(tmp_path, BOMB)
    cli_refuses(path, "anchors and aliases")
    assert load_cpu_seconds(path) < 1.0  # CPU, not wall time: the figure holds on a loaded machine


# ------------------------------------------------------------------ nesting


def test_deep_flow_nesting(tmp_path, capsys):
    path = write(tmp_path, "manifest_version: 1\nimage: " + "[" * 500 + "]" * 500 + "\n")
    assert path.stat().st_size < 1100
    e = refused(path, 2, "image" + "[0]" * 31, "nested deeper than 32 levels", capsys)
    assert len(str(e)) < 400


def test_deep_block_nesting(tmp_path, capsys):
    text = "manifest_version: 1\n" + "".join(" " * i + f"k{i}:\n" for i in range(60)) + " " * 60 + "x\n"
    refused(write(tmp_path, text), 34, ".".join(f"k{i}" for i in range(32)), "nested deeper than 32 levels", capsys)


def test_nesting_at_the_limit_is_not_a_nesting_error(tmp_path):
    ok = "manifest_version: 1\nextra: " + "[" * 31 + "]" * 31 + "\n"  # 32 levels with the top mapping
    with pytest.raises(manifest.ManifestError, match="unknown key"):
        manifest.load(write(tmp_path, ok))
    with pytest.raises(manifest.ManifestError, match="nested deeper"):
        manifest.load(write(tmp_path, ok.replace("[", "[[", 1).replace("]", "]]", 1)))


def test_deep_nesting_exits_2_through_the_cli_in_bounded_memory_and_cpu(tmp_path):
    path = write(tmp_path, "a: " + "[" * 500 + "]" * 500 + "\n")
    cli_refuses(path, "nested deeper")
    assert load_cpu_seconds(path) < 1.0


# -------------------------------------------------------- what gets read at all


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_dev_zero(capsys):
    tracemalloc.start()
    try:
        refused(Path("/dev/zero"), 0, "(file)", "character device, not a regular file", capsys)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_does_not_hang(tmp_path, capsys):
    fifo = tmp_path / "wheels_manifest.yaml"
    os.mkfifo(fifo)
    refused(fifo, 0, "(file)", "FIFO, not a regular file", capsys)


def test_a_directory(tmp_path, capsys):
    refused(tmp_path, 0, "(file)", "is a directory", capsys)


def test_a_symlink_to_a_manifest_is_read(tmp_path):
    target = write(tmp_path, SHIPPED, "real.yaml")
    link = tmp_path / "wheels_manifest.yaml"
    link.symlink_to(target)
    assert manifest.load(link).image.name == "train"


# ------------------------------------------------------------------- sizes


def test_fifty_megabyte_manifest(tmp_path, capsys):
    path = write(tmp_path, shipped('why: "the base', 'why: "' + "x" * 50_000_000))
    tracemalloc.start()
    try:
        refused(path, 0, "(file)", f"a manifest may be at most 256 KiB", capsys)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20


def test_size_limit_is_exact(tmp_path):
    pad = manifest.MAX_FILE_BYTES - len(SHIPPED.encode())
    at_limit = SHIPPED + "#" * (pad - 1) + "\n"
    assert len(at_limit.encode()) == manifest.MAX_FILE_BYTES
    assert manifest.load(write(tmp_path, at_limit)).image.name == "train"
    with pytest.raises(manifest.ManifestError, match="at most 256 KiB"):
        manifest.load(write(tmp_path, at_limit + "\n"))
    with pytest.raises(manifest.ManifestError, match="at most 256 KiB"):
        manifest.parse(at_limit + "\n")


def test_a_file_larger_than_its_stat_says_is_still_cut_at_the_limit(tmp_path, monkeypatch):
    small = os.stat(write(tmp_path, SHIPPED, "small.yaml"))
    big = write(tmp_path, SHIPPED + "#" * manifest.MAX_FILE_BYTES, "big.yaml")
    monkeypatch.setattr(manifest.os, "stat", lambda *a, **k: small)  # as if it grew after the checks
    monkeypatch.setattr(manifest.os, "fstat", lambda fd: small)
    with pytest.raises(manifest.ManifestError, match="more than 256 KiB"):
        manifest.load(big)


def test_string_limit_is_exact(tmp_path, capsys):
    n = manifest.MAX_STRING_CHARS
    ok = shipped('why: "the base every compiled wheel below is built against"', 'why: "' + "x" * n + '"')
    assert manifest.load(write(tmp_path, ok)).wheel_sets[0].why == "x" * n
    long = ok.replace("x" * n, "x" * (n + 1))
    refused(write(tmp_path, long), line_of(long, "xxx"), "wheel_sets[0].why", "the limit is 4096", capsys)


def test_huge_integer(tmp_path, capsys):
    text = shipped("manifest_version: 1", "manifest_version: " + "9" * 5000)
    refused(write(tmp_path, text), line_of(text, "manifest_version"), "manifest_version", "the limit is 4096", capsys)
    text = shipped("manifest_version: 1", "manifest_version: " + "9" * 4000)
    refused(write(tmp_path, text), line_of(text, "manifest_version"), "manifest_version", "must be 1", capsys)


# ------------------------------------------------------------------ names


@pytest.mark.parametrize("bad", ["flashinfer-python$(touch /tmp/x)", "sglang;rm", "-sglang", "sglang-", "a b", "é"])
def test_needed_by_entries_are_package_names(tmp_path, capsys, bad):
    text = shipped("needed_by: [sglang,", f"needed_by: [{bad!r},".replace("'", '"'))
    refused(write(tmp_path, text), line_of(text, "needed_by: [\""), "shared_pins[0].needed_by[0]",
            "is not a package name", capsys)


def test_needed_by_names_twice(tmp_path, capsys):
    text = shipped("needed_by: [sglang,", "needed_by: [sglang, SGLang,")
    refused(write(tmp_path, text), line_of(text, "SGLang"), "shared_pins[0].needed_by[1]", "listed twice", capsys)


def test_needed_by_accepts_real_names(tmp_path):
    text = shipped("needed_by: [sglang,", "needed_by: [zope.interface, A1, sgl_kernel,")
    assert manifest.load(write(tmp_path, text)).shared_pins[0].needed_by[:3] == ("zope.interface", "A1", "sgl_kernel")


# ------------------------------------------------------ encodings and characters


def test_not_utf8_names_the_line(tmp_path, capsys):
    data = SHIPPED.encode().replace(b'title: "GPU', b'title: "\xff\xfeGPU', 1)
    refused(write(tmp_path, data), line_of(SHIPPED, "title:"), "(file)", "not UTF-8", capsys)


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b", "\x7f", "\x85", "\u2028"])
def test_raw_control_characters(tmp_path, capsys, char):
    text = shipped('title: "GPU', f'title: "G{char}PU')
    refused(write(tmp_path, text), line_of(text, "title:"), "(file)", f"U+{ord(char):04X} is not allowed", capsys)


@pytest.mark.parametrize("escape,code", [("\\0", 0), ("\\e", 0x1B), ("\\t", 9), ("\\x9b", 0x9B), ("\\u202e", 0x202E),
                                         ("\\u200b", 0x200B)])
def test_escaped_control_characters_in_strings(tmp_path, capsys, escape, code):
    text = shipped('title: "GPU', f'title: "G{escape}PU')
    refused(write(tmp_path, text), line_of(text, "title:"), "image.title", f"control character U+{code:04X}", capsys)


def test_escaped_line_breaks_in_strings(tmp_path, capsys):
    for escape in ("\\r", "\\n", "\\L"):
        text = shipped('title: "GPU', f'title: "G{escape}PU')
        e = refused(write(tmp_path, text), line_of(text, "title:"), "image.title", "", capsys)
        assert "single line" in e.message or "U+2028" in e.message


def test_escaped_surrogate(tmp_path, capsys):
    text = shipped('title: "GPU', 'title: "G\\ud800PU')
    with pytest.raises(manifest.ManifestError) as info:  # libyaml refuses the escape; pure-Python YAML lets it by
        manifest.load(write(tmp_path, text))
    e = info.value
    assert e.line == line_of(text, "title:") and e.key in ("(yaml)", "image.title"), str(e)
    assert str(e).isprintable()


def test_printable_unicode_is_fine(tmp_path):
    text = shipped('title: "GPU', 'title: "GPU — Ünïcødé, 中文, 🚀')
    assert manifest.load(write(tmp_path, text)).image.title.startswith("GPU — Ünïcødé")


def test_a_byte_order_mark_is_fine(tmp_path):
    assert manifest.load(write(tmp_path, "\ufeff" + SHIPPED)).image.name == "train"


def test_control_characters_in_a_key_do_not_break_the_line(tmp_path, capsys):
    text = shipped("image:", '"im\\nage\\e[31m":')
    e = refused(write(tmp_path, text), line_of(text, '"im'), "(top)", "keys must be plain strings", capsys)
    assert "\n" not in str(e) and "\x1b" not in str(e)


def test_a_path_with_a_newline_stays_one_line(tmp_path, capsys):
    path = write(tmp_path, SHIPPED.replace("manifest_version: 1", "manifest_version: 2"), "bad\nname.yaml")
    e = refused(path, 3, "manifest_version", "must be 1", capsys)
    assert "bad\\nname.yaml:3:" in str(e)


# -------------------------------------------------------------- YAML features


def test_duplicate_keys(tmp_path, capsys):
    text = shipped("  venv: /opt/venv\n", "  venv: /opt/venv\n  venv: /usr\n")
    refused(write(tmp_path, text), line_of(text, "  venv: /usr"), "image.venv", "duplicate key", capsys)


@pytest.mark.parametrize("key", ["[a, b]", "{a: 1}"])
def test_non_string_keys(tmp_path, capsys, key):
    text = shipped("image:\n", f"{key}: 1\nimage:\n")
    refused(write(tmp_path, text), line_of(text, key), "(top)", "keys must be plain strings", capsys)


@pytest.mark.parametrize("tag", ["!!python/object/apply:os.system", "!!binary", "!!str", "!custom", "!!set"])
def test_tags(tmp_path, capsys, tag):
    text = shipped("  name: train", f"  name: {tag} train")
    refused(write(tmp_path, text), line_of(text, "  name:"), "image.name", "YAML tags are not allowed", capsys)


def test_a_date_that_is_not_one(tmp_path, capsys):
    text = shipped("manifest_version: 1", "manifest_version: 2024-02-30")
    refused(write(tmp_path, text), line_of(text, "manifest_version"), "manifest_version", "not a valid one", capsys)


def test_two_documents(tmp_path, capsys):
    text = SHIPPED + "---\nmanifest_version: 1\n"
    refused(write(tmp_path, text), line_of(text, "---"), "(top)", "only one YAML document", capsys)


def test_tab_indent_says_so(tmp_path, capsys):
    text = shipped("  name: train", "\tname: train")
    refused(write(tmp_path, text), line_of(text, "\tname"), "(yaml)", "YAML indents with spaces only", capsys)


# ------------------------------------------------- crashes past the YAML layer


def test_tag_format_spec(tmp_path, capsys):
    text = shipped('"cu130-torch213-{date}"', '"cu130-torch213-{date:%Y}"')
    refused(write(tmp_path, text), line_of(text, "{date:%Y}"), "variants.cu130.tag", "no format spec", capsys)
    text = shipped('"cu130-torch213-{date}"', '"cu130-torch213-{date!z}"')
    refused(write(tmp_path, text), line_of(text, "{date!z}"), "variants.cu130.tag", "no format spec", capsys)


def test_a_scalar_fallback_without_a_local_wheel(tmp_path, capsys):
    text = shipped('        why: "FlashMLA and the DSA', '        fallback: x\n        why: "FlashMLA and the DSA')
    refused(write(tmp_path, text), line_of(text, "fallback: x"), "wheel_sets[0].packages[0].fallback",
            "needs a local wheel", capsys)


def test_a_multiline_requirement_error_is_one_line(tmp_path, capsys):
    text = shipped('"torch==2.13.0"', '"torch;rm==2.13.0"')
    e = refused(write(tmp_path, text), line_of(text, "torch;rm"), "wheel_sets[0].packages[0].requirement",
                "not a PEP 508 requirement", capsys)
    assert "\n" not in str(e)


# --------------------------------------------------------------------- CLI


def _limit_memory() -> None:
    # 1 GiB of address space: the old loader grew to 4 GB on the bomb before a MemoryError traceback
    resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))


def cli_refuses(path: Path, fragment: str) -> None:
    """`build.py report` on path, in 1 GiB: exit 2 with one error line naming the fragment, no traceback."""
    proc = subprocess.run([sys.executable, "build.py", "--manifest", str(path), "report"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, preexec_fn=_limit_memory)
    assert proc.returncode == 2, proc.stderr
    assert re.fullmatch(r"error: [^\n]+\n", proc.stderr), proc.stderr
    assert fragment in proc.stderr and "Traceback" not in proc.stderr


def load_cpu_seconds(path: Path) -> float:
    """CPU seconds this process spends refusing the manifest (bench/manifest_bench.py times the CLI)."""
    start = time.process_time()
    with pytest.raises(manifest.ManifestError):
        manifest.load(path)
    return time.process_time() - start


def test_relative_bomb_path_through_the_cli(tmp_path):
    write(tmp_path, BOMB, "bomb.yaml")
    proc = subprocess.run([sys.executable, str(REPO / "build.py"), "--manifest", "bomb.yaml", "report"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert proc.stderr == "error: bomb.yaml:2: image: anchors and aliases are not allowed\n"
