"""popops' vertices and their cycle estimates, ported from poplibs' own estimators.

Sources (graphcore/poplibs, branch sdk-release-2.0, MIT licence): lib/popops/popopsCycleEstimators.cpp,
lib/popops/popopsCycleEstimators.hpp (per-operation loop costs) and
lib/poplibs_support/popopsPerformanceEstimation.cpp. The generic reductions (popops::Reduce) are not
ported: their estimator spans a whole file of specialisations; they keep this simulator's own
linear model, marked below.
"""

from __future__ import annotations

import numpy as np

from .base import VertexType, fields, work_array

WORKERS = 6

#: (cycles per loop, natural vector width, loop unroll factor) of an operation and type
#: (popopsCycleEstimators.hpp, binaryOpPerfInfo / unaryOpPerfInfo; the in-place tables are alike
#: for these operations except where the second entry differs).
BINARY_PERF = {
    ("ADD", "float"): (1, True, 0),
    ("ADD", "half"): (1, True, 0),
    ("SUBTRACT", "float"): (1, True, 0),
    ("SUBTRACT", "half"): (1, True, 0),
    ("MULTIPLY", "float"): (1, True, 0),
    ("MULTIPLY", "half"): (1, True, 0),
    ("DIVIDE", "float"): (10, False, 2),
    ("DIVIDE", "half"): (21, False, 4),
    ("MAXIMUM", "float"): (4, False, 2),
    ("MAXIMUM", "half"): (4, False, 4),
    ("MINIMUM", "float"): (4, False, 2),
    ("MINIMUM", "half"): (4, False, 4),
    ("POWER", "float"): (312, False, 1),
    ("POWER", "half"): (325, False, 1),
}
UNARY_PERF = {
    ("ABSOLUTE", "float"): (1, False, 0),
    ("ABSOLUTE", "half"): (1, False, 0),
    ("INVERSE", "float"): (8, False, 2),
    ("INVERSE", "half"): (19, False, 4),
    ("EXPONENT", "float"): (8, False, 2),
    ("EXPONENT", "half"): (6, False, 4),
    ("LOGARITHM", "float"): (14, False, 2),
    ("LOGARITHM", "half"): (6, False, 4),
    ("NEGATE", "float"): (3, False, 2),
    ("NEGATE", "half"): (3, False, 4),
    ("SQRT", "float"): (12, False, 2),
    ("SQRT", "half"): (27, False, 4),
    ("SQUARE", "float"): (3, False, 2),
    ("SQUARE", "half"): (3, False, 4),
    ("TANH", "float"): (12, False, 2),
    ("TANH", "half"): (4, False, 4),
    ("SIGMOID", "float"): (12, False, 2),
    ("SIGMOID", "half"): (6, False, 4),
    ("RSQRT", "float"): (10, False, 2),
    ("RSQRT", "half"): (23, False, 4),
}


def _perf(table: dict, op: str, dtype: str):
    """The table entry of (op, dtype); types the table here lacks (integers) are charged like float."""
    return table.get((op, dtype)) or table.get((op, "float"))


def vector_width(dtype: str, data_path_width: int = 64) -> int:
    """Elements of `dtype` in one data-path vector (poplar::Target::getVectorWidth)."""
    size = {"half": 2, "short": 2, "unsigned short": 2, "char": 1, "unsigned char": 1, "bool": 1}.get(dtype, 4)
    return data_path_width // (8 * size)


def basic_op_supervisor_overhead(scaled_ptr64: bool = False) -> int:
    """popopsPerformanceEstimation.cpp, basicOpSupervisorOverhead."""
    return 11 + (2 if scaled_ptr64 else 0)


def dynamic_slice_1d_cycles(dtype: str, region_size, data_path_width: int = 64):
    """popops' DynamicSlice1d (and DynamicUpdateSlice1d) of one sub-element: a supervisor entry,
    then each worker copies its share of the region a data-path vector a cycle after a fixed
    overhead (popopsCycleEstimators.cpp, getDynamicSlice1dEstimate)."""
    per_worker = (np.asarray(region_size) + WORKERS - 1) // WORKERS
    supervisor = basic_op_supervisor_overhead() + 1 + 6 + 1 + 6
    return supervisor + (41 + 27 + per_worker // vector_width(dtype, data_path_width)) * WORKERS


def basic_op_loop_cycles(elems, width: int, cycles_per_vector: int):
    """popopsPerformanceEstimation.cpp, basicOpLoopCycles."""
    return cycles_per_vector * (elems + width - 1) // width


def binary_op_inner_loop(op: str, dtype: str, elems, data_path_width: int = 64):
    """popopsCycleEstimators.cpp, binaryOpInnerLoopCycles (operations with assembly codelets)."""
    per_loop, natural, unroll = _perf(BINARY_PERF, op, dtype)
    if natural:
        width = vector_width(dtype, data_path_width)
        per_loop += 2
    else:
        width = unroll
    return -(-elems // width) * per_loop


def unary_op_inner_loop(op: str, dtype: str, elems, data_path_width: int = 64):
    """popopsCycleEstimators.cpp, unaryOpInnerLoopCycles."""
    per_loop, natural, unroll = _perf(UNARY_PERF, op, dtype)
    if not natural and unroll > 0:
        return -(-elems // unroll) * per_loop
    width = vector_width(dtype, data_path_width) if natural else 1
    return basic_op_loop_cycles(elems, width, per_loop + 4)


def binary_op_1d_supervisor_cycles(op: str, dtype: str, elems, in_place: bool, data_path_width: int = 64):
    """popopsCycleEstimators.cpp, BinaryOp1DSupervisor and getBinaryOp1DInPlaceSupervisorEstimate."""
    per_worker = -(-np.asarray(elems, dtype=np.int64) // WORKERS)
    base = 58 if in_place else (41 if dtype == "float" else 32)
    return (
        WORKERS * (base + binary_op_inner_loop(op, dtype, per_worker, data_path_width)) + basic_op_supervisor_overhead()
    )


def unary_op_1d_supervisor_cycles(op: str, dtype: str, elems, in_place: bool, data_path_width: int = 64):
    """popopsCycleEstimators.cpp, UnaryOp1DSupervisor and UnaryOp1DInPlaceSupervisor."""
    per_worker = -(-np.asarray(elems, dtype=np.int64) // WORKERS)
    base = 55 if in_place else 28
    return (
        WORKERS * (base + unary_op_inner_loop(op, dtype, per_worker, data_path_width))
        + 9
        + basic_op_supervisor_overhead()
    )


def scaled_add_supervisor_cycles(
    a_type: str, b_type: str, elems, constant: bool = True, mem_constrained: bool = False, data_path_width: int = 64
):
    """popopsCycleEstimators.cpp, scaledArithmeticSupervisorCycleEstimate (ADD, float/half data):
    a supervisor preamble, then the slowest of six workers sharing the vectors."""
    elems = np.asarray(elems, dtype=np.int64)
    width = vector_width(a_type, data_path_width)
    vectors = elems // width
    remaining = elems % width
    per_worker = vectors // WORKERS
    extra = vectors % WORKERS
    sup = 21 + basic_op_supervisor_overhead() + np.where(remaining == 0, 7, 13) + 12
    if not constant:
        sup = sup + 6
    if a_type == "half" and b_type == "float":
        inner = 2 if mem_constrained else 3
        n = per_worker + (extra > 0)
        loop = np.where(n == 0, 0, np.where(n < 3, 8 + 4 * np.maximum(n - 1, 0), 16 + inner * np.maximum(n - 3, 0)))
        worker = (
            16
            + loop
            + 2
            + 1
            + np.where(remaining > 0, 5 + np.where(remaining >= 2, 7, 0) + np.where(remaining == 3, 6, 0), 0)
            + 1
        )
    else:
        inner = 2 if mem_constrained else (3 if a_type == b_type else 4)
        n = per_worker + (extra > 0)
        loop = np.where(n > 0, 6 + inner * np.maximum(n - 1, 0), 0)
        if a_type == "float":
            tail = np.where(remaining > 0, 8, 0)
        else:
            tail = np.where(remaining > 0, 5 + np.where(remaining >= 2, 7, 0) + np.where(remaining == 3, 6, 0), 0)
        worker = 15 + loop + 2 + 1 + tail + 1
    return sup + worker * WORKERS


def scaled_add_2d_cycles(
    dtype: str, elems, regions, constant: bool = True, mem_constrained: bool = False, data_path_width: int = 64
):
    """popopsCycleEstimators.cpp, ScaledArithmetic2DCycleEstimate (ADD), with the elements of a
    vertex spread evenly over its regions."""
    elems = np.asarray(elems, dtype=np.int64)
    regions = np.maximum(np.asarray(regions, dtype=np.int64), 1)
    grain = vector_width(dtype, data_path_width)
    inner = 2 if mem_constrained else 3
    row = elems // regions
    rem = row % grain
    per_row = 15 + np.where(row // grain != 0, 5, 0) + (row // grain) * inner
    per_row = per_row + (
        np.where(rem != 0, 7, 0)
        if dtype == "float"
        else np.where(rem > 0, 4, 0) + np.where(rem >= 2, 6, 0) + np.where(rem % 2 == 1, 7, 0)
    )
    return 9 + (0 if constant else 1) + regions * per_row


def cast_worker_cycles(from_type: str, to_type: str, elems, data_path_width: int = 64):
    """popopsCycleEstimators.cpp, castWorkerCycles (floating-point conversions)."""
    load = vector_width(from_type, data_path_width)
    store = vector_width(to_type, data_path_width)
    aux = from_type in ("half", "float") and to_type in ("half", "float")
    width = min(load * 2, store) if aux else 1
    per_vector = max(width // min(width, load), width // min(width, store)) + (0 if aux else 1)
    elems = np.asarray(elems, dtype=np.int64)
    remainder_bits = int(np.ceil(np.log2(width))) if width > 1 else 0
    rem = elems % width
    tail = sum(1 + 2 * ((rem >> b) & 1) for b in range(remainder_bits)) if remainder_bits else 0
    return 19 + per_vector * (elems // width) + tail


def cast_supervisor_cycles(from_type: str, to_type: str, elems, data_path_width: int = 64):
    """popopsCycleEstimators.cpp, CastSupervisor: the busiest worker's share, 23 cycles of entry,
    times six, plus 19 of supervisor code."""
    per_worker = -(-np.asarray(elems, dtype=np.int64) // WORKERS)
    return 19 + WORKERS * (cast_worker_cycles(from_type, to_type, per_worker, data_path_width) + 23)


def fill_cycles(dtype: str, elems, regions, data_path_width: int = 64):
    """A worker writing `elems` elements in `regions` runs, one 64-bit store per cycle, in the shape
    of popopsCycleEstimators.cpp, Fill/Fill2d (20 cycles of entry, 4 per region)."""
    width = vector_width(dtype, data_path_width)
    return 20 + 4 * np.asarray(regions, dtype=np.int64) + -(-np.asarray(elems, dtype=np.int64) // width)


def transpose2d_cycles(dtype: str, rows, cols, matrices):
    """Worker cycles of popops::Transpose2d (popopsCycleEstimators.cpp, Transpose2d)."""
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    matrices = np.asarray(matrices, dtype=np.int64)
    if dtype in ("float", "int", "unsigned int"):
        fast = (rows % 2 == 0) & (cols % 2 == 0) & (cols // 2 < 4096) & (rows * (cols - 2) // 2 < 512) & (rows < 512)
        return np.where(
            fast,
            27 + matrices * (11 + (rows // 2) * (6 + 3 * (cols // 2 - 1))),
            13 + matrices * (8 + cols * (5 + (rows * 4) // 2)),
        )
    wide = (rows % 4 == 0) & (cols % 4 == 0) & (cols >= 8) & (cols // 4 < 4096) & (1 + 3 * (cols // 4) < 512)
    narrow = (rows % 4 == 0) & (cols == 4) & (rows // 4 < 4096) & (1 + 3 * (rows // 4) < 512)
    return np.where(
        wide,
        39 + matrices * (12 + (rows // 4) * (15 + 4 * (cols // 4 - 2))),
        np.where(
            narrow,
            np.where(rows == 4, 34 + 15 * matrices, 30 + matrices * (17 + (20 + 4 * (rows // 4 - 2)))),
            15 + matrices * (8 + cols * (5 + (rows * 5) // 2)),
        ),
    )


def reduce_cycles(outputs, partials, dtype: str, per_output: int, overhead: int, data_path_width: int = 64):
    """popops::Reduce and ScaledReduce: not ported (see the module docstring). This simulator's own
    model: an entry overhead, a cost per output and one cycle per data-path vector of partials."""
    width = vector_width(dtype, data_path_width)
    outputs = np.asarray(outputs, dtype=np.int64)
    partials = np.asarray(partials, dtype=np.int64)
    return overhead + outputs * per_output + (outputs * partials + width - 1) // width


# -- cost models and the vertex table -------------------------------------------------------------


def _same(cycles):
    cycles = np.asarray(cycles, dtype=np.int64)
    return cycles, cycles


def _elems_cost(fn):
    def cost(work, n, target):
        return _same(np.broadcast_to(fn(work_array(work, "elems", n), target.arch.data_path_width), (n,)))

    return cost


def _binary(in_place: bool):
    def build(name, args):
        op = args[0].rsplit("::", 1)[-1]
        dtype = args[1]
        if _perf(BINARY_PERF, op, dtype) is None:
            return None
        spec = (
            (("in1Out", "inout", dtype, "vector"), ("in2", "in", dtype, "vector"))
            if in_place
            else (("in1", "in", dtype, "vector"), ("in2", "in", dtype, "vector"), ("out", "out", dtype, "vector"))
        )
        return VertexType(
            name,
            fields(*spec),
            supervisor=True,
            code_bytes=248 if in_place else 264,
            library="popops",
            shared_code_bytes=96,
            cost=_elems_cost(lambda e, w: binary_op_1d_supervisor_cycles(op, dtype, e, in_place, w)),
        )

    return build


def _unary(name, args):
    op = args[0].rsplit("::", 1)[-1]
    dtype = args[1]
    if _perf(UNARY_PERF, op, dtype) is None:
        return None
    return VertexType(
        name,
        fields(("in", "in", dtype, "vector"), ("out", "out", dtype, "vector")),
        supervisor=True,
        code_bytes=236,
        library="popops",
        shared_code_bytes=96,
        cost=_elems_cost(lambda e, w: unary_op_1d_supervisor_cycles(op, dtype, e, False, w)),
    )


def _scaled_add_supervisor(name, args):
    a_type, b_type = args[0], args[1]
    constant = args[-1] == "true"
    # a constant scale is a parameter; otherwise the vertex reads it, of A's type, from a tensor
    scale = ("scaleB", "param", "float", "scalar") if constant else ("scaleB", "in", a_type, "scalar")
    return VertexType(
        name,
        fields(("A", "inout", a_type, "vector"), ("B", "in", b_type, "vector"), scale),
        supervisor=True,
        code_bytes=292,
        library="popops",
        shared_code_bytes=96,
        cost=_elems_cost(lambda e, w: scaled_add_supervisor_cycles(a_type, b_type, e, constant, False, w)),
    )


def _axpby_supervisor(name, args):
    dtype = args[0]
    constant = args[-1] == "true"
    return VertexType(
        name,
        fields(
            ("A", "inout", dtype, "vector"),
            ("B", "in", dtype, "vector"),
            ("scaleA", "param", "float", "scalar"),
            ("scaleB", "param", "float", "scalar"),
        ),
        supervisor=True,
        code_bytes=340,
        library="popops",
        shared_code_bytes=96,
        # aXPlusbYSupervisor: scaledArithmeticSupervisorCycleEstimate plus 4 (constant) or 6 cycles
        cost=_elems_cost(
            lambda e, w: scaled_add_supervisor_cycles(dtype, dtype, e, constant, False, w) + (4 if constant else 6)
        ),
    )


def _scaled_add_2d(name, args):
    dtype = args[0]
    constant = args[-1] == "true"

    def cost(work, n, target):
        return _same(
            scaled_add_2d_cycles(
                dtype,
                work_array(work, "elems", n),
                work_array(work, "regions", n),
                constant,
                False,
                target.arch.data_path_width,
            )
        )

    return VertexType(
        name,
        fields(("A", "inout", dtype, "vectorlist"), ("B", "in", dtype, "vectorlist")),
        code_bytes=318,
        library="popops",
        shared_code_bytes=96,
        cost=cost,
    )


def _cast(name, args):
    src, dst = args[0], args[1]
    return VertexType(
        name,
        fields(("src", "in", src, "vector"), ("dst", "out", dst, "vector")),
        supervisor=True,
        code_bytes=228,
        library="popops",
        cost=_elems_cost(lambda e, w: cast_supervisor_cycles(src, dst, e, w)),
    )


def _reduce(scaled: bool):
    def build(name, args):
        if len(args) != 5:
            return None
        t_in, t_out = args[1], args[2]
        spec = [("partials", "in", t_in, "vectorlist"), ("out", "inout" if scaled else "out", t_out, "vector")]
        if scaled:
            spec.append(("k", "param", "float", "scalar"))

        def cost(work, n, target):
            return _same(
                reduce_cycles(
                    work_array(work, "outputs", n),
                    work_array(work, "partials", n),
                    t_in,
                    6 if scaled else 4,
                    24 if scaled else 20,
                    target.arch.data_path_width,
                )
            )

        return VertexType(
            name, fields(*spec), code_bytes=420 if scaled else 388, library="popops", shared_code_bytes=64, cost=cost
        )

    return build


def _fill(kind: str):
    def build(name, args):
        dtype = args[0]

        def cost(work, n, target):
            return _same(
                fill_cycles(
                    dtype,
                    work_array(work, "elems", n),
                    np.maximum(work_array(work, "regions", n), 1),
                    target.arch.data_path_width,
                )
            )

        return VertexType(
            name,
            fields(("out", "out", dtype, "vectorlist" if kind == "Zero2d" else "vector")),
            code_bytes=132,
            library="popops",
            cost=cost,
        )

    return build


def _transpose2d(name, args):
    dtype = args[0]

    def cost(work, n, target):
        return _same(
            transpose2d_cycles(
                dtype,
                np.maximum(work_array(work, "rows", n), 1),
                np.maximum(work_array(work, "cols", n), 1),
                np.maximum(work_array(work, "matrices", n), 1),
            )
        )

    return VertexType(
        name,
        fields(("src", "in", dtype, "vectorlist"), ("dst", "out", dtype, "vectorlist")),
        code_bytes=356,
        library="popops",
        cost=cost,
    )


def _one_hot(name, args):
    index_type, dtype = args[0], args[1]

    def cost(work, n, target):
        # EncodeOneHot: not ported; zeroing the output then one store per index
        return _same(
            fill_cycles(dtype, work_array(work, "elems", n), 1, target.arch.data_path_width)
            + work_array(work, "in_elems", n)
        )

    return VertexType(
        name,
        fields(("indices", "in", index_type, "vector"), ("out", "out", dtype, "vector")),
        code_bytes=304,
        library="popops",
        cost=cost,
    )


def _dynamic_slice(update: bool):
    def build(name, args):
        dtype = args[0]
        return VertexType(
            name,
            fields(
                ("offset", "in", "unsigned int", "scalar"),
                ("baseT", "inout" if update else "in", dtype, "vector"),
                ("subT", "in" if update else "out", dtype, "vector"),
            ),
            supervisor=True,
            code_bytes=264,
            library="popops",
            cost=_elems_cost(lambda e, w: dynamic_slice_1d_cycles(dtype, e, w)),
        )

    return build


VERTICES = {
    "popops::DynamicSlice1d": (1, _dynamic_slice(False)),
    "popops::DynamicUpdateSlice1d": (1, _dynamic_slice(True)),
    "popops::ScaledAddSupervisor": (3, _scaled_add_supervisor),
    "popops::aXPlusbYSupervisor": (3, _axpby_supervisor),
    "popops::ScaledAdd2D": (2, _scaled_add_2d),
    "popops::BinaryOp1DSupervisor": (2, _binary(False)),
    "popops::BinaryOp1DInPlaceSupervisor": (2, _binary(True)),
    "popops::UnaryOp1DSupervisor": (2, _unary),
    "popops::Cast1DSupervisor": (2, _cast),
    "popops::Reduce": (5, _reduce(False)),
    "popops::ScaledReduce": (5, _reduce(True)),
    "popops::Fill": (1, _fill("Fill")),
    "popops::Zero": (1, _fill("Zero")),
    "popops::Zero2d": (1, _fill("Zero2d")),
    "popops::Transpose2d": (1, _transpose2d),
    "popops::EncodeOneHot": (2, _one_hot),
}
