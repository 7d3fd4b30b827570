"""popops: element-wise operations, fills, casts, scaled additions and reductions."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from collections.abc import Sequence as _Seq

import numpy as np

from .. import codelets as lib
from ..errors import GraphError
from ..graph import Graph
from ..programs import Execute, Sequence, WriteUndef
from ..tensor import Tensor
from ..types import FLOAT, Type, as_type
from . import rearrange
from ._util import (
    add_vertices,
    elementwise_fields,
    linear_intervals,
    poplibs_op,
    require_codelets,
)

_BINARY_NUMPY = {
    "ADD": np.add,
    "SUBTRACT": np.subtract,
    "MULTIPLY": np.multiply,
    "DIVIDE": np.divide,
    "MAXIMUM": np.maximum,
    "MINIMUM": np.minimum,
    "POWER": np.power,
}
_UNARY_NUMPY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "NEGATE": np.negative,
    "ABSOLUTE": np.abs,
    "SQUARE": np.square,
    "EXPONENT": np.exp,
    "SQRT": np.sqrt,
    "INVERSE": lambda x: 1.0 / x,
    "LOGARITHM": np.log,
    "RSQRT": lambda x: 1.0 / np.sqrt(x),
    "TANH": np.tanh,
    "SIGMOID": lambda x: 1.0 / (1.0 + np.exp(-x)),
}


def addCodelets(graph: Graph) -> None:
    """Make the popops vertices available to the graph."""
    graph.addCodelets("popops")


def _functional(graph: Graph, cs, fn) -> None:
    graph.state.compute_sets[cs.id].functional.append(fn)


def broadcast_to(b: Tensor, shape) -> Tensor:
    """A view of `b` repeated to `shape` (numpy broadcasting rules)."""
    shape = tuple(shape)
    if b.shape == shape:
        return b
    try:
        index = np.broadcast_to(np.arange(b.numElements(), dtype=np.int64).reshape(b.shape), shape)
    except ValueError:
        raise GraphError(f"cannot broadcast a tensor of shape {list(b.shape)} to {list(shape)}") from None
    return b._from_index(np.ascontiguousarray(index), shape)


@poplibs_op("ElementWise")
def _binary(graph: Graph, op: str, a: Tensor, b, prog: Sequence, name: str, in_place: bool = False) -> Tensor:
    require_codelets(graph, "popops")
    if not isinstance(b, Tensor):
        b = graph.addConstant(a.dtype, [1], [b], f"{name}/constant")
        graph.setTileMapping(b, graph.tile(0))
    b_full = broadcast_to(b, a.shape)
    out = a if in_place else graph.clone(a, f"{name}/out")
    cs = graph.addComputeSet(f"{name}/Op/{op.title()}")
    if in_place:
        vertex_tiles, (out_f, in2) = elementwise_fields(graph, out, b_full)
        fields = {"in1Out": out_f, "in2": in2}
    else:
        vertex_tiles, (out_f, in1, in2) = elementwise_fields(graph, out, a, b_full)
        fields = {"in1": in1, "in2": in2, "out": out_f}
    add_vertices(graph, cs, lib.binary_op(op, a.dtype, in_place), vertex_tiles, fields)
    fn = _BINARY_NUMPY[op]
    shape = a.shape
    _functional(graph, cs, lambda data: data.write(out, fn(data.read(a), np.broadcast_to(data.read(b), shape))))
    prog.add(Execute(cs))
    return out


def add(graph, a, b, prog, debugPrefix: str = "add") -> Tensor:
    return _binary(graph, "ADD", a, b, prog, debugPrefix)


def sub(graph, a, b, prog, debugPrefix: str = "sub") -> Tensor:
    return _binary(graph, "SUBTRACT", a, b, prog, debugPrefix)


def mul(graph, a, b, prog, debugPrefix: str = "mul") -> Tensor:
    return _binary(graph, "MULTIPLY", a, b, prog, debugPrefix)


def div(graph, a, b, prog, debugPrefix: str = "div") -> Tensor:
    return _binary(graph, "DIVIDE", a, b, prog, debugPrefix)


def max(graph, a, b, prog, debugPrefix: str = "max") -> Tensor:
    return _binary(graph, "MAXIMUM", a, b, prog, debugPrefix)


def addInPlace(graph, a, b, prog, debugPrefix: str = "addInPlace") -> None:
    _binary(graph, "ADD", a, b, prog, debugPrefix, in_place=True)


def subInPlace(graph, a, b, prog, debugPrefix: str = "subInPlace") -> None:
    _binary(graph, "SUBTRACT", a, b, prog, debugPrefix, in_place=True)


def mulInPlace(graph, a, b, prog, debugPrefix: str = "mulInPlace") -> None:
    _binary(graph, "MULTIPLY", a, b, prog, debugPrefix, in_place=True)


def divInPlace(graph, a, b, prog, debugPrefix: str = "divInPlace") -> None:
    _binary(graph, "DIVIDE", a, b, prog, debugPrefix, in_place=True)


@poplibs_op("ElementWise")
def map_unary(graph: Graph, op: str, a: Tensor, prog: Sequence, debugPrefix: str = "") -> Tensor:
    """An element-wise unary operation: NEGATE, ABSOLUTE, SQUARE, EXPONENT, SQRT, INVERSE, ..."""
    require_codelets(graph, "popops")
    if op not in _UNARY_NUMPY:
        raise GraphError(f"unknown unary operation {op!r}; expected one of {', '.join(_UNARY_NUMPY)}")
    name = debugPrefix or op.lower()
    out = graph.clone(a, f"{name}/out")
    cs = graph.addComputeSet(f"{name}/Op/{op.title()}")
    vertex_tiles, (out_f, in_f) = elementwise_fields(graph, out, a)
    add_vertices(graph, cs, lib.unary_op(op, a.dtype), vertex_tiles, {"in": in_f, "out": out_f})
    fn = _UNARY_NUMPY[op]
    _functional(graph, cs, lambda data: data.write(out, fn(data.read(a).astype(np.float64))))
    prog.add(Execute(cs))
    return out


def exp(graph, a, prog, debugPrefix: str = "exp") -> Tensor:
    return map_unary(graph, "EXPONENT", a, prog, debugPrefix)


def neg(graph, a, prog, debugPrefix: str = "neg") -> Tensor:
    return map_unary(graph, "NEGATE", a, prog, debugPrefix)


def square(graph, a, prog, debugPrefix: str = "square") -> Tensor:
    return map_unary(graph, "SQUARE", a, prog, debugPrefix)


def sqrt(graph, a, prog, debugPrefix: str = "sqrt") -> Tensor:
    return map_unary(graph, "SQRT", a, prog, debugPrefix)


@poplibs_op("ScaledAdd")
def scaledAddTo(
    graph: Graph,
    A: Tensor,
    B: Tensor,
    scaleB: float | Tensor,
    prog: Sequence,
    debugPrefix: str = "scaledAdd",
    scaleA: float = 1.0,
) -> None:
    """A = scaleA * A + scaleB * B in place (popops::scaledAddTo), e.g. a weight update; with scaleA
    other than 1 it runs popops::aXPlusbYSupervisor vertices, as popops does.

    `scaleB` may be a one-element tensor, as poplibs' tools pass a learning rate (a constant of the
    weights' type): the vertices then read it as an input (ScaledAddSupervisor<..., false>), cast to
    A's type first if it is not, and the tensor is mapped to the graph's last tile, where popops
    leaves it (lib/popops/ScaledAdd.cpp, scaledAddTo(Tensor scaleB) and scaledArithmeticTensorImpl,
    which maps it to every tile in turn)."""
    require_codelets(graph, "popops")
    if A.shape != B.shape:
        raise GraphError(f"scaledAddTo needs tensors of one shape, got {list(A.shape)} and {list(B.shape)}")
    if isinstance(scaleB, Tensor):
        if scaleB.numElements() != 1:
            raise GraphError(f"scaledAddTo takes a scale tensor of one element, got shape {list(scaleB.shape)}")
        if scaleA != 1.0:
            raise GraphError("scaledAddTo takes a scale tensor only without scaleA (A + scaleB * B)")
        if scaleB.dtype != A.dtype:
            scaleB = cast(graph, scaleB, A.dtype, prog, f"{debugPrefix}/scaleB")
    # B is regrouped to A's grouping first when they are grouped along different dimensions
    # (lib/popops/ScaledAdd.cpp, scaledArithmeticTensorImpl: regroupIfBeneficial(B, A))
    B = rearrange.regroup_if_beneficial(graph, B, A, prog, f"{debugPrefix}/regroupB")
    cs = graph.addComputeSet(f"{debugPrefix}/AddTo")
    vertex_tiles, (a_f, b_f) = elementwise_fields(graph, A, B)
    fields = {"A": a_f, "B": b_f}
    if isinstance(scaleB, Tensor):
        scale = scaleB
        graph.setTileMapping(scale, graph.num_tiles - 1)
        n = vertex_tiles.size
        ones = np.ones(n, dtype=np.int64)
        fields["scaleB"] = (np.arange(n), ones * int(scale.vars[0]), ones * int(scale.starts[0]), ones)
        add_vertices(graph, cs, f"popops::ScaledAddSupervisor<{A.dtype},{B.dtype},false>", vertex_tiles, fields)

        def scale_b(data):
            return data.read(scale).reshape(())
    else:
        constant = scaleB
        params = {"scaleB": [constant] * vertex_tiles.size}
        vertex = f"popops::ScaledAddSupervisor<{A.dtype},{B.dtype},true>"
        if scaleA != 1.0:
            params["scaleA"] = [scaleA] * vertex_tiles.size
            vertex = f"popops::aXPlusbYSupervisor<{A.dtype},{A.dtype},true>"
        add_vertices(graph, cs, vertex, vertex_tiles, fields, params=params)

        def scale_b(data):
            return constant

    _functional(graph, cs, lambda data: data.write(A, scaleA * data.read(A) + scale_b(data) * data.read(B)))
    prog.add(Execute(cs))


@poplibs_op("Fill")
def fill(graph: Graph, t: Tensor, value, prog: Sequence, debugPrefix: str = "fill") -> None:
    require_codelets(graph, "popops")
    cs = graph.addComputeSet(f"{debugPrefix}/Fill")
    vertex_tiles, (out_f,) = elementwise_fields(graph, t)
    add_vertices(graph, cs, f"popops::Fill<{t.dtype}>", vertex_tiles, {"out": out_f})
    _functional(graph, cs, lambda data: data.write(t, np.full(t.shape, value)))
    prog.add(Execute(cs))


@poplibs_op("Zero")
def zero(graph: Graph, t: Tensor, prog: Sequence, debugPrefix: str = "zero") -> None:
    require_codelets(graph, "popops")
    cs = graph.addComputeSet(f"{debugPrefix}/Zero")
    vertex_tiles, (out_f,) = elementwise_fields(graph, t)
    add_vertices(graph, cs, f"popops::Zero<{t.dtype}>", vertex_tiles, {"out": out_f})
    _functional(graph, cs, lambda data: data.write(t, np.zeros(t.shape)))
    prog.add(Execute(cs))


@poplibs_op("Cast")
def cast(graph: Graph, t: Tensor, dtype, prog: Sequence, debugPrefix: str = "cast") -> Tensor:
    require_codelets(graph, "popops")
    dtype = as_type(dtype)
    out = graph.clone(t, f"{debugPrefix}/out", dtype=dtype)
    cs = graph.addComputeSet(f"{debugPrefix}/Cast")
    vertex_tiles, (dst, src) = elementwise_fields(graph, out, t)
    add_vertices(graph, cs, f"popops::Cast1DSupervisor<{t.dtype},{dtype}>", vertex_tiles, {"src": src, "dst": dst})
    _functional(graph, cs, lambda data: data.write(out, data.read(t).astype(dtype.numpy)))
    prog.add(Execute(cs))
    return out


# -- reductions ---------------------------------------------------------------------------------

_REDUCE = {
    "ADD": ("ReduceAdd", np.add),
    "MAX": ("ReduceMax", np.maximum),
    "MIN": ("ReduceMin", np.minimum),
    "SQUARE_ADD": ("ReduceSquareAdd", np.add),
}


def _group_reduce(values: np.ndarray, groups: np.ndarray, count: int, op: str) -> np.ndarray:
    if op in ("ADD", "SQUARE_ADD"):
        return np.bincount(groups, weights=values.astype(np.float64), minlength=count)
    init = -np.inf if op == "MAX" else np.inf
    out = np.full(count, init)
    (np.maximum if op == "MAX" else np.minimum).at(out, groups, values)
    return out


def _element_tiles(state, var: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The tile of every element given by (variable, index) arrays."""
    tiles = np.empty(var.size, dtype=np.int64)
    for v in np.unique(var).tolist():
        sel = np.flatnonzero(var == v)
        mapping = state.vars[v]
        mapping.finalize_mapping()
        tiles[sel] = mapping.map_tiles[np.searchsorted(mapping.map_ends, idx[sel], side="right")]
    return tiles


def _reduce_numpy(values: np.ndarray, dims, op: str) -> np.ndarray:
    axes = tuple(dims)
    if op in ("ADD", "SQUARE_ADD"):
        return values.sum(axis=axes)
    return values.max(axis=axes) if op == "MAX" else values.min(axis=axes)


@poplibs_op("Reduce")
def reduce(
    graph: Graph,
    a: Tensor,
    dims: _Seq[int],
    prog: Sequence,
    op: str = "ADD",
    out_type=None,
    debugPrefix: str = "reduce",
) -> Tensor:
    """Reduce `a` over `dims` (popops::reduce): partials on each tile, then across tiles."""
    require_codelets(graph, "popops")
    if op not in _REDUCE:
        raise GraphError(f"unknown reduction {op!r}; expected one of {', '.join(_REDUCE)}")
    dims = sorted({d % builtins.max(1, a.rank()) for d in dims})
    out_type = as_type(out_type) if out_type is not None else a.dtype
    kept = [d for d in range(a.rank()) if d not in dims]
    out_shape = tuple(a.shape[d] for d in kept)
    num_out = int(np.prod(out_shape)) if out_shape else 1
    numel = a.numElements()
    coords = np.indices(a.shape, dtype=np.int64).reshape(a.rank(), -1) if a.rank() else np.zeros((0, 1), np.int64)
    out_index = np.ravel_multi_index(coords[kept], out_shape) if kept else np.zeros(numel, dtype=np.int64)
    var, idx = a.element_arrays()
    tiles_el = _element_tiles(graph.state, var, idx)
    kind, fn = _REDUCE[op]
    pairs = tiles_el * num_out + out_index
    order = np.lexsort((idx, var, out_index, tiles_el))
    upairs, first, inverse_sorted = np.unique(pairs[order], return_index=True, return_inverse=True)
    pair_tile = upairs // num_out
    pair_out = upairs % num_out
    sources = np.bincount(pair_out, minlength=num_out)
    single_stage = bool(np.all(sources <= 1))
    out = graph.addVariable(out_type, out_shape, f"{debugPrefix}/out")
    out_var = int(out.vars[0]) if out.vars.size else None
    name1 = f"{debugPrefix}/Reduce" if single_stage else f"{debugPrefix}/ReduceOnTile"
    cs1 = graph.addComputeSet(name1)
    vertex_tiles, pair_vertex = np.unique(pair_tile, return_inverse=True)
    # stage-1 inputs: the elements on each tile, ordered by output, as runs
    el_vertex = pair_vertex[inverse_sorted]
    sv, si = var[order], idx[order]
    brk = np.flatnonzero((el_vertex[1:] != el_vertex[:-1]) | (sv[1:] != sv[:-1]) | (si[1:] != si[:-1] + 1)) + 1
    run_first = np.concatenate(([0], brk))
    run_len = np.diff(np.concatenate((run_first, [numel])))
    partial_fields = (el_vertex[run_first], sv[run_first], si[run_first], run_len)
    outputs_per_vertex = np.bincount(pair_vertex, minlength=vertex_tiles.size)
    partials_per_vertex = np.bincount(el_vertex, minlength=vertex_tiles.size)
    work = {
        "outputs": outputs_per_vertex,
        "partials": np.maximum(1, partials_per_vertex // np.maximum(outputs_per_vertex, 1)),
    }
    in_dtype = a.dtype
    if single_stage:
        # outputs live where their inputs are
        order_out = np.argsort(pair_out, kind="stable")
        graph.setTileMappingIntervals(
            out, pair_out[order_out], pair_out[order_out] + 1, graph_tiles_inverse(graph, pair_tile[order_out])
        )
        out_fields = (pair_vertex, np.full(pair_out.size, out_var), pair_out, np.ones(pair_out.size, dtype=np.int64))
        add_vertices(
            graph,
            cs1,
            lib.reduce_vertex(kind, in_dtype, out_type, specialisation=1),
            vertex_tiles,
            {"partials": partial_fields, "out": out_fields},
            work=work,
        )

        def run_single(data, a=a, out=out):
            values = data.read(a).astype(np.float64)
            if op == "SQUARE_ADD":
                values = values * values
            data.write(out, _reduce_numpy(values, dims, op).reshape(out_shape))

        _functional(graph, cs1, run_single)
        prog.add(Execute(cs1))
        return out
    partials = graph.addVariable(
        FLOAT if out_type.name in ("half", "float") else out_type, [upairs.size], f"{debugPrefix}/partials"
    )
    pvar = int(partials.vars[0])
    bounds = np.flatnonzero(np.diff(pair_tile)) + 1
    p_starts = np.concatenate(([0], bounds))
    p_ends = np.concatenate((bounds, [upairs.size]))
    graph.setTileMappingIntervals(partials, p_starts, p_ends, graph_tiles_inverse(graph, pair_tile[p_starts]))
    add_vertices(
        graph,
        cs1,
        lib.reduce_vertex(kind, in_dtype, partials.dtype, specialisation=2),
        vertex_tiles,
        {
            "partials": partial_fields,
            "out": (pair_vertex, np.full(upairs.size, pvar), np.arange(upairs.size), np.ones(upairs.size, np.int64)),
        },
        work=work,
    )
    # stage 2: outputs spread over the tiles, each reading its partials from every source tile
    o_starts, o_ends, o_tiles = linear_intervals(num_out, graph.num_tiles, 1, 1)
    graph.setTileMappingIntervals(out, o_starts, o_ends, o_tiles)
    out_tile_of = np.repeat(np.arange(o_starts.size), o_ends - o_starts)
    owner = out_tile_of[pair_out]
    order2 = np.lexsort((np.arange(upairs.size), owner))
    p_owner = owner[order2]
    p_pos = order2
    brk2 = np.flatnonzero((p_owner[1:] != p_owner[:-1]) | (p_pos[1:] != p_pos[:-1] + 1)) + 1
    f2 = np.concatenate(([0], brk2))
    l2 = np.diff(np.concatenate((f2, [p_pos.size])))
    cs2 = graph.addComputeSet(f"{debugPrefix}/Reduce")
    graph_out_tiles = np.asarray(graph.tile(o_tiles), dtype=np.int64)
    add_vertices(
        graph,
        cs2,
        lib.reduce_vertex(kind, partials.dtype, out_type, specialisation=2),
        graph_out_tiles,
        {
            "partials": (p_owner[f2], np.full(f2.size, pvar), p_pos[f2], l2),
            "out": (np.arange(o_starts.size), np.full(o_starts.size, out_var), o_starts, o_ends - o_starts),
        },
        work={
            "outputs": o_ends - o_starts,
            "partials": np.maximum(
                1, np.bincount(p_owner, minlength=o_starts.size) // np.maximum(o_ends - o_starts, 1)
            ),
        },
    )

    shape = a.shape

    def stage1(data, a=a, partials=partials):
        # the partial of (tile, output) pairs: recomputed here so the graph keeps no element arrays
        values = data.read(a).reshape(-1).astype(np.float64)
        if op == "SQUARE_ADD":
            values = values * values
        coords = np.indices(shape, dtype=np.int64).reshape(len(shape), -1)
        index = np.ravel_multi_index(coords[kept], out_shape) if kept else np.zeros(values.size, dtype=np.int64)
        tiles = _element_tiles(graph.state, *a.element_arrays())
        pair_keys = np.unique(tiles * num_out + index, return_inverse=True)[1]
        data.write(partials, _group_reduce(values, pair_keys, int(pair_keys.max()) + 1, op))

    def stage2(data, partials=partials, out=out):
        second = "ADD" if op == "SQUARE_ADD" else op
        values = data.read(partials).reshape(-1).astype(np.float64)
        data.write(out, _group_reduce(values, pair_out, num_out, second).reshape(out_shape))

    _functional(graph, cs1, stage1)
    _functional(graph, cs2, stage2)
    prog.add(Execute(cs1))
    prog.add(Execute(cs2))
    prog.add(WriteUndef(partials))
    return out


def graph_tiles_inverse(graph: Graph, tiles: np.ndarray) -> np.ndarray:
    """Virtual tile numbers of graph tiles (identity for a whole graph)."""
    if graph._tiles is None:
        return np.asarray(tiles, dtype=np.int64)
    lookup = {int(t): i for i, t in enumerate(graph._tiles.tolist())}
    try:
        return np.array([lookup[int(t)] for t in np.asarray(tiles).tolist()], dtype=np.int64)
    except KeyError as exc:
        raise GraphError(f"tile {exc.args[0]} is not part of this virtual graph") from None


def reduceSum(graph: Graph, a: Tensor, dims, prog: Sequence, debugPrefix: str = "reduce") -> Tensor:
    return reduce(graph, a, dims, prog, "ADD", debugPrefix=debugPrefix)


def dtype_of(value) -> Type:  # pragma: no cover - helper for callers
    return as_type(value)
