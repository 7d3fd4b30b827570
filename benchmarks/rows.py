"""What every measurement of the suite returns and is given: `Row`, `Context`, and their helpers."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import shutil
import statistics
import tempfile
from collections.abc import Callable, Iterator

from .corpus import CACHE, Corpus


@dataclasses.dataclass
class Row:
    """One line of the table."""

    name: str
    measurement: str
    ours: float
    baseline: float
    unit: str
    baseline_what: str
    target: str
    met: bool | None
    ratio: float = 0.0
    details: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.ratio = self.ours / self.baseline if self.baseline else float("nan")


@dataclasses.dataclass
class Context:
    """What a measurement needs: the report of the run's size, its reference, repetitions, a log."""

    main: Corpus
    reference: Corpus
    repeat: int
    child_repeat: int
    log: Callable[[str], None]

    def scratch(self) -> str:
        return tempfile.mkdtemp(prefix="scratch-", suffix=".tmp", dir=CACHE)

    @contextlib.contextmanager
    def scratch_directory(self) -> Iterator[str]:
        """A new directory in the cache, removed with what it holds when the block ends."""
        path = self.scratch()
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)


def ms(times: dict[str, list[float]]) -> dict[str, list[float]]:
    """Every repetition's time in milliseconds, for the JSON details."""
    return {name: [round(t * 1e3, 3) for t in values] for name, values in times.items()}


def runs(runs: list[dict], *keys: str) -> list[dict]:
    """The figures of each child run, for the JSON details."""
    return [{key: round(run[key], 4) for key in keys} for run in runs]


def growth_exponent(sizes: list[int], seconds: list[float]) -> float:
    """The least-squares slope of log(time) over log(size): 1 for linear growth."""
    xs = [math.log(n) for n in sizes]
    ys = [math.log(t) for t in seconds]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
