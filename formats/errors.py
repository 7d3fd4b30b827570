"""The exceptions of pva and formats; every one is a PvaError and a matching built-in."""

from __future__ import annotations

import os


class PvaError(Exception):
    """Base class of every error pva raises about a file or its contents."""

    def __init__(self, message: str, path: str | os.PathLike[str] | None = None) -> None:
        self.path = None if path is None else os.fspath(path)
        super().__init__(message)


class ReportNotFoundError(PvaError, FileNotFoundError):
    """The path does not exist."""


class NotAFileError(PvaError, IsADirectoryError):
    """The path is a directory or another non-regular file."""


class ReportPermissionError(PvaError, PermissionError):
    """The file exists but cannot be read."""


class NotAReportError(PvaError, ValueError):
    """The file is readable but is not a report of the expected kind."""


class UnsupportedVersionError(PvaError, ValueError):
    """The file is a report, but of a major format version this reader does not know."""


class CorruptReportError(PvaError, OSError):
    """The file is a report but its contents are damaged or inconsistent."""


class InconsistentReportError(CorruptReportError):
    """The tables of a report disagree with each other (for example on sizes)."""


class InvalidInputError(PvaError, ValueError):
    """Input to a converter or a writer is malformed; the message gives its location."""


class OutputError(PvaError, OSError):
    """An output could not be written (no space left, a read-only file system, a refused target)."""


class ReadOnlyError(PvaError, PermissionError):
    """An attempt was made to modify a report through a read-only interface."""


class ClosedReportError(PvaError, ValueError):
    """A report (or trace) was used after it was closed, directly or through an object read from it."""


def describe_path(path: str | os.PathLike[str]) -> str:
    """The path quoted for messages."""
    return repr(os.fspath(path))
