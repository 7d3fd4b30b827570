"""poplin's plan of a 2-D convolution: its parameters, tile grid and transforms.

The transforms are those poplin weighs before it plans a convolution: flattening a 1x1 kernel of
stride 1, expanding field dims into the input channels and swapping the operands
(lib/poplin/ConvPlan.cpp, lib/poplin/ConvModel.cpp, lib/poplin/ConvUtil.cpp).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ...codelets import poplin as amp
from ...errors import GraphError
from ...graph import Graph
from ...types import FLOAT, HALF, Type
from .planner import (
    MatMulPlan,
    _ceil,
    _grain_block,
    _rearrangement_cost,
    _transform_constraints,
    _written_outputs,
    memory_bound,
    partials_type,
    plan_matmul,
    relaxed_bound,
)


@dataclass
class ConvParams:
    """A 2-D convolution: input [batch, inChans, height, width], weights [outChans, inChans, kh, kw].

    `padding` is the zeros before each field dim (poplin's inputTransform.paddingLower) and, unless
    `padding_upper` says otherwise, after it too; `padding_upper` is the zeros after each dim
    (paddingUpper). It is kept None when it equals `padding`, so that symmetric params compare
    equal however they were built, and a copy (dataclasses.replace) with another `padding` stays
    symmetric."""

    batch: int
    in_chans: int
    out_chans: int
    field: tuple[int, int]
    kernel: tuple[int, int]
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    dtype: Type = HALF
    padding_upper: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.padding_upper is not None:
            upper = (self.padding_upper[0], self.padding_upper[1])
            self.padding_upper = None if upper == (self.padding[0], self.padding[1]) else upper

    @property
    def pad_widths(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """The padding of each field dim as (lower, upper), numpy.pad's pad_width."""
        upper = self.padding if self.padding_upper is None else self.padding_upper
        return (self.padding[0], upper[0]), (self.padding[1], upper[1])

    @property
    def out_field(self) -> tuple[int, int]:
        h, w = (
            (f + lo + hi - kk) // s + 1
            for f, (lo, hi), kk, s in zip(self.field, self.pad_widths, self.kernel, self.stride)
        )
        return h, w

    @property
    def macs(self) -> int:
        """Multiply-accumulates, of the outputs each kernel position writes, padding left out
        (PerformanceEstimation.hpp, getNumberOfMACs)."""
        field = 1
        for dim in range(2):
            written = 0
            for k in range(self.kernel[dim]):
                lo, hi = _written_outputs(k, self.field[dim], self.stride[dim], self.padding[dim], self.out_field[dim])
                written += hi - lo
            field *= written
        return self.batch * self.out_chans * self.in_chans * field


@dataclass
class _ConvGrid:
    """A convolution's split over tiles and the channel groups of its operands.

    The output positions (batch x output rows), output channels and input channels are split over
    pm x pn x pk cells, channels in whole groups; cell = (im * pn + jn) * pk + ik runs on tiles[cell].
    The operands are laid out by channel groups as poplin creates them (lib/poplin/Convolution.cpp,
    createInputImpl: [C/ig][N][H][W][ig]; createWeightsImpl: [O/og][C/ig][kh][kw][og][ig]; the
    partials and the reduced output, ConvReduce.cpp multiStageGroupedReduce: [O/og][N][H][W][og]),
    ig the plan's inChansPerGroup and og its partialChansPerGroup, or their largest divisor of the
    channels when the channels are not a multiple of them (poplin pads them instead).
    """

    params: ConvParams
    plan: MatMulPlan
    pm: int
    pn: int
    pk: int
    rows_per: int  # output positions (batch x output rows) of one cell
    o_per: int  # output channels of one cell, whole groups
    c_per: int  # input channels of one cell, whole groups
    ig: int
    og: int
    tiles: np.ndarray  # state tile of each cell

    def cells(self) -> list[tuple[int, int, int, int, int, int, int, int, int, int]]:
        """The non-empty cells: (im, jn, ik, p0, p1, o0, o1, k0, k1, tile)."""
        p = self.params
        positions = p.batch * p.out_field[0]
        out = []
        for im in range(self.pm):
            p0, p1 = im * self.rows_per, min(positions, (im + 1) * self.rows_per)
            for jn in range(self.pn):
                o0, o1 = jn * self.o_per, min(p.out_chans, (jn + 1) * self.o_per)
                for ik in range(self.pk):
                    k0, k1 = ik * self.c_per, min(p.in_chans, (ik + 1) * self.c_per)
                    if p1 > p0 and o1 > o0 and k1 > k0:
                        tile = int(self.tiles[(im * self.pn + jn) * self.pk + ik])
                        out.append((im, jn, ik, p0, p1, o0, o1, k0, k1, tile))
        return out

    def input_ranges(self, cells) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What each cell reads of the input, in its grouped order [C/ig][N][H][W][ig]: one range of
        whole rows per (cell, input channel group, batch element): (cell index, start, length)."""
        p = self.params
        b, h, w, ig = p.batch, p.field[0], p.field[1], self.ig
        oh = p.out_field[0]
        kh, sh, ph = p.kernel[0], p.stride[0], p.padding[0]  # the padding before the field
        rows = []
        for vi, (_im, _jn, _ik, p0, p1, _o0, _o1, k0, k1, _t) in enumerate(cells):
            for bb in range(p0 // oh, (p1 - 1) // oh + 1):
                y0, y1 = max(p0, bb * oh) - bb * oh, min(p1, (bb + 1) * oh) - bb * oh
                ih0, ih1 = max(0, y0 * sh - ph), min(h, (y1 - 1) * sh - ph + kh)
                if ih1 <= ih0:
                    continue
                for gi in range(k0 // ig, k1 // ig):
                    rows.append((vi, ((gi * b + bb) * h + ih0) * w * ig, (ih1 - ih0) * w * ig))
        r = np.array(rows, dtype=np.int64).reshape(-1, 3)
        return r[:, 0], r[:, 1], r[:, 2]

    def kernel_outputs(self, cells) -> tuple[np.ndarray, np.ndarray]:
        """The outputs each kernel position writes: the output rows of each cell a kernel row writes
        [cell, kernel row], and the output columns a kernel column writes [kernel column]; in a
        flattened convolution a cell's positions are one row [cell, 1]."""
        p = self.params
        oh, ow = p.out_field
        p0 = np.array([x[3] for x in cells], dtype=np.int64)
        p1 = np.array([x[4] for x in cells], dtype=np.int64)
        if _is_flat(p):
            return np.ones((len(cells), 1), dtype=np.int64), (p1 - p0)[:, None]
        cols = np.empty(p.kernel[1], dtype=np.int64)
        for kx in range(p.kernel[1]):
            lo, hi = _written_outputs(kx, p.field[1], p.stride[1], p.padding[1], ow)
            cols[kx] = hi - lo
        rows = np.empty((len(cells), p.kernel[0]), dtype=np.int64)
        for ky in range(p.kernel[0]):
            lo, hi = _written_outputs(ky, p.field[0], p.stride[0], p.padding[0], oh)

            def before(q, lo=lo, hi=hi):  # written rows among the first q positions (batch x rows)
                return (q // oh) * (hi - lo) + np.clip(q % oh - lo, 0, hi - lo)

            rows[:, ky] = before(p1) - before(p0)
        return rows, cols

    def weight_ranges(self, cells) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What each cell reads of the weights, in their grouped order [O/og][C/ig][kh][kw][og][ig]:
        one range per (cell, output channel group): (cell index, start, length)."""
        p = self.params
        kk = p.kernel[0] * p.kernel[1]
        ig, og = self.ig, self.og
        groups_in = p.in_chans // ig
        rows = []
        for vi, (_im, _jn, _ik, _p0, _p1, o0, o1, k0, k1, _t) in enumerate(cells):
            for go in range(o0 // og, o1 // og):
                rows.append((vi, (go * groups_in + k0 // ig) * kk * og * ig, (k1 - k0) // ig * kk * og * ig))
        r = np.array(rows, dtype=np.int64).reshape(-1, 3)
        return r[:, 0], r[:, 1], r[:, 2]


def _channel_group(chans: int, group: int) -> int:
    """The plan's channel group, or its largest divisor of `chans` when it does not divide them."""
    return group if chans % group == 0 else math.gcd(chans, group)


#: Input channels below which a convolution runs on ConvPartialHorizontalMac vertices: this
#: simulator's stand-in for poplin's choice among methods, which it does not make for convolutions.
SMALL_CHANNELS = 4


def _conv_grid(graph: Graph, params: ConvParams, partials_type: Type = FLOAT, bound: float | None = None) -> _ConvGrid:
    """The plan of a convolution: the matrix-product plan of its positions, input and output
    channels, whole output rows in a cell, and poplin's tile order (lib/poplin/Convolution.cpp,
    linearizeConvIndices: input-channel split outermost, output channels innermost)."""
    b, c, o = params.batch, params.in_chans, params.out_chans
    oh, ow = params.out_field
    kh, kw = params.kernel
    positions = b * oh
    plan = plan_matmul(
        graph,
        positions * ow,
        c,
        o,
        params.dtype,
        partials_type,
        params.dtype,
        kernel=(kh, kw),
        methods=("HMAC",) if c < SMALL_CHANNELS else ("AMP",),
        out_width=ow,
        conv_input=(oh, *params.field, *params.stride, *params.padding),
        bound=bound,
    )
    ig = _channel_group(c, plan.k_grain)
    og = _channel_group(o, plan.n_grain)
    pm = max(1, min(positions, plan.pm))
    pn, pk = plan.pn, max(1, min(c, plan.pk))
    c_per = _grain_block(c, ig, pk)
    o_per = _grain_block(o, og, pn)
    cell = np.arange(pm * pn * pk, dtype=np.int64)
    linear = ((cell % pk) * pm + cell // (pn * pk)) * pn + (cell // pk) % pn
    tiles = np.asarray(graph.tile(linear), dtype=np.int64)
    return _ConvGrid(params, plan, pm, pn, pk, -(-positions // pm), o_per, c_per, ig, og, tiles)


def _flattened(params: ConvParams) -> ConvParams | None:
    """The convolution poplin plans when a 1x1 kernel, stride 1 and no padding leave every dim as
    it is: the batch and both spatial dims flattened into one field dim of b*h*w output positions,
    which the plan may split anywhere (lib/poplin/ConvModel.cpp, calculateFlattenedParams and
    dimCanBeFlattened); None when there is nothing to flatten. The layout [C/ig][N][H][W][ig] is
    the flattened one's [C/ig][1][NHW][1][ig]."""
    b, (h, w) = params.batch, params.field
    unpadded = params.pad_widths == ((0, 0), (0, 0))
    if params.kernel != (1, 1) or params.stride != (1, 1) or not unpadded or _is_flat(params):
        return None
    return dataclasses.replace(params, batch=1, field=(b * h * w, 1))


def _is_flat(params: ConvParams) -> bool:
    """Whether a convolution is in its flattened form: one field dim of positions, a 1x1 kernel."""
    return (
        params.batch == 1
        and params.field[1] == 1
        and params.kernel == (1, 1)
        and params.stride == (1, 1)
        and params.pad_widths == ((0, 0), (0, 0))
    )


def _expand_candidates(params: ConvParams) -> list[tuple[int, ...]]:
    """The sets of field dims poplin's planner tries expanding into input channels, in its order:
    every subset of the dims whose expansion changes the convolution (not a 1x1 kernel at stride 1
    without padding) and whose input is at least as wide as the kernel, the innermost dim first
    (lib/poplin/ConvPlan.cpp, getExpandDimsCandidates, expandingDimChangesParams, getPowerSet)."""
    dims = [
        d
        for d in range(2)
        if (params.kernel[d], params.stride[d], params.pad_widths[d]) != (1, 1, (0, 0))
        and params.field[d] >= params.kernel[d]
    ]
    return [tuple(reversed([d for j, d in enumerate(dims) if (i >> j) & 1])) for i in range(1 << len(dims))]


def _expanded(params: ConvParams, dims: tuple[int, ...]) -> ConvParams:
    """The convolution with `dims` expanded: each such dim's kernel positions become input channels
    (kernel position outer, channel inner), its field the output's, at stride 1 without padding
    (lib/poplin/ConvModel.cpp, expandDim)."""
    field, kernel = list(params.field), list(params.kernel)
    stride = list(params.stride)
    lower, upper = (list(side) for side in zip(*params.pad_widths))
    chans = params.in_chans
    out = params.out_field
    for d in dims:
        chans *= kernel[d]
        field[d], kernel[d], stride[d], lower[d], upper[d] = out[d], 1, 1, 0, 0
    return dataclasses.replace(
        params,
        in_chans=chans,
        field=(field[0], field[1]),
        kernel=(kernel[0], kernel[1]),
        stride=(stride[0], stride[1]),
        padding=(lower[0], lower[1]),
        padding_upper=(upper[0], upper[1]),
    )


def _swapped(params: ConvParams) -> ConvParams | None:
    """The convolution with its operands swapped, as poplin's swapOperands transform plans it: the
    weights [o, c, kh, kw], flipped, are the input of a batch of o, and the input [b, c, h, w],
    flipped, the kernel of b output channels. poplin pads the new input by h + lower + upper - kh
    at both ends, then its canonical form takes the kernel's (the old input's) padding off the
    opposite ends, both operands being flipped: the flipped weights are padded by h + lower - kh
    before and h + upper - kh after each dim, and the output field stays the same
    (lib/poplin/ConvPlan.cpp, swapOperands; ConvParams.cpp, canonicalize: "Remove padding if both
    the input and the kernel are padded"). None at a stride other than 1 or where that padding
    would be negative, which ConvParams cannot express."""
    if params.stride != (1, 1):
        return None
    lower, upper = (
        tuple(f + p - k for f, p, k in zip(params.field, side, params.kernel)) for side in zip(*params.pad_widths)
    )
    if min(*lower, *upper) < 0:
        return None
    return ConvParams(
        params.out_chans,
        params.in_chans,
        params.batch,
        params.kernel,
        params.field,
        (1, 1),
        (lower[0], lower[1]),
        params.dtype,
        (upper[0], upper[1]),
    )


def _conv_transform_cost(
    arch, params: ConvParams, grid: _ConvGrid, expanded: bool, swapped: bool = False
) -> tuple[int, int]:
    """poplin's estimate of the copies that rearrange a convolution's operands and output for its
    plan, as (cycles, temporary bytes per tile): all three when the operands are swapped, the
    input and the weights when dims are expanded or the input channels padded to the plan's group,
    the weights and the output when the output channels are, and the output regrouped when its
    group is not one conv unit's weights; bytes per tile exchanged at the exchange rate and copied
    as in transform_cost (lib/poplin/ConvModel.cpp, addTransformCycleEstimate, without the
    regression table; the weights' regroup for the backward pass is not counted)."""
    plan = grid.plan
    ig, og = plan.k_grain, plan.n_grain
    c, o = params.in_chans, params.out_chans
    c_pad, o_pad = _ceil(c, ig) * ig, _ceil(o, og) * og
    pad_in, pad_out = c % ig != 0, o % og != 0
    elems = 0
    if swapped or expanded or pad_in:
        elems += params.batch * params.field[0] * params.field[1] * c_pad
    if swapped or expanded or pad_in or pad_out:
        elems += params.kernel[0] * params.kernel[1] * c_pad * o_pad
    rearrange_output = swapped or pad_out
    regroup_output = not rearrange_output and og != amp.weights_per_conv_unit(params.dtype.name)
    out_elems = params.batch * params.out_field[0] * params.out_field[1] * o_pad
    used = grid.pm * grid.pn * grid.pk
    cycles, temp = _rearrangement_cost(
        arch, elems, out_elems, used, params.dtype, params.dtype, c * o, o, rearrange_output, regroup_output, og
    )
    return int(cycles), int(temp)


def conv_transforms(
    graph: Graph, params: ConvParams, partials_type: Type = FLOAT, options: dict | None = None
) -> tuple[bool, tuple[int, ...]]:
    """Whether poplin's planner swaps this convolution's operands, and which field dims it then
    expands into input channels: of the candidates (as given, then swapped; for each, the sets of
    dims), the cheapest by the plan's estimate and its transform copies within the memory bound,
    the first among equals (lib/poplin/ConvPlan.cpp, createPlan: the swapOperands and expandDims
    loops, getSwapOperandCandidates). The plan constraints ``0.transform.swapOperands`` and
    ``0.transform.expandDims`` fix either."""
    constraints = _transform_constraints(options)
    forced_swap = constraints.get("swapOperands")
    if forced_swap is not None and not isinstance(forced_swap, bool):
        raise GraphError(f"planConstraints 0.transform.swapOperands must be true or false, got {forced_swap!r}")
    forced = constraints.get("expandDims")
    if forced is not None:
        if not isinstance(forced, list) or any(d not in (0, 1) or isinstance(d, bool) for d in forced):
            raise GraphError(f"planConstraints 0.transform.expandDims must list field dims 0 and 1, got {forced!r}")
        forced = tuple(sorted(set(forced), reverse=True))
    swapped = _swapped(params)
    if forced_swap and swapped is None:
        raise GraphError(
            "planConstraints 0.transform.swapOperands: this simulator swaps a convolution's operands "
            f"only at stride 1 where the swapped padding is not negative, not {params}"
        )
    arch = graph.target.arch
    bound = memory_bound(options, graph.target.bytesPerTile)
    peak = max(arch.half_half_macs, arch.half_float_macs, arch.float_float_macs)
    candidates: list[
        tuple[int, float, tuple[bool, tuple[int, ...]]]
    ] = []  # (cycles, memory, transforms), in poplin's order
    for swap in (False, True) if forced_swap is None else (forced_swap,):
        q = swapped if swap else params
        if q is None:
            continue
        for dims in _expand_candidates(q) if forced is None else [forced]:
            p = _expanded(q, dims)
            # a candidate whose multiply-accumulates, as the planner counts them (every kernel
            # position at every output position), take at least as long at the tiles' peak rate
            # as an earlier candidate within the bound takes in all cannot be chosen: it is not
            # planned (popsolver likewise drops what cannot beat its best cost)
            macs = p.batch * math.prod(p.out_field) * math.prod(p.kernel) * p.in_chans * p.out_chans
            if any(m <= bound and c <= macs // (graph.num_tiles * peak) for c, m, _ in candidates):
                continue
            grid = _conv_grid(graph, _flattened(p) or p, partials_type, bound)
            cycles, temp = _conv_transform_cost(arch, p, grid, bool(dims), swap)
            memory = max(grid.plan.estimate["memory"], temp)
            candidates.append((grid.plan.estimate["total"] + cycles, memory, (swap, dims)))
    # the fewest cycles within the memory bound, relaxed as poplin relaxes it when none fits
    bound = relaxed_bound([c[1] for c in candidates], bound, graph.target.bytesPerTile)
    return min((c for c in candidates if c[1] <= bound), key=lambda c: c[0])[2]


@dataclass(frozen=True)
class ConvolutionPlan:
    """What poplin's planner chooses for a convolution: its transforms and the partition of the
    convolution they give (lib/poplin/ConvPlan.cpp, Plan: transforms and partitions)."""

    swap_operands: bool
    expand_dims: tuple[int, ...]
    flattened: bool  # the batch and output rows folded into one dim of positions
    grid: _ConvGrid  # the partition of the transformed convolution


def convolution_plan(graph: Graph, params: ConvParams, options: dict | None = None) -> ConvolutionPlan:
    """The plan `convolution` builds for this convolution with these options."""
    flat = _flattened(params)
    if flat is not None:
        return dataclasses.replace(convolution_plan(graph, flat, options), flattened=True)
    partials = partials_type(options, params.dtype)
    swap, dims = conv_transforms(graph, params, partials, options)
    swapped = _swapped(params) if swap else params
    assert swapped is not None  # conv_transforms swaps only a convolution that has a swapped form
    planned = _expanded(swapped, dims)
    inner = _flattened(planned)
    bound = memory_bound(options, graph.target.bytesPerTile)
    return ConvolutionPlan(swap, dims, inner is not None, _conv_grid(graph, inner or planned, partials, bound))
