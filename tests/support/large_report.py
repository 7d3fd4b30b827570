"""A large report written quickly through the formats writer, for the resource-bound tests.

Shaped like the profile of a long training loop on several IPUs: many programs, compute sets,
variables and lowered variables, and a long execution whose per-tile step cycles are nearly
incompressible, so the file is as large as its data. It is consistent where opening a report
looks (target, tiles, matrices and their chunks) and in the tables' sizes, not in every figure.
"""

from __future__ import annotations

import os

import numpy as np

from formats.pop.writer import ProfileWriter


def write_long_report(
    path: str | os.PathLike[str],
    *,
    num_steps: int,
    num_ipus: int = 4,
    tiles_per_ipu: int = 1472,
    num_programs: int = 100_000,
    num_variables: int = 100_000,
    pieces_per_variable: int = 4,
    seed: int = 5,
) -> None:
    """Write the report; its size grows with `num_steps` (2 bytes per tile and step)."""
    rng = np.random.default_rng(seed)
    tiles = num_ipus * tiles_per_ipu
    num_compute_sets = num_programs // 4
    with ProfileWriter(path, producer="pva-tests-large", poplar_version="3.1.0") as w:
        w.set_target(
            num_ipus=num_ipus, tiles_per_ipu=tiles_per_ipu, bytes_per_tile=638976, type="IpuModel", architecture="Ipu2"
        )
        w.set_graph(
            num_compute_sets=num_compute_sets,
            num_edges=10 * num_programs,
            num_vars=num_variables,
            num_vertices=20 * num_compute_sets,
        )
        w.insert(
            "compute_sets",
            ("compute_set", "name", "num_vertices"),
            ((cs, f"layer{cs // 40}/cs{cs}", 20) for cs in range(num_compute_sets)),
        )
        kinds = ["OnTileExecute", "DoExchange", "Sync", "OnTileExecute"]
        w.insert(
            "programs",
            ("id", "type", "name", "compute_set", "sync_type"),
            (
                (
                    p,
                    kinds[p % 4] if p else "Sequence",
                    f"prog{p}",
                    p // 4 if p % 4 in (0, 3) and p else None,
                    "Internal" if p % 4 == 2 else None,
                )
                for p in range(num_programs)
            ),
        )
        w.insert("program_children", ("parent", "position", "child"), ((0, p - 1, p) for p in range(1, num_programs)))
        w.insert("control_programs", ("position", "program"), [(0, 0)])
        w.insert("var_categories", ("id", "name", "description"), [(0, "variable", "Variables")])
        w.insert("variables", ("id", "name"), ((v, f"layer{v // 100}/var{v}") for v in range(num_variables)))
        w.insert(
            "vars_info",
            ("id", "tile", "name", "size_bytes", "category", "equivalence_class", "unlowered_var", "alloc_order"),
            (
                (
                    i,
                    i % tiles,
                    f"var{i // pieces_per_variable}/piece{i % pieces_per_variable}",
                    64 + i % 512,
                    0,
                    i,
                    i // pieces_per_variable,
                    i,
                )
                for i in range(num_variables * pieces_per_variable)
            ),
        )
        w.insert("runs", ("id", "name", "first_step", "num_steps"), [(0, "training", 0, num_steps)])
        w.insert(
            "steps",
            ("id", "run", "type", "program", "compute_set", "name"),
            (
                (s, 0, "OnTileExecute", 1 + 4 * (s % (num_programs // 4 - 1)), s % (num_compute_sets - 1), f"prog{s}")
                for s in range(num_steps)
            ),
        )
        matrix = w.matrix("step_cycles_by_tile")
        clock = np.zeros(num_ipus, dtype=np.int64)
        block = 2048
        for first in range(0, num_steps, block):
            count = min(block, num_steps - first)
            cycles = rng.integers(256, 65535, size=(count, tiles), dtype=np.uint16)
            matrix.append(cycles)
            per_ipu = cycles.reshape(count, num_ipus, tiles_per_ipu)
            longest = per_ipu.max(axis=2).astype(np.int64)
            totals = per_ipu.sum(axis=2, dtype=np.int64)
            ends = clock + np.cumsum(longest, axis=0)
            starts = ends - longest
            clock = ends[-1]
            w.insert(
                "steps_by_ipu",
                STEP_COLUMNS,
                (
                    (
                        first + k,
                        ipu,
                        int(totals[k, ipu]),
                        tiles_per_ipu,
                        0,
                        *([int(starts[k, ipu])] * 3),
                        *([int(ends[k, ipu])] * 3),
                        *([int(starts[k, ipu])] * 3),
                        *([int(ends[k, ipu])] * 3),
                        int(longest[k, ipu]),
                    )
                    for k in range(count)
                    for ipu in range(num_ipus)
                ),
            )
        w.insert(
            "run_cycles_by_ipu",
            ("run", "ipu", "start", "end"),
            [(0, ipu, 0, int(clock[ipu])) for ipu in range(num_ipus)],
        )


STEP_COLUMNS = (
    "step_id",
    "ipu",
    "cycles",
    "active_tiles",
    "cycles_base",
    "all_cycles_from_min",
    "all_cycles_from_max",
    "all_cycles_from_avg",
    "all_cycles_to_min",
    "all_cycles_to_max",
    "all_cycles_to_avg",
    "active_cycles_from_min",
    "active_cycles_from_max",
    "active_cycles_from_avg",
    "active_cycles_to_min",
    "active_cycles_to_max",
    "active_cycles_to_avg",
    "tile_cycles_max",
)
