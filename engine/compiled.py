"""The engine's optional compiled module, and the switch that keeps the engine on pure Python.

`engine._window` is the steady-state lane's hot loop (`engine.steady`) compiled with Cython from
`engine/_window.pyx` when the install had a C compiler (setup.py).  It gives the same trace, byte
for byte, as the pure-Python path, which always stays: without a compiler the install skips the
module and `window_module()` answers None.

The engine reads no environment variable or file to choose: whoever drives it (a test comparing the
two paths, a benchmark) calls `use_compiled(False)`.
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

_enabled = True


def use_compiled(flag: bool) -> bool:
    """Let the engine use its compiled module (True, the default) or keep it on pure Python (False).

    Returns the setting it replaces, so that a caller can put it back."""
    global _enabled
    previous, _enabled = _enabled, flag
    return previous


def window_module() -> ModuleType | None:
    """`engine._window` when it is built and allowed (`use_compiled`), else None: use the pure-Python path."""
    if not _enabled:
        return None
    try:
        return import_module("engine._window")
    except ImportError:
        return None
