"""poplin: matrix multiplication and convolution on the accumulating matrix product units.

A matrix multiply C[m,n] = A[m,k] B[k,n] is planned like Poplibs plans a 1x1 convolution: the
output rows (m), output channels (n) and input channels (k) are split over a grid of
pm x pn x pk tiles. Each tile runs one ``poplin::ConvPartial1x1Out`` vertex on its blocks of A
and B, writing float partials (or the output type, when k is unsplit and fits one conv unit); when
k is split (pk > 1), ``poplin::ReduceAdd`` vertices sum the partials into C in poplin's stages,
and otherwise float partials are cast to the output type. The planner evaluates
every grid with the same cycle model the vertices use (compute, exchange, reduction) and
keeps the cheapest one that fits in tile memory. A plan constraint may ask for poplin's other
methods, ``ConvPartialHorizontalMac`` (HMAC) and ``OuterProduct`` vertices (plan_methods).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np

from .. import codelets as lib
from ..codelets import poplin as amp
from ..codelets.poplin import WORKERS
from ..compiler.regions import split_by_mapping
from ..errors import GraphError
from ..graph import Graph
from ..programs import Copy, Execute, Repeat, Sequence, WriteUndef
from ..tensor import Tensor, concat
from ..types import FLOAT, HALF, UNSIGNED_INT, Type, as_type
from . import rearrange
from ._util import (
    add_vertices,
    in_storage_order,
    linear_intervals,
    merge_regions,
    poplibs_op,
    regions_at,
    require_codelets,
    tile_pieces,
)

#: poplin's default availableMemoryProportion (lib/poplin/ConvOptions.hpp).
AVAILABLE_MEMORY_PROPORTION = 0.6

#: The parts of a plan's estimate (MatMulPlan.estimate), tile cycles and temporary bytes per tile.
ESTIMATE_KEYS = ("compute", "exchange", "reduceExchange", "reduceCompute", "transform", "total", "memory")


def memory_bound(options: dict | None, bytes_per_tile: int) -> float:
    """The temporary bytes per tile poplin's planner allows a product or convolution with these
    options: ``availableMemoryProportion`` (0.6 by default) of the tile's memory. A proportion of
    0 sets no bound, and the planner then takes the fewest cycles (lib/poplin/ConvPlan.cpp,
    runPlanner: no memory bound, then createPlan: minimizeMemory without a bound)."""
    value = (options or {}).get("availableMemoryProportion", AVAILABLE_MEMORY_PROPORTION)
    try:
        proportion = math.nan if isinstance(value, bool) or "_" in str(value) else float(value)
    except (TypeError, ValueError, OverflowError):
        proportion = math.nan
    if not math.isfinite(proportion * bytes_per_tile) or proportion < 0:
        raise GraphError(
            f"availableMemoryProportion must be a number of at least 0 whose share of the tile's memory is "
            f"finite, got {value!r}"
        )
    # poplin holds the bound as a whole number of bytes (popsolver::DataType)
    return math.inf if proportion == 0 else float(math.floor(proportion * bytes_per_tile))


def relaxed_bound(memory, bound: float, bytes_per_tile: int) -> float:
    """The bound poplin's planner chooses within for candidates needing `memory` temporary bytes a
    tile: `bound` if one fits it; else twice the bound, doubled again while none fits and the bound
    is below twice the tile's memory; no bound (inf) when none fits even then (ConvPlan.cpp,
    createPlan: minimizeCycles, then minimizeMemory). A bound below one byte, which doubling would
    never raise (poplin's loop does not end there), is dropped at once."""
    memory = np.asarray(memory)
    if (memory <= bound).any():
        return bound
    if bound < 1:
        return math.inf
    while True:
        bound *= 2
        if (memory <= bound).any():
            return bound
        if bound >= 2 * bytes_per_tile:
            return math.inf


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
    swapped: bool = False  # planned as C^T [n, m] = B^T A^T: m, k, n and the grid are that product's
    kernel_size: int = 1  # a convolution's kernel positions; 1 for a matrix product
    serial: int = 1  # poplin's outChanSplit.serial: n is computed in this many steps of n / serial columns
    hmac_group: int = 0  # HMAC input channels a vertex group; 0: a tile's channels in one group

    @property
    def mb(self) -> int:
        return _grain_block(self.m, self.m_grain, self.pm)

    @property
    def nb(self) -> int:
        return _grain_block(self.n, self.n_grain, self.pn)

    def step(self) -> MatMulPlan:
        """The plan of one step of a serial split: the product of n / serial columns."""
        return self if self.serial == 1 else dataclasses.replace(self, n=self.n // self.serial, serial=1)

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
        """What the AMP vertices write: the partials type, or the smaller output type when the kernel
        is 1x1, nothing is reduced and all of k fits one conv unit's weights
        (lib/poplin/ConvVertexType.cpp, getConvVertexAMPCandidates: inputChannelsPerConvGroup <=
        weightsPerConvUnit and a kernel of all ones; getConvTypes)."""
        if self.method == "OUTER_PRODUCT":
            return self.in_type
        if (
            self.method == "AMP"
            and self.pk == 1
            and self.kernel_size == 1
            and self.k <= amp.weights_per_conv_unit(self.in_type.name)
        ):
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
    rounding down or up, counting the messages a tile receives). The costs are single-precision
    floats, as poplin's are: in doubles the two roundings of 2,786 and 4,964 partials compare the
    other way."""
    stages = 3 if depth >= 125 else 2 if depth >= 16 else 1

    def plan(d: int, n: int) -> tuple[list[int], np.float32]:
        if n == 1:
            return [], np.float32(d)
        down = int(float(d) ** ((n - 1.0) / n))
        best = None
        for nxt in (down, down + 1):
            rest, cost = plan(nxt, n - 1)
            cost = np.float32(cost + np.float32(np.float32(d) / np.float32(nxt)))
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
    given = _plan_constraints(options).get("method")
    if given is None:
        return DEFAULT_METHODS
    method = given.upper() if isinstance(given, str) else None
    if method == "ALL":
        return MATMUL_METHODS
    if method not in MATMUL_METHODS:
        raise GraphError(f"planConstraints method must be one of {', '.join(MATMUL_METHODS)} or all, got {given!r}")
    return (method,)


def _plan_constraints(options: dict | None) -> dict:
    """poplin's ``planConstraints`` option as a dict (given as a JSON object or a dict)."""
    import json

    constraints = (options or {}).get("planConstraints")
    if constraints is None:
        return {}
    if isinstance(constraints, str):
        try:
            constraints = json.loads(constraints) if constraints.strip() else {}
        except json.JSONDecodeError as exc:
            raise GraphError(f"planConstraints must be a JSON object, got {constraints!r}: {exc}") from None
    if not isinstance(constraints, dict):
        raise GraphError(f"planConstraints must be a JSON object, got {constraints!r}")
    return constraints


def _transform_constraints(options: dict | None) -> dict:
    """The ``0.transform`` object of poplin's ``planConstraints`` option, empty when not given."""
    level = _plan_constraints(options).get("0", {})
    transform = level.get("transform", {}) if isinstance(level, dict) else None
    if not isinstance(transform, dict):
        raise GraphError(f"planConstraints 0.transform must be a JSON object, got {transform!r}")
    return transform


def plan_swap(options: dict | None) -> bool | None:
    """Whether a plan constraint swaps a lone product's operands: poplin's
    ``{"0": {"transform": {"swapOperands": true}}}`` (ConvPlan.cpp, getSwapOperandCandidates:
    the ``0.transform.swapOperands`` constraint); None when no constraint says."""
    value = _transform_constraints(options).get("swapOperands")
    if value is None or isinstance(value, bool):
        return value
    raise GraphError(f"planConstraints 0.transform.swapOperands must be true or false, got {value!r}")


def plan_matmul(
    graph: Graph,
    m: int,
    k: int,
    n: int,
    in_type: Type,
    partials_type: Type = FLOAT,
    out_type: Type | None = None,
    kernel: tuple[int, int] = (1, 1),
    methods: tuple[str, ...] = DEFAULT_METHODS,
    out_width: int = 1,
    swap: bool | None = None,
    fc_pass: str = "NONE",
    conv_input: tuple[int, ...] | None = None,
    bound: float | None = None,
) -> MatMulPlan:
    """The cheapest method and grid for this shape on the graph's tiles, by the vertex cycle model,
    within `bound` temporary bytes per tile (default: poplin's, memory_bound); a convolution's m
    counts output positions, in rows of `out_width`, and `kernel` is its kernel.

    A product is planned on its operands as given unless `swap` is set (plan_product). With `swap`
    True, it is planned as C^T = B^T A^T, and with `swap` False as given, each with the cost
    poplin's planner gives the copies that rearrange its operands and output for its
    fullyConnectedPass `fc_pass` (transform_cost; lib/poplin/ConvPlan.cpp,
    getSwapOperandCandidates and createPlan). A convolution's `conv_input` is (output height,
    input height, input width, strides, paddings before the field): a tile then receives the input
    rows and columns its outputs read (input_elements)."""
    target = graph.target
    out_type = out_type or in_type
    _check_product_fits(graph, m, k, n, in_type, out_type, kernel, conv_input is None)
    tiles = graph.num_tiles
    swapped = bool(swap)
    pm_size, pn_size = (n, m) if swapped else (m, n)
    grid, estimate, ocpg, icpg, method, serial = _best_grid(
        target.arch.name,
        target.bytesPerTile,
        tiles,
        pm_size,
        k,
        pn_size,
        in_type,
        partials_type,
        out_type,
        tuple(kernel),
        methods,
        out_width,
        swap,
        fc_pass,
        conv_input,
        bound,
    )
    m, n = pm_size, pn_size
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
        m_grain=out_width,
        swapped=swapped,
        kernel_size=int(kernel[0]) * int(kernel[1]),
        serial=serial,
    )


def _check_product_fits(graph: Graph, m, k, n, in_type: Type, out_type: Type, kernel, with_lhs: bool) -> None:
    """Refuse a product whose output or weights (or, for a matrix product, left operand) exceed
    all the graph's tiles, before the planner sizes any array by it, as Graph.addVariable refuses
    such a variable (GraphState.require_fits)."""
    kh, kw = (int(x) for x in kernel)
    m, k, n = int(m), int(k), int(n)
    operands = [
        ("output", [m, n], m * n * out_type.size),
        ("weights", [k * kh * kw, n], k * kh * kw * n * in_type.size),
    ]
    if with_lhs:
        operands.insert(0, ("left operand", [m, k], m * k * in_type.size))
    for what, shape, size in operands:
        graph.state.require_fits(f"the product's {what} of shape {shape}", size)


def product_vertex_cycles(
    arch, method: str, in_type: Type, partials_type: Type, mb, nb, kb, in_group, out_group, conv_units=None
) -> np.ndarray:
    """Tile cycles of the vertices of a matrix product's tile, as poplin's planner estimates them:
    mb rows, kb input channels in groups of `in_group` and nb output channels in groups of
    `out_group` (codelets/poplin.py: ConvPartial1x1Out on `conv_units`, ConvPartialHorizontalMac,
    and OuterProduct, of one input channel, with the rows split over the workers)."""
    mb = np.asarray(mb, dtype=np.int64)
    if method == "AMP":
        cycles = amp.conv_partial_1x1_cycles(
            arch,
            in_type.name,
            partials_type.name,
            mb,
            _ceil(kb, in_group),
            _ceil(nb, out_group),
            out_chans_per_group=out_group,
            conv_units=conv_units,
        )
    elif method == "HMAC":
        rows = np.ones((mb.size, 1), dtype=np.int64)  # a product's positions are one row
        cycles = amp.conv_partial_hmac_cycles(
            in_type.name,
            partials_type.name,
            rows,
            mb.reshape(-1, 1),
            np.minimum(kb, in_group),
            out_group,
            _ceil(kb, in_group),
            _ceil(nb, out_group),
            zero_elems=mb,
        )
    else:
        cycles = WORKERS * amp.outer_product_cycles(in_type.name, _ceil(mb, WORKERS), nb, out_group)
    return np.broadcast_to(np.asarray(cycles, dtype=np.int64), mb.shape)


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
    kernel: tuple[int, int],
    methods: tuple[str, ...] = ("AMP",),
    out_width: int = 1,
    swap: bool | None = None,
    fc_pass: str = "NONE",
    conv_input: tuple[int, ...] | None = None,
    bound: float | None = None,
):
    from ..target import architecture

    arch = architecture(arch_name)
    conv_kernel = kernel[0] * kernel[1]
    icpg = amp.weights_per_conv_unit(in_type.name)
    # a convolution's positions are split in whole output rows, as its cells are (_ConvGrid)
    m_rows = -(-m // out_width)
    pm_c = _minimal_splits(max(1, m_rows), tiles)

    def candidates(n_cols: int) -> dict:
        """Every grid of each method for the product of n_cols of the n columns, with its estimates."""
        cands = []  # per method: pm, pn, pk, out-channel grain, in-channel grain, method, compute

        def grid(n_grain: int, k_grain: int, k_split: bool):
            pn_c = _minimal_splits(max(1, -(-n_cols // n_grain)), tiles)
            pk_c = _minimal_splits(max(1, -(-k // k_grain)), tiles) if k_split else np.array([1])
            g = np.stack([x.reshape(-1) for x in np.meshgrid(pm_c, pn_c, pk_c, indexing="ij")])
            g = g[:, g[0] * g[1] * g[2] <= tiles]
            mb = np.minimum(m, -(-m_rows // g[0]) * out_width)
            nb = np.minimum(n_cols, _ceil(_ceil(n_cols, n_grain), g[1]) * n_grain)
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
                    # poplin's planner costs every kernel position over the tile's whole rows, padding
                    # or not (ConvModel.cpp, addPartialCalcCycleEstimate: getConvPartialnx1InnerLoopCycleEstimate)
                    rows = np.repeat(-(-mb // out_width)[:, None], kernel[0], axis=1)
                    compute = amp.conv_partial_nx1_cycles(
                        arch,
                        in_type.name,
                        partials_type.name,
                        rows,
                        np.full(kernel[1], out_width),
                        -(-kb // icpg),
                        -(-nb // ocpg),
                        zero_elems=mb,
                    )
                else:
                    compute = product_vertex_cycles(arch, "AMP", in_type, partials_type, mb, nb, kb, icpg, ocpg)
                cands.append((g, ocpg, icpg, 0, np.broadcast_to(compute, g.shape[1:])))
        if "HMAC" in methods:
            # input channels in groups of 2 halves or 1 float; poplin enumerates every inChansPerGroup,
            # and the cheapest for a tile's block is one group of all of it (fewest loop overheads),
            # output channels in groups of 1 (float partials) or 2 (ConvVertexType.cpp,
            # getConvVertexHMACCandidates; the planner's cost: ConvModel.cpp, addPartialCalcCycleEstimate,
            # every kernel position over the tile's whole rows; a product's positions are one row)
            k_grain = 1 if in_type.name == "float" else 2
            ocpg = amp.hmac_out_chans_per_group(partials_type.name)
            g, mb, nb, kb = grid(ocpg, k_grain, True)
            if conv_kernel == 1 and out_width == 1:
                compute = product_vertex_cycles(arch, "HMAC", in_type, partials_type, mb, nb, kb, kb, ocpg)
            else:
                rows = np.repeat(-(-mb // out_width)[:, None], kernel[0], axis=1)
                cols = np.full(kernel[1], out_width)
                compute = amp.conv_partial_hmac_cycles(
                    in_type.name, partials_type.name, rows, cols, kb, ocpg, 1, -(-nb // ocpg), zero_elems=mb
                )
            cands.append((g, ocpg, k_grain, 1, compute))
        if "OUTER_PRODUCT" in methods and conv_kernel == 1 and k == 1:
            # one input channel: poplin offers an outer product, its partials in the input type, the
            # output positions of a tile split over the workers (ConvVertexType.cpp,
            # getConvVertexOuterProductCandidates; ConvModel.cpp, addPartialCalcCycleEstimate:
            # getOuterProductCycleEstimate of ceil(tileOutWidth / numContexts) positions, times the contexts)
            ocpg = amp.outer_product_chans_per_group(arch, in_type.name)
            g, mb, nb, kb = grid(ocpg, 1, False)
            compute = product_vertex_cycles(arch, "OUTER_PRODUCT", in_type, partials_type, mb, nb, kb, 1, ocpg)
            cands.append((g, ocpg, 1, 2, compute))
        if not cands:
            raise GraphError(
                f"no plan by {', '.join(methods)} for a [{m}, {k}] x [{k}, {n_cols}] product: poplin offers "
                "OUTER_PRODUCT for one input channel only, and HMAC for 1x1 kernels"
            )
        pm = np.concatenate([c[0][0] for c in cands])
        pn = np.concatenate([c[0][1] for c in cands])
        pk = np.concatenate([c[0][2] for c in cands])
        og = np.concatenate([np.full(c[0].shape[1], c[1]) for c in cands])
        kg = np.concatenate([np.full(c[0].shape[1], c[2]) for c in cands])
        method = np.concatenate([np.full(c[0].shape[1], c[3]) for c in cands])
        compute = np.concatenate([np.broadcast_to(np.asarray(c[4], dtype=np.int64), c[0].shape[1:]) for c in cands])
        mb = np.minimum(m, -(-m_rows // pm) * out_width)
        nb = np.minimum(n_cols, _ceil(_ceil(n_cols, og), pn) * og)
        kb = np.minimum(k, _ceil(_ceil(k, kg), pk) * kg)
        in_elems = None if conv_input is None else input_elements(conv_input, kernel, out_width, mb, kb)
        costs = _pass_costs(
            arch, k, mb, nb, kb, pk, method, compute, in_type, partials_type, out_type, conv_kernel, in_elems
        )
        total, memory = costs["total"], costs["memory"]
        transform_cycles = np.zeros_like(total)
        if swap is not None:
            transform_cycles, transform_bytes = transform_cost(
                arch, swap, m, k, n, kg, og, pm * pn * pk, in_type, out_type, fc_pass
            )
            total = total + transform_cycles
            memory = np.maximum(memory, transform_bytes)
        return {
            "pm": pm,
            "pn": pn,
            "pk": pk,
            "og": og,
            "kg": kg,
            "method": method,
            "compute": compute,
            "mb": mb,
            "nb": nb,
            "kb": kb,
            "total": total,
            "memory": memory,
            "transform": transform_cycles,
            "exchange": costs["exchange"],
            "reduceExchange": costs["reduceExchange"],
            "reduceCompute": costs["reduceCompute"],
            "serial": np.full_like(total, n // n_cols),
        }

    # poplin's memory bound (memory_bound): when no grid fits, twice the bound, doubled again until it
    # passes twice the tile's memory, then no bound (ConvPlan.cpp, createPlan: minimizeCycles, then
    # minimizeMemory)
    bound = memory_bound(None, bytes_per_tile) if bound is None else bound
    c = candidates(n)
    if conv_kernel == 1 and out_width == 1 and conv_input is None:
        c = _with_serial_splits(c, candidates, arch, k, n, tiles, in_type, partials_type, fc_pass)
    total, memory = c["total"], c["memory"]
    fits = memory <= relaxed_bound(memory, bound, bytes_per_tile)
    if fits.any():
        total = np.where(fits, total, np.iinfo(np.int64).max)
    # the cheapest in cycles; among equals the fewest tiles, then poplin's candidate order
    pm, pn, pk, og, kg, method = (c[key] for key in ("pm", "pn", "pk", "og", "kg", "method"))
    best = int(np.lexsort((og, method, c["serial"], pm * pn * pk, total))[0])
    estimate = tuple((key, int(c[key][best])) for key in ESTIMATE_KEYS)
    return (
        (int(pm[best]), int(pn[best]), int(pk[best])),
        estimate,
        int(og[best]),
        int(kg[best]),
        MATMUL_METHODS[int(method[best])],
        int(c["serial"][best]),
    )


def _with_serial_splits(
    c: dict, candidates, arch, k: int, n: int, tiles: int, in_type: Type, partials_type: Type, fc_pass: str
) -> dict:
    """The grids of `c` and those of poplin's serial split of the n output columns in S steps.

    S is a factor of n, and S times the column split at most n's output-channel groups. The
    estimate is S times the step's cycles and its dynamic slice of the weights and update of the
    outputs; a fully-connected pass also rearranges its weights before the loop, and holds them
    (lib/poplin/ConvModel.cpp, constructModel: the serial split variables; addEstimates,
    addDynamicSliceEstimate, addDynamicUpdateEstimate, addRearrangeBeforeSliceEstimate)."""
    from ..codelets.popops import dynamic_slice_1d_cycles

    parts = [c]
    for s in range(2, min(n, tiles) + 1):
        if n % s:
            continue
        step = candidates(n // s)
        used = step["pm"] * step["pn"] * step["pk"]
        # the tile's weights over the whole loop (addWeightsPerTile), a step's share sliced, and a
        # step's outputs on the tile (outputsPerLevel), which poplin divides by S once more
        weights = -(-k * n // used)
        outputs = -(-step["mb"] * step["nb"] // step["pk"])
        slices = dynamic_slice_1d_cycles(in_type.name, -(-weights // s), arch.data_path_width)
        slices = slices + dynamic_slice_1d_cycles(partials_type.name, -(-outputs // s), arch.data_path_width)
        total = s * (step["total"] + slices)
        memory = step["memory"]
        if fc_pass != "NONE":
            held = weights * in_type.size
            total = total + -(-held // arch.exchange_bytes_per_cycle) + weights
            memory = held + np.maximum(memory, held)
        # poplin's totalOutChanSplit (parallel times serial) is at most the output-channel grains
        allowed = step["pn"] * s <= -(-n // step["og"])
        step["total"] = np.where(allowed, total, np.iinfo(np.int64).max)
        step["memory"] = np.where(allowed, memory, np.iinfo(np.int64).max)
        parts.append(step)
    return {key: np.concatenate([p[key] for p in parts]) for key in c}


#: poplin's fully-connected passes of a matrix product, its ``fullyConnectedPass`` option
#: (lib/poplin/MatMul.cpp, FullyConnectedPass): NONE for a lone product.
MATMUL_PASSES = ("NONE", "INFERENCE_FWD", "TRAINING_FWD", "TRAINING_BWD", "TRAINING_WU")


def _transform_factor(type_name: str, size) -> tuple[int, np.ndarray]:
    """poplin's scale of a rearranging copy, 5/4 when `size` is a multiple of 4 halves or 2 floats
    and 5/3 otherwise (ConvModel.cpp, getScaleFactorForTransform)."""
    granularity = 2 if type_name == "float" else 4
    return 5, np.where(np.asarray(size) % granularity == 0, 4, 3)


def transform_cost(
    arch,
    swapped: bool,
    m: int,
    k: int,
    n: int,
    k_grain,
    n_grain,
    used_tiles,
    in_type: Type,
    out_type: Type,
    fc_pass: str = "NONE",
    joint: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """poplin's estimate of the copies that rearrange a matrix product's operands and output into
    and out of its plan, as (cycles, temporary bytes per tile), for candidate grids of
    `used_tiles` tiles and channel grains `k_grain` and `n_grain`; m, k and n are the planned
    product's, swapped or not, and `fc_pass` its fullyConnectedPass, NONE for a lone product;
    `joint` for a pass of a fully-connected layer's joint plan (lib/poplin/ConvModel.cpp,
    addTransformCycleEstimate without the regression table, enableTransformsConvTable being off by
    default). Operands as given are rearranged, and so is the output; swapped operands only when
    their channels need padding, and besides the weight-update pass's input and, planned alone,
    the backward pass's input and the weight-update pass's output; a lone product's output is
    otherwise regrouped when its channel group is not one conv unit's weights. A rearranged
    copy's bytes per tile are exchanged at the exchange rate and copied at min(memcpy rate,
    element size) a cycle, a regroup's copied at min(memcpy rate, group bytes), each scaled by
    5/4 or 5/3; the temporary bytes are twice the largest copy's."""
    used = np.asarray(used_tiles, dtype=np.int64)
    k_grain = np.asarray(k_grain, dtype=np.int64)
    n_grain = np.asarray(n_grain, dtype=np.int64)
    k_pad = _ceil(k, k_grain) * k_grain
    n_pad = _ceil(n, n_grain) * n_grain
    pad_in = k % k_grain != 0
    pad_partials = n % n_grain != 0
    unswapped = np.full(used.shape, not swapped)
    fc = fc_pass != "NONE"
    # ConvModel.cpp, addTransformCycleEstimate: swapOperands != isMatmulOrFullyConnectedLayer, the
    # padding, FC_TRAINING_WU's input always, and a pass planned alone (not jointly):
    # FC_TRAINING_BWD's input and FC_TRAINING_WU's output; only a product that is not a
    # fully-connected pass regroups its output
    alone = not joint
    rearrange_input = unswapped | pad_in | (fc_pass == "TRAINING_WU") | (fc_pass == "TRAINING_BWD" and alone)
    rearrange_weights = unswapped | pad_in | pad_partials
    rearrange_output = unswapped | pad_partials | (fc_pass == "TRAINING_WU" and alone)
    regroup_output = ~rearrange_output & (n_grain != amp.weights_per_conv_unit(in_type.name)) & (not fc)
    elems = np.where(rearrange_input, m * k_pad, 0) + np.where(rearrange_weights, k_pad * n_pad, 0)
    return _rearrangement_cost(
        arch, elems, m * n_pad, used, in_type, out_type, k * n, n, rearrange_output, regroup_output, n_grain
    )


def _rearrangement_cost(
    arch,
    in_elems,
    out_elems,
    used,
    in_type: Type,
    out_type: Type,
    chans,
    out_chans,
    rearrange_output,
    regroup_output,
    n_grain,
) -> tuple[np.ndarray, np.ndarray]:
    """poplin's estimate of rearranging copies over `used` tiles, as (cycles, temporary bytes per
    tile): `in_elems` operand elements, and the `out_elems` of the output when it is rearranged or
    regrouped. A tile's bytes are exchanged at the exchange rate and copied at min(memcpy rate,
    element size) a cycle, a regroup's at min(memcpy rate, group bytes), scaled by 5/4 or 5/3 by
    the product `chans` and the output's `out_chans` (getScaleFactorForTransform); the temporary
    bytes are twice the largest copy's (lib/poplin/ConvModel.cpp, addTransformCycleEstimate)."""
    memcpy, xbpc, e = arch.memcpy_bytes_per_cycle, arch.exchange_bytes_per_cycle, out_type.size
    moved = np.asarray(in_elems) > 0
    in_bytes = _ceil(in_elems, used) * e
    num, den = _transform_factor(in_type.name, chans)
    copy = np.where(moved, _ceil(in_bytes * num, min(memcpy, e) * den), 0)
    exchange = np.where(moved, _ceil(in_bytes, xbpc), 0)
    out_bytes = _ceil(out_elems, used) * e
    num, den = _transform_factor(out_type.name, out_chans)
    copy = copy + np.where(rearrange_output, _ceil(out_bytes * num, min(memcpy, e) * den), 0)
    exchange = exchange + np.where(rearrange_output, _ceil(out_bytes, xbpc), 0)
    copy = copy + np.where(regroup_output, _ceil(out_bytes * num, np.minimum(memcpy, n_grain * e) * den), 0)
    out_used = np.logical_or(rearrange_output, regroup_output)
    temp = 2 * np.maximum(np.where(moved, in_bytes, 0), np.where(out_used, out_bytes, 0))
    return copy + exchange, temp


def input_elements(conv_input: tuple[int, ...], kernel: tuple[int, int], out_width: int, mb, kb) -> np.ndarray:
    """Input elements a convolution's tile receives for mb output positions (whole rows of
    `out_width`) of kb input channels: per image it spans, the input rows and columns its outputs
    read, at most the input the whole output reads (lib/poplin/ConvModel.cpp,
    addExchangeCycleEstimates: getMaxInputRangeSize). `conv_input` is (output height, input
    height, input width, strides, paddings before the field); the padding after the field shows in
    the output's height and width."""
    oh, h, w, sh, sw, ph, pw = conv_input
    kh, kw = kernel
    rows = -(-np.asarray(mb) // out_width)
    images = -(-rows // oh)
    whole_h = _input_range_size(h, kh, sh, ph, oh)
    whole_w = _input_range_size(w, kw, sw, pw, out_width)
    rows_in = np.minimum(whole_h, (np.minimum(rows, oh) - 1) * sh + kh)
    cols_in = min(whole_w, (out_width - 1) * sw + kw)
    return images * rows_in * cols_in * np.asarray(kb)


def _input_range_size(size: int, kernel: int, stride: int, pad_lower: int, out: int) -> int:
    """How many input positions along one dim the whole output reads, from the first to the last,
    the padding left out: `pad_lower` is the padding before the field, the padding after it is in
    the `out` outputs (lib/poplin/ConvUtil.cpp, getInputRange)."""
    first, last = size, -1
    for k in range(kernel):
        lo, hi = _written_outputs(k, size, stride, pad_lower, out)
        if lo < hi:
            first, last = min(first, lo * stride + k - pad_lower), max(last, (hi - 1) * stride + k - pad_lower)
    return max(0, last + 1 - first)


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
    in_elems: np.ndarray | None = None,
) -> dict:
    """Estimated cycles and temporary bytes per tile of candidate grids of one matrix product: its
    vertices' `compute`, the exchange of each tile's blocks of mb x kb and kb x nb, the stages of
    the reduction of a k split in pk parts, and the cast of unreduced float partials; `method` is
    the index of each grid's method in MATMUL_METHODS. A convolution's tile receives `in_elems`
    input elements and its kernel's weights; without them, each kernel position's block of
    mb x kb."""
    from ..codelets.popops import cast_supervisor_cycles

    icpg = amp.weights_per_conv_unit(in_type.name)
    e = in_type.size
    if in_elems is None:
        recv = (mb * kb + kb * nb) * e * conv_kernel
    else:
        recv = (in_elems + kb * nb * conv_kernel) * e
    exchange = arch.exchange_setup_cycles + recv // arch.exchange_bytes_per_cycle
    reduce_needed = pk > 1
    red_exchange = np.zeros_like(pk)
    red_compute = np.zeros_like(pk)
    red_memory = np.zeros_like(pk)
    syncs = np.full_like(pk, arch.min_sync_delay)
    for depth in np.unique(pk[reduce_needed]):
        # each stage sums `this` partials of each output of a tile's slice, the slice shrinking
        # by `this` a stage from the tile's block, so every tile of the k split works in every stage
        # (PerformanceEstimation.hpp, estimateConvReduceCycles; ConvReduce.cpp, partialGroupedReduce)
        sel = pk == depth
        remaining = int(depth)
        slice_elems = _ceil(mb[sel] * nb[sel], remaining) * remaining
        stages = reduce_stage_depths(remaining)
        if stages:
            # temporary bytes: the largest intermediate stage's outputs, the first's, the tile's
            # partials (ConvModel.cpp, addReduceCycleEstimate: reduceCycleTempBytesEstimate)
            red_memory[sel] = slice_elems * partials_type.size
        for out_depth in stages + [1]:
            this = -(-remaining // out_depth)
            remaining = -(-remaining // this)
            slice_elems = _ceil(slice_elems, this)
            stage_recv = (this - 1) * slice_elems * partials_type.size
            red_exchange[sel] += arch.exchange_setup_cycles + stage_recv // arch.exchange_bytes_per_cycle
            # poplin's estimate counts the vertex its reduce() would use (PerformanceEstimation.hpp,
            # estimateConvReduceCycles: useSingleInputReduce)
            red_compute[sel] += amp.reduce_vertex_cycles(
                arch,
                slice_elems,
                this,
                (out_type if remaining == 1 else partials_type).name == "float",
                partials_type.name == "float",
            )
            syncs[sel] += arch.min_sync_delay
    # float partials of an unsplit k are cast to the output type (MatMulPlan.vertex_out_type): AMP
    # vertices write the output type when the kernel is 1x1 and k fits one conv unit, HMAC always
    # writes partials, the outer product always writes its input type
    narrower = out_type.size < partials_type.size
    amp_cast = (k > icpg) | (conv_kernel > 1)
    cast_needed = (pk == 1) & narrower & (((method == 0) & amp_cast) | (method == 1))
    cast = np.where(
        cast_needed,
        cast_supervisor_cycles(partials_type.name, out_type.name, mb * nb, arch.data_path_width) + arch.min_sync_delay,
        0,
    )
    total = compute + exchange + red_exchange + red_compute + syncs + cast
    part_size = np.where(method == 2, in_type.size, partials_type.size)
    # the operands received and the partials, or the reduction's, whichever is more (ConvModel.cpp,
    # addConvTempMemoryEstimate and the max in totalTempBytes)
    memory = np.maximum(recv + mb * nb * part_size, red_memory)
    return {
        "compute": compute,
        "exchange": exchange,
        "reduceExchange": red_exchange,
        "reduceCompute": red_compute,
        "total": total,
        "memory": memory,
    }


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
    if group is None:
        idx = offsets[block] + (r % rb)[:, None] * widths[bj][None, :] + (c % cb)[None, :]
    else:
        g0 = (c % cb) // group * group  # the column group's first column in its block
        gw = np.minimum(group, widths[bj] - g0)
        idx = (
            offsets[block]
            + g0[None, :] * heights[bi][:, None]
            + (r % rb)[:, None] * gw[None, :]
            + (c % cb - g0)[None, :]
        )
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


def createMatMulInputLHS(
    graph: Graph, dtype, aShape, bShape, debugPrefix: str = "matmul/lhs", options: dict | None = None
) -> Tensor:
    """A left operand laid out for the planned matmul: each (rows, k) block spread over the tiles that use it."""
    dtype = as_type(dtype)
    m, k = aShape
    _, n = bShape
    plan = plan_product(graph, m, k, n, dtype, options)
    if plan.swapped:  # A^T is the swapped product's right operand
        return _new_rhs(graph, dtype, plan, debugPrefix).transpose()
    return _new_operand(graph, dtype, _operand_layout(plan, "lhs"), debugPrefix)


def createMatMulInputRHS(
    graph: Graph, dtype, aShape, bShape, debugPrefix: str = "matmul/rhs", options: dict | None = None
) -> Tensor:
    """A right operand laid out for the planned matmul: each (k, cols) block spread over the tiles that use it."""
    dtype = as_type(dtype)
    m, k = aShape
    _, n = bShape
    plan = plan_product(graph, m, k, n, dtype, options)
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

    A pass of a fully-connected layer is planned with its operands swapped and as given, each with
    the cost of its rearranging copies, and the cheaper plan within the memory bound is kept,
    the swapped one among equals (lib/poplin/ConvPlan.cpp, getSwapOperandCandidates: swapped
    first for fully-connected passes). The swapOperands constraint fixes the orientation. A lone
    product is planned as given unless the constraint swaps it ("Swapped operands" in
    docs/simulator.md says why). ``availableMemoryProportion`` sets the memory bound (memory_bound)."""
    partials = partials_type(options, out_type or in_type)
    methods = plan_methods(options)
    fc_pass = matmul_pass(options)
    swap = plan_swap(options)
    bound = memory_bound(options, graph.target.bytesPerTile)
    if swap is not None or fc_pass == "NONE":
        return plan_matmul(
            graph, m, k, n, in_type, partials, out_type, methods=methods, swap=swap, fc_pass=fc_pass, bound=bound
        )
    plans = [
        plan_matmul(graph, m, k, n, in_type, partials, out_type, methods=methods, swap=s, fc_pass=fc_pass, bound=bound)
        for s in (True, False)
    ]
    # poplin's objective: cycles, then temporary bytes (ConvPlan.cpp, PlanningObjective)
    return min(plans, key=lambda p: (p.estimate["memory"] > bound, p.estimate["total"], p.estimate["memory"]))


def matmul_pass(options: dict | None) -> str:
    """poplin's pass of a matrix product from its ``fullyConnectedPass`` option (MATMUL_PASSES;
    NONE, a lone product, by default)."""
    value = str((options or {}).get("fullyConnectedPass", "NONE")).upper()
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
    from .popops import addInPlace

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
    # poplin's multi-stage reduction
    out = graph.addVariable(plan.out_type, [m * n], f"{name}/out")
    view, c_off = _blocked_view(graph, out, m, n, mb, nb)
    c_block = im[cells] * pn + jn[cells]
    cs2 = _staged_reduce(graph, prog, name, out, partials, (c_block, block_sizes, c_off[c_block], p_off, tiles), ocpg)

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
        return tuple(
            (f + lo + hi - kk) // s + 1
            for f, (lo, hi), kk, s in zip(self.field, self.pad_widths, self.kernel, self.stride)
        )

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


def _written_outputs(k: int, size: int, stride: int, pad_lower: int, out: int) -> tuple[int, int]:
    """The range of outputs kernel index `k` writes along one dimension: those whose input index,
    by stride and the padding before the field, falls inside the field; the padding after it only
    sets the `out` outputs there are (lib/poplin/ConvUtil.cpp, getOutputRangeForKernelIndex)."""
    lo = max(0, -(-(pad_lower - k) // stride))
    hi = min(out, (size - 1 + pad_lower - k) // stride + 1)
    return lo, max(lo, hi)


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


def _flat_acts(T: Tensor) -> Tensor:
    """Activations [b, c, h, w] as the [1, c, b*h*w, 1] of their flattened convolution."""
    b, c, h, w = T.shape
    return T.dimShuffle((1, 0, 2, 3)).reshape((1, c, b * h * w, 1))


def _unflat_acts(T: Tensor, batch: int, field: tuple[int, int]) -> Tensor:
    """Activations [1, c, b*h*w, 1] of a flattened convolution as [b, c, h, w]."""
    c = T.shape[1]
    return T.reshape((c, batch, *field)).dimShuffle((1, 0, 2, 3))


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
    candidates = []  # (cycles, memory, transforms) in poplin's order
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
    planned = _expanded(_swapped(params) if swap else params, dims)
    inner = _flattened(planned)
    bound = memory_bound(options, graph.target.bytesPerTile)
    return ConvolutionPlan(swap, dims, inner is not None, _conv_grid(graph, inner or planned, partials, bound))


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
    from .popops import zero

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


def partials_type(options: dict | None, out_type: Type | None = None) -> Type:
    """The partials type a product's or convolution's options ask for: poplin's ``partialsType``,
    half or float (a name or the type), float by default (lib/poplin/ConvOptions.cpp,
    partialsTypeMap); never narrower than the output type `out_type`, which poplin uses instead
    (lib/poplin/ConvValidation.cpp, validateLayerParams: half partials of a float layer are float)."""
    value = (options or {}).get("partialsType", "float")
    name = value.name if isinstance(value, Type) else value
    if name not in ("half", "float"):
        raise GraphError(f"partialsType must be half or float, got {value!r}")
    partials = as_type(name)
    if out_type is not None and out_type.size > partials.size:
        return out_type
    return partials


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
        planned = _swapped(params)
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
        index = index.reshape(b, oh, o, ow).transpose(0, 2, 1, 3).reshape(-1)
        unreduced = Tensor.from_elements(state, vertex_type, (b, o, oh, ow), np.full(index.size, pvar), index)
        if vertex_type == params.dtype:
            return unreduced
        from .popops import cast

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


def estimate_matmul_cycles(graph: Graph, m: int, k: int, n: int, dtype="half") -> dict:  # pragma: no cover
    """The planner's own estimate of a matmul (for experiments)."""
    return plan_matmul(graph, m, k, n, as_type(dtype)).estimate


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
