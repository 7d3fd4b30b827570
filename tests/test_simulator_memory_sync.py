"""Simulator fidelity of memory, sync, exchange and overlapped I/O.

The references are real Poplar figures: the tutorial 7 execution summary kept in
tests/data/samples (see its README) and the "adder" memory summary next to it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pytest
from simulator_invariants import check_report

import pva
from formats.legacy.text_summary import read_profile_summary
from formats.pop.reader import ProfileReader
from simulator.errors import GraphError
from simulator.presets import run_preset
from simulator.target import Target


@contextlib.contextmanager
def _reader(path):
    r = ProfileReader(str(path))
    try:
        yield r
    finally:
        r.close()


TS = "2024-01-01T00:00:00Z"
SAMPLES = Path(__file__).parent / "data" / "samples"
TUT7 = SAMPLES / "graphcore_printProfileSummary_execution__examples-tut7-matrix-vector_doc2020-04.txt"
MNIST = {"batch": 4, "hidden": 16, "steps": 3, "runs": 2, "tiles-per-ipu": 64}


def _sample_figure(label: str) -> int:
    (summary,) = read_profile_summary(TUT7)
    return int(summary.value("Execution", label).number)


@pytest.fixture(scope="module")
def tut7(tmp_path_factory):
    """Tutorial 7 as the sample ran it: a 10000 x 1000 matrix-vector product on a Mk1 IPU Model."""
    d = tmp_path_factory.mktemp("tut7")
    run_preset(
        "matrix-vector",
        {"rows": 10000, "cols": 1000, "arch": "ipu1", "streams": 1},
        str(d),
        timestamp=TS,
        functional=False,
    )
    return d / "profile.pop"


@pytest.fixture(scope="module")
def mnist(tmp_path_factory):
    d = tmp_path_factory.mktemp("mnist")
    run_preset("mnist-mlp", MNIST, str(d), timestamp=TS)
    return d / "profile.pop"


def _totals(path) -> dict[str, int]:
    with _reader(path) as r:
        row = r.query_one(
            "SELECT sum(active_compute), sum(compute), sum(internal_exchange), sum(sync), "
            "sum(stream_copy_begin) + sum(stream_copy) + sum(stream_copy_end), sum(total) "
            "FROM cycle_totals"
        )
        (cycles,) = r.query_one('SELECT max("end" - start) FROM run_cycles_by_ipu')
    keys = ("active_compute", "compute", "exchange", "sync", "host", "total")
    return dict(zip(keys, row)) | {"cycles": cycles}


def test_tutorial7_sync_and_exchange_match_the_sample(tut7):
    got = _totals(tut7)
    # compute is the vertices' own estimates and stays as it was
    assert got["active_compute"] == 5_380_000
    assert abs(got["active_compute"] / _sample_figure("Total compute cycles (excluding idle threads)") - 1) < 0.02
    for key, label in (("exchange", "Total IPU exchange cycles"), ("sync", "Total sync cycles")):
        ratio = got[key] / _sample_figure(label)
        assert 1 / 1.3 <= ratio <= 1.3, (key, got[key], ratio)
    assert check_report(tut7) == []


def test_every_tile_cycle_is_accounted_for(tut7):
    """Bulk-synchronous accounting: a tile is computing, exchanging, copying or waiting in a sync."""
    got = _totals(tut7)
    with _reader(tut7) as r:
        (tiles,) = r.query_one("SELECT tiles_per_ipu FROM target")
    # the sample itself adds up: compute + exchange + host + sync = total cycles x 1,216 (to 0.01%)
    sample = sum(
        _sample_figure(label)
        for label in (
            "Total compute cycles (including idle threads)",
            "Total IPU exchange cycles",
            "Total host exchange cycles",
            "Total sync cycles",
        )
    )
    assert sample == pytest.approx(_sample_figure("Total cycles") * 1216, rel=1e-4)
    assert got["total"] == pytest.approx(got["cycles"] * tiles, rel=1e-4)


def test_sync_holds_the_wait_for_the_slowest_tile(tmp_path):
    d = tmp_path / "r"
    run_preset("matrix-vector", {"rows": 60, "cols": 40, "tiles-per-ipu": 16, "streams": 1}, str(d), timestamp=TS)
    with _reader(d / "profile.pop") as r:
        steps = r.query(
            "SELECT s.id, s.type, s.sync_type, b.all_cycles_to_max FROM steps s "
            "JOIN steps_by_ipu b ON b.step_id = s.id ORDER BY s.id"
        )
        matrix = r.matrix("step_cycles_by_tile")
        rows = [np.asarray(matrix.row(sid)).astype(np.int64) for sid, _, _, _ in steps]
    # tutorial 7's IPU Model has no sync delay, so an internal sync on a tile is exactly the time
    # it waited there: the time since the last sync less the tile's own cycles
    idle = np.zeros(16, dtype=np.int64)
    previous_end = 0
    checked = 0
    for (sid, kind, sync, end), row in zip(steps, rows):
        if kind == "Sync":
            if sync == "Internal":
                assert row.tolist() == np.maximum(idle, 0).tolist(), sid
                checked += int(idle.any())
            idle[:] = 0
        else:
            idle += (end - previous_end) - row
        previous_end = end
    assert checked >= 1


def test_exchange_never_exceeds_the_per_tile_bandwidth(mnist, tut7):
    for path in (mnist, tut7):
        with _reader(path) as r:
            (arch,) = r.query_one("SELECT architecture FROM target")
            bandwidth = 4  # bytes per cycle per tile, every architecture
            rows = {}
            for program, kind, row in r.query(
                "SELECT v.program, v.kind, v.row FROM program_vectors v JOIN programs p ON p.id = v.program "
                "WHERE p.type = 'DoExchange' AND v.kind IN ('bytes_received', 'bytes_sent', 'estimated_cycles')"
            ):
                rows.setdefault(program, {})[kind] = np.asarray(r.matrix(f"program_{kind}_by_tile").row(row))
            assert rows, arch
            for program, found in rows.items():
                busy = np.maximum(found["bytes_received"], found["bytes_sent"])
                assert np.all(busy <= bandwidth * found["estimated_cycles"]), program


def test_weights_of_a_training_loop_are_always_live(mnist):
    report = pva.openReport(str(mnist))
    comp = report.compilation
    always = {v.name: v.size for v in comp.alwaysLiveVariables}
    assert always["Layer1/weights"] == 784 * 16 * 2  # half
    assert always["Layer3/weights"] == 16 * 10 * 2
    assert "Layer1/biases" in always and "numCorrect" in always
    for step in comp.livenessProgramSteps:
        names = {v.name for v in step.notAlwaysLiveMemory.variables}
        assert not names & {"Layer1/weights", "Layer3/weights"}


def test_not_always_live_memory_for_every_tile(mnist):
    report = pva.openReport(str(mnist))
    comp = report.compilation
    tiles = comp.target.numTiles
    assert [t.tileId for t in comp.tilesWithLivenessInfo] == list(range(tiles))
    steps = list(comp.livenessProgramSteps)
    for step in steps[:: max(1, len(steps) // 12)]:
        per_tile = [step.notAlwaysLiveMemoryForTile(t).bytes for t in range(tiles)]
        assert sum(per_tile) == step.notAlwaysLiveMemory.bytes
    with pytest.raises(pva.PvaError):
        steps[0].notAlwaysLiveMemoryForTile(tiles)


def test_data_starts_in_the_memory_element_after_the_code(tmp_path):
    """Mk1 (16 kB elements): a tile with little code and data needs about 16 kB plus its data, as
    in Poplar's adder example (19,636 B per tile including gaps for 4,404 B of data, 4.5x)."""
    d = tmp_path / "r"
    run_preset("tutorial2", {"arch": "ipu1"}, str(d), timestamp=TS)
    with _reader(d / "profile.pop") as r:
        rows = r.query("SELECT tile, total, total_including_gaps, interleaved FROM memory_by_tile")
        first_data = dict(r.query("SELECT tile, min(offset) FROM vars_info WHERE executable = 0 GROUP BY tile"))
        code_end = dict(
            r.query("SELECT tile, max(offset + size_bytes) FROM vars_info WHERE executable = 1 GROUP BY tile")
        )
    for tile, total, incl, inter in rows:
        assert code_end[tile] <= 16_384 and first_data[tile] == 16_384
        assert inter == 0 and 16_384 < incl <= 16_384 + total
    ratio = sum(r[2] for r in rows) / sum(r[1] for r in rows)
    adder = 23_878_396 / 5_355_604  # Poplar's adder example, tests/data/samples
    assert adder / 2 < ratio < adder * 2


def test_io_tiles_overlap_stream_copies_with_compute(tmp_path):
    cycles = {}
    for io in (0, 8):
        d = tmp_path / f"io{io}"
        run_preset("mnist-mlp", MNIST | {"batch": 32, "io-tiles": io}, str(d), timestamp=TS)
        assert check_report(d / "profile.pop") == []
        cycles[io] = _totals(d / "profile.pop")["cycles"]
        with _reader(d / "profile.pop") as r:
            rows = r.query(
                "SELECT s.id, s.type, s.name, b.all_cycles_from_min, b.all_cycles_to_max, "
                "b.active_tiles, s.run FROM steps s JOIN steps_by_ipu b ON b.step_id = s.id ORDER BY s.id"
            )
        overlapped = 0
        for i, (_sid, kind, name, frm, _to, active, run) in enumerate(rows):
            if kind != "StreamCopyMid" or name != "images":
                continue
            earlier = [x for x in rows[:i] if x[1] == "OnTileExecute" and x[6] == run and x[4] > frm]
            if earlier:
                overlapped += 1
                assert io and active <= io
        # with I/O tiles every step but the first prefetches its batch while the step before computes
        assert overlapped == (0 if io == 0 else MNIST["runs"] * MNIST["steps"])
    assert cycles[8] < cycles[0]


def test_target_options_are_checked():
    with pytest.raises(GraphError, match="io_tiles must be between 0 and 15"):
        Target("ipu2", tiles_per_ipu=16, io_tiles=16)
    with pytest.raises(GraphError, match="relative_sync_delay"):
        Target("ipu2", relative_sync_delay="SOMETIMES")
    assert Target("ipu1", min_sync_delay=0, relative_sync_delay="NO_DELAY").relative_sync_delays().max() == 0


def test_super_tile_pairs_receive_shared_data_at_twice_the_rate():
    # four tiles each broadcast 100 bytes to two receivers: 400 bytes a receiver, 100 a sender.
    # On Mk2 the two tiles of a super tile receive the same data in the same cycles (poplin's
    # ExchangeEstimator counts twice the bandwidth), so a pair takes 400 / 2 / 4 = 50 cycles of
    # transfer; receivers in different super tiles, or a Mk1 pair, take 400 / 4 = 100.
    from simulator.compiler.exchange import pieces_plan

    src = np.repeat([4, 5, 6, 7], 2)
    key = np.repeat([0, 1, 2, 3], 2)
    nbytes = np.full(8, 100)

    def check(arch, receivers, receive_cycles):
        target = Target(arch, tiles_per_ipu=8)
        plan, _ = pieces_plan(target, 8, src, np.tile(receivers, 4), nbytes, key)
        latency = target.exchange_latency()
        own = {t: latency[t] + (receive_cycles if t in receivers else 25) for t in [4, 5, 6, 7, *receivers]}
        assert set(plan.cycles.idx.tolist()) == set(own)
        assert np.all(plan.cycles.val == target.arch.exchange_setup_cycles + max(own.values()))
        assert list(plan.recv.at(np.array(receivers))) == [400, 400]  # the data are not halved, only their time

    check("ipu2", [0, 1], 50)
    check("ipu2", [1, 2], 100)
    check("ipu1", [0, 1], 100)


def test_the_largest_variables_take_their_lanes_first():
    # two 100-byte buffers live at steps 0-2 and 4-6, and a 10-byte variable live at 3-10: in
    # order of first live step the small one would take the first lane after the first buffer and
    # push the second into a lane of its own (200 bytes); largest first, the two buffers share a
    # lane and the small variable takes another (110 bytes)
    from simulator.compiler.memory import LoweredVars, assign_lanes

    lowered = LoweredVars()
    lowered.add(tile=[0, 0, 0], size=[100, 10, 100], eq_class=[0, 1, 2])
    lowered.finish()
    lanes = assign_lanes(
        lowered, 3, [(0, 0, 2), (1, 3, 10), (2, 4, 6)], np.ones(3, dtype=bool), np.zeros(3, dtype=np.int64)
    )
    assert lanes.tolist() == [0, 1, 0]


def test_variables_on_other_tiles_share_a_lane_whatever_their_liveness():
    # two buffers live at the same steps: on different tiles they never meet, so they share a lane
    # (as the groups of a grouped layer do); on one tile they cannot
    from simulator.compiler.memory import LoweredVars, assign_lanes

    def lanes(tiles):
        lowered = LoweredVars()
        lowered.add(tile=tiles, size=[100, 100], eq_class=[0, 1])
        lowered.finish()
        live = [(0, 0, 5), (1, 0, 5)]
        return assign_lanes(lowered, 2, live, np.ones(2, dtype=bool), np.zeros(2, dtype=np.int64)).tolist()

    assert lanes([0, 1]) == [0, 0]
    assert lanes([0, 0]) == [0, 1]
