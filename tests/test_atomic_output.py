"""Atomic outputs when the rename cannot be made: a clear error, nothing left behind, the old output kept."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from formats import atomic
from formats.atomic import AtomicOutput, commit_together
from formats.errors import InvalidInputError
from formats.protected_files import output_rules


def _listing(directory) -> list[str]:
    return sorted(os.listdir(directory))


@pytest.mark.parametrize("fmt,name", [("chrome-trace", "trace.json"), ("hdf5", "x.h5")])
def test_a_file_export_onto_a_directory_is_refused_before_writing(sample, tmp_path, fmt, name):
    (tmp_path / name).mkdir()
    (tmp_path / name / "keep.txt").write_text("mine")
    result = subprocess.run(
        [sys.executable, "-m", "pva", "export", sample.path, "--format", fmt, "-o", str(tmp_path / name)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2, result.stderr
    assert f"{str(tmp_path / name)!r}: is a directory; expected a file name" in result.stderr
    assert _listing(tmp_path) == [name] and (tmp_path / name / "keep.txt").read_text() == "mine"


def test_a_directory_export_onto_a_file_is_refused_before_writing(sample, tmp_path):
    (tmp_path / "out").write_text("mine")
    result = subprocess.run(
        [sys.executable, "-m", "pva", "export", sample.path, "--format", "csv", "-o", str(tmp_path / "out")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2, result.stderr
    assert "is a file; expected a directory name" in result.stderr
    assert _listing(tmp_path) == ["out"] and (tmp_path / "out").read_text() == "mine"


def test_a_failed_commit_removes_the_temporary_output(tmp_path, monkeypatch):
    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="no space left on device"), AtomicOutput(tmp_path / "out.json") as out:
        with open(out.path, "w") as handle:
            handle.write("{}")
        monkeypatch.setattr(atomic.os, "replace", failing_replace)
    assert _listing(tmp_path) == []


def test_outputs_committed_together_are_all_checked_before_any_is_renamed(tmp_path):
    (tmp_path / "profile.pop").write_bytes(b"old report")
    with output_rules(force=[str(tmp_path / "profile.pop")]):  # not a file pva wrote: replaced only if forced
        first = AtomicOutput(tmp_path / "profile.pop")
        second = AtomicOutput(tmp_path / "debug.cbor")
        with open(first.path, "wb") as handle:
            handle.write(b"new report")
        (tmp_path / "debug.cbor").mkdir()  # appears after the outputs were started
        with pytest.raises(InvalidInputError, match="debug.cbor'?: is a directory"):
            commit_together([first, second])
    assert (tmp_path / "profile.pop").read_bytes() == b"old report"
    first.abort()
    second.abort()
    assert _listing(tmp_path) == ["debug.cbor", "profile.pop"]


def test_without_exchange_a_failed_directory_rename_puts_the_old_one_back(tmp_path, monkeypatch):
    target = tmp_path / "export"
    target.mkdir()
    old = '{"written_by": "pva", "files": []}'
    (target / "manifest.json").write_text(old)
    monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    real_replace = os.replace

    def replace(src, dst):
        if os.fspath(dst) == str(target) and ".old" not in os.fspath(src):
            raise OSError(5, "Input/output error")
        real_replace(src, dst)

    with pytest.raises(OSError, match="(?i)input/output error"), AtomicOutput(target, directory=True) as out:
        (tmp_path / out.path / "manifest.json").write_text('{"new": 1}')
        monkeypatch.setattr(atomic.os, "replace", replace)
    assert (target / "manifest.json").read_text() == old
    assert _listing(tmp_path) == ["export"]


def test_simulate_keeps_the_previous_report_when_an_output_cannot_be_replaced(tmp_path):
    out = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "pva",
        "simulate",
        "--preset",
        "tutorial1",
        "--tiles-per-ipu",
        "16",
        "-o",
        str(out),
    ]
    first = subprocess.run(command, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    before = hashlib.sha256((out / "profile.pop").read_bytes()).hexdigest()
    os.unlink(out / "debug.cbor")
    (out / "debug.cbor").mkdir()
    second = subprocess.run(command, capture_output=True, text=True)
    assert second.returncode == 2, second.stderr
    assert "debug.cbor" in second.stderr and "is a directory" in second.stderr
    assert hashlib.sha256((out / "profile.pop").read_bytes()).hexdigest() == before
    assert not [name for name in os.listdir(out) if name.endswith(".tmp")]
