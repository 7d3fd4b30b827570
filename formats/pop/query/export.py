"""Queries of the exporters: tables and execution steps streamed in batches, through the reader's lock
and its error translation."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..sqlite_reader import SqliteFile


class ExportQueries:
    """Streaming reads for the exporters (a mixin of ProfileReader)."""

    file: SqliteFile
    path: str

    def table_rows(self, table: str, columns: Sequence[str], batch: int = 10_000) -> Iterator[tuple]:
        """Every row of a table of the schema, as tuples of `columns`, fetched in batches."""
        if table not in self.file.tables:
            raise KeyError(f"no table {table!r} in the schema")
        names = ", ".join(f'"{c}"' for c in columns)
        return self.file.iterate(f'SELECT {names} FROM "{table}"', (), batch)

    def export_rows(self, sql: str, params: Sequence[Any] = (), batch: int = 10_000) -> Iterator[tuple]:
        """The rows of one of the exporters' own queries, fetched in batches."""
        return self.file.iterate(sql, params, batch)

    def read_without_memory_map(self) -> None:
        """Read pages with read() rather than through the memory map, for an exporter that reads each
        row once: its resident memory then holds the pages in use, not every page it touched."""
        self.file.conn.execute("PRAGMA mmap_size = 0")  # type: ignore[attr-defined]

    def check_value_types(self, tables: Iterable[str] | None = None) -> None:
        """Raise CorruptReportError at the first value whose type breaks the schema (one scan per table).

        Exporters call it first: a report that passes can be converted value by value without a
        surprise, so any later failure is a bug, not damage. `tables` limits the check to the
        tables an exporter reads (every table by default).
        """
        from ...errors import CorruptReportError
        from ..schema import profile_schema

        allowed = {"INTEGER": ("integer",), "REAL": ("integer", "real"), "TEXT": ("text",), "BLOB": ("blob",)}
        wanted = None if tables is None else set(tables)
        for table, spec in profile_schema().tables.items():
            if wanted is not None and table not in wanted:
                continue
            present = self.file.tables.get(table, ())
            columns = [c for c in spec.columns if c.name in present and c.type in allowed]
            if not columns:
                continue
            tests = []
            for column in columns:
                kinds = allowed[column.type] + (() if column.not_null else ("null",))
                tests.append(f'typeof("{column.name}") NOT IN ({", ".join(repr(k) for k in kinds)})')
            names = ", ".join(f'"{c.name}"' for c in columns)
            row = self.file.query_one(f'SELECT {names} FROM "{table}" WHERE {" OR ".join(tests)} LIMIT 1')
            if row is None:
                continue
            for column, value in zip(columns, row):
                kind = {int: "integer", float: "real", str: "text", bytes: "blob", type(None): "null"}[type(value)]
                if kind not in allowed[column.type] + (() if column.not_null else ("null",)):
                    raise CorruptReportError(
                        f"{self.path!r}: {table}.{column.name} holds {kind} {value!r:.60}, expected "
                        f"{column.type}{' NOT NULL' if column.not_null else ''}",
                        self.path,
                    )
