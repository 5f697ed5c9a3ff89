"""Shared rendering helpers: the one place that decides where output goes.

`stdout` and `stderr` are rich consoles made when first used (a module ``__getattr__``): a command that
writes no rich output, ``recount replay --json`` say, does not import rich at all (10-15 ms of its start)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def _width() -> int | None:
    """The terminal's width; when stdout is a pipe or a file, wide enough for the summary tables
    (rich would otherwise assume 80 columns and truncate them).  COLUMNS still wins when set."""
    if os.environ.get("COLUMNS") or sys.stdout.isatty():
        return None
    return 160


def _console(name: str) -> Any:
    """``stdout``: tables, timelines and summaries for people; ``stderr``: progress, warnings and anything that
    must not mix with --json on stdout.  Each made once, when first asked for."""
    console = globals().get(name)
    if console is None:
        from rich.console import Console

        if name == "stdout":
            console = Console(highlight=False, soft_wrap=True, width=_width())
        else:
            console = Console(stderr=True, highlight=False, soft_wrap=True)
        globals()[name] = console
    return console


def __getattr__(name: str) -> Any:
    if name in ("stdout", "stderr"):
        return _console(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def print_json(document: Any) -> None:
    """One JSON document on stdout, keys in the order given (stable output for scripts)."""
    sys.stdout.write(json.dumps(document, separators=(",", ":"), ensure_ascii=False))
    sys.stdout.write("\n")


def print_json_line(record: Any) -> None:
    sys.stdout.write(json.dumps(record, separators=(",", ":"), ensure_ascii=False))
    sys.stdout.write("\n")


def warn(message: str) -> None:
    _console("stderr").print(f"[yellow]warning:[/yellow] {message}", markup=True)
