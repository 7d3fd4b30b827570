"""poplin's swapOperands and expandDims transforms of a convolution: which the plan applies (its
operands swapped, field dims folded into its input channels), what the planner charges for them,
and the transformed convolution's results on data."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from simulator_run import build_convolution, codelet_graph, correlate, run_convolution

from formats.pop.reader import ProfileReader
from simulator import FLOAT, HALF, Graph, Sequence, Target
from simulator.errors import GraphError
from simulator.poplibs import poplin
from simulator.poplibs.poplin import conv_planner


def _constraint(dims, **more) -> dict:
    return {"planConstraints": {"0": {"transform": {"expandDims": dims, **more}}}}


def _vertex_types(tmp_path) -> set[str]:
    r = ProfileReader(tmp_path / "profile.pop")
    try:
        return set(r.column("SELECT name FROM vertex_types"))
    finally:
        r.close()


def test_candidates_are_the_dims_no_narrower_than_the_kernel_innermost_first():
    wide = poplin.ConvParams(1440, 1, 100, (15, 200), (5, 200))
    assert conv_planner._expand_candidates(wide) == [(), (0,), (1,), (1, 0)]
    # the backward pass of the same layer: its field (11 x 1) is narrower than the kernel along dim 1
    bwd = poplin.ConvParams(1440, 100, 1, (11, 1), (5, 200), (1, 1), (4, 199))
    assert conv_planner._expand_candidates(bwd) == [(), (0,)]
    # a 1x1 kernel at stride 1 without padding changes nothing when expanded; at stride 2 it does
    assert conv_planner._expand_candidates(poplin.ConvParams(4, 64, 64, (56, 56), (1, 1))) == [()]
    strided = poplin.ConvParams(4, 64, 64, (56, 56), (1, 1), (2, 1))
    assert conv_planner._expand_candidates(strided) == [(), (0,)]


def test_expanded_params_fold_kernel_positions_into_channels():
    p = poplin.ConvParams(2, 3, 5, (9, 10), (3, 5), (2, 1), (1, 2))
    assert p.out_field == (5, 10)
    e = conv_planner._expanded(p, (1,))
    assert (e.in_chans, e.field, e.kernel, e.stride, e.padding) == (15, (9, 10), (3, 1), (2, 1), (1, 0))
    both = conv_planner._expanded(p, (1, 0))
    assert (both.in_chans, both.field, both.kernel, both.stride, both.padding) == (45, (5, 10), (1, 1), (1, 1), (0, 0))
    assert both.out_field == p.out_field
    assert both.macs == 2 * 5 * 45 * 5 * 10  # the padding's products are counted once expanded


def test_transform_cost_is_poplins_copy_of_the_padded_input_and_weights():
    g = codelet_graph(16)
    p = conv_planner._expanded(poplin.ConvParams(2, 1, 5, (5, 12), (3, 12), dtype=HALF), (1, 0))
    grid = conv_planner._conv_grid(g, conv_planner._flattened(p), FLOAT)
    assert (grid.pm * grid.pn * grid.pk, grid.plan.k_grain, grid.plan.n_grain) == (9, 16, 8)
    # input 2 x 3 x 48 (36 channels padded to 16s) and weights 48 x 8: 672 halves over 9 tiles, 150
    # bytes a tile: exchanged at 4 bytes a cycle (38) and copied at 2 x 4/5 bytes a cycle (94);
    # the output, 5 channels padded to 8: 12 bytes a tile, 3 + ceil(12 x 5 / 6) = 13
    assert conv_planner._conv_transform_cost(g.target.arch, p, grid, True) == (38 + 94 + 13, 300)


def test_the_copies_an_expansion_implies_decide_between_candidates():
    g = codelet_graph(16)
    arch = g.target.arch

    def planned(params, dims):
        e = conv_planner._expanded(params, dims)
        return e, conv_planner._conv_grid(g, conv_planner._flattened(e) or e, FLOAT)

    # 8 half channels, a 5 x 5 kernel over 12 x 12: both dims expanded (200 channels) plan in the
    # fewest cycles, but the rows alone (40 channels) cost less with the copies that build the
    # operands (over 10 x 10 the expanded plan, a 1 x 1 x 13 grid whose operands are all on their
    # tiles already (ConvModel.cpp, addExchangeCycleEstimates), saves enough exchange to pay for
    # its copies)
    halves = poplin.ConvParams(1, 8, 8, (12, 12), (5, 5), (1, 1), (1, 1), HALF)
    plan_only = {d: planned(halves, d)[1].plan.estimate["total"] for d in conv_planner._expand_candidates(halves)}
    assert min(plan_only, key=plan_only.get) == (1, 0)
    assert poplin.conv_transforms(g, halves) == (False, (0,))
    # 8 float channels, rows expanded: 24 channels fill their groups of 8, yet the input and the
    # weights are rearranged because dims are expanded: 2,400 + 3 x 24 x 16 elements over 15
    # tiles, 948 bytes a tile, exchanged (237) and copied at 4 x 4/5 bytes a cycle (297); the
    # output, 4 channels padded to 16: 428 bytes a tile, 107 + 134
    floats = poplin.ConvParams(1, 8, 4, (10, 10), (3, 3), (1, 1), (1, 1), FLOAT)
    e, grid = planned(floats, (0,))
    assert (grid.pm * grid.pn * grid.pk, grid.plan.k_grain, grid.plan.n_grain) == (15, 8, 16)
    assert conv_planner._conv_transform_cost(arch, e, grid, True) == (237 + 297 + 107 + 134, 2 * 948)
    assert poplin.conv_transforms(g, floats) == (False, (0,))


def test_one_channel_wide_kernel_is_expanded_into_a_pointwise_product(tmp_path):
    g = codelet_graph(16)
    params = poplin.ConvParams(2, 1, 5, (5, 12), (3, 12), dtype=FLOAT)
    assert poplin.conv_transforms(g, params) == (False, (1, 0))
    x, w, prog, y = build_convolution(g, params)
    xv, wv, out = run_convolution(g, prog, x, w, y, tmp_path, seed=4)
    assert out.shape == (2, 5, 3, 1)
    assert np.allclose(out, correlate(xv, wv), atol=1e-4)
    # 36 channels (3 x 12 kernel positions of one channel) on the AMP units, not HMAC's one channel
    types = _vertex_types(tmp_path)
    assert "poplin::ConvPartial1x1Out<float,float,true,false>" in types
    assert not any("HorizontalMac" in t for t in types)
    assert {"conv/actsExpanded", "conv/weightsExpanded"} <= {v.name for v in g.state.vars}


def test_expansion_cuts_the_cycles_of_a_one_channel_layer():
    g = codelet_graph(64)
    params = poplin.ConvParams(64, 1, 32, (15, 40), (5, 40), dtype=HALF)
    plain = conv_planner._conv_grid(g, params, FLOAT).plan.estimate["total"]
    e = conv_planner._expanded(params, poplin.conv_transforms(g, params)[1])
    expanded = conv_planner._conv_grid(g, conv_planner._flattened(e) or e, FLOAT).plan.estimate["total"]
    assert poplin.conv_transforms(g, params) == (False, (1, 0))
    assert expanded * 10 < plain


def test_a_wide_layer_is_left_as_it_is():
    g = codelet_graph(1472)
    params = poplin.ConvParams(4, 128, 128, (28, 28), (3, 3), (1, 1), (1, 1), HALF)
    assert poplin.conv_transforms(g, params) == (False, ())


def test_a_tile_receives_the_input_rows_its_outputs_read_once():
    # 2 images of 10 x 12, a 3 x 3 kernel at stride 2 with padding 1: output 5 x 6, which reads
    # the whole field. A tile of 3 output rows of one image reads (3 - 1) x 2 + 3 = 7 input rows
    # of the 12 columns; a tile of 7 rows spans 2 images and reads each whole, never more than the
    # whole output reads (poplin's getMaxInputRangeSize). 16 channels each time.
    geometry = (5, 10, 12, 2, 2, 1, 1)
    got = poplin.input_elements(geometry, (3, 3), 6, np.array([18, 42]), np.array([16, 16]))
    assert got.tolist() == [1 * 7 * 12 * 16, 2 * 10 * 12 * 16]
    # a 1 x 1 kernel at stride 2 with padding 1 over 6 x 6: the 4 x 4 outputs read rows and
    # columns -1, 1, 3 and 5, so the whole output reads 5 x 5 of the field, from row 1 to row 5
    # (poplin's getInputRange), and a tile of 2 output rows reads 3 input rows
    got = poplin.input_elements((4, 6, 6, 2, 2, 1, 1), (1, 1), 4, np.array([16, 8]), np.array([1, 1]))
    assert got.tolist() == [5 * 5, 3 * 5]


@pytest.mark.parametrize("dims", [[1], [0], [0, 1], []])
def test_a_constrained_expansion_computes_the_same_convolution(tmp_path, dims):
    g = codelet_graph(16)
    params = poplin.ConvParams(2, 2, 6, (9, 10), (3, 5), (2, 1), (1, 2), FLOAT)
    options = _constraint(dims)
    assert poplin.conv_transforms(g, params, FLOAT, options) == (False, tuple(sorted(dims, reverse=True)))
    x, w, prog, y = build_convolution(g, params, options)
    xv, wv, out = run_convolution(g, prog, x, w, y, tmp_path, seed=7)
    assert np.allclose(out, correlate(xv, wv, stride=(2, 1), padding=(1, 2)), atol=1e-4)
    # the positions that fall in the padding are zeroed in place, the rest copied from the input
    names = {cs.name for cs in g.state.compute_sets}
    assert ("conv/expandActs/padding/Zero" in names) == bool(dims)


def _assert_backward_pass(tmp_path, fwd, options, seed: int) -> None:
    """The backward pass of `fwd` (3 x 3 kernel, padding 1, stride 1) under `options`: the deltas
    correlated with the transposed and flipped forward weights, on random data."""
    g = codelet_graph(16)
    bwd = dataclasses.replace(fwd, in_chans=fwd.out_chans, out_chans=fwd.in_chans)
    w = poplin.createWeights(g, fwd, "weights")
    deltas = poplin.createInput(g, bwd, "deltas")
    prog = Sequence()
    grads = poplin.convolution(g, deltas, w, bwd, prog, "Bwd", options, transposeAndFlipWeights=True)
    dv, wv, out = run_convolution(g, prog, deltas, w, grads, tmp_path, seed=seed)
    flipped = wv.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1]
    assert np.allclose(out, correlate(dv, flipped, padding=(1, 1)), atol=1e-4)


def test_backward_pass_through_expanded_dims(tmp_path):
    fwd = poplin.ConvParams(2, 3, 4, (6, 6), (3, 3), (1, 1), (1, 1), FLOAT)
    _assert_backward_pass(tmp_path, fwd, _constraint([1]), seed=5)


@pytest.mark.parametrize("dims", [[2], "1", [True], {"a": 1}])
def test_a_bad_expand_constraint_is_refused(dims):
    g = codelet_graph(16)
    with pytest.raises(GraphError, match="expandDims"):
        poplin.conv_transforms(g, poplin.ConvParams(1, 1, 1, (4, 4), (2, 2)), FLOAT, _constraint(dims))


# -- swapped operands ------------------------------------------------------------------------------


def test_swapped_params_exchange_batch_and_output_channels():
    p = poplin.ConvParams(1440, 100, 1, (11, 1), (5, 200), (1, 1), (4, 199), HALF)
    s = conv_planner._swapped(p)
    # the weights (1 x 100 x 5 x 200) are the input of a batch of 1, the deltas the kernel of 1,440
    # output channels, padded by 11 + 4 - 5 and 1 + 199 - 200 so the output field stays 15 x 200
    assert (s.batch, s.in_chans, s.out_chans, s.field, s.kernel, s.padding) == (
        1,
        100,
        1440,
        (5, 200),
        (11, 1),
        (10, 0),
    )
    assert s.out_field == p.out_field == (15, 200)
    assert conv_planner._swapped(poplin.ConvParams(4, 8, 8, (9, 9), (3, 3), (2, 2), (1, 1))) is None  # stride 2
    assert conv_planner._swapped(poplin.ConvParams(4, 8, 8, (2, 2), (5, 5), (1, 1), (2, 2))) is None  # padding -1


def test_one_output_channel_over_a_large_batch_is_swapped():
    # the backward pass of conv_5x200_1_in_100_out_bs1440: one output channel, a batch of 1,440
    g = codelet_graph(1472)
    bwd = poplin.ConvParams(1440, 100, 1, (11, 1), (5, 200), (1, 1), (4, 199), HALF)
    assert poplin.conv_transforms(g, bwd) == (True, ())
    fwd = poplin.ConvParams(1440, 1, 100, (15, 200), (5, 200), (1, 1), (0, 0), HALF)
    assert poplin.conv_transforms(g, fwd) == (False, (1, 0))


def test_swapping_costs_copies_of_the_input_weights_and_output():
    g = codelet_graph(16)
    p = poplin.ConvParams(2, 16, 8, (4, 4), (1, 1), dtype=HALF)
    grid = conv_planner._conv_grid(g, conv_planner._flattened(p), FLOAT)
    assert (grid.pm * grid.pn * grid.pk, grid.plan.k_grain, grid.plan.n_grain) == (16, 16, 8)
    # as given: 16 input channels in one group and 8 output channels in one conv-unit group, so
    # only the output is regrouped (8 is not one conv unit's 16 weights): 2 x 16 positions x 8
    # halves over 16 tiles, 32 bytes a tile, copied at 8 bytes a cycle and 4/5 of that: 5 cycles
    assert conv_planner._conv_transform_cost(g.target.arch, p, grid, False) == (5, 64)
    # swapped: the input (2 x 16 x 16) and the weights (16 x 8), 80 bytes a tile, exchanged (20)
    # and copied at 2 bytes a cycle x 4/5 (50); the output rearranged too, 8 + 20
    assert conv_planner._conv_transform_cost(g.target.arch, p, grid, False, True) == (20 + 50 + 8 + 20, 160)


@pytest.mark.parametrize("dims", [[], [0], [1], [0, 1]])
def test_a_swapped_convolution_computes_the_same_convolution(tmp_path, dims):
    g = codelet_graph(16)
    params = poplin.ConvParams(3, 2, 4, (5, 6), (3, 2), (1, 1), (1, 0), FLOAT)
    options = _constraint(dims, swapOperands=True)
    assert poplin.conv_transforms(g, params, FLOAT, options) == (True, tuple(sorted(dims, reverse=True)))
    x, w, prog, y = build_convolution(g, params, options)
    assert tuple(y.shape) == (3, 4, 5, 5)
    xv, wv, out = run_convolution(g, prog, x, w, y, tmp_path, seed=3)
    assert np.allclose(out, correlate(xv, wv, padding=(1, 0)), atol=1e-4)
    what = "Expanded" if dims else "Swapped"
    assert {f"conv/acts{what}", f"conv/weights{what}"} <= {v.name for v in g.state.vars}


def test_backward_pass_with_swapped_operands(tmp_path):
    fwd = poplin.ConvParams(6, 3, 1, (4, 5), (3, 3), (1, 1), (1, 1), FLOAT)
    _assert_backward_pass(tmp_path, fwd, {"planConstraints": {"0": {"transform": {"swapOperands": True}}}}, seed=2)


@pytest.mark.parametrize("value", ["yes", 1])
def test_a_bad_swap_constraint_is_refused(value):
    g = codelet_graph(16)
    options = {"planConstraints": {"0": {"transform": {"swapOperands": value}}}}
    with pytest.raises(GraphError, match="swapOperands"):
        poplin.conv_transforms(g, poplin.ConvParams(1, 1, 1, (4, 4), (2, 2)), FLOAT, options)
    strided = {"planConstraints": {"0": {"transform": {"swapOperands": True}}}}
    with pytest.raises(GraphError, match="stride 1"):
        poplin.conv_transforms(g, poplin.ConvParams(1, 1, 1, (4, 4), (2, 2), (2, 2)), FLOAT, strided)


def test_when_no_candidate_fits_the_bound_is_doubled_before_it_is_dropped():
    # 4 half channels, a 5 x 5 kernel, on 4 Mk1 tiles: no candidate fits 0.6 x 256 KB (157,286
    # bytes); at twice that, 314,573, only the convolution as given does (298,112 bytes), and it is
    # kept although both dims expanded (479,744 bytes) take fewer cycles
    g = Graph(Target("ipu1", tiles_per_ipu=4))
    params = poplin.ConvParams(4, 4, 64, (32, 32), (5, 5), (1, 1), (2, 2), HALF)
    arch = g.target.arch
    memory, cycles = {}, {}
    for dims in conv_planner._expand_candidates(params):
        e = conv_planner._expanded(params, dims)
        grid = conv_planner._conv_grid(g, conv_planner._flattened(e) or e, FLOAT)
        extra, temp = conv_planner._conv_transform_cost(arch, e, grid, bool(dims), False)
        memory[dims] = max(grid.plan.estimate["memory"], temp)
        cycles[dims] = grid.plan.estimate["total"] + extra
    assert memory == {(): 298112, (0,): 350464, (1,): 350464, (1, 0): 479744}
    assert min(cycles, key=cycles.get) == (1, 0)
    assert poplin.conv_transforms(g, params) == (False, ())


def test_a_candidate_that_cannot_beat_the_best_is_not_planned(monkeypatch):
    # a pointwise layer of 4 x 112 x 112 positions: swapped, its 50,176 positions would be the
    # kernel, 50,176^2 x 32 x 4 multiply-accumulates, more cycles at the tiles' peak rate than the
    # plan as given takes in all, so that candidate is dropped before it is planned
    g = Graph(Target("ipu2"))
    p = conv_planner._flattened(poplin.ConvParams(4, 32, 64, (112, 112), (1, 1), dtype=HALF))
    planned = []
    real = conv_planner._conv_grid

    def counting(graph, params, partials_type=FLOAT, bound=None):
        planned.append(params.kernel)
        return real(graph, params, partials_type, bound)

    monkeypatch.setattr(conv_planner, "_conv_grid", counting)
    assert poplin.conv_transforms(g, p) == (False, ())
    assert planned == [(1, 1)]
