"""How much of an incident the inputs show: whose side of the traffic was seen, which endpoints are unknown.

A node replay re-runs each member from the consensus messages it received.  A capture taken on one
host holds that host's member's inbound traffic whole, but of the other members only what that host
sent them: their replay would be run on part of their input and diverge for no reason of Aeron's.
`coverage` says, from the events alone (so it works as well on a replay file as on captures), which
members' own side is there: a member is *seen* when it received consensus messages from every other
member that sent any.  A member of the cluster with no events at all is not seen either.

Endpoints that a capture could not tie to a member are written with port 0 in the members string
(`recorder.capture.members.infer_members`); `coverage` names the consensus and log ones, which a
replay needs to tell who sent what.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from formats.cluster_members import parse_cluster_members
from formats.errors import DecodeError
from formats.event_columns import EventColumns, distinct_rows
from formats.events import CHANNELS, DIRECTIONS, Event

#: The endpoints a replay needs to tell who sent and who received what (the others are often unused).
_NEEDED = ("consensus", "log")


@dataclass(frozen=True, slots=True)
class Coverage:
    members: tuple[int, ...]  #: every member known (from the members string and the events)
    seen: tuple[int, ...]
    not_seen: tuple[int, ...]
    #: member → the roles of its endpoints that are unknown (``0.0.0.0:0`` in the members string)
    unknown_endpoints: dict[int, tuple[str, ...]]
    #: member → the members it received nothing from although they sent to others
    missing_from: dict[int, tuple[int, ...]]

    @property
    def partial(self) -> bool:
        return bool(self.not_seen)

    def warnings(self) -> list[str]:
        """One line per thing a user must know before trusting a replay of these events."""
        out = []
        if self.not_seen:
            names = ", ".join(map(str, self.not_seen))
            seen = ", ".join(map(str, self.seen)) or "none"
            why = "; ".join(
                f"member {m} got nothing from {', '.join(map(str, self.missing_from[m]))}" if self.missing_from.get(m)
                else f"member {m} has no events" for m in self.not_seen)
            out.append(f"the inputs show only part of the incident: member(s) {names} not seen ({why});"
                       f" seen: {seen}.  A replay of an unseen member runs on part of its input and its"
                       " divergences mean little: add the captures or agent logs of its host")
        if self.unknown_endpoints:
            roles = "; ".join(f"member {m}: {', '.join(r)}" for m, r in sorted(self.unknown_endpoints.items()))
            out.append(f"endpoints not known (port 0 in the members string; give --members): {roles}")
        return out

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Coverage:
        return cls(tuple(document["members"]), tuple(document["seen"]), tuple(document["notSeen"]),
                   {int(m): tuple(r) for m, r in document["unknownEndpoints"].items()},
                   {int(m): tuple(r) for m, r in document["missingFrom"].items()})

    def to_json(self) -> dict[str, Any]:
        return {
            "members": list(self.members),
            "seen": list(self.seen),
            "notSeen": list(self.not_seen),
            "unknownEndpoints": {str(m): list(r) for m, r in sorted(self.unknown_endpoints.items())},
            "missingFrom": {str(m): list(r) for m, r in sorted(self.missing_from.items())},
        }


def _unknown_endpoints(text: str | None) -> tuple[list[int], dict[int, tuple[str, ...]]]:
    try:
        entries = parse_cluster_members(text or "")
    except DecodeError:
        return [], {}  # not a members string: the events alone say who the members are
    unknown: dict[int, tuple[str, ...]] = {}
    for entry in entries:
        missing = tuple(role for role, endpoint in entry.endpoints().items()
                        if role in _NEEDED and endpoint.strip().endswith(":0"))
        if missing:
            unknown[entry.id] = missing
    return [entry.id for entry in entries], unknown


def _distinct_sides(columns: EventColumns) -> list[tuple[int, str, str, int | None]]:
    """(node, dir, channel, peer) of ``columns``' rows, each distinct one once."""
    distinct = distinct_rows(columns.node, columns.dir, columns.channel, columns.has_peer,
                             np.where(columns.has_peer, columns.peer, 0))
    return [(node, DIRECTIONS[direction], CHANNELS[channel], peer if known else None)
            for node, direction, channel, known, peer in distinct.tolist()]


def coverage(events: Iterable[Event] | EventColumns, cluster_members: str | None = None) -> Coverage:
    """Which members' side ``events`` show (see the module docstring)."""
    received: dict[int, set[int]] = {}
    senders: set[int] = set()
    nodes: set[int] = set()
    # Only sets are kept, so events held as columns are read once per distinct (node, dir, channel, peer).
    sides = (_distinct_sides(events) if isinstance(events, EventColumns)
             else ((e.node, e.dir, e.channel, e.peer) for e in events))
    for node, direction, channel, peer in sides:
        nodes.add(node)
        if channel != "consensus" or peer is None or peer == node:
            continue
        if direction == "in":
            sender, receiver = peer, node
        elif direction == "out":
            sender, receiver = node, peer
        else:
            continue
        senders.add(sender)
        received.setdefault(receiver, set()).add(sender)
    ids, unknown = _unknown_endpoints(cluster_members)
    members = sorted(set(ids) | nodes)
    missing_from: dict[int, tuple[int, ...]] = {}
    seen, not_seen = [], []
    for member in members:
        if member not in nodes:
            not_seen.append(member)
            continue
        missing = sorted(senders - {member} - received.get(member, set()))
        if missing:
            missing_from[member] = tuple(missing)
            not_seen.append(member)
        else:
            seen.append(member)
    return Coverage(tuple(members), tuple(seen), tuple(not_seen), unknown, missing_from)
