"""The steady-state lane of node replay: the events of a cluster at work, handled without a full duty cycle.

Once an election is over, almost everything a cluster's capture holds is the same few events over and
over: a client message reaches the leader, the leader appends it and sends the frame to each
follower, each follower records it and reports its new append position, the leader publishes the new
commit position.  `NodeReplay.feed` runs each of them through the whole machinery (an `Event`, a typed
input, `Node.step` with its deadlines, a duty cycle repeated until it changes nothing, output objects,
their records as dicts, the comparison's generic key, JSON encoding).  This lane does the same work for
those events directly, on the very objects `NodeReplay` holds (the members' `Node`s and agents, the
comparison's series and checks, the invariant checker), and writes their trace lines from templates:

* ``in`` AppendPosition to a leader, ``in`` CommitPosition to a follower, ``in`` SessionMessageHeader
  log frames to a follower, ``in`` ingress to a leader whose log appends are recorded, a leader's own
  ``out`` SessionMessageHeader log appends, and the recorded ``out`` AppendPosition / CommitPosition
  (the comparison's expected side);
* only while the member is in a steady state: no election, ACTIVE, not waiting for its driver or
  archive, no catch-up, no slow tick that would act in the cycle, no deadline of any member due by the
  event (`SteadyLane._member`, `SteadyLane._enter`; any doubt, and the event goes to `NodeReplay.feed`'s
  own path).

Each handler checks everything that may decline its event before it changes the member: `_enter`, which
begins the member's duty cycle, is the last check, and from there on the event is the lane's.  A declined
event has therefore changed nothing of the member, and the model's own path takes it as if the lane had
not looked.
What the lane looks up about a member once and keeps (its steady record: agent, node, log, the peers it
sends to) is only what the model's own path can change, never the lane; everything that runs that path
(an event the lane declines, a batch of frames it does not take, a member's timer) clears the records
first (`SteadyLane.forget`).

It is the same replay, not an approximation of it: each handler below is the duty cycle of
`engine.model.agent` restricted to what can happen under its preconditions, and the trace is byte for
byte the one `NodeReplay.feed` gives (``tests/test_steady_lane.py`` replays every sample, scenario and
real capture both ways and compares the bytes).  Two shortcuts keep it exact rather than equal step by
step:

* a member's wakeup timer is not moved after a lane event.  Under the preconditions a lane event only
  moves a member's deadlines later (the times it last heard or sent move forward), so the timer on the
  clock is at or before the true deadline; when it fires early, `Node.advance` finds nothing due and
  the driver schedules the true one, which is what would have happened without the lane;
* the check of a model run that the recording has not shown yet is kept in `NodeReplay.tentative`
  (its place in the order of checks, ``(due, seq)``, taken when it is made) instead of the heap; when
  the recording then shows that very value within the window, it is marked passed and settles without a
  search.  It settles in the same order, counts for pruning and is the oldest pending check exactly as
  the heap's would be.

The templates are checked against the model's own records once per replay (`SteadyLane.__init__`):
a model whose messages are spelled otherwise (another schema) turns the lane off.
"""

from __future__ import annotations

import heapq
from functools import partial
from operator import itemgetter
from typing import Any

from engine import compiled
from engine.model.agent import SLOW_TICK_INTERVAL_NS, ModuleState, Role
from engine.model.election import APPEND_POSITION_FLAG_CATCHUP
from engine.model.inputs import ConsensusMessage, IngressMessage, LogFrame, OwnLogAppend
from engine.model.members import NULL_POSITION, NULL_VALUE, has_active_quorum
from engine.model.node import _UNKNOWN, _cause_of
from engine.model.outputs import Send
from engine.trace import encode_record
from formats import arrow_compute
from formats.cluster_codecs import SCHEMA_VERSION, AppendPosition, CommitPosition, SessionMessageHeader
from formats.cluster_codecs_ext import decode_cluster
from formats.errors import DecodeError
from formats.sbe import encode

MS = 1_000_000
_LEADER, _FOLLOWER = Role.LEADER, Role.FOLLOWER

#: A lane row: the values of one event the lane needs, in this order (`rows_of_events`, and
#: `recorder.convert`'s columns for a replay file).
TS, NODE, DIR, CHANNEL, TYPE, PEER, TERM, POSITION, FOLLOWER, LEADER, FLAGS, SESSION, TIMESTAMP, EXTRA_POSITION, \
    PAYLOAD, REF, CODE = range(17)

_HEADER_COLUMNS = itemgetter(TERM, SESSION, TIMESTAMP)
_APPEND_COLUMNS = itemgetter(TERM, POSITION, FOLLOWER, FLAGS)
_COMMIT_COLUMNS = itemgetter(TERM, POSITION, LEADER)

#: What a row is, for the lane (its ``CODE``): nothing it handles (0), or one of these.
APPEND_IN, COMMIT_IN, FRAME_IN, INGRESS_IN, OWN_APPEND, RECORDED_SEND = range(1, 7)


def code_of(direction: Any, channel: Any, kind: Any) -> int:
    """A row's ``CODE`` from its direction, channel and type."""
    if direction == "in":
        if channel == "consensus":
            return APPEND_IN if kind == "AppendPosition" else COMMIT_IN if kind == "CommitPosition" else 0
        if channel == "log":
            return FRAME_IN
        return INGRESS_IN if channel == "ingress" else 0
    if direction == "out":
        if channel == "log":
            return OWN_APPEND
        if channel == "consensus" and kind in ("AppendPosition", "CommitPosition"):
            return RECORDED_SEND
    return 0

_APPEND = '{"kind":"send","ts":%d,"node":%d,"peer":%d,"channel":"consensus","type":"AppendPosition","fields":' \
          '{"leadershipTermId":%d,"logPosition":%d,"followerMemberId":%d,"flags":%d}}'
_COMMIT = '{"kind":"send","ts":%d,"node":%d,"peer":%d,"channel":"consensus","type":"CommitPosition","fields":' \
          '{"leadershipTermId":%d,"logPosition":%d,"leaderMemberId":%d}}'
_LOG_APPEND = '{"kind":"logAppend","ts":%d,"node":%d,"position":%d,"type":"SessionMessageHeader","fields":' \
              '{"leadershipTermId":%d,"clusterSessionId":%d,"timestamp":%d}}'
_LOG_SEND = '{"kind":"send","ts":%d,"node":%d,"peer":%d,"channel":"log","type":"SessionMessageHeader","fields":' \
            '{"leadershipTermId":%d,"clusterSessionId":%d,"timestamp":%d},"logPosition":%d}'


def _append_send(ts: int, node: int, peer: int, term: int, position: int, follower: int, flags: int) -> dict[str, Any]:
    return {"kind": "send", "ts": ts, "node": node, "peer": peer, "channel": "consensus", "type": "AppendPosition",
            "fields": {"leadershipTermId": term, "logPosition": position, "followerMemberId": follower, "flags": flags}}


def _commit_send(ts: int, node: int, peer: int, term: int, position: int, leader: int) -> dict[str, Any]:
    return {"kind": "send", "ts": ts, "node": node, "peer": peer, "channel": "consensus", "type": "CommitPosition",
            "fields": {"leadershipTermId": term, "logPosition": position, "leaderMemberId": leader}}


def _log_append(ts: int, node: int, position: int, term: int, session: int, timestamp: int) -> dict[str, Any]:
    return {"kind": "logAppend", "ts": ts, "node": node, "position": position, "type": "SessionMessageHeader",
            "fields": {"leadershipTermId": term, "clusterSessionId": session, "timestamp": timestamp}}


def _log_send(ts: int, node: int, peer: int, term: int, session: int, timestamp: int, position: int) -> dict[str, Any]:
    return {"kind": "send", "ts": ts, "node": node, "peer": peer, "channel": "log", "type": "SessionMessageHeader",
            "fields": {"leadershipTermId": term, "clusterSessionId": session, "timestamp": timestamp},
            "logPosition": position}


#: The lane's trace templates: a follower's AppendPosition, a leader's CommitPosition, a leader's log append and
#: its log frame to a follower (what `ReplaySession.timeline` leaves as ``(template, values)``).
TEMPLATES = (_APPEND, _COMMIT, _LOG_APPEND, _LOG_SEND)

#: A record the lane makes is ``template % values`` as a trace line; ``RECORD_OF[template](*values)`` is the
#: record that line decodes to (`SteadyLane.as_records`: for `ReplaySession.records`, without parsing the
#: line; `_templates_hold` and tests/test_steady_lane.py check each pair agrees).
RECORD_OF = {_APPEND: _append_send, _COMMIT: _commit_send, _LOG_APPEND: _log_append, _LOG_SEND: _log_send}


def _templates_hold() -> bool:
    """Do the templates spell what the model's records encode to?  (Checked with values that differ.)"""
    header = SessionMessageHeader(leadership_term_id=7, cluster_session_id=-3, timestamp=123456789)
    cases = [
        (Send(11, 1, 2, "consensus", AppendPosition(leadership_term_id=5, log_position=96, follower_member_id=1,
                                                    flags=0)), _APPEND % (11, 1, 2, 5, 96, 1, 0)),
        (Send(12, 2, 0, "consensus", CommitPosition(leadership_term_id=6, log_position=192, leader_member_id=2)),
         _COMMIT % (12, 2, 0, 6, 192, 2)),
        (Send(13, 0, 1, "log", header, 288), _LOG_SEND % (13, 0, 1, 7, -3, 123456789, 288)),
    ]
    from engine.model.outputs import LogAppend

    cases.append((LogAppend(14, 0, 384, header), _LOG_APPEND % (14, 0, 384, 7, -3, 123456789)))
    records = [(_APPEND, (11, 1, 2, 5, 96, 1, 0)), (_COMMIT, (12, 2, 0, 6, 192, 2)),
               (_LOG_SEND, (13, 0, 1, 7, -3, 123456789, 288)), (_LOG_APPEND, (14, 0, 384, 7, -3, 123456789))]
    return (all(encode_record(output.to_json()) == line for output, line in cases)
            and all(RECORD_OF[template](*values) == output.to_json() for (template, values), (output, _) in
                    zip(records, cases, strict=True)))


_STRUCT_CODES = {"int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "int64": "q",
                 "uint64": "Q"}
#: (SBE header bytes, payload length, class) -> a struct that reads the block's fields, or False (the
#: model's own decoder refuses such payloads, or gives them otherwise).
_LAYOUTS: dict[tuple[bytes, int, type], Any] = {}


def _values(payload: bytes, cls: type) -> tuple | None:
    """The block's field values of a recorded ``cls`` payload, in schema order, as `_decoded`'s message
    holds them (None: not one of the current schema version, or not decodable).  The first payload of each
    header and length is decoded by the model's own decoder and the layout checked against it; the
    others of that header and length are read with the same layout (fields of plain integers only, whose
    decoding cannot fail once the header and length pass)."""
    key = (payload[:8], len(payload), cls)
    layout = _LAYOUTS.get(key)
    if layout is None:
        layout = _learn(payload, cls, key)
    if layout is False:
        return None
    return layout.unpack_from(payload, 8)


def _learn(payload: bytes, cls: type, key: tuple) -> Any:
    import struct

    if len(_LAYOUTS) > 4096:
        _LAYOUTS.clear()
    message = _decoded(payload, cls)
    layout: Any = False
    fields = cls.BLOCK.fields
    if message is not None and all(f.enum is None and getattr(f, "primitive", None) in _STRUCT_CODES for f in fields):
        codes, at = ["<"], 0
        for f in fields:
            if f.offset > at:
                codes.append(f"{f.offset - at}x")
            codes.append(_STRUCT_CODES[f.primitive])
            at = f.offset + struct.calcsize("<" + _STRUCT_CODES[f.primitive])
        layout = struct.Struct("".join(codes))
        values = tuple(getattr(message, f.attr) for f in fields)
        if len(payload) < 8 + layout.size or layout.unpack_from(payload, 8) != values:
            layout = False
    _LAYOUTS[key] = layout
    return layout


def _decoded(payload: Any, cls: type) -> Any:
    """The message of a recorded payload when it is a ``cls`` of the current schema version (what
    `Event.message` gives), else None: the event goes to the model's own path, which decodes it, or
    says why it cannot."""
    try:
        decoded = decode_cluster(payload)
    except DecodeError:
        return None
    if type(decoded.message) is not cls or decoded.acting_version < SCHEMA_VERSION:
        return None
    return decoded.message


def _recorded_send(ts: int, node: int, peer: int, kind: str, payload: bytes) -> dict[str, Any]:
    """`engine.replay.sent_record` of a recorded send with a payload the lane has decoded (so it decodes)."""
    fields = decode_cluster(payload).message.to_fields()
    return {"ts": ts, "node": node, "dir": "out", "peer": peer, "type": kind, "fields": fields}


def _send_record(ts: int, node: int, peer: int, channel: str, message: Any, log_position: int | None) -> dict[str, Any]:
    return Send(ts, node, peer, channel, message, log_position).to_json()


def _append_record(ts: int, node: int, peer: int, term: int, position: int, flags: int) -> dict[str, Any]:
    message = AppendPosition(leadership_term_id=term, log_position=position, follower_member_id=node, flags=flags)
    return _send_record(ts, node, peer, "consensus", message, None)


def _commit_record(ts: int, node: int, peer: int, term: int, position: int) -> dict[str, Any]:
    message = CommitPosition(leadership_term_id=term, log_position=position, leader_member_id=node)
    return _send_record(ts, node, peer, "consensus", message, None)


def _log_send_record(ts: int, node: int, peer: int, message: Any, position: int) -> dict[str, Any]:
    return _send_record(ts, node, peer, "log", message, position)


class _LaneSend(dict):
    """A lane send waiting in its publication's sender (`NodeReplay.senders`): the record `_on_ready` would
    have kept, with what the lane compares it by (``lane``: type, key, position, record recipe)."""

    __slots__ = ("lane",)


_Check = _KeyRuns = _Run = _RunRecipe = _Series = _Sender = None  # the comparison's classes (`_bind_comparison`)


def _bind_comparison(replay: Any) -> None:
    """The comparison's classes, as the replay gives them (`engine.replay` uses this module, not the reverse)."""
    global _Check, _KeyRuns, _Run, _RunRecipe, _Series, _Sender
    _Check, _KeyRuns, _Run, _RunRecipe, _Series, _Sender = replay.COMPARISON


def _append_of_run(node: int, peer: int, run: Any) -> dict[str, Any]:
    """The record of a lane AppendPosition run of ``node`` to ``peer``: its key is (term, follower, flags)."""
    key = run.key
    return _append_send(run.start, node, peer, key[0], run.position, key[1], key[2])


def _commit_of_run(node: int, peer: int, run: Any) -> dict[str, Any]:
    """The record of a lane CommitPosition run of ``node`` to ``peer``: its key is (term, leader)."""
    key = run.key
    return _commit_send(run.start, node, peer, key[0], run.position, key[1])


#: The model's sends whose runs' records are made from the runs (`_RunRecipe`; `_Pair.recipe`).
_OF_RUN = {"AppendPosition": _append_of_run, "CommitPosition": _commit_of_run}


class _PeerCauses(dict):
    """peer -> the cause of a consensus message of ``sample``'s type from that peer (`_cause_of`'s), made
    when first asked for."""

    __slots__ = ("sample",)

    def __init__(self, sample: Any) -> None:
        super().__init__()
        self.sample = sample

    def __missing__(self, peer: Any) -> Any:
        cause = self[peer] = _cause_of(ConsensusMessage(message=self.sample, peer=peer))
        return cause


class SteadyLane:
    """The lane over one `NodeReplay` (see the module docstring).

    `run(rows, ...)` does, for each row of a chunk, what ``replay._prologue`` does, then the event itself
    where the lane can, else ``replay._body``.  Records go to ``out`` as trace lines (str) or, for what
    the lane left to the model's own path, as record dicts."""

    def __init__(self, replay: Any, record_at: Any) -> None:
        _bind_comparison(replay)
        self.replay = replay
        self.record_at = record_at  # k -> what a divergence shows of the recorded send at position k
        self.position = 0  # the position of the event being handled (the caller sets it)
        self.enabled = _templates_hold() and self._keys_hold(replay.key_fields)
        self.flags = replay.flags
        #: What `send` offers a publication for each (`len(encode(message))`: fixed-size messages).
        self.append_length = len(encode(_SAMPLE_APPEND))
        self.commit_length = len(encode(_SAMPLE_COMMIT))
        #: member -> its steady record, (role, agent, node, log, peers), while the lane may step it (`_member`);
        #: cleared by anything else.  ``peers``: the members it sends to (a leader's followers, in the
        #: order of ``agent.members``; a follower's leader).
        self.steady: dict[int, Any] = {}
        #: follower -> the log position from which every frame was appended by the lane (no
        #: NewLeadershipTermEvent or ClusterActionRequest for its log adapter to act on).
        self.clean_from: dict[int, int] = {}
        #: (member, peer, channel, type) -> the `_Pair` of that series.
        self.pairs: dict[tuple[Any, ...], _Pair] = {}
        self.handlers = (None, self._append_position, self._commit_position, self._log_frame, self._ingress,
                         self._own_append, self._expected)
        #: The cause each kind of input gives the changes it leads to (`Node.step`'s `_cause_of`).
        self.append_causes = _PeerCauses(_SAMPLE_APPEND)
        self.commit_causes = _PeerCauses(_SAMPLE_COMMIT)
        self.frame_cause = _cause_of(_SAMPLE_FRAME)
        self.ingress_cause = _cause_of(_SAMPLE_INGRESS)
        self.own_cause = _cause_of(_SAMPLE_OWN)
        self.messages: dict[tuple[int, int, int], Any] = {}
        self.handled = 0
        #: What a record the lane makes is put out as: its trace line (str), or, for a caller that wants the
        #: records, ``(template, values)`` (`RECORD_OF`; no line parsed back into a dict, and in the
        #: lines' case no tuple kept alive for the collector to walk).  The compiled loop puts out
        #: the records themselves, final, and their lines in ``record_lines`` (None: not run so).
        self.as_records = False
        #: With ``as_records``: leave each record the lane makes as its ``(template, values)`` (for a caller that
        #: writes its own text from the values, `ReplaySession.timeline`), the other records final.
        self.as_items = False
        self.record_lines: list[str] | None = None
        #: The compiled loop (`engine._window`, the same rows handled on C state), None: this module's.
        self.compiled = compiled.window_module()

    @staticmethod
    def _keys_hold(key_fields: Any) -> bool:
        """Does the comparison key these messages by the fields the lane gives, in that order?"""
        return (key_fields("AppendPosition", {}) == ("leadershipTermId", "followerMemberId", "flags")
                and key_fields("CommitPosition", {}) == ("leadershipTermId", "leaderMemberId")
                and key_fields("SessionMessageHeader", {}) == ("leadershipTermId", "clusterSessionId"))

    # -- when a member may be stepped here -------------------------------------------------------------

    def forget(self) -> None:
        """Something outside the lane ran: every member's steadiness is to be checked again."""
        self.steady.clear()
        self.clean_from.clear()

    def _member(self, node_id: int) -> Any:
        """The steady record of a member the lane may step now (``self.steady``'s), else None."""
        steady = self.steady.get(node_id)
        if steady is not None:
            return steady
        member = self.replay.driver.members.get(node_id)
        if member is None or member.ended:
            return None
        node = member.node
        if not node.is_running or node._held or getattr(node, "agent", None) is None:
            return None
        agent = node.agent
        if (agent.election is not None or agent.state is not ModuleState.ACTIVE or agent.blocked_until_ns is not None
                or agent.follower_recorder_ns is not None or agent.pending_catchup_replays
                or not agent.recording_active):
            return None
        role = agent.role
        if role is _LEADER:
            if not agent.has_log_publication or self.flags.active_member_quorum:
                return None
            for other in agent.members:
                if other.catchup_replay_session_id != NULL_VALUE:
                    return None
            peers = tuple(other.id for other in agent.members if other.id != node_id)
        elif role is _FOLLOWER:
            image = agent.log_image
            if (image is None or image.is_closed or agent.catchup_log_destination is not None or agent.held_log_frames
                    or agent.snapshot_done_ns is not None or agent.termination_position != NULL_POSITION
                    or agent.leader_member is None):
                return None
            self.clean_from[node_id] = _end(agent.log)
            peers = (agent.leader_member.id,)
        else:
            return None
        steady = self.steady[node_id] = (role, agent, node, agent.log, peers)
        return steady

    @staticmethod
    def _row_values(row: tuple, cls: type, columns: Any) -> tuple | None:
        """The message's field values: from its payload when it has one (None: not decodable as ``cls``),
        else from the row's typed columns (``columns``, an `itemgetter` of them in the schema's order)."""
        payload = row[PAYLOAD]
        if payload is None:
            return columns(row)
        return _values(payload, cls)

    @staticmethod
    def _int_values(row: tuple, cls: type, columns: Any) -> tuple | None:
        """`_row_values` when every one is an int (the model's own path builds the message from them), else
        None.  A payload's values are ints already: `_values` reads only integer fields."""
        payload = row[PAYLOAD]
        if payload is not None:
            return _values(payload, cls)
        values = columns(row)
        for value in values:
            if type(value) is not int:
                return None
        return values

    def _message(self, values: tuple[int, int, int]) -> Any:
        """The SessionMessageHeader of (term, session, timestamp), the same object for the same values
        while they repeat."""
        message = self.messages.get(values)
        if message is None:
            if len(self.messages) > 64:
                self.messages.clear()
            term, session, timestamp = values
            message = self.messages[values] = SessionMessageHeader(
                leadership_term_id=term, cluster_session_id=session, timestamp=timestamp)
        return message

    # -- one chunk of events -----------------------------------------------------------------------------

    def run(self, rows: list[tuple], first: int, out: list, event_at: Any, ref_kind: str) -> None:
        """Every row of a chunk (the first at position ``first``): through the lane, or, where it declines,
        through `NodeReplay._body` (its event from ``event_at(i)``).  Records go to ``out``, which is
        ``replay._out`` throughout.  What it looks up is held for the whole chunk (the replay's containers
        keep their identity while it runs)."""
        if self.compiled is not None:
            self.compiled.run(self, rows, first, out, event_at, ref_kind)
            return
        replay = self.replay
        replay._out = out
        body = replay._body
        forget = self.forget
        feed_batch = self._feed_batch
        handlers = self.handlers
        batches = replay._log_batches
        undecided = replay._undecided
        clock = replay.driver.clock
        queue = clock._queue
        horizon = replay.horizon
        checks = replay.checks
        tentative = replay.tentative
        found = replay.found
        runs = replay.runs
        declined = 0
        instant = None  # the time of the row before
        for k, row in enumerate(rows, first):
            self.position = k
            ts = row[0]  # TS
            # -- the prologue (`NodeReplay._prologue`), with this lane's frame batches ----------------------
            replay.now = ts
            # Batches from before ``ts`` are fed; at the time of the row before there are none: its prologue
            # fed them, and a batch its event began (`_log_frame`, `_body`) has its time.
            if batches and ts != instant:
                if len(batches) == 1:
                    batch_node, (batch_ts, _) = next(iter(batches.items()))
                    if batch_ts < ts:
                        feed_batch(batch_node, out)
                else:
                    for batch_node in sorted(batches):
                        if batches[batch_node][0] < ts:
                            feed_batch(batch_node, out)
            instant = ts
            if undecided:
                self._decide_pending(ts)
            if queue and queue[0][0] <= ts:
                forget()
                clock.run_until(ts)
            elif ts > clock.now_ns:
                clock.now_ns = ts
            code = row[16]  # CODE
            if batches and code != FRAME_IN:
                node_id = row[1]  # NODE
                if node_id in batches:
                    feed_batch(node_id, out)
            # -- the event --------------------------------------------------------------------------------
            if code and (handlers[code](row, out) or (code <= INGRESS_IN and self._absent(row))):
                horizon[row[1]] = ts
                if (checks and checks[0][0] < ts) or (tentative and tentative[0][0] < ts) or found or runs.open:
                    replay._resolve_due(ts, out)
            else:
                declined += 1
                forget()
                event, ref = event_at(k - first)
                body(event, ref, ref_kind)
        self.handled += len(rows) - declined

    def _absent(self, row: tuple) -> bool:
        """An inbound message to a member whose process is not running (killed, stopped, not started again):
        `NodeReplay._body` feeds it to no model, and only notes its time and, for a CommitPosition, the
        committed position the invariant checker has seen.  (A CommitPosition whose values the lane cannot
        read as `_commit_position` reads them goes to `_body`.)"""
        member = self.replay.driver.members.get(row[NODE])
        if member is None or (not member.ended and member.node.is_running):
            return False
        if row[CODE] == COMMIT_IN:
            values = self._row_values(row, CommitPosition, _COMMIT_COLUMNS)
            if values is None:
                return False
            term, position, _leader = values
            if type(position) is int:
                self.replay.invariants.observe_committed(position, term if type(term) is int else None)
        return True

    # -- the duty cycle's parts -------------------------------------------------------------------------

    def _enter(self, node: Any, agent: Any, ts: int, cause: Any) -> int | None:
        """Begin the member's duty cycle for an input at ``ts`` as `Node.step` does (its time, its cause) and
        give the member's time; None, with nothing changed, when the cycle's slow tick would do something
        (`_slow_tick_idle`).  Every check that may decline an event comes before this: after it the event
        is the lane's."""
        now = node._now_ns
        if ts > now:
            now = ts
        now_ms = now - now % MS
        if now_ms >= agent.slow_tick_deadline_ns and not self._slow_tick_idle(agent, now_ms):
            return None
        node._now_ns = now
        node._wakeup = _UNKNOWN
        agent.cause = cause
        agent.now_ns = now_ms
        agent.output_ts = now
        if now_ms > node._tick_ns:
            node._tick_ns = now_ms
        return now

    @staticmethod
    def _slow_tick_idle(agent: Any, now_ms: int) -> bool:
        """The duty cycle's slow tick at ``now_ms`` when it is due (`_realign_slow_tick`, `slow_tick_work`):
        True when it finds nothing to do, its next deadline set as the cycle sets it; False, nothing
        changed, when it would act (an abort, a lost quorum, a leader heartbeat timeout)."""
        deadline = agent.slow_tick_deadline_ns
        if now_ms > deadline:  # `_realign_slow_tick`: the 10 ms phase kept across skipped milliseconds
            first = -(-deadline // MS) * MS
            if first < now_ms:
                deadline = first + -(-(now_ms - first) // SLOW_TICK_INTERVAL_NS) * SLOW_TICK_INTERVAL_NS
        if now_ms < deadline:
            agent.slow_tick_deadline_ns = deadline
            return True
        config = agent.config
        if agent.role is _LEADER:
            if agent.aborts_ns or not has_active_quorum(agent.members, now_ms, config.leader_heartbeat_timeout_ns):
                return False
        elif (agent.termination_position == NULL_POSITION
              and now_ms >= agent.time_of_last_log_update_ns + config.leader_heartbeat_timeout_ns):
            return False
        agent.slow_tick_deadline_ns = now_ms + SLOW_TICK_INTERVAL_NS  # it ran and found nothing to do
        return True

    def _leader_position(self, node_id: int, agent: Any, log: Any, peers: tuple, now: int, out: list) -> None:
        """`update_leader_position(now, log.end)`: the commit position published when it moved or the
        heartbeat is due."""
        ends = log._ends
        position = ends[-1] if ends else log.end
        now_ms = agent.now_ns
        me = agent.this_member
        me.log_position = position
        me.time_of_last_append_position_ns = now_ms
        members = agent.members
        if len(members) == 3 and len(agent.ranked_positions) == 2:  # the median of three
            a, b, c = members[0].log_position, members[1].log_position, members[2].log_position
            if a > b:
                a, b = b, a
            quorum = b if c >= b else c if c >= a else a
        else:
            quorum = sorted([m.log_position for m in members], reverse=True)[len(agent.ranked_positions) - 1]
        if quorum < 0:
            quorum = 0
        commit = quorum if quorum < position else position
        if commit > agent.commit_position or now_ms >= agent.time_of_last_log_update_ns + \
                agent.config.leader_heartbeat_interval_ns:
            term = agent.leadership_term_id
            publications = agent.publications if agent.publication_evidence else None
            sent = False
            for peer in peers:
                if publications is not None:  # `send`: a refused offer is dropped (CommitPosition is not retried)
                    publication = publications.get(peer)
                    if publication is None or not publication.offer(self.commit_length):
                        continue
                agent.changes += 1
                sent = True
                parts = (now, node_id, peer, term, commit, node_id)
                out.append((_COMMIT, parts) if self.as_records else _COMMIT % parts)
                if publications is None:
                    self._actual(node_id, peer, "consensus", "CommitPosition", (term, node_id), commit, now, None)
                else:
                    self._pending(node_id, peer, publication.position, _LaneSend(
                        kind="send", ts=now, node=node_id, peer=peer, channel="consensus", type="CommitPosition",
                        fields={"leadershipTermId": term, "logPosition": commit, "leaderMemberId": node_id}),
                        ("CommitPosition", (term, node_id), commit, (_commit_record, now, node_id, peer, term, commit)))
            if sent:  # the invariant checker sees the CommitPosition records
                self.replay.invariants.observe_committed(commit, term)
            agent.commit_position = commit
            agent.time_of_last_log_update_ns = now_ms

    def _follower_work(self, node_id: int, agent: Any, log: Any, leader: int, now: int, out: list) -> None:
        """The follower's `consensus_work`: poll the log up to the commit position it was told (its frames
        checked by `_poll_ok` first), then `update_follower_position` towards ``leader``."""
        ends = log._ends
        end = ends[-1] if ends else log.end
        now_ms = agent.now_ns
        limit = agent.notified_commit_position
        if end < limit:
            limit = end
        position = agent.log_adapter_position
        if limit > position:
            new = end if limit >= end else log.end_at_or_before(limit)
            if new > position:
                agent.log_adapter_position = position = new
        if position > agent.commit_position:
            agent.commit_position = position
        last = agent.last_append_position
        target = end if end > last else last
        if target > last or now_ms >= agent.time_of_last_append_position_send_ns + \
                agent.config.leader_heartbeat_interval_ns:
            term = agent.leadership_term_id
            if agent.publication_evidence:
                publication = agent.publications.get(leader)
                if publication is None or not publication.offer(self.append_length):
                    return  # `send` refused: nothing changes, the next cycle tries again
                self._pending(node_id, leader, publication.position, _LaneSend(
                    kind="send", ts=now, node=node_id, peer=leader, channel="consensus", type="AppendPosition",
                    fields={"leadershipTermId": term, "logPosition": target, "followerMemberId": node_id, "flags": 0}),
                    ("AppendPosition", (term, node_id, 0), target, (_append_record, now, node_id, leader, term, target, 0)))
            else:
                self._actual(node_id, leader, "consensus", "AppendPosition", (term, node_id, 0), target, now, None)
            agent.changes += 1
            parts = (now, node_id, leader, term, target, node_id, 0)
            out.append((_APPEND, parts) if self.as_records else _APPEND % parts)
            if target > last:
                agent.last_append_position = target
                agent.time_of_last_append_position_update_ns = now_ms
            agent.time_of_last_append_position_send_ns = now_ms

    def _poll_ok(self, node_id: int, agent: Any, limit: int) -> bool:
        """Would the log adapter, polling up to ``limit``, meet only frames that do nothing but move it?"""
        position = agent.log_adapter_position
        if limit <= position or position >= self.clean_from.get(node_id, 1 << 62):
            return True
        for _start, _end, message in agent.log.after(position, limit):
            name = type(message).__name__
            if name == "NewLeadershipTermEvent" or name == "ClusterActionRequest":
                return False
        return True

    # -- the events ---------------------------------------------------------------------------------------
    #
    # Each checks the member steady in its role, the message's values ints and whatever else may decline
    # it, then `_enter` (the last check); only then does it change the member (the module docstring).

    def _append_position(self, row: tuple, out: list) -> bool:
        """An AppendPosition reaches a steady leader: `on_append_position`, then `_leader_position`."""
        node_id = row[NODE]
        steady = self.steady.get(node_id) or self._member(node_id)
        if steady is None or steady[0] is not _LEADER:
            return False
        values = self._int_values(row, AppendPosition, _APPEND_COLUMNS)
        if values is None:
            return False
        term, position, follower_id, flags = values
        _, agent, node, log, peers = steady
        if term != agent.leadership_term_id or flags & APPEND_POSITION_FLAG_CATCHUP or flags < 0:
            return False
        now = self._enter(node, agent, row[TS], self.append_causes[row[PEER]])
        if now is None:
            return False
        follower = agent.member_by_id.get(follower_id)
        if follower is not None:
            if self.flags.consistent_follower_positions:
                follower.leadership_term_id = term
            follower.log_position = position
            follower.time_of_last_append_position_ns = agent.now_ns
        self._leader_position(node_id, agent, log, peers, now, out)
        return True

    def _commit_position(self, row: tuple, out: list) -> bool:
        """A CommitPosition reaches a steady follower from its leader: noted, then `_follower_work`."""
        node_id = row[NODE]
        steady = self.steady.get(node_id) or self._member(node_id)
        if steady is None or steady[0] is not _FOLLOWER:
            return False
        values = self._int_values(row, CommitPosition, _COMMIT_COLUMNS)
        if values is None:
            return False
        term, position, leader_id = values
        _, agent, node, log, (leader,) = steady
        if term != agent.leadership_term_id or leader_id != leader:
            return False
        ends = log._ends
        end = ends[-1] if ends else log.end
        if not self._poll_ok(node_id, agent, position if position < end else end):
            return False
        now = self._enter(node, agent, row[TS], self.commit_causes[row[PEER]])
        if now is None:
            return False
        self.replay.invariants.observe_committed(position, term)
        now_ms = agent.now_ns
        agent.time_of_last_leader_update_ns = now_ms
        agent.notified_commit_position = position
        agent.time_of_last_log_update_ns = now_ms
        self._follower_work(node_id, agent, log, leader, now, out)
        return True

    def _log_frame(self, row: tuple, out: list) -> bool:
        """A frame reaches a follower: it waits in the member's batch, as `NodeReplay.feed` keeps it."""
        position = row[EXTRA_POSITION]
        if row[TYPE] != "SessionMessageHeader" or type(position) is not int:
            return False
        node_id = row[NODE]
        steady = self.steady.get(node_id) or self._member(node_id)
        if steady is None or steady[0] is not _FOLLOWER:
            return False
        values = self._int_values(row, SessionMessageHeader, _HEADER_COLUMNS)
        if values is None:
            return False
        payload = row[PAYLOAD]
        # the lane's frame: `LogFrame`'s fields as a tuple (`NodeReplay._feed_log_batch` builds the LogFrame
        # when the model's own path takes the batch)
        frame = (self._message(values), position, len(payload) if payload is not None else None)
        batches = self.replay._log_batches
        batch = batches.get(node_id)
        if batch is None:
            batches[node_id] = (row[TS], [frame])
        else:
            batch[1].append(frame)
        return True

    def _feed_batch(self, node_id: int, out: list) -> None:
        """`NodeReplay._feed_log_batch`: the frames that arrived together, in one go."""
        replay = self.replay
        ts, frames = replay._log_batches[node_id]
        steady = self.steady.get(node_id) or self._member(node_id)
        now = None
        if steady is not None and steady[0] is _FOLLOWER:
            _, agent, node, log, (leader,) = steady
            for frame in frames:  # the model's own LogFrames in the batch: a header with its position
                if type(frame) is not tuple and (type(frame.message) is not SessionMessageHeader
                                                 or type(frame.log_position) is not int):
                    break
            else:
                # frames are appended before the cycle polls: what it polls is what the lane appended
                ends = log._ends
                end = ends[-1] if ends else log.end
                limit = agent.notified_commit_position
                if self._poll_ok(node_id, agent, limit if limit < end else end):
                    now = self._enter(node, agent, ts, self.frame_cause)
        if now is None:
            self.forget()
            replay._out = out
            replay._feed_log_batch(node_id)
            return
        del replay._log_batches[node_id]
        for frame in frames:
            message, end = (frame[0], frame[1]) if type(frame) is tuple else (frame.message, frame.log_position)
            ends = log._ends
            if end > (ends[-1] if ends else log.end):
                log._push(end, message)  # `LogStore.append` past its end
                agent.changes += 1
        self._follower_work(node_id, agent, log, leader, now, out)

    def _ingress(self, row: tuple, out: list) -> bool:
        """A client's message reaches a steady leader whose log appends are recorded (they append it:
        `_own_append`): the duty cycle's `_leader_position`."""
        if row[TYPE] != "SessionMessageHeader":
            return False
        node_id = row[NODE]
        steady = self.steady.get(node_id) or self._member(node_id)
        if steady is None or steady[0] is not _LEADER:
            return False
        # the message's values are checked as for a log frame: the model's path builds the message
        _, agent, node, log, peers = steady
        if self._int_values(row, SessionMessageHeader, _HEADER_COLUMNS) is None or not agent.log_evidence:
            return False
        now = self._enter(node, agent, row[TS], self.ingress_cause)
        if now is None:
            return False
        self._leader_position(node_id, agent, log, peers, now, out)
        return True

    def _own_append(self, row: tuple, out: list) -> bool:
        """A steady leader's recorded log append (`OwnLogAppend`): the frame appended past the log's end and
        sent to each follower, then `_leader_position`; the recording's side compared."""
        end = row[EXTRA_POSITION]
        if row[TYPE] != "SessionMessageHeader" or type(end) is not int:
            return False
        node_id = row[NODE]
        steady = self.steady.get(node_id) or self._member(node_id)
        if steady is None or steady[0] is not _LEADER:
            return False
        values = self._int_values(row, SessionMessageHeader, _HEADER_COLUMNS)
        if values is None:
            return False
        _, agent, node, log, peers = steady
        now = self._enter(node, agent, row[TS], self.own_cause)
        if now is None:
            return False
        replay = self.replay
        term, session, timestamp = values
        ends = log._ends
        if end > (ends[-1] if ends else log.end):
            message = self._message(values)
            log._push(end, message)  # `LogStore.append` past its end
            agent.changes += 1
            parts = (now, node_id, end, term, session, timestamp)
            out.append((_LOG_APPEND, parts) if self.as_records else _LOG_APPEND % parts)
            compared = "log" in replay.compared_channels.get(node_id, ())
            for peer in peers:
                agent.changes += 1
                parts = (now, node_id, peer, term, session, timestamp, end)
                out.append((_LOG_SEND, parts) if self.as_records else _LOG_SEND % parts)
                if compared:
                    self._actual(node_id, peer, "log", "SessionMessageHeader", (term, session), None, now,
                                 (_log_send_record, now, node_id, peer, message, end))
        self._leader_position(node_id, agent, log, peers, now, out)
        if replay.compare:
            self._expect(row, "log", (term, session), None)
        return True

    def _expected(self, row: tuple, out: list) -> bool:
        """A recorded AppendPosition or CommitPosition: the comparison's expected side (`_expect_send`)."""
        kind = row[TYPE]
        payload = row[PAYLOAD]
        if payload is not None:
            if kind == "AppendPosition":
                values = _values(payload, AppendPosition)
                if values is None:
                    return False
                term, position, member, flags = values
                key = (term, member, flags)
            else:
                values = _values(payload, CommitPosition)
                if values is None:
                    return False
                term, position, member = values
                key = (term, member)
            if self.replay.compare:
                self._expect(row, "consensus", key, position)
            return True
        term, position = row[TERM], row[POSITION]
        if kind == "AppendPosition":
            member, flags = row[FOLLOWER], row[FLAGS]
            if type(member) is not int or type(flags) is not int:
                return False
            key = (term, member, flags)
        else:
            member = row[LEADER]
            if type(member) is not int:
                return False
            key = (term, member)
        if type(term) is not int or type(position) is not int:
            return False
        if self.replay.compare:
            self._expect(row, "consensus", key, position)
        return True

    # -- the comparison -------------------------------------------------------------------------------

    def _pending(self, node_id: int, peer: int, position: int, record: Any, lane: tuple) -> None:
        """A send offered to a publication the evidence follows: it waits in the sender, as `_on_ready` keeps
        it, until `_decide_pending` sees whether the sender got that far."""
        replay = self.replay
        if not replay.compare or "consensus" not in replay.compared_channels.get(node_id, ()):
            return
        record.lane = lane
        key = (node_id, peer)
        sender = replay.senders.get(key)
        if sender is None:
            sender = replay.senders[key] = _Sender()
        sender.pending.append((position, record))
        replay._undecided.add(key)

    def _decide_pending(self, before: int) -> None:
        """`NodeReplay._decide_pending`, the lane's sends compared as the lane compares them."""
        replay = self.replay
        senders = replay.senders
        for key in sorted(replay._undecided) if len(replay._undecided) > 1 else list(replay._undecided):
            sender = senders[key]
            pending = sender.pending
            if not pending:
                continue
            cut = 0
            for _, record in pending:
                if record["ts"] < before:
                    cut += 1
            if not cut:
                continue
            node_id = key[0]
            for position, record in pending[:cut]:
                if position > sender.offered:
                    sender.offered = position
                if sender.position is None or position <= sender.position:
                    if type(record) is _LaneSend:
                        kind, value, at, recipe = record.lane
                        self._actual(node_id, key[1], "consensus", kind, value, at, record["ts"], recipe)
                    else:
                        replay._actual_send(node_id, record)
                else:
                    sender.held.append((position, record))
            del pending[:cut]
            if not pending:
                replay._undecided.discard(key)

    def _pair(self, series_key: tuple[Any, ...]) -> _Pair:
        """The `_Pair` of a series the lane meets for the first time (kept in ``pairs``)."""
        replay = self.replay
        pair = self.pairs[series_key] = _Pair()
        node_id, peer, channel, _kind = series_key
        pair.compared = replay.compare and channel in replay.compared_channels.get(node_id, ())
        if pair.compared:
            # an empty series answers every question as a missing one does, so both sides are made now
            pair.actual = replay.actual.setdefault(series_key, _Series())
            pair.expected = replay.expected.setdefault(series_key, _Series())
            pair.expected.record_at = self.record_at  # a recorded send's record, from its position
            pair.waiting = None
            pair.peer_start = replay.facts.first_start.get(peer)
            of_run = _OF_RUN.get(_kind) if channel == "consensus" else None
            pair.recipe = _RunRecipe(partial(of_run, node_id, peer)) if of_run is not None else None
        return pair

    def _expect(self, row: tuple, channel: str, key: tuple, position: int | None) -> None:
        node_id = row[NODE]
        series_key = (node_id, row[PEER], channel, row[TYPE])
        pair = self.pairs.get(series_key) or self._pair(series_key)
        if not pair.compared:
            return
        ts = row[TS]
        payload = row[PAYLOAD]
        recipe = self.position if payload is None else (_recorded_send, ts, node_id, row[PEER], row[TYPE], payload)
        series = pair.expected
        number = series.append(ts, key, position, row[REF], recipe)
        if number is None:  # the same value again: its run goes on
            return
        tolerance = self.replay.tolerance_ns
        waiting = pair.waiting
        # the waiting model run's window is [due - 2 tolerance, due]: an entry already settled (due < now) is
        # past it, and its run (which a prune may have dropped since) is not read
        if waiting is not None and waiting[0] - 2 * tolerance <= ts <= waiting[0]:
            actual = pair.actual
            at = waiting[4] - actual.base
            if actual.positions[at] == position and actual.keys[at] == key:
                # each run shows the other's value within its window: neither check can fail
                waiting[5] = True
                pair.waiting = None
                return
        if _newest_is(pair.actual, key, position, ts - tolerance, ts + tolerance):
            return  # `_schedule` would find it covered
        self.replay._schedule("expected", node_id, series_key, _Run(series, number))

    def _actual(self, node_id: int, peer: int, channel: str, kind: str, key: tuple, position: int | None, ts: int,
                record: tuple | None) -> None:
        """A model send compared: its run begun or extended, its check made.  ``record``: the recipe of its
        record, None for the pair's own (`_Pair.recipe`: made from the run)."""
        series_key = (node_id, peer, channel, kind)
        pair = self.pairs.get(series_key) or self._pair(series_key)
        if not pair.compared:
            return
        series = pair.actual
        number = series.append(ts, key, position, None, pair.recipe if record is None else record)
        if number is None:  # the same value again: its run goes on
            return
        if pair.peer_start is not None and ts < pair.peer_start:
            return
        replay = self.replay
        tolerance = replay.tolerance_ns
        low, high = ts - tolerance, ts + tolerance
        other = pair.expected
        index = other.last_index if key == other.last_key else other.by_key.get(key)
        if index is not None:
            positions = index.positions
            # positions that never went down and end below this one cannot cover it (the common case: the
            # recording shows the new value later); else the recording's newest run may be this very value
            below = (position is not None and index.monotonic and positions and positions[-1] is not None
                     and positions[-1] < position)
            if not below and (_newest_is(other, key, position, low, high) or index.covers(position, low, high)):
                return
        due = high
        replay.check_seq += 1
        tentative = replay.tentative
        if tentative and tentative[-1][0] > due:  # out of order: the check goes where `_schedule` puts it
            check = _Check(due, "actual", node_id, series_key, _Run(series, number))
            heapq.heappush(replay.checks, (due, replay.check_seq, check))
            pair.waiting = None
            return
        entry = pair.waiting = [due, replay.check_seq, node_id, series_key, number, False]
        tentative.append(entry)


class _Pair:
    """The two sides of one series the lane compares, (member, peer, channel, type), found with one lookup:
    the model's and the recording's `_Series` (the very objects `NodeReplay.actual` and `.expected` hold),
    ``waiting``, the `NodeReplay.tentative` entry of the model's newest run the recording has not shown yet,
    and ``peer_start``, the peer's first start (a model send before it is not checked; None: no start);
    ``recipe``, the record of each of the model's runs of an AppendPosition or CommitPosition series, made
    from the run (`engine.replay._RunRecipe`: no record object per run), else None.
    ``compared`` is False for a series the replay does not compare (then nothing else is set)."""

    __slots__ = ("compared", "actual", "expected", "waiting", "peer_start", "recipe")


def _end(log: Any) -> int:
    """`LogStore.end`, from its open chunk when it has one (the hot path)."""
    ends = log._ends
    return ends[-1] if ends else log.end


def _newest_is(series: Any, key: Any, position: int | None, low: int, high: int) -> bool:
    """Is the series' newest run this key and position, overlapping [low, high]?  (Then it covers them.)"""
    return (position == series.last_position and key == series.last_key and series.ends[-1] >= low
            and series.starts[-1] <= high)


_SAMPLE_APPEND = AppendPosition(leadership_term_id=0, log_position=0, follower_member_id=0, flags=0)
_SAMPLE_COMMIT = CommitPosition(leadership_term_id=0, log_position=0, leader_member_id=0)
_SAMPLE_HEADER = SessionMessageHeader(leadership_term_id=0, cluster_session_id=0, timestamp=0)
_SAMPLE_FRAME = LogFrame(message=_SAMPLE_HEADER)
_SAMPLE_INGRESS = IngressMessage(message=_SAMPLE_HEADER, length=None)
_SAMPLE_OWN = OwnLogAppend(message=_SAMPLE_HEADER, log_position=None, length=None)


def rows_of_events(pairs: Any) -> Any:
    """Lane rows of ``(event, ref)`` pairs (an in-memory recording)."""
    for event, ref in pairs:
        fields = event.fields
        get = fields.get
        extra = event.extra
        position = extra.get("logPosition") if extra else None
        yield (event.ts, event.node, event.dir, event.channel, event.type, event.peer, get("leadershipTermId"),
               get("logPosition"), get("followerMemberId"), get("leaderMemberId"), get("flags"),
               get("clusterSessionId"), get("timestamp"), position if type(position) is int else None,
               event.payload, ref, code_of(event.dir, event.channel, event.type))


_EXTRA_POSITION = '{"logPosition":'
_ROW_INTS = ("leadershipTermId", "logPosition", "followerMemberId", "leaderMemberId", "flags", "clusterSessionId",
             "timestamp")


def _strings(column: Any) -> list[Any]:
    """A dictionary-encoded (or plain) string column's values."""
    if hasattr(column, "indices"):
        import numpy as np

        names = column.dictionary.to_pylist()
        indices = column.indices
        if column.null_count:
            names.append(None)  # index -1
            indices = arrow_compute.fill_null(indices, -1)
        # the names as one object array taken by the indices: the same str objects, without a Python call per row
        table = np.empty(len(names), dtype=object)
        table[:] = names
        return table[indices.to_numpy(zero_copy_only=False)].tolist()
    return column.to_pylist()


def _extra_position(text: str | None) -> int | None:
    """The top-level ``logPosition`` of an ``extra`` JSON object, as `input_of` reads it."""
    if not text:
        return None
    if text.startswith(_EXTRA_POSITION) and text.endswith("}") and text[15:-1].isdigit():
        return int(text[15:-1])
    import json

    value = json.loads(text)
    position = value.get("logPosition") if isinstance(value, dict) else None
    return position if type(position) is int else None


def _only_positions(extra: Any, positions: list[Any]) -> bool:
    """When every ``extra`` of a batch that is not null is ``{"logPosition":N}`` with N of 1 to 18 digits (what
    `recount convert` writes), their positions read into ``positions`` (None where ``extra`` is null) and
    True; else False and ``positions`` as it was (the general reading then takes every spelling)."""
    pc = arrow_compute  # pyarrow.compute's kernels without the 25 ms import of its wrappers

    digits = pc.utf8_slice_codeunits(extra, len(_EXTRA_POSITION), -1)
    simple = pc.and_(pc.and_(pc.starts_with(extra, _EXTRA_POSITION), pc.ends_with(extra, "}")),
                     pc.and_(pc.ascii_is_decimal(digits), pc.less_equal(pc.utf8_length(digits), 18)))
    if pc.sum(simple).as_py() != len(extra) - extra.null_count:
        return False
    positions[:] = pc.cast(digits, "int64").to_pylist()
    return True


class LaneRows:
    """A chunk's lane rows kept as their columns (``columns[TS]`` ...: one list per value of a row): iterated,
    the row tuples; the compiled lane (`engine._window`) reads the columns as they are."""

    __slots__ = ("columns",)

    def __init__(self, columns: tuple[list[Any], ...]) -> None:
        self.columns = columns

    def __len__(self) -> int:
        return len(self.columns[TS])

    def __iter__(self) -> Any:
        return zip(*self.columns, strict=True)

    def __getitem__(self, i: int) -> tuple:
        return tuple(column[i] for column in self.columns)


def lane_rows(batch: Any) -> LaneRows:
    """Lane rows of a replay file's record batch (contract §2: its typed columns, ``extra`` and ``payload``)."""
    import numpy as np

    pc = arrow_compute  # pyarrow.compute's kernels without the 25 ms import of its wrappers
    count = batch.num_rows
    names = batch.schema.names
    column = batch.column

    def ints(name: str) -> list[Any]:
        if name not in names:
            return [None] * count
        values = column(name)
        if values.null_count == 0:
            return values.to_numpy(zero_copy_only=False).tolist()
        return values.to_pylist()

    positions: list[Any] = [None] * count
    if "extra" in names:
        extra = column("extra")
        if extra.null_count < count and not _only_positions(extra, positions):
            # a flat object with one integer logPosition read in one pass (a string value cannot hold the
            # key unescaped, nor a brace here), any other object as JSON
            plain = pc.and_(pc.match_substring_regex(extra, r'^\{[^{}]*"logPosition":-?[0-9]{1,18}(,[^{}]*)?\}$'),
                            pc.equal(pc.count_substring(extra, '"logPosition":'), 1))
            plain = pc.fill_null(plain, False)
            if pc.any(plain).as_py():
                found = pc.extract_regex(pc.if_else(plain, extra, None), r'"logPosition":(?P<p>-?[0-9]{1,18})[,}]')
                positions = pc.cast(pc.struct_field(found, [0]), "int64").to_pylist()
            others = np.flatnonzero(~plain.to_numpy(zero_copy_only=False) & pc.is_valid(extra).to_numpy(zero_copy_only=False))
            if len(others):
                texts = pc.take(extra, pc.int64_array(others)).to_pylist()
                for at, text in zip(others.tolist(), texts, strict=True):
                    positions[at] = _extra_position(text)
    payload = column("payload").to_pylist() if "payload" in names else [None] * count
    parts = [column(name) for name in ("dir", "channel", "type")]
    directions, channels, kinds = (_strings(part) for part in parts)
    if all(hasattr(part, "indices") for part in parts):
        # each row's code from its three dictionary indices: `code_of` once per combination present
        combined = np.zeros(count, dtype=np.int64)
        for part in parts:
            combined = combined * (len(part.dictionary) + 1) + pc.fill_null(part.indices, -1).to_numpy(
                zero_copy_only=False).astype(np.int64) + 1
        unique, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
        table = np.array([code_of(directions[i], channels[i], kinds[i]) for i in first.tolist()], dtype=np.int64)
        code = table[inverse].tolist()
    else:
        codes: dict[tuple, int] = {}
        code = []
        for triple in zip(directions, channels, kinds, strict=True):
            one = codes.get(triple)
            if one is None:
                one = codes[triple] = code_of(*triple)
            code.append(one)
    return LaneRows((ints("ts"), ints("node"), directions, channels, kinds, ints("peer"), *(ints(name) for name in _ROW_INTS),
                     positions, payload, ints("seq"), code))
