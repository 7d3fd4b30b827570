"""Golden text outputs of the analysis commands on a simulated and a converted report.

Regenerate after an intended change with PVA_UPDATE_GOLDEN=1 and review the diff.
"""

from __future__ import annotations

import os
import pathlib

import pytest

from pva.cli import main

GOLDEN = pathlib.Path(__file__).parent / "golden"


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PVA_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert text == path.read_text(), f"output differs from {path}; rerun with PVA_UPDATE_GOLDEN=1 if intended"


COMMANDS = {
    "summary": ["summary", "{report}", "--show-execution-steps", "--show-var-storage", "--colours", "false"],
    "optime-total": ["optime", "{report}"],
    "optime-each": ["optime", "{report}", "--mode", "each"],
    "estimate": ["estimate", "{report}", "-o", "{tmp}"],
    "info": None,  # paths and dates vary: tested elsewhere
}


@pytest.mark.parametrize("which", ["simulated", "converted"])
@pytest.mark.parametrize("command", ["summary", "optime-total", "optime-each", "estimate"])
def test_golden(which, command, request, capsys, tmp_path):
    fixture = request.getfixturevalue(which)
    report = fixture / "profile.pop" if which == "simulated" else fixture
    args = [a.format(report=report, tmp=tmp_path) for a in COMMANDS[command]]
    assert main(args) == 0
    out = capsys.readouterr().out
    if command == "estimate":
        out = (tmp_path / "compile_report.txt").read_text()
    _golden(f"{command}_{which}.txt", out)


def test_optime_uses_debug_contexts_when_present(simulated, capsys):
    from formats.pop.reader import ProfileReader
    from pva.analysis.optime import op_types_from_debug, operator_times

    reader = ProfileReader(simulated / "profile.pop")
    types = op_types_from_debug(reader, str(simulated / "debug.cbor"))
    rows = operator_times(reader, "total", types)
    reader.close()
    names = {r.type for r in rows}
    assert {"MatMul", "NonLinearity", "Loss"} <= names
    assert not any("::" in name for name in names - {"poplar_rt::ShortMemcpy", "poplar_rt::DstStridedCopyDA32"})
    assert sum(r.share for r in rows) == pytest.approx(1.0)
    assert main(["optime", str(simulated / "profile.pop"), "--no-debug"]) == 0
    assert "poplin::ConvPartial1x1Out" in capsys.readouterr().out
