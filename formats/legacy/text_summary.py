"""Poplar's printProfileSummary text, parsed into nested sections of labelled values.

The summary is indented "Label: value" lines under section headers (Target, Graph, Memory
Usage, Execution), plus a few tabular rows: "<vertex type> (<n> instances): <cycles>", "<vertex
type>   <bytes> B" and histogram rows "4 - 5 ****  1,215". Numbers use thousands separators and
units (B, kB, MB, MHz, where kB and MB are binary as Poplar prints them); notes such as "(approx
5,119.2 microseconds)" or "Estimated (must enable debug.instrumentCompute)" are kept with the
value. Several summaries may follow each other, separated by "---" lines and named by a line of
their own (as in real logs).

>>> summary = parse_profile_summary("Target:\\n  Number of IPUs:   1\\n  Tiles per IPU:  1,216\\n")[0]
>>> summary.value("Target", "Tiles per IPU").number
1216
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any

from ..detect import read_text_file
from ..errors import InvalidInputError, NotAReportError

#: Largest summary read (real ones are a few kB to a few MB).
MAX_BYTES = 64 << 20

#: Section headers of a summary, in the order Poplar prints them.
SECTIONS = ("Target", "Graph", "Memory Usage", "Execution")
#: Byte multipliers of the units Poplar prints (binary).
BYTE_UNITS = {"B": 1, "kB": 1 << 10, "KB": 1 << 10, "K": 1 << 10, "MB": 1 << 20, "M": 1 << 20, "GB": 1 << 30}

_LABELLED = re.compile(r"^(?P<label>.*?[^:\s]):(?!:)(?:\s+(?P<value>.*))?$")
_NUMBER = re.compile(r"^(?P<number>-?\d[\d,]*(?:\.\d+)?)\s*(?P<unit>[A-Za-z%]+(?![A-Za-z(]))?\s*(?P<note>.*)$")
_INSTANCES = re.compile(r"^(?P<name>.+?)\s*\((?P<count>[\d,]+) instances\)$")
_SIZED_ROW = re.compile(r"^(?P<name>\S.*?)\s{2,}(?P<number>[\d,]+(?:\.\d+)?)\s*(?P<unit>B|kB|MB)$")
_HISTOGRAM = re.compile(r"^(?P<low>[\d,.]+)\s*-\s*(?P<high>[\d,.]+)\s+\**\s+(?P<count>[\d,]+)$")


@dataclasses.dataclass
class Value:
    """One value: its text, the number in it (None for text), its unit and any note after it."""

    text: str
    number: int | float | None = None
    unit: str = ""
    note: str = ""

    @property
    def bytes(self) -> int | None:
        """The value in bytes when its unit is one of Poplar's byte units."""
        if self.number is None or self.unit not in BYTE_UNITS:
            return None
        return int(round(self.number * BYTE_UNITS[self.unit]))

    def to_json(self) -> dict:
        out: dict[str, Any] = {"text": self.text}
        if self.number is not None:
            out["number"] = self.number
        if self.unit:
            out["unit"] = self.unit
        if self.note:
            out["note"] = self.note
        return out


@dataclasses.dataclass
class Summary:
    """One summary: an optional name line, then sections of labelled values (nested dicts)."""

    name: str
    sections: dict = dataclasses.field(default_factory=dict)

    def value(self, *labels: str) -> Value | None:
        """The value at a path of labels, e.g. value("Target", "Tiles per IPU")."""
        node: Any = self.sections
        for label in labels:
            if not isinstance(node, dict) or label not in node:
                return None
            node = node[label]
        return node if isinstance(node, Value) else None

    def to_json(self) -> dict:
        return {"name": self.name, "sections": _json(self.sections)}


def _json(node: Any) -> Any:
    if isinstance(node, Value):
        return node.to_json()
    if isinstance(node, dict):
        return {k: _json(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_json(v) for v in node]
    return node


#: Longest number read as a number (a 64-bit count has 20 digits; Python refuses 4,301 and more).
_MAX_DIGITS = 40


def parse_value(text: str) -> Value:
    """A value such as "1,216", "256.0 kB", "8,190,756 (approx 5,119.2 microseconds)" or plain text."""
    text = text.strip()
    match = _NUMBER.match(text)
    if not match:
        return Value(text)
    digits = match.group("number").replace(",", "")
    if len(digits) > _MAX_DIGITS:
        return Value(text)  # no figure of a profile is this long: kept as the text it is
    number: int | float = float(digits) if "." in digits else int(digits)
    return Value(text, number, match.group("unit") or "", match.group("note").strip())


def parse_profile_summary(text: str, path: str = "<text>") -> list[Summary]:
    """Every summary in a text (several when a log holds more than one run).

    Real logs are often fragments: values before any section header go to a section named "",
    a one-word line after a blank line names the next summary, "." elision lines are skipped,
    and a label that repeats at the top of a section starts a new summary.
    """
    summaries: list[Summary] = []
    current: Summary | None = None
    stack: list[tuple[int, dict]] = []  # (indent of the header, its dict)
    pending_name = ""
    after_blank = True
    children_indent: dict[int, int] = {}  # indent of the first child of each block, by id
    for raw in text.lstrip("\ufeff").splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            after_blank = True
            continue
        blank_before, after_blank = after_blank, False
        if set(stripped) == {"-"}:
            current, stack, pending_name, after_blank = None, [], "", True
            continue
        if set(stripped) == {"."}:
            continue
        indent = len(line) - len(line.lstrip(" "))
        header = stripped[:-1] if stripped.endswith(":") and not stripped.endswith("::") else None
        if header in SECTIONS:
            if current is None or header in current.sections:
                current = Summary(pending_name)
                summaries.append(current)
                pending_name = ""
            section: dict = {}
            current.sections[header] = section
            stack = [(indent, section)]
            continue
        structured = bool(_LABELLED.match(stripped) or _HISTOGRAM.match(stripped) or _SIZED_ROW.match(stripped))
        if not structured and " " not in stripped and (current is None or blank_before):
            current, stack, pending_name = None, [], stripped  # the name of the next summary
            continue
        label_match = _LABELLED.match(stripped)
        top_label = label_match.group("label").strip() if label_match else None
        if current is None or (
            stack
            and len(stack) == 1
            and "" in current.sections
            and stack[0][1] is current.sections[""]
            and top_label in current.sections[""]
            and indent <= stack[0][0] + 2
        ):
            current = Summary(pending_name)
            summaries.append(current)
            pending_name = ""
            current.sections[""] = {}
            stack = [(indent - 1, current.sections[""])]
        while len(stack) > 1 and (indent <= stack[-1][0] or indent < children_indent.get(id(stack[-1][1]), indent)):
            stack.pop()  # back out of blocks this line is not indented as a child of
        children_indent.setdefault(id(stack[-1][1]), indent)
        _add_line(stack[-1][1], stack, indent, stripped)
    if not summaries:
        raise InvalidInputError(
            f"{path!r}: line 1, column 1: expected a Poplar profile summary: labelled values "
            f"or a {', '.join(s + ':' for s in SECTIONS)} section",
            path,
        )
    return summaries


def _add_line(parent: dict, stack: list, indent: int, stripped: str) -> None:
    match = _LABELLED.match(stripped)
    if match:
        label, value = match.group("label").strip(), match.group("value")
        instances = _INSTANCES.match(label)
        if instances and value is not None:
            rows = parent.setdefault("rows", [])
            rows.append(
                {
                    "name": instances.group("name"),
                    "instances": int(instances.group("count").replace(",", "")),
                    "cycles": parse_value(value),
                }
            )
            return
        if value is None or not value.strip():
            child: dict = {}
            parent[label] = child
            stack.append((indent, child))
            return
        parent[label] = parse_value(value)
        return
    histogram = _HISTOGRAM.match(stripped)
    if histogram:
        parent.setdefault("histogram", []).append(
            {
                "from": parse_value(histogram.group("low")).number,
                "to": parse_value(histogram.group("high")).number,
                "count": int(histogram.group("count").replace(",", "")),
            }
        )
        return
    sized = _SIZED_ROW.match(stripped)
    if sized:
        parent.setdefault("rows", []).append(
            {"name": sized.group("name"), "size": parse_value(f"{sized.group('number')} {sized.group('unit')}")}
        )
        return
    parent.setdefault("notes", []).append(stripped)


def summary_target(summary: Summary) -> dict | None:
    """ProfileWriter.set_target arguments from a summary's Target section, or None without one."""
    ipus = summary.value("Target", "Number of IPUs")
    tiles = summary.value("Target", "Tiles per IPU")
    if ipus is None or tiles is None or not isinstance(ipus.number, int) or not isinstance(tiles.number, int):
        return None
    per_tile = summary.value("Target", "Memory Per-Tile")
    clock = summary.value("Target", "Clock Speed (approx)")
    hertz = 0.0
    if clock is not None and clock.number is not None:
        hertz = float(clock.number) * {"MHz": 1e6, "GHz": 1e9, "kHz": 1e3, "Hz": 1.0}.get(clock.unit, 1.0)
    return {
        "num_ipus": ipus.number,
        "tiles_per_ipu": tiles.number,
        "bytes_per_tile": (per_tile.bytes or 0) if per_tile is not None else 0,
        "clock_frequency": hertz,
    }


def summary_graph(summary: Summary) -> dict:
    """ProfileWriter.set_graph arguments from a summary's Graph section (0 where absent)."""
    out = {}
    for key, label in (
        ("num_vertices", "Number of vertices"),
        ("num_edges", "Number of edges"),
        ("num_vars", "Number of variables"),
        ("num_compute_sets", "Number of compute sets"),
    ):
        value = summary.value("Graph", label)
        out[key] = int(value.number) if value is not None and value.number is not None else 0
    return out


#: "By Data Type" labels of the summary -> storage category names (formats.pop.categories).
DATA_TYPE_CATEGORIES = {
    "Variables": "variable",
    "Constants": "constant",
    "Internal Exchange Message Buffers": "message",
    "Global Exchange Message Buffers": "globalMessage",
    "Host Exchange Message Buffers": "hostMessage",
    "Data Rearrangement Buffers": "rearrangement",
    "Output Edge Buffers": "outputEdge",
    "Host Exchange Packet Headers": "hostExchangePacketHeader",
    "Global Exchange Packet Headers": "globalExchangePacketHeader",
    "Stack": "stack",
    "Vertex Instances": "vertexInstanceState",
    "Copy Descriptors": "copyDescriptor",
    "VectorList Descriptors": "vectorListDescriptor",
    "Vertex Field Data": "vertexFieldData",
    "Control Table": "controlTable",
    "Control Code": "controlCode",
    "Control IDs": "controlId",
    "Vertex Code": "vertexCode",
    "Internal Exchange Code": "internalExchangeCode",
    "Host Exchange Code": "hostExchangeCode",
    "Global Exchange Code": "globalExchangeCode",
    "Instrumentation Results": "instrumentationResults",
    "Shared Code Storage": "sharedCodeStorage",
    "Shared Data Storage": "sharedDataStorage",
}
_ON_TILE = re.compile(r"^(?P<bytes>[\d,]+)\b.*\bon tile (?P<tile>\d+)$")


def summary_memory(summary: Summary) -> dict:
    """The device-wide memory figures a summary states (bytes; keys as memory_by_tile's columns).

    ``total_including_gaps``, ``total`` (excluding gaps), ``non_interleaved``, ``interleaved``,
    ``overflowed``, ``by_category`` (storage category -> bytes, excluding gaps) and
    ``max_tile_including_gaps`` / ``max_tile`` ({"tile", "bytes"}); only those the text has.
    """
    out: dict[str, Any] = {}
    base = ("Memory Usage", "Total")
    including = summary.value(*base, "Including Gaps")
    if including is not None and including.bytes is not None:
        out["total_including_gaps"] = including.bytes
    regions = {}
    for label, key in (
        ("Non-interleaved", "non_interleaved"),
        ("Interleaved", "interleaved"),
        ("Overflowed", "overflowed"),
    ):
        value = summary.value(*base, "Excluding Gaps", "By Memory Region", label)
        if value is not None and value.bytes is not None:
            regions[key] = value.bytes
    out.update(regions)
    total = summary.value(*base, "Excluding Gaps", "Total")
    if total is not None and total.bytes is not None:
        out["total"] = total.bytes
    elif len(regions) == 3:
        out["total"] = sum(regions.values())
    node = summary.sections.get("Memory Usage", {}).get("Total", {}).get("Excluding Gaps", {}).get("By Data Type")
    if isinstance(node, dict):
        categories = {}
        for label, value in node.items():
            name = DATA_TYPE_CATEGORIES.get(label)
            if name is not None and isinstance(value, Value) and value.bytes is not None:
                categories[name] = value.bytes
        if categories:
            out["by_category"] = categories
    for label, key in (
        ("Maximum (Including Gaps)", "max_tile_including_gaps"),
        ("Maximum (Excluding Gaps)", "max_tile"),
    ):
        value = summary.value("Memory Usage", "By Tile (Excluding Gaps)", label)
        match = _ON_TILE.match(value.text) if value is not None else None
        if match:
            out[key] = {"tile": int(match["tile"]), "bytes": int(match["bytes"].replace(",", ""))}
    return out


def not_recorded(summary: Summary) -> list[str]:
    """The target and graph columns a converted summary fills with a placeholder: the text lacks them."""
    missing = []
    if summary.value("Target", "Memory Per-Tile") is None:
        missing += ["target.bytes_per_tile", "target.bytes_per_ipu", "target.total_memory", "target.memory_per_replica"]
    clock = summary.value("Target", "Clock Speed (approx)")
    if clock is None or clock.number is None:
        missing.append("target.clock_frequency")
    for key, label in (
        ("num_vertices", "Number of vertices"),
        ("num_edges", "Number of edges"),
        ("num_vars", "Number of variables"),
        ("num_compute_sets", "Number of compute sets"),
    ):
        value = summary.value("Graph", label)
        if value is None or value.number is None:
            missing.append(f"graph.{key}")
    return missing


def read_profile_summary(path: str | os.PathLike[str]) -> list[Summary]:
    """Read and parse a text file of printProfileSummary output."""
    name = os.fspath(path)
    text = read_text_file(name, "profile summary", MAX_BYTES)
    return parse_profile_summary(text, name)


def convert_text_summary(path: str | os.PathLike[str], output: str | os.PathLike[str]) -> list[Summary]:
    """Write a profile.pop from a summary that has a Target section: the target, the graph counts,
    the vertex types it names, and every parsed value in extras (source poplar-text-summary).

    A summary carries totals and histograms, not per-tile values, so the per-tile tables stay
    empty; the device-wide memory figures go to metadata ``memory_totals`` (see `summary_memory`)
    and the target and graph columns the text lacks are listed in metadata ``not_recorded``. Summaries without a Target (execution-only logs) are refused: parse them with
    `parse_profile_summary` instead.
    """
    from ..pop.writer import ProfileWriter
    from .mapping import guess_architecture

    name = os.fspath(path)
    summaries = read_profile_summary(name)
    target = summary_target(summaries[0])
    if target is None:
        raise NotAReportError(
            f"{name!r}: line 1: a Poplar text profile summary without a Target section (a fragment or an "
            f"execution-only log) cannot become a report; read its values with formats.legacy.text_summary.read_profile_summary",
            name,
        )
    vertex_types: list[str] = []
    for summary in summaries:
        for rows in _find_rows(summary.sections):
            for row in rows:
                if row.get("name") and row["name"] not in vertex_types:
                    vertex_types.append(row["name"])
    with ProfileWriter(output, producer="pva convert") as writer:
        writer.set_metadata(
            source_format="Poplar text profile summary", not_recorded=json.dumps(not_recorded(summaries[0]))
        )
        memory = summary_memory(summaries[0])
        if memory:
            writer.set_metadata(memory_totals=json.dumps(memory, separators=(",", ":")))
        writer.set_target(
            type="Unknown",
            architecture=guess_architecture(
                target["tiles_per_ipu"], target["bytes_per_tile"], target["clock_frequency"]
            ),
            **target,
        )
        writer.set_graph(**summary_graph(summaries[0]))
        writer.insert("vertex_types", ("id", "name"), list(enumerate(vertex_types)))
        writer.insert(
            "extras",
            ("source", "path", "value"),
            [("poplar-text-summary", "$", json.dumps([s.to_json() for s in summaries]))],
        )
    return summaries


def _find_rows(node: Any):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "rows" and isinstance(value, list):
                yield value
            else:
                yield from _find_rows(value)
