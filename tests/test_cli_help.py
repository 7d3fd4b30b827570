"""Every command has help with an example, and the README's command tour lists every command."""

from __future__ import annotations

import pathlib

import pytest

from pva.cli import build_parser, command_modules, main

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.parametrize("command", command_modules())
def test_every_command_has_help_with_an_example(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "Example" in out, f"pva {command} --help has no example"
    assert out.count("\n") > 5


def test_top_level_help_lists_every_command(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    for command in command_modules():
        assert f"    {command} " in out or f"    {command}\n" in out, command


@pytest.mark.parametrize("command", command_modules())
def test_readme_command_tour_mentions_every_command(command):
    assert f"pva {command}" in README.read_text(), f"README.md does not mention `pva {command}`"


def test_usage_errors_exit_with_status_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["summary"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["no-such-command"])
    assert exit_info.value.code == 2


def test_every_command_module_is_registered():
    import pathlib

    import pva.cli

    modules = {p.stem for p in pathlib.Path(pva.cli.__file__).parent.glob("*.py") if not p.stem.startswith("_")}
    assert set(pva.cli.COMMANDS) == modules
