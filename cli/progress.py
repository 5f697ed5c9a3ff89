"""Progress on stderr for the phases that can take more than a second.

Shown when stderr is a terminal, or when asked (``recount --progress ...`` or ``RECOUNT_PROGRESS=1``,
e.g. under a CI log); never otherwise, so that pipes and files get only results.  ``--no-progress``
(or ``RECOUNT_PROGRESS=0``) silences it on a terminal.

`phase(label)` is a spinner with the elapsed time, for work whose size is not known in advance;
`over_time(label, first_ns, last_ns)` is a bar over the recording's own time, advanced with the
``ts`` of each record a replay produces.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: Set by the ``--progress/--no-progress`` option of `cli.app`; None: decide by the terminal.
requested: bool | None = None


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


@contextmanager
def phase(label: str) -> Iterator[Callable[[str], None]]:
    """A spinner naming ``label`` while the block runs; the callable it yields renames the phase."""
    if not enabled():
        yield lambda _label: None
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
