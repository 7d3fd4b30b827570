"""The report: openReport, versions, instrumentation settings (libpva Report)."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from typing import Any

from formats.debug.debug_cbor import check_debug_pair
from formats.detect import check_regular_file
from formats.pop.reader import ProfileReader

from .compilation import CompilationReport
from .lists_and_enums import EngineOption, PvaEnum, refuse_pickle, set_list_print_length

__all__ = [
    "EngineOption",
    "InstrumentationSettings",
    "PoplarVersion",
    "ProfileReportVersion",
    "Report",
    "openReport",
]


_POPLAR_VERSION = re.compile(r"^\s*(\d+)\.(\d+)\.(\d+)\S*\s*(?:\((\w*)\))?")


class PoplarVersion:
    """The version of Poplar that produced the report, e.g. ``3.1.0 (a027fa0bd5)``."""

    __slots__ = ("string", "major", "minor", "point", "packageHash")

    def __init__(self, text: str) -> None:
        self.string = text
        match = _POPLAR_VERSION.match(text or "")
        if match:
            self.major, self.minor, self.point = (int(match.group(i)) for i in (1, 2, 3))
            self.packageHash = match.group(4) or ""
        else:
            self.major = self.minor = self.point = 0
            self.packageHash = ""

    majorVer = property(lambda self: self.major, doc="Major version (the C++ spelling of major).")
    minorVer = property(lambda self: self.minor, doc="Minor version (the C++ spelling of minor).")
    pointVer = property(lambda self: self.point, doc="Point version (the C++ spelling of point).")

    def __str__(self) -> str:
        return self.string

    def __repr__(self) -> str:
        return f"<PoplarVersion {self.string!r}>"


class ProfileReportVersion:
    """The version of the report file format."""

    __slots__ = ("major", "minor", "point", "isUnstableFormat")

    def __init__(self, major: int, minor: int, point: int = 0, unstable: bool = False) -> None:
        self.major = major
        self.minor = minor
        self.point = point
        self.isUnstableFormat = unstable

    majorVer = property(lambda self: self.major, doc="Major version (the C++ spelling of major).")
    minorVer = property(lambda self: self.minor, doc="Minor version (the C++ spelling of minor).")
    pointVer = property(lambda self: self.point, doc="Point version (the C++ spelling of point).")

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.point}"

    def __repr__(self) -> str:
        return f"<ProfileReportVersion {self}{' (unstable)' if self.isUnstableFormat else ''}>"


class InstrumentationSettings:
    """How compute and external exchanges were instrumented when the graph was compiled."""

    class ComputeInstrumentationLevel(PvaEnum):
        """The type of compute instrumentation."""

        Off = 0
        Vertex = 1
        Tile = 2
        Ipu = 3
        Device = 4
        Unknown = 5

    class ExternalExchangeInstrumentationLevel(PvaEnum):
        """The type of external exchange instrumentation."""

        Off = 0
        Tile = 1
        Unknown = 2

    __slots__ = ("compute", "externalExchange")

    def __init__(self, compute: str, external_exchange: str) -> None:
        self.compute = InstrumentationSettings.ComputeInstrumentationLevel.parse(compute)
        self.externalExchange = InstrumentationSettings.ExternalExchangeInstrumentationLevel.parse(external_exchange)

    def __str__(self) -> str:
        return f"compute: {self.compute.name}, external exchange: {self.externalExchange.name}"

    def __repr__(self) -> str:
        return f"<InstrumentationSettings compute={self.compute.name} externalExchange={self.externalExchange.name}>"


class Report:
    """A profile report opened with `openReport`: compilation and execution information.

    The file is opened read-only and is never modified. Objects are read lazily.
    """

    def __init__(self, reader: ProfileReader, debug_path: str | None = None) -> None:
        self._reader = reader
        self._debug_path = debug_path

    __reduce_ex__ = refuse_pickle

    @property
    def closed(self) -> bool:
        """Whether `close` was called (pva addition)."""
        return self._reader.file.closed

    @property
    def path(self) -> str:
        """Path of the report file (pva addition)."""
        return self._reader.path

    @property
    def debugInfoPath(self) -> str | None:
        """Path of the debug information file given to openReport, or None (pva addition)."""
        return self._debug_path

    @property
    def compilation(self) -> CompilationReport:
        """Information known at the end of graph compilation."""
        found = self.__dict__.get("_compilation")
        if found is None:
            self._reader.file.check_open()
            found = self.__dict__["_compilation"] = CompilationReport(self._reader, self)
        return found

    @property
    def execution(self):
        """Information collected while the program ran."""
        found = self.__dict__.get("_execution")
        if found is None:
            from .execution import ExecutionReport

            self._reader.file.check_open()
            found = self.__dict__["_execution"] = ExecutionReport(self._reader, self)
        return found

    @functools.cached_property
    def poplarVersion(self) -> PoplarVersion:
        """The Poplar version that produced the report."""
        return PoplarVersion(self._reader.metadata.get("poplar_version", ""))

    @functools.cached_property
    def version(self) -> ProfileReportVersion:
        """The format version of the report file."""
        major, minor = self._reader.version
        return ProfileReportVersion(major, minor, 0, self._reader.metadata.get("report_unstable", "0") == "1")

    @functools.cached_property
    def instrumentationSettings(self) -> InstrumentationSettings:
        """How the program was instrumented."""
        meta = self._reader.metadata
        return InstrumentationSettings(
            meta.get("instrumentation_compute", "Unknown"), meta.get("instrumentation_external_exchange", "Unknown")
        )

    @staticmethod
    def listPrintLength(newLength: int) -> None:
        """Set how many items the repr of a pva list shows."""
        set_list_print_length(newLength)

    def sql(self, query: str, params: Sequence[Any] = (), *, arrow: bool = False, timeout: float | None = None):
        """Rows (tuples) of one read-only SQL statement on the report, or an Arrow table with arrow=True.

        A pva addition. Writes, ATTACH and extension loading are refused; the file never changes.
        The rows are a list (a `pva.results.Rows`) with `.columns`, ``to_arrow()``, ``to_pandas()``,
        ``to_polars()`` and the Arrow stream interface that pyarrow, polars and DuckDB read.
        """
        from .results import Rows, rows_to_arrow

        result = self._reader.sql(query, params, timeout)
        rows = list(result.rows)
        if arrow:
            return rows_to_arrow(result.columns, rows, self.path)
        return Rows(rows, result.columns, self.path)

    def sql_stream(self, query: str, params: Sequence[Any] = (), *, timeout: float | None = None):
        """One read-only SQL statement whose rows are read as they are asked for (pva addition).

        A `pva.results.RowStream`: `.columns`, lazily read `.rows` (or iterate it), Arrow batches
        through ``batches()``, ``to_arrow()``, ``to_pandas()``, ``to_polars()`` and the Arrow stream
        interface; it is read once.
        """
        from .results import RowStream

        return RowStream(self._reader.sql(query, params, timeout), self.path)

    def duckdb(self, tables: Sequence[str] | None = None):
        """A DuckDB connection holding the report's tables (or the named ones) as Arrow tables (pva addition).

        Needs DuckDB (pip install 'pva[query]'). The connection is in memory with file access
        disabled, so nothing a query does reaches the report file. Each table is read whole when
        the connection is made: on a large report, name the tables a query needs.
        """
        from .results import report_duckdb

        return report_duckdb(self._reader, tables)

    def close(self) -> None:
        """Close the report file (pva addition).

        What was read stays readable; anything that would read the file (from the report or from
        an object read from it) raises ClosedReportError.
        """
        self._reader.close()

    def __enter__(self) -> Report:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        if self.closed:
            return f"<Report {os.path.basename(self.path)!r} (closed)>"
        target = self._reader.target
        major, minor = self._reader.version
        return (
            f"<Report {os.path.basename(self.path)!r} format {major}.{minor}, Poplar "
            f"{self.poplarVersion.string or 'unknown'}, {target['num_tiles']:,} tiles>"
        )

    def _repr_html_(self) -> str:
        from .notebook import report_html  # how a notebook shows the report

        return report_html(self)

    # -- analyses and facts of the file: pva additions, PEP 8 names ----------------------------
    # Each analysis module is imported when first used, so that importing pva stays cheap.

    @property
    def metadata(self) -> dict[str, str]:
        """The report's metadata table: producer, producer_version, created, poplar_version, ... (pva addition)."""
        return dict(self._reader.metadata)

    @property
    def not_recorded(self) -> frozenset[str]:
        """Figures the converted source did not record, as "table.column" names (pva addition).

        They read 0 in the tables; pva's outputs print them as "not recorded" (null in JSON).
        """
        return self._reader.not_recorded()

    @property
    def memory_totals(self) -> dict | None:
        """Device-wide memory figures of a report converted from a text summary, which has no per-tile
        rows (pva addition): total_including_gaps, total, non_interleaved, interleaved, overflowed,
        by_category, max_tile_including_gaps, max_tile. None for other reports."""
        return self._reader.summary_memory_totals()

    def row_count(self, table: str) -> int:
        """Rows of one table of the report (pva addition); an unknown table raises InvalidInputError."""
        return self._reader.row_count(table)

    def table_counts(self) -> dict[str, int]:
        """Rows of every table of the report, counted with sqlite-utils (pva addition)."""
        return self._reader.table_counts()

    def table_info(self) -> list[tuple[str, str, int, str]]:
        """(kind, name, rows, description) of every table, then of every per-tile matrix (pva addition)."""
        from formats.pop.schema import profile_matrices, profile_schema

        counts = self._reader.table_counts()
        rows = [
            ("table", name, counts[name], spec.description)
            for name, spec in profile_schema().tables.items()
            if name in counts
        ]
        declared = profile_matrices()["matrices"]
        for name, num_rows, num_cols, chunks, size in self._reader.matrix_storage():
            spec = declared.get(name, {})
            description = (
                f"{num_rows:,} x {num_cols:,} {spec.get('unit', '')}, {chunks} Arrow chunk(s), "
                f"{size:,} bytes stored. {spec.get('description', '')}"
            )
            rows.append(("matrix", name, num_rows, description))
        return rows

    def column_info(self, table: str) -> list[tuple[str, str, str]]:
        """(column, type, description) of the columns of one table (pva addition)."""
        from formats.pop.schema import profile_schema

        columns = self._reader.table_columns(table)
        spec = profile_schema().tables.get(table)
        described = {c.name: c for c in spec.columns} if spec else {}
        return [
            (name, described[name].type, described[name].description)
            if name in described
            else (name, "", "(not in this pva version's schema)")
            for name in columns
        ]

    def summary(self) -> dict:
        """The figures of the profile summary: target, graph, memory, liveness, execution (pva addition).

        printProfileSummary prints them as text.
        """
        from .analysis.summary import summary_data

        return summary_data(self._reader)

    def compare(self, other: Report) -> list:
        """Differences from this report (A) to `other` (B): a list of Difference, as pva.compare(self, other)."""
        from .analysis.compare import compare

        return compare(self, other)

    def operator_times(self, mode: str = "total", *, debug: bool = True) -> list:
        """Share of execution time per operator type (mode "total") or per operator ("each"): OperatorTime rows.

        Types are the op_type of the programs' debug contexts when the report was opened with debug
        information and `debug` is true, else vertex types; exchange and sync steps count as their kind.
        """
        from .analysis.optime import op_types_from_debug, operator_times

        if mode not in ("total", "each"):
            raise ValueError(f"mode must be 'total' or 'each', got {mode!r}")
        types = op_types_from_debug(self._reader, self._debug_path) if debug and self._debug_path else None
        return operator_times(self._reader, mode, types)

    def estimate(self, batch_size: int = 1):
        """Compile-time throughput estimate in the terms of Cerebras' compile_report.txt (an Estimate)."""
        from .analysis.estimate import estimate

        return estimate(self._reader, batch_size=batch_size)

    def write_plot(
        self,
        kind: str,
        output: str | os.PathLike[str],
        *,
        width: float = 12.0,
        height: float | None = None,
        dpi: float = 100,
        title: str | None = None,
        including_gaps: bool = False,
        not_always_live_only: bool = False,
    ) -> int:
        """Draw one chart (see pva.PLOT_KINDS) into an image file (.png, .svg, .pdf); returns its size in bytes.

        Options are those of pva.write_plot: title, including_gaps (memory), not_always_live_only (liveness).
        """
        from .analysis.plots import write_plot

        return write_plot(
            self,
            kind,
            output,
            width=width,
            height=height,
            dpi=dpi,
            title=title,
            including_gaps=including_gaps,
            not_always_live_only=not_always_live_only,
        )

    def write_html(self, output: str | os.PathLike[str], *, compare_with: Report | None = None, **options) -> int:
        """Write the self-contained HTML report (beside `compare_with`, if given) to `output`; returns its size.

        Options are those of pva.write_html: limits (a pva.ChartLimits), threshold, title, compress.
        """
        from .analysis.html import write_html

        return write_html([self] if compare_with is None else [self, compare_with], output, **options)


def openReport(
    profileFilename: str | os.PathLike[str], debugInfoFilename: str | os.PathLike[str] | None = None
) -> Report:
    """Open a profile report (profile.pop) and, optionally, its debug information (debug.cbor).

    Raises a subclass of pva.PvaError that names the path and the problem when the file is
    missing, not a report, of an unsupported version, or damaged. The debug information is
    read when first used (debug contexts, OperationAnalysis); a damaged debug.cbor then raises
    a PvaError naming it.
    """
    debug_path = None
    if debugInfoFilename is not None:
        debug_path = os.fspath(debugInfoFilename)
        check_regular_file(debug_path, "debug information file (debug.cbor)")
    reader = ProfileReader(profileFilename)
    if debug_path is not None:
        try:
            check_debug_pair(reader, debug_path)
        except BaseException:
            reader.close()
            raise
    return Report(reader, debug_path)
