"""Shared rendering helpers: the one place that decides where output goes."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from rich.console import Console


def _width() -> int | None:
    """The terminal's width; when stdout is a pipe or a file, wide enough for the summary tables
    (rich would otherwise assume 80 columns and truncate them).  COLUMNS still wins when set."""
    if os.environ.get("COLUMNS") or sys.stdout.isatty():
        return None
    return 160


#: Tables, timelines and summaries for people.
stdout = Console(highlight=False, soft_wrap=True, width=_width())
#: Progress, warnings and anything that must not mix with --json on stdout.
stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def print_json(document: Any) -> None:
    """One JSON document on stdout, keys in the order given (stable output for scripts)."""
    sys.stdout.write(json.dumps(document, separators=(",", ":"), ensure_ascii=False))
    sys.stdout.write("\n")


def print_json_line(record: Any) -> None:
    sys.stdout.write(json.dumps(record, separators=(",", ":"), ensure_ascii=False))
    sys.stdout.write("\n")


def warn(message: str) -> None:
    stderr.print(f"[yellow]warning:[/yellow] {message}", markup=True)
