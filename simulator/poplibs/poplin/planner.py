"""poplin's planner: the grid, method and orientation of a matrix product (or of the product a
convolution is planned as), by poplin's cost model.

A matrix multiply C[m,n] = A[m,k] B[k,n] is planned as poplibs plans a 1x1 convolution: the output
rows (m), output channels (n) and input channels (k) are split over a grid of pm x pn x pk tiles.
Every grid is costed with the vertex cycle model the codelets use (compute, exchange, reduction,
rearranging copies) and the cheapest one within the temporary-memory bound is kept
(lib/poplin/ConvPlan.cpp, lib/poplin/ConvModel.cpp).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np

from ...codelets import poplin as amp
from ...codelets.poplin import WORKERS
from ...errors import GraphError
from ...graph import Graph
from ...types import FLOAT, Type, as_type

#: poplin's default availableMemoryProportion (lib/poplin/ConvOptions.hpp).
AVAILABLE_MEMORY_PROPORTION = 0.6

#: The parts of a plan's estimate (MatMulPlan.estimate), tile cycles and temporary bytes per tile.
ESTIMATE_KEYS = ("compute", "exchange", "reduceExchange", "reduceCompute", "padding", "transform", "total", "memory")


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
        is 1x1, nothing is reduced and k, rounded up to the input groups, is one conv unit's weights
        (lib/poplin/ConvVertexType.cpp, getConvVertexAMPCandidates: a kernel of all ones and
        roundUp(inputChannelsPerConvGroup, inChansPerGroup) == weightsPerConvUnit; getConvTypes)."""
        if self.method == "OUTER_PRODUCT":
            return self.in_type
        if (
            self.method == "AMP"
            and self.pk == 1
            and self.kernel_size == 1
            and fills_one_conv_unit(self.k, self.k_grain, self.in_type)
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


def fills_one_conv_unit(k, k_grain, in_type: Type):
    """Whether k input channels, rounded up to groups of k_grain, are one conv unit's weights: what
    lets an unsplit 1x1 AMP pass write the output type (lib/poplin/ConvVertexType.cpp,
    getConvVertexAMPCandidates: roundUp(inputChannelsPerConvGroup, inChansPerGroup) ==
    weightsPerConvUnit). Integers or integer arrays."""
    return _ceil(k, k_grain) * k_grain == amp.weights_per_conv_unit(in_type.name)


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
        best: tuple[list[int], np.float32] | None = None
        for nxt in (down, down + 1):
            rest, cost = plan(nxt, n - 1)
            cost = np.float32(cost + np.float32(np.float32(d) / np.float32(nxt)))
            if best is None or cost <= best[1]:  # poplin keeps rounding down only when strictly cheaper
                best = ([nxt] + rest, cost)
        assert best is not None
        return best

    return plan(depth, stages)[0]


def _groups(arch, in_type: Type, partials_type: Type) -> tuple[int, int]:
    """Input and output channels of one AMP channel group: a conv unit's weights and the conv units
    of the tile (poplin's AMP vertex type: inChansPerGroup and partialChansPerGroup)."""
    return (amp.weights_per_conv_unit(in_type.name), amp.num_conv_units(arch, in_type.name, partials_type.name))


def in_chans_candidates(arch, in_type: Type) -> tuple[int, ...]:
    """Input channels of one AMP group the planner may choose, widest first: divisors of a conv
    unit's weights whose group loads whole data-path words (lib/poplin/ConvVertexType.cpp,
    getConvVertexAMPCandidates, inputs from weightsPerConvUnit down to 1;
    canUseConvolutionInstruction: usedWeightsPerConvUnit % inChansPerGroup and the aligned loads)."""
    wpcu = amp.weights_per_conv_unit(in_type.name)
    bits = 8 * in_type.size
    return tuple(x for x in range(wpcu, 0, -1) if wpcu % x == 0 and (x * bits) % arch.data_path_width == 0)


def partial_chans_candidates(arch, in_type: Type, partials_type: Type, conv_kernel: int = 1) -> tuple[int, ...]:
    """Output channels of one AMP partials group the planner may choose: the tile's conv units or
    one conv unit's weights, when a multiple of the conv units (lib/poplin/ConvVertexType.cpp,
    getConvVertexAMPCandidates: partialChansCandidates = {numConvUnitsOnIpu, weightsPerConvUnit};
    canUseConvolutionInstruction: outChansPerGroup % numConvUnitsRequired == 0). A group wider
    than the conv units takes several output passes (PerformanceEstimation.hpp,
    getConvPartial1x1SupervisorOuterLoopCycleEstimate, outputPassesPerGroup). Kernels wider than
    1x1 are offered the conv units only: their second width is not modelled."""
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


#: The ``0.partition`` constraints of a matrix product the planner honours, by the plan's own
#: names for its splits: rows (pm; poplin flattens a product's rows into one dimension),
#: output channels in parallel (pn) and serially, and input channels in parallel (pk)
#: (lib/poplin/ConvPlan.cpp, constrainPartitionVars; ConvModel.cpp, constructModel).
PARTITION_KEYS = {
    "batchSplit": "pm",
    "outChanSplit.parallel": "pn",
    "outChanSplit.serial": "serial",
    "inChanSplit.parallel": "pk",
}


def plan_partition(options: dict | None) -> tuple[tuple[str, int], ...] | None:
    """The splits that poplin's ``0.partition`` plan constraint fixes, as (plan field, value)
    pairs (PARTITION_KEYS); None when it fixes none. A key the planner does not model, or a value
    that is not a positive integer, is a GraphError."""
    level = _plan_constraints(options).get("0", {})
    partition = level.get("partition") if isinstance(level, dict) else None
    if partition is None:
        return None
    if not isinstance(partition, dict):
        raise GraphError(f"planConstraints 0.partition must be a JSON object, got {partition!r}")
    flat = {}
    for key, value in partition.items():
        if "." in key:
            raise GraphError(f"planConstraints 0.partition.{key}: name a split's part as an object, as poplin reads it")
        # a split with parts (outChanSplit, inChanSplit) is an object of them; others are numbers
        if isinstance(value, dict) and f"{key}.parallel" in PARTITION_KEYS:
            flat.update({f"{key}.{sub}": v for sub, v in value.items()})
        else:
            flat[key] = value
    fixed = []
    for key, value in flat.items():
        if key not in PARTITION_KEYS:
            raise GraphError(
                f"planConstraints 0.partition.{key}: a matrix product's plan fixes only {', '.join(PARTITION_KEYS)}"
            )
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise GraphError(f"planConstraints 0.partition.{key} must be a positive integer, got {value!r}")
        fixed.append((PARTITION_KEYS[key], value))
    return tuple(sorted(fixed)) or None


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
    partition: tuple[tuple[str, int], ...] | None = None,
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
    rows and columns its outputs read (input_elements). `partition` (plan_partition) fixes splits
    of the product as planned: of C^T's rows and channels when swapped."""
    target = graph.target
    out_type = out_type or in_type
    _check_product_fits(graph, m, k, n, in_type, out_type, kernel, conv_input is None)
    tiles = graph.num_tiles
    swapped = bool(swap)
    pm_size, pn_size = (n, m) if swapped else (m, n)
    problem = ProductProblem(
        target.arch.name,
        target.bytesPerTile,
        tiles,
        pm_size,
        k,
        pn_size,
        in_type,
        partials_type,
        out_type,
        (kernel[0], kernel[1]),
        methods,
        out_width,
        swap,
        fc_pass,
        conv_input,
        bound,
        partition,
    )
    grid, estimate, ocpg, icpg, method, serial = _best_grid(problem)
    m, n = pm_size, pn_size
    pm, pn, pk = (int(x) for x in grid)
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
        pm,
        pn,
        pk,
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


def amp_weight_height(arch, in_type: Type, partials_type: Type, in_group: int, conv_units: int | None = None) -> int:
    """Kernel rows an AMP pass covers: the conv units' weights (of the units used) over the input
    channels of a group, 1 when a group fills them (lib/poplin/ConvModel.cpp,
    addPartialCalcCycleEstimate: convUnitWeightHeight)."""
    tile_units = amp.num_conv_units(arch, in_type.name, partials_type.name)
    used = amp.weights_per_conv_unit(in_type.name) * (conv_units or tile_units) // tile_units
    return max(1, used // int(in_group))


def weight_height_padding(
    fh: int, mb, nb, kb, in_group: int, out_group, in_type: Type, kernel_rate: int, input_rate
) -> tuple[np.ndarray, np.ndarray]:
    """poplin's estimate of the zeros an AMP pass of weight height `fh` adds to a tile of a matrix
    product, as (cycles, temporary bytes): its 1x1 kernel, of the tile's channels in whole groups,
    padded to fh rows and its mb input positions by fh - 1 rows, the kernel's zeros exchanged at
    `kernel_rate` bytes a cycle and the input's at `input_rate` (lib/poplin/ConvModel.cpp,
    addTileLevelTransformEstimates: padKernelSpatialDim and applyPadding, getCycles and
    getInputElementCycles)."""
    chans = _ceil(kb, in_group) * in_group
    out_chans = _ceil(nb, out_group) * out_group
    kernel_zeros = (fh - 1) * chans * out_chans
    input_zeros = (fh - 1) * np.asarray(mb, dtype=np.int64) * chans
    e = in_type.size
    cycles = -(-kernel_zeros * e // kernel_rate) + -(-input_zeros * e // input_rate)
    return cycles, (kernel_zeros + input_zeros) * e


def product_vertex_cycles(
    arch, method: str, in_type: Type, partials_type: Type, mb, nb, kb, in_group, out_group, conv_units=None
) -> np.ndarray:
    """Tile cycles of the vertices of a matrix product's tile, as poplin's planner estimates them:
    mb rows, kb input channels in groups of `in_group` and nb output channels in groups of
    `out_group` (codelets/poplin.py: ConvPartial1x1Out on `conv_units`, or ConvPartialnx1 when
    an input group does not fill the conv units' weights, ConvPartialHorizontalMac, and
    OuterProduct, of one input channel, with the rows split over the workers)."""
    mb = np.asarray(mb, dtype=np.int64)
    fh = amp_weight_height(arch, in_type, partials_type, in_group, conv_units) if method == "AMP" else 1
    if fh > 1:
        # the nx1 vertex over the 1x1 kernel padded to fh rows: one kernel position of the tile's
        # rows (ConvModel.cpp, canUseConvPartial1x1Vertex: convUnitWeightHeight != 1)
        cycles = amp.conv_partial_nx1_cycles(
            arch,
            in_type.name,
            partials_type.name,
            np.ones((mb.size, 1), dtype=np.int64),
            mb.reshape(-1, 1),
            _ceil(kb, in_group),
            _ceil(nb, out_group),
            zero_elems=mb,
            filter_height=fh,
            out_chans_per_group=out_group,
            conv_units=conv_units,
        )
    elif method == "AMP":
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


@dataclass(frozen=True)
class ProductProblem:
    """One product (or convolution as a product) to plan on a target; what the plan is cached on.

    m counts output positions in rows of `out_width`; `kernel` is a convolution's kernel, (1, 1)
    for a product; `swap`, `fc_pass`, `conv_input`, `bound` and `partition` are plan_matmul's."""

    arch_name: str
    bytes_per_tile: int
    tiles: int
    m: int
    k: int
    n: int
    in_type: Type
    partials_type: Type
    out_type: Type
    kernel: tuple[int, int]
    methods: tuple[str, ...] = ("AMP",)
    out_width: int = 1
    swap: bool | None = None
    fc_pass: str = "NONE"
    conv_input: tuple[int, ...] | None = None
    bound: float | None = None
    partition: tuple[tuple[str, int], ...] | None = None

    @property
    def conv_kernel(self) -> int:
        """Kernel positions: 1 for a product."""
        return self.kernel[0] * self.kernel[1]

    @property
    def m_rows(self) -> int:
        """Output rows: a convolution's positions are split in whole rows, as its cells are (_ConvGrid)."""
        return -(-self.m // self.out_width)

    @property
    def is_product(self) -> bool:
        """A matrix product, not a convolution."""
        return self.conv_kernel == 1 and self.out_width == 1 and self.conv_input is None


@functools.lru_cache(maxsize=4096)
def _best_grid(problem: ProductProblem):
    """The cheapest grid of a problem within its memory bound: (pm, pn, pk), the estimate, the
    output- and input-channel grains, the method and the serial split."""
    from ...target import architecture

    arch = architecture(problem.arch_name)
    # poplin's memory bound (memory_bound): when no grid fits, twice the bound, doubled again until it
    # passes twice the tile's memory, then no bound (ConvPlan.cpp, createPlan: minimizeCycles, then
    # minimizeMemory)
    bound = memory_bound(None, problem.bytes_per_tile) if problem.bound is None else problem.bound
    candidates = functools.partial(_candidates, problem, arch)
    c = candidates(problem.n)
    if problem.is_product:
        p = problem
        c = _with_serial_splits(c, candidates, arch, p.k, p.n, p.tiles, p.in_type, p.partials_type, p.fc_pass)
    if problem.partition:
        c = _constrained(problem, c)
    total, memory = c["total"], c["memory"]
    fits = memory <= relaxed_bound(memory, bound, problem.bytes_per_tile)
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


def _constrained(problem: ProductProblem, c: dict) -> dict:
    """The candidates with the splits the partition constraints fix; poplin's partition
    constraints fix the solver's split variables, and with no plan left poplin finds no valid plan
    (ConvPlan.cpp, constrainPartitionVars)."""
    keep = c["total"] < np.iinfo(np.int64).max
    for key, value in problem.partition or ():
        keep &= c[key] == value
    if not keep.any():
        names = {field: key for key, field in PARTITION_KEYS.items()}
        fixed = ", ".join(f"{names[field]} {value}" for field, value in problem.partition or ())
        m, k, n = problem.m, problem.k, problem.n
        raise GraphError(
            f"no plan of a [{m}, {k}] x [{k}, {n}] product on {problem.tiles:,} tiles has the splits the "
            f"planConstraints fix ({fixed}): a parallel split must be the fewest parts that give "
            "its tiles' share of whole rows or channel groups, a serial split must divide the "
            "output channels, and the splits' product must be at most the tiles"
        )
    return {key: value[keep] for key, value in c.items()}


def _method_grids(problem: ProductProblem, arch, n_cols: int) -> list[tuple]:
    """Every grid of each method for the product of n_cols of the n columns, with the vertex's
    compute estimate: (grids, out-channel grain, in-channel grain, method index, compute)."""
    m, k, tiles, kernel, out_width = problem.m, problem.k, problem.tiles, problem.kernel, problem.out_width
    in_type, partials_type, methods = problem.in_type, problem.partials_type, problem.methods
    conv_kernel, m_rows = problem.conv_kernel, problem.m_rows
    pm_c = _minimal_splits(max(1, m_rows), tiles)
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
        cands += _amp_grids(problem, arch, grid)
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
    return cands


def _amp_grids(problem: ProductProblem, arch, grid) -> list[tuple]:
    """The AMP grids of `_method_grids`, for each pair of input- and output-channel groups poplin offers."""
    kernel, out_width, in_type, partials_type = (
        problem.kernel,
        problem.out_width,
        problem.in_type,
        problem.partials_type,
    )
    conv_kernel = problem.conv_kernel
    cands = []
    # poplin splits the batch by rows and the channels by whole AMP groups: the number of splits of
    # the input (output) channels is at most their groups of inChansPerGroup (partialChansPerGroup)
    # (lib/poplin/ConvModel.cpp, constructModel: totalInChanSplit <= numInChanGrains, the grain sizes
    # of getInChanGrainSizes and getOutChanGrainSizes)
    # a matrix product may take input groups narrower than a conv unit's weights, its 1x1
    # kernel then padded to fill them (amp_weight_height); convolutions take whole weights
    product = problem.is_product
    for icpg, ocpg in itertools.product(
        in_chans_candidates(arch, in_type) if product else (amp.weights_per_conv_unit(in_type.name),),
        partial_chans_candidates(arch, in_type, partials_type, conv_kernel),
    ):
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
    return cands


def _candidates(problem: ProductProblem, arch, n_cols: int) -> dict:
    """Every grid of each method for the product of n_cols of the n columns, with its estimates."""
    m, k, n, kernel, out_width = problem.m, problem.k, problem.n, problem.kernel, problem.out_width
    in_type, partials_type, out_type = problem.in_type, problem.partials_type, problem.out_type
    swap, fc_pass, conv_input = problem.swap, problem.fc_pass, problem.conv_input
    conv_kernel, m_rows = problem.conv_kernel, problem.m_rows
    cands = _method_grids(problem, arch, n_cols)
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
        arch,
        k,
        mb,
        nb,
        kb,
        pk,
        method,
        compute,
        in_type,
        partials_type,
        out_type,
        conv_kernel,
        in_elems,
        pm=pm,
        pn=pn,
        k_grain=kg,
        n_grain=og,
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
        "padding": costs["padding"],
        "serial": np.full_like(total, n // n_cols),
    }


def _with_serial_splits(
    c: dict, candidates, arch, k: int, n: int, tiles: int, in_type: Type, partials_type: Type, fc_pass: str
) -> dict:
    """The grids of `c` and those of poplin's serial split of the n output columns in S steps.

    S is a factor of n, and S times the column split at most n's output-channel groups. The
    estimate is S times the step's cycles and its dynamic slice of the weights and update of the
    outputs; a fully-connected pass also rearranges its weights before the loop, and holds them
    (lib/poplin/ConvModel.cpp, constructModel: the serial split variables; addEstimates,
    addDynamicSliceEstimate, addDynamicUpdateEstimate, addRearrangeBeforeSliceEstimate)."""
    from ...codelets.popops import dynamic_slice_1d_cycles

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
        if is_fully_connected(fc_pass):
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

#: The pass of a convolution's weight update planned as a matrix product (its ``pass`` option
#: TRAINING_WU, lib/poplin/ConvOptions.hpp): not a fully-connected pass, and its operands are
#: rearranged however it is planned (ConvModel.cpp, addTransformCycleEstimate: isConvWeightUpdate).
CONV_WEIGHT_UPDATE = "CONV_TRAINING_WU"


def is_fully_connected(fc_pass: str) -> bool:
    """Whether a product's pass is one of a fully-connected layer (ConvModel.cpp, isFullyConnected)."""
    return fc_pass not in ("NONE", CONV_WEIGHT_UPDATE)


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
    product's, swapped or not, and `fc_pass` its fullyConnectedPass, NONE for a lone product or
    CONV_WEIGHT_UPDATE for a convolution's weight update, whose operands are always rearranged;
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
    fc = is_fully_connected(fc_pass)
    conv_wu = fc_pass == CONV_WEIGHT_UPDATE
    # ConvModel.cpp, addTransformCycleEstimate: swapOperands != isMatmulOrFullyConnectedLayer, the
    # padding, a convolution's weight update's operands and FC_TRAINING_WU's input always, and a
    # pass planned alone (not jointly):
    # FC_TRAINING_BWD's input and FC_TRAINING_WU's output; only a product that is not a
    # fully-connected pass regroups its output
    alone = not joint
    rearrange_input = unswapped | pad_in | conv_wu | (fc_pass == "TRAINING_WU") | (fc_pass == "TRAINING_BWD" and alone)
    rearrange_weights = unswapped | pad_in | pad_partials | conv_wu
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


def _written_outputs(k: int, size: int, stride: int, pad_lower: int, out: int) -> tuple[int, int]:
    """The range of outputs kernel index `k` writes along one dimension: those whose input index,
    by stride and the padding before the field, falls inside the field; the padding after it only
    sets the `out` outputs there are (lib/poplin/ConvUtil.cpp, getOutputRangeForKernelIndex)."""
    lo = max(0, -(-(pad_lower - k) // stride))
    hi = min(out, (size - 1 + pad_lower - k) // stride + 1)
    return lo, max(lo, hi)


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
    *,
    pm: np.ndarray,
    pn: np.ndarray,
    standard_order: bool = True,
    k_grain: np.ndarray | None = None,
    n_grain: np.ndarray | None = None,
    conv_units: int | None = None,
) -> dict:
    """Estimated cycles and temporary bytes per tile of candidate grids of one matrix product: its
    vertices' `compute`, the exchange of each tile's blocks of mb x kb and kb x nb, the stages of
    the reduction of a k split in pk parts, and the cast of unreduced float partials; `method` is
    the index of each grid's method in MATMUL_METHODS and pm x pn x pk the grid. A convolution's
    tile receives `in_elems` input elements and its kernel's weights; without them, each kernel
    position's block of mb x kb. `standard_order` is False for the backward and weight-update
    passes of a joint plan, whose tiles poplin orders otherwise. `k_grain` and `n_grain` are each
    grid's input and output channels a group (default: one conv unit's weights, and no padding
    counted), `conv_units` the AMP vertices' conv units (default: the tile's)."""
    from ...codelets.popops import cast_supervisor_cycles

    icpg = amp.weights_per_conv_unit(in_type.name)
    e = in_type.size
    xb = arch.exchange_bytes_per_cycle
    inputs = mb * kb * conv_kernel if in_elems is None else np.asarray(in_elems)
    weights = kb * nb * conv_kernel
    recv = (inputs + weights) * e
    # poplin's exchange estimate (ConvModel.cpp, addExchangeCycleEstimates): an operand is spread
    # evenly over the tiles that read it, so a tile already holds its share, 1/pn of its inputs
    # and 1/pm of its weights; the tiles of a super tile receive the inputs they share at twice
    # the rate when the output channels are split a multiple of its tiles times and the tiles are
    # in poplin's standard order (ExchangeEstimator.hpp, the constructor)
    shared = standard_order and arch.supports_super_tile_send_receive
    rate = np.where(shared & (pn % arch.tiles_per_super_tile == 0), 2 * xb, xb)
    inputs_in = inputs - inputs // pn
    weights_in = weights - weights // pm
    exchange = arch.exchange_setup_cycles + -(-inputs_in * e // rate) + -(-weights_in * e // xb)
    # float partials of an unsplit k are cast to the output type (MatMulPlan.vertex_out_type): AMP
    # vertices write the output type when the kernel is 1x1 and k, rounded up to the input groups
    # (`k_grain`, default one conv unit's weights), is one conv unit's weights; HMAC always writes
    # partials, the outer product always writes its input type
    narrower = out_type.size < partials_type.size
    amp_cast = np.logical_not(fills_one_conv_unit(k, icpg if k_grain is None else k_grain, in_type)) | (conv_kernel > 1)
    cast_needed = (pk == 1) & narrower & (((method == 0) & amp_cast) | (method == 1))
    vertex_out = np.where(
        (method == 0) & (pk == 1) & ~amp_cast, out_type.size, np.where(method == 2, in_type.size, partials_type.size)
    )
    # the partials' exchange: the first stage, the tile's partials, counted for every plan, then
    # each later stage's outputs (addExchangeCycleEstimates: reduceFirstStageExchangeCycles and
    # partialSumExchangeCycleEstimate)
    partials = mb * nb
    red_exchange = -(-partials * vertex_out // xb)
    red_compute = np.zeros_like(pk)
    red_memory = np.zeros_like(pk)
    syncs = np.full_like(pk, arch.min_sync_delay)
    for depth in np.unique(pk[pk > 1]):
        # each stage sums `this` partials of each output of a tile's slice, the slice shrinking
        # by `this` a stage from the tile's block, so every tile of the k split works in every stage
        # (PerformanceEstimation.hpp, estimateConvReduceCycles; ConvReduce.cpp, partialGroupedReduce)
        sel = pk == depth
        remaining = int(depth)
        slice_elems = _ceil(mb[sel] * nb[sel], remaining) * remaining
        outputs = partials[sel]
        stages = reduce_stage_depths(remaining)
        if stages:
            # temporary bytes: the largest intermediate stage's outputs, the first's, the tile's
            # partials (ConvModel.cpp, addReduceCycleEstimate: reduceCycleTempBytesEstimate)
            red_memory[sel] = slice_elems * partials_type.size
        for index, out_depth in enumerate(stages + [1]):
            this = -(-remaining // out_depth)
            remaining = -(-remaining // this)
            slice_elems = _ceil(slice_elems, this)
            if index:
                red_exchange[sel] += -(-outputs * vertex_out[sel] // xb)
            outputs = -(-outputs // this)
            red_exchange[sel] += arch.exchange_setup_cycles
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
    cast = np.where(
        cast_needed,
        cast_supervisor_cycles(partials_type.name, out_type.name, mb * nb, arch.data_path_width) + arch.min_sync_delay,
        0,
    )
    # AMP input groups narrower than the conv units' weights pad the kernel and the input with zeros
    # (weight_height_padding), the input's exchanged at the inputs' rate
    pad_cycles = np.zeros_like(pk)
    pad_bytes = np.zeros_like(pk)
    if k_grain is not None and n_grain is not None:
        for ig in np.unique(k_grain[method == 0]):
            fh = amp_weight_height(arch, in_type, partials_type, int(ig), conv_units)
            if fh > 1:
                sel = (method == 0) & (k_grain == ig)
                pad_cycles[sel], pad_bytes[sel] = weight_height_padding(
                    fh, mb[sel], nb[sel], kb[sel], int(ig), n_grain[sel], in_type, xb, rate[sel]
                )
    total = compute + exchange + red_exchange + red_compute + syncs + cast + pad_cycles
    part_size = np.where(method == 2, in_type.size, partials_type.size)
    # the operands received, the partials and the padding's zeros, or the reduction's, whichever is
    # more (ConvModel.cpp, addConvTempMemoryEstimate, tileLevelTransformTempBytes and the max in
    # totalTempBytes)
    memory = np.maximum(recv + mb * nb * part_size + pad_bytes, red_memory)
    return {
        "compute": compute,
        "exchange": exchange,
        "reduceExchange": red_exchange,
        "reduceCompute": red_compute,
        "padding": pad_cycles,
        "total": total,
        "memory": memory,
    }


def estimate_matmul_cycles(graph: Graph, m: int, k: int, n: int, dtype="half") -> dict:  # pragma: no cover
    """The planner's own estimate of a matmul (for experiments)."""
    return plan_matmul(graph, m, k, n, as_type(dtype)).estimate
