"""The lanes of an execution timeline, which `pva plot` and the HTML page both draw.

Steps on one IPU may overlap: a Sync of idle tiles spans other tiles' exchange and compute. Each
IPU therefore gets two lanes of non-overlapping segments:

- the *path*: at each cycle, the one step that owns it: the step of the highest rank covering it
  (compute, then exchange, then stream copies, then sync: `STEP_RANK`, the rule by which
  `pva optime` counts each cycle once), and among steps of one rank the one that started last.
  Every cycle of the IPU's run is on the path once, so the path's cycles by type are the shares
  of the run's time, and nothing drawn on it hides another type's time;
- the *overlapped* lane: the time of steps that run beside the path's owner (for example the
  idle tiles' Sync under a compute set), drawn apart so it hides nothing either.
"""

from __future__ import annotations

import heapq

import numpy as np

#: Which step owns a cycle where steps overlap: the highest rank; types not listed rank as exchange.
STEP_RANK = {
    "OnTileExecute": 3,
    "Sync": 0,
    "StreamCopyBegin": 1,
    "StreamCopyMid": 1,
    "StreamCopyEnd": 1,
    "StreamCopy": 1,
}
EXCHANGE_RANK = 2


def step_rank(kind: str) -> int:
    """The rank of a program type where steps overlap (`STEP_RANK`)."""
    return STEP_RANK.get(kind, EXCHANGE_RANK)


def _sweep(start: np.ndarray, end: np.ndarray, rank: np.ndarray, members: np.ndarray) -> list[tuple[int, int, int]]:
    """(start, end, member) pieces of one cluster of overlapping intervals, each cycle to its highest rank."""
    cuts = np.unique(np.concatenate([start[members], end[members]]))
    order = members[np.argsort(start[members], kind="stable")]
    heap: list[tuple[int, int]] = []
    pieces: list[tuple[int, int, int]] = []
    j = 0
    for lo, hi in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
        while j < order.size and start[order[j]] <= lo:
            heapq.heappush(heap, (-int(rank[order[j]]), int(order[j])))
            j += 1
        while heap and end[heap[0][1]] <= lo:
            heapq.heappop(heap)
        if not heap:
            continue
        owner = heap[0][1]
        if pieces and pieces[-1][2] == owner and pieces[-1][1] == lo:
            pieces[-1] = (pieces[-1][0], hi, owner)
        else:
            pieces.append((lo, hi, owner))
    return pieces


def partition(start: np.ndarray, end: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split intervals into non-overlapping pieces: each point goes to the covering interval of highest rank.

    Returns (start, end, index of the owning interval), in time order. Ranks must be distinct; empty
    intervals own nothing. Intervals that overlap no other pass through unchanged (no Python loop).
    """
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    keep = np.flatnonzero(end > start)
    if not keep.size:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    keep = keep[np.lexsort((keep, start[keep]))]
    s, e = start[keep], end[keep]
    reach = np.maximum.accumulate(e)
    first = np.ones(keep.size, dtype=bool)
    first[1:] = s[1:] >= reach[:-1]
    cluster = np.cumsum(first) - 1
    sizes = np.bincount(cluster)
    alone = sizes[cluster] == 1
    out_s, out_e, out_i = [s[alone]], [e[alone]], [keep[alone]]
    for c in np.flatnonzero(sizes > 1).tolist():
        pieces = _sweep(start, end, rank, keep[cluster == c])
        arr = np.array(pieces, dtype=np.int64).reshape(-1, 3)
        out_s.append(arr[:, 0])
        out_e.append(arr[:, 1])
        out_i.append(arr[:, 2])
    ps, pe, pi = np.concatenate(out_s), np.concatenate(out_e), np.concatenate(out_i)
    order = np.argsort(ps, kind="stable")
    return ps[order], pe[order], pi[order]


def _ranks(start: np.ndarray, kind_rank: np.ndarray) -> np.ndarray:
    """Distinct ranks: the type's rank, then the later start, then the later position."""
    order = np.lexsort((np.arange(start.size), start, kind_rank))
    rank = np.empty(start.size, dtype=np.int64)
    rank[order] = np.arange(start.size)
    return rank


def _subtract(start: np.ndarray, end: np.ndarray, owned_s, owned_e, owned_i) -> tuple[np.ndarray, ...]:
    """The parts of each interval it does not own: (start, end, index), one piece per gap in its ownership."""
    n = start.size
    order = np.lexsort((owned_s, owned_i))
    owned_s, owned_e, owned_i = owned_s[order], owned_e[order], owned_i[order]
    # An interval's owned pieces are sorted and disjoint: its free parts run from its start to its first
    # piece, from each piece to the next, and from its last piece to its end.
    counts = np.bincount(owned_i, minlength=n)
    firsts = np.cumsum(counts) - counts
    before_hi = end.copy()
    has = counts > 0
    before_hi[has] = owned_s[firsts[has]]
    after_hi = end[owned_i].copy()
    same = np.zeros(owned_s.size, dtype=bool)
    same[:-1] = owned_i[1:] == owned_i[:-1]
    after_hi[same] = owned_s[1:][same[:-1]]
    los = np.concatenate([start, owned_e])
    his = np.concatenate([before_hi, after_hi])
    idx = np.concatenate([np.arange(n), owned_i])
    free = his > los
    return los[free], his[free], idx[free]


def lanes(start, end, kind_rank) -> dict:
    """The path and overlapped lanes of one IPU's steps (cycles; `kind_rank` is each step's `step_rank`).

    Returns {"path": (start, end, index), "overlapped": (start, end, index)}: arrays of segments in time
    order, `index` pointing into the steps given.
    """
    start = np.asarray(start, dtype=np.int64)
    end = np.maximum(np.asarray(end, dtype=np.int64), start)
    rank = _ranks(start, np.asarray(kind_rank, dtype=np.int64))
    path = partition(start, end, rank)
    hs, he, hi = _subtract(start, end, *path)
    # pieces of different steps hidden at the same time: the lane shows the highest-ranked of them
    ps, pe, pi = partition(hs, he, rank[hi])
    return {"path": path, "overlapped": (ps, pe, hi[pi])}


def merge_short(
    start: np.ndarray, end: np.ndarray, kind: np.ndarray, step: np.ndarray, resolution: int, t0: int, span: int
) -> tuple[np.ndarray, ...]:
    """Merge runs of segments shorter than 1/resolution of the span that fall in the same slot of it.

    Returns (start, end, kind, step, count): a merged segment takes the type with the most cycles
    among its members and the step of its longest member. Longer segments are never merged.
    """
    n = start.size
    ones = np.ones(n, dtype=np.int64)
    if resolution <= 0 or n <= resolution:
        return start, end, kind, step, ones
    width = max(1, span) / resolution
    duration = end - start
    long = duration >= width
    slot = np.floor((start - t0) / width).astype(np.int64)
    new = np.ones(n, dtype=bool)
    new[1:] = long[1:] | long[:-1] | (slot[1:] != slot[:-1])
    first = np.flatnonzero(new)
    group = np.cumsum(new) - 1
    longest = np.lexsort((-duration, group))[first]
    kinds = int(kind.max()) + 1 if n else 1
    weight = np.bincount(group * kinds + kind, weights=duration, minlength=first.size * kinds)
    best = weight.reshape(first.size, kinds).argmax(axis=1)
    return start[first], np.maximum.reduceat(end, first), best, step[longest], np.diff(np.append(first, n))
