"""When a follower's replay of its own log was over, read from the wire when no agent log says it.

In an election a follower whose log holds more than its services have seen replays it into them from
its archive (FOLLOWER_REPLAY); then, if the leader is ahead, FOLLOWER_CATCHUP_INIT sends the leader a
CatchupPosition.  The follower sends nothing while it replays, so its CatchupPosition bounds the replay
that began after its consensus message before it.  With agent logs the replay's duration is known
(``logReplayDurationsNs``); without them the model took it as done at once: in
h_five_members_leader_kill member 3's restarted process replayed for 723 ms (FOLLOWER_REPLAY
19:25:40.272 -> FOLLOWER_CATCHUP_INIT .996, CatchupPosition at 41.017), and the model's CatchupPosition
went out 748 ms early.

Each MemberStart without an agent log gets, as ``logReplaysDoneNs``, [the member's consensus message
before each CatchupPosition it sent in that life, that CatchupPosition]; the model's follower replay
begun in between is done at the CatchupPosition (`engine.model.agent`).  A replay followed by no
catch-up (FOLLOWER_LOG_INIT) has no such bound and stays at once.

Pure: each member's consensus sends in, start fields out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from formats.events import Event
from recorder.capture.publications import Life, with_start_evidence


def replay_bounds(sends: Mapping[int, tuple[Sequence[int], Sequence[str]]]) -> dict[int, list[tuple[int, int]]]:
    """member → (its consensus message before each CatchupPosition, that CatchupPosition), in order;
    ``sends``: member → (when it sent each consensus message, in order; each one's type)."""
    out: dict[int, list[tuple[int, int]]] = {}
    for member, (times, types) in sends.items():
        catchup = np.asarray(types, dtype=object) == "CatchupPosition"
        found = np.flatnonzero(catchup[1:] & ~catchup[:-1]) + 1
        if len(found):
            out[member] = [(times[index - 1], times[index]) for index in found.tolist()]
    return out


def with_log_replay_evidence(keyed: list[tuple], bounds: Mapping[int, list[tuple[int, int]]],
                             skip: Iterable[int] = ()) -> list[tuple]:
    """``keyed`` (sort key tuples ending with their event) with ``logReplaysDoneNs`` on each MemberStart of
    a member not in ``skip`` (its agent log gave the replays' durations) whose life holds such bounds."""
    if not bounds:
        return keyed

    def find(start: Event, life: Life) -> list[list[int]] | None:
        if start.fields.get("logReplayDurationsNs"):
            return None
        return [[since, done] for since, done in bounds.get(start.node, ())
                if since >= life.start_ns and (life.end_ns is None or done <= life.end_ns)]

    return with_start_evidence(keyed, "logReplaysDoneNs", "each CatchupPosition it sent and its consensus message"
                               " before it, on the wire: a log replay between is done by then", skip, find)
