"""`pva sql` limits on by default: time and memory (exit 2 when hit), and table output streamed."""

from __future__ import annotations

import pytest
from test_decoder_bounds import MB, probe

from formats.pop.readonly_sql import DEFAULT_MEMORY_LIMIT, DEFAULT_TIMEOUT
from pva.cli import build_parser


def test_limits_are_on_by_default():
    args = build_parser().parse_args(["sql", "r.pop", "SELECT 1"])
    assert args.timeout == DEFAULT_TIMEOUT == 60
    assert args.memory_limit * MB == DEFAULT_MEMORY_LIMIT == 1 << 30


def test_a_query_past_its_memory_limit_exits_2_within_the_limit(sample):
    result = probe(
        "cli",
        sample.path,
        "sql",
        sample.path,
        "--memory-limit",
        "128",
        "SELECT length(randomblob(100000000) || randomblob(100000000) || randomblob(100000000))",
    )
    assert result["outcome"] == "exit 2"
    assert result["peak"] < 128 * MB + 150 * MB


def test_a_runaway_recursive_query_stops_at_its_time_limit(sample):
    result = probe(
        "cli",
        sample.path,
        "sql",
        sample.path,
        "--timeout",
        "1",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
    )
    assert result["outcome"] == "exit 2"
    assert result["seconds"] < 10


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["table", "csv"])
def test_table_output_is_streamed(sample, fmt, tmp_path):
    rows = 3_000_000
    query = (
        f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT {rows}) "
        f"SELECT x, 'some text ' || x AS label FROM c"
    )
    result = probe("cli", sample.path, "sql", sample.path, "--format", fmt, query)
    assert result["outcome"] == "exit 0"
    assert result["peak"] < 200 * MB  # the rows as Python strings would take several hundred MB
