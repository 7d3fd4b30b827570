"""`pva query` over many reports, and fleet datasets: each beside a baseline in the same process.

- query-reports: `pva query DIR` over 3, 30 and 300 loose small reports against the strongest
  native scan of the same SQLite files this machine has: DuckDB's SQLite scanner when it can be
  loaded, otherwise each file's own SQLite engine running the query (the per-report part of it)
  in the same process.
- fleet-add: `pva dataset add` of N simulated small reports against copying the same files (with
  the same durability: one sync at the end), in reports/s and MB/s.
- fleet-query: `pva query DATASET` (an aggregate over every report) against DuckDB's own
  read_parquet over the same Parquet files.
- fleet-report-cost: bytes and seconds per report of the suite's own report added to a dataset,
  the basis of the 100,000-report projection in docs/fleet.md.

The small reports are simulator runs of several presets with varied knobs, cached under the
benchmark cache; reruns of them (the same model at another time) fill up the count cheaply.
"""

from __future__ import annotations

import ctypes
import datetime
import os
import shutil
import sqlite3
import time

from .corpus import CACHE, source_hash
from .rows import Context, Row, growth_exponent
from .rows import ms as _ms
from .timing import alternate

#: Loose-report counts and dataset size per benchmark size.
LOOSE_COUNTS = {"tiny": (3, 30), "small": (3, 30, 300), "large": (3, 30, 300)}
FLEET_REPORTS = {"tiny": 30, "small": 1000, "large": 1000}
#: Distinct simulations in the pool (the rest are reruns at other times).
DISTINCT = {"tiny": 6, "small": 40, "large": 40}
QUERY_RATIO = 2.0
#: Growth exponent of a loose query over the report count: linear, or better while fixed costs dominate.
QUERY_GROWTH = 1.1
FLEET_QUERY_RATIO = 1.5

_KNOBS = [
    ("tutorial1", {}),
    ("tutorial2", {}),
    ("tutorial3", {"cycle-estimate": 20}),
    ("tutorial3", {"cycle-estimate": 60}),
    ("matrix-vector", {"rows": 64, "cols": 32}),
    ("matrix-vector", {"rows": 128, "cols": 64, "split": 1}),
    ("matmul", {"m": 64, "k": 64, "n": 64}),
    ("matmul", {"m": 128, "k": 64, "n": 96, "dtype": "float"}),
    ("conv", {"batch": 1, "in-chans": 8, "out-chans": 8, "height": 8, "width": 8}),
    ("conv", {"batch": 2, "in-chans": 16, "out-chans": 8, "height": 8, "width": 8, "kernel": 1}),
    ("mnist-mlp", {"batch": 4, "hidden": 32, "steps": 2, "runs": 1}),
]
_TILES = (16, 32, 64)
_ARCHS = ("ipu2", "ipu21", "ipu1")

#: The queries: over loose reports (column `report`) and its per-file form for the SQLite baseline.
LOOSE_QUERIES = {
    "aggregate": (
        (
            "SELECT report, CAST(sum(cycles) AS BIGINT) AS cycles, count(*) AS n FROM steps_by_ipu "
            "GROUP BY report ORDER BY report"
        ),
        "SELECT sum(cycles), count(*) FROM steps_by_ipu",
    ),
    "join": (
        (
            "SELECT s.report, cs.name, CAST(sum(b.cycles) AS BIGINT) AS cycles FROM steps s "
            "JOIN steps_by_ipu b ON b.report = s.report AND b.step_id = s.id "
            "JOIN compute_sets cs ON cs.report = s.report AND cs.compute_set = s.compute_set "
            "GROUP BY s.report, cs.name ORDER BY s.report, cs.name"
        ),
        (
            "SELECT cs.name, sum(b.cycles) FROM steps s JOIN steps_by_ipu b ON b.step_id = s.id "
            "JOIN compute_sets cs ON cs.compute_set = s.compute_set GROUP BY cs.name ORDER BY cs.name"
        ),
    ),
}
FLEET_QUERY = (
    "SELECT report_id, CAST(sum(cycles) AS BIGINT) AS cycles, CAST(max(tile_cycles_max) AS BIGINT) AS worst "
    "FROM steps_by_ipu GROUP BY report_id ORDER BY report_id"
)


# -- the small reports ---------------------------------------------------------------------------


def _variants(count: int) -> list[tuple[str, dict]]:
    out = []
    for i in range(count):
        name, knobs = _KNOBS[i % len(_KNOBS)]
        round_ = i // len(_KNOBS)
        out.append(
            (
                name,
                {
                    **knobs,
                    "tiles-per-ipu": _TILES[round_ % len(_TILES)],
                    "arch": _ARCHS[(round_ // len(_TILES)) % len(_ARCHS)],
                },
            )
        )
    return out


def pool(distinct: int, log) -> list[str]:
    """`distinct` simulated small reports (cached): several presets, knobs, tile counts and architectures."""
    from simulator.presets import run_preset

    key = source_hash(
        (
            "schemas",
            "simulator",
            "formats/pop/writer.py",
            "formats/pop/sqlite_writer.py",
            "formats/pop/arrow_chunks.py",
        ),
        _variants(distinct),
    )
    root = CACHE / f"fleet-pool-{key}"
    paths = []
    for i, (name, knobs) in enumerate(_variants(distinct)):
        directory = root / f"{i:03}-{name}"
        path = directory / "profile.pop"
        if not path.exists():
            if i == 0 or not root.exists():
                log(f"  simulating {distinct} small reports for the fleet benchmarks ...")
            tmp = directory.with_suffix(".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            run_preset(name, knobs, str(tmp), timestamp=1_700_000_000.0 + i, functional=False)
            for leftover in tmp.iterdir():
                if leftover.name != "profile.pop":
                    leftover.unlink()
            shutil.rmtree(directory, ignore_errors=True)
            tmp.rename(directory)
        paths.append(str(path))
    return paths


def reports(directory: str, count: int, base: list[str]) -> list[str]:
    """`count` distinct report files in `directory`: the pool, then reruns of it at later times."""
    os.makedirs(directory, exist_ok=True)
    out = []
    for i in range(count):
        source = base[i % len(base)]
        target = os.path.join(directory, f"{i:05}", "profile.pop")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(source, target)
        if i >= len(base):  # a rerun of the same model: another creation time, so another report
            conn = sqlite3.connect(target)
            created = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(hours=i)
            with conn:
                conn.execute(
                    "UPDATE metadata SET value = ? WHERE key = 'created'", (created.isoformat(timespec="seconds"),)
                )
            conn.close()
        out.append(target)
    return out


# -- baselines -----------------------------------------------------------------------------------


def _order(row: tuple) -> tuple:
    return row[0], str(row[1])


def _scanner_extension() -> str:
    """The sqlite_scanner extension binary of the `bench` extra's package, or "sqlite" (DuckDB's own install)."""
    try:
        import importlib.resources

        import duckdb

        root = importlib.resources.files("duckdb_extension_sqlite_scanner") / "extensions"
        path = root / f"v{duckdb.__version__}" / "sqlite_scanner.duckdb_extension"
        return str(path) if path.is_file() else "sqlite"
    except ImportError:
        return "sqlite"


def _duckdb_sqlite_scanner():
    """A DuckDB connection with the sqlite extension loaded, or None where it cannot be loaded.

    The extension comes from the `bench` extra (pip install ".[bench]", which pins DuckDB to the
    extension's version) or from DuckDB's own extension directory. DuckDB checks its signature.
    """
    import duckdb

    con = duckdb.connect(config={"autoinstall_known_extensions": False})
    extension = _scanner_extension()
    try:
        con.execute(f"LOAD '{extension}'" if extension != "sqlite" else "LOAD sqlite")
    except duckdb.Error:
        con.close()
        return None
    return con


def _sqlite_per_file(paths: list[str], labels: list[str], sql: str) -> list[tuple]:
    rows = []
    for path, label in zip(paths, labels):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows.extend((label, *row) for row in conn.execute(sql))
        finally:
            conn.close()
    return rows


def _scanner_query(con, paths: list[str], labels: list[str], sql: str) -> list[tuple]:
    """The loose query through DuckDB's SQLite scanner: each table a UNION ALL of sqlite_scan per file."""
    tables = ("steps", "steps_by_ipu", "compute_sets")
    views = []
    for table in tables:
        parts = [
            f"SELECT '{label}' AS report, * FROM sqlite_scan('{path}', '{table}')" for path, label in zip(paths, labels)
        ]
        views.append(f"{table} AS ({' UNION ALL '.join(parts)})")
    return con.execute(f"WITH {', '.join(views)} {sql}").fetchall()


# -- measurements --------------------------------------------------------------------------------


def measure_query_reports(ctx: Context) -> list[Row]:
    from pva.analysis import fleet_query as multi

    counts = LOOSE_COUNTS[ctx.main.size]
    base = pool(DISTINCT[ctx.main.size], ctx.log)
    scanner = _duckdb_sqlite_scanner()
    baseline_what = (
        "DuckDB's SQLite scanner over the same files"
        if scanner is not None
        else "each file's own SQLite running the per-report query (DuckDB's SQLite scanner cannot be loaded here)"
    )
    rows = []
    seconds: dict[str, dict[str, list[float]]] = {name: {"ours": [], "baseline": []} for name in LOOSE_QUERIES}
    scratch = ctx.scratch()
    try:
        for count in counts:
            directory = os.path.join(scratch, f"loose-{count}")
            paths = reports(directory, count, base)
            labels = [os.path.relpath(p, directory) for p in paths]
            megabytes = sum(os.path.getsize(p) for p in paths) / 1e6
            for name, (sql, per_file) in LOOSE_QUERIES.items():

                def ours(sql=sql, directory=directory):
                    return [tuple(r.values()) for r in multi.query_reports(directory, sql).to_pylist()]

                if scanner is not None:

                    def baseline(sql=sql, paths=paths, labels=labels):
                        return _scanner_query(scanner, paths, labels, sql)
                else:

                    def baseline(per_file=per_file, paths=paths, labels=labels):
                        return sorted(_sqlite_per_file(paths, labels, per_file), key=_order)

                repeat = max(3, ctx.repeat if count < 300 else 3)
                medians, times, results = alternate({"ours": ours, "baseline": baseline}, repeat)
                assert [tuple(map(str, r)) for r in results["ours"]] == [
                    tuple(map(str, r)) for r in sorted(results["baseline"], key=_order)
                ], f"query-reports {name} over {count}: the results disagree"
                ours_s, base_s = medians["ours"], medians["baseline"]
                seconds[name]["ours"].append(ours_s)
                seconds[name]["baseline"].append(base_s)
                rows.append(
                    Row(
                        f"query-reports-{name}-{count}",
                        f"pva query over {count} loose reports ({megabytes:,.0f} MB), {name}",
                        ours_s * 1e3,
                        base_s * 1e3,
                        "ms",
                        baseline_what,
                        f"ratio <= {QUERY_RATIO:g}",
                        ours_s <= QUERY_RATIO * base_s,
                        details={"times_ms": _ms(times)},
                    )
                )
    finally:
        if scanner is not None:
            scanner.close()
        shutil.rmtree(scratch, ignore_errors=True)
    if len(counts) >= 3:
        for name, sides in seconds.items():
            ours_g = growth_exponent(list(counts), sides["ours"])
            base_g = growth_exponent(list(counts), sides["baseline"])
            rows.append(
                Row(
                    f"query-reports-growth-{name}",
                    f"growth exponent of pva query ({name}) over {', '.join(map(str, counts))} loose reports",
                    ours_g,
                    base_g,
                    "exponent",
                    f"the baseline's own growth ({baseline_what})",
                    f"<= {QUERY_GROWTH:g}",
                    ours_g <= QUERY_GROWTH,
                    details={"counts": list(counts), "seconds": sides},
                )
            )
    return rows


def _syncfs(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if not hasattr(libc, "syncfs") or libc.syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


def _copy_all(paths: list[str], target: str) -> None:
    os.makedirs(target)
    for i, path in enumerate(paths):
        shutil.copyfile(path, os.path.join(target, f"{i:05}.pop"))
    _syncfs(target)


def _tree_bytes(root: str) -> tuple[int, int]:
    total = files = 0
    for directory, _dirs, names in os.walk(root):
        for name in names:
            if name.endswith(".parquet"):
                total += os.path.getsize(os.path.join(directory, name))
                files += 1
    return total, files


def measure_fleet(ctx: Context) -> list[Row]:
    import duckdb

    import pva.dataset

    count = FLEET_REPORTS[ctx.main.size]
    base = pool(DISTINCT[ctx.main.size], ctx.log)
    scratch = ctx.scratch()
    rows = []
    try:
        paths = reports(os.path.join(scratch, "reports"), count, base)
        megabytes = sum(os.path.getsize(p) for p in paths) / 1e6
        data = os.path.join(scratch, "fleet")
        ctx.log(f"  adding {count} reports ({megabytes:,.0f} MB) to a dataset ...")
        _syncfs(scratch)
        started = time.perf_counter()
        outcomes = pva.dataset.add_reports(data, paths, labels={"bench": "fleet"})
        add_s = time.perf_counter() - started
        assert all(o.status == "added" for o in outcomes), [o.reason for o in outcomes if o.status != "added"][:3]
        started = time.perf_counter()
        _copy_all(paths, os.path.join(scratch, "copies"))
        copy_s = time.perf_counter() - started
        dataset_bytes, files = _tree_bytes(data)
        rows.append(
            Row(
                "fleet-add",
                f"pva dataset add of {count} simulated small reports ({megabytes:,.0f} MB): "
                f"{count / add_s:,.1f} reports/s, {megabytes / add_s:,.1f} MB/s",
                add_s,
                copy_s,
                "s",
                f"copying the files ({megabytes / copy_s:,.0f} MB/s), one sync at the end",
                "reported (no target)",
                None,
                details={
                    "reports": count,
                    "report_mb": megabytes,
                    "reports_per_s": count / add_s,
                    "mb_per_s": megabytes / add_s,
                    "dataset_mb": dataset_bytes / 1e6,
                    "parquet_files": files,
                    "seconds_per_report": add_s / count,
                },
            )
        )

        def ours():
            return [tuple(r.values()) for r in pva.dataset.query(data, FLEET_QUERY).to_pylist()]

        def baseline():
            con = duckdb.connect()
            try:
                glob = os.path.join(data, "steps_by_ipu", "*", "*.parquet")
                sql = FLEET_QUERY.replace("FROM steps_by_ipu", f"FROM read_parquet('{glob}', hive_partitioning = true)")
                return con.execute(sql).fetchall()
            finally:
                con.close()

        medians, times, results = alternate({"ours": ours, "baseline": baseline}, max(ctx.repeat, 5))
        assert results["ours"] == [tuple(r) for r in results["baseline"]], "fleet-query: the results disagree"
        ours_s, base_s = medians["ours"], medians["baseline"]
        rows.append(
            Row(
                "fleet-query",
                f"pva query over a dataset of {count} reports: cycles per report",
                ours_s * 1e3,
                base_s * 1e3,
                "ms",
                "DuckDB read_parquet over the same files",
                f"ratio <= {FLEET_QUERY_RATIO:g}",
                ours_s <= FLEET_QUERY_RATIO * base_s,
                details={"times_ms": _ms(times)},
            )
        )
        rows.extend(_report_cost(ctx, scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return rows


def _report_cost(ctx: Context, scratch: str) -> list[Row]:
    """Bytes and seconds per MB of the suite's own report added to a dataset (the projection's basis)."""
    import pva.dataset

    report = str(ctx.main.pop)
    megabytes = os.path.getsize(report) / 1e6
    data = os.path.join(scratch, "one")
    _syncfs(scratch)
    started = time.perf_counter()
    [outcome] = pva.dataset.add_reports(data, [report])
    add_s = time.perf_counter() - started
    assert outcome.status == "added", outcome.reason
    started = time.perf_counter()
    _copy_all([report], os.path.join(scratch, "one-copy"))
    copy_s = time.perf_counter() - started
    dataset_bytes, files = _tree_bytes(data)
    return [
        Row(
            "fleet-report-cost",
            f"pva dataset add of the {ctx.main.size} report ({megabytes:,.0f} MB): "
            f"{megabytes / add_s:,.1f} MB/s, dataset {dataset_bytes / 1e6:,.1f} MB "
            f"({dataset_bytes / 1e6 / megabytes:.2f} of the report)",
            add_s,
            copy_s,
            "s",
            "copying the file, one sync",
            "reported (no target)",
            None,
            details={
                "report_mb": megabytes,
                "dataset_mb": dataset_bytes / 1e6,
                "parquet_files": files,
                "mb_per_s": megabytes / add_s,
                "size_ratio": dataset_bytes / 1e6 / megabytes,
            },
        )
    ]
