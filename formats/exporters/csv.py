"""Export a report as a directory of CSV files: every table, and every matrix (one column per tile)."""

from __future__ import annotations

import csv
import json
import os

from ..atomic import AtomicOutput
from ..profile_reader import ProfileReader
from ._report_data import exported_tables, matrix_blocks, matrix_info, matrix_names, table_batches


def export_csv(report: str, output: str) -> list[str]:
    """Write `output`/tables/<table>.csv, `output`/matrices/<matrix>.csv and manifest.json.

    Tables keep their column names; NULL is an empty field; BLOBs are written as hex. A matrix
    file has a `row` column and one column per tile (``tile_0``, ...) or per matrix column.
    """
    reader = ProfileReader(report)
    try:
        with AtomicOutput(output, directory=True) as out:
            os.mkdir(os.path.join(out.path, "tables"))
            os.mkdir(os.path.join(out.path, "matrices"))
            manifest: dict = {"report": os.path.basename(report), "format": "csv", "tables": {}, "matrices": {}}
            for table in exported_tables():
                schema, batches = table_batches(reader, table)
                path = os.path.join(out.path, "tables", f"{table}.csv")
                rows = 0
                with open(path, "w", newline="", encoding="utf-8") as handle:
                    writer = csv.writer(handle)
                    writer.writerow(schema.names)
                    for batch in batches:
                        columns = [column.to_pylist() for column in batch.columns]
                        for row in zip(*columns):
                            writer.writerow(["" if v is None else v.hex() if isinstance(v, bytes) else v for v in row])
                        rows += batch.num_rows
                manifest["tables"][table] = {"file": f"tables/{table}.csv", "rows": rows}
            for name in matrix_names(reader):
                matrix = reader.matrix(name)
                info = matrix_info(name)
                prefix = "tile" if info.get("columns") in ("num_tiles", "tiles_per_replica") else "column"
                path = os.path.join(out.path, "matrices", f"{name}.csv")
                with open(path, "w", newline="", encoding="utf-8") as handle:
                    writer = csv.writer(handle)
                    writer.writerow(["row", *(f"{prefix}_{i}" for i in range(matrix.num_cols))])
                    for first, block in matrix_blocks(reader, name):
                        for offset, values in enumerate(block.tolist()):
                            writer.writerow([first + offset, *values])
                manifest["matrices"][name] = {"file": f"matrices/{name}.csv", "rows": matrix.num_rows,
                                              "columns": matrix.num_cols, "unit": info.get("unit", "")}
            with open(os.path.join(out.path, "manifest.json"), "w", encoding="utf-8") as handle:
                json.dump(manifest, handle, indent=2)
                handle.write("\n")
    finally:
        reader.close()
    return [output]
