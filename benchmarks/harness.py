"""``python -m benchmarks``: measure pva against its baselines on simulator-generated reports.

Prints one table (measurement, ours, baseline, ratio, target, met?) and, with ``--json OUT``,
writes the same figures with the date, the machine and the reports measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sqlite3
import sys
import time

from .corpus import SIZES, corpus
from .rows import Context, Row
from .suite import MEASUREMENTS, run

#: Repetitions per size: (in-process timings, child processes). On `large` each child run (json.load
#: of 2.4 GB, conversion) takes minutes, so one run of each keeps the suite under 15 minutes; their
#: targets hold with a margin of more than 10x, far beyond the run-to-run spread of such long runs.
REPEATS = {"tiny": (3, 1), "small": (5, 3), "large": (5, 1)}


def machine() -> dict:
    """What the figures were measured on."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            model = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), "")
    except OSError:
        pass
    memory_gb = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    memory_gb = round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    import numpy
    import pyarrow

    try:
        import duckdb

        duckdb_version = duckdb.__version__
    except ImportError:
        duckdb_version = "not installed"
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "nproc": cpus,
        "cpu": model or platform.processor(),
        "memory_gb": memory_gb,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "numpy": numpy.__version__,
        "pyarrow": pyarrow.__version__,
        "duckdb": duckdb_version,
    }


def _number(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _met(row: Row) -> str:
    return "-" if row.met is None else ("yes" if row.met else "NO")


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table."""
    lines = ["| measurement | ours | baseline | ratio | target | met |", "|---|---:|---:|---:|---|:-:|"]
    for row in rows:
        lines.append(
            f"| {row.measurement} | {_number(row.ours)} {row.unit} | {_number(row.baseline)} {row.unit} "
            f"({row.baseline_what}) | {_number(row.ratio)} | {row.target} | {_met(row)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--size",
        choices=list(SIZES),
        default="large",
        help="reference report to measure (default: large; tiny is a smoke run)",
    )
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON to OUT")
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        choices=MEASUREMENTS,
        help=f"run only these measurements ({', '.join(MEASUREMENTS)})",
    )
    parser.add_argument("--repeat", type=int, help="repetitions of each in-process timing (default by size)")
    parser.add_argument("--child-repeat", type=int, help="repetitions of each child-process measurement")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started = time.perf_counter()
    repeat, child_repeat = REPEATS[args.size]
    size = SIZES[args.size]
    log(f"reports ({args.size}, compared with {size.reference} where a target says so):")
    main_corpus = corpus(args.size, log)
    reference = corpus(size.reference, log)
    context = Context(main_corpus, reference, args.repeat or repeat, args.child_repeat or child_repeat, log)
    rows = run(context, set(args.only or MEASUREMENTS))
    when = datetime.datetime.now().astimezone()
    info = main_corpus.info
    header = (
        f"{args.size} report: {info['compute_sets']:,} compute sets, {info['programs']:,} programs, "
        f"{info['steps']:,} steps x {info['tiles']:,} tiles ({info['ipus']} IPUs), "
        f"{info['file_bytes'] / 1e6:,.0f} MB; simulated in {info['simulate_seconds']:,.0f} s"
    )
    host = machine()
    print(
        f"pva benchmarks, {when:%Y-%m-%d %H:%M %Z}; {host['nproc']} CPUs ({host['cpu']}), "
        f"{host['memory_gb']} GB RAM, Python {host['python']}, SQLite {host['sqlite']}"
    )
    print(header)
    print(table(rows))
    missed = [row.name for row in rows if row.met is False]
    print(
        f"targets: {sum(row.met is True for row in rows)} met, {len(missed)} missed"
        + (f" ({', '.join(missed)})" if missed else "")
        + f"; {time.perf_counter() - started:,.0f} s"
    )
    if args.json:
        document = {
            "date": when.isoformat(timespec="seconds"),
            "size": args.size,
            "reference_size": size.reference,
            "machine": host,
            "reports": {args.size: main_corpus.info, size.reference: reference.info},
            "measurements": [
                {
                    "name": row.name,
                    "measurement": row.measurement,
                    "ours": row.ours,
                    "baseline": row.baseline,
                    "unit": row.unit,
                    "baseline_what": row.baseline_what,
                    "ratio": row.ratio,
                    "target": row.target,
                    "met": row.met,
                    "details": row.details,
                }
                for row in rows
            ],
        }
        tmp = f"{args.json}.tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=2)
            handle.write("\n")
        os.replace(tmp, args.json)
    return 0
