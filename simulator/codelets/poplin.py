"""poplin's vertices and their cycle estimates, ported from poplibs' own estimators.

Sources (graphcore/poplibs, branch sdk-release-2.0, MIT licence): lib/poplin/PerformanceEstimation.hpp
and lib/poplin/poplinCycleEstimators.cpp. Each formula names the function it reimplements.
Estimates of supervisor vertices are in tile cycles; worker cycles inside them are thread cycles,
multiplied by the six worker contexts as poplibs does.

Work items a caller attaches to a batch of conv-partial vertices: ``out_elems`` (output field
positions of the vertex), ``in_groups`` and ``out_groups`` (channel groups of the vertex) and
optionally ``conv_groups``; the nx1 and HMAC vertices also take their worklists as
``kernel_rows`` [vertex, kernel row] and ``kernel_cols`` [kernel column, or vertex and kernel
column]: the output rows and columns each kernel position writes.
"""

from __future__ import annotations

import numpy as np

from .base import VertexType, fields, work_array

#: Worker contexts of a tile (poplar::Target::getNumWorkerContexts).
WORKERS = 6


def weights_per_conv_unit(in_type: str) -> int:
    """Input channels one conv unit takes per pass (poplar::Target::getWeightsPerConvUnit)."""
    return 16 if in_type == "half" else 8


def num_conv_units(arch, in_type: str, partials_type: str) -> int:
    """Conv units of a tile for this precision (PerformanceEstimation.hpp, getNumConvUnits)."""
    if in_type == "float":
        return arch.conv_units["fp32_fp32"]
    return arch.conv_units["fp16_fp32" if partials_type == "float" else "fp16_fp16"]


def coeff_load_bytes(arch, use_128bit_load: bool = False) -> int:
    """Bytes of weights loaded into the conv units per cycle: halved without 128-bit loads
    (poplinCycleEstimators.cpp, ConvPartial1x1Out: ``if (!use128BitConvUnitLoad) ... /= 2``;
    poplin's MatMul and Conv options default use128BitConvUnitLoad to false)."""
    full = arch.conv_unit_coeff_load_bytes_per_cycle
    return full if use_128bit_load else full // 2


def _worker_split(elems: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Contiguous split of output positions over the six workers: (small share, large share,
    whether some worker takes the large share)."""
    q = elems // WORKERS
    r = elems % WORKERS
    return q, q + 1, r > 0


def _amp_1x1_worker(n: np.ndarray, zeroing: bool, float_act: bool, float_part: bool, units: int) -> np.ndarray:
    """Thread cycles of one worker of the 1x1 AMP vertex processing `n` output positions
    (PerformanceEstimation.hpp, getConvPartial1x1SupervisorInnerLoopCycleEstimate)."""
    core = 8 if float_act else 4
    if units == 4:
        core //= 2
    zero_per_group = 8 if (float_act and units == 16) else 4 if float_part else 2
    common = (not float_act and units == 16) or float_part
    z = 1 if zeroing else 0
    tail = np.maximum(n - 3, 0) * core
    if float_act:
        c0, c1, c2 = 24, 47 + (2 + zero_per_group) * z, 46 + (2 + zero_per_group * 2) * z
        cn = 46 + (2 + zero_per_group * n) * z + tail
    elif common:
        extra = 2 if zeroing else 4
        c0, c1, c2 = 20 + extra, 31 + extra, 40 + extra
        cn = (38 if zeroing else 40) + tail
    else:
        c0, c1, c2 = 24, 39 + (2 + zero_per_group) * z, 40 + (2 + zero_per_group * 2) * z
        cn = 41 + (2 + zero_per_group * n) * z + tail
    cycles = np.where(n == 0, c0, np.where(n == 1, c1, np.where(n == 2, c2, cn)))
    # conv1x1WorkerRetentionSavings: half activations with float partials (or 16 conv units)
    saving = 10 if (not float_act and (float_part or units == 16)) else 0
    return cycles - saving


def _amp_1x1_inner(elems: np.ndarray, zeroing: bool, float_act: bool, float_part: bool, units: int) -> np.ndarray:
    """Tile cycles of the workers of one pass: the slowest worker times six, and at least the
    fastest plus 14 (getConvPartial1x1SupervisorInnerLoopCycleEstimate, "tag cost")."""
    small, large, uneven = _worker_split(elems)
    c_small = WORKERS * _amp_1x1_worker(small, zeroing, float_act, float_part, units)
    c_large = WORKERS * _amp_1x1_worker(large, zeroing, float_act, float_part, units)
    worst = np.where(uneven, np.maximum(c_small, c_large), c_small)
    best = np.where(uneven, np.minimum(c_small, c_large), c_small)
    return np.maximum(worst, best + 14)


def conv_partial_1x1_cycles(
    arch,
    in_type: str,
    partials_type: str,
    out_elems,
    in_groups,
    out_groups,
    conv_groups=1,
    use_128bit_load: bool = False,
    out_chans_per_group=None,
    conv_units: int | None = None,
) -> np.ndarray:
    """Tile cycles of poplin::ConvPartial1x1Out on `conv_units` conv units (default: all of the
    tile's for this precision); `out_chans_per_group` (default: one conv unit each) sets the output
    passes of a group
    (PerformanceEstimation.hpp, getConvPartial1x1SupervisorCycleEstimate and
    getConvPartial1x1SupervisorOuterLoopCycleEstimate; poplinCycleEstimators.cpp, ConvPartial1x1Out)."""
    float_act = in_type == "float"
    float_part = partials_type == "float"
    units = conv_units or num_conv_units(arch, in_type, partials_type)
    elems = np.asarray(out_elems, dtype=np.int64)
    in_g = np.maximum(np.asarray(in_groups, dtype=np.int64), 1)
    out_g = np.maximum(np.asarray(out_groups, dtype=np.int64), 1)
    conv_g = np.maximum(np.asarray(conv_groups, dtype=np.int64), 1)
    with_zero = _amp_1x1_inner(elems, True, float_act, float_part, units)
    without_zero = _amp_1x1_inner(elems, False, float_act, float_part, units)
    ocpg = units if out_chans_per_group is None else np.maximum(np.asarray(out_chans_per_group, dtype=np.int64), 1)
    passes = -(-ocpg // units)  # outputPassesPerGroup
    weight_bytes = weights_per_conv_unit(in_type) * (4 if float_act else 2)
    # getConvPartialAmpSupervisorWeightLoadCycleEstimate (filter height 1)
    loads = (units * weight_bytes) // coeff_load_bytes(arch, use_128bit_load)
    saving_total, saving_in = (10, 2) if (not float_act and (float_part or units == 16)) else (0, 0)
    return (
        50
        + WORKERS * (saving_total + saving_in * (in_g * conv_g - 1))
        + conv_g
        * (
            12
            + (in_g - 1) * (15 + 1 + out_g * (19 + passes * (6 + loads + without_zero)))
            + (10 + 1 + out_g * (19 + passes * (7 + loads + with_zero)))
        )
    )


def conv_partial_nx1_cycles(
    arch,
    in_type: str,
    partials_type: str,
    rows,
    cols,
    in_groups,
    out_groups,
    conv_groups=1,
    *,
    zero_elems,
    use_128bit_load: bool = False,
    filter_height: int = 1,
    out_chans_per_group: int | None = None,
    conv_units: int | None = None,
) -> np.ndarray:
    """Tile cycles of poplin::ConvPartialnx1 by its worklists: `rows` [vertex, kernel row] and
    `cols` [kernel column, or vertex and kernel column] are the output rows and columns each kernel
    position writes, none over padding (ConvVertices.cpp, createPartitions); `zero_elems` the
    output positions each vertex zeroes first. `filter_height` is the conv units' weight height
    (weightsPerConvUnit over inChansPerGroup, a kernel row position covering that many kernel rows)
    and `out_chans_per_group` (default: the conv units) is passed over the `conv_units` used
    (default: the tile's) (PerformanceEstimation.hpp, getConvPartialnx1SupervisorInnerLoopCycleEstimate,
    getConvPartialAmpSupervisorWeightLoadCycleEstimate and
    getConvPartialnx1SupervisorOuterLoopCycleEstimate; poplinCycleEstimators.cpp, ConvPartialnx1)."""
    float_act = in_type == "float"
    float_part = partials_type == "float"
    units = conv_units or num_conv_units(arch, in_type, partials_type)
    rows, cols = _worklists(rows, cols)
    if not rows.shape[0]:
        return np.zeros(0, dtype=np.int64)
    in_g = np.maximum(np.asarray(in_groups, dtype=np.int64), 1)
    out_g = np.maximum(np.asarray(out_groups, dtype=np.int64), 1)
    conv_g = np.maximum(np.asarray(conv_groups, dtype=np.int64), 1)
    weight_bytes = weights_per_conv_unit(in_type) * (4 if float_act else 2)
    coeff = coeff_load_bytes(arch, use_128bit_load)
    if filter_height == 4 and coeff > 8:
        coeff //= 2  # no 128-bit loads for a filter height of 4
    # the innermost loop: the weight loads and the loads that depend on the filter height
    load = {1: 15, 2: 46, 4: 60}.get(filter_height, 20 * filter_height)
    innermost = (units * weight_bytes) // coeff + load + 3
    ocpg = units if out_chans_per_group is None else int(out_chans_per_group)
    passes = max(1, ocpg // units)
    inner = 14 * rows.shape[1] + _sum_over_kernel(
        rows, cols, lambda r, c: _nx1_position_cycles(r, c, float_act, float_part, units, innermost, passes)
    )
    outer = (
        103
        + WORKERS * 6
        + WORKERS * (9 if float_part else 10)
        + conv_g * (out_g * 17 + (out_g - 1) * 6 + 1)
        + (conv_g - 1) * 6
        + 1
        + conv_g * (16 + in_g * (14 + out_g * (14 + inner)))
    )
    # getZeroSupervisorVertexCycleEstimate: partials zeroed by the workers first
    vector = 2 if float_part else 4
    per_worker = -(-(np.asarray(zero_elems, dtype=np.int64) * ocpg) // WORKERS)
    zero_worker = -(-per_worker // vector) + (14 if float_part else 15) - (9 if float_part else 10)
    return outer + zero_worker * WORKERS * out_g * conv_g


def _worklists(rows, cols) -> tuple[np.ndarray, np.ndarray]:
    """`rows` as [vertex, kernel row] and `cols` as [vertex, kernel column] (a view when shared)."""
    rows = np.atleast_2d(np.asarray(rows, dtype=np.int64))
    cols = np.asarray(cols, dtype=np.int64)
    return rows, np.broadcast_to(cols, (rows.shape[0], cols.shape[-1]))


def _sum_over_kernel(rows: np.ndarray, cols: np.ndarray, cost) -> np.ndarray:
    """Each vertex's sum over its kernel positions of `cost(rows, columns)` [..., rows, columns]:
    the cost is taken once per distinct rows and columns, and a vertex's kernel columns are
    counted by value, so that the work grows with the vertices times the kernel rows, not times
    the whole kernel."""
    row_values, row_index = np.unique(rows, return_inverse=True)
    if cols.strides[0] == 0:  # one set of kernel columns for every vertex
        col_sets, col_set = cols[:1], np.zeros(cols.shape[0], dtype=np.int64)
    else:
        col_sets, col_set = np.unique(cols, axis=0, return_inverse=True)
    col_values, col_index = np.unique(col_sets, return_inverse=True)
    counts = np.zeros((col_sets.shape[0], col_values.size), dtype=np.int64)
    np.add.at(counts, (np.arange(col_sets.shape[0])[:, None], col_index.reshape(col_sets.shape)), 1)
    per_row = cost(row_values[:, None], col_values[None, :]) @ counts.T  # [..., row value, column set]
    picked = per_row[..., row_index.reshape(rows.shape), col_set.reshape(-1, 1)]  # [..., vertex, kernel row]
    return picked.sum(axis=-1)


def _worker_partitions(rows, width) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The six workers' shares of `rows` rows of `width` outputs, as their partitions (worker axis
    first): the size of the first partition, of the last when it is another row (else 0), and the
    number of whole rows between. The outputs are cut into six contiguous shares, a partition per
    row a share touches (lib/poplin/ConvUtilInternal.cpp, partitionConvPartialByWorker)."""
    elems = rows * width
    bounds = (np.arange(WORKERS + 1).reshape((-1,) + (1,) * elems.ndim) * elems) // WORKERS
    start, stop = bounds[:-1], bounds[1:]
    w = np.maximum(width, 1)
    first_row, last_row = start // w, np.maximum(stop - 1, 0) // w
    one_row = first_row == last_row
    busy = stop > start
    first = np.where(busy, np.where(one_row, stop - start, (first_row + 1) * w - start), 0)
    last = np.where(busy & ~one_row, stop - last_row * w, 0)
    middle = np.where(busy & ~one_row, last_row - first_row - 1, 0)
    return first, last, middle


def _nx1_position_cycles(
    rows, width, float_act: bool, float_part: bool, units: int, innermost: int, passes: int = 1
) -> np.ndarray:
    """Tile cycles of one kernel position of the nx1 vertex, in `passes` output-channel passes,
    whose output is `rows` rows of `width` positions."""
    core = (8 if float_act else 4) // (2 if units == 4 else 1)
    first, last, middle = _worker_partitions(rows, width)

    def partition(n):
        c = np.where(
            n == 1,
            33 if float_act else 29,
            np.where(n == 2, 44 if float_act else 33, (45 if float_act else 34) + np.maximum(n - 3, 0) * core),
        )
        return np.where(n > 0, c - 6, 0)  # less convnx1WorkerRetentionSavings, per partition

    worker = (
        17 + (0 if float_part else 1) + partition(first) + partition(last) + middle * partition(np.maximum(width, 1))
    )
    return 12 + passes * (innermost + np.maximum(WORKERS * worker.max(axis=0), WORKERS * worker.min(axis=0) + 9))


def zero_supervisor_cycles(out_elems, groups, float_partials: bool, data_path_width: int = 64) -> np.ndarray:
    """Tile cycles of the workers zeroing `groups` groups of `out_elems` partials each before a conv
    vertex accumulates into them (PerformanceEstimation.hpp, getZeroSupervisorVertexCycleEstimate
    with zeroPartialsRetentionSavings; estimateZeroSupervisorCycles splits the elements evenly)."""
    vector = data_path_width // (32 if float_partials else 16)
    per_worker = -(-np.asarray(out_elems, dtype=np.int64) // WORKERS)
    worker = -(-per_worker // vector) + (14 if float_partials else 15) - (9 if float_partials else 10)
    return worker * WORKERS * np.maximum(np.asarray(groups, dtype=np.int64), 1)


def hmac_out_chans_per_group(partials_type: str) -> int:
    """Output channels of one ConvPartialHorizontalMac group: 1, or 2 with half partials, which
    the vertex processes in pairs (ConvVertexType.cpp, getConvVertexHMACCandidates)."""
    return 1 if partials_type == "float" else 2


def conv_partial_hmac_cycles(
    in_type: str,
    partials_type: str,
    rows,
    cols,
    in_chans,
    out_chans,
    in_groups=1,
    out_groups=1,
    *,
    zero_elems,
) -> np.ndarray:
    """Tile cycles of poplin::ConvPartialHorizontalMac: `in_groups` x `out_groups` groups of
    `in_chans` x `out_chans` channels (at most two with half partials, as poplin groups them), by
    its worklists as for the nx1 vertex (a worker adds up its kernel positions; the slowest sets
    the time), after zeroing `zero_elems` output positions
    (PerformanceEstimation.hpp, getConvPartialHorizontalMacSupervisorOuterLoopCycleEstimate,
    getConvPartialHorizontalMacSupervisorInnerLoopCycleEstimate,
    getConvPartialHorizontalMacCycleEstimate, getDenseDotProductCycles;
    poplinCycleEstimators.cpp, ConvPartialHorizontalMac: plus getZeroSupervisorVertexCycleEstimate)."""
    float_act = in_type == "float"
    float_part = partials_type == "float"
    rows, cols = _worklists(rows, cols)
    if not rows.shape[0]:
        return np.zeros(0, dtype=np.int64)
    ic = np.maximum(np.asarray(in_chans, dtype=np.int64), 1)
    oc = np.maximum(np.asarray(out_chans, dtype=np.int64), 1)
    in_g = np.maximum(np.asarray(in_groups, dtype=np.int64), 1)
    out_g = np.maximum(np.asarray(out_groups, dtype=np.int64), 1)
    inner = 1 + 2 + 3 + 1
    if float_act:
        dot = inner + np.where(ic % 2 == 0, ic, 2 * ic)
    elif float_part:
        dot = inner + np.where(ic % 4 == 0, ic // 4, ic)
    else:
        dot = np.where(ic % 4 == 0, 2 * 3 + 1 + 3 + 1 + ic // 4, 2 + 2 * 3 + 3 + 1 + ic)
    # per output of a partition; with half partials poplibs' estimate halves the output channels
    # again at each partition of a list (getConvPartialHorizontalMacCycleEstimate), which for the
    # two channels of a half group leaves one for the first partition and none after
    if not float_part and np.any(oc > 2):
        raise ValueError(f"HMAC with half partials takes output channels in groups of two, got {oc.max()}")
    per_first = 7 + (oc if float_part else oc // 2) * dot
    per_rest = 7 + (oc if float_part else oc // 4) * dot
    partitions, elems, firsts = _hmac_worker_sums(rows, cols)
    kernel = rows.shape[1] * cols.shape[1]
    worker = 16 * kernel + 19 * partitions + per_first * firsts + per_rest * (elems - firsts) + 16
    overhead = 58 if float_act else 63
    zero = zero_supervisor_cycles(np.asarray(zero_elems, dtype=np.int64) * oc, out_g, float_part)
    return (
        zero
        + overhead
        + WORKERS * (9 if float_part else 10)
        + 23
        + in_g * (15 + out_g * (10 + WORKERS * worker.max(axis=0)))
    )


def _hmac_worker_sums(rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each worker (axis 0) and vertex: its partitions, outputs and outputs of first
    partitions, over all the kernel positions of the vertex."""

    def tables(rows, width):
        first, last, middle = _worker_partitions(rows, width)
        partitions = (first > 0).astype(np.int64) + (last > 0) + middle
        return np.stack((partitions, first + last + middle * width, first))

    partitions, elems, firsts = _sum_over_kernel(rows, cols, tables)
    return partitions, elems, firsts


def outer_product_chans_per_group(arch, in_type: str) -> int:
    """Output channels of one OuterProduct group: the vector width of the input type
    (ConvVertexType.cpp, getConvVertexOuterProductCandidates: target.getVectorWidth)."""
    return arch.data_path_width // (32 if in_type == "float" else 16)


def outer_product_cycles(in_type: str, width, num_chans, chans_per_group) -> np.ndarray:
    """Thread cycles of one poplin::OuterProduct worker vertex: `width` inputs times `num_chans`
    weights in groups of `chans_per_group` (PerformanceEstimation.hpp, getOuterProductCycleEstimate,
    its fast and slow paths; the repeat-count limits are far above any group used here)."""
    w = np.asarray(width, dtype=np.int64)
    cpg = np.asarray(chans_per_group, dtype=np.int64)
    groups = -(-np.asarray(num_chans, dtype=np.int64) // cpg)
    if in_type == "float":
        fast = (cpg >= 6) & (cpg % 2 == 0)
        per = np.where(fast, 6 + (cpg - 6) // 2, 10 + cpg * 2)
        return 25 + groups * (11 + w * per)
    fast = (cpg >= 12) & (cpg % 4 == 0)
    per = np.where(fast, 6 + (cpg - 12) // 4, 10 + (cpg * 5) // 2)
    return 25 + groups * (10 + w * per)


def reduce_add_cycles(
    out_size,
    partials,
    out_float: bool,
    partials_float: bool,
    data_path_width: int = 64,
    single_input=False,
    constrain_partials: bool = False,
) -> np.ndarray:
    """Tile cycles of the poplin::ReduceAdd supervisor vertex summing `partials` partials into
    `out_size` outputs; `single_input` (a bool or an array) picks the single-input vertex, whose
    `partials` are the ones besides the initial partial read in place
    (PerformanceEstimation.hpp, getReduceCycleEstimate; poplinCycleEstimators.cpp, ReduceAdd)."""
    out_size = np.asarray(out_size, dtype=np.int64)
    partials = np.asarray(partials, dtype=np.int64)
    single = np.asarray(single_input, dtype=bool)
    acc_width = 4 if partials_float else 8
    in_path = data_path_width // ((4 if partials_float else 2) * 8)
    # the single-input vertex: one pass over the outputs, the initial partial loaded with them
    per_loop = acc_width // min(acc_width, in_path * (1 + int(constrain_partials)))
    loops = -(-(out_size // acc_width) // WORKERS)
    overhead = (8 if out_float else 7) if partials_float else (10 if out_float else 9)
    one_input = (20 + (per_loop * partials + overhead) * loops) * WORKERS + 33
    # the general vertex: a pointer load per partial as well
    per_loop = acc_width // min(acc_width, in_path) + 1
    loops = out_size // acc_width
    for bit in range(int(np.log2(acc_width))):
        loops = loops + ((out_size >> bit) & 1)
    per_worker = loops // WORKERS
    remainder = loops % WORKERS != 0
    ragged = (out_size & (acc_width - 1)) != 0
    cycles = 32 + np.where(remainder & ragged, 2 * partials + (13 if partials_float else 11), 0)
    per_worker = per_worker + (remainder & ~ragged)
    if out_float:
        cycles = cycles + (per_loop * partials + (7 if partials_float else 9)) * per_worker
    else:
        cycles = cycles + (per_loop * partials + (6 if partials_float else 8)) * per_worker
    return np.where(single, one_input, cycles * WORKERS)


def single_input_reduce(arch, out_size, partials, partials_float: bool) -> np.ndarray:
    """Whether poplin sums `partials` partials of `out_size` outputs on a tile with the
    single-input ReduceAdd vertex, the tile's own partial read in place: when the outputs are a
    multiple of the partials' accumulator width (4 floats or 8 halves) and the partials received
    from the other tiles, rounded up to whole memory elements, take under a sixteenth of the span
    of the tile's memory elements (lib/poplin/ConvReduce.cpp, reduce; ConvReducePlan.hpp,
    checkPartialsSizeForSingleInputReduce; enableFastReduce off, its default)."""
    out_size = np.asarray(out_size, dtype=np.int64)
    partials = np.asarray(partials, dtype=np.int64)
    element = arch.memory_element_bytes
    received = out_size * (partials - 1) * (4 if partials_float else 2)
    occupied = -(-received // element) * element
    span = (arch.bytes_per_tile // element - 1) * element  # first to last memory element offset
    return (partials > 1) & (out_size % (4 if partials_float else 8) == 0) & (occupied < span // 16)


def reduce_vertex_cycles(arch, out_size, partials, out_float: bool, partials_float: bool) -> np.ndarray:
    """Tile cycles of the ReduceAdd vertex poplin's reduce() picks for `partials` partials of
    `out_size` outputs on a tile: the single-input one where single_input_reduce allows it (one
    partial fewer to loop over), the general one otherwise."""
    single = single_input_reduce(arch, out_size, partials, partials_float)
    return reduce_add_cycles(
        out_size, partials - single, out_float, partials_float, arch.data_path_width, single_input=single
    )


# -- cost models (work dict -> cycles) and the vertex table -------------------------------------------


def _plan_setting(work, key: str, n: int) -> int | None:
    """A work item that one plan sets for a whole compute set (conv units, filter height, ...), or
    None where the compute set leaves it unset (0)."""
    value = work_array(work, key, n)
    return int(value.max()) if n and value.max() > 0 else None


def _amp_cost(in_type: str, partials_type: str, nx1: bool):
    def cost(work, n, target):
        arch = target.arch
        out_elems = work_array(work, "out_elems", n)
        in_groups, out_groups = work_array(work, "in_groups", n), work_array(work, "out_groups", n)
        ocpg = work_array(work, "out_chans_per_group", n)
        conv_groups = np.maximum(work_array(work, "conv_groups", n), 1)
        # the conv units a plan asked for (unset: all of the tile's)
        asked = _plan_setting(work, "conv_units", n)
        if nx1:
            cycles = conv_partial_nx1_cycles(
                arch,
                in_type,
                partials_type,
                work["kernel_rows"],
                work["kernel_cols"],
                in_groups,
                out_groups,
                conv_groups,
                zero_elems=out_elems,
                filter_height=_plan_setting(work, "filter_height", n) or 1,
                out_chans_per_group=_plan_setting(work, "out_chans_per_group", n),
                conv_units=asked,
            )
        else:
            units = asked or num_conv_units(arch, in_type, partials_type)
            cycles = conv_partial_1x1_cycles(
                arch,
                in_type,
                partials_type,
                out_elems,
                in_groups,
                out_groups,
                conv_groups,
                out_chans_per_group=np.where(ocpg > 0, ocpg, units),
                conv_units=units,
            )
        cycles = np.broadcast_to(np.asarray(cycles, dtype=np.int64), (n,))
        return cycles, cycles

    return cost


def _hmac_cost(in_type: str, partials_type: str):
    def cost(work, n, target):
        cycles = conv_partial_hmac_cycles(
            in_type,
            partials_type,
            work["kernel_rows"],
            work["kernel_cols"],
            work_array(work, "in_chans", n),
            work_array(work, "out_chans", n),
            np.maximum(work_array(work, "in_groups", n), 1),
            np.maximum(work_array(work, "out_groups", n), 1),
            zero_elems=work_array(work, "out_elems", n),
        )
        cycles = np.broadcast_to(np.asarray(cycles, dtype=np.int64), (n,))
        return cycles, cycles

    return cost


def _outer_product_cost(in_type: str):
    def cost(work, n, target):
        cycles = outer_product_cycles(
            in_type,
            work_array(work, "width", n),
            work_array(work, "chans", n),
            np.maximum(work_array(work, "chans_per_group", n), 1),
        )
        cycles = np.broadcast_to(np.asarray(cycles, dtype=np.int64), (n,))
        return cycles, cycles

    return cost


def _reduce_add_cost(out_type: str, partials_type: str):
    def cost(work, n, target):
        outputs = work_array(work, "outputs", n)
        partials = np.maximum(work_array(work, "partials", n), 1)
        cycles = reduce_vertex_cycles(target.arch, outputs, partials, out_type == "float", partials_type == "float")
        return cycles, cycles

    return cost


def _transpose_cost(dtype: str):
    from .popops import transpose2d_cycles

    def cost(work, n, target):
        rows = np.maximum(work_array(work, "rows", n), 1)
        cols = np.maximum(work_array(work, "cols", n), 1)
        matrices = np.maximum(work_array(work, "matrices", n), 1)
        cycles = transpose2d_cycles(dtype, rows, cols, matrices)
        return cycles, cycles

    return cost


def _conv_partial(kind: str, code_bytes: int):
    def build(name, args):
        t_in, t_part = args[0], args[1]
        return VertexType(
            name,
            fields(
                ("in", "in", t_in, "deltan"), ("weights", "in", t_in, "vectorlist"), ("out", "out", t_part, "deltan")
            ),
            supervisor=True,
            code_bytes=code_bytes,
            library="poplin",
            cost=_amp_cost(t_in, t_part, kind == "nx1"),
        )

    return build


def _hmac(name, args):
    t_in, t_part = args[0], args[1]
    return VertexType(
        name,
        fields(
            ("in", "in", t_in, "vectorlist"),
            ("weights", "in", t_in, "vectorlist"),
            ("out", "out", t_part, "vectorlist"),
        ),
        supervisor=True,
        code_bytes=1_312,
        library="poplin",
        cost=_hmac_cost(t_in, t_part),
    )


def _outer_product(name, args):
    # a worker vertex; out is a Vector<Output<Vector<T, ONE_PTR, 8>>>, not in interleaved memory
    # (lib/poplin/codelets/OuterProduct.cpp); code size by this table's rule for vertices without
    # a measured size (codelets/base.py: 200 bytes and 48 per field)
    t_in = args[0]
    return VertexType(
        name,
        fields(("in", "in", t_in, "vector"), ("weights", "in", t_in, "vector"), ("out", "out", t_in, "vectorlist")),
        code_bytes=200 + 48 * 3,
        library="poplin",
        cost=_outer_product_cost(t_in),
    )


def _reduce_add(name, args):
    t_out, t_part = args[0], args[1]
    return VertexType(
        name,
        fields(("partials", "in", t_part, "vectorlist"), ("out", "out", t_out, "vector")),
        supervisor=True,
        code_bytes=412,
        library="poplin",
        cost=_reduce_add_cost(t_out, t_part),
    )


def _transpose(name, args):
    return VertexType(
        name,
        fields(("src", "in", args[0], "vectorlist"), ("dst", "out", args[0], "vectorlist")),
        code_bytes=356,
        library="poplin",
        cost=_transpose_cost(args[0]),
    )


#: poplin vertex templates: name -> (number of template arguments, builder).
VERTICES = {
    "poplin::ConvPartial1x1Out": (4, _conv_partial("1x1", 1_824)),
    "poplin::ConvPartialnx1": (4, _conv_partial("nx1", 2_496)),
    "poplin::ConvPartialHorizontalMac": (3, _hmac),
    "poplin::OuterProduct": (1, _outer_product),
    "poplin::ReduceAdd": (2, _reduce_add),
    "poplin::Transpose2d": (1, _transpose),
}
