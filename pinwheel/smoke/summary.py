"""The result document for people (summary) and as strict JSON (json_safe)."""
from __future__ import annotations

import math


def _fmt_ms(t):
    return f"{t['median_ms']:.3f} ms" if t else "?"


def summary(doc: dict) -> str:
    lines = [f"pinwheel smoke (schema {doc['schema']}), requested level: {doc['requested']}"]
    d = doc.get("device")
    if d:
        lines.append(f"device: {d['name']} (sm {d['capability']}), torch {d['torch']} (CUDA {d['torch_cuda']})")
    else:
        drv = doc["host"].get("driver")
        lines.append("device: none" + (f" ({drv.get('reason')})" if drv and not drv.get("present") else ""))
    for s in doc["stages"]:
        tag = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIPPED", "info": "info"}[s["status"]]
        lines.append(f"[{tag:>7}] {s['level']}/{s['name']}: {_stage_text(s)}")
    return "\n".join(lines + _closing(doc))


def _no_deps_text(s: dict) -> str:
    parts = []
    for pkg, info in s["packages"].items():
        if info["installed"] is None:
            parts.append(f"{pkg}: {info['note']}")
            continue
        dropped = ", ".join(f"{i.get('name', i['requirement'])}: {i.get('state', i.get('error'))}"
                            for i in info["dropped"])
        parts.append(f"{pkg} drops [{dropped}]")
    return "; ".join(parts) if parts else "no --no-deps packages declared"


def _reused_text(s: dict) -> str:
    """A passing pip check or import check reused from the cache."""
    what = (f"{s['imported']} modules passed" if s["name"] == "imports" else "no unexpected findings")
    return (f"{what} (unchanged since a passing {'import' if s['name'] == 'imports' else 'pip check'} "
            f"at {s['passed_at']}: cache key {s['cache_key']}; inputs checked in {s['seconds']:.2f} s)"
            + "".join(f"; SKIPPED {k['distribution']} ({', '.join(k['modules'])}): {k['reason']}"
                      for k in s.get("skipped", ()))
            + ("; base: already broken: " + "; ".join(s["accepted_baseline"])
               if s.get("accepted_baseline") else ""))


def _stage_text(s: dict) -> str:
    """One stage's line, after its tag and name."""
    if s["name"] == "pins":
        text = (f"{s['checked']} pins checked" if s["status"] == "passed" else s.get("error", ""))
    elif s["name"] == "no-deps":
        text = _no_deps_text(s)
    elif s["name"] == "pip-check" and s.get("reused") and "error" in s:  # stored findings, judged anew
        text = (f"{s['error']} (the findings of the passing pip check at {s['passed_at']}, reused: the installed "
                f"metadata is unchanged, cache key {s['cache_key']}; this expect.json does not allow them)")
    elif s["name"] in ("imports", "pip-check") and s.get("reused") and s["status"] == "passed":
        text = _reused_text(s)
    elif s["name"] == "imports" and s["status"] == "passed":
        text = (f"{s['imported']} modules imported on the CPU in {s['seconds']:.2f} s ({s['processes']} process(es))"
                + "".join(f"; SKIPPED {k['distribution']} ({', '.join(k['modules'])}): {k['reason']}"
                          for k in s["skipped"])
                + "".join(f"; not imported, built for another Python: {k['distribution']} ({', '.join(k['files'])})"
                          for k in s.get("other_interpreter", ())))
    elif s["name"] == "dropped" and s["status"] == "passed":
        text = f"{s['met']} dropped base requirement(s) met" + (
            "; allowed unmet: " + "; ".join(s["allowed"]) if s["allowed"] else "")
    elif s["name"] in ("base", "removed") and s["status"] == "passed":
        text = (f"{s['checked']} base packages at their inventory versions" if s["name"] == "base"
                else f"gone: {', '.join(s['packages'])}")
    elif s["name"] == "pip-check" and s["status"] == "passed" and s.get("accepted_baseline"):
        text = "base: already broken: " + "; ".join(s["accepted_baseline"])
    elif s["status"] == "skipped":
        text = s.get("reason", "")
    elif s.get("check") and s["status"] == "passed":
        text = f"check {s['check']} passed ({', '.join(s['stages'])})"
    elif s["name"].startswith("verify:") and s["status"] == "passed":
        text = ((f"imported {', '.join(s['imports'])}; " if s.get("imports") else "")
                + ("snippet exited 0 " if s.get("python") else "") + f"({s.get('seconds', 0):.2f} s)")
    elif "error" in s:
        text = s["error"]
    elif "message" in s:
        text = s["message"]
        if s.get("kernel") and s.get("reference"):
            text += f" | kernel {_fmt_ms(s['kernel'])} vs reference {_fmt_ms(s['reference'])}"
    else:
        text = f"{s.get('version') or ''} ({s.get('seconds', 0):.2f} s)".strip()
    return text


def _closing(doc: dict) -> list:
    """Per package, the skips, and the result."""
    lines = []
    for pkg, entry in doc.get("packages", {}).items():
        parts = [f"{len(entry[k])} {k}" for k in ("passed", "failed", "skipped") if entry[k]]
        lines.append(f"package {pkg}: {entry['status'].upper()} ({', '.join(parts)})"
                     + (f"; SKIPPED: {', '.join(entry['skipped'])}" if entry["skipped"] else ""))
    if doc.get("skipped_levels"):
        lines.append(
            f"!!! SKIPPED: level(s) {', '.join(doc['skipped_levels'])} did not run. A skip is NOT a pass"
            + ("." if doc.get("required") else "; use --require gpu to make it an error.")
        )
    if doc.get("error"):
        lines.append(f"error: {doc['error']}")
    if doc["failed_levels"]:
        failed = [f"{s['level']}/{s['name']}" for s in doc["stages"] if s["status"] == "failed"]
        lines.append(f"RESULT: FAILED ({', '.join(failed)})")
    elif not doc["ok"]:
        lines.append("RESULT: FAILED (required level skipped)")
    else:
        lines.append("RESULT: OK" + (" (with skips)" if doc.get("skipped_levels") else ""))
    return lines


def json_safe(obj):
    """Strict JSON: non-finite floats become the strings "inf", "-inf", "nan"."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)
