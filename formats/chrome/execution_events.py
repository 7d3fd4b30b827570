"""A report's execution as Chrome trace events: one track per IPU, one event per run and per
profiled step, with the step's cycles, active tiles and balances as args, and times from the
cycle counters and the clock.

Events are formatted a column at a time, in native code: each IPU's steps are read as Arrow
columns (the ADBC SQLite driver), SQLite quotes the steps' names, Arrow renders the numbers
(doubles in their shortest round-trip form) and joins each event's pieces, and the joined events
of a batch go to the output as one block. steps and steps_by_ipu are each read in one pass, the
latter split by IPU as it is read, its integer columns kept in 32 bits where their values allow.
The steps of each IPU are written ordered by start (longest first, then by step); a step that
overlaps an earlier one without nesting in it goes to the IPU's first extra track where it
nests, named "IPU n (overlap k)" and declared just before its first event.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from itertools import islice
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
import pyarrow as pa

from .writer import ChromeTraceWriter

if TYPE_CHECKING:
    from ..pop.reader import ProfileReader

#: Tracks of one IPU that hold events overlapping its first track get tids ipu + lane * this.
LANE_TID_STRIDE = 1000
#: Step events formatted per batch.
BATCH = 1 << 12
#: Rows of steps_by_ipu read per batch.
_READ_BATCH = 1 << 15
#: Rows read per batch through sqlite3 (without the ADBC driver).
_SQLITE3_BATCH = 1 << 12
#: Tables the export reads besides the steps.
_SMALL_TABLES = ("target", "ipus", "runs", "run_cycles_by_ipu")
#: Largest finite double: a balance beyond it is infinite.
_LARGEST = sys.float_info.max

#: Per step: its event's text up to its args' type, the text after data_balance (program and compute
#: set when present), and whether its values have the schema's types.
_STEPS_SQL = """
SELECT id,
  '{"name":' || json_quote(iif(name = '', type, name)) || ',"cat":' || json_quote(type)
    || ',"args":{"step":' || id || ',"run":' || run || ',"type":' || json_quote(type) AS head,
  iif(program IS NULL, '', ',"program":' || program)
    || iif(compute_set IS NULL, '', ',"compute_set":' || compute_set) AS tail,
  typeof(id) = 'integer' AND typeof(run) = 'integer' AND typeof(type) = 'text' AND typeof(name) = 'text'
    AND typeof(program) IN ('integer', 'null') AND typeof(compute_set) IN ('integer', 'null') AS ok
FROM steps ORDER BY id
"""
_STEPS_COLUMNS = ("id", "head", "tail", "ok")
#: Rows of steps read per batch.
_TEXTS_BATCH = 1 << 13

#: Columns of steps_by_ipu the export reads: the IPU, the step, its times, then its args.
_ARGS = ("cycles", "tile_cycles_max", "active_tiles", "data_in", "data_out")
_BALANCES = ("tile_balance", "active_tile_balance", "thread_balance", "data_balance")
_TIMES = ("cycles_base", "all_cycles_from_min", "all_cycles_to_max")
_STEPS_BY_IPU_COLUMNS = ("ipu", "step_id", *_TIMES, *_ARGS, *_BALANCES)
#: Per profiled step and IPU, its values as stored (their types are checked in Arrow), an IPU at a
#: time (SQLite's sorter spills to a temporary file beyond its cache, so memory stays bounded).
_STEPS_BY_IPU_SQL = f"SELECT {', '.join(_STEPS_BY_IPU_COLUMNS)} FROM steps_by_ipu WHERE profiled = 1 ORDER BY ipu"
#: Integers in this range are kept as 32 bits.
_INT32 = np.iinfo(np.int32)
#: Values beyond this (in magnitude) are refused, so that sums of two cycle counts stay in 64 bits.
_COUNT_LIMIT = 1 << 62


def write_report_execution(path: str, out: ChromeTraceWriter) -> dict:
    """Write a report's execution: one track per IPU, one event per step (and per run)."""
    from ..pop.reader import ProfileReader

    reader = ProfileReader(path)
    try:
        reader.check_value_types(_SMALL_TABLES)
        reader.read_without_memory_map()
        clock = float(reader.target["clock_frequency"]) or 1.0
        scale = 1e6 / clock
        pid = 1
        out.event(
            {
                "name": "process_name",
                "ph": "M",
                "pid": pid,
                "tid": 0,
                "args": {"name": f"IPU execution: {os.path.basename(path)}"},
            }
        )
        runs: dict[Any, list] = {ipu: [] for (ipu,) in reader.query("SELECT id FROM ipus ORDER BY id")}
        names = dict(reader.query("SELECT id, name FROM runs"))
        for ipu, run, start, end in reader.query('SELECT ipu, run, start, "end" FROM run_cycles_by_ipu'):
            name = names.get(run)
            label = f"Run {run}" + (f" {name}" if name else "")
            event = {"name": label, "cat": "run", "args": {"run": run, "cycles": int(end - start)}}
            runs.setdefault(ipu, []).append((int(start), int(end), event))
        texts = _step_texts(reader)
        pending = sorted(runs)  # IPUs with runs, written in order among those with steps
        for ipu, steps in _read_ahead(_steps_by_ipu(reader, texts)):
            while pending and pending[0] < ipu:
                alone = pending.pop(0)
                _write_ipu(out, None, alone, runs[alone], pid, scale)
            if pending and pending[0] == ipu:
                pending.pop(0)
            _write_ipu(out, steps, ipu, runs.get(ipu, []), pid, scale)
        for alone in pending:
            _write_ipu(out, None, alone, runs[alone], pid, scale)
        return {
            "displayTimeUnit": "ns",
            "otherData": {
                "report": os.path.basename(path),
                "clock_frequency_hz": clock,
                "time_base": "IPU cycle counters divided by the tile clock",
            },
        }
    finally:
        reader.close()


class _IpuSteps:
    """The profiled steps of one IPU, in the order their events are written."""

    def __init__(
        self, step: np.ndarray, start: np.ndarray, end: np.ndarray, rows: dict[str, np.ndarray], texts: _StepTexts
    ) -> None:
        order = np.lexsort((step, -end, start))
        self.start, self.end, self._order = start[order], end[order], order
        ids = texts.ids
        self._text_at = np.searchsorted(ids, step[order])
        found = ids[np.minimum(self._text_at, len(ids) - 1)] if len(ids) else ids
        self.missing = bool(len(order)) and not np.array_equal(found, step[order])
        self._rows, self._texts = rows, texts

    def events(self, first: int, stop: int, tids: np.ndarray, scale: float) -> pa.Array:
        """The events of steps first..stop as one string array, each event led by ",\\n"."""
        import pyarrow.compute as pc

        pool = pa.system_memory_pool()  # gives what a batch freed back, where the default pool keeps it
        taken = self._order[first:stop]
        at = pa.array(self._text_at[first:stop])
        head, tail = (pc.take(texts, at, memory_pool=pool) for texts in (self._texts.heads, self._texts.tails))
        start = self.start[first:stop]
        ts = pc.round(pa.array(start * scale), 3, memory_pool=pool)
        dur = pc.round(pa.array((self.end[first:stop] - start) * scale), 3, memory_pool=pool)
        unique, index = np.unique(tids, return_inverse=True)
        tid = pc.take(pa.array([str(t) for t in unique.tolist()]), pa.array(index), memory_pool=pool)

        def text(values: Any) -> Any:
            return pc.cast(values, pa.string(), memory_pool=pool)

        def column(name: str) -> Any:
            return text(pa.array(self._rows[name][taken]))

        return pc.binary_join_element_wise(
            ",\n",
            text(head),
            ',"cycles":',
            column("cycles"),
            ',"tile_cycles_max":',
            column("tile_cycles_max"),
            ',"active_tiles":',
            column("active_tiles"),
            ',"tile_balance":',
            column("tile_balance"),
            ',"active_tile_balance":',
            column("active_tile_balance"),
            ',"thread_balance":',
            column("thread_balance"),
            ',"data_in":',
            column("data_in"),
            ',"data_out":',
            column("data_out"),
            ',"data_balance":',
            column("data_balance"),
            text(tail),
            '},"ph":"X","ts":',
            text(ts),
            ',"dur":',
            text(dur),
            ',"pid":1,"tid":',
            tid,
            "}",
            "",
            memory_pool=pool,
        )


class _StepTexts:
    """Each step's texts (_STEPS_SQL), ordered by id: its event's text up to its args' type, and
    the text after data_balance."""

    def __init__(self, ids: np.ndarray, heads: pa.Array, tails: pa.Array) -> None:
        self.ids, self.heads, self.tails = ids, heads, tails


def _step_texts(reader: ProfileReader) -> _StepTexts:
    """The steps' texts, read a batch at a time into one buffer per column (the driver's own buffers
    for all steps at once would take twice the room); CorruptReportError if a value has the wrong type."""
    import pyarrow.compute as pc

    ids: list[np.ndarray] = []
    heads, tails = _Strings(), _Strings()
    try:
        for batch in _batches(reader, _STEPS_SQL, _STEPS_COLUMNS, rows=_TEXTS_BATCH):
            id_, head, tail, ok = batch.columns
            if pc.min(ok).as_py() not in (None, 1) or ok.null_count:
                _damaged(reader)
            ids.append(id_.to_numpy())
            heads.append(head)
            tails.append(tail)
    except _UnreadableError:
        _damaged(reader)
    return _StepTexts(np.concatenate(ids) if ids else np.zeros(0, np.int64), heads.array(), tails.array())


class _Strings:
    """String arrays appended end to end into one growing buffer."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._offsets: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]

    def append(self, values: pa.Array) -> None:
        """Append the values of a string array without nulls."""
        if not len(values):
            return
        if values.type != pa.string():
            raise TypeError(f"expected strings, got {values.type}")
        offsets = np.frombuffer(values.buffers()[1], dtype=np.int32, count=len(values) + 1, offset=values.offset * 4)
        self._data += _joined(values)
        self._offsets.append(offsets[1:].astype(np.int64) - int(offsets[0]) + int(self._offsets[-1][-1]))

    def array(self) -> pa.Array:
        """The values appended, as one large string array (no copy of the text)."""
        offsets = np.concatenate(self._offsets)
        return pa.LargeStringArray.from_buffers(len(offsets) - 1, pa.py_buffer(offsets), pa.py_buffer(self._data))


def _steps_by_ipu(reader: ProfileReader, texts: _StepTexts) -> Iterator[tuple[int, _IpuSteps]]:
    """The profiled steps of each IPU in ascending order, from one pass over steps_by_ipu sorted by
    IPU, so that only one IPU's steps are held at a time; a value of the wrong type or out of range
    raises CorruptReportError naming the table and column."""
    from ..errors import CorruptReportError

    def finished(ipu: int, pieces: list[dict[str, np.ndarray]]) -> _IpuSteps:
        rows = {name: np.concatenate([piece.pop(name) for piece in pieces]) for name in list(pieces[0])}
        steps = _IpuSteps(rows.pop("step_id"), rows.pop("start"), rows.pop("end"), rows, texts)
        if steps.missing:
            raise CorruptReportError(
                f"{reader.path!r}: steps_by_ipu names a step that steps does not hold", reader.path
            )
        return steps

    current: int | None = None
    pieces: list[dict[str, np.ndarray]] = []
    try:
        for batch in _batches(reader, _STEPS_BY_IPU_SQL, _STEPS_BY_IPU_COLUMNS, rows=_READ_BATCH):
            for ipu, rows in _split_by_ipu(reader, batch):
                if current is not None and ipu != current:
                    if ipu < current:
                        raise RuntimeError(f"steps_by_ipu rows came out of IPU order: {ipu} after {current}")
                    yield current, finished(current, pieces)
                    pieces = []
                current = ipu
                pieces.append(rows)
    except _UnreadableError:
        _damaged(reader)
    if current is not None:
        yield current, finished(current, pieces)


def _read_ahead(items: Iterator[Any]) -> Iterator[Any]:
    """The items of an iterator, the next one made on a thread while the caller uses the current
    one (so at most two are held); an error making one is raised where it would have been."""
    import queue
    import threading

    handoff: queue.Queue = queue.Queue(maxsize=1)
    stop = threading.Event()
    done = object()

    def make() -> None:
        try:
            for item in items:
                handoff.put((item, None))
                handoff.join()  # the next item is made only once the caller has this one
                if stop.is_set():
                    return
            handoff.put((done, None))
        except BaseException as exc:  # handed to the caller, which raises it
            handoff.put((done, exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    maker = threading.Thread(target=make, name="pva-read-ahead", daemon=True)
    maker.start()
    try:
        while True:
            item, error = handoff.get()
            handoff.task_done()
            if error is not None:
                raise error
            if item is done:
                return
            yield item
    finally:
        stop.set()
        while maker.is_alive():  # let a maker blocked on a full hand-off finish
            try:
                handoff.get(timeout=0.05)
                handoff.task_done()
            except queue.Empty:
                pass
        maker.join()


def _split_by_ipu(reader: ProfileReader, batch: pa.RecordBatch) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """A batch of steps_by_ipu rows (sorted by IPU) checked, as (IPU, its rows) for each run of
    rows of one IPU: the step, its start and end, and its args, each integer column as 32 bits where its values allow. _UnreadableError if a value is
    null or not a 64-bit integer (or, for a balance, a double); CorruptReportError if one is out of range."""
    from ..errors import CorruptReportError

    columns = {}
    for name, column in zip(_STEPS_BY_IPU_COLUMNS, batch.columns):
        kind = column.type
        real = name in _BALANCES and pa.types.is_floating(kind)
        if column.null_count or not (pa.types.is_int64(kind) or real):
            raise _UnreadableError(f"steps_by_ipu.{name} holds {kind} or null")
        values = column.to_numpy()
        limit = _LARGEST if name in _BALANCES else _COUNT_LIMIT - 1
        if len(values) and not (-limit <= values.min() and values.max() <= limit):
            what = "a balance that is not a finite number" if name in _BALANCES else "a value beyond 2^62"
            raise CorruptReportError(f"{reader.path!r}: steps_by_ipu.{name} holds {what}", reader.path)
        columns[name] = values.astype(np.float64) if name in _BALANCES else values
    base = columns.pop("cycles_base")
    start = base + columns.pop("all_cycles_from_min")
    columns["end"] = np.maximum(start, base + columns.pop("all_cycles_to_max"))
    columns["start"] = start
    for name in ("step_id", *_ARGS):
        values = columns[name]
        if len(values) and _INT32.min <= values.min() and values.max() <= _INT32.max:
            columns[name] = values.astype(np.int32)
    ipus = columns.pop("ipu")
    bounds = [0, *(np.flatnonzero(ipus[1:] != ipus[:-1]) + 1).tolist(), len(ipus)]
    for first, end in zip(bounds[:-1], bounds[1:]):
        # copies, so that a batch shared by two IPUs is not held until the second one is finished
        yield int(ipus[first]), {name: values[first:end].copy() for name, values in columns.items()}


def _damaged(reader: ProfileReader) -> NoReturn:
    """Raise CorruptReportError at the first value of steps or steps_by_ipu whose type breaks the schema."""
    from ..errors import CorruptReportError

    reader.check_value_types(("steps", "steps_by_ipu"))
    raise CorruptReportError(f"{reader.path!r}: steps or steps_by_ipu holds values of the wrong type", reader.path)


class _UnreadableError(Exception):
    """The ADBC driver could not read a query's values as one type per column."""


def _batches(
    reader: ProfileReader, sql: str, names: tuple[str, ...], rows: int = _SQLITE3_BATCH
) -> Iterator[pa.RecordBatch]:
    """A query's rows (columns `names`) as Arrow batches: through the ADBC SQLite driver where
    installed, in native code, else through sqlite3. _UnreadableError when a column's values do not
    share one type."""
    from ..pop import arrow_sqlite

    connection = arrow_sqlite.adbc_connect(reader.path)
    if connection is None:
        found = reader.file.iterate(sql, batch=_SQLITE3_BATCH)
        while chunk := list(islice(found, _SQLITE3_BATCH)):
            try:
                arrays = [pa.array([row[k] for row in chunk]) for k in range(len(names))]
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                raise _UnreadableError(str(exc)) from None
            yield pa.record_batch(arrays, names=list(names))
        return
    try:
        yield from connection.batches(sql, rows)
    except Exception as exc:  # the driver's errors share no type; the caller diagnoses the damage
        raise _UnreadableError(str(exc)) from None
    finally:
        connection.close()


def _write_ipu(out: ChromeTraceWriter, steps: _IpuSteps | None, ipu: int, runs: list, pid: int, scale: float) -> None:
    """The events of one IPU: its runs and steps merged by start (longest first, runs before steps)."""
    empty = np.zeros(0, dtype=np.int64)
    starts, ends = (steps.start, steps.end) if steps is not None else (empty, empty)
    runs = [runs[k] for k in sorted(range(len(runs)), key=lambda k: (runs[k][0], -runs[k][1], k))]
    lanes, inserted = _tracks(starts, ends, runs)
    tids = ipu + lanes * LANE_TID_STRIDE
    position = 0
    for before, event in inserted + [(len(starts), None)]:
        while position < before:
            end = min(before, position + BATCH)
            assert steps is not None
            events = steps.events(position, end, tids[position:end], scale)
            out.raw_events(_joined(events), end - position)
            position = end
        if event is not None:
            lane, item = event
            tid = ipu if lane == 0 else ipu + lane * LANE_TID_STRIDE
            if item is None:
                name = f"IPU {ipu}" + (f" (overlap {lane})" if lane else "")
                out.event({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
                out.event({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
            else:
                start, end, fields = item
                ts, dur = _micro(start * scale), _micro((end - start) * scale)
                out.event({**fields, "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid})


def _joined(events: pa.Array) -> memoryview:
    """The bytes of a string array's values, end to end."""
    offsets = np.frombuffer(events.buffers()[1], dtype=np.int32, count=len(events) + 1, offset=events.offset * 4)
    return memoryview(events.buffers()[2])[int(offsets[0]) : int(offsets[-1])]


def _micro(value: float) -> float | int:
    rounded = round(value, 3)
    return int(rounded) if float(rounded).is_integer() else rounded


def _tracks(starts: np.ndarray, ends: np.ndarray, runs: list) -> tuple[np.ndarray, list]:
    """The lane of each step (ordered by start, longest first) and what is written before which step:
    (position, (lane, None)) declares a lane's track, (position, (lane, run)) writes a run's event.

    Runs and steps are merged by (start, -end), a run first on a tie, and each goes to the first
    lane where it nests in the innermost open event or where nothing is open (_Lanes). When the
    runs are disjoint and every step nests in a run or is disjoint from all, the runs are all on
    lane 0 and never decide a step's lane, so only the steps that start before an earlier step
    has ended are placed one by one.
    """
    if not _runs_apart(starts, ends, runs):
        return _tracks_one_by_one(starts.tolist(), ends.tolist(), runs)
    lanes, declared = _step_lanes(starts, ends)
    items: list = [(0, 0, (0, None))] if len(starts) or runs else []
    for run in runs:
        start, end = run[0], run[1]
        low, high = int(np.searchsorted(starts, start, "left")), int(np.searchsorted(starts, start, "right"))
        place = low + int(np.searchsorted(-ends[low:high], -end, "left"))  # after steps of a smaller (start, -end)
        items.append((place, 1, (0, run)))
    items.extend((position, 2, (lane, None)) for position, lane in declared)
    items.sort(key=lambda item: item[:2])  # stable: runs keep their order
    return lanes, [(position, event) for position, _, event in items]


def _runs_apart(starts: np.ndarray, ends: np.ndarray, runs: list) -> bool:
    """Whether the runs are disjoint from each other and each step nests in a run or is disjoint from all."""
    if not runs:
        return True
    run_starts = np.array([run[0] for run in runs], dtype=np.int64)
    run_ends = np.array([run[1] for run in runs], dtype=np.int64)
    if len(runs) > 1 and not bool(np.all(run_starts[1:] >= run_ends[:-1])):
        return False
    # the last run starting at or before each step's start, and the last starting before its end
    for last in (np.searchsorted(run_starts, starts, "right") - 1, np.searchsorted(run_starts, ends, "left") - 1):
        known = last >= 0
        s, e, rs, re = starts[known], ends[known], run_starts[last[known]], run_ends[last[known]]
        if not bool(np.all((re <= s) | (e <= rs) | ((rs <= s) & (e <= re)))):
            return False
    return True


def _step_lanes(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """The lane of each step, and (position, lane) for each lane after the first at its first step.

    A step that starts once every earlier one has ended (fresh) goes to lane 0 and leaves only
    itself open. So does a step of no length, and it changes nothing the next steps see; and so
    does a step that nests in a fresh one just before it, when the step after it is fresh. Only
    the other steps are placed one by one, from the state the last fresh step left.
    """
    count = len(starts)
    lanes = np.zeros(count, dtype=np.int64)
    declared: list[tuple[int, int]] = []
    if count < 2:
        return lanes, declared
    fresh = np.ones(count + 1, dtype=bool)
    fresh[1:count] = starts[1:] >= np.maximum.accumulate(ends)[:-1]
    stale = np.flatnonzero(~fresh[:count])
    nested = fresh[stale - 1] & fresh[stale + 1] & (ends[stale] <= ends[stale - 1])
    stale = stale[(ends[stale] > starts[stale]) & ~nested]
    if not len(stale):
        return lanes, declared
    last_fresh = np.maximum.accumulate(np.where(fresh[:count], np.arange(count), 0))
    restart_from = last_fresh[stale - 1].tolist()
    start_of, end_of = starts.tolist(), ends.tolist()
    tracker = _Lanes()
    first_lane: list[int] = []
    previous = -1
    for position, fresh_before in zip(stale.tolist(), restart_from):
        if fresh_before > previous:  # a fresh step since the last one placed: only it is open
            tracker.restart(end_of[fresh_before])
            first_lane = tracker.open[0]
        previous = position
        start, end = start_of[position], end_of[position]
        while first_lane and first_lane[-1] <= start:
            first_lane.pop()
        if not first_lane or end <= first_lane[-1]:  # the common case: it nests on lane 0
            first_lane.append(end)
            continue
        lane, new = tracker.place(start, end)
        lanes[position] = lane
        if new:
            declared.append((position, lane))
    return lanes, declared


class _Lanes:
    """The events still open on each lane of an IPU."""

    def __init__(self) -> None:
        self.open: list[list[int]] = []  # per lane, the ends of its open events, innermost last

    def restart(self, end: int) -> None:
        """Only one event, ending at `end`, is open (on lane 0); the lanes stay declared."""
        if self.open:
            self.open[0] = [end]
            for stack in self.open[1:]:
                stack.clear()
        else:
            self.open.append([end])

    def place(self, start: int, end: int) -> tuple[int, bool]:
        """The lane of an event (after those of a smaller (start, -end)), and whether it is a new lane."""
        for lane, stack in enumerate(self.open):
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:
                stack.append(end)
                return lane, False
        self.open.append([end])
        return len(self.open) - 1, True


def _tracks_one_by_one(starts: list[int], ends: list[int], runs: list) -> tuple[np.ndarray, list]:
    """_tracks for any steps and runs, one event at a time."""
    tracker = _Lanes()
    inserted: list = []
    step_lanes = np.zeros(len(starts), dtype=np.int64)

    def lane_of(position: int, start: int, end: int) -> int:
        lane, new = tracker.place(start, end)
        if new:
            inserted.append((position, (lane, None)))
        return lane

    queued = 0
    for position, (start, end) in enumerate(zip(starts, ends)):
        while queued < len(runs) and (runs[queued][0], -runs[queued][1]) <= (start, -end):
            run = runs[queued]
            inserted.append((position, (lane_of(position, run[0], run[1]), run)))
            queued += 1
        step_lanes[position] = lane_of(position, start, end)
    for run in runs[queued:]:
        inserted.append((len(starts), (lane_of(len(starts), run[0], run[1]), run)))
    return step_lanes, inserted
