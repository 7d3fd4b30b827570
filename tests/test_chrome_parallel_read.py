"""Chrome trace import read as two halves at once (formats.chrome.parallel_read): the trace file
and the stats are those of one reading, it falls back to one reading where the halves cannot be
sure, and leaves no temporary file; and SqliteFileWriter.insert_flat."""

from __future__ import annotations

import json
import os
import random
import sqlite3

import numpy as np
import pyarrow as pa
import pytest

import formats.chrome.importer as chrome_import
import formats.chrome.parallel_read as halves
import pva
from formats.chrome import spool
from formats.errors import InvalidInputError
from formats.trace.writer import NULL, TraceWriter

# -- helpers -----------------------------------------------------------------------------------------------------------

_TABLES = (
    "events",
    "event_args",
    "threads",
    "channels",
    "counter_samples",
    "thread_event_columns",
    "processes",
    "flows",
)


def _contents(path) -> dict:
    """Every row of the trace file's tables (metadata but its creation time)."""
    connection = sqlite3.connect(path)
    try:
        found = {table: sorted(connection.execute(f"SELECT * FROM {table}").fetchall(), key=repr) for table in _TABLES}
        found["metadata"] = sorted(connection.execute("SELECT * FROM metadata WHERE key != 'created'").fetchall())
        return found
    finally:
        connection.close()


class _Spy:
    """Records whether `_import_in_halves` gave the answer (`halves`), what `_Importer.merge`
    answered (`merged`) and the number of dangling E events it was given (`dangling`)."""

    def __init__(self, monkeypatch) -> None:
        self.merged: list[bool] = []
        self.dangling: list[int] = []
        merge = chrome_import._Importer.merge

        def spied(importer, half, files):
            self.dangling.append(len(half["dangling"]))
            answer = merge(importer, half, files)
            self.merged.append(answer)
            return answer

        monkeypatch.setattr(chrome_import._Importer, "merge", spied)
        self.halves: list[bool] = []
        import_in_halves = chrome_import._import_in_halves

        def spied_halves(*args):
            answer = import_in_halves(*args)
            self.halves.append(answer is not None)
            return answer

        monkeypatch.setattr(chrome_import, "_import_in_halves", spied_halves)


def _in_halves(monkeypatch, size: int | None = None, cut_near: int | None = None) -> _Spy:
    """Make every file read in halves (on any machine), cut at the first event boundary after
    `cut_near` (of a file of `size` bytes) or else after the middle."""
    monkeypatch.setattr(halves, "MIN_BYTES", 0)
    monkeypatch.setattr(halves, "processors", lambda: 2)
    monkeypatch.setattr(halves, "_START_BYTES", 0 if cut_near is None else 2 * cut_near - size)
    return _Spy(monkeypatch)


def _one_go(monkeypatch) -> None:
    monkeypatch.setattr(halves, "MIN_BYTES", 1 << 62)


def _both(tmp_path, monkeypatch, text: str, cut_near: int | None = None):
    """Import `text` in halves and in one go: (stats, contents) of each, and the spy."""
    source = tmp_path / "t.json"
    source.write_text(text)
    with monkeypatch.context() as patch:
        spy = _in_halves(patch, len(text.encode()), cut_near)
        split = chrome_import.import_chrome_trace(source, tmp_path / "halves.pvti")
        split_contents = _contents(tmp_path / "halves.pvti")
    with monkeypatch.context() as patch:
        _one_go(patch)
        whole = chrome_import.import_chrome_trace(source, tmp_path / "one.pvti")
        whole_contents = _contents(tmp_path / "one.pvti")
    assert sorted(os.listdir(tmp_path)) == ["halves.pvti", "one.pvti", "t.json"]  # no temporary file left
    return split, split_contents, whole, whole_contents, spy


def _both_errors(tmp_path, monkeypatch, text: str, cut_near: int | None = None, output=None):
    """Import `text` in halves and in one go, each failing with a PvaError: the spy and both errors."""
    source = tmp_path / "t.json"
    source.write_text(text)
    output = output or tmp_path / "t.pvti"
    with monkeypatch.context() as patch:
        spy = _in_halves(patch, len(text.encode()), cut_near)
        with pytest.raises(pva.PvaError) as split:
            chrome_import.import_chrome_trace(source, output)
    with monkeypatch.context() as patch:
        _one_go(patch)
        with pytest.raises(pva.PvaError) as whole:
            chrome_import.import_chrome_trace(source, output)
    return spy, split.value, whole.value


def _assert_same(tmp_path, monkeypatch, text: str, cut_near: int | None = None, *, merged: bool):
    """Both readings give the same stats and trace file, the halves merged (or fell back) as `merged` says."""
    split, split_contents, whole, whole_contents, spy = _both(tmp_path, monkeypatch, text, cut_near)
    assert split == whole
    for table, rows in whole_contents.items():
        assert split_contents[table] == rows, table
    assert spy.halves == [merged]
    return whole, whole_contents, spy


# -- find_cut and HalfReader ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, halves_text",
    [
        ('[{"a": 1}, {"b": 2}, {"c": 3}]', ('[{"a": 1}, {"b": 2}]', '[{"c": 3}]')),
        ('  \n[{"a": 1},\n\t{"b": 2} , {"c": 3}]\n', ('  \n[{"a": 1},\n\t{"b": 2}]', '[{"c": 3}]\n')),
        ('{"x": 0, "traceEvents": [{"a": 1}, {"b": 2}, {"c": 3}]}', (None, None)),
    ],
)
def test_find_cut_and_the_halves_it_makes(tmp_path, monkeypatch, text, halves_text):
    source = tmp_path / "t.json"
    source.write_text(text)
    size = len(text)
    monkeypatch.setattr(halves, "_START_BYTES", 2 * text.index('{"b"') - size)  # cut after {"b": 2}
    end, start, before, after = halves.find_cut(str(source), size)
    assert text[end - 1] == "}" and text[start] == "{" and text[end:start].strip() == ","
    with halves.HalfReader(str(source), 0, end, after=after) as first:
        first_text = b"".join(iter(lambda: first.read(3), b"")).decode()
    with halves.HalfReader(str(source), start, size, before) as second:
        second_text = b"".join(iter(lambda: second.read(3), b"")).decode()
    if halves_text[0] is None:  # the object form: the second half is put in an object of its own
        assert (before, after) == (b'{"traceEvents":[', b"]}")
        assert json.loads(first_text) == {"x": 0, "traceEvents": [{"a": 1}, {"b": 2}]}
        assert json.loads(second_text) == {"traceEvents": [{"c": 3}]}
    else:
        assert (first_text, second_text) == halves_text


@pytest.mark.parametrize(
    "text",
    [
        '[{"a": 1}, {"b": 2}]',  # the only boundary is before the middle
        '[{"a": [{"x": 1}]}]',
        '\ufeff[{"a": 1}, {"b": 2}, {"c": 3}, {"d": 4}]',  # neither an array nor an object
        '"[{\\"a\\": 1}, {\\"b\\": 2}, {\\"c\\": 3}]"',
        " " * 80 + '[{"a": 1}, {"b": 2}, {"c": 3}, {"d": 4}]',
    ],
)
def test_find_cut_finds_no_cut(tmp_path, monkeypatch, text):
    source = tmp_path / "t.json"
    source.write_text(text)
    size = len(text.encode())
    monkeypatch.setattr(halves, "_START_BYTES", 0)  # looked for after the middle
    assert halves.find_cut(str(source), size) is None


# -- the halves give what one reading gives ------------------------------------------------------------------------------


def _threads_trace(count: int = 400) -> list[dict]:
    """Threads 1-3 of process 1: X events, B/E pairs, some nested, ending many events later."""
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "host"}}]
    for k in range(count):
        t0 = k * 100
        tid = 1 + k % 3
        events.append({"ph": "X", "name": f"step{k}", "ts": t0, "dur": 40, "pid": 1, "tid": tid, "cat": "op"})
        events.append({"ph": "C", "name": "queue", "ts": t0, "pid": 1, "args": {"depth": k % 5}})
    return events


@pytest.mark.parametrize("form", ["array", "object", "object with keys before", "object with keys after"])
def test_halves_give_the_one_go_trace_in_either_form(tmp_path, monkeypatch, form):
    events = _threads_trace()
    if form == "array":
        text = json.dumps(events)
    elif form == "object":
        text = json.dumps({"traceEvents": events})
    elif form == "object with keys before":
        text = json.dumps({"displayTimeUnit": "ns", "otherData": {"host": "a"}, "traceEvents": events})
    else:
        text = json.dumps({"displayTimeUnit": "ns", "traceEvents": events, "traceName": "t.json", "n": [1, 2.5]})
    whole, contents, spy = _assert_same(tmp_path, monkeypatch, text, merged=True)
    assert spy.merged == [True]
    assert (whole.events, whole.threads, whole.counter_samples, whole.warnings) == (400, 3, 400, [])
    metadata = dict(contents["metadata"])
    if form == "object with keys before":
        assert json.loads(metadata["chrome_trace_fields"]) == {"displayTimeUnit": "ns", "otherData": {"host": "a"}}
    elif form == "object with keys after":
        assert list(json.loads(metadata["chrome_trace_fields"]).items()) == [
            ("displayTimeUnit", "ns"),
            ("traceName", "t.json"),
            ("n", [1, 2.5]),
        ]
    else:
        assert "chrome_trace_fields" not in metadata


def _events(path) -> dict:
    """{(tid, label): (timestamp, duration or None when open, args, parent label)} of every event."""
    found = {}
    with pva.openTrace(path) as trace:
        for process in trace.processes:
            for thread in process.threads:
                pending = [(event, None) for event in thread.events]
                while pending:
                    event, parent = pending.pop()
                    duration = event.duration if event.isComplete else None
                    found[(thread.tid, event.label)] = (event.timestamp, duration, event.args, parent)
                    pending.extend((child, event.label) for child in event.children())
    return found


def _document(first: list, second: list, form: str = "array", tail: str = "") -> tuple[str, int]:
    """The JSON text of `first` then `second` events, and where the last event of `first` ends."""
    head = "[" if form == "array" else '{"traceEvents": ['
    text = head + ", ".join(json.dumps(event) for event in first)
    boundary = len(text.encode()) - 1
    text += ", " + ", ".join(json.dumps(event) for event in second)
    text += "]" if form == "array" else "]" + tail + "}"
    return text, boundary


def _assert_cut_at(tmp_path, monkeypatch, text: str, boundary: int) -> None:
    """find_cut cuts `text` right after byte `boundary` (the '}' of the first half's last event)."""
    source = tmp_path / "cut.json"
    source.write_text(text)
    size = len(text.encode())
    with monkeypatch.context() as patch:
        patch.setattr(halves, "_START_BYTES", 2 * boundary - size)
        cut = halves.find_cut(str(source), size)
    source.unlink()
    assert cut is not None and cut[0] == boundary + 1, (cut, boundary)


def test_begin_end_pairs_across_the_cut_are_matched_as_in_one_go(tmp_path, monkeypatch):
    first = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
        {"ph": "B", "name": "outer", "ts": 10, "pid": 1, "tid": 1, "args": {"b": 1}},
        {"ph": "X", "name": "work", "ts": 12, "dur": 3, "pid": 1, "tid": 1},
        {"ph": "B", "name": "inner", "ts": 20, "pid": 1, "tid": 1, "cat": "io"},
        {"ph": "B", "name": "other", "ts": 15, "pid": 1, "tid": 2},
        {"ph": "B", "name": "fast", "ts": 16, "pid": 2, "tid": 7},
        {"ph": "B", "name": "never ends", "ts": 17, "pid": 2, "tid": 8},
    ]
    first += [{"ph": "X", "name": f"pad{k}", "ts": 1000 + k, "dur": 1, "pid": 3, "tid": 1} for k in range(50)]
    second = [{"ph": "X", "name": f"pad{k}", "ts": 2000 + k, "dur": 1, "pid": 3, "tid": 1} for k in range(50)]
    second += [
        {"ph": "E", "ts": 30, "pid": 1, "tid": 1, "args": {"e": 2}, "tts": 5},  # ends inner; args and a key
        {"ph": "E", "ts": 40, "pid": 1, "tid": 2},  # ends other
        {"ph": "E", "ts": 50, "pid": 1, "tid": 1, "args": {"b": 9}},  # ends outer: its args win
        {"ph": "E", "ts": 60, "pid": 1, "tid": 1},  # no begin anywhere
        {"ph": "E", "ts": 61, "pid": 4, "tid": 4},  # no begin anywhere, a thread of no event
        {"ph": "E", "ts": 26, "pid": 2, "tid": 7},  # plain E of the fast path in one go
        {"ph": "B", "name": "late", "ts": 70, "pid": 1, "tid": 2},
        {"ph": "E", "ts": 80, "pid": 1, "tid": 2, "args": {"in": "second"}},
    ]
    text, boundary = _document(first, second)
    _assert_cut_at(tmp_path, monkeypatch, text, boundary)
    whole, contents, spy = _assert_same(tmp_path, monkeypatch, text, boundary, merged=True)
    assert spy.merged == [True] and spy.dangling == [6]  # 4 that end a B of the first half, 2 of none
    assert whole.events == 107 and whole.threads == 5
    assert whole.warnings == ["2 end (E) event(s) without a begin event were skipped"]
    found = {key: value for key, value in _events(tmp_path / "halves.pvti").items() if not key[1].startswith("pad")}
    assert found == {
        (1, "outer"): (10, 40, {"b": 9}, None),
        (1, "work"): (12, 3, {}, "outer"),
        (1, "inner"): (20, 10, {"e": 2, "_chrome": {"tts": 5}}, "outer"),
        (2, "other"): (15, 25, {}, None),
        (2, "late"): (70, 10, {"in": "second"}, None),
        (7, "fast"): (16, 10, {}, None),
        (8, "never ends"): (17, None, {}, None),
    }


def test_channels_counters_threads_and_names_first_seen_in_the_second_half(tmp_path, monkeypatch):
    first = [{"ph": "X", "name": f"a{k}", "ts": k * 10, "dur": 5, "pid": 1, "tid": 1, "cat": "old"} for k in range(40)]
    first.append({"ph": "C", "name": "mem", "ts": 0, "pid": 1, "args": {"used": 1}})
    first.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "first name"}})
    second = [
        {"ph": "X", "name": "n", "ts": 500, "dur": 5, "pid": 1, "tid": 1, "cat": "new"},
        {"ph": "X", "name": "m", "ts": 510, "dur": 5, "pid": 1, "tid": 1, "cat": "old"},
        {"ph": "X", "name": "t", "ts": 520, "dur": 5, "pid": 5, "tid": 9, "cat": "newer"},
        {"ph": "X", "name": "u", "ts": 522, "dur": 10, "pid": 5, "tid": 9},  # overlaps t: an overlap lane
        {"ph": "i", "name": "mark", "ts": 530, "pid": 5, "tid": 9, "s": "p"},
        {"ph": "C", "name": "mem", "ts": 600, "pid": 1, "args": {"used": 2, "free": 7.5}},
        {"ph": "C", "name": "disk", "ts": 610, "pid": 5, "args": {"io": 3}},
        {"ph": "M", "name": "process_name", "pid": 5, "args": {"name": "worker"}},
        {"ph": "M", "name": "process_sort_index", "pid": 5, "args": {"sort_index": -1}},
        {"ph": "M", "name": "thread_name", "pid": 5, "tid": 9, "args": {"name": "w9"}},
        {"ph": "M", "name": "thread_sort_index", "pid": 5, "tid": 9, "args": {"sort_index": 3}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "renamed"}},
        {"ph": "M", "name": "process_labels", "pid": 5, "args": {"labels": "x"}},
        {"ph": "s", "name": "flow", "ts": 1, "pid": 5, "tid": 9, "id": 1},
    ]
    text, boundary = _document(first, second, "object", ', "traceName": "x"')
    _assert_cut_at(tmp_path, monkeypatch, text, boundary)
    whole, contents, spy = _assert_same(tmp_path, monkeypatch, text, boundary, merged=True)
    assert spy.merged == [True]
    assert (whole.events, whole.threads, whole.counter_samples) == (45, 3, 4)
    assert whole.skipped == {} and whole.warnings == []
    assert [name for _, name in sorted(contents["channels"])] == ["old", "new", "newer", ""]
    with pva.openTrace(tmp_path / "halves.pvti") as trace:
        assert {(p.pid, p.name) for p in trace.processes} == {(1, ""), (5, "worker")}
        names = {(p.pid, t.name) for p in trace.processes for t in p.threads}
        assert names == {(1, "renamed"), (5, "w9"), (5, "w9 (overlap 1)")}
    reader = __import__("formats.trace.reader", fromlist=["TraceReader"]).TraceReader(tmp_path / "halves.pvti")
    try:
        assert reader.counter_samples(1) == {("mem", "used"): ([0, 600], [1.0, 2.0]), ("mem", "free"): ([600], [7.5])}
        assert reader.counter_samples(5) == {("disk", "io"): ([610], [3.0])}
    finally:
        reader.close()


# -- where the halves fall back to one reading -----------------------------------------------------------------------


def test_string_ids_in_the_second_half_fall_back(tmp_path, monkeypatch):
    first = [{"ph": "X", "name": f"a{k}", "ts": k, "dur": 1, "pid": "p", "tid": 1} for k in range(30)]
    second = [{"ph": "X", "name": f"b{k}", "ts": 100 + k, "dur": 1, "pid": 1, "tid": 1} for k in range(30)]
    second.append({"ph": "X", "name": "s", "ts": 500, "dur": 1, "pid": 1, "tid": "main"})
    second.append({"ph": "X", "name": "again", "ts": 600, "dur": 1, "pid": "p", "tid": 1})
    text, boundary = _document(first, second)
    _assert_cut_at(tmp_path, monkeypatch, text, boundary)
    whole, contents, spy = _assert_same(tmp_path, monkeypatch, text, boundary, merged=False)
    assert spy.merged == [False]
    assert (whole.events, whole.threads) == (62, 3)
    with pva.openTrace(tmp_path / "halves.pvti") as trace:
        names = {(p.name, t.name): len(t.events) for p in trace.processes for t in p.threads}
    assert names == {("p", ""): 31, ("", ""): 30, ("", "main"): 1}


def test_an_end_before_its_begin_across_the_cut_falls_back_to_the_one_go_error(tmp_path, monkeypatch):
    first = [{"ph": "B", "name": "b", "ts": 100, "pid": 1, "tid": 1}]
    first += [{"ph": "X", "name": f"a{k}", "ts": k, "dur": 1, "pid": 1, "tid": 2} for k in range(30)]
    second = [{"ph": "X", "name": f"b{k}", "ts": 100 + k, "dur": 1, "pid": 1, "tid": 2} for k in range(30)]
    second.append({"ph": "E", "ts": 50, "pid": 1, "tid": 1})
    text, boundary = _document(first, second)
    _assert_cut_at(tmp_path, monkeypatch, text, boundary)
    spy, split, whole = _both_errors(tmp_path, monkeypatch, text, boundary)
    assert spy.merged == [False] and spy.halves == [False]
    assert type(split) is type(whole) is InvalidInputError and str(split) == str(whole)
    source = tmp_path / "t.json"
    assert str(whole) == f"{str(source)!r}: $[61].ts: the end (50.0 µs) comes before its begin event (100 µs)"
    assert os.listdir(tmp_path) == ["t.json"]


@pytest.mark.parametrize("half", ["first", "second"])
@pytest.mark.parametrize("form", ["array", "object"])
def test_an_invalid_event_in_either_half_gives_the_one_go_error(tmp_path, monkeypatch, half, form):
    first = [{"ph": "X", "name": f"a{k}", "ts": k, "dur": 1, "pid": 1, "tid": 1} for k in range(30)]
    second = [{"ph": "X", "name": f"b{k}", "ts": 100 + k, "dur": 1, "pid": 1, "tid": 1} for k in range(30)]
    (first if half == "first" else second)[7]["ts"] = "x"
    text, boundary = _document(first, second, form)
    _assert_cut_at(tmp_path, monkeypatch, text, boundary)
    spy, split, whole = _both_errors(tmp_path, monkeypatch, text, boundary)
    assert spy.halves == [False] and spy.merged == []  # the child found the error and answered undecided
    assert type(split) is type(whole) is InvalidInputError and str(split) == str(whole)
    index = 7 if half == "first" else 37
    where = f"$[{index}]" if form == "array" else f"$.traceEvents[{index}]"
    source = tmp_path / "t.json"
    assert str(whole) == (
        f'{str(source)!r}: {where}.ts: expected the timestamp in microseconds (a number), found the string "x"'
    )
    assert os.listdir(tmp_path) == ["t.json"]


@pytest.mark.parametrize("form", ["array", "object"])
def test_a_cut_inside_an_events_nested_array_falls_back(tmp_path, monkeypatch, form):
    first = [{"ph": "X", "name": f"a{k}", "ts": k, "dur": 1, "pid": 1, "tid": 1} for k in range(30)]
    second = [{"ph": "X", "name": f"b{k}", "ts": 100 + k, "dur": 1, "pid": 1, "tid": 1} for k in range(30)]
    nested = {"ph": "X", "name": "n", "ts": 50, "dur": 2, "pid": 1, "tid": 1, "args": {"list": [{"a": 1}, {"b": 2}]}}
    text, boundary = _document(first, [nested, *second], form)
    inside = text.index('{"a": 1}') + len('{"a": 1}') - 1  # the '}' before ', {"b"'
    _assert_cut_at(tmp_path, monkeypatch, text, inside)
    whole, contents, spy = _assert_same(tmp_path, monkeypatch, text, inside, merged=False)
    assert whole.events == 61
    assert _events(tmp_path / "halves.pvti")[(1, "n")] == (50, 2, {"list": [{"a": 1}, {"b": 2}]}, None)


def test_a_cut_inside_an_event_keyed_array_of_objects_falls_back(tmp_path, monkeypatch):
    # the event's own key holds the array: the first half's text plus ']}' closes the event
    first = [{"ph": "X", "name": f"a{k}", "ts": k, "dur": 1, "pid": 1, "tid": 1} for k in range(30)]
    second = [{"ph": "X", "name": f"b{k}", "ts": 100 + k, "dur": 1, "pid": 1, "tid": 1} for k in range(30)]
    nested = {"ph": "X", "name": "n", "ts": 50, "dur": 2, "pid": 1, "tid": 1, "stack": [{"a": 1}, {"ph": "X"}]}
    text, boundary = _document(first, [nested, *second], "object")
    inside = text.index('{"a": 1}') + len('{"a": 1}') - 1
    _assert_cut_at(tmp_path, monkeypatch, text, inside)
    whole, contents, spy = _assert_same(tmp_path, monkeypatch, text, inside, merged=False)
    assert whole.events == 61
    assert _events(tmp_path / "halves.pvti")[(1, "n")][2] == {"_chrome": {"stack": [{"a": 1}, {"ph": "X"}]}}


def test_a_cut_in_the_keys_after_the_events_falls_back(tmp_path, monkeypatch):
    # events read a block of about one event at a time: the first half's reader finds the end of the
    # events array and reads the keys after it (a larger block would take the keys for events and
    # hand the file to the exact reader)
    monkeypatch.setattr("formats.chrome.events.FAST_BLOCK", 64)
    events = [{"ph": "X", "name": f"a{k}", "ts": k, "dur": 1, "pid": 1, "tid": 1} for k in range(10)]
    other = [{"ph": "X", "name": f"o{k}", "ts": k, "dur": 1, "pid": 1, "tid": 1} for k in range(30)]
    text = json.dumps({"traceEvents": events, "otherEvents": other})
    inside = text.index('"o15"')
    whole, contents, spy = _assert_same(tmp_path, monkeypatch, text, inside, merged=False)
    assert whole.events == 10
    assert json.loads(dict(contents["metadata"])["chrome_trace_fields"]) == {"otherEvents": other}


def test_an_unclosed_array_falls_back(tmp_path, monkeypatch):
    events = [{"ph": "X", "name": f"a{k}", "ts": k, "dur": 1, "pid": 1, "tid": 1} for k in range(60)]
    text = json.dumps(events)[:-1]
    whole, contents, spy = _assert_same(tmp_path, monkeypatch, text, merged=False)
    assert whole.truncated and whole.events == 60


def test_a_file_that_cannot_be_cut_is_read_in_one_go(tmp_path, monkeypatch):
    text = json.dumps([{"ph": "X", "name": "only", "ts": 1, "dur": 1, "pid": 1, "tid": 1}])
    whole, contents, spy = _assert_same(tmp_path, monkeypatch, text, merged=False)
    assert spy.merged == [] and whole.events == 1


def test_a_child_that_cannot_start_falls_back(tmp_path, monkeypatch):
    events = [{"ph": "X", "name": f"a{k}", "ts": k, "dur": 1, "pid": 1, "tid": 1} for k in range(60)]

    def refuse(*args, **kwargs):
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(halves.subprocess, "Popen", refuse)
    whole, contents, spy = _assert_same(tmp_path, monkeypatch, json.dumps(events), merged=False)
    assert whole.events == 60


def test_a_child_that_cannot_start_its_program_is_a_bug(tmp_path, monkeypatch):
    # a child that fails before reading (here: a module it cannot import) is our fault (exit 3),
    # not the input's, and is not hidden by reading in one go
    source = tmp_path / "t.json"
    events = [{"ph": "X", "name": f"a{k}", "ts": k, "dur": 1, "pid": 1, "tid": 1} for k in range(60)]
    source.write_text(json.dumps(events))
    _in_halves(monkeypatch)
    monkeypatch.setattr(chrome_import, "SECOND_HALF", "formats.no_such_module")
    with pytest.raises(RuntimeError, match="second half of the Chrome trace failed(.|\n)*no_such_module"):
        chrome_import.import_chrome_trace(source, tmp_path / "t.pvti")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["t.json"]


@pytest.mark.parametrize("bad_input", [False, True])
def test_an_output_that_cannot_be_written_gives_the_one_go_error(tmp_path, monkeypatch, bad_input):
    # one reading reads the input first: a bad event is reported before the missing directory
    events = [{"ph": "X", "name": f"a{k}", "ts": k, "dur": 1, "pid": 1, "tid": 1} for k in range(60)]
    if bad_input:
        events[50]["dur"] = -1
    _, split, whole = _both_errors(tmp_path, monkeypatch, json.dumps(events), output=tmp_path / "missing" / "t.pvti")
    errors = [(type(split), str(split)), (type(whole), str(whole))]
    assert errors[0] == errors[1]
    if bad_input:
        assert (
            errors[1][1] == f"{str(tmp_path / 't.json')!r}: $[50].dur: expected a duration >= 0, found the number -1.0"
        )
    else:
        assert "does not exist" in errors[1][1]
    assert os.listdir(tmp_path) == ["t.json"]


# -- random traces -----------------------------------------------------------------------------------------------------


def _random_trace(rng: random.Random, count: int) -> list[dict]:
    """X, B/E, i, C and M events on a few threads, overlapping at random, with E events that end B
    events far back (across any cut), E events with args or with no begin, and B events never ended."""
    threads = [(pid, tid) for pid in (1, 2) for tid in range(rng.randint(1, 4))]
    clock = dict.fromkeys(threads, 0.0)
    open_: dict[tuple[int, int], list[float]] = {thread: [] for thread in threads}
    events: list[dict] = []
    for k in range(count):
        pid, tid = thread = rng.choice(threads)
        clock[thread] += rng.choice((0, 0.5, 1, 3, 10, 25.25))
        ts = clock[thread]
        kind = rng.random()
        base = {"pid": pid, "tid": tid}
        if kind < 0.45:
            event = {"ph": "X", "name": f"x{k % 17}", "ts": ts, "dur": rng.choice((0, 1, 2.5, 7, 30, 200)), **base}
        elif kind < 0.6:
            event = {"ph": "B", "name": f"b{k % 5}", "ts": ts, **base}
            open_[thread].append(ts)
        elif kind < 0.75:
            event = {"ph": "E", "ts": ts, **base}
            if open_[thread]:
                open_[thread].pop()
            elif rng.random() < 0.7:
                continue  # only a few E events without a begin
        elif kind < 0.82:
            event = {"ph": rng.choice("iI"), "name": "mark", "ts": ts, "s": rng.choice("tpg"), **base}
        elif kind < 0.92:
            event = {"ph": "C", "name": rng.choice(("mem", "queue")), "ts": ts, "pid": pid}
            event["args"] = {rng.choice(("used", "free", f"s{k % 3}")): rng.choice((1, 2.5, -3, k))}
        elif kind < 0.97:
            label = rng.choice(("thread_name", "process_name", "thread_sort_index", "process_sort_index", "other"))
            value = {"sort_index": rng.randint(-3, 3)} if "sort" in label else {"name": f"n{k}"}
            event = {"ph": "M", "name": label, "args": value, **base}
        else:
            event = {"ph": rng.choice("sft"), "name": "flow", "ts": ts, "id": k % 40, **base}
        if event["ph"] in "XBEiI":
            if rng.random() < 0.3:
                event["cat"] = rng.choice(("op", "io", "gpu", f"c{k % 7}"))
            if rng.random() < 0.3:
                event["args"] = {"k": k, "v": rng.choice((None, "s", 1.5, [1, 2.5], {"deep": [3]}))}
            if rng.random() < 0.05:
                event["tts"] = k
        events.append(event)
    return events


@pytest.mark.parametrize("seed", range(20))
def test_random_traces_in_halves_give_the_one_go_trace(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    events = _random_trace(rng, rng.randint(1500, 4000))
    if seed % 2:
        text = json.dumps({"traceEvents": events, "displayTimeUnit": "ms"})
    else:
        text = json.dumps(events, separators=(",", ":") if seed % 4 else (", ", ": "))
    size = len(text.encode())
    cut_near = rng.randint(size // 4, 3 * size // 4)
    whole, contents, spy = _assert_same(tmp_path, monkeypatch, text, cut_near, merged=True)
    assert spy.merged == [True]
    assert whole.events == sum(1 for event in events if event["ph"] in "XBiI")
    assert spy.dangling[0] > 0  # E events of the second half whose B is in the first
    assert any("(overlap 1)" in repr(row) for row in contents["threads"])


def test_ends_many_blocks_after_their_begin_in_either_half(tmp_path, monkeypatch):
    # the child reads blocks of 1 MB: its E events 1.3 MB after their B end events of an earlier
    # block (its "late" ends); the first half is read in small blocks here for the same
    monkeypatch.setattr("formats.chrome.events.FAST_BLOCK", 256)
    first = [
        {"ph": "B", "name": "outer", "ts": 0, "pid": 1, "tid": 1, "args": {"from": "first"}},
        {"ph": "B", "name": "near", "ts": 1, "pid": 1, "tid": 2},
    ]
    first += [{"ph": "X", "name": "f", "ts": 2 + k, "dur": 1, "pid": 1, "tid": 2} for k in range(30)]
    first.append({"ph": "E", "ts": 40, "pid": 1, "tid": 2, "args": {"near": 1}})
    second = [{"ph": "B", "name": "inner", "ts": 50, "pid": 1, "tid": 1, "args": {"from": "second"}}]
    second += [{"ph": "X", "name": "pad", "ts": 60 + k, "dur": 1, "pid": 1, "tid": 3} for k in range(20_000)]
    second.append({"ph": "E", "ts": 25_000, "pid": 1, "tid": 1, "args": {"to": "inner"}})
    second.append({"ph": "E", "ts": 30_000, "pid": 1, "tid": 1, "args": {"to": "outer"}})
    text, boundary = _document(first, second)
    assert len(text) - boundary > 1_300_000, len(text) - boundary
    _assert_cut_at(tmp_path, monkeypatch, text, boundary)
    whole, contents, spy = _assert_same(tmp_path, monkeypatch, text, boundary, merged=True)
    assert spy.merged == [True] and spy.dangling == [1]
    found = _events(tmp_path / "halves.pvti")
    assert found[(1, "outer")] == (0, 30_000, {"from": "first", "to": "outer"}, None)
    assert found[(1, "inner")] == (50, 24_950, {"from": "second", "to": "inner"}, "outer")
    assert found[(2, "near")] == (1, 39, {"near": 1}, None)
    assert whole.events == 20_033


def test_random_traces_staged_in_temporary_files_in_both_halves(tmp_path, monkeypatch):
    # a small memory bound (which the child takes half of) moves staged rows to temporary files in
    # both processes: the first half's own, then the ones the child handed over
    spills = []
    spill = spool.Spool._spill

    def counted(self):
        spills.append(self._path is None)
        spill(self)

    monkeypatch.setattr(spool.Spool, "_spill", counted)
    monkeypatch.setattr(chrome_import, "STAGE_MEMORY", 4000)
    monkeypatch.setattr("formats.chrome.events.FAST_BLOCK", 512)
    rng = random.Random(99)
    text = json.dumps({"traceEvents": _random_trace(rng, 3000)})
    whole, contents, spy = _assert_same(tmp_path, monkeypatch, text, merged=True)
    assert spy.merged == [True] and spy.dangling[0] > 0
    assert spills.count(True) > 10  # the parent's spills (its own file) in both readings
    assert whole.events > 2000 and whole.counter_samples > 200


def test_a_second_half_of_only_metadata_and_ends(tmp_path, monkeypatch):
    first = [{"ph": "B", "name": "open", "ts": 1, "pid": 1, "tid": 1}]
    first += [{"ph": "X", "name": f"a{k}", "ts": k, "dur": 1, "pid": 1, "tid": 2} for k in range(40)]
    second = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "named late"}}] * 20
    second.append({"ph": "E", "ts": 99, "pid": 1, "tid": 1, "args": {"closed": "late"}})
    text, boundary = _document(first, second)
    _assert_cut_at(tmp_path, monkeypatch, text, boundary)
    whole, contents, spy = _assert_same(tmp_path, monkeypatch, text, boundary, merged=True)
    assert spy.dangling == [1] and (whole.events, whole.threads) == (41, 2)
    found = _events(tmp_path / "halves.pvti")
    assert found[(1, "open")] == (1, 98, {"closed": "late"}, None)
    assert contents["threads"] == [(1, 1, "", None), (1, 2, "named late", None)]


@pytest.mark.parametrize(
    "event, counter_samples, skipped",
    [
        ({"ph": "C", "name": "c", "ts": 5, "pid": 3, "args": {"v": 1}}, 10, {}),
        ({"ph": "M", "name": "process_name", "pid": 9, "args": {"name": "z"}}, 0, {}),
        ({"ph": "O", "ts": 1, "pid": 1, "tid": 1, "id": 4}, 0, {"O": 10}),
    ],
)
def test_a_second_half_without_threads(tmp_path, monkeypatch, event, counter_samples, skipped):
    first = [{"ph": "X", "name": f"a{k}", "ts": k, "dur": 1, "pid": 1, "tid": 2} for k in range(40)]
    text, boundary = _document(first, [event] * 10)
    _assert_cut_at(tmp_path, monkeypatch, text, boundary)
    whole, contents, spy = _assert_same(tmp_path, monkeypatch, text, boundary, merged=True)
    assert spy.merged == [True]
    assert (whole.events, whole.threads, whole.counter_samples, whole.skipped) == (40, 1, counter_samples, skipped)


# -- SqliteFileWriter.insert_flat ------------------------------------------------------------------------------------


@pytest.fixture
def writer(tmp_path):
    trace = TraceWriter(tmp_path / "t.pvti", producer="test")
    yield trace
    trace.abort()


def _statements(writer) -> list[str]:
    """The SQL of each statement the writer runs from now on (its values filled in)."""
    seen: list[str] = []
    writer._conn.set_trace_callback(seen.append)
    return seen


@pytest.mark.parametrize("count", [0, 1, 127, 128, 129, 300])
def test_insert_flat_inserts_every_row_whatever_their_number(writer, count):
    values = [value for k in range(count) for value in (k, json.dumps({"k": k}))]
    seen = _statements(writer)
    writer.insert_flat("event_args", ("event", "args"), values)
    rows = writer.execute("SELECT event, args FROM event_args ORDER BY event").fetchall()
    assert rows == [(k, json.dumps({"k": k})) for k in range(count)]
    inserts = [sql.count("), (") + 1 for sql in seen if sql.startswith("INSERT")]
    assert inserts == [128] * (count // 128) + ([count % 128] if count % 128 else [])


def test_insert_flat_keeps_within_a_low_parameter_limit(writer):
    writer._conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 20)
    seen = _statements(writer)
    writer.insert_flat("event_args", ("event", "args"), [value for k in range(25) for value in (k, "{}")])
    assert [sql.count("), (") + 1 for sql in seen if sql.startswith("INSERT")] == [10, 10, 5]
    assert writer.execute("SELECT count(*), sum(event) FROM event_args").fetchone() == (25, 300)


def test_insert_flat_rows_of_literals_and_parameters(writer):
    writer.insert_flat("event_args", ("event", "args"), [3, 1, 2], row="(?, '{\"x\": 1}')")
    assert writer.execute("SELECT * FROM event_args ORDER BY event").fetchall() == [
        (1, '{"x": 1}'),
        (2, '{"x": 1}'),
        (3, '{"x": 1}'),
    ]


@pytest.mark.parametrize(
    "values, problem",
    [
        ([1, "{}", 2, None], "NOT NULL constraint failed: event_args.args"),
        ([1, "{}", 1, "{}"], "UNIQUE constraint failed: event_args.event"),
        ([1 << 70, "{}"], "Python int too large"),
    ],
)
def test_insert_flat_bad_values_name_the_table(writer, values, problem):
    with pytest.raises(InvalidInputError, match="bad row for table 'event_args'") as caught:
        writer.insert_flat("event_args", ("event", "args"), values * 100)
    assert problem in str(caught.value)


def test_insert_flat_values_that_do_not_make_whole_rows(writer):
    with pytest.raises(ValueError, match="5 values do not make rows of 2"):
        writer.insert_flat("event_args", ("event", "args"), [1, "{}", 2, "{}", 3])
    with pytest.raises(ValueError, match="4 values do not make rows of 3"):
        writer.insert_flat("event_args", ("event", "args"), [1, 2, 3, 4], row="(?, ? || ?)")
    assert writer.execute("SELECT count(*) FROM event_args").fetchone() == (0,)


def test_insert_flat_names_an_unknown_table_or_column(writer):
    with pytest.raises(InvalidInputError, match="no table 'nothing'"):
        writer.insert_flat("nothing", ("a",), [1])
    with pytest.raises(InvalidInputError, match="table 'event_args' has no column"):
        writer.insert_flat("event_args", ("event", "size"), [1, 2])


def test_insert_flat_on_a_closed_writer(writer):
    writer.close()
    with pytest.raises(InvalidInputError, match="the writer is closed"):
        writer.insert_flat("event_args", ("event", "args"), [1, "{}"])


@pytest.mark.parametrize("count, limit", [(70_000, None), (301, 20)])
def test_insert_thread_columns_through_insert_flat(tmp_path, count, limit):
    # 70,000 events: two slices of 65,536 rows, each not a multiple of 128 rows; 301 events under a
    # limit of 20 parameters: two rows of seven parameters a statement
    path = tmp_path / "t.pvti"
    with TraceWriter(path, producer="test") as writer:
        if limit is not None:
            writer._conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, limit)
        channel = writer.channel("c")
        first = writer.reserve_event_ids(count)
        ids = np.arange(first, first + count, dtype=np.int64)
        parents = np.full(count, NULL, dtype=np.int64)
        parents[1::2] = ids[0::2][: count // 2]  # each odd event inside the one before it
        starts = np.arange(count, dtype=np.int64) * 10
        starts[1::2] = starts[0::2][: count // 2] + 1
        durations = np.where(np.arange(count) % 2 == 0, 5, 2).astype(np.int64)
        durations[-1] = NULL  # the last never ended, a root after the others
        parents[-1] = NULL
        starts[-1] = count * 10 + 5
        writer.insert_thread_columns(
            -3,
            1 << 40,
            ids,
            parents,
            pa.array([f"e{k}" for k in range(count)]),
            np.full(count, channel, dtype=np.int64),
            starts,
            durations,
            [(int(ids[k]), json.dumps({"k": k})) for k in range(0, count, 97)],
        )
    connection = sqlite3.connect(path)
    try:
        assert connection.execute("SELECT count(*), count(DISTINCT id), min(pid), max(tid) FROM events").fetchone() == (
            count,
            count,
            -3,
            1 << 40,
        )
        assert connection.execute("SELECT count(*) FROM event_args").fetchone() == (len(range(0, count, 97)),)
        rows = connection.execute(
            "SELECT id, parent, label, timestamp, duration, complete FROM events WHERE id IN (?, ?, ?) ORDER BY id",
            (first + 1, first + 200, first + count - 1),
        ).fetchall()
    finally:
        connection.close()
    last = count - 1
    assert rows == [
        (first + 1, first, "e1", 1, 2, 1),
        (first + 200, None, "e200", 2000, 5, 1),
        (first + last, None, f"e{last}", count * 10 + 5, None, 0),
    ]
    with pva.openTrace(path) as trace:
        events = trace.process(-3).thread(1 << 40).events
        assert len(events) == (count + 1) // 2 + (count % 2 == 0)
        assert (events[-1].label, events[-1].isComplete) == (f"e{last}", False)
        assert [(e.label, e.args) for e in events[:1]] == [("e0", {"k": 0})]
        assert [c.label for c in events[0].children()] == ["e1"]


def test_progress_of_a_reading_in_halves_counts_the_first_half(tmp_path, monkeypatch):
    from formats.progress import Progress

    class Recorded(Progress):
        def __init__(self) -> None:
            super().__init__(enabled=False)
            self.phases: list[tuple[str, int, int]] = []

        def finish(self) -> None:
            if self.label:
                self.phases.append((self.label, self.total, self.done))
            super().finish()

    text, boundary = _document(
        [{"ph": "X", "name": "a", "ts": k, "dur": 1, "pid": 1, "tid": 1} for k in range(40)],
        [{"ph": "X", "name": "b", "ts": 100 + k, "dur": 1, "pid": 1, "tid": 1} for k in range(40)],
    )
    source = tmp_path / "t.json"
    source.write_text(text)
    spy = _in_halves(monkeypatch, len(text), boundary)
    progress = Recorded()
    chrome_import.import_chrome_trace(source, tmp_path / "t.pvti", progress=progress)
    assert spy.merged == [True]
    # the bar fills as this process reads its half ("]" closes it), the child reading the other meanwhile
    assert progress.phases == [("reading", boundary + 2, boundary + 2)]
    _one_go(monkeypatch)
    progress = Recorded()
    chrome_import.import_chrome_trace(source, tmp_path / "t.pvti", progress=progress)
    assert progress.phases == [("reading", len(text), len(text))]
