"""What a `Node` produces: sends, state and role changes, file writes, log appends (contract §3).

Every output is a frozen, slotted value with ``ts`` (the engine's time when it happened, ns) and
``node`` (the member that produced it), ``to_json()`` giving exactly the trace record of contract §3
(``kind``, ``ts``, ``node`` first, then the kind's own keys in a fixed order), and ``describe()``
giving the one canonical line (`formats.describe`).  `Invariant` and `Divergence` are produced by
the replay layer, not by a Node; they live here so that every trace record has one home.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from formats.describe import describe_message, describe_record


@dataclass(frozen=True, slots=True)
class Send:
    """One message to one destination.  ``channel`` is ``consensus`` or ``log``; a log frame carries
    ``log_position``, the log position just after it (written as the top-level ``logPosition`` key)."""

    ts: int
    node: int
    peer: int | None
    channel: str
    message: Any
    log_position: int | None = None

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
        return describe_message(self.message, self.node, self.peer)


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

    def to_json(self) -> dict[str, Any]:
        return {
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
        }

    def describe(self) -> str:
        return describe_record(self.to_json())


@dataclass(frozen=True, slots=True)
class RoleChange:
    ts: int
    node: int
    from_role: str | None
    to_role: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": "role", "ts": self.ts, "node": self.node, "from": self.from_role, "to": self.to_role}

    def describe(self) -> str:
        return describe_record(self.to_json())


@dataclass(frozen=True, slots=True)
class ModuleStateChange:
    """`ConsensusModule.State` changed (INIT, ACTIVE, SUSPENDED, SNAPSHOT, QUITTING, TERMINATING, CLOSED)."""

    ts: int
    node: int
    from_state: str | None
    to_state: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": "moduleState", "ts": self.ts, "node": self.node, "from": self.from_state, "to": self.to_state}

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

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "election",
            "ts": self.ts,
            "node": self.node,
            "reason": self.reason,
            "leadershipTermId": self.leadership_term_id,
            "logPosition": self.log_position,
            "appendPosition": self.append_position,
        }

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

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "nodeState",
            "ts": self.ts,
            "node": self.node,
            "candidateTermId": self.candidate_term_id,
            "logPosition": self.log_position,
            "timestamp": self.timestamp,
        }

    def describe(self) -> str:
        return describe_record(self.to_json())


@dataclass(frozen=True, slots=True)
class MarkFileWrite:
    """Before Aeron 1.41.0: the candidate term was proposed into cluster-mark.dat (the term only)."""

    ts: int
    node: int
    candidate_term_id: int

    def to_json(self) -> dict[str, Any]:
        return {"kind": "markFile", "ts": self.ts, "node": self.node, "candidateTermId": self.candidate_term_id}

    def describe(self) -> str:
        return describe_record(self.to_json())


@dataclass(frozen=True, slots=True)
class RecordingLogChange:
    """recording.log changed: ``op`` is the Aeron method that wrote it, ``entry`` the entry after it."""

    ts: int
    node: int
    op: str
    entry: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"kind": "recordingLog", "ts": self.ts, "node": self.node, "op": self.op, "entry": self.entry}

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
class Invariant:
    """A Raft safety property broke (made by the replay layer)."""

    ts: int
    node: int | None
    name: str
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": "invariant", "ts": self.ts, "node": self.node, "name": self.name, "detail": self.detail}

    def describe(self) -> str:
        return describe_record(self.to_json())


@dataclass(frozen=True, slots=True)
class Divergence:
    """The replay did not do what the recording shows (made by the replay layer)."""

    ts: int
    node: int
    event: Any
    expected: Any
    actual: Any
    state: Any

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "divergence",
            "ts": self.ts,
            "node": self.node,
            "event": self.event,
            "expected": self.expected,
            "actual": self.actual,
            "state": self.state,
        }

    def describe(self) -> str:
        return describe_record(self.to_json())


Output = (
    Send | StateChange | RoleChange | ModuleStateChange | ElectionStarted | NodeStateWrite | MarkFileWrite | RecordingLogChange | LogAppend
)
