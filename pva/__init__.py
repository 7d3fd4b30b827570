"""pva: read accelerator profile reports (profile.pop) with the libpva object model.

>>> import pva                                                  # doctest: +SKIP
>>> report = pva.openReport("profile.pop")                      # doctest: +SKIP
>>> report.compilation.target.numTiles                          # doctest: +SKIP
1472

Names are loaded when first used, so `import pva` (and every `pva` command) starts quickly.
"""

from __future__ import annotations

import importlib

from formats import __version__

#: Names defined outside pva_core, and the module that defines each.
_ELSEWHERE = {
    "printProfileSummary": ".analysis.summary",
}
#: Submodules reachable as attributes (`pva.pva_core.Program`, `pva.tracing.span`).
_SUBMODULES = {"pva_core", "tracing", "analysis", "cli"}


def _core():
    return importlib.import_module(".pva_core", __name__)


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name == "__all__":
        return ["__version__", "pva_core", *_ELSEWHERE, *_core().__all__]
    module = importlib.import_module(_ELSEWHERE[name], __name__) if name in _ELSEWHERE else _core()
    try:
        value = getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module 'pva' has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__getattr__("__all__"), *_SUBMODULES})
