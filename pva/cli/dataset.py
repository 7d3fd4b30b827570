"""`pva dataset add|trend|regressions`: many reports as one Parquet dataset, and fleet analyses over it."""

from __future__ import annotations

import os
import sys

from formats.progress import Progress

from .. import dataset
from ..errors import PvaError
from ._common import print_json
from ._tables import add_format_options, write_rows


class _UsageError(PvaError):
    pass


def register(sub) -> None:
    parser = sub.add_parser(
        "dataset",
        help="build a fleet dataset of many reports (Parquet, Hive-partitioned) and analyse it",
        description=(
            "A dataset is a directory of Parquet files, one table per report table and per matrix, partitioned "
            "by report_id (a content hash of the report). DuckDB, Spark and other engines read it; "
            "'pva query DATASET SQL' runs SQL on it."
        ),
        epilog="Example: pva dataset add fleet/ --from nightly/ --label sdk=3.1 && pva dataset trend fleet/ cycles",
    )
    sub_commands = parser.add_subparsers(dest="dataset_command", metavar="SUBCOMMAND")
    sub_commands.required = True

    add = sub_commands.add_parser(
        "add",
        help="add reports to a dataset (created if absent)",
        description=(
            "Add reports, each whole or not at all. A report already in the dataset is left as it is. "
            "A file that is not a sound report is skipped with a reason; the exit status is then 1."
        ),
        epilog="Example: pva dataset add fleet/ --from runs/ --label sdk=3.1 --label model=bert",
    )
    add.add_argument("dataset", help="the dataset directory")
    add.add_argument("reports", nargs="*", metavar="REPORT", help="profile.pop files to add")
    add.add_argument(
        "--from",
        dest="source",
        action="append",
        default=[],
        metavar="DIR",
        help="add every *.pop file under DIR, recursively (repeatable)",
    )
    add.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a label recorded with every report added (repeatable)",
    )
    add.add_argument("--json", action="store_true", help="print the outcome as JSON")
    add.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="show progress on standard error even when it is not a terminal",
    )
    add.add_argument("--no-progress", dest="progress", action="store_false", help="never show progress")
    add.set_defaults(run=run_add)

    trend = sub_commands.add_parser(
        "trend",
        help="a metric per report, ordered by a reports column or a label",
        description="Metrics: " + "; ".join(f"{k}: {v[1]}" for k, v in dataset.METRICS.items()) + ".",
        epilog="Example: pva dataset trend fleet/ compute_set_cycles --by sdk",
    )
    trend.add_argument("dataset")
    trend.add_argument("metric", choices=list(dataset.METRICS))
    trend.add_argument(
        "--by",
        default="created",
        help="a reports column (created, added, poplar_version, ...) or a label key (default created)",
    )
    add_format_options(trend)
    trend.set_defaults(run=run_trend)

    reg = sub_commands.add_parser(
        "regressions",
        help="compare two labelled groups of reports; exit 1 when a key regressed",
        description=(
            "Mean of a metric per key (compute set) over the reports labelled BASELINE and CANDIDATE "
            "(both KEY=VALUE), worst ratio first. Exit status 1 when any key of the candidate exceeds the "
            "baseline by more than the threshold, so a CI pipeline can gate on it."
        ),
        epilog="Example: pva dataset regressions fleet/ sdk=3.0 sdk=3.1 --threshold 0.02",
    )
    reg.add_argument("dataset")
    reg.add_argument("baseline", metavar="BASELINE")
    reg.add_argument("candidate", metavar="CANDIDATE")
    reg.add_argument("--threshold", type=float, default=0.05, help="allowed relative growth (default 0.05)")
    reg.add_argument("--metric", choices=list(dataset.METRICS), default="compute_set_cycles")
    reg.add_argument("--all", action="store_true", help="list every key, not only the regressed ones")
    add_format_options(reg)
    reg.set_defaults(run=run_regressions)


def run_add(args) -> int:
    labels = _labels(args.label)
    paths = list(args.reports)
    for source in args.source:
        if not os.path.isdir(source):
            raise _UsageError(f"--from {source!r}: no such directory; expected a directory of reports")
        paths.extend(dataset.find_reports(source))
    if not paths:
        raise _UsageError("no reports given: name REPORT files or --from DIR")
    bar = Progress(enabled=args.progress if args.progress is not None else None)
    sizes = {p: _size(p) for p in paths}
    bar.start("adding", sum(sizes.values()))
    outcomes = dataset.add_reports(args.dataset, paths, labels, progress=lambda o: bar.advance(sizes.get(o.path, 0)))
    bar.finish()
    added = [o for o in outcomes if o.status == "added"]
    present = [o for o in outcomes if o.status == "present"]
    skipped = [o for o in outcomes if o.status == "skipped"]
    if args.json:
        print_json(
            {
                "dataset": args.dataset,
                "added": len(added),
                "present": len(present),
                "skipped": len(skipped),
                "reports": [
                    {
                        "path": o.path,
                        "status": o.status,
                        "report_id": o.report_id,
                        **({"reason": o.reason} if o.reason else {}),
                    }
                    for o in outcomes
                ],
            }
        )
    else:
        print(f"{args.dataset}: {len(added)} added, {len(present)} already present, {len(skipped)} skipped")
        for o in skipped:
            print(f"skipped {o.path}: {o.reason}", file=sys.stderr)
    return 1 if skipped else 0


def run_trend(args) -> int:
    table = dataset.trend(args.dataset, args.metric, by=args.by)
    write_rows(table.column_names, _rows(table), args.format)
    return 0


def run_regressions(args) -> int:
    table = dataset.regressions(args.dataset, args.baseline, args.candidate, args.threshold, args.metric)
    regressed = [r for r in table.to_pylist() if r["regressed"]]
    shown = table.to_pylist() if args.all else regressed
    write_rows(table.column_names, [tuple(r.values()) for r in shown], args.format)
    if not table.num_rows:
        print(f"note: no key is measured in both {args.baseline} and {args.candidate}", file=sys.stderr)
    return 1 if regressed else 0


def _labels(items: list[str]) -> dict[str, str]:
    from pva.dataset import parse_labels

    return parse_labels(items)


def _rows(table):
    return zip(*(c.to_pylist() for c in table.columns)) if table.num_columns else iter(())


def _size(path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
