"""Errors drawn at the bytes (a bug is not a damaged file) and the one exporter registry."""

from __future__ import annotations

import argparse
import pathlib
import sqlite3

import pytest

from formats.errors import CorruptReportError
from formats.exporters import EXPORTERS, FORMATS
from formats.pop.reader import ProfileReader
from formats.pop.sqlite_reader import is_damage
from pva.cli import build_parser

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_a_query_on_a_missing_column_is_a_bug_not_damage(sample):
    reader = ProfileReader(sample.path)
    try:
        with pytest.raises(sqlite3.OperationalError, match="no such column") as caught:
            reader.query("SELECT no_such_column FROM programs")
        assert not isinstance(caught.value, CorruptReportError)
        with pytest.raises(sqlite3.OperationalError):
            reader.query_one("SELECT * FROM no_such_table")
    finally:
        reader.close()


def test_damage_is_told_by_sqlite_codes():
    corrupt = sqlite3.DatabaseError("database disk image is malformed")
    corrupt.sqlite_errorcode = 11
    notadb = sqlite3.DatabaseError("file is not a database")
    notadb.sqlite_errorcode = 26
    missing = sqlite3.OperationalError("no such column: x")
    missing.sqlite_errorcode = 1
    assert is_damage(corrupt) and is_damage(notadb)
    assert not is_damage(missing) and not is_damage(sqlite3.ProgrammingError("closed"))


def test_flipped_bytes_are_still_damage(sample, tmp_path):
    path = tmp_path / "flipped.pop"
    data = bytearray(pathlib.Path(sample.path).read_bytes())
    for offset in range(4096 * 3, len(data), 4096):  # every page header after the first pages
        data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptReportError):
        reader = ProfileReader(path)
        try:
            for table in reader.file.tables:
                reader.query(f'SELECT * FROM "{table}"')
        finally:
            reader.close()


def _export_choices() -> tuple:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    export = sub.choices["export"]
    return next(a for a in export._actions if a.dest == "format").choices


def test_the_cli_reads_its_formats_from_the_registry():
    assert tuple(_export_choices()) == tuple(EXPORTERS) == tuple(FORMATS)


@pytest.mark.parametrize("name", list(EXPORTERS))
def test_every_exporter_names_the_module_of_its_real_code(name):
    exporter = EXPORTERS[name]
    module = ROOT.joinpath(*exporter.module.split(".")).with_suffix(".py")
    assert module.is_file()
    assert f"def {exporter.function}(" in module.read_text()
    assert callable(exporter.writer())


def test_exporters_read_through_the_query_layer():
    sources = [
        ROOT / "formats" / "chrome" / "writer.py",
        ROOT / "formats" / "chrome" / "export.py",
        ROOT / "formats" / "legacy" / "exporter.py",
        *sorted((ROOT / "formats" / "exporters").glob("*.py")),
    ]
    for source in sources:
        text = source.read_text()
        assert "conn.execute" not in text and "damage_reported" not in text, source.name
