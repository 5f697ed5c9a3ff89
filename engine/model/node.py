"""`Node`: the sans-I/O driving API around one member's consensus module (engine-api.md).

    node = Node(member_id, MemberStart.from_event(event), random=JavaRandom(seed))
    node.step(event, now_ns)     # an inbound message or a local input, at now_ns
    node.advance(now_ns)         # let time pass up to and including now_ns
    node.take_outputs()          # what the member did since the last call, in order

Time.  Aeron's cluster clock is a millisecond clock: the engine truncates every ``now_ns`` to whole
milliseconds for the consensus module (`clusterClock.time()` = ms, nowNs = ms × 1 000 000), and
stamps outputs with the time of the input that caused them, or of the millisecond tick at which a
timer fired.

The duty cycle is discretised per millisecond tick.  The real agent spins many duty cycles per
millisecond, so at each tick where something can happen the node runs `doWork` (slow tick when
due, the consensus message delivered at that tick, then the election's `doWork` or the steady-state
consensus work) and repeats it, without a message, until a cycle changes nothing (at most
`MAX_CYCLES_PER_TICK`).  Each input is its own tick's first cycle: two messages in the same
millisecond are handled in two cycles, in input order, each followed by its repeats.  Between inputs
`advance` asks the agent for the next time a timer could act (`next_deadline_ns`) and runs only those
ticks, so a 10 s idle stretch costs a handful of cycles, not 10 000.

Choices the model has to make because real timing is unknowable (each documented where it is made):
* how many cycles run between two inputs: as many as change something, at the input's millisecond;
* the slow tick keeps a 10 ms phase from the node's start; a slow tick that does work runs again on
  the next millisecond (Aeron: ``nowNs + 1``);
* simulated components (images, replays, replication, services) succeed in the cycle that asks;
* the log publication's session id is ``memberId × 1000 + n`` (n-th publication of this process);
* a new log recording gets the next recording id after those in recording.log.

Local inputs: ``MemberStart`` (start, or restart after a stop/crash, keeping recording.log,
node-state.dat and the log recording unless the event gives them), ``MemberStop`` (clean stop),
``MemberCrash`` (nothing more is sent or written), ``End``, and the evidence events
``RecordingSignal`` and ``LogEndOfStream``.  ``in`` events on channel ``consensus`` are consensus
messages; on ``log``, log frames (with an optional top-level ``logPosition``, the position after the
frame); on ``ingress``, client messages the leader appends to its log.  ``out`` events on channel
``log`` are evidence of the member's own appends as leader (`ConsensusModuleAgent.on_log_append`);
after `expect_log_evidence()` the leader appends only what they show (timers, session closes and
cluster actions included) and nothing for ingress.  Anything else is ignored.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.model.agent import ConsensusModuleAgent, ModuleState
from engine.model.config import Config
from engine.model.flags import ModelFlags
from engine.model.members import ClusterMember, parse_cluster_members
from engine.model.sim_parts import LogStore
from formats.cluster_codecs_ext import message_of
from formats.errors import DecodeError
from formats.node_state import NodeStateFile
from formats.recording_log import RecordingLog, entry_from_json

MS = 1_000_000
MAX_CYCLES_PER_TICK = 64
_NULL = -1


@dataclass(frozen=True, slots=True)
class MemberStart:
    """A member's start: its configuration and on-disk state (contract §1, the MemberStart event).

    ``recording_log``, ``node_state`` and ``append_position`` are None when the event does not give
    them: a first start then uses the defaults (empty, candidateTermId −1, the last term's position)
    and a restart keeps what the member had.
    """

    ts: int
    cluster_members: str
    appointed_leader_id: int = -1
    recording_log: tuple[Any, ...] | None = None
    node_state: tuple[int, int, int] | None = None  # (candidateTermId, logPosition, timestamp)
    append_position: int | None = None
    config: Config = Config()
    seed: int | None = None
    #: How long the driver took to answer each log publication this start adds (the agent log's
    #: CMD_IN_ADD_EXCLUSIVE_PUBLICATION of the log channel to its READY): the consensus module waits
    #: that long, doing nothing else, each time it becomes leader.  Empty: no wait.
    log_publication_waits_ns: tuple[int, ...] = ()
    #: How long the driver took from each log subscription this start adds to the leader's image
    #: (CMD_IN_ADD_SUBSCRIPTION ``alias=log-cm`` to CMD_OUT_AVAILABLE_IMAGE): FOLLOWER_LOG_AWAIT waits for it.
    log_image_waits_ns: tuple[int, ...] = ()
    #: How long each snapshot this start takes lasted (the agent log's STATE_CHANGE into SNAPSHOT to the
    #: next out of it): a follower stays in SNAPSHOT, its log not polled, that long.  Empty: at once.
    snapshot_durations_ns: tuple[int, ...] = ()
    #: The index (in the member's snapshots) of the one a ClusterTool shutdown asked for, which ended in
    #: TERMINATING: as leader, the member sent its followers TerminationPosition with it.  None: no shutdown.
    shutdown_snapshot: int | None = None

    @classmethod
    def from_event(cls, event: Any, *, source: str | None = None, line: int | None = None) -> MemberStart:
        """From a ``MemberStart`` event; a missing or malformed field is a `DecodeError`."""

        def fail(expected: str) -> DecodeError:
            return DecodeError(f"MemberStart: {expected}", source=source, offset=line, unit="line")

        fields = event.fields if isinstance(event.fields, Mapping) else {}
        members_text = fields.get("clusterMembers")
        if not isinstance(members_text, str) or not members_text:
            raise fail("'clusterMembers' must be Aeron's members string (id,ingress,consensus,log,catchup,archive|...)")
        try:
            members = parse_cluster_members(members_text)
        except ValueError as error:
            raise fail(f"'clusterMembers': {error}") from None
        ids = [m.id for m in members]
        if len(set(ids)) != len(ids):
            raise fail(f"'clusterMembers' has a duplicate member id ({members_text})")

        appointed = fields.get("appointedLeaderId", -1)
        if appointed is None:
            appointed = -1
        if not _is_int(appointed):
            raise fail(f"'appointedLeaderId' must be an integer, got {appointed!r}")

        recording_log = None
        if "recordingLog" in fields and fields["recordingLog"] is not None:
            raw = fields["recordingLog"]
            if not isinstance(raw, list):
                raise fail("'recordingLog' must be a list of entries")
            entries = []
            for index, document in enumerate(raw):
                try:
                    entries.append(entry_from_json(document, entry_index=index, source=source))
                except DecodeError as error:
                    raise fail(f"'recordingLog'[{index}]: {error.expected}") from None
            try:
                RecordingLog.from_entries(entries)
            except DecodeError as error:
                raise fail(f"'recordingLog': {error.expected}") from None
            recording_log = tuple(entries)

        node_state = None
        if "nodeState" in fields and fields["nodeState"] is not None:
            raw = fields["nodeState"]
            if not isinstance(raw, Mapping):
                raise fail("'nodeState' must be an object {candidateTermId, logPosition, timestamp}")
            if "candidateTerm" in raw and isinstance(raw["candidateTerm"], Mapping):
                raw = raw["candidateTerm"]  # the `inspect node-state --json` shape
            values = []
            for key in ("candidateTermId", "logPosition", "timestamp"):
                value = raw.get(key, -1)
                if not _is_int(value):
                    raise fail(f"'nodeState.{key}' must be an integer, got {value!r}")
                values.append(value)
            node_state = (values[0], values[1], values[2])

        append_position = fields.get("appendPosition")
        if append_position is not None and (not _is_int(append_position) or append_position < 0):
            raise fail(f"'appendPosition' must be a non-negative integer, got {append_position!r}")

        properties = fields.get("config")
        if properties is not None and not isinstance(properties, Mapping):
            raise fail("'config' must be an object of Aeron properties")
        try:
            config = Config.from_properties(properties)
        except ValueError as error:
            raise fail(f"'config': {error}") from None

        seed = fields.get("seed")
        if seed is not None and not _is_int(seed):
            raise fail(f"'seed' must be an integer, got {seed!r}")

        waits = {}
        for key in ("logPublicationWaitsNs", "logImageWaitsNs", "snapshotDurationsNs"):
            values = fields.get(key) or []
            if not isinstance(values, list) or not all(_is_int(w) and w >= 0 for w in values):
                raise fail(f"'{key}' must be a list of non-negative integers, got {values!r}")
            waits[key] = tuple(values)
        shutdown = fields.get("shutdownSnapshot")
        if shutdown is not None and not (_is_int(shutdown) and shutdown >= 0):
            raise fail(f"'shutdownSnapshot' must be a non-negative integer, got {shutdown!r}")

        return cls(
            ts=event.ts,
            cluster_members=members_text,
            appointed_leader_id=appointed,
            recording_log=recording_log,
            node_state=node_state,
            append_position=append_position,
            config=config,
            seed=seed,
            log_publication_waits_ns=waits["logPublicationWaitsNs"],
            log_image_waits_ns=waits["logImageWaitsNs"],
            snapshot_durations_ns=waits["snapshotDurationsNs"],
            shutdown_snapshot=shutdown,
        )

    def members(self) -> list[ClusterMember]:
        return parse_cluster_members(self.cluster_members)


class Node:
    """One cluster member, driven by its inputs and the passing of time."""

    __slots__ = (
        "member_id",
        "random",
        "flags",
        "agent",
        "is_running",
        "start",
        "log_evidence",
        "_tick_ns",
        "_now_ns",
        "_outputs",
        "_held",
    )

    def __init__(
        self, member_id: int, start: MemberStart, *, random: Any, flags: ModelFlags = ModelFlags()
    ) -> None:
        self.member_id = member_id
        self.random = random
        self.flags = flags
        self.log_evidence = False
        self._outputs: list[Any] = []
        self._held: list[tuple[Any, int | None]] = []  # inputs that arrived while the agent waited
        members = start.members()
        if member_id not in {m.id for m in members}:
            raise DecodeError(f"MemberStart: member {member_id} is not in clusterMembers ({start.cluster_members})")
        recording_log = RecordingLog.from_entries(start.recording_log) if start.recording_log else RecordingLog()
        node_state = NodeStateFile.create()
        if start.node_state is not None:
            node_state.update_candidate_term_id(start.node_state[0], start.node_state[1], start.node_state[2])
        append_position = start.append_position
        if append_position is None:
            append_position = _default_append_position(recording_log)
        log = _log_from_recording_log(recording_log, append_position)
        self._boot(start, recording_log, node_state, log, append_position)

    # -- the driving API ----------------------------------------------------------------------------------

    def step(self, event: Any, now_ns: int) -> None:
        """Handle one input at ``now_ns`` (after letting time pass up to it)."""
        now_ns = max(now_ns, self._now_ns)
        kind = event.type
        if not self.is_running:
            self._now_ns = now_ns
            if kind == "MemberStart" and event.dir == "local":
                self._restart(MemberStart.from_event(event), now_ns)
            return
        self.advance(now_ns)
        agent = self.agent
        direction = event.dir
        if direction == "in":
            channel = event.channel
            if channel == "consensus":
                # NewLeadershipTerm of schema v15 (Aeron 1.50.0) keeps its commitPosition.
                message = message_of(event)
                self._tick(now_ns, message, event.peer)
            elif channel == "log":
                message = event.message()
                log_position = (event.extra or {}).get("logPosition")
                length = len(event.payload) if event.payload is not None else None
                agent.set_time(now_ns, now_ns)
                agent.on_log_frame(message, log_position if _is_int(log_position) else None, length)
                self._tick(now_ns)
            elif channel == "ingress":
                message = event.message()
                agent.set_time(now_ns, now_ns)
                agent.on_ingress(message, len(event.payload) if event.payload is not None else None)
                self._tick(now_ns)
        elif direction == "out":
            if event.channel == "log":
                log_position = (event.extra or {}).get("logPosition")
                agent.set_time(now_ns, now_ns)
                agent.on_log_append(
                    event.message(),
                    log_position if _is_int(log_position) else None,
                    len(event.payload) if event.payload is not None else None,
                )
                self._tick(now_ns)
        elif direction == "local":
            if kind == "MemberCrash":
                self.is_running = False
            elif kind == "MemberStop":
                agent.set_time(now_ns, now_ns)
                agent.set_state(ModuleState.CLOSED)
                self._collect()
                self.is_running = False
            elif kind == "MemberStart":
                # A start without a recorded stop: the previous process is gone.
                self.is_running = False
                self._restart(MemberStart.from_event(event), now_ns)
            elif kind == "RecordingSignal":
                fields = event.fields
                agent.set_time(now_ns, now_ns)
                agent.on_recording_signal(
                    _int_or(fields.get("correlationId"), _NULL),
                    _int_or(fields.get("recordingId"), _NULL),
                    _int_or(fields.get("position"), _NULL),
                    str(fields.get("signal", "")),
                )
                self._tick(now_ns)
            elif kind == "LogEndOfStream":
                agent.set_time(now_ns, now_ns)
                agent.on_log_end_of_stream()
                self._tick(now_ns)

    def expect_log_evidence(self) -> None:
        """The inputs will include this member's own log appends (``out`` events on channel ``log``):
        as leader it appends what they show and nothing for ingress (kept across restarts)."""
        self.log_evidence = True
        self.agent.log_evidence = True

    def advance(self, now_ns: int) -> None:
        """Let time pass up to and including ``now_ns``: run every tick at which a timer can act."""
        while self.is_running:
            tick = self.next_wakeup_ns()
            if tick is None or tick > now_ns:
                break
            self._tick(tick)
        if now_ns > self._now_ns:
            self._now_ns = now_ns

    def next_wakeup_ns(self) -> int | None:
        """The next millisecond tick at which a timer could act (None: only an input can wake it)."""
        if not self.is_running:
            return None
        if self.agent.blocked_until_ns is not None:
            return max(self.agent.blocked_until_ns, self._tick_ns)
        deadline = self.agent.next_deadline_ns(self._tick_ns)
        image = self.agent.log_image_available_ns
        if image is not None and image > self._tick_ns and self.agent.log_subscription is not None:
            deadline = image if deadline is None else min(deadline, image)
        if deadline is None:
            return None
        tick = -(-deadline // MS) * MS
        return tick if tick > self._tick_ns else self._tick_ns + MS

    def take_outputs(self) -> list[Any]:
        outputs = self._outputs
        self._outputs = self.agent.outputs = []
        return outputs

    def inspect(self) -> dict[str, Any]:
        state = self.agent.to_json()
        state["memberId"] = self.member_id
        state["isRunning"] = self.is_running
        state["now"] = self._now_ns
        return state

    def clone(self) -> Node:
        """A deep copy (for checkpoints): the two nodes share nothing mutable."""
        return copy.deepcopy(self)

    @property
    def now_ns(self) -> int:
        return self._now_ns

    # -- internals -----------------------------------------------------------------------------------------

    def _boot(
        self,
        start: MemberStart,
        recording_log: RecordingLog,
        node_state: NodeStateFile,
        log: LogStore,
        append_position: int,
        archive_evidence: bool = False,
    ) -> None:
        self.start = start
        config = start.config
        if start.appointed_leader_id != config.appointed_leader_id and start.appointed_leader_id != -1:
            config = _with_appointed(config, start.appointed_leader_id)
        self.agent = ConsensusModuleAgent(
            self.member_id,
            start.members(),
            config=config,
            flags=self.flags,
            random=self.random,
            recording_log=recording_log,
            node_state=node_state,
            append_position=append_position,
            log=log,
            archive_evidence=archive_evidence,
            session_id_base=self.member_id * 1000,
            log_evidence=self.log_evidence,
        )
        self.agent.outputs = self._outputs
        self.agent.log_publication_waits_ns = list(start.log_publication_waits_ns)
        self.agent.log_image_waits_ns = list(start.log_image_waits_ns)
        self.agent.snapshot_durations_ns = list(start.snapshot_durations_ns)
        self.agent.shutdown_snapshot = start.shutdown_snapshot
        self.is_running = True
        tick = start.ts - start.ts % MS
        self._now_ns = start.ts
        self._tick_ns = tick
        self.agent.set_time(start.ts, start.ts)
        self.agent.on_start(start.ts)
        self._repeat_cycles()

    def _restart(self, start: MemberStart, now_ns: int) -> None:
        old = self.agent
        start = MemberStart(
            ts=now_ns,
            cluster_members=start.cluster_members,
            appointed_leader_id=start.appointed_leader_id,
            recording_log=start.recording_log,
            node_state=start.node_state,
            append_position=start.append_position,
            config=start.config,
            seed=start.seed,
            log_publication_waits_ns=start.log_publication_waits_ns,
            log_image_waits_ns=start.log_image_waits_ns,
            snapshot_durations_ns=start.snapshot_durations_ns,
            shutdown_snapshot=start.shutdown_snapshot,
        )
        recording_log = RecordingLog.from_entries(start.recording_log) if start.recording_log is not None else old.recording_log
        node_state = old.node_state
        if start.node_state is not None:
            node_state = NodeStateFile.create()
            node_state.update_candidate_term_id(*start.node_state)
        log = old.log
        if old.recording_active:
            old.log_recording_stop_position = log.end
        append_position = start.append_position if start.append_position is not None else log.end
        log.set_end(append_position)
        self._boot(start, recording_log, node_state, log, append_position, old.archive_evidence)

    def _tick(self, now_ns: int, message: Any = None, peer: int | None = None) -> None:
        """One tick: a duty cycle (with the input's message), repeated until a cycle changes nothing.

        While the agent waits for the driver (`log_publication_waits_ns`) it runs no cycle: what
        arrives waits in `_held`, and is handled, in order, when the wait is over."""
        agent = self.agent
        blocked = agent.blocked_until_ns
        if blocked is not None:
            if now_ns < blocked:
                if message is not None:
                    self._held.append((message, peer))
                return
            agent.blocked_until_ns = None
            held, self._held = self._held, []
            if held:
                agent.set_time(blocked, blocked)
                before = agent.changes
                agent.duty_cycle(held=held)
                if agent.changes != before:
                    self._repeat_cycles()
                self._collect()
        agent.set_time(now_ns, now_ns)
        before = agent.changes
        agent.duty_cycle(message, peer)
        tick = now_ns - now_ns % MS
        if tick > self._tick_ns:
            self._tick_ns = tick
        if agent.changes != before:
            self._repeat_cycles()
        self._collect()

    def _repeat_cycles(self) -> None:
        agent = self.agent
        for _ in range(MAX_CYCLES_PER_TICK):
            if agent.blocked_until_ns is not None:
                break
            before = agent.changes
            agent.duty_cycle()
            if agent.changes == before or agent.state is ModuleState.CLOSED:
                break
        self._collect()

    def _collect(self) -> None:
        if self.agent.state is ModuleState.CLOSED:
            # Stopped, or the agent terminated itself (e.g. an incompatible appVersion): nothing more runs.
            self.is_running = False


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_or(value: Any, default: int) -> int:
    return value if _is_int(value) else default


def _with_appointed(config: Config, appointed_leader_id: int) -> Config:
    from dataclasses import replace

    return replace(config, appointed_leader_id=appointed_leader_id)


def _default_append_position(recording_log: RecordingLog) -> int:
    """Contract §1: the last term entry's logPosition (its base while the term is open), else 0."""
    last = recording_log.find_last_term()
    if last is None:
        snapshot = recording_log.get_latest_snapshot(-1)
        return snapshot.log_position if snapshot is not None else 0
    return last.log_position if last.log_position != _NULL else last.term_base_log_position


def _log_from_recording_log(recording_log: RecordingLog, append_position: int) -> LogStore:
    """The local log as MemberStart gives it: its length only.  Replays put back the
    NewLeadershipTermEvents that recording.log implies (`ConsensusModuleAgent.log_frames`)."""
    store = LogStore(0)
    store.extend_unknown(append_position)
    return store
