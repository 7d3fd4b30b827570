"""Modules imported on first use, so that commands which never touch an array start without numpy or Arrow."""

from __future__ import annotations

import importlib
import types


class _LazyModule(types.ModuleType):
    """Stands for a module until an attribute is first read, then imports it and serves its names."""

    def __getattr__(self, attr: str):
        module = importlib.import_module(self.__name__)
        self.__dict__.update(module.__dict__)
        return getattr(module, attr)


def lazy_module(name: str) -> types.ModuleType:
    """`name` as a module whose import waits for the first attribute read (thread-safe: the import lock)."""
    return _LazyModule(name)
