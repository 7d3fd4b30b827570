"""Read-only, validated access to the SQLite files pva writes (reports and traces)."""

from __future__ import annotations

import os
import pathlib
import re
import sqlite3
import struct
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from ..detect import SQLITE_MAGIC, FileKind, check_regular_file, describe_bytes, kind_of_bytes
from ..errors import (
    ClosedReportError,
    CorruptReportError,
    InconsistentReportError,
    InvalidInputError,
    NotAReportError,
    ReportNotFoundError,
    ReportPermissionError,
    UnsupportedVersionError,
)
from ..protected_files import hold_input, release_input
from .schema import Schema, split_user_version

#: Times a file replaced while it is being opened is opened again before giving up.
_OPEN_ATTEMPTS = 20


def _open_pinned(path: str):
    """The file opened for reading, with the errors of a missing or unreadable file as PvaErrors."""
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise ReportNotFoundError(f"{path!r}: no such file", path) from None
    except PermissionError:
        raise ReportPermissionError(f"{path!r}: permission denied", path) from None


def _same_file(path: str, pinned: os.stat_result) -> bool:
    """Whether `path` still names the file `pinned` describes (held open, so its inode is not reused)."""
    try:
        now = os.stat(path)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (pinned.st_dev, pinned.st_ino)


#: Errors that may mean the bytes of the file are damaged (text that is not UTF-8 included);
#: `is_damage` tells which do.
_DAMAGE = (sqlite3.DatabaseError, UnicodeDecodeError)
#: SQLite's primary result codes for a damaged file: SQLITE_IOERR (a short read of a truncated
#: file), SQLITE_CORRUPT, SQLITE_NOTADB, and SQLITE_TOOBIG (a length no valid file holds).
_DAMAGE_CODES = {10, 11, 18, 26}


def is_damage(exc: BaseException) -> bool:
    """Whether an error raised while reading means the file is damaged, not that the query is wrong."""
    if isinstance(exc, UnicodeDecodeError):
        return True
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.ProgrammingError):
        code = getattr(exc, "sqlite_errorcode", None)
        if "Could not decode to UTF-8" in str(exc) or str(exc) == "integer overflow":
            return True  # text that is not UTF-8 (a damaged page); values too large to add up
        if code is None:
            return "malformed" in str(exc) or "not a database" in str(exc)
        return code & 0xFF in _DAMAGE_CODES
    return False


#: A COLLATE clause of a schema's SQL, and the collations every SQLite has.
_COLLATE = re.compile(r"\bCOLLATE\s+(\"[^\"]*\"|'[^']*'|`[^`]*`|\[[^\]]*\]|\w+)", re.IGNORECASE)
_BUILTIN_COLLATIONS = frozenset({"binary", "nocase", "rtrim"})


class SqliteHeader:
    """The fields of a SQLite file header that identify and size the file."""

    def __init__(self, head: bytes) -> None:
        (raw_page_size,) = struct.unpack(">H", head[16:18])
        self.page_size = 65536 if raw_page_size == 1 else raw_page_size
        (self.change_counter,) = struct.unpack(">I", head[24:28])
        (self.page_count,) = struct.unpack(">I", head[28:32])
        (self.user_version,) = struct.unpack(">I", head[60:64])
        (self.application_id,) = struct.unpack(">I", head[68:72])
        (self.version_valid_for,) = struct.unpack(">I", head[92:96])
        #: Whether the file is in WAL mode (file format read/write versions 2).
        self.wal = head[18] == 2 or head[19] == 2

    @property
    def journal_mode(self) -> str:
        """ "wal" or "rollback" (the journal mode a writer left the file in)."""
        return "wal" if self.wal else "rollback"

    @property
    def expected_size(self) -> int | None:
        """The file size the header declares, when the in-header page count is valid."""
        if self.version_valid_for != self.change_counter or self.page_count == 0:
            return None
        return self.page_size * self.page_count


class SqliteFile:
    """A read-only connection to a pva SQLite file whose kind, version and tables are checked.

    Opening reads the 100-byte header, the metadata table and sqlite_master: its cost does not
    grow with the file. A query error that means the file is damaged (SQLite's corrupt, not-a-database
    and short-read codes, text that is not UTF-8) becomes a CorruptReportError naming the path; any
    other (a query on a column that does not exist, ...) is a bug and propagates as it is.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        what: str,
        application_id: int,
        supported_major: int,
        schema: Schema,
        other_kinds: dict[int, str] | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self.what = what
        self.closed = False
        self._lock = threading.RLock()
        # A writer may replace the file (by rename) while it is being opened: the header and size
        # are read from one open descriptor, and SQLite's connection must then be on that same
        # file; if the name was moved to a newer file in between, open the newer one instead.
        for _attempt in range(_OPEN_ATTEMPTS):
            check_regular_file(self.path, what)
            with _open_pinned(self.path) as handle:
                pinned = os.fstat(handle.fileno())
                self.file_size = pinned.st_size
                head = handle.read(100)
                self.header = self._check_header(head, application_id, supported_major, other_kinds)
                uri = pathlib.Path(os.path.abspath(self.path)).as_uri() + "?mode=ro"
                if self.header.wal:
                    self._check_no_wal()
                    uri += "&immutable=1"  # a reader never writes: no -wal or -shm file beside it
                try:
                    self.conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
                except sqlite3.Error as exc:
                    raise CorruptReportError(f"{self.path!r}: cannot be opened by SQLite ({exc})", self.path) from None
                if _same_file(self.path, pinned):
                    break
                self.conn.close()
        else:
            raise CorruptReportError(
                f"{self.path!r}: was replaced {_OPEN_ATTEMPTS} times while being opened; expected a {self.what} "
                f"that stays put long enough to be opened",
                self.path,
            )
        major, minor = split_user_version(self.header.user_version)
        hold_input(pinned)  # no output of this process replaces a file open for reading
        self._release = weakref.finalize(self, release_input, pinned)
        try:
            self.conn.execute("PRAGMA query_only=1")
            self.conn.execute("PRAGMA mmap_size=0")  # a mapped file that shrinks under the reader is SIGBUS
            self.conn.execute("PRAGMA trusted_schema=0")
            self.conn.execute("PRAGMA cell_size_check=1")
            self.metadata = self._read_metadata()
            self.version = self._check_version(major, minor, supported_major)
            self.tables = self._check_tables(schema)
        except _DAMAGE as exc:
            self.conn.close()
            self._release()
            damage = self.damaged(exc)
            if damage is None:
                raise
            raise damage from None
        except BaseException:
            self.conn.close()
            self._release()
            raise

    # -- opening checks ---------------------------------------------------------------------

    def _check_no_wal(self) -> None:
        """Refuse a file in WAL mode whose -wal file holds changes (reading them would write beside it)."""
        wal = self.path + "-wal"
        try:
            size = os.path.getsize(wal)
        except OSError:
            return
        if size:
            raise InvalidInputError(
                f"{self.path!r}: was left in WAL mode with {size} bytes of changes in {wal!r}; pva reads without "
                f"writing: checkpoint it first (sqlite3 FILE 'PRAGMA wal_checkpoint(TRUNCATE)') or give the "
                f"file as its writer finished it",
                self.path,
            )

    def _check_header(
        self, head: bytes, application_id: int, supported_major: int, other_kinds: dict[int, str] | None
    ) -> SqliteHeader:
        """The header of the file, checked: a SQLite file of the expected kind and version, not truncated."""
        where = f"{self.path!r}"
        if not head:
            raise NotAReportError(f"{where}: is an empty file (0 bytes); expected a {self.what}", self.path)
        if not head.startswith(SQLITE_MAGIC):
            hint = ""
            kind = kind_of_bytes(head)
            if kind in (FileKind.JSON, FileKind.CBOR):
                hint = "; if it is a legacy Poplar profile or a Chrome trace, convert it with `pva convert`"
            raise NotAReportError(
                f"{where}: expected a {self.what} (a SQLite 3 database), found {describe_bytes(head)}{hint}",
                self.path,
            )
        if len(head) < 100:
            raise CorruptReportError(
                f"{where}: truncated: a SQLite file has a 100-byte header, found {len(head)} bytes", self.path
            )
        header = SqliteHeader(head)
        if header.page_size < 512 or header.page_size & (header.page_size - 1):
            raise CorruptReportError(
                f"{where}: expected a page size that is a power of two from 512 to 65536 bytes in the SQLite "
                f"header, found {header.page_size}",
                self.path,
            )
        if header.application_id != application_id:
            other = (other_kinds or {}).get(header.application_id)
            if other:
                raise NotAReportError(f"{where}: expected a {self.what}, found {other}", self.path)
            raise NotAReportError(
                f"{where}: expected a {self.what}, found a SQLite database of another kind "
                f"(application_id 0x{header.application_id:08x}, expected 0x{application_id:08x})",
                self.path,
            )
        major, minor = split_user_version(header.user_version)
        if major > supported_major:
            raise UnsupportedVersionError(
                f"{where}: {self.what} format version {major}.{minor} is newer than this reader supports "
                f"({supported_major}.x); upgrade pva to read it",
                self.path,
            )
        expected = header.expected_size
        if expected is not None and self.file_size < expected:
            raise CorruptReportError(
                f"{where}: truncated: its header declares {header.page_count} pages of {header.page_size} bytes "
                f"({expected} bytes), found {self.file_size} bytes",
                self.path,
            )
        if self.file_size % header.page_size:
            raise CorruptReportError(
                f"{where}: truncated: expected a whole number of {header.page_size}-byte pages, "
                f"found {self.file_size} bytes",
                self.path,
            )
        return header

    def _read_metadata(self) -> dict[str, str]:
        rows = self.query("SELECT type FROM sqlite_master WHERE name = 'metadata'")
        if not rows or rows[0][0] != "table":
            raise CorruptReportError(f"{self.path!r}: expected a metadata table, found none", self.path)
        return {str(k): "" if v is None else str(v) for k, v in self.query("SELECT key, value FROM metadata")}

    def _check_version(self, major: int, minor: int, supported_major: int) -> tuple[int, int]:
        text = self.metadata.get("format_version", "")
        try:
            meta_major, meta_minor = (int(p) for p in text.split("."))
        except ValueError:
            raise CorruptReportError(
                f"{self.path!r}: expected metadata format_version 'major.minor', found {text!r}", self.path
            ) from None
        if meta_major > supported_major:
            raise UnsupportedVersionError(
                f"{self.path!r}: {self.what} format version {text} is newer than this reader supports "
                f"({supported_major}.x); upgrade pva to read it",
                self.path,
            )
        if (meta_major, meta_minor) != (major, minor):
            raise InconsistentReportError(
                f"{self.path!r}: format version {text} in the metadata table disagrees with "
                f"{major}.{minor} in the file header",
                self.path,
            )
        return meta_major, meta_minor

    def _check_collations(self) -> None:
        """Refuse a schema naming a collation SQLite does not have (every query ordering by it would fail)."""
        for name, sql in self.query("SELECT name, sql FROM sqlite_master WHERE sql LIKE '%collate%'"):
            for match in _COLLATE.finditer(sql or ""):
                collation = match.group(1).strip("\"'`[]")
                if collation.lower() not in _BUILTIN_COLLATIONS:
                    raise CorruptReportError(
                        f"{self.path!r}: {name!r} uses collation {collation!r}; expected one of SQLite's "
                        f"(BINARY, NOCASE, RTRIM)",
                        self.path,
                    )

    def _check_tables(self, schema: Schema) -> dict[str, tuple[str, ...]]:
        self._check_collations()
        kinds = dict(self.query("SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view')"))
        tables: dict[str, tuple[str, ...]] = {}
        for name, spec in schema.tables.items():
            kind = kinds.get(name)
            if kind != "table":
                found = "nothing" if kind is None else f"a {kind}"
                raise CorruptReportError(
                    f"{self.path!r}: expected table {name!r} of format {self.version[0]}.{self.version[1]}, "
                    f"found {found}",
                    self.path,
                )
            columns = tuple(row[1] for row in self.query(f'PRAGMA table_info("{name}")'))
            missing = [c for c in spec.column_names if c not in columns]
            if missing:
                raise CorruptReportError(
                    f"{self.path!r}: table {name!r} lacks column(s) {', '.join(missing)}", self.path
                )
            tables[name] = columns
        return tables

    # -- queries ----------------------------------------------------------------------------

    def check_open(self) -> None:
        """Raise ClosedReportError if the file was closed."""
        if self.closed:
            raise ClosedReportError(
                f"{self.path!r}: the {self.what} is closed; objects read from it cannot read more (open it again)",
                self.path,
            )

    def damaged(self, exc: BaseException) -> CorruptReportError | None:
        """The CorruptReportError for an error that means the file is damaged; None for any other (a bug)."""
        if not is_damage(exc):
            return None
        return CorruptReportError(f"{self.path!r}: the {self.what} is damaged ({exc})", self.path)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """All rows of a query."""
        self.check_open()
        try:
            with self._lock:
                return self.conn.execute(sql, params).fetchall()
        except _DAMAGE as exc:
            damage = self.damaged(exc)
            if damage is None:
                raise
            raise damage from None

    def query_one(self, sql: str, params: Sequence[Any] = ()) -> tuple | None:
        """The first row of a query, or None."""
        self.check_open()
        try:
            with self._lock:
                return self.conn.execute(sql, params).fetchone()
        except _DAMAGE as exc:
            damage = self.damaged(exc)
            if damage is None:
                raise
            raise damage from None

    def iterate(self, sql: str, params: Sequence[Any] = (), batch: int = 10_000) -> Iterator[tuple]:
        """Rows of a query, fetched in batches (for results too large to hold at once)."""
        self.check_open()
        try:
            with self._lock:
                cursor = self.conn.execute(sql, params)
            while True:
                with self._lock:
                    self.check_open()
                    rows = cursor.fetchmany(batch)
                if not rows:
                    return
                yield from rows
        except _DAMAGE as exc:
            damage = self.damaged(exc)
            if damage is None:
                raise
            raise damage from None

    def column(self, sql: str, params: Sequence[Any] = ()) -> list:
        """The first column of every row of a query."""
        return [row[0] for row in self.query(sql, params)]

    def close(self) -> None:
        """Close the connection; later queries raise ClosedReportError."""
        with self._lock:
            self._release()
            self.closed = True
            self.conn.close()
