"""The fleet: datasets of many reports, and SQL over them.

Public face: `formats.fleet.dataset` (a dataset on disk: Hive-partitioned Parquet tables, one whole
report added at a time), `formats.fleet.sql` (DuckDB over a dataset or over loose report files, and
Spark views), `formats.fleet.metrics` (the fleet metrics, trend and regressions as SQL text) and
`formats.fleet.limits` (the time, memory and thread bounds of one fleet query).
"""
