"""`pva info REPORT`: what a report is: format, producer, target, graph counts, size."""

from __future__ import annotations

import os

import pva

from ._common import add_json_flag, print_json, thousands


def register(sub) -> None:
    parser = sub.add_parser(
        "info",
        help="show a report's format, producer, target and graph counts",
        description=(
            "Show what a report is: its file format and producer, the target, graph counts and size. For a trace: "
            "its processes, threads, events, flows, time span and units."
        ),
        epilog="Example: pva info profile.pop --json",
    )
    parser.add_argument(
        "report",
        help="a profile.pop file, or a trace (a .pvti trace file, or a Chrome / PyTorch profiler trace .json or .json.gz)",
    )
    add_json_flag(parser)
    parser.set_defaults(run=run)


def collect(path: str) -> dict:
    """The facts `pva info` shows, as a dictionary."""
    with pva.openReport(path) as report:
        meta = report.metadata
        t = report.compilation.target
        g = report.compilation.graph
        num_programs = report.row_count("programs")
        num_runs = report.row_count("runs")
        num_steps = report.row_count("steps")
        settings = report.instrumentationSettings
        missing = report.not_recorded

        def known(table: str, values: dict) -> dict:
            result = {k: (None if f"{table}.{k}" in missing else v) for k, v in values.items()}
            if table == "target" and (result["tiles_per_ipu"] is None or result["num_ipus"] is None):
                result["num_tiles"] = None  # the product of two figures, one not recorded
            return result

        return {
            "path": os.path.abspath(path),
            "file_size": os.path.getsize(path),
            "format_version": f"{report.version.major}.{report.version.minor}",
            "producer": meta.get("producer", ""),
            "producer_version": meta.get("producer_version", ""),
            "created": meta.get("created", ""),
            "poplar_version": report.poplarVersion.string,
            "target": known(
                "target",
                {
                    "type": t.type.name,
                    "architecture": t.architecture.name,
                    "num_ipus": t.numIPUs,
                    "tiles_per_ipu": t.tilesPerIpu,
                    "num_tiles": t.numTiles,
                    "bytes_per_tile": t.bytesPerTile,
                    "total_memory": t.totalMemory,
                    "clock_frequency": t.clockFrequency,
                    "num_replicas": t.numReplicas,
                },
            ),
            "graph": known(
                "graph",
                {
                    "num_vertices": g.numVertices,
                    "num_edges": g.numEdges,
                    "num_vars": g.numVars,
                    "num_compute_sets": g.numComputeSets,
                },
            ),
            "not_recorded": sorted(missing),
            "num_programs": num_programs,
            "num_runs": num_runs,
            "num_steps": num_steps,
            "instrumentation": {"compute": settings.compute.name, "external_exchange": settings.externalExchange.name},
        }


def run(args) -> int:
    if pva.isTrace(args.report):
        from ..analysis import trace_commands

        return trace_commands.info(args)
    info = collect(args.report)
    if args.json:
        print_json(info)
        return 0
    t, g = info["target"], info["graph"]

    def n(value, scale: float = 1.0) -> str:
        return "not recorded" if value is None else thousands(value / scale if scale != 1.0 else value)

    producer = " ".join(p for p in (info["producer"], info["producer_version"]) if p)
    lines = [
        f"{os.path.basename(info['path'])}",
        f"  File:             {info['path']} ({pva.format_size(info['file_size'])})",
        f"  Format:           profile.pop {info['format_version']}, written by {producer or 'unknown'} "
        f"on {info['created'] or 'an unknown date'}",
        f"  Poplar version:   {info['poplar_version'] or 'unknown'}",
        f"  Target:           {t['type']} {t['architecture']}, {n(t['num_ipus'])} IPU(s) x {n(t['tiles_per_ipu'])} "
        f"tiles = {n(t['num_tiles'])} tiles, "
        + (
            "memory per tile not recorded, "
            if t["bytes_per_tile"] is None
            else f"{pva.format_size(t['bytes_per_tile'])} per tile, "
        )
        + ("clock not recorded" if t["clock_frequency"] is None else f"{n(t['clock_frequency'], 1e6)} MHz")
        + f", {n(t['num_replicas'])} replica(s)",
        f"  Graph:            {n(g['num_vertices'])} vertices, {n(g['num_edges'])} edges, "
        f"{n(g['num_vars'])} variables, {n(g['num_compute_sets'])} compute sets",
        f"  Programs:         {thousands(info['num_programs'])}",
        f"  Execution:        {thousands(info['num_runs'])} run(s), {thousands(info['num_steps'])} steps",
        f"  Instrumentation:  compute {info['instrumentation']['compute']}, "
        f"external exchange {info['instrumentation']['external_exchange']}",
    ]
    print("\n".join(lines))
    return 0
