"""Errors the simulator raises: PvaError subclasses that also inherit the matching built-in."""

from __future__ import annotations

from formats.errors import InvalidInputError


class GraphError(InvalidInputError):
    """The graph or its programs are invalid; the message names the object and what is wrong."""


class OptionError(InvalidInputError):
    """An engine option, preset name or preset knob is unknown or has a bad value."""


class ExecutionError(InvalidInputError):
    """A program cannot be run as built (for example a stream that was never connected)."""
