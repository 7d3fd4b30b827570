"""Trace files (libpva section 2.3): pva.openTrace, processes, threads, events, and bad input."""

from __future__ import annotations

import os
import shutil
import sqlite3
import struct

import numpy as np
import pytest

import pva
from formats.pop.schema import TRACE_APPLICATION_ID, TRACE_FORMAT, trace_schema
from formats.trace.reader import TraceReader
from formats.trace.writer import TraceWriter, nest_events

# Process 100 ("trainer"): thread 1 ("main") holds two epochs, the first with nested steps; thread 2
# holds one incomplete event. Process 7 ("loader"): thread 3 with events whose parents are inferred.
MAIN = [  # label, start, duration, parent index (in this list) or None, channel
    ("Epoch:0", 100, 1000, None, "poptorch"),
    ("step", 110, 400, 0, "poptorch"),
    ("forward", 120, 150, 1, "popart"),
    ("backward", 300, 200, 1, "popart"),
    ("step", 600, 450, 0, "poptorch"),
    ("Epoch:1", 1200, 800, None, "poptorch"),
    ("idle", 2100, 0, None, "poptorch"),
]


def write_fixture(path) -> dict:
    """Write the fixture trace; return the ids given to events."""
    ids = {}
    with TraceWriter(path, producer="tests", producer_version="1") as w:
        w.add_process(100, "trainer")
        w.add_process(7, "loader", sort_index=2)
        w.add_thread(100, 1, "main")
        w.add_thread(100, 2, "watchdog")
        w.add_thread(7, 3, "reader", sort_index=5)
        main = []
        for label, start, duration, parent, channel in MAIN:
            parent_id = None if parent is None else main[parent]
            args = {"total_cycle": 1200, "conv_cycle_percent": 61.5} if label == "forward" else None
            main.append(w.add_event(100, 1, label, start, duration, channel=channel, parent=parent_id, args=args))
        ids["main"] = main
        ids["watchdog"] = [w.add_event(100, 2, "waiting", 50, None)]
        ids["reader"] = list(
            w.add_events(
                7,
                3,
                ["read", "decode", "read", "open"],
                [500, 520, 900, 480],
                [300, 100, 50, 340],
                channels=["io", "cpu", "io", "io"],
            )
        )
        w.add_counter_samples(7, "queue", [500, 600, 700], [1, 3, 2])
    return ids


@pytest.fixture(scope="module")
def fixture_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "host.pvti"
    ids = write_fixture(path)
    return path, ids


@pytest.fixture()
def trace(fixture_path):
    with pva.openTrace(str(fixture_path[0])) as opened:
        yield opened


def test_processes_and_threads(trace):
    assert [p.pid for p in trace.processes] == [7, 100]
    assert [p.name for p in trace.processes] == ["loader", "trainer"]
    trainer = trace.process(100)
    assert trainer is trace.processes[1]
    assert [(t.pid, t.tid, t.name) for t in trainer.threads] == [(100, 1, "main"), (100, 2, "watchdog")]
    assert trainer.thread(2) is trainer.threads[1]
    assert len(trace.process(7).threads) == 1
    assert isinstance(trace.processes, list) and isinstance(trainer.threads, list)


def test_unknown_pid_and_tid_raise_index_error(trace):
    with pytest.raises(IndexError, match=r"has no process 5"):
        trace.process(5)
    with pytest.raises(IndexError, match=r"process 100 of .* has no thread 9"):
        trace.process(100).thread(9)


def test_root_events_and_members(trace, fixture_path):
    _, ids = fixture_path
    events = trace.process(100).thread(1).events
    assert [e.label for e in events] == ["Epoch:0", "Epoch:1", "idle"]
    first = events[0]
    assert (first.pid, first.tid, first.label, first.channel, first.timestamp, first.duration, first.isComplete) == (
        100,
        1,
        "Epoch:0",
        "poptorch",
        100,
        1000,
        True,
    )
    assert first.id == ids["main"][0]
    assert isinstance(first, pva.Event)
    assert events[2].duration == 0 and events[2].children() == []


def test_children_nest_in_start_order(trace):
    epoch = trace.process(100).thread(1).events[0]
    steps = epoch.children()
    assert isinstance(steps, list) and [(s.label, s.timestamp, s.duration) for s in steps] == [
        ("step", 110, 400),
        ("step", 600, 450),
    ]
    inner = steps[0].children()
    assert [(e.label, e.channel, e.timestamp, e.duration) for e in inner] == [
        ("forward", "popart", 120, 150),
        ("backward", "popart", 300, 200),
    ]
    assert inner[0].children() == [] and steps[1].children() == []
    assert epoch.children() == steps and epoch.children() is not steps  # a new list each call


def test_args_of_events(trace):
    forward = trace.process(100).thread(1).events[0].children()[0].children()[0]
    assert forward.args == {"total_cycle": 1200, "conv_cycle_percent": 61.5}
    assert trace.process(100).thread(1).events[0].args == {}


def test_incomplete_event_lasts_until_the_trace_ends(trace):
    (waiting,) = trace.process(100).thread(2).events
    assert waiting.isComplete is False
    assert waiting.timestamp == 50
    assert waiting.duration == 2100 - 50  # until the latest time in the file: 'idle' at 2100
    assert trace.isComplete is True  # the writer finished the file


def test_nesting_inferred_from_times(trace):
    (open_, read2) = trace.process(7).thread(3).events
    assert (open_.label, open_.timestamp, open_.duration, open_.channel) == ("open", 480, 340, "io")
    assert [(e.label, e.channel) for e in open_.children()] == [("read", "io")]
    assert [e.label for e in open_.children()[0].children()] == ["decode"]
    assert open_.children()[0].children()[0].channel == "cpu"
    assert (read2.label, read2.timestamp) == ("read", 900)


def test_ids_follow_start_order_when_nesting_is_inferred(fixture_path):
    _, ids = fixture_path
    # given order read(500), decode(520), read(900), open(480): open starts first, so it gets the first id
    first = ids["reader"]
    assert sorted(first) == list(range(min(first), min(first) + 4))
    assert first[3] == min(first)


def test_reprs(trace):
    assert repr(trace) == "<TraceReport 'host.pvti', 2 processes, 3 threads>"
    assert repr(trace.process(100)) == "<Process 100 'trainer', 2 threads>"
    assert repr(trace.process(100).thread(1)) == "<Thread 1 'main' of process 100>"
    assert repr(trace.process(100).thread(1).events[0]) == "<Event 'Epoch:0' on 'poptorch' at 100 µs for 1000 µs>"
    assert repr(trace.process(100).thread(2).events[0]).endswith(", incomplete>")


def test_events_are_equal_within_one_opened_trace(trace):
    thread = trace.process(100).thread(1)
    assert thread.events[0] == thread.events[0] and thread.events[0] != thread.events[1]
    assert len({thread.events[0], thread.events[0]}) == 1


def test_file_identity_schema_and_sql(fixture_path):
    path, _ = fixture_path
    with open(path, "rb") as handle:
        head = handle.read(100)
    assert struct.unpack(">I", head[68:72])[0] == TRACE_APPLICATION_ID
    assert struct.unpack(">I", head[60:64])[0] == TRACE_FORMAT[0] * 1000 + TRACE_FORMAT[1]
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert set(trace_schema().tables) <= tables
        metadata = dict(conn.execute("SELECT key, value FROM metadata"))
        assert metadata["format_version"] == "{}.{}".format(*TRACE_FORMAT) and metadata["state"] == "complete"
        assert metadata["producer"] == "tests" and metadata["clock"] == "steady"
        children = conn.execute(
            "SELECT c.label FROM events c JOIN events p ON c.parent = p.id WHERE p.label = 'Epoch:0' "
            "ORDER BY c.timestamp"
        ).fetchall()
        assert children == [("step",), ("step",)]
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()


def test_counter_samples(fixture_path):
    reader = TraceReader(fixture_path[0])
    try:
        assert reader.counter_samples(7) == {("queue", ""): ([500, 600, 700], [1.0, 3.0, 2.0])}
        assert reader.counter_samples(100) == {}
    finally:
        reader.close()


def test_reading_without_the_stored_thread_columns_gives_the_same_events(fixture_path, tmp_path):
    copy = tmp_path / "no-columns.pvti"
    shutil.copyfile(fixture_path[0], copy)
    conn = sqlite3.connect(copy)
    conn.execute("DELETE FROM thread_event_columns")
    conn.commit()
    conn.close()

    def dump(path):
        with pva.openTrace(path) as t:

            def walk(events):
                return [
                    (e.label, e.channel, e.timestamp, e.duration, e.isComplete, e.id, walk(e.children()))
                    for e in events
                ]

            return [(p.pid, th.tid, walk(th.events)) for p in t.processes for th in p.threads]

    assert dump(copy) == dump(fixture_path[0])


def test_stale_thread_columns_are_ignored_for_the_events_table(fixture_path, tmp_path):
    copy = tmp_path / "stale.pvti"
    shutil.copyfile(fixture_path[0], copy)
    conn = sqlite3.connect(copy)
    conn.execute("DELETE FROM events WHERE label = 'idle'")
    conn.commit()
    conn.close()
    with pva.openTrace(copy) as t:
        assert [e.label for e in t.process(100).thread(1).events] == ["Epoch:0", "Epoch:1"]


def test_reading_leaves_the_file_unchanged(fixture_path):
    path = fixture_path[0]
    before = path.read_bytes()
    with pva.openTrace(path) as t:
        for p in t.processes:
            for th in p.threads:
                th.events
    assert path.read_bytes() == before


# -- bad input ---------------------------------------------------------------------------------


def test_missing_file(tmp_path):
    with pytest.raises(pva.ReportNotFoundError, match="no such file; expected a trace file"):
        pva.openTrace(tmp_path / "none.pvti")


def test_a_profile_report_is_not_a_trace(sample):
    with pytest.raises(pva.NotAReportError, match="expected a trace file, found a pva report.*pva.openReport"):
        pva.openTrace(sample.path)


def test_a_trace_is_not_a_profile_report(fixture_path):
    with pytest.raises(pva.NotAReportError, match="found a pva trace file; open it with pva.openTrace"):
        pva.openReport(fixture_path[0])


def test_text_and_json_files(tmp_path):
    text = tmp_path / "notes.pvti"
    text.write_text("not a trace\n")
    with pytest.raises(pva.NotAReportError, match="expected a trace file .*found a text file"):
        pva.openTrace(text)
    chrome = tmp_path / "trace.json"  # a Chrome trace is converted on the fly, to a file removed on close
    chrome.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}')
    with pva.openTrace(chrome) as trace:
        assert trace.path == str(chrome)
        assert [e.label for e in trace.process(1).thread(1).events] == ["a"]
        converted = trace._reader.path
        assert os.path.exists(converted)
    assert not os.path.exists(converted)
    broken = tmp_path / "broken.json"
    broken.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": "soon", "pid": 1, "tid": 1}]}')
    with pytest.raises(pva.PvaError, match="broken.json.*timestamp"):
        pva.openTrace(broken)


@pytest.mark.parametrize("fraction", [0.3, 0.75])
def test_truncated_trace(fixture_path, tmp_path, fraction):
    data = fixture_path[0].read_bytes()
    cut = tmp_path / "cut.pvti"
    cut.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(pva.CorruptReportError, match="truncated"):
        pva.openTrace(cut)


def test_newer_major_version_is_refused_and_newer_minor_opens(fixture_path, tmp_path):
    newer = tmp_path / "newer.pvti"
    shutil.copyfile(fixture_path[0], newer)
    conn = sqlite3.connect(newer)
    conn.execute("PRAGMA user_version = 2000")
    conn.execute("UPDATE metadata SET value = '2.0' WHERE key = 'format_version'")
    conn.commit()
    conn.close()
    with pytest.raises(pva.UnsupportedVersionError, match=r"trace file format version 2\.0 is newer"):
        pva.openTrace(newer)
    minor = tmp_path / "minor.pvti"
    shutil.copyfile(fixture_path[0], minor)
    conn = sqlite3.connect(minor)
    conn.execute("PRAGMA user_version = 1007")
    conn.execute("UPDATE metadata SET value = '1.7' WHERE key = 'format_version'")
    conn.execute("ALTER TABLE events ADD COLUMN colour TEXT")
    conn.commit()
    conn.close()
    with pva.openTrace(minor) as t:
        assert [e.label for e in t.process(100).thread(1).events] == ["Epoch:0", "Epoch:1", "idle"]


def _tampered(fixture_path, tmp_path, *statements):
    path = tmp_path / "tampered.pvti"
    shutil.copyfile(fixture_path[0], path)
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM thread_event_columns")
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize(
    "statement, fragment",
    [
        (
            "UPDATE events SET duration = -5 WHERE label = 'backward'",
            "'backward' ends before it starts (start 300 µs, duration -5 µs)",
        ),
        (
            "UPDATE events SET duration = 900 WHERE label = 'forward'",
            "'forward' [120, 1020] does not lie within its parent event",
        ),
        ("UPDATE events SET timestamp = 90 WHERE label = 'forward'", "'forward' [90, 240] does not lie within"),
        (
            "UPDATE events SET parent = (SELECT id FROM events WHERE label = 'read' LIMIT 1) WHERE label = 'forward'",
            "which is not an event of this thread",
        ),
        (
            "UPDATE events SET parent = (SELECT id FROM events WHERE label = 'idle') WHERE label = 'Epoch:1'",
            "which does not begin before it",
        ),
        ("UPDATE events SET channel = 42 WHERE label = 'idle'", "is on channel 42, which is not in table channels"),
        (
            "UPDATE events SET duration = NULL, complete = 1 WHERE label = 'idle'",
            "is marked complete but has no duration",
        ),
        ("UPDATE events SET timestamp = 'soon' WHERE label = 'idle'", "events must hold integers"),
    ],
)
def test_mis_nested_or_impossible_events_are_reported(fixture_path, tmp_path, statement, fragment):
    path = _tampered(fixture_path, tmp_path, statement)
    with pva.openTrace(path) as t, pytest.raises(pva.InconsistentReportError) as info:
        t.process(100).thread(1).events
    assert fragment in str(info.value)
    assert str(path) in str(info.value) and "thread 1 of process 100" in str(info.value)


def test_damaged_thread_columns_are_reported(fixture_path, tmp_path):
    path = tmp_path / "damaged.pvti"
    shutil.copyfile(fixture_path[0], path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE thread_event_columns SET data = zeroblob(64) WHERE pid = 100 AND tid = 1")
    conn.commit()
    conn.close()
    with pva.openTrace(path) as t:
        with pytest.raises(pva.CorruptReportError, match="not a readable Arrow IPC stream"):
            t.process(100).thread(1).events
        assert [e.label for e in t.process(7).thread(3).events] == ["open", "read"]


def test_thread_of_an_unknown_process_is_reported(fixture_path, tmp_path):
    path = _tampered(fixture_path, tmp_path, "INSERT INTO threads (pid, tid, name) VALUES (55, 1, 'ghost')")
    with pytest.raises(pva.InconsistentReportError, match="thread 1 belongs to process 55, which is not in table"):
        pva.openTrace(path)


def test_hot_journal_is_rolled_back_in_a_copy(tmp_path):
    """A recorder that died in the middle of a commit leaves a hot journal; the file itself is never written."""
    path = tmp_path / "live.pvti"
    with TraceWriter(path) as w:
        w.add_events(1, 1, ["a", "b"], [0, 10], [5, 5], parents=None)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA cache_size = 1")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO events (pid, tid, id, label, channel, timestamp, duration) VALUES (1, 1, ?, ?, 0, ?, 1)",
        [(100 + i, "x" * 200, 100 + i) for i in range(2000)],
    )
    crashed = tmp_path / "crashed.pvti"
    shutil.copyfile(path, crashed)
    shutil.copyfile(str(path) + "-journal", str(crashed) + "-journal")
    conn.execute("ROLLBACK")
    conn.close()
    before = crashed.read_bytes()
    with pva.openTrace(crashed) as t:
        assert [e.label for e in t.process(1).thread(1).events] == ["a", "b"]
    assert crashed.read_bytes() == before
    assert os.path.exists(str(crashed) + "-journal")


# -- the writer's checks ------------------------------------------------------------------------


def test_writer_refuses_events_that_end_before_they_start(tmp_path):
    path = tmp_path / "bad.pvti"
    with pytest.raises(pva.InvalidInputError, match="event 'b' at 10 µs ends before it starts"), TraceWriter(path) as w:
        w.add_events(1, 1, ["a", "b"], [0, 10], [5, -3], parents=None)
    assert not path.exists()


def test_writer_refuses_children_outside_their_parent(tmp_path):
    path = tmp_path / "bad.pvti"
    with TraceWriter(path) as w:
        parent = w.add_event(1, 1, "parent", 100, 50)
        with pytest.raises(
            pva.InvalidInputError,
            match=r"event 'late' \[120, 200\] is not within its parent event "
            r"0 \[100, 150\]: it ends after it",
        ):
            w.add_event(1, 1, "late", 120, 80, parent=parent)
        with pytest.raises(pva.InvalidInputError, match="it starts before it"):
            w.add_event(1, 1, "early", 90, 5, parent=parent)
        with pytest.raises(pva.InvalidInputError, match="it is on another thread"):
            w.add_event(1, 2, "elsewhere", 110, 5, parent=parent)
        with pytest.raises(pva.InvalidInputError, match="names parent 9, which is not an event added before it"):
            w.add_event(1, 1, "orphan", 110, 5, parent=9)
        with pytest.raises(pva.InvalidInputError, match="'open' .* is not within its parent"):
            w.add_event(1, 1, "open", 110, None, parent=parent)
        w.add_event(1, 1, "inside", 110, 40, parent=parent)
    with pva.openTrace(path) as t:
        assert [(e.label, [c.label for c in e.children()]) for e in t.process(1).thread(1).events] == [
            ("parent", ["inside"])
        ]


def test_nesting_inference_refuses_partial_overlap():
    with pytest.raises(
        pva.InvalidInputError,
        match=r"event 'b' \[5, 15\] starts inside event 'a' \[0, 10\] "
        r"but ends after it",
    ):
        nest_events([0, 5], [10, 15], ["a", "b"])
    order, parent = nest_events([0, 2, 3, 20], [10, 9, 4, 21])
    assert order.tolist() == [0, 1, 2, 3] and parent.tolist() == [-1, 0, 1, -1]
    _, parent = nest_events([0, 0], [10, 10])
    assert parent.tolist() == [-1, 0]  # equal intervals: the second nests in the first
    _, parent = nest_events([0, 10], [10, 12])
    assert parent.tolist() == [-1, -1]  # touching events are siblings


def test_writer_checks_inputs(tmp_path):
    with TraceWriter(tmp_path / "x.pvti") as w:
        with pytest.raises(pva.InvalidInputError, match="event labels must be strings"):
            w.add_events(1, 1, [3], [0], [1])
        with pytest.raises(pva.InvalidInputError, match="expected 2 durations, got 1"):
            w.add_events(1, 1, ["a", "b"], [0, 1], [1])
        with pytest.raises(pva.InvalidInputError, match="timestamps must all be given"):
            w.add_events(1, 1, ["a"], [None], [1])
        with pytest.raises(pva.InvalidInputError, match="args must be a mapping"):
            w.add_event(1, 1, "a", 0, 1, args=[1, 2])
        with pytest.raises(pva.InvalidInputError, match="args must be a JSON object"):
            w.add_event(1, 1, "a", 0, 1, args="[1]")
        with pytest.raises(pva.InvalidInputError, match="pid must be an integer"):
            w.add_event("p", 1, "a", 0, 1)
        with pytest.raises(pva.InvalidInputError, match="marked complete but has no duration"):
            w.add_events(1, 1, ["a"], [0], [None], complete=[True])
        ids = w.add_events(1, 1, ["float", "inner"], np.array([10.4, 10.6]), np.array([2.2, 2.0]))
        assert ids.tolist() == [0, 1]
    with pva.openTrace(tmp_path / "x.pvti") as t:
        (event,) = t.process(1).thread(1).events
        # starts and ends are rounded, not durations: [10.4, 12.6] -> [10, 13] holds [10.6, 12.6] -> [11, 13]
        assert (event.timestamp, event.duration) == (10, 3)
        assert [(e.timestamp, e.duration) for e in event.children()] == [(11, 2)]


def test_damaged_pages_give_pva_errors_or_correct_reads(fixture_path, tmp_path):
    """Bytes flipped in any page of a trace file: reading it raises a PvaError or succeeds, nothing else."""
    data = bytes(fixture_path[0].read_bytes())
    page = struct.unpack(">H", data[16:18])[0]
    outcomes = {"ok": 0, "error": 0}
    for number in range(len(data) // page):
        for offset in (0, page // 2, page - 24):
            start = max(100, number * page + offset)  # the page header, the middle, the end (cell contents)
            damaged = bytearray(data)
            for k in range(8):
                damaged[start + k] ^= 0xFF
            path = tmp_path / f"damaged-{number}-{offset}.pvti"
            path.write_bytes(bytes(damaged))
            try:
                with pva.openTrace(path) as trace:
                    for process in trace.processes:
                        for thread in process.threads:
                            stack = list(thread.events)
                            while stack:
                                event = stack.pop()
                                (
                                    event.label,
                                    event.channel,
                                    event.timestamp,
                                    event.duration,
                                    event.isComplete,
                                    event.args,
                                )
                                stack.extend(event.children())
                outcomes["ok"] += 1
            except pva.PvaError as exc:
                assert str(path) in str(exc)
                outcomes["error"] += 1
    assert outcomes["error"] > 5 and outcomes["ok"] > 0, outcomes
