"""`pva optime` divides the run's time, each cycle counted once: on every simulator preset its parts add
up to the run's cycles, and `pva summary` and the HTML timeline's legend give the same figures."""

from __future__ import annotations

import json

import numpy as np
import pytest

from formats.pop.reader import ProfileReader
from pva.analysis.html import chart_data
from pva.analysis.optime import counted_once
from pva.cli import main
from simulator.presets import PRESETS, run_preset

#: Small knobs so each preset simulates in a second or two; the rest keep their defaults.
KNOBS = {
    "matmul": {"m": 64, "k": 96, "n": 64},
    "matmul-2ipu": {"m": 128, "k": 128, "n": 128, "ipus": 2},
    "conv": {"batch": 1, "in-chans": 16, "out-chans": 16, "height": 8, "width": 8},
    "mnist-mlp": {"batch": 4, "hidden": 32, "steps": 2, "runs": 2},
    "cnn": {"batch": 1, "channels": 8, "layers": 2, "size": 8},
    "matrix-vector": {"rows": 100, "cols": 40},
    "bert-encoder": {"layers": 1, "seq": 16, "hidden": 32},
    "large": {"ipus": 2, "layers": 2, "seq": 16, "hidden": 32, "heads": 2, "tiles-per-layer": 4},
}
CASES = sorted(set(PRESETS) | {"matmul-2ipu"})


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
    name = "matmul" if case == "matmul-2ipu" else case
    run_preset(name, {"tiles-per-ipu": 16, **KNOBS.get(case, {})}, str(tmp_path), timestamp=1_700_000_000.0)
    report = str(tmp_path / "profile.pop")
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
