"""Cycles planted beyond 64-bit integers (stored by SQLite as REAL) are damage, not a bug: every
command that reads steps_by_ipu exits 0 or 2, never 3."""

from __future__ import annotations

import pytest
from reportbuilder import changed_copy

from pva.cli import main as cli_main

COMMANDS = (
    ["html", "-o", "{out}.html"],
    ["summary"],
    ["optime"],
    ["plot", "--kind", "timeline", "-o", "{out}.png"],
    ["diff", "{sample}"],
    ["estimate", "-o", "{out}-estimate.txt"],
    ["export", "--format", "chrome-trace", "-o", "{out}.json"],
)


@pytest.mark.parametrize("column", ["cycles_base", "all_cycles_from_min", "all_cycles_to_max", "tile_cycles_max"])
def test_cycles_past_64_bits_exit_2_naming_the_column(sample, tmp_path, capsys, column):
    pytest.importorskip("matplotlib")
    damaged = changed_copy(
        sample.path, tmp_path / "d.pop", f"UPDATE steps_by_ipu SET {column} = 18446744073709551615 WHERE step_id = 1"
    )
    for command in COMMANDS:
        words = [w.format(out=tmp_path / "out", sample=sample.path) for w in command]
        status = cli_main([words[0], damaged, *words[1:]])
        err = capsys.readouterr().err
        assert status in (0, 1, 2), (command, err)
        if status == 2:
            assert repr(damaged) in err and ("steps_by_ipu" in err or column in err), (command, err)
