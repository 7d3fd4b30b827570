"""pva: read accelerator profile reports (profile.pop) with the libpva object model.

>>> import pva                                                  # doctest: +SKIP
>>> report = pva.openReport("profile.pop")                      # doctest: +SKIP
>>> report.compilation.target.numTiles                          # doctest: +SKIP
1472
"""

from formats import __version__

from . import pva_core
from .analysis.chart_options import PLOT_KINDS
from .analysis.chart_options import Limits as ChartLimits
from .pva_core import *
from .pva_core import __all__ as _core

#: Analyses loaded when first used (name: module), so that importing pva stays cheap.
_LAZY = {
    "printProfileSummary": "pva.analysis.summary",
    "compare": "pva.analysis.compare",
    "html_report": "pva.analysis.html",
    "write_html": "pva.analysis.html",
    "write_plot": "pva.analysis.plots",
}

__all__ = [  # noqa: PLE0604 (_core is a list of names)
    "__version__", "pva_core", "printProfileSummary", "ChartLimits", "PLOT_KINDS", "compare", "html_report",
    "write_html", "write_plot", *_core,
]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pva' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
