"""The content tag is immutable on the real registry: publish never moves it to other bytes, says how to
publish those under a tag of their own, and prints a dated tag's move as old digest → new."""
from __future__ import annotations

import json
import uuid

import pytest

from pinwheel.image.engine import Engine

from tests.support.pipeline import Project, registry_get
from tests.support.smoke_records import NO_GPU, record_smoke

pytestmark = pytest.mark.engine

ACCEPT = ("application/vnd.docker.distribution.manifest.v2+json", "application/vnd.oci.image.manifest.v1+json")
FIRST, REWORDED = "no GPU runner for this release", "no GPU runner for this release (reworded)"


def digest_of(registry: str, repository: str, tag: str) -> str:
    status, headers, body = registry_get(registry, f"/v2/{repository}/manifests/{tag}", ACCEPT)
    assert status == 200, body
    return headers["Docker-Content-Digest"]


def publish(project: Project, target: str, reason: str, *tags: str):
    return project.cli("publish", "--variant", "cu130", "--registry", target, "--allow-skipped", "import,gpu",
                       "--reason", reason, *(a for t in tags for a in ("--tag", t)))


def test_the_content_tag_never_moves_and_a_dated_tag_move_is_printed(project_factory, registry: str,
                                                                      engine: Engine):
    project = project_factory("contenttag")
    built = json.loads(project.cli("build", "--variant", "cu130", "--quiet", "--json", check=True).stdout)
    dated, content = built["tags"]
    # the bootstrap base is in no registry: its base.digest is the local image id, and a label says so
    assert built["labels"]["io.pinwheel.base.digest-kind"] == "image-id"
    assert built["labels"]["org.opencontainers.image.base.digest"] == engine.image_id(built["labels"][
        "org.opencontainers.image.base.name"])
    record_smoke(project.root, built["image_id"], NO_GPU)
    ns = f"ct-{uuid.uuid4().hex[:10]}"
    target, repository = f"{registry}/{ns}", f"{ns}/{project.repository}"
    dated_name, content_name = dated.split(":", 1)[1], content.split(":", 1)[1]

    first = publish(project, target, FIRST)
    assert first.returncode == 0, first.output[-3000:]
    d1 = digest_of(registry, repository, content_name)
    assert digest_of(registry, repository, dated_name) == d1

    # Other bytes from the same inputs (here: another reason in the allowance labels): refused, nothing moves.
    refused = publish(project, target, REWORDED)
    assert refused.returncode == 1, refused.output[-3000:]
    message = " ".join(refused.stderr.split())
    assert f"the content tag {target}/{content} already names another image ({d1}" in message
    assert "a content tag is immutable, so it is not moved" in message
    assert f"`publish --digest {d1}`" in message and f"`publish --tag {project.repository}:<tag>`" in message
    assert digest_of(registry, repository, content_name) == d1
    assert digest_of(registry, repository, dated_name) == d1

    # The same bytes under tags of their own: the first carries them, printed old → new; the content tag stays.
    mine = f"{project.repository}:mine-{uuid.uuid4().hex[:8]}"
    engine.tag(built["image_id"], mine)
    try:
        own = publish(project, target, REWORDED, dated, mine)
        assert own.returncode == 0, own.output[-3000:]
        d2 = digest_of(registry, repository, dated_name)
        assert d2 != d1 and digest_of(registry, repository, mine.split(":", 1)[1]) == d2
        assert digest_of(registry, repository, content_name) == d1
        assert f"pushed {target}/{dated} {d1} → {d2}" in own.stdout, own.stdout
        assert f"the content tag {target}/{content} names another image ({d1}); it is immutable" in \
            " ".join(own.stderr.split())

        # The first bytes published again: the dated tag moves back, and says from where.
        back = publish(project, target, FIRST)
        assert back.returncode == 0, back.output[-3000:]
        assert digest_of(registry, repository, dated_name) == d1
        assert f"tagged {target}/{dated} {d2} → {d1}" in back.stdout, back.stdout
        again = publish(project, target, FIRST)
        assert f"unchanged {target}/{dated} {d1}\n" in again.stdout, again.stdout
    finally:
        engine.remove(mine, force=True)
