"""`pva convert`'s engine: detect what the inputs are and write the matching pva file atomically.

* legacy Poplar v1 graph/execution profiles (JSON or CBOR) -> profile.pop
* a Cerebras compile_report.txt -> profile.pop (kernels and their estimates)
* a Chrome trace event JSON file -> a pva trace file (read with pva.openTrace)
* printProfileSummary text with a Target section -> profile.pop (target, graph counts, vertex
  types, and every summary value in extras)

Other generations of Poplar profiles (pre-2019, v2 "experimental", v3 SQLite) are recognised and
refused with a message that names them.

>>> from formats.convert import convert                             # doctest: +SKIP
>>> convert(["graph.json", "execution.json"], "profile.pop").kinds   # doctest: +SKIP
['a legacy Poplar graph profile (v1) in JSON', 'a legacy Poplar execution profile (v1) in JSON']
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from .detect import InputKind, classify_input
from .errors import InvalidInputError
from .legacy import LEGACY_KINDS, ConversionResult, convert_legacy, refuse
from .progress import Progress


def convert(
    inputs: Sequence[str | os.PathLike[str]], output: str | os.PathLike[str], *, progress: Progress | None = None
) -> ConversionResult:
    """Convert `inputs` (whose kind is detected) into `output`; nothing is written on error."""
    names = [os.fspath(p) for p in inputs]
    output = os.fspath(output)
    if not names:
        raise InvalidInputError("no input files given")
    if any(os.path.abspath(n) == os.path.abspath(output) for n in names):
        raise InvalidInputError(f"{output!r}: the output would overwrite an input; choose another output name", output)
    infos = [classify_input(n) for n in names]
    kinds = {info.kind for info in infos}
    if kinds <= set(LEGACY_KINDS):
        return convert_legacy(names, output, progress=progress, infos=infos)
    for info in infos:
        if info.kind not in (
            InputKind.CHROME_TRACE,
            InputKind.CEREBRAS_COMPILE_REPORT,
            InputKind.POPLAR_TEXT_SUMMARY,
            *LEGACY_KINDS,
        ):
            refuse(info)
    if len(infos) != 1:
        described = "; ".join(f"{i.path!r} is {i.describe()}" for i in infos)
        raise InvalidInputError(
            f"convert one Chrome trace or compile report at a time, or legacy profiles together; got {described}"
        )
    info = infos[0]
    result = ConversionResult(output=output, inputs=names, kinds=[info.describe()])
    if info.kind is InputKind.POPLAR_TEXT_SUMMARY:
        from .legacy.text_summary import convert_text_summary

        convert_text_summary(info.path, output)
        result.warnings.append(
            "a text summary has totals, not per-tile values: the report holds the target, the "
            "graph counts and vertex types, the device memory totals in metadata "
            "memory_totals, and every summary value in table extras"
        )
        return result
    if info.kind is InputKind.CEREBRAS_COMPILE_REPORT:
        from .cerebras.importer import convert_cerebras

        report = convert_cerebras(info.path, output)
        if not report.kernels:
            result.warnings.append("the compile report has no per-kernel table; only the overall estimate was kept")
        return result
    from .chrome.importer import import_chrome_trace

    stats = import_chrome_trace(info.path, output, progress=progress)
    result.warnings.extend(stats.warnings)
    return result
