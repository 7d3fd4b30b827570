"""Debug contexts: who created each variable, compute set and program, and from where."""

from __future__ import annotations

import os
import sys
from types import FrameType
from typing import Any

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_ROOT_DIR = os.path.dirname(_PACKAGE_DIR)
_PRESETS_DIR = os.path.join(_PACKAGE_DIR, "presets")  # the presets are the simulator's client code


_NAMES: dict[str, tuple[bool, str]] = {}


def _file_name(filename: str) -> tuple[bool, str]:
    """(stop here?, machine-independent name) of a code file; cached."""
    found = _NAMES.get(filename)
    if found is None:
        path = os.path.abspath(filename)
        inside = path.startswith(_PACKAGE_DIR + os.sep)
        stop = not inside or path.startswith(_PRESETS_DIR + os.sep)
        if path.startswith(_ROOT_DIR + os.sep):
            name = os.path.relpath(path, _ROOT_DIR).replace(os.sep, "/")
        else:
            name = os.path.basename(path)
        found = _NAMES[filename] = (stop, name)
    return found


def _location() -> dict[str, Any] | None:
    """The first stack frame outside the simulator package, with a machine-independent file name."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        stop, name = _file_name(frame.f_code.co_filename)
        if stop:
            return {"fileName": name, "lineNumber": frame.f_lineno, "functionName": frame.f_code.co_name}
        frame = frame.f_back
    return None


class DebugContexts:
    """The debug contexts of one graph, in creation order; ids start at 1."""

    def __init__(self) -> None:
        self.contexts: list[dict[str, Any]] = []
        self._stack: list[int] = []

    def new(
        self,
        name: str,
        layer: str = "poplar",
        data: dict | None = None,
        parent: int | None = None,
        locate: bool = True,
        location: dict | None = None,
    ) -> int:
        """Create a context under `parent` (or the current scope) and return its id."""
        if parent is None and self._stack:
            parent = self._stack[-1]
        ctx: dict[str, Any] = {
            "id": len(self.contexts) + 1,
            "layer": layer,
            "name": name or "",
            "parents": [] if parent is None else [parent],
            "location": location if location is not None else (_location() if locate else None),
            "data": dict(data or {}),
        }
        self.contexts.append(ctx)
        return ctx["id"]

    def push(self, context_id: int) -> None:
        self._stack.append(context_id)

    def pop(self) -> None:
        self._stack.pop()

    @property
    def current(self) -> int | None:
        return self._stack[-1] if self._stack else None

    def full_name(self, context_id: int | None) -> str:
        """Names of the context and its first parents joined with '/'."""
        parts = []
        seen = 0
        while context_id is not None and seen < 64:
            ctx = self.contexts[context_id - 1]
            if ctx["name"]:
                parts.append(ctx["name"])
            context_id = ctx["parents"][0] if ctx["parents"] else None
            seen += 1
        return "/".join(reversed(parts))


#: Scopes entered and not yet left, innermost last: (contexts, context id).
ACTIVE: list[tuple[DebugContexts, int]] = []


def current_scope() -> tuple[DebugContexts, int] | None:
    """The innermost open scope, recorded by programs when they are built."""
    return ACTIVE[-1] if ACTIVE else None


class Scope:
    """`with graph.debugScope("layer1"):` makes contexts created inside children of one context."""

    def __init__(self, contexts: DebugContexts, name: str, layer: str = "user", data: dict | None = None) -> None:
        self._contexts = contexts
        self.id = contexts.new(name, layer, data)

    def __enter__(self) -> int:
        self._contexts.push(self.id)
        ACTIVE.append((self._contexts, self.id))
        return self.id

    def __exit__(self, *exc) -> None:
        self._contexts.pop()
        ACTIVE.pop()
