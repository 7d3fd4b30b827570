"""Reads fuzzed reports for tests/test_fuzz_reader.py, one request per line on standard input.

Each request is {"path", "debug" (or null), "ops" (or null: all)}; the answer, one JSON line on standard output, lists
{"op", "outcome", "detail"} for every read: "ok", "pva_error" or "unexpected" (any other exception,
with its traceback) or "timeout" (past the per-operation alarm). The parent limits the address
space and restarts the worker if it dies.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # the repository
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from report_walk import walk

import pva
from formats.errors import PvaError
from formats.pop.check import check_report
from formats.pop.reader import ProfileReader

#: Objects visited per walk (the walk reads every getter of each).
WALK_BUDGET = 600


class _Timeout(Exception):
    pass


def _alarm(_signum, _frame):
    raise _Timeout()


def _open_and_walk(path: str, debug: str | None) -> None:
    with pva.openReport(path, debug) if debug else pva.openReport(path) as report:
        walk(report, WALK_BUDGET)
        report.compilation.target.numTiles
        if debug:
            for context in report.compilation.debugContexts()[:200]:
                context.fullPath


def _matrices(path: str) -> None:
    reader = ProfileReader(path)
    try:
        for name in reader._load_matrices():
            for _first, block in reader.matrix(name).iter_chunks():
                block.sum()
    finally:
        reader.close()


def _check(path: str) -> None:
    check_report(path)


OPERATIONS = [
    ("open+walk", _open_and_walk),
    ("matrices", lambda path, debug: _matrices(path)),
    ("check", lambda path, debug: _check(path)),
]


def serve(seconds: int) -> None:
    signal.signal(signal.SIGALRM, _alarm)
    for line in sys.stdin:
        request = json.loads(line)
        outcomes = []
        wanted = request.get("ops")
        for op, run in OPERATIONS:
            if wanted and op not in wanted:
                continue
            signal.alarm(seconds)
            try:
                run(request["path"], request.get("debug"))
                outcome, detail = "ok", ""
            except PvaError as exc:
                outcome, detail = "pva_error", f"{type(exc).__name__}: {exc}"[:300]
            except _Timeout:
                outcome, detail = "timeout", f"more than {seconds} s"
            except BaseException as exc:
                outcome, detail = (
                    "unexpected",
                    "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-2500:],
                )
            finally:
                signal.alarm(0)
            outcomes.append({"op": op, "outcome": outcome, "detail": detail})
        sys.stdout.write(json.dumps(outcomes) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
