"""Declared matrix shapes are checked against bounds from the format and the target before anything
is allocated: memory_category_by_tile has 6 columns per memory category, and the categories are the
format's list (Poplar's and as many again)."""

from __future__ import annotations

import hostile_inputs
import pytest

from formats.pop.categories import CATEGORIES, MAX_CATEGORIES
from pva.cli import main


@pytest.fixture(scope="module")
def bomb(sample, tmp_path_factory):
    return hostile_inputs.many_categories(sample.path, tmp_path_factory.mktemp("bomb") / "bomb.pop", 400)


@pytest.mark.parametrize(
    "command",
    [
        ["summary", "{r}"],
        ["html", "{r}", "-o", "{d}/r.html"],
        ["export", "{r}", "--format", "csv", "-o", "{d}/csv"],
        ["export", "{r}", "--format", "parquet", "-o", "{d}/pq"],
        ["export", "{r}", "--format", "hdf5", "-o", "{d}/r.h5"],
    ],
    ids=lambda c: "-".join(c[:1] + c[2:4]),
)
def test_too_many_categories_is_refused_before_the_matrix_is_read(bomb, tmp_path, capsys, command):
    assert main([a.format(r=bomb, d=tmp_path) for a in command]) == 2
    err = capsys.readouterr().err
    assert f"table var_categories declares 400 memory categories; expected at most {MAX_CATEGORIES}" in err


def test_check_flags_too_many_categories(bomb, capsys):
    assert main(["check", bomb]) != 0
    assert "declares 400 memory categories" in capsys.readouterr().out


def test_categories_within_the_bound_are_read(sample, tmp_path):
    import pva

    path = hostile_inputs.many_categories(sample.path, tmp_path / "ok.pop", MAX_CATEGORIES)
    report = pva.openReport(path)
    try:
        assert 2 * len(CATEGORIES) == MAX_CATEGORIES
        assert report.compilation.tiles[0].memory.total.excludingGaps >= 0
    finally:
        report.close()
