"""Whole-file operations: validate, convert and export reports, and read-only SQL on any pva file.

A pva addition; the command line's check, convert, export and sql go through these.

>>> import pva.file_operations                                                       # doctest: +SKIP
>>> pva.file_operations.check("profile.pop", quick=True)                             # doctest: +SKIP
[]
>>> pva.file_operations.export("profile.pop", "parquet", "profile-parquet")          # doctest: +SKIP
['profile-parquet']
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from formats.exporters import EXPORTERS, Exporter
from formats.pop.query.examples import FLEET_QUERY as QUERY_EXAMPLE
from formats.pop.query.examples import REPORT_SQL as SQL_EXAMPLE
from formats.pop.readonly_sql import DEFAULT_MEMORY_LIMIT as SQL_MEMORY_LIMIT
from formats.pop.readonly_sql import DEFAULT_TIMEOUT as SQL_TIMEOUT
from formats.protected_files import output_rules as output_rules

__all__ = [
    "EXPORT_FORMATS",
    "QUERY_EXAMPLE",
    "SQL_EXAMPLE",
    "SQL_MEMORY_LIMIT",
    "SQL_TIMEOUT",
    "check",
    "check_notes",
    "convert",
    "export",
    "output_rules",
    "sql",
]

#: Every export format by name, with its description and what it writes (the one registry).
EXPORT_FORMATS: dict[str, Exporter] = EXPORTERS


def check(path: str | os.PathLike[str], *, quick: bool = False, progress: Any = None) -> list:
    """Every problem found in a report (an empty list: it is valid); `quick` checks structure and counts only."""
    from formats.pop.check import check_report

    return check_report(path, progress, quick=quick)


def check_notes(path: str | os.PathLike[str]) -> list[str]:
    """Notes on a report that are not problems (journal mode, stale temporaries beside it)."""
    from formats.pop.check import check_notes as notes

    return notes(path)


def convert(inputs: Iterable[str | os.PathLike[str]], output: str | os.PathLike[str], *, progress: Any = None) -> Any:
    """Convert legacy Poplar profiles, Chrome traces or Cerebras reports into a pva file; the outcome."""
    from formats.convert import convert as run

    return run([os.fspath(p) for p in inputs], output, progress=progress)


def export(source: str | os.PathLike[str], fmt: str, output: str | os.PathLike[str], **options: Any) -> list[str]:
    """Export a report (or a trace file) in one of EXPORT_FORMATS; the paths written."""
    from formats.exporters import export as run

    return run(source, fmt, output, **options)


def sql(
    path: str | os.PathLike[str],
    query: str,
    params: Sequence[Any] = (),
    *,
    timeout: float | None = None,
    memory_limit: int | None = None,
) -> Any:
    """One read-only statement on a report or a trace file: a result with `.columns`, lazy `.rows` and `close()`."""
    from formats.detect import FileKind, sniff
    from formats.pop.reader import ProfileReader
    from formats.pop.readonly_sql import QueryResult, run_readonly
    from formats.trace.reader import TraceReader

    reader = TraceReader(path) if sniff(os.fspath(path)) is FileKind.TRACE else ProfileReader(path)
    try:
        result = run_readonly(reader.file, query, params, timeout=timeout, memory_limit=memory_limit)
    except BaseException:
        reader.close()
        raise
    return QueryResult(result.columns, result.rows, on_close=reader.close)
