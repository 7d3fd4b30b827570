"""What a command's --help points to is where it is."""

from __future__ import annotations

import pathlib

import pytest

from pva.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_estimate_help_points_to_the_delta_t_rules_in_cli_md(capsys):
    with pytest.raises(SystemExit):
        main(["estimate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "delta-T rules are in docs/cli.md, under pva estimate" in text and "README" not in text
    cli = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = cli.split("**`pva estimate`**", 1)[1]
    assert "| delta-T | max(compute, transmission)" in section
    assert "delta-T" not in (ROOT / "README.md").read_text(encoding="utf-8")
