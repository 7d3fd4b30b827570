"""A report that shrinks while it is read (truncated in place by another process) is a clean error, never
SIGBUS: the reader maps nothing, so a page past the new end is a short read SQLite reports."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import large_report
import pytest

_CHILD = textwrap.dedent(
    """
    import os, sys
    from formats.errors import PvaError
    from formats.pop.reader import ProfileReader
    reader = ProfileReader(sys.argv[1])
    shrunk = []

    def shrink():  # another process truncates the file in the middle of the statement
        if not shrunk:
            os.truncate(sys.argv[1], os.path.getsize(sys.argv[1]) // 3)
            shrunk.append(True)
        return 0

    reader.file.conn.create_function("shrink", 0, shrink)
    try:
        reader.file.query("SELECT shrink(), substr(data, -8, 8) FROM matrix_chunks")
    except PvaError as exc:
        print(type(exc).__name__, exc)
        sys.exit(2)
    sys.exit(0)
    """
)


@pytest.fixture(scope="module")
def long_report(tmp_path_factory):
    path = tmp_path_factory.mktemp("long") / "long.pop"
    large_report.write_long_report(path, num_steps=2000, num_programs=500, num_variables=500)
    return path


def test_a_report_truncated_while_its_matrix_is_read_is_a_clean_error(long_report, tmp_path):
    path = tmp_path / "shrinking.pop"
    shutil.copyfile(long_report, path)
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert child.returncode == 2, (child.returncode, child.stderr[-500:])
    assert child.stdout.startswith("CorruptReportError") and str(path) in child.stdout


def test_the_reader_maps_no_page(long_report):
    from formats.pop.reader import ProfileReader

    reader = ProfileReader(long_report)
    try:
        assert reader.file.query_one("PRAGMA mmap_size") == (0,)
    finally:
        reader.close()
