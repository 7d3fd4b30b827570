"""A progress bar on standard error, for long compilations and runs."""

from __future__ import annotations

import sys
import time


class Progress:
    """Shows `label: done/total` with a bar; drawn only when enabled (a terminal, or asked)."""

    def __init__(self, enabled: bool | None = None, stream=None, width: int = 30) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = enabled
        self.width = width
        self.label = ""
        self.total = 0
        self.done = 0
        self._last = 0.0

    def start(self, label: str, total: int) -> None:
        self.label = label
        self.total = max(0, int(total))
        self.done = 0
        self._draw(force=True)

    def advance(self, count: int = 1) -> None:
        self.done += count
        self._draw()

    def finish(self) -> None:
        if self.enabled and self.label:
            self.done = max(self.done, self.total)
            self._draw(force=True)
            self.stream.write("\n")
            self.stream.flush()
        self.label = ""

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._last < 0.1:
            return
        self._last = now
        if self.total:
            frac = min(1.0, self.done / self.total)
            bar = "#" * int(frac * self.width)
            text = f"\r{self.label:<24} [{bar:<{self.width}}] {self.done:,}/{self.total:,}"
        else:
            text = f"\r{self.label:<24} {self.done:,}"
        self.stream.write(text)
        self.stream.flush()
