"""Generated columns, views and triggers planted in a report are never evaluated (every table is read by
the names of its stored columns) and `pva check` flags them."""

from __future__ import annotations

import json
import os

import hostile_inputs
import pytest

from formats.fleet import sql as fleet_sql
from pva.cli import main


@pytest.fixture(scope="module")
def planted(sample, tmp_path_factory):
    return hostile_inputs.unevaluable_column(sample.path, tmp_path_factory.mktemp("planted") / "planted.pop")


def test_check_flags_a_generated_column_without_evaluating_it(planted, capsys):
    assert main(["check", planted]) == 1
    out = capsys.readouterr().out
    assert "table target: column planted is a generated (VIRTUAL) column, not part of the format" in out
    assert "integrity check not run: it would evaluate the generated column(s) target.planted" in out


def test_check_flags_views_and_triggers(sample, tmp_path, capsys):
    path = hostile_inputs.planted_view_and_trigger(sample.path, tmp_path / "v.pop")
    assert main(["check", path, "--json"]) == 1
    problems = json.loads(capsys.readouterr().out)["problems"]
    planted = {(p["location"], p["message"]) for p in problems if p["check"] == "planted"}
    assert planted == {
        ("view planted_view", "is not part of the format; pva never runs it"),
        ("trigger planted_trigger on table programs", "is not part of the format; pva never runs it"),
    }


def test_dataset_add_skips_a_report_with_a_planted_column(planted, tmp_path, capsys):
    assert main(["dataset", "add", str(tmp_path / "fleet"), planted, "--no-progress"]) == 1
    assert "planted: table target: column planted is a generated (VIRTUAL) column" in capsys.readouterr().err


@pytest.mark.parametrize("query", ["SELECT * FROM target", "SELECT num_tiles FROM target"])
def test_a_loose_query_reads_stored_columns_only(planted, capsys, query):
    pytest.importorskip("duckdb")
    assert main(["query", planted, query, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["num_tiles"] == 8 and "planted" not in rows[0]


def test_the_light_loose_reader_never_selects_every_column(planted):
    pytest.importorskip("adbc_driver_sqlite")
    report = fleet_sql._LooseReport(os.fspath(planted), ["steps"], light=True)
    try:
        assert report.target["num_tiles"] == 8 and "planted" not in report.target
    finally:
        report.close()


@pytest.mark.parametrize(
    "command",
    [
        ["summary", "{r}"],
        ["info", "{r}"],
        ["export", "{r}", "--format", "csv", "-o", "{d}/csv"],
        ["export", "{r}", "--format", "parquet", "-o", "{d}/pq"],
        ["html", "{r}", "-o", "{d}/r.html"],
    ],
    ids=lambda c: "-".join(c[:1] + c[2:4]),
)
def test_commands_read_a_report_with_a_planted_column_as_the_original(planted, tmp_path, command):
    assert main([a.format(r=planted, d=tmp_path) for a in command]) == 0


def test_check_type_checks_text_columns(sample, tmp_path, capsys):
    import shutil
    import sqlite3

    path = tmp_path / "blob.pop"
    shutil.copyfile(sample.path, path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE compute_sets SET name = x'00ff' WHERE compute_set = 1")
    conn.commit()
    conn.close()
    assert main(["check", str(path)]) == 1
    assert "table compute_sets: column name has 1 non-text value(s) [schema]" in capsys.readouterr().out


def test_a_collation_sqlite_does_not_have_is_refused_at_open(sample, tmp_path, capsys):
    import shutil
    import sqlite3

    path = tmp_path / "collation.pop"
    shutil.copyfile(sample.path, path)
    conn = sqlite3.connect(path)
    (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'programs'").fetchone()
    conn.execute("PRAGMA writable_schema = ON")
    bogus = sql.replace("name TEXT NOT NULL DEFAULT ''", "name TEXT NOT NULL DEFAULT '' COLLATE bogus", 1)
    conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = 'programs'", (bogus,))
    conn.commit()
    conn.close()
    assert main(["diff", str(path), sample.path]) == 2
    assert "'programs' uses collation 'bogus'; expected one of SQLite's" in capsys.readouterr().err
