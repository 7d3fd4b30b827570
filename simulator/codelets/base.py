"""Vertex types (codelets): fields, state and code sizes; the base of user codelets.

Library vertex types are named as Poplar and Poplibs name them, e.g.
``poplin::ConvPartial1x1Out<half,float,true,false>``. A user codelet is a subclass of `Vertex`
with a `fields` declaration, an optional `compute` (used when the engine runs with data) and
an optional `getCycleEstimate`.

Cycle semantics follow seed 003: a *worker* vertex estimate counts thread cycles (one
instruction issue slot out of every six tile cycles), so six workers of N cycles finish in 6N
tile cycles; a *supervisor* vertex occupies all six contexts and its estimate is in tile cycles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..errors import GraphError
from ..types import FLOAT, Type, as_type

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

    fields: ClassVar[dict[str, Field]] = {}
    source = "CPlusPlus"

    def compute(self, fields) -> bool:  # pragma: no cover - overridden
        return True

    @classmethod
    def vertex_type(cls) -> VertexType:
        """The VertexType this class declares."""
        declared = []
        for name, spec in cls.fields.items():
            if not isinstance(spec, Field):
                raise GraphError(
                    f"codelet {cls.__name__}: field {name!r} must be Input(...), Output(...), "
                    f"InOut(...) or Param(...), got {spec!r}"
                )
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


# -- helpers shared by the cost models -----------------------------------------------------------


def work_array(work: dict[str, np.ndarray], key: str, n: int) -> np.ndarray:
    """Work item `key` of `n` vertices as an int64 array (zeros when absent)."""
    value = work.get(key)
    if value is None:
        return np.zeros(n, dtype=np.int64)
    return np.broadcast_to(np.asarray(value, dtype=np.int64), (n,))


def fields(*specs: tuple[str, str, str, str]) -> tuple[Field, ...]:
    """Fields from (name, direction, type, kind) tuples."""
    return tuple(Field(name, direction, as_type(dtype), kind) for name, direction, dtype, kind in specs)


def default_cost(work: dict[str, np.ndarray], n: int, target) -> tuple[np.ndarray, np.ndarray]:
    """Compiled C++ codelet without an estimate: 5 + one cycle per 4 inputs + one per output."""
    inputs = work_array(work, "in_elems", n)
    outputs = work_array(work, "out_elems", n)
    cycles = 5 + (inputs + 3) // 4 + outputs
    return cycles, cycles


def split_template(name: str) -> tuple[str, list[str]]:
    """``ns::Name<a,b<c>,d>`` -> (``ns::Name``, [``a``, ``b<c>``, ``d``])."""
    lt = name.find("<")
    if lt < 0:
        return name, []
    if not name.endswith(">"):
        return name, []
    args, depth, cur = [], 0, ""
    for ch in name[lt + 1 : -1]:
        if ch == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
            continue
        depth += (ch == "<") - (ch == ">")
        cur += ch
    args.append(cur.strip())
    return name[:lt], args
