"""Real PyTorch profiler (Kineto) traces (tests/data/kineto, HolisticTraceAnalysis' test data) through
`pva convert`, pva.openTrace and SQL, and through every analysis command, as a user runs them."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import re
import shutil
import sqlite3
import subprocess

import pytest

import pva
from formats.chrome.importer import import_chrome_trace
from pva.cli import main

DATA = pathlib.Path(__file__).parent / "data" / "kineto"
AMD = DATA / "amd_mi250_kineto.json.gz"
CPU = DATA / "cpu_only_rank34.json.gz"
CUDA = DATA / "cuda_alexnet.json.gz"


def _run(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    status = main([str(a) for a in args])
    return status, capsys.readouterr().out


@pytest.fixture(scope="module")
def amd(tmp_path_factory) -> pathlib.Path:
    output = tmp_path_factory.mktemp("amd") / "amd.pvti"
    stats = import_chrome_trace(AMD, output)
    assert stats.skipped == {} and stats.warnings == []
    assert (stats.events, stats.flows) == (115, 20)
    return output


def test_flows_link_the_cpu_launch_to_the_gpu_kernel(amd):
    with sqlite3.connect(amd) as conn:
        rows = conn.execute(
            "SELECT f.flow_id, s.label, t.label, t.pid, t.tid FROM flows f JOIN events s ON s.id = f.source "
            "JOIN events t ON t.id = f.target WHERE f.category = 'ac2g' ORDER BY f.source_timestamp"
        ).fetchall()
    assert len(rows) == 16  # 16 launches with a start (s) and an end (f); 5 ends without a start are none
    assert rows[0][:3] == ("117", "hipMemcpyWithStream", "Memcpy HtoD (Host -> Device)")
    assert rows[1][1] == "hipLaunchKernel" and rows[1][2].startswith("void at::native::elementwise_kernel<128, 2")
    assert {(pid, tid) for *_, pid, tid in rows} == {(2, 0)}  # every kernel on GPU 2's stream 0
    with pva.openTrace(amd) as trace:
        flows = trace.flows
        backward = [f for f in flows if f.category == "fwdbwd"]
        first = min((f for f in flows if f.category == "ac2g"), key=lambda f: f.sourceTimestamp)
        labels = {p.pid: p.labels for p in trace.processes if p.labels}
        origin = trace.metadata["time_origin_ns"]
        unit = trace.metadata["display_time_unit"]
    assert len(flows) == 20 and len(backward) == 4  # forward operators to their backward functions
    assert (first.flowId, first.targetPid, first.targetTid) == ("117", 2, 0)
    assert labels[2] == "GPU 2" and labels[597913] == "CPU"
    assert (origin, unit) == ("1735632360000000000", "ms")


def test_nested_args_are_kept_and_queryable_in_sql(amd, capsys):
    status, out = _run(
        capsys,
        "sql",
        amd,
        "SELECT json_extract(a.args, '$.\"Input Dims\"[1][0]') FROM events e JOIN event_args a ON a.event = e.id "
        "WHERE e.label = 'aten::addmm' ORDER BY e.timestamp LIMIT 1",
    )
    assert status == 0 and "5" in out.split()


def test_the_top_level_keys_are_kept(amd):
    with pva.openTrace(amd) as trace:
        fields = json.loads(trace.metadata["chrome_trace_fields"])
    assert fields["baseTimeNanoseconds"] == 1735632360000000000  # 19 digits: read as they are
    assert fields["deviceProperties"][0]["name"] == "AMD Radeon Graphics"
    assert fields["traceName"] == "./logs/mi250_minitoy_train_ROCm6_2_kineto.json"


def test_a_19_digit_base_time_keeps_the_fast_reader(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the exact reader was used")

    monkeypatch.setattr("formats.chrome.importer.read_trace_items", refuse)
    stats = import_chrome_trace(CPU, tmp_path / "cpu.pvti")
    assert stats.events == 18


def test_info_of_the_json_itself(capsys):
    status, out = _run(capsys, "info", CPU, "--json")
    info = json.loads(out)
    assert status == 0
    assert (info["num_processes"], info["num_threads"], info["num_events"], info["num_flows"]) == (4, 6, 18, 0)
    assert info["span"] == {"start": 1212075525586, "end": 1212076832503, "duration": 1306917}
    assert info["units"] == {"time": "us", "display_time_unit": "ms", "time_origin_ns": 1719853884000000000}
    assert "distributedInfo" in info["trace_fields"]
    status, out = _run(capsys, "info", AMD)
    assert "Flows:       20" in out and "process 2 'python3' [GPU 2]: 1 thread(s)" in out


def test_optime_shares_are_of_the_traced_time_and_add_up(capsys):
    status, out = _run(capsys, "optime", CPU, "--json")
    rows = json.loads(out)
    assert status == 0
    assert rows[0]["type"] == "gloo:all_reduce" and rows[0]["percent"] == pytest.approx(58.746, abs=0.001)
    assert sum(r["percent"] for r in rows) == pytest.approx(100, abs=0.01)
    status, out = _run(capsys, "optime", AMD, "--mode", "each", "--json")
    each = json.loads(out)
    assert len(each) == 115 and [r["index"] for r in each] == list(range(115))
    assert sum(r["percent"] for r in each) == pytest.approx(100, abs=0.1)
    status, out = _run(capsys, "optime", AMD, "--type-arg", "kind", "--json")  # copies typed by args["kind"]
    types = {r["type"] for r in json.loads(out)}
    assert status == 0 and "HtoD" in types and "Memcpy HtoD (Host -> Device)" not in types


def test_summary_gives_busy_time_top_events_and_categories(capsys):
    status, out = _run(capsys, "summary", CPU, "--json")
    summary = json.loads(out)
    assert status == 0 and summary["traced_time"] == 3635096
    busy = {p["pid"]: p["busy"] for p in summary["processes"]}
    assert busy[1074] == 2345570
    assert summary["top_by_self"][0]["name"] == "gloo:all_reduce"
    shares = {c["category"]: c["share"] for c in summary["categories"]}
    assert shares["user_annotation"] == pytest.approx(0.64526, abs=1e-5)
    assert sum(shares.values()) == pytest.approx(1.0)
    status, out = _run(capsys, "summary", AMD)
    assert "Busy time by process and thread:" in out and "hipLaunchKernel" in out


def test_diff_of_two_traces_flags_a_slower_operator(tmp_path, capsys):
    status, out = _run(capsys, "diff", CPU, CPU)
    assert status == 0 and "0 regression(s)" in out
    document = json.loads(gzip.decompress(CPU.read_bytes()))
    for event in document["traceEvents"]:
        if event.get("name") == "gloo:all_reduce":
            event["dur"] *= 2
    slower = tmp_path / "slower.json"
    slower.write_text(json.dumps(document))
    status, out = _run(capsys, "diff", CPU, slower, "--json")
    found = json.loads(out)
    assert status == 1
    flagged = {d["item"] for d in found["differences"] if d["regression"]}
    assert "gloo:all_reduce" in flagged and "ProfilerStep#551" not in flagged


def test_html_of_a_trace_holds_its_timeline_and_flows(tmp_path, capsys):
    page = tmp_path / "trace.html"
    status, _ = _run(capsys, "html", AMD, "-o", page)
    text = page.read_text()
    assert status == 0 and "<canvas id='timeline'>" in text and "http" not in text.split("<script")[0]
    data = json.loads(text.split("<script type='application/json' id='trace-data'>")[1].split("</script>")[0])
    assert len(data["flows"]) == 20 and data["events"] == 115
    assert "Events with the most self time" in text and "hipLaunchKernel" in text


def test_export_round_trip_keeps_events_flows_and_labels(amd, tmp_path, capsys):
    out = tmp_path / "back.json"
    assert _run(capsys, "export", amd, "--format", "chrome-trace", "-o", out)[0] == 0
    document = json.loads(out.read_text())
    phases = [e["ph"] for e in document["traceEvents"]]
    assert phases.count("s") == phases.count("f") == 20
    assert document["baseTimeNanoseconds"] == 1735632360000000000
    again = tmp_path / "again.pvti"
    import_chrome_trace(out, again)
    with sqlite3.connect(amd) as a, sqlite3.connect(again) as b:
        query = (
            "SELECT s.label, s.timestamp, t.label, t.timestamp FROM flows f JOIN events s ON s.id = f.source "
            "JOIN events t ON t.id = f.target ORDER BY 2, 4"
        )
        assert a.execute(query).fetchall() == b.execute(query).fetchall()
        events = "SELECT pid, tid, label, timestamp, duration FROM events ORDER BY 1, 2, 4, 3"
        assert a.execute(events).fetchall() == b.execute(events).fetchall()
        labels = "SELECT pid, labels FROM processes WHERE labels IS NOT NULL ORDER BY pid"
        assert a.execute(labels).fetchall() == b.execute(labels).fetchall()


def test_every_flow_form_and_async_events(tmp_path):
    events = [
        {"ph": "X", "name": "launch", "ts": 10, "dur": 5, "pid": 1, "tid": 1},
        {"ph": "X", "name": "step", "ts": 20, "dur": 5, "pid": 1, "tid": 2},
        {"ph": "X", "name": "kernel", "ts": 40, "dur": 5, "pid": 2, "tid": 7},
        {"ph": "s", "id": "0x1", "cat": "c", "name": "n", "ts": 11, "pid": 1, "tid": 1},
        {"ph": "t", "id": "0x1", "cat": "c", "name": "n", "ts": 21, "pid": 1, "tid": 2},
        {"ph": "f", "id": "0x1", "cat": "c", "name": "n", "ts": 30, "pid": 2, "tid": 7},  # binds to the next event
        {"ph": "X", "name": "out", "ts": 50, "dur": 2, "pid": 1, "tid": 1, "bind_id": 9, "flow_out": True},
        {"ph": "X", "name": "in", "ts": 60, "dur": 2, "pid": 2, "tid": 7, "bind_id": 9, "flow_in": True},
        {"ph": "b", "name": "request", "cat": "net", "id": 5, "ts": 0, "pid": 1},
        {"ph": "n", "name": "retry", "cat": "net", "id": 5, "ts": 3, "pid": 1},
        {"ph": "e", "name": "request", "cat": "net", "id": 5, "ts": 8, "pid": 1},
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    stats = import_chrome_trace(path, tmp_path / "t.pvti")
    assert stats.skipped == {} and stats.flows == 3
    with pva.openTrace(tmp_path / "t.pvti") as trace:
        by_id = {}
        for process in trace.processes:
            for thread in process.threads:
                stack = list(thread.events)
                while stack:
                    event = stack.pop()
                    by_id[event.id] = event
                    stack.extend(event.children())
        links = [(f.flowId, by_id[f.source].label, by_id[f.target].label) for f in trace.flows]
        (track,) = [t for p in trace.processes for t in p.threads if t.name == "async net"]
        (request,) = track.events
    assert links == [("0x1", "launch", "step"), ("0x1", "step", "kernel"), ("9", "out", "in")]
    assert (request.label, request.timestamp, request.duration) == ("request", 0, 8)
    assert [c.label for c in request.children()] == ["retry"]


def test_a_damaged_gzip_trace_is_an_error_naming_it(tmp_path, capsys):
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(AMD.read_bytes()[:3000])
    status = main(["convert", str(broken), "-o", str(tmp_path / "x.pvti")])
    err = capsys.readouterr().err
    assert status == 2 and "broken.json.gz" in err
    assert not (tmp_path / "x.pvti").exists()


def test_many_threads_of_one_event_each(tmp_path):
    from benchmarks.kineto_traces import generate

    path = tmp_path / "threads.json"
    generate(path, 0, "threads", threads=3000)
    stats = import_chrome_trace(path, tmp_path / "threads.pvti")
    assert (stats.events, stats.threads) == (3000, 3000)
    with pva.openTrace(tmp_path / "threads.pvti") as trace:
        (process,) = trace.processes
        assert len(process.threads) == 3000
        thread = process.thread(2999)
        (event,) = thread.events
    assert (thread.name, event.label, event.timestamp) == ("worker 2999", "aten::mul", 3999)


@pytest.mark.slow
def test_a_hundred_thousand_threads(tmp_path):
    from benchmarks.kineto_traces import generate

    path = tmp_path / "threads.json"
    generate(path, 0, "threads", threads=100_000)
    stats = import_chrome_trace(path, tmp_path / "threads.pvti")
    assert (stats.events, stats.threads) == (100_000, 100_000)
    with pva.openTrace(tmp_path / "threads.pvti") as trace:
        (process,) = trace.processes
        assert len(process.threads) == 100_000
        (event,) = process.thread(77_777).events
    assert (event.label, event.timestamp, event.duration) == ("aten::mul", 78_777, 3)  # 78,777.125 to 78,779.625


@pytest.mark.slow
def test_three_hundred_thousand_metadata_events(tmp_path):
    lines = [
        json.dumps({"ph": "M", "name": name, "pid": 1, "tid": k % 100, "args": {key: value}})
        for k in range(100_000)
        for name, key, value in (
            ("thread_name", "name", f"worker {k % 100}"),
            ("thread_sort_index", "sort_index", k % 100),
            ("process_labels", "labels", "CPU"),
        )
    ]
    lines += [json.dumps({"ph": "X", "name": "op", "pid": 1, "tid": t, "ts": t, "dur": 1}) for t in range(100)]
    path = tmp_path / "metadata.json"
    path.write_text("[" + ",\n".join(lines) + "]")
    stats = import_chrome_trace(path, tmp_path / "metadata.pvti")
    assert (stats.events, stats.threads, stats.skipped) == (100, 100, {})
    with pva.openTrace(tmp_path / "metadata.pvti") as trace:
        (process,) = trace.processes
        assert process.labels == "CPU"
        assert [t.name for t in process.threads][:3] == ["worker 0", "worker 1", "worker 2"]


@pytest.mark.parametrize(
    "event, message",
    [
        ({"ph": "s", "id": [1], "ts": 1, "pid": 1, "tid": 1}, r"\$\[1\]\.id: expected a flow id"),
        ({"ph": "b", "name": "a", "ts": 1, "pid": 1}, r"\$\[1\]\.id: expected the id of the async event"),
        (
            {"ph": "X", "name": "a", "ts": 1, "dur": 1, "pid": 1, "tid": 1, "bind_id": {"x": 1}, "flow_out": True},
            r"\$\[1\]\.bind_id: expected a flow id",
        ),
    ],
)
def test_a_bad_flow_or_async_event_is_an_error_naming_where(tmp_path, event, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1}, event]))
    with pytest.raises(pva.PvaError, match="bad.json.*" + message):
        import_chrome_trace(path, tmp_path / "bad.pvti")
    assert not (tmp_path / "bad.pvti").exists()


def _chromium() -> str | None:
    for candidate in (os.environ.get("CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


#: Run before the page's own scripts: counts script errors, and once loaded, the timeline's painted pixels.
_PROBE = """<script>
window.__errors = 0; window.addEventListener('error', () => { window.__errors += 1; });
window.addEventListener('load', () => { setTimeout(() => {
  const c = document.getElementById('timeline'), d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let painted = 0; for (let k = 0; k < d.length; k += 4) if (d[k + 3] && (d[k] < 200 || d[k + 1] < 200)) painted++;
  document.documentElement.dataset.errors = window.__errors; document.documentElement.dataset.painted = painted;
}, 100); });
</script>"""


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="headless Chromium is not installed (or set CHROMIUM)")
def test_the_trace_page_draws_its_timeline_in_a_browser(tmp_path, capsys):
    page = tmp_path / "trace.html"
    assert _run(capsys, "html", AMD, "-o", page)[0] == 0
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("<head>", "<head>" + _PROBE, 1))
    profile = tmp_path / "profile"
    result = subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
         "--window-size=1280,900", "--virtual-time-budget=5000", "--dump-dom", probed.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    head = result.stdout[: result.stdout.index("<head")]
    assert 'data-errors="0"' in head, result.stdout[:500]
    painted = int(re.search(r'data-painted="(\d+)"', head).group(1))
    assert painted > 5000  # events and flows drawn, not a blank canvas


def test_flows_of_large_threads_link_each_launch_to_its_kernel(tmp_path):
    from benchmarks.kineto_traces import generate

    path = tmp_path / "real.json"
    generate(path, 12_000, "real")
    stats = import_chrome_trace(path, tmp_path / "real.pvti")
    assert stats.flows == stats.events // 4  # per launch: two CPU operators, the call, the kernel; one flow
    with sqlite3.connect(tmp_path / "real.pvti") as conn:
        rows = conn.execute(
            "SELECT s.label, t.label, f.flow_id, json_extract(a.args, '$.correlation'), t.timestamp >= s.timestamp "
            "FROM flows f JOIN events s ON s.id = f.source JOIN events t ON t.id = f.target "
            "JOIN event_args a ON a.event = t.id"
        ).fetchall()
    assert len(rows) == stats.flows
    assert {(launch, later) for launch, _, _, _, later in rows} == {("cudaLaunchKernel", 1)}
    assert all(flow_id == str(correlation) for _, _, flow_id, correlation, _ in rows)  # the kernel of that launch


def test_the_trace_page_draws_the_longest_events_of_a_large_trace(amd, monkeypatch):
    from pva.analysis import trace_html

    monkeypatch.setattr(trace_html, "MAX_EVENTS", 50)
    with pva.openTrace(amd) as trace:
        data = trace_html.trace_page_data(trace)
        text = trace_html.trace_html(trace)
        every = sorted(
            (int(d) for p in trace.processes for t in p.threads for d in t.eventColumns().durations), reverse=True
        )
    assert (data["events"], data["events_shown"]) == (115, 50)
    drawn = sorted((d for t in data["threads"] for d in t["events"][1::5]), reverse=True)
    assert len(drawn) == 50 and drawn[0] == every[0] and drawn[-1] >= every[49]  # the 50 longest
    assert "65 of the shortest events are left out of the timeline" in text


def test_a_format_1_0_trace_file_still_opens(amd, tmp_path):
    old = tmp_path / "old.pvti"
    old.write_bytes(amd.read_bytes())
    with sqlite3.connect(old) as conn:  # as format 1.0 wrote it: no flows table, no process labels
        conn.executescript(
            "DROP TABLE flows; ALTER TABLE processes DROP COLUMN labels; PRAGMA user_version = 1000; "
            "UPDATE metadata SET value = '1.0' WHERE key = 'format_version';"
        )
    with pva.openTrace(old) as trace:
        assert (trace.numFlows, list(trace.flows)) == (0, [])
        assert {p.labels for p in trace.processes} == {""}
        assert trace.numEvents == 115
