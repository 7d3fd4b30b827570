"""Export Chrome trace event JSON (chrome://tracing, Perfetto UI): a report's execution or a pva trace file."""

from __future__ import annotations

import os

from ..atomic import AtomicOutput
from ..detect import FileKind, sniff
from ..errors import InvalidInputError
from .execution_events import write_report_execution
from .writer import ChromeTraceWriter, write_trace_file_events


def export_chrome_trace(source: str | os.PathLike[str], output: str | os.PathLike[str]) -> list[str]:
    """Write a trace file's events, or a report's execution, as Chrome trace event JSON.

    `output` may be a FIFO or ``/dev/stdout``: the JSON is then written as a stream.
    """
    name = os.fspath(source)
    kind = sniff(name)
    if kind not in (FileKind.PROFILE, FileKind.TRACE):
        raise InvalidInputError(f"{name!r}: expected a pva report or trace file, found {kind.value}", name)
    with AtomicOutput(os.fspath(output), stream=True) as atomic, open(atomic.path, "wb") as handle:
        writer = ChromeTraceWriter(handle)
        fields = (
            write_trace_file_events(name, writer) if kind is FileKind.TRACE else write_report_execution(name, writer)
        )
        writer.close(fields)
    return [os.fspath(output)]
