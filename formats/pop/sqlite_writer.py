"""A streaming, atomic writer of schema-checked SQLite files (profile.pop and trace files)."""

from __future__ import annotations

import contextlib
import datetime
import itertools
import operator
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..atomic import AtomicOutput, output_error
from ..errors import InvalidInputError
from .schema import Schema, split_ddl, user_version

#: Rows bound per INSERT statement by `SqliteFileWriter.insert_flat` (fewer if SQLite's limit on
#: parameters is lower): several times faster than a statement per row.
_ROWS_PER_STATEMENT = 128


class SqliteFileWriter:
    """Create a SQLite file from a normative schema, insert rows in bulk, commit atomically.

    Rows go to a temporary file beside the target; `close` builds the indexes, makes the file
    durable and renames it to the target. `abort`, an exception inside a ``with`` block, or a
    killed process leaves the target as it was.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        schema: Schema,
        application_id: int,
        version: tuple[int, int],
        producer: str,
        producer_version: str = "",
    ) -> None:
        self.path = os.fspath(path)
        self.schema = schema
        self.version = version
        try:
            self._out = AtomicOutput(self.path)
        except (FileNotFoundError, PermissionError) as exc:
            raise InvalidInputError(f"cannot write {self.path!r}: {exc}", self.path) from None
        self._closed = False
        try:
            self._conn = sqlite3.connect(self._out.path, isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode=OFF")
            self._conn.execute("PRAGMA synchronous=OFF")
            self._conn.execute(f"PRAGMA application_id={application_id}")
            self._conn.execute(f"PRAGMA user_version={user_version(*version)}")
            tables, self._index_ddl = split_ddl(schema.ddl)
            self._conn.executescript(tables)
            self._conn.execute("BEGIN")
        except BaseException as exc:
            if hasattr(self, "_conn"):
                self._conn.close()
            self._out.abort()
            translated = output_error(exc, self.path, only_machine=True)
            if translated is not None:
                raise translated from None
            raise
        self._metadata: dict[str, str] = {
            "format_version": f"{version[0]}.{version[1]}",
            "producer": producer,
            "producer_version": producer_version,
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
        self._sql_cache: dict[tuple[str, tuple[str, ...]], str] = {}

    # -- rows -------------------------------------------------------------------------------

    def set_metadata(self, **values: Any) -> None:
        """Set metadata facts (stored as text); later values replace earlier ones."""
        for key, value in values.items():
            self._metadata[key] = "" if value is None else str(value)

    def _insert_sql(self, table: str, columns: Sequence[str]) -> str:
        key = (table, tuple(columns))
        sql = self._sql_cache.get(key)
        if sql is None:
            marks = ", ".join("?" * len(columns))
            sql = self._sql_cache[key] = f"{self._insert_head(table, columns)} ({marks})"
        return sql

    def _insert_head(self, table: str, columns: Sequence[str]) -> str:
        """``INSERT INTO table (columns) VALUES``, the table and columns checked against the schema."""
        spec = self.schema.tables.get(table)
        if spec is None:
            raise InvalidInputError(f"{self.path!r}: no table {table!r} in the schema")
        unknown = [c for c in columns if c not in spec.column_names]
        if unknown:
            raise InvalidInputError(
                f"{self.path!r}: table {table!r} has no column(s) {', '.join(unknown)}; "
                f"expected some of {', '.join(spec.column_names)}"
            )
        quoted = ", ".join(f'"{c}"' for c in columns)
        return f'INSERT INTO "{table}" ({quoted}) VALUES'

    def insert(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """Insert many rows, each a sequence of values for `columns`, in one statement."""
        self.insert_with(self._insert_sql(table, columns), table, rows)

    def insert_rows(self, table: str, rows: Iterable[Mapping[str, Any]]) -> None:
        """Insert many rows, each a mapping of column name to value; every row names the columns the
        first does (columns named by none take the schema's defaults)."""
        rows = iter(rows)
        first = next(rows, None)
        if first is None:
            return
        columns = tuple(first)
        values = operator.itemgetter(*columns)
        single = len(columns) == 1
        chained = itertools.chain((first,), rows)
        self.insert(table, columns, (((values(r),) if single else values(r)) for r in chained))

    def insert_columns(self, table: str, columns: Mapping[str, Any], batch: int = 200_000) -> None:
        """Insert rows given column by column: a mapping of column name to its values (lists or numpy
        arrays, all of one length); columns left out take the schema's defaults."""
        names = tuple(columns)
        lengths = {len(values) for values in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns of {table!r} of different lengths: {sorted(lengths)}")
        count = lengths.pop() if lengths else 0
        sql = self._insert_sql(table, names)
        for lo in range(0, count, batch):
            part = [_as_list(values[lo : lo + batch]) for values in columns.values()]
            self.insert_with(sql, table, zip(*part))

    def insert_with(self, sql: str, table: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run `sql`, an INSERT of ours into `table` (literal values and parameters), for many rows."""
        self._check_open()
        try:
            self._conn.executemany(sql, rows)
        except (sqlite3.IntegrityError, sqlite3.InterfaceError, OverflowError) as exc:
            raise InvalidInputError(f"{self.path!r}: bad row for table {table!r}: {exc}") from None
        except (sqlite3.Error, OSError) as exc:
            self._machine_failure(exc)
            raise

    def insert_flat(self, table: str, columns: Sequence[str], values: list[Any], row: str = "") -> None:
        """Insert rows given as one flat list of values, many rows a statement.

        `row` is the SQL of one row's values for `columns`, literals or ``?`` parameters (default:
        a parameter per column); a row takes as many values as `row` has parameters."""
        self._check_open()  # before the connection is asked for its limit
        row = row or "(" + ", ".join("?" * len(columns)) + ")"
        width = row.count("?")
        if not width:
            raise ValueError(f"a row of {table!r} without parameters: {row}")
        if len(values) % width:
            raise ValueError(f"{len(values)} values do not make rows of {width}")
        head = self._insert_head(table, columns) + " "
        per = max(1, min(_ROWS_PER_STATEMENT, self._conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width))
        span = per * width
        whole = len(values) // span * span
        self.insert_with(head + ", ".join([row] * per), table, (values[at : at + span] for at in range(0, whole, span)))
        if whole < len(values):
            self.insert_with(head + ", ".join([row] * ((len(values) - whole) // width)), table, [values[whole:]])

    def insert_one(self, table: str, **values: Any) -> None:
        """Insert one row given as column=value keywords."""
        self.insert(table, list(values), [tuple(values.values())])

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        """Run a statement on the file being written (for producers that read back)."""
        self._check_open()
        try:
            return self._conn.execute(sql, params)
        except (sqlite3.Error, OSError) as exc:
            self._machine_failure(exc)
            raise

    def _machine_failure(self, exc: BaseException) -> None:
        """Abort and raise an OutputError when the machine is at fault (a full disk); else return."""
        translated = output_error(exc, self.path, only_machine=True)
        if translated is not None:
            self.abort()
            raise translated from None

    # -- lifecycle --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise InvalidInputError(f"{self.path!r}: the writer is closed")

    def _finish(self) -> None:
        """Hook for subclasses: last rows before the indexes are built."""

    @property
    def output(self) -> AtomicOutput:
        """The temporary file and its target (for committing several files together)."""
        return self._out

    def close(self, *, commit: bool = True) -> None:
        """Finish the file and move it to its target name.

        With ``commit=False`` the finished file stays under its temporary name until `commit`
        (or `formats.atomic.commit_together` on `output`); `abort` still discards it.
        """
        if self._closed:
            if commit:
                self.commit()
            return
        try:
            self._finish()
            self.insert("metadata", ("key", "value"), sorted(self._metadata.items()))
            self._conn.execute("COMMIT")
            self._conn.executescript(f"BEGIN;\n{self._index_ddl}\nCOMMIT;")
            self._conn.execute("PRAGMA analysis_limit=1000")
            self._conn.execute("ANALYZE")
            self._conn.close()
            self._closed = True
            if commit:
                self._out.commit()
        except (sqlite3.Error, OSError) as exc:
            self._machine_failure(exc)
            self.abort()
            raise
        except BaseException:
            self.abort()
            raise

    def commit(self) -> None:
        """Move a file finished by ``close(commit=False)`` to its target name."""
        if not self._closed:
            raise InvalidInputError(f"{self.path!r}: close the writer before committing it")
        try:
            self._out.commit()
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Discard everything written; the target is left as it was."""
        if not self._out.done:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._closed = True
            self._out.abort()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _as_list(values: Any) -> list:
    """A column's values as Python objects (numpy arrays converted in one call)."""
    tolist = getattr(values, "tolist", None)
    return tolist() if tolist is not None else list(values)
