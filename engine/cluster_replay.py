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
    recorded run (archive ``RecordingSignal``s, recorded end-of-stream, agent-log observations, and
    when the recorded members' consensus publications were connected: ``PublicationStatus`` and
    ``MemberStart.connectedPeers``; here every offer is taken, the router decides what arrives).

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

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from engine.harness.clock import Clock
from engine.harness.driver import ClusterDriver
from engine.harness.events import input_of, member_start_of
from engine.harness.nomination import NodeClock, RecordedOrLate, SeededNomination, member_seed
from engine.harness.router import LinkRouter
from engine.invariants import InvariantChecker
from engine.model.inputs import ConsensusMessage, Input, LogEndOfStream
from engine.model.outputs import Ready, Send
from engine.replay import NOMINATION_SOURCES, SUMMARY_KEYS, state_fields
from engine.trace import TraceHasher, canonical, summary_record
from engine.versions import Model, model_for
from formats.cluster_codecs import CommitPosition
from formats.errors import DecodeError
from formats.events import Event

MS = 1_000_000
#: External inputs fed to a member as they were recorded.
MEMBER_INPUTS = frozenset({"MemberStart", "MemberStop", "MemberCrash", "End"})


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
        self.nominations = self._recorded_nominations()
        self.driver = ClusterDriver(self.model, on_ready=self._on_ready, clock=Clock(min((e.ts for e in events), default=0)))
        self.router = LinkRouter(self._arrive, self.member_ids, delays=infer_link_delays(events))
        self.seeds: dict[int, int] = {}
        self.sources: dict[int, str] = {}
        self.invariants = InvariantChecker()
        self.hasher = TraceHasher()
        self._out: list[dict[str, Any]] = []

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
        clock = self.driver.clock
        for i in self.ordered:
            event = self.events[i]
            if event.ts > self.end_ns:
                break
            if event.dir == "local" and event.type in MEMBER_INPUTS:
                clock.at(event.ts, self._input, event, self.refs[i])
            elif event.dir == "local" and event.type == "NetworkFault":
                if not _is_fault_duplicate(event, seen_faults):
                    clock.at(event.ts, self._input, event, self.refs[i])
            elif event.dir == "in" and event.channel == "ingress":
                item = input_of(event)
                if item is not None:
                    clock.at(event.ts, self._deliver, event.node, item)

    # -- the loop -------------------------------------------------------------------------------------------

    def records(self) -> Iterator[dict[str, Any]]:
        """Every trace record, the summary last."""
        self._schedule_inputs()
        clock = self.driver.clock
        while True:
            due = clock.next_time()
            if due is None or due > self.end_ns:
                break
            clock.run_until(due)
            yield from self._emit(self._out)
            self._out = []
        self.driver.advance_all(max(clock.now_ns, self.end_ns))
        yield from self._emit(self._out)
        self._out = []
        yield self._summary()

    def _input(self, event: Event, ref: Any) -> None:
        node_id = event.node
        kind = event.type
        out = self._out
        if kind == "NetworkFault":
            self.router.apply_fault(event.fields)
            out.append({"kind": "input", "ts": event.ts, "node": node_id, "type": kind, "fields": dict(event.fields)})
            return
        if kind != "End":
            out.append({"kind": "input", "ts": event.ts, "node": node_id, "type": kind, "fields": _input_fields(event)})
        if kind == "MemberStart":
            self._start(event, ref)
            return
        member = self.driver.members.get(node_id)
        if member is None:
            raise DecodeError(f"member {node_id} has a {kind} event before its MemberStart", offset=ref, unit=self.ref_kind)
        if member.ended:
            return
        if kind == "End":
            self.driver.touch(node_id, event.ts)
            self.driver.end(node_id)
            return
        session_id = member.node.view().log_publication_session_id
        item = input_of(event)
        assert item is not None
        self.driver.feed(node_id, item, event.ts)
        if kind == "MemberStop" and session_id is not None:
            self._end_of_stream(node_id, session_id, event.ts)

    def _start(self, event: Event, ref: Any) -> None:
        node_id = event.node
        try:
            start = member_start_of(event)
        except DecodeError as error:
            raise DecodeError(error.expected, offset=ref, unit=self.ref_kind) from None
        if start.connected_peers is not None:
            start = replace(start, connected_peers=None)  # the recorded publications, not these
        member = self.driver.members.get(node_id)
        restart = member is not None
        if member is not None:
            random = member.nomination  # a restart continues the member's generator
        else:
            seed = member_seed(node_id, event.fields, self.seed)
            use_recorded = self.nomination == "recorded" or (
                self.nomination == "auto" and self.seed is None and "seed" not in event.fields
            )
            if use_recorded:
                random = RecordedOrLate(
                    self.nominations.get(node_id, []), start.config.election_timeout_ns, NodeClock(fallback_ns=event.ts)
                )
                source = "recorded"
            else:
                random = SeededNomination(seed)
                source = "seeded"
            self.seeds[node_id] = seed
            self.sources[node_id] = source
        self.invariants.member_started(node_id, event.fields, restart=restart)
        self.driver.start(node_id, start, random)

    def _arrive(self, at_ns: int, member_id: int, item: Input, send: Send) -> None:
        self.driver.clock.at(at_ns, self._deliver, member_id, item)

    def _deliver(self, member_id: int, item: Input) -> None:
        member = self.driver.members.get(member_id)
        if member is None or not member.running:
            return
        if type(item) is ConsensusMessage and type(item.message) is CommitPosition:
            self.invariants.observe_committed(item.message.log_position, item.message.leadership_term_id)
        self.driver.feed(member_id, item, self.driver.clock.now_ns)

    def _end_of_stream(self, leader_id: int, session_id: int, now: int) -> None:
        """A clean stop closes the leader's log publication: its followers' images see end of stream."""
        for node_id in sorted(self.driver.members):
            member = self.driver.members[node_id]
            if node_id == leader_id or not member.running:
                continue
            if member.node.view().log_image_session_id != session_id:
                continue
            if self.router.is_cut(leader_id, node_id):
                continue
            at = now + self.router.delay(leader_id, node_id)
            self.driver.clock.at(at, self._deliver, node_id, LogEndOfStream(log_session_id=session_id))

    # -- outputs ---------------------------------------------------------------------------------------------

    def _on_ready(self, node_id: int, ready: Ready) -> None:
        records = []
        for output in ready:
            if type(output) is Send:
                self.router.route(output)
            records.append(output.to_json())
        self._out.extend(records)
        self._out.extend(self.invariants.observe(node_id, records, self.driver.members[node_id].node.view))

    def _emit(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        result = []
        for record in records:
            record = canonical(record)
            self.hasher.add(record)
            result.append(record)
        return result

    def _summary(self) -> dict[str, Any]:
        nodes = {str(node_id): state_fields(view, SUMMARY_KEYS) for node_id, view in self.driver.views().items()}
        links = {f"{a}->{b}": delay for (a, b), delay in sorted(self.router.delays.items())}
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
            defaultLinkDelayNs=self.router.default_ns,
        )


def _input_fields(event: Event) -> dict[str, Any]:
    """What an ``input`` record shows of an external input: MemberStart's settings, not its files."""
    if event.type != "MemberStart":
        return dict(event.fields)
    return {k: v for k, v in event.fields.items() if k in ("appointedLeaderId", "seed", "appendPosition")}


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
