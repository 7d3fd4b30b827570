"""poplin's fully-connected layer in training: the forward, backward and weight-update passes planned
jointly or separately.

poplin plans a fully-connected forward pass (``fullyConnectedPass`` TRAINING_FWD) twice: a joint
plan, one partition from which the backward and weight-update plans are derived and whose cost is
the sum of the three passes' cycles, each pass within the memory bound; and three separate plans.
It keeps the joint plan unless the separate plans are cheaper (lib/poplin/ConvPlan.cpp, createPlan:
separatePlanHasLowerCost), and the backward and weight-update passes then follow the forward pass's
plan (ConvPlan.cpp, getPlan: getFullyConnectedBwdPlan and getFullyConnectedWUPlan), whichever of
them run.

A joint plan swaps the operands (ConvPlan.cpp, getSwapOperandCandidates): with B the batch, I the
input and O the output size, the forward pass computes C^T [O, B] = W^T [O, I] A^T [I, B] on a
grid of pO x pI tiles, the batch never split (ConvModel.cpp, constructModel: a joint plan's
outChanSplit.parallel is 1, so that each weight is used on one tile). The backward pass computes
dA^T [I, B] = W [I, O] dC^T [O, B] on the same tiles with the O and I splits exchanged, and the
weight update dW^T [O, I] = dC^T [O, B] A [B, I] on the same tiles with the k split dropped
(ConvModel.cpp, addBwdEstimates and addWuEstimates). Each pass's cycles come from the model that
plans a lone matrix product (poplin/planner.py, _pass_costs), plus the copies that rearrange its operands
and output as a joint plan's pass costs them (poplin.transform_cost with joint=True).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..codelets import poplin as amp
from ..codelets.poplin import WORKERS
from ..errors import GraphError
from ..graph import Graph
from ..programs import Execute, Sequence
from ..tensor import Tensor
from ..types import Type
from . import poplin
from ._util import add_vertices, poplibs_op, require_codelets
from .poplin import matmul, planner

#: How the fc passes are planned: each alone, as poplin does (joint or separate, by its rule), or
#: jointly.
PLAN_MODES = ("separate", "poplin", "joint")


@dataclass
class FullyConnectedPlan:
    """The plans of the three passes of a fully-connected layer [B, I] x [I, O]."""

    batch: int
    input_size: int
    output_size: int
    joint: bool
    fwd: poplin.MatMulPlan
    bwd: poplin.MatMulPlan
    wu: poplin.MatMulPlan
    joint_cost: tuple[int, int] | None  # (cycles of the three passes, max temporary bytes per tile)
    separate_cost: tuple[int, int]

    @property
    def cycles(self) -> int:
        """The planner's estimate of the three passes' cycles."""
        return sum(p.estimate["total"] for p in (self.fwd, self.bwd, self.wu))


def separate_plan_has_lower_cost(separate: tuple[int, int], joint: tuple[int, int] | None, bound: float) -> bool:
    """poplin's choice between the separate and the joint plans, each given as (cycles, temporary
    bytes per tile): the separate plans when they fit the bound and the joint plan does not or is
    slower, or when neither fits and the separate plans need less memory
    (lib/poplin/ConvPlan.cpp, createPlan: separatePlanHasLowerCost)."""
    if joint is None:
        return True
    sep_cycles, sep_bytes = separate
    joint_cycles, joint_bytes = joint
    if sep_bytes <= bound:
        return joint_bytes > bound or sep_cycles < joint_cycles
    return joint_bytes > bound and sep_bytes < joint_bytes


def plan_fully_connected(
    graph: Graph,
    batch: int,
    input_size: int,
    output_size: int,
    in_type: Type,
    mode: str = "poplin",
    options: dict | None = None,
) -> FullyConnectedPlan:
    """The plans of the fc passes: joint or separate as poplin chooses, or as `mode` forces, with
    the layer's poplin `options` (``partialsType``, and ``availableMemoryProportion`` for the
    memory bound: poplin.memory_bound)."""
    if mode not in PLAN_MODES:
        raise GraphError(f"fully-connected plan mode must be one of {', '.join(PLAN_MODES)}, got {mode!r}")
    b, i, o = batch, input_size, output_size
    target = graph.target
    options = options or {}
    partials_type = poplin.partials_type(options, in_type)
    bound = poplin.memory_bound(options, target.bytesPerTile)
    # the separate plans, each pass planned alone as poplin plans it (poplin.plan_product)
    fwd, bwd, wu = (
        poplin.plan_product(graph, m, k, n, in_type, {**options, "fullyConnectedPass": fc_pass})
        for fc_pass, (m, k, n) in (
            ("TRAINING_FWD", (b, i, o)),
            ("TRAINING_BWD", (b, o, i)),
            ("TRAINING_WU", (i, b, o)),
        )
    )
    separate = (
        sum(p.estimate["total"] for p in (fwd, bwd, wu)),
        max(p.estimate["memory"] for p in (fwd, bwd, wu)),
    )
    found = _joint_grid(target.arch.name, target.bytesPerTile, graph.num_tiles, b, i, o, in_type, partials_type, bound)
    joint_cost = None if found is None else (found[4], found[5])
    if mode == "separate" or found is None:
        use_joint = False
    elif mode == "joint":
        use_joint = True
    else:
        use_joint = not separate_plan_has_lower_cost(separate, joint_cost, bound)
    if not use_joint:
        return FullyConnectedPlan(b, i, o, False, fwd, bwd, wu, joint_cost, separate)
    p_o, p_i, cand, estimates, _, _ = found
    icpg, ocpg, units = cand.icpg, cand.ocpg, cand.units
    tile_units = amp.num_conv_units(target.arch, in_type.name, partials_type.name)
    base = np.arange(p_o * p_i, dtype=np.int64)

    def make(m, k, n, pm, pn, pk, m_grain, k_grain, n_grain, tiles, estimate, conv_units, method):
        return poplin.MatMulPlan(
            m,
            k,
            n,
            pm,
            pn,
            pk,
            in_type,
            partials_type,
            in_type,
            np.asarray(graph.tile(tiles), dtype=np.int64),
            dict(estimate),
            k_grain,
            n_grain,
            method,
            m_grain,
            0 if conv_units in (0, tile_units) else conv_units,
            # HMAC vertices take the forward pass's input groups, the joint plan's field grain
            hmac_group=k_grain if method == "HMAC" else 0,
        )

    # the tile of the cells (iO, kI) of the three passes is kI * pO + iO, the forward pass's order
    # (lib/poplin/Convolution.cpp, linearizeTileIndices: the input-channel split outermost; the
    # backward and weight-update orders FC_BWD_AS_CONV and FC_WU put their cells on the same tiles)
    i_o, k_i = base // p_i, base % p_i  # forward cell = iO * pI + kI
    fwd_tiles = k_i * p_o + i_o
    bwd_tiles = base  # backward cell = kI * pO + iO
    wu_tiles = fwd_tiles  # weight-update cell = iO * pI + kI
    return FullyConnectedPlan(
        b,
        i,
        o,
        True,
        # the forward pass's field grain is its input-channel group: it becomes the backward
        # pass's input channels (ConvPlan.cpp, createPlan: fieldGrainSize.back() = inChansPerGroup)
        make(o, i, b, p_o, 1, p_i, icpg, icpg, ocpg, fwd_tiles, estimates[0], units[0], cand.methods[0]),
        # backward: the forward pass's method and channel groups (ConvModel.cpp,
        # getFullyConnectedBwdConvVertexType)
        make(i, o, b, p_i, 1, p_o, icpg, icpg, ocpg, bwd_tiles, estimates[1], units[1], cand.methods[1]),
        # weight update: the forward pass's output-channel group as its input channels, the forward
        # pass's input-channel group as its output channels (getFullyConnectedWuConvVertexType)
        make(o, b, i, p_o, p_i, 1, icpg, ocpg, icpg, wu_tiles, estimates[2], units[2], cand.methods[2]),
        joint_cost,
        separate,
    )


def amp_vertex_candidates(
    arch, in_type: Type, partials_type: Type, inputs: int, joint_forward: bool = False, partials: int | None = None
) -> list[tuple[int, int]]:
    """(conv units, output channels per group) of the AMP vertices poplin offers for `inputs` input
    channels a group, in its order (lib/poplin/ConvVertexType.cpp, getConvVertexAMPCandidates and
    canUseConvolutionInstruction): the tile's conv units and, when it has 16, 8 of them; output
    groups as wide as the conv units used or as their share of one conv unit's weights, a multiple
    of the conv units; for the forward pass of a joint plan, input channels a multiple of the conv
    units too, for they become the weight update's output channels. `partials` keeps one width.
    The half-engine plans of a Mk1 tile (option enableAmpHalfEnginesPlan, off by default) are left
    out."""
    tile_units = amp.num_conv_units(arch, in_type.name, partials_type.name)
    wpcu = amp.weights_per_conv_unit(in_type.name)
    half = [tile_units // 2] if tile_units == 16 else []
    widths = list(dict.fromkeys([tile_units, wpcu, *half]))
    found = []
    for units in [tile_units, *half]:
        used = wpcu * units // tile_units
        for width in widths:
            if partials is not None and width != partials:
                continue
            if width not in (units, used):
                continue
            usable = used if units == 4 else wpcu
            if usable % inputs or width % units:
                continue
            if inputs * (32 if in_type.name == "float" else 16) % arch.data_path_width:
                continue
            if joint_forward and inputs % units:
                continue
            found.append((units, width))
    return found


@dataclass(frozen=True)
class _JointCandidate:
    """One vertex choice of a joint plan: the forward pass's method and channel groups, and each
    pass's method and conv units (0 where the method has none)."""

    methods: tuple[str, str, str]  # forward, backward, weight update
    icpg: int  # input channels of a forward group: the forward pass's field grain
    ocpg: int  # output channels (batch rows) of a forward group
    units: tuple[int, int, int]


def _joint_candidates(arch, b: int, i: int, in_type: Type, partials_type: Type) -> list[_JointCandidate]:
    """The vertex choices poplin weighs for a joint plan, in its order (lib/poplin/ConvVertexType.cpp,
    getConvVertexTypeCandidates with isJointPlan: AMP, then HMAC), with the backward and
    weight-update methods that follow from the forward pass's (ConvModel.cpp,
    getFullyConnectedBwdMethod: HMAC stays HMAC; getFullyConnectedWUMethod: an outer product for a
    weight update of one row when the forward pass's output groups are single channels).

    AMP takes input channels in groups of one conv unit's weights or of a narrower divisor of them
    (planner.in_chans_candidates), a multiple of the forward pass's conv units, for they become the
    weight update's output channels. HMAC takes every input grouping that changes the number of
    groups, a multiple of the conv units (they become the weight update's output channels:
    getConvVertexHMACCandidates), with output groups of 1 (float partials) or 2; it is weighed only
    where the weight update is an outer product (one row, float partials): otherwise poplin's weight
    update runs AMP vertices on the HMAC grouping, which this planner does not model."""
    found = []
    for icpg in planner.in_chans_candidates(arch, in_type):
        for fwd_units, ocpg in amp_vertex_candidates(arch, in_type, partials_type, icpg, joint_forward=True):
            # the backward and weight-update vertices: the first AMP candidate with their channel
            # groups (ConvModel.cpp, getFullyConnectedBwdConvVertexType, getFullyConnectedWuConvVertexType)
            bwd = amp_vertex_candidates(arch, in_type, partials_type, icpg, partials=ocpg)
            wu = amp_vertex_candidates(arch, in_type, partials_type, ocpg, partials=icpg)
            if bwd and wu:
                found.append(_JointCandidate(("AMP",) * 3, icpg, ocpg, (fwd_units, bwd[0][0], wu[0][0])))
    hmac_ocpg = amp.hmac_out_chans_per_group(partials_type.name)
    if b == 1 and hmac_ocpg == 1:
        units = amp.num_conv_units(arch, in_type.name, partials_type.name)
        grain = 1 if in_type.name == "float" else 2
        previous = 0
        for icpg in range(grain, -(-i // grain) * grain + 1, grain):
            groups = -(-i // icpg)
            if groups == previous or (icpg != 1 and icpg % units):
                continue
            previous = groups
            found.append(_JointCandidate(("HMAC", "HMAC", "OUTER_PRODUCT"), icpg, hmac_ocpg, (0, 0, 0)))
    return found


@functools.lru_cache(maxsize=1024)
def _joint_grid(
    arch_name: str,
    bytes_per_tile: int,
    tiles: int,
    b: int,
    i: int,
    o: int,
    in_type: Type,
    partials_type: Type,
    bound: float,
):
    """The cheapest joint partition within `bound` temporary bytes per tile: (pO, pI, its
    _JointCandidate, the three passes' estimates, their summed cycles, their largest temporary
    bytes per tile), or None when no vertex suits a joint plan. When none fits, the bound is
    relaxed as poplin relaxes it (poplin.relaxed_bound)."""
    from ..target import architecture

    arch = architecture(arch_name)
    found = []  # per candidate: (its grids' pO, pI, summed cycles, largest bytes, per-pass costs)
    for cand in _joint_candidates(arch, b, i, in_type, partials_type):
        icpg, ocpg = cand.icpg, cand.ocpg
        p_o_c = planner._minimal_splits(max(1, -(-o // icpg)), tiles)
        p_i_c = planner._minimal_splits(max(1, -(-i // icpg)), tiles)
        g = np.stack([x.reshape(-1) for x in np.meshgrid(p_o_c, p_i_c, indexing="ij")])
        g = g[:, g[0] * g[1] <= tiles]
        p_o, p_i = g[0], g[1]
        ob = np.minimum(o, planner._ceil(planner._ceil(o, icpg), p_o) * icpg)
        ib = np.minimum(i, planner._ceil(planner._ceil(i, icpg), p_i) * icpg)
        bb = np.full_like(p_o, b)
        one = np.ones_like(p_o)
        used = p_o * p_i
        o_field, i_field = -(-o // icpg) * icpg, -(-i // icpg) * icpg
        # each pass: (pass, k, n, m in whole field grains of the forward input group, a tile's rows,
        # output and input channels, the k split, the input and output groups); fwd [O,I] x [I,B],
        # bwd [I,O] x [O,B], wu [O,B] x [B,I] (ConvPlan.cpp, createPlan: fieldGrainSize.back() =
        # inChansPerGroup)
        specs = (
            ("TRAINING_FWD", i, b, o_field, ob, bb, ib, p_i, icpg, ocpg, p_o, one, True),
            ("TRAINING_BWD", o, b, i_field, ib, bb, ob, p_o, icpg, ocpg, p_i, one, False),
            ("TRAINING_WU", b, i, o_field, ob, ib, bb, one, ocpg, icpg, p_o, p_i, False),
        )
        passes = []
        for method, units, spec in zip(cand.methods, cand.units, specs):
            fc_pass, k, n, m, mb, nb, kb, pk, ig, og, pm, pn, standard = spec
            vertex = poplin.product_vertex_cycles(arch, method, in_type, partials_type, mb, nb, kb, ig, og, units)
            index = np.full_like(p_o, poplin.MATMUL_METHODS.index(method))
            p = planner._pass_costs(
                arch,
                k,
                mb,
                nb,
                kb,
                pk,
                index,
                vertex,
                in_type,
                partials_type,
                in_type,
                pm=pm,
                pn=pn,
                standard_order=standard,
                # an AMP pass whose input groups do not fill the conv units' weights (the weight
                # update on the forward pass's output groups, or any pass on narrower forward
                # groups) pads its kernel and input with zeros, which poplin counts in cycles and
                # temporary bytes (planner.weight_height_padding)
                k_grain=np.full_like(p_o, ig),
                n_grain=np.full_like(p_o, og),
                conv_units=units or None,
            )
            # the pass's rearranging copies, as poplin's joint plan costs them (ConvModel.cpp,
            # addEstimates of the three passes: addTransformCycleEstimate with isJointPlan): its
            # operands swapped, so only padded channels and the weight update's input are rearranged
            cycles, temp = poplin.transform_cost(
                arch, True, m, k, n, ig, og, used, in_type, in_type, fc_pass, joint=True
            )
            p["transform"] = cycles
            p["total"] = p["total"] + cycles
            p["memory"] = np.maximum(p["memory"], temp)
            passes.append(p)
        total = sum(p["total"] for p in passes)
        memory = np.maximum.reduce([p["memory"] for p in passes])
        found.append((cand, p_o, p_i, total, memory, passes))
    if not found:
        return None
    # each pass's temporary bytes within the bound (ConvModel.cpp, constructModel: the forward
    # pass's in addEstimates, the backward and weight-update passes' beside the joint objective)
    bound = poplin.relaxed_bound(np.concatenate([f[4] for f in found]), bound, bytes_per_tile)
    best = None
    for cand, p_o, p_i, total, memory, passes in found:
        allowed = memory <= bound
        if not allowed.any():
            continue
        j = int(np.lexsort((p_o * p_i, np.where(allowed, total, np.iinfo(np.int64).max)))[0])
        key = (int(total[j]), int(p_o[j] * p_i[j]))
        if best is None or key < best[0]:
            estimates = tuple(tuple((name, int(p[name][j])) for name in poplin.ESTIMATE_KEYS) for p in passes)
            best = (key, (int(p_o[j]), int(p_i[j]), cand, estimates, int(total[j]), int(memory[j])))
    return None if best is None else best[1]


# -- lowering with a joint plan ------------------------------------------------------------------


def createInput(graph: Graph, plan: FullyConnectedPlan, debugPrefix: str = "prevAct") -> Tensor:
    """The activations [B, I], stored as A^T in the blocks the forward pass reads."""
    return _create(graph, plan, plan.fwd, "rhs", debugPrefix).transpose()


def createWeights(graph: Graph, plan: FullyConnectedPlan, debugPrefix: str = "weights") -> Tensor:
    """The weights [I, O], stored as W^T in the blocks the forward pass reads: each block on one tile."""
    return _create(graph, plan, plan.fwd, "lhs", debugPrefix).transpose()


def createDeltas(graph: Graph, plan: FullyConnectedPlan, debugPrefix: str = "zDeltas") -> Tensor:
    """The output gradients [B, O], stored as dC^T in the blocks the backward pass reads, which are
    the blocks the weight update reads."""
    return _create(graph, plan, plan.bwd, "rhs", debugPrefix).transpose()


def _create(graph: Graph, plan: FullyConnectedPlan, pass_plan: poplin.MatMulPlan, side: str, name: str) -> Tensor:
    if not plan.joint:
        raise GraphError("the fully-connected layouts of a joint plan need a joint plan")
    assert pass_plan.serial == 1, "a joint plan is not split serially"
    return matmul._new_operand(graph, pass_plan.in_type, matmul._operand_layout(pass_plan, side), name)


@poplibs_op("MatMul")
def forward(
    graph: Graph, plan: FullyConnectedPlan, prevAct: Tensor, weights: Tensor, prog: Sequence, debugPrefix: str = "Fwd"
) -> Tensor:
    """The forward pass A [B, I] x W [I, O] of a joint plan: C^T = W^T A^T, returned as C [B, O]."""
    require_codelets(graph, "poplin")
    return poplin.build_product(
        graph, weights.transpose(), prevAct.transpose(), plan.fwd, prog, debugPrefix
    ).transpose()


@poplibs_op("Transpose")
def transposeWeights(
    graph: Graph, plan: FullyConnectedPlan, weights: Tensor, prog: Sequence, debugPrefix: str = "transpose"
) -> Tensor:
    """The weights [I, O] in the blocks the backward pass reads, as poplin::fullyConnectedWeightTranspose
    makes them for a joint plan (lib/poplin/Convolution.cpp): a new tensor laid out for the backward
    plan, each of its blocks on the tile of the forward block it transposes, written by Transpose2d
    vertices on that tile, the block's matrices of input-channel groups shared between the tile's
    workers (popops::rearrange::addTransposeVertices), so nothing is exchanged."""
    require_codelets(graph, "popops")
    fwd, bwd = plan.fwd, plan.bwd
    o, i = fwd.m, fwd.k
    source = weights.transpose()  # W^T [O, I] in the forward pass's blocks
    if len(source.variable_ids()) != 1:
        raise GraphError("transposeWeights needs the tensor createWeights returned")
    svar = int(source.vars[0])
    layout = matmul._operand_layout(bwd, "lhs")
    out = graph.addVariable(weights.dtype, [i * o], f"{debugPrefix}/transposed")
    view, d_off = matmul._blocked_view(graph, out, i, o, layout.rb, layout.cb)
    heights = np.minimum(fwd.mb, o - np.arange(fwd.pm) * fwd.mb).clip(min=0)  # O rows of each block
    widths = np.minimum(fwd.kb, i - np.arange(fwd.pk) * fwd.kb).clip(min=0)  # I columns of each block
    s_off = np.concatenate(([0], np.cumsum(np.outer(heights, widths).reshape(-1))[:-1]))
    # matrices of the backward group (O rows) by the forward group (I columns): each plan's input
    # group and its channels' greatest common divisor, as a joint plan's groups are taken
    # (lib/poplin/Convolution.cpp, getGroupSizes: the first common divisors, pickGroupSizes)
    rows_group, cols_group = math.gcd(bwd.k_grain, o), math.gcd(fwd.k_grain, i)
    starts, ends, map_tiles = [], [], []
    v_tile, v_src, v_len, v_rows, v_cols, v_mats, d_v, d_pos, d_len = [], [], [], [], [], [], [], [], []
    vertex = 0
    for i_o in range(fwd.pm):
        for k_i in range(fwd.pk):
            h, w = int(heights[i_o]), int(widths[k_i])
            if h == 0 or w == 0:
                continue
            tile = int(fwd.tiles[i_o * fwd.pk + k_i])
            src0 = int(s_off[i_o * fwd.pk + k_i])
            dst0 = int(d_off[k_i * fwd.pm + i_o])
            starts.append(dst0)
            ends.append(dst0 + h * w)
            map_tiles.append(tile)
            # the block's matrices of group x group, split by groups of its rows over the workers
            row_groups = -(-h // rows_group)
            share = -(-row_groups // min(WORKERS, row_groups))
            for g0 in range(0, row_groups, share):
                r0, r1 = g0 * rows_group, min(h, (g0 + share) * rows_group)
                v_tile.append(tile)
                v_src.append(src0 + r0 * w)
                v_len.append((r1 - r0) * w)
                v_rows.append(min(rows_group, r1 - r0))
                v_cols.append(min(cols_group, w))
                v_mats.append(-(-(r1 - r0) // rows_group) * -(-w // cols_group))
                # rows r0..r1 of the W^T block are columns r0..r1 of each row of the W block
                d_pos.append(dst0 + np.arange(w, dtype=np.int64) * h + r0)
                d_len.append(np.full(w, r1 - r0, dtype=np.int64))
                d_v.append(np.full(w, vertex, dtype=np.int64))
                vertex += 1
    graph.state.set_mapping(
        int(out.vars[0]),
        np.asarray(starts, dtype=np.int64),
        np.asarray(ends, dtype=np.int64),
        np.asarray(map_tiles, dtype=np.int64),
    )
    cs = graph.addComputeSet(f"{debugPrefix}/Transpose")
    v = np.arange(vertex, dtype=np.int64)
    dpos = np.concatenate(d_pos)
    add_vertices(
        graph,
        cs,
        f"popops::Transpose2d<{weights.dtype}>",
        np.asarray(v_tile, dtype=np.int64),
        {
            "src": (v, np.full(v.size, svar), np.asarray(v_src, dtype=np.int64), np.asarray(v_len, dtype=np.int64)),
            "dst": (np.concatenate(d_v), np.full(dpos.size, int(out.vars[0])), dpos, np.concatenate(d_len)),
        },
        work={
            "rows": np.asarray(v_rows, dtype=np.int64),
            "cols": np.asarray(v_cols, dtype=np.int64),
            "matrices": np.asarray(v_mats, dtype=np.int64),
        },
    )

    def run(data):
        data.write(view, data.read(weights))

    graph.state.compute_sets[cs.id].functional.append(run)
    prog.add(Execute(cs))
    return view


@poplibs_op("MatMul")
def backward(
    graph: Graph, plan: FullyConnectedPlan, zDeltas: Tensor, weightsT: Tensor, prog: Sequence, debugPrefix: str = "Bwd"
) -> Tensor:
    """The backward pass dC [B, O] x W^T [O, I] of a joint plan: dA^T = W dC^T, returned as dA [B, I];
    `weightsT` is what transposeWeights returned (W laid out for the backward plan)."""
    require_codelets(graph, "poplin")
    return poplin.build_product(graph, weightsT, zDeltas.transpose(), plan.bwd, prog, debugPrefix).transpose()


def weightUpdate(
    graph: Graph,
    plan: FullyConnectedPlan,
    weights: Tensor,
    scale: float | Tensor,
    prevAct: Tensor,
    zDeltas: Tensor,
    prog: Sequence,
    debugPrefix: str = "Wu",
) -> None:
    """W += scale A^T dC of a joint plan: dW^T = dC^T A on the tiles of the weights' blocks, then a
    scaled add into W^T there (poplin::matMulAcc)."""
    from .popops import scaledAddTo

    product = _weight_gradient(graph, plan, prevAct, zDeltas, prog, debugPrefix)
    scaledAddTo(graph, weights.transpose(), product, scale, prog, f"{debugPrefix}/AddTo")


@poplibs_op("MatMul")
def _weight_gradient(
    graph: Graph, plan: FullyConnectedPlan, prevAct: Tensor, zDeltas: Tensor, prog: Sequence, debugPrefix: str
) -> Tensor:
    """dW^T [O, I] = dC^T A by the joint plan's weight-update pass. The weight-update pass always
    rearranges its operands (lib/poplin/Convolution.cpp, inputRearrangementIsExpensive and
    weightRearrangementIsExpensive): A, stored as A^T, is regrouped and copied into the weight
    update's layout on the tiles that hold it; dC^T is already in it."""
    from ..programs import Copy

    require_codelets(graph, "poplin")
    wu = plan.wu
    lhs = matmul._arrange_operand(
        graph,
        zDeltas.transpose(),
        matmul._operand_layout(wu, "lhs"),
        wu.pn,
        False,
        prog,
        f"{debugPrefix}/actsRearranged",
    )
    layout = matmul._operand_layout(wu, "rhs")
    rhs = matmul._regroup(graph, prevAct, wu.n_grain, prog, f"{debugPrefix}/weightsRearranged/regroup")
    arranged = matmul._new_operand(graph, prevAct.dtype, layout, f"{debugPrefix}/weightsRearranged")
    prog.add(Copy(rhs, arranged))
    return matmul._build_matmul(graph, lhs, arranged, wu, prog, debugPrefix)
