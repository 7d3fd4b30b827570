"""poplin: matrix multiplication and convolution on the accumulating matrix product units.

A matrix multiply C[m,n] = A[m,k] B[k,n] is planned like Poplibs plans a 1x1 convolution: the
output rows (m), output channels (n) and input channels (k) are split over a grid of
pm x pn x pk tiles. Each tile runs one ``poplin::ConvPartial1x1Out`` vertex on its blocks of A
and B, writing float partials; when k is split (pk > 1), or the output type differs from the
partials type, ``poplin::ReduceAdd`` vertices sum the partials into C. The planner evaluates
every grid with the same cycle model the vertices use (compute, exchange, reduction) and
keeps the cheapest one that fits in tile memory. A plan constraint may ask for poplin's other
methods, ``ConvPartialHorizontalMac`` (HMAC) and ``OuterProduct`` vertices (plan_methods).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np

from .. import codelets as lib
from ..codelets import poplin as amp
from ..codelets.poplin import WORKERS
from ..errors import GraphError
from ..graph import Graph
from ..programs import Copy, Execute, Sequence, WriteUndef
from ..tensor import Tensor
from ..types import FLOAT, HALF, Type, as_type
from . import rearrange
from ._util import add_vertices, linear_intervals, poplibs_op, regions_at, require_codelets

#: poplin's default availableMemoryProportion (lib/poplin/ConvOptions.hpp).
AVAILABLE_MEMORY_PROPORTION = 0.6


def addCodelets(graph: Graph) -> None:
    """Make the poplin vertices available to the graph."""
    graph.addCodelets("poplin")


@dataclass
class MatMulPlan:
    """A split of C[m,n] = A[m,k] B[k,n] over a pm x pn x pk grid of tiles."""

    m: int
    k: int
    n: int
    pm: int
    pn: int
    pk: int
    in_type: Type
    partials_type: Type
    out_type: Type
    tiles: np.ndarray  # graph tile of each grid cell, cell = (im * pn + jn) * pk + ik
    estimate: dict
    k_grain: int = 1  # input channels of one AMP group: k is split in whole groups
    n_grain: int = 1  # output channels of one AMP group: n is split in whole groups
    method: str = "AMP"  # poplin's Plan::Method: AMP, HMAC or OUTER_PRODUCT
    m_grain: int = 1  # rows of one field grain: m is split in whole grains
    conv_units: int = 0  # AMP conv units the vertices use; 0: all of the tile's for the precision

    @property
    def mb(self) -> int:
        return _grain_block(self.m, self.m_grain, self.pm)

    @property
    def nb(self) -> int:
        return _grain_block(self.n, self.n_grain, self.pn)

    @property
    def kb(self) -> int:
        return _grain_block(self.k, self.k_grain, self.pk)

    def bounds(self, index: int, parts: int, size: int) -> tuple[int, int]:
        block = -(-size // parts)
        return min(size, index * block), min(size, (index + 1) * block)

    def needs_reduction(self) -> bool:
        """Whether partials of a k split are summed."""
        return self.pk > 1

    def vertex_out_type(self) -> Type:
        """What the AMP vertices write: the partials type, or the smaller output type when nothing
        is reduced and all of k fits one conv unit's weights (lib/poplin/ConvVertexType.cpp,
        getConvVertexAMPCandidates: inputChannelsPerConvGroup <= weightsPerConvUnit; getConvTypes)."""
        if self.method == "OUTER_PRODUCT":
            return self.in_type
        if self.method == "AMP" and self.pk == 1 and self.k <= amp.weights_per_conv_unit(self.in_type.name):
            return self.out_type if self.out_type.size < self.partials_type.size else self.partials_type
        return self.partials_type


def _grain_block(size: int, grain: int, parts: int) -> int:
    """Elements of one block when `size` elements are split into `parts` blocks of whole grains."""
    grains = -(-size // grain)
    return -(-grains // parts) * grain


def _ceil(a, b):
    """ceil(a / b) for non-negative integers or integer arrays."""
    return -(-a // b)


def _minimal_splits(grains: int, limit: int) -> np.ndarray:
    """Every split of `grains` grains into at most `limit` parts that is the smallest split giving
    its block size, as poplin's planner constrains its partitions (lib/popsolver/Model.cpp,
    Model::ceildivConstrainDivisor: result * split < grains + result)."""
    top = max(1, min(grains, limit))
    blocks = np.unique(-(-grains // np.arange(1, top + 1, dtype=np.int64)))
    return np.unique(-(-grains // blocks))


def reduce_stage_depths(depth: int) -> list[int]:
    """Partial depths after each intermediate stage of a reduction of `depth` partials; empty for a
    single stage (lib/poplin/ConvReducePlan.cpp, getNumReduceStages and
    getMultiStageReducePlanAndCost, multi-stage reduction enabled as by default: 2 stages from 16
    partials, 3 from 125, each stage cutting the depth to about depth^((n-1)/n) by the cheaper of
    rounding down or up, counting the messages a tile receives)."""
    stages = 3 if depth >= 125 else 2 if depth >= 16 else 1

    def plan(d: int, n: int) -> tuple[list[int], float]:
        if n == 1:
            return [], float(d)
        down = int(float(d) ** ((n - 1.0) / n))
        best = None
        for nxt in (down, down + 1):
            rest, cost = plan(nxt, n - 1)
            cost += d / nxt
            if best is None or cost <= best[1]:  # poplin keeps rounding down only when strictly cheaper
                best = ([nxt] + rest, cost)
        return best

    return plan(depth, stages)[0]


def _groups(arch, in_type: Type, partials_type: Type) -> tuple[int, int]:
    """Input and output channels of one AMP channel group: a conv unit's weights and the conv units
    of the tile (poplin's AMP vertex type: inChansPerGroup and partialChansPerGroup)."""
    return (amp.weights_per_conv_unit(in_type.name), amp.num_conv_units(arch, in_type.name, partials_type.name))


def partial_chans_candidates(arch, in_type: Type, partials_type: Type, conv_kernel: int = 1) -> tuple[int, ...]:
    """Output channels of one AMP partials group the planner may choose: the tile's conv units or
    one conv unit's weights, when a multiple of the conv units (lib/poplin/ConvVertexType.cpp,
    getConvVertexAMPCandidates: partialChansCandidates = {numConvUnitsOnIpu, weightsPerConvUnit};
    canUseConvolutionInstruction: outChansPerGroup % numConvUnitsRequired == 0). A group wider
    than the conv units takes several output passes (PerformanceEstimation.hpp,
    getConvPartial1x1SupervisorOuterLoopCycleEstimate, outputPassesPerGroup); the nx1 vertex's
    estimate here assumes one pass, so kernels wider than 1x1 keep one conv unit per channel."""
    wpcu, units = _groups(arch, in_type, partials_type)
    if conv_kernel > 1 or wpcu == units or wpcu % units:
        return (units,)
    return (units, wpcu)


#: poplin's methods for a matrix product, in its candidate order (lib/poplin/ConvVertexType.cpp,
#: getConvVertexTypeCandidates: AMP, SLIC, HMAC, VMAC, OUTER_PRODUCT; SLIC is disabled for the
#: fully-connected passes, and VMAC, for grouped convolutions, is not modelled).
MATMUL_METHODS = ("AMP", "HMAC", "OUTER_PRODUCT")

#: The methods the planner weighs unless a plan constraint names one: AMP only. poplin weighs all of
#: MATMUL_METHODS, but on operands it may swap and, for the fully-connected passes, in one joint plan
#: whose weight-update method follows the forward plan's (ConvPlan.cpp, getSwapOperandCandidates;
#: ConvModel.cpp, getFullyConnectedWUMethod); the swap is modelled only in the joint plan of the
#: fully-connected passes (fullyconnected.py), on AMP, and weighing the methods pass by pass on
#: unswapped operands moves the calibration table away from poplibs' figures (docs/simulator.md,
#: "Reading the gaps").
DEFAULT_METHODS = ("AMP",)


def plan_methods(options: dict | None) -> tuple[str, ...]:
    """The methods a matrix product's options let the planner weigh: poplin's ``planConstraints``
    option (a JSON object, or a dict) may name one with ``method`` (ConvVertexType.cpp,
    getConvVertexTypeCandidates: constrainedMethod); ``"all"`` weighs every method of
    MATMUL_METHODS."""
    import json

    constraints = (options or {}).get("planConstraints")
    if constraints is None:
        return DEFAULT_METHODS
    if isinstance(constraints, str):
        try:
            constraints = json.loads(constraints) if constraints.strip() else {}
        except json.JSONDecodeError as exc:
            raise GraphError(f"planConstraints must be a JSON object, got {constraints!r}: {exc}") from None
    if not isinstance(constraints, dict):
        raise GraphError(f"planConstraints must be a JSON object, got {constraints!r}")
    method = constraints.get("method")
    if method is None:
        return DEFAULT_METHODS
    method = str(method).upper()
    if method == "ALL":
        return MATMUL_METHODS
    if method not in MATMUL_METHODS:
        raise GraphError(f"planConstraints method must be one of {', '.join(MATMUL_METHODS)} or all, got {method!r}")
    return (method,)


def plan_matmul(
    graph: Graph,
    m: int,
    k: int,
    n: int,
    in_type: Type,
    partials_type: Type = FLOAT,
    out_type: Type | None = None,
    conv_kernel: int = 1,
    methods: tuple[str, ...] = DEFAULT_METHODS,
) -> MatMulPlan:
    """The cheapest method and grid for this shape on the graph's tiles, by the vertex cycle model."""
    target = graph.target
    out_type = out_type or in_type
    tiles = graph.num_tiles
    grid, estimate, ocpg, icpg, method = _best_grid(
        target.arch.name, target.bytesPerTile, tiles, m, k, n, in_type, partials_type, out_type, conv_kernel, methods
    )
    pm, pn, pk = grid
    cell = np.arange(pm * pn * pk, dtype=np.int64)
    im, jn, ik = cell // (pn * pk), (cell // pk) % pn, cell % pk
    # consecutive tiles from the first, the output-channel split innermost and the input-channel
    # split outermost, so that the two tiles of a super tile read the same activations
    # (lib/poplin/Convolution.cpp, linearizeConvIndices and linearizeTileIndices, startTile 0)
    cell_tiles = (ik * pm + im) * pn + jn
    return MatMulPlan(
        m,
        k,
        n,
        *grid,
        in_type,
        partials_type,
        out_type,
        np.asarray(graph.tile(cell_tiles), dtype=np.int64),
        dict(estimate),
        icpg,
        ocpg,
        method,
    )


@functools.lru_cache(maxsize=4096)
def _best_grid(
    arch_name: str,
    bytes_per_tile: int,
    tiles: int,
    m: int,
    k: int,
    n: int,
    in_type: Type,
    partials_type: Type,
    out_type: Type,
    conv_kernel: int,
    methods: tuple[str, ...] = ("AMP",),
):
    from ..target import architecture

    arch = architecture(arch_name)
    icpg = amp.weights_per_conv_unit(in_type.name)
    pm_c = _minimal_splits(max(1, m), tiles)
    cands = []  # per method: pm, pn, pk, out-channel grain, in-channel grain, method, compute

    def grid(n_grain: int, k_grain: int, k_split: bool):
        pn_c = _minimal_splits(max(1, -(-n // n_grain)), tiles)
        pk_c = _minimal_splits(max(1, -(-k // k_grain)), tiles) if k_split else np.array([1])
        g = np.stack([x.reshape(-1) for x in np.meshgrid(pm_c, pn_c, pk_c, indexing="ij")])
        g = g[:, g[0] * g[1] * g[2] <= tiles]
        mb = -(-m // g[0])
        nb = np.minimum(n, _ceil(_ceil(n, n_grain), g[1]) * n_grain)
        kb = np.minimum(k, _ceil(_ceil(k, k_grain), g[2]) * k_grain)
        return g, mb, nb, kb

    if "AMP" in methods:
        # poplin splits the batch by rows and the channels by whole AMP groups: the number of splits of
        # the input (output) channels is at most their groups of inChansPerGroup (partialChansPerGroup)
        # (lib/poplin/ConvModel.cpp, constructModel: totalInChanSplit <= numInChanGrains, the grain sizes
        # of getInChanGrainSizes and getOutChanGrainSizes)
        for ocpg in partial_chans_candidates(arch, in_type, partials_type, conv_kernel):
            g, mb, nb, kb = grid(ocpg, icpg, True)
            # the vertex's own estimate (codelets/poplin.py, ported from poplibs' PerformanceEstimation.hpp)
            if conv_kernel > 1:
                compute = amp.conv_partial_nx1_cycles(
                    arch, in_type.name, partials_type.name, mb, -(-kb // icpg), -(-nb // ocpg), conv_kernel
                )
            else:
                compute = amp.conv_partial_1x1_cycles(
                    arch, in_type.name, partials_type.name, mb, -(-kb // icpg), -(-nb // ocpg), out_chans_per_group=ocpg
                )
            cands.append((g, ocpg, icpg, 0, np.broadcast_to(compute, g.shape[1:])))
    if "HMAC" in methods and conv_kernel == 1:
        # input channels in groups of 2 halves or 1 float; poplin enumerates every inChansPerGroup,
        # and the cheapest for a tile's block is one group of all of it (fewest loop overheads),
        # output channels in groups of 1 (float partials) or 2 (ConvVertexType.cpp,
        # getConvVertexHMACCandidates; the planner's cost: ConvModel.cpp, addPartialCalcCycleEstimate)
        k_grain = 1 if in_type.name == "float" else 2
        ocpg = amp.hmac_out_chans_per_group(partials_type.name)
        g, mb, nb, kb = grid(ocpg, k_grain, True)
        compute = amp.conv_partial_hmac_cycles(in_type.name, partials_type.name, mb, kb, ocpg, 1, 1, -(-nb // ocpg))
        cands.append((g, ocpg, k_grain, 1, compute))
    if "OUTER_PRODUCT" in methods and conv_kernel == 1 and k == 1:
        # one input channel: poplin offers an outer product, its partials in the input type, the
        # output positions of a tile split over the workers (ConvVertexType.cpp,
        # getConvVertexOuterProductCandidates; ConvModel.cpp, addPartialCalcCycleEstimate:
        # getOuterProductCycleEstimate of ceil(tileOutWidth / numContexts) positions, times the contexts)
        ocpg = amp.outer_product_chans_per_group(arch, in_type.name)
        g, mb, nb, kb = grid(ocpg, 1, False)
        compute = WORKERS * amp.outer_product_cycles(in_type.name, -(-mb // WORKERS), nb, ocpg)
        cands.append((g, ocpg, 1, 2, compute))
    if not cands:
        raise GraphError(
            f"no plan by {', '.join(methods)} for a [{m}, {k}] x [{k}, {n}] product: poplin offers "
            "OUTER_PRODUCT for one input channel only, and HMAC for 1x1 kernels"
        )
    pm = np.concatenate([c[0][0] for c in cands])
    pn = np.concatenate([c[0][1] for c in cands])
    pk = np.concatenate([c[0][2] for c in cands])
    og = np.concatenate([np.full(c[0].shape[1], c[1]) for c in cands])
    kg = np.concatenate([np.full(c[0].shape[1], c[2]) for c in cands])
    method = np.concatenate([np.full(c[0].shape[1], c[3]) for c in cands])
    compute = np.concatenate([np.broadcast_to(np.asarray(c[4], dtype=np.int64), c[0].shape[1:]) for c in cands])
    mb = -(-m // pm)
    nb = np.minimum(n, _ceil(_ceil(n, og), pn) * og)
    kb = np.minimum(k, _ceil(_ceil(k, kg), pk) * kg)
    costs = _pass_costs(arch, k, mb, nb, kb, pk, method, compute, in_type, partials_type, out_type, conv_kernel)
    total, memory = costs["total"], costs["memory"]
    exchange, red_exchange, red_compute = costs["exchange"], costs["reduceExchange"], costs["reduceCompute"]
    # poplin's memory bound: temporary memory per tile at most availableMemoryProportion (default 0.6)
    # of the tile (ConvOptions.hpp availableMemoryProportion; ConvPlan.cpp, the planner's maxBytesPerTile)
    fits = memory <= AVAILABLE_MEMORY_PROPORTION * bytes_per_tile
    if fits.any():
        total = np.where(fits, total, np.iinfo(np.int64).max)
    # the cheapest in cycles; among equals the fewest tiles, then poplin's candidate order
    best = int(np.lexsort((og, method, pm * pn * pk, total))[0])
    estimate = (
        ("compute", int(compute[best])),
        ("exchange", int(exchange[best])),
        ("reduceExchange", int(red_exchange[best])),
        ("reduceCompute", int(red_compute[best])),
        ("total", int(total[best])),
        ("memory", int(memory[best])),
    )
    return (
        (int(pm[best]), int(pn[best]), int(pk[best])),
        estimate,
        int(og[best]),
        int(kg[best]),
        MATMUL_METHODS[int(method[best])],
    )


def _pass_costs(
    arch,
    k: int,
    mb: np.ndarray,
    nb: np.ndarray,
    kb: np.ndarray,
    pk: np.ndarray,
    method: np.ndarray,
    compute: np.ndarray,
    in_type: Type,
    partials_type: Type,
    out_type: Type,
    conv_kernel: int = 1,
) -> dict:
    """Estimated cycles and temporary bytes per tile of candidate grids of one matrix product: its
    vertices' `compute`, the exchange of each tile's blocks of mb x kb and kb x nb, the stages of
    the reduction of a k split in pk parts, and the cast of unreduced float partials; `method` is
    the index of each grid's method in MATMUL_METHODS."""
    from ..codelets.popops import cast_supervisor_cycles

    icpg = amp.weights_per_conv_unit(in_type.name)
    e = in_type.size
    recv = (mb * kb + kb * nb) * e * conv_kernel
    exchange = arch.exchange_setup_cycles + recv // arch.exchange_bytes_per_cycle
    reduce_needed = pk > 1
    red_exchange = np.zeros_like(pk)
    red_compute = np.zeros_like(pk)
    red_memory = np.zeros_like(pk)
    syncs = np.full_like(pk, arch.min_sync_delay)
    for depth in np.unique(pk[reduce_needed]):
        # each reduction stage takes D partials to d: groups of D/d tiles, each tile summing D/d
        # partials of its slice of the block (the stages of poplin's multi-stage reduction)
        sel = pk == depth
        chain = [int(depth)] + reduce_stage_depths(int(depth)) + [1]
        for big, small in itertools.pairwise(chain):
            parts = -(-big // small)
            slice_elems = -(-(mb[sel] * nb[sel] * small) // big)
            stage_recv = (parts - 1) * slice_elems * partials_type.size
            red_exchange[sel] += arch.exchange_setup_cycles + stage_recv // arch.exchange_bytes_per_cycle
            red_compute[sel] += amp.reduce_add_cycles(
                slice_elems,
                parts,
                (out_type if small == 1 else partials_type).name == "float",
                partials_type.name == "float",
                arch.data_path_width,
            )
            red_memory[sel] = np.maximum(red_memory[sel], stage_recv)
            syncs[sel] += arch.min_sync_delay
    # float partials of an unsplit k are cast to the output type (MatMulPlan.vertex_out_type): AMP
    # vertices write the output type when k fits one conv unit, HMAC always writes partials, the
    # outer product always writes its input type
    narrower = out_type.size < partials_type.size
    cast_needed = (pk == 1) & narrower & (((method == 0) & (k > icpg)) | (method == 1))
    cast = np.where(
        cast_needed,
        cast_supervisor_cycles(partials_type.name, out_type.name, mb * nb, arch.data_path_width) + arch.min_sync_delay,
        0,
    )
    total = compute + exchange + red_exchange + red_compute + syncs + cast
    part_size = np.where(method == 2, in_type.size, partials_type.size)
    memory = recv + mb * nb * part_size + red_memory
    return {
        "compute": compute,
        "exchange": exchange,
        "reduceExchange": red_exchange,
        "reduceCompute": red_compute,
        "total": total,
        "memory": memory,
    }


def _blocked_view(
    graph: Graph, var_tensor: Tensor, rows: int, cols: int, rb: int, cb: int
) -> tuple[Tensor, np.ndarray]:
    """A [rows, cols] view of a variable stored in blocks of rb x cb; returns (view, block offsets)."""
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
    idx = offsets[block] + (r % rb)[:, None] * widths[bj][None, :] + (c % cb)[None, :]
    var = np.full(idx.size, int(var_tensor.vars[0]), dtype=np.int64)
    view = Tensor.from_elements(graph.state, var_tensor.dtype, (rows, cols), var, idx.reshape(-1))
    return view, offsets


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


def _operand_layout(plan: MatMulPlan, side: str) -> _OperandLayout:
    """The layout of the left ("lhs", acts) or right ("rhs", weights) operand of a plan.

    A block read by several tiles is spread over them in whole channel groups, at least 128 bytes
    (acts) or 256 bytes (weights) a tile (lib/poplin/Convolution.cpp, mapActivationsOrWeights:
    TensorUseTracker::mapTensorsByUse with grainSize and minBytesPerTile)."""
    pm, pn, pk = plan.pm, plan.pn, plan.pk
    e = plan.in_type.size
    if side == "lhs":
        im, ik, jn = np.meshgrid(np.arange(pm), np.arange(pk), np.arange(pn), indexing="ij")
        users = plan.tiles[((im * pn + jn) * pk + ik).reshape(pm * pk, pn)]
        return _OperandLayout(plan.m, plan.k, plan.mb, plan.kb, users, plan.k_grain, -(-128 // e), plan.k_grain)
    ik, jn, im = np.meshgrid(np.arange(pk), np.arange(pn), np.arange(pm), indexing="ij")
    users = plan.tiles[((im * pn + jn) * pk + ik).reshape(pk * pn, pm)]
    return _OperandLayout(
        plan.k, plan.n, plan.kb, plan.nb, users, plan.k_grain * plan.n_grain, -(-256 // e), plan.k_grain
    )


def _place_operand(graph: Graph, var: Tensor, layout: _OperandLayout) -> Tensor:
    """Map a [rows * cols] variable in `layout`; returns its [rows, cols] view."""
    view, offsets = _blocked_view(graph, var, layout.rows, layout.cols, layout.rb, layout.cb)
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


def createMatMulInputLHS(
    graph: Graph, dtype, aShape, bShape, debugPrefix: str = "matmul/lhs", options: dict | None = None
) -> Tensor:
    """A left operand laid out for the planned matmul: each (rows, k) block spread over the tiles that use it."""
    dtype = as_type(dtype)
    m, k = aShape
    _, n = bShape
    plan = plan_matmul(graph, m, k, n, dtype, methods=plan_methods(options))
    return _place_operand(graph, graph.addVariable(dtype, [m * k], debugPrefix), _operand_layout(plan, "lhs"))


def createMatMulInputRHS(
    graph: Graph, dtype, aShape, bShape, debugPrefix: str = "matmul/rhs", options: dict | None = None
) -> Tensor:
    """A right operand laid out for the planned matmul: each (k, cols) block spread over the tiles that use it."""
    dtype = as_type(dtype)
    m, k = aShape
    _, n = bShape
    plan = plan_matmul(graph, m, k, n, dtype, methods=plan_methods(options))
    return _place_operand(graph, graph.addVariable(dtype, [k * n], debugPrefix), _operand_layout(plan, "rhs"))


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
    options = options or {}
    partials = as_type(options.get("partialsType", "float"))
    out_type = as_type(outputType) if outputType is not None else A.dtype
    m, k = A.shape
    n = B.shape[1]
    plan = plan_matmul(graph, m, k, n, A.dtype, partials, out_type, methods=plan_methods(options))
    # the weight-update pass always rearranges its operands (lib/poplin/Convolution.cpp,
    # inputRearrangementIsExpensive and weightRearrangementIsExpensive)
    always = str(options.get("fullyConnectedPass", "NONE")).upper() == "TRAINING_WU"
    A = _arrange_operand(graph, A, _operand_layout(plan, "lhs"), plan.pn, always, prog, f"{debugPrefix}/actsRearranged")
    B = _arrange_operand(
        graph, B, _operand_layout(plan, "rhs"), plan.pm, always, prog, f"{debugPrefix}/weightsRearranged"
    )
    return _build_matmul(graph, A, B, plan, prog, debugPrefix)


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
    from ._util import merge_regions

    mb_, mvar, mstart, mlen = merge_regions(block[piece_row], var, start, plen)
    in_place = False
    if mb_.size == bi.size:
        from ..compiler.regions import split_by_mapping

        prow, ptile, _, _ = split_by_mapping(graph.state, mvar, mstart, mlen)
        in_place = bool(np.all((layout.users[mb_[prow]] == ptile[:, None]).any(axis=1)))
    if in_place or (grouped and not always and dests <= MAX_BROADCAST_DESTS):
        return T
    src = T
    if not grouped:
        src = _regroup(graph, T, layout.channels, prog, f"{name}/regroup")
    view = _place_operand(graph, graph.addVariable(T.dtype, [rows * cols], name), layout)
    prog.add(Copy(src, view))
    return view


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


def _reduce_slices(block: np.ndarray, size: np.ndarray, base: np.ndarray, p_off: np.ndarray, tiles: np.ndarray):
    """Vertices summing the partial blocks of cells that share an output block.

    Cells are given by their output block id, block size, the block's offset in the output
    variable, their partial block's offset and their tile. Each cell reduces one slice of its
    block, split over up to six worker vertices. Returns the output mapping (starts, ends,
    tiles) and the vertices: tiles, partial regions (vertex, start, length), output regions,
    outputs and partials per vertex.
    """
    order = np.lexsort((np.arange(block.size), block))
    block, size, base, p_off, tiles = block[order], size[order], base[order], p_off[order], tiles[order]
    first = np.r_[True, block[1:] != block[:-1]]
    start_of = np.maximum.accumulate(np.where(first, np.arange(block.size), 0))
    position = np.arange(block.size) - start_of
    parts = np.bincount(np.cumsum(first) - 1)[np.cumsum(first) - 1]
    ss = -(-size // parts)
    s0 = np.minimum(position * ss, size)
    s1 = np.minimum(s0 + ss, size)
    keep = s1 > s0
    map_s, map_e, map_t = base[keep] + s0[keep], base[keep] + s1[keep], tiles[keep]
    cell = np.flatnonzero(keep)
    length = s1[cell] - s0[cell]
    workers = np.ones_like(length)  # one ReduceAdd supervisor vertex per slice, as poplin creates
    step = -(-length // workers)
    count = -(-length // step)
    v_cell = np.repeat(cell, count)
    j = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    w0 = s0[v_cell] + j * np.repeat(step, count)
    w1 = np.minimum(s1[v_cell], w0 + np.repeat(step, count))
    n_vertices = v_cell.size
    v_parts = parts[v_cell]
    rows_v = np.repeat(np.arange(n_vertices), v_parts)
    member = np.repeat(start_of[v_cell], v_parts) + (
        np.arange(int(v_parts.sum())) - np.repeat(np.cumsum(v_parts) - v_parts, v_parts)
    )
    part_start = p_off[member] + np.repeat(w0, v_parts)
    part_len = np.repeat(w1 - w0, v_parts)
    return (
        (map_s, map_e, map_t),
        tiles[v_cell],
        (rows_v, part_start, part_len),
        (np.arange(n_vertices), base[v_cell] + w0, w1 - w0),
        w1 - w0,
        v_parts,
    )


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
    rows_b = k1 - k0
    vb = np.repeat(v, rows_b)
    row_b = np.repeat(k0, rows_b) + (np.arange(int(rows_b.sum())) - np.repeat(np.cumsum(rows_b) - rows_b, rows_b))
    rb, var_b, st_b, ln_b = regions_at(B, row_b * n + np.repeat(c0, rows_b), np.repeat(c1 - c0, rows_b))
    block_sizes = (r1 - r0) * (c1 - c0)
    reduce = plan.needs_reduction()
    vertex_type = plan.vertex_out_type()
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
        add_vertices(
            graph,
            cs,
            lib.conv_partial_1x1(plan.in_type, vertex_type),
            tiles,
            fields_,
            work={
                "out_elems": r1 - r0,
                "in_groups": -(-(k1 - k0) // icpg),
                "out_groups": -(-(c1 - c0) // ocpg),
                "out_chans_per_group": ocpg,
                **({"conv_units": plan.conv_units} if plan.conv_units else {}),
            },
        )
    elif plan.method == "HMAC":
        # out is a Vector<Output<Vector<AccumType, COMPACT_PTR, 8>>>: any memory
        # (lib/poplin/codelets/ConvPartialHorizontalMac.cpp); one input group of the tile's channels
        add_vertices(
            graph,
            cs,
            f"poplin::ConvPartialHorizontalMac<{plan.in_type},{vertex_type},true>",
            tiles,
            fields_,
            work={
                "out_elems": r1 - r0,
                "in_chans": k1 - k0,
                "out_chans": np.full(v.size, ocpg),
                "kernel": np.ones(v.size, dtype=np.int64),
                "in_groups": np.ones(v.size, dtype=np.int64),
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
            arr[off : off + (q1 - q0) * (s1 - s0)] = (a[q0:q1, t0:t1] @ b[t0:t1, s0:s1]).reshape(-1)

    state.compute_sets[cs.id].functional.append(convolve)
    prog.add(Execute(cs))
    if not reduce:
        view, _ = _blocked_view(graph, partials, m, n, mb, nb)
        if vertex_type == plan.out_type:
            return view
        # float partials of an unsplit k are cast to the output type on their tiles, in a compute set
        # of their own (lib/poplin/Convolution.cpp, convolutionImpl: the "Cast" compute set)
        from .popops import cast

        out = cast(graph, view, plan.out_type, prog, f"{name}/Conv_1")
        prog.add(WriteUndef(partials))
        return out
    # C blocked by (im, jn); the pk partial blocks of each output block are summed in the stages of
    # poplin's multi-stage reduction, each stage a compute set whose tiles each sum one slice
    out = graph.addVariable(plan.out_type, [m * n], f"{name}/out")
    ovar = int(out.vars[0])
    view, c_off = _blocked_view(graph, out, m, n, mb, nb)
    from .popops import graph_tiles_inverse

    c_block = im[cells] * pn + jn[cells]
    c_size, c_poff, c_tiles, c_var = block_sizes, p_off, tiles, pvar
    depths = reduce_stage_depths(pk)
    cs2 = None
    pending: list[Tensor] = []
    for stage, depth in enumerate(depths + [1]):
        # position of each cell among the cells of its block, then its group of this stage
        order = np.lexsort((np.arange(c_block.size), c_block))
        first = np.r_[True, c_block[order][1:] != c_block[order][:-1]]
        start = np.maximum.accumulate(np.where(first, np.arange(order.size), 0))
        counts = np.bincount(np.cumsum(first) - 1)[np.cumsum(first) - 1]
        position = np.empty_like(order)
        position[order] = np.arange(order.size) - start
        members = np.empty_like(order)
        members[order] = counts
        final = depth == 1
        key = c_block if final else c_block * depth + position * depth // members
        if final:
            target_var, t_type, base_of = ovar, plan.out_type, c_off[c_block]
        else:
            keys, key_index = np.unique(key, return_inverse=True)
            key_sizes = np.zeros(keys.size, dtype=np.int64)
            key_sizes[key_index] = c_size
            key_base = np.concatenate(([0], np.cumsum(key_sizes)[:-1]))
            inter = graph.addVariable(plan.partials_type, [int(key_sizes.sum())], f"{name}/partials{stage + 1}")
            target_var, t_type, base_of = int(inter.vars[0]), plan.partials_type, key_base[key_index]
        (map_s, map_e, map_t), red_tiles, (pv, ps, pl), (ov, os_, ol), outputs, nparts = _reduce_slices(
            key, c_size, base_of, c_poff, c_tiles
        )
        graph.setTileMappingIntervals(out if final else inter, map_s, map_e, graph_tiles_inverse(graph, map_t))
        label = "Reduce" if not depths else f"ReduceStage{stage}" if not final else "ReduceFinalStage"
        cs2 = graph.addComputeSet(f"{name}/Conv_1/{label}")
        add_vertices(
            graph,
            cs2,
            f"poplin::ReduceAdd<{t_type},{plan.partials_type}>",
            red_tiles,
            {"partials": (pv, np.full(pv.size, c_var), ps, pl), "out": (ov, np.full(ov.size, target_var), os_, ol)},
            work={"outputs": outputs, "partials": nparts},
        )
        prog.add(Execute(cs2))
        for done in pending:
            prog.add(WriteUndef(done))
        pending = []
        if not final:
            pending = [inter]
            # the next stage's cells: one per group, its partial block in the intermediate variable,
            # placed on the tile of the group's first cell
            head = np.unique(key_index, return_index=True)[1]
            c_block, c_size, c_poff, c_tiles, c_var = keys // depth, key_sizes, key_base, c_tiles[head], target_var

    def reduce_partials(data):
        arr = data.array(pvar)
        result = np.zeros((m, n))
        for q0, q1, s0, s1, _t0, _t1, off in blocks:
            result[q0:q1, s0:s1] += arr[off : off + (q1 - q0) * (s1 - s0)].reshape(q1 - q0, s1 - s0)
        data.write(view, result)

    state.compute_sets[cs2.id].functional.append(reduce_partials)
    prog.add(WriteUndef(partials))
    return view


# -- convolution --------------------------------------------------------------------------------


@dataclass
class ConvParams:
    """A 2-D convolution: input [batch, inChans, height, width], weights [outChans, inChans, kh, kw]."""

    batch: int
    in_chans: int
    out_chans: int
    field: tuple[int, int]
    kernel: tuple[int, int]
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int] = (0, 0)
    dtype: Type = HALF

    @property
    def out_field(self) -> tuple[int, int]:
        return tuple(
            (f + 2 * p - kk) // s + 1 for f, p, kk, s in zip(self.field, self.padding, self.kernel, self.stride)
        )

    @property
    def macs(self) -> int:
        oh, ow = self.out_field
        return self.batch * oh * ow * self.out_chans * self.in_chans * self.kernel[0] * self.kernel[1]


def createInput(graph: Graph, params: ConvParams, debugPrefix: str = "conv/in") -> Tensor:
    """An input activation tensor [batch, inChans, h, w], rows spread over the tiles."""
    from ._util import map_linearly

    b, c = params.batch, params.in_chans
    h, w = params.field
    t = graph.addVariable(params.dtype, [b, c, h, w], debugPrefix)
    map_linearly(graph, t, grain=w, min_per_tile=w)
    return t


def createWeights(graph: Graph, params: ConvParams, debugPrefix: str = "conv/weights") -> Tensor:
    """Weights [outChans, inChans, kh, kw], spread over the tiles."""
    from ._util import map_linearly

    kh, kw = params.kernel
    t = graph.addVariable(params.dtype, [params.out_chans, params.in_chans, kh, kw], debugPrefix)
    map_linearly(graph, t, grain=params.in_chans * kh * kw, min_per_tile=params.in_chans * kh * kw)
    return t


@poplibs_op("Convolution")
def convolution(
    graph: Graph,
    inp: Tensor,
    weights: Tensor,
    params: ConvParams,
    prog: Sequence,
    debugPrefix: str = "conv",
    options: dict | None = None,
) -> Tensor:
    """A 2-D convolution (poplin::convolution): partial sums on the AMP units, then reduced."""
    require_codelets(graph, "poplin")
    b, c, o = params.batch, params.in_chans, params.out_chans
    h, w = params.field
    kh, kw = params.kernel
    sh, sw = params.stride
    ph, pw = params.padding
    oh, ow = params.out_field
    if tuple(inp.shape) != (b, c, h, w) or tuple(weights.shape) != (o, c, kh, kw):
        raise GraphError(
            f"convolution expects input {[b, c, h, w]} and weights {[o, c, kh, kw]}, got "
            f"{list(inp.shape)} and {list(weights.shape)}"
        )
    if oh <= 0 or ow <= 0:
        raise GraphError(f"convolution output field {oh}x{ow} is empty; check kernel, stride and padding")
    options = options or {}
    partials_type = as_type(options.get("partialsType", "float"))
    positions = b * oh
    plan = plan_matmul(
        graph, positions * ow, c, o, params.dtype, partials_type, params.dtype, conv_kernel=kh * kw, methods=("AMP",)
    )
    # keep whole output rows in a block: split positions (b, oh rows) instead of single pixels
    pm = max(1, min(positions, plan.pm))
    pn, pk = plan.pn, max(1, min(c, plan.pk))
    count = pm * pn * pk
    cell = np.arange(count, dtype=np.int64)
    # poplin's tile order (lib/poplin/Convolution.cpp, linearizeConvIndices): input-channel split
    # outermost, output channels innermost, from the first tile
    linear = ((cell % pk) * pm + cell // (pn * pk)) * pn + (cell // pk) % pn
    tiles_all = np.asarray(graph.tile(linear), dtype=np.int64)
    rows_per = -(-positions // pm)
    o_per = -(-o // pn)
    c_per = -(-c // pk)
    state = graph.state
    small_channels = c < 4
    type_name = (
        f"poplin::ConvPartialHorizontalMac<{params.dtype},{partials_type},true>"
        if small_channels
        else (
            lib.conv_partial_1x1(params.dtype, partials_type)
            if kh * kw == 1
            else f"poplin::ConvPartialnx1<{params.dtype},{partials_type},true,false>"
        )
    )
    cells = []
    for im in range(pm):
        p0, p1 = im * rows_per, min(positions, (im + 1) * rows_per)
        for jn in range(pn):
            o0, o1 = jn * o_per, min(o, (jn + 1) * o_per)
            for ik in range(pk):
                k0, k1 = ik * c_per, min(c, (ik + 1) * c_per)
                if p1 > p0 and o1 > o0 and k1 > k0:
                    cells.append((im, jn, ik, p0, p1, o0, o1, k0, k1, int(tiles_all[(im * pn + jn) * pk + ik])))
    sizes = np.array([(x[4] - x[3]) * ow * (x[6] - x[5]) for x in cells], dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    partials = graph.addVariable(partials_type, [int(sizes.sum())], f"{debugPrefix}/partials")
    pvar = int(partials.vars[0])
    state.vars[pvar].interleaved = True  # the AMP vertices' out field (see _build_matmul)
    tiles = np.array([x[9] for x in cells], dtype=np.int64)
    state.set_mapping(pvar, offsets, offsets + sizes, tiles)
    icpg, ocpg = plan.k_grain, plan.n_grain
    in_rows, w_rows, work_out, work_in, work_og, macs = [], [], [], [], [], []
    for vi, (_im, _jn, _ik, p0, p1, o0, o1, k0, k1, _tile) in enumerate(cells):
        for pos in range(p0, p1):
            bb, y = divmod(pos, oh)
            ih0 = max(0, y * sh - ph)
            ih1 = min(h, y * sh - ph + kh)
            if ih1 <= ih0:
                continue
            for cc in range(k0, k1):
                in_rows.append((vi, ((bb * c + cc) * h + ih0) * w, (ih1 - ih0) * w))
        for oo in range(o0, o1):
            w_rows.append((vi, (oo * c + k0) * kh * kw, (k1 - k0) * kh * kw))
        work_out.append((p1 - p0) * ow)
        work_in.append(-(-(k1 - k0) // icpg))
        work_og.append(-(-(o1 - o0) // ocpg))
        macs.append((p1 - p0) * ow * (o1 - o0) * (k1 - k0) * kh * kw)
    ir = np.array(in_rows, dtype=np.int64).reshape(-1, 3)
    wr = np.array(w_rows, dtype=np.int64).reshape(-1, 3)
    ri, vi_, si, li = regions_at(inp, ir[:, 1], ir[:, 2])
    rw, vw, sw_, lw = regions_at(weights, wr[:, 1], wr[:, 2])
    v = np.arange(len(cells), dtype=np.int64)
    cs = graph.addComputeSet(f"{debugPrefix}/Conv_1/Convolve")
    add_vertices(
        graph,
        cs,
        type_name,
        tiles,
        {
            "in": (ir[ri, 0], vi_, si, li),
            "weights": (wr[rw, 0], vw, sw_, lw),
            "out": (v, np.full(v.size, pvar), offsets, sizes),
        },
        work={
            "out_elems": np.array(work_out),
            "in_groups": np.array(work_in),
            "out_groups": np.array(work_og),
            "out_chans_per_group": ocpg,
            "macs": np.array(macs),
            "kernel": kh * kw,
            "in_chans": c_per,
            "out_chans": o_per,
        },
    )
    # output: blocks of (o range x positions x ow), summed over the input-channel split
    out = graph.addVariable(params.dtype, [b * o * oh * ow], f"{debugPrefix}/out")
    ovar = int(out.vars[0])
    groups: dict[tuple[int, int], list[int]] = {}
    for j, cell in enumerate(cells):
        groups.setdefault((cell[0], cell[1]), []).append(j)
    o_base = {}
    pos_count = 0
    for key, members in groups.items():
        o_base[key] = pos_count
        pos_count += int(sizes[members[0]])
    map_s, map_e, map_t, part_rows, out_rows, outputs, nparts, red_tiles = [], [], [], [], [], [], [], []
    vertex = 0
    for key, members in groups.items():
        size = int(sizes[members[0]])
        base = o_base[key]
        parts = len(members)
        slice_size = -(-size // parts)
        for position, j in enumerate(members):
            s0, s1 = position * slice_size, min(size, (position + 1) * slice_size)
            if s1 <= s0:
                continue
            map_s.append(base + s0)
            map_e.append(base + s1)
            map_t.append(int(tiles[j]))
            workers = 1  # one ReduceAdd supervisor vertex per slice
            step = -(-(s1 - s0) // workers)
            for w0 in range(s0, s1, step):
                w1 = min(s1, w0 + step)
                for other in members:
                    part_rows.append((vertex, int(offsets[other]) + w0, w1 - w0))
                out_rows.append((vertex, base + w0, w1 - w0))
                red_tiles.append(int(tiles[j]))
                outputs.append(w1 - w0)
                nparts.append(parts)
                vertex += 1
    from .popops import graph_tiles_inverse

    graph.setTileMappingIntervals(out, np.array(map_s), np.array(map_e), graph_tiles_inverse(graph, np.array(map_t)))
    pr = np.array(part_rows, dtype=np.int64).reshape(-1, 3)
    orow = np.array(out_rows, dtype=np.int64).reshape(-1, 3)
    cs2 = graph.addComputeSet(f"{debugPrefix}/Conv_1/Reduce")
    add_vertices(
        graph,
        cs2,
        f"poplin::ReduceAdd<{params.dtype},{partials_type}>",
        red_tiles,
        {
            "partials": (pr[:, 0], np.full(pr.shape[0], pvar), pr[:, 1], pr[:, 2]),
            "out": (orow[:, 0], np.full(orow.shape[0], ovar), orow[:, 1], orow[:, 2]),
        },
        work={"outputs": np.array(outputs), "partials": np.array(nparts)},
    )
    # the [b, o, oh, ow] view of the blocked output
    idx = np.zeros((b, o, oh, ow), dtype=np.int64)
    for (im, jn), members in groups.items():
        cell = cells[members[0]]
        p0, p1, o0, o1 = cell[3], cell[4], cell[5], cell[6]
        base = o_base[(im, jn)]
        local = np.arange((o1 - o0) * (p1 - p0) * ow, dtype=np.int64).reshape(o1 - o0, p1 - p0, ow) + base
        for pos in range(p0, p1):
            bb, y = divmod(pos, oh)
            idx[bb, o0:o1, y, :] = local[:, pos - p0, :]
    view = Tensor.from_elements(state, params.dtype, (b, o, oh, ow), np.full(idx.size, ovar), idx.reshape(-1))
    cells_info = [(x[3], x[4], x[5], x[6], x[7], x[8], int(offsets[j])) for j, x in enumerate(cells)]

    def convolve(data):
        x = data.read(inp).astype(np.float64)
        wt = data.read(weights).astype(np.float64)
        xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
        arr = data.array(pvar)
        for p0, p1, o0, o1, k0, k1, off in cells_info:
            block = np.zeros((o1 - o0, p1 - p0, ow))
            for pos in range(p0, p1):
                bb, y = divmod(pos, oh)
                for i in range(kh):
                    for j in range(kw):
                        patch = xp[bb, k0:k1, y * sh + i, j : j + sw * ow : sw]
                        block[:, pos - p0, :] += wt[o0:o1, k0:k1, i, j] @ patch
            arr[off : off + block.size] = block.reshape(-1)

    def reduce_partials(data):
        arr = data.array(pvar)
        result = np.zeros(b * o * oh * ow)
        flat_view = idx.reshape(-1)
        target = np.zeros(out.numElements())
        for key, members in groups.items():
            size = int(sizes[members[0]])
            acc = np.zeros(size)
            for j in members:
                acc += arr[int(offsets[j]) : int(offsets[j]) + size]
            target[o_base[key] : o_base[key] + size] = acc
        result[:] = target[flat_view]
        data.write(view, result.reshape(b, o, oh, ow))

    state.compute_sets[cs.id].functional.append(convolve)
    state.compute_sets[cs2.id].functional.append(reduce_partials)
    prog.add(Execute(cs))
    prog.add(Execute(cs2))
    prog.add(WriteUndef(partials))
    return view


def estimate_matmul_cycles(graph: Graph, m: int, k: int, n: int, dtype="half") -> dict:  # pragma: no cover
    """The planner's own estimate of a matmul (for experiments)."""
    return plan_matmul(graph, m, k, n, as_type(dtype)).estimate


# -- fully-connected passes ---------------------------------------------------------------------


@poplibs_op("Transpose")
def transposeMatMulRHS(graph: Graph, W: Tensor, aShape, prog: Sequence, debugPrefix: str = "transpose") -> Tensor:
    """W^T [n, k] of a right operand W [k, n] made by createMatMulInputRHS(aShape, W.shape), laid
    out for the backward pass's plan, as poplin::fullyConnectedWeightTranspose makes it
    (lib/poplin/Convolution.cpp): the transposed weights are a new tensor created for the
    backward plan (createWeights(bwdPlan)), and Transpose2d vertices on the tiles of the forward
    blocks transpose each block's pieces of the backward blocks into it (addTransposeVertices,
    shared between the tile's workers); what lands on other tiles is exchanged after them."""
    require_codelets(graph, "popops")
    k, n = W.shape
    m = aShape[0]
    plan = plan_matmul(graph, m, k, n, W.dtype)
    if len(W.variable_ids()) != 1:
        raise GraphError("transposeMatMulRHS needs the tensor createMatMulInputRHS returned")
    wvar = int(W.vars[0])
    bwd = plan_matmul(graph, m, n, k, W.dtype)
    out = graph.addVariable(W.dtype, [k * n], f"{debugPrefix}/transposed")
    view = _place_operand(graph, out, _operand_layout(bwd, "rhs"))
    rb, cb = plan.kb, plan.nb
    heights = np.minimum(rb, k - np.arange(plan.pk) * rb).clip(min=0)
    widths = np.minimum(cb, n - np.arange(plan.pn) * cb).clip(min=0)
    sizes = np.outer(heights, widths).reshape(-1)
    offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    # a forward block's rows (k) are cut where the backward blocks' columns (k) are: each piece is
    # one matrix to transpose, whose rows land contiguous in one backward block
    cut = bwd.nb
    v_tile, v_src, v_len, v_rows, v_cols, v_mats, d_v, d_pos, d_len = [], [], [], [], [], [], [], [], []
    vertex = 0
    for ik in range(plan.pk):
        for jn in range(plan.pn):
            h, w = int(heights[ik]), int(widths[jn])
            if h == 0 or w == 0:
                continue
            r0 = ik * rb
            edges = np.unique(np.concatenate(([r0, r0 + h], np.arange(-(-r0 // cut) * cut, r0 + h, cut))))
            lo, hi = edges[:-1], edges[1:]
            parts = min(WORKERS, lo.size)
            share = -(-lo.size // parts)
            tile = plan.tiles[jn * plan.pk + ik]
            for first in range(0, lo.size, share):
                a, b = lo[first : first + share], hi[first : first + share]
                v_tile.append(tile)
                v_src.append(offsets[ik * plan.pn + jn] + (a[0] - r0) * w)
                v_len.append((b[-1] - a[0]) * w)
                v_rows.append(int((b - a).max()))
                v_cols.append(w)
                v_mats.append(a.size)
                # W^T[c, a:b] for each piece, row by row
                c = jn * cb + np.arange(w)
                d_pos.append(((c[None, :] * k) + a[:, None]).reshape(-1))
                d_len.append(np.repeat(b - a, w))
                d_v.append(np.full(a.size * w, vertex))
                vertex += 1
    dv = np.concatenate(d_v)
    row, dvar, dstart, dlen = regions_at(view, np.concatenate(d_pos), np.concatenate(d_len))
    cs = graph.addComputeSet(f"{debugPrefix}/Transpose")
    v = np.arange(vertex, dtype=np.int64)
    add_vertices(
        graph,
        cs,
        f"popops::Transpose2d<{W.dtype}>",
        np.asarray(v_tile, dtype=np.int64),
        {
            "src": (v, np.full(v.size, wvar), np.asarray(v_src, dtype=np.int64), np.asarray(v_len, dtype=np.int64)),
            "dst": (dv[row], dvar, dstart, dlen),
        },
        work={
            "rows": np.asarray(v_rows, dtype=np.int64),
            "cols": np.asarray(v_cols, dtype=np.int64),
            "matrices": np.asarray(v_mats, dtype=np.int64),
        },
    )

    def run(data):
        data.write(view, data.read(W).T)

    graph.state.compute_sets[cs.id].functional.append(run)
    prog.add(Execute(cs))
    return view


def matMulAcc(
    graph: Graph,
    C: Tensor,
    k: float,
    A: Tensor,
    B: Tensor,
    prog: Sequence,
    debugPrefix: str = "matMulAcc",
    options: dict | None = None,
) -> None:
    """C += k A B (poplin::matMulAcc): the product, then a scaled add into C."""
    from .popops import scaledAddTo

    product = matMul(graph, A, B, prog, debugPrefix, options)
    scaledAddTo(graph, C, product, k, prog, f"{debugPrefix}/AddTo")
