"""Query results as dataframes: report.sql rows, sql_stream, arrow=True, report.duckdb() and fleet streams,
read by pyarrow, pandas, polars and DuckDB with their exact values."""

from __future__ import annotations

import hashlib
import pathlib
import shutil
import sys

import pyarrow as pa
import pytest

import pva
from pva.results import BATCH_ROWS, MissingExtraError, Rows, RowStream

pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")

COMPUTE_SETS = "SELECT compute_set, name, num_vertices FROM compute_sets ORDER BY compute_set"
#: The sample report's compute sets (tests/support/reportbuilder.py).
EXPECTED = [(0, "init/copy", 4), (1, "layer1/fwd", 5), (2, "layer1/bwd", 6)]
#: 20,000 rows made by SQLite itself: more than two batches of a stream.
COUNTING = "WITH RECURSIVE n(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM n WHERE x < 19999) SELECT x, x * 2 AS y FROM n"


@pytest.fixture()
def report(sample):
    with pva.openReport(sample.path) as opened:
        yield opened


def test_sql_rows_stay_a_list_of_tuples_with_columns(report):
    rows = report.sql(COMPUTE_SETS)
    assert isinstance(rows, list) and isinstance(rows, Rows)
    assert rows == EXPECTED
    assert EXPECTED == rows  # noqa: SIM300 - the list on the left compares too
    assert rows.columns == ["compute_set", "name", "num_vertices"]
    ((count,),) = report.sql("SELECT count(*) FROM steps")
    assert count == 11


def test_sql_rows_copy_and_pickle_with_their_columns(report):
    import copy
    import json
    import pickle

    rows = report.sql(COMPUTE_SETS)
    for again in (copy.copy(rows), copy.deepcopy(rows), pickle.loads(pickle.dumps(rows))):
        assert again == EXPECTED and again.columns == rows.columns
    assert json.loads(json.dumps(rows)) == [list(row) for row in EXPECTED]


def test_sql_rows_to_arrow_pandas_polars(report):
    rows = report.sql(COMPUTE_SETS)
    table = rows.to_arrow()
    assert table.schema == pa.schema([("compute_set", pa.int64()), ("name", pa.string()), ("num_vertices", pa.int64())])
    assert table.to_pylist()[1] == {"compute_set": 1, "name": "layer1/fwd", "num_vertices": 5}
    frame = rows.to_pandas()
    assert list(frame.columns) == rows.columns
    assert frame["num_vertices"].tolist() == [4, 5, 6]
    assert frame["name"].tolist() == ["init/copy", "layer1/fwd", "layer1/bwd"]
    polars_frame = rows.to_polars()
    assert polars_frame.columns == rows.columns
    assert polars_frame.rows() == EXPECTED
    assert polars_frame.schema["compute_set"] == pl.Int64


def test_sql_rows_arrow_stream_interface(report):
    rows = report.sql(COMPUTE_SETS)
    assert pa.RecordBatchReader.from_stream(rows).read_all().to_pylist() == rows.to_arrow().to_pylist()
    assert pl.from_dataframe(rows).rows() == EXPECTED


def test_sql_arrow_table_is_read_by_every_engine(report):
    sets = report.sql(COMPUTE_SETS, arrow=True)
    assert isinstance(sets, pa.Table)
    assert sets.equals(report.sql(COMPUTE_SETS).to_arrow())
    assert pa.table(sets).num_rows == 3
    assert pl.DataFrame(sets).rows() == EXPECTED
    assert duckdb.sql("SELECT sum(num_vertices) FROM sets").fetchall() == [(15,)]


def test_repeated_column_names_are_made_unique(report):
    rows = report.sql("SELECT name, name FROM compute_sets ORDER BY compute_set LIMIT 1")
    assert rows.columns == ["name", "name"]
    assert rows.to_arrow().column_names == ["name", "name_1"]
    assert rows.to_polars().rows() == [("init/copy", "init/copy")]


def test_empty_result_keeps_its_columns(report):
    rows = report.sql("SELECT id, name FROM programs WHERE id < 0")
    assert rows == [] and rows.columns == ["id", "name"]
    assert rows.to_arrow().column_names == ["id", "name"]
    assert rows.to_pandas().shape == (0, 2)


def test_a_column_of_mixed_types_is_refused_with_its_name(report):
    rows = report.sql("SELECT 1 AS v UNION ALL SELECT 'one'")
    assert rows == [(1,), ("one",)]
    with pytest.raises(pva.InvalidInputError, match=r"column 'v' of the query holds values of more than one type"):
        rows.to_arrow()
    with pytest.raises(pva.InvalidInputError, match=r"CAST"):
        report.sql("SELECT 1 AS v UNION ALL SELECT 'one'", arrow=True)


def test_sql_stream_reads_batches_without_reading_everything(report):
    stream = report.sql_stream(COUNTING)
    assert isinstance(stream, RowStream)
    assert stream.columns == ["x", "y"]
    batches = stream.batches()
    first = next(batches)
    assert first.num_rows == BATCH_ROWS
    assert first.column("x").to_pylist()[:3] == [0, 1, 2]
    rest = list(batches)
    assert [b.num_rows for b in rest] == [BATCH_ROWS, 20000 - 2 * BATCH_ROWS]
    assert sum(b.column("y").to_numpy().sum() for b in [first, *rest]) == 2 * sum(range(20000))


def test_sql_stream_is_read_by_pyarrow_polars_duckdb_pandas(report):
    assert pa.table(report.sql_stream(COMPUTE_SETS)).to_pylist()[2] == {
        "compute_set": 2,
        "name": "layer1/bwd",
        "num_vertices": 6,
    }
    assert pl.DataFrame(report.sql_stream(COMPUTE_SETS)).rows() == EXPECTED
    stream = report.sql_stream(COUNTING)  # noqa: F841 - DuckDB reads the variable by its name
    assert duckdb.sql("SELECT count(*), max(y) FROM stream").fetchall() == [(20000, 39998)]
    assert report.sql_stream(COMPUTE_SETS).to_pandas()["name"].tolist() == ["init/copy", "layer1/fwd", "layer1/bwd"]
    assert report.sql_stream(COMPUTE_SETS).to_polars().rows() == EXPECTED


def test_sql_stream_rows_and_its_read_once_rule(report):
    stream = report.sql_stream("SELECT count(*) AS n FROM programs")
    assert list(stream.rows) == [(len(report.compilation.programs),)]
    with pytest.raises(pva.InvalidInputError, match="already read; a stream is read once"):
        stream.to_arrow()
    stream = report.sql_stream(COMPUTE_SETS)
    assert stream.to_reader().schema.names == ["compute_set", "name", "num_vertices"]  # the schema alone reads no row
    assert list(stream.rows) == EXPECTED  # the rows read for the schema are not lost


def test_sql_stream_column_types_follow_its_first_batch(report):
    late = f"SELECT CASE WHEN x < {BATCH_ROWS} THEN NULL ELSE x END AS v FROM ({COUNTING})"
    with pytest.raises(
        pva.InvalidInputError, match=f"column 'v' of the query holds only NULL in its first {BATCH_ROWS:,}"
    ):
        report.sql_stream(late).to_arrow()
    assert report.sql_stream(
        f"SELECT CAST(v AS INTEGER) AS v FROM ({late}) WHERE v IS NOT NULL"
    ).to_arrow().num_rows == (20000 - BATCH_ROWS)


def test_missing_extra_is_named(report, monkeypatch):
    rows = report.sql(COMPUTE_SETS)
    monkeypatch.setitem(sys.modules, "polars", None)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(
        MissingExtraError, match=r"to_polars\(\) needs polars, which is not installed: pip install 'pva\[dataframes\]'"
    ):
        rows.to_polars()
    with pytest.raises(pva.PvaError, match=r"pip install 'pva\[dataframes\]'"):
        report.sql_stream(COMPUTE_SETS).to_pandas()
    monkeypatch.setitem(sys.modules, "duckdb", None)
    with pytest.raises(ImportError, match=r"pip install 'pva\[query\]'"):
        report.duckdb()


def _digest(path) -> str:
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def test_report_duckdb_holds_the_report_tables(report, sample):
    before = _digest(sample.path)
    con = report.duckdb()
    tables = {name for (name,) in con.sql("SHOW TABLES").fetchall()}
    assert {"steps", "steps_by_ipu", "compute_sets", "memory_by_tile"} <= tables
    assert "matrix_chunks" not in tables
    assert con.sql("SELECT count(*) FROM steps").fetchall() == [(report.row_count("steps"),)]
    memory = report.compilation.memoryArray("total.includingGaps")
    assert con.sql("SELECT sum(total_including_gaps) FROM memory_by_tile").fetchall() == [(int(memory.sum()),)]
    joined = con.sql(
        "SELECT s.type, sum(b.cycles) AS cycles FROM steps s JOIN steps_by_ipu b ON b.step_id = s.id "
        "GROUP BY s.type ORDER BY s.type"
    ).fetchall()
    assert joined == [
        tuple(r)
        for r in report.sql(
            "SELECT s.type, sum(b.cycles) FROM steps s JOIN steps_by_ipu b ON b.step_id = s.id GROUP BY s.type ORDER BY s.type"
        )
    ]
    with pytest.raises(duckdb.Error):
        con.sql(f"SELECT * FROM read_csv('{sample.path}')").fetchall()
    con.close()
    assert _digest(sample.path) == before


def test_report_duckdb_without_the_adbc_driver_reads_the_same(report, monkeypatch):
    import formats.pop.arrow_sqlite

    query = "SELECT * FROM steps_by_ipu ORDER BY step_id, ipu"
    native = report.duckdb(["steps_by_ipu"]).sql(query).fetchall()
    monkeypatch.setattr(formats.pop.arrow_sqlite, "adbc_connect", lambda path: None)
    assert report.duckdb(["steps_by_ipu"]).sql(query).fetchall() == native
    assert len(native) == report.row_count("steps_by_ipu") == 22


def test_report_duckdb_named_tables(report):
    con = report.duckdb(["compute_sets"])
    assert con.sql("SELECT name FROM compute_sets ORDER BY compute_set").fetchall() == [(n,) for _i, n, _v in EXPECTED]
    with pytest.raises(duckdb.CatalogException):
        con.sql("SELECT * FROM steps")
    with pytest.raises(pva.InvalidInputError, match="no table 'nosuch' in the report"):
        report.duckdb(["nosuch"])


def test_fleet_query_stream(sample, tmp_path):
    from pva.analysis.fleet_query import query_stream

    root = tmp_path / "runs"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir(parents=True)
    shutil.copyfile(sample.path, root / "a" / "profile.pop")
    shutil.copyfile(sample.path, root / "b" / "profile.pop")
    sql = "SELECT report, count(*) AS steps FROM steps GROUP BY report ORDER BY report"
    expected = [("a/profile.pop", 11), ("b/profile.pop", 11)]
    assert query_stream(root, sql).to_polars().rows() == expected
    assert query_stream(root, sql).to_pandas()["steps"].tolist() == [11, 11]
    assert pa.table(query_stream(root, sql)).to_pylist() == [{"report": r, "steps": n} for r, n in expected]
    assert pl.DataFrame(query_stream(root, sql)).rows() == expected
    stream = query_stream(root, sql)
    assert stream.columns == ["report", "steps"]
    assert list(stream.rows) == expected
    with pytest.raises(pva.InvalidInputError, match="already read"):
        stream.to_arrow()
