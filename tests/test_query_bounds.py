"""`pva query`: the query's size is bounded before DuckDB plans it, a watchdog holds the time and memory
limits while it plans and runs, and DuckDB's temporary files stay in a private directory of pva's."""

from __future__ import annotations

import os
import tempfile
import time

import hostile_inputs
import pytest

from formats.fleet.limits import Limits
from formats.fleet.query_bounds import Watchdog
from pva.cli import main

pytest.importorskip("duckdb")


def test_a_query_whose_ctes_double_at_each_level_is_refused_before_planning(sample, capsys):
    started = time.monotonic()
    status = main(["query", sample.path, hostile_inputs.nested_union_query(20), "--timeout", "10"])
    assert status == 2 and time.monotonic() - started < 5
    assert "expands to more than 100,000 query nodes" in capsys.readouterr().err


def test_a_materialized_cte_is_not_counted_at_every_reference(sample, capsys):
    query = hostile_inputs.nested_union_query(20).replace("NOT MATERIALIZED", "MATERIALIZED")
    parts = query.split(" SELECT count(*)")
    assert main(["query", sample.path, parts[0] + " SELECT 1 AS one", "--format", "csv"]) == 0
    assert capsys.readouterr().out.split() == ["one", "1"]


def test_a_modest_cte_query_runs(sample, capsys):
    assert main(["query", sample.path, hostile_inputs.nested_union_query(6), "--format", "csv"]) == 0
    assert capsys.readouterr().out.split() == ["count_star()", "64"]


def test_a_query_text_beyond_the_bound_is_refused(sample, capsys):
    query = hostile_inputs.long_union_query(4000)
    assert main(["query", sample.path, query]) == 2
    assert f"the query is {len(query):,} bytes long; expected at most 65,536" in capsys.readouterr().err


def test_the_watchdog_calls_on_stuck_when_the_engine_ignores_its_interrupt():
    class Deaf:
        interrupts = 0

        def interrupt(self):
            self.interrupts += 1

    stuck = []
    con = Deaf()
    dog = Watchdog(con, Limits(timeout=0.05, memory="1GB", on_stuck=stuck.append))
    try:
        deadline = time.monotonic() + 5
        while not stuck and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        dog.stop()
    assert stuck == ["time"] and con.interrupts == 1 and dog.reason == "time"


def test_the_watchdog_interrupts_on_memory_growth():
    class Deaf:
        def interrupt(self):
            pass

    dog = Watchdog(Deaf(), Limits(timeout=None, memory="1MB"))
    ballast = bytearray(200 << 20)  # the process grows by far more than the limit and its room
    ballast[::4096] = b"x" * len(ballast[::4096])
    try:
        deadline = time.monotonic() + 5
        while dog.reason is None and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        dog.stop()
        del ballast
    assert dog.reason == "memory"


def test_duckdb_temp_directory_in_the_working_directory_is_not_readable(sample, tmp_path, monkeypatch, capsys):
    (tmp_path / ".tmp").mkdir()
    (tmp_path / ".tmp" / "secret.txt").write_text("secret")
    monkeypatch.chdir(tmp_path)
    assert main(["query", sample.path, "SELECT content FROM read_text('.tmp/secret.txt')"]) == 2
    captured = capsys.readouterr()
    assert "secret" not in captured.out


def test_a_dataset_query_leaves_no_temporary_directory(fleet_dir, capsys):
    def ours():
        return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("pva-duckdb-")}

    before = ours()
    assert main(["query", fleet_dir, "SELECT count(*) AS n FROM reports", "--format", "csv"]) == 0
    assert capsys.readouterr().out.split() == ["n", "1"]
    assert ours() == before


@pytest.fixture()
def fleet_dir(sample, tmp_path):
    import pva.dataset

    path = str(tmp_path / "fleet")
    pva.dataset.add_reports(path, [sample.path])
    return path


def test_a_long_list_of_constants_within_the_text_bound_runs(sample, capsys):
    values = ",".join(str(i) for i in range(12_000))  # about 64 KB, 12,000 nodes
    query = f"SELECT count(*) AS n FROM steps WHERE id IN ({values})"
    assert len(query) < 65_536
    assert main(["query", sample.path, query, "--format", "csv"]) == 0
    assert capsys.readouterr().out.split()[0] == "n"
