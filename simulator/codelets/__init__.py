"""Vertex types (codelets) and their cycle-cost models, one module per library.

``REGISTRY`` maps a vertex template name (``poplin::ConvPartial1x1Out``) to the number of template
arguments it takes and a builder of its `VertexType`; `library_vertex` looks a full name up, e.g.
``poplin::ConvPartial1x1Out<half,float,true,false>``. The cost models of poplin, popops and popnn
reimplement poplibs' own cycle estimators; each function names the estimator it follows.

Cycle semantics follow seed 003: a *worker* vertex estimate counts thread cycles (one
instruction issue slot out of every six tile cycles), so six workers of N cycles finish in 6N
tile cycles; a *supervisor* vertex occupies all six contexts and its estimate is in tile cycles.
"""

from __future__ import annotations

from collections.abc import Callable

from ..types import Type
from . import poplar_rt, poplin, popnn, popops
from .base import (
    DEFAULT_WORKER_STACK,
    SUPERVISOR_STACK,
    CostModel,
    Field,
    InOut,
    Input,
    Output,
    Param,
    Vertex,
    VertexType,
    default_cost,
    split_template,
    work_array,
)

#: vertex template name -> (template arguments, builder(full name, arguments) -> VertexType | None)
REGISTRY: dict[str, tuple[int, Callable[[str, list[str]], VertexType | None]]] = {
    **poplin.VERTICES,
    **popops.VERTICES,
    **popnn.VERTICES,
    **poplar_rt.VERTICES,
}

#: The libraries whose vertices a graph may use after the matching addCodelets call.
LIBRARIES = ("poplar_rt", "popops", "poplin", "popnn", "poprand")

_CACHE: dict[str, VertexType] = {}


def library_vertex(name: str) -> VertexType | None:
    """The library vertex type called `name` (cached), or None if no library has it."""
    found = _CACHE.get(name)
    if found is not None:
        return found
    base, args = split_template(name)
    entry = REGISTRY.get(base)
    if entry is None:
        return None
    arity, build = entry
    if len(args) < arity or any(not a for a in args):
        return None
    found = build(name, args)
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
    return (
        f"popops::{base}<popops::{op},{in_type.name},{out_type.name},{'true' if scaled else 'false'},{specialisation}>"
    )


__all__ = [
    "DEFAULT_WORKER_STACK",
    "LIBRARIES",
    "REGISTRY",
    "SUPERVISOR_STACK",
    "CostModel",
    "Field",
    "InOut",
    "Input",
    "Output",
    "Param",
    "Vertex",
    "VertexType",
    "binary_op",
    "conv_partial_1x1",
    "default_cost",
    "library_vertex",
    "non_linearity",
    "reduce_vertex",
    "unary_op",
    "work_array",
]
