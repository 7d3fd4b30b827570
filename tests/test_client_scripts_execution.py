"""Client-style scripts of the execution and trace APIs run unmodified, on written and simulated reports.

Each script is written the way real clients use libpva's Python module (see pva-python-api.md
sections 1.12-1.17 and 2); its result is checked against values computed independently from the
rows written, or with plain SQL on the file.
"""

from __future__ import annotations

import glob
import os
import sqlite3

import pytest

import pva
from formats.pop.reader import ProfileReader
from formats.trace.writer import TraceWriter

# -- the client scripts ------------------------------------------------------------------------


def total_ipu0_cycles(report):
    """libpva tutorial: cycles of the first IPU summed over every step."""
    return sum(step.ipus[0].cycles for step in report.execution.steps)


def per_tile_cycles_of_run(report, index):
    """TensorFlow's execution-report check: per-tile cycles summed over a run's steps."""
    steps = report.execution.runs[index].steps
    n_tiles = len(steps[0].cyclesByTile)
    return [sum(step.cyclesByTile[t] for step in steps) for t in range(n_tiles)]


def stream_copy_data_out(report, all_ipus=False):
    """Bytes sent by StreamCopyMid steps of the first run."""
    total = 0
    for step in report.execution.runs[0].steps:
        if step.program.type == pva.Program.Type.StreamCopyMid:
            ipus = step.ipus if all_ipus else [step.ipus[0]]
            total += sum(ipu.dataOut for ipu in ipus)
    return total


def compute_io_overlap(report):
    """Compute/IO overlap from [cyclesFrom.max, cyclesTo.max] windows recorded by a visitor per step."""
    compute, stream = [], []

    class Windows(pva.ProgramVisitor):
        def __init__(self, cyclesFrom, cyclesTo):
            self.cyclesFrom = cyclesFrom
            self.cyclesTo = cyclesTo
            super().__init__()

        def visitOnTileExecute(self, _):
            compute.append([self.cyclesFrom.max, self.cyclesTo.max])

        def visitStreamCopyMid(self, _):
            stream.append([self.cyclesFrom.max, self.cyclesTo.max])

    for step in report.execution.runs[0].steps:
        ipu = step.ipus[0]
        step.program.accept(Windows(ipu.activeCycles.cyclesFrom, ipu.activeCycles.cyclesTo))
    overlap = 0
    for c_low, c_high in compute:
        for s_low, s_high in stream:
            if c_low < s_high and s_low < c_high:
                overlap += min(c_high, s_high) - max(c_low, s_low)
    return compute, stream, overlap


class EpochStats:
    longest = None
    shortest = None
    average = 0
    count = 0


def epoch_stats(trace_path):
    """The PVTI tutorial: longest, shortest and mean duration of events labelled Epoch*."""

    def traverse(events, stats):
        for event in events:
            if event.label.startswith("Epoch"):
                stats.count += 1
                stats.average += (event.duration - stats.average) / stats.count
                if stats.longest is None or event.duration > stats.longest.duration:
                    stats.longest = event
                if stats.shortest is None or event.duration < stats.shortest.duration:
                    stats.shortest = event
            traverse(event.children(), stats)

    trace = pva.openTrace(trace_path)
    stats = EpochStats()
    for process in trace.processes:
        for thread in process.threads:
            traverse(thread.events, stats)
    return stats


# -- on the written sample report --------------------------------------------------------------


@pytest.fixture(scope="module")
def report(sample):
    with pva.openReport(sample.path) as opened:
        yield opened


def _rows(sample, table):
    columns, rows = sample.tables[table]
    return [dict(zip(columns, row)) for row in rows]


def test_total_ipu0_cycles(report, sample):
    expected = sum(r["cycles"] for r in _rows(sample, "steps_by_ipu") if r["ipu"] == 0)
    assert total_ipu0_cycles(report) == expected == 4414


def test_per_tile_cycles_of_a_run(report, sample):
    matrix = sample.matrix("step_cycles_by_tile")
    assert per_tile_cycles_of_run(report, 0) == matrix[:6].sum(axis=0).tolist()
    assert per_tile_cycles_of_run(report, 1) == matrix[6:].sum(axis=0).tolist()
    assert per_tile_cycles_of_run(report, 1) == report.execution.runs[1].cyclesByTileTotals().tolist()


def test_stream_copy_data_out(report, sample):
    rows = {(r["step_id"], r["ipu"]): r for r in _rows(sample, "steps_by_ipu")}
    assert stream_copy_data_out(report) == rows[(1, 0)]["data_out"] == 0
    assert stream_copy_data_out(report, all_ipus=True) == rows[(1, 0)]["data_out"] + rows[(1, 1)]["data_out"] == 32


def test_compute_io_overlap(report, sample):
    rows = {(r["step_id"], r["ipu"]): r for r in _rows(sample, "steps_by_ipu")}

    def window(step):
        r = rows[(step, 0)]
        return [r["cycles_base"] + r["active_cycles_from_max"], r["cycles_base"] + r["active_cycles_to_max"]]

    compute, stream, overlap = compute_io_overlap(report)
    assert compute == [window(4), window(5)]  # the OnTileExecute steps of run 0
    assert stream == [window(1)]  # its StreamCopyMid step
    assert overlap == 0  # the sample's steps run one after another


# -- on a written trace ----------------------------------------------------------------------


def test_epoch_statistics_of_a_written_trace(tmp_path):
    path = tmp_path / "epochs.pvti"
    with TraceWriter(path) as w:
        w.add_events(
            1, 1, ["Epoch:0", "step", "Epoch:1", "step", "other"], [0, 10, 1000, 1010, 5000], [900, 100, 600, 50, 10]
        )
        w.add_events(1, 2, ["outer", "Epoch:2"], [0, 100], [5000, 1500])  # an Epoch nested in another event
    stats = epoch_stats(str(path))
    assert stats.count == 3
    assert (stats.longest.label, stats.longest.duration) == ("Epoch:2", 1500)
    assert (stats.shortest.label, stats.shortest.duration) == ("Epoch:1", 600)
    assert stats.average == pytest.approx(1000.0)


# -- on a simulated report ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    from simulator.presets import run_preset

    directory = tmp_path_factory.mktemp("simulated")
    run_preset(
        "mnist-mlp", {"tiles-per-ipu": 32, "batch": 4, "hidden": 16, "steps": 2, "runs": 2}, directory=str(directory)
    )
    (trace_path,) = glob.glob(os.path.join(directory, "*.pvti"))
    return os.path.join(directory, "profile.pop"), trace_path


def _sql(path, query, params=()):
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(query, params).fetchall()
    finally:
        conn.close()


def test_scripts_on_a_simulated_report(simulated):
    path, _ = simulated
    with pva.openReport(path) as report:
        ((expected,),) = _sql(path, "SELECT sum(cycles) FROM steps_by_ipu WHERE ipu = 0")
        assert total_ipu0_cycles(report) == expected > 0

        reader = ProfileReader(path)
        try:
            first, count = _sql(path, "SELECT first_step, num_steps FROM runs WHERE id = 0")[0]
            matrix = reader.matrix("step_cycles_by_tile").rows(first, first + count)
        finally:
            reader.close()
        per_tile = per_tile_cycles_of_run(report, 0)
        assert per_tile == matrix.sum(axis=0).tolist() and len(per_tile) == 32 and sum(per_tile) > 0

        ((data_out,),) = _sql(
            path,
            "SELECT coalesce(sum(b.data_out), 0) FROM steps s JOIN steps_by_ipu b "
            "ON b.step_id = s.id WHERE s.run = 0 AND s.type = 'StreamCopyMid' AND b.ipu = 0",
        )
        assert stream_copy_data_out(report) == data_out

        compute, stream, overlap = compute_io_overlap(report)
        windows = _sql(
            path,
            "SELECT s.type, b.cycles_base + b.active_cycles_from_max, "
            "b.cycles_base + b.active_cycles_to_max FROM steps s JOIN steps_by_ipu b "
            "ON b.step_id = s.id WHERE s.run = 0 AND b.ipu = 0 ORDER BY s.id",
        )
        assert compute == [[a, b] for kind, a, b in windows if kind == "OnTileExecute"]
        assert stream == [[a, b] for kind, a, b in windows if kind == "StreamCopyMid"]
        assert compute and stream and overlap >= 0


def test_data_out_of_a_simulated_run_that_copies_to_the_host(simulated):
    path, _ = simulated
    with pva.openReport(path) as report:
        rows = _sql(
            path,
            "SELECT s.run, sum(b.data_out) FROM steps s JOIN steps_by_ipu b ON b.step_id = s.id "
            "WHERE s.type = 'StreamCopyMid' GROUP BY s.run ORDER BY s.run",
        )
        by_run = {
            run._id: sum(
                ipu.dataOut
                for step in run.steps
                if step.program.type == pva.Program.Type.StreamCopyMid
                for ipu in step.ipus
            )
            for run in report.execution.runs
        }
        assert by_run == dict(rows) | {r: 0 for r in by_run if r not in dict(rows)}
        assert any(by_run.values())


def test_epoch_traversal_on_a_simulated_trace(simulated):
    _, trace_path = simulated
    stats = epoch_stats(trace_path)
    assert stats.count == 0 and stats.longest is None  # the simulator's host events are phases, not epochs
    with pva.openTrace(trace_path) as trace:

        def count(events):
            return sum(1 + count(e.children()) for e in events)

        visited = sum(count(t.events) for p in trace.processes for t in p.threads)
        labels = {e.label for p in trace.processes for t in p.threads for e in t.events}
    ((expected,),) = _sql(trace_path, "SELECT count(*) FROM events")
    assert visited == expected > 0
    assert "compile" in labels and any(label.startswith("run") for label in labels)
