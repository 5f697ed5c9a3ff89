"""What a `Node` produces: sends, state and role changes, file writes, log appends (contract §3).

State, role and module-state changes, election starts and file writes carry their `Cause` (the input
or the deadline the member was handling), written as the record's last key, ``cause``.

Every output is a frozen, slotted value with ``ts`` (the engine's time when it happened, ns) and
``node`` (the member that produced it), ``to_json()`` giving exactly the trace record of contract §3
(``kind``, ``ts``, ``node`` first, then the kind's own keys in a fixed order), and ``describe()``
giving the one canonical line (`formats.describe`).  `Node.take_outputs()` hands them over as one `Ready`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from formats.describe import describe_record


@dataclass(frozen=True, slots=True)
class Cause:
    """What a member was doing when it made a change: handling an input, or one of its own deadlines.

    ``kind`` is ``message`` (a message it received: ``type`` is the message, ``peer`` its sender when
    known, ``channel`` where it came in: ``consensus``, ``log``, ``ingress``), ``local`` (a local event:
    ``type`` is ``MemberStart``, ``MemberStop``, ``RecordingSignal``, ``LogEndOfStream``, or
    ``OwnLogAppend`` for a leader's own log append shown by the capture), or ``timer`` (no input: one of
    its deadlines fell due; ``type`` names it as `MemberView.deadlines` does, e.g. ``leaderHeartbeatTimeout``,
    ``nomination``, ``election``).  The change's own ``ts`` is when the input arrived or the timer fired.
    """

    kind: str
    type: str
    peer: int | None = None
    channel: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "type": self.type}
        if self.peer is not None:
            out["peer"] = self.peer
        if self.channel is not None:
            out["channel"] = self.channel
        return out


@dataclass(frozen=True, slots=True)
class Send:
    """One message to one destination.  ``channel`` is ``consensus`` or ``log``; a log frame carries
    ``log_position``, the log position just after it (written as the top-level ``logPosition`` key).
    A consensus message offered to a publication the evidence follows (``PublicationStatus``) carries
    ``publication_position``, the publication's position just after it: whether its frame has left
    the sender yet is the evidence's to say (node replay compares it with the wire once it has).  Not
    written: it says where the message sits in the member's own stream, not what was sent."""

    ts: int
    node: int
    peer: int | None
    channel: str
    message: Any
    log_position: int | None = None
    publication_position: int | None = None

    @property
    def type(self) -> str:
        return self.message.BLOCK.name

    def to_json(self) -> dict[str, Any]:
        out = {
            "kind": "send",
            "ts": self.ts,
            "node": self.node,
            "peer": self.peer,
            "channel": self.channel,
            "type": self.type,
            "fields": self.message.to_fields(),
        }
        if self.log_position is not None:
            out["logPosition"] = self.log_position
        return out

    def describe(self) -> str:
        return describe_record(self.to_json())


@dataclass(frozen=True, slots=True)
class StateChange:
    """An election state change (Aeron's ELECTION_STATE_CHANGE), with the values Aeron logs with it."""

    ts: int
    node: int
    from_state: str | None
    to_state: str
    reason: str = ""
    leader_id: int = -1
    candidate_term_id: int = -1
    leadership_term_id: int = -1
    log_position: int = -1
    log_leadership_term_id: int = -1
    append_position: int = -1
    catchup_position: int = -1
    cause: Cause | None = None

    def to_json(self) -> dict[str, Any]:
        return _with_cause(
            {
                "kind": "state",
                "ts": self.ts,
                "node": self.node,
                "from": self.from_state,
                "to": self.to_state,
                "reason": self.reason,
                "leaderId": self.leader_id,
                "candidateTermId": self.candidate_term_id,
                "leadershipTermId": self.leadership_term_id,
                "logPosition": self.log_position,
                "logLeadershipTermId": self.log_leadership_term_id,
                "appendPosition": self.append_position,
                "catchupPosition": self.catchup_position,
            },
            self.cause,
        )

    def describe(self) -> str:
        return describe_record(self.to_json())


@dataclass(frozen=True, slots=True)
class RoleChange:
    ts: int
    node: int
    from_role: str | None
    to_role: str
    cause: Cause | None = None

    def to_json(self) -> dict[str, Any]:
        return _with_cause(
            {"kind": "role", "ts": self.ts, "node": self.node, "from": self.from_role, "to": self.to_role},
            self.cause,
        )

    def describe(self) -> str:
        return describe_record(self.to_json())


@dataclass(frozen=True, slots=True)
class ModuleStateChange:
    """`ConsensusModule.State` changed (INIT, ACTIVE, SUSPENDED, SNAPSHOT, QUITTING, TERMINATING, CLOSED)."""

    ts: int
    node: int
    from_state: str | None
    to_state: str
    cause: Cause | None = None

    def to_json(self) -> dict[str, Any]:
        return _with_cause(
            {
                "kind": "moduleState",
                "ts": self.ts,
                "node": self.node,
                "from": self.from_state,
                "to": self.to_state,
            },
            self.cause,
        )

    def describe(self) -> str:
        return describe_record(self.to_json())


@dataclass(frozen=True, slots=True)
class ElectionStarted:
    """Aeron's NEW_ELECTION: an election begins, with its reason verbatim."""

    ts: int
    node: int
    reason: str
    leadership_term_id: int
    log_position: int
    append_position: int
    cause: Cause | None = None

    def to_json(self) -> dict[str, Any]:
        return _with_cause(
            {
                "kind": "election",
                "ts": self.ts,
                "node": self.node,
                "reason": self.reason,
                "leadershipTermId": self.leadership_term_id,
                "logPosition": self.log_position,
                "appendPosition": self.append_position,
            },
            self.cause,
        )

    def describe(self) -> str:
        return describe_record(self.to_json())


@dataclass(frozen=True, slots=True)
class NodeStateWrite:
    """node-state.dat's candidateTerm record was written."""

    ts: int
    node: int
    candidate_term_id: int
    log_position: int
    timestamp: int
    cause: Cause | None = None

    def to_json(self) -> dict[str, Any]:
        return _with_cause(
            {
                "kind": "nodeState",
                "ts": self.ts,
                "node": self.node,
                "candidateTermId": self.candidate_term_id,
                "logPosition": self.log_position,
                "timestamp": self.timestamp,
            },
            self.cause,
        )

    def describe(self) -> str:
        return describe_record(self.to_json())


@dataclass(frozen=True, slots=True)
class MarkFileWrite:
    """Before Aeron 1.41.0: the candidate term was proposed into cluster-mark.dat (the term only)."""

    ts: int
    node: int
    candidate_term_id: int
    cause: Cause | None = None

    def to_json(self) -> dict[str, Any]:
        return _with_cause(
            {"kind": "markFile", "ts": self.ts, "node": self.node, "candidateTermId": self.candidate_term_id},
            self.cause,
        )

    def describe(self) -> str:
        return describe_record(self.to_json())


@dataclass(frozen=True, slots=True)
class RecordingLogChange:
    """recording.log changed: ``op`` is the Aeron method that wrote it, ``entry`` the entry after it."""

    ts: int
    node: int
    op: str
    entry: dict[str, Any]
    cause: Cause | None = None

    def to_json(self) -> dict[str, Any]:
        return _with_cause(
            {"kind": "recordingLog", "ts": self.ts, "node": self.node, "op": self.op, "entry": self.entry},
            self.cause,
        )

    def describe(self) -> str:
        return describe_record(self.to_json())


@dataclass(frozen=True, slots=True)
class LogAppend:
    """The leader appended ``message`` to its log; ``position`` is the log position after it."""

    ts: int
    node: int
    position: int
    message: Any

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "logAppend",
            "ts": self.ts,
            "node": self.node,
            "position": self.position,
            "type": self.message.BLOCK.name,
            "fields": self.message.to_fields(),
        }

    def describe(self) -> str:
        return describe_record(self.to_json())


@dataclass(frozen=True, slots=True)
class NominationDraw:
    """The election drew its nomination delay: ``value`` is the ``nextDouble()`` the member's
    `RandomSource` gave, ``source`` where it came from (``seeded``: java.util.Random of a known seed;
    ``recorded`` and its variants: the delay a recording implies; ``scripted``: a scenario's choice)."""

    ts: int
    node: int
    value: float
    source: str
    delay_ns: int

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "random",
            "ts": self.ts,
            "node": self.node,
            "draw": "nextDouble",
            "value": self.value,
            "source": self.source,
        }

    def describe(self) -> str:
        return describe_record(self.to_json())


def _with_cause(record: dict[str, Any], cause: Cause | None) -> dict[str, Any]:
    """A record with its cause as the last key (absent when the model was given none)."""
    if cause is not None:
        record["cause"] = cause.to_json()
    return record


Output = (
    Send
    | StateChange
    | RoleChange
    | ModuleStateChange
    | ElectionStarted
    | NodeStateWrite
    | MarkFileWrite
    | RecordingLogChange
    | LogAppend
    | NominationDraw
)


class Ready:
    """What a member did since its outputs were last taken, in the order it did it (etcd raft's
    ``Ready``): iterate it for every output, or take one kind by name."""

    __slots__ = ("outputs",)

    def __init__(self, outputs: tuple[Output, ...] = ()) -> None:
        self.outputs = outputs

    def __iter__(self):
        return iter(self.outputs)

    def __len__(self) -> int:
        return len(self.outputs)

    def __getitem__(self, index: Any) -> Any:
        return self.outputs[index]

    def __bool__(self) -> bool:
        return bool(self.outputs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ready) and other.outputs == self.outputs

    def __repr__(self) -> str:
        return f"Ready({self.outputs!r})"

    def _of(self, kind: type) -> tuple[Any, ...]:
        return tuple(o for o in self.outputs if type(o) is kind)

    @property
    def sends(self) -> tuple[Send, ...]:
        return self._of(Send)

    @property
    def log_appends(self) -> tuple[LogAppend, ...]:
        return self._of(LogAppend)

    @property
    def state_changes(self) -> tuple[StateChange, ...]:
        return self._of(StateChange)

    @property
    def role_changes(self) -> tuple[RoleChange, ...]:
        return self._of(RoleChange)

    @property
    def node_state_writes(self) -> tuple[NodeStateWrite, ...]:
        return self._of(NodeStateWrite)

    @property
    def recording_log_changes(self) -> tuple[RecordingLogChange, ...]:
        return self._of(RecordingLogChange)

    @property
    def nomination_draws(self) -> tuple[NominationDraw, ...]:
        return self._of(NominationDraw)
