"""The optional compiled parts (placeholder; the infrastructure branch supplies the real module)."""

from __future__ import annotations

from typing import Any

_enabled = True


def use_compiled(flag: bool) -> None:
    global _enabled
    _enabled = flag


def window_module() -> Any:
    if not _enabled:
        return None
    try:
        from engine import _window
    except ImportError:
        return None
    return _window
