"""SQL tables of a report as Arrow tables, typed from the normative schema."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..lazy_import import lazy_module
from .reader import ProfileReader
from .schema import profile_schema

if TYPE_CHECKING:
    import pyarrow as pa
else:
    pa = lazy_module("pyarrow")

_ARROW_TYPES = {"INTEGER": pa.int64(), "REAL": pa.float64(), "TEXT": pa.string(), "BLOB": pa.binary()}


def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of a profile.pop table, with column descriptions as field metadata."""
    spec = profile_schema().tables[table]
    return pa.schema(
        [
            pa.field(c.name, _ARROW_TYPES[c.type], nullable=not c.not_null, metadata={"description": c.description})
            for c in spec.columns
        ],
        metadata={"description": spec.description, "table": table},
    )


def table_to_arrow(
    reader: ProfileReader, table: str, columns: Sequence[str] | None = None, batch_rows: int = 200_000
) -> pa.Table:
    """A table of the report (schema columns only, in schema order) as an Arrow table."""
    schema = arrow_schema(table)
    if columns is not None:
        schema = pa.schema([schema.field(c) for c in columns], metadata=schema.metadata)
    names = ", ".join(f'"{f.name}"' for f in schema)
    rows_iter = reader.file.iterate(f'SELECT {names} FROM "{table}"', batch=batch_rows)
    batches = []
    while True:
        rows = list(itertools.islice(rows_iter, batch_rows))
        if not rows:
            break
        columns_data = list(zip(*rows))
        arrays = []
        for field, values in zip(schema, columns_data):
            try:
                arrays.append(pa.array(values, type=field.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                # a value of the wrong type in the file: keep what converts, null the rest
                arrays.append(pa.array([_coerce(v, field.type) for v in values], type=field.type))
        batches.append(pa.record_batch(arrays, schema=schema))
    if not batches:
        return schema.empty_table()
    return pa.Table.from_batches(batches, schema=schema)


def _coerce(value, arrow_type):
    try:
        return pa.array([value], type=arrow_type)[0].as_py()
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return None
