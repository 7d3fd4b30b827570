"""Values a query returns, checked against the types the schema declares, so bad bytes stop at the reader."""

from __future__ import annotations

from ...errors import InconsistentReportError
from ..schema import profile_schema

_PYTHON_TYPES = {"INTEGER": (int,), "REAL": (int, float), "TEXT": (str,), "BLOB": (bytes,)}


def typed(path: str, rows: list[tuple], *columns: str | None) -> list[tuple]:
    """The rows, after checking that each value has its column's declared type (and is not NULL if NOT NULL).

    `columns` names, for each position of a row, the "table.column" it comes from, or None for a value
    not read from one column (an aggregate). A mismatch raises InconsistentReportError naming the column.
    """
    tables = profile_schema().tables
    checks = []
    for index, name in enumerate(columns):
        if name is None:
            continue
        table, column = name.split(".")
        spec = next(c for c in tables[table].columns if c.name == column)
        checks.append((index, name, spec.type, _PYTHON_TYPES[spec.type], spec.not_null))
    for row in rows:
        for index, name, declared, expected, not_null in checks:
            value = row[index]
            if value is None and not not_null:
                continue
            if isinstance(value, bool) or not isinstance(value, expected):
                found = "NULL" if value is None else f"{type(value).__name__} {value!r:.60}"
                raise InconsistentReportError(f"{path!r}: {name} should be {declared}, found {found}", path)
    return rows
