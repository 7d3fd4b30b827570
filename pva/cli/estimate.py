"""`pva estimate REPORT`: compile-time throughput estimates written as a Cerebras compile_report.txt."""

from __future__ import annotations

import os

from formats.atomic import AtomicOutput
from formats.profile_reader import ProfileReader

from ..analysis.estimate import estimate, format_compile_report
from ._common import print_json


def register(sub) -> None:
    parser = sub.add_parser(
        "estimate",
        help="write compile_report.txt: Cerebras-style throughput estimates from a compilation report",
        description=(
            "Estimate throughput from a compilation report and write it in the layout of Cerebras' "
            "compile_report.txt: overall Samples/s, Compute and Transmission Samples/s, Active PEs, Compute "
            "Utilization, and a table per kernel. Kernels are compute sets, PEs are tiles, transmission is the "
            "exchanges before each compute set; see the README for the delta-T rules."
        ),
        epilog="Example: pva estimate profile.pop -o out/ && cat out/compile_report.txt",
    )
    parser.add_argument("report", help="a profile.pop file")
    parser.add_argument("-o", "--output", default=".", metavar="PATH",
                        help="directory (or file name) for compile_report.txt (default: current directory)")
    parser.add_argument("--batch-size", type=int, default=1, help="samples per execution of the program (default 1)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of writing the file")
    parser.set_defaults(run=run)


def run(args) -> int:
    reader = ProfileReader(args.report)
    try:
        est = estimate(reader, batch_size=args.batch_size)
    finally:
        reader.close()
    if args.json:
        print_json({
            "samples_per_second": est.samples_per_second,
            "compute_samples_per_second": est.compute_samples_per_second,
            "transmission_samples_per_second": est.transmission_samples_per_second,
            "active_pes_percent": 100 * est.active_pes_fraction,
            "compute_utilization_percent": 100 * est.compute_utilization,
            "kernels": [{"name": k.name, "compute_delta_t": k.compute_dt, "transmission_delta_t": k.transmission_dt,
                         "overlaps": k.overlaps, "delta_t": k.delta_t, "active_pes": k.active_pes,
                         "executions": k.executions, "compute_utilization_percent": 100 * k.utilization}
                        for k in est.kernels],
        })
        return 0
    target = args.output
    if os.path.isdir(target):
        target = os.path.join(target, "compile_report.txt")
    with AtomicOutput(target) as out, open(out.path, "w", encoding="utf-8") as handle:
        handle.write(format_compile_report(est))
    print(f"wrote {target}")
    return 0
