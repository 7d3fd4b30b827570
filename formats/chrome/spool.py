"""Staged rows of the Chrome trace import, grouped by thread: held in memory up to a limit, then
spilled to an Arrow IPC file beside the output, and read back a group at a time."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from ..atomic import AtomicOutput, output_error
from ..errors import InvalidInputError

#: Bytes of staged columns sorted and written to the temporary file at a time.
_SPILL_BYTES = 32 << 20


def event_schema() -> pa.Schema:
    return pa.schema(
        [
            ("group", pa.int32()),  # index of the event's thread
            ("seq", pa.int64()),  # order of the event in the file
            ("start", pa.int64()),
            ("end", pa.int64()),  # _OPEN while open
            ("channel", pa.int32()),  # index in the channels, in order of first use
            ("label", pa.string()),
            ("args", pa.binary()),  # JSON object, or null
        ]
    )


def counter_schema() -> pa.Schema:
    return pa.schema([("group", pa.int32()), ("timestamp", pa.int64()), ("value", pa.float64())])


class Spool:
    """Record batches whose first column ("group") says which thread or counter a row belongs to:
    kept in memory up to `limit` bytes, and beyond it moved, sorted by group, to a temporary Arrow
    IPC file beside the output. `group` then gives a group's rows in the order they were added."""

    def __init__(self, schema: pa.Schema, output: str, limit: int, path: str | None = None) -> None:
        self.schema = schema
        self._output = output
        self._limit = limit
        self._path = path  # a temporary file another owns, to spill to instead of one of our own
        self._memory: list[pa.RecordBatch] = []
        self._bytes = 0
        self._spilled: dict[int, list[int]] = {}  # group -> numbers of its batches in the file
        self._batches = 0
        self._file: AtomicOutput | None = None
        self._sink: Any = None
        self._writer: Any = None
        self._source: Any = None
        self._reader: Any = None
        # the rows left in memory at the end: tables sorted by group, with their groups and bounds
        self._kept: list[tuple[pa.Table, np.ndarray, np.ndarray]] = []
        # rows of another spool's file: (reader, group -> its batches there, change to each batch)
        self._parts: list[tuple[Any, dict[int, list[int]], Callable[[pa.RecordBatch], pa.RecordBatch]]] = []
        self._part_sources: list[Any] = []

    def add(self, batch: pa.RecordBatch) -> None:
        self._memory.append(batch)
        self._bytes += batch.nbytes
        if self._bytes > self._limit:
            self._spill()

    def _spill(self) -> None:
        """Move the rows in memory to the file."""
        try:
            if self._sink is None:
                if self._path is None:
                    self._file = AtomicOutput(self._output)
                self._sink = pa.OSFile(self._path or self._file.path, "wb")  # type: ignore[union-attr]
                self._writer = pa.ipc.new_file(self._sink, self.schema)
            for group, batch in self._by_group():
                self._writer.write_batch(batch)
                self._spilled.setdefault(group, []).append(self._batches)
                self._batches += 1
        except (FileNotFoundError, PermissionError) as exc:
            raise InvalidInputError(f"cannot write {self._output!r}: {exc}", self._output) from None
        except OSError as exc:  # a full disk
            translated = output_error(exc, self._output, only_machine=True)
            if translated is not None:
                raise translated from None
            raise

    def _slices(self) -> Iterator[tuple[pa.Table, np.ndarray, np.ndarray]]:
        """The rows in memory taken out a slice of at most _SPILL_BYTES at a time: each slice, its
        rows' groups in order, and the order that sorts its rows by group (stable)."""
        batches, self._memory, self._bytes = self._memory, [], 0
        while batches:
            size = 0
            count = 0
            while count < len(batches) and (not count or size + batches[count].nbytes <= _SPILL_BYTES):
                size += batches[count].nbytes
                count += 1
            part = pa.Table.from_batches(batches[:count], self.schema).combine_chunks()
            del batches[:count]
            groups = part.column(0).to_numpy()
            order = np.argsort(groups, kind="stable")
            yield part, groups[order], order

    def _by_group(self) -> Iterator[tuple[int, pa.RecordBatch]]:
        """The rows in memory, taken out a slice of at most _SPILL_BYTES at a time, as one record
        batch per group of each slice (rows in the order they were added)."""
        for part, groups, order in self._slices():
            part = part.take(order).combine_chunks()
            bounds = (np.flatnonzero(np.diff(groups)) + 1).tolist()
            for first, stop in zip([0, *bounds], [*bounds, len(groups)]):
                if stop > first:
                    for batch in part.slice(first, stop - first).to_batches():
                        yield int(groups[first]), batch

    def finish(self) -> None:
        """All rows are added: those in memory are ordered by group, the file opened for reading."""
        for part, groups, order in self._slices():  # as `_by_group` takes them
            starts = np.flatnonzero(np.concatenate([[True], groups[1:] != groups[:-1]])) if len(groups) else groups
            bounds = np.append(starts, len(groups))
            self._kept.append((part.take(pa.array(order)).combine_chunks(), groups[starts], bounds))
        if self._writer is not None:
            self._close_file()
            self._source = pa.OSFile(self._path or self._file.path, "rb")  # type: ignore[union-attr]
            self._reader = pa.ipc.open_file(self._source)

    def _close_file(self) -> None:
        """Finish the file the rows were moved to."""
        self._writer.close()
        self._sink.close()
        self._writer = self._sink = None

    def hand_over(self) -> dict[int, list[int]]:
        """All rows are added: move them all to the file (another's, given as `path`) and close it;
        returns the numbers of each group's batches there, for `attach`."""
        self._spill()
        self._close_file()
        return self._spilled

    def attach(
        self, path: str, groups: dict[int, list[int]], change: Callable[[pa.RecordBatch], pa.RecordBatch]
    ) -> None:
        """Add the rows another spool handed over in `path` after ours: `groups` gives each of our
        groups its batches there, and `change` is applied to each batch read."""
        source = pa.OSFile(path, "rb")
        self._parts.append((pa.ipc.open_file(source), groups, change))
        self._part_sources.append(source)

    def group(self, group: int) -> pa.Table:
        """The rows of one group, in the order they were added."""
        pieces = [self._reader.get_batch(k) for k in self._spilled.get(group, ())]
        for table, kept_groups, bounds in self._kept:
            at = int(np.searchsorted(kept_groups, group))
            if at < len(kept_groups) and kept_groups[at] == group:
                pieces.extend(table.slice(int(bounds[at]), int(bounds[at + 1] - bounds[at])).to_batches())
        for reader, groups, change in self._parts:
            pieces.extend(change(reader.get_batch(k)) for k in groups.get(group, ()))
        return pa.Table.from_batches(pieces, self.schema).combine_chunks()

    def groups(self, wanted: list[int]) -> tuple[pa.Table, np.ndarray]:
        """The rows of several groups (each in the order added) as one table, group after group in
        the order given, and the number of rows of each."""
        if self._spilled or self._parts or len(self._kept) != 1:
            tables = [self.group(g) for g in wanted]
            return pa.concat_tables(tables).combine_chunks(), np.array([t.num_rows for t in tables], dtype=np.int64)
        table, groups, bounds = self._kept[0]
        wanted_array = np.asarray(wanted, dtype=np.int64)
        at = np.minimum(np.searchsorted(groups, wanted_array), max(len(groups) - 1, 0))
        present = (at < len(groups)) & (groups[at] == wanted_array) if len(groups) else np.zeros(len(wanted), bool)
        firsts = np.where(present, bounds[at], 0)
        sizes = np.where(present, bounds[at + 1] - bounds[at], 0) if len(groups) else np.zeros(len(wanted), np.int64)
        # the row numbers of every wanted group, one range after another
        offsets = np.cumsum(sizes) - sizes
        rows = np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(offsets - firsts, sizes)
        return table.take(pa.array(rows)), sizes.astype(np.int64)

    def close(self) -> None:
        """Remove the temporary file."""
        for handle in (self._writer, self._sink, self._source, *self._part_sources):
            if handle is not None:
                with contextlib.suppress(Exception):
                    handle.close()
        self._writer = self._sink = self._source = self._reader = None
        self._parts, self._part_sources = [], []
        if self._file is not None:
            self._file.abort()
