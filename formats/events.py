"""Events: something that happened at one cluster member (contract §1), and their JSON Lines form.

An `Event` is what every importer produces and what the engine consumes: a time on the observing
member's clock, the member, a direction (``in`` received, ``out`` sent, ``local`` happened inside),
the peer, the channel, a type (an Aeron message name or a local event name) and the fields by
Aeron name.  Events that came from bytes keep them (``payload``) so a replay never depends on a
decoder's guess; `Event.message()` decodes from the payload when there is one, else builds the
message from the fields.

`parse_jsonl` reads the JSON Lines form strictly: a line that is not an object, a missing key, an
unknown message type or a missing required field is a `DecodeError` naming the line.  Unknown keys
are kept (``extra``) and ignored.  This module does no I/O: it takes lines and returns values.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from formats import cluster_codecs
from formats.cluster_codecs_ext import decode_cluster
from formats.errors import DecodeError
from formats.sbe import from_fields

DIRECTIONS = ("in", "out", "local")
CHANNELS = ("consensus", "log", "ingress", "egress", "service", "archive", "local")

#: Local events the engine understands (inputs), and observations importers add (compared, never relied on).
LOCAL_INPUT_TYPES = ("MemberStart", "MemberStop", "MemberCrash", "End")
LOCAL_OBSERVATION_TYPES = (
    "ElectionStateChange",  # agent log ELECTION_STATE_CHANGE
    "RoleChange",  # agent log ROLE_CHANGE
    "StateChange",  # agent log STATE_CHANGE (ConsensusModule.State)
    "NewElection",  # agent log NEW_ELECTION
    "TruncateLogEntry",  # agent log TRUNCATE_LOG_ENTRY
    "ReplayNewLeadershipTerm",  # agent log REPLAY_NEW_LEADERSHIP_TERM
    "ReplicationEnded",  # agent log REPLICATION_ENDED
    "AgentEvent",  # any other agent-log cluster event, kept with its text fields
    "RecordingSignal",  # archive signal for the log recording (START/STOP/EXTEND/SYNC/...)
    "LogEndOfStream",  # the log image reached end of stream (EOS flag seen on the log stream)
    "PublicationStatus",  # a consensus publication (to ``peer``) connected or not, and how far its sender got
    "NetworkFault",  # simulator: a fault applied to a link or host
    "ClientRequest",  # simulator: a client asked the cluster for something
)
LOCAL_TYPES = LOCAL_INPUT_TYPES + LOCAL_OBSERVATION_TYPES

MESSAGE_CLASSES: dict[str, type] = {spec.name: spec.block.cls for spec in cluster_codecs.MESSAGES}

_KEYS = ("ts", "node", "dir", "peer", "channel", "type", "fields")
#: ``Event.fields``'s default (a new empty dict per event), told apart from any value passed.
_NO_FIELDS: Any = object()


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    ts: int
    node: int
    dir: str
    peer: int | None
    channel: str
    type: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    payload: bytes | None = None
    extra: Mapping[str, Any] | None = None

    def __init__(
        self,
        *,
        ts: int,
        node: int,
        dir: str,
        peer: int | None,
        channel: str,
        type: str,
        fields: Mapping[str, Any] = _NO_FIELDS,
        payload: bytes | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        # What the generated __init__ does (an importer builds one Event per message and direction,
        # hundreds of thousands per capture), at half its cost: a frozen dataclass sets each field
        # through object.__setattr__; this sets them as the mutable twin, then gives back the class.
        set_class = object.__setattr__
        set_class(self, "__class__", _EventTwin)
        self.ts = ts
        self.node = node
        self.dir = dir
        self.peer = peer
        self.channel = channel
        self.type = type
        self.fields = {} if fields is _NO_FIELDS else fields
        self.payload = payload
        self.extra = extra
        set_class(self, "__class__", Event)

    @property
    def is_message(self) -> bool:
        return self.type in MESSAGE_CLASSES

    def message(self, *, source: str | None = None) -> Any:
        """The Aeron message this event carries, as its dataclass."""
        if self.payload is not None:
            return decode_cluster(self.payload, source=source).message
        cls = MESSAGE_CLASSES.get(self.type)
        if cls is None:
            raise DecodeError(f"{self.type!r} is a local event, not an Aeron message", source=source)
        return from_fields(cls, self.fields, source=source)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ts": self.ts,
            "node": self.node,
            "dir": self.dir,
            "peer": self.peer,
            "channel": self.channel,
            "type": self.type,
            "fields": dict(self.fields),
        }
        if self.payload is not None:
            out["payload"] = self.payload.hex()
        if self.extra:
            for key, value in self.extra.items():
                out.setdefault(key, value)
        return out

    def to_jsonl(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"), ensure_ascii=False)


def _mutable_twin(cls: type) -> type:
    """A mutable class with exactly the slots of the frozen, slotted dataclass ``cls``.

    The one place recount still builds a frozen dataclass by giving a mutable twin its class: an
    `Event` is built once per message and direction by every importer and once per row when a
    replay file is read, and the generated ``__init__`` of a frozen dataclass (one
    ``object.__setattr__`` per field) costs 4.7 times as much (new_event 273 ns -> 1.28 µs, a pcap
    import 24% slower).  `Event` stays a dataclass because callers and tests use
    ``dataclasses.replace`` and `dataclasses.FrozenInstanceError` on it; the frames, messages and
    decode results that used to be built this way are ordinary frozen dataclasses or NamedTuples.
    CPython refuses the class assignment unless the layouts are identical (checked here, at import),
    so the result is an ordinary frozen instance.
    """
    twin = dataclasses.make_dataclass(
        f"_Mutable{cls.__name__}", [(f.name, f.type) for f in dataclasses.fields(cls)], slots=True, eq=False, repr=False
    )
    probe = twin(*(None for _ in dataclasses.fields(cls)))
    probe.__class__ = cls  # TypeError now, not mid-capture, if the layouts ever differ
    return twin


_EventTwin = _mutable_twin(Event)


def new_event(ts: int, node: int, dir: str, peer: int | None, channel: str, type: str,
              fields: Mapping[str, Any], payload: bytes | None, extra: Mapping[str, Any] | None,
              cls: type[Event] = Event) -> Event:
    """``Event(ts=..., ..., extra=...)`` with every field given in order, for importers' hot loops.

    A quarter of the keyword constructor's cost: no keyword parsing, and the class is given once
    (built as the mutable twin, then made an `Event`; see `_mutable_twin`).  ``cls``: `Event` or a
    subclass of it that adds no slots (`formats.replay_file.ColumnarEvent`).
    """
    event = _EventTwin(ts, node, dir, peer, channel, type, fields, payload, extra)
    event.__class__ = cls
    return event


def message_event(
    message: Any,
    *,
    ts: int,
    node: int,
    dir: str,
    peer: int | None,
    channel: str,
    payload: bytes | None = None,
) -> Event:
    """An event carrying ``message`` with its fields by Aeron name."""
    return Event(
        ts=ts,
        node=node,
        dir=dir,
        peer=peer,
        channel=channel,
        type=message.BLOCK.name,
        fields=message.to_fields(),
        payload=payload,
    )


#: Ranges of the integer keys: what the replay file's columns hold (ts int64, node and peer int32).
_INT_RANGES = {"ts": (-(1 << 63), (1 << 63) - 1), "node": (0, (1 << 31) - 1), "peer": (-(1 << 31), (1 << 31) - 1)}


def _int(obj: Mapping[str, Any], key: str, where: str, source: str | None, line: int, nullable: bool = False):
    value = obj.get(key)
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise DecodeError(f"{where}: {key!r} must be an integer, got {_short(value)}", source=source, offset=line, unit="line")
    low, high = _INT_RANGES[key]
    if not low <= value <= high:
        raise DecodeError(f"{where}: {key!r} must be an integer from {low} to {high}, got {_short(value)}",
                          source=source, offset=line, unit="line")
    return value


def _short(value: Any) -> str:
    """A value as the user wrote it, cut to fit one line of an error message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _string(obj: Mapping[str, Any], key: str, source: str | None, line: int | None) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise DecodeError(f"{key!r} must be a string, got {type(value).__name__} {_short(value)}",
                          source=source, offset=line, unit="line")
    return value


def event_from_json(obj: Any, *, source: str | None = None, line: int | None = None, validate: bool = True) -> Event:
    """One event from its JSON object (contract §1).  ``validate`` builds the message to check its fields."""
    where = "event"
    if not isinstance(obj, dict):
        raise DecodeError(f"expected a JSON object, got {type(obj).__name__}", source=source, offset=line, unit="line")
    for key in ("ts", "node", "dir", "channel", "type"):
        if key not in obj:
            raise DecodeError(f"missing key {key!r}", source=source, offset=line, unit="line")
    ts = _int(obj, "ts", where, source, line)
    node = _int(obj, "node", where, source, line)
    peer = _int(obj, "peer", where, source, line, nullable=True)
    direction = _string(obj, "dir", source, line)
    if direction not in DIRECTIONS:
        raise DecodeError(f"'dir' must be one of in, out, local; got {_short(direction)}", source=source, offset=line,
                          unit="line")
    channel = _string(obj, "channel", source, line)
    if channel not in CHANNELS:
        raise DecodeError(
            f"'channel' must be one of {', '.join(CHANNELS)}; got {_short(channel)}", source=source, offset=line,
            unit="line"
        )
    kind = _string(obj, "type", source, line)
    fields = obj.get("fields", {})
    if fields is None:
        fields = {}
    if not isinstance(fields, dict):
        raise DecodeError(f"'fields' must be an object, got {type(fields).__name__} {_short(fields)}", source=source,
                          offset=line, unit="line")
    payload = obj.get("payload")
    if payload is not None:
        if not isinstance(payload, str):
            raise DecodeError(f"'payload' must be a string of hex bytes, got {type(payload).__name__}",
                              source=source, offset=line, unit="line")
        try:
            payload = bytes.fromhex(payload)
        except ValueError:
            raise DecodeError("'payload' must be hex bytes", source=source, offset=line, unit="line") from None
    if kind in MESSAGE_CLASSES:
        if validate:
            try:
                if payload is not None:
                    decoded = decode_cluster(payload).message
                else:
                    from_fields(MESSAGE_CLASSES[kind], fields)
            except DecodeError as error:
                raise DecodeError(f"{kind}: {error.expected}", source=source, offset=line, unit="line") from None
            if payload is not None:
                _check_payload_fields(kind, decoded, fields, source, line)
    elif kind not in LOCAL_TYPES:
        raise DecodeError(
            f"unknown message type {_short(kind)} (expected an Aeron cluster message name or one of {', '.join(LOCAL_TYPES)})",
            source=source,
            offset=line,
            unit="line",
        )
    extra = {k: v for k, v in obj.items() if k not in _KEYS and k != "payload"} or None
    return Event(ts=ts, node=node, dir=direction, peer=peer, channel=channel, type=kind, fields=fields, payload=payload, extra=extra)


def _check_payload_fields(kind: str, decoded: Any, fields: Mapping[str, Any], source: str | None, line: int | None
                          ) -> None:
    """An event with a payload carries its decoding as ``fields`` (or none): the engine and the replay
    file trust the one and the other alike, so they must agree."""
    if decoded.BLOCK.name != kind:
        raise DecodeError(f"'type' is {kind} but the payload holds a {decoded.BLOCK.name}", source=source,
                          offset=line, unit="line")
    if not fields:
        return
    canonical = decoded.to_fields()
    for name, value in fields.items():
        if name not in canonical or canonical[name] != value or type(canonical[name]) is not type(value):
            raise DecodeError(
                f"{kind}: fields.{name} is {_short(value)} but the payload says {_short(canonical.get(name))}",
                source=source, offset=line, unit="line")


def parse_jsonl(lines: Iterable[str], *, source: str | None = None, validate: bool = True) -> Iterator[Event]:
    """Events from JSON Lines text, one per non-blank line not starting with ``#``.

    Line numbers in errors are 1-based.  Time order per node is checked: a line whose ``ts`` is
    earlier than the previous event of the same node is an error (ties keep file order).
    """
    last_ts: dict[int, int] = {}
    for number, text in enumerate(lines, start=1):
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            obj = json.loads(stripped)
        except json.JSONDecodeError as error:
            raise DecodeError(f"not valid JSON ({error.msg} at column {error.colno})", source=source, offset=number, unit="line") from None
        event = event_from_json(obj, source=source, line=number, validate=validate)
        previous = last_ts.get(event.node)
        if previous is not None and event.ts < previous:
            raise DecodeError(
                f"ts {event.ts} is earlier than node {event.node}'s previous event at {previous} (lines are in time order per node)",
                source=source,
                offset=number,
                unit="line",
            )
        last_ts[event.node] = event.ts
        yield event


def dump_jsonl(events: Iterable[Event]) -> Iterator[str]:
    for event in events:
        yield event.to_jsonl() + "\n"
