"""Chrome trace import: the staged columns moved to a temporary file beyond the memory bound give the
same trace file, E events that end a B event of an earlier batch, the nesting pass, the fast
reader's blocks, and TraceWriter's whole-thread columns."""

from __future__ import annotations

import errno
import io
import itertools
import json
import os
import sqlite3

import numpy as np
import pyarrow as pa
import pytest

import formats.chrome.importer as chrome_import
import pva
from formats.chrome import nesting, spool
from formats.chrome.events import read_trace_blocks_fast
from formats.errors import InvalidInputError
from formats.trace.writer import NULL, THREAD_EVENTS_SQL, TraceWriter, encode_thread_columns


def _trace() -> list[dict]:
    """Two threads of nested events, B/E pairs whose E comes many events later, an overlap, counters."""
    events: list[dict] = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}}]
    for k in range(30):
        t0 = k * 100
        for tid in (1, 2):
            events.append({"ph": "X", "name": "child", "ts": t0 + 2, "dur": 5, "pid": 1, "tid": tid, "cat": "op"})
            events.append({"ph": "X", "name": f"step{k}", "ts": t0, "dur": 50, "pid": 1, "tid": tid, "args": {"k": k}})
        events.append({"ph": "B", "name": f"host{k}", "ts": t0 + 60, "pid": 1, "tid": 1, "args": {"b": k}})
        events.append({"ph": "C", "name": "queue", "ts": t0, "pid": 1, "args": {"depth": k % 4, "free": 1.5}})
        events.append({"ph": "i", "name": "mark", "ts": t0 + 70, "pid": 1, "tid": 2, "s": "t"})
        events.append({"ph": "E", "ts": t0 + 90, "pid": 1, "tid": 1, "args": {"e": k}})
    events.append({"ph": "X", "name": "across", "ts": 40, "dur": 30, "pid": 1, "tid": 2})  # overlaps step0
    events.append({"ph": "B", "name": "never ends", "ts": 5000, "pid": 1, "tid": 2})
    return events


def _contents(path) -> dict:
    connection = sqlite3.connect(path)
    try:
        tables = ("events", "event_args", "threads", "processes", "channels", "counter_samples")
        found = {table: sorted(connection.execute(f"SELECT * FROM {table}").fetchall(), key=repr) for table in tables}
        found["thread_event_columns"] = connection.execute(
            "SELECT * FROM thread_event_columns ORDER BY pid, tid"
        ).fetchall()
        return found
    finally:
        connection.close()


@pytest.mark.parametrize("bound, slice_bytes", [(64, 32 << 20), (3000, 1)])
def test_columns_moved_to_the_temporary_file_give_the_same_trace(tmp_path, monkeypatch, bound, slice_bytes):
    # (64 bytes: every batch goes to the file as it comes; 3,000: several at a time, sorted a batch at a time)
    source = tmp_path / "t.json"
    source.write_text(json.dumps({"traceEvents": _trace()}))
    in_memory = chrome_import.import_chrome_trace(source, tmp_path / "memory.pvti")

    spills = []
    spill = spool.Spool._spill

    def counted(self):
        spills.append(self.schema.names[1])
        spill(self)

    monkeypatch.setattr(spool.Spool, "_spill", counted)
    monkeypatch.setattr(chrome_import, "STAGE_MEMORY", bound)
    monkeypatch.setattr(spool, "_SPILL_BYTES", slice_bytes)
    monkeypatch.setattr("formats.chrome.events.FAST_BLOCK", 64)  # a batch of one or two events
    spilled = chrome_import.import_chrome_trace(source, tmp_path / "spilled.pvti")

    assert spills.count("seq") >= 3 and spills.count("timestamp") >= 3  # events and counter samples
    assert spilled == in_memory
    assert in_memory.events == 182 and in_memory.threads == 3 and in_memory.counter_samples == 60
    assert _contents(tmp_path / "spilled.pvti") == _contents(tmp_path / "memory.pvti")
    assert sorted(os.listdir(tmp_path)) == ["memory.pvti", "spilled.pvti", "t.json"]  # the file is removed

    with pva.openTrace(tmp_path / "spilled.pvti") as trace:
        threads = {thread.name: thread for thread in trace.process(1).threads}
        assert sorted(threads) == ["", "main", "thread 2 (overlap 1)"]
        main = threads["main"].events
        assert [e.label for e in main[:3]] == ["step0", "host0", "step1"]
        host = main[1]
        # its E came after 3 more events, in a later batch; the E's args are merged into the B's
        assert (host.timestamp, host.duration, host.args) == (60, 30, {"b": 0, "e": 0})
        assert [(c.label, c.timestamp, c.duration, c.channel) for c in main[0].children()] == [("child", 2, 5, "op")]
        second = threads[""].events
        assert [e.label for e in second[-3:]] == ["step29", "mark", "never ends"]
        assert second[-2].args == {"_chrome": {"s": "t", "ph": "i"}}
        assert not second[-1].isComplete
        assert [(e.label, e.timestamp, e.duration) for e in threads["thread 2 (overlap 1)"].events] == [
            ("across", 40, 30)
        ]
    from formats.trace.reader import TraceReader

    reader = TraceReader(tmp_path / "spilled.pvti")
    try:
        samples = reader.counter_samples(1)
    finally:
        reader.close()
    assert samples[("queue", "depth")] == ([k * 100 for k in range(30)], [float(k % 4) for k in range(30)])
    assert samples[("queue", "free")][1] == [1.5] * 30


def test_a_bad_event_after_columns_went_to_the_temporary_file_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setattr(chrome_import, "STAGE_MEMORY", 64)
    monkeypatch.setattr("formats.chrome.events.FAST_BLOCK", 64)
    events = _trace()
    events.append({"ph": "X", "name": "bad", "ts": "soon", "pid": 1, "tid": 1})
    source = tmp_path / "t.json"
    source.write_text(json.dumps(events))
    with pytest.raises(InvalidInputError, match=r"\$\[243\]\.ts: expected the timestamp in microseconds"):
        chrome_import.import_chrome_trace(source, tmp_path / "t.pvti")
    assert os.listdir(tmp_path) == ["t.json"]


def test_an_end_before_its_begin_in_an_earlier_batch_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr("formats.chrome.events.FAST_BLOCK", 64)
    events = [{"ph": "B", "name": "a", "ts": 10, "pid": 1, "tid": 1}]
    events += [{"ph": "X", "name": "x", "ts": 11 + k, "dur": 0, "pid": 1, "tid": 1} for k in range(5)]
    events.append({"ph": "E", "ts": 9, "pid": 1, "tid": 1})
    source = tmp_path / "t.json"
    source.write_text(json.dumps(events))
    with pytest.raises(InvalidInputError, match=r"\$\[6\]\.ts: the end \(9\.0 µs\) comes before its begin event"):
        chrome_import.import_chrome_trace(source, tmp_path / "t.pvti")


def test_trace_writer_takes_a_whole_thread_as_columns(tmp_path):
    path = tmp_path / "t.pvti"
    with TraceWriter(path, producer="test") as writer:
        channel = writer.channel("gpu")
        first = writer.reserve_event_ids(3)
        ids = np.arange(first, first + 3, dtype=np.int64)
        writer.insert_thread_columns(
            7,
            3,
            ids,
            np.array([NULL, first, NULL], dtype=np.int64),
            pa.array(["outer", "inner", "open"]),
            np.array([channel] * 3, dtype=np.int64),
            np.array([0, 10, 500], dtype=np.int64),
            np.array([100, 20, NULL], dtype=np.int64),
            [(first + 1, '{"rows":5}')],
        )
        with pytest.raises(InvalidInputError, match="thread 7/3 were already written whole"):
            writer.add_event(7, 3, "late", 600, 1)
    with pva.openTrace(path) as trace:
        (outer, open_event) = trace.process(7).thread(3).events
        assert (outer.label, outer.timestamp, outer.duration, outer.channel) == ("outer", 0, 100, "gpu")
        (inner,) = outer.children()
        assert (inner.label, inner.timestamp, inner.duration, inner.args) == ("inner", 10, 20, {"rows": 5})
        assert (open_event.label, open_event.isComplete) == ("open", False)
    connection = sqlite3.connect(path)
    try:
        (stored,) = connection.execute("SELECT data FROM thread_event_columns WHERE pid = 7 AND tid = 3").fetchone()
        from_sql = encode_thread_columns(connection.execute(THREAD_EVENTS_SQL, (7, 3)).fetchone())
        (last,) = connection.execute("SELECT value FROM metadata WHERE key = 'last_timestamp'").fetchone()
    finally:
        connection.close()
    assert stored == from_sql  # the same stream as one read back from the events table
    assert last == "500"


def test_nesting_pass_gives_lanes_and_parents_while_nested_and_after(monkeypatch):
    never = nesting.OPEN
    # by start, longest first: a [0, 100] holds b [10, 50] and c [50, 60]; d [55, 70] overlaps a's c
    # (lane 1); e [80, 90] is in a again; f [200, open) stays open and holds g [300, 310]
    starts = np.array([0, 10, 50, 55, 80, 200, 300], dtype=np.int64)
    ends = np.array([100, 50, 60, 70, 90, never, 310], dtype=np.int64)
    for slice_size, run in ((1, 64), (2, 1), (1 << 16, 1), (1 << 16, 64)):
        monkeypatch.setattr(nesting, "_NEST_SLICE", slice_size)
        monkeypatch.setattr(nesting, "_NEST_RUN", run)
        lanes, parents = nesting.nest(starts, ends)
        assert lanes.tolist() == [0, 0, 0, 1, 0, 0, 0]
        assert parents.tolist() == [-1, 0, 0, -1, 0, -1, 5]
        done, chain = nesting.nested_prefix(starts, ends, np.empty(7, dtype=np.int64), 0, [], 4)
        assert (done, chain) == (3, [0, 2])  # d is the first that does not nest; a and c are open before it
        done, chain = nesting.nested_prefix(starts, ends, np.empty(7, dtype=np.int64), 4, [0, 2], 4)
        assert (done, chain) == (7, [5, 6])  # from e on, all nest

    rng = np.random.default_rng(5)
    for _ in range(200):
        count = int(rng.integers(1, 400))
        starts = np.sort(rng.integers(0, 1000, count))
        ends = starts + rng.choice([0, 1, 3, 10, 40, 300], count)
        ends[rng.random(count) < 0.02] = never
        order = np.lexsort((np.arange(count), -ends, starts))
        starts, ends = starts[order], ends[order]
        lanes, parents = nesting.nest(starts, ends)
        expected_lanes = nesting.assign_lanes(starts.tolist(), [e + (e == never) for e in ends.tolist()])
        assert lanes.tolist() == expected_lanes
        for i, parent in enumerate(parents.tolist()):  # each parent is the innermost open event of its lane
            if parent >= 0:
                assert lanes[parent] == lanes[i] and starts[parent] <= starts[i] and ends[i] <= ends[parent]


def test_a_full_disk_while_columns_go_to_the_temporary_file_is_an_output_error(tmp_path, monkeypatch):
    monkeypatch.setattr(chrome_import, "STAGE_MEMORY", 64)
    monkeypatch.setattr("formats.chrome.events.FAST_BLOCK", 64)

    def full(self):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        yield  # pragma: no cover

    monkeypatch.setattr(spool.Spool, "_by_group", full)
    source = tmp_path / "t.json"
    source.write_text(json.dumps(_trace()))
    with pytest.raises(OSError, match="no space left on device") as caught:
        chrome_import.import_chrome_trace(source, tmp_path / "t.pvti")
    assert type(caught.value).__name__ == "OutputError" and "t.pvti" in str(caught.value)
    assert os.listdir(tmp_path) == ["t.json"]


def test_the_fast_reader_gives_blocks_with_the_index_of_their_first_event(monkeypatch):
    monkeypatch.setattr("formats.chrome.events.FAST_BLOCK", 100)
    events = [{"ph": "X", "name": f"e{k}", "ts": k, "dur": 1} for k in range(12)]
    document = json.dumps({"traceEvents": events, "otherData": {"v": 1}}).encode()
    with io.BytesIO(document) as raw:
        blocks, others, status = read_trace_blocks_fast(raw)
        seen = [(prefix, first, [event["name"] for event in block]) for prefix, first, block in blocks]
    assert len(seen) > 2 and all(prefix == ["traceEvents"] for prefix, _, _ in seen)
    assert [first for _, first, _ in seen] == list(
        itertools.accumulate([0] + [len(names) for _, _, names in seen[:-1]])
    )
    assert [name for _, _, names in seen for name in names] == [f"e{k}" for k in range(12)]
    assert others == {"otherData": {"v": 1}} and not status["truncated"]
