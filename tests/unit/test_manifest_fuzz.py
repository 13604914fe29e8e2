"""A seeded fuzzer over the shipped manifest.

Every mutant either loads, or is refused with a ManifestError that names a place
(file:line, or the file as a whole) on one line, fast, and through the CLI with
exit 2 and no traceback. Nothing else may happen: no other exception, no hang.
"""
from __future__ import annotations

import random
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pinwheel import cli, manifest

from tests.support.manifest_fuzz import MUTANTS, SEED, mutants

REPO = Path(__file__).resolve().parents[2]
PER_CASE_SECONDS = 1.0  # generous: a load takes milliseconds; this only catches a hang or a blow-up


# -------------------------------------------------------------- the checks


def located(e: manifest.ManifestError, path: Path) -> bool:
    text = str(e)
    if not text.isprintable():  # one line, nothing a terminal would act on
        return False
    if e.line > 0:
        return re.match(rf"{re.escape(str(path))}:{e.line}: [^:]*\S: \S", text) is not None
    return e.key == "(file)" and text.startswith(f"{path}: (file): ")


def load_one(path: Path) -> tuple[str, float, manifest.ManifestError | None]:
    start = time.perf_counter()
    try:
        manifest.load(path)
    except manifest.ManifestError as e:
        return "invalid", time.perf_counter() - start, e
    return "valid", time.perf_counter() - start, None


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> list[tuple[str, Path, str, float, manifest.ManifestError | None]]:
    root = tmp_path_factory.mktemp("fuzz")
    out = []
    for label, data in MUTANTS:
        path = root / f"{label.replace(':', '-')}.yaml"
        path.write_bytes(data)
        try:
            verdict, seconds, error = load_one(path)
        except BaseException as exc:  # noqa: BLE001 - the point is to catch anything that is not a ManifestError
            pytest.fail(f"{label}: manifest.load raised {type(exc).__name__}: {exc!r}"[:2000])
        out.append((label, path, verdict, seconds, error))
    return out


def test_enough_distinct_mutants():
    assert len(MUTANTS) >= 300
    assert len({data for _, data in MUTANTS}) == len(MUTANTS)
    kinds = {label.split("-", 1)[1].split(":")[0] for label, _ in MUTANTS}
    assert kinds == {"structural", "textual"}
    ops = {label.split("-", 1)[1] for label, _ in MUTANTS}
    assert len(ops) >= 25, sorted(ops)


def test_mutants_are_deterministic():
    assert mutants(60) == MUTANTS[:60]


def test_every_mutant_loads_or_is_refused_with_a_location(results):
    bad = []
    for label, path, verdict, _, error in results:
        if verdict == "invalid" and not located(error, path):
            bad.append(f"{label}: {error!r}")
    assert not bad, "\n".join(bad[:20])
    invalid = sum(1 for r in results if r[2] == "invalid")
    assert invalid >= 250, f"only {invalid} of {len(results)} mutants were refused: the fuzzer lost its teeth"


def test_every_load_is_fast(results):
    slow = [(label, round(seconds, 3)) for label, _, _, seconds, _ in results if seconds > PER_CASE_SECONDS]
    assert not slow, slow
    assert sum(r[3] for r in results) < 20


def test_refusals_exit_2_in_process(results, capsys):
    bad = []
    for label, path, verdict, _, error in results:
        if verdict != "invalid":
            continue
        rc = cli.main(["--manifest", str(path), "render", "--stdout"])
        captured = capsys.readouterr()
        if rc != 2 or captured.out or "Traceback" in captured.err or captured.err != f"error: {error}\n":
            bad.append(f"{label}: rc={rc} err={captured.err!r} out={captured.out[:200]!r}")
    assert not bad, "\n".join(bad[:20])


def test_valid_mutants_stay_valid_on_a_second_load(results):
    for label, path, verdict, _, _ in results:
        if verdict == "valid":
            m = manifest.load(path)
            assert m.variants and m.wheel_sets, label


def test_a_sample_through_the_real_cli(results):
    rng = random.Random(SEED)
    invalid = [r for r in results if r[2] == "invalid"]
    sample = rng.sample(invalid, 20)

    def run(case):
        label, path, _, _, error = case
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "build.py", "--manifest", str(path), "render", "--stdout"],
                              cwd=REPO, capture_output=True, text=True, timeout=60)
        return label, error, proc, time.perf_counter() - start

    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = list(pool.map(run, sample))
    for label, error, proc, seconds in runs:
        assert proc.returncode == 2, (label, proc.stderr)
        assert re.fullmatch(r"error: [^\n]+\n", proc.stderr), (label, proc.stderr)
        assert proc.stderr == f"error: {error}\n", label
        assert "Traceback" not in proc.stderr and not proc.stdout, label
        assert seconds < 30, label
