"""Timing side by side: alternate ours and the baseline, take medians; memory in child processes."""

from __future__ import annotations

import gc
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from .corpus import ROOT


def alternate(
    sides: dict[str, Callable[[], object]],
    repeat: int,
    warmup: bool = True,
    setup: dict[str, Callable[[], object]] | None = None,
) -> tuple[dict[str, float], dict[str, list[float]], dict[str, object]]:
    """Run each side `repeat` times, alternating (the order swaps every round).

    Returns the median seconds of each side, every time measured, and each side's last result.
    A first untimed round (`warmup`) loads lazily imported modules and the page cache;
    ``setup[name]`` runs untimed before every call of that side.
    """
    names = list(sides)
    setup = setup or {}
    times: dict[str, list[float]] = {name: [] for name in names}
    results: dict[str, object] = {}
    if warmup:
        for name in names:
            if name in setup:
                setup[name]()
            results[name] = sides[name]()
    for round_ in range(repeat):
        for name in names if round_ % 2 == 0 else reversed(names):
            if name in setup:
                setup[name]()
            gc.collect()
            started = time.perf_counter()
            results[name] = sides[name]()
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in times.items()}, times, results


def child(task: str, *args: str) -> dict:
    """Run `python -m benchmarks.child TASK ARGS...` and return the JSON it prints last.

    The child's own peak resident memory (getrusage) is in the result as ``peak_mb``.
    """
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.child", task, *args], cwd=ROOT, capture_output=True, text=True
    )
    if result.returncode:
        raise RuntimeError(f"benchmark child {task} failed (exit {result.returncode}):\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def alternate_children(tasks: dict[str, tuple[str, ...]], repeat: int) -> dict[str, list[dict]]:
    """Run each child task `repeat` times, alternating (the order swaps every round); every result."""
    names = list(tasks)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for round_ in range(repeat):
        for name in names if round_ % 2 == 0 else reversed(names):
            runs[name].append(child(*tasks[name]))
    return runs


def median_of(runs: list[dict], key: str) -> float:
    """The median of one figure over child runs."""
    return statistics.median(run[key] for run in runs)


def best_of(function: Callable[[], object], repeat: int) -> tuple[float, object]:
    """The fastest of `repeat` calls of `function`, in seconds, and the last call's result."""
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - started)
    return best, result


def ratio_line(
    what: str, value: float, unit: str, baseline_what: str, baseline: float, target: str = "", decimals: int = 0
) -> str:
    """One printed line: our figure, the baseline's, their ratio and the target."""
    ratio = value / baseline if baseline else float("nan")
    return (
        f"  {what:<46} {value:>14,.{decimals}f} {unit:<11} | baseline {baseline_what:<42} "
        f"{baseline:>14,.{decimals}f} {unit:<11} | ratio {ratio:6.2f}{'  ' + target if target else ''}"
    )
