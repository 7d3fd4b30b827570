"""Building blocks of the object model: libpva-style enums and lists."""

from __future__ import annotations

import enum
from typing import Any, NamedTuple, NoReturn, SupportsIndex

_print_length = 10


def set_list_print_length(length: int) -> None:
    """Set how many items a list's repr shows (Report.listPrintLength)."""
    global _print_length
    if not isinstance(length, int) or length < 0:
        raise ValueError(f"list print length must be a non-negative integer, got {length!r}")
    _print_length = length


class PvaEnum(enum.IntEnum):
    """An enum that behaves like libpva's pybind11 enums: hashable, comparable, int-valued."""

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    @classmethod
    def parse(cls, name: str | None, default: str = "Unknown") -> Any:
        """The member called `name`, or the `default` member for None or an unknown name."""
        if name is not None and name in cls.__members__:
            return cls[name]
        return cls[default]


class PvaList(list):
    """A Python list with a short repr (see Report.listPrintLength)."""

    __slots__ = ()

    def __repr__(self) -> str:
        parts = [repr(item) for item in self[:_print_length]]
        hidden = len(self) - _print_length
        if hidden > 0:
            parts.append(f"... (+{hidden} more)")
        return f"[{', '.join(parts)}]"

    def _repr_html_(self) -> str:
        from .notebook_tables import list_html  # how a notebook shows the list: its length and first items

        return list_html(self, _print_length)


def as_text(value: object) -> str:
    """A value read from a report as text: NULL as "", bytes decoded leniently, others with str()."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else str(value)


def refuse_pickle(self: object, protocol: SupportsIndex = 0) -> NoReturn:
    """`__reduce_ex__` of the objects that hold an open report: pickling them is refused, with the reason."""
    raise TypeError(
        f"pva objects read from a report cannot be pickled: they refer to its open file (this one through a "
        f"{type(self).__name__}), and a file handle cannot be pickled; pickle the report's path instead and open "
        f"it again with pva.openReport(path)"
    )


class EngineOption(NamedTuple):
    """An option given to the Poplar engine: a name and its value as text."""

    name: str
    value: str
