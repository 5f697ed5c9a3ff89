"""The cluster members string, seen by a recording proxy: endpoints to tap and strings to hand out.

Reading and writing the string and its ``host:port`` endpoints is `formats.cluster_members`' (Aeron's
own rules); this module adds what the proxy needs on top: which endpoints each channel taps, and
members strings written back with some endpoints replaced by proxy endpoints.

Why each member needs its own string: a member binds its subscriptions to ITS OWN entry's endpoints
(the log destination is always ``thisMember.logEndpoint()``; the consensus subscription too unless the
consensus channel names an endpoint), while it sends to the OTHER members' entries.  So member N is
given a string in which its own entry is untouched and every other member's tapped endpoints point at
the proxy; a single string with every entry rewritten would make each member try to bind the proxy's
ports.  `proxied_cluster_members` (every entry rewritten) is still printed: it is what a tool outside
the cluster (a client, ClusterTool, a backup) should be given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from formats import cluster_members
from formats.cluster_members import MemberEntry, format_endpoint

__all__ = [
    "CHANNELS",
    "CHANNEL_ATTRIBUTES",
    "SOURCE",
    "channel_endpoint",
    "format_endpoint",
    "ingress_endpoints",
    "member_cluster_members",
    "parse_members",
    "rewrite_members",
    "split_endpoint",
]

#: Channels a proxy can tap, in the order their ports are assigned, with the member attribute
#: holding the endpoint other parties send that channel's traffic to.
CHANNEL_ATTRIBUTES = {
    "consensus": "consensus_endpoint",
    "log": "log_endpoint",
    "ingress": "ingress_endpoint",
}
CHANNELS = tuple(CHANNEL_ATTRIBUTES)

#: Where a members-string error is said to come from.
SOURCE = "clusterMembers"


def parse_members(text: str) -> tuple[MemberEntry, ...]:
    """Aeron's parse, strict: a proxy cannot live with no members, or with one id used twice."""
    return cluster_members.parse_cluster_members(text, strict=True, source=SOURCE)


def split_endpoint(endpoint: str, *, what: str = "endpoint") -> tuple[str, int]:
    """(host, port) of an endpoint the proxy forwards to: the port must be 1..65535 (a proxy cannot
    forward to an ephemeral port 0)."""
    return cluster_members.split_endpoint(endpoint, lowest_port=1, what=what, source=SOURCE)


def channel_endpoint(member: MemberEntry, channel: str) -> str:
    return getattr(member, CHANNEL_ATTRIBUTES[channel])


def _entry(member: MemberEntry, replacements: Mapping[str, str]) -> str:
    # The optional parts stay exactly as present: 6, 7 or 8 fields, as Aeron parsed them.
    changes = {CHANNEL_ATTRIBUTES[channel]: endpoint for channel, endpoint in replacements.items()}
    return dataclasses.replace(member, **changes).to_string()


def rewrite_members(
    members: Sequence[MemberEntry],
    proxies: Mapping[tuple[int, str], str],
    *,
    keep_member_id: int | None = None,
) -> str:
    """The members string with each (memberId, channel) endpoint in ``proxies`` replaced by its proxy
    endpoint, except in the entry of ``keep_member_id``, which stays as it was."""
    entries = []
    for member in members:
        if member.id == keep_member_id:
            replacements: dict[str, str] = {}
        else:
            replacements = {
                channel: proxy for (member_id, channel), proxy in proxies.items() if member_id == member.id
            }
        entries.append(_entry(member, replacements))
    return "|".join(entries)


def member_cluster_members(
    members: Sequence[MemberEntry], proxies: Mapping[tuple[int, str], str]
) -> dict[int, str]:
    """The ``aeron.cluster.members`` value to give each member, by member id (see the module notes)."""
    return {member.id: rewrite_members(members, proxies, keep_member_id=member.id) for member in members}


def ingress_endpoints(members: Sequence[MemberEntry], proxies: Mapping[tuple[int, str], str]) -> str:
    """A client's ``aeron.cluster.ingress.endpoints`` (``id=endpoint,...``), through the proxy where
    ingress is tapped."""
    return ",".join(
        f"{member.id}={proxies.get((member.id, 'ingress'), member.ingress_endpoint)}" for member in members
    )
