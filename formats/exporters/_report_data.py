"""Reading a report's tables and matrices in batches for the exporters, with their descriptions."""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa

from ..atomic import AtomicOutput
from ..errors import CorruptReportError
from ..pop.arrow_tables import arrow_schema
from ..pop.reader import MatrixReader, ProfileReader
from ..pop.schema import profile_matrices, profile_schema

#: Tables not exported: the raw Arrow chunks of the matrices (exported decoded instead).
SKIPPED_TABLES = frozenset({"matrix_chunks"})
#: Rows per batch when a table is read (a batch of Python rows is the largest thing an export holds).
BATCH_ROWS = 16384

_UNIT = re.compile(r"\[([^\]]+)\]\s*$")


def unit_of(description: str) -> str:
    """The unit a schema comment gives in brackets at its end ('' if none)."""
    match = _UNIT.search(description or "")
    return match.group(1) if match else ""


def exported_tables() -> list[str]:
    """Names of the tables the exporters write, in schema order."""
    return [name for name in profile_schema().tables if name not in SKIPPED_TABLES]


def table_batches(reader: ProfileReader, table: str) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The Arrow schema of a table and its rows as record batches."""
    schema = arrow_schema(table)
    fields = [
        pa.field(
            f.name,
            f.type,
            nullable=f.nullable,
            metadata={**(f.metadata or {}), b"unit": unit_of((f.metadata or {}).get(b"description", b"").decode())},
        )
        for f in schema
    ]
    schema = pa.schema(fields, metadata=schema.metadata)

    def batches() -> Iterator[pa.RecordBatch]:
        rows_of = reader.table_rows(table, [f.name for f in schema], BATCH_ROWS)
        while True:
            rows = list(itertools.islice(rows_of, BATCH_ROWS))
            if not rows:
                return
            columns = list(zip(*rows))
            try:
                arrays = [pa.array(values, type=field.type) for field, values in zip(schema, columns)]
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                raise CorruptReportError(
                    f"{reader.path!r}: table {table!r} holds a value of the wrong type ({exc})", reader.path
                ) from None
            yield pa.record_batch(arrays, schema=schema)

    return schema, batches()


def matrix_info(name: str) -> dict:
    """The declaration of a matrix in schemas/profile_matrices.json."""
    return profile_matrices()["matrices"].get(name, {})


def stored_matrices(reader: ProfileReader) -> list[MatrixReader]:
    """The matrices a report stores, in declaration order."""
    declared = (reader.matrix(name) for name in profile_matrices()["matrices"])
    return [matrix for matrix in declared if matrix is not None]


def matrix_blocks(matrix: MatrixReader) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, rows) of a matrix, one stored chunk at a time (narrow dtypes widened to uint64)."""
    for first, block in matrix.iter_chunks():
        yield first, block.astype(np.uint64, copy=False)


def export_directory(
    report: str,
    output: str,
    fmt: str,
    write_table: Callable[[str, pa.Schema, Iterator[pa.RecordBatch]], int],
    write_matrix: Callable[[str, str, int, Iterator[tuple[int, np.ndarray]]], None],
) -> list[str]:
    """Write `output`/tables/<table>.<fmt>, `output`/matrices/<matrix>.<fmt> and manifest.json, atomically.

    ``write_table(path, schema, batches)`` writes one table and returns its row count;
    ``write_matrix(path, name, num_cols, blocks)`` writes one matrix from its row blocks.
    """
    reader = ProfileReader(report)
    try:
        reader.check_value_types()
        with AtomicOutput(output, directory=True) as out:
            os.mkdir(os.path.join(out.path, "tables"))
            os.mkdir(os.path.join(out.path, "matrices"))
            manifest: dict = {"report": os.path.basename(report), "format": fmt, "tables": {}, "matrices": {}}
            for table in exported_tables():
                schema, batches = table_batches(reader, table)
                file = f"tables/{table}.{fmt}"
                rows = write_table(os.path.join(out.path, file), schema, batches)
                manifest["tables"][table] = {
                    "file": file,
                    "rows": rows,
                    "description": schema.metadata.get(b"description", b"").decode(),
                }
            for matrix in stored_matrices(reader):
                name = matrix.name
                file = f"matrices/{name}.{fmt}"
                write_matrix(os.path.join(out.path, file), name, matrix.num_cols, matrix_blocks(matrix))
                info = matrix_info(name)
                manifest["matrices"][name] = {
                    "file": file,
                    "rows": matrix.num_rows,
                    "columns": matrix.num_cols,
                    "unit": info.get("unit", ""),
                    "description": info.get("description", ""),
                }
            with open(os.path.join(out.path, "manifest.json"), "w", encoding="utf-8") as handle:
                json.dump(manifest, handle, indent=2)
                handle.write("\n")
    finally:
        reader.close()
    return [output]
