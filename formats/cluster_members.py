"""Aeron's cluster members string, read and written in one place.

``aeron.cluster.members`` (and the ``clusterMembers`` of node-state.dat, of a recording's metadata and of
a ``MemberStart`` event) lists, per member, ``id,ingress,consensus,log,catchup,archive`` and optionally
``,archiveResponse[,egressResponse]``, members separated by ``|`` (aeron-formats.md §2.2).  Each
endpoint is where that member *receives*.

`parse_cluster_members` reads it by the rules of Aeron's `ClusterMember.parse`: Java's `String.split`
(which drops trailing empty parts, so ``a|b|`` is two members and ``3,a,b,c,d,e,,`` has six parts), 6
to 8 comma parts per member, an `int` id; the endpoints are kept as written.  Aeron accepts an empty
string (no members) and an id listed twice; ``strict=True`` refuses both, as every caller that is given
the string by a user does.  Everything in recount that reads the string reads it here: the engine's
`engine.model.members.parse_cluster_members` (which builds Aeron's mutable `ClusterMember`s from these
entries), the capture importers' endpoint map, the recording proxy, the simulator's scenario reader,
the coverage notes and the one-line description of a ``MemberStart``.

`split_endpoint` reads one ``host:port`` (``[v6]:port``) endpoint, which Aeron leaves to its channel
URIs; `format_endpoint` and `format_cluster_members` write them back.

No I/O.  A string Aeron would refuse is a `DecodeError` (a `ValueError`) whose words start as Aeron's
(``invalid member value: … within: …``, ``For input string: "x"``) and then say what was expected.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from formats.errors import DecodeError

#: The endpoint roles of a member, in the order of the members string (after the id).
ROLES = ("ingress", "consensus", "log", "catchup", "archive", "archiveResponse", "egressResponse")
#: What one member's entry holds, for error messages.
ENTRY_SHAPE = "id,ingress,consensus,log,catchup,archive[,archiveResponse[,egressResponse]]"

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class MemberEntry:
    """One member's entry, its endpoints as written (the two optional ones None when absent)."""

    id: int
    ingress_endpoint: str
    consensus_endpoint: str
    log_endpoint: str
    catchup_endpoint: str
    archive_endpoint: str
    archive_response_endpoint: str | None = None
    egress_response_endpoint: str | None = None

    def endpoints(self) -> dict[str, str]:
        """The endpoints present, by role name (`ROLES`)."""
        values = (
            self.ingress_endpoint,
            self.consensus_endpoint,
            self.log_endpoint,
            self.catchup_endpoint,
            self.archive_endpoint,
            self.archive_response_endpoint,
            self.egress_response_endpoint,
        )
        return {role: value for role, value in zip(ROLES, values, strict=True) if value is not None}

    def to_string(self) -> str:
        """The entry as Aeron writes it: 6, 7 or 8 parts, as many as it was given."""
        return ",".join([str(self.id), *self.endpoints().values()])


def parse_cluster_members(text: str, *, strict: bool = False, source: str | None = None) -> tuple[MemberEntry, ...]:
    """The entries of a members string, in order (see the module notes); `DecodeError` if Aeron would
    refuse it, or with ``strict`` if it lists no member or one id twice."""
    if not text:
        if strict:
            raise DecodeError("expected at least one member, got no members (an empty string)", source=source)
        return ()
    entries: list[MemberEntry] = []
    first_entry: dict[int, int] = {}
    for index, member_value in enumerate(_java_split(text, "|")):
        parts = _java_split(member_value, ",")
        if not 6 <= len(parts) <= 8:
            raise DecodeError(
                f"invalid member value: {member_value} within: {text} (expected {ENTRY_SHAPE}: "
                f"6 to 8 comma-separated parts, got {len(parts)})",
                source=source,
            )
        try:
            member_id = int(parts[0])
        except ValueError:
            raise DecodeError(
                f'For input string: "{parts[0]}" (a member id must be an integer, in {member_value!r})', source=source
            ) from None
        if not _INT_MIN <= member_id <= _INT_MAX:
            raise DecodeError(f'For input string: "{parts[0]}" (member id out of int range)', source=source)
        if strict and member_id in first_entry:
            raise DecodeError(
                f"member id {member_id} appears twice (entries {first_entry[member_id]} and {index}); "
                "a member listed twice is ambiguous",
                source=source,
            )
        first_entry.setdefault(member_id, index)
        entries.append(MemberEntry(member_id, *parts[1:]))
    if strict and not entries:
        raise DecodeError(f"expected at least one member, got no members in {text!r}", source=source)
    return tuple(entries)


def format_cluster_members(entries: Iterable[MemberEntry]) -> str:
    return "|".join(entry.to_string() for entry in entries)


def member_count(text: object) -> int | None:
    """How many members a members string lists, or None when it is not one (for descriptions)."""
    try:
        return len(parse_cluster_members(text)) if isinstance(text, str) else None
    except DecodeError:
        return None


def split_endpoint(text: str, *, lowest_port: int = 0, what: str = "endpoint", source: str | None = None) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` into (host, port), the host without brackets.  An IPv6 address must
    be in brackets (``::1:9`` could end anywhere); the port is decimal, ``lowest_port``..65535 (a caller
    that sends there passes 1: port 0 is "not known" in strings recount rebuilds from traffic)."""
    stripped = text.strip()
    host, sep, port_text = stripped.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host or stripped.startswith("["):
        raise DecodeError(f"{what} {text!r}: an IPv6 address must be written [address]:port", source=source)
    if not sep or not host or not port_text.isascii() or not port_text.isdigit():
        raise DecodeError(f"{what} {text!r}: expected host:port", source=source)
    port = int(port_text)
    if not lowest_port <= port <= 0xFFFF:
        raise DecodeError(f"{what} {text!r}: port must be {lowest_port}..65535", source=source)
    return host, port


def format_endpoint(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _java_split(text: str, separator: str) -> list[str]:
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts
