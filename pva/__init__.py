"""pva: read accelerator profile reports (profile.pop) with the libpva object model.

>>> import pva                                                  # doctest: +SKIP
>>> report = pva.openReport("profile.pop")                      # doctest: +SKIP
>>> report.compilation.target.numTiles                          # doctest: +SKIP
1472

Names are loaded when first used, so `import pva` (and every `pva` command) starts quickly.
"""

from __future__ import annotations

import importlib

from formats import __version__ as __version__

#: Names loaded from their own module, (module, attribute) of each: the analyses, and `openReport`,
#: which needs only the report and compilation modules, not all of pva_core.
_ELSEWHERE = {
    "openReport": (".report", "openReport"),
    "printProfileSummary": (".analysis.summary", "printProfileSummary"),
    "compare": (".analysis.compare", "compare"),
    "html_report": (".analysis.html", "html_report"),
    "write_html": (".analysis.html", "write_html"),
    "write_plot": (".analysis.plots", "write_plot"),
    "ChartLimits": (".analysis.chart_options", "Limits"),
    "PLOT_KINDS": (".analysis.chart_options", "PLOT_KINDS"),
    "format_size": (".analysis.chart_options", "format_size"),
}
#: Submodules reachable as attributes (`pva.pva_core.Program`, `pva.tracing.span`).
_SUBMODULES = {"pva_core", "tracing", "analysis", "cli", "dataset", "files"}


def _core():
    return importlib.import_module(".pva_core", __name__)


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name == "__all__":
        return list(dict.fromkeys(["__version__", "pva_core", *_ELSEWHERE, *_core().__all__]))
    if name in _ELSEWHERE:
        module, attribute = _ELSEWHERE[name]
        value = getattr(importlib.import_module(module, __name__), attribute)
    else:
        try:
            value = getattr(_core(), name)
        except AttributeError:
            raise AttributeError(f"module 'pva' has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__getattr__("__all__"), *_SUBMODULES})
