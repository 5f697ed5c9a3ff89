"""The cluster members string, seen by a recording proxy: endpoints to tap and strings to hand out.

Parsing is Aeron's own (`engine.model.members.parse_cluster_members`, `ClusterMember.parse`); this module
adds what the proxy needs on top: splitting ``host:port`` endpoints (``[v6]:port`` too) and writing
members strings back with some endpoints replaced by proxy endpoints.

Why each member needs its own string: a member binds its subscriptions to ITS OWN entry's endpoints
(the log destination is always ``thisMember.logEndpoint()``; the consensus subscription too unless the
consensus channel names an endpoint), while it sends to the OTHER members' entries.  So member N is
given a string in which its own entry is untouched and every other member's tapped endpoints point at
the proxy; a single string with every entry rewritten would make each member try to bind the proxy's
ports.  `proxied_cluster_members` (every entry rewritten) is still printed: it is what a tool outside
the cluster (a client, ClusterTool, a backup) should be given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.model.members import ClusterMember, parse_cluster_members
from formats.errors import DecodeError

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


def parse_members(text: str) -> list[ClusterMember]:
    """Aeron's parse, plus what a proxy cannot live with: no members, or one id used twice."""
    try:
        members = parse_cluster_members(text)
    except ValueError as error:
        raise DecodeError(
            f"expected id,ingress,consensus,log,catchup,archive[|...]: {error}", source=SOURCE
        ) from None
    if not members:
        raise DecodeError("expected at least one member, got an empty string", source=SOURCE)
    seen: set[int] = set()
    for index, member in enumerate(members):
        if member.id in seen:
            raise DecodeError(f"member id {member.id} appears twice (entry {index})", source=SOURCE)
        seen.add(member.id)
    return members


def split_endpoint(endpoint: str, *, what: str = "endpoint") -> tuple[str, int]:
    """``host:port`` or ``[ipv6]:port`` into (host, port); the port must be 1..65535 (a proxy cannot
    forward to an ephemeral port 0)."""
    host, sep, port_text = endpoint.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise DecodeError(
            f"{what} {endpoint!r}: an IPv6 address must be written [address]:port", source=SOURCE
        )
    if not sep or not host or not port_text.isascii() or not port_text.isdigit():
        raise DecodeError(f"{what} {endpoint!r}: expected host:port", source=SOURCE)
    port = int(port_text)
    if not 0 < port <= 0xFFFF:
        raise DecodeError(f"{what} {endpoint!r}: port must be 1..65535", source=SOURCE)
    return host, port


def format_endpoint(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def channel_endpoint(member: ClusterMember, channel: str) -> str:
    return getattr(member, CHANNEL_ATTRIBUTES[channel])


def _entry(member: ClusterMember, replacements: Mapping[str, str]) -> str:
    parts = [
        str(member.id),
        replacements.get("ingress", member.ingress_endpoint),
        replacements.get("consensus", member.consensus_endpoint),
        replacements.get("log", member.log_endpoint),
        member.catchup_endpoint,
        member.archive_endpoint,
    ]
    # The optional parts stay exactly as present: 6, 7 or 8 fields, as Aeron parsed them.
    if member.archive_response_endpoint is not None:
        parts.append(member.archive_response_endpoint)
    if member.egress_response_endpoint is not None:
        parts.append(member.egress_response_endpoint)
    return ",".join(parts)


def rewrite_members(
    members: Sequence[ClusterMember],
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
    members: Sequence[ClusterMember], proxies: Mapping[tuple[int, str], str]
) -> dict[int, str]:
    """The ``aeron.cluster.members`` value to give each member, by member id (see the module notes)."""
    return {member.id: rewrite_members(members, proxies, keep_member_id=member.id) for member in members}


def ingress_endpoints(members: Sequence[ClusterMember], proxies: Mapping[tuple[int, str], str]) -> str:
    """A client's ``aeron.cluster.ingress.endpoints`` (``id=endpoint,...``), through the proxy where
    ingress is tapped."""
    return ",".join(
        f"{member.id}={proxies.get((member.id, 'ingress'), member.ingress_endpoint)}" for member in members
    )
