"""The incident model: a node replay's trace and the replay file's events, shaped for a reader.

`build_model` is pure: it takes the events (contract §1), the trace records of their node replay
(contract §3, summary last) and each member's files at its first start and at the end, and returns
an `Incident` of frozen values — the lanes (election state, role and down periods per member), the
leader of each term, the elections with the messages exchanged during them, the consensus messages
paired send → receive, and the divergences and invariant violations.  The HTML report and the
Perfetto trace are both renderings of this one value.

Where each fact comes from: election states, roles, election starts, leaders and problems from the
trace (what the model did with the recorded inputs); crashes, stops and restarts, and every
consensus message with its send and receive times, from the events (what was recorded).  A
message is paired with its receipt by (sender, receiver, type, fields) in order; a send with no
receipt within `MAX_LATENCY_NS` is left unpaired (lost, or the receiver was down or not captured).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from formats.events import Event

#: A recorded send is paired only with a receipt at most this much later (by the recording's clocks).
MAX_LATENCY_NS = 1_000_000_000
#: Messages drawn in an election's sequence diagram; the periodic position reports are left out.
ELECTION_MESSAGES = frozenset(
    {"CanvassPosition", "RequestVote", "Vote", "NewLeadershipTerm", "CatchupPosition", "StopCatchup"}
)
#: Fields that differ between two otherwise equal repeats of a message (not part of its identity).
_VOLATILE_FIELDS = frozenset({"timestamp"})


@dataclass(frozen=True, slots=True)
class Span:
    """One value (an election state or a role) held by a member from ``start_ns`` to ``end_ns``.

    ``via`` are the states passed through at ``start_ns`` without time in them (Aeron often walks
    LEADER_LOG_REPLICATION → LEADER_REPLAY → LEADER_INIT → LEADER_READY in one duty cycle)."""

    value: str
    start_ns: int
    end_ns: int
    via: tuple[str, ...] = ()
    note: str = ""  # for CLOSED: the term and leader the member settled on


@dataclass(frozen=True, slots=True)
class Down:
    """A member not running: ``cause`` is ``crash`` or ``stop``; ``restarted`` when a start follows."""

    start_ns: int
    end_ns: int
    cause: str
    restarted: bool


@dataclass(frozen=True, slots=True)
class Lane:
    member: int
    start_ns: int
    states: tuple[Span, ...]
    roles: tuple[Span, ...]
    down: tuple[Down, ...]


@dataclass(frozen=True, slots=True)
class Message:
    """A consensus message; ``send_ns``/``receive_ns`` are None when that side was not recorded."""

    type: str
    sender: int
    receiver: int
    fields: Mapping[str, Any]
    send_ns: int | None
    receive_ns: int | None
    send_ref: Any = None
    receive_ref: Any = None

    @property
    def ts(self) -> int:
        return self.send_ns if self.send_ns is not None else self.receive_ns  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class StateChange:
    """A member's election-state change (``path``: the states entered at ``ts``, in order)."""

    member: int
    ts: int
    from_state: str
    path: tuple[str, ...]
    leadership_term_id: Any
    candidate_term_id: Any
    leader_id: Any


@dataclass(frozen=True, slots=True)
class Term:
    leadership_term_id: int
    leader: int
    elected_ns: int
    followers: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Election:
    """Members' elections that overlap in time, as one: from the first start to the last close."""

    number: int
    start_ns: int
    end_ns: int
    members: tuple[int, ...]
    reasons: tuple[str, ...]
    terms: tuple[Term, ...]
    changes: tuple[StateChange, ...]
    messages: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class Problem:
    """A divergence (the model would have done otherwise) or a broken Raft invariant."""

    kind: str  # "divergence" or "invariant"
    ts: int | None
    member: Any
    record: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class MemberFiles:
    """What a member's node-state.dat and recording.log said at its first start and at the end."""

    member: int
    node_state_start: Mapping[str, Any] | None
    node_state_end: Mapping[str, Any] | None
    recording_log_start: tuple[Mapping[str, Any], ...]
    recording_log_end: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Incident:
    source: str
    model: str
    seed: Any
    start_ns: int
    end_ns: int
    members: tuple[int, ...]
    lanes: tuple[Lane, ...]
    terms: tuple[Term, ...]
    elections: tuple[Election, ...]
    messages: tuple[Message, ...]
    problems: tuple[Problem, ...]
    files: tuple[MemberFiles, ...]
    summary: Mapping[str, Any]

    @property
    def divergences(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.kind == "divergence")

    @property
    def invariants(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.kind == "invariant")

    def to_json(self) -> dict[str, Any]:
        """What the report holds, in brief (for `--json`)."""
        return {
            "source": self.source,
            "model": self.model,
            "members": list(self.members),
            "startTs": self.start_ns,
            "endTs": self.end_ns,
            "elections": [
                {"number": e.number, "startTs": e.start_ns, "endTs": e.end_ns, "members": list(e.members),
                 "reasons": list(e.reasons), "messages": len(e.messages)}
                for e in self.elections
            ],
            "terms": [{"leadershipTermId": t.leadership_term_id, "leader": t.leader, "electedTs": t.elected_ns,
                       "followers": list(t.followers)} for t in self.terms],
            "downPeriods": [
                {"member": lane.member, "startTs": d.start_ns, "endTs": d.end_ns, "cause": d.cause, "restarted": d.restarted}
                for lane in self.lanes for d in lane.down
            ],
            "messages": len(self.messages),
            "pairedMessages": sum(1 for m in self.messages if m.send_ns is not None and m.receive_ns is not None),
            "divergences": len(self.divergences),
            "invariants": len(self.invariants),
            "traceSha256": self.summary.get("traceSha256"),
        }


# -- building ---------------------------------------------------------------------------------------


def build_model(
    events: Sequence[Event],
    records: Sequence[Mapping[str, Any]],
    *,
    source: str,
    refs: Sequence[Any] | None = None,
    files_start: Mapping[int, Mapping[str, Any]] | None = None,
    files_end: Mapping[int, Mapping[str, Any]] | None = None,
) -> Incident:
    """The `Incident` of a node replay: ``records`` is its whole trace (summary last), ``files_*``
    each member's ``inspect()`` (its ``nodeState`` and ``recordingLog``) at first start and end."""
    refs = list(refs) if refs is not None else list(range(len(events)))
    ordered = sorted(range(len(events)), key=lambda i: (events[i].ts, i))
    summary = next((r for r in reversed(records) if r.get("kind") == "summary"), {})
    times = [events[i].ts for i in ordered] + [r["ts"] for r in records if isinstance(r.get("ts"), int)]
    start_ns = min(times) if times else 0
    end_ns = max(times) if times else 0
    members = sorted({e.node for e in events if e.type == "MemberStart"} | {r["node"] for r in records
                                                                            if isinstance(r.get("node"), int)})
    down = _down_periods(events, ordered, end_ns)
    starts = _first_starts(events, ordered)
    lanes = tuple(_lane(m, starts.get(m, start_ns), records, down.get(m, ()), events, ordered, end_ns) for m in members)
    changes = _state_changes(records)
    terms = _terms(changes)
    messages = _pair_messages(events, ordered, refs)
    elections = _elections(records, changes, terms, messages, down, end_ns)
    problems = tuple(
        Problem(kind=r["kind"], ts=r.get("ts"), member=r.get("node"), record=r)
        for r in records if r.get("kind") in ("divergence", "invariant")
    )
    files = tuple(
        MemberFiles(
            member=m,
            node_state_start=_node_state(files_start, m),
            node_state_end=_node_state(files_end, m),
            recording_log_start=_recording_log(files_start, m),
            recording_log_end=_recording_log(files_end, m),
        )
        for m in members
    )
    return Incident(
        source=source,
        model=str(summary.get("model", "")),
        seed=summary.get("seed"),
        start_ns=start_ns,
        end_ns=end_ns,
        members=tuple(members),
        lanes=lanes,
        terms=terms,
        elections=elections,
        messages=messages,
        problems=problems,
        files=files,
        summary=summary,
    )


def _first_starts(events: Sequence[Event], ordered: Sequence[int]) -> dict[int, int]:
    starts: dict[int, int] = {}
    for i in ordered:
        event = events[i]
        if event.type == "MemberStart" and event.dir == "local":
            starts.setdefault(event.node, event.ts)
    return starts


def _down_periods(events: Sequence[Event], ordered: Sequence[int], end_ns: int) -> dict[int, tuple[Down, ...]]:
    """Crash or stop → the next start of the same member (or the end of the recording)."""
    open_: dict[int, tuple[int, str]] = {}
    found: dict[int, list[Down]] = {}
    for i in ordered:
        event = events[i]
        if event.dir != "local":
            continue
        if event.type in ("MemberCrash", "MemberStop") and event.node not in open_:
            open_[event.node] = (event.ts, "crash" if event.type == "MemberCrash" else "stop")
        elif event.type == "MemberStart" and event.node in open_:
            began, cause = open_.pop(event.node)
            found.setdefault(event.node, []).append(Down(began, event.ts, cause, True))
    for member, (began, cause) in open_.items():
        found.setdefault(member, []).append(Down(began, max(began, end_ns), cause, False))
    return {m: tuple(d) for m, d in found.items()}


def _spans(changes: Iterable[tuple[int, str]], initial: str | None, start_ns: int, end_ns: int,
           cuts: Sequence[tuple[int, int, str | None]]) -> tuple[Span, ...]:
    """Spans from (ts, new value) changes; zero-length values become the next span's ``via``.
    ``cuts`` are (start, end, value after) intervals in which the member held nothing (down)."""
    # At one instant: a restart first, then the changes it led to; a crash after what came before it.
    points = sorted([(ts, 0, value) for ts, value in changes] + [(s, 1, None) for s, _, _ in cuts]
                    + [(e, -1, after) for _, e, after in cuts], key=lambda p: (p[0], p[1]))
    spans: list[Span] = []
    value, since, via = initial, start_ns, []
    for ts, what, new in points:
        if what == 1:  # down: close what was held
            if value is not None and ts > since:
                spans.append(Span(value, since, ts, tuple(via)))
            value, via = None, []
            continue
        if what == -1:  # back up
            value, since, via = new, ts, []
            continue
        if value is not None and ts > since:
            spans.append(Span(value, since, ts, tuple(via)))
            via = []
        elif value is not None:
            via.append(value)
        value, since = new, ts
    if value is not None and end_ns > since:
        spans.append(Span(value, since, end_ns, tuple(via)))
    return tuple(spans)


def _lane(member: int, start_ns: int, records: Sequence[Mapping[str, Any]], down: Sequence[Down],
          events: Sequence[Event], ordered: Sequence[int], end_ns: int) -> Lane:
    state_changes = [(r["ts"], str(r.get("to"))) for r in records if r.get("kind") == "state" and r.get("node") == member]
    role_changes = [(r["ts"], str(r.get("to"))) for r in records if r.get("kind") == "role" and r.get("node") == member]
    # A started process is a FOLLOWER until it says otherwise (Aeron's ConsensusModuleAgent starts so).
    restarts = [(d.start_ns, d.end_ns, "FOLLOWER" if d.restarted else None) for d in down]
    states = _spans(state_changes, None, start_ns, end_ns, [(s, e, None) for s, e, _ in restarts])
    settled = {r["ts"]: (r.get("leadershipTermId"), r.get("leaderId")) for r in records
               if r.get("kind") == "state" and r.get("node") == member and r.get("to") == "CLOSED"}
    states = tuple(_settled(span, settled.get(span.start_ns), member) for span in states)
    roles = _spans(role_changes, "FOLLOWER", start_ns, end_ns, restarts)
    return Lane(member=member, start_ns=start_ns, states=states, roles=roles, down=tuple(down))


def _settled(span: Span, term_leader: tuple[Any, Any] | None, member: int) -> Span:
    if span.value != "CLOSED" or term_leader is None:
        return span
    term, leader = term_leader
    if not isinstance(leader, int) or leader < 0:
        return span
    note = f"leader of term {term}" if leader == member else f"term {term}, following {leader}"
    return Span(span.value, span.start_ns, span.end_ns, span.via, note)


def _state_changes(records: Sequence[Mapping[str, Any]]) -> tuple[StateChange, ...]:
    """State records, consecutive ones of a member at the same instant merged into one path."""
    merged: list[StateChange] = []
    last: dict[int, int] = {}  # member -> index in merged of its last change
    for record in records:
        if record.get("kind") != "state":
            continue
        member, ts = record.get("node"), record["ts"]
        index = last.get(member)
        change = StateChange(
            member=member, ts=ts, from_state=str(record.get("from")), path=(str(record.get("to")),),
            leadership_term_id=record.get("leadershipTermId"), candidate_term_id=record.get("candidateTermId"),
            leader_id=record.get("leaderId"),
        )
        if index is not None and index == len(merged) - 1 and merged[index].ts == ts:
            previous = merged[index]
            change = StateChange(member=member, ts=ts, from_state=previous.from_state, path=previous.path + change.path,
                                 leadership_term_id=change.leadership_term_id,
                                 candidate_term_id=change.candidate_term_id, leader_id=change.leader_id)
            merged[index] = change
        else:
            merged.append(change)
            last[member] = len(merged) - 1
    return tuple(merged)


def _terms(changes: Sequence[StateChange]) -> tuple[Term, ...]:
    """The leader of each term: the member that entered a LEADER_* state naming itself leader.
    Followers are the members that reached FOLLOWER_READY for that term and leader."""
    elected: dict[int, tuple[int, int]] = {}
    followers: dict[int, set[int]] = {}
    for change in changes:
        term, leader = change.leadership_term_id, change.leader_id
        if not isinstance(term, int) or term < 0 or not isinstance(leader, int) or leader < 0:
            continue
        if leader == change.member and any(s.startswith("LEADER_") for s in change.path):
            elected.setdefault(term, (leader, change.ts))
        elif "FOLLOWER_READY" in change.path:
            followers.setdefault(term, set()).add(change.member)
    return tuple(
        Term(leadership_term_id=term, leader=leader, elected_ns=ts,
             followers=tuple(sorted(followers.get(term, set()) - {leader})))
        for term, (leader, ts) in sorted(elected.items())
    )


_SCALARS = (int, str, float, bool, type(None))


def message_identity(fields: Mapping[str, Any]) -> tuple:
    """A message's fields without the ones that differ between repeats, as a hashable value."""
    return tuple(sorted((key, value if isinstance(value, _SCALARS) else repr(value))
                        for key, value in fields.items() if key not in _VOLATILE_FIELDS))


def _pair_messages(events: Sequence[Event], ordered: Sequence[int], refs: Sequence[Any]) -> tuple[Message, ...]:
    """Every consensus message recorded, a send paired with its receipt where both were recorded."""
    sends: dict[tuple, deque[int]] = {}
    receipts: dict[tuple, deque[int]] = {}
    pairs: dict[int, int] = {}  # send index -> receive index
    paired: set[int] = set()
    for i in ordered:
        event = events[i]
        if event.channel != "consensus" or event.dir not in ("in", "out") or not isinstance(event.peer, int):
            continue
        if event.dir == "out":
            key = (event.node, event.peer, event.type, message_identity(event.fields))
            waiting = receipts.get(key)
            while waiting and event.ts - events[waiting[0]].ts > MAX_LATENCY_NS:
                waiting.popleft()
            if waiting:
                j = waiting.popleft()
                pairs[i] = j
                paired.add(j)
            else:
                sends.setdefault(key, deque()).append(i)
        else:
            key = (event.peer, event.node, event.type, message_identity(event.fields))
            waiting = sends.get(key)
            while waiting and event.ts - events[waiting[0]].ts > MAX_LATENCY_NS:
                waiting.popleft()
            if waiting:
                j = waiting.popleft()
                pairs[j] = i
                paired.add(i)
            else:
                receipts.setdefault(key, deque()).append(i)
    messages: list[Message] = []
    for i in ordered:
        event = events[i]
        if event.channel != "consensus" or event.dir not in ("in", "out") or not isinstance(event.peer, int):
            continue
        if event.dir == "out":
            j = pairs.get(i)
            receipt = events[j] if j is not None else None
            messages.append(Message(
                type=event.type, sender=event.node, receiver=event.peer, fields=event.fields, send_ns=event.ts,
                receive_ns=receipt.ts if receipt is not None else None, send_ref=refs[i],
                receive_ref=refs[j] if j is not None else None,
            ))
        elif i not in paired:
            messages.append(Message(
                type=event.type, sender=event.peer, receiver=event.node, fields=event.fields, send_ns=None,
                receive_ns=event.ts, receive_ref=refs[i],
            ))
    messages.sort(key=lambda m: m.ts)
    return tuple(messages)


def _elections(records: Sequence[Mapping[str, Any]], changes: Sequence[StateChange], terms: Sequence[Term],
               messages: Sequence[Message], down: Mapping[int, Sequence[Down]], end_ns: int) -> tuple[Election, ...]:
    """Each member's election runs from its NEW_ELECTION (or its first state) to its CLOSED, its
    crash or stop, or the end; elections of several members that overlap in time are one."""
    windows: list[tuple[int, int, int, str]] = []  # start, end, member, reason
    open_: dict[int, tuple[int, str]] = {}
    for record in records:
        kind, member = record.get("kind"), record.get("node")
        if kind == "election" and member not in open_:
            open_[member] = (record["ts"], str(record.get("reason") or ""))
        elif kind == "state" and record.get("to") == "CLOSED" and member in open_:
            began, reason = open_.pop(member)
            windows.append((began, record["ts"], member, reason))
    for member, (began, reason) in open_.items():
        stops = [d.start_ns for d in down.get(member, ()) if d.start_ns >= began]
        windows.append((began, min(stops) if stops else end_ns, member, reason))
    windows.sort()
    groups: list[list[tuple[int, int, int, str]]] = []
    for window in windows:
        if groups and window[0] <= max(w[1] for w in groups[-1]):
            groups[-1].append(window)
        else:
            groups.append([window])
    elections = []
    for number, group in enumerate(groups, 1):
        start, end = group[0][0], max(w[1] for w in group)
        reasons = tuple(dict.fromkeys(f"{w[2]}: {w[3]}" for w in group if w[3]))
        elections.append(Election(
            number=number, start_ns=start, end_ns=end,
            members=tuple(sorted({w[2] for w in group})),
            reasons=reasons,
            terms=tuple(t for t in terms if start <= t.elected_ns <= end),
            changes=tuple(c for c in changes if start <= c.ts <= end),
            messages=tuple(m for m in messages if m.type in ELECTION_MESSAGES and start <= m.ts <= end),
        ))
    return tuple(elections)


def _node_state(files: Mapping[int, Mapping[str, Any]] | None, member: int) -> Mapping[str, Any] | None:
    state = (files or {}).get(member)
    if not state:
        return None
    node_state = state.get("nodeState")
    if not isinstance(node_state, Mapping):
        return None
    return node_state.get("candidateTerm") if isinstance(node_state.get("candidateTerm"), Mapping) else node_state


def _recording_log(files: Mapping[int, Mapping[str, Any]] | None, member: int) -> tuple[Mapping[str, Any], ...]:
    state = (files or {}).get(member) or {}
    entries = state.get("recordingLog") or ()
    return tuple(e for e in entries if isinstance(e, Mapping))
