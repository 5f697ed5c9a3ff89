"""The whole-cluster simulation: N engine `Node`s on one virtual clock, talking through `wire`.

Theory of operation.  One `Scheduler` holds everything that will happen, in (time, seq) order:
datagrams arriving, each member's next timer (`Node.next_wakeup_ns`), the scenario's faults, the
clients' next requests.  Time is absolute (ns since the epoch, starting at the scenario's ``start``),
so Aeron's cluster-clock timestamps, the pcaps and the events all show the same wall clock.

A member is a `Node` plus its media driver (`wire.Driver`): consensus publications to every peer,
subscriptions on its consensus, log, catch-up and ingress endpoints.  The loop:

* a datagram completes a message at a member's image → it becomes an ``in`` event (consensus, log
  with its ``logPosition``, or ingress), is recorded, and is stepped into the member's Node;
* a member's timer fires → ``Node.advance``;
* after either, the Node's outputs are acted on: a consensus `Send` is offered to the publication to
  that peer (and becomes an ``out`` event when its last frame actually leaves, which is when a
  capture on that host would see it); the leader's `LogAppend`s go to its multi-destination log
  publication (created when the engine enters LEADER_LOG_REPLICATION, at the append position, with the
  engine's log session id, closed with end-of-stream when it stops leading); log `Send`s below the
  log publication's tail are a catch-up: an archive replay publication from the leader's host to the
  follower's catch-up endpoint, with the log's session id, stopped when the leader sends StopCatchup;
  state changes, role changes, new elections and received consensus messages become agent-log lines.
* faults: ``crash`` records MemberCrash and takes the host dark (the Node and its driver stop; its
  files stay as they were), ``stop`` records MemberStop and closes cleanly (end of stream on every
  publication), ``restart`` starts a new process and driver from the files left on disk (recorded as
  a MemberStart; the Node keeps its recording.log, node-state.dat and log recording), network faults
  change the `Network` and are recorded as ``NetworkFault`` observations.
* clients connect to whoever leads (SessionConnectRequest; the leader's SessionOpenEvent tells them
  their cluster session id, as the egress SessionEvent would) and then send SessionMessageHeader +
  payload at their interval; the leader appends them to its log, payload and all.

Not on the wire, on purpose: archive traffic (the replication a follower runs against the leader's
archive in FOLLOWER_LOG_REPLICATION is done by the engine's simulated archive; its bytes are copied
here, not sent), egress to clients, RTT measurements.  Every member's endpoints stay subscribed while
it runs (the engine's own log subscription comes and goes in the model only), and the catch-up and
live log endpoints have an image each (Aeron merges them in one multi-destination subscription).

What a member's log recording holds is tracked here, frame by frame (its bytes by end position), so
that a catch-up replays exactly the bytes the leader appended or received: the engine's own model of
the log keeps messages but not the application payloads behind SessionMessageHeaders.

Determinism: one seeded `random.Random` per purpose (network, each driver life, clock origins),
derived from the scenario seed by name; each Node gets a `JavaRandom` seeded with `member_seed`
(recorded in its MemberStart, so `recount replay` draws the same nomination delays); iteration is
always in member-id order.  The same scenario and seed give the same events, bytes and files.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from engine.harness.clock import Clock
from engine.harness.driver import ClusterDriver
from engine.harness.events import member_start_of
from engine.model.inputs import (
    ConsensusMessage,
    End,
    IngressMessage,
    Input,
    LogEndOfStream,
    LogFrame,
    LogFrames,
    MemberCrash,
    MemberStop,
    PublicationStatus,
)
from engine.model.javarandom import JavaRandom
from engine.model.node import Node
from engine.model.outputs import (
    ElectionStarted,
    LogAppend,
    ModuleStateChange,
    Ready,
    RoleChange,
    Send,
    StateChange,
)
from engine.versions import release_model
from formats.agent_log import cluster_event, format_log_started, format_record
from formats.cluster_codecs import (
    BooleanType,
    SessionConnectRequest,
    SessionMessageHeader,
    SessionOpenEvent,
)
from formats.cluster_codecs_ext import decode_cluster
from formats.cluster_members import parse_cluster_members, split_endpoint
from formats.errors import DecodeError
from formats.events import Event
from formats.sbe import encode
from formats.udp import SETUP_GROUP_FLAG
from recorder.simulate.network import Network
from recorder.simulate.scenario import CLIENT_HOST, CRASHED, EGRESS_PORT, FOLLOWER, LEADER, Fault, Scenario
from recorder.simulate.wire import (
    CONSENSUS_STREAM_ID,
    CONSENSUS_TERM_LENGTH,
    INGRESS_STREAM_ID,
    INGRESS_TERM_LENGTH,
    LOG_STREAM_ID,
    LOG_TERM_LENGTH,
    CaptureRecord,
    Delivery,
    Endpoint,
    Image,
    Publication,
    Transport,
    framed_length,
)

CLIENT = "client"
#: `AeronCluster.Configuration.PROTOCOL_SEMANTIC_VERSION` (0.3.0).
CLIENT_PROTOCOL_VERSION = 0 << 16 | 3 << 8 | 0
SESSION_HEADER_LENGTH = 32
CLIENT_RETRY_NS = 100_000_000

#: Received consensus messages the agent logs (ClusterEventCode), with Aeron's printed field names.
_AGENT_MESSAGE_EVENTS: dict[str, tuple[str, dict[str, str]]] = {
    "CanvassPosition": ("CANVASS_POSITION", {}),
    "RequestVote": ("REQUEST_VOTE", {"candidateId": "candidateMemberId"}),
    "NewLeadershipTerm": ("NEW_LEADERSHIP_TERM", {"leaderId": "leaderMemberId"}),
    "AppendPosition": ("APPEND_POSITION", {}),
    "CommitPosition": ("COMMIT_POSITION", {"leaderId": "leaderMemberId"}),
    "CatchupPosition": ("CATCHUP_POSITION", {}),
    "StopCatchup": ("STOP_CATCHUP", {}),
    "TerminationPosition": ("TERMINATION_POSITION", {"logLeadershipTermId": "leadershipTermId"}),
    "TerminationAck": ("TERMINATION_ACK", {"logLeadershipTermId": "leadershipTermId", "senderMemberId": "memberId"}),
}


def _endpoint(text: str) -> Endpoint:
    return Endpoint(*split_endpoint(text))


def _rng(seed: int, purpose: str) -> random.Random:
    # Seeding with a str hashes it with SHA-512 (not Python's per-process str hash): stable everywhere.
    return random.Random(f"recount-simulate:{seed}:{purpose}")


def member_seed(seed: int, member_id: int) -> int:
    """The seed of member's `JavaRandom`: scrambled, because `java.util.Random`'s first draw is almost the
    same for neighbouring seeds (seeds 1, 2, 3 would all nominate within a few ms of each other)."""
    digest = hashlib.sha256(f"recount-simulate:{seed}:member-{member_id}".encode("ascii")).digest()
    return int.from_bytes(digest[:6], "big")


def life_seed(previous: int, life: int) -> int:
    """The seed of a member's ``life``-th process (2, 3, ...), from the one before it (48 bits, like
    `member_seed`)."""
    digest = hashlib.sha256(f"recount-simulate:{previous}:life-{life}".encode("ascii")).digest()
    return int.from_bytes(digest[:6], "big")


@dataclass(slots=True)
class _Member:
    member_id: int
    ip: str
    consensus: Endpoint
    log: Endpoint
    catchup: Endpoint
    ingress: Endpoint
    seed: int
    nano_origin_ns: int
    node: Node | None = None
    running: bool = False
    lives: int = 0
    consensus_pubs: dict[int, Publication] = field(default_factory=dict)
    log_pub: Publication | None = None
    log_session_id: int = -1
    replays: dict[int, Publication] = field(default_factory=dict)
    #: The member's log recording as far as we know its bytes: end position -> (start, frame payload).
    log_frames: dict[int, tuple[int, bytes]] = field(default_factory=dict)
    role: str = "FOLLOWER"
    in_election: bool = True
    leadership_term_id: int = -1
    agent_lines: list[str] = field(default_factory=list)
    elections: int = 0


@dataclass(slots=True)
class _Client:
    index: int
    start_ns: int
    every_ns: int
    count: int
    size: int
    correlation_id: int
    cluster_session_id: int | None = None
    connecting_to: int | None = None
    sent: int = 0
    pubs: dict[int, Publication] = field(default_factory=dict)


@dataclass(slots=True)
class SimulationResult:
    scenario: Scenario
    seed: int
    events: list[Event]
    captures: dict[int, list[CaptureRecord]]
    agent_logs: dict[int, list[str]]
    recording_logs: dict[int, bytes]
    node_states: dict[int, bytes]
    final_states: dict[int, dict[str, Any]]
    stats: dict[str, Any]


class Simulation:
    """Run one scenario with one seed; `run()` returns everything the incident left behind."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        seed: int | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.scenario = scenario
        self.seed = scenario.seed if seed is None else seed
        self._on_progress = on_progress
        self.start_ns = scenario.start_epoch_ns
        self.end_ns = scenario.start_epoch_ns + scenario.duration_ns
        # The members run on the one cluster driver; the wire, the faults and the clients schedule their
        # actions on its clock.
        self.driver = ClusterDriver(release_model("1.47.3"), on_ready=self._on_ready, clock=Clock(self.start_ns))
        self.scheduler = self.driver.clock
        self._ingress: tuple[Any, bytes] | None = None  # the client message being fed, for its payload
        hosts: list[Any] = list(scenario.member_ids) + [CLIENT]
        self.network = Network(scenario.network, _rng(self.seed, "network"), hosts)
        self.transport = Transport(
            self.scheduler,
            self.network,
            on_message=self._on_delivery,
            on_end_of_stream=self._on_end_of_stream,
            on_sent=self._on_sent,
            on_publication_status=self._on_publication_status,
        )
        self.events: list[Event] = []
        self.members: dict[int, _Member] = {}
        clock_rng = _rng(self.seed, "nano-time-origins")
        for cluster_member in sorted(parse_cluster_members(scenario.cluster_members), key=lambda m: m.id):
            member_id = cluster_member.id
            consensus = _endpoint(cluster_member.consensus_endpoint)
            member = _Member(
                member_id=member_id,
                ip=consensus.ip,
                consensus=consensus,
                log=_endpoint(cluster_member.log_endpoint),
                catchup=_endpoint(cluster_member.catchup_endpoint),
                ingress=_endpoint(cluster_member.ingress_endpoint),
                seed=member_seed(self.seed, member_id) if scenario.member(member_id).seed is None
                else scenario.member(member_id).seed,
                # Each host's monotonic clock started at its boot: somewhere in the last few days.
                nano_origin_ns=clock_rng.randrange(60 * 10**9, 5 * 86_400 * 10**9),
            )
            self.members[member_id] = member
            self.transport.add_host(member_id, member.ip, capture=True)
        self.transport.add_host(CLIENT, CLIENT_HOST, capture=False)
        self.client_driver = self.transport.start(CLIENT, _rng(self.seed, "client-driver"))
        self.client_driver.subscribe(EGRESS_PORT, 102, "egress")
        self.clients = [
            _Client(index=c.index, start_ns=self.start_ns + c.start_ns, every_ns=c.every_ns, count=c.count,
                    size=c.size, correlation_id=1_000 + c.index)
            for c in scenario.clients
        ]
        self.faults_applied: list[dict[str, Any]] = []
        self.leaders: list[dict[str, Any]] = []
        self.last_down: int | None = None
        self.refused_offers = 0
        self.log_position_mismatches = 0
        #: member -> (instant, frames): log frames delivered at one instant, fed together when it is over
        #: (or before anything else of the member's is recorded), as node replay groups them.
        self._log_batches: dict[int, tuple[int, list[LogFrame]]] = {}

    # --- running ------------------------------------------------------------------------------------
    def run(self) -> SimulationResult:
        scheduler = self.scheduler
        for member_id in sorted(self.members):
            spec = self.scenario.member(member_id)
            scheduler.at(self.start_ns + spec.start_ns, lambda m=self.members[member_id]: self._start(m, first=True))
        for fault in self.scenario.faults:
            scheduler.at(self.start_ns + fault.at_ns, lambda f=fault: self._apply_fault(f))
        for client in self.clients:
            scheduler.at(client.start_ns, lambda c=client: self._client_connect(c))
        progress = None
        if self._on_progress is not None:
            def progress(now: int) -> None:
                self._on_progress(now - self.start_ns, self.end_ns - self.start_ns)
        scheduler.run_until(self.end_ns, progress)
        for member_id in sorted(self.members):
            self._record(Event(ts=self.end_ns, node=member_id, dir="local", peer=None, channel="local", type="End"))
            member = self.members[member_id]
            if member.running and member.node is not None:
                self.driver.feed(member_id, End(), self.end_ns)
        if self._on_progress is not None:
            self._on_progress(self.end_ns - self.start_ns, self.end_ns - self.start_ns)
        return self._result()

    def _result(self) -> SimulationResult:
        recording_logs: dict[int, bytes] = {}
        node_states: dict[int, bytes] = {}
        final_states: dict[int, dict[str, Any]] = {}
        for member_id, member in sorted(self.members.items()):
            if member.node is None:
                continue
            # The files as the engine left them (the Node API gives their JSON; we need their bytes).
            agent = member.node.agent
            recording_logs[member_id] = agent.recording_log.to_bytes()
            node_states[member_id] = agent.node_state.to_bytes()
            final_states[member_id] = member.node.view().to_json()
        captures = {m: self.transport.hosts[m].capture or [] for m in sorted(self.members)}
        stats = {
            "datagrams": self.transport.datagrams,
            "network": {"sent": self.network.sent, "lost": self.network.lost, "duplicated": self.network.duplicated,
                        "cut": self.network.cut},
            "refusedOffers": self.refused_offers,
            "logPositionMismatches": self.log_position_mismatches,
            "actions": self.scheduler.actions_run,
            "faults": self.faults_applied,
            "leaders": self.leaders,
            "elections": {str(m): self.members[m].elections for m in sorted(self.members)},
            "clientMessages": {str(c.index): c.sent for c in self.clients},
        }
        return SimulationResult(
            scenario=self.scenario,
            seed=self.seed,
            events=self.events,
            captures=captures,
            agent_logs={m: list(self.members[m].agent_lines) for m in sorted(self.members)},
            recording_logs=recording_logs,
            node_states=node_states,
            final_states=final_states,
            stats=stats,
        )

    def _record(self, event: Event) -> Event:
        if event.node in self._log_batches and not (event.dir == "in" and event.channel == "log"):
            self._feed_log_batch(event.node)
        self.events.append(event)
        return event

    def _feed_log_batch(self, member_id: int) -> None:
        batch = self._log_batches.pop(member_id, None)
        if batch is None:
            return
        now, frames = batch
        if self.members[member_id].running:
            self.driver.feed(member_id, frames[0] if len(frames) == 1 else LogFrames(tuple(frames)), now)

    # --- members ----------------------------------------------------------------------------------
    def _start(self, member: _Member, *, first: bool) -> None:
        if member.running:
            return
        now = self.scheduler.now_ns
        member.lives += 1
        if not first:
            # A restarted process draws from a new generator, as a new JVM would: its own seed, derived
            # from the first life's and recorded in its MemberStart, which is where node replay reads it.
            member.seed = life_seed(member.seed, member.lives)
        driver = self.transport.start(member.member_id, _rng(self.seed, f"driver-{member.member_id}-{member.lives}"))
        # Subscriptions stay open while the member runs (see the module docstring).
        driver.subscribe(member.consensus.port, CONSENSUS_STREAM_ID, "consensus")
        driver.subscribe(member.log.port, LOG_STREAM_ID, "log")
        if member.catchup.port != member.log.port:
            driver.subscribe(member.catchup.port, LOG_STREAM_ID, "log")
        driver.subscribe(member.ingress.port, INGRESS_STREAM_ID, "ingress")
        member.consensus_pubs = {}
        for peer_id in sorted(self.members):
            if peer_id != member.member_id:
                peer = self.members[peer_id]
                member.consensus_pubs[peer_id] = driver.add_publication(
                    stream_id=CONSENSUS_STREAM_ID, term_length=CONSENSUS_TERM_LENGTH,
                    destinations=[(peer.consensus, peer_id)], refuses_unconnected=True,
                    tag=(member.member_id, member.lives, peer_id),
                )
        member.log_pub = None
        member.replays = {}
        member.running = True
        member.role = "FOLLOWER"
        member.in_election = True
        fields: dict[str, Any] = {
            "clusterMembers": self.scenario.cluster_members,
            "appointedLeaderId": self.scenario.appointed_leader_id,
            "config": self.scenario.member_config(member.member_id),
            "seed": member.seed,
            # A new process's consensus publications have heard no receiver yet: the PublicationStatus
            # events say when each connects.
            "connectedPeers": [],
        }
        spec = self.scenario.member(member.member_id)
        if first:
            if spec.recording_log is not None:
                fields["recordingLog"] = [dict(e) for e in spec.recording_log]
            if spec.node_state is not None:
                fields["nodeState"] = dict(spec.node_state)
            if spec.append_position is not None:
                fields["appendPosition"] = spec.append_position
        event = self._record(Event(ts=now, node=member.member_id, dir="local", peer=None, channel="local",
                                   type="MemberStart", fields=fields))
        member.agent_lines.append(format_log_started(self._nano_time(member, now), now // 1_000_000))
        member.node = self.driver.start(member.member_id, member_start_of(event), JavaRandom(member.seed)).node

    def _crash(self, member: _Member) -> None:
        if not member.running:
            return
        now = self.scheduler.now_ns
        self._record(Event(ts=now, node=member.member_id, dir="local", peer=None, channel="local", type="MemberCrash"))
        self.driver.feed(member.member_id, MemberCrash(), now)  # a killed process does nothing more
        self._down(member)
        self.transport.crash(member.member_id)

    def _stop(self, member: _Member) -> None:
        if not member.running:
            return
        now = self.scheduler.now_ns
        self._record(Event(ts=now, node=member.member_id, dir="local", peer=None, channel="local",
                                   type="MemberStop"))
        self.driver.feed(member.member_id, MemberStop(), now)
        self._down(member)
        self.transport.stop(member.member_id, now)

    def _down(self, member: _Member) -> None:
        member.running = False
        member.log_pub = None
        member.replays = {}
        member.consensus_pubs = {}

    # --- inputs ----------------------------------------------------------------------------------------
    def _on_delivery(self, delivery: Delivery) -> None:
        if delivery.host == CLIENT:
            return  # egress is not modelled
        member = self.members[delivery.host]
        if not member.running:
            return
        try:
            message = decode_cluster(delivery.payload).message
        except DecodeError:
            return
        now = delivery.time_ns
        channel = delivery.channel
        peer = delivery.source_host if isinstance(delivery.source_host, int) else None
        extra = None
        if channel == "log":
            extra = {"logPosition": delivery.position}
            start = delivery.position - framed_length(len(delivery.payload))
            member.log_frames[delivery.position] = (start, delivery.payload)
        elif channel == "ingress":
            peer = None
        self._record(Event(ts=now, node=member.member_id, dir="in", peer=peer, channel=channel,
                                   type=message.BLOCK.name, fields=message.to_fields(), payload=delivery.payload,
                                   extra=extra))
        if channel == "log":
            # Frames delivered at one instant are taken in one go (`LogFrames`), once the instant is over.
            frame = LogFrame(message=message, log_position=delivery.position, length=len(delivery.payload))
            batch = self._log_batches.get(member.member_id)
            if batch is None:
                self._log_batches[member.member_id] = (now, [frame])
                self.scheduler.at(now, self._feed_log_batch, member.member_id)
            else:
                batch[1].append(frame)
            return
        if channel == "consensus":
            self._agent_message_line(member, now, message)
            item: Input = ConsensusMessage(message=message, peer=peer)
        else:
            item = IngressMessage(message=message, length=len(delivery.payload))
            self._ingress = (message, delivery.payload)
        try:
            self.driver.feed(member.member_id, item, now)
        finally:
            self._ingress = None

    def _on_end_of_stream(self, now: int, image: Image) -> None:
        if image.channel != "log" or not isinstance(image.driver.host, int):
            return
        member = self.members[image.driver.host]
        if not member.running:
            return
        self._record(Event(
            ts=now, node=member.member_id, dir="local", peer=None, channel="local", type="LogEndOfStream",
            fields={"logSessionId": image.session_id, "logPosition": image.last_message_end},
        ))
        self.driver.feed(member.member_id, LogEndOfStream(log_session_id=image.session_id), now)

    def _on_publication_status(self, now: int, publication: Publication, connected: bool,
                               sender_position: int | None) -> None:
        """A member's consensus publication became (dis)connected, or its sender fell behind what was
        offered (or caught up): the member learns it in its next duty cycle (after what it is doing
        now), and so does node replay, from the ``PublicationStatus`` event."""
        self.scheduler.at(now, lambda: self._publication_status(publication, connected, sender_position))

    def _publication_status(self, publication: Publication, connected: bool, sender_position: int | None) -> None:
        member_id, life, peer_id = publication.tag
        member = self.members[member_id]
        if not member.running or member.lives != life:
            return
        now = self.scheduler.now_ns
        self._record(Event(ts=now, node=member_id, dir="local", peer=peer_id, channel="local", type="PublicationStatus",
                           fields={"channel": "consensus", "connected": connected, "senderPosition": sender_position}))
        self.driver.feed(member_id, PublicationStatus(peer=peer_id, connected=connected, sender_position=sender_position),
                         now)

    def _on_sent(self, now: int, publication: Publication, tag: object) -> None:
        sender, peer, message, payload = tag
        self._record(Event(ts=now, node=sender, dir="out", peer=peer, channel="consensus", type=message.BLOCK.name,
                           fields=message.to_fields(), payload=payload))

    # --- outputs ---------------------------------------------------------------------------------------
    def _on_ready(self, member_id: int, ready: Ready) -> None:
        member = self.members[member_id]
        if not member.running:
            return  # a killed process does nothing more
        if self._ingress is not None:
            self._remember_ingress_payload(member, *self._ingress, ready)
        self._act(member, ready)

    def _act(self, member: _Member, outputs: Iterable[Any]) -> None:
        live_positions: set[int] = set()
        for output in outputs:
            kind = type(output)
            if kind is Send:
                if output.channel == "consensus":
                    self._send_consensus(member, output)
                elif output.channel == "log":
                    self._send_log(member, output, live_positions)
            elif kind is LogAppend:
                live_positions.add(output.position)
                self._append_to_log(member, output)
            elif kind is StateChange:
                self._on_state_change(member, output)
            elif kind is RoleChange:
                self._agent_line(member, output.ts, "ROLE_CHANGE",
                                 {"memberId": member.member_id, "from": output.from_role, "to": output.to_role})
                member.role = output.to_role
                if output.from_role == "LEADER" and output.to_role != "LEADER":
                    self._close_log_publication(member)
            elif kind is ModuleStateChange:
                self._agent_line(member, output.ts, "STATE_CHANGE",
                                 {"memberId": member.member_id, "from": output.from_state, "to": output.to_state})
            elif kind is ElectionStarted:
                member.elections += 1
                member.in_election = True
                self._agent_line(member, output.ts, "NEW_ELECTION", {
                    "memberId": member.member_id, "leadershipTermId": output.leadership_term_id,
                    "logPosition": output.log_position, "appendPosition": output.append_position,
                    "reason": output.reason,
                })

    def _send_consensus(self, member: _Member, send: Send) -> None:
        publication = member.consensus_pubs.get(send.peer)
        if publication is None:
            return
        payload = encode(send.message)
        if publication.offer(payload, (member.member_id, send.peer, send.message, payload)) is None:
            self.refused_offers += 1

    def _on_state_change(self, member: _Member, change: StateChange) -> None:
        self._agent_line(member, change.ts, "ELECTION_STATE_CHANGE", {
            "memberId": member.member_id, "from": change.from_state, "to": change.to_state,
            "leaderId": change.leader_id, "candidateTermId": change.candidate_term_id,
            "leadershipTermId": change.leadership_term_id, "logPosition": change.log_position,
            "logLeadershipTermId": change.log_leadership_term_id, "appendPosition": change.append_position,
            "catchupPosition": change.catchup_position, "reason": change.reason,
        })
        member.leadership_term_id = change.leadership_term_id
        if change.to_state == "CLOSED":
            member.in_election = False
            if member.role == "LEADER":
                self.leaders.append({"leadershipTermId": change.leadership_term_id, "memberId": member.member_id,
                                     "at": change.ts - self.start_ns})
        elif change.to_state == "INIT":
            member.in_election = True
        if change.to_state == "LEADER_LOG_REPLICATION":
            self._open_log_publication(member, change.append_position)

    def _open_log_publication(self, member: _Member, position: int) -> None:
        self._close_log_publication(member)
        driver = self.transport.driver(member.member_id)
        session_id = member.node.view().log_session_id
        member.log_session_id = session_id
        destinations = [(self.members[p].log, p) for p in sorted(self.members) if p != member.member_id]
        # Aeron positions the leader's log publication at its append position with the recording's initial
        # term id, so that stream positions are log positions; the real capture's log starts at term id 0.
        member.log_pub = driver.add_publication(
            stream_id=LOG_STREAM_ID, term_length=LOG_TERM_LENGTH, destinations=destinations, initial_term_id=0,
            initial_position=position, setup_flags=SETUP_GROUP_FLAG, session_id=session_id,
        )

    def _close_log_publication(self, member: _Member) -> None:
        if member.log_pub is not None:
            member.log_pub.close()
            member.log_pub = None
        for peer_id in sorted(member.replays):
            member.replays[peer_id].abandon()
        member.replays = {}

    def _log_frame_bytes(self, member: _Member, end: int, message: Any) -> tuple[int, bytes]:
        """The frame payload ending at ``end`` in ``member``'s log, and where it starts."""
        known = member.log_frames.get(end)
        if known is not None:
            return known
        # Content the member got without frames (archive replication, or a log it started with): any
        # member that has a frame ending there recorded the same bytes (the log matching property).
        for other_id in sorted(self.members):
            known = self.members[other_id].log_frames.get(end)
            if known is not None:
                member.log_frames[end] = known
                return known
        encoded = encode(message)
        start = end - framed_length(len(encoded))
        return start, encoded

    def _append_to_log(self, member: _Member, append: LogAppend) -> None:
        if append.position in member.log_frames:
            return  # the payload was remembered with the ingress that caused it
        encoded = encode(append.message)
        member.log_frames[append.position] = (append.position - framed_length(len(encoded)), encoded)

    def _remember_ingress_payload(self, member: _Member, message: Any, payload: bytes, outputs: Iterable[Any]) -> None:
        """The leader appended a client message: its log frame carries the client's payload too."""
        for output in outputs:
            if type(output) is not LogAppend:
                continue
            if type(output.message) is SessionMessageHeader and type(message) is SessionMessageHeader:
                frame = encode(output.message) + payload[SESSION_HEADER_LENGTH:]
                member.log_frames[output.position] = (output.position - framed_length(len(frame)), frame)
            elif type(output.message) is SessionOpenEvent:
                self._on_session_open(output.message)

    def _send_log(self, member: _Member, send: Send, live_positions: set[int]) -> None:
        position = send.log_position
        if position is None:
            return
        start, frame = self._log_frame_bytes(member, position, send.message)
        if position in live_positions:
            publication = member.log_pub
            if publication is None:
                publication = self._implicit_log_publication(member, start)
            if publication is not None and position > publication.tail:
                if publication.offer(frame) is None:
                    self.refused_offers += 1
                elif publication.tail != position:
                    # The engine's idea of the log position and the publication's disagree: say so.
                    self.log_position_mismatches += 1
            return
        # A catch-up: the leader's archive replays its log to the follower's catch-up endpoint.
        replay = member.replays.get(send.peer)
        if replay is None or replay.closed or replay.tail != start:
            if replay is not None:
                replay.abandon()
            driver = self.transport.driver(member.member_id)
            follower = self.members[send.peer]
            replay = driver.add_publication(
                stream_id=LOG_STREAM_ID, term_length=LOG_TERM_LENGTH, destinations=[(follower.catchup, send.peer)],
                initial_term_id=0, initial_position=start, session_id=member.log_session_id,
            )
            member.replays[send.peer] = replay
        if replay.offer(frame) is None:
            self.refused_offers += 1

    def _implicit_log_publication(self, member: _Member, start: int) -> Publication | None:
        if self.transport.driver(member.member_id) is None:
            return None
        self._open_log_publication(member, start)
        return member.log_pub

    # --- agent log ---------------------------------------------------------------------------------------
    def _nano_time(self, member: _Member, now: int) -> int:
        return member.nano_origin_ns + (now - self.start_ns)

    def _agent_line(self, member: _Member, ts: int, event: str, fields: dict[str, Any]) -> None:
        member.agent_lines.append(format_record(cluster_event(event, self._nano_time(member, ts), fields)))

    def _agent_message_line(self, member: _Member, now: int, message: Any) -> None:
        name = message.BLOCK.name
        spec = _AGENT_MESSAGE_EVENTS.get(name)
        if spec is None:
            return
        event, renames = spec
        values = message.to_fields()
        fields: dict[str, Any] = {"memberId": member.member_id}
        fields.update({key: value for key, value in values.items()})
        for printed, source in renames.items():
            fields[printed] = values[source]
        if name == "NewLeadershipTerm":
            fields["isStartup"] = values["isStartup"] in ("TRUE", True, BooleanType.TRUE)
        if name == "TerminationAck":
            fields["memberId"] = member.member_id
        self._agent_line(member, now, event, fields)

    # --- faults ------------------------------------------------------------------------------------------
    def _apply_fault(self, fault: Fault) -> None:
        now = self.scheduler.now_ns
        note: dict[str, Any] = {"at": now - self.start_ns, "kind": fault.kind}
        member_id = self._resolve_target(fault, fault.member)
        if fault.member is not None:
            note["member"] = member_id
            if isinstance(fault.member, str):
                note["target"] = fault.member
            if member_id is None:
                note["skipped"] = f"no {fault.member} member at that moment"
                self.faults_applied.append(note)
                return
        if fault.kind == "crash":
            self._crash(self.members[member_id])
            self.last_down = member_id
        elif fault.kind == "stop":
            self._stop(self.members[member_id])
            self.last_down = member_id
        elif fault.kind == "restart":
            self._start(self.members[member_id], first=False)
        else:
            self._network_fault(fault, note, member_id)
        self.faults_applied.append(note)

    def _resolve_target(self, fault: Fault, target: int | str | None) -> int | None:
        """A symbolic target (leader, follower, crashed) as the member it names right now."""
        if target == LEADER:
            leader = self._leader()
            return leader.member_id if leader is not None else None
        if target == FOLLOWER:
            leader = self._leader()
            followers = [m for _, m in sorted(self.members.items()) if m.running and m is not leader]
            return followers[0].member_id if followers else None
        if target == CRASHED:
            return self.last_down
        return target

    def _network_fault(self, fault: Fault, note: dict[str, Any], member_id: int | None) -> None:
        now = self.scheduler.now_ns
        network = self.network
        rule = None
        fields: dict[str, Any] = {"fault": fault.kind}
        if fault.kind == "partition":
            rule = network.partition(fault.groups)
            fields["groups"] = [list(g) for g in fault.groups]
            affected = sorted(m for g in fault.groups for m in g)
        elif fault.kind == "isolate":
            rule = network.isolate(member_id)
            fields["member"] = member_id
            affected = [member_id]
        elif fault.kind == "oneway":
            source = self._resolve_target(fault, fault.source)
            target = self._resolve_target(fault, fault.target)
            if source is None or target is None:
                note["skipped"] = "no such member at that moment"
                return
            rule = network.oneway(source, target)
            fields["from"], fields["to"] = source, target
            affected = sorted({source, target})
        elif fault.kind == "heal":
            fields["healed"] = network.heal()
            affected = sorted(self.members)
        else:  # link
            network.set_link(fault.link, fault.source, fault.target)
            if fault.source is not None:
                fields["from"], fields["to"] = fault.source, fault.target
            link = network.link(fault.source, fault.target) if fault.source is not None else network.link(0, 0)
            fields.update({"latency": link.latency_ns, "jitter": link.jitter_ns, "loss": link.loss,
                           "duplicate": link.duplicate})
            affected = sorted(m for m in (fault.source, fault.target) if isinstance(m, int)) or sorted(self.members)
        if fault.until_ns is not None:
            fields["until"] = self.start_ns + fault.until_ns
            self.scheduler.at(self.start_ns + fault.until_ns, lambda r=rule, f=fault: self._heal(r, f))
        note.update({k: v for k, v in fields.items() if k != "fault"})
        for member_id in affected:
            self._record(Event(ts=now, node=member_id, dir="local", peer=None, channel="local", type="NetworkFault",
                               fields=dict(fields)))

    def _heal(self, rule: int | None, fault: Fault) -> None:
        now = self.scheduler.now_ns
        healed = self.network.heal(rule)
        self.faults_applied.append({"at": now - self.start_ns, "kind": "heal", "healed": healed})
        for member_id in sorted(self.members):
            self._record(Event(ts=now, node=member_id, dir="local", peer=None, channel="local", type="NetworkFault",
                               fields={"fault": "heal", "healed": healed}))

    # --- clients -------------------------------------------------------------------------------------
    def _leader(self) -> _Member | None:
        leaders = [m for _, m in sorted(self.members.items())
                   if m.running and m.role == "LEADER" and not m.in_election]
        if not leaders:
            return None
        return max(leaders, key=lambda m: (m.leadership_term_id, -m.member_id))

    def _client_publication(self, client: _Client, member: _Member) -> Publication:
        publication = client.pubs.get(member.member_id)
        if publication is None or publication.closed:
            publication = self.client_driver.add_publication(
                stream_id=INGRESS_STREAM_ID, term_length=INGRESS_TERM_LENGTH,
                destinations=[(member.ingress, member.member_id)],
            )
            client.pubs[member.member_id] = publication
        return publication

    def _client_connect(self, client: _Client) -> None:
        if client.count == 0 or client.cluster_session_id is not None:
            return
        leader = self._leader()
        if leader is None:
            self.scheduler.after(CLIENT_RETRY_NS, lambda: self._client_connect(client))
            return
        request = SessionConnectRequest(
            correlation_id=client.correlation_id,
            response_stream_id=102,
            version=CLIENT_PROTOCOL_VERSION,
            response_channel=f"aeron:udp?endpoint={CLIENT_HOST}:{EGRESS_PORT}",
            encoded_credentials=b"",
        )
        client.connecting_to = leader.member_id
        self._client_publication(client, leader).offer(encode(request))
        # No answer within a while (a leader that lost its place): ask again.
        self.scheduler.after(10 * CLIENT_RETRY_NS, lambda: self._client_connect(client))

    def _on_session_open(self, event: SessionOpenEvent) -> None:
        for client in self.clients:
            if client.correlation_id == event.correlation_id and client.cluster_session_id is None:
                client.cluster_session_id = event.cluster_session_id
                self.scheduler.after(client.every_ns, lambda c=client: self._client_send(c))

    def _client_send(self, client: _Client) -> None:
        if client.sent >= client.count:
            return
        leader = self._leader()
        if leader is not None:
            header = SessionMessageHeader(
                leadership_term_id=leader.leadership_term_id,
                cluster_session_id=client.cluster_session_id,
                timestamp=0,
            )
            text = f"client {client.index} message {client.sent + 1} ".encode("ascii")
            body = (text * (client.size // max(len(text), 1) + 1))[: client.size]
            if self._client_publication(client, leader).offer(encode(header) + body) is not None:
                client.sent += 1
        if client.sent < client.count:
            self.scheduler.after(client.every_ns if leader is not None else CLIENT_RETRY_NS,
                                 lambda: self._client_send(client))


def simulate(scenario: Scenario, *, seed: int | None = None,
             on_progress: Callable[[int, int], None] | None = None) -> SimulationResult:
    """Run ``scenario`` (with ``seed`` instead of the scenario's, when given)."""
    return Simulation(scenario, seed=seed, on_progress=on_progress).run()
