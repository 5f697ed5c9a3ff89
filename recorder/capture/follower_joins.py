"""When a follower's join of its leader's log was over, read from the wire when no agent log says it.

In FOLLOWER_LOG_AWAIT (and FOLLOWER_CATCHUP_AWAIT) Aeron's follower, once its driver has the image of
the leader's log, calls `tryJoinLogAsFollower` until its archive's recording counter for the image is
there, then waits for its services to join (`awaitServicesReady`); then FOLLOWER_READY (or
FOLLOWER_CATCHUP) sends the leader an AppendPosition at once.  The follower sends its leader nothing
else between the image and the join, so its first AppendPosition to that leader after the image is the
wire's sight of the join being over.  In the six Aeron 1.47.3 captures it follows the agent log's
FOLLOWER_LOG_AWAIT -> FOLLOWER_READY by 0.4 to 11 ms.  A follower that never sent one while that life
ran never joined: in h_five_members_leader_kill member 4 had the image of leader 1's term-1 log at
19:23:59.36 but its archive never recorded it, FOLLOWER_LOG_AWAIT timed out at 19:24:07.51 (its agent
log), and no AppendPosition went to member 1 meanwhile.

Each MemberStart without an agent log gets, as ``followerJoinsNs``, a 'never' (nulls) for each image of
a leader's log (`recorder.capture.publications`' ``logImagesNs``; a session that a NewLeadershipTerm
names, with its leader) after which the life shows no AppendPosition to that leader before its next
image or its end: the recording's (FOLLOWER_LOG_AWAIT times out, as member 4's did), or the services'
when the member, alive, sent no consensus message at all for the leader heartbeat timeout after the
image (blocked in `awaitServicesReady`: member 3 of the same capture, silent 90 s until killed at
19:25:29).
A join the wire shows over gets the image's time as the recording counter's (the archive records
what it has from the join position), the AppendPosition's as the services' ack (what the module then
does happens then), and as the archive's recorder start either the same or, where that first
AppendPosition reported no more than the position its CatchupPosition asked the catch-up from, when its
AppendPositions first moved: f_follower_kill_rejoin_catchup's rejoining member 0 reported 8320, its
join position, first (its agent log: recorder 1.6 ms after the services), j_short_timeouts_leader_kill's
member 0 the whole catch-up (its recorder 8 ms before its services).  Without these, the model joined
at the image: j's member 0 60 ms early.

Pure: first sightings in, start fields out.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from formats.events import Event
from recorder.capture.publications import Life, with_start_evidence

#: `aeron.cluster.leader.heartbeat.timeout`'s default: how long FOLLOWER_LOG_AWAIT waits for the join.
LEADER_HEARTBEAT_TIMEOUT_NS = 10_000_000_000
HEARTBEAT_TIMEOUT = "aeron.cluster.leader.heartbeat.timeout"


def _never(start: Event, life, at: int, sends: Sequence[int]) -> list[None | int]:
    """[recording, services, recorder] of a join that never happened: the services' when the member, alive,
    sent no consensus message at all for the leader heartbeat timeout after the image (a module waiting
    in FOLLOWER_LOG_AWAIT would have timed out into an election and canvassed; a silent one was blocked
    in `awaitServicesReady`), else the recording's."""
    config = start.fields.get("config") or {}
    timeout = config.get(HEARTBEAT_TIMEOUT)
    timeout = timeout if isinstance(timeout, int) and timeout > 0 else LEADER_HEARTBEAT_TIMEOUT_NS
    index = bisect_left(sends, at)
    silent_until = sends[index] if index < len(sends) else life.end_ns
    if life.end_ns is not None and silent_until is not None and silent_until > at + timeout \
            and life.end_ns > at + timeout:
        return [at, None, None]
    return [None, None, None]


def _recorder_start(positions: np.ndarray, catchups: Sequence[tuple[int, int]], member: int, at: int, sent: int) -> int:
    """When the follower's archive began recording the image it joined at ``sent``: then, if its first
    AppendPosition after the join reported more than the catch-up's join position (the position its
    last CatchupPosition before the image asked from), else when its AppendPositions first moved."""
    mine = positions[(positions[:, 1] == member) & (positions[:, 0] >= sent)]
    mine = mine[np.argsort(mine[:, 0], kind="stable")]
    joined_at = next((position for ts, position in reversed(catchups) if ts < at), None)
    if not len(mine) or joined_at is None or int(mine[0, 3]) > joined_at:
        return sent
    moved = mine[mine[:, 3] > mine[0, 3]]
    return int(moved[0, 0]) if len(moved) else sent


def catchup_positions(events: Iterable[Event]) -> dict[int, list[tuple[int, int]]]:
    """member → (when, logPosition) of each CatchupPosition it sent, in order."""
    out: dict[int, list[tuple[int, int]]] = {}
    for event in events:
        if event.type == "CatchupPosition" and event.dir == "out":
            out.setdefault(event.node, []).append((event.ts, event.fields.get("logPosition", -1)))
    return {member: sorted(found) for member, found in out.items()}


def consensus_sends(events: Iterable[Event]) -> dict[int, list[int]]:
    """member → when it sent any consensus message, in order."""
    out: dict[int, list[int]] = {}
    for event in events:
        if event.dir == "out" and event.channel == "consensus":
            out.setdefault(event.node, []).append(event.ts)
    return {member: sorted(times) for member, times in out.items()}


def leaders_of_sessions(events: Iterable[Event]) -> dict[int, int]:
    """log session id → its leader, as the leaders' own NewLeadershipTerms name them."""
    out: dict[int, int] = {}
    for event in events:
        if event.type == "NewLeadershipTerm" and event.dir == "out" and event.fields.get("leaderMemberId") == event.node:
            session = event.fields.get("logSessionId")
            if isinstance(session, int):
                out.setdefault(session, event.node)
    return out


def append_positions(events: Iterable[Event]) -> dict[tuple[int, int], list[int]]:
    """(member, leader) → when the member sent that leader an AppendPosition, in order."""
    out: dict[tuple[int, int], list[int]] = {}
    for event in events:
        if event.type == "AppendPosition" and event.dir == "out" and event.peer is not None:
            out.setdefault((event.node, event.peer), []).append(event.ts)
    return {key: sorted(times) for key, times in out.items()}


def _first_append(appends: Mapping[tuple[int, int], Sequence[int]] | np.ndarray, member: int, leader: int,
                  at: int) -> int | None:
    """When ``member`` first sent ``leader`` an AppendPosition from ``at`` on; ``appends``: `append_positions`,
    or `recorder.capture.replications.append_rows` (a capture's columns: no per-pair lists made)."""
    if isinstance(appends, np.ndarray):
        found = appends[(appends[:, 1] == member) & (appends[:, 5] == leader) & (appends[:, 0] >= at), 0]
        return int(found.min()) if len(found) else None
    times = appends.get((member, leader), ())
    index = bisect_left(times, at)
    return times[index] if index < len(times) else None


def with_follower_join_evidence(keyed: list[tuple], leaders: Mapping[int, int],
                                appends: Mapping[tuple[int, int], Sequence[int]] | np.ndarray,
                                sends: Mapping[int, Sequence[int]], skip: Iterable[int] = (),
                                positions: np.ndarray | None = None,
                                catchups: Mapping[int, Sequence[tuple[int, int]]] | None = None) -> list[tuple]:
    """``keyed`` (sort key tuples ending with their event) with ``followerJoinsNs`` on each MemberStart that
    has ``logImagesNs`` (so after `with_publication_evidence`), unless its member is in ``skip`` (its agent
    log gave the joins) or the start has them already.  ``sends``: member → when it sent any consensus
    message; ``positions``: `recorder.capture.replications.append_rows`; ``catchups``: `catchup_positions`
    (without ``positions``, only the joins that never happened)."""
    catchups = catchups or {}

    def find(start: Event, life: Life) -> list[list[int | None]] | None:
        images = start.fields.get("logImagesNs")
        if not images or start.fields.get("followerJoinsNs"):
            return None
        joins = []
        ordered = sorted((at, session) for session, at in images)
        for number, (at, session) in enumerate(ordered):
            leader = leaders.get(session)
            if leader is None or leader == start.node:
                continue
            until = ordered[number + 1][0] if number + 1 < len(ordered) else life.end_ns
            sent = _first_append(appends, start.node, leader, at)
            if sent is None or (until is not None and sent > until):
                joins.append([session, *_never(start, life, at, sends.get(start.node, ()))])
            elif positions is not None:
                joins.append([session, at, sent, _recorder_start(positions, catchups.get(start.node, ()),
                                                                 start.node, at, sent)])
        return joins

    return with_start_evidence(keyed, "followerJoinsNs", "its first AppendPosition to the log's leader after the"
                               " image, on the wire (null: none in that life)", skip, find)
