"""A member's starting state from every piece of evidence, each value saying where it came from.

A replay starts each member (and restarts it after a crash or stop) from what its disk held at that
moment: recording.log, node-state.dat and how far its log recording reached (its *append position*).
The cluster directory people bring is usually copied *after* the incident, so it is a poor witness of
the start (`cluster_dir_import` takes it back to the moment by the timestamps Aeron writes, which
cannot tell, say, whether a term was still open).  Better evidence is often at hand; it is used in
this order of trust, the first that speaks deciding a value and the others checked against it:

1. **The wire**: the member's own first consensus message of that life.  An election always begins
   by canvassing, and CanvassPosition carries the member's ``logLeadershipTermId``, its append
   position (``logPosition``) and its ``leadershipTermId`` (the last term recording.log held: Aeron's
   recovery plan).  Exact, when the first thing the member sent was a CanvassPosition (or a
   RequestVote, which carries the first two); a member whose first message was anything else was
   already past its election, and its messages say nothing about its start.
2. **The agent log**: the member's NEW_ELECTION "node started" and INIT -> CANVASS lines (the same
   values, plus ``candidateTermId``, which is ``max(node-state.dat's candidateTermId,
   leadershipTermId)``, and ``logPosition``, where its recovered state ends: the latest snapshot).
3. **The archive catalog** (``archive.catalog``): the cluster log's recording.  Stopped before the
   moment: its ``stopPosition`` is the append position, exactly.  Not started yet: the member had
   no log.  Recording across the moment (extended later, as a restarted member extends it): its
   stop position is only an upper bound.
4. **recording.log and node-state.dat as of the moment** (`cluster_dir_import`): entries stamped
   later are dropped; a term whose end equals the base of a dropped term may have been closed by
   that later append, so it is open — unless a snapshot of that term, taken before the moment, sits
   exactly at its end: ClusterTool's orderly shutdown takes that snapshot and then commits the term,
   so the term was closed (probable).  An open term's append position is somewhere past its base:
   the base is a lower bound only.  node-state.dat written later: its earlier candidateTermId is
   unknown and taken as the last term (the election uses ``max(candidateTermId, leadershipTermId)``,
   so this only matters if the real one was higher).
5. **The mark file** (``cluster-mark.dat``): a candidateTermId there counts only where node-state.dat
   has none (Aeron before 1.41 kept it there); its start time says when the last life began
   (`recorder.capture.lifecycle`).

Every value chosen is a `Known`: its value, its source, how sure (``exact``, ``probable``, ``bound``
or ``assumed``) and a sentence; the MemberStart event carries them under ``extra.startingState``.
Pure: evidence in, state out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from formats import recording_log as rl
from formats.archive_catalog import Catalog, RecordingDescriptor
from formats.events import Event

NULL_VALUE = -1
MS = 1_000_000

EXACT = "exact"
PROBABLE = "probable"
BOUND = "bound"
ASSUMED = "assumed"


@dataclass(frozen=True, slots=True)
class Known:
    """One starting value and its provenance."""

    value: Any
    source: str  #: "wire", "agent log", "archive catalog", "recording.log", "node-state.dat", "mark file", "default"
    certainty: str  #: EXACT, PROBABLE, BOUND or ASSUMED
    note: str

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source, "certainty": self.certainty, "note": self.note}


@dataclass(frozen=True, slots=True)
class OwnWords:
    """What a member said about its own log at the start of one life."""

    source: str  #: "wire" or "agent log"
    where: str  #: "packet 1234", "agent-events.log line 215"
    ts: int
    append_position: int
    log_leadership_term_id: int
    leadership_term_id: int | None = None
    candidate_term_id: int | None = None  #: agent log only
    log_position: int | None = None  #: agent log only: where its recovered state ends

    def says(self) -> str:
        parts = [f"appendPosition={self.append_position}", f"logLeadershipTermId={self.log_leadership_term_id}"]
        if self.leadership_term_id is not None:
            parts.append(f"leadershipTermId={self.leadership_term_id}")
        if self.candidate_term_id is not None:
            parts.append(f"candidateTermId={self.candidate_term_id}")
        return " ".join(parts)


def own_words_on_wire(events: Iterable[Event], member: int, start_ns: int, end_ns: int | None) -> OwnWords | None:
    """The member's first consensus message sent in [start_ns, end_ns), if it tells its starting log."""
    for event in events:
        if event.node != member or event.dir != "out" or event.channel != "consensus" or event.ts < start_ns:
            continue
        if end_ns is not None and event.ts >= end_ns:
            return None
        fields = event.fields
        where = f"packet {(event.extra or {}).get('packet', '?')}"
        if event.type == "CanvassPosition":
            return OwnWords("wire", f"CanvassPosition, {where}", event.ts, fields["logPosition"],
                            fields["logLeadershipTermId"], fields.get("leadershipTermId"))
        if event.type == "RequestVote":
            return OwnWords("wire", f"RequestVote, {where}", event.ts, fields["logPosition"],
                            fields["logLeadershipTermId"])
        return None  # already past its election: what it says now is not its start
    return None


def own_words_in_agent_log(events: Iterable[Event], member: int, start_ns: int, end_ns: int | None
                           ) -> OwnWords | None:
    """The member's INIT -> CANVASS line of the life in [start_ns, end_ns) (its first), with the
    NEW_ELECTION "node started" line before it when the dialect has one."""
    started = None
    for event in events:
        if event.node != member or event.dir != "local" or event.ts < start_ns:
            continue
        if end_ns is not None and event.ts >= end_ns:
            break
        fields = event.fields
        if event.type == "NewElection" and fields.get("reason") == "node started":
            started = event
        elif event.type == "ElectionStateChange" and fields.get("from") == "INIT":
            line = (event.extra or {}).get("line", "?")
            return OwnWords("agent log", f"INIT -> CANVASS, agent log line {line}", event.ts,
                            fields.get("appendPosition", NULL_VALUE), fields.get("logLeadershipTermId", NULL_VALUE),
                            fields.get("leadershipTermId"), fields.get("candidateTermId"), fields.get("logPosition"))
    if started is not None:
        fields = started.fields
        line = (started.extra or {}).get("line", "?")
        return OwnWords("agent log", f"NEW_ELECTION, agent log line {line}", started.ts,
                        fields.get("appendPosition", NULL_VALUE), fields.get("leadershipTermId", NULL_VALUE),
                        fields.get("leadershipTermId"), None, fields.get("logPosition"))
    return None


@dataclass(frozen=True, slots=True)
class LogRecording:
    """The cluster log's recording as an archive catalog describes it."""

    source: str
    recording_id: int
    start_timestamp_ms: int
    stop_timestamp_ms: int  #: -1 while recording
    start_position: int
    stop_position: int  #: -1 while recording

    @classmethod
    def of(cls, catalog: Catalog, source: str) -> LogRecording | None:
        logs = [r for r in catalog.log_recordings() if r.state_name == "VALID"] or list(catalog.log_recordings())
        if not logs:
            return None
        # A member keeps one log recording and extends it; the oldest is the one it recovers from.
        first: RecordingDescriptor = min(logs, key=lambda r: r.recording_id)
        return cls(source, first.recording_id, first.start_timestamp, first.stop_timestamp, first.start_position,
                   first.stop_position)


@dataclass(slots=True)
class StartingState:
    entries: list[rl.Entry]
    node_state: dict[str, int]
    append_position: int
    known: dict[str, Known] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def provenance(self) -> dict[str, dict[str, Any]]:
        return {name: one.to_json() for name, one in self.known.items()}


def _terms(entries: Sequence[rl.Entry]) -> list[rl.Entry]:
    return [e for e in entries if e.type == rl.EntryType.TERM and e.is_valid]


def _latest_snapshot_position(entries: Sequence[rl.Entry]) -> int | None:
    positions = [e.log_position for e in entries if e.type == rl.EntryType.SNAPSHOT and e.is_valid]
    return max(positions) if positions else None


def reconcile(
    entries: Sequence[rl.Entry],
    dropped: Sequence[rl.Entry],
    node_state: dict[str, int],
    *,
    as_of_ns: int | None,
    node_state_written_later: bool,
    own: Sequence[OwnWords | None] = (),
    log_recording: LogRecording | None = None,
    mark_candidate_term_id: int | None = None,
    source: str = "",
) -> StartingState:
    """The starting state from the directory as of the moment (``entries`` kept, ``dropped`` because
    stamped later, ``node_state``) and the other evidence, in the module docstring's order of trust."""
    notes: list[str] = []
    known: dict[str, Known] = {}
    words = [w for w in own if w is not None]
    first = words[0] if words else None
    for other in words[1:]:
        if (other.append_position, other.log_leadership_term_id) != (first.append_position,
                                                                      first.log_leadership_term_id):
            notes.append(f"{source}: the {first.source} ({first.where}: {first.says()}) and the {other.source}"
                         f" ({other.where}: {other.says()}) disagree about the member's starting log; the"
                         f" {first.source} is taken")
    entries = list(entries)
    dropped = list(dropped)

    # Terms after the one the member says it had were written later (whatever their timestamps say).
    if first is not None:
        limit = first.leadership_term_id if first.leadership_term_id is not None else first.log_leadership_term_id
        later = [e for e in entries if e.leadership_term_id > limit]
        if later:
            entries = [e for e in entries if e.leadership_term_id <= limit]
            dropped += later
            notes.append(f"{source}: the member's own {first.where} says its last term was {limit}: "
                         + "; ".join(f"{e.type_name} term {e.leadership_term_id} @{e.log_position}" for e in later)
                         + " left out of its starting state (written later)")

    # Whether the last term was still open at the moment.
    terms = _terms(entries)
    last = terms[-1] if terms else None
    dropped_bases = {e.term_base_log_position for e in dropped if e.type == rl.EntryType.TERM}
    if last is not None and last.log_position != NULL_VALUE and last.log_position in dropped_bases:
        shutdown_snapshot = any(e.type == rl.EntryType.SNAPSHOT and e.is_valid and e.leadership_term_id
                                == last.leadership_term_id and e.log_position == last.log_position for e in entries)
        if shutdown_snapshot:
            known["lastTerm"] = Known(
                {"leadershipTermId": last.leadership_term_id, "logPosition": last.log_position}, "recording.log",
                PROBABLE, f"term {last.leadership_term_id} ends at {last.log_position}, where a snapshot taken before"
                " the start sits: an orderly shutdown (snapshot, then the term committed), so it was closed")
        else:
            entries = [replace(e, log_position=NULL_VALUE) if e is last else e for e in entries]
            known["lastTerm"] = Known(
                {"leadershipTermId": last.leadership_term_id, "logPosition": NULL_VALUE}, "recording.log", ASSUMED,
                f"term {last.leadership_term_id}'s end ({last.log_position}) is where a later term began, which"
                " may have closed it after the start; taken as still open")
            last = replace(last, log_position=NULL_VALUE)
    elif last is not None:
        state = "open" if last.log_position == NULL_VALUE else f"closed at {last.log_position}"
        known["lastTerm"] = Known({"leadershipTermId": last.leadership_term_id, "logPosition": last.log_position},
                                  "recording.log", EXACT if as_of_ns is None or not dropped else PROBABLE,
                                  f"term {last.leadership_term_id}, {state}, as recording.log holds it")
    if first is not None and first.log_leadership_term_id >= 0:
        if last is None:
            notes.append(f"{source}: the member's own {first.where} says its log reached term"
                         f" {first.log_leadership_term_id}, but recording.log as of the start holds no term")
        elif last.leadership_term_id < first.log_leadership_term_id:
            notes.append(f"{source}: the member's own {first.where} says its log reached term"
                         f" {first.log_leadership_term_id}, but recording.log as of the start ends at term"
                         f" {last.leadership_term_id}")

    # The append position.
    append, chosen = _append_position(first, log_recording, last, as_of_ns, notes, source)
    known["appendPosition"] = chosen
    if last is not None and last.log_position != NULL_VALUE and append != last.log_position:
        notes.append(f"{source}: term {last.leadership_term_id} is closed at {last.log_position} in recording.log,"
                     f" but the append position is {append} ({chosen.source})")

    # Where the member's recovered state ends (the latest snapshot), as its agent log says.
    snapshot = _latest_snapshot_position(entries)
    logged = next((w for w in words if w.log_position is not None), None)
    if logged is not None and logged.log_position != (snapshot if snapshot is not None else 0):
        notes.append(f"{source}: the {logged.where} says the member recovered to logPosition {logged.log_position},"
                     f" but the latest snapshot in its starting recording.log is at {snapshot}")

    # candidateTermId.
    node_state = dict(node_state)
    leadership = last.leadership_term_id if last is not None else NULL_VALUE
    told = next((w for w in words if w.candidate_term_id is not None), None)
    file_value = node_state["candidateTermId"]
    if told is not None and told.leadership_term_id is not None and told.candidate_term_id > told.leadership_term_id:
        node_state = {"candidateTermId": told.candidate_term_id, "logPosition": NULL_VALUE, "timestamp": NULL_VALUE}
        known["candidateTermId"] = Known(told.candidate_term_id, told.source, EXACT,
                                         f"{told.where}: candidateTermId {told.candidate_term_id} above leadershipTermId"
                                         f" {told.leadership_term_id} can only come from node-state.dat")
    elif not node_state_written_later:
        if file_value == NULL_VALUE and mark_candidate_term_id is not None and mark_candidate_term_id >= 0:
            node_state = {"candidateTermId": mark_candidate_term_id, "logPosition": NULL_VALUE,
                          "timestamp": NULL_VALUE}
            known["candidateTermId"] = Known(mark_candidate_term_id, "mark file", PROBABLE,
                                             "node-state.dat has none; cluster-mark.dat's (Aeron before 1.41 kept it there)")
        else:
            known["candidateTermId"] = Known(file_value, "node-state.dat", EXACT,
                                             "written before the start, as the file holds it")
    else:
        node_state = {"candidateTermId": leadership, "logPosition": NULL_VALUE, "timestamp": NULL_VALUE}
        why = "(Aeron's election uses max(candidateTermId, leadershipTermId), so the election is the same)"
        if told is not None:
            known["candidateTermId"] = Known(leadership, told.source, BOUND,
                                             f"node-state.dat was written after the start; {told.where} says"
                                             f" candidateTermId {told.candidate_term_id} = leadershipTermId, so it held"
                                             f" at most that: taken as {leadership} {why}")
        else:
            known["candidateTermId"] = Known(leadership, "recording.log", ASSUMED,
                                             f"node-state.dat was written after the start: taken as the last term"
                                             f" {leadership} {why}")
    return StartingState(entries, node_state, append, known, notes)


def _append_position(first: OwnWords | None, recording: LogRecording | None, last: rl.Entry | None,
                     as_of_ns: int | None, notes: list[str], source: str) -> tuple[int, Known]:
    catalog: Known | None = None
    upper: int | None = None
    if recording is not None:
        stopped = recording.stop_timestamp_ms != NULL_VALUE and recording.stop_position != NULL_VALUE
        if as_of_ns is None or (stopped and recording.stop_timestamp_ms * MS <= as_of_ns):
            if stopped:
                catalog = Known(recording.stop_position, "archive catalog", EXACT,
                                f"log recording {recording.recording_id} stopped at {recording.stop_position}"
                                f" (stopTimestamp {recording.stop_timestamp_ms}, before the start)")
        elif recording.start_timestamp_ms * MS > as_of_ns:
            catalog = Known(0, "archive catalog", EXACT,
                            f"log recording {recording.recording_id} began after the start"
                            f" (startTimestamp {recording.start_timestamp_ms}): no log yet")
        elif stopped:
            upper = recording.stop_position
    if first is not None:
        chosen = Known(first.append_position, first.source, EXACT, f"{first.where}: {first.says()}")
        if catalog is not None and catalog.value != chosen.value:
            notes.append(f"{source}: the archive catalog says the log reached {catalog.value} ({catalog.note}), the"
                         f" member's own {first.where} says {first.append_position}; taking the member's word")
        if upper is not None and first.append_position > upper:
            notes.append(f"{source}: the member's own {first.where} says appendPosition {first.append_position},"
                         f" beyond the archive catalog's log recording stop position {upper}")
        return first.append_position, chosen
    if catalog is not None:
        return catalog.value, catalog
    if last is None:
        return 0, Known(0, "default", ASSUMED if upper else EXACT, "recording.log holds no term: an empty log")
    if last.log_position != NULL_VALUE:
        return last.log_position, Known(last.log_position, "recording.log", PROBABLE,
                                        f"term {last.leadership_term_id} is closed at {last.log_position}")
    base = last.term_base_log_position
    limit = f", at most {upper} (the archive catalog's log recording stopped there later)" if upper is not None else ""
    notes.append(f"{source}: term {last.leadership_term_id} is still open in recording.log; its recording ends"
                 f" somewhere after the term base{limit}: appendPosition taken as the term base {base} (give the"
                 " capture or agent log of the member's start, or its archive dir, to know it)")
    return base, Known(base, "recording.log", BOUND, f"term {last.leadership_term_id} is open: its base {base} is a"
                       f" lower bound{limit}")
