"""Export a report as a directory of Parquet files: every table and every per-tile matrix."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ._report_data import export_directory, matrix_info


def matrix_schema(name: str, num_cols: int) -> pa.Schema:
    """Parquet schema of a matrix: the row number and its values as a fixed-size list."""
    info = matrix_info(name)
    return pa.schema(
        [
            pa.field("row", pa.int64(), nullable=False, metadata={"description": f"row: {info.get('rows', '')}"}),
            pa.field(
                "values",
                pa.list_(pa.uint64(), num_cols),
                nullable=False,
                metadata={
                    "description": f"one value per column: {info.get('columns', '')}",
                    "unit": info.get("unit", ""),
                },
            ),
        ],
        metadata={
            "matrix": name,
            "description": info.get("description", ""),
            "unit": info.get("unit", ""),
            "rows": info.get("rows", ""),
            "columns": info.get("columns", ""),
        },
    )


def export_parquet(report: str, output: str, *, compression: str = "zstd") -> list[str]:
    """Write `output`/tables/<table>.parquet, `output`/matrices/<matrix>.parquet and manifest.json."""
    return export_directory(
        report,
        output,
        "parquet",
        functools.partial(_write_table, compression=compression),
        functools.partial(_write_matrix, compression=compression),
    )


def _write_table(path: str, schema: pa.Schema, batches: Iterator[pa.RecordBatch], *, compression: str) -> int:
    rows = 0
    with pq.ParquetWriter(path, schema, compression=compression) as writer:
        for batch in batches:
            writer.write_batch(batch)
            rows += batch.num_rows
    return rows


def _write_matrix(
    path: str, name: str, num_cols: int, blocks: Iterator[tuple[int, np.ndarray]], *, compression: str
) -> None:
    schema = matrix_schema(name, num_cols)
    with pq.ParquetWriter(path, schema, compression=compression) as writer:
        for first, block in blocks:
            rows = pa.array(range(first, first + block.shape[0]), type=pa.int64())
            values = pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), num_cols)
            writer.write_batch(pa.record_batch([rows, values], schema=schema))
