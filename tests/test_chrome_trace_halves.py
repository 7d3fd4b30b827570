"""Chrome trace import read as two halves at once (formats.chrome_trace_halves): the trace file
and the stats are those of one reading, it falls back to one reading where the halves cannot be
sure, and leaves no temporary file; formats.background.InOrder and SqliteFileWriter.insert_flat."""

from __future__ import annotations

import json
import os
import random
import sqlite3
import threading
import time

import pytest

import formats.chrome_trace_halves as halves
import formats.chrome_trace_import as chrome_import
from formats.background import InOrder
from formats.errors import InvalidInputError
from formats.trace_writer import TraceWriter

# -- helpers -----------------------------------------------------------------------------------------------------------

_TABLES = ("events", "event_args", "threads", "channels", "counter_samples", "thread_event_columns", "processes")


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
    """Records what `_Importer.merge` answered (and the dangling E events it was given)."""

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
        self.halves: list[object] = []
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


def _assert_same(tmp_path, monkeypatch, text: str, cut_near: int | None = None, *, merged: bool):
    """Both readings give the same stats and trace file, the halves merged (or fell back) as `merged` says."""
    split, split_contents, whole, whole_contents, spy = _both(tmp_path, monkeypatch, text, cut_near)
    assert split == whole
    for table, rows in whole_contents.items():
        assert split_contents[table] == rows, table
    assert spy.halves == [merged]
    return whole, whole_contents, spy


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
