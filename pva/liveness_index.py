"""Not-always-live memory of every liveness step, answered from columns built once per tile or variable.

A lowered variable counts in a step when it is allocated, not always live, and its equivalence class
is live in the step (formats.pop.query.compilation). For one tile (or unlowered variable, or name)
the bytes of every step come from one read of its lowered variables and the classes' live intervals:
each interval adds its class's bytes from its first step and takes them away after its last. A loop
over steps and tiles then reads numbers out of arrays instead of asking SQLite 1.4 million times.

Memory: a tile's column is one int64 per liveness step, kept for every tile a loop touches (the
steps x tiles answers it asked for), with its pieces' bytes, classes and groups (three int64 per
lowered variable); variables' columns are kept up to `VARIABLE_COLUMN_BYTES`.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any, NamedTuple

from formats.lazy_import import lazy_module

from .errors import InconsistentReportError

if TYPE_CHECKING:
    import numpy as np

    from formats.pop.reader import ProfileReader
else:
    np = lazy_module("numpy")

#: Bytes of variables' and names' columns kept; the least recently used go first.
VARIABLE_COLUMN_BYTES = 64 << 20
#: Steps whose live classes are kept for listing variables.
_LIVE_STEPS_KEPT = 16


class _Pieces(NamedTuple):
    """The allocated, not-always-live lowered variables of a tile: bytes, dense class (-1: never live),
    and group (an index into keys: (unlowered id, None) or (None, name))."""

    sizes: np.ndarray
    classes: np.ndarray
    groups: np.ndarray
    keys: list[tuple[Any, Any]]


class LivenessIndex:
    """Not-always-live bytes by step of tiles, variables and names, and the variables live on a tile."""

    def __init__(self, reader: ProfileReader, num_steps: int) -> None:
        self._reader = reader
        self._steps = num_steps
        self._tiles: dict[int, np.ndarray] = {}
        self._pieces: dict[int, _Pieces] = {}
        self._others: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._live: OrderedDict[int, np.ndarray] = OrderedDict()
        self._ipus: dict[tuple[int, int], Any] | None = None
        self._intervals: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    # -- columns --

    def tile_bytes(self, step: int, tile: int) -> int:
        """Not-always-live bytes on a tile (of one replica) in a step."""
        column = self._tiles.get(tile)
        if column is None:
            column = self._tiles[tile] = self._column(self._tile_pieces(tile))
        return int(column[step])

    def tiles_bytes(self, step: int, lo: int, hi: int) -> int:
        """Not-always-live bytes on tiles lo..hi-1 in a step."""
        return sum(self.tile_bytes(step, tile) for tile in range(lo, hi))

    def variable_bytes(self, step: int, var_id: int) -> int:
        """Not-always-live bytes of an unlowered variable in a step."""
        return int(self._other(("var", var_id), lambda: self._reader.not_always_live_pieces(var_id=var_id))[step])

    def named_bytes(self, step: int, name: str) -> int:
        """Not-always-live bytes of the lowered variables called `name` that have no unlowered variable."""
        return int(self._other(("name", name), lambda: self._reader.not_always_live_pieces(name=name))[step])

    def ipu_bytes(self, step: int, ipu: int) -> Any:
        """Not-always-live bytes of a step on an IPU as the report records them, or None."""
        if self._ipus is None:
            self._ipus = {(s, i): size for s, i, size in self._reader.liveness_ipu_bytes()}
        return self._ipus.get((step, ipu))

    def tile_variables(self, step: int, tile: int) -> list[tuple[Any, Any, int]]:
        """(unlowered id or None, name, bytes) live but not always live on a tile in a step: pieces of one
        unlowered variable summed, pieces without one summed by name."""
        pieces = self._tile_pieces(tile)
        if not len(pieces.sizes):
            return []
        live = self._live_classes(step)
        known = pieces.classes >= 0
        mask = known.copy()
        mask[known] = live[pieces.classes[known]]
        groups = pieces.groups[mask]
        totals = np.zeros(len(pieces.keys), dtype=np.int64)
        np.add.at(totals, groups, pieces.sizes[mask])
        present = np.zeros(len(pieces.keys), dtype=bool)
        present[groups] = True
        return [(*pieces.keys[g], int(totals[g])) for g in np.flatnonzero(present).tolist()]

    def _tile_pieces(self, tile: int) -> _Pieces:
        found = self._pieces.get(tile)
        if found is None:
            found = self._pieces[tile] = self._grouped(self._reader.not_always_live_pieces(tile=tile))
        return found

    def _grouped(self, rows: list[tuple]) -> _Pieces:
        classes, sizes = self._dense(rows)
        keys: dict[tuple, int] = {}
        groups = np.fromiter(
            (keys.setdefault((row[2], None if row[2] is not None else row[3]), len(keys)) for row in rows),
            dtype=np.int64,
            count=len(rows),
        )
        names = [(unlowered, name) for unlowered, name in keys]
        for row in rows:  # the name shown for an unlowered variable's pieces is one of theirs
            if row[2] is not None:
                names[keys[(row[2], None)]] = (row[2], row[3])
        return _Pieces(sizes, classes, groups, names)

    def _other(self, key: tuple, rows) -> np.ndarray:
        column = self._others.get(key)
        if column is None:
            column = self._others[key] = self._column(rows())
            while len(self._others) > max(1, VARIABLE_COLUMN_BYTES // max(1, column.nbytes)):
                self._others.popitem(last=False)
        else:
            self._others.move_to_end(key)
        return column

    def _column(self, pieces: list[tuple] | _Pieces) -> np.ndarray:
        """Bytes of the pieces (rows of the query layer, or grouped) live in each step."""
        column = np.zeros(self._steps + 1, dtype=np.int64)
        if len(pieces) if isinstance(pieces, list) else len(pieces.sizes):
            classes, sizes = self._dense(pieces) if isinstance(pieces, list) else (pieces.classes, pieces.sizes)
            known = classes >= 0
            weights = np.zeros(len(self._class_ids()), dtype=np.int64)
            np.add.at(weights, classes[known], sizes[known])
            _, interval_class, starts, ends = self._class_intervals()
            each = weights[interval_class]
            np.add.at(column, starts, each)
            np.subtract.at(column, ends, each)
            np.cumsum(column, out=column)
        column = column[: self._steps]
        column.flags.writeable = False
        return column

    def _dense(self, rows: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
        """The dense class index (-1: never live) and the bytes of each piece."""
        try:
            sizes = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
            raw = np.fromiter((row[1] for row in rows), dtype=np.int64, count=len(rows))
        except (TypeError, ValueError, OverflowError):
            raise self._bad("vars_info size_bytes and equivalence_class must be integers") from None
        ids = self._class_ids()
        at = np.searchsorted(ids, raw)
        at[at >= len(ids)] = 0
        hit = ids[at] == raw if len(ids) else np.zeros(len(raw), dtype=bool)
        return np.where(hit, at, -1), sizes

    # -- the classes' live intervals --

    def _class_ids(self) -> np.ndarray:
        return self._class_intervals()[0]

    def _class_intervals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The ids of the classes with live steps, and their merged intervals (dense class, start, end)."""
        if self._intervals is None:
            merged: list[tuple[int, int, int]] = []
            for cls, start, end in self._reader.equivalence_class_steps():
                if not all(isinstance(v, int) for v in (cls, start, end)):
                    raise self._bad("equivalence_class_steps class, start and end must be integers")
                start, end = max(start, 0), min(end, self._steps)
                if start >= end:
                    continue
                if merged and merged[-1][0] == cls and start <= merged[-1][2]:
                    if end > merged[-1][2]:
                        merged[-1] = (cls, merged[-1][1], end)
                else:
                    merged.append((cls, start, end))
            table = np.array(merged, dtype=np.int64).reshape(-1, 3)
            ids, dense = np.unique(table[:, 0], return_inverse=True)
            self._intervals = (ids, dense.reshape(-1), table[:, 1].copy(), table[:, 2].copy())
        return self._intervals

    def _live_classes(self, step: int) -> np.ndarray:
        live = self._live.get(step)
        if live is None:
            ids, dense, starts, ends = self._class_intervals()
            live = np.zeros(len(ids), dtype=bool)
            live[dense[(starts <= step) & (ends > step)]] = True
            self._live[step] = live
            if len(self._live) > _LIVE_STEPS_KEPT:
                self._live.popitem(last=False)
        return live

    def _bad(self, message: str) -> InconsistentReportError:
        path = self._reader.path
        return InconsistentReportError(f"{path!r}: {message}", path)
