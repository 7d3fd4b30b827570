"""Legacy Poplar (v1) graph and execution profiles: detection, streaming import, export.

>>> from formats.legacy import convert_legacy                      # doctest: +SKIP
>>> result = convert_legacy(["graph.json", "execution.json"], "profile.pop")
>>> result.warnings                                                  # doctest: +SKIP
['2 unknown key(s) kept in table extras, e.g. $.target.foo']
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from ..detect import InputInfo, InputKind, classify_input
from ..errors import InvalidInputError, NotAReportError, UnsupportedVersionError
from ..pop.writer import ProfileWriter
from ..progress import Progress
from ..streaming.cbor_events import cbor_events
from ..streaming.json_events import json_events, open_binary
from ..streaming.runs import Spool
from ..streaming.tree import build_tree, describe, json_path
from .importer import Extras, LegacyImporter, input_size
from .schema_check import check_document

__all__ = ["ConversionResult", "LEGACY_KINDS", "convert_legacy", "read_document", "refuse"]

#: Kinds convert_legacy reads.
LEGACY_KINDS = (InputKind.LEGACY_GRAPH, InputKind.LEGACY_EXECUTION, InputKind.LEGACY_COMBINED)
#: extras.source of top-level keys of a combined document other than the two profiles.
SOURCE_WRAPPER = "legacy-profile"


@dataclasses.dataclass
class ConversionResult:
    """What a conversion wrote and what it noticed."""

    output: str
    inputs: list[str]
    kinds: list[str]
    unknown_keys: int = 0
    warnings: list[str] = dataclasses.field(default_factory=list)


def refuse(info: InputInfo) -> None:
    """Raise the error that explains why an input of this kind cannot be converted."""
    path = info.path
    if info.kind in (InputKind.LEGACY_PRE_2019, InputKind.LEGACY_V2, InputKind.LEGACY_V3):
        raise UnsupportedVersionError(
            f"{path!r}: is {info.describe()}; pva convert reads legacy v1 profiles (Poplar SDK 1.x graph and "
            f"execution profiles in JSON or CBOR) but not this generation",
            path,
        )
    if info.kind is InputKind.PVA_REPORT:
        raise NotAReportError(f"{path!r}: is already a pva report (profile.pop); open it with pva.openReport", path)
    where = "$: " if info.encoding in ("json", "cbor") else "byte 0: "
    raise NotAReportError(
        f"{path!r}: {where}expected a legacy Poplar v1 graph or execution profile (JSON or CBOR), "
        f"found {info.describe()}",
        path,
    )


def read_document(
    path: str | os.PathLike[str], encoding: str, spool: Spool | None, progress: Progress | None = None
) -> Any:
    """The document tree of a JSON or CBOR file, number arrays as Runs (spooled when long)."""
    name = os.fspath(path)
    tick = progress.advance if progress is not None else None
    with open_binary(name) as raw:
        events = (
            json_events(raw, spool, progress=tick) if encoding == "json" else cbor_events(raw, spool, progress=tick)
        )
        return build_tree(events, name)


def convert_legacy(
    inputs: Sequence[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    progress: Progress | None = None,
    infos: Sequence[InputInfo] | None = None,
) -> ConversionResult:
    """Convert a legacy graph profile (and its execution profile) into a profile.pop at `output`.

    `inputs` is one combined document (``{"graphProfile": ..., "executionProfile": ...}``) or a
    graph profile plus, optionally, an execution profile, each JSON or CBOR. The output is
    written atomically; on any error nothing appears at `output`.
    """
    names = [os.fspath(p) for p in inputs]
    output = os.fspath(output)
    if not names:
        raise InvalidInputError("no input files given; expected a legacy graph profile")
    infos = list(infos) if infos is not None else [classify_input(n) for n in names]
    for info in infos:
        if info.kind not in LEGACY_KINDS:
            refuse(info)
    progress = progress or Progress(enabled=False)
    result = ConversionResult(output=output, inputs=names, kinds=[i.describe() for i in infos])
    extras = Extras()
    directory = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(directory):
        raise InvalidInputError(f"cannot write {output!r}: directory {directory!r} does not exist", output)
    with Spool(directory) as spool:
        graph = execution = None
        graph_name = execution_name = None
        graph_prefix: list = []
        execution_prefix: list = []
        progress.start("reading", input_size(names))
        for info in infos:
            document = read_document(info.path, info.encoding, spool, progress)
            if not isinstance(document, dict):
                raise InvalidInputError(f"{info.path!r}: $: expected an object, found {describe(document)}", info.path)
            if info.kind is InputKind.LEGACY_COMBINED:
                for key, value in document.items():
                    if key not in ("graphProfile", "executionProfile"):
                        extras.keep(SOURCE_WRAPPER, [key], value, unknown=True)
                documents: list[tuple[str | None, Any, InputKind]] = []
                if "graphProfile" in document:
                    documents.append(("graphProfile", document["graphProfile"], InputKind.LEGACY_GRAPH))
                if "executionProfile" in document:
                    documents.append(("executionProfile", document["executionProfile"], InputKind.LEGACY_EXECUTION))
            else:
                documents = [(None, document, info.kind)]
            for key, value, kind in documents:
                prefix = [key] if key else []
                if not isinstance(value, dict):
                    raise InvalidInputError(
                        f"{info.path!r}: {json_path(prefix)}: expected an object, found {describe(value)}", info.path
                    )
                if kind is InputKind.LEGACY_GRAPH:
                    if graph is not None:
                        raise InvalidInputError(
                            f"{info.path!r}: $: a second graph profile; {graph_name!r} is one "
                            f"already (convert one profile at a time)",
                            info.path,
                        )
                    graph, graph_name, graph_prefix = value, info.path, prefix
                else:
                    if execution is not None:
                        raise InvalidInputError(
                            f"{info.path!r}: $: a second execution profile; {execution_name!r} is one already",
                            info.path,
                        )
                    execution, execution_name, execution_prefix = value, info.path, prefix
        progress.finish()
        if graph is None:
            if execution_prefix:
                raise InvalidInputError(
                    f"{execution_name!r}: $.graphProfile: missing; the document holds only an executionProfile, "
                    f"which cannot be converted without its graph profile",
                    execution_name,
                )
            raise InvalidInputError(
                f"{execution_name!r}: $: an execution profile alone cannot be converted; give its graph profile too "
                f"(pva convert graph.json execution.json -o profile.pop)",
                execution_name,
            )
        assert graph_name is not None, "set with graph"
        unknown = check_document(graph, "graph_profile", name=graph_name, prefix=graph_prefix).unknown
        for parts, value in unknown:
            extras.keep("legacy-graph-profile", parts[len(graph_prefix) :], value, unknown=True)
        if execution is not None:
            assert execution_name is not None, "set with execution"
            unknown_x = check_document(
                execution, "execution_profile", name=execution_name, prefix=execution_prefix
            ).unknown
            for parts, value in unknown_x:
                extras.keep("legacy-execution-profile", parts[len(execution_prefix) :], value, unknown=True)
            unknown = unknown + unknown_x
        encoding = infos[0].encoding
        with ProfileWriter(output, producer="pva convert") as writer:
            writer.set_metadata(
                source_format=f"legacy Poplar v1 profile ({encoding.upper()})",
                legacy_combined="1" if graph_prefix else "0",
            )
            importer = LegacyImporter(
                writer,
                graph,
                execution,
                graph_name=graph_name,
                execution_name=execution_name,
                extras=extras,
                input_bytes=input_size(names),
            )
            importer.run()
            extras.write(writer)
    result.unknown_keys = extras.unknown
    if extras.unknown:
        examples = [json_path(parts) for parts, _ in unknown[:3]] if unknown else []
        example = f", e.g. {', '.join(examples)}" if examples else ""
        result.warnings.append(f"{extras.unknown} unknown key(s) kept in table extras{example}")
    return result
