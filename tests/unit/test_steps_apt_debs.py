"""The apt kind beyond the base's sources: a .deb from a URL pinned by sha256, `hold` and `remove`. Exact
rendered text, shellcheck, identity and located errors (the plain pins' tests are test_steps_apt.py)."""
from __future__ import annotations

import hashlib
import shutil
import subprocess

import pytest

from pinwheel.image.identity import step_sections
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfile
from pinwheel.steps import kind_of


from tests.support.file_server import serve_files
from tests.support.manifests import assert_refused_at, load_text
from tests.support.render import run_scripts

SHA = "b" * 64
HEAD = """\
manifest_version: 1
image: {name: demo, repository: pinwheel/demo}
variants:
  cu130: {cuda: "13.0", torch: "2.13.0", python: "3.11", platform: manylinux_2_36_x86_64, base: "pinwheel/base:bookworm-py311", tag: "cu130-{date}"}
steps:
"""
DEBS = HEAD + f"""\
  - name: profiler
    kind: apt
    why: "the profiler, and no base cuDNN under the wheel's"
    remove:
      - {{name: libcudnn9-cuda-13, why: "the base's held cuDNN; the wheel brings its own"}}
    packages:
      - {{name: libibverbs1, version: "44.0-2", why: "NCCL's IB transport"}}
    debs:
      - {{name: nsight-systems, version: "2025.3.1-1", url: "https://downloads.example.org/nsight-systems_2025.3.1-1_amd64.deb",
         sha256: "{SHA}", why: "on no apt source"}}
    hold: [nsight-systems]
"""

RENDERED = """\

# ---- apt step 1/1: profiler. the profiler, and no base cuDNN under the wheel's
#   libibverbs1=44.0-2: NCCL's IB transport
#   nsight-systems=2025.3.1-1 from https://downloads.example.org/nsight-systems_2025.3.1-1_amd64.deb: on no apt source
#     sha256 bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb
#   remove libcudnn9-cuda-13: the base's held cuDNN; the wheel brings its own
#   hold nsight-systems
RUN --mount=type=bind,source=debs/profiler,target=/tmp/pinwheel-debs/profiler \\
    set -eu; \\
    found=$(sha256sum /tmp/pinwheel-debs/profiler/00-nsight-systems_2025.3.1-1_amd64.deb | cut -d ' ' -f 1); \\
    if [ "$found" != bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb ]; then echo 'pinwheel: ERROR: apt step profiler: https://downloads.example.org/nsight-systems_2025.3.1-1_amd64.deb: sha256 mismatch: expected bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb, found' "$found" >&2; exit 1; fi; \\
    DEBIAN_FRONTEND=noninteractive apt-get purge -y --allow-change-held-packages \\
      libcudnn9-cuda-13; \\
    apt-get update && \\
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \\
      libibverbs1=44.0-2 \\
      /tmp/pinwheel-debs/profiler/00-nsight-systems_2025.3.1-1_amd64.deb && \\
    apt-mark hold nsight-systems && \\
    apt-get clean && \\
    rm -rf /var/lib/apt/lists/*
"""


def render(tmp_path, text=DEBS) -> str:
    m = load_text(text, tmp_path)
    return render_dockerfile([plan_variant(m, v) for v in m.variants])


def test_a_deb_a_removal_and_a_hold_render_in_one_run(tmp_path):
    text = render(tmp_path)
    assert RENDERED in text
    invariant = text[text.index("# Invariant of apt step profiler"):]
    assert "    check libibverbs1 44.0-2; \\\n    check nsight-systems 2025.3.1-1; \\\n" in invariant
    assert "libcudnn9-cuda-13': removed by the manifest, still installed'" in invariant
    assert "if ! apt-mark showhold | grep -qx nsight-systems; then" in invariant


def test_shellcheck_every_apt_script(tmp_path):
    if not shutil.which("shellcheck"):
        pytest.fail("shellcheck is not installed: `make tools` (Debian package shellcheck)")
    scripts = [s for s in run_scripts(render(tmp_path)) if "apt-get" in s or "dpkg-query" in s]
    assert len(scripts) == 2
    for script in scripts:
        proc = subprocess.run(["shellcheck", "-s", "sh", "-e", "SC2016", "-"], input=f"#!/bin/sh\n{script}\n",
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}\n{proc.stdout}"


def test_the_deb_joins_the_identity_and_the_report(tmp_path):
    plan = plan_variant(load_text(DEBS, tmp_path), "cu130")
    assert dict(step_sections(plan, tmp_path))["debs"] == ({
        "step": "profiler", "name": "nsight-systems", "version": "2025.3.1-1",
        "url": "https://downloads.example.org/nsight-systems_2025.3.1-1_amd64.deb", "sha256": SHA},)
    step = plan.steps[0]
    assert kind_of(step).effect(step).outside == (
        "apt libibverbs1=44.0-2",
        "apt nsight-systems=2025.3.1-1 from https://downloads.example.org/nsight-systems_2025.3.1-1_amd64.deb "
        "(sha256 bbbbbbbbbbbb)",
        "apt hold nsight-systems",
        "apt remove libcudnn9-cuda-13: the base's held cuDNN; the wheel brings its own")


def test_a_removal_alone_needs_no_package_lists(tmp_path):
    text = HEAD + "  - name: gone\n    kind: apt\n    why: \"w\"\n    remove: [{name: libcudnn9-cuda-13, why: \"x\"}]\n"
    rendered = render(tmp_path, text)
    part = rendered[rendered.index("# ---- apt step 1/1"):rendered.index("# Invariant")]
    assert "apt-get update" not in part and "apt-get purge -y --allow-change-held-packages" in part


def step(body: str) -> str:
    return HEAD + "  - name: x\n    kind: apt\n    why: \"y\"\n" + body


DEB = '{name: pw-deb, version: "1.0-1", url: "https://d.example/pw-deb_1.0-1_all.deb", sha256: "' + SHA + '", why: "w"}'


@pytest.mark.parametrize("body,line,key,fragment", [
    ("    hold: [a1]\n", 6, "steps[0].packages", "needs `packages`, `debs` or `remove`"),
    ("    debs: [" + DEB.replace(".deb", ".tar") + "]\n", 9, "steps[0].debs[0].url", "is not a URL of a .deb file"),
    ("    debs: [" + DEB.replace(SHA, "abc") + "]\n", 9, "steps[0].debs[0].sha256", "is not a sha256"),
    ("    debs: [" + DEB.replace('"1.0-1"', '"x1"') + "]\n", 9, "steps[0].debs[0].version", "is not a Debian version"),
    ("    debs: [" + DEB + ", " + DEB + "]\n", 9, "steps[0].debs[1].name", "pw-deb is listed twice"),
    ("    debs: [" + DEB + "]\n    hold: [other]\n", 10, "steps[0].hold[0]", "other is not installed by this step"),
    ("    debs: [" + DEB + "]\n    remove: [{name: pw-deb, why: z}]\n", 10, "steps[0].remove[0].name",
     "pw-deb is installed by the manifest"),
])
def test_bad_entries_are_refused_at_their_line(tmp_path, body, line, key, fragment):
    assert_refused_at(step(body), tmp_path, line, key, fragment)


# ---- an extra apt source, its signing key pinned by sha256 and fingerprint


@pytest.fixture(scope="module")
def signing_key(tmp_path_factory) -> tuple[bytes, bytes, str]:
    """(armored, binary, fingerprint) of a key gpg makes here; gpg's own answer is the fingerprint."""
    if not shutil.which("gpg"):
        pytest.fail("gpg is not installed (Debian package gnupg)")
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    env = {"GNUPGHOME": str(home), "PATH": "/usr/bin:/bin"}
    subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", "pinwheel test <test@invalid>",
                    "ed25519", "sign", "never"], env=env, check=True, capture_output=True, timeout=120)
    armored = subprocess.run(["gpg", "--armor", "--export"], env=env, check=True, capture_output=True).stdout
    binary = subprocess.run(["gpg", "--export"], env=env, check=True, capture_output=True).stdout
    colons = subprocess.run(["gpg", "--with-colons", "--fingerprint"], env=env, check=True, capture_output=True,
                            text=True).stdout
    fpr = next(line.split(":")[9] for line in colons.splitlines() if line.startswith("fpr:"))
    return armored, binary, fpr


def test_the_fingerprint_is_gpgs_for_both_encodings(signing_key):
    from pinwheel.steps.openpgp import KeyFileError, fingerprint

    armored, binary, fpr = signing_key
    assert fingerprint(armored) == fingerprint(binary) == fpr
    with pytest.raises(KeyFileError):
        fingerprint(b"not a key")


def sourced(url: str, sha256: str, fpr: str) -> str:
    return HEAD + f"""\
  - name: cuda-repo
    kind: apt
    why: "the vendor's CUDA repository"
    sources:
      - name: vendor-cuda
        uris: "https://repo.example.org/cuda/debian12/x86_64/"
        suites: "/"
        key: {{url: "{url}", sha256: "{sha256}", fingerprint: "{fpr}"}}
        why: "the CUDA toolkit packages"
    packages:
      - {{name: cuda-toolkit-13-0, version: "13.0.2-1", why: "nvcc for the source builds"}}
"""


def test_a_source_renders_its_keyring_and_deb822_file_before_the_update(tmp_path, signing_key):
    armored, _, fpr = signing_key
    sha = hashlib.sha256(armored).hexdigest()
    text = render(tmp_path, sourced("https://repo.example.org/cuda/key.asc", sha, fpr))
    part = text[text.index("# ---- apt step 1/1"):text.index("# Invariant")]
    assert f"#     signed by {fpr} (https://repo.example.org/cuda/key.asc, sha256 {sha})" in part
    assert ("    mkdir -p /etc/apt/keyrings && cp /tmp/pinwheel-debs/cuda-repo/key-vendor-cuda.asc "
            "/etc/apt/keyrings/pinwheel-vendor-cuda.asc; \\\n"
            "    printf '%s\\n' 'Types: deb' 'URIs: https://repo.example.org/cuda/debian12/x86_64/' 'Suites: /' "
            "'Signed-By: /etc/apt/keyrings/pinwheel-vendor-cuda.asc' > "
            "/etc/apt/sources.list.d/pinwheel-vendor-cuda.sources; \\\n") in part
    assert part.index("pinwheel-vendor-cuda.sources") < part.index("apt-get update")
    scripts = [s for s in run_scripts(text) if "apt-get" in s]
    for script in scripts if shutil.which("shellcheck") else ():
        proc = subprocess.run(["shellcheck", "-s", "sh", "-e", "SC2016", "-"], input=f"#!/bin/sh\n{script}\n",
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}\n{proc.stdout}"


@pytest.fixture
def key_server(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    with serve_files(root) as url:
        yield root, url


def test_staging_checks_the_keys_fingerprint_and_refuses_another_key(tmp_path, signing_key, key_server):
    from pinwheel.image.build import stage_steps
    from pinwheel.steps.base import StagingError

    armored, binary, fpr = signing_key
    served, base = key_server
    (served / "key.asc").write_bytes(armored)
    (served / "key.gpg").write_bytes(binary)
    project = tmp_path / "p"
    project.mkdir()
    good = plan_variant(load_text(sourced(f"{base}/key.asc", hashlib.sha256(armored).hexdigest(), fpr), project),
                        "cu130")
    stage_steps(good, project, project / "context")
    assert (project / "context" / "debs" / "cuda-repo" / "key-vendor-cuda.asc").read_bytes() == armored
    other = "0" * 40  # the pinned bytes, but a fingerprint they do not have
    wrong = plan_variant(load_text(sourced(f"{base}/key.asc", hashlib.sha256(armored).hexdigest(), other), project),
                         "cu130")
    with pytest.raises(StagingError, match=f"fingerprint mismatch: expected {other}, found {fpr}"):
        stage_steps(wrong, project, project / "context2")
    binary_plan = plan_variant(load_text(sourced(f"{base}/key.gpg", hashlib.sha256(binary).hexdigest(), fpr),
                                         project), "cu130")
    with pytest.raises(StagingError, match="is a binary key: pin its armored export"):
        stage_steps(binary_plan, project, project / "context3")
