"""The execution report (libpva section 2.2): runs, steps, per-IPU figures, totals, blocks, columnar calls."""

from __future__ import annotations

import shutil
import sqlite3

import numpy as np
import pyarrow as pa
import pytest
from reportbuilder import write_sample_report

import pva
from formats.pop.writer import ProfileWriter

IPU_COLUMNS = (
    "profiled",
    "cycles",
    "active_tiles",
    "cycles_base",
    "all_cycles_from_min",
    "all_cycles_from_max",
    "all_cycles_from_avg",
    "all_cycles_to_min",
    "all_cycles_to_max",
    "all_cycles_to_avg",
    "active_cycles_from_min",
    "active_cycles_from_max",
    "active_cycles_from_avg",
    "active_cycles_to_min",
    "active_cycles_to_max",
    "active_cycles_to_avg",
    "tile_cycles_max",
    "thread_balance",
    "tile_balance",
    "active_tile_balance",
    "data_in",
    "data_out",
    "data_balance",
)
TILE_BALANCE_KINDS = {
    "OnTileExecute",
    "GlobalExchange",
    "DoExchange",
    "StreamCopyBegin",
    "StreamCopyMid",
    "StreamCopyEnd",
}
DATA_KINDS = {"GlobalExchange", "DoExchange", "StreamCopyBegin", "StreamCopyMid", "StreamCopyEnd"}


@pytest.fixture(scope="module")
def report(sample):
    with pva.openReport(sample.path) as opened:
        yield opened


def _table(sample, name) -> list[dict]:
    columns, rows = sample.tables[name]
    return [dict(zip(columns, row)) for row in rows]


def _by_ipu(sample) -> dict[tuple[int, int], dict]:
    return {(row["step_id"], row["ipu"]): row for row in _table(sample, "steps_by_ipu")}


# -- runs ------------------------------------------------------------------------------------


def test_runs_names_periods_and_steps(report, sample):
    runs = report.execution.runs
    assert len(runs) == 2 and isinstance(runs, list)
    assert [r.name for r in runs] == ["first run", "second"]
    assert [(r.microseconds.start, r.microseconds.end) for r in runs] == [(0, 400), (1000, 1400)]
    assert isinstance(runs[0].microseconds, pva.Period)
    steps = report.execution.steps
    assert runs[0].steps == steps[:6] and runs[1].steps == steps[6:]
    assert [len(r.steps) for r in runs] == [6, 5]
    assert all(a is b for a, b in zip(runs[1].steps, steps[6:]))  # the same step objects


def test_run_cycles_by_ipu_and_parameters(report, sample):
    expected = {}
    for row in _table(sample, "run_cycles_by_ipu"):
        expected.setdefault(row["run"], []).append((row["ipu"], row["start"], row["end"]))
    for run in report.execution.runs:
        periods = run.cyclesByIpu
        assert [(p.start, p.end) for p in periods] == [(s, e) for _ipu, s, e in sorted(expected[run._id])]
        assert all(isinstance(p, pva.Period) for p in periods)
    first, second = report.execution.runs
    assert first.cyclesByIpu[0] == pva.Period(0, 830)  # the sample's clock: IPU 0 ran 830 cycles in run 0
    assert list(first.executionParameters) == [pva.EngineOption("debug.instrument", "true")]
    assert first.executionParameters[0].name == "debug.instrument"
    assert list(second.executionParameters) == []


def test_run_total_cycles(report):
    first = report.execution.runs[0].totalCycles
    assert (
        first.activeCompute,
        first.compute,
        first.interIpuExchange,
        first.streamCopyBegin,
        first.streamCopy,
        first.streamCopyEnd,
        first.internalExchange,
        first.sync,
        first.total,
    ) == (20, 120, 10, 2, 14, 2, 40, 60, 248)


# -- steps -----------------------------------------------------------------------------------


def test_steps_and_their_programs(report, sample):
    steps = report.execution.steps
    rows = _table(sample, "steps")
    assert len(steps) == len(rows) == 11
    for step, row in zip(steps, rows):
        program = step.program
        assert program.type.name == row["type"]
        if row["program"] is not None:
            assert program._id == row["program"]
            assert program is report.compilation._program_table.get(row["program"])
    kinds = [type(s.program).__name__ for s in steps]
    assert kinds == [
        "StreamCopyBeginProgram",
        "StreamCopyMidProgram",
        "StreamCopyEndProgram",
        "DoExchangeProgram",
        "OnTileExecuteProgram",
        "OnTileExecuteProgram",
        "SyncProgram",
        "ImplicitSyncProgram",
        "OnTileExecuteProgram",
        "OnTileExecuteProgram",
        "GlobalExchangeProgram",
    ]
    assert steps[4].program.computeset.name == "init/copy"
    assert steps[9].program.name == "layer1/bwd"


def test_implicit_sync_step(report):
    step = report.execution.steps[7]
    program = step.program
    assert isinstance(program, pva.ImplicitSyncProgram) and isinstance(program, pva.SyncProgram)
    assert program.type == pva.Program.Type.Sync
    assert program.name == "implicitSync"
    assert program.syncType == pva.Program.SyncType.Internal
    assert list(program.children) == []
    assert step.program is program  # the same object every time

    seen = []

    class Visitor(pva.ProgramVisitor):
        def visitSync(self, sync):
            seen.append(sync.name)

    program.accept(Visitor())
    assert seen == ["implicitSync"]


def test_cycles_by_tile(report, sample):
    expected = sample.matrix("step_cycles_by_tile")
    for step, row in zip(report.execution.steps, expected):
        cycles = step.cyclesByTile
        assert isinstance(cycles, list) and cycles == row.tolist()
        assert all(type(c) is int for c in cycles)
    assert report.execution.steps[0].cyclesByTile[:3] == expected[0, :3].tolist()


def test_every_ipu_member(report, sample):
    written = _by_ipu(sample)
    kinds = [row["type"] for row in _table(sample, "steps")]
    for step in report.execution.steps:
        ipus = step.ipus
        assert isinstance(ipus, list) and len(ipus) == 2
        for ipu in ipus:
            row = written[(step._id, ipu.id)]
            kind = kinds[step._id]
            base = row["cycles_base"]
            assert ipu.profiled is True
            assert ipu.cycles == row["cycles"]
            assert ipu.activeTiles == row["active_tiles"]
            assert ipu.threadBalance == row["thread_balance"]
            assert ipu.allCycles.cyclesFrom == pva.CycleRange(
                base + row["all_cycles_from_min"], base + row["all_cycles_from_max"], base + row["all_cycles_from_avg"]
            )
            assert ipu.allCycles.cyclesTo == pva.CycleRange(
                base + row["all_cycles_to_min"], base + row["all_cycles_to_max"], base + row["all_cycles_to_avg"]
            )
            active = ipu.activeCycles
            assert (active.cyclesFrom.min, active.cyclesFrom.max, active.cyclesFrom.average) == (
                base + row["active_cycles_from_min"],
                base + row["active_cycles_from_max"],
                base + row["active_cycles_from_avg"],
            )
            assert (active.cyclesTo.min, active.cyclesTo.max, active.cyclesTo.average) == (
                base + row["active_cycles_to_min"],
                base + row["active_cycles_to_max"],
                base + row["active_cycles_to_avg"],
            )
            balanced = kind in TILE_BALANCE_KINDS
            assert ipu.tileBalance == (row["tile_balance"] if balanced else 0.0)
            assert ipu.activeTileBalance == (row["active_tile_balance"] if balanced else 0.0)
            data = kind in DATA_KINDS
            assert ipu.dataIn == (row["data_in"] if data else 0)
            assert ipu.dataOut == (row["data_out"] if data else 0)
            assert ipu.dataBalance == (row["data_balance"] if data else 0.0)


def test_ipu_cycles_is_the_sum_over_its_tiles(report, sample):
    """Seed 004: Ipu.cycles is the sum of cycles on all tiles of the IPU."""
    matrix = sample.matrix("step_cycles_by_tile")
    for step in report.execution.steps:
        for ipu in step.ipus:
            assert ipu.cycles == int(matrix[step._id, ipu.id * 4 : (ipu.id + 1) * 4].sum())


def test_balances_and_data_only_for_the_program_kinds_the_seed_names(report):
    sync = report.execution.steps[6]
    assert sync.program.type == pva.Program.Type.Sync
    assert (
        sync.ipus[1].tileBalance,
        sync.ipus[1].activeTileBalance,
        sync.ipus[1].dataIn,
        sync.ipus[1].dataOut,
        sync.ipus[1].dataBalance,
    ) == (0.0, 0.0, 0, 0, 0.0)
    assert sync.ipus[1].threadBalance == 0.5
    execute = report.execution.steps[4]
    assert execute.ipus[1].activeTileBalance == 0.75 and execute.ipus[1].dataOut == 0
    copy = report.execution.steps[1]
    assert (copy.ipus[1].dataIn, copy.ipus[1].dataOut, copy.ipus[1].dataBalance) == (16, 32, 0.25)


def test_compute_sets_of_steps(report, sample):
    steps = report.execution.steps
    own = sample.matrix("step_cycles_by_tile")
    extra = sample.matrix("step_compute_set_cycles_by_tile")
    assert [cs.name for cs in steps[4].computeSets] == ["init/copy"]
    assert steps[4].computeSets[0].cyclesByTile == own[4].tolist()
    two = steps[9].computeSets
    assert [(cs.name, cs._id) for cs in two] == [("layer1/bwd", 2), ("layer1/fwd", 1)]
    assert two[0].cyclesByTile == own[9].tolist()
    assert two[1].cyclesByTile == extra[0].tolist()
    assert isinstance(two[0], pva.ComputeSet) and isinstance(two[0], pva.execution.ComputeSet)
    assert two[1] == report.compilation.computeSets[1]
    assert two[0].estimatedCyclesByTile == report.compilation.computeSets[2].estimatedCyclesByTile
    assert list(steps[0].computeSets) == [] and list(steps[6].computeSets) == []


def test_vertex_instances_of_an_executed_compute_set(report):
    measured = report.execution.steps[5].computeSets[0].vertices
    assert [(v.type.name, v.count, v.cycles, v.estimatedCycles) for v in measured] == [
        ("popops::ScaledAddSupervisor<float,float,true>", 4, 400, 100),
        ("SumVertex", 2, 60, 200),
    ]
    assert isinstance(measured[0], pva.VertexInstances) and isinstance(measured[0], pva.execution.VertexInstances)
    compiled = report.compilation.computeSets[1].vertices
    assert measured[0].countByTile == compiled[0].countByTile
    fallback = report.execution.steps[4].computeSets[0].vertices
    assert [(v.type.name, v.count, v.cycles) for v in fallback] == [
        ("poplar_rt::DstStridedCopyDA32", compiled_count(report, 0), 0)
    ]


def compiled_count(report, compute_set: int) -> int:
    return report.compilation.computeSets[compute_set].vertices[0].count


# -- totals and blocks ------------------------------------------------------------------------


def test_total_cycles_every_activity(report, sample):
    totals = report.execution.totalCycles
    rows = _table(sample, "cycle_totals")
    names = {
        "activeCompute": "active_compute",
        "compute": "compute",
        "interIpuExchange": "inter_ipu_exchange",
        "streamCopyBegin": "stream_copy_begin",
        "streamCopy": "stream_copy",
        "streamCopyEnd": "stream_copy_end",
        "internalExchange": "internal_exchange",
        "sync": "sync",
        "total": "total",
    }
    for attribute, column in names.items():
        assert getattr(totals, attribute) == sum(r[column] for r in rows), attribute
    assert totals.total == 496 and totals.activeCompute == 40 and totals.sync == 120
    assert isinstance(totals, pva.TileCycleTotals)


def test_blocks_of_a_tile(report):
    blocks = report.execution.blocks(0)
    assert [(b.tile, b.cyclesFrom, b.cyclesTo, b.isStreamCopy, b.isCommon, b.isOverflow) for b in blocks] == [
        (0, 10, 90, False, False, False),
        (0, 100, 140, True, False, False),
    ]
    assert blocks[0].program == report.compilation._program_table.get(5)
    assert blocks[1].program.type == pva.Program.Type.StreamCopyMid
    (other,) = report.execution.blocks(3)
    assert other.program is None and other.isCommon and other.isOverflow
    assert list(report.execution.blocks(1)) == []
    assert list(report.execution.blocks(np.int64(3)))[0].id == 2
    with pytest.raises(TypeError):
        report.execution.blocks("0")


# -- compile-only ----------------------------------------------------------------------------


def test_compile_only_report_has_no_runs_and_zero_totals(compile_only):
    with pva.openReport(compile_only.path) as report:
        execution = report.execution
        assert list(execution.runs) == [] and not execution.runs
        assert list(execution.steps) == []
        totals = execution.totalCycles
        assert totals.total == 0
        assert all(getattr(totals, name) == 0 for name in pva.TileCycleTotals.__slots__)
        assert execution.cyclesByTileArray().shape == (0, 0)
        assert execution.cyclesByTileTotals().size == 0
        assert execution.cyclesByTileTable().num_rows == 0
        assert list(execution.iterCyclesByTile()) == []
        assert list(execution.blocks(0)) == []
        assert repr(execution) == "<ExecutionReport 0 run(s), 0 steps>"


# -- columnar access (pva additions) -----------------------------------------------------------


def test_cycles_by_tile_array_and_selection(report, sample):
    matrix = sample.matrix("step_cycles_by_tile")
    execution = report.execution
    whole = execution.cyclesByTileArray()
    assert whole.dtype == np.uint64 and np.array_equal(whole, matrix)
    assert np.array_equal(execution.cyclesByTileArray(run=1), matrix[6:])
    assert np.array_equal(execution.cyclesByTileArray(run=execution.runs[0]), matrix[:6])
    assert np.array_equal(execution.cyclesByTileArray(run=1, start=1, stop=3), matrix[7:9])
    assert np.array_equal(execution.cyclesByTileArray(start=-2), matrix[-2:])
    assert np.array_equal(execution.cyclesByTileArray(start=3, stop=5), matrix[3:5])
    assert execution.cyclesByTileArray(start=5, stop=3).shape == (0, 8)
    assert np.array_equal(execution.runs[1].cyclesByTileArray(), matrix[6:])
    with pytest.raises(IndexError, match="run 2 out of range"):
        execution.cyclesByTileArray(run=2)
    with pytest.raises(TypeError):
        execution.cyclesByTileArray(run="first run")


def test_cycles_by_tile_totals_and_chunks(report, sample):
    matrix = sample.matrix("step_cycles_by_tile")
    execution = report.execution
    totals = execution.cyclesByTileTotals()
    assert totals.dtype == np.uint64 and totals.tolist() == matrix.sum(axis=0).tolist()
    assert execution.cyclesByTileTotals(run=0).tolist() == matrix[:6].sum(axis=0).tolist()
    assert execution.runs[1].cyclesByTileTotals().tolist() == matrix[6:].sum(axis=0).tolist()
    chunks = list(execution.iterCyclesByTile(run=1))
    assert chunks[0][0] == 6
    assert np.array_equal(np.vstack([block for _first, block in chunks]), matrix[6:])


def test_cycles_by_tile_table(report, sample):
    matrix = sample.matrix("step_cycles_by_tile")
    table = report.execution.cyclesByTileTable(run=1)
    assert table.column_names == ["step", "cyclesByTile"]
    assert table.schema.field("cyclesByTile").type == pa.list_(pa.field("item", pa.uint64(), nullable=False), 8)
    assert table.column("step").to_pylist() == list(range(6, 11))
    assert table.column("cyclesByTile").to_pylist() == matrix[6:].tolist()


def test_columnar_calls_stream_many_chunks(tmp_path):
    sample = write_sample_report(tmp_path / "small.pop", chunk_bytes=64)  # one row per chunk
    matrix = sample.matrix("step_cycles_by_tile")
    with pva.openReport(sample.path) as report:
        execution = report.execution
        assert report._reader.matrix("step_cycles_by_tile").rows_per_chunk == 1
        assert [first for first, _ in execution.iterCyclesByTile(start=2, stop=6)] == [2, 3, 4, 5]
        assert execution.cyclesByTileTotals(start=2, stop=9).tolist() == matrix[2:9].sum(axis=0).tolist()
        assert execution.cyclesByTileTable().column("cyclesByTile").to_pylist() == matrix.tolist()
        per_tile = [sum(step.cyclesByTile[t] for step in execution.runs[0].steps) for t in range(8)]
        assert per_tile == execution.runs[0].cyclesByTileTotals().tolist()


# -- profiling of only some IPUs --------------------------------------------------------------


def _write_partial(path) -> None:
    """Two steps on two IPUs: IPU 1 not profiled in step 0, and without a row in step 1."""
    with ProfileWriter(path, producer="tests") as w:
        w.set_target(num_ipus=2, tiles_per_ipu=2, bytes_per_tile=1024)
        w.insert("programs", ("id", "type", "name"), [(0, "DoExchange", "x")])
        w.insert("runs", ("id", "name", "first_step", "num_steps"), [(0, "only", 0, 2)])
        w.insert("steps", ("id", "run", "type", "program"), [(0, 0, "DoExchange", 0), (1, 0, "DoExchange", 0)])
        row = {
            "cycles": 70,
            "active_tiles": 2,
            "cycles_base": 1000,
            "all_cycles_from_min": 1,
            "all_cycles_from_max": 2,
            "all_cycles_from_avg": 1,
            "all_cycles_to_min": 30,
            "all_cycles_to_max": 40,
            "all_cycles_to_avg": 35,
            "active_cycles_from_min": 1,
            "active_cycles_from_max": 2,
            "active_cycles_from_avg": 1,
            "active_cycles_to_min": 30,
            "active_cycles_to_max": 40,
            "active_cycles_to_avg": 35,
            "thread_balance": 0.5,
            "tile_balance": 0.9,
            "active_tile_balance": 0.8,
            "data_in": 64,
            "data_out": 128,
            "data_balance": 0.7,
        }
        columns = ("step_id", "ipu", "profiled", *row)
        w.insert(
            "steps_by_ipu", columns, [(0, 0, 1, *row.values()), (0, 1, 0, *row.values()), (1, 0, 1, *row.values())]
        )
        w.matrix("step_cycles_by_tile").append(np.array([[30, 40, 0, 0], [31, 39, 0, 0]]))


def test_ipus_not_profiled_read_zero(tmp_path):
    path = tmp_path / "partial.pop"
    _write_partial(path)
    with pva.openReport(path) as report:
        first, second = report.execution.steps
        profiled, skipped = first.ipus
        assert profiled.profiled and profiled.cycles == 70 and profiled.dataOut == 128
        assert profiled.activeCycles.cyclesTo.max == 1040 and profiled.tileBalance == 0.9
        for ipu in (skipped, second.ipus[1]):
            assert ipu.profiled is False
            assert (
                ipu.cycles,
                ipu.activeTiles,
                ipu.threadBalance,
                ipu.tileBalance,
                ipu.activeTileBalance,
                ipu.dataIn,
                ipu.dataOut,
                ipu.dataBalance,
            ) == (0, 0, 0.0, 0.0, 0.0, 0, 0, 0.0)
            assert ipu.allCycles == pva.CyclesInfo(pva.CycleRange(0, 0, 0), pva.CycleRange(0, 0, 0))
            assert ipu.activeCycles.cyclesFrom.max == 0 and ipu.activeCycles.cyclesTo.max == 0
        assert [ipu.id for ipu in second.ipus] == [0, 1]
        assert second.ipus[0].cycles == 70
        assert repr(skipped) == "<Ipu 1 of step 0, not profiled>"
        assert second.cyclesByTile == [31, 39, 0, 0]


# -- reprs -----------------------------------------------------------------------------------


def test_reprs(report):
    execution = report.execution
    assert repr(execution) == "<ExecutionReport 2 run(s), 11 steps>"
    assert repr(execution.runs[0]) == "<Run 0 'first run', 6 steps>"
    assert repr(execution.steps[4]) == "<ExecutionStep 4 OnTileExecute>"
    assert repr(execution.steps[7]) == "<ExecutionStep 7 Sync 'implicitSync'>"
    ipu = execution.steps[0].ipus[0]
    assert repr(ipu) == f"<Ipu 0 of step 0: {ipu.cycles:,} cycles on {ipu.activeTiles} tiles>"
    assert repr(pva.CycleRange(1, 5, 3)) == "<CycleRange min 1 max 5 average 3>"
    assert repr(pva.CyclesInfo(pva.CycleRange(1, 2, 1), pva.CycleRange(8, 9, 8))) == "<CyclesInfo from 1..2 to 8..9>"
    assert repr(pva.Period(10, 20)) == "<Period 10..20>"
    assert repr(execution.totalCycles) == "<TileCycleTotals total 496 cycles>"
    assert repr(execution.blocks(0)[0]) == "<Block 0 tile 0 cycles 10..90>"
    assert repr(execution.steps[9].computeSets[1]) == "<ComputeSet 1 'layer1/fwd' in step 9>"
    assert repr(execution.steps[5].computeSets[0].vertices[1]) == "<VertexInstances 2 x SumVertex, 60 cycles>"


def test_names_are_in_pva_and_pva_core():
    for name in (
        "ExecutionReport",
        "ExecutionStep",
        "Run",
        "Ipu",
        "CycleRange",
        "CyclesInfo",
        "TileCycleTotals",
        "Period",
        "Block",
    ):
        assert getattr(pva, name) is getattr(pva.pva_core, name)
    assert pva.ComputeSet is not pva.execution.ComputeSet  # pva::execution::ComputeSet is its subclass
    assert issubclass(pva.execution.ComputeSet, pva.ComputeSet)


def test_value_classes_compare_by_value():
    assert pva.Period(1, 2) == pva.Period(1, 2) and pva.Period(1, 2) != pva.Period(1, 3)
    assert {pva.CycleRange(1, 2, 3)} == {pva.CycleRange(1, 2, 3)}
    assert pva.TileCycleTotals(*range(9)) == pva.TileCycleTotals(*range(9))
    assert pva.TileCycleTotals(*range(9)).streamCopyEnd == 5
    with pytest.raises(TypeError):
        pva.TileCycleTotals(1, 2)


# -- inconsistent reports ---------------------------------------------------------------------


def _broken(sample, tmp_path, *statements):
    path = tmp_path / "broken.pop"
    shutil.copyfile(sample.path, path)
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return pva.openReport(path)


@pytest.mark.parametrize(
    "statements, touch, fragment",
    [
        (["UPDATE runs SET num_steps = 9 WHERE id = 1"], lambda e: e.runs, "run 1 covers steps 6..14"),
        (["UPDATE steps SET id = 20 WHERE id = 10"], lambda e: e.steps, "step ids must be 0..10"),
        (
            ["UPDATE steps_by_ipu SET ipu = 5 WHERE step_id = 3 AND ipu = 1"],
            lambda e: e.steps[0].ipus[1].cycles,
            "steps_by_ipu has a row for step 3 on IPU 5, but the target has 2 IPUs",
        ),
        (
            ["UPDATE steps_by_ipu SET step_id = 40 WHERE step_id = 3 AND ipu = 1"],
            lambda e: e.steps[0].ipus[1].cycles,
            "rows for steps 0..40 on IPU 1, but the report has 11 steps",
        ),
        (
            ["UPDATE steps_by_ipu SET cycles = 'many' WHERE step_id = 3"],
            lambda e: e.steps[0].ipus[0].cycles,
            "expected numbers for cycles of IPU 0, found 'many'",
        ),
        (
            ["UPDATE step_compute_sets SET compute_set = 9 WHERE step_id = 4"],
            lambda e: e.steps[4].computeSets,
            "step 4 executes compute set 9, which is not defined",
        ),
        (
            ["UPDATE steps SET program = 99 WHERE id = 2"],
            lambda e: e.steps[2].program,
            "program 99 is referenced but not defined",
        ),
        (
            ["DELETE FROM steps WHERE id = 10", "UPDATE runs SET num_steps = 4 WHERE id = 1"],
            lambda e: e.cyclesByTileTotals(),
            "'step_cycles_by_tile' declares 11 rows; expected at most 10",
        ),
    ],
)
def test_inconsistent_execution_data_is_reported(sample, tmp_path, statements, touch, fragment):
    report = _broken(sample, tmp_path, *statements)
    try:
        with pytest.raises(pva.InconsistentReportError) as info:
            touch(report.execution)
        assert fragment in str(info.value)
        assert str(tmp_path / "broken.pop") in str(info.value)
        assert isinstance(info.value, pva.PvaError) and isinstance(info.value, OSError)
    finally:
        report.close()


def test_totals_over_many_chunks_are_summed_by_several_threads(tmp_path, monkeypatch):
    import pva.execution as execution_module

    path = tmp_path / "many.pop"
    rng = np.random.default_rng(5)
    wide = rng.integers(0, 1 << 40, size=(70, 4), dtype=np.uint64)  # some chunks need 64 bits
    narrow = rng.integers(0, 60000, size=(70, 4)).astype(np.uint64)
    cycles = np.vstack([narrow, wide])
    with ProfileWriter(path, producer="tests", chunk_bytes=8 * 4 * 3) as w:  # three rows per chunk
        w.set_target(num_ipus=1, tiles_per_ipu=4, bytes_per_tile=1024)
        w.insert("programs", ("id", "type"), [(0, "OnTileExecute")])
        w.insert("runs", ("id", "name", "first_step", "num_steps"), [(0, "a", 0, 100), (1, "b", 100, 40)])
        w.insert(
            "steps", ("id", "run", "type", "program"), [(s, int(s >= 100), "OnTileExecute", 0) for s in range(140)]
        )
        w.matrix("step_cycles_by_tile").append(cycles)
    monkeypatch.setattr(execution_module, "_SUM_THREADS", 4)
    with pva.openReport(path) as report:
        execution = report.execution
        assert execution.cyclesByTileTotals().tolist() == cycles.sum(axis=0).tolist()
        assert execution.cyclesByTileTotals(run=0).tolist() == cycles[:100].sum(axis=0).tolist()
        assert execution.cyclesByTileTotals(start=7, stop=131).tolist() == cycles[7:131].sum(axis=0).tolist()
        assert np.array_equal(execution.cyclesByTileArray(run=1), cycles[100:])
