"""Usage errors name the command, show its usage and suggest the closest command."""

import pytest

from pva.cli import main


def _run(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    return exit_info.value.code, capsys.readouterr().err


def test_misspelt_command(capsys):
    code, err = _run(["sumary", "x.pop"], capsys)
    assert code == 2
    assert "unknown command 'sumary'; did you mean summary?" in err


def test_unknown_command_without_a_close_match(capsys):
    code, err = _run(["zzzzzz"], capsys)
    assert code == 2
    assert "run 'pva --help' for the list" in err


def test_wrong_flag_shows_the_subcommands_usage(capsys):
    code, err = _run(["summary", "--bogus", "x.pop"], capsys)
    assert code == 2
    assert err.startswith("usage: pva summary")
    assert "pva summary: error: unrecognized arguments: --bogus" in err
