"""`pva query`: SQL over a directory of reports through DuckDB, each row tagged with its report."""

from __future__ import annotations

import json
import shutil
import sqlite3

import pytest

import pva
from pva.cli import main

duckdb = pytest.importorskip("duckdb")


@pytest.fixture()
def runs(sample, compile_only, tmp_path):
    root = tmp_path / "runs"
    (root / "a").mkdir(parents=True)
    (root / "b" / "deeper").mkdir(parents=True)
    shutil.copyfile(sample.path, root / "a" / "profile.pop")
    shutil.copyfile(compile_only.path, root / "b" / "deeper" / "profile.pop")
    conn = sqlite3.connect(root / "b" / "deeper" / "profile.pop")
    conn.execute("UPDATE memory_by_tile SET total_including_gaps = total_including_gaps + 1000")
    conn.commit()
    conn.close()
    (root / "notes.txt").write_text("not a report")
    return root


def test_rows_are_tagged_with_their_report(runs, sample, capsys):
    assert (
        main(
            [
                "query",
                str(runs),
                (
                    "SELECT report, sum(total_including_gaps) AS bytes FROM memory_by_tile "
                    "GROUP BY report ORDER BY report"
                ),
                "--json",
            ]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    base = sum(row[2] for row in sample.rows("memory_by_tile"))
    assert rows == [
        {"report": "a/profile.pop", "bytes": base},
        {"report": "b/deeper/profile.pop", "bytes": base + 8 * 1000},
    ]


def test_reports_table_and_joins_within_a_report(runs, capsys):
    assert main(["query", str(runs), "SELECT report, num_tiles, producer FROM reports ORDER BY report", "--csv"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "report,num_tiles,producer",
        "a/profile.pop,8,pva-tests",
        "b/deeper/profile.pop,8,pva-tests",
    ]
    assert (
        main(
            [
                "query",
                str(runs),
                (
                    "SELECT s.report, count(*) AS n FROM steps s JOIN programs p "
                    "ON p.id = s.program AND p.report = s.report GROUP BY s.report"
                ),
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out) == [{"report": "a/profile.pop", "n": 10}]


def test_file_access_is_disabled(runs, tmp_path, capsys):
    target = tmp_path / "leak.csv"
    assert main(["query", str(runs), f"COPY memory_by_tile TO '{target}'"]) == 2
    assert "only SELECT queries are allowed, found a COPY statement" in capsys.readouterr().err
    assert not target.exists()
    assert main(["query", str(runs), "SELECT * FROM read_csv('/etc/hostname')"]) == 2
    assert "file system operations are disabled" in capsys.readouterr().err


def test_bad_directories(tmp_path, capsys):
    assert main(["query", str(tmp_path / "missing"), "SELECT 1"]) == 2
    assert "no such directory" in capsys.readouterr().err
    assert main(["query", str(tmp_path), "SELECT 1"]) == 2
    assert "no *.pop reports found" in capsys.readouterr().err


def test_queries_in_one_process_see_only_their_own_reports(runs):
    """Loose queries share one locked engine; each holds its tables on its own cursor, dropped at the end."""
    from pva.analysis.fleet_query import query_reports

    sql = "SELECT report, count(*) AS n FROM compute_sets GROUP BY report ORDER BY report"
    both = query_reports(runs, sql).to_pylist()
    one = query_reports(runs / "a", sql).to_pylist()
    again = query_reports(runs, sql).to_pylist()
    assert [r["report"] for r in both] == ["a/profile.pop", "b/deeper/profile.pop"]
    assert one == [{"report": "profile.pop", "n": both[0]["n"]}]
    assert again == both
    assert query_reports(runs / "a", "SELECT report FROM reports").to_pylist() == [{"report": "profile.pop"}]
    with pytest.raises(pva.PvaError, match="nosuch does not exist"):
        query_reports(runs / "a", "SELECT * FROM compute_sets JOIN nosuch USING (report)")
