"""The recording API (formats.trace.tracing, also pva.tracing): channels, events, decorator, threads, crashes."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import pva
from formats.trace import tracing as formats_tracing
from pva import tracing


def walk(events, depth=0):
    """(depth, label) of every event, depth first."""
    out = []
    for event in events:
        out.append((depth, event.label))
        out.extend(walk(event.children(), depth + 1))
    return out


def only_thread(trace):
    (process,) = trace.processes
    (thread,) = process.threads
    return thread


def test_pva_tracing_is_formats_tracing():
    assert tracing.Recorder is formats_tracing.Recorder
    assert pva.tracing.channel is formats_tracing.channel


def test_nested_events_decorator_and_args(tmp_path):
    path = tmp_path / "host.pvti"
    with tracing.Recorder(path, process_name="my tool") as recorder:
        io = recorder.channel("io")
        compute = recorder.channel("compute")

        @compute.instrument
        def work(n):
            with io.event("inner", n=n):
                return n * 2

        @io.instrument(label="custom label")
        def other():
            return "done"

        with io.event("outer", file="data.bin"):
            assert work(21) == 42
            assert other() == "done"
        with compute.event("second"):
            pass
    assert work.__name__ == "work"
    with pva.openTrace(path) as trace:
        assert trace.isComplete
        (process,) = trace.processes
        assert process.pid == os.getpid() and process.name == "my tool"
        thread = only_thread(trace)
        assert thread.tid == threading.get_native_id() and thread.name == threading.current_thread().name
        assert walk(thread.events) == [
            (0, "outer"),
            (1, "test_nested_events_decorator_and_args.<locals>.work"),
            (2, "inner"),
            (1, "custom label"),
            (0, "second"),
        ]
        outer, second = thread.events
        assert outer.channel == "io" and second.channel == "compute"
        assert outer.args == {"file": "data.bin"}
        inner = outer.children()[0].children()[0]
        assert inner.args == {"n": 21} and inner.channel == "io"
        assert all(e.isComplete for e in (outer, second, inner))
        assert outer.timestamp <= outer.children()[0].timestamp
        assert outer.children()[1].timestamp + outer.children()[1].duration <= outer.timestamp + outer.duration
        assert second.timestamp >= outer.timestamp + outer.duration


def test_durations_are_measured(tmp_path):
    path = tmp_path / "sleep.pvti"
    with tracing.Recorder(path) as recorder, recorder.channel("c").event("sleep"):
        time.sleep(0.05)
    with pva.openTrace(path) as trace:
        (event,) = only_thread(trace).events
        assert 50_000 <= event.duration < 5_000_000


def test_an_exception_ends_the_event_and_propagates(tmp_path):
    path = tmp_path / "raise.pvti"
    with tracing.Recorder(path) as recorder:
        channel = recorder.channel("c")
        with pytest.raises(KeyError), channel.event("failing"), channel.event("inner"):
            raise KeyError("x")
        with channel.event("after"):
            pass
    with pva.openTrace(path) as trace:
        thread = only_thread(trace)
        assert walk(thread.events) == [(0, "failing"), (1, "inner"), (0, "after")]
        assert all(e.isComplete for e in thread.events)


def test_threads_record_concurrently_and_nest_separately(tmp_path):
    path = tmp_path / "threads.pvti"
    per_thread = 300
    with tracing.Recorder(path, flush_interval=0.01, max_buffered=64) as recorder:
        channel = recorder.channel("work")
        barrier = threading.Barrier(4)

        def worker(k):
            barrier.wait()
            for _i in range(per_thread):
                with channel.event(f"job{k}"), channel.event("part"):
                    pass

        threads = [threading.Thread(target=worker, args=(k,), name=f"worker-{k}") for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    with pva.openTrace(path) as trace:
        (process,) = trace.processes
        assert sorted(t.name for t in process.threads) == [f"worker-{k}" for k in range(4)]
        for thread in process.threads:
            k = thread.name[-1]
            events = thread.events
            assert len(events) == per_thread
            assert {e.label for e in events} == {f"job{k}"}
            assert all([c.label for c in e.children()] == ["part"] for e in events)
            assert all(e.isComplete and e.children()[0].isComplete for e in events)
            starts = [e.timestamp for e in events]
            assert starts == sorted(starts)


def test_asyncio_tasks_nest_by_task(tmp_path):
    path = tmp_path / "tasks.pvti"

    async def task(channel, name):
        with channel.event(name):
            await asyncio.sleep(0.01)
            with channel.event(name + "/inner"):
                await asyncio.sleep(0.01)

    async def main(channel):
        await asyncio.gather(task(channel, "a"), task(channel, "b"))

    with tracing.Recorder(path) as recorder:
        asyncio.run(main(recorder.channel("async")))
    with pva.openTrace(path) as trace:
        events = only_thread(trace).events
        assert sorted((e.label, [c.label for c in e.children()]) for e in events) == [
            ("a", ["a/inner"]),
            ("b", ["b/inner"]),
        ]


def test_coroutine_functions_can_be_instrumented(tmp_path):
    path = tmp_path / "coroutine.pvti"
    with tracing.Recorder(path) as recorder:
        channel = recorder.channel("async")

        @channel.instrument(label="fetch")
        async def fetch():
            with channel.event("parse"):
                return 7

        assert asyncio.run(fetch()) == 7
    with pva.openTrace(path) as trace:
        assert walk(only_thread(trace).events) == [(0, "fetch"), (1, "parse")]


def test_events_still_open_at_close_are_kept_incomplete(tmp_path):
    path = tmp_path / "open.pvti"
    release = threading.Event()
    started = threading.Event()
    recorder = tracing.Recorder(path)
    channel = recorder.channel("c")

    def blocked():
        with channel.event("blocked"):
            with channel.event("done inside"):
                pass
            started.set()
            release.wait()

    thread = threading.Thread(target=blocked, name="blocked-thread")
    thread.start()
    started.wait()
    with channel.event("main"):
        pass
    recorder.close()
    release.set()
    thread.join()  # the late end is ignored
    with pva.openTrace(path) as trace:
        assert trace.isComplete
        by_name = {t.name: t for t in trace.processes[0].threads}
        (blocked_event,) = by_name["blocked-thread"].events
        assert blocked_event.isComplete is False and blocked_event.duration >= 0
        assert [(c.label, c.isComplete) for c in blocked_event.children()] == [("done inside", True)]
        (main_event,) = by_name[threading.current_thread().name].events
        assert main_event.isComplete


def test_a_live_trace_can_be_read_while_recording(tmp_path):
    path = tmp_path / "live.pvti"
    with tracing.Recorder(path, flush_interval=10) as recorder:
        channel = recorder.channel("c")
        with channel.event("running"):
            with channel.event("finished"):
                pass
            recorder.flush()
            with pva.openTrace(path) as trace:
                assert trace.isComplete is False
                (running,) = only_thread(trace).events
                assert running.isComplete is False
                assert [(c.label, c.isComplete) for c in running.children()] == [("finished", True)]
    with pva.openTrace(path) as trace:
        (running,) = only_thread(trace).events
        assert trace.isComplete and running.isComplete


CRASH = textwrap.dedent("""
    import os, sys, time
    from pva import tracing
    recorder = tracing.Recorder(sys.argv[1], flush_interval=0.02)
    channel = recorder.channel("crash")
    with channel.event("done"):
        pass
    with channel.event("open outer"):
        with channel.event("closed inner"):
            pass
        with channel.event("open inner"):
            time.sleep(0.3)  # several flushes happen
            os._exit(3)
""")


def test_a_process_that_dies_leaves_its_events_with_open_ones_incomplete(tmp_path):
    path = tmp_path / "crash.pvti"
    result = subprocess.run([sys.executable, "-c", CRASH, str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 3, result.stderr
    with pva.openTrace(path) as trace:
        assert trace.isComplete is False
        events = only_thread(trace).events
        assert walk(events) == [(0, "done"), (0, "open outer"), (1, "closed inner"), (1, "open inner")]
        done, outer = events
        assert done.isComplete and not outer.isComplete
        closed, still_open = outer.children()
        assert closed.isComplete and not still_open.isComplete
        # an event that never ended lasts until the last time the recorder committed
        assert still_open.duration >= 200_000 - 50_000
        assert outer.timestamp + outer.duration >= still_open.timestamp + still_open.duration


def test_killed_process_leaves_a_readable_trace(tmp_path):
    path = tmp_path / "killed.pvti"
    script = textwrap.dedent("""
        import sys, time
        from pva import tracing
        recorder = tracing.Recorder(sys.argv[1], flush_interval=0.01)
        channel = recorder.channel("k")
        print("ready", flush=True)
        while True:
            with channel.event("loop"):
                with channel.event("body"):
                    time.sleep(0.001)
    """)
    process = subprocess.Popen([sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "ready"
        time.sleep(0.3)
    finally:
        process.kill()
        process.wait()
        process.stdout.close()
    with pva.openTrace(path) as trace:
        events = only_thread(trace).events
        assert len(events) > 5
        assert all(e.children()[0].label == "body" for e in events if e.children())
        assert sum(not e.isComplete for e in events) <= 1


def test_global_channels_record_only_while_a_recorder_is_active(tmp_path):
    channel = tracing.channel("library")
    assert tracing.active() is None
    with channel.event("nobody listens") as nothing:
        assert nothing is None
    first = tmp_path / "first.pvti"
    recorder = tracing.start(first)
    try:
        assert tracing.active() is recorder
        with channel.event("recorded"):
            pass
        second = tmp_path / "second.pvti"
        replacement = tracing.start(second)
        assert recorder.closed and tracing.active() is replacement
        with channel.event("into the second"):
            pass
    finally:
        tracing.stop()
    assert tracing.active() is None
    with channel.event("after stop"):
        pass
    with pva.openTrace(first) as trace:
        assert walk(only_thread(trace).events) == [(0, "recorded")]
    with pva.openTrace(second) as trace:
        assert walk(only_thread(trace).events) == [(0, "into the second")]
        assert only_thread(trace).events[0].channel == "library"


def test_start_from_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("PVA_TRACE", raising=False)
    assert tracing.start_from_environment() is None
    path = tmp_path / "env.pvti"
    monkeypatch.setenv("PVA_TRACE", str(path))
    recorder = tracing.start_from_environment()
    try:
        assert recorder is not None and tracing.start_from_environment() is recorder
        with tracing.channel("env").event("x"):
            pass
    finally:
        tracing.stop()
    with pva.openTrace(path) as trace:
        assert walk(only_thread(trace).events) == [(0, "x")]


def test_batches_are_committed_while_recording(tmp_path):
    path = tmp_path / "batches.pvti"
    with tracing.Recorder(path, flush_interval=60, max_buffered=10) as recorder:
        channel = recorder.channel("c")
        for _ in range(20):
            with channel.event("e"):
                pass
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            (written,) = conn.execute("SELECT count(*) FROM events").fetchone()
        finally:
            conn.close()
        assert written >= 10  # the queue reached max_buffered: committed without waiting for the interval
    with pva.openTrace(path) as trace:
        assert len(only_thread(trace).events) == 20


def test_recorder_checks_its_options_and_path(tmp_path):
    with pytest.raises(ValueError, match="flush_interval must be positive"):
        tracing.Recorder(tmp_path / "x.pvti", flush_interval=0)
    with pytest.raises(ValueError, match="max_buffered must be at least 1"):
        tracing.Recorder(tmp_path / "x.pvti", max_buffered=0)
    with pytest.raises(pva.InvalidInputError, match="cannot write"):
        tracing.Recorder(tmp_path / "missing" / "x.pvti")
    with pytest.raises(TypeError):
        tracing.channel(3)
    with pytest.raises(TypeError):
        tracing.channel("c").instrument(3)


def test_recorder_replaces_an_existing_file_and_reprs(tmp_path):
    path = tmp_path / "again.pvti"
    path.write_text("old contents")
    with pytest.raises(pva.PvaError, match="exists and is not a file pva wrote"):
        tracing.Recorder(path).close()  # a file pva did not write is never replaced
    path.unlink()
    tracing.Recorder(path).close()  # an earlier trace of pva's is
    recorder = tracing.Recorder(path)
    assert repr(recorder) == f"<Recorder {str(path)!r} recording>"
    assert repr(recorder.channel("c")) == f"<Channel 'c' of {str(path)!r}>"
    assert repr(tracing.channel("g")) == "<Channel 'g'>"
    recorder.close()
    recorder.close()  # closing twice is harmless
    assert repr(recorder) == f"<Recorder {str(path)!r} closed>"
    with pva.openTrace(path) as trace:
        assert trace.isComplete
        assert [(p.pid, len(p.threads)) for p in trace.processes] == [(os.getpid(), 0)]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_write_into_the_parents_trace(tmp_path):
    path = tmp_path / "fork.pvti"
    with tracing.Recorder(path) as recorder:
        channel = recorder.channel("c")
        with channel.event("parent"):
            pid = os.fork()
            if pid == 0:  # the child: recording does nothing, exiting does not touch the file
                with channel.event("child"):
                    pass
                os._exit(0)
            os.waitpid(pid, 0)
    with pva.openTrace(path) as trace:
        assert walk(only_thread(trace).events) == [(0, "parent")]


def test_a_failing_disk_stops_recording_without_raising_into_the_program(tmp_path, capsys):
    path = tmp_path / "failing.pvti"
    recorder = tracing.Recorder(path, flush_interval=60, max_buffered=4)
    channel = recorder.channel("c")

    def broken(**kwargs):
        raise OSError("No space left on device")

    recorder._appender.commit = broken
    for _ in range(10):
        with channel.event("still runs"):
            pass
    assert "stopped recording into" in capsys.readouterr().err
    with channel.event("ignored"):
        pass
    assert len(recorder._queue) == 0
    recorder._wake.set()  # the flusher thread ends, as recording stopped
    recorder._flusher.join(timeout=10)
    assert not recorder._flusher.is_alive()
    recorder._abandon()
    with pva.openTrace(path) as trace:  # the file is still a readable (empty) trace
        assert trace.isComplete is False
