"""A small progress bar for long conversions, drawn on a terminal and silent elsewhere."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Counts units of work (bytes, rows) and redraws one status line at most every `interval` s.

    >>> bar = Progress(enabled=False)
    >>> bar.start("reading", 100); bar.advance(40); bar.done
    40
    """

    def __init__(
        self, stream: TextIO | None = None, *, enabled: bool | None = None, interval: float = 0.2, unit: str = "B"
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = enabled
        self.interval = interval
        #: "B" shows sizes and rates ("12.0 MB/s"); any other unit shows counts ("40/100 steps").
        self.unit = unit
        self.label = ""
        self.total = 0
        self.done = 0
        self._started = 0.0
        self._drawn = 0.0
        self._width = 0

    def start(self, label: str, total: int) -> None:
        """Begin a phase of `total` units (0 when unknown)."""
        self.finish()
        self.label = label
        self.total = max(0, int(total))
        self.done = 0
        self._started = self._drawn = time.monotonic()

    def advance(self, amount: int = 1) -> None:
        """Record `amount` more units done."""
        self.done += amount
        if self.enabled:
            now = time.monotonic()
            if now - self._drawn >= self.interval:
                self._drawn = now
                self._draw(now)

    def _draw(self, now: float) -> None:
        elapsed = max(1e-9, now - self._started)
        rate = self.done / elapsed
        if self.total:
            fraction = min(1.0, self.done / self.total)
            filled = int(fraction * 30)
            bar = "#" * filled + "-" * (30 - filled)
            left = (self.total - self.done) / rate if rate > 0 else 0
            amount = f"{_size(rate)}/s" if self.unit == "B" else f"{self.done:,}/{self.total:,} {self.unit}".rstrip()
            text = f"{self.label} [{bar}] {fraction:4.0%} {amount}, {left:,.0f} s left"
        elif self.unit == "B":
            text = f"{self.label} {_size(self.done)} {_size(rate)}/s"
        else:
            text = f"{self.label} {self.done:,} {self.unit}".rstrip()
        pad = max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()

    def finish(self) -> None:
        """End the current phase (clears the line)."""
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
        self._width = 0


def _size(value: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000:
            return f"{value:,.1f} {unit}"
        value /= 1000
    return f"{value:,.1f} TB"
