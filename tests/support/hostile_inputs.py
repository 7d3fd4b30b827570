"""Hostile inputs built from a valid report: legitimately shaped but huge declarations, planted SQL
objects (generated columns, views, triggers), query bombs, and program DAGs that explode when walked.

Each builder copies `source` to `dest`, changes it, and returns `dest`; sizes are parameters so a
test uses small ones and a measurement the ones of a real attack.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import sqlite3

import numpy as np

from formats.pop.arrow_chunks import encode_chunk


def _copy(source: str | os.PathLike[str], dest: str | os.PathLike[str]) -> str:
    shutil.copyfile(source, dest)
    return os.fspath(dest)


def many_categories(source: str | os.PathLike[str], dest: str | os.PathLike[str], count: int) -> str:
    """A report declaring `count` memory categories: memory_category_by_tile gets 6 x count columns of
    zeros (which compress to almost nothing), every shape consistent with the tables."""
    path = _copy(source, dest)
    conn = sqlite3.connect(path)
    try:
        (known,) = conn.execute("SELECT count(*) FROM var_categories").fetchone()
        (top,) = conn.execute("SELECT coalesce(max(id), -1) FROM var_categories").fetchone()
        conn.executemany(
            "INSERT INTO var_categories (id, name, description) VALUES (?, ?, '')",
            [(top + 1 + i, f"planted{i}") for i in range(count - known)],
        )
        name = "memory_category_by_tile"
        rows, per_chunk = conn.execute(
            "SELECT num_rows, rows_per_chunk FROM matrices WHERE name = ?", (name,)
        ).fetchone()
        cols = 6 * count
        conn.execute("UPDATE matrices SET num_cols = ? WHERE name = ?", (cols, name))
        conn.execute("DELETE FROM matrix_chunks WHERE matrix = ?", (name,))
        columns = [r[1] for r in conn.execute("PRAGMA table_info(matrix_chunks)")]
        for first in range(0, rows, per_chunk):
            n = min(per_chunk, rows - first)
            codec, raw_size, data = encode_chunk(name, first, np.zeros((n, cols), dtype=np.uint8))
            values = {"matrix": name, "first_row": first, "num_rows": n, "codec": codec, "raw_size": raw_size}
            values["data"] = data
            keys = [k for k in columns if k in values]
            conn.execute(
                f"INSERT INTO matrix_chunks ({', '.join(keys)}) VALUES ({', '.join('?' * len(keys))})",
                [values[k] for k in keys],
            )
        conn.commit()
    finally:
        conn.close()
    return path


def planted_generated_columns(
    source: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    table: str = "target",
    count: int = 4,
    size: int = 900_000_000,
) -> str:
    """VIRTUAL generated columns of `size` characters each added to `table` (evaluated only when read)."""
    path = _copy(source, dest)
    conn = sqlite3.connect(path)
    try:
        for i in range(count):
            conn.execute(
                f"ALTER TABLE \"{table}\" ADD COLUMN planted{i} TEXT GENERATED ALWAYS AS (printf('%{size}d', 1)) VIRTUAL"
            )
        conn.commit()
    finally:
        conn.close()
    return path


def unevaluable_column(source: str | os.PathLike[str], dest: str | os.PathLike[str], table: str = "target") -> str:
    """A VIRTUAL generated column calling a function no reader has: any statement that evaluates it fails,
    so a reader that never evaluates planted columns reads the file as it reads the original."""
    path = _copy(source, dest)
    conn = sqlite3.connect(path)
    try:
        conn.create_function("planted_boom", 0, lambda: 1, deterministic=True)
        conn.execute(f'ALTER TABLE "{table}" ADD COLUMN planted INTEGER GENERATED ALWAYS AS (planted_boom()) VIRTUAL')
        conn.commit()
    finally:
        conn.close()
    return path


def planted_view_and_trigger(source: str | os.PathLike[str], dest: str | os.PathLike[str]) -> str:
    """A view named like no table of the format and a trigger on a table (a reader never runs either)."""
    path = _copy(source, dest)
    conn = sqlite3.connect(path)
    try:
        conn.execute("CREATE VIEW planted_view AS SELECT printf('%900000000d', 1) AS bomb")
        conn.execute("CREATE TRIGGER planted_trigger AFTER INSERT ON programs BEGIN SELECT 1; END")
        conn.commit()
    finally:
        conn.close()
    return path


def nested_union_query(levels: int) -> str:
    """A DuckDB query of `levels` CTEs, each the UNION ALL of the previous one twice (NOT MATERIALIZED):
    its plan doubles with each level."""
    parts = ["c0 AS NOT MATERIALIZED (SELECT 1 AS x)"]
    for i in range(1, levels + 1):
        parts.append(f"c{i} AS NOT MATERIALIZED (SELECT x FROM c{i - 1} UNION ALL SELECT x FROM c{i - 1})")
    return f"WITH {', '.join(parts)} SELECT count(*) FROM c{levels}"


def long_union_query(terms: int) -> str:
    """A flat UNION ALL of `terms` SELECTs."""
    return " UNION ALL ".join(f"SELECT {i} AS x" for i in range(terms))


def write_text(path: str | os.PathLike[str], text: str) -> str:
    pathlib.Path(path).write_text(text, encoding="utf-8")
    return os.fspath(path)


def doubling_dag(source: str | os.PathLike[str], dest: str | os.PathLike[str], levels: int) -> str:
    """A program DAG of `levels` Sequences, each with the next one as both of its children, over the
    report's control programs: 2 MB at most, but 2^levels runs of the program when unfolded."""
    path = _copy(source, dest)
    conn = sqlite3.connect(path)
    try:
        roots = [r[0] for r in conn.execute("SELECT program FROM control_programs ORDER BY position")]
        (top,) = conn.execute("SELECT max(id) FROM programs").fetchone()
        base = top + 1
        conn.execute("INSERT INTO programs (id, type, name) VALUES (?, 'Sequence', 'original')", (base + levels,))
        conn.executemany(
            "INSERT INTO program_children (parent, position, child) VALUES (?, ?, ?)",
            [(base + levels, i, r) for i, r in enumerate(roots)],
        )
        for level in range(levels):
            conn.execute("INSERT INTO programs (id, type, name) VALUES (?, 'Sequence', ?)", (base + level, f"l{level}"))
            conn.executemany(
                "INSERT INTO program_children (parent, position, child) VALUES (?, ?, ?)",
                [(base + level, 0, base + level + 1), (base + level, 1, base + level + 1)],
            )
        conn.execute("DELETE FROM control_programs")
        conn.execute("INSERT INTO control_programs (position, program) VALUES (0, ?)", (base,))
        conn.commit()
    finally:
        conn.close()
    return path


def tampered_manifest(dataset: str | os.PathLike[str], name: str, like: str = "reports") -> None:
    """Add a table `name` (a path such as ``../victim/reports``) to a dataset's manifest, with the
    columns of table `like`."""
    import json

    path = os.path.join(os.fspath(dataset), "_pva_dataset.json")
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    data["tables"][name] = data["tables"][like]
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle)


def linked_table(dataset: str | os.PathLike[str], victim: str | os.PathLike[str], table: str = "steps") -> None:
    """Replace a dataset's table folder with a symbolic link to the same table of another dataset."""
    folder = os.path.join(os.fspath(dataset), table)
    shutil.rmtree(folder)
    os.symlink(os.path.join(os.fspath(victim), table), folder)
