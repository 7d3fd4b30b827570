"""`pva optime` divides the run's time, each cycle counted once: on every simulator preset its parts add
up to the run's cycles, and `pva summary` and the HTML timeline's legend give the same figures."""

from __future__ import annotations

import json

import numpy as np
import pytest
from preset_cases import CASES, simulate_case

from formats.pop.reader import ProfileReader
from pva.analysis.html import chart_data
from pva.analysis.optime import counted_once
from pva.cli import main


def test_overlapping_intervals_are_counted_once_by_rank():
    # a sync (rank 0) from 0 to 100 spans an exchange (2) from 10 to 40 and compute (3) from 30 to 90
    cycles = counted_once(np.array([0, 10, 30]), np.array([100, 40, 90]), np.array([0, 2, 3]))
    assert cycles.tolist() == [10 + 10, 20, 60]
    assert cycles.sum() == 100


def _run(capsys, *args) -> str:
    capsys.readouterr()
    assert main(list(args)) == 0
    return capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_optime_parts_add_up_to_the_run_cycles(tmp_path, capsys, case):
    report = str(simulate_case(case, tmp_path))
    summary = json.loads(_run(capsys, "summary", report, "--json"))
    run_cycles = summary["execution"]["total_cycles"]
    total = summary["execution"]["run_time"]["total_cycles"]
    assert abs(total - run_cycles) <= 0.01 * run_cycles, (total, run_cycles)
    for mode in ("total", "each"):
        rows = json.loads(_run(capsys, "optime", report, "--mode", mode, "--json"))
        parts = sum(row["cycles"] for row in rows)
        assert abs(sum(row["percent"] for row in rows) - 100) <= 0.0005 * len(rows) + 1e-9  # each rounded to 0.001
        assert abs(parts - run_cycles) <= 0.01 * run_cycles, (mode, parts, run_cycles)
    by_type = summary["execution"]["run_time"]["by_type"]
    totals = json.loads(_run(capsys, "optime", report, "--json"))
    if "Sync" in by_type:  # the same figure in optime's total mode and the summary
        assert {r["type"]: r["cycles"] for r in totals}["Sync"] == by_type["Sync"]
    reader = ProfileReader(report)
    try:
        timeline = chart_data.timeline(reader)
    finally:
        reader.close()
    legend = dict(zip(timeline["types"], sum(ipu["cycles_by_type"] for ipu in timeline["ipus"]).tolist()))
    if len(timeline["ipus"]) == 1:  # one IPU: the legend's cycles are the run's, as optime counts them
        assert abs(sum(legend.values()) - run_cycles) <= 0.01 * run_cycles
        if "Sync" in legend:
            assert legend["Sync"] == by_type["Sync"]
