"""The reference reports the benchmarks read: simulator runs cached under ``.bench-cache/``.

Each size is the simulator's ``large`` preset with fixed knobs, run through ``pva simulate``
in a child process. The report is cached in ``.bench-cache/<size>-<key>/`` where the key hashes
the preset, its knobs, the creation timestamp and the sources that decide the bytes written
(schemas/, simulator/ and the formats writer). The same content as a legacy v1 JSON document
(``pva export --format legacy-json``) and as Parquet (``pva export --format parquet``) sit
beside it, each keyed by the exporter's sources as well.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: Where reports are cached: ``.bench-cache/`` in the repository, or $PVA_BENCH_CACHE.
CACHE = pathlib.Path(os.environ.get("PVA_BENCH_CACHE") or ROOT / ".bench-cache").resolve()
PRESET = "large"
#: Creation time written into every generated report, so reruns are byte-identical.
TIMESTAMP = "2024-01-01T00:00:00Z"


@dataclasses.dataclass(frozen=True)
class Size:
    """A reference report: knobs of the simulator's large preset, and the size compared with it."""

    name: str
    knobs: dict
    reference: str
    description: str


SIZES = {
    "tiny": Size(
        "tiny",
        {"ipus": 2, "layers": 3, "seq": 16, "hidden": 32, "heads": 4, "tiles-per-layer": 16, "tiles-per-ipu": 64},
        "tiny",
        "2 IPUs shrunk to 64 tiles, 3 encoder layers (smoke runs)",
    ),
    "small": Size("small", {"ipus": 1, "layers": 20}, "tiny", "1 Mk2 IPU (1,472 tiles), 20 encoder layers"),
    "large": Size("large", {"ipus": 4, "layers": 150}, "small", "4 Mk2 IPUs (5,888 tiles), 150 encoder layers"),
}

#: Sources whose changes change the bytes of a generated report.
REPORT_SOURCES = (
    "schemas",
    "simulator",
    "formats/pop/writer.py",
    "formats/pop/sqlite_writer.py",
    "formats/pop/arrow_chunks.py",
    "formats/pop/schema.py",
    "formats/atomic.py",
    "formats/debug/debug_cbor.py",
)
_LEGACY_SOURCES = ("formats/legacy",)
_PARQUET_SOURCES = ("formats/exporters", "formats/pop/reader.py", "formats/pop/sqlite_reader.py")


def source_hash(paths: tuple[str, ...], extra: object = None) -> str:
    """A short hash of the files under `paths` (relative to the repository) and of `extra`."""
    digest = hashlib.sha256(json.dumps(extra, sort_keys=True).encode())
    for relative in paths:
        base = ROOT / relative
        files = sorted(base.rglob("*")) if base.is_dir() else [base]
        for file in files:
            if not file.is_file() or "__pycache__" in file.parts or file.suffix == ".pyc":
                continue
            digest.update(str(file.relative_to(ROOT)).encode() + b"\0")
            digest.update(file.read_bytes())
    return digest.hexdigest()[:12]


def resolved_knobs(size: str) -> dict:
    """Every knob of the preset for a size, defaults filled in."""
    sys.path.insert(0, str(ROOT))
    from simulator.presets import resolve_knobs

    return resolve_knobs(PRESET, SIZES[size].knobs)


@dataclasses.dataclass
class Corpus:
    """The files of one size: the report, its legacy JSON and Parquet forms, and how they were made."""

    size: str
    directory: pathlib.Path
    info: dict

    @property
    def pop(self) -> pathlib.Path:
        return self.directory / "profile.pop"

    def legacy_json(self, log=print) -> pathlib.Path:
        """The report as one legacy v1 JSON document (graphProfile and executionProfile), made once."""
        key = source_hash(_LEGACY_SOURCES)
        path = self.directory / f"legacy-{key}.json"
        if not path.exists():
            for stale in self.directory.glob("legacy-*.json"):
                stale.unlink()
            started = time.perf_counter()
            _pva("export", str(self.pop), "--format", "legacy-json", "-o", str(path))
            log(
                f"  exported {self.size} as legacy JSON in {time.perf_counter() - started:,.1f} s "
                f"({path.stat().st_size / 1e6:,.0f} MB)"
            )
        return path

    def parquet(self, log=print) -> pathlib.Path:
        """The report exported as a directory of Parquet files, made once."""
        key = source_hash(_PARQUET_SOURCES)
        path = self.directory / f"parquet-{key}"
        if not path.exists():
            for stale in self.directory.glob("parquet-*"):
                shutil.rmtree(stale, ignore_errors=True)
            started = time.perf_counter()
            _pva("export", str(self.pop), "--format", "parquet", "-o", str(path))
            log(f"  exported {self.size} as Parquet in {time.perf_counter() - started:,.1f} s")
        return path


def _pva(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "pva", *args], cwd=ROOT, capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"pva {' '.join(args)} failed (exit {result.returncode}):\n{result.stderr}")
    return result.stdout


_SIMULATE = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from simulator.presets import run_preset
knobs, directory, timestamp = json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
start = time.perf_counter()
run_preset("large", knobs, directory, timestamp=timestamp, functional=False)
print(json.dumps({"seconds": time.perf_counter() - start,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def corpus(size: str, log=print) -> Corpus:
    """The cached report of a size, simulated if missing or made by other sources."""
    knobs = resolved_knobs(size)
    key = source_hash(REPORT_SOURCES, {"preset": PRESET, "knobs": knobs, "timestamp": TIMESTAMP})
    directory = CACHE / f"{size}-{key}"
    info_path = directory / "info.json"
    if not info_path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        for stale in CACHE.glob(f"{size}-*"):  # reports of this size made by older sources
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
        log(f"  simulating the {size} report ({SIZES[size].description}); this is done once ...")
        scratch = pathlib.Path(tempfile.mkdtemp(prefix=f"{size}-{key}.", suffix=".tmp", dir=CACHE))
        try:
            result = subprocess.run(
                [sys.executable, "-c", _SIMULATE, str(ROOT), json.dumps(knobs), str(scratch), TIMESTAMP],
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            if result.returncode:
                raise SystemExit(f"simulating the {size} report failed:\n{result.stderr}")
            run = json.loads(result.stdout.strip().splitlines()[-1])
            for other in scratch.iterdir():  # debug.cbor and the host trace are not measured
                if other.name != "profile.pop":
                    other.unlink()
            info = {
                "size": size,
                "preset": PRESET,
                "knobs": knobs,
                "timestamp": TIMESTAMP,
                "key": key,
                "simulate_seconds": round(run["seconds"], 1),
                "simulate_peak_mb": round(run["peak_mb"]),
                **report_counts(scratch / "profile.pop"),
            }
            (scratch / "info.json").write_text(json.dumps(info, indent=2) + "\n")
            os.replace(scratch, directory)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        log(
            f"  simulated in {info['simulate_seconds']:,.1f} s: {info['compute_sets']:,} compute sets, "
            f"{info['programs']:,} programs, {info['steps']:,} steps on {info['tiles']:,} tiles, "
            f"{info['file_bytes'] / 1e6:,.0f} MB"
        )
    return Corpus(size, directory, json.loads(info_path.read_text()))


def report_counts(path: pathlib.Path) -> dict:
    """What a report holds: the counts the issue sets for the large report, and its size."""
    import sqlite3

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:

        def count(sql: str) -> int:
            return conn.execute(sql).fetchone()[0] or 0

        return {
            "tiles": count("SELECT num_tiles FROM target"),
            "ipus": count("SELECT num_ipus FROM target"),
            "compute_sets": count("SELECT count(*) FROM compute_sets"),
            "programs": count("SELECT count(*) FROM programs"),
            "steps": count("SELECT count(*) FROM steps"),
            "step_matrix_rows": count("SELECT num_rows FROM matrices WHERE name = 'step_cycles_by_tile'"),
            "file_bytes": path.stat().st_size,
        }
    finally:
        conn.close()
