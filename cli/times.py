"""The one way recount shows a time: seconds with milliseconds from the first event, or UTC.

`recount replay`'s timeline, the TUI's event list, inspector, status bar and diff all use these, so a
time read in one place can be looked up in another.  Capture clocks are epoch nanoseconds; the engine
works in whole milliseconds, so milliseconds are the resolution shown.
"""

from __future__ import annotations

from datetime import UTC, datetime

MS = 1_000_000


def duration(ns: int) -> str:
    """``13.402s`` (``-0.250s`` when negative): a span of time, to the millisecond."""
    ms = int(ns) // MS if ns >= 0 else -((-int(ns)) // MS)
    sign = "-" if ms < 0 else ""
    return f"{sign}{abs(ms) // 1000}.{abs(ms) % 1000:03d}s"


def relative_time(ts: int | None, origin: int | None) -> str:
    """``+13.402s``: ``ts`` as seconds with milliseconds after ``origin`` (the first event)."""
    if ts is None or origin is None:
        return ""
    ns = int(ts) - int(origin)
    if ns < 0:
        text = duration(ns)
        return text if text.startswith("-") else "+" + text  # less than a millisecond before: +0.000s
    seconds, ms = divmod(ns // MS, 1000)  # `duration`'s digits, without its sign handling: a timeline's hot path
    return f"+{seconds}.{ms:03d}s"


def wall_time(ts: int | None) -> str:
    """``2026-11-23T10:12:01.123Z``: ``ts`` (epoch ns) as UTC."""
    if ts is None:
        return ""
    seconds, ns = divmod(int(ts), 1_000_000_000)
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{ns // MS:03d}Z"
