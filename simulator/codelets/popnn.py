"""popnn's vertices and their cycle estimates.

Non-linearities are ported from poplibs' estimators (graphcore/poplibs, branch sdk-release-2.0, MIT
licence: lib/popnn/popnnCycleEstimators.cpp and lib/popnn/PerformanceEstimation.hpp). The loss,
arg-max and accuracy vertices are not ported; they keep this simulator's own linear model.
"""

from __future__ import annotations

import numpy as np

from .base import VertexType, fields, work_array
from .popops import vector_width

WORKERS = 6

#: popnn PerformanceEstimation.hpp, getNonLinearityOpCycles: (float, half) cycles per operation.
#: SOFTMAX has no supervisor estimate in poplibs; it is charged like GELU here.
OP_CYCLES = {"RELU": (1, 1), "SIGMOID": (5, 2), "TANH": (5, 1), "GELU": (10, 5), "SOFTMAX": (10, 5)}


def non_linearity_cycles(kind: str, dtype: str, elems, data_path_width: int = 64):
    """popnnCycleEstimators.cpp, NonLinearitySupervisor (aligned path)."""
    is_float = dtype == "float"
    op = OP_CYCLES[kind][0 if is_float else 1]
    elems = np.asarray(elems, dtype=np.int64)
    width = vector_width(dtype, data_path_width)
    vectors = -(-(elems // width) // WORKERS)
    rem = elems % width
    worker = 18 + np.where(vectors > 0, 2 + op + np.maximum(vectors - 1, 0) * 2 * op + 1 + op, 0)
    if is_float:
        worker = worker + 3 + np.where(rem & 1, 2 + op, 0)
    else:
        worker = worker + 4 + np.where(rem & 2, 2 + op, 0) + np.where(rem & 1, 3 + op, 0)
    return 9 + WORKERS * worker


def non_linearity_grad_cycles(dtype: str, elems, data_path_width: int = 64):
    """popnnCycleEstimators.cpp, NonLinearityGradSupervisor."""
    elems = np.asarray(elems, dtype=np.int64)
    width = vector_width(dtype, data_path_width)
    vectors = -(-(elems // width) // WORKERS)
    rem = elems % width
    worker = 20 + np.where(vectors > 0, 4 + np.maximum(vectors - 1, 0) * 3 + 1, 0)
    if dtype == "float":
        worker = worker + 4 + np.where(rem > 0, 4, 0)
    else:
        worker = worker + 6 + np.where(rem & 2, 5, 0) + np.where(rem & 1, 7, 0)
    return 9 + WORKERS * worker


def linear_worker_cycles(overhead: int, per_vector: float, dtype: str, elems):
    """This simulator's own model of a vertex poplibs' estimators are not ported for: an entry
    overhead plus a cost per data-path vector."""
    width = vector_width(dtype)
    return overhead + np.ceil(((np.asarray(elems, dtype=np.int64) + width - 1) // width) * per_vector).astype(np.int64)


def _same(cycles):
    cycles = np.asarray(cycles, dtype=np.int64)
    return cycles, cycles


def _non_linearity(grad: bool):
    def build(name, args):
        dtype, kind = args[0], args[1].rsplit("::", 1)[-1]
        if kind not in OP_CYCLES:
            return None
        if grad:

            def grad_cost(work, n, target):
                return _same(
                    np.broadcast_to(
                        non_linearity_grad_cycles(dtype, work_array(work, "elems", n), target.arch.data_path_width),
                        (n,),
                    )
                )

            return VertexType(
                name,
                fields(
                    ("outGrad", "in", dtype, "vector"),
                    ("out", "in", dtype, "vector"),
                    ("inGrad", "out", dtype, "vector"),
                ),
                supervisor=True,
                code_bytes=524,
                library="popnn",
                cost=grad_cost,
            )

        def cost(work, n, target):
            return _same(
                np.broadcast_to(
                    non_linearity_cycles(kind, dtype, work_array(work, "elems", n), target.arch.data_path_width), (n,)
                )
            )

        return VertexType(
            name,
            fields(("data", "inout", dtype, "vector")),
            supervisor=True,
            code_bytes=596,
            library="popnn",
            shared_data_bytes=128 if kind != "RELU" else 0,
            cost=cost,
        )

    return build


def _linear(field_spec, code_bytes: int, overhead: int, per_vector: float, shared_data: int = 0, cost_type=None):
    def build(name, args):
        dtype = args[0]
        spec = tuple(
            (fname, direction, dtype if ftype == "T" else args[1] if ftype == "U" else ftype, kind)
            for fname, direction, ftype, kind in field_spec
        )

        def cost(work, n, target):
            return _same(linear_worker_cycles(overhead, per_vector, cost_type or dtype, work_array(work, "elems", n)))

        return VertexType(
            name, fields(*spec), code_bytes=code_bytes, library="popnn", shared_data_bytes=shared_data, cost=cost
        )

    return build


_LOSS = (
    ("probs", "in", "T", "vector"),
    ("expected", "in", "T", "vector"),
    ("deltas", "out", "T", "vector"),
    ("transformed", "out", "T", "vector"),
)

VERTICES = {
    "popnn::NonLinearitySupervisor": (2, _non_linearity(False)),
    "popnn::NonLinearityGradSupervisor": (2, _non_linearity(True)),
    "popnn::LossSumSquaredTransform": (1, _linear(_LOSS, 276, 12, 3.0)),
    "popnn::LossCrossEntropyTransform": (1, _linear(_LOSS, 332, 16, 10.0, shared_data=64)),
    "popnn::ReduceMaxClassGather": (
        2,
        _linear(
            (
                ("activations", "in", "T", "vector"),
                ("maxValue", "out", "T", "vector"),
                ("maxIndex", "out", "unsigned int", "vector"),
            ),
            388,
            30,
            2.0,
        ),
    ),
    "popnn::CalcAccuracy": (
        1,
        _linear(
            (
                ("maxPerBatch", "in", "T", "vector"),
                ("expected", "in", "T", "vector"),
                ("numCorrect", "inout", "unsigned int", "scalar"),
            ),
            168,
            20,
            2.0,
            cost_type="int",
        ),
    ),
}
