"""Compute-set analysis: vertex cycles and their scheduling on six worker contexts, vertex memory,
and the data a compute set reads and writes (which decides its exchanges and liveness)."""

from __future__ import annotations

import numpy as np

from .. import codelets as lib
from ..errors import GraphError
from ..graph import ComputeSetDef, GraphState, VertexBatch
from ..target import NUM_WORKER_CONTEXTS
from .exchange import ExchangePlan, pieces_plan
from .regions import Sparse, fully_covered, group_ids, split_by_mapping

_MEMORY_COLUMNS = ("count", "vertex_data", "edge_ptr", "descriptor", "copy_ptr", "padding")


class VertexTypeTable:
    """Vertex types in order of first use, with their memory on each tile."""

    def __init__(self, num_tiles: int) -> None:
        self.num_tiles = num_tiles
        self.types: list[lib.VertexType] = []
        self.index: dict[str, int] = {}
        self.memory: list[dict[str, np.ndarray]] = []

    def id(self, vtype: lib.VertexType) -> int:
        found = self.index.get(vtype.name)
        if found is None:
            found = len(self.types)
            self.index[vtype.name] = found
            self.types.append(vtype)
            self.memory.append({c: np.zeros(self.num_tiles, dtype=np.int64) for c in _MEMORY_COLUMNS})
        return found


class VertexStats:
    """Instances of one vertex type in one compute set."""

    __slots__ = ("type_id", "count", "cycles", "active", "count_by_tile")

    def __init__(self, type_id: int, count: int, cycles: int, active: int, count_by_tile: Sparse) -> None:
        self.type_id = type_id
        self.count = count
        self.cycles = cycles  # estimated cycles summed over the instances
        self.active = active
        self.count_by_tile = count_by_tile


class CSInfo:
    """What the compiler knows about one compute set."""

    __slots__ = (
        "id",
        "name",
        "debug",
        "origin",
        "num_vertices",
        "cycles",
        "active",
        "vertices",
        "reads",
        "writes",
        "kills",
        "pre",
        "pre_global",
        "post",
        "post_global",
        "lv_keys",
        "functional",
        "rearrangement",
        "vertex_tiles",
    )

    def __init__(self, cs_id: int, name: str, debug: int, origin: str, n: int) -> None:
        self.id = cs_id
        self.name = name
        self.debug = debug
        self.origin = origin
        self.num_vertices = 0
        self.cycles = Sparse([], [], n)
        self.active = Sparse([], [], n)
        self.vertices: list[VertexStats] = []
        self.reads: set[int] = set()
        self.writes: set[int] = set()
        self.kills: set[int] = set()
        self.pre: ExchangePlan | None = None
        self.pre_global: ExchangePlan | None = None
        self.post: ExchangePlan | None = None
        self.post_global: ExchangePlan | None = None
        self.lv_keys = np.zeros(0, dtype=np.int64)
        self.functional: list = []
        self.rearrangement: Sparse | None = None
        self.vertex_tiles = Sparse([], [], n)


def _singles_to_batches(state: GraphState, cs: ComputeSetDef) -> list[VertexBatch]:
    """Group vertices added one by one into batches, checking their mapping and connections."""
    groups: dict[str, list[int]] = {}
    for i, single in enumerate(cs.singles):
        groups.setdefault(single.vtype.name, []).append(i)
    batches = []
    for name, indices in groups.items():
        vtype = cs.singles[indices[0]].vtype
        tiles = np.empty(len(indices), dtype=np.int64)
        cycles = np.full(len(indices), -1, dtype=np.int64)
        rows: dict[str, list[tuple]] = {f.name: [] for f in vtype.fields if f.is_edge}
        params: dict[str, list] = {}
        for k, i in enumerate(indices):
            single = cs.singles[i]
            if single.tile < 0:
                raise GraphError(
                    f"compute set {cs.name!r} (id {cs.id}): vertex {i} of type {name} has no tile mapping; "
                    f"call graph.setTileMapping(vertex, tile)"
                )
            tiles[k] = single.tile
            if single.cycles is not None:
                cycles[k] = single.cycles
            for fld in vtype.fields:
                if not fld.is_edge:
                    if fld.name in single.params:
                        params.setdefault(fld.name, []).append(single.params[fld.name])
                    continue
                tensor = single.conns.get(fld.name)
                if tensor is None:
                    if fld.optional:
                        continue
                    raise GraphError(
                        f"compute set {cs.name!r} (id {cs.id}): field {fld.name!r} of vertex {i} ({name}, tile "
                        f"{single.tile}) is not connected; connect it with graph.connect(vertex[{fld.name!r}], tensor)"
                    )
                rows[fld.name].append((k, tensor))
        fields = {}
        for fname, conns in rows.items():
            if not conns:
                continue
            vidx = np.concatenate([np.full(t.vars.size, k, dtype=np.int64) for k, t in conns])
            fields[fname] = (
                vidx,
                np.concatenate([t.vars for _, t in conns]),
                np.concatenate([t.starts for _, t in conns]),
                np.concatenate([t.lengths for _, t in conns]),
            )
        override = None if (cycles < 0).all() else cycles
        batch = VertexBatch(vtype, tiles, fields, None, override, params)
        batches.append(batch)
    return batches


def _per_vertex(batch: VertexBatch, fname: str, values: np.ndarray | None = None) -> np.ndarray:
    vidx, _, _, lengths = batch.fields[fname]
    weights = lengths if values is None else values
    return np.bincount(vidx, weights=weights, minlength=batch.n).astype(np.int64)


def _vertex_cycles(state: GraphState, batch: VertexBatch, target) -> tuple[np.ndarray, np.ndarray]:
    """Estimated (cycles, active cycles) of every vertex of a batch."""
    vtype = batch.vtype
    n = batch.n
    sizes = {}
    in_elems = np.zeros(n, dtype=np.int64)
    out_elems = np.zeros(n, dtype=np.int64)
    out_bytes = np.zeros(n, dtype=np.int64)
    elems = np.zeros(n, dtype=np.int64)
    regions = np.zeros(n, dtype=np.int64)
    first = True
    for fld in vtype.fields:
        if not fld.is_edge or fld.name not in batch.fields:
            continue
        count = _per_vertex(batch, fld.name)
        sizes[fld.name] = count
        if fld.reads:
            in_elems += count
        if fld.writes:
            out_elems += count
            out_bytes += count * (fld.dtype.size if fld.dtype else 1)
        elems = np.maximum(elems, count)
        if first:
            regions = np.bincount(batch.fields[fld.name][0], minlength=n).astype(np.int64)
            first = False
    work = {"in_elems": in_elems, "out_elems": out_elems, "elems": elems, "regions": regions, "bytes": out_bytes}
    work.update(batch.work)
    if vtype.estimator is not None:
        cycles = np.array(
            [int(vtype.estimator({k: int(v[i]) for k, v in sizes.items()})) for i in range(n)], dtype=np.int64
        )
        active = cycles.copy()
    elif vtype.cost is not None:
        cycles, active = vtype.cost(work, n, target)
        cycles = np.asarray(cycles, dtype=np.int64)
        active = np.asarray(active, dtype=np.int64)
    else:
        cycles, active = lib.default_cost(work, n, target)
    if batch.cycles is not None:
        override = batch.cycles >= 0
        cycles = np.where(override, batch.cycles, cycles)
        active = np.where(override, batch.cycles, active)
    return np.maximum(cycles, 0), np.maximum(np.minimum(active, cycles), 0)


def schedule(n_tiles: int, worker_tiles, worker_cycles, sup_tiles, sup_cycles, sup_active) -> tuple[Sparse, Sparse]:
    """Tile cycles and active cycles: supervisors run alone, workers in rounds of six contexts.

    Workers on a tile are taken longest first, six at a time; a round lasts as long as its
    longest vertex, and each thread cycle of a round takes six tile cycles.
    """
    all_tiles = np.concatenate((worker_tiles, sup_tiles))
    if all_tiles.size == 0:
        return Sparse([], [], n_tiles), Sparse([], [], n_tiles)
    uniq, inverse = np.unique(all_tiles, return_inverse=True)
    w_idx, s_idx = inverse[: worker_tiles.size], inverse[worker_tiles.size :]
    k = uniq.size
    total = np.zeros(k, dtype=np.int64)
    active = np.zeros(k, dtype=np.int64)
    if worker_tiles.size:
        order = np.lexsort((-worker_cycles, w_idx))
        t = w_idx[order]
        c = worker_cycles[order]
        start = np.r_[True, t[1:] != t[:-1]]
        positions = np.arange(t.size)
        rank = positions - np.maximum.accumulate(np.where(start, positions, 0))
        heads = rank % NUM_WORKER_CONTEXTS == 0
        total += NUM_WORKER_CONTEXTS * np.bincount(t[heads], weights=c[heads], minlength=k).astype(np.int64)
        active += np.bincount(t, weights=c, minlength=k).astype(np.int64)
    if sup_tiles.size:
        total += np.bincount(s_idx, weights=sup_cycles, minlength=k).astype(np.int64)
        active += np.bincount(s_idx, weights=sup_active, minlength=k).astype(np.int64)
    keep = total > 0
    return Sparse(uniq[keep], total[keep], n_tiles), Sparse(uniq[active > 0], active[active > 0], n_tiles)


def _unique_first(*columns: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct row of the columns."""
    if columns[0].size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort(columns[::-1])
    stacked = [c[order] for c in columns]
    diff = np.zeros(order.size, dtype=bool)
    diff[0] = True
    for c in stacked:
        diff[1:] |= c[1:] != c[:-1]
    return np.sort(order[diff])


def analyse(
    state: GraphState, cs: ComputeSetDef, target, types: VertexTypeTable, n_tiles: int, elem_size: np.ndarray
) -> CSInfo:
    """Everything the compiler needs about one compute set (`elem_size`: bytes per element by variable)."""
    info = CSInfo(cs.id, cs.name, cs.debug, cs.origin, n_tiles)
    batches = list(cs.batches) + _singles_to_batches(state, cs)
    info.functional = list(cs.functional)
    w_tiles, w_cycles, s_tiles, s_cycles, s_active = [], [], [], [], []
    read_rows, write_rows = [], []  # (tile, var, start, length)
    for batch in batches:
        vtype = batch.vtype
        n = batch.n
        if n == 0:
            continue
        if int(batch.tiles.min()) < 0 or int(batch.tiles.max()) >= n_tiles:
            raise GraphError(
                f"compute set {cs.name!r}: a {vtype.name} vertex is mapped to a tile outside 0..{n_tiles - 1}"
            )
        for fld in vtype.fields:
            if fld.is_edge and not fld.optional and fld.name not in batch.fields and fld.kind in ("scalar", "vector"):
                raise GraphError(
                    f"compute set {cs.name!r} (id {cs.id}): field {fld.name!r} of the {vtype.name} vertices is not "
                    f"connected"
                )
        cycles, active = _vertex_cycles(state, batch, target)
        if vtype.supervisor:
            s_tiles.append(batch.tiles)
            s_cycles.append(cycles)
            s_active.append(active)
        else:
            w_tiles.append(batch.tiles)
            w_cycles.append(cycles)
        type_id = types.id(vtype)
        counts = Sparse.from_pairs(batch.tiles, 1, n_tiles)
        info.vertices.append(VertexStats(type_id, n, int(cycles.sum()), int(active.sum()), counts))
        info.num_vertices += n
        memory = types.memory[type_id]
        memory["count"][counts.idx] += counts.val
        state_bytes = vtype.state_bytes
        memory["vertex_data"][counts.idx] += counts.val * state_bytes
        if state_bytes % 8 and vtype.supervisor:
            memory["padding"][counts.idx] += counts.val * (8 - state_bytes % 8)
        for fld in vtype.fields:
            if not fld.is_edge or fld.name not in batch.fields:
                continue
            vidx, var, start, length = batch.fields[fld.name]
            region_tiles = batch.tiles[vidx]
            column = (
                "copy_ptr"
                if vtype.copy
                else "edge_ptr"
                if fld.kind == "vectorlist"
                else "descriptor"
                if fld.kind == "deltan"
                else None
            )
            if column is not None:
                np.add.at(memory[column], region_tiles, 4)
                if column == "descriptor":
                    memory["descriptor"][counts.idx] += counts.val * 4
            rows = (region_tiles, var, start, length)
            if fld.reads:
                read_rows.append(rows)
            if fld.writes:
                write_rows.append(rows)
        if vtype.compute is not None:
            info.functional.append(("vertices", batch))
    all_tiles = [b.tiles for b in batches if b.n]
    if all_tiles:
        info.vertex_tiles = Sparse.from_pairs(np.concatenate(all_tiles), 1, n_tiles)
    cat = lambda arrays: np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)  # noqa: E731
    info.cycles, info.active = schedule(
        n_tiles, cat(w_tiles), cat(w_cycles), cat(s_tiles), cat(s_cycles), cat(s_active)
    )
    keys = []
    for rows_list, is_read in ((read_rows, True), (write_rows, False)):
        if not rows_list:
            continue
        tile = np.concatenate([r[0] for r in rows_list]).astype(np.int64)
        var = np.concatenate([r[1] for r in rows_list]).astype(np.int64)
        start = np.concatenate([r[2] for r in rows_list]).astype(np.int64)
        length = np.concatenate([r[3] for r in rows_list]).astype(np.int64)
        row, owner, pstart, plen = split_by_mapping(state, var, start, length)
        pvar = var[row]
        vtile = tile[row]
        keys.append(pvar * n_tiles + owner)
        if is_read:
            info.reads.update(np.unique(var).tolist())
        else:
            info.writes.update(np.unique(var).tolist())
            info.kills = fully_covered(state, var, start, length)
        remote = owner != vtile
        if not remote.any():
            continue
        rv, rs, rl, ro, rt = pvar[remote], pstart[remote], plen[remote], owner[remote], vtile[remote]
        nbytes = rl * elem_size[rv]
        if is_read:
            keep = _unique_first(rt, rv, rs, rl)
            send_key = group_ids(rv[keep], rs[keep], rl[keep])
            info.pre, info.pre_global = pieces_plan(
                target, n_tiles, ro[keep], rt[keep], nbytes[keep], send_key.reshape(-1), message=True
            )
        else:
            post, post_global = pieces_plan(target, n_tiles, rt, ro, nbytes)
            for plan in (post, post_global):
                if plan is not None:
                    plan.message = plan.sent
                    plan.message_category = "outputEdge"
            info.post, info.post_global = post, post_global
    if keys:
        info.lv_keys = np.unique(np.concatenate(keys))
    return info
