"""The child process's side of a trace read in two halves: the second half checked and staged as
formats.chrome.importer stages a whole file, its staged rows handed over in two temporary files the
parent owns and the rest as JSON on stdout."""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

import orjson

from ..errors import InvalidInputError
from ..gcpause import gc_paused
from .events import NotFastError
from .importer import _Importer, stage_fast
from .parallel_read import HalfReader


def child(task: dict) -> None:
    """In the child: read the second half of `task`, answer on stdout."""
    try:
        answer = _read_second_half(task)
        text = orjson.dumps(answer)
    except (MemoryError, orjson.JSONEncodeError):  # reading in one go may still do
        text = orjson.dumps(["undecided", None])
    except Exception:  # a bug: reported by the parent
        text = orjson.dumps(["bug", traceback.format_exc()])
    sys.stdout.buffer.write(text)
    sys.stdout.buffer.flush()


class _ParentGoneError(OSError):
    """The process that started this one has ended."""


class _WhileParentLives:
    """A binary file read only while the parent process lives (a child stops when it is left alone)."""

    def __init__(self, raw: HalfReader, parent: int) -> None:
        self._raw = raw
        self._parent = parent

    def read(self, size: int = -1) -> bytes:
        if os.getppid() != self._parent:
            raise _ParentGoneError("the parent process has ended")
        return self._raw.read(size)


def _read_second_half(task: dict) -> tuple[str, Any]:
    """Check and stage the events from the task's start to the end of the file: what was read."""
    name = task["name"]
    try:
        importer = _Importer(name, task["output"], task["memory"], spill_to=tuple(task["files"]))
        try:
            before = task["before"].encode("ascii")
            with gc_paused(), HalfReader(name, task["start"], os.path.getsize(name), before) as raw:
                others, status = stage_fast(importer, _WhileParentLives(raw, task["parent"]))
                return ("read", {"half": importer.hand_over(), "others": others, "status": status})
        finally:
            importer.close()
    except (NotFastError, InvalidInputError, OSError):
        return ("undecided", None)
