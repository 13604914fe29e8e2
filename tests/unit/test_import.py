"""`import`: a starting manifest from a hand-written Dockerfile that loads, plans and renders."""
from __future__ import annotations

from pathlib import Path

from pinwheel import cli, manifest
from pinwheel.plan import plan_variant

ROOT = Path(__file__).resolve().parents[2]


def test_the_seed_style_file_imports_into_a_manifest_that_loads_and_renders(tmp_path, capsys):
    out = tmp_path / "wheels_manifest.yaml"
    assert cli.main(["import", str(ROOT / "bench" / "seed.Dockerfile"), "-o", str(out)]) == 0
    text = out.read_text()
    assert text.count("TODO: why") >= 7  # every why is left to a person
    m = manifest.load(out)
    plan = plan_variant(m, "main")
    pins = {p.name: p.version for p in plan.packages() if not p.local}
    assert pins == {"torch": "2.13.0", "flashinfer-python": "0.6.15.post1", "nvidia-cutlass-dsl": "4.6.2",
                    "apache-tvm-ffi": "0.1.11", "torch-c-dlpack-ext": "0.1.5", "cuda-python": "13.4.4",
                    "nvidia-cudnn-frontend": "1.26.0"}
    by_name = {p.name: p for p in plan.packages()}
    assert by_name["nvidia-cudnn-frontend"].no_deps is True
    assert by_name["flash-mla"].local.if_missing == "fallback"
    assert by_name["flash-mla"].fallback.name == "sgl-flash-mla" and by_name["flash-mla"].fallback.no_deps
    assert by_name["fast-hadamard-transform"].local.if_missing == "skip"
    assert "ENABLE_CUDA_13" in m.gates
    assert [s.name for s in plan.steps if s.gate == "ENABLE_CUDA_13"] == ["nvidia-cudnn-frontend"]
    assert plan.steps[0].kind == "env"  # its ENV is an env step, first as in the file
    assert cli.main(["--manifest", str(out), "render"]) == 0
    assert (tmp_path / "images" / "seed" / "Dockerfile").exists()  # named after the file


def test_what_cannot_be_expressed_is_listed_not_dropped(tmp_path, capsys):
    src = tmp_path / "Dockerfile"
    src.write_text("FROM debian:bookworm\nRUN apt-get update && apt-get install -y git\n"
                   "RUN pip install torch\nRUN pip install numpy==2.1.0\nUSER nobody\n")
    out = tmp_path / "m.yaml"
    assert cli.main(["import", str(src), "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "line 5: USER nobody" in captured.err
    assert "5 instructions: 4 expressed, 1 listed, 0 dropped" in captured.out
    text = out.read_text()
    assert "#   line 5: USER nobody" in text and "# 5 instructions: 4 expressed, 1 listed, 0 dropped" in text
    m = manifest.load(out)
    assert [s.kind for s in m.steps] == ["apt", "wheels", "wheels"]
    assert any(t.startswith("steps[1].packages[0].requirement: `torch` is unpinned") for t in m.todos)
    assert cli.main(["import", str(src), "-o", str(out)]) == 2  # never overwrites without --force
