"""Chrome trace import in bounded memory, its fast and exact readers giving the same file, and the
execution export's tracks, order and checks."""

from __future__ import annotations

import io
import json
import os
import random
import sqlite3
import subprocess
import sys

import pytest
from reportbuilder import changed_copy

import formats.chrome.importer as chrome_import
from formats.chrome.events import NotFastError, read_trace_items, read_trace_items_fast
from formats.chrome.export import export_chrome_trace
from formats.errors import CorruptReportError, InvalidInputError
from formats.json_values import plain

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# -- memory ------------------------------------------------------------------------------------------------------------

#: Converts a trace in a fresh process and prints its peak resident memory in MB. The staging file's
#: page cache is made small, so that the traces of both sizes fill it.
_CONVERT_AND_PEAK = r"""
import sys
sys.path.insert(0, sys.argv[3])
import formats.chrome.importer as chrome_import
chrome_import.STAGE_MEMORY = 1 << 18
chrome_import.import_chrome_trace(sys.argv[1], sys.argv[2])
with open("/proc/self/status") as status:
    print(next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024)
"""


def _tracer_output(path, events: int) -> None:
    """A host tracer's trace: threads of 5,000 events each, children written before their parent."""
    threads = max(1, events // 5000)
    clock: dict[int, int] = {}
    lines = []
    for i in range(events // 4):
        tid = i % threads
        t0 = clock.get(tid, 0)
        lines.append(f'{{"ph":"X","name":"child","ts":{t0 + 2},"dur":5,"pid":1,"tid":{tid}}}')
        lines.append(f'{{"ph":"X","name":"step","ts":{t0},"dur":10,"pid":1,"tid":{tid},"args":{{"i":{i}}}}}')
        lines.append(f'{{"ph":"B","name":"host","ts":{t0 + 11},"pid":1,"tid":{tid}}}')
        lines.append(f'{{"ph":"E","ts":{t0 + 13},"pid":1,"tid":{tid}}}')
        clock[tid] = t0 + 15
    path.write_text('{"traceEvents":[\n' + ",\n".join(lines) + "\n]}\n")


def _peak_mb(tmp_path, events: int) -> float:
    source = tmp_path / f"trace-{events}.json"
    _tracer_output(source, events)
    result = subprocess.run(
        [sys.executable, "-c", _CONVERT_AND_PEAK, str(source), str(tmp_path / f"trace-{events}.pvti"), ROOT],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return float(result.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="peak memory is read from /proc")
def test_import_memory_does_not_grow_with_the_number_of_events(tmp_path):
    # 12x the events: an import that holds every event (as one that builds lists of them does, at
    # more than 100 bytes an event) grows by well over 30 MB; a streaming one stays within its bound.
    small = _peak_mb(tmp_path, 25_000)
    large = _peak_mb(tmp_path, 300_000)
    assert large - small < 20, (small, large)


# -- fast and exact readers ------------------------------------------------------------------------------------------


def _random_trace(seed: int) -> str:
    rng = random.Random(seed)
    events = []
    for _ in range(200):
        phase = rng.choice("XXXXXBEiICMs")
        event = {"ph": phase, "pid": rng.choice([1, 2, "gpu"]), "tid": rng.choice([1, 2, "stream 7"])}
        event["ts"] = rng.choice([rng.randint(0, 1000), rng.random() * 1000, 0.000123456789012345678])
        if phase != "E" or rng.random() < 0.5:
            event["name"] = rng.choice(["a", "b", "κ", "op\u2028x"])
        if rng.random() < 0.5:
            event["cat"] = rng.choice(["x", "y", ""])
        if phase == "X":
            event["dur"] = rng.choice([0, rng.randint(0, 300), rng.random() * 100])
        if phase == "C":
            event["args"] = {"v": rng.randint(0, 9), "w": rng.random()}
        elif phase == "M":
            event["name"] = rng.choice(["process_name", "thread_name", "process_sort_index", "thread_sort_index"])
            event["args"] = {"name": f"n{rng.randint(0, 3)}", "sort_index": rng.randint(0, 5)}
        elif rng.random() < 0.5:
            event["args"] = rng.choice(
                [{"k": [1, 2.5]}, {"k": [1, 2]}, {"k": {"z": [1.0, 3]}}, {"s": "é"}, {"b": [True, 1]}, {}, {"f": 1.0}]
            )
        if rng.random() < 0.1:
            event["s"] = "t"
        events.append(event)
    if seed % 2:
        return json.dumps({"schemaVersion": 1, "traceEvents": events, "otherData": {"x": [1, 2.5]}}, indent=seed % 3)
    return json.dumps(events, ensure_ascii=seed % 4 == 0)


def _contents(path) -> dict:
    connection = sqlite3.connect(path)
    try:
        return {
            table: connection.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            for table in ("events", "event_args", "threads", "processes", "channels", "counter_samples")
        } | {"metadata": connection.execute("SELECT * FROM metadata WHERE key != 'created' ORDER BY 1").fetchall()}
    finally:
        connection.close()


@pytest.mark.parametrize("seed", range(12))
def test_fast_and_exact_readers_write_the_same_trace_file(tmp_path, monkeypatch, seed):
    source = tmp_path / "trace.json"
    source.write_text(_random_trace(seed))
    with open(source, "rb") as raw:
        fast = list(read_trace_items_fast(raw)[0])
    with open(source, "rb") as raw:
        exact = [(parts, plain(value)) for parts, value in read_trace_items(raw, str(source))[0]]
    assert repr(fast) == repr(exact)  # the same values, of the same types (1.0 stays a float)
    assert fast

    def outcome(name):
        try:
            stats = chrome_import.import_chrome_trace(source, tmp_path / name)
        except InvalidInputError as error:  # a random trace may end an event before it begins
            return str(error)
        return stats, _contents(tmp_path / name)

    fast_outcome = outcome("fast.pvti")

    def refuse(*args, **kwargs):
        raise NotFastError("disabled")

    monkeypatch.setattr(chrome_import, "read_trace_blocks_fast", refuse)
    assert outcome("exact.pvti") == fast_outcome


@pytest.mark.parametrize(
    "text, reason",
    [
        ('[{"ph":"X","name":"a","ts":1,"args":{"id":12345678901234567890}}]', "a long integer"),
        ('[{"ph":"X","name":"a","ts":1}', "not closed"),
        ('[{"ph":"X","name":"a","ts":NaN}]', "invalid JSON"),
        ('{"otherData":{}}', "traceEvents"),
    ],
)
def test_the_fast_reader_leaves_to_the_exact_one_what_only_it_reads_faithfully(text, reason):
    with pytest.raises(NotFastError, match=reason):
        list(read_trace_items_fast(io.BytesIO(text.encode()))[0])


def test_events_of_a_block_larger_than_the_read_size_and_nested_args(tmp_path, monkeypatch):
    monkeypatch.setattr("formats.chrome.events.FAST_BLOCK", 64)
    events = [
        {"ph": "X", "name": "n" * 100, "ts": k, "dur": 1, "args": {"a": {"b": [k, {"c": "}],{"}]}}} for k in range(5)
    ]
    with io.BytesIO(json.dumps({"traceEvents": events, "after": [1, 2.5]}).encode()) as raw:
        items, others, status = read_trace_items_fast(raw)
        assert [value for _, value in items] == events
    assert others == {"after": [1.0, 2.5]} and not status["truncated"]


def test_events_of_one_thread_overlapping_across_batches_keep_their_nesting(tmp_path, monkeypatch):
    monkeypatch.setattr(chrome_import, "BATCH", 7)  # staging and writing batches of 7 events
    events = []
    for k in range(40):
        events.append({"ph": "X", "name": f"inner{k}", "ts": k * 10 + 2, "dur": 3, "pid": 1, "tid": 1})
        events.append({"ph": "X", "name": f"outer{k}", "ts": k * 10, "dur": 8, "pid": 1, "tid": 1})
        events.append({"ph": "B", "name": f"open{k}", "ts": k * 10 + 6, "pid": 1, "tid": 1})
        events.append({"ph": "E", "ts": k * 10 + 7, "pid": 1, "tid": 1, "args": {"k": k}})
    events.append({"ph": "X", "name": "across", "ts": 5, "dur": 20, "pid": 1, "tid": 1})  # overlaps outer0 and outer1
    source = tmp_path / "t.json"
    source.write_text(json.dumps(events))
    stats = chrome_import.import_chrome_trace(source, tmp_path / "t.pvti")
    assert stats.events == 121 and stats.threads == 2
    import pva

    with pva.openTrace(tmp_path / "t.pvti") as trace:
        threads = {t.name: t for t in trace.process(1).threads}
        roots = threads[""].events
        assert [e.label for e in roots] == [f"outer{k}" for k in range(40)]
        assert [(c.label, c.timestamp, c.duration) for c in roots[3].children()] == [
            ("inner3", 32, 3),
            ("open3", 36, 1),
        ]
        assert roots[3].children()[1].args == {"k": 3}
        assert [e.label for e in threads["thread 1 (overlap 1)"].events] == ["across"]


# -- export ------------------------------------------------------------------------------------------------------------


def test_execution_export_writes_each_track_in_start_order_and_nested(tmp_path, sample):
    export_chrome_trace(sample.path, tmp_path / "exec.json")
    events = json.loads((tmp_path / "exec.json").read_text())["traceEvents"]
    named = {e["tid"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    by_track: dict[int, list] = {}
    for position, event in enumerate(events):
        if event["ph"] == "X":
            assert event["tid"] in named
            by_track.setdefault(event["tid"], []).append((position, event))
    steps = sum(1 for row in sample.rows("steps_by_ipu") if row[2])
    assert sum(1 for track in by_track.values() for _, e in track if e.get("cat") != "run") == steps
    for track in by_track.values():
        keys = [(e["ts"], -e["dur"]) for _, e in track]
        assert keys == sorted(keys)
        open_ends: list[float] = []
        for _, event in track:
            end = event["ts"] + event["dur"]
            # times are rounded to the ns (ts and dur each), so ends are compared to within 2 ns
            while open_ends and open_ends[-1] <= event["ts"] + 0.002:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + 0.002  # nests in the innermost open event
            open_ends.append(end)


def test_execution_export_refuses_a_step_value_of_the_wrong_type(tmp_path, sample):
    damaged = changed_copy(
        sample.path, tmp_path / "damaged.pop", "UPDATE steps_by_ipu SET tile_balance = 'high' WHERE step_id = 3"
    )
    with pytest.raises(CorruptReportError, match=r"steps_by_ipu\.tile_balance holds text 'high'"):
        export_chrome_trace(damaged, tmp_path / "out.json")
    assert not (tmp_path / "out.json").exists()
