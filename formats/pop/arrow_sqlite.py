"""Read-only SQLite queries whose rows come back as Arrow, built in native code by the ADBC SQLite driver."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..errors import CorruptReportError

if TYPE_CHECKING:
    import pyarrow as pa


class ArrowSqlite:
    """A read-only SQLite connection of the ADBC driver."""

    def __init__(self, path: str) -> None:
        import pathlib

        import adbc_driver_manager
        import adbc_driver_sqlite

        self._manager = adbc_driver_manager
        uri = pathlib.Path(os.path.abspath(path)).as_uri() + "?mode=ro"
        self._db = adbc_driver_sqlite.connect(uri)
        try:
            self._conn = adbc_driver_manager.AdbcConnection(self._db)
        except BaseException:
            self._db.close()
            raise

    def arrow(self, sql: str) -> pa.Table:
        """Every row of a query as an Arrow table."""
        import pyarrow as pa

        statement = self._manager.AdbcStatement(self._conn)
        try:
            statement.set_sql_query(sql)
            stream, _ = statement.execute_query()
            return pa.RecordBatchReader._import_from_c(stream.address).read_all()
        finally:
            statement.close()

    def batches(self, sql: str, rows: int = 1 << 16) -> Iterator[pa.RecordBatch]:
        """The rows of a query in batches of `rows` rows."""
        import pyarrow as pa

        statement = self._manager.AdbcStatement(self._conn)
        try:
            statement.set_options(**{"adbc.sqlite.query.batch_rows": str(rows)})
            statement.set_sql_query(sql)
            stream, _ = statement.execute_query()
            yield from pa.RecordBatchReader._import_from_c(stream.address)
        finally:
            statement.close()

    def close(self) -> None:
        self._conn.close()
        self._db.close()


def adbc_connect(path: str) -> ArrowSqlite | None:
    """A read-only ADBC SQLite connection to a report, or None when the driver is not installed."""
    try:
        return ArrowSqlite(path)
    except ImportError:
        return None
    except Exception as exc:
        raise CorruptReportError(f"{path!r}: cannot be opened by SQLite ({exc})", path) from None
