"""pva: read accelerator profile reports (profile.pop) with the libpva object model.

>>> import pva                                                  # doctest: +SKIP
>>> report = pva.openReport("profile.pop")                      # doctest: +SKIP
>>> report.compilation.target.numTiles                          # doctest: +SKIP
1472
"""

from formats import __version__

from . import pva_core
from .pva_core import *  # noqa: F401,F403
from .pva_core import __all__ as _core
from .analysis.summary import printProfileSummary

__all__ = ["__version__", "pva_core", "printProfileSummary", *_core]
