"""The graph: variables, tile mapping, compute sets, vertices, streams (poplar::Graph)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import codelets as lib
from .debug import DebugContexts, Scope
from .errors import GraphError
from .target import Target
from .tensor import Tensor, _as_shape
from .types import Type, as_type

if TYPE_CHECKING:
    from .compiler.regions import GlobalMapping


class Var:
    """An unlowered variable: a flat array of elements with a tile mapping."""

    __slots__ = (
        "id",
        "name",
        "dtype",
        "shape",
        "numel",
        "kind",
        "init",
        "debug",
        "pending",
        "map_starts",
        "map_ends",
        "map_tiles",
        "category",
        "interleaved",
        "always_live",
    )

    def __init__(
        self,
        var_id: int,
        name: str,
        dtype: Type,
        shape: tuple[int, ...],
        kind: str,
        debug: int,
        category: str = "variable",
    ) -> None:
        self.id = var_id
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.numel = math.prod(shape)
        self.kind = kind  # "variable" or "constant"
        self.init: np.ndarray | None = None
        self.debug = debug
        self.pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.map_starts: np.ndarray | None = None
        self.map_ends: np.ndarray | None = None
        self.map_tiles: np.ndarray | None = None
        self.category = category
        self.interleaved = False
        self.always_live = kind == "constant"

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.size

    def finalize_mapping(self) -> None:
        """Resolve the setTileMapping calls (the last call wins) into sorted intervals."""
        if self.map_starts is not None and not self.pending:
            return
        if self.map_starts is not None:
            self.pending.insert(0, self._mapping())
        if not self.pending:
            self.map_starts = self.map_ends = self.map_tiles = np.zeros(0, dtype=np.int64)
            return
        starts = np.concatenate([p[0] for p in self.pending])
        ends = np.concatenate([p[1] for p in self.pending])
        tiles = np.concatenate([p[2] for p in self.pending])
        self.pending = []
        order = np.argsort(starts, kind="stable")
        s, e, t = starts[order], ends[order], tiles[order]
        if s.size <= 1 or bool(np.all(s[1:] >= e[:-1])):
            keep = e > s
            s, e, t = s[keep], e[keep], t[keep]
        else:
            owner = np.full(self.numel, -1, dtype=np.int64)
            for a, b, tile in zip(starts.tolist(), ends.tolist(), tiles.tolist()):
                owner[a:b] = tile
            change = np.flatnonzero(owner[1:] != owner[:-1]) + 1
            s = np.concatenate(([0], change))
            e = np.concatenate((change, [self.numel]))
            t = owner[s]
            keep = t >= 0
            s, e, t = s[keep], e[keep], t[keep]
        # merge neighbours on the same tile
        if s.size > 1:
            join = (s[1:] == e[:-1]) & (t[1:] == t[:-1])
            if join.any():
                first = np.concatenate(([True], ~join))
                s = s[first]
                t = t[first]
                e = np.maximum.reduceat(e, np.flatnonzero(first))
        self.map_starts, self.map_ends, self.map_tiles = s.astype(np.int64), e.astype(np.int64), t.astype(np.int64)

    def _mapping(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(starts, ends, tiles) of the resolved mapping, which must exist."""
        assert self.map_starts is not None and self.map_ends is not None and self.map_tiles is not None
        return self.map_starts, self.map_ends, self.map_tiles

    def unmapped(self) -> list[tuple[int, int]]:
        """Element ranges without a tile."""
        self.finalize_mapping()
        starts, ends, _ = self._mapping()
        gaps = []
        pos = 0
        for a, b in zip(starts.tolist(), ends.tolist()):
            if a > pos:
                gaps.append((pos, a))
            pos = max(pos, b)
        if pos < self.numel:
            gaps.append((pos, self.numel))
        return gaps

    def bytes_by_tile(self, num_tiles: int) -> np.ndarray:
        self.finalize_mapping()
        starts, ends, tiles = self._mapping()
        return np.bincount(tiles, weights=(ends - starts) * self.dtype.size, minlength=num_tiles).astype(np.int64)


class VertexBatch:
    """Vertices of one type in one compute set, stored as arrays.

    `fields` maps a field name to (vertex index, variable, start, length) arrays: one row per
    contiguous region connected to that field of that vertex. `work` holds per-vertex arrays
    for the cycle model; `cycles` overrides the estimate per vertex.
    """

    __slots__ = ("vtype", "tiles", "fields", "work", "cycles", "params", "n")

    def __init__(
        self,
        vtype: lib.VertexType,
        tiles: np.ndarray,
        fields: dict,
        work: dict | None = None,
        cycles: np.ndarray | None = None,
        params: dict | None = None,
    ) -> None:
        self.vtype = vtype
        self.tiles = np.asarray(tiles, dtype=np.int64)
        self.n = int(self.tiles.size)
        self.fields = fields
        self.work = work or {}
        self.cycles = cycles
        self.params = params or {}


class _Single:
    __slots__ = ("vtype", "tile", "conns", "cycles", "params", "sizes")

    def __init__(self, vtype: lib.VertexType) -> None:
        self.vtype = vtype
        self.tile = -1
        self.conns: dict[str, Tensor] = {}
        self.cycles: int | None = None
        self.params: dict[str, Any] = {}
        self.sizes: dict[str, int] = {}


class ComputeSetDef:
    """A compute set: named, with vertex batches and single vertices."""

    __slots__ = ("id", "name", "debug", "batches", "singles", "functional", "origin")

    def __init__(self, cs_id: int, name: str, debug: int, origin: str = "user") -> None:
        self.id = cs_id
        self.name = name
        self.debug = debug
        self.batches: list[VertexBatch] = []
        self.singles: list[_Single] = []
        self.functional: list = []  # callables (store) -> None run when the engine runs with data
        self.origin = origin

    @property
    def num_vertices(self) -> int:
        return sum(b.n for b in self.batches) + len(self.singles)


class ComputeSet:
    """A handle on a compute set (poplar::ComputeSet)."""

    __slots__ = ("_state", "id")

    def __init__(self, state: GraphState, cs_id: int) -> None:
        self._state = state
        self.id = cs_id

    def getId(self) -> int:
        return self.id

    @property
    def name(self) -> str:
        return self._state.compute_sets[self.id].name

    def __repr__(self) -> str:
        return f"<ComputeSet {self.id} {self.name!r}>"


class FieldRef:
    """A field of a vertex, `vtx["in"]`."""

    __slots__ = ("vertex", "name")

    def __init__(self, vertex: VertexRef, name: str) -> None:
        self.vertex = vertex
        self.name = name


class VertexRef:
    """A handle on a vertex added with addVertex (poplar::VertexRef)."""

    __slots__ = ("_state", "cs", "index")

    def __init__(self, state: GraphState, cs: int, index: int) -> None:
        self._state = state
        self.cs = cs
        self.index = index

    @property
    def _single(self) -> _Single:
        return self._state.compute_sets[self.cs].singles[self.index]

    def __getitem__(self, name: str) -> FieldRef:
        self._single.vtype.get_field(name)
        return FieldRef(self, name)

    def __repr__(self) -> str:
        return f"<VertexRef {self._single.vtype.name} #{self.index} of compute set {self.cs}>"


class DataStream:
    """A host-to-device or device-to-host FIFO (poplar::DataStream)."""

    __slots__ = ("id", "name", "dtype", "numel", "direction", "replication_mode", "debug")

    def __init__(self, stream_id, name, dtype, numel, direction, replication_mode, debug) -> None:
        self.id = stream_id
        self.name = name
        self.dtype = dtype
        self.numel = numel
        self.direction = direction
        self.replication_mode = replication_mode
        self.debug = debug

    def numElements(self) -> int:
        return self.numel

    def __repr__(self) -> str:
        return f"<DataStream {self.name!r} {self.direction} {self.numel} x {self.dtype}>"


class RemoteBuffer:
    """Off-chip storage the IPU copies to and from (poplar::RemoteBuffer)."""

    __slots__ = ("id", "name", "dtype", "numel", "repeats", "debug")

    def __init__(self, buffer_id, name, dtype, numel, repeats, debug) -> None:
        self.id = buffer_id
        self.name = name
        self.dtype = dtype
        self.numel = numel
        self.repeats = repeats
        self.debug = debug

    def __repr__(self) -> str:
        return f"<RemoteBuffer {self.name!r} {self.repeats} x {self.numel} x {self.dtype}>"


class Function:
    """A program outlined as a function; run it with Call (poplar::Function)."""

    __slots__ = ("id", "program", "name", "debug")

    def __init__(self, function_id: int, program, name: str, debug: int) -> None:
        self.id = function_id
        self.program = program
        self.name = name
        self.debug = debug

    def __repr__(self) -> str:
        return f"<Function {self.id} {self.name!r}>"


class GraphState:
    """Everything added to a graph and its virtual or replicated views."""

    def __init__(self, target: Target, replicas: int) -> None:
        self.target = target
        self.replicas = replicas
        self.num_ipus = target.num_ipus // replicas
        self.num_tiles = self.num_ipus * target.tiles_per_ipu
        self.vars: list[Var] = []
        self.compute_sets: list[ComputeSetDef] = []
        self.streams: dict[str, DataStream] = {}
        self.remote_buffers: list[RemoteBuffer] = []
        self.functions: list[Function] = []
        self.vertex_types: dict[str, lib.VertexType] = {}
        self.libraries: set[str] = {"poplar_rt"}
        self.host_handles: dict[tuple[str, str], tuple[str, Tensor]] = {}
        self.debug = DebugContexts()
        self.num_edges = 0
        self.frozen_mapping: GlobalMapping | None = None  # set by the compiler while it runs

    # -- variables --------------------------------------------------------------------------

    def new_var(
        self,
        dtype: Type,
        shape,
        name: str,
        kind: str = "variable",
        category: str = "variable",
        layer: str = "poplar",
        debug: int | None = None,
    ) -> Tensor:
        dims = _as_shape(shape)
        self.require_fits(
            f"{kind} {name or '<anonymous>'!r} of shape {list(dims)} ({dtype.name})", math.prod(dims) * dtype.size
        )
        var_id = len(self.vars)
        if debug is None:
            debug = self.debug.new(name, layer, {"kind": kind, "shape": list(dims), "type": dtype.name})
        var = Var(var_id, name or f"<anon{var_id}>", dtype, dims, kind, debug, category)
        self.vars.append(var)
        return (
            Tensor(self, dtype, dims, [var_id], [0], [var.numel])
            if var.numel
            else Tensor(self, dtype, dims, [], [], [])
        )

    def require_fits(self, what: str, nbytes: int) -> None:
        """Refuse `what` when its `nbytes` exceed all the graph's tiles together: a model of the
        device cannot place it, and the host arrays that describe it take 8 bytes an element."""
        capacity = self.num_tiles * self.target.bytesPerTile
        if nbytes > capacity:
            raise GraphError(
                f"{what} needs {nbytes:,} bytes, more than the {capacity:,} bytes of all the graph's "
                f"{self.num_tiles:,} tiles"
            )

    def map_regions(self, tensor: Tensor, tiles) -> None:
        """Map every region of `tensor` to the matching tile (a scalar or one per region)."""
        tiles = np.broadcast_to(np.asarray(tiles, dtype=np.int64), tensor.vars.shape)
        if tiles.size and (int(tiles.min()) < 0 or int(tiles.max()) >= self.num_tiles):
            bad = int(tiles.max()) if int(tiles.max()) >= self.num_tiles else int(tiles.min())
            raise GraphError(
                f"tile {bad} is out of range: the graph has {self.num_tiles} tiles (0..{self.num_tiles - 1})"
            )
        order = np.argsort(tensor.vars, kind="stable")
        vars_sorted = tensor.vars[order]
        bounds = np.flatnonzero(np.diff(vars_sorted)) + 1
        for group in np.split(order, bounds):
            if group.size == 0:
                continue
            var = self.vars[int(tensor.vars[group[0]])]
            s = tensor.starts[group]
            var.pending.append((s, s + tensor.lengths[group], tiles[group].astype(np.int64)))

    def set_mapping(self, var_id: int, starts, ends, tiles) -> None:
        """Set the whole tile mapping of a variable from interval arrays (bulk)."""
        var = self.vars[var_id]
        var.pending.append((np.asarray(starts, np.int64), np.asarray(ends, np.int64), np.asarray(tiles, np.int64)))

    # -- vertices ---------------------------------------------------------------------------

    def vertex_type(self, name: str) -> lib.VertexType:
        found = self.vertex_types.get(name)
        if found is not None:
            return found
        found = lib.library_vertex(name)
        if found is None:
            raise GraphError(f"unknown vertex type {name!r}: add its codelet with graph.addCodelets(...) first")
        if found.library not in self.libraries:
            raise GraphError(
                f"vertex type {name!r} belongs to {found.library}; call {found.library}.addCodelets(graph) first"
            )
        self.vertex_types[name] = found
        return found

    def add_batch(
        self,
        cs: int,
        type_name: str,
        tiles,
        fields: Mapping[str, tuple],
        work: dict | None = None,
        params: dict | None = None,
        cycles=None,
    ) -> VertexBatch:
        """Add vertices of one type in bulk; see VertexBatch for the field layout."""
        vtype = self.vertex_type(type_name)
        tiles = np.asarray(tiles, dtype=np.int64)
        n = tiles.size
        conns = {}
        for fname, spec in fields.items():
            vtype.get_field(fname)
            if len(spec) == 3:
                var, start, length = spec
                vidx = np.arange(n, dtype=np.int64)
            else:
                vidx, var, start, length = spec
            size = np.asarray(vidx).size
            conns[fname] = tuple(
                _compact(np.broadcast_to(np.asarray(x, np.int64), (size,))) for x in (vidx, var, start, length)
            )
            self.num_edges += size
        batch = VertexBatch(vtype, tiles, conns, work, None if cycles is None else np.asarray(cycles, np.int64), params)
        self.compute_sets[cs].batches.append(batch)
        return batch


def _compact(values: np.ndarray) -> np.ndarray:
    """An index array stored as int32 when its values fit (vertex batches hold many)."""
    if values.size and (int(values.max()) >= 2**31 or int(values.min()) < 0):
        return np.ascontiguousarray(values)
    return values.astype(np.int32)


class Graph:
    """A graph for a target, or a virtual view of some of its tiles (poplar::Graph)."""

    def __init__(
        self,
        target: Target,
        replication_factor: int | None = None,
        *,
        _state: GraphState | None = None,
        _tiles: np.ndarray | None = None,
    ) -> None:
        if _state is None:
            if not isinstance(target, Target):
                target = getattr(target, "target", target)
            replicas = target.replication_factor if replication_factor is None else int(replication_factor)
            if replicas < 1 or target.num_ipus % replicas:
                raise GraphError(
                    f"replication factor {replicas} does not divide the {target.num_ipus} IPU(s) of the target"
                )
            _state = GraphState(target, replicas)
        self._state = _state
        self._tiles = _tiles  # virtual tile -> graph tile, or None for all tiles

    # -- structure --------------------------------------------------------------------------

    @property
    def target(self) -> Target:
        return self._state.target

    def getTarget(self) -> Target:
        return self._state.target

    @property
    def num_tiles(self) -> int:
        """Tiles of this (possibly virtual) graph."""
        return self._state.num_tiles if self._tiles is None else int(self._tiles.size)

    @property
    def tiles_per_ipu(self) -> int:
        return self._state.target.tiles_per_ipu

    @property
    def replication_factor(self) -> int:
        return self._state.replicas

    def getReplicationFactor(self) -> int:
        return self._state.replicas

    @property
    def state(self) -> GraphState:
        return self._state

    def tile(self, virtual_tile) -> np.ndarray | int:
        """The graph tile(s) of virtual tile number(s)."""
        if self._tiles is None:
            return virtual_tile
        tiles = np.asarray(virtual_tile, dtype=np.int64)
        if tiles.size and (int(tiles.min()) < 0 or int(tiles.max()) >= self._tiles.size):
            raise GraphError(f"tile {int(tiles.max())} is out of range for a virtual graph of {self._tiles.size} tiles")
        mapped = self._tiles[tiles]
        return int(mapped) if np.ndim(virtual_tile) == 0 else mapped

    def createVirtualGraph(self, lowerTile, upperTile: int | None = None) -> Graph:
        """A graph over tiles lowerTile..upperTile-1 of this graph, or over a list of tiles."""
        if upperTile is None:
            tiles = np.asarray(list(lowerTile), dtype=np.int64)
        else:
            if not 0 <= lowerTile < upperTile <= self.num_tiles:
                raise GraphError(f"virtual graph tiles {lowerTile}..{upperTile} are outside 0..{self.num_tiles}")
            tiles = np.arange(lowerTile, upperTile, dtype=np.int64)
        return Graph(self.target, _state=self._state, _tiles=np.asarray(self.tile(tiles), dtype=np.int64))

    def createReplicatedGraph(self, replication_factor: int) -> Graph:
        """Replicate this (still empty) graph: the returned graph is one replica of 1/n of the tiles."""
        state = self._state
        if state.vars or state.compute_sets or self._tiles is not None:
            raise GraphError("createReplicatedGraph must be called on an empty top-level graph")
        total = state.replicas * replication_factor
        if state.target.num_ipus % total:
            raise GraphError(
                f"replication factor {total} does not divide the {state.target.num_ipus} IPUs of the target"
            )
        replicated = GraphState(state.target, total)
        replicated.libraries = set(state.libraries)
        replicated.vertex_types = dict(state.vertex_types)
        return Graph(state.target, _state=replicated)

    def debugScope(self, name: str, data: dict | None = None) -> Scope:
        """`with graph.debugScope("layer1"):` groups the debug contexts created inside."""
        return Scope(self._state.debug, name, "user", data)

    # -- variables --------------------------------------------------------------------------

    def addVariable(self, dtype, shape, name: str = "", *, layout=None) -> Tensor:
        """A new variable (poplar Graph::addVariable); map it with setTileMapping."""
        return self._state.new_var(as_type(dtype), shape, name)

    def addTensor(self, dtype, shape, name: str = "") -> Tensor:
        return self.addVariable(dtype, shape, name)

    def addConstant(self, dtype, shape, values, name: str = "") -> Tensor:
        """A constant tensor initialised with `values` (broadcast to the shape)."""
        dtype = as_type(dtype)
        t = self._state.new_var(dtype, shape, name or "<const>", kind="constant", category="constant")
        var = self._state.vars[int(t.vars[0])] if t.vars.size else None
        if var is not None:
            try:
                data = (
                    np.broadcast_to(np.asarray(values, dtype=dtype.numpy), (var.numel,))
                    if np.size(values) in (1, var.numel)
                    else None
                )
            except ValueError:
                data = None
            if data is None:
                raise GraphError(
                    f"constant {var.name!r} of shape {list(var.shape)} needs 1 or {var.numel} values, got {np.size(values)}"
                )
            var.init = np.array(data)
        return t

    def clone(self, tensor: Tensor, name: str = "", dtype=None) -> Tensor:
        """A new variable with the shape and tile mapping of `tensor` (element for element), its
        elements stored in the order `tensor`'s are unless `tensor` aliases an element (Poplar's
        default TensorCloneMethod, PRESERVE_ORDER_UNLESS_ALIASES): a clone of a transposed view is
        a transposed view of a variable."""
        dtype = as_type(dtype) if dtype is not None else tensor.dtype
        out = self._state.new_var(dtype, tensor.shape, name or "clone")
        order = tensor.storage_order()
        if order is not None:
            n = order.size
            self._copy_mapping(tensor._from_index(order, (n,)), out.flatten())
            position = np.empty(n, dtype=np.int64)
            position[order] = np.arange(n, dtype=np.int64)
            return out._from_index(position.reshape(tensor.shape), tensor.shape)
        self._copy_mapping(tensor, out)
        return out

    def _copy_mapping(self, src: Tensor, dst: Tensor) -> None:
        from .compiler.regions import split_by_mapping

        if not dst.vars.size:
            return
        row, tiles, pstart, plen = split_by_mapping(self._state, src.vars, src.starts, src.lengths)
        offsets = np.cumsum(src.lengths) - src.lengths
        pos = offsets[row] + (pstart - src.starts[row])
        self._state.set_mapping(int(dst.vars[0]), pos, pos + plen, tiles)

    def setTileMapping(self, item, tile) -> None:
        """Map a tensor (all of it, or each region to the matching tile) or a vertex to a tile."""
        if isinstance(item, VertexRef):
            t = int(self.tile(int(tile)))
            if not 0 <= t < self._state.num_tiles:
                raise GraphError(f"tile {tile} is out of range for a graph of {self.num_tiles} tiles")
            item._single.tile = t
            return
        if not isinstance(item, Tensor):
            raise GraphError(f"setTileMapping expects a Tensor or a VertexRef, got {type(item).__name__}")
        self._state.map_regions(item, self.tile(np.asarray(tile, dtype=np.int64)))

    def setTileMappingIntervals(self, tensor: Tensor, starts, ends, tiles) -> None:
        """Map flat element ranges of a whole-variable tensor to tiles in one call (bulk)."""
        if not tensor.is_whole_variable():
            raise GraphError("setTileMappingIntervals needs a tensor that is one whole variable")
        self._state.set_mapping(int(tensor.vars[0]), starts, ends, self.tile(np.asarray(tiles, np.int64)))

    def getTileMapping(self, tensor: Tensor) -> list[list[tuple[int, int]]]:
        """For each tile of the graph, the flat element intervals of `tensor` mapped there."""
        out: list[list[tuple[int, int]]] = [[] for _ in range(self._state.num_tiles)]
        offset = 0
        for v, s, ln in zip(tensor.vars.tolist(), tensor.starts.tolist(), tensor.lengths.tolist()):
            var = self._state.vars[v]
            var.finalize_mapping()
            for a, b, t in zip(var.map_starts.tolist(), var.map_ends.tolist(), var.map_tiles.tolist()):
                lo, hi = max(a, s), min(b, s + ln)
                if lo < hi:
                    out[t].append((lo - s + offset, hi - s + offset))
            offset += ln
        return out

    def setInitialValue(self, item, values) -> None:
        """Initial data of a variable, or the value of a parameter field of a vertex."""
        if isinstance(item, FieldRef):
            single = item.vertex._single
            fld = single.vtype.get_field(item.name)
            if fld.is_edge:
                raise GraphError(f"field {item.name!r} of {single.vtype.name} is an edge; connect a tensor to it")
            single.params[item.name] = values
            return
        if not item.is_whole_variable():
            raise GraphError("setInitialValue needs a tensor that is one whole variable")
        var = self._state.vars[int(item.vars[0])]
        var.init = np.array(np.broadcast_to(np.asarray(values, dtype=var.dtype.numpy), (var.numel,)))

    # -- compute sets and vertices ----------------------------------------------------------

    def addComputeSet(self, name: str = "") -> ComputeSet:
        state = self._state
        cs_id = len(state.compute_sets)
        debug = state.debug.new(name, "poplar", {"kind": "computeSet"})
        state.compute_sets.append(ComputeSetDef(cs_id, name or f"cs{cs_id}", debug))
        return ComputeSet(state, cs_id)

    createComputeSet = addComputeSet

    def addCodelets(self, codelets) -> None:
        """Add user codelets (Vertex subclasses) or a library by name ('popops', 'poplin', ...)."""
        items = codelets if isinstance(codelets, (list, tuple, set)) else [codelets]
        for item in items:
            if isinstance(item, str):
                if item not in lib.LIBRARIES:
                    raise GraphError(
                        f"unknown codelet library {item!r}; expected a Vertex subclass or one of "
                        f"{', '.join(lib.LIBRARIES)}"
                    )
                self._state.libraries.add(item)
            elif isinstance(item, type) and issubclass(item, lib.Vertex):
                vtype = item.vertex_type()
                self._state.vertex_types[vtype.name] = vtype
            else:
                raise GraphError(f"addCodelets expects Vertex subclasses or library names, got {item!r}")

    def addVertex(
        self, computeSet: ComputeSet, vertexType: str, connections: Mapping[str, Tensor] | None = None
    ) -> VertexRef:
        """Add a vertex of `vertexType` to a compute set; connect fields now or with connect()."""
        state = self._state
        vtype = state.vertex_type(vertexType if isinstance(vertexType, str) else vertexType.vertex_type().name)
        cs = state.compute_sets[computeSet.id]
        cs.singles.append(_Single(vtype))
        ref = VertexRef(state, computeSet.id, len(cs.singles) - 1)
        for name, tensor in (connections or {}).items():
            self.connect(ref[name], tensor)
        return ref

    def connect(self, field: FieldRef, tensor) -> None:
        single = field.vertex._single
        fld = single.vtype.get_field(field.name)
        if not fld.is_edge:
            self.setInitialValue(field, tensor)
            return
        if not isinstance(tensor, Tensor):
            raise GraphError(
                f"field {field.name!r} of {single.vtype.name} must be connected to a Tensor, "
                f"got {type(tensor).__name__}"
            )
        if fld.kind == "scalar" and tensor.numElements() != 1:
            raise GraphError(
                f"field {field.name!r} of {single.vtype.name} is a single element but the tensor has "
                f"{tensor.numElements()} elements"
            )
        if field.name not in single.conns:
            self._state.num_edges += 1
        single.conns[field.name] = tensor

    def setFieldSize(self, field: FieldRef, size: int) -> None:
        field.vertex._single.sizes[field.name] = int(size)

    def setCycleEstimate(self, vertex: VertexRef, cycles: int) -> None:
        if int(cycles) < 0:
            raise GraphError(f"a cycle estimate must be non-negative, got {cycles}")
        vertex._single.cycles = int(cycles)

    def addVertexBatch(
        self, computeSet: ComputeSet, vertexType: str, tiles, fields, work=None, params=None, cycles=None
    ) -> VertexBatch:
        """Add many vertices at once (simulator extension; tiles are of this graph)."""
        return self._state.add_batch(
            computeSet.id, vertexType, self.tile(np.asarray(tiles, np.int64)), fields, work, params, cycles
        )

    # -- streams, buffers, functions --------------------------------------------------------

    def _new_stream(self, name: str, dtype, numElements: int, direction: str, replication_mode: str) -> DataStream:
        state = self._state
        if name in state.streams:
            raise GraphError(f"a stream called {name!r} already exists")
        if int(numElements) < 0:
            raise GraphError(f"stream {name!r} needs a non-negative number of elements, got {numElements}")
        debug = state.debug.new(name, "poplar", {"kind": "stream", "direction": direction})
        stream = DataStream(
            len(state.streams), name, as_type(dtype), int(numElements), direction, replication_mode, debug
        )
        state.streams[name] = stream
        return stream

    def addHostToDeviceFIFO(self, name: str, dtype, numElements: int, replicationMode: str = "Replicate") -> DataStream:
        return self._new_stream(name, dtype, numElements, "HostToDevice", replicationMode)

    def addDeviceToHostFIFO(self, name: str, dtype, numElements: int) -> DataStream:
        return self._new_stream(name, dtype, numElements, "DeviceToHost", "Replicate")

    def createHostWrite(self, name: str, tensor: Tensor) -> None:
        self._state.host_handles[("write", name)] = ("write", tensor)

    def createHostRead(self, name: str, tensor: Tensor) -> None:
        self._state.host_handles[("read", name)] = ("read", tensor)

    def addRemoteBuffer(self, name: str, dtype, numElements: int, repeats: int = 1) -> RemoteBuffer:
        state = self._state
        debug = state.debug.new(name, "poplar", {"kind": "remoteBuffer"})
        buffer = RemoteBuffer(len(state.remote_buffers), name, as_type(dtype), int(numElements), int(repeats), debug)
        state.remote_buffers.append(buffer)
        return buffer

    def addFunction(self, program, name: str = "") -> Function:
        """Outline a program as a function; Call(function) runs it (poplar Graph::addFunction)."""
        state = self._state
        debug = state.debug.new(name or f"function{len(state.functions)}", "poplar", {"kind": "function"})
        fn = Function(len(state.functions), program, name or f"function{len(state.functions)}", debug)
        state.functions.append(fn)
        return fn

    # -- information ------------------------------------------------------------------------

    def getNumVertices(self) -> int:
        return sum(cs.num_vertices for cs in self._state.compute_sets)

    def __repr__(self) -> str:
        s = self._state
        view = "" if self._tiles is None else f" (virtual: {self._tiles.size} tiles)"
        return f"<Graph {len(s.vars)} variables, {len(s.compute_sets)} compute sets on {s.num_tiles} tiles{view}>"


def as_tensors(items: Iterable) -> list[Tensor]:  # pragma: no cover - small helper
    return [t for t in items if isinstance(t, Tensor)]


def tiles_of(graph: Graph, count: int | None = None) -> np.ndarray:
    """The graph tiles of a (virtual) graph, optionally the first `count`."""
    n = graph.num_tiles if count is None else min(count, graph.num_tiles)
    return np.asarray(graph.tile(np.arange(n, dtype=np.int64)), dtype=np.int64)


def _sequence_of(value) -> Sequence:  # pragma: no cover
    return value if isinstance(value, Sequence) else [value]
