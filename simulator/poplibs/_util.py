"""Shared planning helpers of the Poplibs-style libraries: linear tile mappings, pieces of a
tensor by tile, region lookup by element position, and vertex batches."""

from __future__ import annotations

import functools
import inspect

import numpy as np

from ..compiler.regions import split_by_mapping
from ..errors import GraphError
from ..graph import ComputeSet, Graph
from ..programs import Copy, Execute, Program, Repeat, Sequence, WriteUndef
from ..tensor import Tensor, concat


def linear_intervals(
    numel: int, num_tiles: int, grain: int = 1, min_per_tile: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split `numel` elements into contiguous chunks (multiples of `grain`) over up to `num_tiles`
    tiles, at least `min_per_tile` each: (starts, ends, tile numbers)."""
    if numel == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z
    grain = max(1, int(grain))
    grains = -(-numel // grain)
    min_grains = max(1, -(-int(min_per_tile) // grain))
    used = int(max(1, min(num_tiles, grains // min_grains if grains >= min_grains else 1)))
    per = -(-grains // used)
    starts = np.arange(used, dtype=np.int64) * per * grain
    keep = starts < numel
    starts = starts[keep]
    ends = np.minimum(starts + per * grain, numel)
    tiles = np.arange(starts.size, dtype=np.int64)
    if starts.size < num_tiles and starts.size > 1:
        tiles = (tiles * (num_tiles // starts.size)).astype(np.int64)
    return starts, ends, tiles


def map_linearly(graph: Graph, tensor: Tensor, grain: int = 1, min_per_tile: int = 1) -> None:
    """Spread a whole-variable tensor evenly over the graph's tiles (poputil::mapTensorLinearly)."""
    if not tensor.is_whole_variable():
        if tensor.numElements() == 0:
            return
        raise GraphError("map_linearly needs a tensor that is one whole variable")
    starts, ends, tiles = linear_intervals(tensor.numElements(), graph.num_tiles, grain, min_per_tile)
    graph.setTileMappingIntervals(tensor, starts, ends, tiles)


def tile_pieces(graph: Graph, tensor: Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pieces of `tensor` by tile: (tile, position in the tensor, variable, start, length)."""
    state = graph.state
    row, tile, pstart, plen = split_by_mapping(state, tensor.vars, tensor.starts, tensor.lengths)
    offsets = np.cumsum(tensor.lengths) - tensor.lengths
    pos = offsets[row] + (pstart - tensor.starts[row])
    order = np.lexsort((pos, tile))
    return tile[order], pos[order], tensor.vars[row][order], pstart[order], plen[order]


def regions_at(tensor: Tensor, pos, length) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Regions of `tensor` covering flat positions pos..pos+length-1, for many ranges at once.

    Returns (range index, variable, start, length), one row per region piece.
    """
    pos = np.asarray(pos, dtype=np.int64)
    length = np.asarray(length, dtype=np.int64)
    ends = np.cumsum(tensor.lengths)
    begins = ends - tensor.lengths
    i0 = np.searchsorted(ends, pos, side="right")
    i1 = np.searchsorted(begins, pos + length, side="left")
    counts = np.maximum(i1 - i0, 0)
    rows = np.repeat(np.arange(pos.size), counts)
    within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    region = np.repeat(i0, counts) + within
    lo = np.maximum(begins[region], pos[rows])
    hi = np.minimum(ends[region], (pos + length)[rows])
    start = tensor.starts[region] + (lo - begins[region])
    return rows, tensor.vars[region], start, hi - lo


def merge_regions(vidx, var, start, length):
    """Merge regions of the same vertex that follow each other in one variable."""
    vidx, var, start, length = (np.asarray(a, dtype=np.int64) for a in (vidx, var, start, length))
    if vidx.size <= 1:
        return vidx, var, start, length
    join = (vidx[1:] == vidx[:-1]) & (var[1:] == var[:-1]) & (start[1:] == start[:-1] + length[:-1])
    if not join.any():
        return vidx, var, start, length
    first = np.concatenate(([True], ~join))
    idx = np.flatnonzero(first)
    total = np.add.reduceat(length, idx)
    return vidx[idx], var[idx], start[idx], total


def dedupe_regions(vidx, var, start, length):
    """Drop repeated reads of the same region by the same vertex (broadcast operands), keeping order."""
    vidx, var, start, length = (np.asarray(a, dtype=np.int64) for a in (vidx, var, start, length))
    if vidx.size <= 1:
        return vidx, var, start, length
    from ..compiler.regions import group_ids

    ids = group_ids(vidx, var, start, length)
    if int(ids.max()) + 1 == ids.size:
        return vidx, var, start, length
    first = np.full(int(ids.max()) + 1, ids.size, dtype=np.int64)
    np.minimum.at(first, ids, np.arange(ids.size))
    keep = np.sort(first)
    return vidx[keep], var[keep], start[keep], length[keep]


def add_vertices(
    graph: Graph, cs: ComputeSet, type_name: str, tiles, fields: dict, work=None, params=None, cycles=None
):
    """Add a batch of vertices, merging adjacent regions of each field; `tiles` are graph tiles."""
    merged = {}
    for name, spec in fields.items():
        merged[name] = merge_regions(*dedupe_regions(*spec))
    return graph.state.add_batch(cs.id, type_name, np.asarray(tiles, dtype=np.int64), merged, work, params, cycles)


def whole(tensor: Tensor) -> Tensor:
    """The tensor itself if it is one whole variable (for the fast paths)."""
    return tensor


def require_codelets(graph: Graph, library: str) -> None:
    if library not in graph.state.libraries:
        raise GraphError(f"{library} vertices are not available in this graph; call {library}.addCodelets(graph) first")


def poplibs_op(op_type: str):
    """Decorate a Poplibs-style function: its programs go into one Sequence named after the op,
    and its variables, compute sets and programs get a "poplibs" debug context."""

    def wrap(fn):
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def inner(*args, **kwargs):
            from ..debug import Scope
            from ..programs import Sequence

            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            graph = bound.arguments["graph"]
            outer = bound.arguments["prog"]
            name = bound.arguments.get("debugPrefix") or bound.arguments.get("name") or op_type
            with Scope(graph.state.debug, name, "poplibs", {"op_type": op_type}):
                local = Sequence(name=name)
                bound.arguments["prog"] = local
                result = fn(*bound.args, **bound.kwargs)
            if local.programs:
                outer.add(local)
            return result

        return inner

    return wrap


def in_storage_order(first: Tensor, *others: Tensor) -> list[Tensor]:
    """`first` and `others` flattened and put in the order `first`'s elements are stored, when
    `first` is a permuted view of its variables (a transposed view, say) that aliases no element:
    an element-wise operation then works on contiguous regions of `first`, as popops' element-wise
    operations do on the regions of their flattened operands (poputil's getSortedContiguousRegions).
    The tensors unchanged otherwise."""
    tensors = [first, *others]
    order = first.storage_order()
    if order is None:
        return tensors
    return [t._from_index(order, (order.size,)) for t in tensors]


def elementwise_fields(graph: Graph, first: Tensor, *others: Tensor) -> tuple[np.ndarray, list[tuple]]:
    """The vertices of an element-wise operation: one a tile over `first`'s pieces, taken in the
    order `first`'s elements are stored (in_storage_order), and the matching regions of `others`;
    returns (vertex tiles, [first's field, others' fields]), each field (vertex, var, start,
    length) as add_vertices takes it."""
    first_s, *others_s = in_storage_order(first, *others)
    tiles, pos, var, start, length = tile_pieces(graph, first_s)
    vertex_tiles, vidx = np.unique(tiles, return_inverse=True)
    fields = [(vidx, var, start, length)]
    for t in others_s:
        row, v, s, n = regions_at(t, pos, length)
        fields.append((vidx[row], v, s, n))
    return vertex_tiles, fields


def group_graphs(graph: Graph, groups: int) -> list[Graph]:
    """Virtual graphs of consecutive, equal shares of the graph's tiles, one a group: poplin
    splits the conv groups of a grouped product over the tiles first (lib/poplin/ConvPlan.cpp,
    the convGroupSplit of each level of the partition)."""
    if groups < 1:
        raise GraphError(f"the number of groups must be positive, got {groups}")
    share = graph.num_tiles // groups
    if share < 1:
        raise GraphError(f"{groups} groups do not fit {graph.num_tiles} tiles (one tile a group at least)")
    return [graph.createVirtualGraph(g * share, (g + 1) * share) for g in range(groups)]


def merge_parallel(graph: Graph, programs: list) -> Program:
    """One program running structurally identical programs, built on disjoint tiles, side by side:
    step by step, their compute sets become one (the first's) and their copies and WriteUndefs
    one each, as poplin builds the groups of a grouped product into the same compute sets. The
    compute sets emptied so are dropped when nothing was added to the graph after them."""
    tiles: list[set[int]] = [set() for _ in programs]
    touched: list[set[int]] = [set() for _ in programs]
    for step in _lockstep(programs):
        for i, p in enumerate(step):
            if isinstance(p, Execute):
                cs = graph.state.compute_sets[p.compute_set.id]
                if cs.singles:
                    raise GraphError(f"compute set {cs.name!r} has vertices added one by one; it cannot be merged")
                for batch in cs.batches:
                    tiles[i].update(np.unique(batch.tiles).tolist())
            elif isinstance(p, Copy):
                touched[i].update(p.src.variable_ids() + p.dst.variable_ids())
            elif isinstance(p, WriteUndef):
                touched[i].update(p.tensor.variable_ids())
        if isinstance(step[0], Execute) and len({p.compute_set.id for p in step}) < len(step):
            raise GraphError("programs to run side by side share a compute set")
    for i in range(len(programs)):
        for j in range(i):
            if tiles[i] & tiles[j] or touched[i] & touched[j]:
                raise GraphError("programs to run side by side share tiles or tensors")
    merged = _merge(graph, programs)
    while graph.state.compute_sets and graph.state.compute_sets[-1].origin == "merged":
        graph.state.compute_sets.pop()
    return merged


def _lockstep(programs: list):
    """The programs' steps, one tuple a step, after checking that their structures agree."""
    first = programs[0]
    if any(type(p) is not type(first) for p in programs):
        raise GraphError("programs to run side by side differ in structure")
    yield tuple(programs)
    if isinstance(first, Sequence):
        if any(len(p.programs) != len(first.programs) for p in programs):
            raise GraphError("programs to run side by side differ in structure")
        for step in zip(*(p.programs for p in programs)):
            yield from _lockstep(list(step))
    elif isinstance(first, Repeat):
        if any(p.count != first.count for p in programs):
            raise GraphError("programs to run side by side repeat different numbers of times")
        yield from _lockstep([p.body for p in programs])
    elif isinstance(first, Copy):
        if not all(isinstance(p.src, Tensor) and isinstance(p.dst, Tensor) for p in programs):
            raise GraphError("only copies between tensors can run side by side")
    elif not isinstance(first, (Execute, WriteUndef)):
        raise GraphError(f"{first.kind} programs cannot run side by side")


def _merge(graph: Graph, programs: list) -> Program:
    first = programs[0]
    if isinstance(first, Sequence):
        parts = [_merge(graph, list(step)) for step in zip(*(p.programs for p in programs))]
        return _like(first, Sequence(*parts, name=first.name))
    if isinstance(first, Repeat):
        return _like(first, Repeat(first.count, _merge(graph, [p.body for p in programs]), name=first.name))
    if isinstance(first, Execute):
        target = graph.state.compute_sets[first.compute_set.id]
        for p in programs[1:]:
            cs = graph.state.compute_sets[p.compute_set.id]
            target.batches.extend(cs.batches)
            target.functional.extend(cs.functional)
            cs.batches, cs.functional, cs.origin = [], [], "merged"
        return first
    if isinstance(first, Copy):
        src = concat([p.src.flatten() for p in programs])
        dst = concat([p.dst.flatten() for p in programs])
        return _like(first, Copy(src, dst, name=first.name))
    return _like(first, WriteUndef(concat([p.tensor.flatten() for p in programs]), name=first.name))


def _like(original, merged):
    """`merged` with the debug scope and source location of the program it stands for."""
    merged.scope, merged.location = original.scope, original.location
    return merged
