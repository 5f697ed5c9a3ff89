"""`Node`: the sans-I/O driving API around one member's consensus module.

    node = Node(member_id, start, random=JavaRandom(seed))   # start: an engine.model.inputs.MemberStart
    node.step(item, now_ns)      # one typed input (engine.model.inputs) at now_ns
    node.advance(now_ns)         # let time pass up to and including now_ns
    node.take_outputs()          # a `Ready`: what the member did since the last call, in order
    node.view()                  # a frozen `MemberView` of its state now

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
* simulated components (images, replays, replication, services) succeed in the cycle that asks,
  unless the start gives what the real member's driver, archive and services took (recorded waits and
  durations from the agent log, log publications and images from the capture): then they take that;
* the log publication's session id is ``memberId × 1000 + n`` (n-th publication of this process);
* a new log recording gets the next recording id after those in recording.log.

Inputs (engine.model.inputs): ``MemberStart`` (start, or restart after a stop/crash, keeping
recording.log, node-state.dat and the log recording unless it gives them), ``MemberStop`` (clean
stop), ``MemberCrash`` (nothing more is sent or written), ``End``, the evidence ``RecordingSignal``
and ``LogEndOfStream``, and the messages: ``ConsensusMessage``, ``LogFrame`` (with the position after
the frame when known; ``LogFrames`` for several that arrived together, handled in one duty cycle),
``IngressMessage`` (client messages the leader appends to its log), and
``OwnLogAppend`` (evidence of the member's own appends as leader, `ConsensusModuleAgent.on_log_append`;
after `expect_log_evidence()` the leader appends only what they show — timers, session closes and
cluster actions included — and nothing for ingress), and ``PublicationStatus`` (evidence of when each
consensus publication can take an offer; for a member started with ``MemberStart.connected_peers``
a refused offer sends nothing, as in Aeron).  Anything else is a `TypeError`: a caller's bug.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from engine.model.agent import ConsensusModuleAgent, ModuleState
from engine.model.config import Config
from engine.model.flags import ModelFlags
from engine.model.inputs import (
    ConsensusMessage,
    End,
    IngressMessage,
    Input,
    LogEndOfStream,
    LogFrame,
    LogFrames,
    MemberCrash,
    MemberStart,
    MemberStop,
    OwnLogAppend,
    PublicationStatus,
    RecordingSignal,
)
from engine.model.outputs import Cause, Ready
from engine.model.sim_parts import LogStore
from engine.model.view import MemberView
from formats.errors import DecodeError
from formats.node_state import NodeStateFile
from formats.recording_log import RecordingLog

MS = 1_000_000
MAX_CYCLES_PER_TICK = 64
_UNKNOWN = -1  # a next wakeup not yet computed (ticks are never negative; an int survives deepcopy)
_NOTHING = Ready()
_NULL = -1


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
        "publication_evidence",
        "_tick_ns",
        "_now_ns",
        "_outputs",
        "_held",
        "_wakeup",
    )

    def __init__(
        self, member_id: int, start: MemberStart, *, random: Any, flags: ModelFlags = ModelFlags()
    ) -> None:
        self.member_id = member_id
        self.random = random
        self.flags = flags
        self.log_evidence = False
        self.publication_evidence = False
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

    def step(self, item: Input, now_ns: int) -> None:
        """Handle one input at ``now_ns`` (after letting time pass up to it)."""
        now_ns = max(now_ns, self._now_ns)
        kind = type(item)
        if not self.is_running:
            self._now_ns = now_ns
            if kind is MemberStart:
                self._restart(item, now_ns)
            return
        self.advance(now_ns)
        self._wakeup = _UNKNOWN  # whatever the input does below may move the next deadline
        agent = self.agent
        agent.cause = _cause_of(item)
        if kind is ConsensusMessage:
            self._tick(now_ns, item.message, item.peer)
        elif kind is LogFrame:
            agent.set_time(now_ns, now_ns)
            agent.on_log_frame(item.message, item.log_position, item.length)
            self._tick(now_ns)
        elif kind is LogFrames:
            agent.set_time(now_ns, now_ns)
            for frame in item.frames:
                agent.on_log_frame(frame.message, frame.log_position, frame.length)
            self._tick(now_ns)
        elif kind is IngressMessage:
            agent.set_time(now_ns, now_ns)
            agent.on_ingress(item.message, item.length)
            self._tick(now_ns)
        elif kind is OwnLogAppend:
            agent.set_time(now_ns, now_ns)
            agent.on_log_append(item.message, item.log_position, item.length)
            self._tick(now_ns)
        elif kind is MemberCrash:
            self.is_running = False
        elif kind is MemberStop:
            agent.set_time(now_ns, now_ns)
            agent.set_state(ModuleState.CLOSED)
            self._collect()
            self.is_running = False
        elif kind is MemberStart:
            # A start without a recorded stop: the previous process is gone.
            self.is_running = False
            self._restart(item, now_ns)
        elif kind is RecordingSignal:
            agent.set_time(now_ns, now_ns)
            agent.on_recording_signal(item.correlation_id, item.recording_id, item.position, item.signal)
            self._tick(now_ns)
        elif kind is LogEndOfStream:
            agent.set_time(now_ns, now_ns)
            agent.on_log_end_of_stream()
            self._tick(now_ns)
        elif kind is PublicationStatus:
            # The driver's counters change beside the agent; what a refusal held back (a ballot, an
            # AppendPosition) is tried again in the agent's next duty cycle, which is now.
            agent.set_time(now_ns, now_ns)
            agent.on_publication_status(item.peer, item.connected, item.sender_position, item.sender_stalled)
            self._tick(now_ns)
        elif kind is not End:
            raise TypeError(f"Node.step takes an engine.model.inputs value, got {kind.__name__}")

    def expect_log_evidence(self) -> None:
        """The inputs will include this member's own log appends (``out`` events on channel ``log``):
        as leader it appends what they show and nothing for ingress (kept across restarts)."""
        self._wakeup = _UNKNOWN
        self.log_evidence = True
        self.agent.log_evidence = True

    def advance(self, now_ns: int) -> None:
        """Let time pass up to and including ``now_ns``: run every tick at which a timer can act."""
        while self.is_running:
            tick = self.next_wakeup_ns()
            if tick is None or tick > now_ns:
                break
            self.agent.cause = self._timer_cause(tick)
            self._tick(tick)
        if now_ns > self._now_ns:
            self._now_ns = now_ns

    def next_wakeup_ns(self) -> int | None:
        """The next millisecond tick at which a timer could act (None: only an input can wake it).

        Remembered until the node next runs (a step, a tick, a restart): `advance` asks it at each
        tick and a driver asks again right after, at no cost."""
        wakeup = self._wakeup
        if wakeup == _UNKNOWN:
            wakeup = self._wakeup = self._next_wakeup_ns()
        return wakeup

    def _next_wakeup_ns(self) -> int | None:
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

    def _timer_cause(self, tick: int) -> Cause:
        """What wakes the member at ``tick`` with no input: the deadline that is due, by its
        `MemberView.deadlines` name (one that fell due since the last tick before one overdue; a specific one
        before the election's next step, the slow tick last)."""
        agent = self.agent
        if agent.blocked_until_ns is not None and agent.blocked_until_ns <= tick:
            return _DRIVER_WAIT
        due = sorted((at, _TIMER_RANK.get(name, 0), name) for name, at in agent.deadlines() if at <= tick)
        # A deadline already due at the last tick that ran (a send the publication refused, retried on
        # every cycle) did not wake the member now: one that fell due since did.
        fresh = [d for d in due if d[0] > self._tick_ns]
        due = fresh or due
        if not due:
            image = agent.log_image_available_ns
            return _timer("logImage" if image is not None and image <= tick else "dutyCycle")
        name = min(due, key=lambda d: (d[1], d[0]))[2]
        if name == "election" and agent.election is not None and agent.election.state.name.endswith("_BALLOT"):
            name = "electionTimeout"  # a ballot's only deadline: Aeron's electionTimeoutNs
        return _timer(name)

    def take_outputs(self) -> Ready:
        """What the member did since the last call, in the order it did it."""
        outputs = self._outputs
        if not outputs:
            return _NOTHING
        self._outputs = self.agent.outputs = []
        return Ready(tuple(outputs))

    def view(self) -> MemberView:
        """A frozen view of the member's state now."""
        return self.agent.view(self.member_id, self.is_running, self._now_ns)

    def clone(self) -> Node:
        """A copy that shares nothing mutable with this node."""
        return copy.deepcopy(self, self.clone_memo())

    def clone_memo(self) -> dict[int, Any]:
        """For a `copy.deepcopy` that takes this node along: nothing to pre-share today (the local
        log's `LogStore` shares its frozen frames with its copies by itself)."""
        return {}

    @property
    def now_ns(self) -> int:
        return self._now_ns

    @property
    def held(self) -> tuple[Any, ...]:
        """The inputs (messages) that arrived while the agent waited and that it has not polled yet,
        in arrival order; a process that dies waiting never polls them."""
        return tuple(message for message, _ in self._held)

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
        # What arrived while the previous process waited died with it: a new process starts with none
        # (h_five_members_leader_kill: member 3, killed while waiting for its services, restarted 11 s later).
        self._held = []
        connected = start.connected_peers
        if connected is None and self.publication_evidence:
            connected = ()  # kept across restarts, as the log evidence is: a new process, nothing connected
        self.publication_evidence = connected is not None
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
            connected_peers=connected,
        )
        self.agent.outputs = self._outputs
        self.agent.log_publication_waits_ns = list(start.log_publication_waits_ns)
        self.agent.log_image_waits_ns = list(start.log_image_waits_ns)
        self.agent.snapshot_durations_ns = list(start.snapshot_durations_ns)
        self.agent.leader_join_waits_ns = list(start.leader_join_waits_ns)
        self.agent.log_replay_durations_ns = list(start.log_replay_durations_ns)
        self.agent.log_replay_start_waits_ns = list(start.log_replay_start_waits_ns)
        self.agent.catchup_replay_waits_ns = list(start.catchup_replay_waits_ns)
        self.agent.log_publications_ready_ns = list(start.log_publications_ready_ns)
        self.agent.leader_joins_ready_ns = list(start.leader_joins_ready_ns)
        self.agent.log_images_ns = dict(start.log_images_ns) if start.log_images_ns is not None else None
        self.agent.aborts_ns = list(start.aborts_ns)
        self.agent.replication_positions_ns = list(start.replication_positions_ns)
        self.agent.log_replays_done_ns = list(start.log_replays_done_ns)
        for session, recording_ns, services_ns, recorder_ns in start.follower_joins_ns:
            self.agent.follower_joins_ns.setdefault(session, []).append((recording_ns, services_ns, recorder_ns))
        self.agent.shutdown_snapshot = start.shutdown_snapshot
        self.is_running = True
        self._wakeup = _UNKNOWN
        tick = start.ts - start.ts % MS
        self._now_ns = start.ts
        self._tick_ns = tick
        self.agent.set_time(start.ts, start.ts)
        self.agent.cause = _LOCAL["MemberStart"]
        self.agent.on_start(start.ts)
        self._repeat_cycles()

    def _restart(self, start: MemberStart, now_ns: int) -> None:
        old = self.agent
        start = replace(start, ts=now_ns)
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

        While the agent waits for the driver, the archive or its services (`log_publication_waits_ns`,
        `leader_join_waits_ns`) it runs no cycle: what arrives waits in `_held`, and is handled, in
        order, when the wait is over."""
        self._wakeup = _UNKNOWN
        agent = self.agent
        while agent.blocked_until_ns is not None:
            blocked = agent.blocked_until_ns
            if now_ns < blocked:
                if message is not None:
                    self._held.append((message, peer))
                return
            agent.blocked_until_ns = None
            held, self._held = self._held, []
            if held:
                cause, agent.cause = agent.cause, _DRIVER_WAIT
                agent.set_time(blocked, blocked)
                before = agent.changes
                agent.duty_cycle(held=held)
                if agent.changes != before:
                    self._repeat_cycles()
                self._collect()
                agent.cause = cause
            # What those messages led to may block again (a leader adding its log publication, then
            # joining its log): this input waits for that too.
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
        self._wakeup = _UNKNOWN
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


#: How a timer cause is chosen among the deadlines due together: a named deadline, then the
#: election's next step, then the slow tick.
_TIMER_RANK = {"election": 1, "slowTick": 2}
_TIMERS: dict[str, Cause] = {}
_LOCAL = {
    name: Cause("local", name)
    for name in ("MemberStart", "MemberStop", "MemberCrash", "End", "RecordingSignal", "LogEndOfStream")
}
#: The agent waited for the media driver (a recorded `log_publication_waits_ns`); the wait is over and
#: what arrived meanwhile is handled.
_DRIVER_WAIT = Cause("timer", "driverWait")
_MESSAGES: dict[tuple[type, Any, str], Cause] = {}


def _timer(name: str) -> Cause:
    cause = _TIMERS.get(name)
    if cause is None:
        cause = _TIMERS[name] = Cause("timer", name)
    return cause


def _cause_of(item: Input) -> Cause:
    """The cause an input gives the changes it leads to (one value per kind of message and sender, reused)."""
    kind = type(item)
    if kind is ConsensusMessage:
        key = (type(item.message), item.peer, "consensus")
    elif kind is LogFrame:
        key = (type(item.message), None, "log")
    elif kind is LogFrames:  # one duty cycle after them all: the last one is what it ran on
        item = item.frames[-1]
        key = (type(item.message), None, "log")
    elif kind is IngressMessage:
        key = (type(item.message), None, "ingress")
    elif kind is OwnLogAppend:
        key = (type(item.message), None, "own")
    else:
        return _LOCAL.get(kind.__name__) or Cause("local", kind.__name__)
    cause = _MESSAGES.get(key)
    if cause is None:
        name = item.message.BLOCK.name
        message_type, peer, channel = key
        cause = (
            Cause("local", "OwnLogAppend", None, "log")
            if channel == "own"
            else Cause("message", name, peer, channel)
        )
        _MESSAGES[key] = cause
    return cause


def _with_appointed(config: Config, appointed_leader_id: int) -> Config:
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
