"""scripts/smoke_gpu_host.py: the GPU host's expect.json is the image's, cut to the packages carried there."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def host_module():
    spec = importlib.util.spec_from_file_location("smoke_gpu_host", ROOT / "scripts" / "smoke_gpu_host.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


IMAGE = {
    "pins": {"flashinfer-python": "0.6.15.post1", "protobuf": "6.33.0"},
    "base_unchanged": {"nvidia-cudnn-frontend": "1.28.0", "pandas": "3.1.1"},
    "dropped": {"flashinfer-python": {"requires": ["nvidia-cudnn-frontend>=1.13.0", "protobuf<7,>=6.30",
                                                   "nccl4py>=0.3.1", "tqdm ; extra == 'x'"],
                                      "allow_missing": {"nccl4py": "dropped on purpose"}}},
    "verify": {"flashinfer-python": {"needs": "gpu"}},
}


def test_the_host_expect_checks_what_was_carried_and_names_the_rest():
    m = host_module()
    carried = {"flashinfer-python": "0.6.15.post1", "nvidia-cudnn-frontend": "1.28.0"}
    host = m.host_expect(IMAGE, carried)
    assert host["pins"] == {"flashinfer-python": "0.6.15.post1"}
    assert host["base_unchanged"] == {"nvidia-cudnn-frontend": "1.28.0"}
    assert host["host_provided"] == {"protobuf": "6.33.0", "pandas": "3.1.1"}
    allowed = host["dropped"]["flashinfer-python"]["allow_missing"]
    # the image's own allowance kept as it is; what was not carried allowed, saying so; the carried one judged
    assert allowed["nccl4py"] == "dropped on purpose"
    assert allowed["protobuf"] == allowed["tqdm"] == m.NOT_CARRIED
    assert "nvidia-cudnn-frontend" not in allowed
    assert host["verify"] == IMAGE["verify"] and IMAGE["pins"]["protobuf"] == "6.33.0"  # the image's is untouched


def test_what_the_image_removes_is_checked_only_among_the_carried_packages():
    """verl's image removes scipy; the GPU host has a scipy of its own, which was never the image's."""
    m = host_module()
    host = m.host_expect({**IMAGE, "removed": ["scipy", "flash-attn-4"]}, {"flash-attn-4": "4.0.0b15"})
    assert host["removed"] == ["flash-attn-4"] and host["host_kept_removed"] == ["scipy"]
    assert "removed" not in m.host_expect(IMAGE, {})
