"""Every decoder has a memory bound: the bombs of tests/support/hostile_corpus.py are refused quickly, in little memory.

Each probe runs in a fresh child process (under an address-space limit, so a regression fails
instead of exhausting the machine) and reports its peak resident memory (VmHWM) and time.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import resource
import sqlite3
import subprocess
import sys

import hostile_corpus
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
MB = 1 << 20
#: Peak resident memory a refused bomb may cost, Python, numpy and pyarrow included.
PEAK_BOUND = 400 * MB
#: Address space of a probe: generous for numpy's and pyarrow's reservations, far below a bomb's demand.
ADDRESS_SPACE = 4 << 30

PROBE = """
import json, os, sys, time
sys.path.insert(0, os.getcwd())

def status(key):
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0

import pva
from formats.errors import PvaError
kind, path, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
start = time.perf_counter()
outcome = "ok"
try:
    if kind == "matrix":
        with pva.openReport(path) as report:
            from formats.pop.reader import ProfileReader
            reader = ProfileReader(path)
            try:
                matrix = reader.matrix("step_cycles_by_tile")
                matrix.rows()
            finally:
                reader.close()
    elif kind == "trace":
        with pva.openTrace(path) as trace:
            for process in trace.processes:
                for thread in process.threads:
                    len(thread.events)
    elif kind == "debug":
        with pva.openReport(path, extra[0]) as report:
            report.compilation.debugContexts()
    elif kind == "open":
        with pva.openReport(path) as report:
            report.compilation.graph.numComputeSets
    elif kind == "cli":
        from pva.cli import main
        import contextlib, io
        with contextlib.redirect_stdout(open(os.devnull, "w")):
            code = main(extra)
        outcome = f"exit {code}"
except PvaError as exc:
    outcome = f"{type(exc).__name__}: {exc}"
except MemoryError:
    outcome = "MemoryError"
print(json.dumps({"outcome": outcome, "seconds": time.perf_counter() - start, "peak": status("VmHWM")}))
"""


def probe(kind: str, path, *extra) -> dict:
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, kind, str(path), *map(str, extra)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=limit,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    print(
        f"\n{kind} {pathlib.Path(path).name} {' '.join(map(str, extra))}: {result['outcome'][:150]}; "
        f"peak {result['peak'] / MB:.0f} MB, {result['seconds']:.2f} s"
    )
    return result


@pytest.fixture(scope="module")
def bombs(simulated, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("bombs")
    report = simulated / "profile.pop"
    (trace,) = simulated.glob("*.pvti")
    debug = out / "sharing.cbor"
    debug.write_bytes(hostile_corpus.debug_sharing_bomb())
    return {
        "report": report,
        "ipc": hostile_corpus.ipc_compression_bomb(report, out),  # 3 x 512 MB
        "rows": hostile_corpus.declared_rows_bomb(report, out),  # 2,000,000 declared rows
        "trace": hostile_corpus.trace_compression_bomb(trace, out),  # 3 x 20 M rows
        "debug": debug,
        "graph": hostile_corpus.graph_count_bomb(report, out),
    }


def test_the_bombs_are_small_files(bombs):
    assert bombs["ipc"].stat().st_size < 8 * MB and len(bombs["debug"].read_bytes()) < 400


@pytest.mark.parametrize(
    "kind, args",
    [
        ("matrix", ()),
        ("cli", ("check", "{path}")),
        ("cli", ("export", "{path}", "--format", "parquet", "-o", "{out}")),
        ("cli", ("export", "{path}", "--format", "hdf5", "-o", "{out}.h5")),
    ],
    ids=["open+read", "check", "parquet", "hdf5"],
)
def test_an_ipc_body_compression_bomb_is_refused_in_bounded_memory(bombs, tmp_path, kind, args):
    argv = [a.format(path=bombs["ipc"], out=tmp_path / "out") for a in args]
    result = probe(kind, bombs["ipc"], *argv)
    assert "body compression" in result["outcome"] or result["outcome"] in ("exit 1", "exit 2")
    assert result["peak"] < PEAK_BOUND
    assert not (tmp_path / "out").exists()


def test_an_ipc_body_compression_bomb_in_a_trace_is_refused_in_bounded_memory(bombs):
    result = probe("trace", bombs["trace"])
    assert "body compression" in result["outcome"]
    assert result["peak"] < PEAK_BOUND


def _rows(path, table: str) -> int:
    """Rows of a table of a report, read with plain sqlite3."""
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


@pytest.mark.parametrize(
    "kind, args",
    [("matrix", ()), ("cli", ("export", "{path}", "--format", "parquet", "-o", "{out}"))],
    ids=["open+read", "parquet"],
)
def test_declared_rows_are_compared_with_the_report_before_decoding(bombs, tmp_path, kind, args):
    argv = [a.format(path=bombs["rows"], out=tmp_path / "out") for a in args]
    result = probe(kind, bombs["rows"], *argv)
    steps = _rows(bombs["rows"], "steps")
    assert f"declares 2000000 rows; expected at most {steps}" in result["outcome"] or result["outcome"] == "exit 2"
    assert result["peak"] < PEAK_BOUND


def test_a_value_sharing_debug_cbor_is_refused_at_once(bombs, sample):
    result = probe("debug", sample.path, bombs["debug"])  # a report that records no debug identifier
    assert "shared by reference" in result["outcome"]
    assert result["seconds"] < 2 and result["peak"] < PEAK_BOUND


def test_graph_counts_are_checked_against_the_rows_they_count(bombs):
    result = probe("open", bombs["graph"])
    assert result["outcome"].startswith("InconsistentReportError")
    compute_sets = _rows(bombs["graph"], "compute_sets")
    assert (
        f"graph.num_compute_sets is 9223372036854775807, table compute_sets has {compute_sets} rows"
        in result["outcome"]
    )


def test_the_valid_report_stays_readable_within_the_bound(bombs):
    result = probe("matrix", bombs["report"])
    assert result["outcome"] == "ok" and result["peak"] < PEAK_BOUND
