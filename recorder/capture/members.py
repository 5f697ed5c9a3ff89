"""Which cluster member owns which UDP endpoint: from the clusterMembers string, or from the traffic.

Aeron's ``aeron.cluster.members`` string lists, per member, ``id,ingress,consensus,log,catchup,archive``
(optionally ``,archiveResponse[,egressResponse]``), members separated by ``|`` (aeron-formats.md §2.2);
`formats.cluster_members` reads it, and this module maps its endpoints to the addresses they stand for.
Each endpoint is where that member *receives*: its consensus endpoint receives consensus traffic,
its log and catch-up endpoints receive the log, its ingress endpoint receives client requests.  What a
member *sends* leaves from an ephemeral port of its media driver, so a sender is never found here by
port; `recorder.capture.datagrams` identifies senders from the messages and from their source IP
(`MemberMap.member_at_ip`, when exactly one member lives at that address).

Host names: ``localhost`` stands for 127.0.0.1 and ::1; a literal IPv4/IPv6 address is itself; any
other name can be mapped with ``hosts`` (``{"node0": "10.0.0.5"}``).  We never resolve names through
DNS (that would make an import depend on the machine it runs on); an endpoint whose host stays a
name is matched by its port alone, which is right whenever ports are unique across the cluster.

`infer_members` rebuilds a map when no string was given, from what the consensus traffic says about
itself (aeron-formats.md §2.5): every consensus message but StopCatchup and TerminationPosition names
its sender (`SENDER_FIELD`), Vote and StopCatchup name their receiver, and with three or more members
the owner of a consensus endpoint is the one member that never sends to it.  Log and ingress
endpoints are then given to the member on the same IP, else to the member whose consensus port is
nearest (Aeron deployments group each member's ports; a heuristic, and said so in the warnings).
Endpoints that could not be seen are written with port 0 in the rebuilt string.

No I/O.  Bad input raises `formats.errors.DecodeError`.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from formats.cluster_members import ROLES, format_endpoint, parse_cluster_members, split_endpoint

#: Roles that receive the cluster log (the leader's log publication, or a catch-up replay of it).
LOG_ROLES = frozenset({"log", "catchup"})

#: Consensus messages that name their sender (Python attribute of the field), aeron-formats.md §2.5.
SENDER_FIELD = {
    "CanvassPosition": "follower_member_id",
    "RequestVote": "candidate_member_id",
    "Vote": "follower_member_id",
    "NewLeadershipTerm": "leader_member_id",
    "AppendPosition": "follower_member_id",
    "CommitPosition": "leader_member_id",
    "CatchupPosition": "follower_member_id",
    "TerminationAck": "member_id",
}
#: Consensus messages that name their receiver.
RECEIVER_FIELD = {
    "Vote": "candidate_member_id",
    "StopCatchup": "follower_member_id",
}

_LOCALHOST = ("127.0.0.1", "::1")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """``host:port`` as written in the members string; ``ips`` are the addresses it stands for."""

    host: str
    port: int
    ips: tuple[str, ...]

    def __str__(self) -> str:
        return format_endpoint(self.host, self.port)


@dataclass(frozen=True, slots=True)
class MemberEndpoints:
    member_id: int
    endpoints: Mapping[str, Endpoint]  #: by role name (ROLES)

    def to_string(self) -> str:
        parts = [str(self.member_id)]
        for role in ROLES:
            endpoint = self.endpoints.get(role)
            if endpoint is None:
                if role in ("archiveResponse", "egressResponse"):
                    break
                parts.append("0.0.0.0:0")
            else:
                parts.append(str(endpoint))
        return ",".join(parts)


def normalise_ip(text: str) -> str | None:
    """The canonical text of an IP address (as `formats.pcap` prints it), or None for a host name."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def parse_endpoint(text: str, *, hosts: Mapping[str, str] | None = None, where: str = "endpoint",
                   source: str | None = None) -> Endpoint:
    """``host:port`` or ``[v6]:port`` into an `Endpoint` (port 0: not known, in strings rebuilt from traffic)."""
    host, port = split_endpoint(text, what=where, source=source)
    mapped = (hosts or {}).get(host, host)
    ip = normalise_ip(mapped)
    if ip is not None:
        ips: tuple[str, ...] = (ip,)
    elif mapped == "localhost":
        ips = _LOCALHOST
    else:
        ips = ()
    return Endpoint(host=host, port=port, ips=ips)


def parse_members(text: str, *, hosts: Mapping[str, str] | None = None, source: str | None = None
                  ) -> tuple[MemberEndpoints, ...]:
    """Aeron's cluster members string (`formats.cluster_members`, strict), its endpoints read."""
    label = source or "clusterMembers"
    return tuple(
        MemberEndpoints(
            member_id=entry.id,
            endpoints={
                role: parse_endpoint(value, hosts=hosts, where=f"member {entry.id} {role}", source=label)
                for role, value in entry.endpoints().items()
            },
        )
        for entry in parse_cluster_members(text.strip(), strict=True, source=label)
    )


@dataclass(slots=True)
class MemberMap:
    """Endpoint → (memberId, role) lookups over a cluster's members."""

    members: tuple[MemberEndpoints, ...]
    text: str = ""
    inferred: bool = False
    _by_address: dict[tuple[str, int], tuple[int, str]] = field(default_factory=dict, repr=False)
    _by_port: dict[int, tuple[int, str] | None] = field(default_factory=dict, repr=False)
    _by_ip: dict[str, int | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.text:
            self.text = "|".join(m.to_string() for m in self.members)
        for member in self.members:
            for role, endpoint in member.endpoints.items():
                if endpoint.port == 0:
                    continue
                owner = (member.member_id, role)
                for ip in endpoint.ips:
                    self._by_address.setdefault((ip, endpoint.port), owner)
                    if ip not in ("0.0.0.0", "::"):
                        previous = self._by_ip.get(ip, member.member_id)
                        self._by_ip[ip] = member.member_id if previous == member.member_id else None
                if not endpoint.ips:
                    # A host name we may not resolve: match by port alone, unless the port is shared.
                    previous_owner = self._by_port.get(endpoint.port, owner)
                    self._by_port[endpoint.port] = owner if previous_owner == owner else None

    @classmethod
    def parse(cls, text: str, *, hosts: Mapping[str, str] | None = None, source: str | None = None) -> MemberMap:
        return cls(members=parse_members(text, hosts=hosts, source=source), text=text.strip())

    @property
    def member_ids(self) -> tuple[int, ...]:
        return tuple(sorted(m.member_id for m in self.members))

    def lookup(self, ip: str, port: int) -> tuple[int, str] | None:
        """(memberId, role) of the member endpoint at ip:port, or None when it is nobody's."""
        found = self._by_address.get((ip, port))
        if found is None and self._by_port:
            found = self._by_port.get(port)
        return found

    def member_at_ip(self, ip: str) -> int | None:
        """The member at this address when it is the only member there (one member per host)."""
        return self._by_ip.get(ip)

    def ips_of(self, member_id: int) -> frozenset[str]:
        for member in self.members:
            if member.member_id == member_id:
                return frozenset(ip for e in member.endpoints.values() for ip in e.ips)
        return frozenset()

    def endpoint(self, member_id: int, role: str) -> Endpoint | None:
        for member in self.members:
            if member.member_id == member_id:
                return member.endpoints.get(role)
        return None


# --- inference from traffic ---------------------------------------------------------------------
@dataclass(slots=True)
class TrafficSurvey:
    """What the traffic says about who is where; fed by `recorder.capture.datagrams.survey_datagrams`."""

    #: consensus destination (ip, port) → member ids seen sending to it (from the messages' own fields)
    consensus_senders: dict[tuple[str, int], set[int]] = field(default_factory=lambda: defaultdict(set))
    #: consensus destination → member ids the messages say are its receiver (Vote, StopCatchup)
    consensus_receivers: dict[tuple[str, int], set[int]] = field(default_factory=lambda: defaultdict(set))
    #: source IP → member ids seen sending consensus messages from it
    sender_ips: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    #: destinations of log-stream and ingress-stream data
    log_destinations: set[tuple[str, int]] = field(default_factory=set)
    ingress_destinations: set[tuple[str, int]] = field(default_factory=set)

    def on_consensus(self, src_ip: str, dst: tuple[str, int], type_name: str, message: object) -> None:
        sender_attr = SENDER_FIELD.get(type_name)
        if sender_attr is not None:
            sender = getattr(message, sender_attr)
            self.consensus_senders[dst].add(sender)
            self.sender_ips[src_ip].add(sender)
        receiver_attr = RECEIVER_FIELD.get(type_name)
        if receiver_attr is not None:
            self.consensus_receivers[dst].add(getattr(message, receiver_attr))


def infer_members(survey: TrafficSurvey) -> tuple[MemberMap | None, list[str]]:
    """A `MemberMap` rebuilt from the traffic, and warnings saying what rests on a guess."""
    warnings: list[str] = []
    ids = set()
    for senders in survey.consensus_senders.values():
        ids |= senders
    for receivers in survey.consensus_receivers.values():
        ids |= receivers
    ids = {i for i in ids if 0 <= i < 1 << 20}
    if not ids:
        return None, ["no consensus traffic names a member: cannot infer the cluster members"]
    owner: dict[tuple[str, int], int] = {}
    for dst, receivers in survey.consensus_receivers.items():
        if len(receivers) == 1 and (receiver := next(iter(receivers))) in ids:  # not a corrupt member id
            owner[dst] = receiver
    # Each member owns one consensus endpoint; repeat the exclusion rule until nothing changes.
    changed = True
    while changed:
        changed = False
        taken = set(owner.values())
        for dst in sorted(survey.consensus_senders):
            if dst in owner:
                continue
            candidates = ids - survey.consensus_senders[dst] - taken
            if len(candidates) == 1:
                owner[dst] = candidates.pop()
                changed = True
    unplaced = sorted(dst for dst in survey.consensus_senders if dst not in owner)
    if unplaced:
        warnings.append(
            "could not tell whose consensus endpoint " + ", ".join(f"{ip}:{port}" for ip, port in unplaced)
            + " is (too few members or messages to exclude all but one)"
        )
    consensus_of = {member: dst for dst, member in owner.items()}
    endpoints: dict[int, dict[str, Endpoint]] = {m: {} for m in ids}
    for member, (ip, port) in consensus_of.items():
        endpoints[member]["consensus"] = Endpoint(host=ip, port=port, ips=(ip,))

    def nearest(dst: tuple[str, int]) -> int | None:
        ip, port = dst
        same_ip = [m for m, (cip, _) in consensus_of.items() if cip == ip]
        if len(same_ip) == 1:
            return same_ip[0]
        pool = same_ip or list(consensus_of)
        if not pool:
            return None
        ranked = sorted(pool, key=lambda m: (abs(consensus_of[m][1] - port), m))
        if len(ranked) > 1 and abs(consensus_of[ranked[0]][1] - port) == abs(consensus_of[ranked[1]][1] - port):
            return None
        return ranked[0]

    guessed = []
    for role, destinations in (("log", survey.log_destinations), ("ingress", survey.ingress_destinations)):
        for dst in sorted(destinations):
            if dst in owner:
                continue
            member = nearest(dst)
            if member is None:
                warnings.append(f"could not tell whose {role} endpoint {dst[0]}:{dst[1]} is")
                continue
            if role not in endpoints[member]:
                endpoints[member][role] = Endpoint(host=dst[0], port=dst[1], ips=(dst[0],))
            elif role == "log" and "catchup" not in endpoints[member]:
                endpoints[member]["catchup"] = Endpoint(host=dst[0], port=dst[1], ips=(dst[0],))
            guessed.append(f"{role} {dst[0]}:{dst[1]} → member {member}")
    if guessed:
        warnings.append("guessed by address and nearest consensus port: " + "; ".join(guessed))
    members = []
    for member in sorted(ids):
        host = consensus_of.get(member, ("0.0.0.0", 0))[0]
        filled = {
            role: endpoints[member].get(role, Endpoint(host=host, port=0, ips=()))
            for role in ROLES[:5]
        }
        members.append(MemberEndpoints(member_id=member, endpoints=filled))
    result = MemberMap(members=tuple(members), inferred=True)
    warnings.insert(0, f"cluster members inferred from the traffic (give --members to be sure): {result.text}")
    return result, warnings


def local_members(member_map: MemberMap, ip_counts: Mapping[str, int], total: int) -> frozenset[int]:
    """Members whose host a capture was taken on.

    A capture taken on a host sees only traffic to or from that host, so the host's address is in
    every datagram; a capture that sees everything on one address (a single-host cluster, loopback)
    makes every member on it local.  ``ip_counts`` counts, per address, the member-to-member
    datagrams it took part in; ``total`` is their number.  A capture where no member address is in
    every datagram (a mirror port, a tap) is local to nobody.
    """
    if total == 0:
        return frozenset()
    local_ips = {ip for ip, count in ip_counts.items() if count >= total}
    return frozenset(
        m.member_id for m in member_map.members if member_map.ips_of(m.member_id) & local_ips
    )


def member_ids_in(members: Iterable[MemberEndpoints]) -> list[int]:
    return sorted(m.member_id for m in members)
