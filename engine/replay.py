"""Node replay: re-run each member from its own recorded inbound events and compare what it sends.

Theory of operation
-------------------
The input is a recording: events (contract §1) from every member.  For each member we build one
`Node` from its ``MemberStart`` and feed it only what that member received (``dir: "in"``) and what
happened inside it (``MemberStop``, ``MemberCrash``, ``End``, and evidence such as
``RecordingSignal`` / ``LogEndOfStream``), and, as evidence, its own log appends (``out`` events on
channel ``log``: a leader's appends come from timers, session timeouts and operator actions the
capture cannot show otherwise, so a member whose appends were recorded appends exactly those, at the
time recorded, and nothing for ingress; see `Node.expect_log_evidence`), on ONE global time line:
events are ordered by ``(ts, position in the input)`` and, whenever that time line enters a new
millisecond, every live member is advanced to it first, so that the trace comes out in time order.
A member is never fed what another (replayed) member sent: in node replay each member sees the
recording's messages, so one member's mistake does not spread to the others.

What the member sent in the recording (``dir: "out"``) is the expected behaviour.  The model's
`Send` outputs are compared with it by these rules:

* The comparison is per (member, peer, message type), on the channels the model speaks for
  (``consensus`` and ``log``).  Client egress (SessionEvent, the service's replies, NewLeaderEvent),
  ingress, archive and service traffic are outside the consensus model and never compared: what a
  clustered service answers its clients is the application's business, not the election's.
  A member's sends on a channel are compared only if the recording has some ``out`` event of that
  member on that channel (a capture that did not record a member's sends cannot contradict them).
* The fields ``timestamp`` (a wall clock), ``logSessionId`` (chosen at random by the media driver)
  and ``catchupEndpoint`` (may carry an ephemeral port) are not compared.
* Significant messages (RequestVote, Vote, NewLeadershipTerm, CatchupPosition, StopCatchup,
  TerminationPosition, TerminationAck), and every other message that is not periodic (log frames),
  are compared by all other fields: every value the model
  sends must have been sent by the recorded member to the same peer within ±``tolerance_ns`` of the
  model's send, and every value the recording shows must be sent by the model within ±tolerance of
  the recorded one.  Consecutive equal sends form one run and are checked once (a NewLeadershipTerm
  repeated on the 200 ms heartbeat is one run, whatever the count).
* Periodic messages (CanvassPosition, AppendPosition, CommitPosition) are compared as time series
  of their distinct values: at each change of value on one side, the other side must, within
  ±tolerance, have sent the same non-position fields with a ``logPosition`` range that contains the
  new value (so a follower that reports its position in bigger or smaller steps than the real one
  did is not a divergence, but one that reports a position the real member never came near is).
* When the recording holds agent-log observations for a member (``ElectionStateChange`` and
  ``RoleChange`` with ``from``/``to`` as the agent log prints them, ``NewElection`` with its
  ``reason`` and ``leadershipTermId``), every election-state change and role change of the model
  must match one within ±``state_tolerance_ns`` (200 ms by default: both are stamped by the member's
  own clock), and every election start within ±tolerance (a replay starts a member where its
  election left INIT, up to 0.2 s after its NEW_ELECTION "node started" line), and vice versa.
* A consensus send offered to a publication the recording follows (``PublicationStatus``) is held
  to the wire only once the evidence says its frame left the sender (it may wait in the publication
  while the receiver's flow control holds it, and is gone with the process if it never left).
* A check whose window reaches past the end of the evidence (``--until``, the member's ``End``,
  crash or the last event) is not reported when it fails: what would match it may lie past the
  end (so a behaviour in the last ``tolerance_ns`` of a capture is never a divergence).

A failed check is a ``divergence`` record whose ``ts`` is the time of the unmatched send or
observation, ``event`` the seq (replay file) or line (JSON Lines) of the recorded event concerned
(or null), ``expected``/``actual`` the two sides (null for "nothing"), ``unmatched`` which side had
no counterpart (``model`` or ``recording``), and ``state`` the member's state when the divergence was
established (at most ``tolerance_ns`` later).  Each also says why (`engine.divergences`): ``cause``
(``evidence``, with ``settledBy`` naming the input that would settle it; ``timing``, with
``offsetNs``, the model's time less the recording's, the counterpart found as the other side; or
``model``) and ``why`` in a sentence; consecutive divergences of one member and one cause are one
record, ``count`` of them until ``lastTs``.  Records come out once the timing window (5 s) has
closed.  The summary counts the records (``divergences``) and the failed checks they hold
(``divergenceChecks``), and gives each member's ``verdicts``: its records by cause, what would settle
the evidence ones, and when the first one blamed on the model happened.

Randomness: each member's nomination delay comes from a `JavaRandom` seeded with
``MemberStart.seed`` when the recording has one and no ``seed`` is given, else ``seed + memberId``
(``seed`` defaults to 0).  A real cluster's draw is unseeded and cannot be reproduced, so with
``nomination="auto"`` (the default) a member whose MemberStart has no seed, when no seed is given
and the recording has what the member sent on the consensus channel, uses the delay the recording
implies instead (`RecordedNomination`): the ``nextDouble()`` that puts its nomination on the
millisecond of its next recorded RequestVote (of its agent log's NOMINATE -> CANDIDATE_BALLOT where the
recording has it: the RequestVotes can reach the wire later), or the longest delay when it sent none within reach
(it did not nominate before a vote or a leader ended its NOMINATE).  ``"seeded"`` and ``"recorded"``
force one source for every member.  Every draw is a ``random`` record saying which source gave it;
the summary lists each member's seed and source.

Raft safety properties are checked as records come out (`engine.invariants`).  Everything here is
pure: no I/O, no clock, no threads; the same events, model and seed give the same records, byte
for byte once encoded by `engine.trace`.
"""

from __future__ import annotations

import bisect
import collections
import copy
import heapq
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from engine.divergences import TIMING_WINDOW_NS, EvidenceGap, EvidenceGaps, Runs, count_causes, gaps_of
from engine.harness.driver import ClusterDriver, Member
from engine.harness.events import input_of, member_start_of
from engine.harness.nomination import NodeClock, RecordedNomination, SeededNomination, member_seed
from engine.invariants import InvariantChecker
from engine.model.flags import ModelFlags
from engine.model.inputs import LogFrame, LogFrames, PublicationStatus
from engine.model.outputs import Ready
from engine.model.view import MemberView
from engine.trace import (
    TraceHasher,
    canonical,
    encode_record,
    encoded_lines,
    encoded_lines_of,
    summary_record,
)
from formats.errors import DecodeError
from formats.events import MESSAGE_CLASSES, Event

MS = 1_000_000


class _KnownModels(Mapping[str, ModelFlags]):
    """Model name -> behaviour flags, for every model `engine.versions` knows: the modelled Aeron
    releases (1.40.0 … 1.51.x, the baseline 1.47.3) and the user models installed under the
    `recount.models` entry-point group.  Looked up on demand, so an installed model needs no restart."""

    def __getitem__(self, name: str) -> ModelFlags:
        return _model(name).flags

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            _model(name)
        except ValueError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        from engine.versions import all_models

        return iter([m.name for m in all_models()])

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _model(name: str):
    from engine.versions import model_for

    return model_for(name)


#: Model versions `replay` knows, and the behaviour flags each one means.
MODELS: Mapping[str, ModelFlags] = _KnownModels()

_JOIN = ("member {node}'s join of the leader's log is timed as at once (the capture shows its image, not when its"
         " archive's recording and its services joined)",
         "member {node}'s agent log (its archive's recording of the log and its services' SERVICE_ACK)")
_REPLAY = ("member {node}'s log replay is timed as at once (the capture does not show its archive's answer nor its"
           " services' acknowledgement)",
           "member {node}'s agent log (its archive's CMD_OUT_RESPONSE to the replay and its services' SERVICE_ACK)")
_LEAD = ("member {node}'s new leadership is timed by the wire only (its log publication when the capture first shows"
         " it; its log replay, recording and services' join at once)",
         "member {node}'s agent log (its driver's READY for the log publication, its archive's answers and its"
         " services' SERVICE_ACK)")
#: Election steps whose duration only the agent log shows (the driver, the archive and the services keeping
#: the module waiting), by the state a member without one enters: an evidence gap opens there, until the
#: election closes (why, settledBy).
_UNTIMED_STEPS = {"FOLLOWER_REPLAY": _REPLAY, "FOLLOWER_CATCHUP_AWAIT": _JOIN, "FOLLOWER_LOG_AWAIT": _JOIN,
                  "LEADER_LOG_REPLICATION": _LEAD}
DEFAULT_TOLERANCE_NS = 500 * MS
#: How far apart in time a modelled state or role change and the one the member's agent log shows may
#: be.  Both are stamped by the member's own clock, so it is tighter than a send's; but a real member
#: changes state only once its services and media driver have answered, which the model does at once:
#: on the real captures of 1.41.7 and 1.50.4 that puts state changes up to 135 ms after the model's.
DEFAULT_STATE_TOLERANCE_NS = 200 * MS
#: Settled checks between two prunings of the comparison series (memory stays bounded by the window).
PRUNE_EVERY = 4096
#: Rows of a lane chunk for `ReplaySession.timeline_blocks`: its records are kept until the text timeline has
#: written them, and with a smaller chunk they are still in the cache (the 500k-event bench file's text
#: timeline: 1.27-1.59 s at 8192 rows a chunk, 1.07-1.26 s at 2048; ``--json``, which keeps only its lines,
#: is as fast or faster with the file's own 8192).  The same trace whatever the size.
TIMELINE_CHUNK_ROWS = 2048

SIGNIFICANT = frozenset(
    {"RequestVote", "Vote", "NewLeadershipTerm", "CatchupPosition", "StopCatchup", "TerminationPosition", "TerminationAck"}
)
#: Periodic message type -> the position field compared by range.
PERIODIC = {"CanvassPosition": "logPosition", "AppendPosition": "logPosition", "CommitPosition": "logPosition"}
UNCOMPARED_FIELDS = frozenset({"timestamp", "logSessionId", "catchupEndpoint"})

#: The channels whose sends the model produces, and so compares.
COMPARED_CHANNELS = frozenset({"consensus", "log"})

#: Local events the member's Node is fed; other local events are observations, compared or ignored.
LOCAL_INPUTS = frozenset({"MemberStop", "MemberCrash", "End", "RecordingSignal", "LogEndOfStream", "PublicationStatus"})
#: Agent-log observation type -> the kind of model record it is compared with.
#: (The agent log's module StateChange is not compared: a capture's stop or kill of a member reaches
#: the replay only when its importer turns it into a MemberStop/MemberCrash input, and an ACTIVE ->
#: CLOSED the model was never told about says more about the import than about the model.)
OBSERVATIONS = {"ElectionStateChange": "state", "RoleChange": "role", "NewElection": "election"}
#: Model record kind -> the observation type, and the fields compared (the agent log's names).
OBSERVED_KINDS = {kind: name for name, kind in OBSERVATIONS.items()}
OBSERVATION_KEYS = {
    "state": ("from", "to"),
    "role": ("from", "to"),
    "election": ("reason", "leadershipTermId"),
}

#: The values of a member's view (by Aeron name) that a divergence and the summary show.
STATE_KEYS = (
    "electionState",
    "role",
    "leadershipTermId",
    "logLeadershipTermId",
    "candidateTermId",
    "leaderMemberId",
    "logPosition",
    "appendPosition",
    "commitPosition",
)
SUMMARY_KEYS = (
    "electionState",
    "role",
    "leadershipTermId",
    "leaderMemberId",
    "candidateTermId",
    "logPosition",
    "appendPosition",
    "commitPosition",
)

NOMINATION_SOURCES = ("auto", "seeded", "recorded")


class UnknownModelError(ValueError):
    def __init__(self, model: str) -> None:
        super().__init__(f"unknown model {model!r}; known models: {', '.join(sorted(MODELS))}")


def flags_for(model: str) -> ModelFlags:
    try:
        return MODELS[model]
    except ValueError:
        raise UnknownModelError(model) from None


# -- the comparison ------------------------------------------------------------------------------------


def _freeze(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, Mapping):
        return tuple((k, _freeze(v)) for k, v in value.items())
    return value


def _normal(value: Any) -> Any:
    """Field values as a recording and the model may spell them: BooleanType true/"TRUE" alike."""
    if value is True:
        return "TRUE"
    if value is False:
        return "FALSE"
    return value


#: Per message type, the fields compared exactly, in schema order (built on first use).
_KEY_FIELDS: dict[str, tuple[str, ...]] = {}
_SPECIAL = (bool, list, tuple, dict)


def _key_fields(type_name: str, fields: Mapping[str, Any]) -> tuple[str, ...]:
    names = _KEY_FIELDS.get(type_name)
    if names is None:
        cls = MESSAGE_CLASSES.get(type_name)
        if cls is None:
            return tuple(sorted(n for n in fields if n not in UNCOMPARED_FIELDS))
        block = cls.BLOCK
        every = [f.name for f in block.fields] + [g.name for g in block.groups] + [v.name for v in block.var_data]
        position_field = PERIODIC.get(type_name)
        names = _KEY_FIELDS[type_name] = tuple(n for n in every if n not in UNCOMPARED_FIELDS and n != position_field)
    return names


def comparison_key(type_name: str, fields: Mapping[str, Any]) -> tuple[tuple[Any, ...], int | None]:
    """(the values compared exactly, in schema order; the position compared by range, or None)."""
    get = fields.get
    values = tuple(map(get, _key_fields(type_name, fields)))
    for value in values:
        if isinstance(value, _SPECIAL):
            values = tuple(_freeze(_normal(v)) if isinstance(v, _SPECIAL) else v for v in values)
            break
    position_field = PERIODIC.get(type_name)
    return values, (get(position_field) if position_field is not None else None)


class _Run:
    """One run of a `_Series`: consecutive equal sends (or observations) on one side of one (member, peer,
    type).  A series keeps its runs' fields in columns, since nearly every compared send of a cluster at
    work starts a run that nothing reads again; a `_Run` is a handle on one of them, made when a check or a
    divergence needs it.  ``number`` counts the series' runs from its first, pruned ones included; two
    handles on one run are equal.  The handle holds what cannot change once the run has begun (its start,
    key, position, the ref of its first event, its record or the recipe for it), so a pending check reads
    its run even if its series has pruned it since; ``end`` is read from the series (a kept run only)."""

    __slots__ = ("series", "number", "start", "key", "position", "ref", "record")

    def __init__(self, series: _Series, number: int) -> None:
        at = number - series.base
        self.series = series
        self.number = number
        self.start = series.starts[at]
        self.key = series.keys[at]
        self.position = series.positions[at]
        self.ref = series.refs[at]
        self.record = series.records[at]

    @property
    def end(self) -> int:
        at = self.number - self.series.base
        assert at >= 0, "the end of a run read after its series pruned it"
        return self.series.ends[at]

    def __eq__(self, other: object) -> bool:
        return type(other) is _Run and other.series is self.series and other.number == self.number

    def __hash__(self) -> int:
        return hash((id(self.series), self.number))


class _RunRecipe:
    """The recipe of a run's record that the run itself holds the values of: ``make(run)`` builds it from the
    run's start, key and position (and what the recipe was made with: the series' member and peer).  One is
    shared by every run of a series (`engine.steady` makes one per lane series of AppendPosition or
    CommitPosition), so such a run keeps no object of its own for its record."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[_Run], dict[str, Any]]) -> None:
        self.make = make


def _record_of(run: _Run) -> dict[str, Any]:
    """The record a divergence shows for ``run``: the run's record, else made the first time, for every
    handle, from its recipe (a tuple: its builder and the builder's arguments; a `_RunRecipe`: from the run),
    from the position of its recorded event in the replay (an int, read by the series' ``record_at``), or
    from its trace line (a str: the compiled lane, `engine._window`, keeps the line it wrote of a log
    frame), as `engine.steady` keeps them."""
    record = run.record
    kind = type(record)
    if kind is tuple or kind is int or kind is str or kind is _RunRecipe:
        record = run.record = (record[0](*record[1:]) if kind is tuple else run.series.record_at(record)
                               if kind is int else json.loads(record) if kind is str else record.make(run))
        series = run.series
        at = run.number - series.base
        if at >= 0:
            series.records[at] = record
    return record


class _KeyRuns:
    """The runs of one series that have one comparison key: time-ordered, so the runs overlapping a
    window are a contiguous slice found by bisection; positions are kept beside them, with a flag
    saying whether they never went down (then the slice's range is its two ends).  `_Series.add`
    adds to them."""

    __slots__ = ("starts", "ends", "positions", "monotonic")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.positions: list[int | None] = []
        self.monotonic = True

    def window(self, low: int, high: int) -> tuple[int, int]:
        """Indexes [first, last] of the runs overlapping [low, high] (empty when first > last)."""
        return bisect.bisect_left(self.ends, low), bisect.bisect_right(self.starts, high) - 1

    def covers(self, position: int | None, low: int, high: int) -> bool:
        first, last = self.window(low, high)
        if first > last:
            return False
        if position is None:
            return True
        positions = self.positions
        if self.monotonic:
            lowest, highest = positions[first], positions[last]
        else:
            values = [p for p in positions[first : last + 1] if p is not None]
            if not values:
                return False
            lowest, highest = min(values), max(values)
        return lowest is not None and highest is not None and lowest <= position <= highest

    def prune(self, cutoff: int, *, keep_last: bool = False) -> None:
        """Forget the runs that ended before ``cutoff``; ``keep_last`` keeps the newest one, which its
        series may still extend."""
        drop = bisect.bisect_left(self.ends, cutoff)
        if keep_last:
            drop = min(drop, len(self.ends) - 1)
        if drop > 0:
            del self.starts[:drop], self.ends[:drop], self.positions[:drop]


_NO_KEY = object()  # the key of a series' newest run before it has one (equal to no key)


class _Series:
    """One side's runs for one (member, peer, channel, type), in time order, as columns (run i's start,
    end, key, position, the ref of its first event and its record or what makes it, `_record_of`), indexed
    by key.  ``base`` is the number of the first run kept (`_Run`); ``last_key``, ``last_position`` and
    ``last_index`` (the key's `_KeyRuns`) are the newest run's, what the next send extends.  ``record_at``
    reads the record of the recorded event at a position of the replay (set by `engine.steady`)."""

    __slots__ = ("starts", "ends", "keys", "positions", "refs", "records", "base", "by_key", "last_key",
                 "last_position", "last_index", "record_at")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.keys: list[Any] = []
        self.positions: list[int | None] = []
        self.refs: list[Any] = []
        self.records: list[dict[str, Any] | tuple | int] = []
        self.base = 0
        self.by_key: dict[Any, _KeyRuns] = {}
        self.last_key: Any = _NO_KEY
        self.last_position: int | None = None
        self.last_index: _KeyRuns | None = None
        self.record_at: Callable[[int], dict[str, Any]] | None = None

    def add(self, ts: int, key: Any, position: int | None, ref: Any,
            record: Callable[[], dict[str, Any]] | tuple) -> _Run | None:
        """`append`, the new run as a `_Run` (None: the last run goes on)."""
        number = self.append(ts, key, position, ref, record)
        return None if number is None else _Run(self, number)

    def append(self, ts: int, key: Any, position: int | None, ref: Any,
               record: Callable[[], dict[str, Any]] | tuple | int) -> int | None:
        """Extend the last run when it has this key and position (None), else start a new one (its number,
        `_Run`); ``record`` makes its record, or is what `_record_of` makes it from (a recipe, a position)."""
        if position == self.last_position and key == self.last_key:
            self.ends[-1] = ts
            self.last_index.ends[-1] = ts
            return None
        starts = self.starts
        number = self.base + len(starts)
        starts.append(ts)
        self.ends.append(ts)
        self.keys.append(key)
        self.positions.append(position)
        self.refs.append(ref)
        kind = type(record)
        self.records.append(record if kind is tuple or kind is int or kind is str or kind is _RunRecipe
                            else record())
        if key != self.last_key:
            index = self.by_key.get(key)
            if index is None:
                index = self.by_key[key] = _KeyRuns()
            self.last_key = key
            self.last_index = index
        else:
            index = self.last_index
        self.last_position = position
        positions = index.positions
        if positions and position is not None and positions[-1] is not None and position < positions[-1]:
            index.monotonic = False
        index.starts.append(ts)
        index.ends.append(ts)
        positions.append(position)
        return number

    def newest(self) -> _Run | None:
        return _Run(self, self.base + len(self.starts) - 1) if self.starts else None

    def covers(self, run: _Run, low: int, high: int) -> bool:
        """Does this side have ``run``'s key, with its position in range, within [low, high]?"""
        index = self.by_key.get(run.key)
        return index is not None and index.covers(run.position, low, high)

    def nearest_same(self, run: _Run, window: int) -> _Run | None:
        """The run nearest ``run`` in time with its key, within ``window`` of it, whose positions cover
        ``run``'s (None: there is none)."""
        key, start = run.key, run.start
        index = self.by_key.get(key)
        if index is None or not index.covers(run.position, start - window, start + window):
            return None
        starts, ends, keys = self.starts, self.ends, self.keys
        first = max(bisect.bisect_left(starts, start - window) - 1, 0)
        last = bisect.bisect_right(starts, start + window)
        best = None
        for i in range(first, last):
            if keys[i] != key or ends[i] < start - window:
                continue
            distance = min(abs(starts[i] - start), abs(ends[i] - start))
            if best is None or distance < best[0]:
                best = (distance, i)
        return _Run(self, self.base + best[1]) if best is not None else None

    def nearest(self, ts: int) -> _Run | None:
        starts, ends = self.starts, self.ends
        if not starts:
            return None
        i = bisect.bisect_left(starts, ts)
        candidates = [j for j in (i - 1, i) if 0 <= j < len(starts)]
        at = min(candidates, key=lambda j: (min(abs(starts[j] - ts), abs(ends[j] - ts)), starts[j]))
        return _Run(self, self.base + at)

    def prune(self, cutoff: int) -> None:
        """Forget runs that ended before ``cutoff``: no check can look at them any more."""
        ends = self.ends
        # the runs before the first that ended at or after the cutoff (never the last): found by bisection
        # where the ends are in order, as they are when sends come in time order, else one by one
        keep = max(len(ends) - 1, 0)
        drop = bisect.bisect_left(ends, cutoff, 0, keep)
        if (drop < keep and ends[drop] < cutoff) or (drop and max(ends[:drop]) >= cutoff):
            drop = 0
            while drop < keep and ends[drop] < cutoff:
                drop += 1
        if drop:
            del self.starts[:drop], ends[:drop], self.keys[:drop], self.positions[:drop], self.refs[:drop]
            del self.records[:drop]
            self.base += drop
        # The series' last run is kept above, however old, because the next equal value extends it;
        # its key's index must keep the entry that extension updates.
        keys = self.keys
        last_key = keys[-1] if keys else None
        for key, index in self.by_key.items():
            index.prune(cutoff, keep_last=bool(keys) and key == last_key)


class _Sender:
    """What node replay knows of one member's consensus publication to one peer (``PublicationStatus``):
    how far its sender has sent (None: everything offered), and the model's sends not on the wire yet:
    ``pending`` (offered this instant: the evidence for this instant may still come) and ``held``
    (offered past the sender position: they leave when the evidence moves it past them).  ``offered``:
    the publication position after the last send decided, where a stall (``sender_stalled``) holds the
    sender; ``stalled``: whether one does."""

    __slots__ = ("position", "pending", "held", "offered", "stalled")

    def __init__(self) -> None:
        self.position: int | None = None
        self.pending: list[tuple[int, dict[str, Any]]] = []
        self.held: list[tuple[int, dict[str, Any]]] = []
        self.offered = 0
        self.stalled = False


@dataclass(slots=True)
class _Check:
    due: int
    side: str  # "actual": a model run needs a recorded counterpart; "expected": the reverse
    node: int
    series: tuple[Any, ...]
    run: _Run


@dataclass(slots=True)
class _Found:
    """A failed check waiting to be classified (`engine.divergences`) once the timing window closes."""

    check: _Check
    record: dict[str, Any]
    absorbed: bool = False  # the other half of a timing difference already reported


# -- node replay on the harness ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordingFacts:
    """What node replay needs to know of the whole recording before it starts (`scan`)."""

    #: Per member, the channels the recording shows it sending on (only those are compared).
    compared_channels: Mapping[int, frozenset[str]]
    #: Per member, the kinds of agent-log observation the recording holds (only those are compared).
    observed_kinds: Mapping[int, frozenset[str]]
    #: Per member, when it first sent RequestVote for each candidate term (the nomination oracle's times).
    nominations: Mapping[int, Sequence[int]]
    #: Each member's first MemberStart (a peer started later has no subscription before).
    first_start: Mapping[int, int]
    #: Where the inputs are known to be uncertain (`engine.divergences.EvidenceGap`).
    gaps: tuple[EvidenceGap, ...] = ()


class NodeReplay:
    """Node replay's state: the cluster driver, the comparison with the recording, the trace.

    ``feed`` takes the recording's events in replay order and returns the trace records each one led
    to; ``finish`` ends the replay.  With ``compare=False`` nothing is compared (what a debugger needs
    to rebuild member state quickly): no divergence is found and the comparison keeps no memory.
    `checkpoint` / `restore` copy the whole replay (`ReplaySession.seek` and the TUI use them).
    """

    #: The comparison's classes and key, for `engine.steady` (which does not import this module).
    COMPARISON = (_Check, _KeyRuns, _Run, _RunRecipe, _Series, _Sender)
    key_fields = staticmethod(_key_fields)

    def __init__(
        self,
        facts: RecordingFacts,
        *,
        nodes: frozenset[int] | None = None,
        until: int | None = None,
        seed: int | None = None,
        model: str = "1.47.3",
        nomination: str = "auto",
        tolerance_ns: int = DEFAULT_TOLERANCE_NS,
        state_tolerance_ns: int = DEFAULT_STATE_TOLERANCE_NS,
        compare: bool = True,
        hash_trace: bool = True,
    ) -> None:
        self.flags = flags_for(model)
        self.facts = facts
        self.model = model
        self.driver = ClusterDriver(_model(model), on_ready=self._on_ready)
        self.selected = nodes
        self.until = until
        self.seed = seed
        self.nomination = nomination
        self.tolerance_ns = tolerance_ns
        self.state_tolerance_ns = state_tolerance_ns
        self.compare = compare
        self.compared_channels = facts.compared_channels if compare else {}
        self.observed_kinds = facts.observed_kinds if compare else {}
        self.seeds: dict[int, int] = {}
        self.sources: dict[int, str] = {}
        self.horizon: dict[int, int] = {}
        self.actual: dict[tuple[Any, ...], _Series] = {}
        self.expected: dict[tuple[Any, ...], _Series] = {}
        self.checks: list[tuple[int, int, _Check]] = []
        self.check_seq = 0
        self.settled = 0  # checks settled since the comparison series were last pruned
        #: Checks of model runs made by the steady-state lane (`engine.steady`), in the order of their
        #: ``(due, seq)``: ``[due, seq, node, series, run number, passed]``, ``passed`` once the recording has shown
        #: the run's value within its window.  They settle in that order among `checks`, as if pushed there.
        self.tentative: collections.deque[list[Any]] = collections.deque()
        self.invariants = InvariantChecker()
        self.hasher: TraceHasher | None = TraceHasher() if hash_trace else None
        self.keep_lines = False  # also keep each record's encoded line (`ReplaySession.lines`)
        self.lines: list[str] = []
        self.divergences = 0  # divergence records (runs of one cause), as the summary counts them
        self.divergence_checks = 0  # failed checks, before they were paired and collapsed
        self.causes: list[dict[str, Any]] = []  # each divergence record's member, cause, count, settledBy
        self.gaps = EvidenceGaps(facts.gaps)
        self.untimed: set[int] = set()  # captured members without an agent log (`_UNTIMED_STEPS`)
        self.found: list[tuple[int, int, _Found]] = []  # failed checks by when they can be classified
        self.found_by_run: dict[_Run, _Found] = {}
        self.runs = Runs()
        self.now: int | None = None  # the time line's current time
        self._out: list[dict[str, Any]] = []
        #: member -> (ts, frames): log frames that arrived at one instant, fed together once it is over.
        self._log_batches: dict[int, tuple[int, list[Any]]] = {}
        #: (member, peer) -> its consensus publication's sender, where the recording follows it.
        self.senders: dict[tuple[int, int], _Sender] = {}
        self._undecided: set[tuple[int, int]] = set()  # senders with pending sends

    @property
    def members(self) -> Mapping[int, Member]:
        return self.driver.members

    # -- feeding ------------------------------------------------------------------------------------

    def feed(self, event: Event, ref: Any, ref_kind: str) -> list[dict[str, Any]]:
        self._prologue(event.ts, event.node, event.dir == "in" and event.channel == "log")
        return self._emit(self._body(event, ref, ref_kind))

    def _prologue(self, ts: int, node_id: int, log_frame: bool) -> None:
        """What happens before an event at ``ts`` to ``node_id`` is handled: earlier log frames are
        fed, the senders' pending sends decided, the members' deadlines up to ``ts`` run, and the
        member's own waiting frames fed unless the event is another one (``log_frame``)."""
        self._out = []
        self.now = ts
        batches = self._log_batches
        if batches:
            self._feed_log_batches(before=ts)
        if self._undecided:
            self._decide_pending(before=ts)
        self.driver.clock.run_until(ts)
        if batches and node_id in batches and not log_frame:
            self._feed_log_batch(node_id)

    def _body(self, event: Event, ref: Any, ref_kind: str) -> list[Any]:
        """The event itself, after `_prologue`: the records it led to (not encoded yet)."""
        out = self._out
        ts = event.ts
        driver = self.driver
        node_id = event.node
        if self.selected is not None and node_id not in self.selected:
            self._resolve_due(ts, out)
            return out
        self.horizon[node_id] = ts
        direction = event.dir
        if direction == "local" and event.type == "MemberStart":
            self._start(event, ref, ref_kind)
        elif direction == "out":
            member = driver.members.get(node_id)
            if event.channel == "log" and member is not None and member.running:
                # The member's own log append: evidence it appends from (see the module docstring).
                driver.feed(node_id, input_of(event), ts)
            if self.compare:
                self._expect_send(event, ref)
        elif direction == "local" and event.type in OBSERVATIONS:
            if self.compare:
                self._expect_observation(event, ref)
        elif direction == "in" or event.type in LOCAL_INPUTS:
            member = driver.members.get(node_id)
            if member is None:
                raise DecodeError(
                    f"member {node_id} has a {event.type} event before its MemberStart",
                    offset=ref,
                    unit=ref_kind,
                )
            if direction == "in" and event.type == "CommitPosition":
                position = event.fields.get("logPosition")
                term = event.fields.get("leadershipTermId")
                if isinstance(position, int):
                    self.invariants.observe_committed(position, term if isinstance(term, int) else None)
            if not member.ended and member.node.is_running:
                item = input_of(event)
                if item is None:
                    driver.touch(node_id, ts)  # not an input to the model; time passes all the same
                elif type(item) is LogFrame:
                    # Frames that arrive at one instant are taken in one go (`LogFrames`): fed when
                    # something else happens to the member, or the time line moves on.
                    batch = self._log_batches.get(node_id)
                    if batch is None:
                        self._log_batches[node_id] = (ts, [item])
                    else:
                        batch[1].append(item)
                else:
                    driver.feed(node_id, item, ts)
                    if type(item) is PublicationStatus and self.compare:
                        self._sender_status(node_id, item, ts)
            if self.senders and event.type in ("MemberCrash", "MemberStop"):
                self._forget_senders(node_id)
        self._resolve_due(ts, out)
        return out

    def advance(self, ts: int) -> list[dict[str, Any]]:
        """Let time pass to ``ts`` without an input: what each live member's own deadlines do by then
        (the first half of `feed`; feeding an event at ``ts`` afterwards does the rest, and the two give
        the records `feed` alone would).  A debugger uses it to tell a timer's change from an input's."""
        out = self._out = []
        self.now = ts
        self.driver.run_until(ts)  # comparisons due by then are settled by the next feed, as without this
        return self._emit(out)

    def finish(self) -> list[dict[str, Any]]:
        """Advance every live member to the end of the evidence, settle the checks, add the summary."""
        out = self._out = []
        final = self.until if self.until is not None else self.now
        if self._log_batches:
            self._feed_log_batches(before=None)
        if final is not None:
            self.now = final
            self.driver.advance_all(final)
            self._decide_pending(before=None)
            for node_id, member in self.driver.members.items():
                if member.running:
                    self.horizon[node_id] = max(self.horizon.get(node_id, final), final)
        self._resolve_due(None, out)
        records = self._emit(out)
        records.append(self._summary(final))
        return records

    def views(self) -> dict[int, MemberView]:
        """Each started member's `MemberView` now."""
        return self.driver.views()

    # -- members --------------------------------------------------------------------------------------

    def _start(self, event: Event, ref: Any, ref_kind: str) -> None:
        """A member starts, or restarts: a restart keeps the files the event does not give (Node's rule)."""
        node_id = event.node
        try:
            start = member_start_of(event)
        except DecodeError as error:
            raise DecodeError(error.expected, offset=ref, unit=ref_kind) from None
        seed = member_seed(node_id, event.fields, self.seed)
        channels = self.facts.compared_channels.get(node_id, ())
        use_recorded = self.nomination == "recorded" or (
            self.nomination == "auto" and self.seed is None and "seed" not in event.fields and "consensus" in channels
        )
        if use_recorded:
            timeout = start.config.election_timeout_ns
            random: Any = RecordedNomination(self.facts.nominations.get(node_id, ()), timeout, NodeClock(), seed)
            source = "recorded"
        else:
            random = SeededNomination(seed)
            source = "seeded"
        restart = node_id in self.driver.members
        if restart:
            self._forget_senders(node_id)
        if self.compare:
            self.gaps.started(node_id, event.ts)
            # A captured member without its agent log: the wire shows its images and publications, not how
            # long its driver, archive and services kept it waiting (only the agent log does: the waits on
            # `MemberStart`); the model takes those as at once, and what follows, until the election closes,
            # is uncertain (`_UNTIMED_STEPS`).
            self.untimed.discard(node_id)
            if start.log_images_ns is not None and "state" not in self.observed_kinds.get(node_id, ()):
                self.untimed.add(node_id)
        self.seeds[node_id] = seed
        self.sources[node_id] = source
        self.invariants.member_started(node_id, event.fields, restart=restart)
        self.driver.start(node_id, start, random, log_evidence="log" in channels)

    def _on_ready(self, node_id: int, ready: Ready) -> None:
        out = self._out
        if not self.compare:
            records = [o.to_json() for o in ready]
        else:
            records = []
            compared = self.compared_channels.get(node_id, frozenset())
            observed = self.observed_kinds.get(node_id, frozenset())
            for output in ready:
                record = output.to_json()
                records.append(record)
                kind = record["kind"]
                if kind == "send" and record.get("channel") in compared:
                    position = output.publication_position
                    if position is None:
                        self._actual_send(node_id, record)
                    else:  # on the wire once the evidence says its sender got that far
                        key = (node_id, output.peer)
                        sender = self.senders.get(key)
                        if sender is None:
                            sender = self.senders[key] = _Sender()
                        sender.pending.append((position, record))
                        self._undecided.add(key)
                elif kind in observed and (kind == "election" or record.get("from") is not None):
                    self._actual_observation(node_id, record)
                if kind == "state" and record.get("to") == "CLOSED":
                    self.gaps.closed(node_id, record["ts"])
                elif kind == "state" and node_id in self.untimed and record.get("to") in _UNTIMED_STEPS:
                    why, settled_by = _UNTIMED_STEPS[record["to"]]
                    self.gaps.add_open(EvidenceGap(node_id, record["ts"], None, why.format(node=node_id),
                                                   settled_by.format(node=node_id), until_closed=True,
                                                   timing_first=True))
        out.extend(records)
        out.extend(self.invariants.observe(node_id, records, self.driver.members[node_id].node.view))

    # -- log frames that arrived together ------------------------------------------------------------------

    def _feed_log_batches(self, *, before: int | None) -> None:
        batches = self._log_batches
        for node_id in sorted(batches) if len(batches) > 1 else list(batches):
            if before is None or batches[node_id][0] < before:
                self._feed_log_batch(node_id)

    def _feed_log_batch(self, node_id: int) -> None:
        ts, frames = self._log_batches.pop(node_id)
        member = self.driver.members[node_id]
        if member.running:
            # the steady lane (`engine.steady`) keeps a frame as its fields, (message, log_position, length)
            frames = [f if type(f) is LogFrame else LogFrame(message=f[0], log_position=f[1], length=f[2])
                      for f in frames]
            self.driver.feed(node_id, frames[0] if len(frames) == 1 else LogFrames(tuple(frames)), ts)

    # -- the sender between a model's offer and the wire ------------------------------------------------

    def _sender_status(self, node_id: int, status: PublicationStatus, ts: int) -> None:
        """New evidence of one publication's sender: what was offered before now is decided by the
        evidence before it; then what it has now sent leaves, held sends at this time."""
        key = (node_id, status.peer)
        sender = self.senders.get(key)
        if sender is None:
            sender = self.senders[key] = _Sender()
        self._decide(key, sender, before=ts)
        if status.sender_stalled:
            if not sender.stalled:
                sender.position = sender.offered  # it sent what was offered before the stall, and no more
            sender.stalled = True
        else:
            sender.position = status.sender_position
            sender.stalled = False
        if sender.held:
            still = []
            for position, record in sender.held:
                if sender.position is None or position <= sender.position:
                    self._actual_send(node_id, {**record, "ts": ts})
                else:
                    still.append((position, record))
            sender.held = still
        self._decide(key, sender, before=None)

    def _decide_pending(self, *, before: int | None) -> None:
        for key in sorted(self._undecided):
            self._decide(key, self.senders[key], before=before)

    def _decide(self, key: tuple[int, int], sender: _Sender, *, before: int | None) -> None:
        """The pending sends offered before ``before`` (all: None) leave now if the sender has got that
        far, and wait in the publication otherwise."""
        pending = sender.pending
        if not pending:
            return
        cut = len(pending) if before is None else sum(1 for _, record in pending if record["ts"] < before)
        for position, record in pending[:cut]:
            sender.offered = max(sender.offered, position)
            if sender.position is None or position <= sender.position:
                self._actual_send(key[0], record)
            else:
                sender.held.append((position, record))
        del pending[:cut]
        if not pending:
            self._undecided.discard(key)

    def _forget_senders(self, node_id: int) -> None:
        """The member's process ended: what it offered and never sent is gone with its publications."""
        for key in sorted(k for k in self.senders if k[0] == node_id):
            sender = self.senders.pop(key)
            self._decide(key, sender, before=None)
            self._undecided.discard(key)

    # -- the two sides -------------------------------------------------------------------------------

    def _expect_send(self, event: Event, ref: Any) -> None:
        if event.channel not in self.compared_channels.get(event.node, frozenset()):
            return
        fields = _sent_fields(event)
        key, position = comparison_key(event.type, fields)
        series = (event.node, event.peer, event.channel, event.type)
        run = self.expected.setdefault(series, _Series()).add(event.ts, key, position, ref,
                                                              lambda: sent_record(event, fields))
        if run is not None:
            self._schedule("expected", event.node, series, run)

    def _actual_send(self, node_id: int, record: dict[str, Any]) -> None:
        key, position = comparison_key(record["type"], record["fields"])
        series = (node_id, record.get("peer"), record.get("channel"), record["type"])
        run = self.actual.setdefault(series, _Series()).add(record["ts"], key, position, None, lambda: record)
        # A peer that starts later in the recording has no subscription yet: Aeron's publication is
        # not connected and sends nothing, so the model's send can match what was sent but is not checked.
        if run is not None and record["ts"] >= self.facts.first_start.get(record.get("peer"), record["ts"]):
            self._schedule("actual", node_id, series, run)

    def _expect_observation(self, event: Event, ref: Any) -> None:
        kind = OBSERVATIONS[event.type]
        fields = event.fields
        key = tuple(fields.get(name) for name in OBSERVATION_KEYS[kind])
        series = (event.node, None, "observation", kind)

        def record() -> dict[str, Any]:
            return {"ts": event.ts, "node": event.node, "dir": "local", "type": event.type, "fields": dict(fields)}

        run = self.expected.setdefault(series, _Series()).add(event.ts, key, None, ref, record)
        if run is not None:
            self._schedule("expected", event.node, series, run)

    def _actual_observation(self, node_id: int, record: dict[str, Any]) -> None:
        key = tuple(record.get(name) for name in OBSERVATION_KEYS[record["kind"]])
        series = (node_id, None, "observation", record["kind"])
        run = self.actual.setdefault(series, _Series()).add(record["ts"], key, None, None, lambda: record)
        if run is not None:
            self._schedule("actual", node_id, series, run)

    def _tolerance(self, series: tuple[Any, ...]) -> int:
        # An election start is compared with the send tolerance: a member's replay starts where its
        # election left INIT, and its NEW_ELECTION "node started" line comes up to 0.2 s before that.
        if series[2] == "observation" and series[3] != "election":
            return self.state_tolerance_ns
        return self.tolerance_ns

    def _schedule(self, side: str, node_id: int, series: tuple[Any, ...], run: _Run) -> None:
        # Settled at once when the other side already matches: more evidence in the window can only
        # add matches (and widen a position range), never take one away.  Only a check that fails so
        # far waits for its window to close.
        tolerance = self.tolerance_ns if series[2] != "observation" else self._tolerance(series)
        other = (self.expected if side == "actual" else self.actual).get(series)
        if other is not None and other.covers(run, run.start - tolerance, run.start + tolerance):
            return
        due = run.start + tolerance
        self.check_seq += 1
        heapq.heappush(self.checks, (due, self.check_seq, _Check(due, side, node_id, series, run)))

    def _resolve_due(self, now: int | None, out: list) -> None:
        """Settle the checks whose window has closed (all of them when ``now`` is None), classify the
        failed ones whose timing window has closed, and emit the runs of divergences that ended."""
        checks = self.checks
        tentative = self.tentative
        if (now is not None and (not checks or checks[0][0] >= now) and (not tentative or tentative[0][0] >= now)
                and not self.found and not self.runs.open):
            return  # the common case: nothing due
        settled = 0
        while True:
            due_check = checks and (now is None or checks[0][0] < now)
            due_tentative = tentative and (now is None or tentative[0][0] < now)
            if due_tentative and (not due_check or tentative[0][:2] < list(checks[0][:2])):
                due, _, node_id, series, number, passed = tentative.popleft()
                if not passed:
                    self._settle(_Check(due, "actual", node_id, series, _Run(self.actual[series], number)),
                                 complete=now is not None or due <= self.horizon.get(node_id, -1))
            elif due_check:
                _, _, check = heapq.heappop(checks)
                self._settle(check, complete=now is not None or check.due <= self.horizon.get(check.node, -1))
            else:
                break
            settled += 1
        found = self.found
        if found and (now is None or found[0][0] < now):
            emitted: list[dict[str, Any]] = []
            while found and (now is None or found[0][0] < now):
                _, _, one = heapq.heappop(found)
                self.found_by_run.pop(one.check.run, None)
                if not one.absorbed:
                    self._classify(one)
                    self.runs.add(one.record, emitted)
            self._emit_divergences(emitted, out)
        if self.runs and (now is None or self.runs.due(now)):
            emitted = []
            self.runs.flush(emitted, now)
            self._emit_divergences(emitted, out)
        self.settled += settled
        if now is not None and self.settled >= PRUNE_EVERY:
            self._prune(now)

    def _prune(self, now: int) -> None:
        """Forget the runs of the series no check can look at any more (`_resolve_due`, every `PRUNE_EVERY`
        settled checks; `engine._window` settles the passed ones itself and calls this)."""
        checks, tentative, found = self.checks, self.tentative, self.found
        self.settled = 0
        # The oldest check still pending looks back to its start - tolerance, and a failed one waiting
        # to be classified to its start - the timing window: older runs can go.
        oldest = checks[0][0] if checks else now
        if tentative and tentative[0][0] < oldest:
            oldest = tentative[0][0]
        if found:
            oldest = min(oldest, found[0][0] - 2 * TIMING_WINDOW_NS)
        cutoff = oldest - 3 * self.tolerance_ns
        for side in (self.actual, self.expected):
            for series in side.values():
                series.prune(cutoff)

    def _emit_divergences(self, records: list[dict[str, Any]], out: list) -> None:
        for record in records:
            self.divergences += 1
            self.causes.append({"node": record["node"], "ts": record["ts"], "cause": record["cause"],
                                "count": record["count"], "settledBy": record.get("settledBy")})
            out.append(record)

    def _settle(self, check: _Check, *, complete: bool) -> None:
        run = check.run
        tolerance = self._tolerance(check.series)
        low, high = run.start - tolerance, run.start + tolerance
        other_side = self.expected if check.side == "actual" else self.actual
        series = other_side.get(check.series)
        if series is not None and series.covers(run, low, high):
            return
        if not complete:
            return  # the evidence that could match it lies past the end of the replay
        nearest = series.nearest(run.start) if series is not None else None
        if check.side == "actual":
            expected = _record_of(nearest) if nearest is not None else None
            actual = _record_of(run)
            ref = nearest.ref if nearest is not None else None
        else:
            expected = _record_of(run)
            actual = _record_of(nearest) if nearest is not None else None
            ref = run.ref
        self.divergence_checks += 1
        record = {
            "kind": "divergence",
            "ts": run.start,
            "node": check.node,
            "event": ref,
            "expected": _side(expected),
            "actual": _side(actual),
            "state": self._state(check.node),
            "unmatched": "model" if check.side == "actual" else "recording",
        }
        one = _Found(check, record)
        self.check_seq += 1
        heapq.heappush(self.found, (run.start + TIMING_WINDOW_NS, self.check_seq, one))
        self.found_by_run[run] = one

    def _classify(self, one: _Found) -> None:
        """The divergence's cause (`engine.divergences`): evidence, timing or model."""
        check, record = one.check, one.record
        run = check.run
        gap = self.gaps.at(check.node, run.start)
        if gap is not None and not gap.timing_first:
            record.update(cause="evidence", why=gap.why, settledBy=gap.settled_by)
            return
        other_side = self.expected if check.side == "actual" else self.actual
        series = other_side.get(check.series)
        match = series.nearest_same(run, TIMING_WINDOW_NS) if series is not None else None
        what = "state change" if check.series[2] == "observation" else "send"
        if match is not None:
            offset = run.start - match.start if check.side == "actual" else match.start - run.start
            record.update(
                cause="timing",
                offsetNs=offset,
                why=f"the model made the same {what} {abs(offset) / MS:.0f} ms {'later' if offset > 0 else 'earlier'}"
                f" than the recording shows",
            )
            if check.side == "actual":  # show the counterpart found, not merely the nearest record
                record["expected"], record["event"] = _side(_record_of(match)), match.ref
            else:
                record["actual"] = _side(_record_of(match))
            partner = self.found_by_run.get(match)
            if partner is not None:
                partner.absorbed = True  # the same difference, seen from the other side
            return
        if gap is not None:
            record.update(cause="evidence", why=gap.why, settledBy=gap.settled_by)
            return
        window = f"{TIMING_WINDOW_NS // 1_000_000_000} s"
        record.update(
            cause="model",
            why=f"the recording shows no such {what} within {window}" if check.side == "actual"
            else f"the model made no such {what} within {window}",
        )

    def _state(self, node_id: int) -> dict[str, Any] | None:
        member = self.driver.members.get(node_id)
        if member is None:
            return None
        return state_fields(member.node.view(), STATE_KEYS)

    # -- output -------------------------------------------------------------------------------------------

    def _emit(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        result = []
        hasher = self.hasher
        if hasher is None:
            return [canonical(record) for record in records]
        keep = self.lines if self.keep_lines else None
        for record in records:
            record = canonical(record)
            line = hasher.add(record)
            if keep is not None:
                keep.append(line)
            result.append(record)
        return result

    def _summary(self, final: int | None) -> dict[str, Any]:
        nodes = {str(node_id): state_fields(view, SUMMARY_KEYS) for node_id, view in self.driver.views().items()}
        return summary_record(
            ts=final,
            model=self.model,
            seed=self.seed if self.seed is not None else 0,
            nodes=nodes,
            divergences=self.divergences,
            trace_sha256=self.hasher.hexdigest() if self.hasher is not None else "",
            divergenceChecks=self.divergence_checks,
            verdicts=self._verdicts(),
            seeds={str(n): self.seeds[n] for n in sorted(self.seeds)},
            nominationDelay={str(n): self.sources[n] for n in sorted(self.sources)},
            toleranceNs=self.tolerance_ns,
            stateToleranceNs=self.state_tolerance_ns,
        )

    def _verdicts(self) -> dict[str, dict[str, Any]]:
        """Per member (every started one): its divergences by cause (`engine.divergences.count_causes`)."""
        return count_causes(self.causes, self.driver.members)

    # -- checkpoints ---------------------------------------------------------------------------------------

    def checkpoint(self, *, compare: bool = True) -> NodeReplay:
        """A copy of the whole replay now, sharing nothing mutable with it (give it to `restore`).

        ``compare=False``: a copy that compares and hashes nothing from here on, and leaves the
        comparison state behind (cheap to take and to restore: what a debugger needs to rebuild
        member state exactly, when the divergences are already known)."""
        if compare:
            return self._copy()
        with self.comparing_nothing():
            return self._copy()

    @contextmanager
    def comparing_nothing(self) -> Iterator[NodeReplay]:
        """This replay, for the duration of the block, as `checkpoint(compare=False)` copies it: no
        comparison state, no trace hash, nothing compared.  Whatever serialises it in the block (a
        debugger's compact checkpoint, without a copy first) sees exactly that; it is put back after."""
        empty = {"actual": {}, "expected": {}, "checks": [], "tentative": collections.deque(), "hasher": None, "lines": [], "_out": [], "found": [],
                 "found_by_run": {}, "runs": Runs(), "causes": [], "senders": {}, "_undecided": set(),
                 "compare": False, "compared_channels": {}, "observed_kinds": {}}
        kept = {name: getattr(self, name) for name in empty}
        for name, value in empty.items():
            setattr(self, name, value)
        try:
            yield self
        finally:
            for name, value in kept.items():
                setattr(self, name, value)

    @staticmethod
    def restore(checkpoint: NodeReplay) -> NodeReplay:
        """A replay that continues from ``checkpoint`` (which stays usable)."""
        return checkpoint._copy()

    def _copy(self) -> NodeReplay:
        twin = copy.deepcopy(self, self.driver.copy_memo(keep=(self.facts, self.flags)))
        twin.driver.on_ready = twin._on_ready
        return twin


def _sent_fields(event: Event) -> dict[str, Any]:
    """The fields of a recorded send as the comparison reads them (its payload's, when it has one)."""
    try:
        return event.message().to_fields() if event.payload is not None else dict(event.fields)
    except DecodeError:
        return dict(event.fields)


def sent_record(event: Event, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a divergence shows of a recorded send."""
    if fields is None:
        fields = _sent_fields(event)
    return {"ts": event.ts, "node": event.node, "dir": "out", "peer": event.peer, "type": event.type, "fields": fields}


def state_fields(view: MemberView, keys: Sequence[str]) -> dict[str, Any]:
    """The named values of a member's view, by their Aeron names (a divergence's ``state``, the summary)."""
    document = view.to_json()
    return {key: document.get(key) for key in keys}


def _side(record: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A divergence's expected/actual side, JSON-ready: ts, node, dir, peer, type, fields."""
    if record is None:
        return None
    if record.get("kind") == "send":
        return {
            "ts": record["ts"],
            "node": record["node"],
            "dir": "out",
            "peer": record.get("peer"),
            "type": record["type"],
            "fields": record["fields"],
        }
    if record.get("kind") in OBSERVED_KINDS:
        kind = record["kind"]
        return {
            "ts": record["ts"],
            "node": record["node"],
            "dir": "local",
            "type": OBSERVED_KINDS[kind],
            "fields": {name: record.get(name) for name in OBSERVATION_KEYS[kind]},
        }
    return dict(record)


# -- the session -------------------------------------------------------------------------------------------


def scan(events: Iterable[Event], tolerance_ns: int = DEFAULT_TOLERANCE_NS) -> RecordingFacts:
    """The `RecordingFacts` of a recording, from its events in replay order (only ``ts``, ``node``,
    ``dir``, ``channel``, ``type``, a RequestVote's ``candidateTermId``, an ElectionStateChange's
    ``from``/``to``/``candidateTermId`` and the ``extra`` of lifecycle events are read)."""
    gaps: list[EvidenceGap] = []
    channels: dict[int, set[str]] = {}
    observed: dict[int, set[str]] = {}
    nominations: dict[int, dict[int, int]] = {}
    ballots: dict[int, dict[int, int]] = {}  # the agent log's NOMINATE -> CANDIDATE_BALLOT, by candidate term
    starts: dict[int, int] = {}
    for event in events:
        direction = event.dir
        if direction == "out":
            if event.channel in COMPARED_CHANNELS:
                channels.setdefault(event.node, set()).add(event.channel)
            if event.type == "RequestVote":
                term = event.fields.get("candidateTermId")
                first = nominations.setdefault(event.node, {})
                if term not in first:
                    first[term] = event.ts
        elif direction == "local":
            if event.type in OBSERVATIONS:
                observed.setdefault(event.node, set()).add(OBSERVATIONS[event.type])
                if (event.type == "ElectionStateChange" and event.fields.get("from") == "NOMINATE"
                        and event.fields.get("to") == "CANDIDATE_BALLOT"):
                    ballots.setdefault(event.node, {}).setdefault(event.fields.get("candidateTermId"), event.ts)
            elif event.type == "MemberStart":
                starts.setdefault(event.node, event.ts)
            if event.extra and event.type in ("MemberStart", "MemberCrash", "MemberStop"):
                gaps += gaps_of(event, tolerance_ns)
    # Where the member's agent log shows the nomination itself, it is when the draw fell due: its first
    # RequestVote can reach the wire later (h_five_members_leader_kill, member 0: CANDIDATE_BALLOT at
    # 19:23:56.479, the RequestVotes at 19:23:56.501 on a loaded host).
    for node, by_term in ballots.items():
        nominations.setdefault(node, {}).update(by_term)
    return RecordingFacts(
        compared_channels={n: frozenset(c) for n, c in channels.items()},
        observed_kinds={n: frozenset(k) for n, k in observed.items()},
        nominations={n: sorted(t.values()) for n, t in nominations.items()},
        first_start=starts,
        gaps=tuple(gaps),
    )


@runtime_checkable
class OrderedEvents(Protocol):
    """A recording's events in replay order, with a ref each: what `ReplaySession` steps through.

    ``len()`` events; `read(start)` gives them as ``(event, ref)`` from position ``start`` on, in order
    (a ref names the event in divergence records and errors: a ``seq``, a line, ...; ``ref_kind`` says
    which); `at(k)` one of them; `facts` is their `RecordingFacts` (what `scan` finds in them);
    ``until`` the time they were cut at (None: not cut).  `in_memory` orders a list of events.  A
    source that reads a replay file a batch at a time (`recorder.convert.ReplayFileInput.ordered`)
    holds only the batch it is in, so a replay of any length stays in bounded memory.
    """

    ref_kind: str
    until: int | None

    def facts(self, tolerance_ns: int = DEFAULT_TOLERANCE_NS) -> RecordingFacts:
        """What `scan` finds in them (its evidence gaps depend on the replay's tolerance)."""
        ...

    def __len__(self) -> int: ...

    def read(self, start: int = 0) -> Iterator[tuple[Event, Any]]:
        """(event, ref) of every event from position ``start`` on."""
        ...

    def at(self, k: int) -> tuple[Event, Any]:
        """The k-th event and its ref."""
        ...


class _InMemory:
    """Events given as a list: sorted by ``(ts, position in the list)``, cut at ``until``."""

    def __init__(self, events: Iterable[Event], refs: Sequence[Any] | None, ref_kind: str, until: int | None) -> None:
        events = list(events)
        refs = list(refs) if refs is not None else list(range(len(events)))
        if len(refs) != len(events):
            raise ValueError("refs must name every event")
        self.ref_kind = ref_kind
        self.until = until
        order = sorted(range(len(events)), key=lambda i: (events[i].ts, i))
        if until is not None:
            order = [i for i in order if events[i].ts <= until]
        self._events = [events[i] for i in order]
        self._refs = [refs[i] for i in order]
        self._facts: dict[int, RecordingFacts] = {}

    def facts(self, tolerance_ns: int = DEFAULT_TOLERANCE_NS) -> RecordingFacts:
        facts = self._facts.get(tolerance_ns)
        if facts is None:
            facts = self._facts[tolerance_ns] = scan(self._events, tolerance_ns)
        return facts

    def __len__(self) -> int:
        return len(self._events)

    def read(self, start: int = 0) -> Iterator[tuple[Event, Any]]:
        return zip(itertools.islice(self._events, start, None), itertools.islice(self._refs, start, None), strict=True)

    def lane_chunks(self, start: int = 0, chunk_rows: int | None = None
                    ) -> Iterator[tuple[int, list[tuple], Callable[[int], tuple[Event, Any]]]]:
        """The events from ``start`` as rows of the steady-state lane (`engine.steady`), a chunk of ``chunk_rows``
        (at most; default 4096) at a time."""
        from engine.steady import rows_of_events

        size = chunk_rows or 4096
        for first in range(start, len(self._events), size):
            events, refs = self._events[first : first + size], self._refs[first : first + size]
            rows = list(rows_of_events(zip(events, refs, strict=True)))
            yield first, rows, lambda i, events=events, refs=refs: (events[i], refs[i])

    def at(self, k: int) -> tuple[Event, Any]:
        return self._events[k], self._refs[k]


def in_memory(events: Iterable[Event], *, refs: Sequence[Any] | None = None, ref_kind: str = "seq",
              until: int | None = None) -> OrderedEvents:
    """``events`` (in any order) in replay order: by ``(ts, position in the input)``, up to ``until``.
    ``refs`` name each input event (default: its position)."""
    return _InMemory(events, refs, ref_kind, until)


class ReplaySession:
    """A node replay that can be stepped event by event, and rewound through checkpoints.

    ``events`` is an `OrderedEvents` (a replay file read a batch at a time), or events in any order,
    replayed by ``(ts, input position)`` (`in_memory`, with ``refs``, ``ref_kind`` and ``until``).
    `records()` runs it all; `step()` feeds one event; `seek(k)` returns to the state after the first
    ``k`` events (restoring the nearest checkpoint, taken every ``checkpoint_every`` events, and
    replaying the rest); `views()` is every member's `MemberView`.
    """

    def __init__(
        self,
        events: Iterable[Event] | OrderedEvents,
        *,
        refs: Sequence[Any] | None = None,
        ref_kind: str = "seq",
        nodes: Iterable[int] | None = None,
        until: int | None = None,
        seed: int | None = None,
        model: str = "1.47.3",
        nomination: str = "auto",
        tolerance_ns: int = DEFAULT_TOLERANCE_NS,
        state_tolerance_ns: int = DEFAULT_STATE_TOLERANCE_NS,
        checkpoint_every: int | None = None,
    ) -> None:
        flags_for(model)
        if nomination not in NOMINATION_SOURCES:
            raise ValueError(f"nomination must be one of {', '.join(NOMINATION_SOURCES)}, got {nomination!r}")
        if tolerance_ns < 0 or state_tolerance_ns < 0:
            raise ValueError("tolerances must not be negative")
        if isinstance(events, OrderedEvents):
            if refs is not None:
                raise ValueError("refs come with the OrderedEvents")
            if until is not None and until != events.until:
                raise ValueError(f"the events were cut at until={events.until}, not {until}")
            source = events
            #: The refs of the input events in input order (given, or their positions); None for an `OrderedEvents`.
            self.refs: list[Any] | None = None
        else:
            events = list(events)
            self.refs = list(refs) if refs is not None else list(range(len(events)))
            source = in_memory(events, refs=self.refs, ref_kind=ref_kind, until=until)
        self.source = source
        self.ref_kind = source.ref_kind
        self._driver = NodeReplay(
            source.facts(tolerance_ns),
            nodes=frozenset(nodes) if nodes is not None else None,
            until=source.until,
            seed=seed,
            model=model,
            nomination=nomination,
            tolerance_ns=tolerance_ns,
            state_tolerance_ns=state_tolerance_ns,
        )
        self._count = len(source)
        self._reader: Iterator[tuple[Event, Any]] | None = None  # positioned at self.position
        self.position = 0
        self.finished = False
        self.checkpoint_every = checkpoint_every
        self._checkpoints: list[tuple[int, NodeReplay]] = []
        #: The steady-state lane `lines` ran through (`engine.steady`; its ``handled`` counts the events it took).
        self.steady: Any = None
        if checkpoint_every:
            self._checkpoints.append((0, self._driver.checkpoint()))

    def __len__(self) -> int:
        return self._count

    def event(self, k: int) -> tuple[Event, Any]:
        """The k-th event in replay order and its ref."""
        if not 0 <= k < self._count:
            raise IndexError(f"event {k} is outside 0..{self._count - 1}")
        return self.source.at(k)

    def step(self) -> list[dict[str, Any]]:
        """Feed the next event; returns the records it produced ([] at the end)."""
        if self.position >= self._count:
            return []
        if self._reader is None:
            self._reader = iter(self.source.read(self.position))
        event, ref = next(self._reader)
        records = self._driver.feed(event, ref, self.ref_kind)
        self.position += 1
        every = self.checkpoint_every
        if every and self.position % every == 0 and self._checkpoints[-1][0] < self.position:
            self._checkpoints.append((self.position, self._driver.checkpoint()))
        return records

    def finish(self) -> list[dict[str, Any]]:
        """The end of the replay: final advance, pending checks, and the summary record (last)."""
        if self.finished:
            return []
        while self.position < self._count:
            self.step()
        self.finished = True
        self._reader = None
        return self._driver.finish()

    def records(self, *, lane: bool = True) -> Iterator[dict[str, Any]]:
        """Every trace record from here to the summary (through the steady-state lane as `lines` is)."""
        laned = self._laned(lane)
        if laned is not None:
            yield from self._lane_out(*laned, as_records=True)
            return
        while self.position < self._count:
            yield from self.step()
        yield from self.finish()

    def timeline(self, *, lane: bool = True) -> Iterator[dict[str, Any] | tuple[str, tuple[int, ...]]]:
        """`records`, but each record the steady-state lane makes left as ``(template, values)`` (its trace line
        is ``template % values``, its record ``engine.steady.RECORD_OF[template](*values)``): for a writer of
        text that describes such a record from its values (`cli.render_replay.print_timeline`) rather than
        build a dict and read it back.  The hash and every other record are as `records` gives them."""
        for block in self.timeline_blocks(lane=lane):
            yield from block

    def timeline_blocks(self, *, lane: bool = True) -> Iterator[list[Any]]:
        """`timeline` a block at a time (what a chunk of the lane made, never empty; off the lane, a record)."""
        laned = self._laned(lane, TIMELINE_CHUNK_ROWS)
        if laned is not None:
            yield from self._lane_out(*laned, as_records=True, as_items=True, in_blocks=True)
            return
        for record in self.records(lane=False):
            yield [record]

    def _laned(self, lane: bool, chunk_rows: int | None = None
               ) -> tuple[Any, Iterator[tuple[int, list[tuple], Any]]] | None:
        """(the steady-state lane, the source's lane chunks, of ``chunk_rows`` rows at most: None, the source's
        default) when the rest of the replay can take it."""
        chunks = getattr(self.source, "lane_chunks", None)
        if (not lane or chunks is None or self.checkpoint_every or self._driver.hasher is None
                or self._driver.selected is not None):
            return None
        from engine.steady import SteadyLane

        steady = SteadyLane(self._driver, self._sent_record_at)
        rows = chunks(self.position, chunk_rows) if steady.enabled else None
        if rows is None:
            return None
        self.steady = steady
        return steady, rows

    def lines(self, *, lane: bool = True) -> Iterator[str]:
        """The same trace as canonical JSON lines (`engine.trace`), each encoded once: the bytes the
        hash is over, then the summary's line.  A cluster at work goes through the steady-state lane
        (`engine.steady`; ``lane=False``: every event through `NodeReplay.feed`, the same bytes)."""
        for block in self.line_blocks(lane=lane):
            yield from block

    def line_blocks(self, *, lane: bool = True) -> Iterator[list[str]]:
        """`lines` a block at a time (what a chunk of the lane, or one event off it, made; never empty),
        the summary's line alone in the last block: for a writer that joins a block into one write."""
        laned = self._laned(lane)
        if laned is not None:
            yield from self._lane_out(*laned, as_records=False)
            return
        driver = self._driver
        driver.keep_lines = True
        try:
            while self.position < self._count:
                self.step()
                if self._driver.lines:
                    yield self._driver.lines[:]
                    self._driver.lines.clear()
            *records, summary = self.finish()
            if self._driver.lines:
                yield self._driver.lines[:]
                self._driver.lines.clear()
            yield [encode_record(summary)]
        finally:
            driver.keep_lines = False

    def byte_blocks(self, *, lane: bool = True) -> Iterator[bytes]:
        """`line_blocks` as the bytes a writer writes: each block's lines in UTF-8, each followed by ``\\n``
        (`engine.trace.encoded_lines`); the hash is over the very same bytes, made once.  The summary's line
        alone in the last block."""
        laned = self._laned(lane)
        if laned is not None:
            yield from self._lane_out(*laned, as_records=False, as_bytes=True)
            return
        for block in self.line_blocks(lane=False):
            yield encoded_lines(block)

    def _sent_record_at(self, k: int) -> dict[str, Any]:
        return sent_record(self.source.at(k)[0])

    def _lane_out(self, steady: Any, chunks: Iterator[tuple[int, list[tuple], Any]], *, as_records: bool,
                  as_bytes: bool = False, as_items: bool = False, in_blocks: bool = False) -> Iterator[Any]:
        """`line_blocks` (or `records`) through the steady-state lane: each chunk of rows handled by the lane
        or, event by event where it declines, by `NodeReplay`'s own path; the chunk's lines hashed and given
        as one block.
        A lane record is built from the lane's values (ints and names only: the dict its line decodes to, the
        same dict the model's record is)."""
        from engine.steady import RECORD_OF

        replay = self._driver
        hasher = replay.hasher
        ref_kind = self.ref_kind
        encode = encode_record
        joined = encoded_lines_of(steady.compiled)  # as_bytes: a chunk's lines in one bytes, hashed as written
        steady.as_records = as_records
        steady.as_items = as_items
        for first, rows, event_at in chunks:
            out: list[Any] = []  # the lane's lines (or (template, values)) and `_body`'s records, in the order made
            steady.record_lines = None
            steady.run(rows, first, out, event_at, ref_kind)
            self.position = first + len(rows)
            if not out:
                continue
            if as_records and steady.record_lines is not None:  # the compiled loop: final records, their lines
                hasher.add_encoded(joined(steady.record_lines, encode), len(steady.record_lines))
                if in_blocks:
                    yield out
                else:
                    yield from out
            elif as_records:
                hasher.add_encoded(joined([one[0] % one[1] if type(one) is tuple else encode(one) for one in out],
                                          encode), len(out))
                if as_items:
                    made = [one if type(one) is tuple else canonical(one) for one in out]
                else:
                    made = [RECORD_OF[one[0]](*one[1]) if type(one) is tuple else canonical(one) for one in out]
                if in_blocks:
                    yield made
                else:
                    yield from made
            elif as_bytes:
                data = joined(out, encode)
                hasher.add_encoded(data, len(out))
                yield data
            else:
                lines = [one if type(one) is str else encode(one) for one in out]
                hasher.add_lines(lines)
                yield lines
        if as_records:
            if in_blocks:
                last = list(self.finish())
                if last:
                    yield last
            else:
                yield from self.finish()
            return
        replay.keep_lines = True  # the last records are hashed as `finish` emits them
        try:
            *records, summary = self.finish()
            if replay.lines:
                yield encoded_lines(replay.lines) if as_bytes else replay.lines[:]
            replay.lines.clear()
        finally:
            replay.keep_lines = False
        yield encoded_lines([encode(summary)]) if as_bytes else [encode(summary)]

    def seek(self, k: int) -> None:
        """Return to the state just after the first ``k`` events."""
        if not 0 <= k <= self._count:
            raise IndexError(f"event {k} is outside 0..{self._count}")
        if k < self.position or self.finished:
            if not self._checkpoints:
                raise ValueError("this session keeps no checkpoints (checkpoint_every was not set)")
            i = bisect.bisect_right([p for p, _ in self._checkpoints], k) - 1
            position, driver = self._checkpoints[i]
            self._driver = NodeReplay.restore(driver)
            self.position = position
            self._reader = None
            self.finished = False
        while self.position < k:
            self.step()

    def views(self) -> dict[int, MemberView]:
        """Each started member's `MemberView` now."""
        return self._driver.views()

    @property
    def members(self) -> Mapping[int, Member]:
        """The cluster driver's members now (each one's model `node`), for a caller that inspects more
        than a `MemberView` shows (`recorder.conformance`: what a member never polled)."""
        return self._driver.members


def replay(
    events: Iterable[Event] | OrderedEvents,
    *,
    nodes: Iterable[int] | None = None,
    until: int | None = None,
    seed: int | None = None,
    model: str = "1.47.3",
    nomination: str = "auto",
    tolerance_ns: int = DEFAULT_TOLERANCE_NS,
    state_tolerance_ns: int = DEFAULT_STATE_TOLERANCE_NS,
    refs: Sequence[Any] | None = None,
    ref_kind: str = "seq",
) -> Iterator[dict[str, Any]]:
    """Node replay of ``events`` (see `ReplaySession`): trace records (contract §3), the summary last.  Pure."""
    session = ReplaySession(
        events,
        refs=refs,
        ref_kind=ref_kind,
        nodes=nodes,
        until=until,
        seed=seed,
        model=model,
        nomination=nomination,
        tolerance_ns=tolerance_ns,
        state_tolerance_ns=state_tolerance_ns,
    )
    return session.records()


def replay_lines(events: Iterable[Event] | OrderedEvents, **options: Any) -> Iterator[str]:
    """`replay`, as the canonical JSON lines of its trace (what `recount replay --json` prints)."""
    return ReplaySession(events, **options).lines()


def replay_line_blocks(events: Iterable[Event] | OrderedEvents, **options: Any) -> Iterator[list[str]]:
    """`replay_lines` a block at a time (`ReplaySession.line_blocks`)."""
    return ReplaySession(events, **options).line_blocks()


def replay_timeline_blocks(events: Iterable[Event] | OrderedEvents, **options: Any) -> Iterator[list[Any]]:
    """`replay`'s records with the steady-state lane's left as ``(template, values)``, a block at a time
    (`ReplaySession.timeline_blocks`)."""
    return ReplaySession(events, **options).timeline_blocks()


def replay_byte_blocks(events: Iterable[Event] | OrderedEvents, **options: Any) -> Iterator[bytes]:
    """`replay_lines` as the bytes to write, a block at a time (`ReplaySession.byte_blocks`)."""
    return ReplaySession(events, **options).byte_blocks()


__all__ = [
    "DEFAULT_STATE_TOLERANCE_NS",
    "DEFAULT_TOLERANCE_NS",
    "MODELS",
    "OrderedEvents",
    "RecordedNomination",
    "ReplaySession",
    "SeededNomination",
    "UnknownModelError",
    "comparison_key",
    "in_memory",
    "member_seed",
    "replay",
    "replay_byte_blocks",
    "replay_line_blocks",
    "replay_lines",
    "replay_timeline_blocks",
]
