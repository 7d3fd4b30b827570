"""poplin's multi-stage reduction of split input channels: every stage spreads its output rows over
all the tiles of the split (lib/poplin/ConvReduce.cpp, multiStageGroupedReduce and
partialGroupedReduce), and the planner's estimate shrinks each stage's slice by that stage's
depth (lib/poplin/PerformanceEstimation.hpp, estimateConvReduceCycles)."""

from __future__ import annotations

import numpy as np
from simulator_run import codelet_graph, correlate, run_convolution, run_functional

from simulator import FLOAT, HALF, Sequence
from simulator.poplibs import poplin
from simulator.target import architecture


def _reduce_batches(g) -> dict[str, object]:
    """The ReduceAdd batch of each reduction compute set, by the compute set's last name part."""
    return {
        cs.name.rsplit("/", 1)[-1]: batch
        for cs in g.state.compute_sets
        for batch in cs.batches
        if batch.vtype.name.startswith("poplin::ReduceAdd")
    }


def test_the_planner_shrinks_every_stage_slice_by_the_stage_depth():
    # 48 x 32 outputs a tile, a k split of 16 in two stages of 4 (reduce_stage_depths(16) == [4]):
    # the first stage sums 4 partials of 1,536 / 4 = 384 outputs, the last 4 partials of
    # 384 / 4 = 96 outputs. On Mk1, whose tiles never take the single-input vertex, the general
    # ReduceAdd costs 6 x (32 + (3 x 4 + 7) x 16) = 2,016 cycles (float out) and
    # 6 x (32 + (3 x 4 + 6) x 4) = 624 (half out)
    arch = architecture("ipu1")
    assert poplin.reduce_stage_depths(16) == [4]
    one = np.array([1])
    costs = poplin._pass_costs(arch, 1024, 48 * one, 32 * one, 64 * one, 16 * one, 0 * one, 0 * one, HALF, FLOAT, HALF)
    assert int(costs["reduceCompute"][0]) == 2016 + 624
    bpc, setup = arch.exchange_bytes_per_cycle, arch.exchange_setup_cycles
    assert int(costs["reduceExchange"][0]) == 2 * setup + (3 * 384 * 4) // bpc + (3 * 96 * 4) // bpc


def test_every_stage_of_a_product_reduction_works_on_all_the_tiles_of_the_split(tmp_path):
    # [32, 2048] x [2048, 32] float on 32 tiles: k split 32 ways, reduced to 6 rows then to 1
    # (reduce_stage_depths(32) == [6]); the 1,024 outputs in grains of 16
    g = codelet_graph(32)
    A = poplin.createMatMulInputLHS(g, FLOAT, (32, 2048), (2048, 32), "A")
    B = poplin.createMatMulInputRHS(g, FLOAT, (32, 2048), (2048, 32), "B")
    plan = poplin.plan_matmul(g, 32, 2048, 32, FLOAT)
    assert (plan.pm, plan.pn, plan.pk, plan.n_grain) == (1, 1, 32, 16)
    assert poplin.reduce_stage_depths(32) == [6]
    prog = Sequence()
    C = poplin.matMul(g, A, B, prog, "mm")
    stages = _reduce_batches(g)
    assert sorted(stages) == ["ReduceFinalStage", "ReduceStage0"]
    first, last = stages["ReduceStage0"], stages["ReduceFinalStage"]
    # six rows over 5, 5, 6, 5, 5 and 6 tiles, each summing as many partials, in slices of 13 or
    # 11 grains: one vertex on each of the 32 tiles
    assert np.unique(first.tiles).size == first.tiles.size == 32
    assert sorted(np.bincount(first.work["partials"]).nonzero()[0].tolist()) == [5, 6]
    assert np.bincount(first.work["partials"])[5] == 20 and np.bincount(first.work["partials"])[6] == 12
    assert int(first.work["outputs"].sum()) == 6 * 1024
    # the last stage: one row over all 32 tiles, 2 grains each, summing the 6 rows
    assert np.array_equal(np.sort(last.tiles), np.sort(first.tiles))
    assert (last.work["partials"] == 6).all() and (last.work["outputs"] == 32).all()
    g.createHostWrite("A", A)
    g.createHostWrite("B", B)
    g.createHostRead("C", C)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((32, 2048)).astype(np.float32)
    b = rng.standard_normal((2048, 32)).astype(np.float32)
    got = run_functional(g, prog, tmp_path, {"A": a, "B": b}, ["C"])["C"]
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


def test_a_convolution_with_deeply_split_input_channels_reduces_in_stages(tmp_path):
    # 1,024 input channels of a 3 x 3 kernel on 32 tiles: the channels split 32 ways, the
    # 16 x 64 outputs reduced in two stages on all 32 tiles, as a product's are
    g = codelet_graph(32)
    params = poplin.ConvParams(1, 1024, 16, (8, 8), (3, 3), (1, 1), (1, 1), FLOAT)
    assert poplin._conv_grid(g, params, FLOAT).plan.pk == 32
    x = poplin.createInput(g, params, "x")
    w = poplin.createWeights(g, params, "w")
    prog = Sequence()
    y = poplin.convolution(g, x, w, params, prog, "conv")
    stages = _reduce_batches(g)
    assert sorted(stages) == ["ReduceFinalStage", "ReduceStage0"]
    assert np.unique(stages["ReduceStage0"].tiles).size == 32
    assert np.unique(stages["ReduceFinalStage"].tiles).size == 32
    assert (stages["ReduceFinalStage"].work["partials"] == 6).all()
    xv, wv, got = run_convolution(g, prog, x, w, y, tmp_path, seed=5)
    np.testing.assert_allclose(got, correlate(xv, wv, padding=(1, 1)), rtol=1e-4, atol=1e-3)
