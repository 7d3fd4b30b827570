"""Export legacy Poplar v1 graph and execution profiles (JSON or CBOR) of a report."""

from __future__ import annotations

import os
from typing import Any

from ..atomic import AtomicOutput
from ..errors import InvalidInputError
from ..legacy.exporter import (
    CBOR_MAGIC,
    apply_extras,
    legacy_documents,
    write_cbor,
    write_json,
)
from ..pop.reader import ProfileReader


def export_legacy(
    report: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    encoding: str = "json",
    combined: bool | None = None,
) -> list[str]:
    """Write the legacy graph and execution profiles of a report; return the files written.

    With ``combined`` (the default when `output` ends in .json or .cbor) one document
    ``{"graphProfile": ..., "executionProfile": ...}`` is written to `output`; otherwise `output`
    is a directory that receives graph.<ext> and, if the report has execution data, execution.<ext>.
    """
    if encoding not in ("json", "cbor"):
        raise InvalidInputError(f"legacy export encoding must be json or cbor, got {encoding!r}")
    output = os.fspath(output)
    if combined is None:
        combined = output.lower().endswith((".json", ".cbor"))
    writer = write_json if encoding == "json" else write_cbor
    return _export(report, output, encoding, combined, writer)


def _export(report, output: str, encoding: str, combined: bool, writer) -> list[str]:
    reader = ProfileReader(report)
    try:
        reader.check_value_types()
        graph, execution, wrapper = legacy_documents(reader)
        if combined:
            doc: dict[str, Any] = {"graphProfile": graph}
            if execution is not None:
                doc["executionProfile"] = execution
            apply_extras(doc, wrapper)
            with AtomicOutput(output, stream=True) as out, open(out.path, "wb") as handle:
                if encoding == "cbor":
                    handle.write(CBOR_MAGIC)
                writer(doc, handle)
            return [output]
        with AtomicOutput(output, directory=True) as out:
            written = []
            for name, part in (("graph", graph), ("execution", execution)):
                if part is None:
                    continue
                path = os.path.join(out.path, f"{name}.{encoding}")
                with open(path, "wb") as handle:
                    if encoding == "cbor":
                        handle.write(CBOR_MAGIC)
                    writer(part, handle)
                written.append(os.path.join(output, f"{name}.{encoding}"))
        return written
    finally:
        reader.close()
