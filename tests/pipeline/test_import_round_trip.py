"""`import` round trip: a hand-written, seed-style Dockerfile becomes a manifest; with its TODOs filled in
it locks and builds, and the image holds exactly the hand-written image's package set."""
from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

from pinwheel.image.engine import Engine
from pinwheel.image.inventory import history, save_and

from tests.support.pipeline import Project

SEED_STYLE = """\
ARG BASE={base}
FROM ${{BASE}}
ARG ENABLE_CUDA_13=1
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:${{PATH}}
COPY wheels/ /tmp/wheels/
RUN pip install --no-index --find-links /tmp/wheels pw-core==1.0.0
RUN pip install --no-index --find-links /tmp/wheels pw-util==0.5.0
RUN if [ "${{ENABLE_CUDA_13}}" = "1" ]; then \\
      pip install --no-index --find-links /tmp/wheels --no-deps pw-top==2.0.0; \\
    fi
RUN if ls /tmp/wheels/pw_kern_fb-*.whl >/dev/null 2>&1; then \\
      pip install --no-deps /tmp/wheels/pw_kern_fb-*.whl; \\
    else \\
      pip install --no-index --find-links /tmp/wheels --no-deps pw-kern-fb-stable==1.0.0; \\
    fi
RUN rm -rf /tmp/wheels
"""


def venv_packages(engine: Engine, ref: str) -> dict[str, str]:
    return {d.name: d.version for d in save_and(engine, ref, None, history).final if d.site.startswith("/opt/venv/")}


def test_import_fill_in_lock_build_gives_the_same_package_set(project_factory, engine: Engine, base_image: str,
                                                            tls_index, local_wheel_files, tmp_path: Path):
    # the hand-written image, built as a team builds it today
    ctx = tmp_path / "hand"
    (ctx / "wheels").mkdir(parents=True)
    for wheel in list(tls_index.files_dir.glob("*.whl")) + [local_wheel_files["pw-kern-fb"]]:
        shutil.copy2(wheel, ctx / "wheels" / wheel.name)
    (ctx / "Dockerfile").write_text(SEED_STYLE.format(base=base_image))
    hand_tag = f"pinwheel-test/hand-written:{uuid.uuid4().hex[:8]}"
    engine.build(ctx, ctx / "Dockerfile", tags=[hand_tag])
    project: Project = project_factory("imported")
    built_ref = None
    try:
        project.manifest.unlink()
        project.cli("import", str(ctx / "Dockerfile"), "-o", str(project.manifest), check=True)
        text = project.manifest.read_text()
        assert "TODO: why" in text
        # what a person fills in: the whys, the local wheel's version, the repository and the variant
        text = (text.replace("TODO: why", "decided by the team")
                .replace("pw-kern-fb==0.0.0", "pw-kern-fb==1.0.0+inhouse")
                .replace("todo/image", project.repository)
                .replace("main:", "cu130:").replace("main-{date}", "cu130-{date}"))
        text = "\n".join(line for line in text.splitlines() if "how_to_provide" not in line) + "\n"
        # the guesses import marked (cuda, platform, torch) are this team's answers: their TODOs go, and with
        # them the `todo:` section, the manifest's last (build refuses a manifest that still has one)
        assert "\ntodo:" in text
        text = text.split("\ntodo:")[0] + "\n"
        project.manifest.write_text(text)
        project.cli("render", check=True)
        project.cli("lock", "--variant", "cu130", check=True)
        built = project.cli("build", "--variant", "cu130", "--json")
        assert built.returncode == 0, built.output[-4000:]
        built_ref = json.loads(built.stdout)["tags"][0]
        hand, ours = venv_packages(engine, hand_tag), venv_packages(engine, built_ref)
        hand.pop("pip", None), ours.pop("pip", None)  # each venv's own pip
        assert ours == hand, (ours, hand)
    finally:
        for ref in (built_ref, hand_tag):
            if ref and engine.image_exists(ref):
                engine.remove(ref, force=True)
