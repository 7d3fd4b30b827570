"""Exporters of reports (and trace files) to open formats: Parquet, HDF5, CSV, Chrome trace, legacy JSON.

>>> from formats.exporters import export                                  # doctest: +SKIP
>>> export("profile.pop", "parquet", "profile-parquet")                   # doctest: +SKIP
['profile-parquet']
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator

import pyarrow as pa

from ..errors import CorruptReportError, InvalidInputError, PvaError

#: Export formats and a one-line description of each.
FORMATS = {
    "parquet": "a directory of Parquet files: every table, and every per-tile matrix",
    "hdf5": "one HDF5 file: per-tile matrices as chunked, compressed datasets (units and names as attributes)",
    "csv": "a directory of CSV files: every table, and every per-tile matrix (one column per tile)",
    "chrome-trace": "Chrome trace event JSON (chrome://tracing, Perfetto UI): a report's execution or a trace file",
    "legacy-json": "legacy Poplar v1 graph and execution profiles in JSON",
    "legacy-cbor": "legacy Poplar v1 graph and execution profiles in CBOR",
}


def export(source: str | os.PathLike[str], fmt: str, output: str | os.PathLike[str], **options) -> list[str]:
    """Export a report (or, for chrome-trace, a trace file) to `output`; return the paths written.

    Every output is written atomically: nothing appears under `output` unless the export completes.
    """
    writer = _writer(fmt)
    with damage_reported(source):
        return writer(os.fspath(source), os.fspath(output), **options)


@contextlib.contextmanager
def damage_reported(source: str | os.PathLike[str]) -> Iterator[None]:
    """Turn the errors a damaged report raises deep inside SQLite, Arrow or numpy into CorruptReportError."""
    name = os.fspath(source)
    try:
        yield
    except PvaError:
        raise
    except (sqlite3.Error, pa.ArrowException, ValueError, TypeError, OverflowError, KeyError, IndexError) as exc:
        raise CorruptReportError(f"{name!r}: cannot be exported, the file is damaged or inconsistent "
                                 f"({type(exc).__name__}: {exc})", name) from None


def _writer(fmt: str) -> Callable[..., list[str]]:
    if fmt == "parquet":
        from .parquet import export_parquet
        return export_parquet
    if fmt == "hdf5":
        from .hdf5 import export_hdf5
        return export_hdf5
    if fmt == "csv":
        from .csv import export_csv
        return export_csv
    if fmt == "chrome-trace":
        from .chrome import export_chrome_trace
        return export_chrome_trace
    if fmt in ("legacy-json", "legacy-cbor"):
        from ..legacy.exporter import export_legacy

        def legacy(source: str, output: str, **options) -> list[str]:
            return export_legacy(source, output, encoding=fmt.split("-")[1], **options)
        return legacy
    raise InvalidInputError(f"unknown export format {fmt!r}; expected one of {', '.join(FORMATS)}")
