"""Device data types (poplar::Type): name, size in bytes and the numpy type used on the host."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import GraphError


@dataclass(frozen=True)
class Type:
    """A device data type."""

    name: str
    size: int
    numpy: np.dtype

    def __repr__(self) -> str:
        return self.name.upper().replace(" ", "_")

    def __str__(self) -> str:
        return self.name


FLOAT = Type("float", 4, np.dtype(np.float32))
HALF = Type("half", 2, np.dtype(np.float16))
INT = Type("int", 4, np.dtype(np.int32))
UNSIGNED_INT = Type("unsigned int", 4, np.dtype(np.uint32))
SHORT = Type("short", 2, np.dtype(np.int16))
UNSIGNED_SHORT = Type("unsigned short", 2, np.dtype(np.uint16))
CHAR = Type("char", 1, np.dtype(np.int8))
UNSIGNED_CHAR = Type("unsigned char", 1, np.dtype(np.uint8))
BOOL = Type("bool", 1, np.dtype(np.bool_))

TYPES = {t.name: t for t in (FLOAT, HALF, INT, UNSIGNED_INT, SHORT, UNSIGNED_SHORT, CHAR, UNSIGNED_CHAR, BOOL)}
_ALIASES = {"float32": FLOAT, "float16": HALF, "int32": INT, "uint32": UNSIGNED_INT, "unsigned": UNSIGNED_INT}


def as_type(value: Type | str) -> Type:
    """A Type from a Type or its name ('float', 'half', 'int', ...)."""
    if isinstance(value, Type):
        return value
    if isinstance(value, str):
        found = TYPES.get(value.lower()) or _ALIASES.get(value.lower())
        if found is not None:
            return found
    raise GraphError(f"unknown data type {value!r}; expected one of {', '.join(TYPES)}")
