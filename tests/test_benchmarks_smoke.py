"""Smoke run of the benchmark harness: it works end to end and reports every figure (not the speed)."""

from __future__ import annotations

import json
import math
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

MEASUREMENTS = {
    "open",
    "first-answer-time",
    "first-answer-memory",
    "first-answer-streaming",
    "tile-totals",
    "step-walk",
    "visitor",
    "visitor-growth",
    "sql-aggregate",
    "write",
    "file-size",
    "convert-throughput",
    "convert-memory",
    "startup-help",
    "startup-info",
    "startup-sql",
    "query-reports-aggregate-3",
    "query-reports-join-3",
    "query-reports-aggregate-30",
    "query-reports-join-30",
    "fleet-add",
    "fleet-query",
    "fleet-report-cost",
    "debug-contexts",
    "chrome-export-rate",
    "chrome-export-memory",
    "chrome-import-rate",
    "chrome-import-memory",
    *(
        f"client-{pattern}"
        for pattern in (
            "nalm-tile-bytes",
            "nalm-tile-variables",
            "nalm-ipu",
            "nalm-variable",
            "lowered-for-tile",
            "always-live-for-tile",
            "tile-categories",
            "step-cycles-by-tile",
            "cs-estimated-by-tile",
            "control-code-by-tile",
            "code-bytes-by-tile",
            "count-by-tile",
        )
    ),
}
#: Figures reported beside a baseline without a target.
REPORTED = {"sql-aggregate", "fleet-add", "fleet-report-cost"}


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """The harness's environment, with its report cache in a temporary directory shared by the tests."""
    return dict(os.environ, PVA_BENCH_CACHE=str(tmp_path_factory.mktemp("bench-cache")))


def test_tiny_run_reports_every_measurement(tmp_path, env):
    out = tmp_path / "figures.json"
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--size", "tiny", "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(out.read_text())

    assert document["size"] == "tiny" and document["reference_size"] == "tiny"
    assert document["machine"]["nproc"] >= 1 and document["machine"]["cpu"]
    assert document["date"][:2] == "20"
    report = document["reports"]["tiny"]
    assert report["steps"] > 0 and report["compute_sets"] > 0 and report["programs"] > 0
    assert report["step_matrix_rows"] == report["steps"]  # tile-level cycles for every step

    rows = {row["name"]: row for row in document["measurements"]}
    assert set(rows) == MEASUREMENTS
    for name, row in rows.items():
        assert row["ours"] > 0 and row["baseline"] > 0, name
        assert math.isclose(row["ratio"], row["ours"] / row["baseline"]), name
        assert row["unit"] and row["target"] and row["measurement"] and row["baseline_what"], name
        assert row["met"] in (True, False, None), name
    # on tiny, opening's fixed cost outweighs loading the programs, starting an export outweighs writing
    # it, and starting the second process of an import and merging its halves weigh more than reading
    large_only = {"visitor", "chrome-export-rate", "chrome-import-rate"}
    assert all(rows[name]["met"] is None for name in large_only)
    assert all(rows[name]["met"] is None for name in REPORTED)  # reported beside a baseline, no target
    assert all(rows[name]["met"] is not None for name in MEASUREMENTS - REPORTED - large_only)
    assert rows["fleet-add"]["details"]["reports"] == 30 and rows["fleet-add"]["details"]["dataset_mb"] > 0
    assert rows["first-answer-time"]["details"]["total_bytes"] > 0

    # the printed table has the same rows, one line each, with the header
    table = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| measurement | ours | baseline | ratio | target | met |")
    assert len(table) == 1 + len(MEASUREMENTS)


def test_only_runs_the_named_measurements(tmp_path, env):
    out = tmp_path / "figures.json"
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--size", "tiny", "--only", "open", "file-size", "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    names = [row["name"] for row in json.loads(out.read_text())["measurements"]]
    assert names == ["open", "file-size"]
