"""Pausing the cyclic garbage collector around bulk object creation."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while many objects that form no cycles are made at once.

    Each collection would walk every object made so far, making bulk creation quadratic.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
