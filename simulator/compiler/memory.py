"""Tile memory: liveness classes, lowered variables and their allocation.

Every tile has a non-interleaved region [0, I) and an interleaved region [I, B), B being the
bytes per tile, both made of memory elements. Always-live items (code, stacks, vertex state,
constants, ...) are placed first, executable code lowest; the data start in the memory element
after the code. Not-always-live variables are placed in *lanes*: variables that are never live
at once on one tile share a lane, and a lane is as large on a tile as its largest member there. Items are
padded to 8 bytes (16 in interleaved memory); that padding, the space between the code and the
data and the space between regions are the gaps (docs/simulator-memory.md). Only interleaved
data are bound to their region: the other data run on past I when the non-interleaved region is
full, and the interleaved data follow them; what runs past B is overflowed.
Bytes used by more than one variable over time are "overlapped"; when those variables are of
different categories the bytes are counted as "multiple".
"""

from __future__ import annotations

import bisect

import numpy as np

from formats.pop.categories import CATEGORIES, CATEGORY_DESCRIPTIONS

from .regions import Sparse

CAT = {name: i for i, name in enumerate(CATEGORIES)}
DESCRIPTIONS = CATEGORY_DESCRIPTIONS
_EXECUTABLE = {
    "controlCode",
    "vertexCode",
    "internalExchangeCode",
    "hostExchangeCode",
    "globalExchangeCode",
    "sharedCodeStorage",
}
_FLAGS = (
    "always_live",
    "constant",
    "executable",
    "vertex_code",
    "lowest_256k",
    "start_section",
    "in_interleaved",
    "accessed",
)


class ClassTable:
    """Liveness classes: user variables (class id = variable id) and compiler buffers."""

    def __init__(self, state, n_tiles: int) -> None:
        self.state = state
        self.n = n_tiles
        self.num_user = len(state.vars)
        self.names = [v.name for v in state.vars]
        self.categories = [v.category for v in state.vars]
        self.always_live = [bool(v.always_live) for v in state.vars]
        self.interleaved = [bool(v.interleaved) for v in state.vars]
        self._bytes: list[Sparse | None] = [None] * self.num_user
        self.unlowered = list(range(self.num_user))
        self.synthetic: list[str] = []  # names of compiler-made unlowered variables

    def __len__(self) -> int:
        return len(self.names)

    def synthetic_var(self, name: str) -> int:
        self.synthetic.append(name)
        return self.num_user + len(self.synthetic) - 1

    def new(
        self, name: str, category: str, nbytes: Sparse, always_live: bool = False, interleaved: bool = False
    ) -> int:
        cls = len(self.names)
        self.names.append(name)
        self.categories.append(category)
        self.always_live.append(always_live)
        self.interleaved.append(interleaved)
        self._bytes.append(nbytes if nbytes is not None else Sparse([], [], self.n))
        self.unlowered.append(self.synthetic_var(name))
        return cls

    def bytes(self, cls: int) -> Sparse:
        found = self._bytes[cls]
        if found is None:
            var = self.state.vars[cls]
            found = Sparse.from_dense(var.bytes_by_tile(self.n))
            self._bytes[cls] = found
        return found

    def all_bytes(self) -> list[Sparse]:
        return [self.bytes(c) for c in range(len(self.names))]

    def liveness_classes(self) -> list[Sparse]:
        """Bytes by tile of every class; always-live classes count as empty for liveness."""
        empty = Sparse([], [], self.n)
        return [empty if self.always_live[c] else self.bytes(c) for c in range(len(self.names))]


class LoweredVars:
    """Lowered variables as columns; ids are row numbers."""

    def __init__(self) -> None:
        self.columns: dict[str, list[np.ndarray]] = {}
        self.names: list[str] = []
        self._name_index: dict[str, int] = {}
        self.user_keys = np.zeros(0, dtype=np.int64)
        self.class_keys = np.zeros(0, dtype=np.int64)
        self.class_base = 0
        self.n_tiles = 0
        self.arrays: dict[str, np.ndarray] = {}

    def name_id(self, name: str) -> int:
        found = self._name_index.get(name)
        if found is None:
            found = len(self.names)
            self.names.append(name)
            self._name_index[name] = found
        return found

    _DTYPES = {
        "tile": np.int32,
        "size": np.int64,
        "align": np.int16,
        "category": np.int16,
        "eq_class": np.int64,
        "unlowered": np.int64,
        "name_id": np.int32,
    }

    def add(self, **cols) -> None:
        n = len(cols["tile"])
        for key in ("tile", "size", "align", "category", "eq_class", "unlowered", "name_id") + _FLAGS:
            value = cols.get(key, 0)
            dtype = self._DTYPES.get(key, np.int8)
            self.columns.setdefault(key, []).append(np.broadcast_to(np.asarray(value), (n,)).astype(dtype))

    def finish(self) -> None:
        self.arrays = {k: (np.concatenate(v) if v else np.zeros(0, np.int64)) for k, v in self.columns.items()}
        self.columns = {}

    def __len__(self) -> int:
        return int(self.arrays["tile"].size)

    def __getitem__(self, key: str) -> np.ndarray:
        return self.arrays[key]

    def user_ids(self, keys: np.ndarray) -> np.ndarray:
        """Lowered ids of (variable * tiles + tile) keys of user variables."""
        return np.searchsorted(self.user_keys, keys)

    def class_ids(self, cls: int, tiles: np.ndarray) -> np.ndarray:
        """Lowered ids of the pieces of a compiler class on the given tiles."""
        keys = cls * np.int64(self.n_tiles) + tiles
        return self.class_base + np.searchsorted(self.class_keys, keys)


def build_lowered_vars(
    classes: ClassTable, n_tiles: int, always_live_items: dict[str, np.ndarray], accessed: set[int]
) -> tuple[LoweredVars, dict[str, int]]:
    """One lowered variable per (variable, tile), per (compiler buffer, tile) and per (category, tile)."""
    state = classes.state
    lv = LoweredVars()
    lv.n_tiles = n_tiles
    # user variables
    var_ids, tiles, nbytes = [], [], []
    for var in state.vars:
        var.finalize_mapping()
        if var.map_tiles.size == 0:
            continue
        var_ids.append(np.full(var.map_tiles.size, var.id, dtype=np.int64))
        tiles.append(var.map_tiles)
        nbytes.append((var.map_ends - var.map_starts) * var.dtype.size)
    if var_ids:
        keys = np.concatenate(var_ids) * n_tiles + np.concatenate(tiles)
        ukeys, inverse = np.unique(keys, return_inverse=True)
        sizes = np.bincount(inverse, weights=np.concatenate(nbytes)).astype(np.int64)
        uvar = ukeys // n_tiles
        lv.user_keys = ukeys
        dtype_size = np.array([v.dtype.size for v in state.vars], dtype=np.int64)
        is_const = np.array([v.kind == "constant" for v in state.vars], dtype=np.int64)
        is_always = np.array(classes.always_live[: len(state.vars)], dtype=np.int64) | is_const
        inter = np.array([v.interleaved for v in state.vars], dtype=np.int64)
        cats = np.array([CAT.get(v.category, CAT["variable"]) for v in state.vars], dtype=np.int64)
        acc = np.zeros(len(state.vars), dtype=np.int64)
        if accessed:
            acc[np.fromiter(accessed, dtype=np.int64)] = 1
        name_ids = np.array([lv.name_id(v.name) for v in state.vars], dtype=np.int64)
        lv.add(
            tile=ukeys % n_tiles,
            size=sizes,
            align=np.maximum(4, dtype_size[uvar]),
            category=cats[uvar],
            eq_class=uvar,
            unlowered=uvar,
            name_id=name_ids[uvar],
            always_live=is_always[uvar],
            constant=is_const[uvar],
            in_interleaved=inter[uvar],
            accessed=acc[uvar],
        )
    n_user = int(lv.user_keys.size)
    # compiler buffers with liveness (message buffers, control ids, ...)
    lv.class_base = n_user
    ckeys, csizes = [], []
    for cls in range(classes.num_user, len(classes)):
        b = classes.bytes(cls)
        keep = b.val > 0
        ckeys.append(cls * np.int64(n_tiles) + b.idx[keep])
        csizes.append(b.val[keep])
    if ckeys:
        keys = np.concatenate(ckeys)
        sizes = np.concatenate(csizes)
        lv.class_keys = keys
        ccls = keys // n_tiles
        cat_of = np.array([CAT[c] for c in classes.categories], dtype=np.int64)
        al = np.array(classes.always_live, dtype=np.int64)
        unl = np.array(classes.unlowered, dtype=np.int64)
        inter = np.array(classes.interleaved, dtype=np.int64)
        names = np.array([lv.name_id(n) for n in classes.names], dtype=np.int64)
        lv.add(
            tile=keys % n_tiles,
            size=sizes,
            align=8,
            category=cat_of[ccls],
            eq_class=ccls,
            unlowered=unl[ccls],
            name_id=names[ccls],
            always_live=al[ccls],
            in_interleaved=inter[ccls],
            accessed=np.isin(cat_of[ccls], [CAT["message"], CAT["outputEdge"], CAT["rearrangement"]]).astype(np.int64),
        )
    # always-live compiler items, one class per category
    item_classes: dict[str, int] = {}
    next_class = len(classes)
    for category, dense in always_live_items.items():
        tiles_with = np.flatnonzero(dense)
        if tiles_with.size == 0:
            continue
        cls = next_class
        next_class += 1
        item_classes[category] = cls
        synthetic = classes.synthetic_var(category)
        lv.add(
            tile=tiles_with,
            size=dense[tiles_with],
            align=8 if category in ("stack", "vertexCode") else 4,
            category=CAT[category],
            eq_class=cls,
            unlowered=synthetic,
            name_id=lv.name_id(category),
            always_live=1,
            executable=int(category in _EXECUTABLE),
            vertex_code=int(category == "vertexCode"),
            lowest_256k=int(category == "vertexInstanceState"),
            start_section=int(category == "controlCode"),
        )
    lv.finish()
    return lv, item_classes


class MemoryResult:
    """Where everything went, and the figures of memory_by_tile and memory_category_by_tile."""

    def __init__(self, n_tiles: int) -> None:
        self.n = n_tiles
        self.offset = np.zeros(0, dtype=np.int64)
        self.alloc_order = np.zeros(0, dtype=np.int64)
        self.region = np.zeros(0, dtype=np.int64)
        self.by_tile: dict[str, np.ndarray] = {}
        self.category_matrix = np.zeros((n_tiles, 6 * len(CATEGORIES)), dtype=np.int64)
        self.num_lanes = 0


def assign_lanes(lv: LoweredVars, num_classes: int, intervals, nal: np.ndarray, interleaved: np.ndarray) -> np.ndarray:
    """Lane of every not-always-live class: the largest (by its largest lowered variable) first,
    each in the first lane where no member whose liveness hull overlaps its own is on one of its
    tiles (a lane is as large on a tile as its largest member there, so members on other tiles
    never meet)."""
    cls_of = lv["eq_class"].astype(np.int64) if len(lv) else np.zeros(0, dtype=np.int64)
    tile_of = lv["tile"].astype(np.int64) if len(lv) else np.zeros(0, dtype=np.int64)
    size = np.zeros(num_classes, dtype=np.int64)
    if len(lv):
        np.maximum.at(size, cls_of, lv["size"].astype(np.int64))
    by_class = np.argsort(cls_of, kind="stable")
    bounds = np.searchsorted(cls_of[by_class], np.arange(num_classes + 1))
    lanes = np.full(num_classes, -1, dtype=np.int64)
    start = np.zeros(num_classes, dtype=np.int64)
    end = np.zeros(num_classes, dtype=np.int64)
    if intervals:
        arr = np.asarray(intervals, dtype=np.int64)
        cls = arr[:, 0]
        big = np.iinfo(np.int64).max
        start[:] = big
        np.minimum.at(start, cls, arr[:, 1])
        np.maximum.at(end, cls, arr[:, 2])
        start[start == big] = 0
    end = np.maximum(end, start)
    next_lane = 0
    for pref in (0, 1):
        members = np.flatnonzero(nal & (interleaved == pref))
        order = members[np.lexsort((members, start[members], -size[members]))]
        # per lane: tile -> the sorted, disjoint liveness hulls of its members on that tile
        lane_tiles: list[dict[int, tuple[list[int], list[int]]]] = []
        for c in order.tolist():
            s, e = int(start[c]), int(end[c])
            tiles = tile_of[by_class[bounds[c] : bounds[c + 1]]].tolist()
            chosen = len(lane_tiles)
            for li, occupied in enumerate(lane_tiles):
                if not any(_overlaps(occupied.get(t), s, e) for t in tiles):
                    chosen = li
                    break
            if chosen == len(lane_tiles):
                lane_tiles.append({})
            occupied = lane_tiles[chosen]
            for t in tiles:
                hulls = occupied.setdefault(t, ([], []))
                i = bisect.bisect_right(hulls[0], s)
                hulls[0].insert(i, s)
                hulls[1].insert(i, e)
            lanes[c] = next_lane + chosen
        next_lane += len(lane_tiles)
    return lanes


def _overlaps(hulls: tuple[list[int], list[int]] | None, s: int, e: int) -> bool:
    """Whether [s, e) overlaps one of a tile's sorted, disjoint hulls."""
    if hulls is None:
        return False
    starts, ends = hulls
    i = bisect.bisect_right(starts, s)
    return (i > 0 and ends[i - 1] > s) or (i < len(starts) and starts[i] < e)


def _group_starts(*keys: np.ndarray) -> np.ndarray:
    start = np.zeros(keys[0].size, dtype=bool)
    if start.size:
        start[0] = True
    for k in keys:
        start[1:] |= k[1:] != k[:-1]
    return start


def _group_cumsum(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Exclusive cumulative sum restarting at each group start."""
    total = np.cumsum(values)
    before = total - values
    base = np.maximum.accumulate(np.where(starts, before, 0))
    return before - base


def allocate(
    lv: LoweredVars,
    lanes_of_class: np.ndarray,
    n_tiles: int,
    bytes_per_tile: int,
    interleaved_start: int,
    peak_by_tile: np.ndarray,
    element_bytes: int = 0,
) -> MemoryResult:
    """Place every lowered variable on its tile and account memory by region and category."""
    result = MemoryResult(n_tiles)
    B, I = int(bytes_per_tile), int(interleaved_start)
    tile = lv["tile"].astype(np.int64)
    size = lv["size"].astype(np.int64)
    cat = lv["category"].astype(np.int64)
    al = lv["always_live"].astype(bool)
    inter = lv["in_interleaved"].astype(bool)
    execu = lv["executable"].astype(np.int64)
    ids = np.arange(len(lv), dtype=np.int64)
    lane = np.where(al, -1, lanes_of_class[lv["eq_class"]] if lanes_of_class.size else -1)
    result.num_lanes = int(lane.max()) + 1 if lane.size else 0

    # always-live units: one per lowered variable
    a_idx = np.flatnonzero(al)
    # lane units: one per (tile, lane)
    n_idx = np.flatnonzero(~al)
    order = n_idx[np.lexsort((n_idx, -size[n_idx], lane[n_idx], tile[n_idx]))]
    starts = _group_starts(tile[order], lane[order])
    first = np.flatnonzero(starts)
    group_of = np.cumsum(starts) - 1
    g_tile = tile[order][first]
    g_lane = lane[order][first]
    g_m1 = size[order][first]
    g_len = np.diff(np.append(first, order.size))
    second = np.where(g_len > 1, first + 1, first)
    g_m2 = np.where(g_len > 1, size[order][np.minimum(second, max(order.size - 1, 0))], 0) if order.size else g_m1
    g_cat = cat[order][first]
    if order.size:
        cmin = np.minimum.reduceat(cat[order], first)
        cmax = np.maximum.reduceat(cat[order], first)
        g_pref = inter[order][first].astype(np.int64)
    else:
        cmin = cmax = g_pref = np.zeros(0, dtype=np.int64)
    g_ovcat = np.where(cmin == cmax, g_cat, CAT["multiple"])

    # all units
    u_tile = np.concatenate((tile[a_idx], g_tile))
    u_data = np.concatenate((size[a_idx], g_m1))
    u_pref = np.concatenate((inter[a_idx].astype(np.int64), g_pref))
    u_kind = np.concatenate((np.zeros(a_idx.size, np.int64), np.ones(g_tile.size, np.int64)))
    u_key = np.concatenate(((1 - execu[a_idx]) * 100 + cat[a_idx], g_lane))
    u_id = np.concatenate((a_idx, g_lane))
    u_pad = np.where(u_pref == 1, (u_data + 15) // 16 * 16, (u_data + 7) // 8 * 8)
    uorder = np.lexsort((u_id, u_key, u_kind, u_pref, u_tile))
    t_o, d_o, p_o, pad_o = u_tile[uorder], u_data[uorder], u_pref[uorder], u_pad[uorder]
    rel = _group_cumsum(pad_o, _group_starts(t_o, p_o))
    # data starts in the first memory element after the code (instruction fetches and data
    # accesses never share an element)
    if element_bytes > 0 and t_o.size:
        code_unit = (u_kind[uorder] == 0) & (p_o == 0)
        code_unit[code_unit] = execu[u_id[uorder][code_unit]] == 1
        code_end = np.bincount(t_o[code_unit], weights=pad_o[code_unit], minlength=n_tiles).astype(np.int64)
        gap = -code_end % element_bytes
        rel = rel + np.where((p_o == 0) & ~code_unit, gap[t_o], 0)
    # interleaved data from I upwards, or from the end of the non-interleaved data where that runs
    # past I: one address space, in which only interleaved data are bound to a region
    region1 = p_o == 1
    low_end = np.zeros(n_tiles, dtype=np.int64)
    if (~region1).any():
        np.maximum.at(low_end, t_o[~region1], rel[~region1] + pad_o[~region1])
    r1 = np.flatnonzero(region1)
    r1_order = r1[np.lexsort((r1, t_o[r1]))]
    r1_rel = _group_cumsum(pad_o[r1_order], _group_starts(t_o[r1_order]))
    offset_o = rel.copy()
    offset_o[r1_order] = np.maximum(I, (low_end + 15) // 16 * 16)[t_o[r1_order]] + r1_rel
    end_o = offset_o + d_o

    # per-unit region bytes and category accounting
    matrix = np.zeros(n_tiles * 6 * len(CATEGORIES), dtype=np.int64)
    kind_o = u_kind[uorder]
    id_o = u_id[uorder]
    unit_cat = np.where(kind_o == 0, cat[np.where(kind_o == 0, id_o, 0)], 0)
    # lane units: locate their group to read m2 and categories
    lane_pos = np.flatnonzero(kind_o == 1)
    lane_group = uorder[lane_pos] - a_idx.size
    sub_ranges = []  # (unit positions, start offset, end offset, category, overlapped)
    al_pos = np.flatnonzero(kind_o == 0)
    sub_ranges.append((al_pos, offset_o[al_pos], end_o[al_pos], unit_cat[al_pos], 0))
    if lane_pos.size:
        m2 = g_m2[lane_group]
        sub_ranges.append((lane_pos, offset_o[lane_pos], offset_o[lane_pos] + m2, g_ovcat[lane_group], 1))
        sub_ranges.append((lane_pos, offset_o[lane_pos] + m2, end_o[lane_pos], g_cat[lane_group], 0))
    inter_b = np.zeros(n_tiles, dtype=np.int64)
    non_b = np.zeros(n_tiles, dtype=np.int64)
    over_b = np.zeros(n_tiles, dtype=np.int64)
    for positions, a, b, c, ov in sub_ranges:
        if positions.size == 0:
            continue
        tt = t_o[positions]
        length = np.maximum(b - a, 0)
        # each region's share of the item's addresses
        nonint = np.clip(np.minimum(b, I) - a, 0, length)
        ib = np.clip(np.minimum(b, B) - np.maximum(a, I), 0, length)
        ob = np.clip(b - np.maximum(a, B), 0, length)
        for section, values, acc in ((0, ib, inter_b), (1, nonint, non_b), (2, ob, over_b)):
            keep = values > 0
            if not keep.any():
                continue
            flat = tt[keep] * (6 * len(CATEGORIES)) + c[keep] * 6 + section * 2 + ov
            matrix += np.bincount(flat, weights=values[keep], minlength=matrix.size).astype(np.int64)
            acc += np.bincount(tt[keep], weights=values[keep], minlength=n_tiles).astype(np.int64)
    result.category_matrix = matrix.reshape(n_tiles, 6 * len(CATEGORIES))

    # including gaps: data ends of the last item in each region
    def max_end(mask: np.ndarray) -> np.ndarray:
        out = np.zeros(n_tiles, dtype=np.int64)
        if mask.any():
            np.maximum.at(out, t_o[mask], end_o[mask])
        return out

    ni_end = max_end(~region1)
    total_incl = np.maximum(ni_end, max_end(region1))
    ni_incl = np.minimum(ni_end, I)
    i_incl = np.maximum(np.minimum(total_incl, B) - I, 0)
    o_incl = np.maximum(total_incl - B, 0)
    al_bytes = np.bincount(tile[a_idx], weights=size[a_idx], minlength=n_tiles).astype(np.int64)
    result.by_tile = {
        "total": inter_b + non_b + over_b,
        "total_including_gaps": total_incl,
        "interleaved": inter_b,
        "interleaved_including_gaps": i_incl,
        "non_interleaved": non_b,
        "non_interleaved_including_gaps": ni_incl,
        "overflowed": over_b,
        "overflowed_including_gaps": o_incl,
        "always_live_bytes": al_bytes,
        "not_always_live_bytes": peak_by_tile.astype(np.int64),
    }

    # offsets, regions and allocation order of every lowered variable
    unit_offset = np.empty(uorder.size, dtype=np.int64)
    unit_offset[uorder] = offset_o
    unit_region = np.empty(uorder.size, dtype=np.int64)
    unit_region[uorder] = np.where(region1, 1, 0)
    unit_rank = np.empty(uorder.size, dtype=np.int64)
    unit_rank[uorder] = np.arange(uorder.size)
    offset = np.zeros(len(lv), dtype=np.int64)
    region = np.zeros(len(lv), dtype=np.int64)
    rank = np.zeros(len(lv), dtype=np.int64)
    offset[a_idx] = unit_offset[: a_idx.size]
    region[a_idx] = unit_region[: a_idx.size]
    rank[a_idx] = unit_rank[: a_idx.size]
    if order.size:
        member_unit = a_idx.size + group_of
        offset[order] = unit_offset[member_unit]
        region[order] = unit_region[member_unit]
        rank[order] = unit_rank[member_unit]
    within = np.zeros(len(lv), dtype=np.int64)
    if order.size:
        within[order] = np.arange(order.size) - first[group_of]
    final = np.lexsort((ids, within, rank, tile))
    alloc_order = np.empty(len(lv), dtype=np.int64)
    tile_start = _group_starts(tile[final])
    alloc_order[final] = np.arange(final.size) - np.maximum.accumulate(np.where(tile_start, np.arange(final.size), 0))
    result.offset = offset
    result.region = region
    result.alloc_order = alloc_order
    return result
