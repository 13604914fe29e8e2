"""`audit --replay` on the corpus and on files with known hazards, against a local index on loopback."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pinwheel import cli
from pinwheel.distributions import Distribution, Inventory

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).parent / "corpus"


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.Dockerfile")), ids=lambda p: p.name)
def test_replay_runs_on_every_file_import_accepts(path, tmp_path, local_index):
    local_index.add("numpy", "2.1.0")
    url = local_index.serve()
    shutil.copy(path, tmp_path / path.name)
    cmd = [sys.executable, str(ROOT / "build.py"), "audit", path.name, "--replay", "--index-url", url]
    proc = subprocess.run([*cmd, "--json"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    data = json.loads(proc.stdout)  # exactly one JSON document
    assert data["schema"] == "pinwheel.audit/1" and "findings" in data and data["replay"] is not None
    assert "Traceback" not in proc.stderr
    text = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert "pip installs in" in text.stdout and "Replayed as plain pip would run it" in text.stdout  # both views


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    return path


def test_a_no_deps_install_outside_a_declared_pin_is_named(tmp_path, local_index, capsys):
    local_index.add("nccl", "2.27.3")
    local_index.add("nccl", "2.29.7")
    local_index.add("torch", "2.13.0", requires=["nccl==2.27.3"])
    url = local_index.serve()
    path = write(tmp_path, "FROM example.invalid/base:1\nRUN pip install torch==2.13.0\n"
                           "RUN pip install --no-deps --upgrade \"nccl>=2.29.7,<3.0\"\n")
    rc = cli.main(["audit", str(path), "--replay", "--json", "--index-url", url])
    replay = json.loads(capsys.readouterr().out)["replay"]
    (override,) = replay["overrides"]
    assert (override["package"], override["version"], override["line"], override["required_by"],
            override["specifier"]) == ("nccl", "2.29.7", 3, "torch 2.13.0", "nccl==2.27.3")
    assert any("2.29.7" in n and "as pip would take it today" in n for n in replay["notes"])
    assert rc == 1  # a hazard: nccl moves 2.27.3 -> 2.29.7 under torch
    (hazard,) = replay["hazards"]
    assert (hazard["package"], hazard["before"], hazard["after"], hazard["dockerfile_line"]) == \
        ("nccl", "2.27.3", "2.29.7", 3)


def test_base_inventory_judges_against_the_base(tmp_path, local_index, capsys):
    local_index.add("torch", "2.13.0")
    url = local_index.serve()
    dist = Distribution("torch", "2.12.0", (), (), "pip", None, ("torch",), 1, "/usr/lib/python3/dist-packages", 0)
    inventory = tmp_path / "base.json"
    inventory.write_text(json.dumps(Inventory("example.invalid/base:1", "sha256:" + "1" * 64, None, (dist,), 1)
                                    .to_json()))
    path = write(tmp_path, "FROM example.invalid/base:1\nRUN pip install torch==2.13.0\n")
    cli.main(["audit", str(path), "--replay", "--json", "--index-url", url, "--base", str(inventory)])
    replay = json.loads(capsys.readouterr().out)["replay"]
    changes = replay["hazards"] + replay["replacements"]
    assert [(c["package"], c["before"], c["after"], c["earlier_step"], c["dockerfile_line"]) for c in changes] == \
        [("torch", "2.12.0", "2.13.0", "base", 2)]
    cli.main(["audit", str(path), "--replay", "--json", "--index-url", url])  # without it, no base to replace
    replay = json.loads(capsys.readouterr().out)["replay"]
    assert replay["hazards"] + replay["replacements"] == []


def test_a_missing_base_is_a_clear_error(tmp_path):
    path = write(tmp_path, "FROM example.invalid/base:1\nRUN pip install torch==2.13.0\n")
    (tmp_path / "bad.json").write_text("{}")
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "audit", str(path), "--replay", "--offline",
                           "--base", str(tmp_path / "bad.json")], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and "inventory" in proc.stderr and "Traceback" not in proc.stderr


def test_the_override_import_proposes_does_not_excuse_the_move(tmp_path, local_index, capsys):
    """import marks a replaced nvidia-nccl pin `override: true` for a person to confirm; the file declares no
    override, so replay still reports the move as a hazard."""
    from pinwheel.adopt import adopt

    local_index.add("nvidia-nccl-cu13", "2.27.3")
    local_index.add("nvidia-nccl-cu13", "2.29.7")
    local_index.add("trainer", "1.0", requires=["nvidia-nccl-cu13==2.27.3"])
    url = local_index.serve()
    path = write(tmp_path, "FROM example.invalid/base:1\nRUN pip install trainer==1.0\n"
                           "RUN pip install --no-deps --upgrade \"nvidia-nccl-cu13>=2.29.7,<3.0\"\n")
    (nccl,) = [p for s in adopt(path).manifest["steps"] for p in s.get("packages", ())
               if p["requirement"].startswith("nvidia-nccl-cu13")]
    assert nccl["override"] is True
    cli.main(["audit", str(path), "--replay", "--json", "--index-url", url])
    replay = json.loads(capsys.readouterr().out)["replay"]
    assert [(h["package"], h["before"], h["after"], h["dockerfile_line"]) for h in replay["hazards"]] == \
        [("nvidia-nccl-cu13", "2.27.3", "2.29.7", 3)]
    assert replay["replacements"] == []


def test_the_replay_record_is_a_side_of_diff_against_another(tmp_path, local_index, capsys):
    """`audit --replay --json` records the set a file's installs leave; `diff` takes two such records (or one and
    a lock, or an image), and a file that is no such record is one line and exit 2."""
    local_index.add("six", "1.16.0")
    local_index.add("six", "1.17.0")
    local_index.add("idna", "3.10")
    url = local_index.serve()
    records = []
    for name, text in (("old", "RUN pip install six==1.16.0\n"), ("new", "RUN pip install six==1.17.0 idna\n")):
        path = write(tmp_path, "FROM example.invalid/base:1\n" + text)
        cli.main(["audit", str(path), "--replay", "--json", "--index-url", url])
        record = tmp_path / f"{name}.json"
        record.write_text(capsys.readouterr().out)
        records.append(record)
    assert json.loads(records[0].read_text())["replay"]["installed"] == {"six": "1.16.0"}
    assert cli.main(["diff", str(records[0]), str(records[1]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(c["name"], c["change"], c["a"], c["b"]) for c in data["changes"]] == [
        ("idna", "added", None, "3.10"), ("six", "changed", "1.16.0", "1.17.0")]
    assert data["a"].startswith("replay of ") and data["a"].endswith("Dockerfile")
    bad = tmp_path / "bad.json"
    for text in ("{not json", json.dumps({"schema": "pinwheel.audit/1", "replay": {"installed": {"six": 1}}})):
        bad.write_text(text)
        proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "diff", str(records[0]), str(bad)],
                              capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "bad.json" in proc.stderr, proc.stderr


def test_a_requirements_file_the_file_copies_in_is_replayed_on_the_bases_python_keeping_what_it_holds(
        tmp_path, local_index, capsys):
    """miles' shape: `COPY requirements.txt /tmp/…` then `pip install -r /tmp/…` on a base whose Python is not the
    one import guesses. The file's lines are installed in its place (read from --context), a package an earlier
    RUN already installs is left out of the later set alone, and an unpinned one the base holds stays at the
    base's version, as pip keeps it."""
    local_index.add("six", "1.16.0")
    local_index.add("six", "1.17.0")
    local_index.add("idna", "3.9")
    local_index.add("idna", "3.10")
    local_index.add("einops", "0.8.2")
    url = local_index.serve()
    context = tmp_path / "ctx"
    (context / "docker").mkdir(parents=True)
    (context / "requirements.txt").write_text("# pins\nsix\nidna>=3.9  # newest\neinops\n--prefer-binary\n")
    dockerfile = context / "docker" / "Dockerfile"
    dockerfile.write_text("FROM example.invalid/sglang:1\nRUN pip install einops==0.8.2\n"
                          "COPY requirements.txt /tmp/requirements.txt\nRUN pip install -r /tmp/requirements.txt\n")
    site = "/usr/local/lib/python3.10/dist-packages"
    dists = tuple(Distribution(n, v, (), (), "pip", None, (n,), 1, site, 0) for n, v in (("six", "1.16.0"),))
    inventory = tmp_path / "base.json"
    inventory.write_text(json.dumps(Inventory("example.invalid/sglang:1", "sha256:" + "2" * 64, None, dists, 1)
                                    .to_json()))
    cli.main(["audit", str(dockerfile), "--replay", "--json", "--index-url", url, "--base", str(inventory),
              "--context", str(context)])
    data = json.loads(capsys.readouterr().out)
    replay = data["replay"]
    assert replay.get("error") is None, replay
    assert replay["installed"] == {"einops": "0.8.2", "idna": "3.10", "six": "1.16.0"}
    assert any("the base's Python is 3.10" in n for n in replay["notes"]), replay["notes"]
    listed = " ".join(replay["not_expressed"])
    assert "einops" in listed and "left out" in listed and "--prefer-binary" in listed
    # without the context, the file is named as unread, never silently dropped
    cli.main(["audit", str(dockerfile), "--replay", "--json", "--index-url", url, "--base", str(inventory)])
    replay = json.loads(capsys.readouterr().out)["replay"]
    assert "idna" not in replay["installed"]
    assert any("-r /tmp/requirements.txt" in n and "not in the build context given" in n
               for n in replay["not_expressed"]), replay["not_expressed"]
