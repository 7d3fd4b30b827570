"""Grouped fully-connected layers (fully_connected_layer --num-groups): each group's layer on its
share of the tiles, the groups' steps side by side in the same compute sets and copies."""

from __future__ import annotations

import numpy as np
import pytest
from simulator_invariants import check_report

import pva
from simulator import programs as P
from simulator.engine import Engine
from simulator.errors import GraphError, OptionError
from simulator.graph import Graph
from simulator.poplibs import poplin, popops
from simulator.poplibs._util import group_graphs, merge_parallel
from simulator.presets import build_preset, run_preset
from simulator.target import Target
from simulator.types import FLOAT

TS = "2024-01-01T00:00:00Z"


def _executes(program) -> list:
    if isinstance(program, P.Execute):
        return [program]
    return [e for child in program.children() for e in _executes(child)]


def test_groups_multiply_side_by_side_and_correctly():
    g = Graph(Target("ipu2", tiles_per_ipu=32))
    poplin.addCodelets(g)
    popops.addCodelets(g)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 5, 24)).astype(np.float32)
    b = rng.standard_normal((3, 24, 20)).astype(np.float32)
    seqs, outs = [], []
    for i, vg in enumerate(group_graphs(g, 3)):
        A = poplin.createMatMulInputLHS(vg, FLOAT, (5, 24), (24, 20), f"A{i}")
        B = poplin.createMatMulInputRHS(vg, FLOAT, (5, 24), (24, 20), f"B{i}")
        g.createHostWrite(f"A{i}", A)
        g.createHostWrite(f"B{i}", B)
        seq = P.Sequence()
        C = poplin.matMul(vg, A, B, seq, f"C{i}")
        g.createHostRead(f"C{i}", C)
        seqs.append(seq)
        outs.append(C)
    one_group = len(_executes(seqs[0]))
    prog = merge_parallel(g, seqs)
    merged = _executes(prog)
    assert len(merged) == one_group  # one compute set a step, not one a group and step
    tiles = [set(batch.tiles.tolist()) for batch in g.state.compute_sets[merged[0].compute_set.id].batches]
    assert len(tiles) == 3 and not (tiles[0] & tiles[1] or tiles[1] & tiles[2])
    assert max(tiles[0]) < 10 <= min(tiles[1]) and max(tiles[1]) < 20 <= min(tiles[2])  # 10 tiles a group
    engine = Engine(g, [prog], functional=True)
    engine.load()
    for i in range(3):
        engine.writeTensor(f"A{i}", a[i])
        engine.writeTensor(f"B{i}", b[i])
    engine.run(0)
    for i in range(3):
        got = np.asarray(engine.readTensor(f"C{i}")).reshape(5, 20)
        np.testing.assert_allclose(got, a[i] @ b[i], rtol=1e-4, atol=1e-4)
    engine.close()


def test_programs_that_differ_or_meet_cannot_run_side_by_side():
    g = Graph(Target("ipu2", tiles_per_ipu=4))
    popops.addCodelets(g)
    x, y, z = (g.addVariable(FLOAT, [4], name) for name in "xyz")
    for t in (x, y, z):
        g.setTileMapping(t, 0)
    add = P.Sequence()
    popops.scaledAddTo(g, x, y, 2.0, add, "add")
    (cs,) = (e.compute_set for e in _executes(add))
    with pytest.raises(GraphError, match="differ in structure"):
        merge_parallel(g, [add, P.Sequence(P.WriteUndef(x))])
    with pytest.raises(GraphError, match="share a compute set"):
        merge_parallel(g, [add, add])
    assert len(g.state.compute_sets[cs.id].batches) == 1  # nothing moved before the checks
    with pytest.raises(GraphError, match="share tiles or tensors"):
        merge_parallel(g, [P.Copy(x, y), P.Copy(y, z)])
    with pytest.raises(GraphError, match="must be positive"):
        group_graphs(g, 0)
    with pytest.raises(GraphError, match="do not fit"):
        group_graphs(g, 5)


def _cycles(directory) -> int:
    report = pva.openReport(str(directory / "profile.pop"))
    return max(int(p.end) for run in report.execution.runs for p in run.cyclesByIpu)


def test_a_grouped_layer_takes_the_time_of_one_group_on_its_tiles(tmp_path):
    """Four groups on 64 tiles run side by side: the cycles of one group's layer on 16 tiles."""
    layer = {"batch-size": 16, "input-size": 64, "output-size": 48}
    run_preset("fc", {**layer, "tiles-per-ipu": 16}, str(tmp_path / "one"), timestamp=TS)
    run_preset("fc", {**layer, "tiles-per-ipu": 64, "num-groups": 4}, str(tmp_path / "four"), timestamp=TS)
    assert check_report(tmp_path / "four" / "profile.pop") == []
    one, four = _cycles(tmp_path / "one"), _cycles(tmp_path / "four")
    assert 0.95 < four / one < 1.05, (one, four)
    built = build_preset("fc", {**layer, "tiles-per-ipu": 64, "num-groups": 4})
    assert built.notes["macs"] == 4 * 16 * 64 * 48 * 2
    # the groups' compute sets are the first group's; the others, emptied, are dropped
    single = build_preset("fc", {**layer, "tiles-per-ipu": 16})
    assert len(built.graph.state.compute_sets) == len(single.graph.state.compute_sets)


def test_groups_take_separate_plans_only():
    with pytest.raises(OptionError, match="--num-groups"):
        build_preset("fc", {"batch-size": 4, "input-size": 64, "output-size": 48, "num-groups": 2, "plan": "joint"})


def test_the_groups_share_one_learning_rate_on_the_last_tile():
    """fully_connected_layer adds one learning rate and matMulGroupedAcc adds every group's deltas
    in one scaledAddTo, which maps it to the graph's last tile: here 3 groups of 21 tiles leave
    tile 63 to none of them."""
    layer = {"batch-size": 16, "input-size": 64, "output-size": 48, "tiles-per-ipu": 64, "num-groups": 3}
    built = build_preset("fc", layer)
    rates = [v for v in built.graph.state.vars if v.name == "learningRate"]
    assert len(rates) == 1
    rates[0].finalize_mapping()
    assert rates[0].map_tiles.tolist() == [63]
    # the tool adds it only when it runs the weight update
    forward = build_preset("fc", {**layer, "single-phase": "fwd"})
    assert [v for v in forward.graph.state.vars if v.name == "learningRate"] == []
