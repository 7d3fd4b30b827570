"""What an analysis reads: a Report, a path to open, or the query layer of an open report."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from formats.pop.reader import ProfileReader


def query_layer(source: Any) -> ProfileReader:
    """The query layer (a ProfileReader) of a Report, or the reader itself."""
    if isinstance(source, ProfileReader):
        return source
    reader = getattr(source, "_reader", None)  # a pva.Report (which imports this package)
    if isinstance(reader, ProfileReader):
        return reader
    raise TypeError(f"expected a pva Report, not {type(source).__name__}")


@contextlib.contextmanager
def opened(source: Any) -> Iterator[ProfileReader]:
    """The query layer of a Report or reader, or of a path opened for the block and then closed."""
    if isinstance(source, (str, os.PathLike)):
        reader = ProfileReader(source)
        try:
            yield reader
        finally:
            reader.close()
    else:
        yield query_layer(source)
