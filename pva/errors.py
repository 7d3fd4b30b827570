"""The pva exception hierarchy (defined in formats, where files are read)."""

from formats.errors import (
    ClosedReportError,
    CorruptReportError,
    InconsistentReportError,
    InvalidInputError,
    NotAFileError,
    NotAReportError,
    PvaError,
    ReadOnlyError,
    ReportNotFoundError,
    ReportPermissionError,
    UnsupportedVersionError,
)

__all__ = [
    "PvaError",
    "ReportNotFoundError",
    "NotAFileError",
    "ReportPermissionError",
    "NotAReportError",
    "UnsupportedVersionError",
    "CorruptReportError",
    "InconsistentReportError",
    "InvalidInputError",
    "ReadOnlyError",
    "ClosedReportError",
]
