"""Record host-side events of your own code into a pva trace file, in the manner of libpvti.

Events are recorded on named channels, with a context manager or a decorator; they nest as
the code nests (per thread and per asyncio task) and are read back with ``pva.openTrace``.

>>> from pva import tracing                                           # doctest: +SKIP
>>> with tracing.Recorder("host.pvti") as recorder:                   # doctest: +SKIP
...     io = recorder.channel("io")
...     with io.event("load", file="data.bin"):
...         load()
...     @io.instrument
...     def save(): ...

Library code can instrument itself once with global channels (``tracing.channel("simulator")``):
they record into the recorder started with `start` (or the ``PVA_TRACE`` environment variable,
see `start_from_environment`) and cost well under a microsecond per event while none is.

Recording appends to an in-memory queue; a background thread commits it to the file in batches
(every `flush_interval` seconds, or at once when `max_buffered` events wait), each batch one
SQLite transaction. The file exists from the start; if the process dies, every committed batch
is kept, with events that had not ended marked incomplete (``Event.isComplete`` False). `close`
ends what is still open the same way and marks the trace complete.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import contextvars
import functools
import inspect
import itertools
import json
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Literal

from .. import __version__
from ..gcpause import gc_paused

__all__ = [
    "Channel",
    "Recorder",
    "active",
    "channel",
    "start",
    "start_from_environment",
    "stop",
]

#: Environment variable naming the trace file `start_from_environment` records into.
ENVIRONMENT_VARIABLE = "PVA_TRACE"

_now_ns = time.monotonic_ns
_thread_id = threading.get_native_id
#: The innermost open event of the current thread or task: (recorder, event id, thread id).
_current: contextvars.ContextVar[tuple | None] = contextvars.ContextVar("pva_trace_event", default=None)
_active: Recorder | None = None
_active_lock = threading.Lock()
_recorders: weakref.WeakSet[Recorder] = weakref.WeakSet()
_left_in_parent: list = []  # appenders of recorders inherited through fork, never touched again


class _NoEvent:
    """What `Channel.event` returns when nothing records: does nothing."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> Literal[False]:
        return False


_NO_EVENT = _NoEvent()


class _Event:
    """One event being recorded: its begin is queued on entry, its end on exit."""

    __slots__ = ("_rec", "_channel", "_label", "_args", "_id", "_tid", "_prev")

    def __init__(self, recorder: Recorder, channel_id: int, label: str, args: dict | None) -> None:
        self._rec = recorder
        self._channel = channel_id
        self._label = label
        self._args = args

    def __enter__(self) -> _Event:
        rec = self._rec
        tid = _thread_id()
        prev = _current.get()
        parent = prev[1] if prev is not None and prev[0] is rec and prev[2] == tid else None
        self._id = event_id = next(rec._ids)
        self._tid = tid
        self._prev = prev
        _current.set((rec, event_id, tid))
        if tid not in rec._thread_names:
            rec._add_thread(tid)
        rec._queue.append((event_id, tid, parent, self._label, self._channel, _now_ns() // 1000, self._args))
        return self

    def __exit__(self, *exc) -> Literal[False]:
        end = _now_ns() // 1000
        _current.set(self._prev)
        rec = self._rec
        if not rec._off:
            queue = rec._queue
            queue.append((self._id, end))
            if len(queue) >= rec._max_buffered:
                rec._flush_from_caller()
        return False


class Channel:
    """A named channel events are recorded on.

    A channel from `Recorder.channel` records into that recorder; one from the module function
    `channel` records into whichever recorder is active (see `start`), or nowhere.
    """

    __slots__ = ("name", "_recorder", "_cached")

    def __init__(self, name: str, recorder: Recorder | None = None) -> None:
        if not isinstance(name, str):
            raise TypeError(f"a channel name must be a string, not {type(name).__name__}")
        self.name = name
        self._recorder = recorder
        self._cached: tuple[Recorder, int] | None = None

    def event(self, label: str, **args: Any):
        """A context manager recording one event called `label` while its block runs.

        Keyword arguments are stored with the event (as JSON; ``Event.args`` reads them back).
        """
        rec = self._recorder or _active
        if rec is None or rec._off:
            return _NO_EVENT
        cached = self._cached
        if cached is None or cached[0] is not rec:
            cached = self._cached = (rec, rec._channel_id(self.name))
        return _Event(rec, cached[1], label, args or None)

    def instrument(self, fn: Callable | None = None, *, label: str | None = None):
        """Decorate a function (or coroutine function) so each call is recorded as an event.

        Use as ``@channel.instrument`` (the label is the function's qualified name) or
        ``@channel.instrument(label="...")``.
        """

        def wrap(function: Callable) -> Callable:
            name = label if label is not None else getattr(function, "__qualname__", repr(function))
            if inspect.iscoroutinefunction(function):

                async def async_wrapper(*a, **k):
                    with self.event(name):
                        return await function(*a, **k)

                return functools.update_wrapper(async_wrapper, function)

            def wrapper(*a, **k):
                with self.event(name):
                    return function(*a, **k)

            return functools.update_wrapper(wrapper, function)

        if fn is not None:
            if not callable(fn):
                raise TypeError(f"instrument decorates a callable, not {type(fn).__name__}")
            return wrap(fn)
        return wrap

    def __repr__(self) -> str:
        bound = "" if self._recorder is None else f" of {self._recorder.path!r}"
        return f"<Channel {self.name!r}{bound}>"


class Recorder:
    """Records events into a trace file at `path` (replacing any file there) until closed.

    Thread-safe: any thread may record; each thread's events nest by themselves.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        process_name: str | None = None,
        producer: str = "pva.tracing",
        flush_interval: float = 0.5,
        max_buffered: int = 65536,
    ) -> None:
        if flush_interval <= 0:
            raise ValueError(f"flush_interval must be positive, got {flush_interval!r}")
        if max_buffered < 1:
            raise ValueError(f"max_buffered must be at least 1, got {max_buffered!r}")
        self.path = os.fspath(path)
        from .writer import TraceAppender  # Arrow loads only when a trace is recorded

        self._appender = TraceAppender(self.path, producer=producer, producer_version=__version__)
        self.pid = os.getpid()
        self._process_name = (
            process_name
            if process_name is not None
            else (os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python")
        )
        self._ids = itertools.count()
        self._queue: collections.deque = collections.deque()
        self._max_buffered = max_buffered
        self._flush_interval = flush_interval
        self._off = False
        self._closed = False
        self._channels: dict[str, int] = {}
        self._new_channels: list[tuple[int, str]] = []
        self._thread_names: dict[int, str] = {}
        self._new_threads: list[tuple[int, int, str]] = []
        self._process_written = False
        self._registry_lock = threading.Lock()
        self._flush_lock = threading.Lock()
        # Events written to the file while still open: id -> (pid, tid, start).
        self._open_written: dict[int, tuple[int, int, int]] = {}
        self._last = 0
        self._wake = threading.Event()
        self._flusher = threading.Thread(target=self._flush_loop, name="pva-trace-flush", daemon=True)
        _recorders.add(self)
        self._flusher.start()

    # -- recording ---------------------------------------------------------------------

    def channel(self, name: str) -> Channel:
        """A channel of this recorder."""
        return Channel(name, self)

    def _channel_id(self, name: str) -> int:
        found = self._channels.get(name)
        if found is None:
            with self._registry_lock:
                found = self._channels.get(name)
                if found is None:
                    found = self._channels[name] = len(self._channels)
                    self._new_channels.append((found, name))
        return found

    def _add_thread(self, tid: int) -> None:
        with self._registry_lock:
            if tid not in self._thread_names:
                name = threading.current_thread().name
                self._thread_names[tid] = name
                self._new_threads.append((self.pid, tid, name))

    @property
    def closed(self) -> bool:
        """Whether the recorder is closed."""
        return self._closed

    # -- writing -----------------------------------------------------------------------

    def _flush_loop(self) -> None:
        while not self._off:
            self._wake.wait(self._flush_interval)
            self._wake.clear()
            if self._off:
                break
            self._flush_quietly()

    def _flush_from_caller(self) -> None:
        self._flush_quietly()

    def _flush_quietly(self) -> None:
        """Flush; if writing fails (a full disk, say), stop recording with a warning instead of
        raising into the program being traced."""
        try:
            self.flush()
        except Exception as exc:
            self._off = True
            self._queue.clear()
            print(f"pva.tracing: stopped recording into {self.path!r}: {exc}", file=sys.stderr)

    def flush(self) -> None:
        """Commit every event recorded so far (open ones as incomplete, updated when they end)."""
        with self._flush_lock:
            if self._closed:
                return
            self._write_batch(final_time=None)

    def _drain(self) -> list:
        queue = self._queue
        popleft = queue.popleft
        return [popleft() for _ in range(len(queue))]

    def _write_batch(self, final_time: int | None) -> None:
        items = self._drain()
        with self._registry_lock:
            channels, self._new_channels = self._new_channels, []
            threads, self._new_threads = self._new_threads, []
        now = final_time if final_time is not None else _now_ns() // 1000
        pid = self.pid
        open_written = self._open_written
        with gc_paused():
            ends = {item[0]: item[1] for item in items if len(item) == 2}
            rows = []
            args_rows = []
            for item in items:
                if len(item) == 2:
                    continue
                event_id, tid, parent, label, channel_id, start, args = item
                end = ends.pop(event_id, None)
                if end is not None:
                    rows.append((pid, tid, event_id, parent, label, channel_id, start, end - start, 1))
                elif final_time is not None:
                    rows.append((pid, tid, event_id, parent, label, channel_id, start, max(0, now - start), 0))
                else:
                    rows.append((pid, tid, event_id, parent, label, channel_id, start, None, 0))
                    open_written[event_id] = (pid, tid, start)
                if args:
                    args_rows.append((event_id, json.dumps(args, separators=(",", ":"), default=str)))
            ended_earlier = []
            for event_id, end in ends.items():  # events begun in an earlier batch
                written = open_written.pop(event_id, None)
                if written is not None:
                    ended_earlier.append((end - written[2], written[0], written[1], event_id))
        last = max(self._last, now)
        processes = []
        if not self._process_written:
            processes.append((pid, self._process_name))
            self._process_written = True
        self._last = last
        self._appender.commit(
            processes=processes,
            threads=threads,
            channels=channels,
            events=rows,
            ended=ended_earlier,
            args=args_rows,
            last_timestamp=last,
        )

    def close(self) -> None:
        """Commit what is left, end events still open (they stay incomplete) and finish the file."""
        if self._closed:
            return
        with self._flush_lock:
            if self._closed:
                return
            self._off = True
            self._wake.set()
            now = _now_ns() // 1000
            try:
                self._write_batch(final_time=now)
                still_open = [
                    (max(0, now - start), p, tid, event_id) for event_id, (p, tid, start) in self._open_written.items()
                ]
                self._open_written.clear()
                self._appender.close(still_open=still_open, last_timestamp=max(self._last, now))
            finally:
                self._closed = True
                _deactivate(self)
        if self._flusher is not threading.current_thread():
            self._flusher.join()

    def _abandon(self) -> None:
        """Stop without writing anything more (after a fork, in the child).

        The parent's SQLite connection is left untouched (closing it here could disturb the
        parent's file), and kept referenced so that garbage collection does not close it either.
        """
        self._off = True
        self._closed = True
        _left_in_parent.append(self._appender)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "recording"
        return f"<Recorder {self.path!r} {state}>"


# -- the active (global) recorder ----------------------------------------------------------


def start(path: str | os.PathLike[str], **options: Any) -> Recorder:
    """Start recording into `path` with a new recorder that global channels record into.

    Stops (closes) a recorder started before. Options are those of `Recorder`.
    """
    global _active
    recorder = Recorder(path, **options)
    with _active_lock:
        previous, _active = _active, recorder
    if previous is not None:
        previous.close()
    return recorder


def start_from_environment(**options: Any) -> Recorder | None:
    """Start recording if the ``PVA_TRACE`` environment variable names a trace file; else None."""
    path = os.environ.get(ENVIRONMENT_VARIABLE, "")
    if not path:
        return None
    if _active is not None and os.path.abspath(_active.path) == os.path.abspath(path) and not _active.closed:
        return _active
    return start(path, **options)


def stop() -> None:
    """Close the active recorder, if any."""
    recorder = _active
    if recorder is not None:
        recorder.close()


def active() -> Recorder | None:
    """The recorder global channels record into, or None."""
    return _active


def channel(name: str) -> Channel:
    """A global channel: it records into the active recorder (see `start`), or nowhere."""
    return Channel(name)


def _deactivate(recorder: Recorder) -> None:
    global _active
    with _active_lock:
        if _active is recorder:
            _active = None


def _close_all() -> None:
    for recorder in list(_recorders):
        with contextlib.suppress(Exception):  # at exit, keep closing the others
            recorder.close()


def _after_fork_in_child() -> None:
    global _active, _active_lock
    _active_lock = threading.Lock()
    _active = None
    for recorder in list(_recorders):
        recorder._abandon()


atexit.register(_close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
