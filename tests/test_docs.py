"""The documentation covers what exists: every command and option, every public name, the schema."""

import argparse
import pathlib
import re

import pytest
from support import api_reference, cli_reference

from formats.pop.schema_reference import render_reference

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _text(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def test_schema_reference_is_current():
    assert render_reference() in _text("format.md"), (
        "docs/format.md is out of date: paste the output of `python -m formats.pop.schema_reference` between its markers"
    )


@pytest.mark.parametrize("name", list(cli_reference.command_parsers()))
def test_every_command_and_option_is_documented(name):
    cli = _text("cli.md")
    assert f"### pva {name}" in cli
    section = cli.split(f"### pva {name}", 1)[1].split("\n### ", 1)[0]
    parser = cli_reference.command_parsers()[name]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.help == argparse.SUPPRESS:
            continue
        for flag in action.option_strings:
            assert flag in section, f"docs/cli.md: option {flag} of pva {name} is not documented"


def test_every_public_name_and_member_is_in_the_api_reference():
    api = _text("api.md")
    for name in api_reference.public_names():
        assert f"pva.{name}" in api, f"docs/api.md lacks pva.{name}: run python -m tests.support.api_reference"
    import pva

    for name in api_reference.public_names():
        obj = getattr(pva, name)
        if isinstance(obj, type) and not issubclass(obj, BaseException):
            for member, _what in api_reference.members(obj):
                assert f"`{member.split('(')[0]}" in api, f"docs/api.md lacks {name}.{member}"


def test_readme_links_resolve():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        if "://" in target:
            continue
        assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


def test_every_preset_and_knob_is_in_the_simulator_preset_table():
    from simulator.presets import PRESETS

    rows = {}
    for line in _text("simulator.md").splitlines():
        m = re.match(r"\| `([\w-]+)` \|", line)
        if m:
            rows[m[1]] = line
    common = {"arch", "tiles-per-ipu"}  # listed once, under the table
    for name, preset in PRESETS.items():
        assert name in rows, f"docs/simulator.md: preset {name} is not in the preset table"
        for knob in preset.knobs:
            if knob.name not in common:
                assert f"--{knob.name}" in rows[name], (
                    f"docs/simulator.md: --{knob.name} of preset {name} is not listed"
                )
