"""Runs every read path of pva over damaged reports, one case after another, in a child process.

Usage: python hostile_worker.py CASES.json RESULTS.jsonl
Each case is {"name", "path", "debug"}; each result line is {"case", "op", "outcome", "detail"} where
outcome is "ok", "pva_error" or "unexpected". The parent runs this under memory and time limits
and restarts it after the case it was on when it died.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import os
import signal
import sys
import tempfile
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # the repository

import pva
from formats.errors import PvaError

#: Attribute names never called while walking (they change state or need a caller's object).
_SKIP = {"close", "listPrintLength", "accept"}
#: Items of each list that are walked (first ones, then last ones).
_HEAD, _TAIL = 12, 2


class _Timeout(Exception):
    pass


def _alarm(_signum, _frame):
    raise _Timeout()


def _children(obj):
    """(name, value) of every public property and argument-free method of a pva object."""
    cls = type(obj)
    for name in dir(cls):
        if name.startswith("_") or name in _SKIP:
            continue
        attr = inspect.getattr_static(cls, name, None)
        if isinstance(attr, property) or hasattr(attr, "__get__") and not callable(attr):
            yield name, getattr(obj, name)
        elif callable(attr) and not isinstance(attr, type):
            bound = getattr(obj, name)
            try:
                sig = inspect.signature(bound)
            except (TypeError, ValueError):
                continue
            required = [
                p
                for p in sig.parameters.values()
                if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            ]
            if not required:
                yield name + "()", bound()
            elif len(required) == 1:
                for argument in (0, 1):
                    try:
                        yield f"{name}({argument})", bound(argument)
                    except (PvaError, TypeError, ValueError, KeyError):
                        continue


def walk(report, budget: int = 4000) -> int:
    """Visit objects reachable from a report breadth-first; returns how many were visited."""
    queue = [report]
    visited = 0
    while queue and visited < budget:
        obj = queue.pop(0)
        visited += 1
        try:
            members = list(_children(obj))
        except PvaError:
            raise
        for _name, value in members:
            if isinstance(value, (list, tuple)):
                items = list(value[:_HEAD]) + list(value[-_TAIL:]) if len(value) > _HEAD else list(value)
                repr(value)
                queue.extend(v for v in items if type(v).__module__.startswith("pva"))
            elif type(value).__module__.startswith("pva") and not isinstance(value, int):
                repr(value)
                queue.append(value)
    return visited


def _open_and_walk(case):
    report = pva.openReport(case["path"], case.get("debug")) if case.get("debug") else pva.openReport(case["path"])
    try:
        walk(report)
        visitor = pva.ProgramVisitor()
        for program in report.compilation.programs[:200]:
            program.accept(visitor)
    finally:
        report.close()


def _cli(*args):
    from pva.cli import main

    os.environ["PVA_DEBUG"] = "1"  # an internal error must surface here, not become exit status 3
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        status = main(list(args))
    if status == 2:
        raise PvaError(err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else "exit 2")
    return status


def _operations(case, scratch):
    path = case["path"]
    yield "open+walk", lambda: _open_and_walk(case)
    yield "summary", lambda: _cli("summary", path, "--show-var-storage", "--show-execution-steps")
    yield "check", lambda: _cli("check", path)
    yield "info", lambda: _cli("info", path)
    yield "tables", lambda: _cli("tables", path)
    yield "optime", lambda: _cli("optime", path, "--mode", "each")
    yield "estimate", lambda: _cli("estimate", path, "--json")
    from pva.cli import command_modules

    if not case.get("all_ops", True):
        return
    if "export" in command_modules():
        for fmt, name in (
            ("csv", "csv"),
            ("parquet", "parquet"),
            ("hdf5", "out.h5"),
            ("chrome-trace", "trace.json"),
            ("legacy-json", "legacy.json"),
        ):
            out = os.path.join(scratch, name)
            yield f"export-{fmt}", lambda fmt=fmt, out=out: _cli("export", path, "--format", fmt, "-o", out)
    if "html" in command_modules():
        yield "html", lambda: _cli("html", path, "-o", os.path.join(scratch, "r.html"))


def main(cases_path: str, results_path: str, start: int, seconds: int) -> None:
    with open(cases_path) as handle:
        cases = json.load(handle)
    signal.signal(signal.SIGALRM, _alarm)
    with open(results_path, "a") as results:
        for index in range(start, len(cases)):
            case = cases[index]
            with tempfile.TemporaryDirectory() as scratch:
                for op, run in _operations(case, scratch):
                    results.write(
                        json.dumps({"index": index, "case": case["name"], "op": op, "outcome": "started"}) + "\n"
                    )
                    results.flush()
                    signal.alarm(seconds)
                    try:
                        run()
                        outcome, detail = "ok", ""
                    except PvaError as exc:
                        outcome, detail = "pva_error", str(exc)[:300]
                    except _Timeout:
                        outcome, detail = "timeout", f"more than {seconds} s"
                    except BaseException as exc:
                        outcome, detail = (
                            "unexpected",
                            "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-2000:],
                        )
                    finally:
                        signal.alarm(0)
                    results.write(
                        json.dumps(
                            {"index": index, "case": case["name"], "op": op, "outcome": outcome, "detail": detail}
                        )
                        + "\n"
                    )
                    results.flush()


if __name__ == "__main__":
    main(
        sys.argv[1],
        sys.argv[2],
        int(sys.argv[3]) if len(sys.argv) > 3 else 0,
        int(sys.argv[4]) if len(sys.argv) > 4 else 30,
    )
