"""poplin's matrix products: operands laid out for their plan, the product's vertices and reduction.

Each tile runs one ``poplin::ConvPartial1x1Out`` vertex on its blocks of A and B, writing float
partials (or the output type, when k is unsplit and rounds up to one conv unit's weights in the
plan's input groups); when k is split (pk > 1),
``poplin::ReduceAdd`` vertices sum the partials into C in poplin's stages, and otherwise float
partials are cast to the output type. A plan constraint may ask for poplin's other methods,
``ConvPartialHorizontalMac`` (HMAC) and ``OuterProduct`` vertices (planner.plan_methods).
Also the fully-connected weight transpose and ``matMulAcc`` (lib/poplin/MatMul.cpp).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ... import codelets as lib
from ...codelets.poplin import WORKERS
from ...compiler.regions import split_by_mapping
from ...errors import GraphError
from ...graph import Graph
from ...programs import Copy, Execute, Repeat, Sequence, WriteUndef
from ...tensor import Tensor, concat
from ...types import UNSIGNED_INT, Type, as_type
from .. import rearrange
from .._util import (
    add_vertices,
    linear_intervals,
    merge_regions,
    poplibs_op,
    regions_at,
    require_codelets,
    tile_pieces,
)
from .planner import (
    CONV_WEIGHT_UPDATE,
    MATMUL_PASSES,
    MatMulPlan,
    amp_weight_height,
    memory_bound,
    partials_type,
    plan_matmul,
    plan_methods,
    plan_partition,
    plan_swap,
    reduce_stage_depths,
)


def _blocked_view(
    graph: Graph, var_tensor: Tensor, rows: int, cols: int, rb: int, cb: int, group: int | None = None
) -> tuple[Tensor, np.ndarray]:
    """A [rows, cols] view of a variable stored in blocks of rb x cb, row-major inside a block, or
    with `group` its columns in groups of that many, each group's rows contiguous ([cb/group][rb]
    [group], as poplin stores a convolution's input, its input channels innermost in groups);
    returns (view, block offsets)."""
    row_parts = -(-rows // rb)
    col_parts = -(-cols // cb)
    r = np.arange(rows, dtype=np.int64)
    c = np.arange(cols, dtype=np.int64)
    bi, bj = r // rb, c // cb
    heights = np.minimum(rb, rows - np.arange(row_parts) * rb).clip(min=0)
    widths = np.minimum(cb, cols - np.arange(col_parts) * cb).clip(min=0)
    sizes = np.outer(heights, widths).reshape(-1)
    offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    block = bi[:, None] * col_parts + bj[None, :]
    idx = offsets[block] + _within_block(
        (r % rb)[:, None], (c % cb)[None, :], heights[bi][:, None], widths[bj][None, :], group
    )
    var = np.full(idx.size, int(var_tensor.vars[0]), dtype=np.int64)
    view = Tensor.from_elements(graph.state, var_tensor.dtype, (rows, cols), var, idx.reshape(-1))
    return view, offsets


def _within_block(r, c, heights, widths, group: int | None):
    """Offsets inside their blocks of elements (r, c) of blocks of `heights` x `widths`: row by
    row, or with `group` the columns in groups of that many, each group's rows contiguous."""
    if group is None:
        return r * widths + c
    g0 = c // group * group  # the column group's first column in its block
    return g0 * heights + r * np.minimum(group, widths - g0) + (c - g0)


@functools.lru_cache(maxsize=256)
def _block_order(rows: int, cols: int, group: int | None) -> np.ndarray:
    """Where each element of a rows x cols block, in row-major order, is stored inside the block
    (_blocked_view); read-only, shared by the functional runs of every block of that shape."""
    r = np.arange(rows, dtype=np.int64)[:, None]
    c = np.arange(cols, dtype=np.int64)[None, :]
    order = _within_block(r, c, rows, cols, group).reshape(-1)
    order.setflags(write=False)
    return order


@dataclass
class _OperandLayout:
    """How the plan lays out one operand: blocks of rb x cb (row-major blocks, row-major inside),
    the tiles using each block, and the grain and minimum of the spread of a block over them."""

    rows: int
    cols: int
    rb: int
    cb: int
    users: np.ndarray  # [blocks, users]: graph tiles of the cells that read each block
    grain: int
    min_elems: int
    channels: int  # input channels of one group: the side of the matrices a regroup transposes
    group: int | None = None  # columns stored in groups of this many inside a block (_blocked_view)


def _operand_layout(plan: MatMulPlan, side: str) -> _OperandLayout:
    """The layout of the left ("lhs", acts) or right ("rhs", weights) operand of a plan.

    A block read by several tiles is spread over them in whole channel groups, at least 128 bytes
    (acts) or 256 bytes (weights) a tile (lib/poplin/Convolution.cpp, mapActivationsOrWeights:
    TensorUseTracker::mapTensorsByUse with grainSize and minBytesPerTile). With a serial split,
    the right operand's layout is one step's: each of its column slices is laid out alike."""
    plan = plan.step()
    pm, pn, pk = plan.pm, plan.pn, plan.pk
    e = plan.in_type.size
    if side == "lhs":
        im, ik, jn = np.meshgrid(np.arange(pm), np.arange(pk), np.arange(pn), indexing="ij")
        users = plan.tiles[((im * pn + jn) * pk + ik).reshape(pm * pk, pn)]
        # input channels stored in groups of gcd(the plan's group, k), as poplin creates a
        # convolution's input (lib/poplin/Convolution.cpp, createInputImpl: getInChansPerGroup)
        group = math.gcd(plan.k_grain, plan.k)
        return _OperandLayout(plan.m, plan.k, plan.mb, plan.kb, users, plan.k_grain, -(-128 // e), plan.k_grain, group)
    ik, jn, im = np.meshgrid(np.arange(pk), np.arange(pn), np.arange(pm), indexing="ij")
    users = plan.tiles[((im * pn + jn) * pk + ik).reshape(pk * pn, pm)]
    return _OperandLayout(
        plan.k, plan.n, plan.kb, plan.nb, users, plan.k_grain * plan.n_grain, -(-256 // e), plan.k_grain
    )


def _new_operand(graph: Graph, dtype: Type, layout: _OperandLayout, name: str) -> Tensor:
    """A new variable stored and mapped in `layout`; returns its [rows, cols] view."""
    var = graph.addVariable(dtype, [layout.rows * layout.cols], name)
    view, offsets = _blocked_view(graph, var, layout.rows, layout.cols, layout.rb, layout.cb, layout.group)
    sizes = np.diff(np.append(offsets, layout.rows * layout.cols))
    starts, ends, tiles = [], [], []
    for b in np.flatnonzero(sizes > 0):
        s0, e0, t0 = linear_intervals(int(sizes[b]), layout.users.shape[1], layout.grain, layout.min_elems)
        starts.append(offsets[b] + s0)
        ends.append(offsets[b] + e0)
        tiles.append(layout.users[b][t0])
    if starts:
        graph.state.set_mapping(int(var.vars[0]), np.concatenate(starts), np.concatenate(ends), np.concatenate(tiles))
    return view


def _new_rhs(graph: Graph, dtype: Type, plan: MatMulPlan, name: str) -> Tensor:
    """A new right operand [k, n] laid out for the plan; with a serial split, its column slices
    each laid out as one step's (lib/poplin/Convolution.cpp, createWeightsImpl: the serial split
    outermost, each slice mapped as the step's weights)."""
    layout = _operand_layout(plan, "rhs")
    return concat([_new_operand(graph, dtype, layout, name) for _ in range(plan.serial)], 1)


def _operand_plan(graph: Graph, dtype, aShape, bShape, options: dict | None) -> tuple[Type, MatMulPlan]:
    """The type and the plan of the product A[aShape] B[bShape] whose operands are created."""
    dtype = as_type(dtype)
    m, k = aShape
    _, n = bShape
    return dtype, plan_product(graph, m, k, n, dtype, options)


def createMatMulInputLHS(
    graph: Graph, dtype, aShape, bShape, debugPrefix: str = "matmul/lhs", options: dict | None = None
) -> Tensor:
    """A left operand laid out for the planned matmul: each (rows, k) block spread over the tiles that use it."""
    dtype, plan = _operand_plan(graph, dtype, aShape, bShape, options)
    if plan.swapped:  # A^T is the swapped product's right operand
        return _new_rhs(graph, dtype, plan, debugPrefix).transpose()
    return _new_operand(graph, dtype, _operand_layout(plan, "lhs"), debugPrefix)


def createMatMulInputRHS(
    graph: Graph, dtype, aShape, bShape, debugPrefix: str = "matmul/rhs", options: dict | None = None
) -> Tensor:
    """A right operand laid out for the planned matmul: each (k, cols) block spread over the tiles that use it."""
    dtype, plan = _operand_plan(graph, dtype, aShape, bShape, options)
    if plan.swapped:  # B^T is the swapped product's left operand
        return _new_operand(graph, dtype, _operand_layout(plan, "lhs"), debugPrefix).transpose()
    return _new_rhs(graph, dtype, plan, debugPrefix)


@poplibs_op("MatMul")
def matMul(
    graph: Graph,
    A: Tensor,
    B: Tensor,
    prog: Sequence,
    debugPrefix: str = "matmul",
    options: dict | None = None,
    outputType=None,
) -> Tensor:
    """C = A B for A [m, k] and B [k, n] (poplin::matMul); appends its programs to `prog`."""
    require_codelets(graph, "poplin")
    if A.rank() != 2 or B.rank() != 2 or A.shape[1] != B.shape[0]:
        raise GraphError(f"matMul needs A [m, k] and B [k, n], got {list(A.shape)} and {list(B.shape)}")
    if A.dtype != B.dtype:
        raise GraphError(f"matMul needs operands of one type, got {A.dtype} and {B.dtype}")
    out_type = as_type(outputType) if outputType is not None else A.dtype
    m, k = A.shape
    n = B.shape[1]
    plan = plan_product(graph, m, k, n, A.dtype, options, out_type)
    # the weight-update pass always rearranges its operands (lib/poplin/Convolution.cpp,
    # inputRearrangementIsExpensive and weightRearrangementIsExpensive)
    always = matmul_pass(options) == "TRAINING_WU"
    if plan.swapped:  # C^T = B^T A^T (lib/poplin/ConvPlan.cpp, swapOperands)
        A, B = B.transpose(), A.transpose()
    C = build_product(graph, A, B, plan, prog, debugPrefix, always)
    return C.transpose() if plan.swapped else C


def plan_product(
    graph: Graph, m: int, k: int, n: int, in_type: Type, options: dict | None = None, out_type: Type | None = None
) -> MatMulPlan:
    """The plan of A [m, k] x B [k, n] that poplin makes for these options (the
    ``fullyConnectedPass``, ``partialsType`` and ``planConstraints`` a product takes).

    A product, lone or a pass of a fully-connected layer, is planned with its operands swapped and
    as given, each with the cost of its rearranging copies, and the cheaper plan within the memory
    bound is kept, the swapped one among equals (lib/poplin/ConvPlan.cpp,
    getSwapOperandCandidates: swapped first for NONE_MATMUL and the fully-connected passes). A
    convolution's weight update is planned as given. The swapOperands constraint fixes the
    orientation, with the pass's costs. ``availableMemoryProportion`` sets the memory bound
    (memory_bound)."""
    partials = partials_type(options, out_type or in_type)
    methods = plan_methods(options)
    fc_pass = matmul_pass(options)
    swap = plan_swap(options)
    bound = memory_bound(options, graph.target.bytesPerTile)
    partition = plan_partition(options)

    def plan(s: bool | None) -> MatMulPlan:
        return plan_matmul(
            graph,
            m,
            k,
            n,
            in_type,
            partials,
            out_type,
            methods=methods,
            swap=s,
            fc_pass=fc_pass,
            bound=bound,
            partition=partition,
        )

    if swap is not None:
        return plan(swap)
    if fc_pass == CONV_WEIGHT_UPDATE:
        # the product standing in for a convolution's weight update is planned as given
        # (docs/simulator.md, "Swapped operands")
        return plan(None)
    plans, refusals = [], {}
    for s in (True, False):
        try:
            plans.append(plan(s))
        except GraphError as exc:
            # a partition constraint may leave plans in one orientation only
            if partition is None:
                raise
            refusals[s] = exc
    if not plans:
        raise refusals[False]  # the product as given
    # poplin's objective: cycles, then temporary bytes (ConvPlan.cpp, PlanningObjective)
    return min(plans, key=lambda p: (p.estimate["memory"] > bound, p.estimate["total"], p.estimate["memory"]))


def matmul_pass(options: dict | None) -> str:
    """poplin's pass of a matrix product from its ``fullyConnectedPass`` option (MATMUL_PASSES;
    NONE, a lone product, by default), or CONV_WEIGHT_UPDATE for a convolution's weight update
    planned as a product (the convolution option ``pass``: TRAINING_WU)."""
    options = options or {}
    if "pass" in options:
        if str(options["pass"]).upper() != "TRAINING_WU":
            raise GraphError(
                f"a product's pass option can only be TRAINING_WU, a convolution's weight update; got {options['pass']!r}"
            )
        if "fullyConnectedPass" in options:
            raise GraphError("a product takes either the pass option TRAINING_WU or fullyConnectedPass, not both")
        return CONV_WEIGHT_UPDATE
    value = str(options.get("fullyConnectedPass", "NONE")).upper()
    if value not in MATMUL_PASSES:
        raise GraphError(f"fullyConnectedPass must be one of {', '.join(MATMUL_PASSES)}, got {value!r}")
    return value


#: Broadcast destinations of an operand above which poplin copies it into the plan's layout first
#: (lib/poplin/Convolution.cpp, inViewMaxBroadcastDests and weightViewMaxBroadcastDests).
MAX_BROADCAST_DESTS = 7


def _arrange_operand(
    graph: Graph, T: Tensor, layout: _OperandLayout, dests: int, always: bool, prog: Sequence, name: str
) -> Tensor:
    """T itself, or a copy of T in the plan's layout.

    As poplin prepares a convolution's operands (lib/poplin/Convolution.cpp, the rearrangement of
    acts and weights before the exchange): an operand is copied into the plan's layout when the
    weight-update pass asks for it, when it is broadcast to more than seven tiles, or when its rows
    are not grouped (runs of fewer elements than a channel group, as a transposed view has); the
    copy is elided when the operand already has that layout and mapping. An ungrouped operand is
    first regrouped on the tiles that hold it (popops::rearrange::regroupIfBeneficial), then copied.
    """
    rows, cols, rb, cb = layout.rows, layout.cols, layout.rb, layout.cb
    row_parts, col_parts = -(-rows // rb), -(-cols // cb)
    bi, bj = np.divmod(np.arange(row_parts * col_parts, dtype=np.int64), col_parts)
    r0, c0 = bi * rb, bj * cb
    heights = np.minimum(rb, rows - r0)
    widths = np.minimum(cb, cols - c0)
    block = np.repeat(np.arange(bi.size), heights)
    row = np.repeat(r0, heights) + (np.arange(int(heights.sum())) - np.repeat(np.cumsum(heights) - heights, heights))
    length = widths[block]
    piece_row, var, start, plen = regions_at(T, row * cols + c0[block], length)
    grouped = bool(np.all(plen >= np.minimum(length[piece_row], layout.channels)))

    mb_, mvar, mstart, mlen = merge_regions(block[piece_row], var, start, plen)
    # in place when every block is stored as the layout stores it and on the tiles that read it
    if layout.group is None:
        stored = mb_.size == bi.size  # one run a block, as a block stored row by row is
    elif len(T.variable_ids()) == 1:
        expected = _blocked_view(graph, T, rows, cols, rb, cb, layout.group)[0].element_arrays()[1]
        stored = bool(np.array_equal(T.element_arrays()[1], expected))
    else:
        stored = False
    in_place = False
    if stored:
        prow, ptile, _, _ = split_by_mapping(graph.state, mvar, mstart, mlen)
        in_place = bool(np.all((layout.users[mb_[prow]] == ptile[:, None]).any(axis=1)))
    if in_place or (grouped and not always and dests <= MAX_BROADCAST_DESTS):
        return T
    src = T
    if not grouped:
        src = _regroup(graph, T, layout.channels, prog, f"{name}/regroup")
    view = _new_operand(graph, T.dtype, layout, name)
    prog.add(Copy(src, view))
    return view


def build_product(
    graph: Graph, A: Tensor, B: Tensor, plan: MatMulPlan, prog: Sequence, name: str, always: bool = False
) -> Tensor:
    """C = A B by the plan, its operands first copied into its layouts unless already there
    (_arrange_operand; `always` for the weight-update pass).

    A serial split runs as poplin's loop: B's column slices are laid out as one step's before it,
    and each of its `serial` iterations slices B's columns dynamically, rearranges A, runs one
    step's product, updates C's columns and increments the loop counter (lib/poplin/Convolution.cpp,
    ConvProgramTree::lower: Repeat(loopCount, {slice, body, update, loopPost}), transformPre in the
    body; convolutionImpl: rearrangeIfSplitOverTiles, dynamicSlice, dynamicUpdate)."""
    lhs, rhs = _operand_layout(plan, "lhs"), _operand_layout(plan, "rhs")
    if plan.serial == 1:
        A = _arrange_operand(graph, A, lhs, plan.pn, always, prog, f"{name}/actsRearranged")
        B = _arrange_operand(graph, B, rhs, plan.pm, always, prog, f"{name}/weightsRearranged")
        return _build_matmul(graph, A, B, plan, prog, name)
    from ..popops import addInPlace

    step = plan.step()
    count, cols = plan.serial, step.n
    b_slices = [
        _arrange_operand(graph, B[:, s * cols : (s + 1) * cols], rhs, plan.pm, True, prog, f"{name}/weightsRearranged")
        for s in range(count)
    ]
    counter = graph.addVariable(UNSIGNED_INT, [1], f"{name}/loopCounter")
    graph.setTileMapping(counter, 0)
    zero = graph.addConstant(UNSIGNED_INT, [1], 0, f"{name}/zero")
    graph.setTileMapping(zero, 0)
    one = graph.addConstant(UNSIGNED_INT, [1], 1, f"{name}/loopIncrement")
    graph.setTileMapping(one, 0)
    prog.add(Copy(zero, counter))
    weights = _new_operand(graph, B.dtype, rhs, f"{name}/weightsSerialSlice")
    body = Sequence()
    _dynamic_slice(graph, b_slices, weights, counter, body, f"{name}/serialSlice", update=False)
    A = _arrange_operand(graph, A, lhs, plan.pn, always, body, f"{name}/actsRearranged")
    out = _build_matmul(graph, A, weights, step, body, name)
    c_slices = [graph.clone(out, f"{name}/serialOut") for _ in range(count)]
    _dynamic_slice(graph, c_slices, out, counter, body, f"{name}/serialUpdate", update=True)
    addInPlace(graph, counter, one, body, f"{name}/loopIncrement")
    C = concat(c_slices, 1)
    prog.add(WriteUndef(C))
    prog.add(Repeat(count, body))
    return C


def _dynamic_slice(
    graph: Graph, slices: list[Tensor], sub: Tensor, counter: Tensor, prog: Sequence, name: str, update: bool
) -> None:
    """Copy slices[counter] into `sub` (or `sub` into slices[counter] with `update`), each tile
    the elements of `sub` it holds, by one popops DynamicSlice1d (DynamicUpdateSlice1d) vertex
    a tile whose base is that tile's part of every slice (popops::dynamicSlice and
    dynamicUpdate; lib/popops/DynamicSlice.cpp)."""
    tile, pos, var, start, length = tile_pieces(graph, sub)
    vertex_tiles, vertex = np.unique(tile, return_inverse=True)
    row, base_var, base_start, base_len = (
        np.concatenate(x) for x in zip(*(regions_at(p, pos, length) for p in slices))
    )
    nv = vertex_tiles.size
    cs = graph.addComputeSet(name)
    kind = "DynamicUpdateSlice1d" if update else "DynamicSlice1d"
    add_vertices(
        graph,
        cs,
        f"popops::{kind}<{sub.dtype}>",
        vertex_tiles,
        {
            "offset": (
                np.arange(nv),
                np.full(nv, int(counter.vars[0])),
                np.zeros(nv, dtype=np.int64),
                np.ones(nv, dtype=np.int64),
            ),
            "baseT": (vertex[row], base_var, base_start, base_len),
            "subT": (vertex, var, start, length),
        },
        work={"elems": np.bincount(vertex, weights=length, minlength=nv).astype(np.int64)},
    )

    def run(data):
        chosen = slices[int(data.read(counter).reshape(-1)[0]) % len(slices)]
        if update:
            data.write(chosen, data.read(sub))
        else:
            data.write(sub, data.read(chosen))

    graph.state.compute_sets[cs.id].functional.append(run)
    prog.add(Execute(cs))


def _regroup(graph: Graph, T: Tensor, grain: int, prog: Sequence, name: str) -> Tensor:
    """T [rows, cols], contiguous along its rows (a transposed view), regrouped so that groups of
    `grain` columns are contiguous, or T itself when it cannot be: poplin regroups an operand whose
    grouping differs from the plan's (lib/poplin/Convolution.cpp, regroupIfBeneficialForPlan: the
    operand's grouping of dimension 0 to the plan's channel group, both multiples of
    getMinimumRegroupGrainSize), with popops::rearrange::regroupTensor (rearrange.regroup)."""
    rows, cols = T.shape
    min_grain = rearrange.regroup_grain(T.dtype)
    to_group = math.gcd(grain, cols)
    from_group = rearrange.dim0_grouping(T, grain)
    if to_group % min_grain or from_group % min_grain or rows % from_group:
        return T
    return rearrange.regroup(graph, T, from_group, to_group, prog, name)


def _staged_reduce(
    graph: Graph,
    prog: Sequence,
    name: str,
    out_linear: Tensor,
    partials: Tensor,
    cells: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    chans_per_group: int,
):
    """Sum the partial blocks of the cells that share an output block, in the stages of poplin's
    multi-stage reduction, and return the last stage's compute set.

    `cells` are, per cell in its block's order: block id, block size, the block's start in
    `out_linear` (the output in block order), the start of its partial block in the variable
    `partials` and its tile. Every stage spreads each of its output rows over an equal share of the
    block's tiles, in slices of whole grains, so all the block's tiles work in every stage
    (lib/poplin/ConvReduce.cpp, multiStageGroupedReduce and partialGroupedReduce)."""
    state = graph.state
    partials_type = partials.dtype
    block, size, base, p_off, tiles = cells
    order = np.lexsort((np.arange(block.size), block))
    block, size, base, p_off, tiles = block[order], size[order], base[order], p_off[order], tiles[order]
    first = np.r_[True, block[1:] != block[:-1]]
    bidx = np.cumsum(first) - 1
    start_of = np.flatnonzero(first)[bidx]
    position = np.arange(block.size) - start_of
    depth = np.bincount(bidx)[bidx]
    plan = reduce_stage_depths(int(depth.max()))
    # the rows a stage sums: first the cells' own partial blocks (row r of a block is the block of
    # its cell r), then the previous stage's output, a block's rows one after another
    rows = depth
    source = partials
    row_start = p_off  # row r of a block starts at row_start[start of the block's cells + r]
    previous: Tensor | None = None  # the last stage's output, undefined once this stage has read it
    cs = None
    for stage, out_depth in enumerate(plan + [1]):
        final = out_depth == 1
        d = np.minimum(out_depth, rows)
        i = ((position + 1) * d + depth - 1) // depth - 1
        t0 = i * depth // d
        t1 = np.maximum(t0 + 1, (i + 1) * depth // d)
        # slices of whole grains: the partials' channel group, at least one vector of the stage's type
        # (partialGroupedReduce: roundedGrainSize)
        t_type = out_linear.dtype if final else partials_type
        vector = graph.target.arch.data_path_width // (8 * t_type.size)
        grain = -(-max(chans_per_group, vector) // vector) * vector
        # splitRegions: at most ceil(grains / tiles) grains a slice, as many slices as that takes,
        # the grains spread evenly over them (lib/poputil/Util.cpp, splitRegionsAux)
        grains = -(-size // grain)
        slices = -(-grains // -(-grains // (t1 - t0)))
        j = position - t0
        s0 = np.minimum(j * grains // slices * grain, size)
        s1 = np.minimum((j + 1) * grains // slices * grain, size)
        r0, r1 = i * rows // d, (i + 1) * rows // d
        keep = s1 > s0
        vc = np.flatnonzero(keep)
        n_rows = (r1 - r0)[vc]
        vertex = np.repeat(np.arange(vc.size), n_rows)
        r = np.repeat(r0[vc], n_rows) + (np.arange(int(n_rows.sum())) - np.repeat(np.cumsum(n_rows) - n_rows, n_rows))
        cell_of_row = np.repeat(vc, n_rows)
        part_start = row_start[start_of[cell_of_row] + r] + s0[cell_of_row]
        length = (s1 - s0)[vc]
        if final:
            target = out_linear
            o_start = base[vc] + s0[vc]
            label = "Reduce" if not plan else "ReduceFinalStage"
        else:
            # this stage's output: a block's d rows of its size, blocks one after another
            block_rows = np.zeros(int(bidx.max()) + 1, dtype=np.int64)
            block_rows[bidx] = d * size
            starts = np.concatenate(([0], np.cumsum(block_rows)[:-1]))
            inter = graph.addVariable(partials_type, [int(block_rows.sum())], f"{name}/partials{stage + 1}")
            target = inter
            new_base = starts[bidx]
            o_start = new_base[vc] + i[vc] * size[vc] + s0[vc]
            label = f"ReduceStage{stage}"
        o_row, o_var, o_st, o_len = regions_at(target, o_start, length)
        for var_id in np.unique(o_var):
            sel = o_var == var_id
            state.set_mapping(int(var_id), o_st[sel], o_st[sel] + o_len[sel], tiles[vc][o_row[sel]])
        cs = graph.addComputeSet(f"{name}/Conv_1/{label}")
        add_vertices(
            graph,
            cs,
            f"poplin::ReduceAdd<{t_type},{partials_type}>",
            tiles[vc],
            {
                "partials": (vertex, np.full(r.size, int(source.vars[0])), part_start, np.repeat(length, n_rows)),
                "out": (o_row, o_var, o_st, o_len),
            },
            work={"outputs": length, "partials": n_rows},
        )
        prog.add(Execute(cs))
        if previous is not None:
            prog.add(WriteUndef(previous))
        if not final:
            previous = inter
            # row r of the next stage's block: the block's start in `inter` plus r of its size
            source, rows = inter, d
            row_start = new_base + position * size
    return cs


def _build_matmul(graph: Graph, A: Tensor, B: Tensor, plan: MatMulPlan, prog: Sequence, name: str) -> Tensor:
    state = graph.state
    m, k, n = plan.m, plan.k, plan.n
    pm, pn, pk = plan.pm, plan.pn, plan.pk
    count = pm * pn * pk
    cell = np.arange(count, dtype=np.int64)
    im, jn, ik = cell // (pn * pk), (cell // pk) % pn, cell % pk
    mb, nb, kb = plan.mb, plan.nb, plan.kb
    r0, r1 = np.minimum(im * mb, m), np.minimum((im + 1) * mb, m)
    c0, c1 = np.minimum(jn * nb, n), np.minimum((jn + 1) * nb, n)
    k0, k1 = np.minimum(ik * kb, k), np.minimum((ik + 1) * kb, k)
    keep = (r1 > r0) & (c1 > c0) & (k1 > k0)
    cells = cell[keep]
    r0, r1, c0, c1, k0, k1 = r0[keep], r1[keep], c0[keep], c1[keep], k0[keep], k1[keep]
    tiles = plan.tiles[cells]
    v = np.arange(cells.size, dtype=np.int64)
    # A blocks: one region request per row of each block
    rows_a = r1 - r0
    va = np.repeat(v, rows_a)
    row_a = np.repeat(r0, rows_a) + (np.arange(int(rows_a.sum())) - np.repeat(np.cumsum(rows_a) - rows_a, rows_a))
    ra, var_a, st_a, ln_a = regions_at(A, row_a * k + np.repeat(k0, rows_a), np.repeat(k1 - k0, rows_a))
    # read in memory order, so that a block stored in channel groups is one region a group
    order = np.lexsort((st_a, var_a, va[ra]))
    ra, var_a, st_a, ln_a = ra[order], var_a[order], st_a[order], ln_a[order]
    rows_b = k1 - k0
    vb = np.repeat(v, rows_b)
    row_b = np.repeat(k0, rows_b) + (np.arange(int(rows_b.sum())) - np.repeat(np.cumsum(rows_b) - rows_b, rows_b))
    rb, var_b, st_b, ln_b = regions_at(B, row_b * n + np.repeat(c0, rows_b), np.repeat(c1 - c0, rows_b))
    block_sizes = (r1 - r0) * (c1 - c0)
    reduce = plan.needs_reduction()
    vertex_type = plan.vertex_out_type()
    # a tile's partials (and the output) are stored with their output channels in groups of the
    # plan's, each group's rows contiguous, as poplin creates them ([Co/cpg][N][field][cpg]:
    # lib/poplin/Convolution.cpp, convolutionImpl with getPartialOutputShape; the output's group is
    # gcd(partialChansPerGroup, channels), getOutChansPerGroup); an outer product's rows are split
    # over its workers, so its blocks stay row by row
    out_group = None if plan.method == "OUTER_PRODUCT" else math.gcd(plan.n_grain, n)
    partials = graph.addVariable(
        vertex_type,
        [int(block_sizes.sum())],
        f"{name}/out" if vertex_type == plan.out_type else f"{name}/partials",
    )
    pvar = int(partials.vars[0])
    p_off = np.concatenate(([0], np.cumsum(block_sizes)[:-1]))
    graph.state.set_mapping(pvar, p_off, p_off + block_sizes, tiles)
    icpg, ocpg = plan.k_grain, plan.n_grain
    cs = graph.addComputeSet(f"{name}/Conv_1/Convolve")
    fields_ = {
        "in": (va[ra], var_a, st_a, ln_a),
        "weights": (vb[rb], var_b, st_b, ln_b),
        "out": (v, np.full(v.size, pvar), p_off, block_sizes),
    }
    if plan.method == "AMP":
        # the AMP vertex's out field is a Vector<AccumType, COMPACT_PTR, 16, true>: interleaved memory
        # (lib/poplin/codelets/ConvPartial1x1Out.cpp, ConvPartialnx1.cpp)
        state.vars[pvar].interleaved = True
        work = {
            "out_elems": r1 - r0,
            "in_groups": -(-(k1 - k0) // icpg),
            "out_groups": -(-(c1 - c0) // ocpg),
            "out_chans_per_group": ocpg,
        }
        fh = amp_weight_height(graph.target.arch, plan.in_type, plan.partials_type, icpg, plan.conv_units)
        if fh > 1:
            # input groups narrower than the conv units' weights: the nx1 vertex over the kernel
            # padded to fh rows, one kernel position of the tile's rows (lib/poplin/ConvVertices.cpp,
            # createConvPartialAmpVertices: a kernel of more than one element takes the nx1
            # vertex); the padding's zeros are not exchanged here
            vertex = f"poplin::ConvPartialnx1<{plan.in_type},{vertex_type},true,false>"
            work.update(kernel_rows=np.ones((v.size, 1), dtype=np.int64), kernel_cols=(r1 - r0)[:, None])
            work["filter_height"] = fh
        else:
            vertex = lib.conv_partial_1x1(plan.in_type, vertex_type)
        if plan.conv_units:
            work["conv_units"] = plan.conv_units
        add_vertices(graph, cs, vertex, tiles, fields_, work=work)
    elif plan.method == "HMAC":
        # out is a Vector<Output<Vector<AccumType, COMPACT_PTR, 8>>>: any memory
        # (lib/poplin/codelets/ConvPartialHorizontalMac.cpp); the plan's input groups
        tile_k = k1 - k0
        group = plan.hmac_group or tile_k
        in_chans, in_groups = np.minimum(tile_k, group), -(-tile_k // group)
        add_vertices(
            graph,
            cs,
            f"poplin::ConvPartialHorizontalMac<{plan.in_type},{vertex_type},true>",
            tiles,
            fields_,
            work={
                "out_elems": r1 - r0,
                "in_chans": in_chans,
                "out_chans": np.full(v.size, ocpg),
                "kernel_rows": np.ones((v.size, 1), dtype=np.int64),  # one row of the tile's positions
                "kernel_cols": (r1 - r0)[:, None],
                "in_groups": in_groups,
                "out_groups": -(-(c1 - c0) // ocpg),
            },
        )
    else:
        # OUTER_PRODUCT: a worker vertex per context, each taking a share of the tile's rows and all its
        # output channels (ConvModel.cpp, addPartialCalcCycleEstimate for OUTER_PRODUCT)
        rows = r1 - r0
        share = -(-rows // WORKERS)
        parts = -(-rows // share)
        vw = np.repeat(v, parts)
        j = np.arange(int(parts.sum())) - np.repeat(np.cumsum(parts) - parts, parts)
        w0 = np.repeat(r0, parts) + j * np.repeat(share, parts)
        w1 = np.minimum(np.repeat(r1, parts), w0 + np.repeat(share, parts))
        width = c1 - c0
        wv = np.arange(vw.size)
        ra2, var_a2, st_a2, ln_a2 = regions_at(A, w0 * k, w1 - w0)
        rb2, var_b2, st_b2, ln_b2 = regions_at(B, np.repeat(c0, parts), np.repeat(width, parts))
        add_vertices(
            graph,
            cs,
            f"poplin::OuterProduct<{plan.in_type}>",
            tiles[vw],
            {
                "in": (wv[ra2], var_a2, st_a2, ln_a2),
                "weights": (wv[rb2], var_b2, st_b2, ln_b2),
                "out": (
                    wv,
                    np.full(wv.size, pvar),
                    p_off[vw] + (w0 - np.repeat(r0, parts)) * np.repeat(width, parts),
                    (w1 - w0) * np.repeat(width, parts),
                ),
            },
            work={"width": w1 - w0, "chans": np.repeat(width, parts), "chans_per_group": np.full(vw.size, ocpg)},
        )
    blocks = list(zip(r0.tolist(), r1.tolist(), c0.tolist(), c1.tolist(), k0.tolist(), k1.tolist(), p_off.tolist()))

    def convolve(data):
        a = data.read(A).astype(np.float64)
        b = data.read(B).astype(np.float64)
        arr = data.array(pvar)
        for q0, q1, s0, s1, t0, t1, off in blocks:
            arr[off + _block_order(q1 - q0, s1 - s0, out_group)] = (a[q0:q1, t0:t1] @ b[t0:t1, s0:s1]).reshape(-1)

    state.compute_sets[cs.id].functional.append(convolve)
    prog.add(Execute(cs))
    if not reduce:
        view, _ = _blocked_view(graph, partials, m, n, mb, nb, out_group)
        if vertex_type == plan.out_type:
            return view
        # float partials of an unsplit k are cast to the output type on their tiles, in a compute set
        # of their own (lib/poplin/Convolution.cpp, convolutionImpl: the "Cast" compute set)
        from ..popops import cast

        out = cast(graph, view, plan.out_type, prog, f"{name}/Conv_1")
        prog.add(WriteUndef(partials))
        return out
    # C blocked by (im, jn); the pk partial blocks of each output block are summed in the stages of
    # poplin's multi-stage reduction
    out = graph.addVariable(plan.out_type, [m * n], f"{name}/out")
    view, c_off = _blocked_view(graph, out, m, n, mb, nb, out_group)
    c_block = im[cells] * pn + jn[cells]
    cs2 = _staged_reduce(graph, prog, name, out, partials, (c_block, block_sizes, c_off[c_block], p_off, tiles), ocpg)

    def reduce_partials(data):
        arr = data.array(pvar)
        result = np.zeros((m, n))
        for q0, q1, s0, s1, _t0, _t1, off in blocks:
            result[q0:q1, s0:s1] += arr[off + _block_order(q1 - q0, s1 - s0, out_group)].reshape(q1 - q0, s1 - s0)
        data.write(view, result)

    state.compute_sets[cs2.id].functional.append(reduce_partials)
    prog.add(WriteUndef(partials))
    return view


# -- fully-connected passes ---------------------------------------------------------------------


@poplibs_op("Transpose")
def transposeMatMulRHS(
    graph: Graph, W: Tensor, aShape, prog: Sequence, debugPrefix: str = "transpose", options: dict | None = None
) -> Tensor:
    """W^T [n, k] of a right operand W [k, n] made by createMatMulInputRHS(aShape, W.shape) with
    the forward pass's options, for the backward pass whose `options` are given, as
    poplin::fullyConnectedWeightTranspose makes it (lib/poplin/Convolution.cpp).

    When the forward and the backward plans both swap their operands, the transposed weights are
    a new tensor created for the backward plan (createWeights(bwdPlan)), written by Transpose2d
    vertices (_transpose_blocks); what lands on other tiles is exchanged after them. Otherwise W^T
    is a transposed view of W, and the backward product rearranges it as it rearranges any operand
    (getGroupSizes: useCopyImpl unless both plans swap)."""
    require_codelets(graph, "popops")
    k, n = W.shape
    m = aShape[0]
    bwd_pass = matmul_pass(options)
    fwd_options = dict(options or {})
    if bwd_pass == "TRAINING_BWD":  # getFullyConnectedFwdOptionsFromBwdOptions
        fwd_options["fullyConnectedPass"] = "TRAINING_FWD"
    plan = plan_product(graph, m, k, n, W.dtype, fwd_options)
    bwd = plan_product(graph, m, n, k, W.dtype, options)
    # the transposed matrices' sides: common divisors of each plan's input-channel group and its
    # input channels (getGroupSizes: commonDivisors), here the largest; poplin picks among them by
    # the transpose vertex each allows and the tiles it spreads over (pickGroupSizes, blockScore)
    fwd_group, bwd_group = math.gcd(plan.k_grain, k), math.gcd(bwd.k_grain, n)
    if not (plan.swapped and bwd.swapped) or fwd_group == 1 or bwd_group == 1:
        return W.transpose()
    if len(W.variable_ids()) != 1:
        raise GraphError("transposeMatMulRHS needs the tensor createMatMulInputRHS returned")
    # swapped, the forward pass's left operand is W^T [n, k] and the backward pass's is W [k, n]
    source, src_layout = W.transpose(), _operand_layout(plan, "lhs")
    dst_layout = _operand_layout(bwd, "lhs")
    view = _new_operand(graph, W.dtype, dst_layout, f"{debugPrefix}/transposed")
    _transpose_blocks(graph, source, src_layout, view, dst_layout.cb, bwd_group, fwd_group, prog, debugPrefix)
    return view.transpose()


def _transpose_blocks(
    graph: Graph,
    source: Tensor,
    layout: _OperandLayout,
    dest: Tensor,
    cut: int,
    dst_group: int,
    src_group: int,
    prog: Sequence,
    name: str,
) -> None:
    """dest = source^T by Transpose2d vertices, source [R, C] stored in `layout`'s blocks, as
    popops::rearrange::addTransposeVertices does it for poplin::fullyConnectedWeightTranspose: the
    matrix is cut into matrices of `dst_group` rows (also cut every `cut` rows, where dest's
    column blocks end) by `src_group` columns, each transposed on the tile that holds its first
    element (getFirstInGroup), the matrices of a tile shared between up to six vertices, one a
    worker."""
    rows, cols, cb = layout.rows, layout.cols, layout.cb
    _, index = source.element_arrays()

    def stored(r, c):
        """The offset in the source variable of element (r, c) of the source."""
        return index[r * cols + c]

    def edges(size, *steps):
        return np.unique(np.concatenate([[0, size], *(np.arange(0, size, step) for step in steps)]))

    r_edges, c_edges = edges(rows, dst_group, cut), edges(cols, src_group, cb)
    r_, c_ = (x.reshape(-1) for x in np.meshgrid(r_edges[:-1], c_edges[:-1], indexing="ij"))
    h_, cw_ = (x.reshape(-1) for x in np.meshgrid(np.diff(r_edges), np.diff(c_edges), indexing="ij"))
    var = int(source.vars[0])
    first = stored(r_, c_)
    _, tile, _, _ = split_by_mapping(graph.state, np.full(first.size, var), first, np.ones(first.size, dtype=np.int64))
    # the matrices of a tile in order, cut into at most WORKERS runs of nearly equal count
    order = np.lexsort((first, tile))
    tile, first, r_, c_, h_, cw_ = (x[order] for x in (tile, first, r_, c_, h_, cw_))
    starts = np.flatnonzero(np.r_[True, tile[1:] != tile[:-1]])
    count = np.diff(np.r_[starts, tile.size])
    rank = np.arange(tile.size) - np.repeat(starts, count)
    parts = np.minimum(WORKERS, count)
    share = np.repeat(-(-count // parts), count)
    slot = np.repeat(np.cumsum(np.r_[0, parts[:-1]]), count) + rank // share
    vertices, vertex = np.unique(slot, return_inverse=True)
    v_tile = np.zeros(vertices.size, dtype=np.int64)
    v_tile[vertex] = tile
    # the source: a region per matrix row; the dest: a region per matrix column; each merged with
    # the next where they follow each other in memory
    src_row = np.repeat(np.arange(first.size), h_)
    src_k = np.arange(src_row.size) - np.repeat(np.cumsum(h_) - h_, h_)
    s_start = stored(r_[src_row] + src_k, c_[src_row])
    s_len = cw_[src_row]
    dst_row = np.repeat(np.arange(first.size), cw_)
    dst_k = np.arange(dst_row.size) - np.repeat(np.cumsum(cw_) - cw_, cw_)
    d_pos = (c_[dst_row] + dst_k) * rows + r_[dst_row]
    row, dvar, dstart, dlen = regions_at(dest, d_pos, h_[dst_row])
    runs = np.flatnonzero(np.r_[True, np.diff(vertex) != 0])  # each vertex's first matrix
    cs = graph.addComputeSet(f"{name}/Transpose")
    add_vertices(
        graph,
        cs,
        f"popops::Transpose2d<{source.dtype}>",
        v_tile,
        {
            "src": merge_regions(vertex[src_row], np.full(src_row.size, var), s_start, s_len),
            "dst": merge_regions(vertex[dst_row][row], dvar, dstart, dlen),
        },
        work={
            "rows": np.maximum.reduceat(h_, runs),
            "cols": np.maximum.reduceat(cw_, runs),
            "matrices": np.bincount(vertex, minlength=vertices.size).astype(np.int64),
        },
    )

    def run(data):
        data.write(dest, data.read(source).T)

    graph.state.compute_sets[cs.id].functional.append(run)
    prog.add(Execute(cs))


def matMulAcc(
    graph: Graph,
    C: Tensor,
    k: float | Tensor,
    A: Tensor,
    B: Tensor,
    prog: Sequence,
    debugPrefix: str = "matMulAcc",
    options: dict | None = None,
) -> None:
    """C += k A B (poplin::matMulAcc): the product, then a scaled add into C; `k` a number or a
    one-element tensor (popops.scaledAddTo)."""
    from ..popops import scaledAddTo

    product = matMul(graph, A, B, prog, debugPrefix, options)
    scaledAddTo(graph, C, product, k, prog, f"{debugPrefix}/AddTo")
