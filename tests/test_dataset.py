"""Fleet datasets: `pva dataset add` (Parquet, Hive-partitioned, atomic per report), `pva query` over them,
trend and regressions, and the limits of `pva query`."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3

import numpy as np
import pyarrow.parquet as pq
import pytest

import pva.dataset
from formats.fleet import dataset as fds
from pva.cli import main

pytest.importorskip("duckdb")


def _copy(src: str, dst, sql: str | None = None):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(src, dst)
    if sql:
        conn = sqlite3.connect(dst)
        conn.executescript(sql)
        conn.commit()
        conn.close()
    return str(dst)


def _sqlite(path, sql):
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.fixture()
def fleet(sample, compile_only, tmp_path):
    """Three reports: the sample (sdk=1), the sample with every step 25% slower (sdk=2), and one without execution."""
    base = _copy(sample.path, tmp_path / "runs" / "a" / "profile.pop")
    slower = _copy(
        sample.path, tmp_path / "runs" / "b" / "profile.pop", "UPDATE steps_by_ipu SET cycles = cycles * 5 / 4;"
    )
    compiled = _copy(compile_only.path, tmp_path / "runs" / "c" / "profile.pop")
    data = tmp_path / "fleet"
    assert main(["dataset", "add", str(data), base, "--label", "sdk=1", "--no-progress"]) == 0
    assert main(["dataset", "add", str(data), slower, "--label", "sdk=2", "--no-progress"]) == 0
    assert main(["dataset", "add", str(data), compiled, "--no-progress"]) == 0
    return {"dir": str(data), "base": base, "slower": slower, "compiled": compiled}


def _rid(path) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()[:32]


def test_layout_report_ids_and_the_reports_table(fleet, sample, capsys):
    capsys.readouterr()
    root = fleet["dir"]
    ids = sorted(_rid(fleet[k]) for k in ("base", "slower", "compiled"))
    assert fds.committed_reports(root) == ids
    # Hive-style partitions, one file per report and table; no report_id column inside the files
    part = os.path.join(root, "steps", f"report_id={_rid(fleet['base'])}", "part-0.parquet")
    assert pq.read_schema(part).names == list(fds.base_schemas()["steps"].names)
    # the compile-only report has no steps: no partition is written for it
    assert not os.path.exists(os.path.join(root, "steps", f"report_id={_rid(fleet['compiled'])}"))
    reports = pva.dataset.query(
        root, "SELECT report_id, path, producer, format_version, num_tiles, labels FROM reports ORDER BY report_id"
    ).to_pylist()
    assert [r["report_id"] for r in reports] == ids
    by_id = {r["report_id"]: r for r in reports}
    assert by_id[_rid(fleet["base"])]["path"] == os.path.abspath(fleet["base"])
    assert by_id[_rid(fleet["base"])]["labels"] == '{"sdk": "1"}'
    assert {r["producer"] for r in reports} == {"pva-tests"}
    assert {r["num_tiles"] for r in reports} == {8}
    assert {r["format_version"] for r in reports} == {"1.0"}


def test_rows_equal_the_reports(fleet, sample):
    root = fleet["dir"]
    got = pva.dataset.query(
        root, "SELECT report_id, tile, total_including_gaps FROM memory_by_tile ORDER BY report_id, tile"
    ).to_pylist()
    expected = []
    for key in ("base", "slower", "compiled"):
        expected += [
            {"report_id": _rid(fleet[key]), "tile": t, "total_including_gaps": v}
            for t, v in _sqlite(fleet[key], "SELECT tile, total_including_gaps FROM memory_by_tile")
        ]
    assert got == sorted(expected, key=lambda r: (r["report_id"], r["tile"]))
    # a per-tile matrix: one row per matrix row, one value per tile
    rows = pva.dataset.query(
        root,
        f"SELECT row_index, cells FROM step_cycles_by_tile "
        f"WHERE report_id = '{_rid(fleet['base'])}' ORDER BY row_index",
    ).to_pylist()
    matrix = sample.matrix("step_cycles_by_tile")
    assert [r["row_index"] for r in rows] == list(range(matrix.shape[0]))
    assert np.array_equal(np.array([r["cells"] for r in rows], dtype=np.uint64), matrix)


def test_adding_again_is_a_no_op(fleet, capsys):
    capsys.readouterr()
    assert (
        main(["dataset", "add", fleet["dir"], "--from", os.path.dirname(os.path.dirname(fleet["base"])), "--json"]) == 0
    )
    outcome = json.loads(capsys.readouterr().out)
    assert (outcome["added"], outcome["present"], outcome["skipped"]) == (0, 3, 0)
    assert len(fds.committed_reports(fleet["dir"])) == 3


def test_bad_input_is_skipped_and_listed(sample, tmp_path, capsys):
    notes = tmp_path / "notes.pop"
    notes.write_text("not a report")
    damaged = _copy(sample.path, tmp_path / "damaged.pop", "UPDATE target SET num_tiles = 9;")
    truncated = tmp_path / "truncated.pop"
    with open(sample.path, "rb") as handle:
        truncated.write_bytes(handle.read()[:20000])
    data = tmp_path / "fleet"
    assert main(["dataset", "add", str(data), str(notes), sample.path, damaged, str(truncated), "--json"]) == 1
    outcome = json.loads(capsys.readouterr().out)
    status = {os.path.basename(r["path"]): (r["status"], r.get("reason", "")) for r in outcome["reports"]}
    assert status["profile.pop"] == ("added", "")
    assert status["notes.pop"][0] == "skipped" and "expected a profile report" in status["notes.pop"][1]
    assert status["damaged.pop"][0] == "skipped" and "num_tiles" in status["damaged.pop"][1]
    assert status["truncated.pop"][0] == "skipped"
    # nothing of a skipped report is in the dataset
    assert fds.committed_reports(data) == [_rid(sample.path)]
    for table in os.listdir(data):
        if os.path.isdir(data / table) and table != fds.STAGING:
            assert os.listdir(data / table) == [f"report_id={_rid(sample.path)}"]
    # the text output lists what was skipped, one line each, at the end
    assert main(["dataset", "add", str(data), str(notes)]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith(f"{data}: 0 added, 0 already present, 1 skipped")
    assert captured.err.splitlines() == [f"skipped {notes}: {status['notes.pop'][1]}"]


def test_refuses_a_directory_that_is_not_a_dataset(sample, tmp_path, capsys):
    other = tmp_path / "thesis"
    other.mkdir()
    (other / "thesis.tex").write_text("mine")
    assert main(["dataset", "add", str(other), sample.path]) == 2
    assert "not a pva dataset" in capsys.readouterr().err
    assert os.listdir(other) == ["thesis.tex"]


def test_an_interrupted_add_leaves_whole_reports(sample, tmp_path, monkeypatch):
    data = str(tmp_path / "fleet")
    pva.dataset.add_reports(data, [sample.path])
    second = _copy(sample.path, tmp_path / "b.pop", "UPDATE steps_by_ipu SET cycles = cycles + 1;")
    real_rename = os.rename
    calls = []

    def crash(src, dst):
        calls.append(dst)
        if len(calls) == 5:
            raise KeyboardInterrupt  # a kill in the middle of the commit
        real_rename(src, dst)

    monkeypatch.setattr(fds.os, "rename", crash)
    with pytest.raises(KeyboardInterrupt):
        pva.dataset.add_reports(data, [second])
    monkeypatch.setattr(fds.os, "rename", real_rename)
    # four of its partitions are in place, but readers see only the committed report
    assert sum(os.path.isdir(os.path.join(data, t, f"report_id={_rid(second)}")) for t in os.listdir(data)) == 4
    assert pva.dataset.query(data, "SELECT DISTINCT report_id FROM steps").to_pylist() == [
        {"report_id": _rid(sample.path)}
    ]
    # the next add removes what was left and adds the report whole
    [outcome] = pva.dataset.add_reports(data, [second])
    assert outcome.status == "added"
    assert pva.dataset.query(data, "SELECT count(DISTINCT report_id) AS n FROM steps").to_pylist() == [{"n": 2}]
    staging = os.path.join(data, fds.STAGING)
    assert not [n for t in os.listdir(staging) for n in os.listdir(os.path.join(staging, t))]


def test_schema_evolves_with_nulls_in_older_partitions(sample, tmp_path):
    data = str(tmp_path / "fleet")
    pva.dataset.add_reports(data, [sample.path])
    newer = _copy(
        sample.path,
        tmp_path / "newer.pop",
        "ALTER TABLE steps ADD COLUMN energy_nj INTEGER; UPDATE steps SET energy_nj = id * 10;",
    )
    [outcome] = pva.dataset.add_reports(data, [newer])
    assert outcome.status == "added"
    with open(os.path.join(data, fds.MANIFEST)) as handle:
        manifest = json.load(handle)
    columns = [c[0] for c in manifest["tables"]["steps"]["columns"]]
    assert columns[-1] == "energy_nj" and columns[:-1] == list(fds.base_schemas()["steps"].names)
    rows = pva.dataset.query(
        data,
        "SELECT report_id, count(*) AS steps, count(energy_nj) AS measured, "
        "sum(energy_nj) AS energy FROM steps GROUP BY report_id ORDER BY steps",
    ).to_pylist()
    steps = len(sample.rows("steps"))
    by_id = {r["report_id"]: r for r in rows}
    assert by_id[_rid(sample.path)] == {"report_id": _rid(sample.path), "steps": steps, "measured": 0, "energy": None}
    assert by_id[_rid(newer)]["measured"] == steps
    assert by_id[_rid(newer)]["energy"] == 10 * sum(range(steps))
    # a column never changes type: a report where it holds text is skipped, nothing of it written
    other = _copy(
        sample.path,
        tmp_path / "other.pop",
        "ALTER TABLE steps ADD COLUMN energy_nj TEXT; UPDATE steps SET energy_nj = 'high';",
    )
    [skipped] = pva.dataset.add_reports(data, [other])
    assert skipped.status == "skipped" and "column 'energy_nj' is string in this report but int64" in skipped.reason
    assert len(fds.committed_reports(data)) == 2
    # the older partition was never rewritten
    old_file = os.path.join(data, "steps", f"report_id={_rid(sample.path)}", "part-0.parquet")
    assert "energy_nj" not in pq.read_schema(old_file).names


def test_trend_and_regressions(fleet, capsys):
    root = fleet["dir"]
    trend = pva.dataset.trend(root, "cycles", by="sdk").to_pylist()
    assert [r["by_value"] for r in trend] == ["1", "2"]
    base_total = _sqlite(fleet["base"], "SELECT sum(total) FROM cycle_totals")[0][0]
    assert trend[0]["value"] == base_total
    per_cs = pva.dataset.trend(root, "compute_set_cycles", by="sdk").to_pylist()
    expected = dict(
        _sqlite(
            fleet["base"],
            "SELECT cs.name, sum(b.cycles) FROM steps s JOIN steps_by_ipu b "
            "ON b.step_id = s.id JOIN compute_sets cs ON cs.compute_set = s.compute_set "
            "GROUP BY cs.name",
        )
    )
    assert {r["key"]: r["value"] for r in per_cs if r["by_value"] == "1"} == expected
    table = pva.dataset.regressions(root, "sdk=1", "sdk=2", threshold=0.1).to_pylist()
    assert {r["key"] for r in table} == set(expected)
    for row in table:
        assert row["ratio"] == pytest.approx(1.25, rel=0.02)
        assert row["regressed"] is True
    capsys.readouterr()
    assert main(["dataset", "regressions", root, "sdk=1", "sdk=2", "--threshold", "0.1", "--json"]) == 1
    assert len(json.loads(capsys.readouterr().out)) == len(expected)
    assert main(["dataset", "regressions", root, "sdk=1", "sdk=2", "--threshold", "0.3"]) == 0
    assert main(["dataset", "regressions", root, "sdk=2", "sdk=1"]) == 0
    capsys.readouterr()
    assert main(["dataset", "trend", root, "overflow_tiles", "--csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "by_value,report_id,key,value" and len(lines) == 4


def test_query_limits(fleet, capsys):
    root = fleet["dir"]
    assert main(["query", root, "SELECT 1; SELECT 2"]) == 2
    assert "expected one SQL statement, found 2" in capsys.readouterr().err
    assert main(["query", root, "CALL enable_logging('QueryLog')"]) == 2
    assert "only SELECT queries are allowed, found a CALL statement" in capsys.readouterr().err
    assert main(["query", root, "INSTALL sqlite"]) == 2
    assert main(["query", root, "SELECT count(*) FROM range(1000000000000) a", "--timeout", "0.5"]) == 2
    assert "time limit of 0.5 s" in capsys.readouterr().err
    assert main(["query", root, "SELECT list(range) FROM range(200000000)", "--memory-limit", "64MB"]) == 2
    assert "memory limit of 64MB" in capsys.readouterr().err
    assert (
        main(
            [
                "query",
                root,
                (
                    "SELECT current_setting('autoinstall_known_extensions') AS i, "
                    "current_setting('autoload_known_extensions') AS l"
                ),
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out) == [{"i": False, "l": False}]
    # files of the dataset are readable through its tables only; nothing outside it at all
    assert main(["query", root, "SELECT * FROM read_csv('/etc/hostname')"]) == 2
    assert "file system operations are disabled" in capsys.readouterr().err


def test_query_streams_csv(fleet, capsys):
    assert main(["query", fleet["dir"], "SELECT range AS n FROM range(20000)", "--csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "n" and lines[1:] == [str(i) for i in range(20000)]


def test_loose_reports_suggest_a_dataset(sample, tmp_path, capsys):
    for i in range(20):
        _copy(sample.path, tmp_path / "runs" / f"r{i:02}" / "profile.pop")
    assert (
        main(
            [
                "query",
                str(tmp_path / "runs"),
                ("SELECT count(DISTINCT report) AS n, count(*) AS rows FROM steps"),
                "--json",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert json.loads(captured.out) == [{"n": 20, "rows": 20 * len(sample.rows("steps"))}]
    assert "note: read 20 reports" in captured.err and "pva dataset add DATASET --from" in captured.err
    # every column, when the query asks for *
    assert main(["query", str(tmp_path / "runs" / "r00"), "SELECT * FROM steps ORDER BY id LIMIT 1", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert list(row) == ["report"] + list(fds.base_schemas()["steps"].names)


def test_a_full_disk_stops_the_add_with_exit_2(sample, compile_only, tmp_path, monkeypatch, capsys):
    data = tmp_path / "fleet"
    assert main(["dataset", "add", str(data), sample.path]) == 0
    real_write = fds.pq.write_table

    def full(table, where, **options):
        if "report_id=" + _rid(compile_only.path) in str(where):
            raise OSError(28, "No space left on device")
        return real_write(table, where, **options)

    monkeypatch.setattr(fds.pq, "write_table", full)
    assert main(["dataset", "add", str(data), compile_only.path]) == 2
    assert "cannot write the dataset (no space left on device)" in capsys.readouterr().err
    assert fds.committed_reports(data) == [_rid(sample.path)]
    assert not [
        n
        for t in os.listdir(data)
        if os.path.isdir(data / t) and t != fds.STAGING
        for n in os.listdir(data / t)
        if _rid(compile_only.path) in n
    ]
    assert not [n for t in os.listdir(data / fds.STAGING) for n in os.listdir(data / fds.STAGING / t)]


def test_the_help_example_runs_on_a_dataset(fleet):
    """The example of `pva query --help` answers on a dataset what each report's own tables say."""
    from pva.file_operations import QUERY_EXAMPLE

    rows = pva.dataset.query(fleet["dir"], QUERY_EXAMPLE).to_pylist()
    expected = {}
    for key in ("base", "slower", "compiled"):
        ((total,),) = _sqlite(fleet[key], "SELECT sum(total_including_gaps) FROM memory_by_tile")
        expected[os.path.abspath(fleet[key])] = total
    assert {os.path.abspath(row["path"]): row["bytes"] for row in rows} == expected
    assert [row["bytes"] for row in rows] == sorted(expected.values(), reverse=True)
