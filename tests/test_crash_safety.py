"""Crash safety: `pva simulate`, `pva convert` and `pva export` killed with SIGKILL at random points.

Each command runs in a child process over an older output of the same name (or over nothing) and is
killed after a random delay: half the delays are drawn across the whole run, half across the part
of the run while the output is being written (from the moment a temporary file appears). The RNG
is seeded, so the same kill points are tried every time. Afterwards the target must hold exactly
one complete version: absent (only if it was absent before), byte-identical to the older version,
or the complete new output (byte-identical to an uninterrupted run, or for `convert`, whose
metadata records the time, identical in content and clean under `pva check`). Temporary files of
a killed writer (``.NAME.*.tmp``) may remain beside the target; nothing else may appear.

What "complete" means for the directory outputs:
- `pva export --format parquet|csv|legacy-cbor DIR`: DIR is absent, or every file of the older
  export and nothing else, or every file of the new one (the manifest's files among them).
- `pva simulate -o DIR`: DIR/profile.pop and DIR/debug.cbor are both of the older run or both of
  the new one (they are committed together, after both are complete); every .pvti trace in DIR
  is complete.
"""

from __future__ import annotations

import collections.abc
import concurrent.futures
import contextlib
import csv
import hashlib
import json
import os
import pathlib
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import cbor2
import h5py
import legacy_builders
import pyarrow.parquet as pq
import pytest

import pva
from formats import atomic
from formats.pop.check import check_report

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = 20_240_904
#: Kill points per command (at least 50 in all).
SIMULATE_POINTS = 20
CONVERT_POINTS = 14
EXPORT_POINTS_PER_FORMAT = 5
EXPORTS = {  # format -> (output name, kind)
    "parquet": ("parquet", "dir"),
    "csv": ("csv", "dir"),
    "hdf5": ("matrices.h5", "file"),
    "chrome-trace": ("trace.json", "file"),
    "legacy-json": ("legacy.json", "file"),
    "legacy-cbor": ("legacy-cbor", "dir"),
}
SIMULATE = [
    "simulate",
    "--preset",
    "mnist-mlp",
    "--tiles-per-ipu",
    "64",
    "--no-progress",
    "--timestamp",
    "2024-01-02T03:04:05Z",
]
SIMULATE_OLD = [
    "simulate",
    "--preset",
    "mnist-mlp",
    "--tiles-per-ipu",
    "64",
    "--no-progress",
    "--hidden",
    "64",
    "--steps",
    "2",
    "--runs",
    "1",
    "--timestamp",
    "2023-05-06T07:08:09Z",
]


def _pva(*args) -> list[str]:
    return [sys.executable, "-m", "pva", *map(str, args)]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


def _run(argv: list[str]) -> None:
    proc = subprocess.run(argv, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def _sha(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tree(path: pathlib.Path) -> dict[str, str] | str | None:
    """A file's sha256, a directory's {relative path: sha256}, or None when absent."""
    if path.is_dir():
        return {str(p.relative_to(path)): _sha(p) for p in sorted(path.rglob("*")) if p.is_file()}
    if path.exists():
        return _sha(path)
    return None


def _temporary(name: str) -> re.Pattern:
    return re.compile(rf"^\.{re.escape(name)}\.[A-Za-z0-9_.]+\.(tmp|old)$")


#: Rows that differ between two runs of the same command: the creation time, the output directory.
VARYING = {("metadata", "created"), ("compilation_parameters", "autoReport.directory")}


def _content_fingerprint(path: pathlib.Path) -> str:
    """Hash of every row of every table of a report but the ones that differ per run (time, directory)."""
    digest = hashlib.sha256()
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        for table in tables:
            digest.update(table.encode())
            rows = sorted(
                repr(row) for row in conn.execute(f'SELECT * FROM "{table}"') if (table, row[0]) not in VARYING
            )
            digest.update("\n".join(rows).encode())
    finally:
        conn.close()
    return digest.hexdigest()


# -- checks that an output is complete -----------------------------------------------------------------------


#: Checks of `pva check` about the file itself (the converted legacy test profiles are synthetic, so
#: their figures need not add up; their storage must be intact).
STORAGE_CHECKS = {"integrity", "schema", "matrices", "references"}


def _verify_report(path: pathlib.Path, *, storage_only: bool = False) -> None:
    problems = check_report(path)
    if storage_only:
        problems = [p for p in problems if p.check in STORAGE_CHECKS]
    assert problems == []
    with pva.openReport(str(path)) as report:
        assert report.compilation.target.numTiles > 0
        assert len(report.compilation.programs) > 0


def _verify_export(fmt: str, path: pathlib.Path) -> None:
    if fmt in ("parquet", "csv"):
        manifest = json.loads((path / "manifest.json").read_text())
        entries = {**manifest["tables"], **manifest["matrices"]}
        assert len(manifest["tables"]) > 30 and manifest["matrices"]
        files = {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()}
        assert files == {e["file"] for e in entries.values()} | {"manifest.json"}
        for entry in entries.values():
            if fmt == "parquet":
                assert pq.read_metadata(path / entry["file"]).num_rows == entry["rows"]
            else:
                with open(path / entry["file"], newline="", encoding="utf-8") as handle:
                    assert sum(1 for _ in csv.reader(handle)) == entry["rows"] + 1
    elif fmt == "hdf5":
        with h5py.File(path, "r") as h5:
            assert len(h5["matrices"]) > 5
            for dataset in h5["matrices"].values():
                assert dataset[...].shape == dataset.shape
    elif fmt == "chrome-trace":
        assert len(json.loads(path.read_text())["traceEvents"]) > 10
    elif fmt == "legacy-json":
        document = json.loads(path.read_text())
        assert {"graphProfile", "executionProfile"} <= set(document)
    elif fmt == "legacy-cbor":
        assert sorted(p.name for p in path.iterdir()) == ["execution.cbor", "graph.cbor", "manifest.json"]
        assert json.loads((path / "manifest.json").read_text())["files"] == ["execution.cbor", "graph.cbor"]
        for part in (path / "execution.cbor", path / "graph.cbor"):
            with open(part, "rb") as handle:
                assert isinstance(cbor2.load(handle), collections.abc.Mapping)
    else:  # pragma: no cover
        raise AssertionError(fmt)


def _verify_simulation(directory: pathlib.Path) -> None:
    _verify_report(directory / "profile.pop")
    with pva.openReport(str(directory / "profile.pop"), str(directory / "debug.cbor")) as report:
        assert len(report.compilation.debugContexts()) > 10
    (trace,) = directory.glob("*.pvti")
    _verify_trace(trace)


def _verify_trace(path: pathlib.Path) -> None:
    with pva.openTrace(str(path)) as trace:
        assert sum(len(t.events) for p in trace.processes for t in p.threads) > 0


# -- the jobs ---------------------------------------------------------------------------------------------------


class Job:
    """One command writing `name` in a directory, with its older and newer outputs to compare against."""

    def __init__(
        self,
        label: str,
        name: str,
        kind: str,
        argv,
        *,
        old: pathlib.Path | None,
        new: pathlib.Path,
        fmt: str = "",
        by_content: bool = False,
    ) -> None:
        self.label, self.name, self.kind, self.argv = label, name, kind, argv
        self.old, self.new, self.fmt, self.by_content = old, new, fmt, by_content
        self.old_tree = _tree(old) if old is not None else None
        self.new_tree = _tree(new)
        self.new_fingerprint = None
        if by_content:
            self.new_fingerprint = _content_fingerprint(new / "profile.pop" if kind == "simulate" else new)
        self.runtime = 0.0
        self.write_window = 0.0

    def command(self, target: pathlib.Path) -> list[str]:
        return self.argv(target)

    def temporaries(self) -> list[re.Pattern]:
        return self.patterns(self.kind, self.name)

    @staticmethod
    def patterns(kind: str, name: str) -> list[re.Pattern]:
        """Names the temporary files of a writer of `name` may have."""
        if kind == "simulate":
            return [
                _temporary("profile.pop"),
                _temporary("debug.cbor"),
                re.compile(r"^\..*\.pvti\.[A-Za-z0-9_.]+\.tmp$"),
            ]
        return [_temporary(name)]


def _install_old(job: Job, directory: pathlib.Path, with_old: bool) -> None:
    directory.mkdir(parents=True)
    if not with_old or job.old is None:
        return
    if job.old.is_dir():
        shutil.copytree(job.old, directory / job.name)
    else:
        shutil.copy2(job.old, directory / job.name)


def _state(job: Job, directory: pathlib.Path, with_old: bool) -> str:
    """'absent', 'old' or 'new'; AssertionError for anything else."""
    entries = sorted(os.listdir(directory))
    strays = [e for e in entries if e != job.name and not any(p.match(e) for p in job.temporaries())]
    assert not strays, f"{job.label}: unexpected files beside the target: {strays}"
    target = directory / job.name
    if job.kind == "simulate":
        return _simulation_state(job, target, with_old)
    tree = _tree(target)
    if tree is None:
        assert not with_old, f"{job.label}: the previous {job.name} disappeared"
        return "absent"
    if with_old and tree == job.old_tree:
        return "old"
    if tree == job.new_tree:
        return "new"
    if job.by_content and isinstance(tree, str):
        assert _content_fingerprint(target) == job.new_fingerprint, f"{job.label}: {job.name} is neither version"
        _verify_report(target, storage_only=True)
        return "new"
    raise AssertionError(f"{job.label}: {job.name} is neither the previous nor the complete new output")


def _simulation_state(job: Job, target: pathlib.Path, with_old: bool) -> str:
    if not target.exists():
        assert not with_old, f"{job.label}: the previous report directory disappeared"
        return "absent"
    names = sorted(os.listdir(target))
    strays = [
        n
        for n in names
        if n not in ("profile.pop", "debug.cbor")
        and not n.endswith(".pvti")
        and not any(p.match(n) for p in job.temporaries())
    ]
    assert not strays, f"{job.label}: unexpected files in the report directory: {strays}"
    for trace in target.glob("*.pvti"):
        _verify_trace(trace)
    pair = tuple(_tree(target / n) for n in ("profile.pop", "debug.cbor"))
    old = (job.old_tree["profile.pop"], job.old_tree["debug.cbor"]) if with_old else (None, None)
    if pair == old:
        return "old" if with_old else "absent"
    # the report records its directory, so a new one is identified by its content
    if (
        pair[0] is not None
        and pair[1] == job.new_tree["debug.cbor"]
        and _content_fingerprint(target / "profile.pop") == job.new_fingerprint
    ):
        _verify_report(target / "profile.pop")
        return "new"
    raise AssertionError(
        f"{job.label}: profile.pop and debug.cbor are not one complete run: {pair}, expected {old} or a new run"
    )


def _measure(argv: list[str], directory: pathlib.Path, patterns: list[re.Pattern], nested: str | None) -> tuple:
    """Run a command to completion: its runtime, and for how long its temporary files existed."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    first_temporary = None
    while proc.poll() is None:
        if _any_temporary([directory] + ([directory / nested] if nested else []), patterns):
            first_temporary = time.monotonic()
            break
        time.sleep(0.001)
    _out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    runtime = time.monotonic() - start
    return runtime, runtime - (first_temporary - start if first_temporary else 0.0)


def _any_temporary(places: list[pathlib.Path], patterns: list[re.Pattern]) -> bool:
    for place in places:
        try:
            names = os.listdir(place)
        except FileNotFoundError:
            continue
        if any(p.match(n) for n in names for p in patterns):
            return True
    return False


def _temporaries_exist(job: Job, directory: pathlib.Path) -> bool:
    places = [directory, directory / job.name] if job.kind == "simulate" else [directory]
    return _any_temporary(places, job.temporaries())


def _watch_for_temporaries(job: Job, directory: pathlib.Path, proc: subprocess.Popen) -> float | None:
    while proc.poll() is None:
        if _temporaries_exist(job, directory):
            return time.monotonic()
        time.sleep(0.001)
    return None


def _kill_point(job: Job, directory: pathlib.Path, mode: str, fraction: float, with_old: bool) -> dict:
    _install_old(job, directory, with_old)
    proc = subprocess.Popen(
        job.command(directory / job.name), cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        if mode == "write":
            _watch_for_temporaries(job, directory, proc)
            delay = fraction * job.write_window
        else:
            delay = fraction * job.runtime
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=delay)
        writing = _temporaries_exist(job, directory)
        finished = proc.poll() is not None
        if not finished:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:  # pragma: no cover
            proc.kill()
            proc.wait()
    state = _state(job, directory, with_old)
    return {
        "job": job.label,
        "mode": mode,
        "killed": not finished,
        "writing": writing and not finished,
        "with_old": with_old,
        "state": state,
    }


@pytest.fixture(scope="module")
def jobs(tmp_path_factory, simulated, sample) -> list[Job]:
    """Each command with an older output of the same name and its own complete output, run once."""
    base = tmp_path_factory.mktemp("crash")
    # convert: a legacy JSON profile over an older conversion of another profile
    graph = legacy_builders.complete_graph_profile(num_ipus=2, tiles_per_ipu=64, seed=3)
    source = legacy_builders.write_json(
        base / "legacy.json",
        {"graphProfile": graph, "executionProfile": legacy_builders.execution_profile(graph, "COMPUTE_SETS")},
    )
    other = legacy_builders.complete_graph_profile(num_ipus=1, tiles_per_ipu=8, seed=5)
    other_source = legacy_builders.write_json(
        base / "other.json",
        {"graphProfile": other, "executionProfile": legacy_builders.execution_profile(other, "COMPUTE_SETS")},
    )
    report = simulated / "profile.pop"
    # (label, target name, kind, command writing a target, command writing the older output, format)
    specs = [
        ("simulate", "run", "simulate", lambda t: _pva(*SIMULATE, "-o", t), lambda t: _pva(*SIMULATE_OLD, "-o", t), ""),
        (
            "convert",
            "profile.pop",
            "file",
            lambda t: _pva("convert", source, "-o", t, "--no-progress"),
            lambda t: _pva("convert", other_source, "-o", t, "--no-progress"),
            "",
        ),
    ]
    # export: the simulated report, over an older export of the sample report
    specs += [
        (
            f"export {fmt}",
            name,
            kind,
            lambda t, fmt=fmt: _pva("export", report, "--format", fmt, "-o", t),
            lambda t, fmt=fmt: _pva("export", sample.path, "--format", fmt, "-o", t),
            fmt,
        )
        for fmt, (name, kind) in EXPORTS.items()
    ]

    def prepare(spec):
        label, name, kind, argv, old_argv, fmt = spec
        slug = label.replace(" ", "-")
        old, new = base / f"old-{slug}" / name, base / f"new-{slug}" / name
        old.parent.mkdir()
        new.parent.mkdir()
        _run(old_argv(old))
        patterns = Job.patterns(kind, name)
        runtime, window = _measure(argv(new), new.parent, patterns, name if kind == "simulate" else None)
        return spec, old, new, runtime, window

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        prepared = list(pool.map(prepare, specs))
    found = []
    for (label, name, kind, argv, _old_argv, fmt), old, new, runtime, window in prepared:
        if kind == "simulate":
            for run in (old, new):
                _verify_simulation(run)
        elif fmt:
            for output in (old, new):
                _verify_export(fmt, output)
        else:
            for output in (old, new):
                _verify_report(output, storage_only=True)
        job = Job(label, name, kind, argv, old=old, new=new, fmt=fmt, by_content=kind == "simulate" or not fmt)
        job.runtime, job.write_window = runtime, window
        assert job.old_tree != job.new_tree
        assert _state(job, new.parent, with_old=False) == "new"
        found.append(job)
    assert found[0].old_tree["debug.cbor"] != found[0].new_tree["debug.cbor"]
    return found


def test_killed_writers_leave_the_old_output_or_the_complete_new_one(jobs, tmp_path):
    rng = random.Random(SEED)
    points = []
    for job in jobs:
        count = {"simulate": SIMULATE_POINTS, "convert": CONVERT_POINTS}.get(job.label, EXPORT_POINTS_PER_FORMAT)
        for i in range(count):
            mode = "whole" if i % 2 == 0 else "write"
            # a write-mode delay ends before the measured end of writing, which shrinks on a less busy machine
            fraction = rng.uniform(0.0, 1.05) * (1.0 if mode == "whole" else 0.8)
            points.append((job, mode, fraction, i % 4 != 3))
    assert len(points) >= 50

    def run(item):
        index, (job, mode, fraction, with_old) = item
        return _kill_point(job, tmp_path / f"{index:03d}", mode, fraction, with_old)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(run, enumerate(points)))
    killed = [r for r in results if r["killed"]]
    writing = [r for r in killed if r["writing"]]
    summary = {}
    for r in results:
        key = (r["job"], r["state"])
        summary[key] = summary.get(key, 0) + 1
    print(
        f"\n{len(results)} kill points: {len(killed)} killed ({len(writing)} while a temporary file existed), "
        f"{len(results) - len(killed)} finished first; outcomes: "
        + ", ".join(f"{job} {state}: {n}" for (job, state), n in sorted(summary.items()))
    )
    for job in jobs:
        print(f"  {job.label}: runtime {job.runtime:.2f} s, writing for {job.write_window:.2f} s")
    # A job whose random points all missed its write window (on a loaded machine a short window can be
    # missed) is killed again as soon as its temporary output appears, so every writer is exercised.
    for job in jobs:
        for attempt in range(4):
            if any(r["job"] == job.label and r["writing"] for r in results):
                break
            extra = _kill_point(job, tmp_path / f"extra-{job.label.replace(' ', '-')}-{attempt}", "write", 0.0, True)
            results.append(extra)
            killed += [extra] if extra["killed"] else []
            writing += [extra] if extra["writing"] else []
    # the kill points must exercise the writers, not only start-up (timing varies with the machine's load)
    assert len(killed) >= len(points) // 2 and len(writing) >= len(points) // 6
    assert {r["state"] for r in killed if r["with_old"]} >= {"old"}
    for label in {job.label for job in jobs}:
        assert any(r["job"] == label and r["writing"] for r in results), f"no kill of {label} while it was writing"


# -- the directory swap --------------------------------------------------------------------------------------------


def _write_tree(out: atomic.AtomicOutput, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = pathlib.Path(out.path) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2-exchange", "two-renames"])
def test_a_directory_output_replaces_an_older_one_whole(tmp_path, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    elif not _can_exchange(tmp_path):
        pytest.skip("this file system cannot exchange directories")
    target = tmp_path / "export"
    with atomic.AtomicOutput(target, directory=True) as out:
        _write_tree(out, {"a.txt": "old a", "sub/b.txt": "old b", "gone.txt": "only old"})
    with atomic.AtomicOutput(target, directory=True) as out:
        _write_tree(out, {"a.txt": "new a", "sub/b.txt": "new b"})
        old = _tree(target)
        assert json.loads((target / "manifest.json").read_text())["files"] == ["a.txt", "gone.txt", "sub/b.txt"]
        del old["manifest.json"]
        assert old == {"a.txt": _sha_text("old a"), "gone.txt": _sha_text("only old"), "sub/b.txt": _sha_text("old b")}
    new = _tree(target)
    del new["manifest.json"]
    assert new == {"a.txt": _sha_text("new a"), "sub/b.txt": _sha_text("new b")}
    assert os.listdir(tmp_path) == ["export"]


def _sha_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _can_exchange(directory: pathlib.Path) -> bool:
    a, b = directory / ".probe-a", directory / ".probe-b"
    a.mkdir()
    b.mkdir()
    try:
        return atomic._exchange(str(a), str(b))
    finally:
        a.rmdir()
        b.rmdir()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux's")
def test_directories_are_exchanged_in_one_step_on_linux(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "from-a").write_text("a")
    (b / "from-b").write_text("b")
    if not atomic._exchange(str(a), str(b)):
        pytest.skip("this file system cannot exchange directories")
    assert os.listdir(a) == ["from-b"] and os.listdir(b) == ["from-a"]
    with pytest.raises(FileNotFoundError):
        atomic._exchange(str(tmp_path / "missing"), str(b))


def test_directory_readers_never_see_a_missing_export(tmp_path):
    """While an export directory is replaced over and over, a reader never finds it missing."""
    if not _can_exchange(tmp_path):
        pytest.skip("this file system cannot exchange directories (two renames leave a moment without it)")
    target = tmp_path / "export"
    with atomic.AtomicOutput(target, directory=True) as out:
        _write_tree(out, {"manifest.json": json.dumps({"version": 0, "files": ["data.txt"]}), "data.txt": "0"})
    stop = threading.Event()
    seen, problems = set(), []

    def reader():
        while not stop.is_set():
            try:
                manifest = json.loads((target / "manifest.json").read_text())
                data = (target / "data.txt").read_text()
            except (FileNotFoundError, json.JSONDecodeError) as exc:
                problems.append(repr(exc))
                continue
            seen.add((manifest["version"], data))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for version in range(1, 150):
            with atomic.AtomicOutput(target, directory=True) as out:
                _write_tree(out, {"manifest.json": json.dumps({"version": version}), "data.txt": str(version)})
    finally:
        stop.set()
        thread.join()
    assert problems == []
    assert len(seen) > 1
