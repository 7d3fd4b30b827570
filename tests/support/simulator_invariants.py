"""Invariants every simulated report must satisfy, checked in SQL and on the per-tile matrices."""

from __future__ import annotations

import numpy as np

from formats.pop.reader import ProfileReader


def check_report(path) -> list[str]:
    """Every violated invariant of the report at `path`, as messages (empty when all hold)."""
    r = ProfileReader(path)
    try:
        return _check(r)
    finally:
        r.close()


def _check(r: ProfileReader) -> list[str]:
    problems: list[str] = []
    t = r.target
    bytes_per_tile = t["bytes_per_tile"]
    tiles_per_ipu = t["tiles_per_ipu"]

    # memory: categories add up to tile totals; gaps never make figures smaller; overflow exact
    mem = np.array(
        r.query(
            "SELECT tile, total, total_including_gaps, interleaved, interleaved_including_gaps, "
            "non_interleaved, non_interleaved_including_gaps, overflowed, overflowed_including_gaps, "
            "always_live_bytes, not_always_live_bytes FROM memory_by_tile ORDER BY tile"
        ),
        dtype=np.int64,
    )
    cats = r.matrix("memory_category_by_tile").rows()
    if mem.shape[0] != t["tiles_per_replica"]:
        problems.append(f"memory_by_tile has {mem.shape[0]} rows for {t['tiles_per_replica']} tiles")
    region_sum = cats.reshape(cats.shape[0], -1, 3, 2).sum(axis=(1, 3))
    if not np.array_equal(cats.sum(axis=1), mem[:, 1].astype(np.uint64)):
        problems.append("category bytes do not add up to memory_by_tile.total")
    for column, region in ((3, 0), (5, 1), (7, 2)):
        if not np.array_equal(region_sum[:, region], mem[:, column].astype(np.uint64)):
            problems.append(f"category bytes of region {region} do not add up to the tile's region total")
    if not np.array_equal(mem[:, 1], mem[:, 3] + mem[:, 5] + mem[:, 7]):
        problems.append("total is not interleaved + nonInterleaved + overflowed")
    for a, b, label in ((1, 2, "total"), (3, 4, "interleaved"), (5, 6, "non_interleaved"), (7, 8, "overflowed")):
        if np.any(mem[:, b] < mem[:, a]):
            problems.append(f"{label} including gaps is below {label} excluding gaps on some tile")
    over = mem[:, 7] > 0
    too_big = mem[:, 2] > bytes_per_tile
    if not np.array_equal(over, too_big):
        problems.append("overflow is not reported exactly when a tile is over its bytes")
    live = mem[:, 9] + mem[:, 10]
    if np.any((live > bytes_per_tile) & ~over):
        problems.append("always-live plus peak not-always-live exceeds a tile's memory without overflow")
    if np.any(live > mem[:, 1]):
        problems.append("always-live plus peak not-always-live exceeds the tile's used memory")
    al = dict(r.query("SELECT tile, sum(size_bytes) FROM vars_info WHERE always_live = 1 GROUP BY tile"))
    if any(al.get(int(row[0]), 0) != row[9] for row in mem):
        problems.append("always_live_bytes differ from the always-live lowered variables")
    by_cat = r.query("SELECT category, region, overlapped, total FROM memory_by_category")
    regions = {"interleaved": 0, "nonInterleaved": 1, "overflowed": 2}
    for c, region, ov, total in by_cat:
        if int(cats[:, 6 * c + 2 * regions[region] + ov].sum()) != total:
            problems.append(f"memory_by_category disagrees with the matrix for category {c} {region}")
            break

    # programs: all reachable; steps name existing programs; OnTileExecute steps name compute sets
    children: dict[int, list[int]] = {}
    for parent, child in r.query("SELECT parent, child FROM program_children"):
        children.setdefault(parent, []).append(child)
    calls = dict(r.query("SELECT id, call_target FROM programs WHERE call_target IS NOT NULL"))
    roots = r.column("SELECT program FROM control_programs") + r.column("SELECT program FROM function_programs")
    seen, stack = set(), list(roots)
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        stack.extend(children.get(p, ()))
        if p in calls:
            stack.append(calls[p])
    all_programs = set(r.column("SELECT id FROM programs"))
    if seen != all_programs:
        problems.append(f"{len(all_programs - seen)} program(s) are not reachable from a control program or function")
    bad = r.query_one(
        "SELECT count(*) FROM steps s LEFT JOIN programs p ON p.id = s.program "
        "WHERE (s.program IS NOT NULL AND p.id IS NULL) OR (s.program IS NULL AND s.type != 'Sync')"
    )[0]
    if bad:
        problems.append(f"{bad} step(s) name no existing program")
    bad = r.query_one("SELECT count(*) FROM steps s JOIN programs p ON p.id = s.program WHERE s.type != p.type")[0]
    if bad:
        problems.append(f"{bad} step(s) have a type other than their program's")
    bad = r.query_one(
        "SELECT count(*) FROM steps s JOIN programs p ON p.id = s.program WHERE s.type = 'OnTileExecute' "
        "AND (s.compute_set IS NULL OR s.compute_set != p.compute_set)"
    )[0]
    if bad:
        problems.append(f"{bad} OnTileExecute step(s) do not name their compute set")

    # execution: step spans add up to run cycles; per-IPU cycles are sums of the tile row
    runs = r.query("SELECT id, first_step, num_steps FROM runs ORDER BY id")
    span_rows = r.query(
        "SELECT s.run, b.ipu, b.step_id, b.all_cycles_from_min, b.all_cycles_to_max, s.cycles_overlapped, "
        "b.cycles_base FROM steps s JOIN steps_by_ipu b ON b.step_id = s.id WHERE b.profiled = 1 "
        "ORDER BY b.ipu, b.step_id"
    )
    totals: dict[tuple[int, int], int] = {}
    positions: dict[tuple[int, int], int] = {}
    for run, ipu, step, frm, to, ov, _base in span_rows:
        span = to - frm
        key = (run, ipu)
        expected = positions.get(key, 0) - min(ov, span)
        if frm != expected:
            problems.append(f"step {step} on IPU {ipu} starts at {frm}, expected {expected}")
            break
        positions[key] = to
        totals[key] = totals.get(key, 0) + span - min(ov, span)
    for run, ipu, start, end in r.query('SELECT run, ipu, start, "end" FROM run_cycles_by_ipu'):
        if totals.get((run, ipu), 0) != end - start:
            problems.append(
                f"run {run} IPU {ipu}: steps add up to {totals.get((run, ipu), 0)} cycles, the run has {end - start}"
            )
    num_steps = r.query_one("SELECT count(*) FROM steps")[0]
    if sum(n for _, _, n in runs) != num_steps:
        problems.append("runs do not cover the steps")
    if num_steps:
        matrix = r.matrix("step_cycles_by_tile")
        if matrix is None or matrix.num_rows != num_steps:
            problems.append("step_cycles_by_tile does not have one row per step")
        else:
            ipu_cycles = np.zeros((num_steps, t["num_ipus"]), dtype=np.int64)
            for ipu, step, cycles in r.query("SELECT ipu, step_id, cycles FROM steps_by_ipu"):
                ipu_cycles[step, ipu] = cycles
            for first, block in matrix.iter_chunks():
                sums = block.astype(np.int64).reshape(block.shape[0], t["num_ipus"], tiles_per_ipu).sum(axis=2)
                if not np.array_equal(sums, ipu_cycles[first : first + block.shape[0]]):
                    problems.append(f"steps_by_ipu.cycles differ from the tile rows near step {first}")
                    break
        for run, ipu, total, summed in r.query(
            "SELECT c.run, c.ipu, c.total, (SELECT sum(b.cycles) FROM steps_by_ipu b JOIN steps s ON s.id = b.step_id "
            "WHERE s.run = c.run AND b.ipu = c.ipu) FROM cycle_totals c"
        ):
            if total != (summed or 0):
                problems.append(f"cycle_totals of run {run} IPU {ipu} is {total}, the steps add up to {summed}")

    # compute sets summarise their per-tile rows
    est = r.matrix("compute_set_estimated_cycles_by_tile")
    for cs, row, mx, total in r.query(
        "SELECT compute_set, estimated_cycles_row, estimated_cycles_max, "
        "estimated_cycles_total FROM compute_sets LIMIT 200"
    ):
        values = est.row(row)
        if int(values.max(initial=0)) != mx or int(values.sum()) != total:
            problems.append(f"compute set {cs} summary disagrees with its per-tile row")
            break

    # liveness: step bytes are the sum over IPUs; per-tile peaks match for the liveness tiles
    bad = r.query_one(
        "SELECT count(*) FROM liveness_steps l WHERE l.not_always_live_bytes != "
        "(SELECT coalesce(sum(bytes), 0) FROM liveness_step_ipus i WHERE i.step = l.id)"
    )[0]
    if bad:
        problems.append(f"{bad} liveness step(s) differ from the sum of their IPUs")
    bad = r.query_one(
        "SELECT count(*) FROM equivalence_class_steps e JOIN vars_info v "
        "ON v.equivalence_class = e.class WHERE v.always_live = 1"
    )[0]
    if bad:
        problems.append(f"{bad} always-live lowered variable(s) belong to classes with liveness intervals")
    num_live = r.query_one("SELECT count(*) FROM liveness_steps")[0]
    for (tile,) in r.query("SELECT tile FROM liveness_tiles"):
        delta = np.zeros(num_live + 1, dtype=np.int64)
        for start, end, size in r.query(
            'SELECT e.start, e."end", v.size_bytes FROM equivalence_class_steps e JOIN vars_info v '
            "ON v.equivalence_class = e.class WHERE v.tile = ?",
            (tile,),
        ):
            delta[start] += size
            delta[end] -= size
        peak = int(np.cumsum(delta)[:num_live].max(initial=0))
        if peak != int(mem[tile, 10]):
            problems.append(f"tile {tile}: peak liveness from the steps is {peak}, memory_by_tile says {mem[tile, 10]}")

    # code: control code of the roots and exchange code add up to their categories
    names = dict(r.query("SELECT name, id FROM var_categories"))
    code = r.matrix("program_control_code_by_tile")
    root_rows = [
        row
        for prog, row in r.query("SELECT program, row FROM program_vectors WHERE kind = 'control_code'")
        if prog in set(roots)
    ]
    control = code.take(root_rows).sum(axis=0) if root_rows else np.zeros(cats.shape[0], dtype=np.uint64)
    c = names["controlCode"]
    if not np.array_equal(control, cats[:, 6 * c : 6 * c + 6].sum(axis=1)):
        problems.append("control code of the control programs and functions differs from category controlCode")
    rows = r.column(
        "SELECT row FROM program_vectors v JOIN programs p ON p.id = v.program "
        "WHERE v.kind = 'code_bytes' AND p.type = 'DoExchange'"
    )
    if rows:
        exchange = r.matrix("program_code_bytes_by_tile").take(rows).sum(axis=0)
        c = names["internalExchangeCode"]
        if not np.array_equal(exchange, cats[:, 6 * c : 6 * c + 6].sum(axis=1)):
            problems.append("exchange code of the DoExchange programs differs from category internalExchangeCode")
    return problems
