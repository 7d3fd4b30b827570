"""Export a report as a directory of Parquet files: every table and every per-tile matrix."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq

from ..atomic import AtomicOutput
from ..profile_reader import ProfileReader
from ._report_data import exported_tables, matrix_blocks, matrix_info, matrix_names, table_batches


def matrix_schema(name: str, num_cols: int) -> pa.Schema:
    """Parquet schema of a matrix: the row number and its values as a fixed-size list."""
    info = matrix_info(name)
    return pa.schema(
        [pa.field("row", pa.int64(), nullable=False, metadata={"description": f"row: {info.get('rows', '')}"}),
         pa.field("values", pa.list_(pa.uint64(), num_cols), nullable=False,
                  metadata={"description": f"one value per column: {info.get('columns', '')}",
                            "unit": info.get("unit", "")})],
        metadata={"matrix": name, "description": info.get("description", ""), "unit": info.get("unit", ""),
                  "rows": info.get("rows", ""), "columns": info.get("columns", "")},
    )


def export_parquet(report: str, output: str, *, compression: str = "zstd") -> list[str]:
    """Write `output`/tables/<table>.parquet, `output`/matrices/<matrix>.parquet and manifest.json."""
    reader = ProfileReader(report)
    try:
        with AtomicOutput(output, directory=True) as out:
            os.mkdir(os.path.join(out.path, "tables"))
            os.mkdir(os.path.join(out.path, "matrices"))
            manifest: dict = {"report": os.path.basename(report), "format": "parquet", "tables": {}, "matrices": {}}
            for table in exported_tables():
                schema, batches = table_batches(reader, table)
                path = os.path.join(out.path, "tables", f"{table}.parquet")
                rows = 0
                with pq.ParquetWriter(path, schema, compression=compression) as writer:
                    for batch in batches:
                        writer.write_batch(batch)
                        rows += batch.num_rows
                manifest["tables"][table] = {"file": f"tables/{table}.parquet", "rows": rows,
                                             "description": schema.metadata.get(b"description", b"").decode()}
            for name in matrix_names(reader):
                matrix = reader.matrix(name)
                schema = matrix_schema(name, matrix.num_cols)
                path = os.path.join(out.path, "matrices", f"{name}.parquet")
                with pq.ParquetWriter(path, schema, compression=compression) as writer:
                    for first, block in matrix_blocks(reader, name):
                        rows = pa.array(range(first, first + block.shape[0]), type=pa.int64())
                        values = pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), matrix.num_cols)
                        writer.write_batch(pa.record_batch([rows, values], schema=schema))
                info = matrix_info(name)
                manifest["matrices"][name] = {"file": f"matrices/{name}.parquet", "rows": matrix.num_rows,
                                              "columns": matrix.num_cols, "unit": info.get("unit", ""),
                                              "description": info.get("description", "")}
            with open(os.path.join(out.path, "manifest.json"), "w", encoding="utf-8") as handle:
                json.dump(manifest, handle, indent=2)
                handle.write("\n")
    finally:
        reader.close()
    return [output]
