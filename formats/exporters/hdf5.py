"""Export a report's per-tile matrices as one HDF5 file of chunked, compressed datasets."""

from __future__ import annotations

import json

import h5py
import numpy as np

from ..atomic import AtomicOutput
from ..pop.reader import ProfileReader
from ._report_data import matrix_blocks, matrix_info, stored_matrices

#: Bytes per HDF5 chunk (rows x columns x 8).
CHUNK_BYTES = 1 << 20


def export_hdf5(report: str, output: str, *, compression: str = "gzip", level: int = 4) -> list[str]:
    """Write /matrices/<name> datasets (uint64, rows x columns) with name, unit and meaning attributes.

    The root carries the report's target and metadata as attributes.
    """
    reader = ProfileReader(report)
    try:
        with AtomicOutput(output) as out, h5py.File(out.path, "w") as h5:
            h5.attrs["report"] = reader.path.rsplit("/", 1)[-1]
            h5.attrs["format"] = "pva per-tile matrices"
            h5.attrs["target"] = json.dumps(reader.target)
            h5.attrs["metadata"] = json.dumps(reader.metadata)
            group = h5.create_group("matrices")
            for matrix in stored_matrices(reader):
                name = matrix.name
                rows, cols = matrix.num_rows, matrix.num_cols
                chunk_rows = max(1, min(rows or 1, CHUNK_BYTES // (8 * max(1, cols))))
                dataset = group.create_dataset(
                    name,
                    shape=(rows, cols),
                    dtype=np.uint64,
                    chunks=(chunk_rows, max(1, cols)) if rows and cols else None,
                    compression=compression if rows and cols else None,
                    compression_opts=level if compression == "gzip" and rows and cols else None,
                    shuffle=bool(rows and cols),
                )
                for first, block in matrix_blocks(matrix):
                    dataset[first : first + block.shape[0]] = block
                info = matrix_info(name)
                dataset.attrs["name"] = name
                dataset.attrs["unit"] = info.get("unit", "")
                dataset.attrs["description"] = info.get("description", "")
                dataset.attrs["rows"] = info.get("rows", "")
                dataset.attrs["columns"] = info.get("columns", "")
    finally:
        reader.close()
    return [output]
