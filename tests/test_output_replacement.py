"""Single-file outputs replace only a file pva wrote (its format and pva's marker), or the one --force
names, and never an input of the command (same device and inode)."""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

from formats.atomic import written_by_pva
from pva.cli import main


@pytest.fixture()
def report(simulated, tmp_path):
    path = tmp_path / "self.pop"
    shutil.copyfile(simulated / "profile.pop", path)
    return str(path)


def _thesis(tmp_path) -> str:
    path = tmp_path / "thesis.tex"
    path.write_text("\\documentclass{article} my thesis\n")
    return str(path)


@pytest.mark.parametrize(
    "command",
    [
        ["export", "{r}", "--format", "chrome-trace", "-o", "{o}"],
        ["export", "{r}", "--format", "hdf5", "-o", "{o}"],
        ["html", "{r}", "-o", "{o}"],
        ["plot", "{r}", "--kind", "memory", "-o", "{o}"],
        ["convert", "{r}", "-o", "{o}"],
    ],
    ids=["chrome-trace", "hdf5", "html", "plot", "convert"],
)
def test_a_user_file_is_kept_unless_forced(report, tmp_path, capsys, command):
    thesis = _thesis(tmp_path)
    if command[0] == "plot":
        thesis = str(tmp_path / "figure.png")
        with open(thesis, "wb") as handle:
            handle.write(b"\x89PNG\r\n\x1a\n my own figure")
    before = pathlib.Path(thesis).read_bytes()
    args = [a.format(r=report, o=thesis) for a in command]
    status = main(args)
    err = capsys.readouterr().err
    if command[0] == "convert":  # a report is not a convert input: refused before the output
        assert status == 2
        assert pathlib.Path(thesis).read_bytes() == before
        return
    assert status == 2, err
    assert f"{thesis!r}: exists and is not a file pva wrote" in err and "--force" in err
    assert pathlib.Path(thesis).read_bytes() == before
    assert main([*args, "--force"]) == 0
    assert written_by_pva(thesis)
    assert main(args) == 0  # now pva's own file: replaced without --force


@pytest.mark.parametrize(
    "command",
    [
        ["html", "{r}", "-o", "{r}"],
        ["export", "{r}", "--format", "hdf5", "-o", "{r}"],
        ["export", "{r}", "--format", "chrome-trace", "-o", "{r}"],
        ["plot", "{r}", "--kind", "memory", "-o", "{r}"],
    ],
    ids=["html", "hdf5", "chrome-trace", "plot"],
)
def test_the_input_is_never_replaced_even_with_force(report, capsys, command):
    before = pathlib.Path(report).read_bytes()
    for extra in ([], ["--force"]):
        args = [a.format(r=report) for a in command] + extra
        assert main(args) == 2
        err = capsys.readouterr().err
        if command[0] != "plot":
            assert f"{report!r}: is an input of this command" in err
    assert pathlib.Path(report).read_bytes() == before


def test_the_input_through_a_link_or_a_second_name_is_kept(report, tmp_path, capsys):
    hard = str(tmp_path / "other-name.pop")
    os.link(report, hard)
    link = str(tmp_path / "link.html")
    os.symlink(report, link)
    before = pathlib.Path(report).read_bytes()
    assert main(["export", report, "--format", "hdf5", "-o", hard, "--force"]) == 2
    assert main(["html", report, "-o", link, "--force"]) == 2
    assert "is an input of this command" in capsys.readouterr().err
    assert pathlib.Path(report).read_bytes() == before


def test_a_report_open_in_the_library_is_never_replaced(report, tmp_path):
    import pva
    from pva.errors import PvaError

    opened = pva.openReport(report)
    try:
        with pytest.raises(PvaError, match="is an input of this command"):
            pva.write_html([opened], report)
    finally:
        opened.close()


def test_each_pva_format_is_recognised_and_foreign_ones_are_not(report, tmp_path):
    assert written_by_pva(report)
    outputs = {
        "t.json": ["export", report, "--format", "chrome-trace"],
        "t.h5": ["export", report, "--format", "hdf5"],
        "t.html": ["html", report],
        "t.svg": ["plot", report, "--kind", "memory"],
        "t.pdf": ["plot", report, "--kind", "memory"],
    }
    for name, command in outputs.items():
        assert main([*command, "-o", str(tmp_path / name)]) == 0
        assert written_by_pva(tmp_path / name), name
    foreign = {
        "a.json": b'{"traceEvents": []}',
        "a.html": b"<!DOCTYPE html><html><head><title>mine</title></head></html>",
        "a.pop": b"SQLite format 3\x00" + bytes(84),
        "a.txt": b"Estimated Overall Performance\n",
        "a.pdf": b"%PDF-1.4 mine",
    }
    for name, data in foreign.items():
        (tmp_path / name).write_bytes(data)
        assert not written_by_pva(tmp_path / name), name


def test_a_legacy_export_is_replaced_by_the_next_one_but_a_copy_of_it_is_not(report, tmp_path, capsys):
    target = str(tmp_path / "legacy.json")
    assert main(["export", report, "--format", "legacy-json", "-o", target]) == 0
    assert main(["export", report, "--format", "legacy-json", "-o", target]) == 0  # pva's own: its mark
    copy = tmp_path / "copy.json"
    copy.write_bytes(pathlib.Path(target).read_bytes())  # the same bytes, but not a file pva wrote
    assert main(["export", report, "--format", "legacy-json", "-o", str(copy)]) == 2
    assert "exists and is not a file pva wrote" in capsys.readouterr().err


def test_a_stream_that_is_the_input_is_refused(report):
    import subprocess
    import sys

    before = pathlib.Path(report).read_bytes()
    with open(report, "ab") as appended:
        child = subprocess.run(
            [sys.executable, "-m", "pva", "export", report, "--format", "chrome-trace", "-o", "/dev/stdout"],
            stdout=appended,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    assert child.returncode == 2 and "is an input of this command" in child.stderr
    assert pathlib.Path(report).read_bytes() == before
