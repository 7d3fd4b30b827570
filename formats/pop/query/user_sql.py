"""A user's own SQL on a report or trace file: read-only, streamed, as rows or as Arrow."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
        rows = list(result.rows)
        columns = list(zip(*rows)) if rows else [() for _ in result.columns]
        return pa.table({name: pa.array(list(values)) for name, values in zip(_unique(result.columns), columns)})


def _unique(names: list[str]) -> list[str]:
    """Column names made unique (SQL allows `SELECT a, a`; an Arrow table built from a dict does not)."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        count = seen.get(name, 0)
        seen[name] = count + 1
        out.append(name if count == 0 else f"{name}_{count}")
    return out
