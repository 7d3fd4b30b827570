"""Writer and reader processes of the concurrency test (tests/test_concurrency.py).

    python concurrency_worker.py write PATH COUNT       write COUNT reports to PATH, one after another
    python concurrency_worker.py read PATH STOPFILE     read PATH fully, over and over, until STOPFILE exists

A reader prints one JSON line: its iterations, the digests it saw, how many reads spanned a
replacement of the file, and the errors (there must be none).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # the repository
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

#: Report versions the writer cycles through: write_sample_report arguments. They differ in content
#: and most in size, so a reader that mixed two versions' header and pages would notice.
VERSIONS = [
    {"seed": 1, "with_execution": True},
    {"seed": 2, "with_execution": False, "compression": None},
    {"seed": 3, "with_execution": True, "compression": None, "chunk_bytes": 256},
    {"seed": 4, "with_execution": False, "chunk_bytes": 1024},
    {"seed": 5, "with_execution": True, "compression": "lz4", "chunk_bytes": 64},
]


def write_version(path: str, index: int) -> None:
    from reportbuilder import write_sample_report

    write_sample_report(path, **VERSIONS[index % len(VERSIONS)])


def write(path: str, count: int) -> None:
    for index in range(count):
        write_version(path, index)


def digest(report) -> str:
    """A digest of everything an opened report holds (every row of every table, every matrix value),
    but its creation time; the same for every write of the same version."""
    reader = report._reader
    h = hashlib.sha256()
    for table in sorted(reader.file.tables):
        if table == "matrix_chunks":
            continue
        rows = sorted(
            repr(row)
            for row in reader.query(f'SELECT * FROM "{table}"')
            if not (table == "metadata" and row[0] == "created")
        )
        h.update(table.encode() + b"\n" + "\n".join(rows).encode())
    for name in sorted(reader._load_matrices()):
        matrix = reader.matrix(name)
        for first, block in matrix.iter_chunks():
            h.update(f"{name}:{first}:{block.shape}".encode())
            h.update(block.astype("uint64").tobytes())
    return h.hexdigest()


def read_once(path: str) -> tuple[str, bool]:
    """Open the report, read it all through the object model and the reader; (digest, replaced meanwhile)."""
    import pva

    with pva.openReport(path) as report:
        inode = os.stat(path).st_ino
        compilation = report.compilation
        tiles = compilation.target.numTiles
        assert tiles == report._reader.target["num_tiles"]
        programs = compilation.programs
        assert len(programs) > 0 and all(p.name is not None for p in programs)
        memory = sum(int(t.memory.total.includingGaps) for t in compilation.tiles)
        assert memory >= 0
        found = digest(report)
        if report._reader.query_one("SELECT count(*) FROM steps")[0]:
            for run in report.execution.runs:
                assert int(run.cyclesByTileTotals().sum()) >= 0 and len(run.steps) > 0
        replaced = os.stat(path).st_ino != inode
    return found, replaced


def read(path: str, stop_file: str) -> None:
    iterations, spanning, seen, errors = 0, 0, {}, []
    while not os.path.exists(stop_file) or iterations == 0:
        try:
            found, replaced = read_once(path)
        except FileNotFoundError:
            if iterations == 0:
                continue  # the writer has not written the first version yet
            errors.append(traceback.format_exc()[-1500:])
            continue
        except BaseException:
            errors.append(traceback.format_exc()[-1500:])
            if len(errors) > 5:
                break
            continue
        iterations += 1
        spanning += replaced
        seen[found] = seen.get(found, 0) + 1
    print(json.dumps({"iterations": iterations, "spanning": spanning, "seen": seen, "errors": errors}))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], int(sys.argv[3]))
    else:
        read(sys.argv[2], sys.argv[3])
