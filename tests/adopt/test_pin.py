"""`import --pin` against real servers on loopback: a local index, a git daemon and an HTTP server."""
from __future__ import annotations

import hashlib

import pytest
import yaml

from pinwheel import cli, manifest as manifest_mod

from tests.support.file_server import serve_files
from tests.support.git_daemon import free_port, git, serve_git


@pytest.fixture
def git_daemon(tmp_path):
    """Two repositories served by `git daemon` on 127.0.0.1: tools (branch main) and kernels (annotated tag v1)."""
    root = tmp_path / "git"
    root.mkdir()
    commits = {}
    for name, ref in (("tools", "main"), ("kernels", "v1")):
        work = tmp_path / f"work-{name}"
        work.mkdir()
        git(work, "init", "-q", "-b", "main")
        (work / "README").write_text(name)
        git(work, "add", "README")
        git(work, "commit", "-q", "-m", "one")
        if ref == "v1":
            git(work, "tag", "-a", "v1", "-m", "v1")
        commits[name] = git(work, "rev-parse", "HEAD")
        git(tmp_path, "clone", "-q", "--bare", str(work), str(root / f"{name}.git"))
    with serve_git(root) as url:
        yield url, commits


@pytest.fixture
def http_files(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    with serve_files(served) as url:
        yield served, url


def test_pin_fills_what_the_servers_answer_and_leaves_the_rest_todo(tmp_path, local_index, git_daemon, http_files,
                                                                    monkeypatch, capsys):
    for version in ("1.0", "2.5", "3.0", "2.9rc1"):
        local_index.add("lib-a", version)
    local_index.add("lib-b", "0.3")
    index = local_index.serve()
    git_url, commits = git_daemon
    served, http_url = http_files
    wheel = b"not really a wheel, but bytes with a digest"
    (served / "kern-1.0.0-py3-none-any.whl").write_bytes(wheel)
    dead = f"git://127.0.0.1:{free_port()}/gone.git"
    src = tmp_path / "Dockerfile"
    src.write_text(f"""FROM example.invalid/base:1
RUN pip install "lib-a>=1.0,<3" lib-b
RUN pip install git+{git_url}/tools.git@main
RUN pip install git+{git_url}/kernels.git@v1
RUN wget {http_url}/kern-1.0.0-py3-none-any.whl && pip install kern-1.0.0-py3-none-any.whl
RUN pip install git+{dead}@main
""")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "wheels_manifest.yaml"
    assert cli.main(["import", str(src), "-o", str(out), "--pin", "--index-url", index]) == 0
    captured = capsys.readouterr()
    data = yaml.safe_load(out.read_text())
    steps = {s["name"]: s for s in data["steps"]}
    reqs = [p["requirement"] for p in steps["lib-a"]["packages"]]
    assert reqs == ["lib-a==2.5", "lib-b==0.3"]  # newest in range, no pre-release
    assert "pinned by import on" in steps["lib-a"]["packages"][0]["why"]
    assert steps["tools"]["rev"] == commits["tools"]
    assert steps["kernels"]["rev"] == commits["kernels"]  # the annotated tag's commit, not the tag object
    asset = next(s for s in data["steps"] if s["kind"] == "asset")
    assert asset["url"]["sha256"] == hashlib.sha256(wheel).hexdigest()
    todo = [t["at"] + ": " + t["what"] for t in data["todo"]]
    gone = [i for i, s in enumerate(data["steps"]) if s.get("url") == dead][0]
    assert any(t.startswith(f"steps[{gone}].rev") for t in todo)  # unreachable: still TODO
    assert not any(".rev" in t and not t.startswith(f"steps[{gone}]") for t in todo)
    assert "still TODO" in captured.err and "gone.git" in captured.err
    manifest_mod.load(out)  # and it loads


def test_pin_fills_the_sha256_of_a_run_download_and_an_apt_deb(tmp_path, http_files):
    from pinwheel.adopt import adopt
    from pinwheel.adopt.pin import pin

    served, http_url = http_files
    (served / "tool.tar.gz").write_bytes(b"tool bytes")
    (served / "prof_1.0-1_amd64.deb").write_bytes(b"deb bytes")
    (tmp_path / "Dockerfile").write_text(
        "FROM example.invalid/base:1\n"
        f"RUN wget -O /tmp/tool.tar.gz {http_url}/tool.tar.gz && tar xzf /tmp/tool.tar.gz -C /opt\n"
        f"RUN wget {http_url}/prof_1.0-1_amd64.deb && apt-get install -y ./prof_1.0-1_amd64.deb\n")
    adopted = adopt(tmp_path / "Dockerfile")
    run, deb = (next(s for s in adopted.manifest["steps"] if k in s) for k in ("downloads", "debs"))
    assert run["downloads"][0]["sha256"] == deb["debs"][0]["sha256"] == "0" * 64
    result = pin(adopted, None, tmp_path / "cache", only=("asset",))
    assert run["downloads"][0]["sha256"] == hashlib.sha256(b"tool bytes").hexdigest()
    assert deb["debs"][0]["sha256"] == hashlib.sha256(b"deb bytes").hexdigest()
    assert len(result.done) == 2 and not any("sha256" in t["at"] for t in adopted.manifest.get("todo", []))
