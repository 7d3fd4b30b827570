"""Report.sql: read-only SQL from a script, as rows or as an Arrow table."""

import pyarrow as pa
import pytest

import pva


def test_sql_rows_and_arrow(sample):
    with pva.openReport(sample.path) as report:
        names = report.sql("SELECT name FROM compute_sets ORDER BY compute_set")
        assert [row[0] for row in names] == [cs.name for cs in report.compilation.computeSets]
        table = report.sql("SELECT compute_set, name FROM compute_sets ORDER BY compute_set", arrow=True)
        assert isinstance(table, pa.Table)
        assert table.column_names == ["compute_set", "name"]
        assert table.num_rows == len(names)
        stream = report.sql_stream("SELECT count(*) AS n FROM programs")
        assert stream.columns == ["n"]
        assert list(stream.rows) == [(len(report.compilation.programs),)]


def test_sql_refuses_writes(sample):
    with pva.openReport(sample.path) as report, pytest.raises(pva.PvaError, match="read-only"):
        report.sql("DELETE FROM programs")
