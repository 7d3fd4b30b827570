"""`pva sql` and `pva tables`: read-only SQL and the table listing."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import pathlib
import shutil

import pytest

from pva.cli import main


def _digest(path) -> str:
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


@pytest.fixture()
def report(sample, tmp_path):
    path = tmp_path / "profile.pop"
    shutil.copyfile(sample.path, path)
    return path


def test_select_as_aligned_table(report, capsys):
    assert main(["sql", str(report), "SELECT id, type, name FROM programs WHERE id < 3 ORDER BY id"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["id", "type", "name"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    assert lines[2].split() == ["0", "Sequence"]
    assert lines[4].split() == ["2", "StreamCopyMid", "copyIn"]


def test_select_as_json_and_csv(report, capsys):
    assert main(["sql", str(report), "SELECT compute_set, name FROM compute_sets ORDER BY 1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == [
        {"compute_set": 0, "name": "init/copy"},
        {"compute_set": 1, "name": "layer1/fwd"},
        {"compute_set": 2, "name": "layer1/bwd"},
    ]
    assert main(["sql", str(report), "SELECT name, size FROM vertex_types ORDER BY id", "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["name", "size"]
    assert rows[2] == ["popops::ScaledAddSupervisor<float,float,true>", "16"]


def test_parameters(report, capsys):
    assert main(["sql", str(report), "SELECT name FROM programs WHERE id = ?", "--param", "4", "--csv"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "layer1/fwd/ExchangePre"


@pytest.mark.parametrize(
    "statement, refused",
    [
        ("DELETE FROM programs", "refused DELETE"),
        ("UPDATE programs SET name = 'x'", "refused UPDATE"),
        ("INSERT INTO programs (id, type) VALUES (99, 'Sync')", "refused INSERT"),
        ("DROP TABLE programs", "refused DROP TABLE"),
        ("CREATE TABLE t (x)", "refused CREATE TABLE"),
        ("ATTACH DATABASE 'other.db' AS other", "refused ATTACH"),
        ("SELECT load_extension('libevil')", "refused function load_extension()"),
        ("PRAGMA user_version = 5", "refused PRAGMA user_version = 5"),
        ("PRAGMA journal_mode = WAL", "refused PRAGMA journal_mode"),
        ("VACUUM", "refused"),
    ],
)
def test_writes_attach_and_extensions_are_refused_and_the_file_is_unchanged(report, capsys, statement, refused):
    before = _digest(report)
    assert main(["sql", str(report), statement]) == 2
    err = capsys.readouterr().err
    assert refused in err and "read-only" in err and str(report) in err
    assert _digest(report) == before
    assert sorted(p.name for p in report.parent.iterdir()) == ["profile.pop"]


def test_read_only_pragmas_and_recursive_queries_work(report, capsys):
    assert main(["sql", str(report), "PRAGMA table_info(programs)", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["name"] == "id"
    assert (
        main(
            [
                "sql",
                str(report),
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5) SELECT sum(x) AS s FROM c",
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out) == [{"s": 15}]


def test_sql_errors_are_one_line(report, capsys):
    assert main(["sql", str(report), "SELEC name FROM programs"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "syntax error" in err
    assert main(["sql", str(report), "SELECT 1; SELECT 2"]) == 2
    assert main(["sql", str(report), "   "]) == 2


def test_timeout_stops_a_runaway_query(report, capsys):
    assert (
        main(
            [
                "sql",
                str(report),
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
                "--timeout",
                "0.2",
            ]
        )
        == 2
    )
    assert "stopped after 0.2 s" in capsys.readouterr().err


def test_tables_lists_row_counts_and_descriptions(report, capsys):
    assert main(["tables", str(report), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["programs"]["rows"] == 18
    assert rows["programs"]["description"].startswith("Programs of every Program.Type")
    assert rows["step_cycles_by_tile"]["kind"] == "matrix" and rows["step_cycles_by_tile"]["rows"] == 11
    assert "11 x 8 cycles" in rows["step_cycles_by_tile"]["description"]
    assert main(["tables", str(report), "--columns", "steps_by_ipu", "--csv"]) == 0
    out = capsys.readouterr().out
    assert "cycles_base,INTEGER,cycle counter of this IPU at the start of the run [cycles]" in out
    assert main(["tables", str(report), "--columns", "nope"]) == 2


def test_sql_on_a_trace_file(simulated, capsys):
    (trace,) = simulated.glob("*.pvti")
    before = _digest(trace)
    assert main(["sql", str(trace), "SELECT label FROM events WHERE parent IS NULL ORDER BY id LIMIT 1", "--csv"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "label" and len(out) == 2
    assert main(["sql", str(trace), "DELETE FROM events"]) == 2
    assert _digest(trace) == before


def test_the_help_example_runs_on_a_report(report, capsys):
    """The example of `pva sql --help` answers on a real report what the tables say."""
    import sqlite3
    from collections import Counter

    from pva.file_operations import SQL_EXAMPLE

    assert main(["sql", str(report), SQL_EXAMPLE, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    conn = sqlite3.connect(f"file:{report}?mode=ro", uri=True)
    try:
        names = dict(conn.execute("SELECT compute_set, name FROM compute_sets"))
        step_sets = dict(conn.execute("SELECT id, compute_set FROM steps"))
        cycles: Counter = Counter()
        for step, value in conn.execute("SELECT step_id, cycles FROM steps_by_ipu"):
            if step_sets.get(step) is not None:
                cycles[names[step_sets[step]]] += value
    finally:
        conn.close()
    expected = sorted(cycles.values(), reverse=True)[:10]
    assert len(rows) == min(10, len(cycles)) > 0
    assert [row["cycles"] for row in rows] == expected
    assert all(cycles[row["name"]] == row["cycles"] for row in rows)
