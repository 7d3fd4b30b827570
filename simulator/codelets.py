"""Vertex types (codelets): fields, state and code sizes, and cycle-estimate models.

Library vertex types are named as Poplar and Poplibs name them, e.g.
``poplin::ConvPartial1x1Out<half,float,true,false>``. A user codelet is a subclass of `Vertex`
with a `fields` declaration, an optional `compute` (used when the engine runs with data) and
an optional `getCycleEstimate`.

Cycle semantics follow seed 003: a *worker* vertex estimate counts thread cycles (one
instruction issue slot out of every six tile cycles), so six workers of N cycles finish in 6N
tile cycles; a *supervisor* vertex occupies all six contexts and its estimate is in tile cycles.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import GraphError
from .types import FLOAT, Type, as_type

#: Worker stack reserved on every tile when no vertex needs more [bytes per worker].
DEFAULT_WORKER_STACK = 448
#: Supervisor stack on every tile [bytes].
SUPERVISOR_STACK = 480


@dataclass(frozen=True)
class Field:
    """One field of a vertex: an edge to tensor data, or a parameter set with setInitialValue."""

    name: str
    direction: str  # "in", "out", "inout" or "param"
    dtype: Type | None = None
    kind: str = "scalar"  # scalar, vector (Input<Vector<T>>), vectorlist (Vector<Input<...>>), deltan
    optional: bool = False

    @property
    def is_edge(self) -> bool:
        return self.direction != "param"

    @property
    def reads(self) -> bool:
        return self.direction in ("in", "inout")

    @property
    def writes(self) -> bool:
        return self.direction in ("out", "inout")

    @property
    def state_bytes(self) -> int:
        if self.kind == "scalar":
            return 4
        return 8


def Input(dtype=FLOAT, vector: bool = False, optional: bool = False, kind: str | None = None) -> Field:
    """An input field; `vector=True` declares Input<Vector<T>>."""
    return Field("", "in", as_type(dtype), kind or ("vector" if vector else "scalar"), optional)


def Output(dtype=FLOAT, vector: bool = False, optional: bool = False, kind: str | None = None) -> Field:
    """An output field; `vector=True` declares Output<Vector<T>>."""
    return Field("", "out", as_type(dtype), kind or ("vector" if vector else "scalar"), optional)


def InOut(dtype=FLOAT, vector: bool = False, optional: bool = False, kind: str | None = None) -> Field:
    """A field read and written by the vertex."""
    return Field("", "inout", as_type(dtype), kind or ("vector" if vector else "scalar"), optional)


def Param(dtype=FLOAT) -> Field:
    """A non-edge field whose value is set with Graph.setInitialValue."""
    return Field("", "param", as_type(dtype), "scalar", True)


#: A cost model: (work arrays, number of vertices, target) -> (cycles, active cycles) per vertex.
CostModel = Callable[[dict[str, np.ndarray], int, Any], tuple[np.ndarray, np.ndarray]]


@dataclass
class VertexType:
    """A vertex type: its name, fields, sizes, scheduling class and cycle model."""

    name: str
    fields: tuple[Field, ...]
    source: str = "Asm"  # Asm, CPlusPlus
    supervisor: bool = False
    code_bytes: int = 256
    worker_stack: int = 0
    copy: bool = False  # copy vertices keep copy descriptors
    shared_code_bytes: int = 0  # code shared with other vertices of the library, per tile
    shared_data_bytes: int = 0  # read-only tables shared per tile (e.g. non-linearity lookup tables)
    library: str = ""
    cost: CostModel | None = None
    compute: Callable | None = None  # per-vertex functional implementation (user codelets)
    estimator: Callable | None = None  # getCycleEstimate of a user codelet
    field_index: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.field_index = {f.name: i for i, f in enumerate(self.fields)}

    @property
    def state_bytes(self) -> int:
        """sizeof(vertex state): the class members."""
        return sum(f.state_bytes for f in self.fields) or 4

    def get_field(self, name: str) -> Field:
        try:
            return self.fields[self.field_index[name]]
        except KeyError:
            raise GraphError(
                f"vertex type {self.name!r} has no field {name!r}; its fields are "
                f"{', '.join(f.name for f in self.fields)}"
            ) from None


class Vertex:
    """Base class of user codelets (poplar::Vertex): declare `fields`, define `compute`.

    >>> class SumVertex(Vertex):                                      # doctest: +SKIP
    ...     fields = {"in": Input(FLOAT, vector=True), "out": Output(FLOAT)}
    ...     def compute(self, f):
    ...         f["out"][0] = f["in"].sum()
    ...         return True
    """

    fields: dict[str, Field] = {}
    source = "CPlusPlus"

    def compute(self, fields) -> bool:  # pragma: no cover - overridden
        return True

    @classmethod
    def vertex_type(cls) -> VertexType:
        """The VertexType this class declares."""
        declared = []
        for name, spec in cls.fields.items():
            if not isinstance(spec, Field):
                raise GraphError(f"codelet {cls.__name__}: field {name!r} must be Input(...), Output(...), "
                                 f"InOut(...) or Param(...), got {spec!r}")
            declared.append(Field(name, spec.direction, spec.dtype, spec.kind, spec.optional))
        instance = cls()
        compute = instance.compute if type(instance).compute is not Vertex.compute else None
        estimator = getattr(instance, "getCycleEstimate", None)
        return VertexType(
            name=getattr(cls, "name", cls.__name__),
            fields=tuple(declared),
            source=cls.source,
            code_bytes=200 + 48 * len(declared),
            worker_stack=64,
            library="user",
            compute=compute,
            estimator=estimator,
        )


# -- cost models --------------------------------------------------------------------------------


def _vector_width(dtype: str) -> int:
    return 4 if dtype in ("half", "short", "unsigned short") else 8 if dtype in ("char", "bool") else 2


def _work(work: dict[str, np.ndarray], key: str, n: int) -> np.ndarray:
    value = work.get(key)
    if value is None:
        return np.zeros(n, dtype=np.int64)
    return np.broadcast_to(np.asarray(value, dtype=np.int64), (n,))


def default_cost(work: dict[str, np.ndarray], n: int, target) -> tuple[np.ndarray, np.ndarray]:
    """Compiled C++ codelet without an estimate: 5 + one cycle per 4 inputs + one per output."""
    inputs = _work(work, "in_elems", n)
    outputs = _work(work, "out_elems", n)
    cycles = 5 + (inputs + 3) // 4 + outputs
    return cycles, cycles


def worker_linear(overhead: int, per_vector: float, dtype: str, per_region: int = 0) -> CostModel:
    """A worker vertex processing `elems` elements in vectors, plus a cost per region."""
    vw = _vector_width(dtype)

    def cost(work, n, target):
        elems = _work(work, "elems", n)
        regions = _work(work, "regions", n)
        cycles = overhead + per_region * regions + np.ceil(((elems + vw - 1) // vw) * per_vector).astype(np.int64)
        return cycles, cycles

    return cost


def supervisor_linear(overhead: int, per_vector: float, dtype: str) -> CostModel:
    """A supervisor vertex splitting `elems` elements over the six workers."""
    vw = _vector_width(dtype)

    def cost(work, n, target):
        elems = _work(work, "elems", n)
        vectors = (elems + vw - 1) // vw
        per_worker = (vectors + 5) // 6
        thread = np.ceil(per_worker * per_vector).astype(np.int64)
        cycles = overhead + 6 * thread
        active = overhead + np.ceil(vectors * per_vector).astype(np.int64)
        return cycles, np.minimum(active, cycles)

    return cost


def copy_cost(overhead: int, per_region: int, bytes_per_cycle: int) -> CostModel:
    def cost(work, n, target):
        nbytes = _work(work, "bytes", n)
        regions = _work(work, "regions", n)
        cycles = overhead + per_region * np.maximum(regions, 1) + (nbytes + bytes_per_cycle - 1) // bytes_per_cycle
        return cycles, cycles

    return cost


def memcpy_supervisor_cost(work, n, target):
    nbytes = _work(work, "bytes", n)
    per_worker = (nbytes + 47) // 48
    cycles = 32 + 6 * per_worker
    active = 32 + (nbytes + 7) // 8
    return cycles, np.minimum(active, cycles)


def conv_partial_cost(in_type: str, partials_type: str) -> CostModel:
    """poplin::ConvPartial1x1Out: the accumulating matrix product (AMP) units of a tile.

    Work per vertex: `out_elems` (output positions), `in_groups` and `out_groups` (channel
    groups of in_chans_per_group x out_chans_per_group).
    """

    def cost(work, n, target):
        macs = target.macs_per_cycle(in_type, partials_type)
        icpg = 16 if in_type == "half" else 8
        ocpg = 8 if in_type == "half" else 4
        out_elems = _work(work, "out_elems", n)
        passes = _work(work, "in_groups", n) * _work(work, "out_groups", n)
        elem_bytes = 2 if in_type == "half" else 4
        coeff_load = (icpg * ocpg * elem_bytes) // target.arch.conv_unit_coeff_load_bytes_per_cycle
        pipeline = 16 if in_type == "half" else 8
        per_pass = coeff_load + pipeline + (out_elems * icpg * ocpg + macs - 1) // macs
        cycles = 64 + passes * per_pass
        return cycles, cycles

    return cost


def conv_mac_cost(in_type: str) -> CostModel:
    """poplin::ConvPartialHorizontalMac: multiply-accumulates on the workers (no AMP)."""
    vw = _vector_width(in_type)

    def cost(work, n, target):
        macs = _work(work, "macs", n)
        per_worker = (macs // vw + 5) // 6
        cycles = 48 + 6 * per_worker
        return cycles, 48 + macs // vw

    return cost


def reduce_cost(overhead: int, per_output: int, dtype: str) -> CostModel:
    """Reductions: `outputs` outputs of `partials` inputs each."""
    vw = _vector_width(dtype)

    def cost(work, n, target):
        outputs = _work(work, "outputs", n)
        partials = _work(work, "partials", n)
        cycles = overhead + outputs * per_output + (outputs * partials + vw - 1) // vw
        return cycles, cycles

    return cost


def constant_cost(cycles_value: int, supervisor: bool = False) -> CostModel:
    def cost(work, n, target):
        cycles = np.full(n, cycles_value, dtype=np.int64)
        return cycles, cycles

    return cost


# -- the library --------------------------------------------------------------------------------

_NONLINEARITY_COST = {  # thread cycles per vector (forward, gradient)
    "RELU": (1.0, 2.0),
    "SIGMOID": (6.0, 4.0),
    "TANH": (6.0, 4.0),
    "GELU": (10.0, 12.0),
    "SOFTMAX": (8.0, 6.0),
}
_BINARY_COST = {"ADD": 2.0, "SUBTRACT": 2.0, "MULTIPLY": 2.0, "DIVIDE": 8.0, "MAXIMUM": 2.0, "MINIMUM": 2.0,
                "POWER": 12.0}
_UNARY_COST = {"NEGATE": 1.5, "ABSOLUTE": 1.5, "SQUARE": 2.0, "EXPONENT": 8.0, "SQRT": 8.0, "INVERSE": 8.0,
               "LOGARITHM": 9.0, "RSQRT": 9.0, "TANH": 6.0, "SIGMOID": 6.0}


def _fields(*specs: tuple[str, str, str, str]) -> tuple[Field, ...]:
    return tuple(Field(name, direction, as_type(dtype), kind) for name, direction, dtype, kind in specs)


def _build(name: str) -> VertexType | None:
    """The library vertex type called `name`, or None if the library has no such type."""
    m = re.fullmatch(r"poplin::ConvPartial1x1Out<(\w+),(\w+),(true|false),(true|false)>", name)
    if m:
        t_in, t_part = m.group(1), m.group(2)
        return VertexType(name, _fields(("in", "in", t_in, "deltan"), ("weights", "in", t_in, "vectorlist"),
                                        ("out", "out", t_part, "deltan")),
                          supervisor=True, code_bytes=1_824, library="poplin", cost=conv_partial_cost(t_in, t_part))
    m = re.fullmatch(r"poplin::ConvPartialnx1<(\w+),(\w+),(true|false),(true|false)>", name)
    if m:
        t_in, t_part = m.group(1), m.group(2)
        return VertexType(name, _fields(("in", "in", t_in, "deltan"), ("weights", "in", t_in, "vectorlist"),
                                        ("out", "out", t_part, "deltan")),
                          supervisor=True, code_bytes=2_496, library="poplin", cost=conv_partial_cost(t_in, t_part))
    m = re.fullmatch(r"poplin::ConvPartialHorizontalMac<(\w+),(\w+),(true|false)>", name)
    if m:
        t_in, t_part = m.group(1), m.group(2)
        return VertexType(name, _fields(("in", "in", t_in, "vectorlist"), ("weights", "in", t_in, "vectorlist"),
                                        ("out", "out", t_part, "vectorlist")),
                          supervisor=True, code_bytes=1_312, library="poplin", cost=conv_mac_cost(t_in))
    m = re.fullmatch(r"poplin::ReduceAdd<(\w+),(\w+)>", name)
    if m:
        return VertexType(name, _fields(("partials", "in", m.group(2), "vectorlist"), ("out", "out", m.group(1), "vector")),
                          code_bytes=412, library="poplin", cost=reduce_cost(16, 2, m.group(2)))
    m = re.fullmatch(r"poplin::Transpose2d<(\w+)>", name)
    if m:
        return VertexType(name, _fields(("src", "in", m.group(1), "vectorlist"), ("dst", "out", m.group(1), "vectorlist")),
                          code_bytes=356, library="poplin", cost=worker_linear(14, 2.0, m.group(1)))
    m = re.fullmatch(r"popops::ScaledAddSupervisor<(\w+),(\w+),(true|false)>", name)
    if m:
        return VertexType(name, _fields(("A", "inout", m.group(1), "vector"), ("B", "in", m.group(2), "vector"),
                                        ("scaleB", "param", "float", "scalar")),
                          supervisor=True, code_bytes=292, library="popops", shared_code_bytes=96,
                          cost=supervisor_linear(38, 2.0, m.group(1)))
    m = re.fullmatch(r"popops::ScaledAdd2D<(\w+),(true|false)>", name)
    if m:
        return VertexType(name, _fields(("A", "inout", m.group(1), "vectorlist"), ("B", "in", m.group(1), "vectorlist")),
                          code_bytes=318, library="popops", shared_code_bytes=96,
                          cost=worker_linear(18, 2.0, m.group(1), per_region=5))
    m = re.fullmatch(r"popops::BinaryOp1DSupervisor<popops::expr::BinaryOpType::(\w+),(\w+)>", name)
    if m:
        per_vector = _BINARY_COST.get(m.group(1))
        if per_vector is None:
            return None
        return VertexType(name, _fields(("in1", "in", m.group(2), "vector"), ("in2", "in", m.group(2), "vector"),
                                        ("out", "out", m.group(2), "vector")),
                          supervisor=True, code_bytes=264, library="popops", shared_code_bytes=96,
                          cost=supervisor_linear(30, per_vector, m.group(2)))
    m = re.fullmatch(r"popops::BinaryOp1DInPlaceSupervisor<popops::expr::BinaryOpType::(\w+),(\w+)>", name)
    if m:
        per_vector = _BINARY_COST.get(m.group(1))
        if per_vector is None:
            return None
        return VertexType(name, _fields(("in1Out", "inout", m.group(2), "vector"), ("in2", "in", m.group(2), "vector")),
                          supervisor=True, code_bytes=248, library="popops", shared_code_bytes=96,
                          cost=supervisor_linear(28, per_vector, m.group(2)))
    m = re.fullmatch(r"popops::UnaryOp1DSupervisor<popops::expr::UnaryOpType::(\w+),(\w+)>", name)
    if m:
        per_vector = _UNARY_COST.get(m.group(1))
        if per_vector is None:
            return None
        return VertexType(name, _fields(("in", "in", m.group(2), "vector"), ("out", "out", m.group(2), "vector")),
                          supervisor=True, code_bytes=236, library="popops", shared_code_bytes=96,
                          cost=supervisor_linear(28, per_vector, m.group(2)))
    m = re.fullmatch(r"popops::Cast1DSupervisor<(\w+),(\w+)>", name)
    if m:
        return VertexType(name, _fields(("src", "in", m.group(1), "vector"), ("dst", "out", m.group(2), "vector")),
                          supervisor=True, code_bytes=228, library="popops", cost=supervisor_linear(28, 2.0, "half"))
    m = re.fullmatch(r"popops::Reduce<popops::(Reduce\w+),(\w+),(\w+),(true|false),(\d)>", name)
    if m:
        return VertexType(name, _fields(("partials", "in", m.group(2), "vectorlist"), ("out", "out", m.group(3), "vector")),
                          code_bytes=388, library="popops", shared_code_bytes=64,
                          cost=reduce_cost(20, 4, m.group(2)))
    m = re.fullmatch(r"popops::ScaledReduce<popops::(Reduce\w+),(\w+),(\w+),(true|false),(\d)>", name)
    if m:
        return VertexType(name, _fields(("partials", "in", m.group(2), "vectorlist"), ("out", "inout", m.group(3), "vector"),
                                        ("k", "param", "float", "scalar")),
                          code_bytes=420, library="popops", shared_code_bytes=64,
                          cost=reduce_cost(24, 6, m.group(2)))
    m = re.fullmatch(r"popops::(Fill|Zero2d|Zero)<(\w+)>", name)
    if m:
        kind = "vectorlist" if m.group(1) == "Zero2d" else "vector"
        return VertexType(name, _fields(("out", "out", m.group(2), kind)), code_bytes=132, library="popops",
                          cost=worker_linear(8, 1.0, m.group(2), per_region=4))
    m = re.fullmatch(r"popops::EncodeOneHot<(\w+ ?\w*),(\w+)>", name)
    if m:
        return VertexType(name, _fields(("indices", "in", m.group(1), "vector"), ("out", "out", m.group(2), "vector")),
                          code_bytes=304, library="popops", cost=worker_linear(20, 1.0, m.group(2)))
    m = re.fullmatch(r"popnn::NonLinearitySupervisor<(\w+),popnn::NonLinearityType::(\w+)>", name)
    if m and m.group(2) in _NONLINEARITY_COST:
        per_vector = _NONLINEARITY_COST[m.group(2)][0] / (2 if m.group(1) == "half" else 1)
        return VertexType(name, _fields(("data", "inout", m.group(1), "vector")), supervisor=True, code_bytes=596,
                          library="popnn", shared_data_bytes=128 if m.group(2) != "RELU" else 0,
                          cost=supervisor_linear(36, per_vector, m.group(1)))
    m = re.fullmatch(r"popnn::NonLinearityGradSupervisor<(\w+),popnn::NonLinearityType::(\w+)>", name)
    if m and m.group(2) in _NONLINEARITY_COST:
        per_vector = _NONLINEARITY_COST[m.group(2)][1] / (2 if m.group(1) == "half" else 1)
        return VertexType(name, _fields(("outGrad", "in", m.group(1), "vector"), ("out", "in", m.group(1), "vector"),
                                        ("inGrad", "out", m.group(1), "vector")),
                          supervisor=True, code_bytes=524, library="popnn",
                          cost=supervisor_linear(36, per_vector, m.group(1)))
    m = re.fullmatch(r"popnn::LossSumSquaredTransform<(\w+)>", name)
    if m:
        return VertexType(name, _fields(("probs", "in", m.group(1), "vector"), ("expected", "in", m.group(1), "vector"),
                                        ("deltas", "out", m.group(1), "vector"), ("transformed", "out", m.group(1), "vector")),
                          code_bytes=276, library="popnn", cost=worker_linear(12, 3.0, m.group(1)))
    m = re.fullmatch(r"popnn::LossCrossEntropyTransform<(\w+)>", name)
    if m:
        return VertexType(name, _fields(("probs", "in", m.group(1), "vector"), ("expected", "in", m.group(1), "vector"),
                                        ("deltas", "out", m.group(1), "vector"), ("transformed", "out", m.group(1), "vector")),
                          code_bytes=332, library="popnn", shared_data_bytes=64, cost=worker_linear(16, 10.0, m.group(1)))
    m = re.fullmatch(r"popnn::ReduceMaxClassGather<(\w+),(\w+ ?\w*)>", name)
    if m:
        return VertexType(name, _fields(("activations", "in", m.group(1), "vector"), ("maxValue", "out", m.group(1), "vector"),
                                        ("maxIndex", "out", "unsigned int", "vector")),
                          code_bytes=388, library="popnn", cost=worker_linear(30, 2.0, m.group(1)))
    m = re.fullmatch(r"popnn::CalcAccuracy<(\w+ ?\w*)>", name)
    if m:
        return VertexType(name, _fields(("maxPerBatch", "in", m.group(1), "vector"), ("expected", "in", m.group(1), "vector"),
                                        ("numCorrect", "inout", "unsigned int", "scalar")),
                          code_bytes=168, library="popnn", cost=worker_linear(20, 2.0, "int"))
    if name == "poprand::SetSeedSupervisor":
        return VertexType(name, _fields(("seed", "in", "unsigned int", "vector")), supervisor=True, code_bytes=212,
                          library="poprand", cost=constant_cost(140))
    if name in ("poplar_rt::DstStridedCopyDA32", "poplar_rt::StridedCopyDA32"):
        per_region = 6 if name.startswith("poplar_rt::Dst") else 5
        return VertexType(name, _fields(("src", "in", "unsigned char", "vector"), ("dst", "out", "unsigned char", "vector")),
                          code_bytes=184, library="poplar_rt", copy=True, cost=copy_cost(10, per_region, 4))
    if name in ("poplar_rt::DstStridedCopy64BitMultiAccess", "poplar_rt::StridedCopy64BitMultiAccess"):
        return VertexType(name, _fields(("src", "in", "unsigned char", "vector"), ("dst", "out", "unsigned char", "vector")),
                          code_bytes=236, library="poplar_rt", copy=True, cost=copy_cost(12, 4, 8))
    if name == "poplar_rt::ShortMemcpy":
        return VertexType(name, _fields(("src", "in", "unsigned char", "vector"), ("dst", "out", "unsigned char", "vector")),
                          code_bytes=96, library="poplar_rt", copy=True, cost=copy_cost(12, 0, 4))
    if name == "poplar_rt::Memcpy64BitSupervisor":
        return VertexType(name, _fields(("src", "in", "unsigned char", "vector"), ("dst", "out", "unsigned char", "vector")),
                          supervisor=True, code_bytes=168, library="poplar_rt", copy=True, cost=memcpy_supervisor_cost)
    if name in ("poplar_rt::MemsetZero", "poplar_rt::MemsetZero64Bit", "poplar_rt::DstStridedMemsetZero64Bit"):
        return VertexType(name, _fields(("dst", "out", "unsigned char", "vector")), code_bytes=72,
                          library="poplar_rt", cost=copy_cost(8, 2, 8))
    return None


_CACHE: dict[str, VertexType] = {}

#: The libraries whose vertices a graph may use after the matching addCodelets call.
LIBRARIES = ("poplar_rt", "popops", "poplin", "popnn", "poprand")


def library_vertex(name: str) -> VertexType | None:
    """The library vertex type called `name` (cached), or None."""
    found = _CACHE.get(name)
    if found is None:
        found = _build(name)
        if found is not None:
            _CACHE[name] = found
    return found


# -- names of common library vertices ----------------------------------------------------------


def conv_partial_1x1(in_type: Type, partials_type: Type) -> str:
    return f"poplin::ConvPartial1x1Out<{in_type.name},{partials_type.name},true,false>"


def binary_op(op: str, dtype: Type, in_place: bool = False) -> str:
    kind = "BinaryOp1DInPlaceSupervisor" if in_place else "BinaryOp1DSupervisor"
    return f"popops::{kind}<popops::expr::BinaryOpType::{op},{dtype.name}>"


def unary_op(op: str, dtype: Type) -> str:
    return f"popops::UnaryOp1DSupervisor<popops::expr::UnaryOpType::{op},{dtype.name}>"


def non_linearity(kind: str, dtype: Type, grad: bool = False) -> str:
    base = "NonLinearityGradSupervisor" if grad else "NonLinearitySupervisor"
    return f"popnn::{base}<{dtype.name},popnn::NonLinearityType::{kind}>"


def reduce_vertex(op: str, in_type: Type, out_type: Type, scaled: bool = False, specialisation: int = 2) -> str:
    base = "ScaledReduce" if scaled else "Reduce"
    return f"popops::{base}<popops::{op},{in_type.name},{out_type.name},{'true' if scaled else 'false'},{specialisation}>"


def worker_cycles_to_text(cycles: int) -> str:  # pragma: no cover - debugging helper
    return f"{cycles:,} thread cycles ({math.ceil(cycles * 6):,} tile cycles alone)"
