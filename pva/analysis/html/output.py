"""Output files of `pva html` and `pva plot`: checked up front, written atomically."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from formats.atomic import AtomicOutput
from formats.errors import NotAFileError, ReportNotFoundError, ReportPermissionError


def check_output(path: str | os.PathLike[str]) -> str:
    """The output path, after checking that it can be written; raises a PvaError if not."""
    target = os.fspath(path)
    if not target:
        raise ReportNotFoundError("no output file given: expected a file name after -o", target)
    if os.path.isdir(target):
        raise NotAFileError(f"cannot write {target!r}: expected a file name, found a directory", target)
    parent = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(parent):
        raise ReportNotFoundError(
            f"cannot write {target!r}: directory {parent!r} does not exist; create it first", target
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ReportPermissionError(f"cannot write {target!r}: directory {parent!r} is not writable", target)
    return target


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str]) -> Iterator[str]:
    """A temporary path beside `path` that replaces it only if the block completes."""
    target = check_output(path)
    try:
        out = AtomicOutput(target)
    except OSError as exc:
        raise ReportPermissionError(f"cannot write {target!r}: {exc.strerror or exc}", target) from exc
    with out:
        yield out.path
