"""Exporters of reports (and trace files) to open formats: Parquet, HDF5, CSV, Chrome trace, legacy JSON/CBOR.

`EXPORTERS` is the one registry of export formats: the command line's ``--format`` choices, the
tests and the documentation read it. Each exporter is a module of this package, or of its
family's package (Chrome traces: formats.chrome.export).

>>> from formats.exporters import export                                  # doctest: +SKIP
>>> export("profile.pop", "parquet", "profile-parquet")                   # doctest: +SKIP
['profile-parquet']
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
from collections.abc import Callable

from ..errors import InvalidInputError


@dataclasses.dataclass(frozen=True)
class Exporter:
    """One export format: its description, where its writer lives, and what it writes."""

    description: str
    module: str  # the writer's module, by its full name
    function: str
    writes: str  # "directory", "file", or "file or directory"
    streams: bool = False  # can be written to a FIFO or /dev/stdout
    options: tuple[tuple[str, object], ...] = ()

    def writer(self) -> Callable[..., list[str]]:
        function = getattr(importlib.import_module(self.module), self.function)
        return functools.partial(function, **dict(self.options)) if self.options else function


#: Every export format, by the name ``pva export --format`` takes.
EXPORTERS: dict[str, Exporter] = {
    "parquet": Exporter(
        "a directory of Parquet files: every table, and every per-tile matrix",
        "formats.exporters.parquet",
        "export_parquet",
        "directory",
    ),
    "hdf5": Exporter(
        "one HDF5 file: per-tile matrices as chunked, compressed datasets (units and names as attributes)",
        "formats.exporters.hdf5",
        "export_hdf5",
        "file",
    ),
    "csv": Exporter(
        "a directory of CSV files: every table, and every per-tile matrix (one column per tile)",
        "formats.exporters.csv",
        "export_csv",
        "directory",
    ),
    "chrome-trace": Exporter(
        "Chrome trace event JSON (chrome://tracing, Perfetto UI): a report's execution or a trace file",
        "formats.chrome.export",
        "export_chrome_trace",
        "file",
        streams=True,
    ),
    "legacy-json": Exporter(
        "legacy Poplar v1 graph and execution profiles in JSON",
        "formats.exporters.legacy",
        "export_legacy",
        "file or directory",
        streams=True,
        options=(("encoding", "json"),),
    ),
    "legacy-cbor": Exporter(
        "legacy Poplar v1 graph and execution profiles in CBOR",
        "formats.exporters.legacy",
        "export_legacy",
        "file or directory",
        streams=True,
        options=(("encoding", "cbor"),),
    ),
}
#: Export formats and a one-line description of each.
FORMATS = {name: exporter.description for name, exporter in EXPORTERS.items()}


def export(source: str | os.PathLike[str], fmt: str, output: str | os.PathLike[str], **options) -> list[str]:
    """Export a report (or, for chrome-trace, a trace file) to `output`; return the paths written.

    Every output is written atomically: nothing appears under `output` unless the export completes.
    """
    exporter = EXPORTERS.get(fmt)
    if exporter is None:
        raise InvalidInputError(f"unknown export format {fmt!r}; expected one of {', '.join(EXPORTERS)}")
    return exporter.writer()(os.fspath(source), os.fspath(output), **options)
