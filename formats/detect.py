"""Sniffing: what kind of file is at a path, from its first bytes, without trusting it."""

from __future__ import annotations

import enum
import os
import stat
import struct

from .errors import NotAFileError, ReportNotFoundError, ReportPermissionError
from .schema import PROFILE_APPLICATION_ID, TRACE_APPLICATION_ID

SQLITE_MAGIC = b"SQLite format 3\x00"
ARROW_MAGIC = b"ARROW1"


class FileKind(enum.Enum):
    """Kinds of file pva recognises."""

    PROFILE = "a pva report (profile.pop)"
    TRACE = "a pva trace file"
    SQLITE = "a SQLite database"
    JSON = "a JSON document"
    CBOR = "a CBOR document"
    ARROW = "an Arrow IPC file"
    TEXT = "a text file"
    EMPTY = "an empty file"
    BINARY = "binary data of unknown kind"


def check_regular_file(path: str | os.PathLike[str], what: str = "report") -> os.stat_result:
    """Stat `path`, raising the matching PvaError unless it is a readable regular file."""
    name = os.fspath(path)
    try:
        info = os.stat(name)
    except FileNotFoundError:
        raise ReportNotFoundError(f"{name!r}: no such file; expected a {what}", name) from None
    except PermissionError:
        raise ReportPermissionError(f"{name!r}: permission denied; expected a readable {what}", name) from None
    except OSError as exc:
        raise ReportNotFoundError(f"{name!r}: cannot be read ({exc.strerror}); expected a {what}", name) from None
    if stat.S_ISDIR(info.st_mode):
        raise NotAFileError(f"{name!r}: is a directory; expected a {what} file", name)
    if not stat.S_ISREG(info.st_mode):
        raise NotAFileError(f"{name!r}: is not a regular file; expected a {what} file", name)
    if not os.access(name, os.R_OK):
        raise ReportPermissionError(f"{name!r}: permission denied; expected a readable {what}", name)
    return info


def read_head(path: str | os.PathLike[str], size: int = 4096) -> bytes:
    """The first `size` bytes of a file."""
    name = os.fspath(path)
    try:
        with open(name, "rb") as handle:
            return handle.read(size)
    except PermissionError:
        raise ReportPermissionError(f"{name!r}: permission denied", name) from None


def kind_of_bytes(head: bytes) -> FileKind:
    """The kind of file that starts with `head`."""
    if not head:
        return FileKind.EMPTY
    if head.startswith(SQLITE_MAGIC):
        if len(head) >= 72:
            (app_id,) = struct.unpack(">I", head[68:72])
            if app_id == PROFILE_APPLICATION_ID:
                return FileKind.PROFILE
            if app_id == TRACE_APPLICATION_ID:
                return FileKind.TRACE
        return FileKind.SQLITE
    if head.startswith(ARROW_MAGIC):
        return FileKind.ARROW
    stripped = head.lstrip(b" \t\r\n\xef\xbb\xbf")
    if stripped[:1] in (b"{", b"["):
        return FileKind.JSON
    if head[:3] == b"\xd9\xd9\xf7" or (head[0] >> 5) == 5:
        return FileKind.CBOR
    if _looks_like_text(head):
        return FileKind.TEXT
    return FileKind.BINARY


def _looks_like_text(head: bytes) -> bool:
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut at the end of the sample is still text.
        if exc.start < len(head) - 4:
            return False
        text = head[: exc.start].decode("utf-8")
    printable = sum(ch.isprintable() or ch in "\t\r\n\f" for ch in text)
    return printable >= 0.95 * max(1, len(text))


def sniff(path: str | os.PathLike[str]) -> FileKind:
    """The kind of the file at `path` (which must be a readable regular file)."""
    check_regular_file(path, "file")
    return kind_of_bytes(read_head(path, 4096))


def describe_bytes(head: bytes) -> str:
    """A short description of a file's start for error messages."""
    kind = kind_of_bytes(head)
    if kind in (FileKind.TEXT, FileKind.JSON):
        first = head[:40].decode("utf-8", "replace").splitlines()[0] if head.strip() else ""
        return f"{kind.value} starting with {first!r}"
    if kind is FileKind.BINARY:
        return f"{kind.value} (first bytes {head[:8].hex(' ')})"
    return kind.value
