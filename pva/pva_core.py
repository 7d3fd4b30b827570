"""Every class of the object model in one namespace, as libpva's compiled `pva.pva_core`.

Clients write both `pva.Program.Type.X` and `pva.pva_core.Program.Type.X`.
"""

from .compilation import *  # noqa: F401,F403
from .compilation import __all__ as _compilation
from .errors import *  # noqa: F401,F403
from .errors import __all__ as _errors
from .execution import *  # noqa: F401,F403
from .execution import __all__ as _execution
from .programs import *  # noqa: F401,F403
from .programs import __all__ as _programs
from .report import *  # noqa: F401,F403
from .report import __all__ as _report

__all__ = [*_compilation, *_errors, *_execution, *_programs, *_report]
