"""Errors of the object model: asking for what a report does not hold."""

from __future__ import annotations

from formats.errors import PvaError

__all__ = ["NoSuchObjectError", "NotPresentError"]


class NotPresentError(PvaError, RuntimeError):
    """The report lacks the information a call needs (libpva throws std::runtime_error).

    For example debug contexts of a report opened without debug.cbor, or the unlowered
    variable of a lowered variable that has none.
    """


class NoSuchObjectError(PvaError, IndexError):
    """A tile, IPU, program, variable or debug context id that the report does not have."""
