"""Shared rendering helpers: the one place that decides where output goes."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

#: Tables, timelines and summaries for people.
stdout = Console(highlight=False, soft_wrap=True)
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
