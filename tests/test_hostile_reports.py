"""Hostile input: every damaged report ends in a pva.PvaError or a success, in bounded time and memory.

The corpus (tests/support/hostile_corpus.py) is generated from valid reports at test time; each case goes
through every read path (open and walk every object, summary, check, info, tables, optime, estimate,
exports, html) in a child process limited in address space, with a per-operation alarm. A crash,
a hang, an exception that is not a PvaError, or a run past the memory limit fails the test.
"""

from __future__ import annotations

import json
import pathlib
import resource
import subprocess
import sys

from hostile_corpus import make_cases

WORKER = pathlib.Path(__file__).parent / "support" / "hostile_worker.py"
#: Address-space limit of the child (numpy and pyarrow reserve a lot of virtual memory up front).
MEMORY_LIMIT = 3 << 30
SECONDS_PER_OPERATION = 60


def run_corpus(cases: list[dict], directory: pathlib.Path) -> tuple[list[dict], int]:
    """Run the worker over the cases, restarting it after a crash; returns (results, peak RSS bytes)."""
    cases_file = directory / "cases.json"
    cases_file.write_text(json.dumps(cases))
    results_file = directory / "results.jsonl"
    results_file.write_text("")

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    start = 0
    crashes = []
    while start < len(cases):
        proc = subprocess.run(
            [sys.executable, str(WORKER), str(cases_file), str(results_file), str(start), str(SECONDS_PER_OPERATION)],
            preexec_fn=limit,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        lines = [json.loads(line) for line in results_file.read_text().splitlines() if line]
        if proc.returncode == 0:
            break
        last = lines[-1] if lines else {"index": start, "op": "start", "case": cases[start]["name"]}
        crashes.append(
            {
                "index": last["index"],
                "case": last["case"],
                "op": last["op"],
                "outcome": "crash",
                "detail": f"exit status {proc.returncode}: {proc.stderr[-1500:]}",
            }
        )
        start = last["index"] + 1
    finished = [r for r in lines if r["outcome"] != "started"]
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return finished + crashes, peak


def _assert_all_handled(results: list[dict], cases: list[dict]) -> None:
    bad = [r for r in results if r["outcome"] not in ("ok", "pva_error")]
    assert not bad, "\n\n".join(f"{r['case']} / {r['op']}: {r['outcome']}\n{r['detail']}" for r in bad[:10])
    assert {r["case"] for r in results} == {c["name"] for c in cases}


def test_damaged_sample_reports(sample, tmp_path):
    cases = make_cases(sample.path, tmp_path / "corpus")
    for case in cases:
        case["all_ops"] = False  # the simulated corpus below runs the exports and html too
    results, peak = run_corpus(cases, tmp_path)
    _assert_all_handled(results, cases)
    errors = [r for r in results if r["outcome"] == "pva_error"]
    assert errors, "the corpus should make at least some reads fail"
    assert all(r["detail"] for r in errors)
    print(
        f"\n{len(cases)} damaged sample reports, {len(results)} operations, {len(errors)} refused with a PvaError, "
        f"peak RSS {peak / 2**20:.0f} MiB"
    )


def test_damaged_simulated_reports_and_debug_info(tmp_path):
    from simulator.presets import run_preset

    out = tmp_path / "sim"
    run_preset("mnist-mlp", {"tiles-per-ipu": 64}, str(out))
    cases = make_cases(out / "profile.pop", tmp_path / "corpus", seed=2, debug=out / "debug.cbor")
    assert any("debug" in case for case in cases)
    results, peak = run_corpus(cases, tmp_path)
    _assert_all_handled(results, cases)
    ops = {r["op"] for r in results}
    assert {"open+walk", "summary", "check", "export-parquet", "export-hdf5", "export-csv", "html"} <= ops
    errors = [r for r in results if r["outcome"] == "pva_error"]
    print(
        f"\n{len(cases)} damaged simulated reports, {len(results)} operations, {len(errors)} refused with a "
        f"PvaError, peak RSS {peak / 2**20:.0f} MiB"
    )
