"""The normative schemas shipped in the `schemas` package, parsed for writers and readers."""

from __future__ import annotations

import functools
import json
import pkgutil
import re
from dataclasses import dataclass

#: Current profile.pop format version, written by this package.
PROFILE_FORMAT = (1, 0)
#: SQLite application_id of a profile.pop file: ASCII "PVAR".
PROFILE_APPLICATION_ID = 0x50564152
#: Current trace file format version.
TRACE_FORMAT = (1, 1)
#: SQLite application_id of a pva trace file: ASCII "PVAT".
TRACE_APPLICATION_ID = 0x50564154


def user_version(major: int, minor: int) -> int:
    """The SQLite user_version that encodes a format version."""
    return major * 1000 + minor


def split_user_version(value: int) -> tuple[int, int]:
    """The (major, minor) format version encoded in a SQLite user_version."""
    return divmod(value, 1000)


@dataclass(frozen=True)
class ColumnSpec:
    """One column of a table as the DDL declares it."""

    name: str
    type: str
    not_null: bool
    description: str


@dataclass(frozen=True)
class TableSpec:
    """One table as the DDL declares it."""

    name: str
    description: str
    columns: tuple[ColumnSpec, ...]
    without_rowid: bool

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


@dataclass(frozen=True)
class Schema:
    """A parsed DDL file: its text, its tables in order and its index names."""

    ddl: str
    tables: dict[str, TableSpec]
    indexes: tuple[str, ...]


def read_schema_text(name: str) -> str:
    """The text of a file of the `schemas` package."""
    data = pkgutil.get_data("schemas", name)  # through the package's loader; lighter than importlib.resources
    if data is None:
        raise FileNotFoundError(f"schemas/{name}: not in the installed package")
    return data.decode("utf-8")


_CREATE_TABLE = re.compile(r"^CREATE TABLE (\w+) \($")
_COLUMN = re.compile(r'^\s+"?(\w+)"?\s+(INTEGER|TEXT|REAL|BLOB)\b([^-]*)(?:--\s*(.*))?$')
_INDEX = re.compile(r"^CREATE (?:UNIQUE )?INDEX (\w+) ON")


def parse_ddl(ddl: str) -> Schema:
    """Parse DDL written in the conventions of schemas/profile.sql."""
    tables: dict[str, TableSpec] = {}
    indexes: list[str] = []
    comment: list[str] = []
    lines = ddl.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--"):
            comment.append(line[2:].strip())
        elif (m := _CREATE_TABLE.match(line)) is not None:
            name = m.group(1)
            columns: list[ColumnSpec] = []
            i += 1
            while not lines[i].startswith(")"):
                cm = _COLUMN.match(lines[i])
                if cm is not None:
                    columns.append(
                        ColumnSpec(
                            name=cm.group(1),
                            type=cm.group(2),
                            not_null="NOT NULL" in cm.group(3),
                            description=(cm.group(4) or "").strip(),
                        )
                    )
                i += 1
            tables[name] = TableSpec(
                name=name,
                description=" ".join(c for c in comment if c),
                columns=tuple(columns),
                without_rowid="WITHOUT ROWID" in lines[i],
            )
            comment = []
        elif (m := _INDEX.match(line)) is not None:
            indexes.append(m.group(1))
            comment = []
        else:
            comment = []
        i += 1
    return Schema(ddl=ddl, tables=tables, indexes=tuple(indexes))


@functools.cache
def profile_schema() -> Schema:
    """The profile.pop DDL of the current format version."""
    return parse_ddl(read_schema_text("profile.sql"))


@functools.cache
def profile_matrices() -> dict:
    """The per-tile matrix declarations of the current profile.pop format version."""
    return json.loads(read_schema_text("profile_matrices.json"))


@functools.cache
def trace_schema() -> Schema:
    """The trace file DDL of the current format version."""
    return parse_ddl(read_schema_text("trace.sql"))


def split_ddl(ddl: str) -> tuple[str, str]:
    """The DDL split into (tables, indexes), so indexes can be built after a bulk load."""
    table_lines: list[str] = []
    index_lines: list[str] = []
    for line in ddl.splitlines():
        (index_lines if _INDEX.match(line) else table_lines).append(line)
    return "\n".join(table_lines), "\n".join(index_lines)
