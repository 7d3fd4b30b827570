"""poplin's multi-stage reduction of split input channels: every stage spreads its output rows over
all the tiles of the split (lib/poplin/ConvReduce.cpp, multiStageGroupedReduce and
partialGroupedReduce), and the planner's estimate shrinks each stage's slice by that stage's
depth (lib/poplin/PerformanceEstimation.hpp, estimateConvReduceCycles)."""

from __future__ import annotations

import numpy as np
import pytest
from simulator_run import build_convolution, codelet_graph, correlate, run_convolution, run_functional

from simulator import FLOAT, HALF, Sequence
from simulator.codelets import poplin as amp
from simulator.poplibs import poplin
from simulator.poplibs.poplin import conv_planner, planner
from simulator.target import architecture


def _reduce_batches(g) -> dict[str, object]:
    """The ReduceAdd batch of each reduction compute set, by the compute set's last name part."""
    return {
        cs.name.rsplit("/", 1)[-1]: batch
        for cs in g.state.compute_sets
        for batch in cs.batches
        if batch.vtype.name.startswith("poplin::ReduceAdd")
    }


def test_stage_depths_compare_their_costs_in_single_precision_as_poplin_does():
    # ConvReducePlan.cpp, getMultiStageReducePlanAndCost: one stage below 16 partials, two from 16,
    # three from 125, the costs in floats. Taking 2,786 partials to 197 or to 198 rows costs
    # 42.213562 messages either way in single precision, so poplin, which rounds down only when
    # that is strictly cheaper, takes 198; in doubles 197 is cheaper by 4e-6. Likewise 4,964: 291
    assert [poplin.reduce_stage_depths(d) for d in (15, 16, 32, 124, 125, 147)] == [
        [],
        [4],
        [6],
        [11],
        [25, 5],
        [27, 5],
    ]
    assert poplin.reduce_stage_depths(2786) == [198, 14]
    assert poplin.reduce_stage_depths(4964) == [291, 17]


def test_the_planner_shrinks_every_stage_slice_by_the_stage_depth():
    # 48 x 32 outputs a tile, a k split of 16 in two stages of 4 (reduce_stage_depths(16) == [4]):
    # the first stage sums 4 partials of 1,536 / 4 = 384 outputs, the last 4 partials of
    # 384 / 4 = 96 outputs. On Mk1, whose tiles never take the single-input vertex, the general
    # ReduceAdd costs 6 x (32 + (3 x 4 + 7) x 16) = 2,016 cycles (float out) and
    # 6 x (32 + (3 x 4 + 6) x 4) = 624 (half out)
    arch = architecture("ipu1")
    assert poplin.reduce_stage_depths(16) == [4]
    one = np.array([1])
    costs = planner._pass_costs(
        arch, 1024, 48 * one, 32 * one, 64 * one, 16 * one, 0 * one, 0 * one, HALF, FLOAT, HALF, pm=one, pn=one
    )
    assert int(costs["reduceCompute"][0]) == 2016 + 624
    # the exchange, as poplin estimates it (ConvModel.cpp, addExchangeCycleEstimates): the first
    # stage's, the tile's 1,536 float partials (reduceFirstStageExchangeCycles), and the second's,
    # those divided by the first stage's depth, 1,536 / 4 = 384 floats
    # (partialSumExchangeCycleEstimate); with a set-up each
    bpc, setup = arch.exchange_bytes_per_cycle, arch.exchange_setup_cycles
    assert int(costs["reduceExchange"][0]) == 2 * setup + (1536 * 4) // bpc + (384 * 4) // bpc


def test_the_planner_takes_the_larger_of_the_convolution_and_reduction_temporaries():
    # poplin's temporary bytes are the operands and partials of the convolution or the
    # reduction's, whichever is more (ConvModel.cpp, totalTempBytes), the reduction's being its
    # first intermediate stage's outputs, none for a single stage (reduceCycleTempBytesEstimate):
    # 48 x 64 + 64 x 32 halves received (10,240 bytes) and 1,536 float partials (6,144) a tile,
    # against 1,536 floats for a split of 16 in two stages and nothing for a split of 4
    arch = architecture("ipu1")
    one = np.array([1])
    for pk in (16, 4):
        costs = planner._pass_costs(
            arch, 1024, 48 * one, 32 * one, 64 * one, pk * one, 0 * one, 0 * one, HALF, FLOAT, HALF, pm=one, pn=one
        )
        assert int(costs["memory"][0]) == 10240 + 6144
    # a block too small to fill its stages: 2 x 2 outputs, a split of 125 in three stages, whose
    # first stage starts from ceil(4 / 125) x 125 = 125 outputs (500 bytes) against 2 x 64 + 64 x 2
    # halves (512 bytes) and 4 float partials (16 bytes)
    costs = planner._pass_costs(
        arch, 8000, 2 * one, 2 * one, 64 * one, 125 * one, 0 * one, 0 * one, HALF, FLOAT, HALF, pm=one, pn=one
    )
    assert int(costs["memory"][0]) == 512 + 16
    costs = planner._pass_costs(
        arch, 8000, 1 * one, 1 * one, 16 * one, 125 * one, 0 * one, 0 * one, HALF, FLOAT, HALF, pm=one, pn=one
    )
    assert int(costs["memory"][0]) == 125 * 4


def test_the_planner_rounds_each_stage_up_as_poplins_estimate_does():
    # a 3 x 17 block (51 outputs) of a k split of 147 in three stages (reduce_stage_depths(147) ==
    # [27, 5]), half output from float partials. estimateConvReduceCycles starts from
    # ceil(51 / 147) x 147 = 147 outputs; the first stage sums ceil(147 / 27) = 6 partials of
    # ceil(147 / 6) = 25 outputs, leaving ceil(147 / 6) = 25 rows; the second sums ceil(25 / 5) = 5
    # of ceil(25 / 5) = 5, leaving 5 rows; the last sums those 5 of ceil(5 / 5) = 1 output, a half
    arch = architecture("ipu1")
    assert poplin.reduce_stage_depths(147) == [27, 5]
    one = np.array([1])
    costs = planner._pass_costs(
        arch, 16384, 3 * one, 17 * one, 112 * one, 147 * one, 0 * one, 0 * one, HALF, FLOAT, HALF, pm=one, pn=one
    )
    stages = [(25, 6, True), (5, 5, True), (1, 5, False)]  # (outputs, partials, float output)
    compute = sum(int(amp.reduce_vertex_cycles(arch, o, p, out_float, True)) for o, p, out_float in stages)
    assert int(costs["reduceCompute"][0]) == compute
    # the exchange rounds up from the tile's 51 outputs, not from the 147 of the compute: each stage
    # sends the float partials left by the depths before it, ceil(51 / 6) = 9 after the first and
    # ceil(9 / 5) = 2 after the second (ConvModel.cpp, addExchangeCycleEstimates:
    # reduceFirstStageExchangeCycles and partialSumExchangeCycleEstimate), with a set-up each
    bpc, setup = arch.exchange_bytes_per_cycle, arch.exchange_setup_cycles
    assert int(costs["reduceExchange"][0]) == 3 * setup + sum(-(-o * 4 // bpc) for o in (51, 9, 2)) == 353


def test_every_stage_of_a_product_reduction_works_on_all_the_tiles_of_the_split(tmp_path):
    # [32, 4096] x [4096, 32] float on 32 tiles: k split 32 ways, reduced to 6 rows then to 1
    # (reduce_stage_depths(32) == [6]); the 1,024 outputs in grains of 16. (With k = 2048 a 1 x 2
    # x 16 grid is cheaper: half the partials to reduce, for 2,048 input elements received at 8
    # bytes a cycle.)
    g = codelet_graph(32)
    A = poplin.createMatMulInputLHS(g, FLOAT, (32, 4096), (4096, 32), "A")
    B = poplin.createMatMulInputRHS(g, FLOAT, (32, 4096), (4096, 32), "B")
    plan = poplin.plan_matmul(g, 32, 4096, 32, FLOAT)
    assert (plan.pm, plan.pn, plan.pk, plan.n_grain) == (1, 1, 32, 16)
    assert poplin.reduce_stage_depths(32) == [6]
    prog = Sequence()
    C = poplin.matMul(g, A, B, prog, "mm")
    stages = _reduce_batches(g)
    assert sorted(stages) == ["ReduceFinalStage", "ReduceStage0"]
    first, last = stages["ReduceStage0"], stages["ReduceFinalStage"]
    # six rows over 5, 5, 6, 5, 5 and 6 tiles, each summing as many partials, the 64 grains of a
    # row spread evenly over its tiles (12 or 13 grains on 5 tiles, 10 or 11 on 6): one vertex on
    # each of the 32 tiles
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
    a = rng.standard_normal((32, 4096)).astype(np.float32)
    b = rng.standard_normal((4096, 32)).astype(np.float32)
    got = run_functional(g, prog, tmp_path, {"A": a, "B": b}, ["C"])["C"]
    np.testing.assert_allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)


def test_a_convolution_with_deeply_split_input_channels_reduces_in_stages(tmp_path):
    # 1,024 input channels of a 3 x 3 kernel on 32 tiles: the channels split 32 ways, the
    # 16 x 64 outputs reduced in two stages on all 32 tiles, as a product's are
    g = codelet_graph(32)
    params = poplin.ConvParams(1, 1024, 16, (8, 8), (3, 3), (1, 1), (1, 1), FLOAT)
    assert conv_planner._conv_grid(g, params, FLOAT).plan.pk == 32
    x, w, prog, y = build_convolution(g, params, names=("x", "w"))
    stages = _reduce_batches(g)
    assert sorted(stages) == ["ReduceFinalStage", "ReduceStage0"]
    assert np.unique(stages["ReduceStage0"].tiles).size == 32
    assert np.unique(stages["ReduceFinalStage"].tiles).size == 32
    assert (stages["ReduceFinalStage"].work["partials"] == 6).all()
    xv, wv, got = run_convolution(g, prog, x, w, y, tmp_path, seed=5)
    np.testing.assert_allclose(got, correlate(xv, wv, padding=(1, 1)), rtol=1e-4, atol=1e-3)


def _field_elements(batch, field: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vertex, variable, index) of each element connected to a field, vertex by vertex, each
    vertex's in the order of its regions."""
    vertex, var, start, length = (np.asarray(a, dtype=np.int64) for a in batch.fields[field])
    order = np.argsort(vertex, kind="stable")
    vertex, var, start, length = vertex[order], var[order], start[order], length[order]
    within = np.arange(int(length.sum())) - np.repeat(np.cumsum(length) - length, length)
    return np.repeat(vertex, length), np.repeat(var, length), np.repeat(start, length) + within


def _traced_stages(g, size: int) -> list[tuple[str, str, set[tuple[int, int, int, int, int]]]]:
    """What each reduction stage's vertices do, traced through their fields, for a reduction of one
    output block of `size` elements (the first stage's partials one block a row, the output in the
    block's order): per stage, its vertex type, the type of the variable it writes and the (tile,
    first output, outputs, rows read, partial rows summed as a bit mask) of each vertex. Asserts that every vertex sums, for each output of its slice,
    partials of that output only, each partial row once; that each stage writes every element of
    its variable once, mapped to the tile of the vertex that writes it; and that the last stage
    writes each output in its place."""
    # variable -> per element, the output it is a partial sum of and the partial rows it sums
    labels: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    stages = []
    for cs in g.state.compute_sets:
        batches = [b for b in cs.batches if b.vtype.name.startswith("poplin::ReduceAdd")]
        if not batches:
            continue
        (batch,) = batches
        outputs, rows = (np.asarray(batch.work[key], dtype=np.int64) for key in ("outputs", "partials"))
        p_vertex, p_var, p_index = _field_elements(batch, "partials")
        o_vertex, o_var, o_index = _field_elements(batch, "out")
        assert np.array_equal(np.bincount(o_vertex, minlength=batch.n), outputs)
        assert np.array_equal(np.bincount(p_vertex, minlength=batch.n), outputs * rows)
        if not labels:  # the first stage reads the partials: block after block, one a row
            (pvar,) = np.unique(p_var)
            depth = g.state.vars[int(pvar)].numel // size
            row = np.arange(depth * size) // size
            labels[int(pvar)] = (np.arange(depth * size) % size, np.eye(depth, dtype=np.int64)[row])
        out_of = np.empty(p_var.size, dtype=np.int64)
        rows_of = np.empty((p_var.size, depth), dtype=np.int64)
        for v in np.unique(p_var):
            out_of[p_var == v] = labels[int(v)][0][p_index[p_var == v]]
            rows_of[p_var == v] = labels[int(v)][1][p_index[p_var == v]]
        # partial j of a vertex is row j // outputs of its output j % outputs
        first_p = np.cumsum(outputs * rows) - outputs * rows
        first_o = np.cumsum(outputs) - outputs
        target = first_o[p_vertex] + (np.arange(p_vertex.size) - first_p[p_vertex]) % outputs[p_vertex]
        out = np.full(o_vertex.size, -1)
        out[target] = out_of
        assert (out[target] == out_of).all(), "a vertex sums partials of different outputs"
        summed = np.zeros((o_vertex.size, rows_of.shape[1]), dtype=np.int64)
        np.add.at(summed, target, rows_of)
        assert summed.max() == 1, "a partial row summed twice"
        (var,) = np.unique(o_var)
        assert np.array_equal(np.sort(o_index), np.arange(g.state.vars[int(var)].numel))
        variable = g.state.vars[int(var)]
        assert variable.unmapped() == []
        interval = np.searchsorted(variable.map_starts, o_index, side="right") - 1
        assert np.array_equal(variable.map_tiles[interval], batch.tiles[o_vertex])
        labels[int(var)] = (np.empty_like(out), np.empty_like(summed))
        labels[int(var)][0][o_index], labels[int(var)][1][o_index] = out, summed
        stage = set()
        for v in range(batch.n):
            mine = slice(first_o[v], first_o[v] + outputs[v])
            assert np.array_equal(out[mine], out[first_o[v]] + np.arange(outputs[v])), "a slice out of order"
            assert (summed[mine] == summed[first_o[v]]).all(), "a vertex sums other rows for some outputs"
            mask = sum(1 << int(r) for r in np.flatnonzero(summed[first_o[v]]))
            stage.add((int(batch.tiles[v]), int(out[first_o[v]]), int(outputs[v]), int(rows[v]), mask))
        stages.append((batch.vtype.name, str(variable.dtype), stage))
    # the last stage's outputs in their places in the output
    assert np.array_equal(labels[int(var)][0], np.arange(size))
    return stages


def _poplin_stages(depth: int, size: int, chans_per_group: int, partials, result) -> list[tuple[str, str, set]]:
    """The same, as poplin builds them for one tile group of tiles 0..depth-1 holding rows
    0..depth-1 (lib/poplin/ConvReduce.cpp, multiStageGroupedReduce and partialGroupedReduce;
    lib/poputil/Util.cpp, splitRegionsAux), transcribed loop by loop."""
    plan = poplin.reduce_stage_depths(depth)
    rows = [1 << r for r in range(depth)]
    stages = []
    for out_depth in plan + [1]:
        result_type = result if out_depth == 1 else partials
        min_grain = 8 // result_type.size  # target.getVectorWidth(resultType), a 64-bit data path
        grain = max(chans_per_group, min_grain)
        rounded_grain = (grain + min_grain - 1) // min_grain * min_grain
        stage, next_rows = set(), []
        for i in range(out_depth):
            begin, end = i * len(rows) // out_depth, (i + 1) * len(rows) // out_depth
            mask = 0
            for r in rows[begin:end]:
                mask |= r
            next_rows.append(mask)
            tile_begin = i * depth // out_depth
            tile_end = max(tile_begin + 1, (i + 1) * depth // out_depth)
            # splitRegions(regions, roundedGrainSize, tileEnd - tileBegin)
            num_grains = -(-size // rounded_grain)
            max_grains = -(-num_grains // (tile_end - tile_begin))
            vertices = -(-num_grains // max_grains)
            for j in range(vertices):
                e0 = j * num_grains // vertices * rounded_grain
                e1 = min(size, (j + 1) * num_grains // vertices * rounded_grain)
                stage.add((tile_begin + j, e0, e1 - e0, end - begin, mask))
        # intermediate stages write the partials' type, the last the result's (multiStageGroupedReduce)
        stages.append((f"poplin::ReduceAdd<{result_type},{partials}>", str(result_type), stage))
        rows = next_rows
    return stages


#: The product planned as given (poplin's swapOperands constraint), so that its k is split
AS_GIVEN = {"planConstraints": {"0": {"transform": {"swapOperands": False}}}}


def _product(tiles: int, m: int, k: int, n: int, dtype):
    g = codelet_graph(tiles)
    A = poplin.createMatMulInputLHS(g, dtype, (m, k), (k, n), "A", AS_GIVEN)
    B = poplin.createMatMulInputRHS(g, dtype, (m, k), (k, n), "B", AS_GIVEN)
    prog = Sequence()
    C = poplin.matMul(g, A, B, prog, "mm", AS_GIVEN)
    return g, A, B, C, prog, poplin.plan_product(g, m, k, n, dtype, AS_GIVEN)


@pytest.mark.parametrize(
    ("tiles", "m", "k", "n", "dtype", "pk"),
    [
        (32, 32, 4096, 32, FLOAT, 32),  # two stages, 64 grains of 16 over 5 or 6 tiles a row
        (24, 7, 4096, 9, HALF, 24),  # two stages, a block of 63: grains of 16, the last one short
        (16, 3, 2048, 5, HALF, 16),  # one stage: 15 outputs in 2 grains of 8, on 2 of the 16 tiles
        (16, 1, 2048, 3, HALF, 16),  # one stage: 3 outputs, less than one grain, on the first tile
        # three stages (27, then 5 rows), a block of 51; on 160 tiles a 1 x 3 x 52 grid is cheaper
        (150, 3, 16384, 17, HALF, 147),
    ],
)
def test_each_stage_sums_the_rows_and_slices_poplin_gives_each_tile(tmp_path, tiles, m, k, n, dtype, pk):
    g, A, B, C, prog, plan = _product(tiles, m, k, n, dtype)
    assert (plan.pm, plan.pn, plan.pk) == (1, 1, pk)
    expected = _poplin_stages(pk, m * n, plan.n_grain, plan.partials_type, plan.out_type)
    assert _traced_stages(g, m * n) == expected
    g.createHostWrite("A", A)
    g.createHostWrite("B", B)
    g.createHostRead("C", C)
    rng = np.random.default_rng(7)
    np_type = np.float32 if dtype == FLOAT else np.float16
    a = rng.standard_normal((m, k)).astype(np_type)
    b = rng.standard_normal((k, n)).astype(np_type)
    got = run_functional(g, prog, tmp_path, {"A": a, "B": b}, ["C"])["C"]
    np.testing.assert_allclose(got, a.astype(np.float64) @ b.astype(np.float64), rtol=2e-2, atol=0.5)


@pytest.mark.parametrize(
    ("params", "pk", "og"),
    [
        # two stages of float partials, a float result: grains of 16 channels
        (poplin.ConvParams(1, 1024, 16, (8, 8), (3, 3), (1, 1), (1, 1), FLOAT), 32, 16),
        # half: 6 output channels in groups of 2, so grains of a vector, 2 float partials in the first
        # stage and 4 halves in the last; 90 outputs
        (poplin.ConvParams(1, 512, 6, (5, 3), (3, 3), (1, 1), (1, 1), HALF), 32, 2),
    ],
)
def test_a_convolution_stage_sums_the_rows_and_slices_poplin_gives_each_tile(tmp_path, params, pk, og):
    g = codelet_graph(32)
    grid = conv_planner._conv_grid(g, params, FLOAT)
    assert (grid.pm, grid.pn, grid.pk, grid.og) == (1, 1, pk, og)
    x, w, prog, y = build_convolution(g, params, names=("x", "w"))
    size = params.out_chans * params.out_field[0] * params.out_field[1]
    assert _traced_stages(g, size) == _poplin_stages(pk, size, og, FLOAT, params.dtype)
    np_type = np.float32 if params.dtype == FLOAT else np.float16
    xv, wv, got = run_convolution(g, prog, x, w, y, tmp_path, seed=11, dtype=np_type)
    np.testing.assert_allclose(got, correlate(xv, wv, padding=params.padding), rtol=2e-2, atol=0.5)
