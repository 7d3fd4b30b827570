"""pva.file_operations: check, convert, export and SQL from a script, as the command line does them."""

import pytest

import pva
import pva.file_operations


def test_check_export_and_sql_on_a_report(sample, tmp_path):
    assert pva.file_operations.check(sample.path, quick=True) == []
    assert set(pva.file_operations.EXPORT_FORMATS) == {
        "parquet",
        "hdf5",
        "csv",
        "chrome-trace",
        "legacy-json",
        "legacy-cbor",
    }
    written = pva.file_operations.export(sample.path, "parquet", tmp_path / "out")
    assert [p.rsplit("/", 1)[-1] for p in written] == ["out"]
    assert (tmp_path / "out" / "tables" / "steps.parquet").exists() and (tmp_path / "out" / "manifest.json").exists()
    result = pva.file_operations.sql(sample.path, "SELECT count(*) AS n FROM steps")
    try:
        assert result.columns == ["n"] and list(result.rows) == [(len(sample.rows("steps")),)]
    finally:
        result.close()


def test_sql_refuses_writes_and_closes(sample):
    with pytest.raises(pva.ReadOnlyError):
        pva.file_operations.sql(sample.path, "DELETE FROM steps")


def test_convert_a_legacy_export_back(sample, tmp_path):
    pva.file_operations.export(sample.path, "legacy-json", tmp_path / "legacy")
    outcome = pva.file_operations.convert(
        [tmp_path / "legacy" / "graph.json", tmp_path / "legacy" / "execution.json"], tmp_path / "back.pop"
    )
    with pva.openReport(outcome.output) as report:
        assert len(report.execution.steps) == len(sample.rows("steps"))
