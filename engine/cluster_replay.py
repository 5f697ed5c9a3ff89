"""Cluster replay (`recount replay --mode cluster`): re-run every member together under a model.

Node replay (`engine.replay`) feeds each member what it received in the recording, so it can only
say where a member would have *deviated*.  A different Aeron version's members would have sent
different messages, so to see what that version would have done, the members must talk to each
other.  Cluster replay keeps what came from outside the cluster and lets the model produce the rest:

kept as recorded (the external inputs)
    ``MemberStart`` (with its files, config and seed), ``MemberStop``, ``MemberCrash`` and ``End``
    of every member; client ingress (``in`` events on channel ``ingress``, delivered to the member
    that received them, at the time they arrived: a member that does not lead then ignores them);
    network faults (the simulator's ``NetworkFault`` observations: partitions, isolations, one-way
    cuts, heals, link changes).
produced by the model
    every consensus message and every log frame between members.  A member's ``Send`` is delivered to
    its peer after that link's delay, unless a cut separates them at the moment it is sent or the
    peer is not running when it arrives.  When a leader stops cleanly, each member following its log
    gets the log's end of stream (``LogEndOfStream``) one link delay later.
dropped
    what the recording's members sent and received between themselves, and evidence tied to the
    recorded run (archive ``RecordingSignal``s, recorded end-of-stream, agent-log observations).

Link delays are inferred from the capture: for each direction ``a → b``, every consensus message
recorded as sent by ``a`` (``out``) is paired, in order, with the first equal message recorded as
received by ``b`` from ``a`` (``in``) not yet paired; the delay is the median of ``in.ts − out.ts``
over those pairs (the lower median; negative values, from clocks that disagree, count as 0).  A
direction with no pairs takes the median over all directions, else 1 ms.  A ``link`` fault with a
``latency`` replaces that direction's (or every direction's) delay from then on.

Time.  One loop over one virtual clock: the next thing to happen is the earliest of a member's
timer (`Node.next_wakeup_ns`), a delivery, or an external input.  At each such time every running
member is first advanced to it (timers run before inputs of the same instant), then the inputs and
deliveries due are handled in the order they were scheduled.  Members are always visited in id
order.  Nomination delays are drawn from ``java.util.Random(seed)`` per member (``MemberStart.seed``,
else ``--seed`` + memberId, else memberId), one generator per member for the whole run (a restart
continues it, as the simulator does); with ``nomination="recorded"`` (or "auto" for a member whose
MemberStart has no seed when no seed is given) a member uses the delay its recorded RequestVotes imply,
as in node replay.

Output: trace records as node replay prints them (contract §3: state, role, send, nodeState,
recordingLog, logAppend, election, random, invariant), plus ``input`` records for the external inputs
(``{"kind":"input","ts","node","type","fields"}``), and the summary last with ``"mode":"cluster"``,
the model, the seeds and the inferred link delays.  Divergences are not computed here (``recount diff``
compares two runs).  Pure: no I/O, no clock, no threads; equal inputs give equal records.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.harness.events import input_of, member_start_of
from engine.invariants import InvariantChecker
from engine.model.outputs import Send
from engine.replay import NOMINATION_SOURCES, SUMMARY_KEYS, SeededNomination, member_seed
from engine.trace import TraceHasher, canonical, summary_record
from engine.versions import Model, model_for
from formats.errors import DecodeError
from formats.events import Event

MS = 1_000_000
DEFAULT_LINK_DELAY_NS = MS
#: External inputs fed to a member as they were recorded.
MEMBER_INPUTS = frozenset({"MemberStart", "MemberStop", "MemberCrash", "End"})

_INPUT, _DELIVER = 0, 1


# -- link delays ---------------------------------------------------------------------------------------------


def _message_key(event: Event) -> tuple[str, str]:
    fields = {k: v for k, v in event.fields.items() if k != "timestamp"}
    return event.type, json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)


def infer_link_delays(events: Sequence[Event]) -> dict[tuple[int, int], int]:
    """Per-direction delay (ns) from paired out/in consensus messages (see the module docstring)."""
    sent: dict[tuple[int, int], dict[tuple[str, str], list[int]]] = {}
    samples: dict[tuple[int, int], list[int]] = {}
    ordered = sorted(range(len(events)), key=lambda i: (events[i].ts, i))
    pending_in: list[Event] = []
    for i in ordered:
        event = events[i]
        if event.channel != "consensus" or event.peer is None:
            continue
        if event.dir == "out":
            sent.setdefault((event.node, event.peer), {}).setdefault(_message_key(event), []).append(event.ts)
        elif event.dir == "in":
            pending_in.append(event)
    # Receives are paired after all sends are known: clocks may disagree, so an `in` can precede its `out`.
    for event in pending_in:
        link = (event.peer, event.node)
        queue = sent.get(link, {}).get(_message_key(event))
        if queue:
            samples.setdefault(link, []).append(max(0, event.ts - queue.pop(0)))
    delays = {link: _lower_median(values) for link, values in samples.items()}
    return dict(sorted(delays.items()))


def _lower_median(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 2]


class Network:
    """Who can reach whom, and how long it takes: the recorded faults, applied as they happen."""

    def __init__(self, delays: Mapping[tuple[int, int], int]) -> None:
        self.delays = dict(delays)
        overall = sorted(self.delays.values())
        self.default_ns = overall[(len(overall) - 1) // 2] if overall else DEFAULT_LINK_DELAY_NS
        self.cuts: list[tuple[str, frozenset[tuple[int, int]]]] = []

    def delay(self, source: int, target: int) -> int:
        return self.delays.get((source, target), self.default_ns)

    def is_cut(self, source: int, target: int) -> bool:
        return any((source, target) in pairs for _, pairs in self.cuts)

    def apply(self, fields: Mapping[str, Any], members: Sequence[int]) -> None:
        """One ``NetworkFault`` observation (the simulator's fields)."""
        kind = fields.get("fault")
        if kind == "partition":
            groups = [tuple(int(m) for m in g) for g in fields.get("groups") or []]
            pairs = {(a, b) for i, g in enumerate(groups) for j, h in enumerate(groups) if i != j for a in g for b in h}
            name = "partition " + " | ".join(",".join(str(m) for m in g) for g in groups)
            self._cut(name, pairs)
        elif kind == "isolate":
            member = int(fields["member"])
            pairs = {(member, o) for o in members if o != member} | {(o, member) for o in members if o != member}
            self._cut(f"isolate {member}", pairs)
        elif kind == "oneway":
            source, target = int(fields["from"]), int(fields["to"])
            self._cut(f"oneway {source}->{target}", {(source, target)})
        elif kind == "heal":
            healed = fields.get("healed")
            if isinstance(healed, list):
                names = set(healed)
                self.cuts = [c for c in self.cuts if c[0] not in names]
            else:
                self.cuts = []
        elif kind == "link":
            latency = fields.get("latency")
            if isinstance(latency, int) and not isinstance(latency, bool):
                source, target = fields.get("from"), fields.get("to")
                if isinstance(source, int) and isinstance(target, int):
                    self.delays[(source, target)] = latency
                else:
                    self.default_ns = latency
                    for link in self.delays:
                        self.delays[link] = latency

    def _cut(self, name: str, pairs: set[tuple[int, int]]) -> None:
        self.cuts.append((name, frozenset(pairs)))


# -- the replay ----------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Member:
    node: Any
    random: Any
    source: str
    draws_seen: int = 0
    ended: bool = False


def _is_fault_duplicate(event: Event, seen: set[tuple[int, str]]) -> bool:
    # The simulator records one NetworkFault per affected member; the fault is one.
    key = (event.ts, json.dumps(dict(event.fields), sort_keys=True, default=str))
    if key in seen:
        return True
    seen.add(key)
    return False


class ClusterReplay:
    """All members of a recording, re-run together under one model (see the module docstring)."""

    def __init__(
        self,
        events: Iterable[Event],
        *,
        model: str | Model = "1.47.3",
        seed: int | None = None,
        until: int | None = None,
        nomination: str = "auto",
        refs: Sequence[Any] | None = None,
        ref_kind: str = "seq",
    ) -> None:
        if nomination not in NOMINATION_SOURCES:
            raise ValueError(f"nomination must be one of {', '.join(NOMINATION_SOURCES)}, got {nomination!r}")
        self.model = model if isinstance(model, Model) else model_for(model)
        self.seed = seed
        self.nomination = nomination
        events = list(events)
        self.refs = list(refs) if refs is not None else list(range(len(events)))
        self.ref_kind = ref_kind
        self.ordered = sorted(range(len(events)), key=lambda i: (events[i].ts, i))
        self.events = events
        self.until = until
        last = max((e.ts for e in events), default=0)
        self.end_ns = until if until is not None else last
        self.member_ids = sorted({e.node for e in events if e.type == "MemberStart" and e.dir == "local"})
        self.network = Network(infer_link_delays(events))
        self.nominations = self._recorded_nominations()
        self.members: dict[int, _Member] = {}
        self.seeds: dict[int, int] = {}
        self.sources: dict[int, str] = {}
        self.invariants = InvariantChecker()
        self.hasher = TraceHasher()
        self.queue: list[tuple[int, int, int, Any]] = []
        self.sequence = 0
        self.now = min((e.ts for e in events), default=0)

    # -- setup -------------------------------------------------------------------------------------------

    def _recorded_nominations(self) -> dict[int, list[int]]:
        first: dict[int, dict[Any, int]] = {}
        for i in self.ordered:
            event = self.events[i]
            if event.dir == "out" and event.type == "RequestVote":
                terms = first.setdefault(event.node, {})
                terms.setdefault(event.fields.get("candidateTermId"), event.ts)
        return {node: sorted(times.values()) for node, times in sorted(first.items())}

    def _schedule_inputs(self) -> None:
        seen_faults: set[tuple[int, str]] = set()
        for i in self.ordered:
            event = self.events[i]
            if event.ts > self.end_ns:
                break
            if event.dir == "local" and event.type in MEMBER_INPUTS:
                self._push(event.ts, _INPUT, (event, self.refs[i]))
            elif event.dir == "local" and event.type == "NetworkFault":
                if not _is_fault_duplicate(event, seen_faults):
                    self._push(event.ts, _INPUT, (event, self.refs[i]))
            elif event.dir == "in" and event.channel == "ingress":
                self._push(event.ts, _DELIVER, event)

    def _push(self, ts: int, kind: int, item: Any) -> None:
        self.sequence += 1
        heapq.heappush(self.queue, (ts, self.sequence, kind, item))

    # -- the loop -------------------------------------------------------------------------------------------

    def records(self) -> Iterator[dict[str, Any]]:
        """Every trace record, the summary last."""
        self._schedule_inputs()
        while True:
            wake = self._next_wakeup()
            due = self.queue[0][0] if self.queue else None
            candidates = [t for t in (wake, due) if t is not None]
            if not candidates:
                break
            now = min(candidates)
            if now > self.end_ns:
                break
            self.now = max(self.now, now)
            out: list[dict[str, Any]] = []
            self._advance_all(self.now, out)
            while self.queue and self.queue[0][0] <= self.now:
                _, _, kind, item = heapq.heappop(self.queue)
                if kind == _INPUT:
                    self._input(*item, out=out)
                else:
                    self._deliver(item, out)
            yield from self._emit(out)
        out = []
        self.now = max(self.now, self.end_ns)
        self._advance_all(self.end_ns, out)
        yield from self._emit(out)
        yield self._summary()

    def _next_wakeup(self) -> int | None:
        best = None
        for member in self.members.values():
            if member.ended or not member.node.is_running:
                continue
            tick = member.node.next_wakeup_ns()
            if tick is not None and (best is None or tick < best):
                best = tick
        return best

    def _advance_all(self, now: int, out: list) -> None:
        for node_id in sorted(self.members):
            member = self.members[node_id]
            if member.ended or not member.node.is_running:
                continue
            member.node.advance(now)
            self._collect(node_id, out)

    def _input(self, event: Event, ref: Any, *, out: list) -> None:
        node_id = event.node
        kind = event.type
        if kind == "NetworkFault":
            self.network.apply(event.fields, self.member_ids)
            out.append({"kind": "input", "ts": event.ts, "node": node_id, "type": kind, "fields": dict(event.fields)})
            return
        if kind != "End":
            out.append({"kind": "input", "ts": event.ts, "node": node_id, "type": kind, "fields": _input_fields(event)})
        if kind == "MemberStart":
            self._start(event, ref, out)
            return
        member = self.members.get(node_id)
        if member is None:
            raise DecodeError(f"member {node_id} has a {kind} event before its MemberStart", offset=ref, unit=self.ref_kind)
        if member.ended:
            return
        if kind == "End":
            member.node.advance(event.ts)
            self._collect(node_id, out)
            member.ended = True
            return
        session_id = _log_session_id(member.node)
        member.node.step(input_of(event), event.ts)
        self._collect(node_id, out)
        if kind == "MemberStop" and session_id is not None:
            self._end_of_stream(node_id, session_id, event.ts)

    def _start(self, event: Event, ref: Any, out: list) -> None:
        node_id = event.node
        try:
            start = member_start_of(event)
        except DecodeError as error:
            raise DecodeError(error.expected, offset=ref, unit=self.ref_kind) from None
        member = self.members.get(node_id)
        restart = member is not None
        if member is not None:
            member.ended = False
            member.node.step(input_of(event), event.ts)  # a restart: the Node keeps its files
        else:
            seed = member_seed(node_id, event.fields, self.seed)
            recorded = self.nominations.get(node_id, [])
            use_recorded = self.nomination == "recorded" or (
                self.nomination == "auto" and self.seed is None and "seed" not in event.fields
            )
            holder: dict[str, Any] = {}
            if use_recorded:
                random: Any = RecordedOrLate(recorded, start.config.election_timeout_ns, lambda: _clock(holder, event.ts))
                source = "recorded"
            else:
                random = SeededNomination(seed)
                source = "seeded"
            node = self.model.new_node(node_id, start, random=random)
            holder["node"] = node
            member = _Member(node, random, source)
            self.members[node_id] = member
            self.seeds[node_id] = seed
            self.sources[node_id] = source
        self.invariants.member_started(node_id, event.fields, restart=restart)
        member.node.advance(event.ts)
        self._collect(node_id, out)

    def _deliver(self, event: Event, out: list) -> None:
        member = self.members.get(event.node)
        if member is None or member.ended or not member.node.is_running:
            return
        if event.type == "CommitPosition":
            position = event.fields.get("logPosition")
            if isinstance(position, int):
                self.invariants.observe_committed(position)
        member.node.step(input_of(event), event.ts)
        self._collect(event.node, out)

    def _end_of_stream(self, leader_id: int, session_id: int, now: int) -> None:
        """A clean stop closes the leader's log publication: its followers' images see end of stream."""
        for node_id in sorted(self.members):
            member = self.members[node_id]
            if node_id == leader_id or member.ended or not member.node.is_running:
                continue
            image = getattr(getattr(member.node, "agent", None), "log_image", None)
            if image is None or getattr(image, "session_id", None) != session_id:
                continue
            if self.network.is_cut(leader_id, node_id):
                continue
            at = now + self.network.delay(leader_id, node_id)
            self._push(
                at,
                _DELIVER,
                Event(
                    ts=at,
                    node=node_id,
                    dir="local",
                    peer=None,
                    channel="local",
                    type="LogEndOfStream",
                    fields={"logSessionId": session_id},
                ),
            )

    # -- outputs ---------------------------------------------------------------------------------------------

    def _collect(self, node_id: int, out: list) -> None:
        member = self.members[node_id]
        outputs = member.node.take_outputs()
        if not outputs:
            return
        records = []
        for output in outputs:
            if type(output) is Send:
                self._route(output)
            records.append(output.to_json())
        records = self._with_draws(node_id, member, records)
        out.extend(records)
        out.extend(self.invariants.observe(node_id, records, member.node.inspect))

    def _route(self, send: Send) -> None:
        source, target = send.node, send.peer
        if target is None or target == source or target not in self.member_ids:
            return
        if send.channel not in ("consensus", "log"):
            return
        if self.network.is_cut(source, target):
            return
        at = send.ts + self.network.delay(source, target)
        extra = {"logPosition": send.log_position} if send.log_position is not None else None
        event = Event(
            ts=at,
            node=target,
            dir="in",
            peer=source,
            channel=send.channel,
            type=send.message.BLOCK.name,
            fields=send.message.to_fields(),
            extra=extra,
        )
        self._push(at, _DELIVER, event)

    def _with_draws(self, node_id: int, member: _Member, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A ``random`` record before each CANVASS → NOMINATE that drew a value (as node replay writes it)."""
        draws = getattr(member.random, "draws", [])
        if len(draws) == member.draws_seen:
            return records
        fresh = list(draws[member.draws_seen :])
        member.draws_seen = len(draws)
        result: list[dict[str, Any]] = []
        for record in records:
            if fresh and record["kind"] == "state" and record.get("to") == "NOMINATE":
                result.append(_draw_record(record["ts"], node_id, member, fresh.pop(0)))
            result.append(record)
        for draw in fresh:
            result.append(_draw_record(self.now, node_id, member, draw))
        return result

    def _emit(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        result = []
        for record in records:
            record = canonical(record)
            self.hasher.add(record)
            result.append(record)
        return result

    def _summary(self) -> dict[str, Any]:
        nodes = {}
        for node_id in sorted(self.members):
            state = self.members[node_id].node.inspect()
            nodes[str(node_id)] = {key: state.get(key) for key in SUMMARY_KEYS}
        links = {f"{a}->{b}": delay for (a, b), delay in sorted(self.network.delays.items())}
        return summary_record(
            ts=self.end_ns,
            model=self.model.name,
            seed=self.seed if self.seed is not None else 0,
            nodes=nodes,
            divergences=0,
            trace_sha256=self.hasher.hexdigest(),
            mode="cluster",
            seeds={str(n): self.seeds[n] for n in sorted(self.seeds)},
            nominationDelay={str(n): self.sources[n] for n in sorted(self.sources)},
            linkDelaysNs=links,
            defaultLinkDelayNs=self.network.default_ns,
        )


class RecordedOrLate:
    """The nomination delays a recording implies, for a member whose generator is unknown.

    A draw puts the nomination on the millisecond of the member's next recorded RequestVote when that
    is within reach (node replay's oracle, `engine.replay.RecordedNomination`), or as late as possible
    but one millisecond early when it is not (a capture's MemberStart times are often earlier than the
    processes really started).  A member with no recorded RequestVote left did not nominate, most
    likely because another member's request reached it first: its draw is the longest possible delay
    (``nextDouble`` just below 1), so that a recorded nominator is not beaten by an invented early one.
    Each draw is remembered with its source.
    """

    __slots__ = ("nominations_ns", "half_timeout_ns", "clock", "draws", "_next")

    def __init__(self, nominations_ns: Sequence[int], election_timeout_ns: int, clock: Any) -> None:
        self.nominations_ns = sorted(nominations_ns)
        self.half_timeout_ns = election_timeout_ns >> 1
        self.clock = clock
        self.draws: list[tuple[float, str]] = []
        self._next = 0

    def next_double(self) -> float:
        now = self.clock()
        now_tick = now - now % MS
        times = self.nominations_ns
        while self._next < len(times) and times[self._next] - times[self._next] % MS < now_tick:
            self._next += 1
        if self._next < len(times):
            delay = times[self._next] - times[self._next] % MS - now_tick
            self._next += 1
            if delay < self.half_timeout_ns:
                value = (delay + 0.5) / self.half_timeout_ns
                self.draws.append((value, "recorded"))
                return value
            # Out of reach (a capture's MemberStart times are often earlier than the real starts): as
            # late as possible, yet a millisecond before the members that never nominated.
            value = (max(self.half_timeout_ns - MS, 0) + 0.5) / self.half_timeout_ns
            self.draws.append((value, "recorded-late"))
            return value
        value = (self.half_timeout_ns - 0.5) / self.half_timeout_ns
        self.draws.append((value, "latest"))
        return value


def _draw_record(ts: int | None, node_id: int, member: _Member, draw: Any) -> dict[str, Any]:
    value, source = draw if isinstance(draw, tuple) else (draw, member.source)
    return {"kind": "random", "ts": ts, "node": node_id, "draw": "nextDouble", "value": value, "source": source}


def _input_fields(event: Event) -> dict[str, Any]:
    """What an ``input`` record shows of an external input: MemberStart's settings, not its files."""
    if event.type != "MemberStart":
        return dict(event.fields)
    return {k: v for k, v in event.fields.items() if k in ("appointedLeaderId", "seed", "appendPosition")}


def _log_session_id(node: Any) -> int | None:
    """The session id of the member's log publication while it leads (None: it does not)."""
    agent = getattr(node, "agent", None)
    if agent is None or not getattr(agent, "has_log_publication", False):
        return None
    return getattr(agent, "log_publication_session_id", None)


def _clock(holder: Mapping[str, Any], default: int) -> int:
    node = holder.get("node")
    agent = getattr(node, "agent", None)
    return agent.clock_ns() if agent is not None else default


def cluster_replay(
    events: Iterable[Event],
    *,
    model: str | Model = "1.47.3",
    seed: int | None = None,
    until: int | None = None,
    nomination: str = "auto",
    refs: Sequence[Any] | None = None,
    ref_kind: str = "seq",
) -> Iterator[dict[str, Any]]:
    """Cluster replay of ``events`` under ``model``: trace records, the summary last.  Pure."""
    return ClusterReplay(
        events, model=model, seed=seed, until=until, nomination=nomination, refs=refs, ref_kind=ref_kind
    ).records()
