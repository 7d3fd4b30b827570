"""A user's own SQL on a report or trace file: read-only, streamed, as rows or as Arrow."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...errors import InvalidInputError
from ...gcpause import gc_paused
from ...lazy_import import lazy_module
from ..readonly_sql import QueryResult, run_readonly

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")


class UserSql:
    """`sql()` for readers that hold a SqliteFile in `self.file`."""

    def sql(self, query: str, params: Sequence[Any] = (), timeout: float | None = None) -> QueryResult:
        """Run one read-only statement; the result streams its rows."""
        if not isinstance(query, str):
            raise TypeError(f"an SQL query must be a str, not {type(query).__name__}")
        return run_readonly(self.file, query, params, timeout=timeout)  # type: ignore[attr-defined]

    def sql_arrow(self, query: str, params: Sequence[Any] = (), timeout: float | None = None) -> pa.Table:
        """Run one read-only statement and return its rows as an Arrow table."""
        result = self.sql(query, params, timeout)
        return rows_to_arrow(result.columns, list(result.rows), self.file.path)  # type: ignore[attr-defined]


#: Rows of a query per Arrow record batch of a stream (the first batch also fixes the column types).
BATCH_ROWS = 8192


def unique_names(names: Sequence[str]) -> list[str]:
    """Column names made unique for Arrow and dataframes: a repeated name gains _1, _2, ..."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        count = seen.get(name, 0)
        seen[name] = count + 1
        out.append(name if count == 0 else f"{name}_{count}")
    return out


def _arrow_errors() -> tuple[type[Exception], ...]:
    return (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError)


def _column_array(values: Sequence, name: str, where: str, arrow_type: pa.DataType | None) -> pa.Array:
    """One column's values as an Arrow array (of `arrow_type`, or inferred); mixed types raise InvalidInputError."""
    try:
        return pa.array(values, type=arrow_type)
    except _arrow_errors() as exc:
        kinds = sorted({type(v).__name__ for v in values if v is not None})
        if arrow_type is not None and not pa.types.is_null(arrow_type):
            found = f"values of type {', '.join(kinds)} after rows of type {arrow_type}"
        elif arrow_type is not None:
            found = f"only NULL in its first {BATCH_ROWS:,} rows, then values of type {', '.join(kinds)}"
        else:
            found = f"values of more than one type ({', '.join(kinds)})"
        raise InvalidInputError(
            f"{where!r}: column {name!r} of the query holds {found}; expected one type per column for Arrow "
            f"and dataframes: CAST the column in the query (for example CAST({name} AS TEXT)) ({exc})",
            where,
        ) from None


def rows_to_batch(columns: Sequence[str], rows: Sequence[tuple], where: str, schema: pa.Schema | None = None):
    """Rows of a query as one Arrow record batch: of `schema`, or with each column's type inferred."""
    names = unique_names(columns)
    with gc_paused():  # the columns are made of many small objects, none of them in a cycle
        values: list[Any] = list(zip(*rows)) if rows else [() for _ in names]
        if len(values) != len(names):
            raise InvalidInputError(f"{where!r}: rows have {len(values)} values, expected {len(names)}", where)
        arrays = [
            _column_array(column, name, where, None if schema is None else schema.field(i).type)
            for i, (name, column) in enumerate(zip(names, values))
        ]
    if schema is None:
        return pa.RecordBatch.from_arrays(arrays, names=names)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def rows_to_arrow(columns: Sequence[str], rows: Sequence[tuple], where: str = "") -> pa.Table:
    """Rows of a query as an Arrow table, each column's type inferred from all of its values."""
    return pa.Table.from_batches([rows_to_batch(columns, rows, where)])
