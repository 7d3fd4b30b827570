"""popops::rearrange: regrouping a tensor so that another dimension's elements are contiguous,
as poplibs does before a product or an element-wise operation whose operands are grouped
differently (graphcore/poplibs, sdk-release-2.0, lib/popops/Rearrange.cpp and
lib/poputil/VarStructure.cpp; MIT licence)."""

from __future__ import annotations

import math

import numpy as np

from ..codelets.poplin import WORKERS
from ..graph import Graph
from ..programs import Copy, Execute, Sequence, WriteUndef
from ..tensor import Tensor
from ..types import Type
from ._util import add_vertices, require_codelets, tile_pieces


def regroup_grain(dtype: Type) -> int:
    """The smallest group a regroup transposes: 4 two-byte or 2 four-byte elements
    (lib/popops/Rearrange.cpp, getMinimumRegroupGrainSize)."""
    return 4 if dtype.size == 2 else 2 if dtype.size == 4 else 1


def dim0_grouping(T: Tensor, limit: int) -> int:
    """The largest power of two up to `limit` dividing T's rows such that every aligned group of
    that many rows of a column is contiguous in one variable (the grouping of dimension 0 that
    popops' detectDimGroupings finds); 1 when there is none."""
    rows, cols = T.shape
    var, idx = T.transpose().element_arrays()
    var = var.reshape(cols, rows)
    idx = idx.reshape(cols, rows)
    g = 1
    while g * 2 <= limit and rows % (g * 2) == 0:
        h = g * 2
        v = var.reshape(cols, rows // h, h)
        i = idx.reshape(cols, rows // h, h)
        if not (np.all(v == v[:, :, :1]) and np.all(np.diff(i, axis=2) == 1)):
            break
        g = h
    return g


def regroup_sizes(from_group: int, to_group: int, transpositions: int, tiles: int, min_grain: int) -> tuple[int, int]:
    """The group sizes a regroup uses: as long as the transpositions of the fullest IPU times a
    factor stay within the graph's tiles, the groups are split by the factor (the smallest prime
    of what is left), the `from` side first, down to `min_grain` (lib/popops/Rearrange.cpp,
    updateGroupingInternal)."""
    additional = (from_group * to_group) // (min_grain * min_grain)
    factor_total = 1
    allow = to_group % min_grain == 0 and from_group % min_grain == 0
    while allow and additional > 1:
        factor = next(x for x in range(2, additional + 1) if additional % x == 0)
        if transpositions * factor_total * factor > tiles:
            break
        factor_total *= factor
        additional //= factor
    if factor_total != 1:
        from_factor = math.gcd(factor_total, from_group // min_grain)
        factor_total //= from_factor
        to_factor = math.gcd(factor_total, to_group // min_grain)
        return from_group // from_factor, to_group // to_factor
    return from_group, to_group


def worker_runs(tiles: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Items whose tiles are `tiles`, each tile's items consecutive, shared between the tile's
    workers in equal runs (poplibs' splitRegionsBetweenWorkers): the tile, first item and end of
    each worker's run."""
    uniq, first, per = np.unique(tiles, return_index=True, return_counts=True)
    workers = np.minimum(WORKERS, per)
    run = -(-per // workers)
    v_tile = np.repeat(uniq, workers)
    j = np.arange(int(workers.sum())) - np.repeat(np.cumsum(workers) - workers, workers)
    t0 = np.repeat(first, workers) + j * np.repeat(run, workers)
    t1 = np.minimum(t0 + np.repeat(run, workers), np.repeat(first + per, workers))
    keep = t1 > t0
    return v_tile[keep], t0[keep], t1[keep]


def regroup(graph: Graph, T: Tensor, from_group: int, to_group: int, prog: Sequence, name: str) -> Tensor:
    """T [rows, cols], contiguous along its rows in groups of `from_group`, copied so that groups
    of `to_group` columns are contiguous; returns the [rows, cols] view of the copy.

    As popops::rearrange::regroupTensor (lib/popops/Rearrange.cpp): the group sizes are first cut
    by updateGroupingInternal (regroup_sizes), T is viewed as matrices of to x from elements (from
    rows contiguous, to columns), each matrix is copied into a variable of its own ("preRegroup")
    whose matrices are spread evenly over the tiles of the IPU that holds each matrix's first
    element, then each tile transposes its matrices with Transpose2d vertices shared between its
    workers (partialTranspose, addTransposeVertices); the result is a view of the transposed
    matrices."""
    require_codelets(graph, "popops")
    rows, cols = T.shape
    min_grain = regroup_grain(T.dtype)
    state = graph.state
    size = from_group * to_group
    tiles_per_ipu = graph.tiles_per_ipu
    graph_tiles = np.asarray(graph.tile(np.arange(graph.num_tiles)), dtype=np.int64)
    p_tiles, p_pos, _, _, p_len = tile_pieces(graph, T)
    ipu_elems = np.bincount(p_tiles // tiles_per_ipu, weights=p_len)
    from_group, to_group = regroup_sizes(
        from_group, to_group, -(-int(ipu_elems.max()) // size), graph.num_tiles, min_grain
    )
    size = from_group * to_group
    count = rows * cols // size
    col_groups = cols // to_group
    # element p of the matrices: matrix t = a * col_groups + b holds T[a*from + x, b*to + y] at
    # (y, x), from innermost
    p = np.arange(rows * cols, dtype=np.int64)
    x, y, t = p % from_group, (p // from_group) % to_group, p // size
    a, b = t // col_groups, t % col_groups
    t_flat = (a * from_group + x) * cols + b * to_group + y
    var_t, idx_t = T.element_arrays()
    grouped = Tensor.from_elements(state, T.dtype, (rows * cols,), var_t[t_flat], idx_t[t_flat])
    # the IPU of each matrix's first element
    owner = np.zeros(rows * cols, dtype=np.int64)
    owner[np.repeat(p_pos, p_len) + (np.arange(int(p_len.sum())) - np.repeat(np.cumsum(p_len) - p_len, p_len))] = (
        np.repeat(p_tiles, p_len)
    )
    first_ipu = owner[t_flat[::size]] // tiles_per_ipu
    pre = graph.addVariable(T.dtype, [rows * cols], f"{name}/preRegroup")
    out = graph.addVariable(T.dtype, [rows * cols], name)
    m_tiles = np.zeros(count, dtype=np.int64)
    for ipu in np.unique(first_ipu):
        chosen = np.flatnonzero(first_ipu == ipu)
        ipu_tiles = graph_tiles[graph_tiles // tiles_per_ipu == ipu]
        per_tile = -(-chosen.size // ipu_tiles.size)
        m_tiles[chosen] = ipu_tiles[np.arange(chosen.size) // per_tile]
    for var in (pre, out):
        state.set_mapping(int(var.vars[0]), np.arange(count) * size, np.arange(1, count + 1) * size, m_tiles)
    prog.add(Copy(grouped, pre))
    # each tile's matrices are consecutive: its workers take equal runs of them
    v_tile, t0, t1 = worker_runs(m_tiles)
    v = np.arange(v_tile.size, dtype=np.int64)
    cs = graph.addComputeSet(f"{name}/Transpose")
    add_vertices(
        graph,
        cs,
        f"popops::Transpose2d<{T.dtype}>",
        v_tile,
        {
            "src": (v, np.full(v.size, int(pre.vars[0])), t0 * size, (t1 - t0) * size),
            "dst": (v, np.full(v.size, int(out.vars[0])), t0 * size, (t1 - t0) * size),
        },
        work={"rows": np.full(v.size, to_group), "cols": np.full(v.size, from_group), "matrices": t1 - t0},
    )
    # the view: T'[r, c] is element (x, y) of matrix t of the transposed matrices, to innermost
    r, c = np.divmod(p, cols)
    a, x, b, y = r // from_group, r % from_group, c // to_group, c % to_group
    q = ((a * col_groups + b) * from_group + x) * to_group + y
    view = Tensor.from_elements(state, T.dtype, tuple(T.shape), np.full(q.size, int(out.vars[0]), dtype=np.int64), q)

    def run_transpose(data):
        data.write(view, data.read(T))

    state.compute_sets[cs.id].functional.append(run_transpose)
    prog.add(Execute(cs))
    prog.add(WriteUndef(pre))
    return view


def innermost_grouping(graph: Graph, T: Tensor) -> int:
    """The grouping of T's last dimension: the gcd of the contiguous start of T's first row and the
    largest piece of that row on one tile, 1 unless it divides the row (poputil's
    detectInnermostGrouping, lib/poputil/VarStructure.cpp)."""
    cols = T.shape[-1]
    if T.numElements() == 0:
        return 1
    row = T.reshape((T.numElements() // cols, cols))[0]
    var, idx = row.element_arrays()
    breaks = np.flatnonzero((var[1:] != var[:-1]) | (idx[1:] != idx[:-1] + 1))
    contiguous = int(breaks[0]) + 1 if breaks.size else cols
    # the longest run of the row's elements on one tile (Graph::getTileMapping's intervals)
    tiles, pos, _, _, lengths = tile_pieces(graph, row)
    tile_of = np.empty(cols, dtype=np.int64)
    tile_of[
        np.repeat(pos, lengths) + (np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths))
    ] = np.repeat(tiles, lengths)
    edges = np.flatnonzero(np.diff(tile_of)) + 1
    longest = int(np.diff(np.concatenate(([0], edges, [cols]))).max())
    grouping = math.gcd(longest, contiguous)
    return grouping if cols % grouping == 0 else 1


def dim_grouping(graph: Graph, T: Tensor) -> tuple[int, int]:
    """(dimension, size) of the first grouping poputil's detectDimGroupings finds in a tensor: the
    dimension whose innermost grouping is the largest, the first on a tie; (0, 1) when none."""
    best = (0, 1)
    for dim in range(T.rank()):
        if T.shape[dim] == 1:
            continue
        view = T.dimShuffle([d for d in range(T.rank()) if d != dim] + [dim])
        g = math.gcd(innermost_grouping(graph, view), T.shape[dim])
        if g > best[1]:
            best = (dim, g)
    return best


def regroup_if_beneficial(graph: Graph, B: Tensor, ref: Tensor, prog: Sequence, name: str) -> Tensor:
    """B regrouped to the grouping of `ref` when their groupings are along different dimensions and
    both are multiples of the regroup grain; B itself otherwise
    (popops::rearrange::regroupIfBeneficial, lib/popops/Rearrange.cpp). A tensor of more than two
    dimensions is regrouped as the matrix of its two grouped dimensions, the others outermost."""
    if B.rank() < 2 or B.shape != ref.shape or B.dtype.size not in (2, 4):
        return B
    (b_dim, b_size), (r_dim, r_size) = dim_grouping(graph, B), dim_grouping(graph, ref)
    grain = regroup_grain(B.dtype)
    if b_size == 1 or r_size == 1 or b_dim == r_dim or b_size % grain or r_size % grain:
        return B
    perm = [d for d in range(B.rank()) if d not in (b_dim, r_dim)] + [b_dim, r_dim]
    shape = [B.shape[d] for d in perm]
    matrix = B.dimShuffle(perm).reshape((math.prod(shape[:-1]), shape[-1]))
    out = regroup(graph, matrix, b_size, r_size, prog, name)
    return out.reshape(shape).dimShuffle([int(d) for d in np.argsort(perm)])
