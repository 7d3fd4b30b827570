"""The same fleet SQL on Apache Spark (PySpark, local[2]) and on DuckDB over one dataset gives equal results."""

from __future__ import annotations

import math
import os
import shutil
import sqlite3
import subprocess

import pytest

import pva.dataset

pytestmark = pytest.mark.slow


def _java() -> str | None:
    java = shutil.which("java") or (
        os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") else None
    )
    if not java or not os.path.exists(java):
        return None
    try:
        subprocess.run([java, "-version"], capture_output=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return java


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'pva[spark]')")
    if _java() is None:
        pytest.skip("no Java runtime: install Debian's default-jre-headless (.ci/run does) to run Spark")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("pva-fleet-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _copy(src, dst, sql=None) -> str:
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(src, dst)
    if sql:
        conn = sqlite3.connect(dst)
        conn.executescript(sql)
        conn.commit()
        conn.close()
    return str(dst)


@pytest.fixture(scope="module")
def fleet(sample, compile_only, tmp_path_factory, spark):
    root = tmp_path_factory.mktemp("spark-fleet")
    data = str(root / "fleet")
    groups = {
        "sdk=1": [
            _copy(sample.path, root / "a.pop"),
            _copy(sample.path, root / "b.pop", "UPDATE steps_by_ipu SET cycles = cycles + 7;"),
        ],
        "sdk=2": [
            _copy(
                sample.path,
                root / "c.pop",
                "UPDATE steps_by_ipu SET cycles = cycles * 3 / 2 WHERE step_id % 2 = 0;"
                "UPDATE memory_by_tile SET overflowed_including_gaps = 96 WHERE tile < 3;",
            ),
            _copy(
                compile_only.path,
                root / "d.pop",
                "UPDATE memory_by_tile SET overflowed_including_gaps = 8 WHERE tile = 5;",
            ),
        ],
    }
    for label, paths in groups.items():
        outcomes = pva.dataset.add_reports(data, paths, labels=dict([label.split("=")]))
        assert [o.status for o in outcomes] == ["added", "added"]
    views = pva.dataset.register_spark(spark, data)
    assert {"reports", "report_labels", "steps", "memory_by_tile", "step_cycles_by_tile"} <= set(views)
    return data


QUERIES = {
    "per-compute-set cycle trend": pva.dataset.trend_sql("compute_set_cycles", by="sdk"),
    "memory-overflow tiles per report": (
        "SELECT m.report_id, r.labels, m.tile, m.overflowed_including_gaps FROM memory_by_tile m "
        "JOIN reports r ON r.report_id = m.report_id WHERE m.overflowed_including_gaps > 0 "
        "ORDER BY m.report_id, m.tile"
    ),
    "overflow tiles trend": pva.dataset.trend_sql("overflow_tiles", by="sdk"),
    "top regressions between two labelled groups": pva.dataset.regressions_sql("sdk=1", "sdk=2", threshold=0.01),
    "per-tile matrix rows": (
        "SELECT report_id, row_index, cells FROM step_cycles_by_tile ORDER BY report_id, row_index"
    ),
}


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9)
    return a == b


@pytest.mark.parametrize("name", list(QUERIES))
def test_spark_and_duckdb_agree(spark, fleet, name):
    sql = QUERIES[name]
    on_duckdb = [tuple(r.values()) for r in pva.dataset.query(fleet, sql).to_pylist()]
    on_spark = [tuple(r) for r in spark.sql(sql).collect()]
    assert on_duckdb, f"{name}: no rows (the test would prove nothing)"
    assert len(on_spark) == len(on_duckdb)
    for row_spark, row_duck in zip(on_spark, on_duckdb):
        assert all(_same(x, y) for x, y in zip(row_spark, row_duck)), (name, row_spark, row_duck)


def test_regressions_found_on_spark(spark, fleet):
    rows = spark.sql(pva.dataset.regressions_sql("sdk=1", "sdk=2", threshold=0.01)).collect()
    assert rows and rows[0]["regressed"] is True and rows[0]["ratio"] > 1.01
    assert spark.sql("SELECT count(*) AS n FROM reports").collect()[0]["n"] == 4
