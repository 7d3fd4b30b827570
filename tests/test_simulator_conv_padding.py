"""Asymmetric padding of a convolution (poplin's inputTransform.paddingLower and paddingUpper;
single_conv_layer's --padding-lower and --padding-upper): the output field and the MACs, the
results on data of the forward and backward passes as planned, swapped and expanded, the conv
preset's knobs, and symmetric padding planned as it always was."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from simulator_run import build_convolution, codelet_graph, correlate, run_convolution

from pva.cli import main as cli_main
from simulator import FLOAT, HALF, Sequence
from simulator.errors import OptionError
from simulator.poplibs import poplin
from simulator.poplibs.poplin import conv_planner, planner
from simulator.presets import build_preset
from simulator.presets.layers import _conv_backward_params


def _params(lower, upper, stride=(1, 1), batch=2, in_chans=3, out_chans=4, field=(7, 8), kernel=(3, 3)):
    return poplin.ConvParams(batch, in_chans, out_chans, field, kernel, stride, lower, FLOAT, upper)


def _transform(**transform) -> dict:
    return {"planConstraints": {"0": {"transform": transform}}}


# -- the parameters -----------------------------------------------------------------------------


def test_output_field_counts_the_padding_at_each_end():
    # 7 x 8 field, 3 x 3 kernel: (7 + 1 + 0 - 3) + 1 = 6 rows, (8 + 0 + 2 - 3) + 1 = 8 columns
    p = _params((1, 0), (0, 2))
    assert p.pad_widths == ((1, 0), (0, 2))
    assert p.out_field == (6, 8)
    # at stride 2: (7 + 1 - 3) // 2 + 1 = 3 and (8 + 2 - 3) // 2 + 1 = 4
    assert _params((1, 0), (0, 2), (2, 2)).out_field == (3, 4)
    # only the upper end padded: 7 + 2 - 3 + 1 = 7 rows
    assert _params((0, 0), (2, 0)).out_field == (7, 6)


def test_macs_leave_out_the_padding_at_each_end():
    # rows: kernel row 0 reads padding at output row 0 only (5 rows), rows 1 and 2 none (6 each);
    # columns: kernel column 0 reads none (8), column 1 the last output (7), column 2 the last two (6)
    p = _params((1, 0), (0, 2))
    assert p.macs == 2 * 4 * 3 * (5 + 6 + 6) * (8 + 7 + 6)


def test_symmetric_padding_is_the_padding_as_before():
    sym = poplin.ConvParams(4, 8, 8, (9, 9), (3, 3), (1, 1), (1, 2), HALF)
    assert sym.padding_upper is None and sym.pad_widths == ((1, 1), (2, 2))
    # an upper padding equal to the lower is the symmetric convolution, equal to it
    same = poplin.ConvParams(4, 8, 8, (9, 9), (3, 3), (1, 1), (1, 2), HALF, (1, 2))
    assert same == sym and same.padding_upper is None
    # a copy with another padding stays symmetric; an asymmetric copy keeps its upper padding
    assert dataclasses.replace(sym, padding=(0, 0)).pad_widths == ((0, 0), (0, 0))
    asym = dataclasses.replace(sym, padding_upper=(0, 2))
    assert asym != sym and asym.pad_widths == ((1, 0), (2, 2)) and asym.out_field == (8, 11)


def test_expanded_dims_lose_their_padding_at_both_ends():
    p = _params((1, 0), (0, 2))
    e = conv_planner._expanded(p, (1,))
    assert (e.in_chans, e.field, e.kernel, e.pad_widths) == (9, (7, 8), (3, 1), ((1, 0), (0, 0)))
    assert e.out_field == p.out_field == (6, 8)
    both = conv_planner._expanded(p, (1, 0))
    assert (both.in_chans, both.field, both.pad_widths) == (27, (6, 8), ((0, 0), (0, 0)))
    # a 1x1 kernel padded at one end only is not flattened, and its padded dim is an expansion
    one = poplin.ConvParams(2, 16, 8, (4, 4), (1, 1), (1, 1), (0, 0), HALF, (0, 1))
    assert conv_planner._flattened(one) is None and not conv_planner._is_flat(one)
    assert conv_planner._expand_candidates(one) == [(), (1,)]
    assert conv_planner._flattened(poplin.ConvParams(2, 16, 8, (4, 4), (1, 1))) is not None


def test_swapped_operands_keep_each_ends_padding():
    # the flipped weights (3 x 2) padded by h + lower - k before and h + upper - k after each dim
    s = conv_planner._swapped(_params((1, 0), (0, 2), field=(5, 6), kernel=(3, 2)))
    assert (s.batch, s.in_chans, s.out_chans, s.field, s.kernel) == (4, 3, 2, (3, 2), (5, 6))
    assert s.pad_widths == ((5 + 1 - 3, 5 + 0 - 3), (6 + 0 - 2, 6 + 2 - 2))
    assert s.out_field == (4, 7)
    # one end whose swapped padding would be negative is not swapped: 2 + 0 - 3 < 0
    assert conv_planner._swapped(_params((2, 0), (0, 0), field=(2, 4), kernel=(3, 3))) is None


def test_the_planner_reads_the_input_from_the_lower_padding():
    # a 1 x 1 kernel at stride 2 over 5 rows, padded 1 before and 0 after: 3 outputs read rows
    # -1, 1 and 3, so the whole output reads rows 1 to 3 (3 rows); padded 0 before and 1 after,
    # rows 0, 2 and 4 (5 rows)
    assert planner._input_range_size(5, 1, 2, 1, 3) == 3
    assert planner._input_range_size(5, 1, 2, 0, 3) == 5
    p = poplin.ConvParams(1, 16, 16, (5, 5), (1, 1), (2, 2), (1, 0), HALF, (0, 1))
    assert p.out_field == (3, 3)
    # a tile of all 3 x 3 outputs of 16 channels receives those 3 rows of 5 columns
    conv_input = (3, *p.field, *p.stride, *p.padding)
    assert poplin.input_elements(conv_input, p.kernel, 3, np.array([9]), np.array([16])).tolist() == [3 * 5 * 16]


# -- on data ------------------------------------------------------------------------------------


CASES = [
    ((1, 1), (0, 0), (1, 1)),
    ((0, 0), (2, 2), (1, 1)),
    ((1, 0), (0, 2), (1, 1)),
    ((1, 0), (0, 2), (2, 2)),
    ((2, 1), (0, 1), (2, 1)),
]


@pytest.mark.parametrize(("lower", "upper", "stride"), CASES)
def test_forward_pass_matches_the_numpy_reference(tmp_path, lower, upper, stride):
    g = codelet_graph(16)
    params = _params(lower, upper, stride)
    x, w, prog, y = build_convolution(g, params)
    assert tuple(y.shape) == (2, 4, *params.out_field)
    xv, wv, out = run_convolution(g, prog, x, w, y, tmp_path, seed=11)
    ref = correlate(xv, wv, stride=stride, padding=lower, padding_upper=upper)
    assert ref.shape == out.shape
    assert np.allclose(out, ref, atol=1e-4)
    if lower != upper:  # the ends told apart: not the convolution padded the other way round
        assert not np.allclose(out, correlate(xv, wv, stride=stride, padding=upper, padding_upper=lower), atol=1e-2)


@pytest.mark.parametrize(
    ("options", "transforms"),
    [
        (_transform(expandDims=[1]), (False, (1,))),
        (_transform(expandDims=[0, 1]), (False, (1, 0))),
        (_transform(swapOperands=True), (True, ())),
        (_transform(swapOperands=True, expandDims=[0]), (True, (0,))),
    ],
)
def test_transformed_convolution_matches_the_numpy_reference(tmp_path, options, transforms):
    g = codelet_graph(16)
    params = _params((1, 0), (0, 2))
    assert poplin.conv_transforms(g, params, FLOAT, options) == transforms
    x, w, prog, y = build_convolution(g, params, options)
    assert tuple(y.shape) == (2, 4, 6, 8)
    xv, wv, out = run_convolution(g, prog, x, w, y, tmp_path, seed=4)
    assert np.allclose(out, correlate(xv, wv, padding=(1, 0), padding_upper=(0, 2)), atol=1e-4)


def _input_gradient(dy, w, field, stride, lower):
    """The gradient of sum(dy * correlate(x, w)) with respect to x: each output's delta spread back
    over the inputs it read, the padding cut off."""
    b, _, oh, ow = dy.shape
    _, c, kh, kw = w.shape
    (sh, sw), (ph, pw) = stride, lower
    grad = np.zeros((b, c, (oh - 1) * sh + kh, (ow - 1) * sw + kw))
    for i in range(kh):
        for j in range(kw):
            grad[:, :, i : i + sh * oh : sh, j : j + sw * ow : sw] += np.einsum("bohw,oc->bchw", dy, w[:, :, i, j])
    grad = np.pad(
        grad, ((0, 0), (0, 0), (0, max(0, ph + field[0] - grad.shape[2])), (0, max(0, pw + field[1] - grad.shape[3])))
    )
    return grad[:, :, ph : ph + field[0], pw : pw + field[1]]


def _backward(tmp_path, fwd, options=None, seed=0):
    g = codelet_graph(16)
    bwd = _conv_backward_params(fwd)
    w = poplin.createWeights(g, fwd, "weights")
    deltas = poplin.createInput(g, bwd, "deltas")
    prog = Sequence()
    grads = poplin.convolution(g, deltas, w, bwd, prog, "Bwd", options, transposeAndFlipWeights=True)
    dv, wv, out = run_convolution(g, prog, deltas, w, grads, tmp_path, seed=seed)
    return bwd, dv, wv, out


@pytest.mark.parametrize(("lower", "upper"), [((1, 1), (0, 0)), ((0, 0), (2, 2)), ((1, 0), (0, 2)), ((2, 1), (0, 1))])
def test_backward_pass_is_the_input_gradient(tmp_path, lower, upper):
    fwd = _params(lower, upper)
    bwd, dv, wv, out = _backward(tmp_path, fwd, seed=9)
    # the deltas padded by kernel - 1 less the forward padding, each end its own
    assert bwd.pad_widths == tuple((2 - lo, 2 - hi) for lo, hi in zip(lower, upper))
    assert bwd.out_field == fwd.field
    assert np.allclose(out, _input_gradient(dv, wv, fwd.field, (1, 1), lower), atol=1e-4)


@pytest.mark.parametrize("options", [_transform(swapOperands=True), _transform(expandDims=[1])])
def test_transformed_backward_pass_is_the_input_gradient(tmp_path, options):
    fwd = _params((1, 0), (0, 2), batch=3, in_chans=2, out_chans=1)
    _, dv, wv, out = _backward(tmp_path, fwd, options, seed=6)
    assert np.allclose(out, _input_gradient(dv, wv, fwd.field, (1, 1), (1, 0)), atol=1e-4)


def test_strided_backward_pass_convolves_the_deltas_at_stride_1(tmp_path):
    # the conv preset's backward pass of a strided convolution: the 3 x 4 deltas, not dilated,
    # padded by 2 - 1 = 1 and 2 - 0 = 2 rows, 2 - 0 = 2 and 2 - 2 = 0 columns
    fwd = _params((1, 0), (0, 2), (2, 2))
    bwd, dv, wv, out = _backward(tmp_path, fwd, seed=8)
    assert (bwd.field, bwd.stride, bwd.pad_widths, bwd.out_field) == ((3, 4), (1, 1), ((1, 2), (2, 0)), (4, 4))
    flipped = wv.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1]
    assert np.allclose(out, correlate(dv, flipped, padding=(1, 2), padding_upper=(2, 0)), atol=1e-4)


def test_backward_pass_leaves_out_the_deltas_that_read_padding_only():
    # padding wider than the kernel less one: the outputs at the edges read zeros only, and their
    # deltas reach no input (poplin truncates them away); the gradient has the input's 4 x 4 field
    fwd = poplin.ConvParams(1, 4, 4, (4, 4), (3, 3), (1, 1), (10, 10), FLOAT)
    assert fwd.out_field == (22, 22)
    bwd = _conv_backward_params(fwd)
    assert (bwd.field, bwd.pad_widths, bwd.out_field) == ((6, 6), ((0, 0), (0, 0)), (4, 4))
    # kernel 4, stride 4, padding 3: the 3 x 3 deltas unpadded would give no output (it was an
    # internal error); padded after by one, they give one
    fwd = poplin.ConvParams(1, 4, 4, (8, 8), (4, 4), (4, 4), (3, 3), FLOAT)
    bwd = _conv_backward_params(fwd)
    assert (bwd.field, bwd.pad_widths, bwd.out_field) == ((3, 3), ((0, 1), (0, 1)), (1, 1))


# -- the conv preset ----------------------------------------------------------------------------


def _macs(**knobs) -> int:
    base = {"field": "6,5", "kernel-size": "3", "input-channels": 8, "output-channels": 16, "batch-size": 2}
    built = build_preset("conv", {**base, "tiles-per-ipu": 16, "single-phase": "fwd", **knobs})
    return built.notes["macs"]


def test_conv_preset_pads_each_end_as_its_knobs_say():
    # 6 x 5 field, 3 x 3 kernel; padded 1 at both ends by default: kernel rows write 5 + 6 + 5
    # output rows, kernel columns 4 + 5 + 4 output columns
    assert _macs() == 2 * (5 + 6 + 5) * (4 + 5 + 4) * 16 * 8
    # --padding-lower 1 alone: the end is not padded (single_conv_layer's --padding-upper 0), so
    # 5 x 4 outputs, of which kernel row and column 0 miss the first: 4 + 5 + 5 and 3 + 4 + 4
    assert _macs(**{"padding-lower": "1"}) == 2 * (4 + 5 + 5) * (3 + 4 + 4) * 16 * 8
    # --padding-upper {2,0} alone: 6 x 3 outputs; the rows padded 2 after, the columns not at all
    assert _macs(**{"padding-upper": "{2,0}"}) == 2 * (6 + 5 + 4) * (3 + 3 + 3) * 16 * 8
    # both: rows 1 before and 0 after, columns 0 before and 2 after
    both = _macs(**{"padding-lower": "1,0", "padding-upper": "0,2"})
    assert both == 2 * (4 + 5 + 5) * (5 + 4 + 3) * 16 * 8
    # equal lower and upper knobs are --padding
    assert _macs(**{"padding-lower": "1", "padding-upper": "1"}) == _macs(padding="1")


def test_conv_preset_builds_the_backward_pass_of_asymmetric_padding():
    knobs = {"field": "6,5", "kernel-size": "3", "padding-lower": "1", "input-channels": 8}
    built = build_preset("conv", {**knobs, "output-channels": 16, "batch-size": 2, "tiles-per-ipu": 16})
    shapes = {v.name: tuple(v.shape) for v in built.graph.state.vars}
    # the forward output is 5 x 4; its deltas, padded 1 row and column before and 2 after, give
    # back the 6 x 5 input's gradients (padded by 1 at both ends, 5 x 4 would come back)
    assert shapes["conv/deltas"] == (2 * 16 * 5 * 4,)
    assert shapes["Bwd/out"] == shapes["conv/in"] == (2 * 8 * 6 * 5,)
    assert built.runs == [0, 1]


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"padding": "1", "padding-lower": "1"}, "--padding and --padding-lower cannot both be given"),
        ({"padding": "0", "padding-upper": "0"}, "--padding and --padding-upper cannot both be given"),
        ({"padding-lower": "-1"}, "--padding-lower expects one or two non-negative integers"),
        ({"padding-upper": "1.5"}, "--padding-upper expects one or two non-negative integers"),
        ({"padding-upper": "1,2,3"}, "--padding-upper expects one or two non-negative integers"),
        ({"padding-lower": "one"}, "--padding-lower expects one or two non-negative integers"),
        ({"field": "2,2", "kernel-size": "3", "padding-lower": "0,1"}, "output field 0x1 is empty"),
    ],
)
def test_conv_preset_refuses_bad_padding(knobs, message):
    with pytest.raises(OptionError, match=message):
        build_preset("conv", {"tiles-per-ipu": 16, **knobs})


def test_cli_refuses_padding_with_padding_lower(tmp_path, capsys):
    args = ["simulate", "--preset", "conv", "--tiles-per-ipu", "16", "--padding", "1", "--padding-lower", "1"]
    assert cli_main([*args, "-o", str(tmp_path / "out")]) == 2
    assert "--padding and --padding-lower cannot both be given" in capsys.readouterr().err


# -- symmetric padding as before ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        # vgg16_tr_bs4_v1L0 and resnet50_tr_bs4_cnv on Mk2: the plans this simulator makes with one
        # padding for both ends, with the cast of their float partials counted (a kernel wider
        # than 1x1 never writes the output type), and poplin's exchange estimate: the operands'
        # shares already on the tile left out, the inputs at 8 bytes a cycle for an even pn, and
        # the float partials sent on even unreduced (ConvModel.cpp, addExchangeCycleEstimates)
        (
            poplin.ConvParams(4, 4, 64, (224, 224), (3, 3), (1, 1), (1, 1), HALF),
            (180, 8, 1, 5, 8, 4, 4, 8, 63952, 48960, (False, (1, 0))),
        ),
        (
            poplin.ConvParams(4, 4, 64, (224, 224), (7, 7), (2, 2), (3, 3), HALF),
            (150, 8, 1, 3, 8, 4, 4, 8, 88314, 33600, (False, (0,))),
        ),
        (
            poplin.ConvParams(4, 128, 128, (17, 17), (1, 7), (1, 1), (0, 3), HALF),
            (23, 16, 4, 3, 8, 32, 16, 8, 10005, 8480, (False, ())),
        ),
    ],
)
def test_symmetric_padding_builds_the_same_plan_as_before(params, expected):
    g = codelet_graph(1472)
    for p in (params, dataclasses.replace(params, padding_upper=params.padding)):
        grid = conv_planner._conv_grid(g, conv_planner._flattened(p) or p, FLOAT)
        got = (grid.pm, grid.pn, grid.pk, grid.rows_per, grid.o_per, grid.c_per, grid.ig, grid.og)
        estimate = (int(grid.plan.estimate["total"]), int(grid.plan.estimate["memory"]))
        assert (*got, *estimate, poplin.conv_transforms(g, p)) == expected


def test_symmetric_knobs_build_the_same_graph_either_way():
    def layout(knobs):
        state = build_preset("conv", {"tiles-per-ipu": 64, "stride": "2", **knobs}).graph.state
        return [(v.name, tuple(v.shape)) for v in state.vars], [(c.name, c.num_vertices) for c in state.compute_sets]

    vars_, sets = layout({"padding": "0,2"})
    assert (vars_, sets) == layout({"padding-lower": "0,2", "padding-upper": "0,2"})
    # the learning rate is a constant tensor, as the tool passes it; the forward function's input,
    # weights and the output's copy are three of the variables
    assert len(vars_) == 19 and len(sets) == 9
    # the default pads both ends by 1, as --padding 1 does
    assert layout({}) == layout({"padding": "1"}) != layout({"padding-lower": "1"})
