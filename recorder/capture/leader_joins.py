"""When a new leader's join of its own log was over, read from the wire when no agent log says it.

In LEADER_INIT Aeron's leader calls `joinLogAsLeader`: it starts the log recording and waits for its
services to join the log, a blocking call during which the consensus module sends nothing.  Then
LEADER_READY's first duty cycle publishes the commit position of the new term
(`ConsensusModuleAgent.updateLeaderPosition`): the leader's first CommitPosition naming the term it
leads.  Before that its CommitPositions name the term its log was in (LEADER_LOG_REPLICATION,
LEADER_REPLAY), so the first one of the new term is the wire's sight of the join being over.  In
the six Aeron 1.47.3 captures it follows the agent log's LEADER_INIT -> LEADER_READY by 0.4 to 8.7 ms
(j_short_timeouts_leader_kill, leader 1: LEADER_READY at 19:27:45.9338 after a 59 ms join, its first
CommitPosition of term 2 at 19:27:45.9365), and once by 50 ms (h_five_members_leader_kill, leader 2's
first election, its publications not yet all connected).

The terms a member led are those its own NewLeadershipTerms name (``leadershipTermId``, with itself as
``leaderMemberId``).  Each MemberStart gets, as ``leaderJoinsReadyNs``, the times within that life; the
model's `joinLogAsLeader` blocks until the next one where no agent log gives the wait
(``leaderJoinWaitsNs``).  A leader with no follower (sends no NewLeadershipTerm) gets no evidence: its
join is at once, as before.

Pure: first sightings in, start fields out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from formats.event_columns import EventColumns
from formats.events import DIRECTIONS, Event
from recorder.capture.publications import Life, with_start_evidence


def first_sent(events: Iterable[Event]) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    """(member, term) → when the member first sent a NewLeadershipTerm leading that term, and when it first
    sent a CommitPosition naming that term."""
    led: dict[tuple[int, int], int] = {}
    committed: dict[tuple[int, int], int] = {}
    for event in events:
        if event.dir != "out":
            continue
        if event.type == "NewLeadershipTerm" and event.fields.get("leaderMemberId") == event.node:
            key = (event.node, event.fields.get("leadershipTermId"))
            if key not in led or event.ts < led[key]:
                led[key] = event.ts
        elif event.type == "CommitPosition":
            key = (event.node, event.fields.get("leadershipTermId"))
            if key not in committed or event.ts < committed[key]:
                committed[key] = event.ts
    return led, committed


def first_of_each_sent(rows: EventColumns, kept: np.ndarray, type_name: str, direction: str = "out") -> list[Event]:
    """The first of each distinct ``type_name`` message each member sent (or, ``direction`` "in", received):
    one `Event` per member and entry, at its earliest time; what `first_sent` and the sessions' leaders
    and terms need, without an `Event` for every resend."""
    found = rows.rows_of_type(type_name)
    found = found[kept[found] & (rows.dir[found] == DIRECTIONS.index(direction))]
    if not len(found):
        return []
    found = found[np.lexsort((rows.ts[found], rows.entry[found], rows.node[found]))]
    keys = np.stack([rows.node[found].astype(np.int64), rows.entry[found].astype(np.int64)], axis=1)
    first = np.concatenate([[True], np.any(keys[1:] != keys[:-1], axis=1)])
    return [rows.event(int(r)) for r in found[first]]


def first_sent_in_columns(rows: EventColumns, kept: np.ndarray, ts: np.ndarray,
                          led_by: list[Event] | None = None
                          ) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    """`first_sent` on a capture's columns (``kept``: the rows still in; ``ts``: their times, which for what
    a member sent are the captured ones; ``led_by``: `first_of_each_sent` of the NewLeadershipTerms)."""
    out_dir = DIRECTIONS.index("out")
    led, _ = first_sent(led_by if led_by is not None else first_of_each_sent(rows, kept, "NewLeadershipTerm"))
    committed: dict[tuple[int, int], int] = {}
    found = rows.rows_of_type("CommitPosition")
    found = found[kept[found] & (rows.dir[found] == out_dir)]
    if len(found):
        entries, inverse = np.unique(rows.entry[found], return_inverse=True)
        terms = np.array([rows.entries.fields[int(e)].get("leadershipTermId") for e in entries], dtype=np.int64)
        nodes = rows.node[found].astype(np.int64)
        when = ts[found]
        keys = np.stack([nodes, terms[inverse]], axis=1)
        order = np.lexsort((when, keys[:, 1], keys[:, 0]))
        keys, when = keys[order], when[order]
        first = np.concatenate([[True], np.any(keys[1:] != keys[:-1], axis=1)])
        committed = {(int(n), int(t)): int(at) for (n, t), at in zip(keys[first], when[first], strict=True)}
    return led, committed


def joins_over(led: Mapping[tuple[int, int], int], committed: Mapping[tuple[int, int], int]
               ) -> dict[int, list[int]]:
    """member → when each of its leader joins was over (its first CommitPosition of each term it led), in order."""
    out: dict[int, list[int]] = {}
    for (member, term), since in led.items():
        at = committed.get((member, term))
        if at is not None and at >= since:
            out.setdefault(member, []).append(at)
    return {member: sorted(times) for member, times in sorted(out.items())}


def with_leader_join_evidence(keyed: list[tuple], joins: Mapping[int, list[int]]) -> list[tuple]:
    """``keyed`` (sort key tuples ending with their event) with ``leaderJoinsReadyNs`` on each MemberStart
    whose life the ``joins`` fall in, where no agent log gave the joins' waits (``leaderJoinWaitsNs``)."""
    if not joins:
        return keyed

    def find(start: Event, life: Life) -> list[int] | None:
        if start.fields.get("leaderJoinWaitsNs"):
            return None
        return [at for at in joins.get(start.node, ()) if at >= life.start_ns
                and (life.end_ns is None or at <= life.end_ns)]

    return with_start_evidence(keyed, "leaderJoinsReadyNs", "its first CommitPosition of each term it led"
                               " (LEADER_READY's first), on the wire", (), find)
