"""Export a report as a directory of CSV files: every table, and every matrix (one column per tile)."""

from __future__ import annotations

import csv
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from ._report_data import export_directory, matrix_info


def export_csv(report: str, output: str) -> list[str]:
    """Write `output`/tables/<table>.csv, `output`/matrices/<matrix>.csv and manifest.json.

    Tables keep their column names; NULL is an empty field; BLOBs are written as hex. A matrix
    file has a `row` column and one column per tile (``tile_0``, ...) or per matrix column.
    """
    return export_directory(report, output, "csv", _write_table, _write_matrix)


def _write_table(path: str, schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> int:
    rows = 0
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(schema.names)
        for batch in batches:
            columns = [column.to_pylist() for column in batch.columns]
            for row in zip(*columns):
                writer.writerow(["" if v is None else v.hex() if isinstance(v, bytes) else v for v in row])
            rows += batch.num_rows
    return rows


def _write_matrix(path: str, name: str, num_cols: int, blocks: Iterator[tuple[int, np.ndarray]]) -> None:
    prefix = "tile" if matrix_info(name).get("columns") in ("num_tiles", "tiles_per_replica") else "column"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["row", *(f"{prefix}_{i}" for i in range(num_cols))])
        for first, block in blocks:
            for offset, values in enumerate(block.tolist()):
                writer.writerow([first + offset, *values])
