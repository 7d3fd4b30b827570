"""Chrome trace event JSON in (array and object forms, every supported phase) and out."""

from __future__ import annotations

import json

import pytest

import pva
from formats.chrome.export import export_chrome_trace
from formats.chrome.importer import import_chrome_trace
from formats.chrome.nesting import assign_lanes
from formats.errors import InvalidInputError

#: A per-layer timeline as SigmaStar's performance_timeline.py describes it (seed 001).
SIGMASTAR = {
    "traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "IPU core0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 0, "args": {"name": "layers"}},
        {
            "ph": "X",
            "name": "0 CONV_2D",
            "ts": 0,
            "dur": 120.5,
            "pid": 0,
            "tid": 0,
            "args": {
                "total_cycle": 108450,
                "conv_cycle_percent": 80.7,
                "vector_cycle_percent": "12.5",
                "dma_load_cycle_percent": 33.0,
                "dma_store_cycle_percent": 4,
            },
        },
        {
            "ph": "X",
            "name": "84 SOFTMAX",
            "ts": 120.5,
            "dur": 30,
            "pid": 0,
            "tid": 0,
            "args": {
                "total_cycle": 27000,
                "conv_cycle_percent": 0,
                "vector_cycle_percent": 95.5,
                "dma_load_cycle_percent": 10,
                "dma_store_cycle_percent": 10,
            },
        },
    ]
}

#: The shape of a PyTorch profiler trace: object form, string pids and tids, flows, instants.
PYTORCH = {
    "schemaVersion": 1,
    "deviceProperties": [{"id": 0, "name": "GPU", "totalGlobalMem": 16000000000}],
    "traceEvents": [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::linear",
            "pid": 4242,
            "tid": 4242,
            "ts": 1700000000100.5,
            "dur": 80.25,
            "args": {"External id": 3, "Sequence number": 11},
        },
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "aten::matmul",
            "pid": 4242,
            "tid": 4242,
            "ts": 1700000000110,
            "dur": 50,
            "args": {"External id": 4},
        },
        {
            "ph": "X",
            "cat": "kernel",
            "name": "sgemm_128x64",
            "pid": 0,
            "tid": "stream 7",
            "ts": 1700000000130,
            "dur": 20.5,
            "args": {"device": 0, "stream": 7, "grid": [1, 2, 1]},
        },
        {"ph": "s", "id": 4, "pid": 4242, "tid": 4242, "ts": 1700000000111, "cat": "ac2g", "name": "ac2g"},
        {
            "ph": "f",
            "id": 4,
            "pid": 0,
            "tid": "stream 7",
            "ts": 1700000000130,
            "cat": "ac2g",
            "name": "ac2g",
            "bp": "e",
        },
        {
            "ph": "i",
            "s": "t",
            "name": "Iteration Start: PyTorch Profiler",
            "pid": "Spans",
            "tid": "PyTorch Profiler",
            "ts": 1700000000000,
        },
        {"ph": "M", "name": "process_name", "pid": 4242, "tid": 0, "args": {"name": "python3"}},
    ],
    "traceName": "trace.json",
}


def _write(tmp_path, name, document):
    path = tmp_path / name
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return path


def _events(trace):
    """{thread name: [(label, timestamp, duration, args), ...]} of a pva trace."""
    out = {}
    for process in trace.processes:
        for thread in process.threads:
            out[(process.name, thread.name)] = [(e.label, e.timestamp, e.duration, e.args) for e in thread.events]
    return out


def test_sigmastar_per_layer_timeline(tmp_path):
    source = _write(tmp_path, "log_ctrl0.json", SIGMASTAR)
    stats = import_chrome_trace(source, tmp_path / "t.pvti")
    assert stats.events == 2 and stats.warnings == []
    with pva.openTrace(tmp_path / "t.pvti") as trace:
        (process,) = trace.processes
        assert process.name == "IPU core0"
        events = _events(trace)[("IPU core0", "layers")]
    assert [(label, ts, dur) for label, ts, dur, _ in events] == [("0 CONV_2D", 0, 120), ("84 SOFTMAX", 120, 30)]
    args = events[0][3]
    assert args["total_cycle"] == 108450 and args["conv_cycle_percent"] == 80.7
    assert args["vector_cycle_percent"] == "12.5"  # string percentages are kept as given


def test_array_form_with_begin_end_instants_counters_and_missing_bracket(tmp_path):
    text = (
        json.dumps(
            [
                {"ph": "B", "name": "outer", "ts": 0, "pid": 1, "tid": 2, "cat": "host", "args": {"a": 1}},
                {"ph": "B", "name": "inner", "ts": 10, "pid": 1, "tid": 2},
                {"ph": "E", "ts": 20, "pid": 1, "tid": 2, "args": {"rows": 5}},
                {"ph": "E", "ts": 200, "pid": 1, "tid": 2},
                {"ph": "i", "name": "mark", "ts": 50, "pid": 1, "tid": 2, "s": "t"},
                {"ph": "C", "name": "memory", "ts": 10, "pid": 1, "args": {"used": 100, "free": 5}},
                {"ph": "B", "name": "never ends", "ts": 300, "pid": 1, "tid": 3},
            ]
        )[:-1]
        + ","
    )  # a tracer that stopped early: no closing bracket
    stats = import_chrome_trace(_write(tmp_path, "t.json", text), tmp_path / "t.pvti")
    assert stats.truncated and any("not closed" in w for w in stats.warnings)
    assert stats.counter_samples == 2
    with pva.openTrace(tmp_path / "t.pvti") as trace:
        thread = trace.process(1).thread(2)
        (outer,) = thread.events
        assert (outer.label, outer.timestamp, outer.duration, outer.channel) == ("outer", 0, 200, "host")
        assert [(c.label, c.timestamp, c.duration) for c in outer.children()] == [("inner", 10, 10), ("mark", 50, 0)]
        assert outer.children()[0].args == {"rows": 5}
        (open_event,) = trace.process(1).thread(3).events
        assert not open_event.isComplete
    from formats.trace.reader import TraceReader

    reader = TraceReader(tmp_path / "t.pvti")
    try:
        assert reader.counter_samples(1) == {("memory", "free"): ([10], [5.0]), ("memory", "used"): ([10], [100.0])}
    finally:
        reader.close()


def test_pytorch_profiler_trace(tmp_path):
    stats = import_chrome_trace(_write(tmp_path, "torch.json", PYTORCH), tmp_path / "t.pvti")
    assert stats.skipped == {} and stats.flows == 1
    with pva.openTrace(tmp_path / "t.pvti") as trace:
        events = _events(trace)
        names = {process.name for process in trace.processes}
    assert names == {"python3", "", "Spans"}
    (linear,) = events[("python3", "")]
    assert linear[:3] == ("aten::linear", 1700000000100, 81)  # start and end rounded to whole µs
    (kernel,) = events[("", "stream 7")]
    assert kernel[0] == "sgemm_128x64" and kernel[3] == {"device": 0, "stream": 7, "grid": [1, 2, 1]}
    with pva.openTrace(tmp_path / "t.pvti") as trace:
        (cpu,) = [p for p in trace.processes if p.name == "python3"]
        (root,) = cpu.threads[0].events
        assert [c.label for c in root.children()] == ["aten::matmul"]


def test_overlapping_events_move_to_an_extra_thread(tmp_path):
    document = [
        {"ph": "X", "name": "a", "ts": 0, "dur": 100, "pid": 1, "tid": 1},
        {"ph": "X", "name": "b", "ts": 50, "dur": 100, "pid": 1, "tid": 1},
        {"ph": "X", "name": "c", "ts": 60, "dur": 10, "pid": 1, "tid": 1},
    ]
    import_chrome_trace(_write(tmp_path, "t.json", document), tmp_path / "t.pvti")
    with pva.openTrace(tmp_path / "t.pvti") as trace:
        threads = {t.name: [e.label for e in t.events] for t in trace.process(1).threads}
    assert threads == {"": ["a"], "thread 1 (overlap 1)": ["b"]}
    with pva.openTrace(tmp_path / "t.pvti") as trace:
        (a,) = trace.process(1).thread(1).events
        assert [c.label for c in a.children()] == ["c"]
    assert assign_lanes([0, 50, 60], [100, 150, 70]) == [0, 1, 0]


def test_trace_round_trips_through_chrome_json(tmp_path):
    source = _write(tmp_path, "in.json", SIGMASTAR)
    import_chrome_trace(source, tmp_path / "t.pvti")
    export_chrome_trace(tmp_path / "t.pvti", tmp_path / "out.json")
    exported = json.loads((tmp_path / "out.json").read_text())
    layers = [e for e in exported["traceEvents"] if e["ph"] == "X"]
    assert [(e["name"], e["ts"], e["dur"], e["args"]) for e in layers] == [
        ("0 CONV_2D", 0, 120, SIGMASTAR["traceEvents"][2]["args"]),
        ("84 SOFTMAX", 120, 30, SIGMASTAR["traceEvents"][3]["args"]),
    ]
    import_chrome_trace(tmp_path / "out.json", tmp_path / "again.pvti")
    with pva.openTrace(tmp_path / "t.pvti") as a, pva.openTrace(tmp_path / "again.pvti") as b:
        assert _events(a) == _events(b)


def test_report_execution_exports_one_track_per_ipu(tmp_path, sample):
    export_chrome_trace(sample.path, tmp_path / "exec.json")
    events = json.loads((tmp_path / "exec.json").read_text())["traceEvents"]
    tracks = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"IPU 0", "IPU 1"} <= tracks
    steps = [e for e in events if e["ph"] == "X" and e.get("cat") != "run"]
    assert len(steps) == 22  # 11 steps on each of 2 IPUs
    first = next(e for e in steps if e["args"]["step"] == 4 and e["tid"] == 0)
    by_ipu = {r[1]: r for r in sample.rows("steps_by_ipu") if r[0] == 4}
    row = by_ipu[0]
    assert first["args"]["cycles"] == row[3] and first["args"]["active_tiles"] == row[4]
    assert first["args"]["tile_balance"] == row[20]
    assert first["ts"] == pytest.approx((row[5] + row[6]) / 1.33e9 * 1e6, abs=1e-3)
    assert first["dur"] == pytest.approx((row[10] - row[6]) / 1.33e9 * 1e6, abs=1e-3)


def test_simulated_host_trace_exports(tmp_path):
    presets = pytest.importorskip("simulator.presets")
    presets.run_preset("tutorial3", {}, directory=str(tmp_path))
    (trace,) = tmp_path.glob("*.pvti")
    export_chrome_trace(trace, tmp_path / "host.json")
    document = json.loads((tmp_path / "host.json").read_text())
    assert any(e["ph"] == "X" for e in document["traceEvents"])
    with pva.openTrace(trace) as original:
        count = sum(len(t.events) for p in original.processes for t in p.threads)
    import_chrome_trace(tmp_path / "host.json", tmp_path / "again.pvti")
    with pva.openTrace(tmp_path / "again.pvti") as again:
        assert sum(len(t.events) for p in again.processes for t in p.threads) >= count


@pytest.mark.parametrize(
    "document, location, message",
    [
        ([{"ph": "X", "name": "a", "ts": "soon", "pid": 1, "tid": 1}], "$[0].ts", "expected the timestamp"),
        (
            {"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": -5}]},
            "$.traceEvents[0].dur",
            "expected a duration >= 0",
        ),
        ([{"ph": "X", "name": 7, "ts": 1}], "$[0].name", "expected the event name"),
        ([1, 2], "$[0]", "expected a trace event"),
        (
            {"traceEvents": [{"ph": "C", "name": "c", "ts": 1, "args": {"x": "many"}}]},
            "$.traceEvents[0].args.x",
            "expected a counter value",
        ),
        ([{"ph": "X", "name": "a", "ts": 1e300}], "$[0].ts", "below 2**62"),
        ({"otherData": {}}, "$", "expected a traceEvents array"),
        ('"just a string"', "$", "expected an array of trace events"),
    ],
)
def test_bad_events_name_file_and_location(tmp_path, document, location, message):
    source = _write(tmp_path, "bad.json", document)
    with pytest.raises(InvalidInputError) as caught:
        import_chrome_trace(source, tmp_path / "t.pvti")
    assert str(caught.value).startswith(f"{str(source)!r}: {location}"), str(caught.value)
    assert message in str(caught.value)
    assert not (tmp_path / "t.pvti").exists()
