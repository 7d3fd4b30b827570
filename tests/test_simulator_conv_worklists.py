"""Convolution vertex worklists: the nx1 vertex is costed from the outputs each kernel position
writes, as poplin builds its worklists, so that kernel positions over padding cost only their loop
overhead, and the planner splits a convolution's positions in the whole rows its cells use."""

from __future__ import annotations

import pytest
from simulator_run import codelet_graph

from simulator import HALF, Sequence
from simulator.codelets import poplin as amp
from simulator.poplibs import poplin
from simulator.poplibs.poplin import conv_planner
from simulator.target import architecture

#: The convolution as given: poplin's expandDims, which the planner may choose for these small
#: shapes, is tested in test_simulator_conv_expand.py.
AS_GIVEN = {"planConstraints": {"0": {"transform": {"expandDims": []}}}}


def _convolve(g, params):
    """Build a convolution on operands made for it, as given; its partials' vertex batch."""
    x = poplin.createInput(g, params, "x")
    w = poplin.createWeights(g, params, "w")
    poplin.convolution(g, x, w, params, Sequence(), "conv", AS_GIVEN)
    (batch,) = [b for cs in g.state.compute_sets if cs.name == "conv/Conv_1/Convolve" for b in cs.batches]
    return batch


# -- a direct transcription of poplin's loops, for reference -----------------------------------------


def _worker_partitions(rows: int, width: int) -> list[list[int]]:
    """Partition sizes of each of six workers for `rows` rows of `width` outputs
    (lib/poplin/ConvUtilInternal.cpp, partitionConvPartialByWorker)."""
    total = rows * width
    out = []
    for i in range(6):
        begin, end = i * total // 6, (i + 1) * total // 6
        sizes = []
        e = begin
        while e < end:
            row_end = (e // width + 1) * width
            sizes.append(min(end, row_end) - e)
            e = min(end, row_end)
        out.append(sizes)
    return out


def _reference_nx1(arch, rows: list[int], cols: list[int], in_groups: int, out_groups: int, zero: int) -> int:
    """getConvPartialnx1SupervisorCycleEstimate plus the zeroing of poplinCycleEstimators.cpp,
    ConvPartialnx1, half activations and float partials, by its loops."""
    units = amp.num_conv_units(arch, "half", "float")
    innermost = (units * 32) // amp.coeff_load_bytes(arch) + 15 + 3
    inner = 0
    for r in rows:
        inner += 14
        for c in cols:
            inner += 17 - 5
            workers = []
            for sizes in _worker_partitions(r, c) if r and c else [[]] * 6:
                cycles = 17
                for n in sizes:
                    cycles += {1: 29, 2: 33}.get(n, 34 + (n - 3) * 4) - 6
                workers.append(6 * cycles)
            inner += innermost + max(max(workers), min(workers) + 9)
    outer = 103 + 6 * 6 + 6 * 9 + (out_groups * 17 + (out_groups - 1) * 6 + 1) + 1
    outer += 16 + in_groups * (14 + out_groups * (14 + inner))
    per_worker = -(-zero * units // 6)
    return outer + (-(-per_worker // 2) + 14 - 9) * 6 * out_groups


def _reference_hmac(rows: list[int], cols: list[int], in_chans: int, out_groups: int, zero: int) -> int:
    """getConvPartialHorizontalMacSupervisorCycleEstimate plus the zeroing of
    poplinCycleEstimators.cpp, ConvPartialHorizontalMac: half activations, float partials, one
    output channel a group, by its loops."""
    dot = 1 + 2 + 3 + 1 + (in_chans // 4 if in_chans % 4 == 0 else in_chans)
    workers = [16] * 6
    for r in rows:
        for c in cols:
            for i, sizes in enumerate(_worker_partitions(r, c) if r and c else [[]] * 6):
                workers[i] += 16 + sum(19 + n * (7 + dot) for n in sizes)
    inner = 6 * max(workers)
    outer = 63 + 6 * 9 + 23 + 15 + out_groups * (10 + inner)
    per_worker = -(-zero // 6)  # partials zeroed first (getZeroSupervisorVertexCycleEstimate)
    return outer + (-(-per_worker // 2) + 14 - 9) * 6 * out_groups


@pytest.mark.parametrize(
    "rows, cols",
    [
        ([1], [1]),
        ([3, 3, 3], [7, 8, 7]),
        ([11, 11, 11, 11, 11], [0, 1, 0, 0]),
        ([2, 0], [224, 223]),
        ([5], [13, 0, 13]),
    ],
)
def test_nx1_estimate_follows_poplins_worklists(rows, cols):
    arch = architecture("ipu2")
    zero = max(rows) * max(cols)
    got = amp.conv_partial_nx1_cycles(arch, "half", "float", [rows], cols, 2, 3, zero_elems=zero)
    assert int(got[0]) == _reference_nx1(arch, rows, cols, 2, 3, zero)


@pytest.mark.parametrize("rows, cols", [([1], [1]), ([11, 11, 11, 11, 11], [1, 0, 0]), ([4, 3], [200, 199])])
def test_hmac_estimate_follows_poplins_worklists(rows, cols):
    zero = max(rows) * max(cols)
    got = amp.conv_partial_hmac_cycles("half", "float", [rows], cols, 12, 1, 1, 2, zero_elems=zero)
    assert int(got[0]) == _reference_hmac(rows, cols, 12, 2, zero)


def test_kernel_positions_over_padding_cost_only_their_loop():
    # the backward pass of a 1 x 8 kernel over a 1 x 8 field: 1 x 1 deltas padded by 7 each side,
    # each of the 8 kernel columns writing one output column of 8
    arch = architecture("ipu2")
    worklists = amp.conv_partial_nx1_cycles(arch, "half", "float", [[4]], [1] * 8, 1, 1, zero_elems=32)
    every_column = amp.conv_partial_nx1_cycles(arch, "half", "float", [[4]], [8] * 8, 1, 1, zero_elems=32)
    assert int(worklists[0]) == _reference_nx1(arch, [4], [1] * 8, 1, 1, 32)
    # each kernel column: a worker writes at most one output, not five or six
    assert int(worklists[0]) < int(every_column[0])


# -- the outputs each kernel position writes --------------------------------------------------------


def test_kernel_outputs_leave_out_padding():
    g = codelet_graph(tiles=4)
    params = poplin.ConvParams(2, 16, 16, (3, 4), (3, 3), (1, 1), (1, 1), HALF)
    grid = conv_planner._conv_grid(g, params)
    cells = [(0, 0, 0, 2, 5, 0, 16, 0, 16, 0), (0, 0, 0, 0, 6, 0, 16, 0, 16, 0)]
    rows, cols = grid.kernel_outputs(cells)
    # kernel column 0 reads x - 1: outputs 1..3; column 2 reads x + 1: outputs 0..2
    assert cols.tolist() == [3, 4, 3]
    # positions 2..4 are (image 0, row 2), (image 1, rows 0 and 1): kernel row 0 reads y - 1, so
    # row 0 of image 1 reads padding; kernel row 2 reads y + 1, so row 2 of image 0 does
    assert rows.tolist() == [[2, 3, 2], [4, 6, 4]]


def test_strided_kernel_outputs():
    g = codelet_graph(tiles=4)
    params = poplin.ConvParams(1, 16, 16, (7, 7), (3, 3), (2, 2), (1, 1), HALF)  # 4 x 4 outputs
    grid = conv_planner._conv_grid(g, params)
    rows, cols = grid.kernel_outputs([(0, 0, 0, 0, 4, 0, 16, 0, 16, 0)])
    # output x reads 2x - 1 + k: k = 0 leaves out x = 0 (reads -1), k = 2 leaves out x = 3 (reads 7)
    assert cols.tolist() == [3, 4, 3]
    assert rows.tolist() == [[3, 4, 3]]


def test_padded_convolution_vertices_cost_their_worklists():
    g = codelet_graph(tiles=16)
    params = poplin.ConvParams(2, 16, 16, (4, 6), (3, 5), (1, 1), (1, 2), HALF)
    batch = _convolve(g, params)
    rows, cols = batch.work["kernel_rows"], batch.work["kernel_cols"]
    assert cols.tolist() == [4, 5, 6, 5, 4]
    assert rows.shape == (batch.n, 3)
    cycles, _ = batch.vtype.cost(batch.work, batch.n, g.target)
    arch = g.target.arch
    for v in range(batch.n):
        expect = _reference_nx1(
            arch,
            rows[v].tolist(),
            cols.tolist(),
            int(batch.work["in_groups"][v]),
            int(batch.work["out_groups"][v]),
            int(batch.work["out_elems"][v]),
        )
        assert int(cycles[v]) == expect


def test_planner_splits_positions_in_whole_rows():
    g = codelet_graph(tiles=1472)
    params = poplin.ConvParams(4, 4, 64, (224, 224), (3, 3), (1, 1), (1, 1), HALF)
    grid = conv_planner._conv_grid(g, params)
    # the plan's split of positions is the grid's: no cell is cut inside an output row
    assert grid.plan.pm == grid.pm
    assert grid.plan.mb == grid.rows_per * 224


def test_padded_small_channel_convolution_runs_hmac_worklists():
    g = codelet_graph(tiles=16)
    params = poplin.ConvParams(2, 2, 8, (5, 9), (3, 4), (1, 1), (1, 2), HALF)  # 2 input channels: HMAC
    batch = _convolve(g, params)
    assert batch.vtype.name.startswith("poplin::ConvPartialHorizontalMac")
    rows, cols = batch.work["kernel_rows"], batch.work["kernel_cols"]
    assert cols.tolist() == [8, 9, 9, 8]  # 10 output columns; kernel column k reads x + k - 2
    cycles, _ = batch.vtype.cost(batch.work, batch.n, g.target)
    for v in range(batch.n):
        expect = _reference_hmac(
            rows[v].tolist(),
            cols.tolist(),
            int(batch.work["in_chans"]),
            int(batch.work["out_groups"][v]),
            int(batch.work["out_elems"][v]),
        )
        assert int(cycles[v]) == expect


def test_pointwise_convolution_is_planned_flattened():
    # a 1x1 kernel, stride 1 and no padding: poplin flattens the batch and both spatial dims into one
    # field dim (calculateFlattenedParams), so a cell may end inside an output row
    params = poplin.ConvParams(4, 64, 64, (7, 7), (1, 1), dtype=HALF)
    flat = conv_planner._flattened(params)
    assert (flat.batch, flat.field, flat.in_chans, flat.out_chans) == (1, (196, 1), 64, 64)
    assert conv_planner._flattened(poplin.ConvParams(4, 64, 64, (7, 7), (3, 3), (1, 1), (1, 1), HALF)) is None
    assert conv_planner._flattened(poplin.ConvParams(4, 64, 64, (7, 7), (1, 1), (2, 2), (0, 0), HALF)) is None
    g = codelet_graph(tiles=1472)
    x = poplin.createInput(g, params, "x")
    assert tuple(x.shape) == (4, 64, 7, 7)
    # still stored [C/16][N][H][W][16]
    _, xi = x.element_arrays()
    xi = xi.reshape(4, 64, 7, 7)
    assert xi[0, 16, 0, 0] == 4 * 7 * 7 * 16 and xi[1, 0, 0, 0] == 7 * 7 * 16
    grid = conv_planner._conv_grid(g, flat)
    assert grid.plan.pm == grid.pm and grid.plan.mb == grid.rows_per


def test_small_channel_convolution_is_planned_on_hmac_costs():
    g = codelet_graph(tiles=64)
    params = poplin.ConvParams(2, 2, 8, (5, 9), (3, 4), (1, 1), (1, 2), HALF)
    grid = conv_planner._conv_grid(g, params)
    # planned with the vertex it runs on: output channels in HMAC's groups (one, float partials)
    assert grid.plan.method == "HMAC" and grid.plan.n_grain == 1
    _convolve(g, params)
    partials = [v for v in g.state.vars if v.name == "conv/partials"]
    assert len(partials) == 1 and not partials[0].interleaved  # HMAC's out field: any memory


def test_flattened_convolution_cells_are_one_row():
    g = codelet_graph(tiles=16)
    flat = conv_planner._flattened(poplin.ConvParams(2, 2, 8, (3, 5), (1, 1), dtype=HALF))
    grid = conv_planner._conv_grid(g, flat)
    rows, cols = grid.kernel_outputs([(0, 0, 0, 4, 11, 0, 8, 0, 2, 0)])
    # one field dim: positions 4..10 of the 30 are one row of 7, as poplin partitions a 1-D field
    assert rows.tolist() == [[1]] and cols.tolist() == [[7]]
