"""The report: openReport, versions, instrumentation settings (libpva Report)."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from formats.debug_info import check_debug_pair
from formats.detect import check_regular_file
from formats.profile_reader import ProfileReader

from ._base import PvaEnum, set_list_print_length
from .compilation import CompilationReport


__all__ = [
    "EngineOption",
    "InstrumentationSettings",
    "PoplarVersion",
    "ProfileReportVersion",
    "Report",
    "openReport",
]

class EngineOption(NamedTuple):
    """An option given to the Poplar engine: a name and its value as text."""

    name: str
    value: str


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

    @property
    def path(self) -> str:
        """Path of the report file (pva addition)."""
        return self._reader.path

    @property
    def debugInfoPath(self) -> str | None:
        """Path of the debug information file given to openReport, or None (pva addition)."""
        return self._debug_path

    @functools.cached_property
    def compilation(self) -> CompilationReport:
        """Information known at the end of graph compilation."""
        return CompilationReport(self._reader, self)

    @functools.cached_property
    def execution(self):
        """Information collected while the program ran."""
        from .execution import ExecutionReport

        return ExecutionReport(self._reader, self)

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
        """
        if arrow:
            return self._reader.sql_arrow(query, params, timeout)
        return list(self._reader.sql(query, params, timeout).rows)

    def sql_stream(self, query: str, params: Sequence[Any] = (), *, timeout: float | None = None):
        """One read-only SQL statement as a result with `.columns` and lazily read `.rows` (pva addition)."""
        return self._reader.sql(query, params, timeout)

    def close(self) -> None:
        """Close the report file (pva addition); objects read from it stop working."""
        self._reader.close()

    def __enter__(self) -> "Report":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        target = self._reader.target
        major, minor = self._reader.version
        return (
            f"<Report {os.path.basename(self.path)!r} format {major}.{minor}, Poplar "
            f"{self.poplarVersion.string or 'unknown'}, {target['num_tiles']:,} tiles>"
        )


def openReport(profileFilename: str | os.PathLike[str], debugInfoFilename: str | os.PathLike[str] | None = None) -> Report:
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
