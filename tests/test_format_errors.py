"""Bad input gets a clear PvaError naming the path, what was expected and what was found."""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import pva
from formats.pop.reader import ProfileReader


def _copy(sample, tmp_path, name="copy.pop") -> pathlib.Path:
    target = tmp_path / name
    shutil.copyfile(sample.path, target)
    return target


def _modify(path, *statements):
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


def test_missing_path(tmp_path):
    path = tmp_path / "nothing.pop"
    with pytest.raises(pva.ReportNotFoundError) as info:
        pva.openReport(path)
    assert isinstance(info.value, FileNotFoundError)
    assert str(path) in str(info.value) and "no such file" in str(info.value)
    assert info.value.path == str(path)


def test_directory(tmp_path):
    with pytest.raises(pva.NotAFileError) as info:
        pva.openReport(tmp_path)
    assert isinstance(info.value, IsADirectoryError)
    assert "is a directory" in str(info.value) and str(tmp_path) in str(info.value)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.pop"
    path.write_bytes(b"")
    with pytest.raises(pva.NotAReportError, match=r"empty file \(0 bytes\); expected a profile report") as info:
        pva.openReport(path)
    assert isinstance(info.value, ValueError)


def test_text_file(tmp_path):
    path = tmp_path / "notes.pop"
    path.write_text("Total cycles: 1,234\n")
    with pytest.raises(pva.NotAReportError, match="found a text file starting with 'Total cycles: 1,234'"):
        pva.openReport(path)


def test_random_bytes(tmp_path):
    path = tmp_path / "noise.pop"
    path.write_bytes(np.random.default_rng(1).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    with pytest.raises(pva.NotAReportError, match="binary data of unknown kind"):
        pva.openReport(path)


def test_json_file_gets_a_conversion_hint(tmp_path):
    path = tmp_path / "graph.json"
    path.write_text('{"target": {"type": "IPU"}}')
    with pytest.raises(pva.NotAReportError, match="pva convert"):
        pva.openReport(path)


def test_sqlite_database_that_is_not_a_report(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(pva.NotAReportError, match="SQLite database of another kind"):
        pva.openReport(path)


def test_newer_major_version_is_refused(sample, tmp_path):
    path = _copy(sample, tmp_path)
    _modify(path, "PRAGMA user_version=2000", "UPDATE metadata SET value='2.0' WHERE key='format_version'")
    with pytest.raises(pva.UnsupportedVersionError, match=r"format version 2\.0 is newer") as info:
        pva.openReport(path)
    assert isinstance(info.value, ValueError)


def test_newer_minor_version_opens(sample, tmp_path):
    path = _copy(sample, tmp_path)
    _modify(
        path,
        "PRAGMA user_version=1007",
        "UPDATE metadata SET value='1.7' WHERE key='format_version'",
        "ALTER TABLE programs ADD COLUMN colour TEXT",
        "CREATE TABLE future_things (x)",
    )
    report = pva.openReport(path)
    assert (report.version.major, report.version.minor) == (1, 7)
    assert report.compilation.graph.numComputeSets == 3
    report.close()


def test_header_and_metadata_disagreeing_on_version(sample, tmp_path):
    path = _copy(sample, tmp_path)
    _modify(path, "UPDATE metadata SET value='1.3' WHERE key='format_version'")
    with pytest.raises(pva.InconsistentReportError, match="disagrees"):
        pva.openReport(path)


@pytest.mark.parametrize("fraction", [0.02, 0.5, 0.99])
def test_truncated_report(sample, tmp_path, fraction):
    data = pathlib.Path(sample.path).read_bytes()
    path = tmp_path / "short.pop"
    path.write_bytes(data[: max(100, int(len(data) * fraction))])
    with pytest.raises(pva.CorruptReportError, match="truncated") as info:
        pva.openReport(path)
    assert isinstance(info.value, OSError)


def test_header_only(tmp_path, sample):
    path = tmp_path / "head.pop"
    path.write_bytes(pathlib.Path(sample.path).read_bytes()[:50])
    with pytest.raises(pva.CorruptReportError, match="100-byte header"):
        pva.openReport(path)


def test_corrupted_arrow_chunk(sample, tmp_path):
    path = _copy(sample, tmp_path)
    _modify(path, "UPDATE matrix_chunks SET data = zeroblob(64) WHERE matrix = 'step_cycles_by_tile'")
    reader = ProfileReader(path)
    with pytest.raises(pva.CorruptReportError, match="matrix 'step_cycles_by_tile'.*Arrow") as info:
        reader.matrix("step_cycles_by_tile").row(0)
    assert str(path) in str(info.value)
    reader.close()


def test_chunk_with_per_tile_vector_longer_than_tile_count(sample, tmp_path):
    from formats.pop.arrow_chunks import encode_chunk

    path = _copy(sample, tmp_path)
    codec, raw_size, wide = encode_chunk("step_cycles_by_tile", 0, np.ones((11, 9), dtype=np.uint64))
    conn = sqlite3.connect(path)
    conn.execute(
        "UPDATE matrix_chunks SET codec = ?, raw_size = ?, data = ? WHERE matrix = 'step_cycles_by_tile'",
        (codec, raw_size, wide),
    )
    conn.commit()
    conn.close()
    reader = ProfileReader(path)
    with pytest.raises(
        pva.CorruptReportError,
        match="expected fixed_size_list of 8 values|expected fields of at most 88 values, found a batch declaring 99",
    ):
        reader.matrix("step_cycles_by_tile").rows()
    reader.close()


def test_matrix_declared_wider_than_the_target(sample, tmp_path):
    path = _copy(sample, tmp_path)
    _modify(path, "UPDATE matrices SET num_cols = 9 WHERE name = 'compute_set_estimated_cycles_by_tile'")
    report = pva.openReport(path)
    with pytest.raises(pva.InconsistentReportError, match="has 9 columns but the report has 8"):
        report.compilation.computeSets[0].estimatedCyclesByTile
    report.close()


def test_memory_row_for_a_tile_that_does_not_exist(sample, tmp_path):
    path = _copy(sample, tmp_path)
    _modify(path, "UPDATE memory_by_tile SET tile = 99 WHERE tile = 7")
    report = pva.openReport(path)
    with pytest.raises(pva.InconsistentReportError, match="memory_by_tile has tile 99"):
        report.compilation.tiles[0].memory.total
    report.close()


def test_target_sizes_that_disagree(sample, tmp_path):
    path = _copy(sample, tmp_path)
    _modify(path, "UPDATE target SET num_tiles = 9")
    with pytest.raises(pva.InconsistentReportError, match="num_tiles is 9"):
        pva.openReport(path)


def test_chunk_declaring_a_huge_uncompressed_size_is_refused_before_allocating(sample, tmp_path):
    path = _copy(sample, tmp_path)
    _modify(path, "UPDATE matrix_chunks SET raw_size = 1 << 40 WHERE matrix = 'step_cycles_by_tile'")
    reader = ProfileReader(path)
    with pytest.raises(pva.CorruptReportError, match="expected an uncompressed size of at most"):
        reader.matrix("step_cycles_by_tile").row(0)
    reader.close()


def test_decompression_bomb_is_refused(sample, tmp_path):
    import pyarrow as pa

    path = _copy(sample, tmp_path)
    bomb = pa.Codec("zstd").compress(b"\0" * (64 << 20), asbytes=True)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE matrix_chunks SET data = ? WHERE matrix = 'step_cycles_by_tile'", (bomb,))
    conn.commit()
    conn.close()
    reader = ProfileReader(path)
    with pytest.raises(pva.CorruptReportError, match="unreadable data"):
        reader.matrix("step_cycles_by_tile").row(0)
    reader.close()


def test_tile_count_larger_than_the_file_holds(sample, tmp_path):
    path = _copy(sample, tmp_path)
    _modify(
        path,
        "UPDATE target SET num_ipus = 500000, num_tiles = 2000000, ipus_per_replica = 500000, "
        "tiles_per_replica = 2000000",
    )
    with pytest.raises(pva.InconsistentReportError, match="num_tiles is 2000000 but table tiles has 8 rows"):
        pva.openReport(path)


def test_missing_chunk(sample, tmp_path):
    path = _copy(sample, tmp_path)
    _modify(path, "DELETE FROM matrix_chunks WHERE matrix = 'vertex_count_by_tile'")
    reader = ProfileReader(path)
    with pytest.raises(pva.InconsistentReportError, match="declares 4 rows, its chunks hold 0"):
        reader.matrix("vertex_count_by_tile").row(0)
    reader.close()


def test_table_replaced_by_a_view(sample, tmp_path):
    path = _copy(sample, tmp_path)
    _modify(path, "DROP TABLE steps", "CREATE VIEW steps AS SELECT 1 AS id")
    with pytest.raises(pva.CorruptReportError, match="expected table 'steps'.*found a view"):
        pva.openReport(path)


def test_missing_table(sample, tmp_path):
    path = _copy(sample, tmp_path)
    _modify(path, "DROP TABLE programs")
    with pytest.raises(pva.CorruptReportError, match="expected table 'programs'.*found nothing"):
        pva.openReport(path)


def test_damaged_pages_surface_as_corrupt_report(sample, tmp_path):
    path = _copy(sample, tmp_path)
    data = bytearray(path.read_bytes())
    page = 4096
    for offset in range(2 * page, len(data), page):
        data[offset : offset + 16] = b"\xff" * 16
    path.write_bytes(bytes(data))
    with pytest.raises(pva.CorruptReportError):
        report = pva.openReport(path)
        for tile in report.compilation.tiles:
            tile.memory.total
        report._reader.matrix("step_cycles_by_tile").rows()


_SLOW_WRITER = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from formats.pop.writer import ProfileWriter
    with ProfileWriter(sys.argv[1], chunk_bytes=64) as w:
        w.set_target(num_ipus=1, tiles_per_ipu=8, bytes_per_tile=1024)
        print("started", flush=True)
        for step in range(100000):
            w.insert("steps", ("id", "run", "type"), [(step, 0, "Sync")])
            w.matrix("step_cycles_by_tile").append(np.arange(8))
            time.sleep(0.001)
    """
)


def _kill_writer_midway(target: pathlib.Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).resolve().parents[1]))
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(target)], stdout=subprocess.PIPE, env=env)
    assert proc.stdout.readline().strip() == b"started"
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL


def test_writer_killed_leaves_no_file_under_the_target_name(tmp_path):
    target = tmp_path / "profile.pop"
    _kill_writer_midway(target)
    assert not target.exists()
    # the writer really was part-way: its temporary file is what is left
    assert [p.name.startswith(".profile.pop.") and p.name.endswith(".tmp") for p in tmp_path.iterdir()] == [True]


def test_writer_killed_leaves_an_existing_report_intact(sample, tmp_path):
    target = _copy(sample, tmp_path, "profile.pop")
    before = hashlib.sha256(target.read_bytes()).hexdigest()
    _kill_writer_midway(target)
    assert hashlib.sha256(target.read_bytes()).hexdigest() == before
    report = pva.openReport(target)
    assert report.compilation.graph.numComputeSets == 3
    report.close()


def test_exception_inside_writer_leaves_existing_report_intact(sample, tmp_path):
    from formats.pop.writer import ProfileWriter

    target = _copy(sample, tmp_path, "profile.pop")
    before = target.read_bytes()
    with pytest.raises(RuntimeError), ProfileWriter(target) as w:
        w.set_target(num_ipus=1, tiles_per_ipu=4, bytes_per_tile=1024)
        raise RuntimeError("producer failed")
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.pop"]


def test_text_that_is_not_utf8_is_damage(sample, tmp_path):
    path = _copy(sample, tmp_path)
    _modify(path, "UPDATE programs SET name = CAST(x'c328ff' AS TEXT) WHERE id = 1")
    report = pva.openReport(path)
    programs = report.compilation.programs  # made from ids and types; names are read on first use
    with pytest.raises(pva.CorruptReportError, match="damaged"):
        programs[1].name
    report.close()


def test_written_reports_get_the_usual_permissions(tmp_path):
    import os
    import stat

    from reportbuilder import write_sample_report

    mask = os.umask(0o022)
    try:
        sample = write_sample_report(tmp_path / "perm.pop")
    finally:
        os.umask(mask)
    assert stat.S_IMODE(os.stat(sample.path).st_mode) == 0o644
