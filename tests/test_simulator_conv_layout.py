"""Convolution layouts: operands created in the plan's channel-grouped layouts, read in few regions,
the backward pass's weights written by transpose vertices, and the results on data."""

from __future__ import annotations

import numpy as np
from simulator_run import build_convolution, codelet_graph, correlate, run_convolution, run_functional

from simulator import FLOAT, HALF, Graph, Sequence
from simulator.poplibs import poplin, popnn
from simulator.poplibs._util import tile_pieces
from simulator.poplibs.poplin import conv_planner


def _batches(g: Graph, name: str):
    css = [cs for cs in g.state.compute_sets if cs.name == name]
    assert len(css) == 1, name
    return css[0].batches


def _tiles_of(g: Graph, t) -> set[int]:
    return set(tile_pieces(g, t)[0].tolist())


def _regions_per_vertex(batch, field: str) -> np.ndarray:
    return np.bincount(batch.fields[field][0], minlength=batch.n)


def _assert_input_gradients(g, prog, w, deltas, grads, tmp_path, seed: int) -> None:
    """The backward convolution's result on random data is the deltas correlated with the
    transposed and flipped weights (a 3x3 kernel, padding 1)."""
    dv, wv, out = run_convolution(g, prog, deltas, w, grads, tmp_path, seed)
    flipped = wv.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1]
    assert np.allclose(out, correlate(dv, flipped, padding=(1, 1)), atol=1e-3)


#: The convolution as given: poplin's expandDims, which the planner may choose for these small
#: shapes, is tested in test_simulator_conv_expand.py.
AS_GIVEN = {"planConstraints": {"0": {"transform": {"expandDims": []}}}}


def _backward_convolution(g, fwd, bwd):
    """The backward pass of `fwd` as `bwd`: the forward weights, the deltas, the program and the
    input gradients of a transposeAndFlipWeights convolution, as given."""
    w = poplin.createWeights(g, fwd, "weights")
    deltas = poplin.createInput(g, bwd, "deltas")
    prog = Sequence()
    grads = poplin.convolution(g, deltas, w, bwd, prog, "Bwd", AS_GIVEN, transposeAndFlipWeights=True)
    return w, deltas, prog, grads


def test_pointwise_convolution_reads_whole_channel_groups():
    # a 1x1 convolution of half data: 16 input channels a group (one conv unit's weights), 8 or 16
    # output channels; each vertex reads one region per (input channel group, batch element) of
    # its cell and one per output channel group of the weights, not one per row and channel
    g = codelet_graph(64)
    params = poplin.ConvParams(2, 64, 64, (7, 7), (1, 1), dtype=HALF)
    x = poplin.createInput(g, params, "in")
    w = poplin.createWeights(g, params, "weights")
    poplin.convolution(g, x, w, params, Sequence(), "conv")
    # planned flattened: the 2 x 7 x 7 positions one field dim, split anywhere
    grid = conv_planner._conv_grid(g, conv_planner._flattened(params))
    assert grid.ig == 16 and grid.og in (8, 16)
    (batch,) = _batches(g, "conv/Conv_1/Convolve")
    cells = grid.cells()
    in_regions = _regions_per_vertex(batch, "in")
    for v, (_im, _jn, _ik, p0, p1, _o0, _o1, k0, k1, _tile) in enumerate(cells):
        batch_elems = (p1 - 1) // 49 - p0 // 49 + 1
        assert in_regions[v] <= (k1 - k0) // 16 * batch_elems
    weight_regions = _regions_per_vertex(batch, "weights")
    assert max(weight_regions) <= max((o1 - o0) // grid.og for *_, o0, o1, _k0, _k1, _t in cells)
    # the old layout read one region per position and input channel: 7 positions x 64 channels
    assert in_regions.max() <= 8


def test_input_and_weights_are_stored_in_channel_groups():
    g = codelet_graph(64)
    params = poplin.ConvParams(2, 32, 24, (5, 6), (3, 3), (1, 1), (1, 1), HALF)
    x = poplin.createInput(g, params, "in")
    w = poplin.createWeights(g, params, "weights")
    # [N][C][H][W] stored as [C/16][N][H][W][16]: the 16 channels of a pixel are contiguous
    _, xi = x.element_arrays()
    xi = xi.reshape(2, 32, 5, 6)
    assert np.array_equal(xi[1, 16:32, 2, 3] - xi[1, 16, 2, 3], np.arange(16))
    assert xi[0, 16, 0, 0] == 2 * 5 * 6 * 16
    # [O][C][kh][kw] stored as [O/og][C/16][kh][kw][og][16]
    og = conv_planner._conv_grid(g, params).og
    _, wi = w.element_arrays()
    wi = wi.reshape(24, 32, 3, 3)
    assert np.array_equal(wi[0, 0:16, 1, 2] - wi[0, 0, 1, 2], np.arange(16))
    assert wi[1, 0, 0, 0] - wi[0, 0, 0, 0] == 16
    assert wi[0, 0, 0, 1] - wi[0, 0, 0, 0] == og * 16
    # every element of both is mapped to a tile that one of the convolution's cells runs on
    tiles = {x_[9] for x_ in conv_planner._conv_grid(g, params).cells()}
    for t in (x, w):
        assert _tiles_of(g, t) <= tiles


def test_output_is_grouped_by_output_channels_and_feeds_the_next_layer(tmp_path):
    g = codelet_graph(64)
    p1 = poplin.ConvParams(2, 16, 32, (6, 6), (3, 3), (1, 1), (1, 1), FLOAT)
    p2 = poplin.ConvParams(2, 32, 16, (6, 6), (1, 1), dtype=FLOAT)
    x = poplin.createInput(g, p1, "in")
    w1 = poplin.createWeights(g, p1, "w1")
    w2 = poplin.createWeights(g, p2, "w2")
    prog = Sequence()
    y1 = poplin.convolution(g, x, w1, p1, prog, "layer1")
    popnn.nonLinearityInPlace(g, "RELU", y1, prog, "relu")
    y2 = poplin.convolution(g, y1, w2, p2, prog, "layer2")
    # [b, o, oh, ow] of a variable stored [O/og][N][oh][ow][og]
    og = conv_planner._conv_grid(g, p1, FLOAT).og
    _, yi = y1.element_arrays()
    yi = yi.reshape(2, 32, 6, 6)
    assert np.array_equal(yi[1, og : 2 * og, 4, 5] - yi[1, og, 4, 5], np.arange(og))
    # the second layer reads the first's output in whole channel groups (8 for float data)
    (batch,) = _batches(g, "layer2/Conv_1/Convolve")
    assert _regions_per_vertex(batch, "in").max() <= 32 // 8 * 2
    for name, t in (("x", x), ("w1", w1), ("w2", w2)):
        g.createHostWrite(name, t)
    g.createHostRead("y1", y1)
    g.createHostRead("y2", y2)
    rng = np.random.default_rng(4)
    xv = rng.standard_normal((2, 16, 6, 6)).astype(np.float32)
    w1v = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    w2v = rng.standard_normal((16, 32, 1, 1)).astype(np.float32)
    out = run_functional(g, prog, tmp_path, {"x": xv, "w1": w1v, "w2": w2v}, ["y1", "y2"])
    r1 = np.maximum(correlate(xv, w1v, padding=(1, 1)), 0)
    assert np.allclose(out["y1"], r1, atol=1e-3)
    assert np.allclose(out["y2"], correlate(r1, w2v), atol=1e-3)


def test_backward_weights_are_a_new_tensor_written_by_transpose_vertices(tmp_path):
    g = codelet_graph(64)
    fwd = poplin.ConvParams(2, 16, 32, (5, 5), (3, 3), (1, 1), (1, 1), FLOAT)
    bwd = poplin.ConvParams(2, 32, 16, (5, 5), (3, 3), (1, 1), (1, 1), FLOAT)
    w, deltas, prog, grads = _backward_convolution(g, fwd, bwd)
    (transpose,) = _batches(g, "Bwd/WeightTranspose")
    assert transpose.vtype.name == "popops::Transpose2d<float>"
    names = {v.name for v in g.state.vars}
    assert {"Bwd/bwdWeights", "Bwd/partialTranspose"} <= names
    # the convolution reads only the new tensor, never the forward weights
    (conv,) = _batches(g, "Bwd/Conv_1/Convolve")
    read = {g.state.vars[int(v)].name for v in np.unique(conv.fields["weights"][1])}
    assert read == {"Bwd/bwdWeights"}
    # the transpose vertices run where the forward weights are
    assert set(transpose.tiles.tolist()) <= _tiles_of(g, w)
    _assert_input_gradients(g, prog, w, deltas, grads, tmp_path, seed=5)


def test_an_input_without_channel_groups_is_copied_into_the_plans_layout(tmp_path):
    # [b, c, h, w] rows spread linearly: no two channels of a pixel are contiguous, so the input is
    # first copied into the layout createInput gives, and the vertices read that copy
    from simulator.poplibs.poputil import mapTensorLinearly

    g = codelet_graph(64)
    params = poplin.ConvParams(2, 32, 16, (6, 6), (3, 3), (1, 1), (1, 1), HALF)
    x = g.addVariable(HALF, [2, 32, 6, 6], "x")
    mapTensorLinearly(g, x)
    w = poplin.createWeights(g, params, "w")
    prog = Sequence()
    y = poplin.convolution(g, x, w, params, prog, "conv", AS_GIVEN)
    names = [v.name for v in g.state.vars]
    assert "conv/actsRearranged" in names and "conv/weightsRearranged" not in names
    (batch,) = _batches(g, "conv/Conv_1/Convolve")
    read = {g.state.vars[int(v)].name for v in np.unique(batch.fields["in"][1])}
    assert read == {"conv/actsRearranged"}
    xv, wv, out = run_convolution(g, prog, x, w, y, tmp_path, seed=6, dtype=np.float16)
    ref = correlate(xv, wv, padding=(1, 1))
    assert np.allclose(out.astype(np.float64), ref, atol=0.05 * np.abs(ref).max())


def test_backward_weights_without_a_group_to_transpose_are_copied_flipped(tmp_path):
    # 7 output channels: the forward weights' output-channel group is 1, so poplin's G5 is 1 and
    # weightsTransposeChansFlipXY only copies the flipped view (no Transpose2d vertices)
    g = codelet_graph(16)
    fwd = poplin.ConvParams(1, 16, 7, (4, 4), (3, 3), (1, 1), (1, 1), FLOAT)
    bwd = poplin.ConvParams(1, 7, 16, (4, 4), (3, 3), (1, 1), (1, 1), FLOAT)
    w, deltas, prog, grads = _backward_convolution(g, fwd, bwd)
    assert not [cs for cs in g.state.compute_sets if cs.name == "Bwd/WeightTranspose"]
    assert "Bwd/partialTranspose" not in {v.name for v in g.state.vars}
    _assert_input_gradients(g, prog, w, deltas, grads, tmp_path, seed=6)


def test_input_elements_no_cell_reads_stay_with_their_neighbours():
    # a 1x1 convolution at stride 2 reads every other row: the skipped rows are mapped with the
    # rows before them (extendPartialMap), never to a tile the convolution does not run on
    for params in (
        poplin.ConvParams(4, 64, 128, (8, 8), (1, 1), (2, 2), (0, 0), HALF),
        poplin.ConvParams(1, 64, 64, (14, 14), (3, 3), (2, 2), (0, 0), HALF),
    ):
        g = codelet_graph(1472)
        x = poplin.createInput(g, params, "in")
        tiles = {cell[9] for cell in conv_planner._conv_grid(g, params).cells()}
        assert _tiles_of(g, x) <= tiles


def test_unsplit_input_channels_are_cast_not_reduced(tmp_path):
    # one cell per block of outputs (the 8 input channels are not split): nothing to sum, so poplin
    # casts the float partials to half on their tiles (Convolution.cpp, convolutionImpl; a reduction
    # of depth one is a cast in ConvReduce.cpp) and takes a float convolution's partials as its output
    for dtype, np_type in ((HALF, np.float16), (FLOAT, np.float32)):
        g = codelet_graph(64)
        p = poplin.ConvParams(2, 8, 32, (6, 6), (3, 3), (1, 1), (1, 1), dtype)
        assert conv_planner._conv_grid(g, p, FLOAT).plan.pk == 1
        x, w, prog, y = build_convolution(
            g, p, {"planConstraints": {"0": {"transform": {"expandDims": []}}}}, names=("in", "w")
        )
        names = [cs.name for cs in g.state.compute_sets]
        assert not any(name.endswith("/Reduce") for name in names), names
        assert ("conv/Conv_1/Cast" in names) == (dtype == HALF)
        if dtype == FLOAT:
            assert {g.state.vars[int(v)].name for v in y.variable_ids()} == {"conv/partials"}
        xv, wv, out = run_convolution(g, prog, x, w, y, tmp_path / dtype.name, seed=7, dtype=np_type)
        assert np.allclose(out, correlate(xv, wv, padding=(1, 1)), atol=0.05 if dtype == HALF else 1e-4)


def test_only_a_1x1_kernel_writes_the_output_type_and_the_planner_counts_the_cast(tmp_path):
    # poplin lets AMP vertices write the narrower output type only for a kernel of all ones whose
    # channels fit one conv unit (ConvVertexType.cpp, getConvVertexAMPCandidates): a strided 1x1
    # convolution of 8 half channels writes half, no Cast; a 3x3 one writes float partials and casts
    # them, and its plan's estimate counts that cast
    g = codelet_graph(64)
    pointwise = poplin.ConvParams(2, 8, 32, (8, 8), (1, 1), (2, 2), (0, 0), HALF)
    x, w, prog, y = build_convolution(g, pointwise, names=("in", "w"))
    names = [cs.name for cs in g.state.compute_sets]
    assert "conv/Conv_1/Cast" not in names
    assert {g.state.vars[int(v)].dtype for v in y.variable_ids()} == {HALF}
    xv, wv, out = run_convolution(g, prog, x, w, y, tmp_path, seed=8, dtype=np.float16)
    assert np.allclose(out, correlate(xv, wv, stride=(2, 2)), atol=0.05)
    plan = conv_planner._conv_grid(g, pointwise, FLOAT).plan
    assert plan.vertex_out_type() == HALF
    # the planner sends its halves on, unreduced: the first reduction stage's exchange of the
    # tile's outputs at 2 bytes each, 4 bytes a cycle (ConvModel.cpp, addExchangeCycleEstimates:
    # reduceFirstStageExchangeCycles in the vertex's output type)
    assert plan.pk == 1 and plan.estimate["reduceExchange"] == -(-plan.mb * plan.nb * 2 // 4)

    g = codelet_graph(64)
    arch = g.target.arch
    square = poplin.ConvParams(2, 8, 32, (6, 6), (3, 3), (1, 1), (1, 1), HALF)
    plan = conv_planner._conv_grid(g, square, FLOAT).plan
    assert plan.pk == 1 and plan.vertex_out_type() == FLOAT
    # total = compute + exchange + the first reduction stage's exchange of the tile's float
    # partials, 4 bytes each at 4 bytes a cycle, counted though nothing is reduced
    # (addExchangeCycleEstimates: reduceFirstStageExchangeCycles) + sync + the cast of the
    # tile's outputs with its own sync
    from simulator.codelets.popops import cast_supervisor_cycles

    outputs = plan.mb * plan.nb
    cast = int(cast_supervisor_cycles("float", "half", outputs, arch.data_path_width)) + arch.min_sync_delay
    e = plan.estimate
    assert e["reduceExchange"] == outputs * 4 // 4
    assert e["total"] == e["compute"] + e["exchange"] + e["reduceExchange"] + arch.min_sync_delay + cast
