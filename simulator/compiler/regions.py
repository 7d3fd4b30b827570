"""Vectorised region arithmetic: splitting element regions by tile mapping, coverage, sparse vectors."""

from __future__ import annotations

import numpy as np

from ..errors import GraphError


class Sparse:
    """A per-tile vector stored as sorted tile indices and values; zero elsewhere."""

    __slots__ = ("idx", "val", "n")

    def __init__(self, idx, val, n: int) -> None:
        self.idx = np.asarray(idx, dtype=np.int64)
        self.val = np.asarray(val, dtype=np.int64)
        self.n = int(n)

    @classmethod
    def from_dense(cls, dense: np.ndarray) -> Sparse:
        idx = np.flatnonzero(dense)
        return cls(idx, dense[idx], dense.size)

    @classmethod
    def from_pairs(cls, tiles, values, n: int) -> Sparse:
        """Sum of values per tile (tiles may repeat); zero entries dropped."""
        tiles = np.asarray(tiles, dtype=np.int64)
        if tiles.size == 0:
            return cls([], [], n)
        values = np.broadcast_to(np.asarray(values), tiles.shape)
        uniq, inverse = np.unique(tiles, return_inverse=True)
        sums = np.bincount(inverse, weights=values.astype(np.float64), minlength=uniq.size)
        vals = np.rint(sums).astype(np.int64)
        keep = vals != 0
        return cls(uniq[keep], vals[keep], n)

    def at(self, tiles) -> np.ndarray:
        """Values at the given tiles (0 where nothing is stored)."""
        tiles = np.asarray(tiles, dtype=np.int64)
        if self.idx.size == 0:
            return np.zeros(tiles.shape, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.idx, tiles), self.idx.size - 1)
        return np.where(self.idx[pos] == tiles, self.val[pos], 0)

    @classmethod
    def constant(cls, value: int, n: int) -> Sparse:
        if value == 0:
            return cls([], [], n)
        return cls(np.arange(n), np.full(n, value), n)

    def dense(self) -> np.ndarray:
        out = np.zeros(self.n, dtype=np.int64)
        out[self.idx] = self.val
        return out

    @property
    def total(self) -> int:
        return int(self.val.sum())

    @property
    def max(self) -> int:
        return int(self.val.max()) if self.val.size else 0

    @property
    def min(self) -> int:
        if self.idx.size < self.n or self.val.size == 0:
            return 0
        return int(self.val.min())

    @property
    def active(self) -> int:
        return int(np.count_nonzero(self.val))

    def add(self, other: Sparse) -> Sparse:
        return Sparse.from_pairs(np.concatenate((self.idx, other.idx)), np.concatenate((self.val, other.val)), self.n)

    def __bool__(self) -> bool:
        return bool(self.val.size) and bool(self.val.any())


class GlobalMapping:
    """The tile mappings of every variable as one sorted table of global element intervals."""

    def __init__(self, state) -> None:
        sizes = np.array([v.numel for v in state.vars], dtype=np.int64)
        self.base = np.concatenate(([0], np.cumsum(sizes)[:-1])) if sizes.size else np.zeros(0, np.int64)
        starts, ends, tiles = [], [], []
        for var, base in zip(state.vars, self.base.tolist()):
            var.finalize_mapping()
            starts.append(var.map_starts + base)
            ends.append(var.map_ends + base)
            tiles.append(var.map_tiles)
        cat = lambda a: np.concatenate(a) if a else np.zeros(0, np.int64)  # noqa: E731
        self.starts, self.ends, self.tiles = cat(starts), cat(ends), cat(tiles)
        self.sizes = sizes


def split_by_mapping(state, var_ids, starts, lengths) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Split regions (var, start, length) at tile-mapping boundaries.

    Returns (row, tile, piece_start, piece_length): one row per piece, `row` indexing the input.
    Raises GraphError if a region touches an unmapped element.
    """
    var_ids = np.asarray(var_ids, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    if var_ids.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty
    frozen = getattr(state, "frozen_mapping", None)
    if frozen is not None:
        return _split_global(state, frozen, var_ids, starts, lengths)
    order = np.argsort(var_ids, kind="stable")
    sorted_vars = var_ids[order]
    bounds = np.flatnonzero(np.diff(sorted_vars)) + 1
    out_rows, out_tiles, out_starts, out_lens = [], [], [], []
    for group in np.split(order, bounds):
        var = state.vars[int(var_ids[group[0]])]
        var.finalize_mapping()
        ms, me, mt = var.map_starts, var.map_ends, var.map_tiles
        s = starts[group]
        e = s + lengths[group]
        if s.size and (int(s.min()) < 0 or int(e.max()) > var.numel):
            raise GraphError(f"a region of variable {var.name!r} is outside its {var.numel} elements")
        i0 = np.searchsorted(me, s, side="right")
        i1 = np.searchsorted(ms, e, side="left")
        counts = i1 - i0
        rows = np.repeat(group, counts)
        first = np.repeat(i0, counts)
        within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        interval = first + within
        ps = np.maximum(ms[interval], np.repeat(s, counts))
        pe = np.minimum(me[interval], np.repeat(e, counts))
        covered = np.bincount(np.repeat(np.arange(group.size), counts), weights=pe - ps, minlength=group.size)
        if np.any(covered < (e - s)):
            bad = int(np.flatnonzero(covered < (e - s))[0])
            raise GraphError(
                f"variable {var.name!r} has elements without a tile mapping in {int(s[bad])}..{int(e[bad]) - 1}; "
                f"map every element with graph.setTileMapping"
            )
        out_rows.append(rows)
        out_tiles.append(mt[interval])
        out_starts.append(ps)
        out_lens.append(pe - ps)
    return (np.concatenate(out_rows), np.concatenate(out_tiles), np.concatenate(out_starts), np.concatenate(out_lens))


def fully_covered(state, var_ids, starts, lengths) -> set[int]:
    """Variables whose every element is inside the union of the regions."""
    var_ids = np.asarray(var_ids, dtype=np.int64)
    if var_ids.size == 0:
        return set()
    starts = np.asarray(starts, dtype=np.int64)
    ends = starts + np.asarray(lengths, dtype=np.int64)
    order = np.lexsort((starts, var_ids))
    v, s, e = var_ids[order], starts[order], ends[order]
    out = set()
    bounds = np.flatnonzero(np.diff(v)) + 1
    for a, b in zip(np.concatenate(([0], bounds)).tolist(), np.concatenate((bounds, [v.size])).tolist()):
        numel = state.vars[int(v[a])].numel
        if int(s[a]) > 0:
            continue
        reach = np.maximum.accumulate(e[a:b])
        gaps = s[a + 1 : b] > reach[:-1]
        if not gaps.any() and int(reach[-1]) >= numel:
            out.add(int(v[a]))
    return out


def align_regions(src_vars, src_starts, src_lens, dst_vars, dst_starts, dst_lens):
    """Segments where two equally long region lists line up element for element.

    Returns (src_var, src_start, dst_var, dst_start, length) arrays.
    """
    src_end = np.cumsum(src_lens)
    dst_end = np.cumsum(dst_lens)
    cuts = np.union1d(src_end, dst_end)
    seg_start = np.concatenate(([0], cuts[:-1]))
    seg_len = cuts - seg_start
    keep = seg_len > 0
    seg_start, seg_len = seg_start[keep], seg_len[keep]
    si = np.searchsorted(src_end, seg_start, side="right")
    di = np.searchsorted(dst_end, seg_start, side="right")
    s_off = seg_start - (src_end[si] - src_lens[si])
    d_off = seg_start - (dst_end[di] - dst_lens[di])
    return (
        np.asarray(src_vars)[si],
        np.asarray(src_starts)[si] + s_off,
        np.asarray(dst_vars)[di],
        np.asarray(dst_starts)[di] + d_off,
        seg_len,
    )


def group_ids(*columns: np.ndarray) -> np.ndarray:
    """For rows given column by column, an id per row equal for equal rows (0-based, dense)."""
    n = columns[0].size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort(columns[::-1])
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for c in columns:
        sc = c[order]
        change[1:] |= sc[1:] != sc[:-1]
    ids = np.empty(n, dtype=np.int64)
    ids[order] = np.cumsum(change) - 1
    return ids


def _split_global(state, g: GlobalMapping, var_ids, starts, lengths):
    if int(var_ids.max()) >= g.sizes.size:
        raise GraphError(f"variable {int(var_ids.max())} was added after compilation started")
    ends = starts + lengths
    if int(starts.min()) < 0 or bool(np.any(ends > g.sizes[var_ids])):
        bad = int(np.flatnonzero((starts < 0) | (ends > g.sizes[var_ids]))[0])
        var = state.vars[int(var_ids[bad])]
        raise GraphError(f"a region of variable {var.name!r} is outside its {var.numel} elements")
    gs = g.base[var_ids] + starts
    ge = gs + lengths
    i0 = np.searchsorted(g.ends, gs, side="right")
    i1 = np.searchsorted(g.starts, ge, side="left")
    counts = np.maximum(i1 - i0, 0)
    rows = np.repeat(np.arange(var_ids.size), counts)
    within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    interval = np.repeat(i0, counts) + within
    ps = np.maximum(g.starts[interval], gs[rows])
    pe = np.minimum(g.ends[interval], ge[rows])
    covered = np.bincount(rows, weights=pe - ps, minlength=var_ids.size)
    if np.any(covered < lengths):
        bad = int(np.flatnonzero(covered < lengths)[0])
        var = state.vars[int(var_ids[bad])]
        raise GraphError(
            f"variable {var.name!r} has elements without a tile mapping in {int(starts[bad])}.."
            f"{int(ends[bad]) - 1}; map every element with graph.setTileMapping"
        )
    base = g.base[var_ids][rows]
    return rows, g.tiles[interval], ps - base, pe - ps
