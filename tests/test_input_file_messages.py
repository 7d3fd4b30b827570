"""The messages for a path that is not a readable file read as English, with the path once."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from formats.detect import check_regular_file, classify_input, sniff
from formats.errors import NotAFileError, ReportNotFoundError


def test_convert_given_a_directory(tmp_path):
    with pytest.raises(NotAFileError) as info:
        classify_input(tmp_path)
    assert str(info.value) == f"{str(tmp_path)!r}: is a directory; expected an input file"


def test_convert_given_a_missing_file(tmp_path):
    path = tmp_path / "absent.json"
    with pytest.raises(ReportNotFoundError) as info:
        classify_input(path)
    assert str(info.value) == f"{str(path)!r}: no such file; expected an input file"


def test_sniffing_a_directory(tmp_path):
    with pytest.raises(NotAFileError) as info:
        sniff(tmp_path)
    assert str(info.value) == f"{str(tmp_path)!r}: is a directory; expected a file"


@pytest.mark.parametrize(
    ("what", "expected"),
    [
        ("report", "a report file"),
        ("input file", "an input file"),
        ("file", "a file"),
        ("Chrome trace file", "a Chrome trace file"),
        ("debug information file (debug.cbor)", "a debug information file (debug.cbor)"),
    ],
)
def test_what_is_expected_reads_once(tmp_path, what, expected):
    with pytest.raises(NotAFileError) as info:
        check_regular_file(tmp_path, what)
    assert str(info.value) == f"{str(tmp_path)!r}: is a directory; expected {expected}"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a FIFO")
def test_not_a_regular_file(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(NotAFileError) as info:
        classify_input(fifo)
    assert str(info.value) == f"{str(fifo)!r}: is not a regular file; expected an input file"


def test_pva_convert_on_a_directory_prints_one_clean_line(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pva", "convert", str(tmp_path), "-o", str(tmp_path / "x.pop")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == f"pva convert: error: {str(tmp_path)!r}: is a directory; expected an input file\n"
