"""What the report advises for requirements it could not judge follows why they could not be judged."""
from __future__ import annotations

from pinwheel.plan import Unjudged, plan_variant
from pinwheel.reports.report import unchecked_advice

from tests.support.manifests import load_text, manifest_yaml, variant

STEPS = '  - name: base\n    why: "w"\n    packages:\n      - {requirement: "six==1.16.0", why: "w"}\n'
OFFLINE = "requirements of six 1.16.0 unreadable: offline: the index page of package 'six' is not in the cache (x)"
UNSET = "torch for variant cu129 comes from the index in $PINWHEEL_TORCH_CU129_INDEX, which is not set"
NETWORK = "cannot list releases of six: connection refused (http://127.0.0.1:9/simple/six/)"


def advice(tmp_path, *reasons: str) -> str:
    plan = plan_variant(load_text(manifest_yaml(steps=STEPS, variants=[variant()]), tmp_path), "cu130")
    return unchecked_advice(plan.with_resolution(unjudged=tuple(Unjudged("p", r) for r in reasons)))


def test_an_offline_cache_miss_says_to_run_online_not_to_check_the_network(tmp_path):
    text = advice(tmp_path, OFFLINE)
    assert "run once without --offline" in text and "network" not in text


def test_an_unset_index_variable_is_named(tmp_path):
    text = advice(tmp_path, UNSET, OFFLINE)
    assert text.startswith("set $PINWHEEL_TORCH_CU129_INDEX") and "network" not in text


def test_an_index_that_failed_online_points_at_the_index_and_the_network(tmp_path):
    assert "check the index and the network" in advice(tmp_path, NETWORK)
    assert "check the index and the network" in advice(tmp_path, UNSET, NETWORK)
