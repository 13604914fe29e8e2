"""The seeded mutant generator over the shipped manifest: structural edits of its parsed data and textual
edits of its bytes. tests/unit/test_manifest_fuzz.py checks every mutant; test_manifest_fuzz_kinds.py reuses
the structural edits on a seed of its own."""
from __future__ import annotations

import copy
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

from pinwheel import manifest

REPO = Path(__file__).resolve().parents[2]
SHIPPED = (REPO / "wheels_manifest.yaml").read_text(encoding="utf-8")
DATA = yaml.safe_load(SHIPPED)
SEED = 0
WANTED = 400

BAD_VERSIONS = ["", "13..0", "v", "1.0.0+", "1.0.0+-", "1.0a-b", "==2.13.0", "2.13.0 final", "latest", "1,0", "13.0.",
                "٣.١١", "1.0.0\u00a0", "2.13.0+cu130/x"]
BAD_REQUIREMENTS = ["torch", "torch==", "torch>=2.13", "torch==2.13.*", "torch===banana", "torch[=2.13.0",
                    "torch[cu13==2.13.0", "tor ch==2.13.0", "torch;rm==2.13.0", "torch==2.13.0; os_name == 'nt'",
                    "torch @ https://example.invalid/torch.whl", "torch==2.13.0 --hash=sha256:00", "-e torch==1.0",
                    "torch==1.0,==2.0", "torch==1.0; (((", "../torch==1.0", "torch$(id)==1.0", "torch==1.0\\",
                    "torch ==1.0 ==2.0", "[cu13]==1.0"]
UNICODE = ["é", "中文", "🚀", "\u202e", "\u200b", "\u200d", "\ufeff", "１３", "e\u0301", "\U0010fffd", "\u00a0", "Ω"]
CONTROL = ["\x00", "\x01", "\x07", "\x08", "\x1b", "\x7f", "\x85", "\x9b", "\t", "\r", "\n", "\u2028", "\u2029", "\x0c"]
SWAPS: list[Any] = [0, 1, -1, 2, 13.0, 1e309, 10**40, True, False, None, "", "x", [], {}, ["a"], {"a": 1}, [[]],
                    "13.0", "yes", "null"]
HUGE: list[Any] = ["x" * 5000, "9" * 5000, 10**4000, ["sglang"] * 3000, {f"k{i}": i for i in range(2000)}]
RAW_BYTES = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x00", b"\xfe\xff"]
TAGS = ["!!binary", "!!python/object/apply:os.system", "!!str", "!!int", "!!set", "!custom", "!", "!!timestamp",
        "!<tag:yaml.org,2002:str>", "!!omap"]


# ------------------------------------------------------------- the mutants


def node_paths(data: Any, prefix: tuple = ()) -> Iterator[tuple]:
    if isinstance(data, dict):
        items = data.items()
    elif isinstance(data, list):
        items = enumerate(data)
    else:
        return
    for k, v in items:
        yield prefix + (k,)
        yield from node_paths(v, prefix + (k,))


PATHS = list(node_paths(DATA))


def get(data: Any, path: tuple) -> Any:
    for k in path:
        data = data[k]
    return data


def parent_of(data: Any, path: tuple) -> tuple[Any, Any]:
    return get(data, path[:-1]), path[-1]


@dataclass(frozen=True)
class Seed:
    """A manifest to mutate, and the paths into it that each operation picks from."""

    data: Any
    paths: list
    string_paths: list
    requirement_paths: list
    version_paths: list
    dict_paths: list
    list_paths: list

    @classmethod
    def of(cls, data: Any) -> "Seed":
        paths = list(node_paths(data))
        return cls(data, paths, [p for p in paths if isinstance(get(data, p), str)],
                   [p for p in paths if p[-1] == "requirement"],
                   [p for p in paths if p[-1] in ("cuda", "torch", "python")],
                   [()] + [p for p in paths if isinstance(get(data, p), dict)],
                   [p for p in paths if isinstance(get(data, p), list)])


SHIPPED_SEED = Seed.of(DATA)
STRING_PATHS = SHIPPED_SEED.string_paths


def dump(data: Any) -> bytes:
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    return yaml.dump(data, Dumper=dumper, sort_keys=False, allow_unicode=True, width=10**9).encode("utf-8")


def structural(rng: random.Random, seed: Seed = SHIPPED_SEED) -> tuple[str, bytes]:
    """Mutate the parsed manifest (the shipped one, or another seed) and write it back out as YAML."""
    data = copy.deepcopy(seed.data)
    op = rng.choice(["delete", "duplicate", "swap", "version", "requirement", "unicode", "control", "huge",
                     "rename", "unknown", "string", "shuffle"])
    if op == "delete":
        path = rng.choice(seed.paths)
        parent, k = parent_of(data, path)
        del parent[k]
    elif op == "duplicate":
        path = rng.choice(seed.list_paths)
        items = get(data, path)
        if items:
            i = rng.randrange(len(items))
            items.insert(rng.randrange(len(items) + 1), copy.deepcopy(items[i]))
    elif op == "swap":
        path = rng.choice(seed.paths)
        parent, k = parent_of(data, path)
        parent[k] = copy.deepcopy(rng.choice(SWAPS))
    elif op == "version":
        path = rng.choice(seed.version_paths + seed.requirement_paths)
        parent, k = parent_of(data, path)
        bad = rng.choice(BAD_VERSIONS)
        parent[k] = (parent[k].split("==")[0] + "==" + bad) if k == "requirement" else bad
    elif op == "requirement":
        path = rng.choice(seed.requirement_paths + [p for p in seed.string_paths if "needed_by" in p])
        parent, k = parent_of(data, path)
        parent[k] = rng.choice(BAD_REQUIREMENTS)
    elif op in ("unicode", "control"):
        path = rng.choice(seed.string_paths)
        parent, k = parent_of(data, path)
        value = parent[k]
        at = rng.randrange(len(value) + 1)
        parent[k] = value[:at] + rng.choice(UNICODE if op == "unicode" else CONTROL) + value[at:]
    elif op == "huge":
        path = rng.choice(seed.paths)
        parent, k = parent_of(data, path)
        parent[k] = copy.deepcopy(rng.choice(HUGE))
    elif op == "rename":
        path = rng.choice([p for p in seed.paths if isinstance(p[-1], str)])
        parent, k = parent_of(data, path)
        new = rng.choice([k[:-1], k.upper(), k + "s", k.replace("_", "-"), " " + k, k + "\u200b", "", "~", "1"])
        if new not in parent:
            parent[new] = parent.pop(k)
    elif op == "unknown":
        parent = get(data, rng.choice(seed.dict_paths))
        parent[rng.choice(["extra", "order", "nodeps", "registry", "<<", "=", "null"])] = rng.choice(SWAPS[:12])
    elif op == "string":  # a string where another kind of value was, and back
        path = rng.choice(seed.string_paths)
        parent, k = parent_of(data, path)
        parent[k] = rng.choice(["$(id)", "; rm -rf /", "../../etc/passwd", "{date}", "{}", "%s", "*", "a" * 200,
                                "\\", "'", '"', "#", "- x", ": x", "&a", "*a", "!x"])
    elif op == "shuffle":
        path = rng.choice(seed.list_paths)
        rng.shuffle(get(data, path))
    return f"structural:{op}", dump(data)


def textual(rng: random.Random) -> tuple[str, bytes]:
    """Mutate the text of the shipped manifest, where YAML itself can be broken."""
    lines = SHIPPED.splitlines(keepends=True)
    content = [i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")]
    values = [i for i in content if re.match(r"^\s*(- )?[a-z_]+: \S", lines[i])]
    op = rng.choice(["delete-line", "duplicate-line", "swap-lines", "indent", "tab", "truncate", "raw-control",
                     "raw-unicode", "anchor", "bomb", "deep-flow", "deep-block", "document", "tag", "bytes",
                     "long-line", "huge-int", "oversize", "flow-break", "quote-break"])
    text = SHIPPED
    if op == "delete-line":
        del lines[rng.choice(content)]
        text = "".join(lines)
    elif op == "duplicate-line":
        i = rng.choice(content)
        lines.insert(i + rng.choice([0, 1]), lines[i])
        text = "".join(lines)
    elif op == "swap-lines":
        i = rng.choice(content[:-1])
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
        text = "".join(lines)
    elif op == "indent":
        i = rng.choice(content)
        lines[i] = (" " * rng.randint(1, 3) + lines[i]) if rng.random() < 0.5 else lines[i][rng.randint(1, 2):]
        text = "".join(lines)
    elif op == "tab":
        i = rng.choice([i for i in content if lines[i].startswith(" ")])
        lines[i] = "\t" + lines[i].lstrip(" ")
        text = "".join(lines)
    elif op == "truncate":
        text = SHIPPED[: rng.randrange(len(SHIPPED))]
    elif op in ("raw-control", "raw-unicode"):
        at = rng.randrange(len(SHIPPED))
        text = SHIPPED[:at] + rng.choice(CONTROL if op == "raw-control" else UNICODE) + SHIPPED[at:]
    elif op == "anchor":
        i, j = rng.sample(values, 2)
        name = rng.choice(["a", "x1", "pin"])
        lines[i] = re.sub(r": ", f": &{name} ", lines[i], count=1)
        lines[j] = re.sub(r": .*", f": *{name}", lines[j], count=1)
        text = "".join(lines)
    elif op == "bomb":
        depth = rng.randint(3, 12)
        bomb = "".join(f"  l{k}: &l{k} [{', '.join([f'*l{k - 1}'] * 9) if k else 'lol'}]\n" for k in range(depth))
        i = rng.choice([i for i in values if lines[i].startswith("  ") and not lines[i].startswith("   ")])
        lines.insert(i, bomb)
        text = "".join(lines)
    elif op == "deep-flow":
        n = rng.choice([31, 32, 33, 50, 500, 5000])
        i = rng.choice(values)
        lines[i] = re.sub(r": .*", ": " + "[" * n + "]" * n, lines[i], count=1)
        text = "".join(lines)
    elif op == "deep-block":
        n = rng.choice([30, 33, 40, 100])
        text = SHIPPED + "deep:\n" + "".join(" " * (k + 1) + f"k{k}:\n" for k in range(n)) + " " * (n + 1) + "x\n"
    elif op == "document":
        i = rng.choice(content)
        lines.insert(i, rng.choice(["---\n", "...\n", "%YAML 1.1\n---\n", "--- |\n"]))
        text = "".join(lines)
    elif op == "tag":
        i = rng.choice(values)
        lines[i] = re.sub(r": ", f": {rng.choice(TAGS)} ", lines[i], count=1)
        text = "".join(lines)
    elif op == "bytes":
        data = SHIPPED.encode()
        at = rng.randrange(len(data))
        return f"textual:{op}", data[:at] + rng.choice(RAW_BYTES) + data[at:]
    elif op == "long-line":
        i = rng.choice(values)
        lines[i] = lines[i].rstrip("\n") + "x" * rng.choice([4097, 10_000, 100_000]) + "\n"
        text = "".join(lines)
    elif op == "huge-int":
        i = rng.choice(values)
        lines[i] = re.sub(r": .*", ": " + rng.choice(["9" * 5000, "1" + "0" * 4300, "0x" + "f" * 4000, "1e99999",
                                                      "-" + "9" * 4000, "1:" * 2000 + "1"]), lines[i], count=1)
        text = "".join(lines)
    elif op == "oversize":
        text = SHIPPED + "#" * (manifest.MAX_FILE_BYTES + rng.randint(1, 1000)) + "\n"
    elif op == "flow-break":
        i = rng.choice(content)
        at = rng.randrange(len(lines[i]))
        lines[i] = lines[i][:at] + rng.choice(["[", "]", "{", "}", ",", ":", "? ", "- ", "|", ">", "%", "@", "`"]) \
            + lines[i][at:]
        text = "".join(lines)
    elif op == "quote-break":
        i = rng.choice([i for i in content if '"' in lines[i]])
        lines[i] = lines[i].replace('"', rng.choice(["", "'", '"\\', '\\"', '"\\x', '"\\u12']), 1)
        text = "".join(lines)
    return f"textual:{op}", text.encode("utf-8", "surrogatepass")


def mutants(wanted: int = WANTED) -> list[tuple[str, bytes]]:
    """The first `wanted` distinct mutants of the seeded generator."""
    rng = random.Random(SEED)
    seen: dict[bytes, str] = {SHIPPED.encode(): "shipped"}
    out: list[tuple[str, bytes]] = []
    attempts = 0
    while len(out) < wanted and attempts < wanted * 20:
        attempts += 1
        label, data = (structural if rng.random() < 0.5 else textual)(rng)
        if data not in seen:
            seen[data] = label
            out.append((f"{len(out):03d}-{label}", data))
    return out


MUTANTS = mutants()
