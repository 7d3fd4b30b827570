"""poplin's 2-D convolution: operands in the plan's layouts, the convolution's vertices, and the
backward pass's transposed and flipped weights (lib/poplin/Convolution.cpp).
"""

from __future__ import annotations

import math

import numpy as np

from ... import codelets as lib
from ...errors import GraphError
from ...graph import Graph
from ...programs import Copy, Execute, Sequence, WriteUndef
from ...tensor import Tensor
from ...types import Type
from .. import rearrange
from .._util import (
    add_vertices,
    in_storage_order,
    linear_intervals,
    poplibs_op,
    regions_at,
    require_codelets,
    tile_pieces,
)
from .conv_planner import (
    SMALL_CHANNELS,
    ConvParams,
    _conv_grid,
    _ConvGrid,
    _expanded,
    _flattened,
    _swapped,
    conv_transforms,
)
from .matmul import _staged_reduce
from .planner import memory_bound, partials_type


def _acts_index(shape: tuple[int, int, int, int], group: int) -> np.ndarray:
    """Offsets of the elements of [N][C][H][W] activations stored as [C/g][N][H][W][g]."""
    n, c, h, w = shape
    return np.arange(n * c * h * w, dtype=np.int64).reshape(c // group, n, h, w, group).transpose(1, 0, 4, 2, 3)


def _weights_index(shape: tuple[int, int, int, int], og: int, ig: int) -> np.ndarray:
    """Offsets of the elements of [O][C][kh][kw] weights stored as [O/og][C/ig][kh][kw][og][ig]."""
    o, c, kh, kw = shape
    idx = np.arange(o * c * kh * kw, dtype=np.int64).reshape(o // og, c // ig, kh, kw, og, ig)
    return idx.transpose(0, 4, 1, 5, 2, 3).reshape(o, c, kh, kw)


def _grouped_view(T: Tensor, index: np.ndarray) -> Tensor:
    """The flat view of T whose position q is T's element at flat position p where index[p] = q:
    T's elements in the order of a grouped layout."""
    order = np.empty(index.size, dtype=np.int64)
    order[index.reshape(-1)] = np.arange(index.size, dtype=np.int64)
    var, idx = T.element_arrays()
    return Tensor.from_elements(T._state, T.dtype, (index.size,), var[order], idx[order])


def _map_by_use(
    graph: Graph,
    var_id: int,
    size: int,
    users: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    grain: int,
    min_elems: int,
) -> None:
    """Map a variable by its uses, as poplin maps a convolution's operands (lib/poplin/Convolution.cpp,
    mapActivationsOrWeights: TensorUseTracker::mapTensorsByUse with the plan's grain and at least
    minBytesPerTile a tile): the elements read by one set of tiles are spread over those tiles in
    whole grains; elements no tile reads go with the used elements before them (the first used
    ones when none is before), as extendPartialMap extends the map."""
    ends = starts + lengths
    bounds = np.unique(np.concatenate(([0, size], starts, ends)))
    seg_start, seg_len = bounds[:-1], np.diff(bounds)
    i0 = np.searchsorted(bounds, starts)
    i1 = np.searchsorted(bounds, ends)
    count = i1 - i0
    seg = np.repeat(i0, count) + (np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count))
    pairs = np.unique(np.stack([seg, np.repeat(users, count)], axis=1), axis=0)
    key_of: dict[tuple[int, ...], list[int]] = {}
    split = np.flatnonzero(np.diff(pairs[:, 0])) + 1
    key_of_seg: dict[int, tuple[int, ...]] = {}
    for chunk in np.split(pairs, split) if pairs.size else []:
        s = int(chunk[0, 0])
        key_of_seg[s] = key = tuple(chunk[:, 1].tolist())
        key_of.setdefault(key, []).append(s)
    free = [s for s in range(seg_start.size) if s not in key_of_seg]
    if free and key_of_seg:
        # an element no tile reads goes with the used elements before it, or the first used ones
        # when none is before it (lib/poputil/TensorUseTracker.cpp, extendPartialMap)
        used = np.array(sorted(key_of_seg), dtype=np.int64)
        before = np.searchsorted(used, free) - 1
        for s, k in zip(free, np.where(before >= 0, before, 0).tolist()):
            key_of[key_of_seg[int(used[k])]].append(s)
    elif free:
        everyone = tuple(np.asarray(graph.tile(np.arange(graph.num_tiles)), dtype=np.int64).tolist())
        key_of.setdefault(everyone, []).extend(free)
    m_s, m_e, m_t = [], [], []
    for tiles, segs in key_of.items():
        segs_a = np.sort(np.asarray(segs, dtype=np.int64))
        lens = seg_len[segs_a]
        cum = np.concatenate(([0], np.cumsum(lens)))
        c_s, c_e, c_t = linear_intervals(int(cum[-1]), len(tiles), grain, min_elems)
        points = np.unique(np.concatenate((cum, c_s, c_e)))
        lo, hi = points[:-1], points[1:]
        which = np.searchsorted(cum, lo, side="right") - 1
        chunk = np.searchsorted(c_e, lo, side="right")
        base = seg_start[segs_a[which]] + (lo - cum[which])
        m_s.append(base)
        m_e.append(base + (hi - lo))
        m_t.append(np.asarray(tiles, dtype=np.int64)[c_t[chunk]])
    graph.state.set_mapping(var_id, np.concatenate(m_s), np.concatenate(m_e), np.concatenate(m_t))


def _create_operand(
    graph: Graph, grid: _ConvGrid, acts: bool, name: str, shape: tuple[int, int, int, int] | None = None
) -> Tensor:
    """The input (acts) or the weights of a convolution in its plan's grouped layout, each piece
    spread over the tiles that read it in whole groups, at least 128 bytes (acts) or 256 bytes
    (weights) a tile (lib/poplin/Convolution.cpp, mapActivationsOrWeights); returns the
    [b, c, h, w] or [o, c, kh, kw] view, or the view of `shape` with the same grouped layout."""
    params = grid.params
    b, c, o = params.batch, params.in_chans, params.out_chans
    (h, w), (kh, kw) = params.field, params.kernel
    shape = shape or ((b, c, h, w) if acts else (o, c, kh, kw))
    var = graph.addVariable(params.dtype, [math.prod(shape)], name)
    cells = grid.cells()
    vi, start, length = grid.input_ranges(cells) if acts else grid.weight_ranges(cells)
    tiles = np.array([x[9] for x in cells], dtype=np.int64)
    grain = grid.ig if acts else grid.ig * grid.og
    min_elems = -(-(128 if acts else 256) // params.dtype.size)
    _map_by_use(graph, int(var.vars[0]), var.numElements(), tiles[vi], start, length, grain, min_elems)
    idx = _acts_index(shape, grid.ig) if acts else _weights_index(shape, grid.og, grid.ig)
    return Tensor.from_elements(graph.state, params.dtype, shape, np.full(idx.size, int(var.vars[0])), idx.reshape(-1))


def _flat_acts(T: Tensor) -> Tensor:
    """Activations [b, c, h, w] as the [1, c, b*h*w, 1] of their flattened convolution."""
    b, c, h, w = T.shape
    return T.dimShuffle((1, 0, 2, 3)).reshape((1, c, b * h * w, 1))


def _unflat_acts(T: Tensor, batch: int, field: tuple[int, int]) -> Tensor:
    """Activations [1, c, b*h*w, 1] of a flattened convolution as [b, c, h, w]."""
    c = T.shape[1]
    return T.reshape((c, batch, *field)).dimShuffle((1, 0, 2, 3))


def _flipped(T: Tensor) -> Tensor:
    """The view of [n, c, h, w] with both field dims reversed."""
    var, idx = T.element_arrays()
    shape = tuple(T.shape)
    var, idx = (a.reshape(shape)[:, :, ::-1, ::-1].reshape(-1) for a in (var, idx))
    return Tensor.from_elements(T._state, T.dtype, shape, var, idx)


def _expand_acts(
    graph: Graph, inp: Tensor, params: ConvParams, dims: tuple[int, ...], shape
) -> tuple[Tensor, np.ndarray]:
    """The view of input [b, c, h, w] as the expanded convolution's input `shape`, and which of
    its elements lie inside the field: channel (ky, kx, c) at output position y, x reads input
    (y * sh + ky - ph, x * sw + kx - pw) along an expanded dim, ph and pw the padding before the
    field (the padding after it adds output positions, which read past the field's end)."""
    b, c, h, w = inp.shape
    var, idx = (a.reshape(b, c, h, w) for a in inp.element_arrays())
    src = []
    for d in range(2):
        if d in dims:
            out, k = np.arange(params.out_field[d]), np.arange(params.kernel[d])
            src.append(out[None, :] * params.stride[d] + k[:, None] - params.padding[d])
        else:
            src.append(np.arange(params.field[d])[None, :])
    s0 = src[0][None, :, None, None, :, None]
    s1 = src[1][None, None, :, None, None, :]
    bb = np.arange(b)[:, None, None, None, None, None]
    cc = np.arange(c)[None, None, None, :, None, None]
    i0, i1 = np.clip(s0, 0, h - 1), np.clip(s1, 0, w - 1)
    v, x = var[bb, cc, i0, i1], idx[bb, cc, i0, i1]
    inside = np.broadcast_to((s0 >= 0) & (s0 < h) & (s1 >= 0) & (s1 < w), v.shape).reshape(-1)
    return Tensor.from_elements(graph.state, params.dtype, shape, v.reshape(-1), x.reshape(-1)), inside


def _copy_planned_acts(
    graph: Graph, inp: Tensor, params: ConvParams, dims: tuple[int, ...], dst: Tensor, prog: Sequence, name: str
) -> None:
    """Copy the input into the planned (swapped or expanded) convolution's input `dst`, in `dst`'s
    storage order, and zero the positions that fall in the padding (poplin pads with zeros before
    it expands)."""
    from ..popops import zero

    view, inside = _expand_acts(graph, inp, params, dims, dst.shape)
    order = dst.storage_order()
    order = np.arange(dst.numElements(), dtype=np.int64) if order is None else order
    kept, padded = order[inside[order]], order[~inside[order]]
    prog.add(Copy(view._from_index(kept, (kept.size,)), dst._from_index(kept, (kept.size,)), name=name))
    if padded.size:
        zero(graph, dst._from_index(padded, (padded.size,)), prog, f"{name}/padding")


def _expand_weights(weights: Tensor, params: ConvParams, dims: tuple[int, ...]) -> Tensor:
    """The view of weights [o, c, kh, kw] as the expanded convolution's [o, (ky, kx, c), kh', kw']."""
    o, c, kh, kw = weights.shape
    split = [(kh, 1) if 0 in dims else (1, kh), (kw, 1) if 1 in dims else (1, kw)]
    t = weights.dimShuffle((0, 2, 3, 1)).reshape((o, *split[0], *split[1], c))
    t = t.dimShuffle((0, 1, 3, 5, 2, 4))  # o, K0, K1, c, kh', kw'
    return t.reshape((o, split[0][0] * split[1][0] * c, split[0][1], split[1][1]))


def createInput(graph: Graph, params: ConvParams, debugPrefix: str = "conv/in", options: dict | None = None) -> Tensor:
    """An input activation tensor [batch, inChans, h, w] laid out for the plan of the convolution
    with these options, as poplin::createInput makes it (lib/poplin/Convolution.cpp,
    createInputImpl): stored as [C/ig][N][H][W][ig], each piece spread over the tiles that read it
    (mapActivationsOrWeights)."""
    shape = (params.batch, params.in_chans, *params.field)
    return _create_operand(graph, _options_grid(graph, params, options), True, debugPrefix, shape)


def createWeights(
    graph: Graph, params: ConvParams, debugPrefix: str = "conv/weights", options: dict | None = None
) -> Tensor:
    """Weights [outChans, inChans, kh, kw] laid out for the plan of the convolution with these
    options, as poplin::createWeights makes them (lib/poplin/Convolution.cpp, createWeightsImpl):
    stored as [O/og][C/ig][kh][kw][og][ig], each piece spread over the tiles that read it
    (mapActivationsOrWeights)."""
    return _create_operand(graph, _options_grid(graph, params, options), False, debugPrefix)


def _options_grid(graph: Graph, params: ConvParams, options: dict | None) -> _ConvGrid:
    """The plan of the convolution as given (flattened where poplin flattens it) with these
    options' partials type and memory bound."""
    bound = memory_bound(options, graph.target.bytesPerTile)
    return _conv_grid(graph, _flattened(params) or params, partials_type(options, params.dtype), bound)


def _channels_grouped(grouped: Tensor, group: int) -> bool:
    """Whether at least two consecutive input channels of the operand, seen in its plan's grouped
    order (the channels innermost), are contiguous in memory: poplin rearranges an operand whose
    innermost grouping is 1 (lib/poplin/Convolution.cpp, convolutionImpl: detectInnermostGrouping)."""
    if group == 1:
        return True
    g = min(p for p in range(2, group + 1) if group % p == 0)
    var, idx = grouped.element_arrays()
    var, idx = var.reshape(-1, g), idx.reshape(-1, g)
    return bool(np.all(var == var[:, :1]) and np.all(np.diff(idx, axis=1) == 1))


def _arrange_conv_operand(
    graph: Graph, T: Tensor, grid: _ConvGrid, acts: bool, prog: Sequence, name: str
) -> tuple[Tensor, Tensor]:
    """T and its view in the plan's grouped order, or, when T's input channels are not grouped,
    a copy of T created in the plan's layout and its view: poplin copies such an operand into the
    layout its plan expects before the exchange (lib/poplin/Convolution.cpp, convolutionImpl:
    rearrangeActs, rearrangeWeights; convolutionPreprocess)."""
    p = grid.params
    shape = (p.batch, p.in_chans, *p.field) if acts else (p.out_chans, p.in_chans, *p.kernel)
    index = _acts_index(shape, grid.ig) if acts else _weights_index(shape, grid.og, grid.ig)
    grouped = _grouped_view(T, index)
    if _channels_grouped(grouped, grid.ig):
        return T, grouped
    arranged = _create_operand(graph, grid, acts, name)
    arranged_grouped = _grouped_view(arranged, index)
    prog.add(Copy(grouped, arranged_grouped))
    return arranged, arranged_grouped


def weightsTransposeChansFlipXY(
    graph: Graph, weightsIn: Tensor, weightsOut: Tensor, prog: Sequence, debugPrefix: str = "conv"
) -> None:
    """Write the backward pass's weights: weightsOut[c, o, y, x] = weightsIn[o, c, kh-1-y, kw-1-x]
    (poplin::weightsTransposeChansFlipXY, lib/poplin/Convolution.cpp).

    With weightsIn grouped [O/G1][C/G2]..[G1][G2] and weightsOut [C/G3][O/G4]..[G3][G4] (the
    layouts createWeights gives the forward and backward plans), each [G5][G2] matrix of the input,
    G5 = G4 when it divides G1 and G1 otherwise, is first transposed on the tile that holds it into
    a new variable mapped like it (popops::rearrange::partialTranspose: Transpose2d vertices, the
    tile's matrices shared between its workers), then the flipped view of that is copied into
    weightsOut, runs of gcd(G1, G4) or more elements. When G5 is 1 there is nothing to transpose
    and the flipped view of weightsIn is copied."""
    require_codelets(graph, "popops")
    o, c, kh, kw = weightsIn.shape
    if tuple(weightsOut.shape) != (c, o, kh, kw):
        raise GraphError(
            f"weightsTransposeChansFlipXY needs weights [o, c, kh, kw] and [c, o, kh, kw], got "
            f"{list(weightsIn.shape)} and {list(weightsOut.shape)}"
        )
    g1, g2 = _tensor_grouping(weightsIn, o, c)
    g3, g4 = _tensor_grouping(weightsOut, c, o)
    g5 = g4 if g1 % g4 == 0 else g1
    size = o * c * kh * kw
    out_order = _weights_index((c, o, kh, kw), g3, g4)
    if g5 == 1:  # nothing to transpose: the flipped view of weightsIn is copied as it is
        var, idx = weightsIn.element_arrays()
        flip = np.arange(size, dtype=np.int64).reshape(o, c, kh, kw).transpose(1, 0, 2, 3)[:, :, ::-1, ::-1]
        flipped = Tensor.from_elements(
            graph.state,
            weightsIn.dtype,
            (c, o, kh, kw),
            var.reshape(-1)[flip].reshape(-1),
            idx.reshape(-1)[flip].reshape(-1),
        )
        prog.add(Copy(_grouped_view(flipped, out_order), _grouped_view(weightsOut, out_order)))
        return
    block = g5 * g2
    grouped = _grouped_view(weightsIn, _weights_index((o, c, kh, kw), g1, g2))
    # the tile of each matrix's first element
    p_tiles, p_pos, _, _, p_len = tile_pieces(graph, grouped)
    order = np.argsort(p_pos)
    p_tiles, p_pos = p_tiles[order], p_pos[order]
    first = np.arange(size // block, dtype=np.int64) * block
    m_tiles = p_tiles[np.searchsorted(p_pos, first, side="right") - 1]
    out = graph.addVariable(weightsIn.dtype, [size], f"{debugPrefix}/partialTranspose")
    ovar = int(out.vars[0])
    runs = np.flatnonzero(np.r_[True, m_tiles[1:] != m_tiles[:-1]])
    run_end = np.r_[runs[1:], m_tiles.size]
    graph.state.set_mapping(ovar, runs * block, run_end * block, m_tiles[runs])
    # each tile's matrices shared between its workers (splitRegionsBetweenWorkers)
    by_tile = np.argsort(m_tiles, kind="stable")
    v_tile, t0, t1 = rearrange.worker_runs(m_tiles[by_tile])
    count = t1 - t0
    vm = np.repeat(np.arange(v_tile.size), count)
    mat = by_tile[np.repeat(t0, count) + (np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count))]
    rs, vs, ss, ls = regions_at(grouped, mat * block, np.full(mat.size, block))
    cs = graph.addComputeSet(f"{debugPrefix}/WeightTranspose")
    add_vertices(
        graph,
        cs,
        f"popops::Transpose2d<{weightsIn.dtype}>",
        v_tile,
        {
            "src": (vm[rs], vs, ss, ls),
            "dst": (vm, np.full(vm.size, ovar), mat * block, np.full(mat.size, block)),
        },
        work={"rows": np.full(v_tile.size, g5), "cols": np.full(v_tile.size, g2), "matrices": count},
    )
    # weightsIn[oo, cc, i, j] lands in matrix ((((oo/G1) C/G2 + cc/G2) kh + i) kw + j) G1/G5 + (oo%G1)/G5
    # at (cc%G2, oo%G5); the flipped view reads it for weightsOut[cc, oo, kh-1-i, kw-1-j]
    oo, cc, ii, jj = np.meshgrid(np.arange(o), np.arange(c), np.arange(kh), np.arange(kw), indexing="ij")
    mat_of = (((oo // g1 * (c // g2) + cc // g2) * kh + ii) * kw + jj) * (g1 // g5) + (oo % g1) // g5
    pos = mat_of * block + (cc % g2) * g5 + oo % g5
    flipped_idx = pos.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1]
    flipped = Tensor.from_elements(
        graph.state, weightsIn.dtype, (c, o, kh, kw), np.full(size, ovar), flipped_idx.reshape(-1).copy()
    )

    def run(data):
        data.write(flipped, data.read(weightsIn).transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])

    graph.state.compute_sets[cs.id].functional.append(run)
    prog.add(Execute(cs))
    # element for element, in the order of weightsOut's groups, as Poplar copies between the
    # variables' regions whatever the views' order
    prog.add(Copy(_grouped_view(flipped, out_order), _grouped_view(weightsOut, out_order)))
    prog.add(WriteUndef(out))


def _tensor_grouping(T: Tensor, o: int, c: int) -> tuple[int, int]:
    """The (og, ig) channel groups of weights T [o, c, kh, kw], as weightsTransposeChansFlipXY
    finds them (lib/poplin/ConvUtilInternal.cpp, splitWeightsFromGroups and
    detectWeightsChannelGrouping): here the largest groups of 16, 8, 4, 2 or 1 channels in whose
    grouped order T is one contiguous run of its variable, the layout createWeights gives; (1, 1)
    when there is none."""
    kh, kw = T.shape[2], T.shape[3]
    var, idx = T.element_arrays()
    if var.size and not np.all(var == var[0]):
        return 1, 1
    for og in sorted({g for g in (16, 8, 4, 2, 1) if o % g == 0}, reverse=True):
        for ig in sorted({g for g in (16, 8, 4, 2, 1) if c % g == 0}, reverse=True):
            # one contiguous run in grouped order: each element at its grouped offset from the first
            offsets = _weights_index((o, c, kh, kw), og, ig).reshape(-1)
            head = slice(0, min(idx.size, 4096))  # most candidates fail within the first elements
            if idx.size and np.array_equal(idx[head] - idx[0], offsets[head]) and np.array_equal(idx - idx[0], offsets):
                return og, ig
    return 1, 1


@poplibs_op("Convolution")
def convolution(
    graph: Graph,
    inp: Tensor,
    weights: Tensor,
    params: ConvParams,
    prog: Sequence,
    debugPrefix: str = "conv",
    options: dict | None = None,
    transposeAndFlipWeights: bool = False,
) -> Tensor:
    """A 2-D convolution (poplin::convolution): partial sums on the AMP units, then reduced.

    With transposeAndFlipWeights, `weights` are the forward pass's [inChans, outChans, kh, kw]: the
    weights this convolution reads are a new tensor created for its plan and written by
    weightsTransposeChansFlipXY (lib/poplin/Convolution.cpp, convolutionInternal: bwdWeights)."""
    require_codelets(graph, "poplin")
    b, c, o = params.batch, params.in_chans, params.out_chans
    oh, ow = params.out_field
    expect_w = (c, o, *params.kernel) if transposeAndFlipWeights else (o, c, *params.kernel)
    if tuple(inp.shape) != (b, c, *params.field) or tuple(weights.shape) != expect_w:
        raise GraphError(
            f"convolution expects input {[b, c, *params.field]} and weights {list(expect_w)}, got "
            f"{list(inp.shape)} and {list(weights.shape)}"
        )
    if oh <= 0 or ow <= 0:
        raise GraphError(f"convolution output field {oh}x{ow} is empty; check kernel, stride and padding")
    flat = _flattened(params)
    if flat is not None:
        out = convolution(graph, _flat_acts(inp), weights, flat, prog, debugPrefix, options, transposeAndFlipWeights)
        return _unflat_acts(out, b, (oh, ow))
    options = options or {}
    partials = partials_type(options, params.dtype)
    bound = memory_bound(options, graph.target.bytesPerTile)
    if transposeAndFlipWeights:
        bwd_weights = createWeights(graph, params, f"{debugPrefix}/bwdWeights", options)
        weightsTransposeChansFlipXY(graph, weights, bwd_weights, prog, debugPrefix)
        weights = bwd_weights
    swap, dims = conv_transforms(graph, params, partials, options)
    if not swap and not dims:
        return _convolve(graph, inp, weights, params, prog, debugPrefix, partials, bound)
    planned = params
    if swap:
        # poplin's swapOperands transform: the weights, flipped, are the input of a batch of the
        # output channels, and the input, flipped, the kernel (lib/poplin/ConvPlan.cpp, swapOperands;
        # Convolution.cpp, convolutionPreprocess); the output is the transposed view of its output
        swapped = _swapped(params)
        assert swapped is not None  # conv_transforms swaps only a convolution that has a swapped form
        planned = swapped
        inp, weights = _flipped(weights), _flipped(inp)
    # poplin's expandDims transform: the kernel positions along the expanded dims are channels.
    # The input is copied into the planned convolution's layout, and the weights' view rearranged,
    # as the planner's transform estimate assumes (Convolution.cpp, convolutionPreprocess:
    # expandSpatialDims, then rearrangeActs and rearrangeWeights)
    expanded = _expanded(planned, dims)
    what = "Expanded" if dims else "Swapped"
    planned_acts = createInput(graph, expanded, f"{debugPrefix}/acts{what}", options)
    planned_weights = createWeights(graph, expanded, f"{debugPrefix}/weights{what}", options)
    step = "expand" if dims else "swap"
    _copy_planned_acts(graph, inp, planned, dims, planned_acts, prog, f"{debugPrefix}/{step}Acts")
    dst, src = in_storage_order(planned_weights, _expand_weights(weights, planned, dims))
    prog.add(Copy(src, dst, name=f"{debugPrefix}/{step}Weights"))
    flat = _flattened(expanded)
    if flat is None:
        out = _convolve(graph, planned_acts, planned_weights, expanded, prog, debugPrefix, partials, bound)
    else:
        out = _convolve(graph, _flat_acts(planned_acts), planned_weights, flat, prog, debugPrefix, partials, bound)
        out = _unflat_acts(out, expanded.batch, expanded.out_field)
    return out.dimShuffle((1, 0, 2, 3)) if swap else out


def _convolve(
    graph: Graph,
    inp: Tensor,
    weights: Tensor,
    params: ConvParams,
    prog: Sequence,
    debugPrefix: str,
    partials_type: Type,
    bound: float,
) -> Tensor:
    """The convolution's plan on its operands as given, within `bound` temporary bytes per tile:
    AMP (or HMAC) partial sums, then reduced."""
    b, c, o = params.batch, params.in_chans, params.out_chans
    h, w = params.field
    kh, kw = params.kernel
    sh, sw = params.stride
    pad_h, pad_w = params.pad_widths
    oh, ow = params.out_field
    grid = _conv_grid(graph, params, partials_type, bound)
    plan, og = grid.plan, grid.og
    positions = b * oh
    state = graph.state
    small_channels = c < SMALL_CHANNELS
    # what the vertices write: the partials type, or for a 1x1 kernel whose channels fit one conv
    # unit and are not split, the output type (MatMulPlan.vertex_out_type)
    vertex_type = plan.vertex_out_type()
    type_name = (
        f"poplin::ConvPartialHorizontalMac<{params.dtype},{vertex_type},true>"
        if small_channels
        else (
            lib.conv_partial_1x1(params.dtype, vertex_type)
            if kh * kw == 1
            else f"poplin::ConvPartialnx1<{params.dtype},{vertex_type},true,false>"
        )
    )
    cells = grid.cells()
    # partials of a cell: [its output channel groups][positions][ow][og]
    sizes = np.array([(x[4] - x[3]) * ow * (x[6] - x[5]) for x in cells], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    partials = graph.addVariable(vertex_type, [int(sizes.sum())], f"{debugPrefix}/partials")
    pvar = int(partials.vars[0])
    # the AMP vertices' out field asks for interleaved memory, HMAC's does not (see _build_matmul)
    state.vars[pvar].interleaved = not small_channels
    tiles = np.array([x[9] for x in cells], dtype=np.int64)
    state.set_mapping(pvar, offsets, offsets + sizes, tiles)
    icpg, ocpg = plan.k_grain, plan.n_grain  # an HMAC plan's ocpg: HMAC's output group, 1 or 2
    # the operands in the plan's grouped order: a cell reads whole rows of a channel group at once
    inp, inp_grouped = _arrange_conv_operand(graph, inp, grid, True, prog, f"{debugPrefix}/actsRearranged")
    weights, w_grouped = _arrange_conv_operand(graph, weights, grid, False, prog, f"{debugPrefix}/weightsRearranged")
    in_v, in_s, in_l = grid.input_ranges(cells)
    w_v, w_s, w_l = grid.weight_ranges(cells)
    kernel_rows, kernel_cols = grid.kernel_outputs(cells)
    ri, vi_, si, li = regions_at(inp_grouped, in_s, in_l)
    rw, vw, sw_, lw = regions_at(w_grouped, w_s, w_l)
    v = np.arange(len(cells), dtype=np.int64)
    cs = graph.addComputeSet(f"{debugPrefix}/Conv_1/Convolve")
    add_vertices(
        graph,
        cs,
        type_name,
        tiles,
        {
            "in": (in_v[ri], vi_, si, li),
            "weights": (w_v[rw], vw, sw_, lw),
            "out": (v, np.full(v.size, pvar), offsets, sizes),
        },
        work={
            "out_elems": np.array([(x[4] - x[3]) * ow for x in cells]),
            "in_groups": np.array([-(-(x[8] - x[7]) // icpg) for x in cells]),
            "out_groups": np.array([-(-(x[6] - x[5]) // ocpg) for x in cells]),
            "kernel_rows": kernel_rows,
            "kernel_cols": kernel_cols,
            **({"in_chans": grid.c_per, "out_chans": ocpg} if small_channels else {"out_chans_per_group": ocpg}),
        },
    )
    cells_info = [(x[3], x[4], x[5], x[6], x[7], x[8], int(offsets[j])) for j, x in enumerate(cells)]

    def convolve(data):
        x = data.read(inp).astype(np.float64)
        wt = data.read(weights).astype(np.float64)
        xp = np.pad(x, ((0, 0), (0, 0), pad_h, pad_w))
        arr = data.array(pvar)
        for p0, p1, o0, o1, k0, k1, off in cells_info:
            block = np.zeros((o1 - o0, p1 - p0, ow))
            for pos in range(p0, p1):
                bb, y = divmod(pos, oh)
                for i in range(kh):
                    for j in range(kw):
                        patch = xp[bb, k0:k1, y * sh + i, j : j + sw * ow : sw]
                        block[:, pos - p0, :] += wt[o0:o1, k0:k1, i, j] @ patch
            grouped_block = block.reshape((o1 - o0) // og, og, p1 - p0, ow).transpose(0, 2, 3, 1)
            arr[off : off + block.size] = grouped_block.reshape(-1)

    state.compute_sets[cs.id].functional.append(convolve)
    prog.add(Execute(cs))
    groups: dict[tuple[int, int], list[int]] = {}
    for j, cell in enumerate(cells):
        groups.setdefault((cell[0], cell[1]), []).append(j)
    if all(len(members) == 1 for members in groups.values()):
        # no split of the input channels: nothing to sum. poplin casts the partials to the output
        # type on their tiles, or takes them as the output when the types agree
        # (lib/poplin/Convolution.cpp, convolutionImpl; ConvReduce.cpp, reduce: a depth of one is a cast)
        pos, oc, x = np.meshgrid(np.arange(positions), np.arange(o), np.arange(ow), indexing="ij")
        index = np.zeros(pos.shape, dtype=np.int64)
        for p0, p1, o0, o1, _k0, _k1, off in cells_info:
            sel = (slice(p0, p1), slice(o0, o1), slice(None))
            index[sel] = (
                off
                + (oc[sel] - o0) // og * ((p1 - p0) * ow * og)
                + (pos[sel] - p0) * ow * og
                + x[sel] * og
                + (oc[sel] - o0) % og
            )
        # [b*oh, o, ow] -> [b, o, oh, ow]
        order = index.reshape(b, oh, o, ow).transpose(0, 2, 1, 3).reshape(-1)
        unreduced = Tensor.from_elements(state, vertex_type, (b, o, oh, ow), np.full(order.size, pvar), order)
        if vertex_type == params.dtype:
            return unreduced
        from ..popops import cast

        out = cast(graph, unreduced, params.dtype, prog, f"{debugPrefix}/Conv_1")
        prog.add(WriteUndef(partials))
        return out
    # output [O/og][N][oh][ow][og] (ConvReduce.cpp, multiStageGroupedReduce); the cells of one
    # (positions, output channels) block sum their partials, each reducing a slice of the block
    out = graph.addVariable(params.dtype, [b * o * oh * ow], f"{debugPrefix}/out")
    ovar = int(out.vars[0])
    # block order (group, position, x, channel) -> offset in the output variable
    row = ow * og
    block_idx, o_base, pos_count = [], {}, 0
    for key, members in groups.items():
        _im, _jn, _ik, p0, p1, o0, o1 = cells[members[0]][:7]
        o_base[key] = pos_count
        pos_count += int(sizes[members[0]])
        go = np.arange(o0 // og, o1 // og, dtype=np.int64)
        block_idx.append((go[:, None] * positions * row + np.arange(p0 * row, p1 * row)[None, :]).reshape(-1))
    block_order = Tensor.from_elements(
        state, params.dtype, (pos_count,), np.full(pos_count, ovar), np.concatenate(block_idx)
    )
    c_base = np.array([o_base[(x[0], x[1])] for x in cells], dtype=np.int64)
    cs2 = _staged_reduce(graph, prog, debugPrefix, block_order, partials, (c_base, sizes, c_base, offsets, tiles), og)
    # the [b, o, oh, ow] view of the grouped output
    idx = np.arange(b * o * oh * ow, dtype=np.int64).reshape(o // og, b, oh, ow, og).transpose(1, 0, 4, 2, 3)
    view = Tensor.from_elements(state, params.dtype, (b, o, oh, ow), np.full(idx.size, ovar), idx.reshape(-1))

    def reduce_partials(data):
        arr = data.array(pvar)
        result = np.zeros((o, positions, ow))
        for p0, p1, o0, o1, _k0, _k1, off in cells_info:
            size = (o1 - o0) * (p1 - p0) * ow
            block = arr[off : off + size].reshape((o1 - o0) // og, p1 - p0, ow, og)
            result[o0:o1, p0:p1, :] += block.transpose(0, 3, 1, 2).reshape(o1 - o0, p1 - p0, ow)
        data.write(view, result.reshape(o, b, oh, ow).transpose(1, 0, 2, 3))

    state.compute_sets[cs2.id].functional.append(reduce_partials)
    prog.add(WriteUndef(partials))
    return view
