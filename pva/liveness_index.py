"""Not-always-live memory of every liveness step, answered from what one tile or variable holds.

A lowered variable counts in a step when it is allocated, not always live, and its equivalence class
is live in the step (formats.pop.query.compilation). For one tile (or unlowered variable, or name)
its lowered variables and the live intervals of their classes are read once; they give the bytes
of every step as a step function: the steps where the bytes change, and the bytes from each on. A
loop over steps and tiles then bisects a short list instead of asking SQLite once per call.

Memory: per tile or variable asked for, three int64 per lowered variable it holds and a few
numbers per live interval of its classes, never steps x tiles.
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from formats.lazy_import import lazy_module

from .errors import InconsistentReportError

if TYPE_CHECKING:
    import numpy as np

    from formats.pop.reader import ProfileReader
else:
    np = lazy_module("numpy")

#: Lists of a tile's live variables kept, one per tile and span of steps between changes.
VARIABLE_LISTS_KEPT = 1 << 14
#: Steps whose IPUs' bytes are read step by step before every step's are read at once.
_IPU_STEPS_ASKED = 64


class _Intervals(NamedTuple):
    """Merged live intervals [start, end) of classes, by class index."""

    classes: np.ndarray
    starts: np.ndarray
    ends: np.ndarray


class _Held(NamedTuple):
    """The allocated, not-always-live lowered variables of a tile or variable, and when they are live."""

    sizes: np.ndarray  # bytes of each piece
    classes: np.ndarray  # index of each piece's class in the held classes
    class_count: int  # the number of held classes
    groups: np.ndarray  # index into keys of each piece
    keys: list[tuple[Any, Any]]  # (unlowered id, a piece's name) or (None, name)
    intervals: _Intervals  # the live intervals of the held classes
    points: list[int]  # steps where the bytes change, ascending
    values: list[int]  # the bytes from each point on (0 before the first)
    changes: list[int]  # steps where any piece becomes live or dies, ascending


class LivenessIndex:
    """Not-always-live bytes by step of tiles, variables and names, and the variables live on a tile."""

    def __init__(self, reader: ProfileReader, num_steps: int, sized: Callable[[list], Iterable]) -> None:
        self._reader = reader
        self._steps = num_steps
        self._sized = sized
        self._tiles: dict[int, _Held] = {}
        self._held: dict[tuple, _Held] = {}
        self._lists: OrderedDict[tuple[int, int], tuple] = OrderedDict()
        self._ipus: dict[Any, dict[Any, Any]] = {}
        self._ipu_steps_asked = 0
        self._ipus_complete = False

    def tile_bytes(self, step: int, tile: int) -> int:
        """Not-always-live bytes on a tile (of one replica) in a step."""
        held = self._tiles.get(tile) or self._hold_tile(tile)
        at = bisect.bisect_right(held.points, step)
        return held.values[at - 1] if at else 0

    def tiles_bytes(self, step: int, lo: int, hi: int) -> int:
        """Not-always-live bytes on tiles lo..hi-1 in a step."""
        return sum(self.tile_bytes(step, tile) for tile in range(lo, hi))

    def variable_bytes(self, step: int, var_id: int) -> int:
        """Not-always-live bytes of an unlowered variable in a step."""
        return self._bytes(("var", var_id), step)

    def named_bytes(self, step: int, name: str) -> int:
        """Not-always-live bytes of the lowered variables called `name` that have no unlowered variable."""
        return self._bytes(("name", name), step)

    def ipu_bytes(self, step: int, ipu: int) -> Any:
        """Not-always-live bytes of a step on an IPU as the report records them, or None: a step's
        IPUs are read together, and every step's once a loop has asked for `_IPU_STEPS_ASKED`."""
        found = self._ipus.get(step)
        if found is None:
            if self._ipu_steps_asked < _IPU_STEPS_ASKED:
                self._ipu_steps_asked += 1
                found = self._ipus[step] = dict(self._reader.liveness_ipu_bytes(step))
            else:
                if not self._ipus_complete:
                    self._ipus.clear()
                    for row_step, row_ipu, size in self._reader.every_liveness_ipu_bytes():
                        self._ipus.setdefault(row_step, {})[row_ipu] = size
                    self._ipus_complete = True
                found = self._ipus.get(step, {})
        return found.get(ipu)

    def tile_variables(self, step: int, tile: int) -> tuple:
        """The variables live but not always live on a tile in a step, as `sized` makes them from
        (unlowered id or None, name, bytes): pieces of one unlowered variable summed, pieces without
        one summed by name. Kept for the last `VARIABLE_LISTS_KEPT` tiles and spans of steps."""
        held = self._tiles.get(tile) or self._hold_tile(tile)
        key = (tile, bisect.bisect_right(held.changes, step))
        found = self._lists.get(key)
        if found is None:
            found = self._lists[key] = tuple(self._sized(_live_on(held, step)))
            if len(self._lists) > VARIABLE_LISTS_KEPT:
                self._lists.popitem(last=False)
        return found

    def matrix(self, start: int, stop: int, tiles: int) -> np.ndarray:
        """Not-always-live bytes of steps start..stop-1 (rows) on every tile of a replica (columns)."""
        out = np.zeros((stop - start + 1, tiles), dtype=np.int64)
        ids, every = self._intervals_of(None)
        first = np.searchsorted(every.classes, np.arange(len(ids)))
        count = np.diff(np.append(first, len(every.classes)))
        for rows in _batches(self._reader.every_not_always_live_piece(), 1 << 16):
            tile = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            sizes, raw = self._columns([(r[2], r[1]) for r in rows])
            at = np.minimum(np.searchsorted(ids, raw), max(len(ids) - 1, 0))
            keep = (tile >= 0) & (tile < tiles) & (ids[at] == raw if len(ids) else False)
            tile, classes, sizes = tile[keep], at[keep], sizes[keep]
            repeats = count[classes]  # one event pair per piece and interval of its class
            piece = np.repeat(np.arange(len(classes)), repeats)
            interval = np.repeat(first[classes], repeats) + _ranks(repeats)
            lo = np.clip(every.starts[interval], start, stop) - start
            hi = np.clip(every.ends[interval], start, stop) - start
            live = lo < hi
            piece, lo, hi = piece[live], lo[live], hi[live]
            np.add.at(out, (lo, tile[piece]), sizes[piece])
            np.subtract.at(out, (hi, tile[piece]), sizes[piece])
        np.cumsum(out, axis=0, out=out)
        return out[:-1]

    # -- what one tile or variable holds --

    def _bytes(self, key: tuple, step: int) -> int:
        held = self._held.get(key) or self._hold(key)
        at = bisect.bisect_right(held.points, step)
        return held.values[at - 1] if at else 0

    def _hold_tile(self, tile: int) -> _Held:
        held = self._tiles[tile] = self._grouped(self._reader.not_always_live_pieces(tile=tile))
        return held

    def _hold(self, key: tuple) -> _Held:
        kind, value = key
        if kind == "var":
            rows = self._reader.not_always_live_pieces(var_id=value)
        else:
            rows = self._reader.not_always_live_pieces(name=value)
        held = self._held[key] = self._grouped(rows)
        return held

    def _grouped(self, rows: list[tuple]) -> _Held:
        sizes, raw = self._columns(rows)
        ids, classes = np.unique(raw, return_inverse=True)
        classes = classes.reshape(-1)
        keys: dict[tuple, int] = {}
        groups = np.fromiter(
            (keys.setdefault((row[2], None if row[2] is not None else row[3]), len(keys)) for row in rows),
            dtype=np.int64,
            count=len(rows),
        )
        names = list(keys)
        for row in rows:  # the name given for an unlowered variable's pieces is one of theirs
            if row[2] is not None:
                names[keys[(row[2], None)]] = (row[2], row[3])
        weights = np.zeros(len(ids), dtype=np.int64)
        np.add.at(weights, classes, sizes)
        _, intervals = self._intervals_of(ids)
        points, values = _step_function(intervals, weights)
        changes = np.unique(np.concatenate([intervals.starts, intervals.ends])).tolist()
        return _Held(sizes, classes, len(ids), groups, names, intervals, points, values, changes)

    def _columns(self, rows: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
        """The bytes and the equivalence class of each piece."""
        try:
            sizes = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
            classes = np.fromiter((row[1] for row in rows), dtype=np.int64, count=len(rows))
        except (TypeError, ValueError, OverflowError):
            raise self._bad("vars_info size_bytes and equivalence_class must be integers") from None
        return sizes, classes

    def _intervals_of(self, ids: np.ndarray | None) -> tuple[np.ndarray, _Intervals]:
        """The live intervals of the classes `ids` (ascending; None: every class), overlapping ones
        merged (a class counts once in a step), with the classes as indexes into the ids returned."""
        if ids is None:
            rows: Iterable[tuple] = self._reader.equivalence_class_steps()
        else:
            rows = self._reader.equivalence_class_steps_of(ids.tolist()) if len(ids) else []
        merged = np.array(list(self._merged(rows)), dtype=np.int64).reshape(-1, 3)
        if ids is None:
            ids = np.unique(merged[:, 0])
        at = np.searchsorted(ids, merged[:, 0])
        return ids, _Intervals(at, merged[:, 1].copy(), merged[:, 2].copy())

    def _merged(self, rows: Iterable[tuple]) -> Iterator[tuple[int, int, int]]:
        """(class, start, end) with overlapping intervals of a class joined, clipped to the steps."""
        last: tuple[int, int, int] | None = None
        for cls, start, end in rows:
            if type(cls) is not int or type(start) is not int or type(end) is not int:
                raise self._bad("equivalence_class_steps class, start and end must be integers")
            start, end = max(start, 0), min(end, self._steps)
            if start >= end:
                continue
            if last is not None and last[0] == cls and start <= last[2]:
                last = (cls, last[1], max(end, last[2]))
                continue
            if last is not None:
                yield last
            last = (cls, start, end)
        if last is not None:
            yield last

    def _bad(self, message: str) -> InconsistentReportError:
        path = self._reader.path
        return InconsistentReportError(f"{path!r}: {message}", path)


def _live_on(held: _Held, step: int) -> list[tuple[Any, Any, int]]:
    """(unlowered id or None, name, bytes) of the held pieces live in a step, by group."""
    if not len(held.sizes):
        return []
    intervals = held.intervals
    live = np.zeros(held.class_count, dtype=bool)
    live[intervals.classes[(intervals.starts <= step) & (intervals.ends > step)]] = True
    mask = live[held.classes]
    groups = held.groups[mask]
    totals = np.zeros(len(held.keys), dtype=np.int64)
    np.add.at(totals, groups, held.sizes[mask])
    present = np.zeros(len(held.keys), dtype=bool)
    present[groups] = True
    return [(*held.keys[g], int(totals[g])) for g in np.flatnonzero(present).tolist()]


def _batches(rows: Iterable[tuple], size: int) -> Iterator[list[tuple]]:
    """Lists of up to `size` rows."""
    batch: list[tuple] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _ranks(repeats: np.ndarray) -> np.ndarray:
    """0, 1, ..., n-1 for each n of `repeats`, concatenated."""
    ends = np.cumsum(repeats)
    return np.arange(int(ends[-1]) if len(ends) else 0) - np.repeat(ends - repeats, repeats)


def _step_function(intervals: _Intervals, weights: np.ndarray) -> tuple[list[int], list[int]]:
    """The steps where the sum of the live classes' weights changes, and the sum from each on."""
    each = weights[intervals.classes]
    positions = np.concatenate([intervals.starts, intervals.ends])
    deltas = np.concatenate([each, -each])
    order = np.argsort(positions, kind="stable")
    positions, sums = positions[order], np.cumsum(deltas[order])
    last = np.ones(len(positions), dtype=bool)  # the last change at each position holds from there
    last[:-1] = positions[1:] != positions[:-1]
    return positions[last].tolist(), sums[last].tolist()
