"""Cerebras compile reports (compile_report.txt): parsing, and conversion into profile.pop.

The real file starts with an "Estimated Overall Performance" block whose labels are padded so
values start at column 31, percentages rounded to whole numbers (so ``0%`` occurs), followed
by a per-kernel table (with or without ``+---+`` rules) whose Active PEs column is a PE count.

>>> report = parse_compile_report(SAMPLE)
>>> report.overall.samples_per_second, report.overall.active_pes_percent
(14724.2, 62)
"""

from __future__ import annotations

import dataclasses
import json
import os
import re

from ..detect import read_text_file
from ..errors import InvalidInputError, NotAReportError
from ..pop.writer import ProfileWriter

#: The first line of every compile report.
HEADER = "Estimated Overall Performance"
#: Column (0-based) where the values of the overall block start in the real layout.
VALUE_COLUMN = 30
#: Largest compile report read (the real ones are a few kB to a few MB).
MAX_BYTES = 64 << 20

SAMPLE = """Estimated Overall Performance
-------------------------------
Samples/s:                    14724.2
Compute Samples/s:            17287.7
Transmission Samples/s:       14724.2
Active PEs:                   62%
Compute Utilization:          52%
"""

_OVERALL = {
    "Samples/s": "samples_per_second",
    "Compute Samples/s": "compute_samples_per_second",
    "Transmission Samples/s": "transmission_samples_per_second",
    "Active PEs": "active_pes_percent",
    "Compute Utilization": "compute_utilization_percent",
}
_KERNEL_HEADER = (
    "kernel name",
    "samples/s",
    "compute samples/s",
    "transmission samples/s",
    "active pes",
    "compute utilization",
)
_RATE = re.compile(r"^\d+(?:\.\d+)?$")
_PERCENT = re.compile(r"^(\d+)\s*%$")
_COUNT = re.compile(r"^\d+$")
_RULE = re.compile(r"^\s*\+[-+]*\+\s*$")


@dataclasses.dataclass(frozen=True)
class OverallEstimate:
    """The "Estimated Overall Performance" block."""

    samples_per_second: float
    compute_samples_per_second: float
    transmission_samples_per_second: float
    active_pes_percent: int
    compute_utilization_percent: int


@dataclasses.dataclass(frozen=True)
class KernelEstimate:
    """One row of the per-kernel table."""

    name: str
    samples_per_second: float
    compute_samples_per_second: float
    transmission_samples_per_second: float
    active_pes: int
    compute_utilization_percent: int


@dataclasses.dataclass(frozen=True)
class CompileReport:
    """A parsed compile report: the overall estimate and the kernels (possibly none)."""

    path: str
    overall: OverallEstimate
    kernels: tuple[KernelEstimate, ...]

    @property
    def limited_by(self) -> str:
        """Which estimate bounds the overall throughput: 'compute' or 'transmission'."""
        o = self.overall
        return "compute" if o.compute_samples_per_second <= o.transmission_samples_per_second else "transmission"


def _fail(path: str, line: int, column: int, message: str) -> InvalidInputError:
    return InvalidInputError(f"{path!r}: line {line}, column {column}: {message}", path)


def _overall_value(path: str, number: int, line: str, label: str) -> tuple[str, int]:
    """The value text of an overall line and its 1-based column."""
    if len(line) > VALUE_COLUMN and line[:VALUE_COLUMN].strip() == label + ":":
        return line[VALUE_COLUMN:].strip(), VALUE_COLUMN + 1
    # the documentation's rendering drops the padding: "Samples/s: 2321.9"
    colon = line.index(":")
    value = line[colon + 1 :]
    return value.strip(), colon + 2 + (len(value) - len(value.lstrip()))


def parse_compile_report(text: str, path: str = "<text>") -> CompileReport:
    """Parse the text of a compile report; raise InvalidInputError naming line and column."""
    lines = text.lstrip("\ufeff").splitlines()
    index = 0
    while index < len(lines) and not lines[index].strip():
        index += 1
    if index >= len(lines) or lines[index].strip() != HEADER:
        found = lines[index].strip()[:60] if index < len(lines) else "nothing"
        raise NotAReportError(
            f"{path!r}: expected a Cerebras compile report starting with {HEADER!r}, found {found!r}", path
        )
    index += 1
    values: dict[str, float | int] = {}
    while index < len(lines) and len(values) < len(_OVERALL):
        line = lines[index]
        number = index + 1
        index += 1
        stripped = line.strip()
        if not stripped or set(stripped) == {"-"}:
            continue
        label = stripped.split(":", 1)[0].strip() if ":" in stripped else None
        if label not in _OVERALL:
            if stripped.startswith(("|", "+")):
                index -= 1
                break
            raise _fail(path, number, 1, f"expected one of {', '.join(_OVERALL)}, found {stripped[:40]!r}")
        field = _OVERALL[label]
        if field in values:
            raise _fail(path, number, 1, f"{label!r} appears twice")
        value, column = _overall_value(path, number, line, label)
        if field.endswith("_percent"):
            match = _PERCENT.match(value)
            if not match:
                raise _fail(path, number, column, f"expected a whole percentage such as 62%, found {value!r}")
            values[field] = int(match.group(1))
        else:
            if not _RATE.match(value):
                raise _fail(path, number, column, f"expected samples per second such as 14724.2, found {value!r}")
            values[field] = float(value)
    missing = [label for label, field in _OVERALL.items() if field not in values]
    if missing:
        raise _fail(path, len(lines), 1, f"the overall estimate lacks {', '.join(missing)}")
    overall = OverallEstimate(
        samples_per_second=float(values["samples_per_second"]),
        compute_samples_per_second=float(values["compute_samples_per_second"]),
        transmission_samples_per_second=float(values["transmission_samples_per_second"]),
        active_pes_percent=int(values["active_pes_percent"]),
        compute_utilization_percent=int(values["compute_utilization_percent"]),
    )
    return CompileReport(path, overall, tuple(_kernels(path, lines, index)))


def _cells(line: str) -> list[str]:
    body = line.strip()
    if body.endswith("|"):
        body = body[:-1]
    return [cell.strip() for cell in body[1:].split("|")]


def _kernels(path: str, lines: list[str], index: int) -> list[KernelEstimate]:
    kernels: list[KernelEstimate] = []
    header_seen = False
    for position in range(index, len(lines)):
        line = lines[position]
        number = position + 1
        stripped = line.strip()
        if not stripped or _RULE.match(line):
            continue
        if not stripped.startswith("|"):
            raise _fail(
                path, number, 1, f"expected a row of the kernel table starting with '|', found {stripped[:40]!r}"
            )
        cells = _cells(line)
        if len(cells) != 6:
            raise _fail(path, number, 1, f"expected 6 cells in a kernel table row, found {len(cells)}")
        if not header_seen:
            if tuple(c.lower() for c in cells) != _KERNEL_HEADER:
                raise _fail(
                    path,
                    number,
                    1,
                    f"expected the kernel table header ({' | '.join(_KERNEL_HEADER)}), found {stripped[:60]!r}",
                )
            header_seen = True
            continue
        if not any(cells):
            continue  # the blank row under the header
        name, rate, compute, transmission, pes, utilisation = cells
        column = line.index("|") + 2
        if not name:
            raise _fail(path, number, column, "expected a kernel name, found an empty cell")
        numbers: list[str] = []
        for cell, what, pattern in (
            (rate, "samples per second", _RATE),
            (compute, "compute samples per second", _RATE),
            (transmission, "transmission samples per second", _RATE),
            (pes, "a count of active PEs", _COUNT),
        ):
            if not pattern.match(cell):
                column = _column_of(line, cell, len(numbers) + 1)
                raise _fail(path, number, column, f"expected {what}, found {cell!r}")
            numbers.append(cell)
        match = _PERCENT.match(utilisation)
        if not match:
            raise _fail(
                path,
                number,
                _column_of(line, utilisation, 5),
                f"expected a whole percentage such as 100%, found {utilisation!r}",
            )
        kernels.append(
            KernelEstimate(
                name, float(numbers[0]), float(numbers[1]), float(numbers[2]), int(numbers[3]), int(match.group(1))
            )
        )
    return kernels


def _column_of(line: str, cell: str, separator: int) -> int:
    """1-based column where cell number `separator` (0 is the name) starts."""
    position = -1
    for _ in range(separator + 1):
        position = line.index("|", position + 1)
    start = position + 1
    while start < len(line) and line[start] == " ":
        start += 1
    return start + 1


#: The target and graph columns a converted compile report fills with placeholders.
NOT_RECORDED = [
    "target.num_ipus",
    "target.tiles_per_ipu",
    "target.num_tiles",
    "target.bytes_per_tile",
    "target.bytes_per_ipu",
    "target.total_memory",
    "target.clock_frequency",
    "target.ipus_per_replica",
    "target.tiles_per_replica",
    "target.memory_per_replica",
    "graph.num_edges",
    "graph.num_vars",
    "graph.num_vertices",
]


def read_compile_report(path: str | os.PathLike[str]) -> CompileReport:
    """Read and parse a compile_report.txt."""
    name = os.fspath(path)
    text = read_text_file(name, "Cerebras compile report", MAX_BYTES)
    return parse_compile_report(text, name)


def convert_cerebras(path: str | os.PathLike[str], output: str | os.PathLike[str]) -> CompileReport:
    """Write a compile report as a profile.pop: kernels as compute sets, estimates in compile_estimates.

    The target is recorded as Unknown (one IPU of one tile): a compile report says nothing of the
    hardware layout, so those placeholders, and the graph counts other than the kernels, are
    listed in metadata ``not_recorded``.
    """
    report = read_compile_report(path)
    o = report.overall
    with ProfileWriter(output, producer="pva convert") as writer:
        writer.set_metadata(source_format="Cerebras compile report", not_recorded=json.dumps(NOT_RECORDED))
        writer.set_target(
            num_ipus=1, tiles_per_ipu=1, bytes_per_tile=0, clock_frequency=0.0, type="Unknown", architecture="Unknown"
        )
        writer.set_graph(num_compute_sets=len(report.kernels), num_edges=0, num_vars=0, num_vertices=0)
        writer.insert("compute_sets", ("compute_set", "name"), [(i, k.name) for i, k in enumerate(report.kernels)])
        overall = {  # the whole model: no kernel, no compute set
            "id": 0,
            "kernel": None,
            "compute_set": None,
            "samples_per_second": o.samples_per_second,
            "compute_samples_per_second": o.compute_samples_per_second,
            "transmission_samples_per_second": o.transmission_samples_per_second,
            "active_pes": None,
            "active_pes_percent": o.active_pes_percent,
            "compute_utilization_percent": o.compute_utilization_percent,
        }
        kernels = [
            {
                "id": i + 1,
                "kernel": k.name,
                "compute_set": i,
                "samples_per_second": k.samples_per_second,
                "compute_samples_per_second": k.compute_samples_per_second,
                "transmission_samples_per_second": k.transmission_samples_per_second,
                "active_pes": k.active_pes,
                "active_pes_percent": None,
                "compute_utilization_percent": k.compute_utilization_percent,
            }
            for i, k in enumerate(report.kernels)
        ]
        writer.insert_rows("compile_estimates", [overall, *kernels])
    return report
