"""A report's execution exported as Chrome trace events a column at a time: the same events whichever
way the rows are read, tracks placed as one event at a time would place them, names quoted, and
damaged values refused."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reportbuilder import changed_copy

import formats.pop.arrow_sqlite
from formats.chrome import execution_events as execution
from formats.chrome.export import export_chrome_trace
from formats.errors import CorruptReportError


def _events(path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["traceEvents"]


# -- tracks ------------------------------------------------------------------------------------------------------------

_spans = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 25)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(steps=_spans, runs=_spans)
def test_tracks_are_those_of_placing_one_event_at_a_time(steps, runs):
    pairs = sorted(((start, start + length) for start, length in steps), key=lambda p: (p[0], -p[1]))
    starts = np.array([p[0] for p in pairs], dtype=np.int64)
    ends = np.array([p[1] for p in pairs], dtype=np.int64)
    run_items = sorted(((s, s + n, {"run": k}) for k, (s, n) in enumerate(runs)), key=lambda r: (r[0], -r[1]))
    lanes, inserted = execution._tracks(starts, ends, run_items)
    want_lanes, want_inserted = execution._tracks_one_by_one(starts.tolist(), ends.tolist(), run_items)
    assert lanes.tolist() == want_lanes.tolist()
    assert inserted == want_inserted


def test_disjoint_runs_and_nested_steps_are_placed_without_the_event_loop():
    # steps 1 and 2 nest in step 0; step 4 starts inside step 3 and ends after it: the only overlap
    starts = np.array([0, 2, 5, 20, 25, 40], dtype=np.int64)
    ends = np.array([10, 4, 9, 30, 35, 45], dtype=np.int64)
    runs = [(0, 36, {"run": 0}), (40, 50, {"run": 1})]
    lanes, inserted = execution._tracks(starts, ends, runs)
    assert lanes.tolist() == [0, 0, 0, 0, 1, 0]
    assert inserted == [(0, (0, None)), (0, (0, runs[0])), (4, (1, None)), (5, (0, runs[1]))]


# -- the export --------------------------------------------------------------------------------------------------------


def test_rows_read_through_sqlite3_give_the_same_events(sample, tmp_path, monkeypatch):
    export_chrome_trace(sample.path, tmp_path / "adbc.json")
    monkeypatch.setattr(formats.pop.arrow_sqlite, "adbc_connect", lambda path: None)
    export_chrome_trace(sample.path, tmp_path / "sqlite3.json")
    assert _events(tmp_path / "adbc.json") == _events(tmp_path / "sqlite3.json")


def test_a_step_that_overlaps_the_next_ones_goes_to_an_overlap_track(sample, tmp_path):
    report = changed_copy(
        sample.path,
        tmp_path / "changed.pop",
        "UPDATE steps_by_ipu SET all_cycles_to_max = all_cycles_to_max + 1000000 WHERE step_id = 4 AND ipu = 1",
    )
    export_chrome_trace(report, tmp_path / "out.json")
    events = _events(tmp_path / "out.json")
    names = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {0: "IPU 0", 1: "IPU 1", 1001: "IPU 1 (overlap 1)"}
    moved = [e["args"]["step"] for e in events if e["ph"] == "X" and e["tid"] == 1001]
    assert moved == [4]  # it outlives its run, so it cannot nest in it on IPU 1's own track
    declared = next(k for k, e in enumerate(events) if e["ph"] == "M" and e["tid"] == 1001)
    first = next(k for k, e in enumerate(events) if e["ph"] == "X" and e["tid"] == 1001)
    assert declared < first


@pytest.mark.parametrize(
    "name",
    ['say "hi"', "back\\slash", "tab\tnew\nline\x01", "</script><!--", "naïve ✓ 名前", "\u2028"],
)
def test_step_names_are_quoted_as_json_strings(sample, tmp_path, name):
    report = changed_copy(sample.path, tmp_path / "changed.pop", "UPDATE steps SET name = ? WHERE id = 4", (name,))
    export_chrome_trace(report, tmp_path / "out.json")
    named = [e for e in _events(tmp_path / "out.json") if e["ph"] == "X" and e.get("args", {}).get("step") == 4]
    assert len(named) == 2 and all(e["name"] == name for e in named)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("UPDATE steps_by_ipu SET cycles = 'many' WHERE step_id = 2", r"steps_by_ipu\.cycles holds text 'many'"),
        ("UPDATE steps_by_ipu SET data_in = 2.5 WHERE step_id = 2", r"steps_by_ipu\.data_in holds real 2\.5"),
        ("UPDATE steps SET run = 'first' WHERE id = 2", r"steps\.run holds text 'first'"),
        ("UPDATE steps_by_ipu SET data_balance = 9e999 WHERE step_id = 2", r"data_balance holds a balance that is not"),
        ("UPDATE steps_by_ipu SET cycles_base = 1 << 62 WHERE step_id = 2", r"cycles_base holds a value beyond 2\^62"),
        ("DELETE FROM steps WHERE id = 2", r"steps_by_ipu names a step that steps does not hold"),
        (
            "UPDATE steps_by_ipu SET ipu = 1 << 62 WHERE step_id = 2 AND ipu = 1",
            r"steps_by_ipu\.ipu holds a value beyond 2\^62",
        ),
    ],
)
def test_damaged_step_values_are_refused(sample, tmp_path, sql, message):
    report = changed_copy(sample.path, tmp_path / "changed.pop", sql)
    with pytest.raises(CorruptReportError, match=message):
        export_chrome_trace(report, tmp_path / "out.json")
    assert not (tmp_path / "out.json").exists()


def test_a_value_of_another_type_after_the_rows_the_driver_types_by_is_caught(tmp_path):
    path = tmp_path / "t.db"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE t (a INTEGER)")
    connection.executemany("INSERT INTO t VALUES (?)", [(k,) for k in range(5000)] + [("many",)])
    connection.commit()
    connection.close()

    class Reader:
        pass

    reader = Reader()
    reader.path = str(path)
    with pytest.raises(execution._UnreadableError, match="Type mismatch"):
        list(execution._batches(reader, "SELECT a FROM t", ("a",)))


# -- one pass, any batch ------------------------------------------------------------------------------------------------


def test_steps_and_steps_by_ipu_are_each_read_in_one_pass(sample, tmp_path, monkeypatch):
    queries = []
    batches = execution._batches

    def recorded(reader, sql, names, rows=execution._SQLITE3_BATCH):
        queries.append(sql)
        return batches(reader, sql, names, rows)

    monkeypatch.setattr(execution, "_batches", recorded)
    export_chrome_trace(sample.path, tmp_path / "out.json")
    assert [" FROM steps_by_ipu " in q for q in queries].count(True) == 1
    assert ["FROM steps ORDER BY id" in q for q in queries].count(True) == 1
    assert len(queries) == 2


@pytest.mark.parametrize("rows", [1, 2, 3])
def test_any_batch_size_gives_the_same_events(sample, tmp_path, monkeypatch, rows):
    export_chrome_trace(sample.path, tmp_path / "whole.json")
    monkeypatch.setattr(execution, "_READ_BATCH", rows)
    monkeypatch.setattr(execution, "_TEXTS_BATCH", rows)
    export_chrome_trace(sample.path, tmp_path / "batched.json")
    assert (tmp_path / "whole.json").read_bytes() == (tmp_path / "batched.json").read_bytes()


def test_values_beyond_32_bits_in_one_batch_are_written_exactly(sample, tmp_path, monkeypatch):
    big = (1 << 40) + 7
    report = changed_copy(
        sample.path,
        tmp_path / "changed.pop",
        "UPDATE steps_by_ipu SET cycles = ?, data_out = -? WHERE step_id = 3 AND ipu = 1",
        (big, big),
    )
    monkeypatch.setattr(execution, "_READ_BATCH", 2)  # that row's batch is 64-bit, the others 32-bit
    export_chrome_trace(report, tmp_path / "out.json")
    events = _events(tmp_path / "out.json")
    steps = {(e["args"]["step"], e["tid"]): e["args"] for e in events if e["ph"] == "X" and "step" in e["args"]}
    assert steps[3, 1]["cycles"] == big and steps[3, 1]["data_out"] == -big
    assert all(args["cycles"] < 1 << 31 for key, args in steps.items() if key != (3, 1))


def test_an_ipu_with_runs_and_no_profiled_steps_keeps_its_place(sample, tmp_path):
    report = changed_copy(sample.path, tmp_path / "changed.pop", "UPDATE steps_by_ipu SET profiled = 0 WHERE ipu = 0")
    export_chrome_trace(report, tmp_path / "out.json")
    events = [e for e in _events(tmp_path / "out.json") if e["ph"] == "X"]
    tids = [e["tid"] for e in events]
    assert tids == sorted(tids) and set(tids) == {0, 1}
    assert all(e["cat"] == "run" for e in events if e["tid"] == 0)


def test_read_ahead_gives_every_item_and_raises_an_error_where_it_happened():
    import threading

    def items(fail_at):
        for k in range(5):
            if k == fail_at:
                raise ValueError(f"item {k}")
            yield k

    assert list(execution._read_ahead(items(None))) == [0, 1, 2, 3, 4]
    seen = []
    with pytest.raises(ValueError, match="item 3"):
        for item in execution._read_ahead(items(3)):
            seen.append(item)
    assert seen == [0, 1, 2]
    for _item in execution._read_ahead(items(None)):  # a caller that stops early ends the thread
        break
    assert not [t for t in threading.enumerate() if t.name == "pva-read-ahead"]
