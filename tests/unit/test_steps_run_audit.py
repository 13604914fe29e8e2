"""The audit's RUN rules over a run step's script, where a user looks: `report` lists the step as opaque
("not judged by the resolver") with what the rules find in its script; an error among them (curl | sh, a
masked failure) makes the verdict `conflicts`, a clean script says it has no finding."""
from __future__ import annotations

import json

from pinwheel import cli

from tests.support.manifests import manifest_yaml

STEPS = """\
  - name: gateway
    kind: run
    why: "the gateway binary, from its vendor's installer"
    script: |
      curl -fsSL https://get.example.org/install.sh | sh
      pip install gateway-client
      make -C /opt/gw || true
  - name: links
    kind: run
    why: "the names the launch scripts use"
    script: |
      for p in python3 pip3; do
        ln -sf "/usr/bin/$p" "/usr/local/bin/$p-train"
      done
"""


def report(root, *args, capsys):
    capsys.readouterr()
    code = cli.main(["--manifest", str(root / "wheels_manifest.yaml"), "report", "--variant", "cu130", *args])
    return code, capsys.readouterr().out


def test_report_lists_each_run_step_with_its_scripts_findings(local_index, local_project, capsys):
    root = local_project(local_index.serve())
    (root / "wheels_manifest.yaml").write_text(manifest_yaml(steps=STEPS, key="steps"))
    code, out = report(root, "--json", capsys=capsys)
    data = json.loads(out)
    gateway, links = data["outside"]
    assert gateway["what"].startswith("not judged by the resolver (a script)")
    rules = [(f["rule"], f["level"], f["line"]) for f in gateway["findings"]]
    assert rules == [("curl-pipe-shell", "error", 6), ("failure-masked", "error", 6), ("unpinned", "warning", 6)]
    assert "get.example.org/install.sh | sh: runs a script nobody pinned" in gateway["findings"][0]["message"]
    assert links["findings"] == []  # judged, and clean: `set -euo pipefail` is how the step runs it
    assert data["summary"]["verdict"] == "conflicts" and code != 0

    code, text = report(root, capsys=capsys)
    text = " ".join(text.split())
    assert ("run step gateway: not judged by the resolver (a script): the gateway binary, from its vendor's "
            "installer error curl-pipe-shell (line 6):") in text
    assert "run step links: not judged by the resolver (a script): the names the launch scripts use its script: " \
           "no finding of the audit's RUN rules" in text


def test_a_clean_script_leaves_the_verdict_alone(local_index, local_project, capsys):
    root = local_project(local_index.serve())
    (root / "wheels_manifest.yaml").write_text(manifest_yaml(steps=STEPS.split("  - name: links\n")[0].replace(
        "      curl -fsSL https://get.example.org/install.sh | sh\n      pip install gateway-client\n"
        "      make -C /opt/gw || true\n", "      make -C /opt/gw\n"), key="steps"))
    code, out = report(root, "--json", capsys=capsys)
    data = json.loads(out)
    assert data["outside"][0]["findings"] == [] and data["summary"]["verdict"] == "clean" and code == 0
