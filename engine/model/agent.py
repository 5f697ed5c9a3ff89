"""The parts of Aeron 1.47.3's `ConsensusModuleAgent` that touch elections (aeron-election.md §6).

Theory of operation.  `ConsensusModuleAgent` owns one member's consensus state: its role, its
`leadershipTermId`, the commit position, the timers of the leader heartbeat and the follower's
AppendPosition, the current `Election` (or none), recording.log and node-state.dat.  The `Node`
wrapper (`engine.model.node`) drives it with `duty_cycle(now_ns, message)`, which is Aeron's `doWork`:

1. the slow tick, when due (every 10 ms; the leader's "inactive follower quorum" and the follower's
   "leader heartbeat timeout" checks live there);
2. the consensus message delivered in this cycle, if any, through the agent's wrappers (§6.3);
3. `election.do_work(now)` during an election, else `consensus_work` (§6.4: the leader's
   CommitPosition heartbeat and commit = quorum position; the follower's log polling and
   AppendPosition);
4. an exception from 1–3 goes to `election.handle_error` during an election (→ INIT).

What the real agent gets from the media driver, the archive and the clustered service is simulated
by `engine.model.sim_parts` (immediate success unless the capture has evidence).  Everything the member
does that can be seen from outside is appended to `outputs` as `engine.model.outputs` records, stamped
with `output_ts` (the time of the input being handled, or of the timer that fired).

Files: recording.log and node-state.dat are `formats` models; every write Aeron makes goes through
them here and is echoed as a `RecordingLogChange` / `NodeStateWrite` output.

Determinism: no clock but `now_ns` handed in, no randomness but `random`, members always in
configuration order, no dict iteration that depends on hashing.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

from engine.model import members as cm
from engine.model.config import PROTOCOL_SEMANTIC_VERSION, Config
from engine.model.election import (
    APPEND_POSITION_FLAG_CATCHUP,
    APPEND_POSITION_FLAG_NONE,
    NULL_SESSION_ID,
    Election,
    ElectionState,
)
from engine.model.exceptions import AeronError, ClusterEvent, ClusterException, ClusterTermination
from engine.model.flags import ModelFlags
from engine.model.members import NULL_POSITION, NULL_VALUE, ClusterMember
from engine.model.outputs import (
    Cause,
    ElectionStarted,
    LogAppend,
    MarkFileWrite,
    ModuleStateChange,
    NodeStateWrite,
    NominationDraw,
    RecordingLogChange,
    RoleChange,
    Send,
    StateChange,
)
from engine.model.sim_parts import (
    NEW_LEADERSHIP_TERM_EVENT_FRAME_LENGTH,
    LogStore,
    SimImage,
    SimLogReplay,
    SimPublication,
    SimReplication,
    framed_length,
)
from engine.model.view import MemberView
from formats.cluster_codecs import (
    AppendPosition,
    BooleanType,
    CloseReason,
    ClusterAction,
    ClusterActionRequest,
    ClusterTimeUnit,
    CommitPosition,
    NewLeadershipTerm,
    NewLeadershipTermEvent,
    SessionCloseEvent,
    SessionMessageHeader,
    SessionOpenEvent,
    StopCatchup,
    TerminationAck,
    TerminationPosition,
)
from formats.cluster_codecs_ext import NewLeadershipTerm as NewLeadershipTermV15
from formats.cluster_codecs_ext import commit_position_of, with_commit_position
from formats.recording_log import EntryType, RecordingLog, RecordingLogError
from formats.sbe import encode

SLOW_TICK_INTERVAL_NS = 10_000_000
#: How far from the model's own moment a driver's answer the capture shows may be and still be the one
#: for it (a log publication the model adds early or late against the real member's).
EVIDENCE_REACH_NS = 5_000_000_000
#: A log replication's first position on the wire comes from its archive's EXTEND, tens of ms after it
#: began at the earliest; what the capture shows within this of its start is from before it.
REPLICATION_EVIDENCE_GRACE_NS = 1_000_000
#: A time that never comes: an image the capture never shows.
NEVER_NS = 1 << 62
#: `ConsensusModule.Configuration.LIVE_ADD_MAX_WINDOW`: 32 MiB.
LIVE_ADD_MAX_WINDOW = 32 * 1024 * 1024
MS = 1_000_000
#: The length of a SessionMessageHeader (8-byte SBE header + 24-byte block) before its payload.
SESSION_HEADER_LENGTH = 32
INT32_NULL = -(1 << 31)


class Role(enum.Enum):
    """`Cluster.Role` (node-role counter, type 201)."""

    FOLLOWER = 0
    CANDIDATE = 1
    LEADER = 2


class ModuleState(enum.Enum):
    """`ConsensusModule.State`."""

    INIT = 0
    ACTIVE = 1
    SUSPENDED = 2
    SNAPSHOT = 3
    QUITTING = 4
    TERMINATING = 5
    CLOSED = 6


def _major(semantic_version: int) -> int:
    return (semantic_version >> 16) & 0xFF


class ConsensusModuleAgent:
    Role = Role
    ModuleState = ModuleState
    __slots__ = (
        "log_image_waits_ns",
        "log_images_ns",
        "follower_joins_ns",
        "aborts_ns",
        "log_publications_ready_ns",
        "leader_joins_ready_ns",
        "replication_positions_ns",
        "log_replays_done_ns",
        "log_replication_evidence",
        "leader_join_waits_ns",
        "log_replay_durations_ns",
        "log_replay_start_waits_ns",
        "follower_recording_ns",
        "follower_services_ns",
        "catchup_replay_waits_ns",
        "pending_catchup_replays",
        "follower_recorder_ns",
        "unrecorded_log_frames",
        "snapshot_durations_ns",
        "shutdown_snapshot",
        "snapshots_taken",
        "snapshot_done_ns",
        "state_after_snapshot",
        "log_image_available_ns",
        "log_publication_waits_ns",
        "blocked_until_ns",
        "archive_evidence",
        "catchup_log_destination",
        "cause",
        "changes",
        "commit_position",
        "config",
        "election",
        "election_count",
        "election_state_code",
        "errors",
        "flags",
        "has_log_publication",
        "held_log_frames",
        "is_passive",
        "last_append_position",
        "leader_member",
        "leadership_term_id",
        "live_log_destination",
        "log",
        "log_adapter_position",
        "log_evidence",
        "log_image",
        "log_publication_count",
        "log_publication_session_id",
        "log_recording_id",
        "log_recording_stop_position",
        "log_subscription",
        "member_by_id",
        "member_id",
        "members",
        "next_cluster_session_id",
        "next_correlation_id",
        "node_state",
        "notified_commit_position",
        "now_ns",
        "output_ts",
        "outputs",
        "protocol_version",
        "publication_evidence",
        "publications",
        "random",
        "ranked_positions",
        "recording_active",
        "recording_log",
        "recovery_appended_log_position",
        "recovery_last_leadership_term_id",
        "recovery_last_term_base_log_position",
        "role",
        "session_id_base",
        "slow_tick_deadline_ns",
        "state",
        "termination_position",
        "this_member",
        "time_of_last_append_position_send_ns",
        "time_of_last_append_position_update_ns",
        "time_of_last_leader_update_ns",
        "time_of_last_log_update_ns",
    )

    def __init__(
        self,
        member_id: int,
        members: list[ClusterMember],
        *,
        config: Config,
        flags: ModelFlags,
        random: Any,
        recording_log: RecordingLog,
        node_state: Any,
        append_position: int,
        log: LogStore,
        archive_evidence: bool = False,
        session_id_base: int = 0,
        log_evidence: bool = False,
        connected_peers: tuple[int, ...] | None = None,
    ) -> None:
        self.member_id = member_id
        self.members = members
        self.member_by_id = {m.id: m for m in members}
        this_member = self.member_by_id.get(member_id)
        self.is_passive = this_member is None
        self.this_member = this_member if this_member is not None else ClusterMember(member_id)
        self.config = config
        self.flags = flags
        self.random = random
        self.protocol_version = PROTOCOL_SEMANTIC_VERSION
        self.recording_log = recording_log
        self.node_state = node_state
        self.ranked_positions = [0] * cm.quorum_threshold(len(members))

        self.outputs: list[Any] = []
        self.output_ts = 0
        #: What the member is handling now (set by `Node` with the time): the cause its changes carry.
        self.cause: Cause | None = None
        self.log_publication_waits_ns: list[int] = []  # recorded driver waits (Node.MemberStart), in order
        self.blocked_until_ns: int | None = None  # waiting for the driver until then (add_log_publication)
        self.log_image_waits_ns: list[int] = []  # recorded times from log subscription to image, in order
        self.log_image_available_ns: int | None = None  # the follower's log image is there from then
        self.snapshot_durations_ns: list[int] = []  # recorded snapshot durations (Node.MemberStart), in order
        self.leader_join_waits_ns: list[int] = []  # recorded LEADER_INIT joins (Node.MemberStart), in order
        self.log_replay_durations_ns: list[int] = []  # recorded election log replays (Node.MemberStart), in order
        self.log_replay_start_waits_ns: list[int] = []  # recorded archive answers to their replay requests
        #: The follower join under way (`try_join_log_as_follower`): the archive's recording counter for the
        #: image is there from ``follower_recording_ns`` (None: no join under way), the services acknowledge
        #: at ``follower_services_ns`` (None: never), and the archive's recorder records the image from
        #: ``follower_recorder_ns`` (None: it already does); NEVER_NS: never.
        self.follower_recording_ns: int | None = None
        self.follower_services_ns: int | None = None
        self.follower_recorder_ns: int | None = None
        self.catchup_replay_waits_ns: list[int] = []  # recorded catch-up replay starts (Node.MemberStart), in order
        self.pending_catchup_replays: list[tuple[int, int, int]] = []  # (from when, follower, from position)
        self.unrecorded_log_frames: list[tuple[Any, int | None, int | None]] = []  # in the image, not yet recorded
        self.log_publications_ready_ns: list[int] = []  # when the capture shows each log publication there
        self.leader_joins_ready_ns: list[int] = []  # when the capture shows each leader join over
        #: (ns, position) the capture shows the log replications reaching (Node.MemberStart), in order
        self.replication_positions_ns: list[tuple[int, int]] = []
        self.log_replication_evidence: SimReplication | None = None  # the replication they are fed to
        #: (since, done) bounds the capture gives follower log replays (Node.MemberStart), in order
        self.log_replays_done_ns: list[tuple[int, int]] = []
        self.log_images_ns: dict[int, int] | None = None  # log session id -> when the driver had its image
        #: log session id -> (recording counter, services' ack, recorder start) of each recorded follower
        #: join of it, in order, absolute times (Node.MemberStart.follower_joins_ns; None: never)
        self.follower_joins_ns: dict[int, list[tuple[int | None, int | None, int | None]]] = {}
        self.aborts_ns: list[int] = []  # when the operator's ABORT toggle came (Node.MemberStart), in order
        self.shutdown_snapshot: int | None = None  # which snapshot a ClusterTool shutdown asked for
        self.snapshots_taken = 0
        self.snapshot_done_ns: int | None = None  # a follower's snapshot is written then (SNAPSHOT until then)
        self.state_after_snapshot = ModuleState.ACTIVE
        self.now_ns = 0  # the cluster clock (whole ms, in ns)
        self.changes = 0  # bumped on every observable change, so the driver knows a cycle did work
        self.errors = 0

        self.role = Role.FOLLOWER
        self.state = ModuleState.INIT
        self.election: Election | None = None
        self.election_state_code = ElectionState.CLOSED.code
        self.election_count = 0
        self.leader_member: ClusterMember | None = None

        plan = recording_log.recovery_plan_terms(config.service_count)
        self.recovery_last_leadership_term_id = plan.last_leadership_term_id
        self.recovery_last_term_base_log_position = plan.last_term_base_log_position
        self.recovery_appended_log_position = append_position
        # `onStart` leaves the agent's own leadershipTermId where the latest snapshot puts it (NULL_VALUE
        # without one); the election starts from the recovery plan's last term, and the agent's moves on
        # as the log is replayed or joined.  g_leader_sigterm_reelection_rejoin: member 0, restarted on a
        # log without snapshot, led term 2 sending CommitPosition leadershipTermId=-1 in
        # LEADER_LOG_REPLICATION (19:22:16.07).
        self.leadership_term_id = plan.snapshots[0].leadership_term_id if plan.snapshots else NULL_VALUE
        snapshot_position = plan.snapshots[0].log_position if plan.snapshots else 0
        self.commit_position = snapshot_position
        self.notified_commit_position = snapshot_position
        self.log_recording_id = recording_log.find_last_term_recording_id()

        self.time_of_last_log_update_ns = 0
        self.time_of_last_append_position_update_ns = 0
        self.time_of_last_append_position_send_ns = 0
        self.time_of_last_leader_update_ns = 0
        self.slow_tick_deadline_ns = 0
        self.last_append_position = NULL_POSITION
        self.termination_position = NULL_POSITION

        # The simulated log: the local recording, the leader's publication, the follower's image.
        self.log = log
        self.log_recording_stop_position = append_position
        self.recording_active = False
        self.log_adapter_position = snapshot_position
        self.has_log_publication = False
        self.log_publication_session_id = NULL_SESSION_ID
        self.session_id_base = session_id_base
        self.log_publication_count = 0
        self.log_subscription: str | None = None
        self.log_image: SimImage | None = None
        #: Frames past a gap in the image, by start position, while a catch-up fills it (see `on_log_frame`).
        self.held_log_frames: dict[int, tuple[int, Any]] = {}
        self.catchup_log_destination: str | None = None
        self.live_log_destination: str | None = None
        self.archive_evidence = archive_evidence
        #: The capture shows this member's own log appends (`on_log_append`): what it appends as leader
        #: comes from them, not from ingress (the model cannot see timers, session timeouts or the
        #: operator's cluster actions, which append too).
        self.log_evidence = log_evidence
        self.next_cluster_session_id = 1
        self.next_correlation_id = 1
        #: The capture says when each consensus publication could take an offer (`PublicationStatus`):
        #: this life's publications to every peer, connected as the evidence says at the start.  Without
        #: it, none: every offer succeeds.
        self.publication_evidence = connected_peers is not None
        self.publications: dict[int, SimPublication] = {}
        if connected_peers is not None:
            for member in members:
                if member.id != member_id:
                    publication = self.publications[member.id] = SimPublication()
                    publication.connected = member.id in connected_peers

    # -- clocks -------------------------------------------------------------------------------------------

    def clock_ns(self) -> int:
        """`clusterClock.timeNanos()`: the millisecond cluster clock, in ns."""
        return self.now_ns

    def cluster_time(self) -> int:
        """`clusterClock.time()` in the cluster's time unit (milliseconds)."""
        return self.now_ns // MS

    def epoch_ms(self) -> int:
        """`epochClock.time()`: node-state.dat timestamps.  One clock drives both in the model."""
        return self.now_ns // MS

    @staticmethod
    def ns_to_cluster_time(now_ns: int) -> int:
        return now_ns // MS

    @staticmethod
    def cluster_time_to_ns(timestamp: int) -> int:
        return timestamp * MS

    def set_time(self, now_ns: int, output_ts: int) -> None:
        self.now_ns = now_ns - now_ns % MS
        self.output_ts = output_ts

    # -- outputs ------------------------------------------------------------------------------------------

    def emit(self, output: Any) -> None:
        self.outputs.append(output)
        self.changes += 1

    def draw_nomination_delay_ns(self) -> int:
        """Aeron's ``(long)(ctx.random().nextDouble() * (electionTimeoutNs >> 1))``; the draw is an output."""
        value = self.random.next_double()
        delay_ns = int(value * (self.config.election_timeout_ns >> 1))
        source = getattr(self.random, "source", "seeded")
        self.emit(NominationDraw(self.output_ts, self.member_id, value, source, delay_ns))
        return delay_ns

    def send(self, peer_id: int, message: Any) -> bool:
        """`ConsensusPublisher`: offer ``message`` to the consensus publication to ``peer_id``; False when
        the publication refuses it (not connected, or back pressure: only with `PublicationStatus`
        evidence; the synthetic environment takes every offer).  Aeron's callers decide what a refusal
        means: a ballot or an AppendPosition is tried again, a CanvassPosition or CommitPosition is not."""
        if peer_id == self.member_id or peer_id not in self.member_by_id:
            return False
        if not self.publication_evidence:
            self.emit(Send(self.output_ts, self.member_id, peer_id, "consensus", message))
            return True
        publication = self.publications.get(peer_id)
        if publication is None or not publication.offer(len(encode(message))):
            return False
        self.emit(Send(self.output_ts, self.member_id, peer_id, "consensus", message, None, publication.position))
        return True

    def _send_to_others(self, message: Any) -> None:
        if self.publication_evidence:
            for member in self.members:
                if member.id != self.member_id:
                    self.send(member.id, message)
            return
        for member in self.members:
            if member.id != self.member_id:
                self.emit(Send(self.output_ts, self.member_id, member.id, "consensus", message))

    def on_publication_status(self, peer_id: int, connected: bool, sender_position: int | None,
                              sender_stalled: bool = False) -> None:
        """Evidence: the driver's view of the consensus publication to ``peer_id`` from now on."""
        publication = self.publications.get(peer_id)
        if publication is not None:
            publication.on_status(connected, sender_position, sender_stalled)

    def set_role(self, new_role: Role) -> None:
        if new_role is not self.role:
            self.emit(RoleChange(self.output_ts, self.member_id, self.role.name, new_role.name, self.cause))
            self.role = new_role

    def set_state(self, new_state: ModuleState) -> None:
        if new_state is not self.state:
            self.emit(ModuleStateChange(self.output_ts, self.member_id, self.state.name, new_state.name, self.cause))
            self.state = new_state

    def log_state_change(
        self,
        old_state: ElectionState,
        new_state: ElectionState,
        leader_id: int,
        candidate_term_id: int,
        leadership_term_id: int,
        log_position: int,
        log_leadership_term_id: int,
        append_position: int,
        catchup_position: int,
        reason: str,
    ) -> None:
        self.emit(
            StateChange(
                self.output_ts,
                self.member_id,
                old_state.name,
                new_state.name,
                reason,
                leader_id,
                candidate_term_id,
                leadership_term_id,
                log_position,
                log_leadership_term_id,
                append_position,
                catchup_position,
                self.cause,
            )
        )

    def count_error(self, ex: BaseException) -> None:
        self.errors += 1

    # -- files --------------------------------------------------------------------------------------------

    def update_candidate_term_id(self, candidate_term_id: int, log_position: int, timestamp: int) -> None:
        self.node_state.update_candidate_term_id(candidate_term_id, log_position, timestamp)
        self._candidate_term_written(candidate_term_id, log_position, timestamp)

    def propose_max_candidate_term_id(self, candidate_term_id: int, log_position: int, timestamp: int) -> int:
        existing = self.node_state.candidate_term.candidate_term_id
        result = self.node_state.propose_max_candidate_term_id(candidate_term_id, log_position, timestamp)
        if candidate_term_id > existing:
            self._candidate_term_written(candidate_term_id, log_position, timestamp)
        return result

    def _candidate_term_written(self, candidate_term_id: int, log_position: int, timestamp: int) -> None:
        if self.flags.node_state_file:
            self.emit(
                NodeStateWrite(self.output_ts, self.member_id, candidate_term_id, log_position, timestamp, self.cause)
            )
        else:
            # Before 1.41.0 the term went to cluster-mark.dat, which keeps no position or timestamp.  The
            # model still holds it in its NodeStateFile (the one place it reads the term back from).
            self.emit(MarkFileWrite(self.output_ts, self.member_id, candidate_term_id, self.cause))

    def flush_recording_log_changes(self) -> None:
        for op, entry in self.recording_log.take_changes():
            self.emit(RecordingLogChange(self.output_ts, self.member_id, op, entry, self.cause))

    def ensure_recording_log_coherent(
        self,
        recording_id: int,
        initial_log_leadership_term_id: int,
        initial_term_base_log_position: int,
        leadership_term_id: int,
        term_base_log_position: int,
        log_position: int,
        now_ns: int,
    ) -> None:
        try:
            self.recording_log.ensure_coherent(
                recording_id,
                initial_log_leadership_term_id,
                initial_term_base_log_position,
                leadership_term_id,
                term_base_log_position,
                log_position,
                self.ns_to_cluster_time(now_ns),
                now_ns=now_ns,
            )
        except RecordingLogError as error:
            raise ClusterException(str(error)) from None
        finally:
            self.flush_recording_log_changes()

    def set_log_recording_id(self, recording_id: int) -> None:
        self.log_recording_id = recording_id

    # -- startup and the duty cycle ------------------------------------------------------------------------

    def on_start(self, now_ns: int) -> None:
        """§6.1 `onStart`: NEW_ELECTION "node started", the startup election's first `doWork`, ACTIVE."""
        self.slow_tick_deadline_ns = self.now_ns
        if self.flags.new_election_event:
            self.emit(
                ElectionStarted(
                    self.output_ts,
                    self.member_id,
                    "node started",
                    self.recovery_last_leadership_term_id,
                    self.commit_position,
                    self.recovery_appended_log_position,
                    self.cause,
                )
            )
        self.election = Election(
            self,
            is_node_startup=True,
            graceful_closed_leader_id=NULL_VALUE,
            leadership_term_id=self.recovery_last_leadership_term_id,
            term_base_log_position=self.recovery_last_term_base_log_position,
            log_position=self.commit_position,
            append_position=self.recovery_appended_log_position,
        )
        self._guarded(lambda: self.election.do_work(self.now_ns))
        self.set_state(ModuleState.ACTIVE)

    def duty_cycle(self, message: Any = None, peer: int | None = None, held: Sequence[tuple[Any, Any]] = ()) -> None:
        """One `doWork` at the current clock: slow tick, one consensus message, election or consensus work.

        As in Aeron, one try covers the whole cycle: an exception skips the rest of the cycle and, during
        an election, sends it to INIT (`handleError`); outside an election Aeron's agent runner reports it
        and the next cycle carries on.
        """
        now_ns = self.now_ns
        try:
            # The archive's recorder and replayer are threads of their own, not cycles of this one.
            if self.follower_recorder_ns is not None:
                self.maybe_start_recorder()
            if self.pending_catchup_replays:
                self.maybe_send_catchup_replays()
            if now_ns > self.slow_tick_deadline_ns:
                self._realign_slow_tick(now_ns)
            if now_ns >= self.slow_tick_deadline_ns:
                work = self.slow_tick_work(now_ns)
                self.slow_tick_deadline_ns = now_ns + 1 if work else now_ns + SLOW_TICK_INTERVAL_NS
            for waiting, _ in held:  # what arrived while it waited for the driver, polled in one go
                handler = _MESSAGE_HANDLERS.get(type(waiting))
                if handler is not None:
                    handler(self, waiting)
            if message is not None:
                handler = _MESSAGE_HANDLERS.get(type(message))
                if handler is not None:
                    handler(self, message)
            if self.state is ModuleState.CLOSED:
                return
            election = self.election
            if election is not None:
                election.do_work(now_ns)
            else:
                self.consensus_work(now_ns)
        except ClusterTermination:
            self.terminate()
        except AeronError as ex:
            if self.election is not None:
                self.election.handle_error(now_ns, ex)
            else:
                self.count_error(ex)

    def _guarded(self, work) -> int:
        """Aeron's catch for work done outside `doWork` (the start-up election's first `doWork`)."""
        try:
            return work() or 0
        except ClusterTermination:
            self.terminate()
            return 1
        except AeronError as ex:
            if self.election is not None:
                self.election.handle_error(self.now_ns, ex)
            else:
                self.count_error(ex)
            return 1

    def _realign_slow_tick(self, now_ns: int) -> None:
        """Keep the 10 ms slow-tick phase across milliseconds the driver skipped (nothing was due there)."""
        deadline = self.slow_tick_deadline_ns
        if deadline >= now_ns:
            return
        first = -(-deadline // MS) * MS  # the first tick at or after the deadline
        if first < now_ns:
            steps = -(-(now_ns - first) // SLOW_TICK_INTERVAL_NS)
            self.slow_tick_deadline_ns = first + steps * SLOW_TICK_INTERVAL_NS

    def slow_tick_at_or_after(self, time_ns: int) -> int:
        deadline = self.slow_tick_deadline_ns
        first = max(-(-deadline // MS) * MS, self.now_ns)
        if time_ns <= first:
            return first
        return first + -(-(time_ns - first) // SLOW_TICK_INTERVAL_NS) * SLOW_TICK_INTERVAL_NS

    def terminate(self) -> None:
        self.set_state(ModuleState.CLOSED)
        self.election = None

    def slow_tick_work(self, now_ns: int) -> int:
        """§6.4: during an election the heartbeat and session checks are skipped."""
        if self.election is not None:
            return 0
        if self.role is Role.LEADER:
            if self.state is ModuleState.ACTIVE and self.aborts_ns and now_ns >= self.aborts_ns[0]:
                # `checkClusterControlToggle`, ABORT: no snapshot; the followers terminate at the log's end.
                self.aborts_ns.pop(0)
                self._send_termination_positions(self.log.end)
                self.set_state(ModuleState.TERMINATING)
                return 1
            if self.state is ModuleState.ACTIVE and not cm.has_active_quorum(
                self.members, now_ns, self.config.leader_heartbeat_timeout_ns
            ):
                self.enter_election(False, "inactive follower quorum")
                return 1
        elif self.state in (ModuleState.ACTIVE, ModuleState.SUSPENDED):
            if (
                self.termination_position == NULL_POSITION
                and now_ns >= self.time_of_last_log_update_ns + self.config.leader_heartbeat_timeout_ns
            ):
                self.enter_election(False, "leader heartbeat timeout")
                return 1
        return 0

    def consensus_work(self, now_ns: int) -> int:
        if self.role is Role.LEADER:
            if self.state is ModuleState.ACTIVE and self.recording_active:
                return self.update_leader_position(now_ns, self.log.end)
            return 0
        work = 0
        if self.snapshot_done_ns is not None and now_ns >= self.snapshot_done_ns:
            self.snapshot_done_ns = None
            self.set_state(self.state_after_snapshot)
            work += 1
        if self.state in (ModuleState.ACTIVE, ModuleState.SUSPENDED):
            if self.termination_position != NULL_POSITION and self.log_adapter_position >= self.termination_position:
                self._follower_terminate()
                return 1
            limit = self.log.end if self.recording_active else self.log_recording_stop_position
            count = self.poll_log(min(self.notified_commit_position, limit))
            if count == 0 and self.log_image is not None and self.log_image.is_closed:
                is_eos = self.log_image.is_end_of_stream
                self.count_error(ClusterEvent(f"log disconnected from leader: eos={_java_bool(is_eos)}"))
                self.enter_election(is_eos, f"log disconnected from leader: eos={_java_bool(is_eos)}")
                return 1
            if self.log_adapter_position > self.commit_position:
                self.commit_position = self.log_adapter_position
            work += count
        work += self.update_follower_position(now_ns)
        return work

    # -- election entry and exit ---------------------------------------------------------------------------

    def enter_election(self, is_log_end_of_stream: bool, reason: str) -> None:
        """§6.2."""
        if self.election is not None:
            raise ClusterException("election in progress")
        self.set_role(Role.FOLLOWER)
        term_entry = self.recording_log.find_term_entry(self.leadership_term_id)
        term_base = term_entry.term_base_log_position if term_entry is not None else self.recovery_last_term_base_log_position
        if self.recording_active:
            appended = self.log.end
        else:
            appended = max(self.recovery_appended_log_position, self.log_recording_stop_position)
        commit = self.commit_position
        if self.flags.new_election_event:
            self.emit(
                ElectionStarted(
                    self.output_ts, self.member_id, reason, self.leadership_term_id, commit, appended, self.cause
                )
            )
        self.count_error(ClusterEvent(reason))
        graceful = self.leader_member.id if is_log_end_of_stream and self.leader_member is not None else NULL_VALUE
        self.election = Election(
            self,
            is_node_startup=False,
            graceful_closed_leader_id=graceful,
            leadership_term_id=self.leadership_term_id,
            term_base_log_position=term_base,
            log_position=commit,
            append_position=appended,
        )
        self.election.do_work(self.now_ns)

    def prepare_for_new_leadership(self, log_position: int, now_ns: int) -> int:
        """§2.1: tear down the log and go back to the last recorded position."""
        self.set_role(Role.FOLLOWER)
        self.log_image = None
        self.follower_recording_ns = None
        self.follower_recorder_ns = None
        self.unrecorded_log_frames = []
        self.held_log_frames = {}
        self.catchup_log_destination = None
        self.live_log_destination = None
        self.has_log_publication = False
        if self.recording_active:
            self.recording_active = False
            self.log_recording_stop_position = self.log.end
        if self.log_recording_id != NULL_VALUE:
            self.last_append_position = self.log_recording_stop_position
            self.time_of_last_append_position_update_ns = now_ns
            self._rebuild_recovery_plan()
            self.commit_position = log_position
            self.log_adapter_position = log_position
        return self.last_append_position

    def _rebuild_recovery_plan(self) -> None:
        """`recordingLog.createRecoveryPlan(...)`: what enterElection falls back on when no recording runs."""
        plan = self.recording_log.recovery_plan_terms(self.config.service_count)
        self.recovery_last_leadership_term_id = plan.last_leadership_term_id
        self.recovery_last_term_base_log_position = plan.last_term_base_log_position
        self.recovery_appended_log_position = self.log.end if self.recording_active else self.log_recording_stop_position

    def election_complete(self, now_ns: int) -> None:
        """§2.18 `electionComplete`."""
        election = self.election
        self.leadership_term_id = election.leadership_term_id
        if self.role is Role.LEADER:
            self.time_of_last_log_update_ns = now_ns - self.config.leader_heartbeat_interval_ns
        else:
            self.time_of_last_log_update_ns = now_ns
            self.time_of_last_append_position_update_ns = now_ns
            self.time_of_last_append_position_send_ns = now_ns
        self._rebuild_recovery_plan()
        self.notified_commit_position = election.log_position
        self.commit_position = election.log_position
        self.leader_member = election.leader()
        leader_id = self.leader_member.id if self.leader_member is not None else NULL_VALUE
        for member in self.members:
            member.is_leader = member.id == leader_id
        self.election = None
        self.election_state_code = ElectionState.CLOSED.code

    # -- the consensus adapter: message wrappers (§6.3) ------------------------------------------------------

    def on_canvass_position(self, m: Any) -> None:
        election = self.election
        if election is not None:
            election.on_canvass_position(
                m.log_leadership_term_id, m.log_position, m.leadership_term_id, m.follower_member_id, m.protocol_version
            )
            return
        if self.role is not Role.LEADER or m.log_leadership_term_id > self.leadership_term_id:
            return
        follower = self.member_by_id.get(m.follower_member_id)
        if follower is None or follower.id == self.member_id:
            return
        self._stop_existing_catchup_replay(follower)
        term_entry = self.recording_log.find_term_entry(self.leadership_term_id)
        term_base = term_entry.term_base_log_position if term_entry is not None else NULL_POSITION
        next_leadership_term_id = NULL_VALUE
        next_term_base_log_position = NULL_POSITION
        next_log_position = NULL_POSITION
        if m.log_leadership_term_id < self.leadership_term_id:
            next_entry = self.recording_log.find_term_entry(m.log_leadership_term_id + 1)
            if next_entry is not None:
                next_leadership_term_id = next_entry.leadership_term_id
                next_term_base_log_position = next_entry.term_base_log_position
                next_log_position = next_entry.log_position
            else:
                next_leadership_term_id = self.leadership_term_id
                next_term_base_log_position = term_base
        message = NewLeadershipTerm(
            log_leadership_term_id=m.log_leadership_term_id,
            next_leadership_term_id=next_leadership_term_id,
            next_term_base_log_position=next_term_base_log_position,
            next_log_position=next_log_position,
            leadership_term_id=self.leadership_term_id,
            term_base_log_position=term_base,
            log_position=self.log.end,
            leader_recording_id=self.log_recording_id,
            timestamp=self.cluster_time(),
            leader_member_id=self.member_id,
            log_session_id=self.log_publication_session_id,
            app_version=self.config.app_version,
            is_startup=BooleanType.FALSE,
        )
        if self.flags.follower_replay_bounded_by_commit:
            # Schema v15 (1.50.0): the leader says what is committed; outside an election, its commit position.
            message = with_commit_position(message, self.commit_position)
        self.send(follower.id, message)

    def on_request_vote(self, m: Any) -> None:
        if self.election is not None:
            self.election.on_request_vote(
                m.log_leadership_term_id, m.log_position, m.candidate_term_id, m.candidate_member_id, m.protocol_version
            )
        elif m.candidate_term_id > self.leadership_term_id:
            # The request itself is dropped, not handed to the new election.
            self.enter_election(False, "unexpected vote request")

    def on_vote(self, m: Any) -> None:
        if self.election is not None:
            self.election.on_vote(
                m.candidate_term_id,
                m.log_leadership_term_id,
                m.log_position,
                m.candidate_member_id,
                m.follower_member_id,
                _bool(m.vote),
            )

    def on_new_leadership_term(self, m: Any) -> None:
        if _major(m.app_version) != _major(self.config.app_version):
            self.count_error(ClusterException(f"incompatible version: {self.config.app_version} log={m.app_version}"))
            raise ClusterTermination("incompatible version")
        now_ns = self.now_ns
        if m.leadership_term_id >= self.leadership_term_id or not self.flags.leader_update_ignores_stale_terms:
            self.time_of_last_leader_update_ns = now_ns
        if self.election is not None:
            self.election.on_new_leadership_term(
                m.log_leadership_term_id,
                m.next_leadership_term_id,
                m.next_term_base_log_position,
                m.next_log_position,
                m.leadership_term_id,
                m.term_base_log_position,
                m.log_position,
                m.leader_recording_id,
                m.timestamp,
                m.leader_member_id,
                m.log_session_id,
                _bool(m.is_startup),
                commit_position=commit_position_of(m),
            )
        elif (
            self.role is Role.FOLLOWER
            and m.leadership_term_id == self.leadership_term_id
            and self.leader_member is not None
            and m.leader_member_id == self.leader_member.id
        ):
            self.notified_commit_position = max(self.notified_commit_position, m.log_position)
            self.time_of_last_log_update_ns = now_ns
        elif m.leadership_term_id > self.leadership_term_id:
            self.enter_election(False, "unexpected new leadership term event")

    def on_append_position(self, m: Any) -> None:
        if self.election is not None:
            self.election.on_append_position(m.leadership_term_id, m.log_position, m.follower_member_id, m.flags)
        elif self.role is Role.LEADER and m.leadership_term_id <= self.leadership_term_id:
            follower = self.member_by_id.get(m.follower_member_id)
            if follower is not None:
                # 1.47.3 does not set the follower's leadershipTermId here (1.50.0 does).
                if self.flags.consistent_follower_positions:
                    follower.leadership_term_id = m.leadership_term_id
                follower.log_position = m.log_position
                follower.time_of_last_append_position_ns = self.now_ns
                self.track_catchup_completion(follower, m.leadership_term_id, m.flags)

    def on_commit_position(self, m: Any) -> None:
        now_ns = self.now_ns
        if m.leadership_term_id >= self.leadership_term_id or not self.flags.leader_update_ignores_stale_terms:
            self.time_of_last_leader_update_ns = now_ns
        if self.election is not None:
            self.election.on_commit_position(m.leadership_term_id, m.log_position, m.leader_member_id)
        elif (
            self.role is Role.FOLLOWER
            and m.leadership_term_id == self.leadership_term_id
            and self.leader_member is not None
            and m.leader_member_id == self.leader_member.id
        ):
            self.notified_commit_position = m.log_position
            self.time_of_last_log_update_ns = now_ns
        elif m.leadership_term_id > self.leadership_term_id:
            self.enter_election(False, "unexpected commit position from new leader")

    def on_catchup_position(self, m: Any) -> None:
        """§3.12, leader side: start an archive replay of the log to the follower's catch-up endpoint."""
        if m.leadership_term_id > self.leadership_term_id or self.role is not Role.LEADER:
            return
        follower = self.member_by_id.get(m.follower_member_id)
        if follower is None or follower.id == self.member_id or follower.catchup_replay_session_id != NULL_VALUE:
            return
        follower.catchup_replay_session_id = self.log_publication_session_id
        follower.catchup_replay_correlation_id = self._next_correlation_id()
        self.changes += 1
        if self.catchup_replay_waits_ns:
            # The archive's replay session sends once its publication to the follower's catch-up endpoint
            # is connected (f_follower_kill_rejoin_catchup: 489 ms after the request, the follower's driver
            # answering late): with the recorded time, the frames go out then.
            self.pending_catchup_replays.append((self.output_ts + self.catchup_replay_waits_ns.pop(0), follower.id,
                                                 m.log_position))
            return
        self._send_log_frames(follower.id, m.log_position)

    def maybe_send_catchup_replays(self) -> int:
        """Catch-up replays whose recorded start has come: the archive sends the log from where asked."""
        pending = self.pending_catchup_replays
        if not pending or all(due > self.output_ts for due, _, _ in pending):
            return 0
        self.pending_catchup_replays = [p for p in pending if p[0] > self.output_ts]
        for due, follower_id, position in pending:
            follower = self.member_by_id.get(follower_id)
            if due <= self.output_ts and follower is not None and follower.catchup_replay_session_id != NULL_VALUE:
                self._send_log_frames(follower_id, position)
        self.changes += 1
        return 1

    def on_stop_catchup(self, m: Any) -> None:
        """§3.12, follower side: the leader says the catch-up replay is done; drop its destination."""
        if m.leadership_term_id == self.leadership_term_id and m.follower_member_id == self.member_id:
            if self.catchup_log_destination is not None:
                self.catchup_log_destination = None
                self.changes += 1

    def on_termination_position(self, m: Any) -> None:
        if self.role is Role.FOLLOWER and m.leadership_term_id == self.leadership_term_id:
            self.termination_position = m.log_position
            self.changes += 1

    def track_catchup_completion(self, follower: ClusterMember, leadership_term_id: int, flags: int) -> None:
        """§3.12: once a catching-up follower reaches the leader's log, stop its replay and tell it."""
        if follower.catchup_replay_session_id == NULL_VALUE and not (flags & APPEND_POSITION_FLAG_CATCHUP):
            return
        if not self.has_log_publication or follower.log_position < self.log.end:
            return
        if follower.catchup_replay_correlation_id != NULL_VALUE:
            follower.catchup_replay_correlation_id = NULL_VALUE
        if self.send(follower.id, StopCatchup(leadership_term_id=leadership_term_id, follower_member_id=follower.id)):
            follower.catchup_replay_session_id = NULL_VALUE

    def _stop_existing_catchup_replay(self, follower: ClusterMember) -> None:
        if follower.catchup_replay_session_id != NULL_VALUE:
            follower.catchup_replay_session_id = NULL_VALUE
            follower.catchup_replay_correlation_id = NULL_VALUE
            self.changes += 1

    def stop_all_catchups(self) -> None:
        for member in self.members:
            if member.catchup_replay_session_id != NULL_VALUE:
                member.catchup_replay_session_id = NULL_VALUE
                member.catchup_replay_correlation_id = NULL_VALUE

    def _next_correlation_id(self) -> int:
        value = self.next_correlation_id
        self.next_correlation_id += 1
        return value

    # -- leader: positions, commit, log ---------------------------------------------------------------------

    def quorum_position(self) -> int:
        if self.flags.active_member_quorum:
            # 1.50.0: only members heard from within the heartbeat timeout count (the leader always does).
            return cm.active_quorum_position(
                self.members, self.ranked_positions, self.this_member, self.now_ns, self.config.leader_heartbeat_timeout_ns
            )
        return cm.quorum_position(self.members, self.ranked_positions)

    def publish_commit_position(self, position: int, leadership_term_id: int | None = None) -> None:
        """CommitPosition with the *agent's* leadershipTermId (in LEADER_LOG_REPLICATION still the old one),
        unless the election gives its own (1.50.0, `commit_position_election_term`)."""
        term = self.leadership_term_id if leadership_term_id is None else leadership_term_id
        self._send_to_others(CommitPosition(leadership_term_id=term, log_position=position, leader_member_id=self.member_id))

    def update_leader_position(self, now_ns: int, position: int) -> int:
        self.this_member.log_position = position
        self.this_member.time_of_last_append_position_ns = now_ns
        commit = min(self.quorum_position(), position)
        if commit > self.commit_position or now_ns >= self.time_of_last_log_update_ns + self.config.leader_heartbeat_interval_ns:
            self.publish_commit_position(commit)
            self.commit_position = commit
            self.time_of_last_log_update_ns = now_ns
            return 1
        return 0

    def add_log_publication(self, append_position: int) -> int:
        """The leader's log publication, created at ``append_position``; returns its session id.

        Adding it is a blocking call to the driver: with a recorded wait, nothing else runs until then."""
        ready = None
        if self.log_publication_waits_ns:
            ready = self.output_ts + self.log_publication_waits_ns.pop(0)
        elif self.log_publications_ready_ns:
            ready = self._next_ready(self.log_publications_ready_ns)
        if ready is not None and ready > self.output_ts:
            self.blocked_until_ns = ready
            # What the member does after the call returns happens then: Aeron logs the state change into
            # LEADER_LOG_REPLICATION after `addLogPublication` (j_short_timeouts_leader_kill, member 1:
            # ROLE_CHANGE CANDIDATE -> LEADER at 19:27:45.044, the state change at 19:27:45.874, the
            # driver's READY for the log publication between).
            self.output_ts = self.blocked_until_ns
        self.log.set_end(append_position)
        self.has_log_publication = True
        self.log_publication_count += 1
        # Session ids are the driver's; the model derives them deterministically from the member.
        self.log_publication_session_id = self.session_id_base + self.log_publication_count
        return self.log_publication_session_id

    def _next_ready(self, times: list[int]) -> int | None:
        """The time the capture shows the publication being added now was there: the first of ``times``
        within `EVIDENCE_REACH_NS` of now (earlier ones were publications the model did not add then);
        None when none is (the model adds one the member did not, or not then: no wait)."""
        now = self.output_ts
        while times and times[0] < now - EVIDENCE_REACH_NS:
            times.pop(0)
        if times and times[0] <= now + EVIDENCE_REACH_NS:
            return times.pop(0)
        return None

    def join_log_as_leader(self, leadership_term_id: int, log_position: int, log_session_id: int, is_startup: bool) -> None:
        """Start the log recording and wait for the services to join the log: a blocking call in Aeron;
        with a recorded wait (or, without one, the capture's sight of the join over), nothing else runs
        until then, and what follows happens then."""
        self.leadership_term_id = leadership_term_id
        self._start_log_recording()
        ready = None
        if self.leader_join_waits_ns:
            ready = self.output_ts + self.leader_join_waits_ns.pop(0)
        elif self.leader_joins_ready_ns:
            ready = self._next_ready(self.leader_joins_ready_ns)
        if ready is not None and ready > self.output_ts:
            self.blocked_until_ns = max(self.blocked_until_ns or 0, ready)
            self.output_ts = self.blocked_until_ns

    def _start_log_recording(self) -> None:
        if self.log_recording_id == NULL_VALUE:
            self.log_recording_id = self._new_recording_id()
        self.recording_active = True

    def _new_recording_id(self) -> int:
        ids = [entry.recording_id for entry in self.recording_log.entries]
        return max(ids) + 1 if ids else 0

    def append_new_leadership_term_event(self, now_ns: int) -> bool:
        election = self.election
        position = self.log.end + NEW_LEADERSHIP_TERM_EVENT_FRAME_LENGTH
        self.append_to_log(
            NewLeadershipTermEvent(
                leadership_term_id=election.leadership_term_id,
                log_position=position,
                timestamp=self.ns_to_cluster_time(now_ns),
                term_base_log_position=election.log_position,
                leader_member_id=self.member_id,
                log_session_id=election.log_session_id,
                time_unit=ClusterTimeUnit.MILLIS,
                app_version=self.config.app_version,
            ),
            NEW_LEADERSHIP_TERM_EVENT_FRAME_LENGTH,
        )
        return True

    def append_to_log(self, message: Any, frame_length: int) -> int:
        """The leader appends one message: the recording grows and every follower's log endpoint gets it."""
        position = self.log.end + frame_length
        self.log.append(position, message)
        self.emit(LogAppend(self.output_ts, self.member_id, position, message))
        for member in self.members:
            if member.id != self.member_id:
                self.emit(Send(self.output_ts, self.member_id, member.id, "log", message, position))
        return position

    def _send_log_frames(self, peer_id: int, from_position: int) -> None:
        """An archive replay of the leader's log from ``from_position`` to ``peer_id`` (catch-up)."""
        for end, message in self.log_frames(from_position, self.log.end):
            if message is None:
                # Unknown content (e.g. replicated without evidence): stand in an empty session message.
                message = SessionMessageHeader(leadership_term_id=self.leadership_term_id, cluster_session_id=-1, timestamp=0)
            self.emit(Send(self.output_ts, self.member_id, peer_id, "log", message, end))

    def log_frames(self, start: int, stop: int) -> list[tuple[int, Any]]:
        """(end position, message | None) of the local log over (start, stop].

        Where the content is unknown (replicated without evidence, or given only by its length), the
        NewLeadershipTermEvent that must sit at the base of every term with content is put back from
        recording.log, so that replaying such a stretch moves the terms on as Aeron's replay would.
        """
        frames: list[tuple[int, Any]] = []
        for frame_start, frame_end, message in self.log.overlapping(start, stop):
            if message is not None:
                if frame_end <= stop:
                    frames.append((frame_end, message))
                continue
            low, high = max(frame_start, start), min(frame_end, stop)
            cursor = low
            for base, event in self._term_events(low, high):
                if base > cursor:
                    frames.append((base, None))
                cursor = base + NEW_LEADERSHIP_TERM_EVENT_FRAME_LENGTH
                frames.append((cursor, event))
            if high > cursor:
                frames.append((high, None))
        return frames

    def _term_events(self, low: int, high: int) -> list[tuple[int, Any]]:
        """NewLeadershipTermEvents implied by recording.log for terms with content based in [low, high)."""
        terms = sorted(
            (e for e in self.recording_log.entries if e.type == EntryType.TERM and e.is_valid),
            key=lambda e: e.leadership_term_id,
        )
        events = []
        for index, entry in enumerate(terms):
            base = entry.term_base_log_position
            next_base = terms[index + 1].term_base_log_position if index + 1 < len(terms) else None
            if next_base is not None and next_base <= base:
                continue  # an empty term: nothing was appended in it
            end = base + NEW_LEADERSHIP_TERM_EVENT_FRAME_LENGTH
            if base < low or end > high:
                continue
            events.append(
                (
                    base,
                    NewLeadershipTermEvent(
                        leadership_term_id=entry.leadership_term_id,
                        log_position=end,
                        timestamp=entry.timestamp,
                        term_base_log_position=base,
                        leader_member_id=NULL_VALUE,
                        log_session_id=NULL_SESSION_ID,
                        time_unit=ClusterTimeUnit.MILLIS,
                        app_version=self.config.app_version,
                    ),
                )
            )
        return events

    def on_log_append(self, message: Any, log_position: int | None, length: int | None) -> None:
        """Evidence: the capture shows this member, as leader, sending ``message`` on its log publication,
        ending at ``log_position``.  What lies past the local log is appended as Aeron did (the frame goes
        to every follower); what is already there (the election's own NewLeadershipTermEvent, a catch-up
        replay of older frames) is not appended twice.  A ClusterActionRequest takes effect at the leader
        as it does when a follower meets it in the log (the services acknowledge at once)."""
        if not self.has_log_publication or self.role is not Role.LEADER:
            return  # the model is not leading with a publication: the recorded send will not be matched
        end = log_position if log_position is not None else self.log.end + framed_length(length or len(encode(message)))
        if end <= self.log.end:
            return
        self.append_to_log(message, end - self.log.end)
        if type(message) is ClusterActionRequest and self.election is None:
            if message.action is ClusterAction.SNAPSHOT and self.snapshots_taken == self.shutdown_snapshot:
                self._send_termination_positions(end)
            self.on_replay_cluster_action(message, end)

    def _send_termination_positions(self, position: int) -> None:
        """The leader's ClusterTool SHUTDOWN: with the SNAPSHOT action appended, every follower is told the
        position at which to terminate, once its snapshot is taken."""
        self.termination_position = position
        for member in self.members:
            if member.id != self.member_id:
                self.send(member.id, TerminationPosition(leadership_term_id=self.leadership_term_id, log_position=position))

    def on_ingress(self, message: Any, length: int | None) -> None:
        """A client message reaches the leader: what Aeron appends to the log for it (unless the capture
        shows the appends themselves)."""
        if self.log_evidence:
            return
        if self.role is not Role.LEADER or self.election is not None or self.state is not ModuleState.ACTIVE:
            return
        timestamp = self.cluster_time()
        name = type(message).__name__
        if name == "SessionMessageHeader":
            payload = max((length or SESSION_HEADER_LENGTH) - SESSION_HEADER_LENGTH, 0)
            entry = SessionMessageHeader(
                leadership_term_id=self.leadership_term_id,
                cluster_session_id=message.cluster_session_id,
                timestamp=timestamp,
            )
            self.append_to_log(entry, framed_length(SESSION_HEADER_LENGTH + payload))
        elif name == "SessionConnectRequest":
            session_id = self.next_cluster_session_id
            self.next_cluster_session_id += 1
            entry = SessionOpenEvent(
                leadership_term_id=self.leadership_term_id,
                correlation_id=message.correlation_id,
                cluster_session_id=session_id,
                timestamp=timestamp,
                response_stream_id=message.response_stream_id,
                response_channel=message.response_channel,
                encoded_principal=b"",
            )
            self.append_to_log(entry, framed_length(len(encode(entry))))
        elif name == "SessionCloseRequest":
            entry = SessionCloseEvent(
                leadership_term_id=self.leadership_term_id,
                cluster_session_id=message.cluster_session_id,
                timestamp=timestamp,
                close_reason=CloseReason.CLIENT_ACTION,
            )
            self.append_to_log(entry, framed_length(len(encode(entry))))

    # -- follower: log frames, polling, AppendPosition ---------------------------------------------------------

    def on_log_frame(self, message: Any, log_position: int | None, length: int | None) -> None:
        """A log frame reached this member (live log or catch-up replay).

        During a catch-up the image is fed from two destinations (the leader's archive replay and, once
        near live, its live log), and an Aeron image is contiguous: a frame that starts past its
        position waits in the term buffer until the replay fills the gap.  So does it here (a live
        frame that overtook the replay); outside a catch-up a gap is content the capture did not
        show, and the frame is taken where it ends (so is a frame whose length is not known: a
        scenario's frame may stand for a stretch of the log)."""
        if self.role is Role.LEADER or self.log_image is None or self.log_image.is_closed:
            return
        if self.follower_recorder_ns is not None:
            self.unrecorded_log_frames.append((message, log_position, length))
            return
        self._record_log_frame(message, log_position, length)

    def _record_log_frame(self, message: Any, log_position: int | None, length: int | None) -> None:
        log = self.log
        if log_position is None:
            end = log.end + framed_length(length if length is not None else len(encode(message)))
        else:
            end = log_position
        if end <= log.end:
            return
        if length is not None and log_position is not None and self.catchup_log_destination is not None:
            start = end - framed_length(length)
            if start > log.end:
                self.held_log_frames[start] = (end, message)
                return
        log.append(end, message)
        held = self.held_log_frames
        while held and log.end in held:
            end, message = held.pop(log.end)
            log.append(end, message)
        self.changes += 1

    def on_log_end_of_stream(self) -> None:
        if self.log_image is not None:
            self.changes += 1
            if self.flags.graceful_leader_close_detection:
                self.log_image.is_end_of_stream = True
                if self.archive_evidence:
                    # The image stays open until its driver drops it, seconds later; what the module
                    # acts on is its archive's recording stopping at the end of stream (autoStop): the
                    # STOP signal the evidence holds (h_five_members_leader_kill, member 4: "log
                    # recording stopped: eos=true"; members 1-3, closing, had stopped it themselves).
                    return
                self.log_image.is_closed = True
            else:
                self.log_image.is_closed = True
                self._log_recording_ended()

    def _log_recording_ended(self) -> None:
        """Before 1.42.0 (#1472): the local recording of the log ends with the stream and its counter goes
        away before the log adapter has read the end of stream, so the election starts without knowing
        the leader closed gracefully (`isLogEndOfStream` false)."""
        if (
            self.election is None
            and self.role is Role.FOLLOWER
            and self.state in (ModuleState.ACTIVE, ModuleState.SUSPENDED)
            and self.recording_active
        ):
            self.enter_election(False, "log recording ended unexpectedly")

    def poll_log(self, limit: int) -> int:
        """The log adapter: process frames up to ``limit``; returns how many."""
        position = self.log_adapter_position
        if limit <= position:
            return 0
        count = 0
        for _start, end, message in self.log.after(position, limit):
            if type(message) is NewLeadershipTermEvent:
                self.on_replay_new_leadership_term_event(message, end)
            elif type(message) is ClusterActionRequest:
                self.on_replay_cluster_action(message, end)
            position = end
            count += 1
        if position > self.log_adapter_position:
            self.log_adapter_position = position
        return count

    def on_replay_cluster_action(self, m: Any, position: int) -> None:
        """A follower meets the leader's ClusterActionRequest in the log.  SUSPEND/RESUME move the module
        state; SNAPSHOT takes a snapshot at ``position`` (the services acknowledge at once), which appends a
        SNAPSHOT entry per service and then the consensus module's to recording.log."""
        if m.leadership_term_id != self.leadership_term_id:
            return
        action = m.action
        if action is ClusterAction.SUSPEND:
            self.set_state(ModuleState.SUSPENDED)
        elif action is ClusterAction.RESUME:
            self.set_state(ModuleState.ACTIVE)
        elif action is ClusterAction.SNAPSHOT and m.flags in (0, INT32_NULL):
            previous = self.state
            self.set_state(ModuleState.SNAPSHOT)
            self.snapshots_taken += 1
            duration = self.snapshot_durations_ns.pop(0) if self.snapshot_durations_ns else 0
            term = self.recording_log.find_term_entry(self.leadership_term_id)
            base = term.term_base_log_position if term is not None else self.recovery_last_term_base_log_position
            try:
                for service_id in [*range(self.config.service_count), -1]:
                    self.recording_log.append_snapshot(
                        self._new_recording_id(), self.leadership_term_id, base, position, m.timestamp, service_id
                    )
            except RecordingLogError as error:
                raise ClusterException(str(error)) from None
            finally:
                self.flush_recording_log_changes()
            if duration > 0 and self.role is Role.FOLLOWER:
                # The recorded time the services and the module took to write it; the leader's snapshot
                # is still taken at once (its CommitPosition heartbeat would go on through it anyway).
                self.snapshot_done_ns = self.output_ts + duration
                self.state_after_snapshot = previous
            else:
                self.set_state(previous)

    def on_replay_new_leadership_term_event(self, m: Any, position: int) -> None:
        """§3.7 agent part: the agent's term moves on, then the election (if any) is told.  ``position``
        is the log position after the event's frame (the LogAdapter passes `header.position()`)."""
        if _major(m.app_version) != _major(self.config.app_version):
            self.count_error(ClusterException(f"incompatible version: {self.config.app_version} log={m.app_version}"))
            raise ClusterTermination("incompatible version")
        self.leadership_term_id = m.leadership_term_id
        if self.election is not None:
            self.election.on_replay_new_leadership_term_event(
                m.leadership_term_id, position, m.timestamp, m.term_base_log_position
            )

    def update_follower_position(self, now_ns: int) -> int:
        recorded = self.log.end if self.recording_active else self.log_recording_stop_position
        position = max(recorded, self.last_append_position)
        return self._send_append_position(now_ns, self.leadership_term_id, position, APPEND_POSITION_FLAG_NONE)

    def _send_append_position(self, now_ns: int, leadership_term_id: int, position: int, flags: int) -> int:
        leader = self.leader_member if self.election is None else self.election.leader()
        if leader is None:
            return 0
        if position > self.last_append_position or now_ns >= self.time_of_last_append_position_send_ns + self.config.leader_heartbeat_interval_ns:
            if self.send(
                leader.id,
                AppendPosition(
                    leadership_term_id=leadership_term_id, log_position=position, follower_member_id=self.member_id, flags=flags
                ),
            ):
                if position > self.last_append_position:
                    self.last_append_position = position
                    self.time_of_last_append_position_update_ns = now_ns
                self.time_of_last_append_position_send_ns = now_ns
                return 1
        return 0

    def _follower_terminate(self) -> None:
        """The log reached the leader's TerminationPosition: TERMINATING, the services acknowledge at once,
        TerminationAck to the leader, CLOSED.  (An orderly shutdown's snapshot comes first: the SNAPSHOT
        action precedes the termination position in the log, and the follower is held in SNAPSHOT for the
        recorded time, see `on_replay_cluster_action`.)"""
        self.set_state(ModuleState.TERMINATING)
        leader = self.leader_member
        if leader is not None:
            self.send(
                leader.id,
                TerminationAck(
                    leadership_term_id=self.leadership_term_id, log_position=self.termination_position, member_id=self.member_id
                ),
            )
        self.set_state(ModuleState.CLOSED)

    # -- follower: subscription, images, catch-up ----------------------------------------------------------------

    def add_follower_subscription(self, log_session_id: int) -> str:
        self.log_subscription = f"aeron:udp?control-mode=manual|session-id={log_session_id}|alias=log-cm"
        self.follower_recording_ns = None
        self.follower_recorder_ns = None
        self.unrecorded_log_frames = []
        wait = self.log_image_waits_ns.pop(0) if self.log_image_waits_ns else None
        if self.log_images_ns is not None:
            # When the capture shows this member's driver answering the leader's log session; never,
            # when it never did (h_five_members_leader_kill: members 3 and 4 waiting for member 1's term 1).
            # The wire names the session, so it wins over the agent log's wait for the next image.
            self.log_image_available_ns = self.log_images_ns.get(log_session_id, NEVER_NS)
        elif wait is not None:  # the recorded time until the driver had the leader's image
            self.log_image_available_ns = self.output_ts + wait
        self.changes += 1
        return self.log_subscription

    def close_log_subscription(self) -> None:
        self.log_subscription = None
        self.log_image = None
        self.follower_recording_ns = None
        self.follower_recorder_ns = None
        self.unrecorded_log_frames = []
        self.held_log_frames = {}
        self.catchup_log_destination = None
        self.live_log_destination = None

    def add_catchup_log_destination(self, endpoint: str) -> None:
        self.catchup_log_destination = f"aeron:udp?endpoint={endpoint}"

    def add_live_log_destination(self, endpoint: str) -> None:
        self.live_log_destination = f"aeron:udp?endpoint={endpoint}"

    def resolved_catchup_endpoint(self) -> str | None:
        # A ":0" catch-up endpoint gets its port from the OS; the model picks a fixed one.
        return "0.0.0.0:40000"

    def is_log_subscription_errored(self) -> bool:
        return False

    def log_subscription_channel(self) -> str:
        return self.log_subscription or ""

    def find_log_image(self, log_session_id: int, log_position: int) -> SimImage | None:
        """`logSubscription.imageBySessionId`: in the model the image is there as soon as it is looked for,
        joined where the election expects it."""
        if self.log_subscription is None:
            return None
        if self.log_image_available_ns is not None and self.output_ts < self.log_image_available_ns:
            return None
        if self.log_image is not None and self.log_image.session_id == log_session_id:
            return self.log_image
        return SimImage(log_session_id, log_position)

    def maybe_start_recorder(self) -> int:
        """The archive's recorder starts on the follower's log image at its recorded time
        (`MemberStart.follower_joins_ns`): what the image holds is recorded from then (until
        then the recording's position is the join position, and AppendPosition says so:
        f_follower_kill_rejoin_catchup's rejoining member reports 8320 first, the catch-up already in its
        image)."""
        if self.follower_recorder_ns is None or self.output_ts < self.follower_recorder_ns:
            return 0
        self.follower_recorder_ns = None
        frames, self.unrecorded_log_frames = self.unrecorded_log_frames, []
        for message, log_position, length in frames:
            self._record_log_frame(message, log_position, length)
        self.changes += 1
        return 1

    def try_join_log_as_follower(self, image: SimImage, is_leader_startup: bool, now_ns: int) -> bool:
        """Start (or extend) the log recording at the join position and attach the image.

        Aeron's fails until the archive's recording counter for the image is there (`tryCreateAppendPosition`),
        the image meanwhile taking what the leader sends; then `awaitServicesReady` blocks the module until
        the services have joined the log, and what arrives meanwhile waits; and the archive's recorder,
        a thread of its own, records the image from the join position once it starts (`maybe_start_recorder`).
        With a recorded join of the image's session (`follower_joins_ns`) the model does the same at the
        recorded times: j_short_timeouts_leader_kill's rejoining member reports the whole catch-up in its
        first AppendPosition, its recorder having started before the services joined;
        f_follower_kill_rejoin_catchup's reports the join position first, its recorder starting after.  A
        recorded 'never' waits for ever (h_five_members_leader_kill: member 4's archive never recorded member
        1's term-1 log, FOLLOWER_LOG_AWAIT timed out; member 3's services never had it, and its module waited
        in `awaitServicesReady` until it was killed).  Without a recorded join, all at once."""
        if self.follower_recording_ns is None:
            self._start_log_recording()
            self.log.set_end(image.join_position)
            self.log_image = image
            recorded = self.follower_joins_ns.get(image.session_id)
            if recorded:
                recording_ns, services_ns, recorder_ns = recorded.pop(0)
                self.follower_recording_ns = NEVER_NS if recording_ns is None else recording_ns
                self.follower_services_ns = services_ns
                self.follower_recorder_ns = NEVER_NS if recorder_ns is None else recorder_ns
            else:
                self.follower_recording_ns = self.follower_services_ns = self.output_ts
                self.follower_recorder_ns = None
            self.unrecorded_log_frames = []
            self.changes += 1
        if self.output_ts < self.follower_recording_ns:
            return False  # no recording position counter for the session yet
        services_ns = self.follower_services_ns
        if services_ns is None:  # `awaitServicesReady` never returns
            self.blocked_until_ns = NEVER_NS
            return False
        self.follower_recording_ns = None
        if services_ns > self.output_ts:
            self.blocked_until_ns = max(self.blocked_until_ns or 0, services_ns)
            self.output_ts = self.blocked_until_ns
        self.log_adapter_position = image.join_position
        self.last_append_position = image.join_position
        self.time_of_last_append_position_update_ns = now_ns
        self.changes += 1
        return True

    def catchup_initiated(self, now_ns: int) -> None:
        self.changes += 1
        self.time_of_last_append_position_update_ns = now_ns
        self.time_of_last_append_position_send_ns = now_ns

    def catchup_poll(self, limit_position: int, now_ns: int) -> int:
        work = 0
        if self.state in (ModuleState.ACTIVE, ModuleState.SUSPENDED):
            count = self.poll_log(min(self.log.end, limit_position))
            work += count
            if count == 0 and self.log_image is not None and self.log_image.is_closed:
                raise ClusterEvent("unexpected image close during catchup")
            if self.log_adapter_position > self.commit_position:
                self.commit_position = self.log_adapter_position
        election = self.election
        # Aeron's catchupPoll sends the module's own leadershipTermId, the term of the last
        # NewLeadershipTermEvent its log showed, not the election's (g_leader_sigterm_reelection_rejoin:
        # member 0 catching up into term 3 reports term 2 until the log reaches term 3's event).
        work += self._send_append_position(now_ns, self.leadership_term_id, self.log.end, APPEND_POSITION_FLAG_CATCHUP)
        if now_ns > self.time_of_last_append_position_update_ns + self.config.leader_heartbeat_timeout_ns and self.state is ModuleState.ACTIVE:
            raise ClusterEvent(
                f"no catchup progress commitPosition={self.commit_position} limitPosition={limit_position}"
                f" lastAppendPosition={self.last_append_position}"
                f" appendPosition={self.log.end if self.recording_active else NULL_POSITION}"
                f" logPosition={election.log_position}"
            )
        return work

    def is_catchup_near_live(self, position: int) -> bool:
        if self.log_image is None:
            return False
        window = min(self.config.log_term_length >> 2, LIVE_ADD_MAX_WINDOW)
        return self.log.end >= position - window

    # -- the archive: local replay, replication, truncation ---------------------------------------------------------

    def new_log_replay(self, start_position: int, stop_position: int) -> SimLogReplay:
        self.changes += 1
        replay = SimLogReplay(self, start_position, stop_position)
        if self.log_replay_durations_ns:  # the recorded time the archive and the services took
            replay.done_at_ns = self.output_ts + self.log_replay_durations_ns.pop(0)
        elif self.log_replays_done_ns and self.role is not Role.LEADER:
            # Without it, the capture's bound: done by the CatchupPosition that followed it.
            now = self.output_ts
            while self.log_replays_done_ns and self.log_replays_done_ns[0][1] <= now:
                self.log_replays_done_ns.pop(0)
            if self.log_replays_done_ns and self.log_replays_done_ns[0][0] <= now:
                replay.done_at_ns = self.log_replays_done_ns.pop(0)[1]
        if self.log_replay_start_waits_ns:
            # Aeron's LogReplay starts with `AeronArchive.startReplay`, a synchronous call: with the
            # recorded time the archive took to answer, nothing else runs until then, and what the election
            # sends next goes out then, its timestamp still the cycle's (g_leader_sigterm_reelection_rejoin:
            # the archive's driver took 1.85 s to add the replay publication; member 0's NewLeadershipTerm
            # from LEADER_REPLAY reached the wire that much later, stamped with the state's entry time).
            wait = self.log_replay_start_waits_ns.pop(0)
            if wait > 0:
                self.blocked_until_ns = max(self.blocked_until_ns or 0, self.output_ts + wait)
                self.output_ts = self.blocked_until_ns
        return replay

    def replay_local_log(self, start_position: int, stop_position: int) -> None:
        """Replay [start, stop) of the local log into the services: the CM sees its NewLeadershipTermEvents."""
        for end, message in self.log_frames(start_position, stop_position):
            if type(message) is NewLeadershipTermEvent:
                self.on_replay_new_leadership_term_event(message, end)
        if stop_position > self.commit_position:
            self.commit_position = stop_position
        self.log_adapter_position = max(self.log_adapter_position, stop_position)

    def new_log_replication(
        self,
        archive_endpoint: str,
        archive_response_endpoint: str | None,
        leader_recording_id: int,
        stop_position: int,
        now_ns: int,
    ) -> SimReplication:
        recording_id = self.log_recording_id if self.log_recording_id != NULL_VALUE else self._new_recording_id()
        replication = SimReplication(
            recording_id=recording_id,
            start_position=self.log.end,
            stop_position=stop_position,
            evidence_driven=self.archive_evidence or bool(self.replication_positions_ns),
            now_ns=now_ns,
            progress_timeout_ns=self.config.replication_progress_timeout_ns,
            progress_check_interval_ns=self.config.leader_heartbeat_interval_ns,
            src_archive_channel=f"aeron:udp?endpoint={archive_endpoint}",
        )
        self.changes += 1
        if not replication.evidence_driven:
            self.log_recording_id = recording_id
            self.log.set_end(stop_position)
            self.log_recording_stop_position = stop_position
        elif not self.archive_evidence:
            # Positions the capture showed before this replication began belong to no replication of it
            # (the AppendPosition of FOLLOWER_BALLOT goes out in the cycle that creates it).
            grace = now_ns + REPLICATION_EVIDENCE_GRACE_NS
            while self.replication_positions_ns and self.replication_positions_ns[0][0] <= grace:
                self.replication_positions_ns.pop(0)
            self.log_replication_evidence = replication
        return replication

    def poll_archive_events(self) -> int:
        """The replication's progress as the capture shows it (``replication_positions_ns``): each position
        the member reported is where its archive's recording had got to; reaching the stop position is the
        archive's SYNC, REPLICATE_END and STOP together."""
        replication = self.log_replication_evidence
        if replication is None or self.election is None or self.election.log_replication is not replication:
            self.log_replication_evidence = None
            return 0
        work = 0
        while self.replication_positions_ns and self.replication_positions_ns[0][0] <= self.output_ts:
            _, position = self.replication_positions_ns.pop(0)
            replication.on_signal(NULL_VALUE, NULL_VALUE, position, "EXTEND")
            if position >= replication.stop_position:
                replication.on_signal(NULL_VALUE, NULL_VALUE, position, "SYNC")
                replication.on_signal(NULL_VALUE, NULL_VALUE, position, "REPLICATE_END")
                replication.on_signal(NULL_VALUE, NULL_VALUE, position, "STOP")
            work += 1
        return work

    def log_replication_ended(self, replication: SimReplication, leader_recording_id: int) -> None:
        self.log.set_end(replication.position)
        self.log_recording_stop_position = replication.position
        self.log_recording_id = replication.recording_id

    def on_recording_signal(self, correlation_id: int, recording_id: int, position: int, signal: str) -> None:
        self.archive_evidence = True
        if self.election is not None:
            self.election.on_recording_signal(correlation_id, recording_id, position, signal)
            return
        if (
            signal == "STOP"
            and recording_id == self.log_recording_id
            and self.state is ModuleState.ACTIVE
            and self.recording_active
        ):
            if not self.flags.graceful_leader_close_detection:
                self._log_recording_ended()
                return
            is_eos = self.log_image is not None and self.log_image.is_end_of_stream
            if self.flags.recording_stopped_eos_reason:
                self.enter_election(is_eos, f"log recording stopped: eos={_java_bool(is_eos)}")
            else:
                self.enter_election(is_eos, "log recording stopped")

    def truncate_log_entry(self, leadership_term_id: int, new_position: int) -> None:
        """§3.9: truncate the recording and commit the term at the new position in recording.log."""
        self.log.truncate(new_position)
        if leadership_term_id != NULL_VALUE:
            try:
                self.recording_log.commit_log_position(leadership_term_id, new_position)
            except RecordingLogError as error:
                raise ClusterException(str(error)) from None
            finally:
                self.flush_recording_log_changes()
        self.log_image = None
        self.held_log_frames = {}
        self.log_recording_stop_position = new_position

    # -- scheduling ---------------------------------------------------------------------------------------------

    def next_deadline_ns(self, after_ns: int) -> int | None:
        """The earliest time after ``after_ns`` at which a duty cycle could act without a new input."""
        if self.state is ModuleState.CLOSED:
            return None
        deadline = self._work_deadline_ns(after_ns)
        if (self.follower_recorder_ns is None and not self.pending_catchup_replays
                and (self.log_replication_evidence is None or not self.replication_positions_ns)):
            return deadline
        archive = [self.follower_recorder_ns] if self.follower_recorder_ns is not None else []
        archive += [due for due, _, _ in self.pending_catchup_replays]
        if self.log_replication_evidence is not None and self.replication_positions_ns:
            archive.append(self.replication_positions_ns[0][0])
        for due in archive:
            if after_ns < due < NEVER_NS and (deadline is None or due < deadline):
                deadline = due
        return deadline

    def _work_deadline_ns(self, after_ns: int) -> int | None:
        if self.election is not None:
            return self.election.next_deadline_ns(after_ns)
        config = self.config
        best: int | None = None
        if self.role is Role.LEADER:
            if self.state is ModuleState.ACTIVE:
                if self.recording_active:
                    heartbeat = self.time_of_last_log_update_ns + config.leader_heartbeat_interval_ns
                    if heartbeat > after_ns:
                        best = heartbeat
                expiry = self._active_quorum_expiry_ns()
                if expiry is not None:
                    check = self.slow_tick_at_or_after(expiry)
                    if check > after_ns and (best is None or check < best):
                        best = check
                if self.aborts_ns:
                    check = self.slow_tick_at_or_after(self.aborts_ns[0])
                    if check > after_ns and (best is None or check < best):
                        best = check
        elif self.state is ModuleState.ACTIVE or self.state is ModuleState.SUSPENDED:
            if self.leader_member is not None:
                heartbeat = self.time_of_last_append_position_send_ns + config.leader_heartbeat_interval_ns
                if heartbeat > after_ns:
                    best = heartbeat
            if self.termination_position == NULL_POSITION:
                check = self.slow_tick_at_or_after(self.time_of_last_log_update_ns + config.leader_heartbeat_timeout_ns)
                if check > after_ns and (best is None or check < best):
                    best = check
        elif self.snapshot_done_ns is not None and self.snapshot_done_ns > after_ns:
            best = self.snapshot_done_ns
        return best

    def _active_quorum_expiry_ns(self) -> int | None:
        """When `has_active_quorum` turns false if no AppendPosition arrives (None: never)."""
        members = self.members
        threshold = cm.quorum_threshold(len(members))
        timeout = self.config.leader_heartbeat_timeout_ns
        expiries = [m.time_of_last_append_position_ns + timeout for m in members if not m.is_leader]
        needed = threshold - (len(members) - len(expiries))  # the leader counts itself
        if needed <= 0:
            return None
        if len(expiries) < needed:
            return self.now_ns
        if needed == 1:  # three members: the latest of the followers' expiries
            return max(expiries) + 1
        expiries.sort(reverse=True)
        return expiries[needed - 1] + 1

    # -- inspection -------------------------------------------------------------------------------------------

    def deadlines(self) -> list[tuple[str, int]]:
        """The member's running deadlines by name (`MemberView.deadlines`; `Node` names a timer's cause by them)."""
        election = self.election
        deadlines: list[tuple[str, int]] = []
        if election is not None:
            deadline = election.next_deadline_ns(self.now_ns)
            if deadline is not None:
                deadlines.append(("election", deadline))
            if election.state is ElectionState.NOMINATE:
                deadlines.append(("nomination", election.nomination_deadline_ns))
            if election.state is ElectionState.CANVASS:
                deadlines.append(("canvass", election.canvass_deadline_ns()))
            if self.follower_recording_ns is not None and self.follower_recording_ns < NEVER_NS:
                deadlines.append(("followerRecording", self.follower_recording_ns))
        else:
            if self.role is Role.LEADER:
                deadlines.append(
                    ("commitPositionHeartbeat", self.time_of_last_log_update_ns + self.config.leader_heartbeat_interval_ns)
                )
                expiry = self._active_quorum_expiry_ns()
                if expiry is not None:
                    deadlines.append(("inactiveFollowerQuorum", self.slow_tick_at_or_after(expiry)))
                if self.aborts_ns:
                    deadlines.append(("clusterControlToggle", self.slow_tick_at_or_after(self.aborts_ns[0])))
            else:
                deadlines.append(
                    ("appendPositionHeartbeat", self.time_of_last_append_position_send_ns + self.config.leader_heartbeat_interval_ns)
                )
                deadlines.append(
                    (
                        "leaderHeartbeatTimeout",
                        self.slow_tick_at_or_after(self.time_of_last_log_update_ns + self.config.leader_heartbeat_timeout_ns),
                    )
                )
        if self.follower_recorder_ns is not None and self.follower_recorder_ns < NEVER_NS:
            deadlines.append(("followerRecorder", self.follower_recorder_ns))
        for due, _, _ in self.pending_catchup_replays:
            deadlines.append(("catchupReplay", due))
        deadlines.append(("slowTick", self.slow_tick_deadline_ns))
        return deadlines

    def view(self, member_id: int, is_running: bool, now_ns: int) -> MemberView:
        election = self.election
        deadlines = self.deadlines()
        leader = election.leader() if election is not None else self.leader_member
        return MemberView(
            member_id=member_id,
            is_running=is_running,
            now_ns=now_ns,
            election_state=election.state if election is not None else ElectionState.CLOSED,
            role=self.role,
            module_state=self.state,
            leadership_term_id=election.leadership_term_id if election is not None else self.leadership_term_id,
            log_leadership_term_id=election.log_leadership_term_id if election is not None else self.leadership_term_id,
            candidate_term_id=(
                election.candidate_term_id if election is not None else self.node_state.candidate_term.candidate_term_id
            ),
            leader_member_id=leader.id if leader is not None else NULL_VALUE,
            log_position=election.log_position if election is not None else self.log_adapter_position,
            append_position=election.append_position if election is not None else self.log.end,
            commit_position=self.commit_position,
            catchup_join_position=election.catchup_join_position if election is not None else NULL_POSITION,
            agent_leadership_term_id=self.leadership_term_id,
            notified_commit_position=self.notified_commit_position,
            log_recording_id=self.log_recording_id,
            log_session_id=election.log_session_id if election is not None else self.log_publication_session_id,
            election_count=self.election_count,
            errors=self.errors,
            deadlines=tuple(deadlines),
            members=tuple(m.view() for m in self.members),
            node_state=self.node_state.state,
            recording_log=tuple(self.recording_log.entries),
            log_publication_session_id=self.log_publication_session_id if self.has_log_publication else None,
            log_image_session_id=self.log_image.session_id if self.log_image is not None else None,
        )


def _bool(value: Any) -> bool:
    if isinstance(value, BooleanType):
        return value is BooleanType.TRUE
    return bool(value)


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


def _handlers() -> dict[type, Any]:
    from formats import cluster_codecs as c

    return {
        NewLeadershipTermV15: ConsensusModuleAgent.on_new_leadership_term,
        c.CanvassPosition: ConsensusModuleAgent.on_canvass_position,
        c.RequestVote: ConsensusModuleAgent.on_request_vote,
        c.Vote: ConsensusModuleAgent.on_vote,
        c.NewLeadershipTerm: ConsensusModuleAgent.on_new_leadership_term,
        c.AppendPosition: ConsensusModuleAgent.on_append_position,
        c.CommitPosition: ConsensusModuleAgent.on_commit_position,
        c.CatchupPosition: ConsensusModuleAgent.on_catchup_position,
        c.StopCatchup: ConsensusModuleAgent.on_stop_catchup,
        c.TerminationPosition: ConsensusModuleAgent.on_termination_position,
    }


_MESSAGE_HANDLERS = _handlers()
