"""Progress on stderr for the phases that can take more than a second.

Shown when stderr is a terminal, or when asked (``recount --progress ...`` or ``RECOUNT_PROGRESS=1``,
e.g. under a CI log, where it is a plain line now and then); never otherwise, so that pipes and files
get only results.  ``--no-progress``
(or ``RECOUNT_PROGRESS=0``) silences it on a terminal.

`phase(label)` is a spinner with the elapsed time, for work whose size is not known in advance;
`over_time(label, first_ns, last_ns)` is a bar over the recording's own time, advanced with the
``ts`` of each record a replay produces.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

#: Set by the ``--progress/--no-progress`` option of `cli.app`; None: decide by the terminal.
requested: bool | None = None
#: Asked for without a terminal, progress is a line at most this often.
LINE_EVERY_S = 1.0


def enabled() -> bool:
    if requested is not None:
        return requested
    env = os.environ.get("RECOUNT_PROGRESS")
    if env is not None:
        return env.strip().lower() not in ("", "0", "false", "no")
    return sys.stderr.isatty()


def _progress(*columns):
    from rich.progress import Progress

    from cli import output

    # Transient: the bar goes away when the phase is done; refreshed by its own thread, so a phase
    # that never reports (a table build) still shows its elapsed time.
    return Progress(*columns, console=output.stderr, transient=True, refresh_per_second=4)


def _lines() -> bool:
    """Asked for while stderr is no terminal (a CI log): plain lines, not a live display."""
    return not sys.stderr.isatty()


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


@contextmanager
def _phase_lines(label: str) -> Iterator[Callable[[str], None]]:
    started = time.monotonic()
    current = [label]

    def rename(new: str) -> None:
        _say(f"{current[0]}: {time.monotonic() - started:.1f} s")
        current[0] = new

    _say(f"{label} ...")
    yield rename
    _say(f"{current[0]}: {time.monotonic() - started:.1f} s")


@contextmanager
def phase(label: str) -> Iterator[Callable[[str], None]]:
    """A spinner naming ``label`` while the block runs; the callable it yields renames the phase."""
    if not enabled():
        yield lambda _label: None
        return
    if _lines():
        with _phase_lines(label) as rename:
            yield rename
        return
    from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

    with _progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn()) as bar:
        task = bar.add_task(label, total=None, start=True)
        yield lambda new: bar.update(task, description=new)


@contextmanager
def over_time(label: str, first_ns: int, last_ns: int) -> Iterator[Callable[[int], None]]:
    """A bar from ``first_ns`` to ``last_ns`` (recording time); the callable takes the ``ts`` reached."""
    if not enabled() or last_ns <= first_ns:
        yield lambda _ts: None
        return
    if _lines():
        said = [time.monotonic()]

        def say(ts: int) -> None:
            now = time.monotonic()
            if now - said[0] >= LINE_EVERY_S:
                said[0] = now
                _say(f"{label}: {100 * (min(ts, last_ns) - first_ns) / (last_ns - first_ns):.0f} %")

        _say(f"{label} ...")
        yield say
        _say(f"{label}: done")
        return
    from rich.progress import (
        BarColumn,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn(label), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(), TimeRemainingColumn())
    with _progress(*columns) as bar:
        task = bar.add_task(label, total=last_ns - first_ns)
        reached = [first_ns]

        def advance(ts: int) -> None:
            if ts > reached[0]:
                bar.update(task, completed=min(ts, last_ns) - first_ns)
                reached[0] = ts

        yield advance


def tracked(items: Iterable[T], label: str, first_ns: int, last_ns: int, ts_of: Callable[[T], int | None], *,
            every: int = 256) -> Iterator[T]:
    """``items`` as they are, advancing an `over_time` bar by the ``ts_of`` of every ``every``-th item."""
    if not enabled():
        yield from items
        return
    with over_time(label, first_ns, last_ns) as advance:
        for count, item in enumerate(items):
            if count % every == 0:
                ts = ts_of(item)
                if ts is not None:
                    advance(ts)
            yield item


def record_ts(record: Any) -> int | None:
    """A trace record's ``ts`` (a dict, its JSON line, or a steady-state lane item: ``(template, values)``, the
    time first among the values)."""
    if type(record) is tuple:
        return record[1][0]
    if isinstance(record, str):
        start = record.find('"ts":')
        if start < 0:
            return None
        digits = record[start + 5:start + 30].split(",", 1)[0].split("}", 1)[0]
        return int(digits) if digits.lstrip("-").isdigit() else None
    ts = record.get("ts") if isinstance(record, dict) else None
    return ts if isinstance(ts, int) else None
