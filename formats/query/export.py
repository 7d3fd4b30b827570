"""Queries of the exporters: tables and execution steps streamed in batches, through the reader's lock
and its error translation."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any


class ExportQueries:
    """Streaming reads for the exporters (a mixin of ProfileReader)."""

    def table_rows(self, table: str, columns: Sequence[str], batch: int = 10_000) -> Iterator[tuple]:
        """Every row of a table of the schema, as tuples of `columns`, fetched in batches."""
        if table not in self.file.tables:  # type: ignore[attr-defined]
            raise KeyError(f"no table {table!r} in the schema")
        names = ", ".join(f'"{c}"' for c in columns)
        return self.file.iterate(f'SELECT {names} FROM "{table}"', (), batch)  # type: ignore[attr-defined]

    def export_rows(self, sql: str, params: Sequence[Any] = (), batch: int = 10_000) -> Iterator[tuple]:
        """The rows of one of the exporters' own queries, fetched in batches."""
        return self.file.iterate(sql, params, batch)  # type: ignore[attr-defined]
