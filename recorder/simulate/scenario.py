"""Simulation scenarios: a small TOML file saying what cluster to run and what goes wrong when.

A scenario names the cluster (how many members, on which hosts and ports, or Aeron's own
``clusterMembers`` string), the Aeron properties every member runs with, the seed, how long to run,
the network (latency, jitter, loss, duplication, per-link overrides), clients sending ingress, and a
timeline of faults.  Everything is parsed strictly into frozen values before anything runs: an
unknown key, a wrong type or an impossible value is a `ScenarioError` whose one line names the file
and the key (``faults[2].at``), so a typo never silently becomes a default.

Format (every key optional except where said, but a file without a single key is refused: an empty
or all-comment file is a mistake far more often than a request for every default; durations are
nanoseconds as an integer or a string with a unit: ``"1.5s"``, ``"200ms"``, ``"100us"``, ``"10ns"``)::

    name = "leader-failover"
    description = "the leader is killed; the others elect a new one"
    seed = 7
    duration = "20s"
    start = "2026-03-01T12:00:00Z"        # wall clock at simulated time 0 (pcap and Aeron timestamps)

    [cluster]
    members = 3                            # ids 0..N-1 on hosts 10.42.0.1 .. 10.42.0.N
    # hosts = ["10.0.0.5", "10.0.0.6", "10.0.0.7"]
    # clusterMembers = "0,10.0.0.5:20002,...|1,..."   (Aeron's string; replaces members/hosts)
    appointedLeaderId = -1

    [config]                               # Aeron properties for every member (engine.model.config)
    "aeron.cluster.leader.heartbeat.timeout" = "5s"

    [[member]]                             # per-member settings (all optional)
    id = 2
    start = "300ms"                        # when its process starts (default 0)
    seed = 1                               # its java.util.Random seed (default: derived from `seed`)
    config = { "aeron.cluster.election.timeout" = "2s" }
    nodeState = { candidateTermId = 4 }    # on-disk state it starts from (contract §1 MemberStart)
    recordingLog = [ { recordingId = 0, leadershipTermId = 0, termBaseLogPosition = 0, logPosition = -1, timestamp = 0 } ]
    appendPosition = 0

    [network]
    latency = "200us"                      # one way
    jitter = "100us"                       # uniform extra delay in [0, jitter)
    loss = 0.0                             # probability a datagram is lost
    duplicate = 0.0                        # probability a datagram arrives twice

    [[network.link]]                       # overrides for one direction (from -> to)
    from = 0
    to = 2
    latency = "5ms"

    [[client]]                             # a client sending application messages to the leader
    start = "3s"
    every = "20ms"
    count = 50
    size = 32                              # payload bytes, at most 1344 (one DATA frame)

    [[fault]]
    at = "6s"
    kind = "crash"                         # see FAULT_KINDS
    member = 1                             # or "leader" / "follower": resolved at that moment

    [[fault]]
    at = "12s"
    kind = "restart"
    member = "crashed"                     # the member most recently crashed or stopped

Member ids are 0..N-1.  Hosts default to 10.42.0.(id+1); every member uses the same ports on its own
host (those of the real capture's member 0): archive 20001, ingress 20002, consensus 20003, log
20004, catch-up 20005.

No simulation here and no I/O: `parse_scenario` takes the text (callers read the file).
"""

from __future__ import annotations

import datetime
import ipaddress
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.model.config import Config
from engine.model.config import parse_duration_ns as read_duration_ns
from formats.cluster_members import (
    MemberEntry,
    format_cluster_members,
    format_endpoint,
    parse_cluster_members,
    split_endpoint,
)

#: Ports every member listens on, on its own host (the real capture's member 0 layout).
ARCHIVE_PORT = 20001
INGRESS_PORT = 20002
CONSENSUS_PORT = 20003
LOG_PORT = 20004
CATCHUP_PORT = 20005
#: Where simulated clients live and receive their egress.
CLIENT_HOST = "10.42.0.100"
EGRESS_PORT = 20900

#: A client message and its 32-byte session header must fit one DATA frame (MTU 1408 less its 32-byte
#: header): the engine's log positions count one frame per message, as Aeron does for unfragmented ones.
MAX_CLIENT_PAYLOAD = 1408 - 32 - 32

DEFAULT_START = "2026-03-01T12:00:00Z"
DEFAULT_DURATION_NS = 20_000_000_000
MAX_MEMBERS = 16

#: What a fault does, by name (the named fault options of the simulated network and processes).
FAULT_KINDS: dict[str, str] = {
    "crash": "kill -9 the member's process (its host goes dark: nothing sent, nothing captured)",
    "stop": "stop the member cleanly (its publications send end-of-stream first)",
    "restart": "start a crashed or stopped member again, from the files it left on disk",
    "partition": "split the members into groups that cannot reach each other (`groups`)",
    "isolate": "cut one member off from every other host, both ways (`member`)",
    "oneway": "drop everything `from` (an id or \"leader\") sends to `to` (an id or \"follower\")",
    "heal": "undo every partition, isolation and one-way cut",
    "link": "change latency/jitter/loss/duplicate of the `from` -> `to` direction (or every link)",
}

#: Symbolic fault targets, resolved when the fault happens: the current leader, the running follower
#: with the lowest id (crash, stop, isolate), the member most recently crashed or stopped (restart).
LEADER = "leader"
FOLLOWER = "follower"
CRASHED = "crashed"



class ScenarioError(ValueError):
    """The scenario file is not what we expect.  ``str()`` is one line: file, key, what was expected."""

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None) -> None:
        self.source = source
        self.key = key
        self.detail = message
        where = ", ".join(part for part in (source, f"key {key!r}" if key else None) if part)
        super().__init__(f"{where}: {message}" if where else message)


# --- Values -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """How one direction of the network behaves.  ``None`` means: as the default link."""

    latency_ns: int | None = None
    jitter_ns: int | None = None
    loss: float | None = None
    duplicate: float | None = None

    def over(self, base: LinkSpec) -> LinkSpec:
        """This spec with the unset values taken from ``base``."""
        return LinkSpec(
            latency_ns=base.latency_ns if self.latency_ns is None else self.latency_ns,
            jitter_ns=base.jitter_ns if self.jitter_ns is None else self.jitter_ns,
            loss=base.loss if self.loss is None else self.loss,
            duplicate=base.duplicate if self.duplicate is None else self.duplicate,
        )


DEFAULT_LINK = LinkSpec(latency_ns=200_000, jitter_ns=100_000, loss=0.0, duplicate=0.0)


@dataclass(frozen=True, slots=True)
class NetworkSpec:
    default: LinkSpec = DEFAULT_LINK
    #: (from member, to member) -> overrides; clients are "client".
    links: tuple[tuple[int | str, int | str, LinkSpec], ...] = ()


@dataclass(frozen=True, slots=True)
class MemberSpec:
    member_id: int
    host: str
    start_ns: int = 0
    config: Mapping[str, Any] = field(default_factory=dict)
    node_state: Mapping[str, Any] | None = None
    recording_log: tuple[Mapping[str, Any], ...] | None = None
    append_position: int | None = None
    seed: int | None = None


@dataclass(frozen=True, slots=True)
class ClientSpec:
    index: int
    start_ns: int
    every_ns: int
    count: int
    size: int


@dataclass(frozen=True, slots=True)
class Fault:
    """One entry of the fault timeline.  Which optional values matter depends on ``kind``."""

    index: int
    at_ns: int
    kind: str
    member: int | str | None = None  #: an id, or LEADER / CRASHED, resolved when the fault happens
    groups: tuple[tuple[int, ...], ...] = ()
    source: int | str | None = None  #: ``from`` in the file (a oneway cut may say LEADER)
    target: int | str | None = None  #: ``to`` in the file (a oneway cut may say FOLLOWER)
    until_ns: int | None = None
    link: LinkSpec | None = None


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    seed: int
    duration_ns: int
    start_epoch_ns: int
    cluster_members: str
    members: tuple[MemberSpec, ...]
    appointed_leader_id: int
    config: Mapping[str, Any]
    network: NetworkSpec
    clients: tuple[ClientSpec, ...]
    faults: tuple[Fault, ...]
    source: str | None = None

    @property
    def member_ids(self) -> tuple[int, ...]:
        return tuple(m.member_id for m in self.members)

    def member(self, member_id: int) -> MemberSpec:
        for spec in self.members:
            if spec.member_id == member_id:
                return spec
        raise KeyError(member_id)

    def member_config(self, member_id: int) -> dict[str, Any]:
        """The Aeron properties a member runs with: the scenario's, overridden by its own."""
        properties = dict(self.config)
        properties.update(self.member(member_id).config)
        return {name: properties[name] for name in sorted(properties)}


# --- Parsing ----------------------------------------------------------------------------------


def parse_duration_ns(value: Any, *, key: str, source: str | None = None, allow_zero: bool = True) -> int:
    """A duration in ns as `engine.model.config.parse_duration_ns` reads it (an int of ns, or ``"1.5s"``,
    ``"200ms"``), refused as a `ScenarioError` naming the key when it is not one or is negative (or zero,
    unless ``allow_zero``)."""
    try:
        result = read_duration_ns(value)
    except ValueError as error:
        raise ScenarioError(str(error), source=source, key=key) from None
    if result < 0 or (result == 0 and not allow_zero):
        raise ScenarioError(f"expected a {'non-negative' if allow_zero else 'positive'} duration, got {value!r}",
                            source=source, key=key)
    return result


class _Reader:
    """Typed access to one TOML table, remembering the key path for error messages."""

    def __init__(self, table: Mapping[str, Any], path: str, source: str | None) -> None:
        if not isinstance(table, Mapping):
            raise ScenarioError(f"expected a table, got {type(table).__name__}", source=source, key=path or None)
        self.table = table
        self.path = path
        self.source = source
        self.used: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def error(self, name: str, message: str) -> ScenarioError:
        return ScenarioError(message, source=self.source, key=self.key(name))

    def has(self, name: str) -> bool:
        return name in self.table

    def raw(self, name: str, default: Any = None) -> Any:
        self.used.add(name)
        return self.table.get(name, default)

    def int(self, name: str, default: int | None = None, *, low: int | None = None, high: int | None = None) -> int:
        value = self.raw(name, default)
        if value is None:
            raise self.error(name, "is required (an integer)")
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(name, f"expected an integer, got {value!r}")
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f"{low if low is not None else '-inf'}..{high if high is not None else 'inf'}"
            raise self.error(name, f"expected an integer in {bounds}, got {value}")
        return value

    def str(self, name: str, default: str | None = None) -> str:
        value = self.raw(name, default)
        if not isinstance(value, str):
            raise self.error(name, f"expected a string, got {value!r}")
        return value

    def duration(self, name: str, default: int | None = None, *, allow_zero: bool = True) -> int:
        value = self.raw(name, default)
        if value is None:
            raise self.error(name, "is required (a duration such as '5s')")
        return parse_duration_ns(value, key=self.key(name), source=self.source, allow_zero=allow_zero)

    def probability(self, name: str) -> float | None:
        value = self.raw(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
            raise self.error(name, f"expected a probability between 0 and 1, got {value!r}")
        return float(value)

    def table_of(self, name: str) -> _Reader | None:
        value = self.raw(name)
        if value is None:
            return None
        return _Reader(value, self.key(name), self.source)

    def array_of_tables(self, name: str) -> list[_Reader]:
        value = self.raw(name, [])
        if not isinstance(value, list):
            raise self.error(name, f"expected an array of tables ([[{name}]]), got {type(value).__name__}")
        return [_Reader(item, f"{self.key(name)}[{i}]", self.source) for i, item in enumerate(value)]

    def done(self) -> None:
        unknown = sorted(set(self.table) - self.used)
        if unknown:
            known = ", ".join(sorted(self.used)) or "none"
            raise self.error(unknown[0], f"unknown key (known here: {known})")


#: Every key of a scenario file: (key, what it holds, its default).  ``[]`` marks an array of tables
#: (``[[member]]``), ``<property>`` any Aeron property name.  `recount simulate --help-format` prints it
#: with `EXAMPLE`; tests/test_scenario_format.py checks it against the keys `parse_scenario` reads.
SCENARIO_KEYS: tuple[tuple[str, str, str], ...] = (
    ("name", "string: the incident's name", '"scenario"'),
    ("description", "string: one line about it", '""'),
    ("seed", "integer 0..2^63-1: the base seed of every random draw", "0"),
    ("duration", "duration: how long to simulate", '"20s"'),
    ("start", "ISO 8601 time with a zone: the wall clock at simulated time 0", f'"{DEFAULT_START}"'),
    ("cluster.members", f"integer 1..{MAX_MEMBERS}: member ids 0..N-1", "3 (or the number of hosts)"),
    ("cluster.hosts", "list of IPv4 addresses, one per member", '["10.42.0.1", "10.42.0.2", ...]'),
    ("cluster.clusterMembers", "Aeron's members string (replaces members and hosts)",
     f"each host on ports {INGRESS_PORT}-{CATCHUP_PORT}, archive {ARCHIVE_PORT}"),
    ("cluster.appointedLeaderId", "member id, or -1 for an election", "-1"),
    ("config.<property>", "Aeron property for every member: a number or a duration string", "Aeron's default"),
    ("member[].id", "member id (required in each [[member]])", "required"),
    ("member[].start", "duration: when its process starts", "0"),
    ("member[].seed", "integer: its java.util.Random seed", "derived from seed"),
    ("member[].config", "table of Aeron properties, over [config]", "{}"),
    ("member[].nodeState", "table {candidateTermId, logPosition, timestamp}: its node-state.dat at start", "empty"),
    ("member[].recordingLog", "array of tables {recordingId, leadershipTermId, termBaseLogPosition, logPosition,"
     " timestamp}: its recording.log at start", "empty"),
    ("member[].appendPosition", "integer >= 0: how much log it holds at start", "the end of its recording.log"),
    ("network.latency", "duration: one-way delay", f'"{DEFAULT_LINK.latency_ns // 1000}us"'),
    ("network.jitter", "duration: uniform extra delay in [0, jitter)", f'"{DEFAULT_LINK.jitter_ns // 1000}us"'),
    ("network.loss", "probability 0..1 that a datagram is lost", str(DEFAULT_LINK.loss)),
    ("network.duplicate", "probability 0..1 that a datagram arrives twice", str(DEFAULT_LINK.duplicate)),
    ("network.link[].from", 'member id or "client": the sending side of one direction', "required"),
    ("network.link[].to", 'member id or "client": the receiving side', "required"),
    ("network.link[].latency", "duration, for this direction", "network.latency"),
    ("network.link[].jitter", "duration, for this direction", "network.jitter"),
    ("network.link[].loss", "probability, for this direction", "network.loss"),
    ("network.link[].duplicate", "probability, for this direction", "network.duplicate"),
    ("client[].start", "duration: when the client connects and starts sending", "0"),
    ("client[].every", "duration: time between its messages", '"20ms"'),
    ("client[].count", "integer 0..100000: how many messages", "10"),
    ("client[].size", f"integer 0..{MAX_CLIENT_PAYLOAD}: payload bytes", "32"),
    ("fault[].at", "duration: when it happens", "required"),
    ("fault[].kind", "one of " + ", ".join(FAULT_KINDS), "required"),
    ("fault[].member", 'member id, or "leader"/"follower" (crash, stop, isolate), "crashed" (restart)',
     "required for crash, stop, restart, isolate"),
    ("fault[].until", "duration: when a partition, isolate or oneway ends by itself", "never (until heal)"),
    ("fault[].groups", "lists of member ids that can reach each other, e.g. [[0], [1, 2]] (partition)",
     "required for partition"),
    ("fault[].from", 'member id, "leader" (oneway) or "client" (link)', "required for oneway; every link for link"),
    ("fault[].to", 'member id, "follower" (oneway) or "client" (link)', "required for oneway; every link for link"),
    ("fault[].latency", "duration (link)", "unchanged"),
    ("fault[].jitter", "duration (link)", "unchanged"),
    ("fault[].loss", "probability (link)", "unchanged"),
    ("fault[].duplicate", "probability (link)", "unchanged"),
)

#: A scenario using every kind of table, for `recount simulate --help-format` (tests run it).
EXAMPLE = """\
name = "leader-failover"
description = "the leader is killed; the others elect a new one"
seed = 7
duration = "20s"

[cluster]
members = 3

[config]
"aeron.cluster.leader.heartbeat.timeout" = "5s"

[[member]]
id = 2
start = "300ms"

[network]
latency = "200us"
jitter = "100us"

[[network.link]]
from = 0
to = 2
latency = "5ms"

[[client]]
start = "3s"
every = "20ms"
count = 50

[[fault]]
at = "6s"
kind = "crash"
member = "leader"

[[fault]]
at = "12s"
kind = "restart"
member = "crashed"
"""


def describe_format() -> str:
    """The scenario format for people: durations, every key with its default, and `EXAMPLE`."""
    width = max(len(key) for key, _, _ in SCENARIO_KEYS)
    lines = [
        "A scenario is a TOML file.  Every key is optional unless marked required, but an empty file is refused.",
        'Durations: nanoseconds as an integer, or a string with a unit: "1.5s", "200ms", "100us", "10ns", "1m".',
        "",
    ]
    for key, what, default in SCENARIO_KEYS:
        lines.append(f"{key:<{width}}  {what} (default: {default})")
    lines += ["", "Fault kinds:"]
    lines += [f"  {kind:<10} {what}" for kind, what in FAULT_KINDS.items()]
    lines += ["", "Example:", ""]
    lines += ["  " + line if line else "" for line in EXAMPLE.splitlines()]
    return "\n".join(lines) + "\n"


def _epoch_ns(text: str, key: str, source: str | None) -> int:
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ScenarioError(f"expected an ISO 8601 time such as {DEFAULT_START!r}, got {text!r}",
                            source=source, key=key) from None
    if moment.tzinfo is None:
        raise ScenarioError("the start time needs a zone (end it with Z for UTC)", source=source, key=key)
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    delta = moment - epoch
    # timedelta is exact to the microsecond; no float on the way.
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def _link(reader: _Reader) -> LinkSpec:
    latency = reader.duration("latency") if reader.has("latency") else None
    jitter = reader.duration("jitter") if reader.has("jitter") else None
    return LinkSpec(latency_ns=latency, jitter_ns=jitter, loss=reader.probability("loss"),
                    duplicate=reader.probability("duplicate"))


def default_cluster_members(hosts: list[str]) -> str:
    """Aeron's members string for members 0..N-1 on ``hosts``, each on the standard ports."""
    ports = (INGRESS_PORT, CONSENSUS_PORT, LOG_PORT, CATCHUP_PORT, ARCHIVE_PORT)
    return format_cluster_members(
        MemberEntry(member_id, *(format_endpoint(host, port) for port in ports)) for member_id, host in enumerate(hosts)
    )


def _member_ref(reader: _Reader, name: str, ids: tuple[int, ...]) -> int:
    value = reader.int(name)
    if value not in ids:
        raise reader.error(name, f"no member {value} (members are {', '.join(map(str, ids))})")
    return value


def _parse_cluster(root: _Reader) -> tuple[str, list[str], int]:
    cluster = root.table_of("cluster") or _Reader({}, "cluster", root.source)
    appointed = cluster.int("appointedLeaderId", -1, low=-1)
    if cluster.has("clusterMembers"):
        if cluster.has("members") or cluster.has("hosts"):
            raise cluster.error("clusterMembers", "give either clusterMembers or members/hosts, not both")
        text = cluster.str("clusterMembers")
        try:
            parsed = parse_cluster_members(text)
        except ValueError as error:
            raise cluster.error("clusterMembers", f"not an Aeron members string ({error})") from None
        ids = [m.id for m in parsed]
        if sorted(ids) != list(range(len(ids))):
            raise cluster.error("clusterMembers", f"member ids must be 0..N-1, got {ids}")
        hosts = []
        for member in sorted(parsed, key=lambda m: m.id):
            host = _host_of(member.consensus_endpoint)
            for endpoint in (member.ingress_endpoint, member.log_endpoint, member.catchup_endpoint):
                if _host_of(endpoint) != host:
                    raise cluster.error("clusterMembers", f"member {member.id}'s endpoints must share one "
                                                          f"IPv4 address (the simulator gives each member a host)")
            hosts.append(host)
        if len(set(hosts)) != len(hosts):
            raise cluster.error("clusterMembers", "each member needs its own host address")
    else:
        if cluster.has("hosts"):
            hosts_value = cluster.raw("hosts")
            if not isinstance(hosts_value, list) or not all(isinstance(h, str) for h in hosts_value):
                raise cluster.error("hosts", "expected a list of IPv4 addresses")
            hosts = list(hosts_value)
            count = cluster.int("members", len(hosts), low=1, high=MAX_MEMBERS)
            if count != len(hosts):
                raise cluster.error("hosts", f"{len(hosts)} hosts for {count} members")
        else:
            count = cluster.int("members", 3, low=1, high=MAX_MEMBERS)
            hosts = [f"10.42.0.{i + 1}" for i in range(count)]
        for index, host in enumerate(hosts):
            try:
                address = ipaddress.IPv4Address(host)
            except ValueError:
                raise cluster.error(f"hosts[{index}]", f"expected an IPv4 address, got {host!r}") from None
            if str(address) == CLIENT_HOST:
                raise cluster.error(f"hosts[{index}]", f"{CLIENT_HOST} is where the simulated clients live")
        if len(set(hosts)) != len(hosts):
            raise cluster.error("hosts", "each member needs its own host address")
        text = default_cluster_members(hosts)
    if appointed != -1 and appointed >= len(hosts):
        raise cluster.error("appointedLeaderId", f"no member {appointed}")
    cluster.done()
    return text, hosts, appointed


def _host_of(endpoint: str) -> str:
    try:
        host, _ = split_endpoint(endpoint)
        ipaddress.IPv4Address(host)
    except ValueError:
        raise ValueError(f"endpoint {endpoint!r} is not IPv4:port") from None
    return host


def _check_config(properties: Mapping[str, Any], key: str, source: str | None) -> dict[str, Any]:
    if not isinstance(properties, Mapping):
        raise ScenarioError("expected a table of Aeron properties", source=source, key=key)
    try:
        Config.from_properties(properties)
    except ValueError as error:
        raise ScenarioError(str(error), source=source, key=key) from None
    return {name: properties[name] for name in sorted(properties)}


def parse_scenario(text: str, *, source: str | None = None) -> Scenario:
    """The scenario in ``text`` (TOML).  Raises `ScenarioError` naming ``source`` and the key."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ScenarioError(f"not valid TOML ({error})", source=source) from None
    if not document:
        raise ScenarioError("no settings in it: expected a scenario in TOML (name, seed, duration, [cluster], "
                            "[[member]], [[fault]], ...)", source=source)
    root = _Reader(document, "", source)
    name = root.str("name", "scenario")
    description = root.str("description", "")
    seed = root.int("seed", 0, low=0, high=(1 << 63) - 1)
    duration = root.duration("duration", DEFAULT_DURATION_NS, allow_zero=False)
    start_epoch_ns = _epoch_ns(root.str("start", DEFAULT_START), "start", source)
    cluster_members, hosts, appointed = _parse_cluster(root)
    ids = tuple(range(len(hosts)))
    config = _check_config(root.raw("config", {}), "config", source)

    specs: dict[int, MemberSpec] = {i: MemberSpec(member_id=i, host=hosts[i]) for i in ids}
    seen: set[int] = set()
    for reader in root.array_of_tables("member"):
        member_id = _member_ref(reader, "id", ids)
        if member_id in seen:
            raise reader.error("id", f"member {member_id} is described twice")
        seen.add(member_id)
        member_config = _check_config(reader.raw("config", {}), reader.key("config"), source)
        node_state = reader.raw("nodeState")
        if node_state is not None and not isinstance(node_state, Mapping):
            raise reader.error("nodeState", "expected a table {candidateTermId, logPosition, timestamp}")
        recording_log = reader.raw("recordingLog")
        if recording_log is not None and (
            not isinstance(recording_log, list) or not all(isinstance(e, Mapping) for e in recording_log)
        ):
            raise reader.error("recordingLog", "expected an array of entry tables")
        append_position = reader.int("appendPosition", -1, low=0) if reader.has("appendPosition") else None
        specs[member_id] = MemberSpec(
            member_id=member_id,
            host=hosts[member_id],
            start_ns=reader.duration("start", 0),
            config=member_config,
            node_state=dict(node_state) if node_state is not None else None,
            recording_log=tuple(dict(e) for e in recording_log) if recording_log is not None else None,
            append_position=append_position,
            seed=reader.int("seed", low=-(1 << 63), high=(1 << 63) - 1) if reader.has("seed") else None,
        )
        reader.done()

    network = _parse_network(root.table_of("network"), ids, source)
    clients = []
    for index, reader in enumerate(root.array_of_tables("client")):
        clients.append(ClientSpec(
            index=index,
            start_ns=reader.duration("start", 0),
            every_ns=reader.duration("every", 20_000_000, allow_zero=False),
            count=reader.int("count", 10, low=0, high=100_000),
            size=reader.int("size", 32, low=0, high=MAX_CLIENT_PAYLOAD),
        ))
        reader.done()
    faults = [_parse_fault(index, reader, ids) for index, reader in enumerate(root.array_of_tables("fault"))]
    root.done()
    for member_id in ids:
        # A member's own properties may clash with the scenario's (Aeron checks them together).
        merged = dict(config)
        merged.update(specs[member_id].config)
        _check_config(merged, f"member[{member_id}].config" if specs[member_id].config else "config", source)
    return Scenario(
        name=name,
        description=description,
        seed=seed,
        duration_ns=duration,
        start_epoch_ns=start_epoch_ns,
        cluster_members=cluster_members,
        members=tuple(specs[i] for i in ids),
        appointed_leader_id=appointed,
        config=config,
        network=network,
        clients=tuple(clients),
        faults=tuple(sorted(faults, key=lambda f: (f.at_ns, f.index))),
        source=source,
    )


def _parse_network(reader: _Reader | None, ids: tuple[int, ...], source: str | None) -> NetworkSpec:
    if reader is None:
        return NetworkSpec()
    links = []
    for link_reader in reader.array_of_tables("link"):
        source_id = _endpoint_ref(link_reader, "from", ids)
        target_id = _endpoint_ref(link_reader, "to", ids)
        links.append((source_id, target_id, _link(link_reader)))
        link_reader.done()
    default = _link(reader).over(DEFAULT_LINK)
    reader.done()
    return NetworkSpec(default=default, links=tuple(links))


def _endpoint_ref(reader: _Reader, name: str, ids: tuple[int, ...]) -> int | str:
    value = reader.raw(name)
    if value == "client":
        return "client"
    reader.used.discard(name)
    return _member_ref(reader, name, ids)


def _parse_fault(index: int, reader: _Reader, ids: tuple[int, ...]) -> Fault:
    at_ns = reader.duration("at")
    kind = reader.str("kind")
    if kind not in FAULT_KINDS:
        raise reader.error("kind", f"expected one of {', '.join(FAULT_KINDS)}, got {kind!r}")
    member: int | str | None = None
    source_id = target_id = until_ns = link = None
    groups: tuple[tuple[int, ...], ...] = ()
    if kind in ("crash", "stop", "restart", "isolate"):
        symbols = (CRASHED,) if kind == "restart" else (LEADER, FOLLOWER)
        if reader.raw("member") in symbols:
            member = reader.raw("member")
        else:
            reader.used.discard("member")
            if isinstance(reader.raw("member"), str):
                expected = " or ".join(repr(s) for s in symbols)
                raise reader.error("member", f"expected a member id or {expected}, got {reader.raw('member')!r}")
            member = _member_ref(reader, "member", ids)
    if kind in ("partition", "isolate", "oneway"):
        until_ns = reader.duration("until") if reader.has("until") else None
        if until_ns is not None and until_ns <= at_ns:
            raise reader.error("until", "must be later than 'at'")
    if kind == "partition":
        raw = reader.raw("groups")
        if (not isinstance(raw, list) or len(raw) < 2
                or not all(isinstance(g, list) and g and all(isinstance(m, int) and not isinstance(m, bool)
                                                             for m in g) for g in raw)):
            raise reader.error("groups", "expected at least two non-empty lists of member ids, e.g. [[0], [1, 2]]")
        flat = [m for g in raw for m in g]
        if len(set(flat)) != len(flat) or not set(flat) <= set(ids):
            raise reader.error("groups", f"each member at most once, from {list(ids)}")
        groups = tuple(tuple(g) for g in raw)
    if kind == "oneway":
        source_id = LEADER if reader.raw("from") == LEADER else _member_ref(reader, "from", ids)
        target_id = FOLLOWER if reader.raw("to") == FOLLOWER else _member_ref(reader, "to", ids)
        if source_id == target_id:
            raise reader.error("to", "a member cannot be cut off from itself")
    if kind == "link":
        has_from, has_to = reader.has("from"), reader.has("to")
        if has_from != has_to:
            raise reader.error("to" if has_from else "from", "give both 'from' and 'to', or neither (every link)")
        if has_from:
            source_id = _endpoint_ref(reader, "from", ids)
            target_id = _endpoint_ref(reader, "to", ids)
        link = _link(reader)
    reader.done()
    return Fault(index=index, at_ns=at_ns, kind=kind, member=member, groups=groups, source=source_id,
                 target=target_id, until_ns=until_ns, link=link)
