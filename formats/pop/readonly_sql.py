"""User SQL on a report, guaranteed read-only: writes, ATTACH and extension loading are refused."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..errors import InvalidInputError, ReadOnlyError
from .sqlite_reader import SqliteFile

_ALLOWED = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_RECURSIVE,
}
_ACTION_NAMES = {
    getattr(sqlite3, "SQLITE_" + name): name.replace("_", " ")
    for name in (
        "CREATE_INDEX",
        "CREATE_TABLE",
        "CREATE_TEMP_INDEX",
        "CREATE_TEMP_TABLE",
        "CREATE_TEMP_TRIGGER",
        "CREATE_TEMP_VIEW",
        "CREATE_TRIGGER",
        "CREATE_VIEW",
        "DELETE",
        "DROP_INDEX",
        "DROP_TABLE",
        "DROP_TEMP_INDEX",
        "DROP_TEMP_TABLE",
        "DROP_TEMP_TRIGGER",
        "DROP_TEMP_VIEW",
        "DROP_TRIGGER",
        "DROP_VIEW",
        "INSERT",
        "TRANSACTION",
        "UPDATE",
        "ATTACH",
        "DETACH",
        "ALTER_TABLE",
        "REINDEX",
        "ANALYZE",
        "CREATE_VTABLE",
        "DROP_VTABLE",
        "SAVEPOINT",
    )
}
_FORBIDDEN_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}
#: PRAGMAs that only read, with the argument they may take (a table, an index, a count).
_QUERY_PRAGMAS = {
    "table_info",
    "table_xinfo",
    "index_list",
    "index_info",
    "index_xinfo",
    "foreign_key_list",
    "integrity_check",
    "quick_check",
    "table_list",
}
#: PRAGMAs that read when given no value (with a value they would set something).
_GETTER_PRAGMAS = {
    "page_size",
    "page_count",
    "user_version",
    "application_id",
    "schema_version",
    "compile_options",
    "database_list",
    "collation_list",
    "function_list",
    "freelist_count",
    "encoding",
}


class QueryResult:
    """Column names and the rows of a read-only query (rows are produced lazily)."""

    def __init__(self, columns: list[str], rows: Iterator[tuple], on_close: Callable[[], None] | None = None) -> None:
        self.columns = columns
        self.rows = rows
        self._on_close = on_close

    def close(self) -> None:
        """Release what the result holds open (the file it reads, when it opened one)."""
        if self._on_close is not None:
            self._on_close()


#: Default limits of `pva sql`: seconds a query may run, and bytes SQLite may allocate for it.
DEFAULT_TIMEOUT = 60.0
DEFAULT_MEMORY_LIMIT = 1 << 30


def run_readonly(
    file: SqliteFile,
    sql: str,
    params: Sequence[Any] = (),
    timeout: float | None = None,
    memory_limit: int | None = None,
) -> QueryResult:
    """Run one SELECT-like statement; anything that would write or reach outside the file is refused.

    `timeout` (seconds) stops a query that runs longer; `memory_limit` (bytes) bounds what SQLite
    allocates for it in this process (a value or string longer than the limit is refused as well).
    Either raises InvalidInputError naming the limit. None means no limit.
    """
    refused: list[str] = []  # what the authorizer denied, the statement's own action first
    noted: list[str] = []  # schema bookkeeping allowed (reported only if SQLite then refuses)

    def authorize(action, arg1, arg2, _db, _trigger):
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _FORBIDDEN_FUNCTIONS:
            refused.insert(0, f"function {arg2}()")
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_PRAGMA:
            name = (arg1 or "").lower()
            if name in _QUERY_PRAGMAS or (name in _GETTER_PRAGMAS and arg2 is None):
                return sqlite3.SQLITE_OK
            refused.insert(0, f"PRAGMA {arg1}" + (f" = {arg2}" if arg2 is not None else ""))
            return sqlite3.SQLITE_DENY
        if action in _ALLOWED:
            return sqlite3.SQLITE_OK
        description = _ACTION_NAMES.get(action, f"operation {action}")
        if (arg1 or "").lower() in ("sqlite_master", "sqlite_temp_master", "sqlite_schema"):
            # Schema bookkeeping is authorised just before the statement's own action (CREATE,
            # DROP, ...): note it and let that action be the one refused. The connection is
            # read-only and query-only as well, so nothing can be written either way.
            noted.append(description)
            return sqlite3.SQLITE_OK
        refused.insert(0, description)
        return sqlite3.SQLITE_DENY

    if not isinstance(sql, str):
        raise TypeError(f"an SQL statement must be a str, not {type(sql).__name__}")
    if not sql.strip():
        raise InvalidInputError(f"{file.path!r}: expected an SQL statement, found an empty string", file.path)
    file.check_open()
    conn = file.conn
    deadline = None if not timeout else time.monotonic() + timeout

    def progress():
        return 1 if deadline is not None and time.monotonic() > deadline else 0

    previous_length = conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
    previous_heap = None
    if memory_limit:
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, int(min(previous_length, max(1, memory_limit // 2))))
        (previous_heap,) = conn.execute("PRAGMA hard_heap_limit").fetchone()
        conn.execute(f"PRAGMA hard_heap_limit = {int(memory_limit)}")
    conn.set_authorizer(authorize)
    if deadline is not None:
        conn.set_progress_handler(progress, 10000)

    def failure(exc: Exception) -> Exception:
        if refused or (noted and "not authorized" in str(exc)):
            return ReadOnlyError(
                f"{file.path!r}: refused {(refused or noted)[0]}: pva sql is read-only (SELECT, WITH and read-only PRAGMAs "
                f"only; no writes, ATTACH or extension loading)",
                file.path,
            )
        if deadline is not None and "interrupted" in str(exc):
            return InvalidInputError(
                f"{file.path!r}: query stopped after {timeout:g} s (its time limit; "
                f"--timeout SECONDS raises it, 0 removes it)",
                file.path,
            )
        if memory_limit and (isinstance(exc, MemoryError) or "too big" in str(exc) or "out of memory" in str(exc)):
            return InvalidInputError(
                f"{file.path!r}: query stopped: it needed more than {memory_limit / 2**20:,.0f} MB "
                f"(its memory limit; --memory-limit MB raises it, 0 removes it)",
                file.path,
            )
        if isinstance(exc, sqlite3.Warning):
            return InvalidInputError(f"{file.path!r}: expected one SQL statement ({exc})", file.path)
        return InvalidInputError(f"{file.path!r}: SQL error: {exc}", file.path)

    def finish() -> None:
        conn.set_authorizer(None)
        conn.set_progress_handler(None, 0)
        if memory_limit:
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, previous_length)
            conn.execute(f"PRAGMA hard_heap_limit = {int(previous_heap or 0)}")

    try:
        cursor = conn.execute(sql, params)
    except (sqlite3.DatabaseError, sqlite3.Warning, MemoryError) as exc:
        finish()
        raise failure(exc) from None
    # the authorizer stays until the last row: a table-valued PRAGMA (pragma_hard_heap_limit) is
    # prepared only when a later row reaches it
    columns = [d[0] for d in cursor.description or ()]

    def rows() -> Iterator[tuple]:
        try:
            while True:
                try:
                    batch = cursor.fetchmany(1000)
                except (sqlite3.DatabaseError, sqlite3.Warning, MemoryError) as exc:
                    raise failure(exc) from None
                if not batch:
                    return
                yield from batch
        finally:
            finish()

    return QueryResult(columns, rows())
