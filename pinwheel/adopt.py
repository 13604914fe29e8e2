"""Start a wheels_manifest.yaml from a hand-written Dockerfile (`build.py import`).

One wheel set per RUN that installs packages, in file order; local wheels with
the policy their guard implies (an `if ls <glob>` with an index fallback in its
`else`, a bare guard, or none); `--no-deps`; gates from `if [ "${ARG}" = "1" ]`
blocks. Every why is a TODO for a person. What it cannot express is listed, not
dropped.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .reports.audit import _pip_install, _segments, parse_dockerfile

_GATE = re.compile(r"""\[\s*"?\$\{?(?P<arg>[A-Z][A-Z0-9_]*)\}?"?\s*=\s*"?1"?\s*\]""")
_CUDA_GATE = re.compile(r"CUDA_?(\d{2})")
_VENV = re.compile(r"python3?(?:\.\d+)? -m venv (?P<path>/[\w./-]+)")
_WHEELS_CLEANUP = re.compile(r"^\s*rm -rf /tmp/wheels\s*$")
TODO = "TODO: why"


@dataclass
class Adopted:
    manifest: dict
    not_expressed: list[str] = field(default_factory=list)


def _package(req: str, no_deps: bool) -> dict:
    entry: dict = {"requirement": req}
    if no_deps:
        entry["no_deps"] = True
        entry["why"] = TODO
    return entry


def _wheel_set(line: int, script: str, gate: str | None, not_expressed: list[str]) -> dict | None:
    """The wheel set of one RUN: its index packages, and local wheels with the policy their guard implies."""
    segments = _segments(script)
    packages: list[dict] = []
    local_globs: list[tuple[str, bool]] = []
    fallbacks: list[tuple[str, bool]] = []
    for words in segments:
        install = _pip_install(words)
        if install is None:
            continue
        no_deps = "--no-deps" in install
        for tok in install:
            if tok.startswith("-"):
                continue
            if tok.endswith(".whl") and ("*" in tok or "?" in tok):
                local_globs.append((tok.rsplit("/", 1)[-1], no_deps))
            elif "==" in tok and not tok.startswith(("git+", "/", ".")):
                (fallbacks if local_globs and _after_else(script, tok) else packages).append((tok, no_deps))
            else:
                not_expressed.append(f"line {line}: {tok}: not an exact pin or a local wheel; pin it by hand")
    entries = [_package(req, nd) for req, nd in packages]
    guarded = bool(re.search(r"\bif\s+ls\b", script))
    for glob, no_deps in local_globs:
        name = re.split(r"[-*?]", glob, maxsplit=1)[0].replace("_", "-")
        entry: dict = {"requirement": f"{name}==0.0.0", "why": TODO,
                       "local": {"glob": glob, "if_missing": "fail",
                                 "how_to_provide": f"TODO: how to build {glob} and put it in wheels/"}}
        if guarded and fallbacks:
            req, nd = fallbacks.pop(0)
            entry["local"]["if_missing"] = "fallback"
            entry["fallback"] = _package(req, nd) | {"why": TODO}
        elif guarded:
            entry["local"]["if_missing"] = "skip"
        not_expressed.append(f"line {line}: {glob}: set the local wheel's version in its requirement (0.0.0 now)")
        entries.append(entry)
    entries += [_package(req, nd) for req, nd in fallbacks]
    if not entries:
        return None
    out: dict = {"name": f"run-{line}", "why": TODO, "packages": entries}
    if gate:
        out["gate"] = gate
    return out


def _after_else(script: str, token: str) -> bool:
    head, _, tail = script.partition(" else")
    return token in tail and token not in head


def adopt(path: Path) -> Adopted:
    commands = parse_dockerfile(path)
    args: dict[str, str] = {}
    gates: dict[str, dict] = {}
    sets: list[dict] = []
    not_expressed: list[str] = []
    base = None
    image_venv = "/opt/venv"
    for cmd in commands:
        if cmd.cmd == "ARG":
            for value in cmd.value:
                name, _, default = value.partition("=")
                args[name] = default
        elif cmd.cmd == "FROM":
            ref = cmd.value[0]
            base = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), ref)
        elif cmd.cmd == "RUN":
            script = " ".join(cmd.value)
            gate_match = _GATE.search(script)
            gate = gate_match["arg"] if gate_match else None
            if gate and gate not in gates:
                cuda = _CUDA_GATE.search(gate)
                gates[gate] = {"when": f"cuda >= {int(cuda.group(1))}" if cuda else "cuda >= 0", "why": TODO}
            venv = _VENV.search(script)
            if venv:
                image_venv = venv["path"]
            wheel_set = _wheel_set(cmd.start_line, script, gate, not_expressed)
            if wheel_set is not None:
                sets.append(wheel_set)
            elif venv or _WHEELS_CLEANUP.search(script):
                continue  # pinwheel makes the venv itself and never copies wheels into a layer
            elif "pip" not in script:
                not_expressed.append(f"line {cmd.start_line}: RUN {cmd.original[4:80]}: not a pip install")
        elif cmd.cmd == "COPY" and "wheels" in cmd.original:
            continue  # local wheels are bind-mounted from wheels/ by pinwheel
        elif cmd.cmd not in ("ENV", "LABEL", "WORKDIR", "ENTRYPOINT", "CMD"):
            not_expressed.append(f"line {cmd.start_line}: {cmd.original[:80]}")
    cuda13 = any(_CUDA_GATE.search(g) and _CUDA_GATE.search(g).group(1) == "13" for g in gates)
    manifest = {
        "manifest_version": 1,
        "image": {"name": "image", "repository": "todo/image", "venv": image_venv},
        **({"gates": gates} if gates else {}),
        "variants": {"main": {"cuda": "13.0" if cuda13 else "12.9", "torch": _torch(sets), "python": "3.11",
                              "platform": "manylinux_2_36_x86_64",
                              "base": base if base and "$" not in base else "pinwheel/base:bookworm-py311",
                              "tag": "main-{date}"}},
        "wheel_sets": sets,
    }
    return Adopted(manifest, not_expressed)


def _torch(sets: list[dict]) -> str:
    for ws in sets:
        for p in ws["packages"]:
            if p["requirement"].startswith("torch=="):
                return p["requirement"].split("==", 1)[1]
    return "0"


def to_yaml(adopted: Adopted, source: Path, command: str = "pinwheel import") -> str:
    """``command``: how the user started it (`pinwheel import`, `build.py import`, `pinwheel init --from`)."""
    prog = command.split()[0]
    head = [f"# Started by `{command} {source.name}`. Fill in every TODO (each why, local wheel",
            f"# versions, gate expressions), then `{prog} report` and `{prog} lock`."]
    if adopted.not_expressed:
        head.append("# Not expressed here (do these by hand or in a later step kind):")
        head += [f"#   {line}" for line in adopted.not_expressed]
    body = yaml.safe_dump(adopted.manifest, sort_keys=False, width=100, allow_unicode=True)
    return "\n".join(head) + "\n" + body
