"""When each member's consensus publications could take an offer, from the status messages on the wire.

Aeron's publication takes an offer only while its driver has heard a receiver: before the first
status message of its receiver, and from the publication connection timeout (5 s by default,
`CONNECTION_TIMEOUT_NS`) after the last, the publisher limit is the sender position and every offer
is refused (NOT_CONNECTED); a status message with the end-of-stream flag (the receiver closed its
image cleanly) removes the receiver at once.  A member's sends to a peer that is down stop that
long after the peer's last status message: in j_short_timeouts_leader_kill, leader 1's
CommitPositions to the killed member 0 stop 5.0 s after member 0's last status message (19:27:41.30
→ 19:27:46.25), where the model, which took every offer, went on sending.

`publication_evidence` turns a capture's consensus publications (`DatagramDecoder.consensus_publications`)
into what a replay feeds each member: for each of its lives, the peers whose publication was
connected when the life's replay starts (the MemberStart's ``connectedPeers``: a consensus module
makes its publications while it starts, before its election begins), and a ``PublicationStatus``
event at each later change.  A publication belongs to the life of its sender that was running when
the capture first saw it.  A publication that carried messages before the first status message the
capture shows was connected from then (the capture began late).  A member none of whose
publications was ever answered gets no evidence at all (a capture without status messages): its
offers are all taken, as before.

The same status messages and publications say when the member's media driver answered it: the leader's
log publication was added when the capture first shows it (its SETUP: `addLogPublication` blocks the
consensus module until then; f_follower_kill_rejoin_catchup's member 2 waited 1.25 s for it, 19:21:04.84
-> 19:21:06.09), and a follower's driver had the image of the leader's log when its log or catch-up
endpoint first answered that session (FOLLOWER_LOG_AWAIT waits for it; in h_five_members_leader_kill,
members 3 and 4 never got the image of member 1's term-1 log and stayed there).  Each life's MemberStart
gets them as ``logPublicationsReadyNs`` (when each log publication it added was there) and
``logImagesNs`` ([log session id, when] for each image it had): with them, the model waits as the
member did (`engine.model.agent`), and without an image the capture never shows, FOLLOWER_LOG_AWAIT
times out as the real one did.

How far a sender got is read from captures only as its flow-control stalls
(`recorder.capture.flow_control`: the spans its sender sat at its receiver's window, on the
publication's ``stalls``), as ``senderStalled`` on the ``PublicationStatus`` events of that peer,
never as a position: the model's own sends differ from the real member's by a few heartbeats, so
their positions would not line up; the model holds its sender where its own publication stood when
the stall began (in h_five_members_leader_kill, leader 0's CommitPositions to the blocked member 3
waited in the publication from 19:25:11.90 to 19:25:39.93).  The simulator, whose publications are
exactly the model's, reports positions.

Pure: the decoder's findings and the members' lives in, events and start fields out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from formats.events import Event
from recorder.capture.datagrams import ConsensusPublicationSeen

#: `aeron.publication.connection.timeout`'s default: a publication with no status message for this
#: long has no receivers.
CONNECTION_TIMEOUT_NS = 5_000_000_000


@dataclass(frozen=True, slots=True)
class Life:
    """One process of a member: its replay starts at ``start_ns`` and its process ended at ``end_ns``
    (or the evidence of it did: the member's End; None: neither is known); ``since_ns``: when the
    previous process ended."""

    member: int
    start_ns: int
    end_ns: int | None
    since_ns: int | None


@dataclass(frozen=True, slots=True)
class LifeEvidence:
    """What one life is given: the peers connected at its start, and the later changes."""

    life: Life
    connected_peers: tuple[int, ...]
    changes: tuple[Event, ...]
    log_publications_ready: tuple[int, ...] = ()
    log_images: tuple[tuple[int, int], ...] = ()


def connected_spans(publication: ConsensusPublicationSeen, timeout_ns: int = CONNECTION_TIMEOUT_NS
                    ) -> list[tuple[int, int]]:
    """The (from, until) spans in which ``publication`` was connected, in time order."""
    spans: list[tuple[int, int]] = []
    start: int | None = None
    last: int | None = None
    messages = publication.status_messages
    first_data = publication.first_data_ns
    if first_data is not None and (not messages or first_data < messages[0][0]):
        start = last = first_data  # it took offers before the capture showed a status message
    for ts, end_of_stream in messages:
        if start is not None and last is not None and ts - last > timeout_ns:
            spans.append((start, last + timeout_ns))
            start = None
        if end_of_stream:
            if start is not None:
                spans.append((start, ts))
            start = last = None
            continue
        if start is None:
            start = ts
        last = ts
    if start is not None and last is not None:
        spans.append((start, last + timeout_ns))
    return spans


def publication_evidence(publications: Sequence[ConsensusPublicationSeen], lives: Iterable[Life],
                         timeout_ns: int = CONNECTION_TIMEOUT_NS, *,
                         log_publications: Mapping[tuple[int, int], int] | None = None,
                         log_images: Mapping[tuple[int, int], Sequence[int]] | None = None
                         ) -> dict[tuple[int, int], LifeEvidence]:
    """(member, life start) → its `LifeEvidence`, for every member with evidence (see the module docstring)."""
    answered = {p.sender for p in publications if p.status_messages}
    by_sender: dict[int, list[ConsensusPublicationSeen]] = {}
    for publication in publications:
        by_sender.setdefault(publication.sender, []).append(publication)
    out: dict[tuple[int, int], LifeEvidence] = {}
    for life in sorted(lives, key=lambda life: (life.member, life.start_ns)):
        if life.member not in answered:
            continue
        own = [p for p in by_sender.get(life.member, ())
               if (life.since_ns is None or p.first_seen_ns > life.since_ns)
               and (life.end_ns is None or p.first_seen_ns <= life.end_ns)]
        spans: dict[int, list[tuple[int, int]]] = {}
        stalls: dict[int, list[tuple[int, int | None]]] = {}
        for publication in own:
            spans.setdefault(publication.receiver, []).extend(connected_spans(publication, timeout_ns))
            stalls.setdefault(publication.receiver, []).extend(publication.stalls)
        connected = tuple(sorted(peer for peer, peer_spans in spans.items()
                                 if any(a <= life.start_ns < b for a, b in peer_spans)))
        changes = []
        for peer in sorted(spans):
            is_connected, stalled = peer in connected, False
            for ts, now_connected, now_stalled in _status_changes(_changes(spans[peer]), stalls[peer]):
                if ts <= life.start_ns or (life.end_ns is not None and ts >= life.end_ns):
                    continue
                if stalls[peer] and (now_connected, now_stalled) == (is_connected, stalled):
                    continue
                why = (_stall_evidence(peer, now_stalled) if now_stalled != stalled and now_connected == is_connected
                       else _evidence(now_connected, peer, ts))
                is_connected, stalled = now_connected, now_stalled
                fields = {"channel": "consensus", "connected": is_connected, "senderPosition": None}
                if stalled or stalls[peer]:
                    fields["senderStalled"] = stalled
                changes.append(Event(ts=ts, node=life.member, dir="local", peer=peer, channel="local",
                                     type="PublicationStatus", fields=fields, extra={"evidence": why}))
        changes.sort(key=lambda event: (event.ts, event.peer))
        ready = tuple(sorted(ts for (member, _), ts in (log_publications or {}).items()
                             if member == life.member and _within(life, ts)))
        images = []
        for (member, session), times in (log_images or {}).items():
            first = next((ts for ts in times if _within(life, ts)), None) if member == life.member else None
            if first is not None:
                images.append((session, first))
        images = tuple(sorted(images, key=lambda item: (item[1], item[0])))
        out[(life.member, life.start_ns)] = LifeEvidence(life, connected, tuple(changes), ready, images)
    return out


def _within(life: Life, ts: int) -> bool:
    """Did something the member's driver did at ``ts`` belong to this life's process?"""
    return (life.since_ns is None or ts > life.since_ns) and (life.end_ns is None or ts <= life.end_ns)


def _changes(spans: list[tuple[int, int]]) -> list[tuple[int, bool]]:
    """The union of ``spans`` as (time, connected) changes."""
    changes: list[tuple[int, bool]] = []
    end: int | None = None
    for start, until in sorted(spans):
        if end is not None and start <= end:
            end = max(end, until)
            continue
        if end is not None:
            changes.append((end, False))
        changes.append((start, True))
        end = until
    if end is not None:
        changes.append((end, False))
    return changes


def _status_changes(connected: list[tuple[int, bool]], stalls: Sequence[tuple[int, int | None]]
                    ) -> list[tuple[int, bool, bool]]:
    """(time, connected, sender stalled) at each change of either, from the connected changes and the
    spans the sender sat at its flow-control limit."""
    times = sorted({ts for ts, _ in connected} | {a for a, _ in stalls} | {b for _, b in stalls if b is not None})
    out = []
    for ts in times:
        now_connected = next((c for t, c in reversed(connected) if t <= ts), False)
        now_stalled = any(a <= ts and (b is None or ts < b) for a, b in stalls)
        out.append((ts, now_connected, now_stalled))
    return out


def _stall_evidence(peer: int, stalled: bool) -> str:
    if stalled:
        return (f"the sender reached member {peer}'s flow-control limit (its status messages' consumption position"
                " plus window) and sent no more: what is offered waits in the publication")
    return f"the sender went past its flow-control limit to member {peer}: what waited in the publication left"


def _evidence(connected: bool, peer: int, ts: int) -> str:
    if connected:
        return f"member {peer}'s consensus endpoint answered the publication (status message)"
    return (f"no status message from member {peer}'s consensus endpoint for the publication connection timeout"
            f" ({CONNECTION_TIMEOUT_NS // 1_000_000_000} s), or it closed its image: not connected")


def lives_of(events: Iterable[Event]) -> list[Life]:
    """Each member's lives from its MemberStart, MemberCrash/MemberStop and End events."""
    starts: dict[int, list[int]] = {}
    ends: dict[int, list[int]] = {}
    last: dict[int, int] = {}
    for event in events:
        if event.dir != "local":
            continue
        if event.type == "MemberStart":
            starts.setdefault(event.node, []).append(event.ts)
        elif event.type in ("MemberCrash", "MemberStop"):
            ends.setdefault(event.node, []).append(event.ts)
        elif event.type == "End":
            last[event.node] = event.ts
    lives = []
    for member, own in sorted(starts.items()):
        deaths = sorted(ends.get(member, ()))
        for start in sorted(own):
            end = next((t for t in deaths if t >= start), last.get(member))
            since = max((t for t in deaths if t < start), default=None)
            lives.append(Life(member, start, end, since))
    return lives


def with_publication_evidence(keyed: list[tuple], publications: Sequence[ConsensusPublicationSeen],
                              group: int, *, log_publications: Mapping[tuple[int, int], int] | None = None,
                              log_images: Mapping[tuple[int, int], Sequence[int]] | None = None) -> list[tuple]:
    """``keyed`` (sort key tuples ending with their event) with ``connectedPeers``, ``logPublicationsReadyNs``
    and ``logImagesNs`` on each MemberStart of a member with evidence and its ``PublicationStatus``
    events added (with sort ``group``)."""
    evidence = publication_evidence(publications, lives_of(item[-1] for item in keyed),
                                    log_publications=log_publications, log_images=log_images)
    if not evidence:
        return keyed
    out = []
    for item in keyed:
        event = item[-1]
        found = evidence.get((event.node, event.ts)) if event.type == "MemberStart" and event.dir == "local" else None
        if found is not None:
            extra = {**(event.extra or {}), "connectedPeers": "the consensus publications its peers' endpoints had"
                     " answered (status messages) when its replay starts"}
            fields = {**event.fields, "connectedPeers": list(found.connected_peers),
                      "logPublicationsReadyNs": list(found.log_publications_ready),
                      "logImagesNs": [list(image) for image in found.log_images]}
            event = Event(ts=event.ts, node=event.node, dir=event.dir, peer=event.peer, channel=event.channel,
                          type=event.type, fields=fields, payload=event.payload, extra=extra)
            item = (*item[:-1], event)
        out.append(item)
    for found in evidence.values():
        out += [(change.ts, group, change.node, 0, change) for change in found.changes]
    return out


def with_start_evidence(keyed: list[tuple], name: str, note: str, skip: Iterable[int],
                        find: Callable[[Event, Life], Any]) -> list[tuple]:
    """``keyed`` (sort key tuples ending with their event) with ``fields[name]`` (and ``note`` in its extra,
    saying where it came from) on each local MemberStart of a member not in ``skip`` whose life ``find``
    gives evidence for (anything true: the value); ``find(start, life)`` decides too whether the start
    already has it."""
    skipped = set(skip)
    lives = {(life.member, life.start_ns): life for life in lives_of(item[-1] for item in keyed)}
    out = []
    for item in keyed:
        start = item[-1]
        life = lives.get((start.node, start.ts)) if start.type == "MemberStart" and start.dir == "local" else None
        found = find(start, life) if life is not None and start.node not in skipped else None
        if found:
            start = Event(ts=start.ts, node=start.node, dir=start.dir, peer=start.peer, channel=start.channel,
                          type=start.type, fields={**start.fields, name: found}, payload=start.payload,
                          extra={**(start.extra or {}), name: note})
            item = (*item[:-1], start)
        out.append(item)
    return out
