"""Start a wheels_manifest.yaml from a hand-written Dockerfile (`build.py import`).

Every instruction is accounted for: it becomes manifest entries of today's
step kinds (pinwheel.adopt.runs), or it is listed as not expressed with its
line. ARG defaults are filled in (the ARG is named in a comment), the base is
followed through stage names to an image, and a value import cannot know is a
placeholder that loads, with a `todo:` entry that keeps `report` unclean until
a person fills it in. The YAML is written only by the YAML library's emitter.
"""
from __future__ import annotations

import ast

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .. import dockerfiles as df
from ..steps import ADOPT_ENV, ADOPT_PIP_INSTALL, KINDS, kind_adopting
from .runs import WHY, Context, Gates, Todo, adopt_run
from .state import under

_VENV = re.compile(r"python3?(?:\.\d+)? -m venv (?P<path>/[\w./-]+)")
_CUDA_TAG = re.compile(r"(?<![\d.])(?P<v>1\d\.\d)(?:\.\d+)?-(?:cudnn\d*-)?(?:devel|runtime|base)")
_CU = re.compile(r"(?:\+|\b)cu(?P<major>1\d)(?P<minor>\d)\b")
_CP = re.compile(r"-cp3(?P<minor>\d+)-")
_NAME = re.compile(r"[^a-z0-9-]+")


@dataclass
class Adopted:
    manifest: dict
    listed: list[str] = field(default_factory=list)  # "line N: what: why not"
    instructions: int = 0
    expressed_lines: set[int] = field(default_factory=set)  # instructions that became entries
    notes: list[str] = field(default_factory=list)  # ARG defaults filled in, as comments
    step_lines: dict[str, int] = field(default_factory=dict)  # step name -> the Dockerfile line it came from
    todos: list[Todo] = field(default_factory=list)  # the steps' TODOs
    variant_todos: list[tuple[str, str]] = field(default_factory=list)  # (variant key, what)

    def todo_entries(self) -> list[dict]:
        """The manifest's todo: list, from what is still unknown."""
        index = {id(s): i for i, s in enumerate(self.manifest.get("steps", ()))}
        return [{"at": f"variants.main.{k}", "what": w} for k, w in self.variant_todos] + \
            [{"at": f"steps[{index[id(t.step)]}].{t.key}", "what": t.what} for t in self.todos if id(t.step) in index]

    def refresh_todo(self) -> None:
        """Rewrite todo: after some TODOs were filled in (import --pin)."""
        todo = self.todo_entries()
        self.manifest.pop("todo", None)
        if todo:
            self.manifest["todo"] = todo

    @property
    def listed_lines(self) -> set[int]:
        return {int(item.split(":", 1)[0].removeprefix("line ")) for item in self.listed}

    @property
    def expressed(self) -> int:
        """Instructions wholly expressed: an instruction with anything listed counts as listed."""
        return len(self.expressed_lines - self.listed_lines)

    @property
    def listed_instructions(self) -> int:
        return len(self.listed_lines)

    @property
    def dropped(self) -> int:
        """Instructions neither expressed nor listed: computed, so a walk that forgets one shows here."""
        return self.instructions - len(self.expressed_lines | self.listed_lines)

    @property
    def accounting(self) -> str:
        return (f"{self.instructions} instructions: {self.expressed} expressed, {self.listed_instructions} listed, "
                f"{self.dropped} dropped")


def adopt(path: Path, output: Path | None = None, context: Path | None = None) -> Adopted:
    """``output``: where the manifest will be written (default: next to the Dockerfile); a uv project's
    directory is named relative to it. ``context``: the build context (default: the Dockerfile's directory),
    where a requirements file the Dockerfile COPYs in is read."""
    instructions = df.read(path)
    stages = df.stages(instructions)
    chain = _chain(stages, stages[-1])
    output = output or path.with_name(path.name + ".yaml")
    walk = _Walk(Adopted({}, instructions=len(instructions)))
    walk.ctx.project_base = (path.resolve().parent, output.resolve().parent)
    walk.ctx.context = Path(context) if context is not None else path.resolve().parent
    stage = -1
    for ins in instructions:
        if ins.cmd == "FROM":
            stage += 1
            walk.used_args.update(df.substitute(" ".join(ins.value), walk.args)[1])
        if stage >= 0 and stage not in chain:
            what = "a stage" if ins.cmd == "FROM" else f"in stage {stages[stage].name or stage},"
            walk.out.listed.append(f"line {ins.line}: {ins.first_line[:80]}: {what} which the final image does not "
                                   "build from")
        else:
            walk.take(ins)
    out = walk.out
    _account_args(out, instructions, chain, walk.args, walk.used_args, walk.gates)
    _name_steps(walk.steps)
    out.manifest = _loadable(output, path, stages[-1], walk, out)
    out.step_lines = {s["name"]: walk.lines[id(s)] for s in walk.steps if id(s) in walk.lines}
    out.notes = [f"ARG {n}={walk.args[n]!r} (line {walk.arg_lines[n]}) is filled in where the file reads it"
                 for n in sorted(walk.used_args) if walk.args.get(n) is not None and n in walk.arg_lines]
    return out


@dataclass
class _Walk:
    """What the walk over the final image's instructions gathers, in file order."""

    out: Adopted
    gates: Gates = field(default_factory=Gates)
    steps: list[dict] = field(default_factory=list)
    todos: list[Todo] = field(default_factory=list)
    args: dict[str, str | None] = field(default_factory=dict)
    used_args: set[str] = field(default_factory=set)
    arg_lines: dict[str, int] = field(default_factory=dict)
    lines: dict[int, int] = field(default_factory=dict)  # id(step) -> its Dockerfile line
    venv: str | None = None
    ctx: Context = field(default_factory=Context)
    env_set: dict[str, int] = field(default_factory=dict)  # variable -> the ENV line that set it

    def take(self, ins: df.Instruction) -> None:
        out = self.out
        if ins.cmd == "FROM":
            out.expressed_lines.add(ins.line)
        elif ins.cmd == "ARG":
            for name, default in df.arg_values(ins).items():  # accounted for at the end: read by an entry or not
                self.args[name] = default if default is not None else self.args.get(name)
                self.arg_lines[name] = ins.line
        elif ins.cmd == "RUN":
            self.run(ins)
        elif ins.cmd in ("COPY", "ADD") and re.search(r"\bwheel\[?s\]?/", ins.original) and \
                "/tmp/wheels" in ins.original:
            out.expressed_lines.add(ins.line)  # local wheels are bind-mounted from wheels/ by pinwheel
        elif ins.cmd == "ENV":
            self.env(ins)
        else:
            if ins.cmd == "WORKDIR" and ins.value:
                self.ctx.workdir = under(self.ctx.workdir, df.substitute(ins.value[0], self.args)[0])
            elif ins.cmd in ("COPY", "ADD") and not any(f.startswith("--from") for f in ins.flags):
                self.copy(ins)
            out.listed.append(f"line {ins.line}: {ins.first_line[:100]}: no step kind expresses {ins.cmd}")

    def copy(self, ins: df.Instruction) -> None:
        """Where files of the build context land: a run step cannot read them; a uv project is one."""
        words = [df.substitute(w, self.args)[0] for w in ins.value]
        if len(words) < 2:
            return
        dest = under(self.ctx.workdir, words[-1])
        self.ctx.copies.append((tuple(words[:-1]), dest))
        into = words[-1].endswith("/") or len(words) > 2
        for source in words[:-1]:
            if source in (".", "./") or source.endswith("/"):  # a directory: everything under dest
                self.ctx.copied.append(dest.rstrip("/") + "/")
            elif into:
                self.ctx.copied.append(f"{dest.rstrip('/')}/{source.rsplit('/', 1)[-1]}")
            else:
                self.ctx.copied.append(dest)

    def env(self, ins: df.Instruction) -> None:
        """ENV as an env step: ARG defaults filled in; a variable set twice, or one no env step sets, listed."""
        pairs, problems = [], []
        for name, value in zip(ins.value[::2], ins.value[1::2]):
            filled, used = df.substitute(df._unquote(value), self.args)
            self.used_args.update(used)
            if not kind_adopting(ADOPT_ENV).settable(name):
                problems.append(f"{name}: not a variable an env step sets")
            elif name in self.env_set:
                problems.append(f"{name} is set again (first on line {self.env_set[name]}): an env step sets a "
                                "variable once; fold the two values into the first")
            else:
                self.env_set[name] = ins.line
                pairs.append((name, filled))
        if pairs:
            entry = kind_adopting(ADOPT_ENV).adopted_entry(pairs, WHY)
            self.steps.append(entry)
            self.lines[id(entry)] = ins.line
            self.out.expressed_lines.add(ins.line)
        self.out.listed += [f"line {ins.line}: ENV {p}" for p in problems]

    def run(self, ins: df.Instruction) -> None:
        venv = _VENV.search(ins.script)
        self.out.expressed_lines.add(ins.line)
        if venv:
            self.venv = venv["path"]  # pinwheel makes the venv itself
            return
        self.used_args.update(df.substitute(ins.script, self.args)[1])
        result = adopt_run(ins, self.args, self.gates, self.ctx)
        self.used_args |= result.reads
        self.steps.extend(result.entries)
        self.lines.update({id(e): ins.line for e in result.entries})
        self.todos.extend(result.todos)
        _attach_verifies(self.out, self.steps, [(ins.line, v) for v in result.verifies],
                         own=result.entries, own_incomplete=bool(result.listed))
        self.out.listed += [f"line {ins.line}: {item}" for item in result.listed]


def _loadable(output: Path, path: Path, final, walk: "_Walk", out: Adopted) -> dict:
    """The manifest, less each step the loader refuses: that step is listed with its line and the reason."""
    from ..manifest import ManifestError, parse  # the loader imports the step kinds: only an import pays

    steps, lines = walk.steps, walk.lines
    # each refusal takes one step or one package out, so this many tries always end
    for _ in range(len(steps) + sum(len(st.get("packages", ())) for st in steps) + 1):
        if not steps:
            raise df.DockerfileError(f"{path}: no instruction becomes a manifest step ({len(out.listed)} listed: "
                                     f"{'; '.join(out.listed)[:200]})")
        manifest = _manifest(path, final, steps, walk.gates, walk.venv or walk.ctx.venv, walk.todos, out,
                             walk.ctx.indexes)
        try:
            parse(yaml.safe_dump(manifest, sort_keys=False), output)
            return manifest
        except ManifestError as exc:
            found = re.match(r"steps\[(\d+)\](?:\.packages\[(\d+)\])?", exc.key or "")
            if not found:
                raise
            bad = manifest["steps"][int(found.group(1))]
            if found.group(2) is not None and "twice" in exc.message and len(bad["packages"]) > 1:
                # a package an earlier wheel set already installs: only that entry goes (pip keeps the first)
                left = _drop_package(walk, bad, int(found.group(2)))
                out.listed.append(f"line {lines.get(id(bad), 0)}: {bad['kind']} step {bad['name']}: "
                                  f"{left['requirement']} left out: {exc.message}")
                continue
            steps.remove(bad)
            out.listed.append(f"line {lines.get(id(bad), 0)}: {bad['kind']} step {bad['name']}: not expressed: "
                              f"{exc.message}")
    return manifest


def _drop_package(walk: "_Walk", step: dict, index: int) -> dict:
    """Take package ``index`` out of ``step``; the TODOs that point into the step's packages follow."""
    left = step["packages"].pop(index)
    kept = []
    for todo in walk.todos:
        found = re.match(r"packages\[(\d+)\](.*)", todo.key) if todo.step is step else None
        if found and int(found.group(1)) == index:
            continue
        if found and int(found.group(1)) > index:
            todo.key = f"packages[{int(found.group(1)) - 1}]{found.group(2)}"
        kept.append(todo)
    walk.todos[:] = kept
    return left


def _chain(stages: list[df.Stage], final: df.Stage) -> set[int]:
    """The final stage and the stages it is built FROM, by index."""
    by_name = {s.name: s for s in stages if s.name}
    chain, stage = set(), final
    while stage is not None and stage.index not in chain:
        chain.add(stage.index)
        stage = by_name.get(stage.base.lower())
    return chain


def _account_args(out: Adopted, instructions, chain, args, used_args: set[str], gates: Gates) -> None:
    gate_args = {re.sub(r"_OFF$", "", g) for g in gates.declared}
    stage = -1
    for ins in instructions:
        if ins.cmd == "FROM":
            stage += 1
        if ins.cmd != "ARG" or (stage >= 0 and stage not in chain):
            continue
        names = list(df.arg_values(ins))
        unread = [n for n in names if n not in used_args and n not in gate_args and n != "TARGETARCH"]
        if unread:
            out.listed.append(f"line {ins.line}: ARG {', '.join(unread)}: no entry reads it")
        else:
            out.expressed_lines.add(ins.line)


def _name_steps(steps: list[dict]) -> None:
    seen: set[str] = set()
    for i, step in enumerate(steps):
        first = step.get("package") or next((p.get("requirement") or p.get("name") for p in step.get("packages", ())),
                                            "") or ""
        base = _NAME.sub("-", re.split(r"[=<>\[@ ]", first)[0].lower()).strip("-")[:30] or f"step-{i + 1}"
        name = KINDS[step["kind"]].adopted_name(base)
        if step.get("name"):  # the kind's builder named it
            base = name = _NAME.sub("-", step["name"].lower()).strip("-")[:40].strip("-")
        n = 2
        while name in seen:
            name, n = f"{base[:34]}-{n}", n + 1
        seen.add(name)
        step["name"] = name


def _attach_verifies(out: Adopted, steps: list[dict], verifies: list[tuple[int, str]], own: list[dict] = (),
                     own_incomplete: bool = False) -> None:
    """Each `python -c` check goes on the package it checks: one its own RUN installs (the one whose name the
    snippet imports, else the last); in a RUN that installs nothing, the last index or local package before
    it that it imports, else the last one (the build runs every verify after the last step). A check whose
    own RUN installs something import does not express stays with that RUN, listed: on an earlier package it
    would check the wrong thing, or under that package's gate not at all."""
    checked = kind_adopting(ADOPT_PIP_INSTALL).name  # the kind whose packages carry a `verify`

    def packages(entries) -> list[dict]:
        return [p for s in entries if s["kind"] == checked for p in s["packages"] if "verify" not in p]

    for line, snippet in verifies:
        modules = _imported_modules(snippet)
        here = packages(own)
        if modules is None:
            target = None
        elif here or own_incomplete:
            target = _named_in(here, modules) or (here[-1] if here else None)
        else:
            before = packages(steps)
            target = _named_in(before, modules) or (before[-1] if before else None)
        if target is None:
            why = ("its RUN installs what import does not express (listed at this line)" if own_incomplete
                   and modules is not None else "no package to attach it to, or not valid Python")
            out.listed.append(f"line {line}: python -c check: {why}")
            continue
        target["verify"] = {"python": snippet}
        target.setdefault("why", WHY)


def _imported_modules(snippet: str) -> set[str] | None:
    """The top-level modules a snippet imports, or None where it is not valid Python."""
    try:
        tree = ast.parse(snippet, "verify")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def _named_in(packages: list[dict], modules: set[str]) -> dict | None:
    """The package a snippet's imports name: its distribution name, as a module name, equal to one (flash_attn),
    else ending in one (apache_tvm_ffi: tvm_ffi), else starting with one (mooncake_transfer_engine: mooncake);
    the last such package of the best kind of match, or None."""
    wanted = {m.lower() for m in modules}

    def match(p: dict) -> int:
        name = re.split(r"[\[=<>!~;@ ]", p["requirement"], maxsplit=1)[0].lower().replace("-", "_")
        return max((3 if name == m else 2 if name.endswith("_" + m) else 1 if name.startswith(m + "_") else 0)
                   for m in wanted) if wanted else 0

    scored = [(match(p), i) for i, p in enumerate(packages)]
    best = max(scored, default=(0, -1))
    return packages[best[1]] if best[0] else None


def _manifest(path: Path, final: df.Stage, steps, gates: Gates, venv, todos, out: Adopted, indexes: dict) -> dict:
    base = final.image
    cuda, python, variant_todos = _target(base, steps, gates)
    name = _image_name(path, final)
    variant: dict = {"cuda": cuda, "torch": _torch(steps), "python": python,
                     "platform": "manylinux_2_28_x86_64", "base": base if "$" not in base else "TODO/base:todo",
                     "tag": "main-{date}"}
    if venv is None:
        variant["environment"] = "base"  # the file installs into the base's own python
    manifest: dict = {"manifest_version": 1,
                      "image": {"name": name, "repository": f"todo/{name}", **({"venv": venv} if venv else {})}}
    guarding = {s.get("gate") for s in steps if s.get("packages", True)}
    if guarding & set(gates.declared):  # a gate is declared only where it guards a step
        manifest["gates"] = {g: {"when": v["when"], "why": v["why"]} for g, v in gates.declared.items()
                             if g in guarding}
    used = {p.get("index") for s in steps for p in s.get("packages", ()) if isinstance(p, dict)}
    if used & set(indexes):
        manifest["indexes"] = {n: i for n, i in indexes.items() if n in used}
    manifest["variants"] = {"main": variant}
    manifest["steps"] = [s for s in steps if s.get("packages", True)]
    if variant["torch"] == "0":
        variant_todos.append(("torch", "the file pins no torch (the base's own, if any): write its version"))
    if "$" in base:
        variant_todos.append(("base", f"the base {base} names an ARG with no default"))
    out.manifest, out.todos, out.variant_todos = manifest, todos, variant_todos
    out.refresh_todo()
    return manifest


_GENERIC_STAGES = {"final", "runtime", "base", "build", "builder", "main", "image", "release", "prod", "production"}


def _image_name(path: Path, final: df.Stage) -> str:
    """The image's name: from the file's name (Dockerfile.uv.cu130, trainer.Dockerfile), else the final stage's
    name where it says more than "final", else the directory's."""
    from_file = path.name.removesuffix(".Dockerfile").removeprefix("Dockerfile").strip(".")
    stage = final.name if final.name and final.name not in _GENERIC_STAGES else ""
    for candidate in (from_file if from_file.lower() != "dockerfile" else "", stage, path.resolve().parent.name):
        name = _NAME.sub("-", candidate.lower()).strip("-")[:40].strip("-")
        if name and name[0].isalnum():
            return name
    return "image"


def _target(base: str, steps: list[dict], gates: Gates) -> tuple[str, str, list[tuple[str, str]]]:
    """cuda and python from the base's tag and the wheels' tags; where neither says, a guess with a TODO."""
    names = " ".join(str(p.get("local", {}).get("glob", "")) + " " + str(s.get("url", ""))
                     for s in steps for p in s.get("packages", [s]) if isinstance(p, dict))
    todos: list[tuple[str, str]] = []
    tag = base.split(":", 1)[1] if ":" in base else ""
    from_tag = _CUDA_TAG.search(tag)
    cu = _CU.search(names)
    on = sorted(int(g["when"].split(">=")[1]) for g in gates.declared.values() if g["when"].startswith("cuda >="))
    if from_tag:
        cuda = from_tag["v"]
    elif cu:
        cuda = f"{cu['major']}.{cu['minor']}"
    elif on:
        cuda = f"{on[-1]}.0"
        todos.append(("cuda", f"{cuda} is a guess: the file's default build turns on its CUDA {on[-1]} switch; "
                              f"the base {base} does not say"))
    else:
        cuda = "0.0"
        todos.append(("cuda", f"neither the base {base} nor a wheel's tag names the CUDA version"))
    official = base.split(":", 1)[0].rsplit("/", 1)[-1] == "python"  # python:3.11-slim and its kin
    cp = _CP.search(names) or re.search(r"(?:py|python)3\.?(?P<minor>\d{1,2})\b", tag) or \
        (re.match(r"3\.(?P<minor>\d{1,2})\b", tag) if official else None)
    python = f"3.{cp['minor']}" if cp else "3.12"
    if not cp:
        todos.append(("python", f"no wheel's tag names the python; 3.12 is a placeholder (check the base {base})"))
    todos.append(("platform", "the base's glibc and architecture decide the wheel platform"))
    return cuda, python, todos


def _torch(steps: list[dict]) -> str:
    for s in steps:
        for p in s.get("packages", ()):
            req = p.get("requirement", "") if isinstance(p, dict) else ""
            if req.startswith("torch=="):
                return req.split("==", 1)[1]
    return "0"


def to_yaml(adopted: Adopted, source: Path, command: str = "pinwheel import") -> str:
    """The manifest, written by the YAML emitter: every Dockerfile string is a quoted scalar, never YAML.
    ``command``: how the user started it (`pinwheel import`, `build.py import`, `pinwheel init --from`)."""
    prog = command.split()[0]
    head = [f"Started by `{command} {source.name}`. Fill in every TODO (each why, the todo: list),",
            f"then `{prog} report` and `{prog} lock`.", adopted.accounting]
    head += adopted.notes
    if adopted.listed:
        head.append("Not expressed (do these by hand, or in a later step kind):")
        head += [f"  {item}" for item in adopted.listed]
    comment = "".join(f"# {_one_line(line)}\n" for line in head)
    body = yaml.safe_dump(adopted.manifest, sort_keys=False, width=100, allow_unicode=False)
    return comment + body


def _one_line(text: str) -> str:
    """A comment line: no line breaks or control characters can end the comment."""
    return re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", " ", text)[:300]
