"""publish without an engine: the declared levels, the gate, allowances, and what reaches the engine.

The engine is faked behind its adapter; tests/pipeline/test_publish.py runs the
same paths on the real engine and registry.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from pinwheel.image.engine import PushEvent, PushedLayer, PushResult
from pinwheel.image.publish import publish
from pinwheel.image.push_progress import PushPrinter, summary
from pinwheel.image.smoke_gate import LEVELS, DeclaredSmoke, PublishRefused, declared_smoke, gate, parse_allowances
from pinwheel.image.smoke import SmokeResult, record

ROOT = Path(__file__).resolve().parents[2]
ALL = DeclaredSmoke(LEVELS, "test: every level")
IMAGE = "sha256:" + "ab" * 32


def smoke_doc(ok: bool = True, **levels: str) -> dict:
    reasons = {lv: {"status": st, **({"reason": "no usable NVIDIA driver: nvidia-smi not found"} if st == "skipped" else {})}
               for lv, st in levels.items()}
    return {"image_id": IMAGE, "ok": ok, "levels": dict(levels),
            "document": {"requested": list(levels)[-1] if levels else "static", "levels": reasons}}




def no_gpu() -> dict:
    return smoke_doc(True, static="passed", **{"import": "skipped"}, gpu="skipped")


# ------------------------------------------------------------------ declared levels


def test_the_shipped_image_declares_every_level_gpu_included():
    declared = declared_smoke(ROOT / "images" / "train" / "Dockerfile", ROOT)
    assert declared.levels == ("static", "import", "gpu")
    assert declared.source == "declared by images/train/Dockerfile, target smoke: smoke_payload.pyz --level gpu --require gpu"


@pytest.mark.parametrize("cmd, levels", [
    ('CMD ["python", "/opt/pinwheel/smoke_payload.pyz", "--expect", "e.json", "--level", "import"]', ("static", "import")),
    ('CMD ["python", "/opt/pinwheel/smoke_payload.pyz", "--level=static"]', ("static",)),
    ('CMD ["python", "/opt/pinwheel/smoke_payload.pyz", "--level", "static", "--require", "gpu"]', LEVELS),
    ('CMD python /opt/pinwheel/smoke_payload.pyz \\\n    --level import', ("static", "import")),
    ('CMD ["python", "/opt/pinwheel/smoke_payload.pyz"]', ("static",)),  # the payload's default level
])
def test_declared_levels_come_from_the_smoke_targets_command(tmp_path: Path, cmd: str, levels: tuple):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(f"FROM base AS image\nCMD [\"python\", \"/opt/pinwheel/smoke_payload.pyz\", \"--level\", \"gpu\"]\n"
                          f"# the smoke\nFROM image AS smoke\n{cmd}\n")
    assert declared_smoke(dockerfile, tmp_path).levels == levels


@pytest.mark.parametrize("text", [
    "FROM base AS image\nRUN true\n",  # no smoke target
    "FROM base AS image\nFROM image AS smoke\nCMD [\"python\", \"-c\", \"print(1)\"]\n",  # not the payload
    "FROM image AS smoke\nCMD [\"python\", \"smoke_payload.pyz\", \"--level\", \"everything\"]\n",  # unknown level
])
def test_nothing_declared_means_every_level(tmp_path: Path, text: str):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(text)
    declared = declared_smoke(dockerfile, tmp_path)
    assert declared.levels == LEVELS and "every level is required" in declared.source
    assert declared_smoke(tmp_path / "missing", tmp_path).levels == LEVELS


# ------------------------------------------------------------------ the gate


def test_a_skipped_gpu_level_is_refused_by_default_naming_the_levels():
    with pytest.raises(PublishRefused) as exc:
        gate(no_gpu(), IMAGE, ALL)
    message = str(exc.value)
    assert "import: SKIPPED" in message and "gpu: SKIPPED" in message
    assert "no usable NVIDIA driver" in message
    assert "--allow-skipped import --allow-skipped gpu --reason" in message


def test_skipped_is_never_passed_even_where_only_static_is_declared_and_gpu_required():
    static_only = DeclaredSmoke(("static",), "test")
    assert gate(no_gpu(), IMAGE, static_only) == ({}, ())
    with pytest.raises(PublishRefused, match=r"gpu: SKIPPED.*--require-gpu"):
        gate(no_gpu(), IMAGE, static_only, require_gpu=True)


def test_a_level_that_did_not_run_is_not_passed():
    static_run = smoke_doc(True, static="passed")
    with pytest.raises(PublishRefused, match=r"import: NOT-RUN \(the smoke ran with --level static\); gpu: NOT-RUN"):
        gate(static_run, IMAGE, ALL)


def test_every_level_passed_needs_no_labels():
    assert gate(smoke_doc(True, static="passed", **{"import": "passed"}, gpu="passed"), IMAGE, ALL) == ({}, ())


def test_a_failed_smoke_is_refused_even_with_every_allowance():
    failed = smoke_doc(False, static="passed", **{"import": "failed"}, gpu="skipped")
    with pytest.raises(PublishRefused, match=r"failed \(import: failed\)"):
        gate(failed, IMAGE, ALL, {"import": "x", "gpu": "x"})
    with pytest.raises(PublishRefused, match="no smoke result"):
        gate(None, IMAGE, ALL, {"gpu": "x"})


def test_allowances_become_labels_and_must_cover_every_skipped_level():
    with pytest.raises(PublishRefused) as exc:
        gate(no_gpu(), IMAGE, ALL, {"gpu": "no GPU runner today"})
    assert "import: SKIPPED" in str(exc.value) and "gpu: SKIPPED" not in str(exc.value)

    labels, notes = gate(no_gpu(), IMAGE, ALL, {"import": "no GPU runner today", "gpu": "no GPU runner today"})
    assert labels == {
        "io.pinwheel.smoke.image-id": IMAGE,
        "io.pinwheel.smoke.levels": '{"static":"passed","import":"skipped","gpu":"skipped"}',
        "io.pinwheel.smoke.allowed-skipped": "import,gpu",
        "io.pinwheel.smoke.skip-reason": "no GPU runner today",
        "io.pinwheel.smoke.skip-reason.import": "no GPU runner today",
        "io.pinwheel.smoke.skip-reason.gpu": "no GPU runner today",
    }
    assert notes == ()
    labels, _ = gate(no_gpu(), IMAGE, ALL, {"import": "a", "gpu": "b"})
    assert labels["io.pinwheel.smoke.skip-reason"] == "import: a; gpu: b"


def test_an_allowance_that_is_not_needed_is_a_note():
    passed = smoke_doc(True, static="passed", **{"import": "passed"}, gpu="passed")
    assert gate(passed, IMAGE, ALL, {"gpu": "x"}) == ({}, ("--allow-skipped gpu: not needed, gpu passed",))
    with pytest.raises(ValueError, match="contradict"):
        gate(passed, IMAGE, ALL, {"gpu": "x"}, require_gpu=True)


# ------------------------------------------------------------------ arguments


def test_parse_allowances():
    assert parse_allowances(["gpu"], "no GPU host") == {"gpu": "no GPU host"}
    assert parse_allowances(["import,gpu"], "  no   GPU\thost ") == {"import": "no GPU host", "gpu": "no GPU host"}
    assert parse_allowances(["import=driverless", "gpu"], "later") == {"import": "driverless", "gpu": "later"}
    assert parse_allowances([], None) == {}


@pytest.mark.parametrize("values, reason, match", [
    (["gpu"], None, r"--allow-skipped gpu needs a reason"),
    (["gpu"], "   ", r"the reason is empty"),
    (["cuda"], "x", r"'cuda' is not a smoke level"),
    ([], "why", r"name them with --allow-skipped"),
    (["gpu=" + "x" * 501], None, r"longer than 500"),
    (["gpu"], "a\x07b", r"control characters"),
])
def test_bad_allowances(values, reason, match):
    with pytest.raises(ValueError, match=match):
        parse_allowances(values, reason)


# ------------------------------------------------------------------ what reaches the engine


class FakeEngine:
    """The adapter's surface that publish uses, recording every call."""

    def __init__(self, image_id: str = IMAGE, layers=("sha256:" + "11" * 32, "sha256:" + "22" * 32)):
        self.images = {"repo:a": image_id, "repo:b": image_id, image_id: image_id}
        self.image_layers = {image_id: tuple(layers)}
        self.calls: list[tuple] = []

    def image_id(self, ref):
        return self.images[ref]

    def layers(self, ref):
        return self.image_layers[self.images[ref]]

    def platform(self, ref):
        return "linux/amd64"

    def labels(self, ref):
        return {}

    def tag(self, src, dst):
        self.calls.append(("tag", src, dst))
        self.images[dst] = self.images[src]

    def remove(self, ref, force=False):
        self.calls.append(("remove", ref))
        return self.images.pop(ref, None) is not None

    def build(self, context, dockerfile, tags=(), labels=None, **kw):
        text = Path(dockerfile).read_text()
        self.calls.append(("build", text, tuple(tags), dict(labels or {}), kw.get("provenance", True)))
        source = text.split()[1]
        derived = "sha256:" + "cd" * 32
        self.image_layers[derived] = self.layers(source)
        for t in tags:
            self.images[t] = derived
        self.images[derived] = derived
        return derived

    def push(self, ref, on_event=None):
        self.calls.append(("push", ref))
        layers = self.layers(ref)
        for d in layers:
            if on_event:
                on_event(PushEvent(d[7:19], "pushed", "Pushed"))
        return PushResult(ref, "sha256:" + "ee" * 32, tuple(PushedLayer(d, "pushed", 10) for d in layers), "registry")


def recorded_smoke(root: Path, **levels: str) -> None:
    ok = "failed" not in levels.values()
    document = {"ok": ok, "levels": {k: {"status": v} for k, v in levels.items()},
                "stages": [{"level": k, "name": "pins", "status": v} for k, v in levels.items()]}
    record(SmokeResult(IMAGE, ok, dict(levels), document, ""), root)


def test_refused_publishes_touch_nothing(tmp_path: Path):
    engine = FakeEngine()
    recorded_smoke(tmp_path, static="passed", **{"import": "skipped"}, gpu="skipped")
    with pytest.raises(PublishRefused):
        publish(engine, ["repo:a", "repo:b"], "reg:5000", tmp_path, declared=ALL)
    recorded_smoke(tmp_path, static="passed", **{"import": "failed"})
    with pytest.raises(PublishRefused):
        publish(engine, ["repo:a"], "reg:5000", tmp_path, declared=ALL, allowed={"import": "x", "gpu": "x"})
    assert engine.calls == []


# What is pushed and tagged once the gate passes (the smoked image by digest, the derived one for an
# allowance, tags pointed at that digest) needs the registry: tests/pipeline/test_publish.py.


def test_a_derived_image_with_other_layers_is_not_pushed(tmp_path: Path):
    engine = FakeEngine()
    real_build = engine.build

    def build(*a, **kw):
        derived = real_build(*a, **kw)
        engine.image_layers[derived] = engine.image_layers[derived] + ("sha256:" + "33" * 32,)
        return derived

    engine.build = build  # type: ignore[method-assign]
    recorded_smoke(tmp_path, static="passed", **{"import": "skipped"}, gpu="skipped")
    with pytest.raises(PublishRefused, match="does not have the layers"):
        publish(engine, ["repo:a"], "reg:5000", tmp_path, declared=ALL, allowed={"import": "x", "gpu": "x"})
    assert not any(c[0] == "push" for c in engine.calls)
    assert "reg:5000/repo:a" not in engine.images


def test_a_derived_image_carries_no_provenance_attestation(tmp_path: Path):
    """Labelling the same image twice must give the same image where the image's id is its index's digest
    (the containerd image store): a provenance attestation holds the build's times."""
    from pinwheel.image.publish import derive

    engine = FakeEngine()
    derive(engine, IMAGE, ["reg:5000/repo:a"], {"io.pinwheel.allowed": "gpu"})
    builds = [c for c in engine.calls if c[0] == "build"]
    assert len(builds) == 1 and builds[0][4] is False, builds


# ------------------------------------------------------------------ showing the push


def printed(live: bool) -> str:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=live, width=120, highlight=False)
    printer = PushPrinter(console, live=live)
    printer.start("reg:5000/repo:a", 3)
    events = [PushEvent("aaaaaaaaaaaa", "preparing", "Preparing"), PushEvent("bbbbbbbbbbbb", "preparing", "Preparing"),
              PushEvent("cccccccccccc", "preparing", "Preparing"), PushEvent("cccccccccccc", "exists", "Layer already exists"),
              PushEvent("aaaaaaaaaaaa", "pushing", "Pushing", 1_000, 3_000_000)]
    events += [PushEvent("aaaaaaaaaaaa", "pushing", "Pushing", n, 3_000_000) for n in range(10_000, 3_000_000, 500_000)]
    events += [PushEvent("aaaaaaaaaaaa", "pushed", "Pushed"), PushEvent("bbbbbbbbbbbb", "mounted", "Mounted from x/y"),
               PushEvent("dddddddddddd", "retrying", "Retrying in 5 seconds")]
    for e in events:
        printer.event(e)
    printer.done(PushResult("reg:5000/repo:a", "sha256:" + "ee" * 32, (
        PushedLayer("sha256:" + "a" * 64, "pushed", 2_900_000), PushedLayer("sha256:" + "b" * 64, "mounted", 50),
        PushedLayer("sha256:" + "c" * 64, "exists", 79_400_000)), "registry"))
    return buf.getvalue()


def test_without_a_terminal_one_line_per_layer_state_change():
    assert printed(live=False).splitlines() == [
        "pushing reg:5000/repo:a (3 layers)",
        "  layer cccccccccccc: already in the registry",
        "  layer aaaaaaaaaaaa: pushing 3.0 MB",
        "  layer aaaaaaaaaaaa: pushed 3.0 MB",
        "  layer bbbbbbbbbbbb: mounted from x/y",
        "  layer dddddddddddd: retrying in 5 seconds",
        "  3 layers: 1 pushed (2.9 MB), 2 already in the registry (79.4 MB)",
    ]


def test_on_a_terminal_a_bar_per_layer_then_the_summary():
    text = printed(live=True)
    assert "layer aaaaaaaaaaaa" in text and "3 layers: 1 pushed (2.9 MB)" in text


def test_summary_says_where_the_sizes_came_from():
    result = PushResult("r", "d", (PushedLayer("sha256:" + "a" * 64, "pushed", 3_000_000),), "progress")
    assert summary(result) == ("1 layers: 1 pushed (3.0 MB), 0 already in the registry (0 B); "
                               "sizes uncompressed, from the push progress")
    assert json.dumps(result.bytes_pushed) == "3000000"


# ------------------------------------------------------------------ floating bases


@pytest.mark.parametrize("base, floating", [
    ("nvidia/cuda:13.0.1-cudnn-devel-ubuntu24.04", True),
    ("lmsysorg/sglang:latest", True),
    ("lmsysorg/sglang:v0.5.23@sha256:" + "0" * 64, False),
    ("pinwheel/base:bookworm-py311", False),  # built here from Debian packages, never pulled
])
def test_a_base_not_pinned_by_digest_floats(base: str, floating: bool):
    from pinwheel.image.publish import floating_base

    reason = floating_base(base)
    assert (reason is not None) == floating
    if floating:
        assert base in reason and "not pinned by digest" in reason


def test_publish_refuses_a_floating_base_before_the_engine(tmp_path: Path, capsys, monkeypatch):
    from pinwheel import cli
    from pinwheel.commands import publish as publish_command

    text = (ROOT / "wheels_manifest.yaml").read_text().replace(
        "base: pinwheel/base:bookworm-py311", "base: nvidia/cuda:13.0.1-cudnn-devel-ubuntu24.04", 1)
    (tmp_path / "wheels_manifest.yaml").write_text(text)
    (tmp_path / "images").symlink_to(ROOT / "images")

    def no_engine():
        raise AssertionError("the engine must not be asked")

    monkeypatch.setattr(publish_command, "engine_or_fail", no_engine)
    rc = cli.main(["--manifest", str(tmp_path / "wheels_manifest.yaml"), "publish", "--cuda", "13"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "not pinned by digest" in err and "--allow-floating-base" in err


# publish_index puts the index through the registry API: tests/engine/test_publish_index.py.
