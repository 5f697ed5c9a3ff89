"""A leader's orderly shutdown (ClusterTool ``shutdown``), read from the wire when no agent log says it.

Aeron's ClusterTool shutdown asks the leader's consensus module for a snapshot with termination: the
leader appends a ClusterActionRequest SNAPSHOT to its log and, in the same duty cycle, sends every
follower a TerminationPosition with the position that action ends at (`ConsensusModuleAgent`
``onClusterAction`` / ``SnapshotAction``).  A plain snapshot sends none.  With agent logs the
module's SNAPSHOT -> TERMINATING state change says which snapshot was the shutdown's (the
MemberStart's ``shutdownSnapshot``, `recorder.capture.agent_log_import`); without them the wire says
the same thing: the member's own TerminationPosition at the end position of a SNAPSHOT action it
appended in that life.  In g_leader_sigterm_reelection_rejoin, leader 2 appended SNAPSHOT actions
ending at 52704 and 54048 and sent TerminationPosition 54048 to both followers 0.4 ms after the
second: its second snapshot (index 1) was the shutdown's, as its agent log's SNAPSHOT -> TERMINATING
also says.

``shutdownSnapshot`` counts the snapshots the member's model takes in that life: every SNAPSHOT
action (flags 0) it met in its log, as leader (its own appends, ``out``) or follower (``in``), once
per log position.  A TerminationPosition with no SNAPSHOT action at its position on the wire
gives no snapshot (the index would be a guess): it is a ClusterTool abort (`aborts`), whose leader's
slow tick sent every member TerminationPosition at its log's end without a snapshot
(i_restart_all_one_member_behind: leader 0 at 19:26:37.859, 60480), the MemberStart's ``abortsNs``
as its agent log's ACTIVE -> TERMINATING gives it; the model's next slow tick acts on it.

Pure: events and the members' lives in, start fields out.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from formats.events import Event
from recorder.capture.publications import Life, lives_of

#: The event types this reads: what `shutdown_snapshots` needs of a capture's events.
TYPES = ("ClusterActionRequest", "TerminationPosition")


def _is_snapshot(event: Event) -> bool:
    fields = event.fields
    return fields.get("action") == "SNAPSHOT" and fields.get("flags") in (0, None, -2147483648)


def _terminations(events: Iterable[Event], lives: Sequence[Life]) -> Iterator[tuple[Life, list[Event], Event]]:
    """Each life whose member sent a TerminationPosition in it: the life, its messages of `TYPES` (in and out,
    in order), and the first TerminationPosition it sent."""
    relevant = [e for e in events if e.type in TYPES and e.dir in ("in", "out")]
    for life in lives:
        mine = [e for e in relevant if e.node == life.member and e.ts >= life.start_ns
                and (life.end_ns is None or e.ts <= life.end_ns)]
        termination = next((e for e in mine if e.type == "TerminationPosition" and e.dir == "out"), None)
        if termination is not None:
            yield life, mine, termination


def shutdown_snapshots(events: Iterable[Event], lives: Sequence[Life]) -> dict[tuple[int, int], tuple[int, str]]:
    """(member, life start) → (the index of the shutdown's snapshot in that life, the evidence), for each
    life whose member sent a TerminationPosition at the end of a SNAPSHOT action it met in that life."""
    out: dict[tuple[int, int], tuple[int, str]] = {}
    for life, mine, termination in _terminations(events, lives):
        position = termination.fields.get("logPosition")
        snapshots: list[int] = []
        for event in mine:
            if event.type != "ClusterActionRequest" or not _is_snapshot(event) or event.ts > termination.ts:
                continue
            at = event.fields.get("logPosition")
            if isinstance(at, int) and at not in snapshots:
                snapshots.append(at)
        if position not in snapshots:
            continue  # no snapshot action there on the wire: an abort (`aborts`), or its frame not captured
        index = snapshots.index(position)
        out[(life.member, life.start_ns)] = (index, (
            f"its TerminationPosition {position} to member {termination.peer} on the wire, at the end of the"
            f" SNAPSHOT action it met at {position} (snapshot {index} of that life): a ClusterTool shutdown"))
    return out


def aborts(events: Iterable[Event], lives: Sequence[Life]) -> dict[tuple[int, int], int]:
    """(member, life start) → when the member, as leader, sent TerminationPositions at a position no SNAPSHOT
    action it met in that life ends at: a ClusterTool abort (the leader's slow tick that saw the operator's
    ABORT toggle sends every member TerminationPosition at its log's end, without a snapshot)."""
    out: dict[tuple[int, int], int] = {}
    for life, mine, termination in _terminations(events, lives):
        position = termination.fields.get("logPosition")
        if not any(e.type == "ClusterActionRequest" and _is_snapshot(e) and e.fields.get("logPosition") == position
                   for e in mine):
            out[(life.member, life.start_ns)] = termination.ts
    return out


def with_shutdown_evidence(keyed: list[tuple], wire: Iterable[Event]) -> list[tuple]:
    """``keyed`` (sort key tuples ending with their event) with ``shutdownSnapshot`` set on each MemberStart
    whose life the ``wire`` events show ending in an orderly shutdown, and ``abortsNs`` on each whose life
    they show ending in an abort, where no agent log set them."""
    wire = list(wire)
    lives = lives_of(item[-1] for item in keyed)
    found = shutdown_snapshots(wire, lives)
    aborted = aborts(wire, lives)
    if not found and not aborted:
        return keyed
    out = []
    for item in keyed:
        start = item[-1]
        is_start = start.type == "MemberStart" and start.dir == "local"
        shutdown = found.get((start.node, start.ts)) if is_start else None
        abort = aborted.get((start.node, start.ts)) if is_start else None
        if abort is not None and not start.fields.get("abortsNs"):
            start = Event(ts=start.ts, node=start.node, dir=start.dir, peer=start.peer, channel=start.channel,
                          type=start.type, fields={**start.fields, "abortsNs": [abort]}, payload=start.payload,
                          extra={**(start.extra or {}), "abortsNs": "its TerminationPositions on the wire at a"
                                 " position no SNAPSHOT action ends at: a ClusterTool abort, seen by then"})
            item = (*item[:-1], start)
        if shutdown is not None and start.fields.get("shutdownSnapshot") is None:
            index, evidence = shutdown
            start = Event(ts=start.ts, node=start.node, dir=start.dir, peer=start.peer, channel=start.channel,
                          type=start.type, fields={**start.fields, "shutdownSnapshot": index},
                          payload=start.payload, extra={**(start.extra or {}), "shutdownSnapshot": evidence})
            item = (*item[:-1], start)
        out.append(item)
    return out
