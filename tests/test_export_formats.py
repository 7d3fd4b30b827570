"""Open formats out: Parquet, HDF5 and CSV hold exactly the report's tables and per-tile matrices."""

from __future__ import annotations

import csv
import json
import os

import h5py
import numpy as np
import pyarrow.parquet as pq
import pytest

from formats.errors import InvalidInputError, NotAReportError
from formats.exporters import FORMATS, export
from formats.exporters._report_data import exported_tables
from formats.pop.schema import profile_matrices


def test_parquet_has_every_table_and_matrix(tmp_path, sample):
    out = tmp_path / "pq"
    assert export(sample.path, "parquet", out) == [str(out)]
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["tables"]) == set(exported_tables())
    assert "matrix_chunks" not in manifest["tables"]
    assert set(manifest["matrices"]) == set(profile_matrices()["matrices"])
    steps = pq.read_table(out / "tables" / "steps.parquet")
    columns, rows = sample.tables["steps"]
    assert steps.select(list(columns)).to_pylist() == [dict(zip(columns, r)) for r in rows]
    assert steps.schema.field("cycles_overlapped").metadata[b"unit"] == b"cycles"
    matrix = pq.read_table(out / "matrices" / "step_cycles_by_tile.parquet")
    assert matrix.column("row").to_pylist() == list(range(11))
    assert np.array_equal(np.array(matrix.column("values").to_pylist()), sample.matrix("step_cycles_by_tile"))
    assert matrix.schema.metadata[b"unit"] == b"cycles"
    assert manifest["matrices"]["memory_category_by_tile"]["columns"] == 6 * 26


def test_hdf5_matrices_are_chunked_compressed_and_described(tmp_path, sample):
    out = tmp_path / "m.h5"
    export(sample.path, "hdf5", out)
    with h5py.File(out, "r") as h5:
        assert set(h5["matrices"]) == set(profile_matrices()["matrices"])
        dataset = h5["matrices/compute_set_estimated_cycles_by_tile"]
        assert np.array_equal(dataset[()], sample.matrix("compute_set_estimated_cycles_by_tile"))
        assert dataset.compression == "gzip" and dataset.chunks is not None and dataset.shuffle
        assert dataset.attrs["unit"] == "cycles" and dataset.attrs["name"] == "compute_set_estimated_cycles_by_tile"
        assert "Estimated cycles" in dataset.attrs["description"]
        assert json.loads(h5.attrs["target"])["num_tiles"] == 8


def test_csv_tables_and_wide_matrices(tmp_path, sample):
    out = tmp_path / "csv"
    export(sample.path, "csv", out)
    with open(out / "tables" / "programs.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["type"] for r in rows[:3]] == ["Sequence", "StreamCopyBegin", "StreamCopyMid"]
    assert rows[6]["repeat_count"] == "3" and rows[0]["repeat_count"] == ""
    with open(out / "matrices" / "compute_set_active_cycles_by_tile.csv", newline="") as handle:
        matrix = list(csv.reader(handle))
    assert matrix[0] == ["row"] + [f"tile_{t}" for t in range(8)]
    assert [int(v) for v in matrix[2][1:]] == sample.matrix("compute_set_active_cycles_by_tile")[1].tolist()
    assert sorted(os.listdir(out)) == ["manifest.json", "matrices", "tables"]


@pytest.mark.parametrize("fmt", ["parquet", "csv", "hdf5"])
def test_failed_export_leaves_nothing(tmp_path, fmt):
    bad = tmp_path / "not-a-report.pop"
    bad.write_text("hello")
    with pytest.raises(NotAReportError):
        export(bad, fmt, tmp_path / "out")
    assert sorted(os.listdir(tmp_path)) == ["not-a-report.pop"]


def test_a_previous_export_is_replaced_whole(tmp_path, sample):
    out = tmp_path / "pq"
    export(sample.path, "parquet", out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["written_by"] == "pva" and "tables/programs.parquet" in manifest["files"]
    os.unlink(out / "tables" / "programs.parquet")  # a file of ours, listed in the manifest
    export(sample.path, "parquet", out)
    assert (out / "tables" / "programs.parquet").exists()


def test_a_directory_that_is_not_an_export_is_never_replaced(tmp_path, sample):
    out = tmp_path / "pq"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    with pytest.raises(InvalidInputError, match="not a previous pva export"):
        export(sample.path, "parquet", out)
    assert os.listdir(out) == ["thesis.tex"]
    assert sorted(os.listdir(tmp_path)) == ["pq"]


def test_unknown_format_is_refused():
    with pytest.raises(InvalidInputError, match="unknown export format 'xlsx'"):
        export("x.pop", "xlsx", "out")
    assert set(FORMATS) == {"parquet", "hdf5", "csv", "chrome-trace", "legacy-json", "legacy-cbor"}
