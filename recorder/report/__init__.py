"""Results a user can hand on: an incident as one HTML page, or as a Perfetto (Chrome trace-event) trace.

Theory of operation: `build_incident` runs the node replay of `engine.replay` — the same
`ReplaySession` that `recount replay` drives, with the same options — over a recording's events,
keeps every trace record, and notes each member's node-state.dat and recording.log (its
``inspect()``) just after its first start and at the end.  `recorder.report.model.build_model`
shapes that into an `Incident`; `recorder.report.html.render_html` and
`recorder.report.perfetto.trace_document` render it.  Building and rendering are pure (no I/O,
no clock): the same recording and options give the same bytes.  This package may import
`formats` and `engine`; only `cli` imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from engine.replay import DEFAULT_TOLERANCE_NS, ReplaySession
from formats.events import Event
from recorder.report.model import Incident, build_model

_FILE_KEYS = ("nodeState", "recordingLog")
#: The trace records the model is built from; the sends, appends and draws (most of a trace) are not
#: kept, so a long capture's report does not hold its whole trace in memory.
KEPT_KINDS = frozenset({"state", "role", "election", "divergence", "invariant", "summary"})
#: Events between two calls of ``on_progress``.
PROGRESS_EVERY = 4096


def build_incident(
    events: Iterable[Event],
    *,
    source: str,
    refs: Sequence[Any] | None = None,
    ref_kind: str = "seq",
    model: str = "1.47.3",
    seed: int | None = None,
    nomination: str = "auto",
    tolerance_ns: int = DEFAULT_TOLERANCE_NS,
    on_progress: Callable[[int, int], None] | None = None,
) -> Incident:
    """Node-replay ``events`` and return the `Incident` a report or a trace is drawn from.
    ``on_progress(done, total)`` is called every `PROGRESS_EVERY` events replayed."""
    events = list(events)
    session = ReplaySession(events, refs=refs, ref_kind=ref_kind, model=model, seed=seed,
                            nomination=nomination, tolerance_ns=tolerance_ns)
    records: list[dict[str, Any]] = []
    files_start: dict[int, dict[str, Any]] = {}
    total = len(session)
    for k in range(total):
        event, _ = session.event(k)
        records.extend(r for r in session.step() if r["kind"] in KEPT_KINDS)
        if on_progress is not None and k % PROGRESS_EVERY == 0:
            on_progress(k, total)
        if event.type == "MemberStart" and event.dir == "local" and event.node not in files_start:
            view = session.views().get(event.node)
            if view is not None:
                state = view.to_json()
                files_start[event.node] = {key: state.get(key) for key in _FILE_KEYS}
    records.extend(r for r in session.finish() if r["kind"] in KEPT_KINDS)
    if on_progress is not None:
        on_progress(total, total)
    files_end = {
        member: {key: state.get(key) for key in _FILE_KEYS}
        for member, state in ((member, view.to_json()) for member, view in session.views().items())
    }
    return build_model(events, records, source=source, refs=session.refs, files_start=files_start, files_end=files_end)


__all__ = ["Incident", "build_incident"]
