"""The `pva sql` authorizer covers every row of a query, not only the first, and names what it refused."""

from __future__ import annotations

import pytest

from pva.cli import main


@pytest.mark.parametrize(
    "query",
    [
        "SELECT 1 UNION ALL SELECT * FROM pragma_hard_heap_limit",
        "SELECT 1 AS x UNION ALL SELECT 2 UNION ALL SELECT * FROM pragma_soft_heap_limit",
        "WITH one(x) AS (SELECT 1) SELECT x FROM one UNION ALL SELECT * FROM pragma_hard_heap_limit",
    ],
)
def test_a_pragma_reached_after_the_first_row_is_refused(sample, capsys, query):
    assert main(["sql", sample.path, query]) == 2
    captured = capsys.readouterr()
    assert "refused PRAGMA" in captured.err and "heap_limit" in captured.err
    assert "1073741824" not in captured.out


def test_a_refused_pragma_table_is_named_not_an_update(sample, capsys):
    assert main(["sql", sample.path, "SELECT * FROM pragma_hard_heap_limit"]) == 2
    assert "refused PRAGMA hard_heap_limit: pva sql is read-only" in capsys.readouterr().err


def test_an_sql_error_is_not_reported_as_a_refusal(sample, capsys):
    assert main(["sql", sample.path, "SELECT * FROM pragma_soft_heap_limit(1)"]) == 2
    assert "SQL error: too many arguments on pragma_soft_heap_limit()" in capsys.readouterr().err
