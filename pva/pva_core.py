"""Every class of the object model in one namespace, as libpva's compiled `pva.pva_core`.

Clients write both `pva.Program.Type.X` and `pva.pva_core.Program.Type.X`.
"""

from . import tracing  # noqa: F401  (binds pva.tracing, the recording API)
from .compilation import *  # noqa: F403
from .compilation import __all__ as _compilation
from .debug import *  # noqa: F403
from .debug import __all__ as _debug
from .errors import *  # noqa: F403
from .errors import __all__ as _errors
from .execution import *  # noqa: F403
from .execution import __all__ as _execution
from .liveness import *  # noqa: F403
from .liveness import __all__ as _liveness
from .model_errors import *  # noqa: F403
from .model_errors import __all__ as _model_errors
from .operations import *  # noqa: F403
from .operations import __all__ as _operations
from .programs import *  # noqa: F403
from .programs import __all__ as _programs
from .report import *  # noqa: F403
from .report import __all__ as _report
from .tile_memory import *  # noqa: F403
from .tile_memory import __all__ as _tile_memory
from .trace import *  # noqa: F403
from .trace import __all__ as _trace
from .variables import *  # noqa: F403
from .variables import __all__ as _variables

__all__ = [
    *_compilation,
    *_debug,
    *_errors,
    *_execution,
    *_liveness,
    *_model_errors,
    *_operations,
    *_programs,
    *_report,
    *_tile_memory,
    *_trace,
    *_variables,
]
