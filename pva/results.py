"""Query results as dataframes: rows with column names that pyarrow, pandas, polars and DuckDB read.

`Report.sql` returns `Rows` (a list of tuples), `Report.sql_stream` a `RowStream`, fleet queries an
`ArrowStream`. Each has ``to_arrow()``, ``to_pandas()`` and ``to_polars()`` (pandas and polars are
optional: ``pip install 'pva[dataframes]'``) and the Arrow PyCapsule stream interface
(``__arrow_c_stream__``): ``pyarrow.table(x)``, ``polars.DataFrame(x)`` and DuckDB read a stream
through it. `Rows` stays a list, which those read as a list of values before they look for the
interface: hand them ``rows.to_arrow()``.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from formats.errors import InvalidInputError, PvaError
from formats.lazy_import import lazy_module
from formats.pop.query.user_sql import BATCH_ROWS, rows_to_arrow, rows_to_batch

if TYPE_CHECKING:
    import pyarrow as pa

    from formats.pop.readonly_sql import QueryResult
else:
    pa = lazy_module("pyarrow")

__all__ = ["BATCH_ROWS", "ArrowStream", "MissingExtraError", "RowStream", "Rows", "rows_to_arrow"]


class MissingExtraError(PvaError, ImportError):
    """An optional library is not installed; the message names the pva extra that installs it."""


def require(module: str, extra: str, needed_by: str) -> Any:
    """Import an optional library, or raise MissingExtraError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(
            f"{needed_by} needs {module}, which is not installed: pip install 'pva[{extra}]'"
        ) from None


class _Frames:
    """to_pandas and to_polars of a result that has to_arrow."""

    __slots__ = ()

    def to_arrow(self) -> pa.Table:  # pragma: no cover - every result defines it
        raise NotImplementedError

    def to_pandas(self):
        """The rows as a pandas DataFrame (needs pandas: pip install 'pva[dataframes]')."""
        require("pandas", "dataframes", "to_pandas()")
        return self.to_arrow().to_pandas()

    def to_polars(self):
        """The rows as a polars DataFrame (needs polars: pip install 'pva[dataframes]')."""
        polars = require("polars", "dataframes", "to_polars()")
        return polars.from_arrow(self.to_arrow())


class Rows(list, _Frames):
    """The rows of a query as a list of tuples, with its column names and Arrow, pandas and polars forms.

    It is a list: it compares equal to a list of the same tuples.
    """

    __slots__ = ("columns", "_where")

    def __init__(self, rows: Iterable[tuple] = (), columns: Sequence[str] = (), where: str = "") -> None:
        super().__init__(rows)
        self.columns: list[str] = list(columns)
        self._where = where

    def to_arrow(self) -> pa.Table:
        """The rows as an Arrow table (repeated column names gain _1, _2, ...)."""
        return rows_to_arrow(self.columns, self, self._where)

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        """The Arrow PyCapsule stream of the rows, for readers that ask for it (pyarrow.RecordBatchReader.from_stream)."""
        return self.to_arrow().__arrow_c_stream__(requested_schema)

    def _repr_html_(self) -> str:
        from .notebook_tables import rows_html

        return rows_html(self.columns, self, len(self))


class _Stream(_Frames):
    """What the streamed results share: read once, as tuples or as Arrow batches.

    ``__arrow_c_stream__`` may be called again until a batch has been read (DuckDB asks once for
    the schema and once more to scan).
    """

    columns: list[str]
    _where: str

    def __init__(self) -> None:
        self._read = False

    def _refuse_reread(self) -> None:
        if self._read:
            raise InvalidInputError(
                f"{self._where!r}: the rows of this query were already read; a stream is read once "
                f"(run the query again, or use report.sql(...), which keeps its rows)",
                self._where,
            )

    def _schema(self) -> pa.Schema:  # pragma: no cover - every stream defines it
        raise NotImplementedError

    def _batches(self) -> Iterator[pa.RecordBatch]:  # pragma: no cover - every stream defines it
        raise NotImplementedError

    def to_reader(self) -> pa.RecordBatchReader:
        """The rows as an Arrow RecordBatchReader, read as its batches are asked for."""
        self._refuse_reread()
        schema = self._schema()

        def batches() -> Iterator[pa.RecordBatch]:
            self._refuse_reread()
            self._read = True
            yield from self._batches()

        return pa.RecordBatchReader.from_batches(schema, batches())

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The rows, one Arrow record batch at a time."""
        return iter(self.to_reader())

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        """The Arrow PyCapsule stream of the rows, read batch by batch as the consumer asks."""
        return self.to_reader().__arrow_c_stream__(requested_schema)

    def to_arrow(self) -> pa.Table:
        """Every row as one Arrow table."""
        return self.to_reader().read_all()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:  # pragma: no cover - every stream defines it
        raise NotImplementedError


class RowStream(_Stream):
    """A read-only query on a report whose rows are read as they are asked for.

    Iterate `.rows` for tuples, or read it as Arrow batches of up to BATCH_ROWS rows; either way it
    is read once. The column types of its Arrow form are those of its first batch of rows.
    """

    def __init__(self, result: QueryResult, where: str, batch_rows: int = BATCH_ROWS) -> None:
        super().__init__()
        self.columns = list(result.columns)
        self._where = where
        self._result = result
        self._batch_rows = max(1, int(batch_rows))
        self._head: pa.RecordBatch | None = None
        self._head_rows: list[tuple] = []  # the rows of the first batch, once its schema was asked for
        self.rows: Iterator[tuple] = self._tracked()

    def _tracked(self) -> Iterator[tuple]:
        self._read = True
        yield from self._head_rows
        self._head_rows = []
        yield from self._result.rows

    def _chunk(self) -> list[tuple]:
        return list(itertools.islice(self._result.rows, self._batch_rows))

    def _schema(self) -> pa.Schema:
        if self._head is None:
            self._head_rows = self._chunk()
            try:
                self._head = rows_to_batch(self.columns, self._head_rows, self._where)
            except BaseException:
                self.close()
                raise
        return self._head.schema

    def _batches(self) -> Iterator[pa.RecordBatch]:
        head = self._head
        assert head is not None
        self._head_rows = []
        if head.num_rows:
            yield head
        try:
            while chunk := self._chunk():
                yield rows_to_batch(self.columns, chunk, self._where, head.schema)
        except BaseException:
            self.close()  # the query's statement is released while its report is still open
            raise

    def close(self) -> None:
        """Stop reading: the rows not read yet are dropped and the query's statement is released."""
        self.rows.close()  # type: ignore[attr-defined]
        self._result.rows.close()  # type: ignore[attr-defined]
        self._result.close()

    def _repr_html_(self) -> str:
        from .notebook_tables import stream_html

        return stream_html(self.columns, "rows read when asked for: iterate .rows, or to_arrow(), to_pandas()")

    def __repr__(self) -> str:
        return f"<RowStream columns={self.columns!r}>"


class ArrowStream(_Stream):
    """A query result that arrives as Arrow record batches (fleet queries over many reports); read once."""

    def __init__(self, batches: Iterator[pa.RecordBatch], schema: pa.Schema, close: Callable[[], None], where: str):
        super().__init__()
        self.schema = schema
        self.columns = list(schema.names)
        self._source = batches
        self._close = close
        self._where = where

    def _schema(self) -> pa.Schema:
        return self.schema

    def _batches(self) -> Iterator[pa.RecordBatch]:
        return self._source

    @property
    def rows(self) -> Iterator[tuple]:
        """The rows as tuples, streamed."""
        for batch in self.batches():
            yield from zip(*(column.to_pylist() for column in batch.columns))

    def close(self) -> None:
        """Stop the query and release its engine."""
        self._close()

    def _repr_html_(self) -> str:
        from .notebook_tables import stream_html

        return stream_html(self.columns, "Arrow batches read when asked for: to_arrow(), to_pandas(), to_polars()")

    def __repr__(self) -> str:
        return f"<ArrowStream columns={self.columns!r}>"


def report_duckdb(reader, tables: Iterable[str] | None = None):
    """A DuckDB connection (in memory, no file access) holding tables of a report as Arrow tables.

    Every table but the matrices' storage when `tables` is None; each is read whole, once, with
    the column types of the format's Arrow schema.
    """
    from formats.fleet.dataset import read_table, report_tables
    from formats.pop.arrow_sqlite import adbc_connect
    from formats.pop.schema import profile_schema

    duckdb = require("duckdb", "query", "report.duckdb()")
    present = dict(reader.file.tables)
    known = [t for t in profile_schema().tables if t in present]
    if tables is None:
        names = [t for t in report_tables() if t in present]
    else:
        names = [tables] if isinstance(tables, str) else list(tables)
        unknown = [t for t in names if t not in known]
        if unknown:
            raise InvalidInputError(
                f"{reader.path!r}: no table {unknown[0]!r} in the report; expected one of {', '.join(known)}",
                reader.path,
            )
    arrow = adbc_connect(reader.path)  # None without the ADBC driver: read through sqlite3
    try:
        data = {name: read_table(reader, arrow, name, list(present[name])) for name in names}
    finally:
        if arrow is not None:
            arrow.close()
    con = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        for name, table in data.items():
            con.register(name, table)
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con
