"""Real captures in: pcap/pcapng files, aeron-agent logs and members' cluster directories → events.

Theory of operation.  `load_captures` takes any mix of these inputs for one incident and returns
the events of one replay (contract §1) and a summary of what was read and skipped:

1. Each input's kind is told by ``format`` or, with ``"auto"``, by what it is: a directory holding a
   member's cluster files, a file starting with the pcap or pcapng magic, or a text file whose first
   line is an aeron-agent line (``[seconds.nanos] ...``).
2. The members string (endpoint → member) is ``members`` when given, else the one a cluster
   directory holds (node-state.dat's legacy record), else inferred from the consensus traffic with a
   warning (`members.infer_members`).
3. The captures are decoded together (`pcap_import`, `datagrams`); agent logs are parsed and their
   clocks aligned on the captures' timeline (`agent_log_import`, `align`); each cluster directory
   becomes its member's ``MemberStart``, taken back to the moment the member's replay begins (where
   its agent log shows its consensus module starting; else its mark file's start time if that is
   within the capture; else the capture's first packet; `cluster_dir_import`).  A member seen in the traffic without a directory starts empty (noted).
4. A member's lives (`lifecycle`): where its agent log starts a second clock (a new ``log started``
   line: a new JVM) it crashed or stopped and started again (`_restarts`); a member without an agent
   log is read from the wire (`lifecycle.wire_restarts`: a silence with ICMP port unreachable answers,
   new consensus publications, SETUP requests or its mark file's start time showing a new process).
   Each death is a ``MemberCrash``/``MemberStop`` just after the last thing known of the old process,
   each new life a ``MemberStart`` where its election began, both with their evidence under
   ``extra.evidence``.  What was sent to a member while it was down is dropped (noted); what reached
   its new process before its election began is read at the start.  A directory's starting state is
   reconciled with what the member itself said at its start (`starting_state`).
5. Each member that the captures cover ends with an ``End`` event at the end of its host's capture.
6. When each member's consensus publications could take an offer (`publications`): per life, the
   peers whose publication was connected as its replay starts (the MemberStart's ``connectedPeers``)
   and a ``PublicationStatus`` event at each later change, read from the receivers' status messages.

Order: by ``ts``; at equal times MemberStart first, then captured messages (in capture order), then
agent-log observations, then End.  Everything here is deterministic.

Captures alone (no agent log) are assembled on their events' columns (`_assembled`: the same steps
on arrays, the reference being the loop over `Event` values that ``bulk=False`` runs).

Modules: `datagrams` (the shared datagram decoder), `bulk` (its steady traffic decoded as arrays),
`members` (endpoints and inference), `pcap_import`, `agent_log_import`, `cluster_dir_import`, `align`
(clock alignment), `lifecycle`, `starting_state`, `publications`.  This package does file I/O (it is
part of `recorder`); the decoding itself is in pure functions beside it.  The agent-log,
cluster-directory and archive readers are imported where such an input is read: a conversion of
captures alone starts without them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from formats.errors import DecodeError
from formats.event_columns import EventColumns, stable_order
from formats.events import CHANNELS, DIRECTIONS, Event
from recorder.capture.datagrams import DEFAULT_STREAMS, Streams
from recorder.capture.end_of_stream import end_of_stream_times
from recorder.capture.follower_joins import (
    append_positions,
    catchup_positions,
    consensus_sends,
    leaders_of_sessions,
    with_follower_join_evidence,
)
from recorder.capture.leader_joins import (
    first_of_each_sent,
    first_sent,
    first_sent_in_columns,
    joins_over,
    with_leader_join_evidence,
)
from recorder.capture.lifecycle import Restart, WireLiveness, wire_facts, wire_restarts
from recorder.capture.log_replays import replay_bounds, with_log_replay_evidence
from recorder.capture.members import MemberMap
from recorder.capture.pcap_import import import_pcaps, sniff_capture
from recorder.capture.publications import with_publication_evidence
from recorder.capture.replications import (
    append_rows,
    append_rows_in_columns,
    terms_of_sessions,
    with_replication_evidence,
)
from recorder.capture.shutdowns import TYPES as SHUTDOWN_TYPES
from recorder.capture.shutdowns import with_shutdown_evidence
from recorder.version_evidence import agent_log_evidence, wire_evidence

#: A member whose first CanvassPosition comes this long after the capture began started during the
#: capture (one already canvassing sends one every election status interval, 100 ms by default).
ALREADY_RUNNING_NS = 500_000_000

FORMATS = ("auto", "pcap", "pcapng", "agent-log", "cluster-dir", "archive-dir", "recording")


@dataclass(slots=True)
class CaptureLoad:
    """The events of one incident and what the summary says about the inputs.

    ``columns`` holds the events as columns when they were built so (captures without agent logs);
    ``events`` gives them as `Event` values either way (made from the columns on first use)."""

    _events: list[Event] | None
    cluster_members: str | None
    members_from: str | None  #: "--members", "cluster dir", "inferred" or None
    inputs: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Any] = field(default_factory=list)  #: `datagrams.Problem`s
    notes: list[str] = field(default_factory=list)
    alignment: list[dict[str, Any]] = field(default_factory=list)
    decoded: dict[str, Any] = field(default_factory=dict)
    evidence: list[dict[str, Any]] = field(default_factory=list)  #: of the Aeron version (recorder.version_evidence)
    columns: EventColumns | None = None

    @property
    def events(self) -> list[Event]:
        if self._events is None:
            self._events = self.columns.to_events() if self.columns is not None else []
        return self._events

    @events.setter
    def events(self, events: list[Event]) -> None:
        self._events = events
        self.columns = None

    def aeron_version(self) -> dict[str, Any]:
        """The Aeron version the inputs show: each piece of evidence, the model it implies and why."""
        from engine.versions import model_from_evidence

        model, why = model_from_evidence(self.evidence)
        dialects = {item["source"]: item["says"] for item in self.evidence if item["source"] != "wire"}
        schemas = sorted(item["schemaVersion"] for item in self.evidence if "schemaVersion" in item)
        return {"model": model, "why": why, "agentLogs": dialects, "schemaVersions": schemas,
                "evidence": list(self.evidence)}

    def summary(self) -> dict[str, Any]:
        """JSON-ready: what was read, what was skipped and why, and every assumption made."""
        if self.columns is not None:
            codes, names = self.columns.type_codes()
            counts = {names[code]: count for code, count in enumerate(np.bincount(codes, minlength=len(names)).tolist())
                      if count}
            nodes = self.columns.nodes()
            total = len(self.columns)
        else:
            counts = {}
            for event in self.events:
                counts[event.type] = counts.get(event.type, 0) + 1
            nodes = sorted({e.node for e in self.events})
            total = len(self.events)
        return {
            "events": total,
            "eventTypes": dict(sorted(counts.items())),
            "nodes": nodes,
            "clusterMembers": self.cluster_members,
            "clusterMembersFrom": self.members_from,
            "inputs": self.inputs,
            "decoded": self.decoded,
            "alignment": self.alignment,
            "problems": [p.to_json() for p in self.problems],
            "notes": list(self.notes),
            "aeronVersion": self.aeron_version(),
        }


def detect_format(path: str | os.PathLike[str]) -> str | None:
    """"pcap", "pcapng", "agent-log", "cluster-dir", "archive-dir", "recording" or None, from what
    ``path`` holds."""
    if os.path.isdir(path):
        from recorder.capture.cluster_dir_import import is_archive_dir, is_cluster_dir

        if is_cluster_dir(path):
            return "cluster-dir"
        return "archive-dir" if is_archive_dir(path) else None
    try:
        with open(path, "rb") as file:
            head = file.read(256)
    except OSError:
        return None
    kind = sniff_capture(head)
    if kind is not None:
        return kind
    from recorder.capture.recording_import import is_recording

    if is_recording(path, head):
        return "recording"
    from recorder.capture.agent_log_import import looks_like_agent_log

    if looks_like_agent_log(head):
        return "agent-log"
    return None


def load_captures(
    paths: Sequence[str | os.PathLike[str]],
    *,
    members: str | None = None,
    format: str = "auto",
    streams: Streams = DEFAULT_STREAMS,
    progress: Callable[[int], None] | None = None,
    bulk: bool = True,
) -> CaptureLoad:
    """Read a mix of captures, agent logs and cluster directories into one incident's events.

    Captures are decoded in bulk and, without agent logs, the incident's events are kept as columns
    (`CaptureLoad.columns`); ``bulk=False`` decodes every datagram one at a time and builds `Event`
    values throughout: the reference the tests hold the bulk path to."""
    if format not in FORMATS:
        raise DecodeError(f"unknown capture format {format!r} (known: {', '.join(FORMATS)})")
    kinds: dict[str, list[str]] = {"pcap": [], "agent-log": [], "cluster-dir": [], "archive-dir": [], "recording": []}
    for path in paths:
        name = os.fspath(path)
        kind = detect_format(name) if format == "auto" else format
        if kind is None and name.lower().endswith((".pcap", ".pcapng", ".cap")):
            kind = "pcap"  # named a capture: let the capture reader say what is wrong with it
        if kind is None:
            if not os.path.exists(name):
                raise FileNotFoundError(2, "no such file or directory", name)
            raise DecodeError(
                "not a pcap/pcapng capture, an aeron-agent log or a cluster directory (give --format to say which)",
                source=name,
            )
        kinds["pcap" if kind == "pcapng" else kind].append(name)

    member_map = MemberMap.parse(members, source="--members") if members else None
    members_from = "--members" if members else None
    if kinds["cluster-dir"]:
        from recorder.capture.cluster_dir_import import read_cluster_dir
    directories = [read_cluster_dir(name) for name in kinds["cluster-dir"]]
    if member_map is None:
        for directory in directories:
            state = directory.node_state.state if directory.node_state is not None else None
            if state is not None and state.cluster_members is not None and state.cluster_members.cluster_members:
                member_map = MemberMap.parse(state.cluster_members.cluster_members,
                                             source=f"{directory.path}/node-state.dat")
                members_from = "cluster dir"
                break

    # A recount record recording is decoded as the pcap of the same datagrams (recording_import).
    recordings: list[tuple[str, bytes]] = []
    recording_notes: list[str] = []
    for name in kinds["recording"]:
        from recorder.capture.recording_import import recording_as_pcap

        data, metadata, problems = recording_as_pcap(name)
        recordings.append((name, data))
        if member_map is None and metadata.cluster_members:
            member_map = MemberMap.parse(metadata.cluster_members, source=f"{name} (recorded members)")
            members_from = "recording"
        recording_notes += [f"{name}: {problem}" for problem in problems]
        if not metadata.clean_end:
            recording_notes.append(f"{name}: the recorder did not stop cleanly; read up to its last flush")

    load = CaptureLoad(None, member_map.text if member_map else None, members_from)
    load.notes += recording_notes
    captured = None
    if kinds["pcap"] or recordings:
        captured = import_pcaps(kinds["pcap"], member_map, streams=streams, progress=progress, extra=recordings,
                                bulk=bulk)
    if captured is not None:
        if member_map is None:
            member_map = captured.members
            load.cluster_members = member_map.text
            load.members_from = "inferred"
        load.inputs += [{"kind": "capture", **f.to_json()} for f in captured.files]
        load.problems += captured.problems
        load.notes += captured.notes
        load.decoded = {
            "datagrams": captured.summary.datagrams,
            "frames": dict(captured.summary.frames),
            "messages": dict(captured.summary.messages),
            "skipped": dict(captured.summary.skipped),
        }

    if bulk and captured is not None and not kinds["agent-log"]:
        load.columns = _assembled(load, captured, directories, member_map, kinds)
        load.evidence += wire_evidence(load.columns)
        if not len(load.columns):
            raise DecodeError("nothing to convert: no events in " + ", ".join(map(os.fspath, paths)))
        return load

    # (order group, ts, position) sort keys: MemberStart 0, captured 1, agent-log 2, End 3.
    keyed: list[tuple[int, int, int, int, Event]] = []
    if captured is not None:
        keyed += [(e.ts, 1, i, 0, e) for i, e in enumerate(captured.events)]

    from formats.agent_log import DIALECT_BY_NAME
    from recorder.capture.agent_log_import import agent_log_events, align_agent_log, read_agent_log_file
    from recorder.capture.cluster_dir_import import member_of
    from recorder.capture.cluster_dir_import import member_start as build_member_start
    from recorder.capture.starting_state import own_words_in_agent_log, own_words_on_wire

    logs = []
    for name in kinds["agent-log"]:
        parsed = read_agent_log_file(name)
        logs.append(parsed)
        align_agent_log(parsed, captured.events if captured is not None else None)
        events = agent_log_events(parsed)
        keyed += [(e.ts, 2, len(keyed) + i, 0, e) for i, e in enumerate(events)]
        load.inputs.append({"kind": "agent-log", "path": name, "node": parsed.node, "events": len(events),
                            "skipped": dict(sorted(parsed.skipped.items())), "dialect": parsed.dialect,
                            "impliedVersions": parsed.implied_versions, "aeronVersion": parsed.aeron_version})
        load.problems += parsed.problems
        for number, segment in enumerate(parsed.segments):
            if segment.alignment is not None:
                load.alignment.append({"path": name, "node": parsed.node, "segment": number,
                                       **segment.alignment.to_json()})

    if logs and captured is not None:
        keyed = _in_receipt_order(keyed, getattr(captured, "driver_stalls", None))
    capture_start = captured.first_ts_ns if captured is not None else None
    liveness = captured.liveness if captured is not None else {}
    # Each member's lives (`lifecycle`): from its agent log where it has one, else from the wire.
    restarts: list[Restart] = []
    for parsed in logs:
        found, notes = _restarts(parsed, keyed, liveness.get(parsed.node))
        restarts += found
        load.notes += notes
    logged_members = {parsed.node for parsed in logs}
    mark_starts = {member_of(d): _mark_start(d) for d in directories}
    for member, alive in liveness.items():
        if member in logged_members:
            continue
        sends = [item[0] for item in keyed
                 if item[1] == 1 and item[4].node == member and item[4].dir == "out" and item[4].channel == "consensus"]
        found = wire_restarts(member, alive, sends, mark_starts.get(member))
        restarts += found.restarts
        load.notes += found.notes
    ends = _life_ends(restarts)
    restarted = {r.member for r in restarts}
    keyed, dropped_notes = _not_delivered_while_down(keyed, restarts, _first_heard(liveness))
    load.notes += dropped_notes
    wire = [item[4] for item in keyed if item[1] == 1]
    logged = [item[4] for item in keyed if item[1] == 2]
    started: set[int] = set()
    for directory in directories:
        node = member_of(directory)
        ts = _start_time(directory, node, capture_start, keyed, last_life=node not in restarted)
        end = next((t for t in ends.get(node, ()) if t > ts), None)
        own = (own_words_on_wire(wire, node, ts, end), own_words_in_agent_log(logged, node, ts, end))
        recording, archive_notes = _log_recording(directory, kinds["archive-dir"])
        # The directory is taken back to the member's start when the inputs date it (a capture, or
        # the member's own agent log); a directory given alone is its state as it is.
        dated = capture_start is not None or any(parsed.node == node for parsed in logs)
        info = build_member_start(directory, cluster_members=load.cluster_members,
                                  as_of_ns=ts if dated else None, own=own, log_recording=recording)
        if info.node in started:
            raise DecodeError(f"a second cluster directory for member {info.node}", source=info.source)
        started.add(info.node)
        keyed = _queued_until_start(keyed, info.node, ts)
        extra = {"source": os.path.basename(info.source.rstrip("/")), "startingState": info.provenance}
        keyed.append((ts, 0, info.node, 0, Event(ts=ts, node=info.node, dir="local", peer=None, channel="local",
                                                type="MemberStart", fields=_with_waits(info.fields, logs, info.node),
                                                extra=extra)))
        load.inputs.append({"kind": "cluster-dir", "path": info.source, "node": info.node,
                            **({"archive": recording.source} if recording is not None else {})})
        load.notes += archive_notes + info.notes
    for restart in restarts:
        keyed = _queued_until_start(keyed, restart.member, restart.restart_ns, since=restart.back_ns)
        name = next((os.path.basename(p.source) for p in logs if p.node == restart.member), None)
        keyed += [_with_restart_state(item, wire, logged, ends, logs)
                  for item in _lifecycle_events(restart, load.cluster_members, name or _capture_name(kinds))]
    for parsed in logs:
        stop = _final_stop(parsed, ends.get(parsed.node, ()))
        if stop is not None:
            node = parsed.node
            late = [item for item in keyed if item[4].node == node and item[4].dir == "in" and item[0] >= stop.ts]
            if late:
                gone = {id(item) for item in late}
                keyed = [item for item in keyed if id(item) not in gone]
            keyed.append((stop.ts, 3, node, 0, stop))
            load.notes.append(f"{parsed.source}: member {node} stopped cleanly at {stop.ts - 1} (its consensus"
                              " module reached CLOSED) and did not start again"
                              + (f"; {len(late)} message(s) that reached it afterwards were not delivered" if late else ""))
    _archive_dirs_noted(load, kinds["archive-dir"])

    if captured is not None and member_map is not None:
        for member in member_map.member_ids:
            if member not in started:
                start = _start_time(None, member, capture_start, keyed, last_life=member not in restarted)
                keyed = _queued_until_start(keyed, member, start)
                keyed.append((start, 0, member, 0, Event(
                    ts=start, node=member, dir="local", peer=None, channel="local", type="MemberStart",
                    fields=_with_waits({"clusterMembers": member_map.text}, logs, member))))
                load.notes.append(f"member {member}: no cluster directory given; it starts with an empty"
                                  " recording.log and node-state.dat")
            end = captured.end_of(member)
            if end is not None:
                keyed.append((end, 3, member, 0, Event(ts=end, node=member, dir="local", peer=None, channel="local",
                                                      type="End", fields={})))
    if captured is not None:
        # A leader's ClusterTool shutdown from its TerminationPosition on the wire (`shutdowns`), and when
        # each leader join was over from its first CommitPosition of the term (`leader_joins`): per life.
        keyed = with_shutdown_evidence(keyed, (item[4] for item in keyed if item[1] == 1 and item[4].type in
                                               SHUTDOWN_TYPES))
        keyed = with_leader_join_evidence(keyed, joins_over(*first_sent(item[4] for item in keyed if item[1] == 1)))
    if captured is not None and captured.consensus_publications:
        # When each consensus publication could take an offer (`publications`): per life, so after the lives.
        keyed = with_publication_evidence(keyed, captured.consensus_publications, group=1,
                                          log_publications=captured.log_publications, log_images=captured.log_images)
        # When each follower's join was over (`follower_joins`): after the images, for members without logs.
        sent = [item[4] for item in keyed if item[1] == 1 and item[4].dir == "out"]
        appended = append_rows(sent)
        keyed = with_follower_join_evidence(keyed, leaders_of_sessions(sent), append_positions(sent),
                                            consensus_sends(sent), skip=logged_members, positions=appended,
                                            catchups=catchup_positions(sent))
        keyed = with_replication_evidence(keyed, appended, terms_of_sessions(sent), skip=logged_members)
    if captured is not None:
        sent = [item[4] for item in keyed if item[1] == 1 and item[4].dir == "out" and item[4].channel == "consensus"]
        sends = _typed_sends(sent)
        keyed = with_log_replay_evidence(keyed, replay_bounds(sends), skip=logged_members)
        keyed = _end_of_stream_answered(keyed, sends, logged_members)
    keyed.sort(key=lambda item: item[:4])
    load.events = [item[4] for item in keyed]
    for parsed in logs:
        dialect = DIALECT_BY_NAME[parsed.dialect]
        load.evidence.append(agent_log_evidence(parsed.source, dialect.first, dialect.last, dialect.name,
                                                parsed.aeron_version))
    load.evidence += wire_evidence(load.events)
    if not load.events:
        raise DecodeError("nothing to convert: no events in " + ", ".join(map(os.fspath, paths)))
    return load


def _assembled(load: CaptureLoad, captured: Any, directories: list, member_map: MemberMap | None,
               kinds: dict[str, list[str]]) -> EventColumns:
    """The incident's events when no agent log was given: what `load_captures` does with ``keyed``
    (each member's lives read from the wire, what reached it while it was down dropped, each
    MemberStart with its starting state, what a member received before a start moved to it, End),
    step by step, on the captured events' columns.  The loop over `Event` values (``bulk=False``) is
    the reference: `tests/test_bulk_convert.py` holds the two to the same bytes."""
    rows = captured.columns
    count = len(rows)
    # The times and captured times, copied at the first change (`queue_until`, an answered end of stream).
    ts, captured_flag, captured_ts = rows.ts, rows.captured, rows.captured_ts
    copied = False
    incoming = rows.dir == DIRECTIONS.index("in")
    consensus_out = (rows.dir == DIRECTIONS.index("out")) & (rows.channel == CHANNELS.index("consensus"))
    kept = np.ones(count, dtype=bool)
    extra: list[tuple[int, int, int, Event]] = []  # (ts, order group, position, event)
    capture_start = captured.first_ts_ns
    if directories:
        from recorder.capture.cluster_dir_import import member_of
        from recorder.capture.cluster_dir_import import member_start as build_member_start
    # The capture's rows come in time order, and a time only ever moves later (to a start, to the message
    # that answered an end of stream): what lies before a time is found in the rows before it.
    in_order = count < 2 or bool((rows.ts[1:] >= rows.ts[:-1]).all())
    # Each member's consensus messages, in row order (the rows grouped by member once).
    sent_rows = np.flatnonzero(consensus_out)
    sent_rows = sent_rows[stable_order(rows.node[sent_rows])]
    sent_nodes = rows.node[sent_rows]
    sent_at = np.flatnonzero(sent_nodes[1:] != sent_nodes[:-1]) + 1
    sent_by: dict[int, np.ndarray] = (dict(zip(sent_nodes[np.concatenate([[0], sent_at])].tolist(),
                                               np.split(sent_rows, sent_at), strict=True)) if len(sent_rows) else {})
    nothing = np.zeros(0, dtype=np.int64)

    def writable() -> None:
        nonlocal ts, captured_flag, captured_ts, copied
        if not copied:
            ts, captured_flag, captured_ts, copied = ts.copy(), captured_flag.copy(), captured_ts.copy(), True

    def before(at: int, side: str = "left") -> int:
        """How many rows may have a time before ``at`` (``side`` "right": at or before it)."""
        return int(np.searchsorted(rows.ts, at, side=side)) if in_order else count

    def first_sent_from(node: int, start: int) -> list[Event]:
        """The member's first consensus message from ``start`` on (all `own_words_on_wire` reads)."""
        mine = sent_by.get(node, nothing)
        found = mine[rows.ts[mine] >= start]
        return [rows.event(int(found[0]))] if len(found) else []

    def first_kept(node: int) -> int | None:
        """The member's first row still in (looked for a stretch at a time, from the start)."""
        start, step = 0, 4096
        while start < count:
            found = np.flatnonzero((rows.node[start:start + step] == node) & kept[start:start + step])
            if len(found):
                return start + int(found[0])
            start, step = start + step, step * 2
        return None

    def start_of(directory: Any, node: int, last_life: bool) -> int:
        """`_start_time` of a member without an agent log."""
        first = first_kept(node)
        firsts = []
        if first is not None:  # its earliest time: none of the rows after those of times up to its first row's
            limit = before(int(ts[first]), "right")
            firsts.append(int(ts[:limit][(rows.node[:limit] == node) & kept[:limit]].min()))
        firsts += [item[0] for item in extra if item[3].node == node]
        sent = sent_by.get(node, nothing)
        sent = sent[kept[sent]]
        first_sent = (rows.entries.types[rows.entry[sent[0]]], int(ts[sent[0]])) if len(sent) else None
        return _start_time_from(directory, capture_start, min(firsts, default=None), [], None, first_sent,
                                last_life=last_life)

    def queue_until(node: int, start: int, since: int | None = None) -> None:
        """`_queued_until_start` (looking at the rows that may be before ``start`` only)."""
        limit = before(start)
        when = ts[:limit]
        early = kept[:limit] & (rows.node[:limit] == node) & incoming[:limit] & (when < start)
        if since is not None:
            early &= when >= since
        early = np.flatnonzero(early)
        if len(early):
            writable()
            captured_ts[early] = ts[early]
            captured_flag[early] = True
            ts[early] = start

    # Each member's lives, from the wire; what reached it while it was down, dropped.
    restarts: list[Restart] = []
    mark_starts = {member_of(d): _mark_start(d) for d in directories}
    for member, alive in captured.liveness.items():
        found = wire_restarts(member, alive, ts[sent_by.get(member, nothing)], mark_starts.get(member))
        restarts += found.restarts
        load.notes += found.notes
    ends = _life_ends(restarts)
    restarted = {r.member for r in restarts}
    dropped: dict[int, int] = {}
    for member, spans in _down_spans(restarts, _first_heard(captured.liveness)).items():
        down = np.zeros(count, dtype=bool)
        for since, until in spans:
            down |= (ts >= since) & (ts < until)
        down &= incoming & (rows.node == member)
        if down.any():
            dropped[member] = int(np.count_nonzero(down))
            kept &= ~down
    load.notes += _dropped_notes(dropped)

    started: set[int] = set()
    if directories:
        from recorder.capture.starting_state import own_words_in_agent_log, own_words_on_wire
    for directory in directories:
        node = member_of(directory)
        at = start_of(directory, node, node not in restarted)
        end = next((t for t in ends.get(node, ()) if t > at), None)
        own = (own_words_on_wire(first_sent_from(node, at), node, at, end), own_words_in_agent_log([], node, at, end))
        recording, archive_notes = _log_recording(directory, kinds["archive-dir"])
        info = build_member_start(directory, cluster_members=load.cluster_members,
                                  as_of_ns=at if capture_start is not None else None, own=own,
                                  log_recording=recording)
        if info.node in started:
            raise DecodeError(f"a second cluster directory for member {info.node}", source=info.source)
        started.add(info.node)
        queue_until(info.node, at)
        extra.append((at, 0, info.node, Event(
            ts=at, node=info.node, dir="local", peer=None, channel="local", type="MemberStart",
            fields=_with_waits(info.fields, [], info.node),
            extra={"source": os.path.basename(info.source.rstrip("/")), "startingState": info.provenance})))
        load.inputs.append({"kind": "cluster-dir", "path": info.source, "node": info.node,
                            **({"archive": recording.source} if recording is not None else {})})
        load.notes += archive_notes + info.notes
    for restart in restarts:
        queue_until(restart.member, restart.restart_ns, since=restart.back_ns)
        for item in _lifecycle_events(restart, load.cluster_members, _capture_name(kinds)):
            item = _with_restart_state(item, first_sent_from(restart.member, item[0]), [], ends, [])
            extra.append((item[0], item[1], item[2], item[4]))
    _archive_dirs_noted(load, kinds["archive-dir"])
    if member_map is not None:
        for member in member_map.member_ids:
            if member not in started:
                at = start_of(None, member, member not in restarted)
                queue_until(member, at)
                extra.append((at, 0, member, Event(ts=at, node=member, dir="local", peer=None, channel="local",
                                                   type="MemberStart",
                                                   fields=_with_waits({"clusterMembers": member_map.text}, [], member))))
                load.notes.append(f"member {member}: no cluster directory given; it starts with an empty"
                                  " recording.log and node-state.dat")
            end = captured.end_of(member)
            if end is not None:
                extra.append((end, 3, member, Event(ts=end, node=member, dir="local", peer=None, channel="local",
                                                    type="End", fields={})))
    # What each member sent on the consensus channel, in time order, with its type (`_typed_sends`).
    # (A member's consensus messages keep their captured times: in row order, they are in time order.)
    type_names = np.array(rows.entries.types, dtype=object)
    if in_order:
        sends = {member: (ts[mine].tolist(), type_names[rows.entry[mine]])
                 for member, mine in ((member, mine[kept[mine]]) for member, mine in sent_by.items()) if len(mine)}
    else:
        sent = np.flatnonzero(kept & consensus_out)
        sent = sent[np.lexsort((ts[sent], rows.node[sent]))]
        bounds = np.flatnonzero(np.diff(rows.node[sent])) + 1
        sends = {int(rows.node[mine[0]]): (ts[mine].tolist(), type_names[rows.entry[mine]])
                 for mine in np.split(sent, bounds) if len(mine)}
    # `with_shutdown_evidence` and `with_leader_join_evidence`, as `load_captures` applies them.
    # (What follows asks for the rows of a dozen types: each row's type is looked up once.)
    all_rows, rows = rows, _TypedRows(rows)
    led_by = sorted(first_of_each_sent(rows, kept, "NewLeadershipTerm"), key=lambda event: event.ts)
    # (Each distinct message once, at its first sight: a resend says nothing more of a shutdown.)
    terminations = rows.rows_of_type("TerminationPosition")
    wire = (sorted((event for name in SHUTDOWN_TYPES for direction in ("in", "out")
                    for event in first_of_each_sent(rows, kept, name, direction)), key=lambda event: event.ts)
            if np.any(kept[terminations] & (rows.dir[terminations] == DIRECTIONS.index("out"))) else [])
    extra = [(item[0], item[1], item[2], item[4]) for item in with_leader_join_evidence(with_shutdown_evidence(
        [(*item[:3], 0, item[3]) for item in extra], wire), joins_over(*first_sent_in_columns(rows, kept, ts, led_by)))]
    if captured.consensus_publications:
        # `with_publication_evidence`, as `load_captures` applies it: its new events after the others.
        extra = [(item[0], item[1], item[2], item[4]) for item in with_publication_evidence(
            [(*item[:3], 0, item[3]) for item in extra], captured.consensus_publications, group=1,
            log_publications=captured.log_publications, log_images=captured.log_images)]
        leaders = leaders_of_sessions(led_by)
        appended = append_rows_in_columns(rows, kept)
        catchups = catchup_positions(rows.event(int(r)) for r in rows.rows_of_type("CatchupPosition") if kept[r])
        extra = [(item[0], item[1], item[2], item[4]) for item in with_follower_join_evidence(
            [(*item[:3], 0, item[3]) for item in extra], leaders, appended,
            {member: times for member, (times, _) in sends.items()}, positions=appended, catchups=catchups)]
        extra = [(item[0], item[1], item[2], item[4]) for item in with_replication_evidence(
            [(*item[:3], 0, item[3]) for item in extra], appended,
            terms_of_sessions(led_by))]
    # `with_log_replay_evidence` and `_end_of_stream_answered`, as `load_captures` applies them.
    extra = [(item[0], item[1], item[2], item[4]) for item in with_log_replay_evidence(
        [(*item[:3], 0, item[3]) for item in extra], replay_bounds(sends))]
    ends = [int(r) for r in rows.rows_of_type("LogEndOfStream") if kept[r]]
    if ends:
        lives_end = {}
        for item in extra:
            if item[3].type in ("MemberCrash", "MemberStop", "End"):
                lives_end.setdefault(item[3].node, []).append(item[0])
        for row, new in zip(ends, end_of_stream_times([(int(rows.node[r]), int(ts[r])) for r in ends], sends,
                                                       {m: sorted(t) for m, t in lives_end.items()}), strict=True):
            if new is None:
                kept[row] = False
            elif new is not True:
                writable()
                captured_ts[row], captured_flag[row], ts[row] = ts[row], True, new
    rows = all_rows
    moved = rows.replaced(ts=ts, captured=captured_flag, captured_ts=captured_ts)
    others = EventColumns.from_events([item[3] for item in extra], entries=rows.entries)
    order = _assembled_order(rows.ts, ts, kept, np.array([item[0] for item in extra], dtype=np.int64),
                             np.array([item[1] for item in extra], dtype=np.int64),
                             np.array([item[2] for item in extra], dtype=np.int64), in_order=in_order)
    return EventColumns.gathered([moved, others], order)


class _TypedRows:
    """A capture's rows (`formats.event_columns.EventColumns`, whose attributes it gives as they are) with
    each row's type as a small number, looked up once: `rows_of_type` is then a comparison of those, where
    `EventColumns.rows_of_type` looks every row's type up again."""

    __slots__ = ("_rows", "_number", "_codes")

    def __init__(self, rows: EventColumns) -> None:
        self._rows = rows
        self._number: dict[str, int] = {}
        types = rows.entries.types
        codes = np.fromiter((self._number.setdefault(name, len(self._number)) for name in types), np.int32, len(types))
        self._codes = codes.astype(np.int16 if len(self._number) < 1 << 15 else np.int32)[rows.entry]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rows, name)

    def rows_of_type(self, *names: str) -> np.ndarray:
        """`EventColumns.rows_of_type`: the rows whose type is one of ``names``, in order."""
        numbers = [self._number[name] for name in set(names) if name in self._number]
        if len(numbers) == 1:
            return np.flatnonzero(self._codes == numbers[0])
        return np.flatnonzero(np.isin(self._codes, numbers))


def _assembled_order(captured_ts: np.ndarray, ts: np.ndarray, kept: np.ndarray, when: np.ndarray, group: np.ndarray,
                     position: np.ndarray, *, in_order: bool | None = None) -> np.ndarray:
    """`_assembled`'s order: the kept rows (times ``ts``, order group 1, their own row as position) and then
    the extra events (``when``, ``group``, ``position``; numbered after the rows) by (time, group, position),
    ties in that numbering, as ``np.lexsort`` over them all gives it.

    The captured rows come sorted by their times (``captured_ts``; ``in_order`` if the caller has checked it):
    those kept whose time did not move are in order already, so only the few others (moved to a start, an
    end of stream answered) and the extra events are sorted, and each is put in among them where its time,
    group and position say."""
    count = len(ts)
    if in_order is None:
        in_order = count < 2 or bool((captured_ts[1:] >= captured_ts[:-1]).all())
    if not in_order:  # (never, from `BulkDecoder.finish`)
        taken = np.flatnonzero(kept)
        index = np.concatenate([taken, count + np.arange(len(when), dtype=np.int64)])
        keys = (np.concatenate([taken, position]), np.concatenate([np.ones(len(taken), np.int64), group]),
                np.concatenate([ts[taken], when]))
        return index[np.lexsort(keys)]
    staying = kept & (ts == captured_ts)
    moved = np.flatnonzero(kept & ~staying)
    staying = np.flatnonzero(staying)
    index = np.concatenate([moved, count + np.arange(len(when), dtype=np.int64)])
    when = np.concatenate([ts[moved], when])
    group = np.concatenate([np.ones(len(moved), np.int64), group])
    position = np.concatenate([moved, position])
    order = np.lexsort((position, group, when))
    index, when, group, position = index[order], when[order], group[order], position[order]
    # The rows that stay before each: those of earlier times; at its time, those of group 1 (all of them)
    # before a later group, and before one of group 1 those at a smaller position (the row) or, a tie, an
    # earlier number (the row, always before the extra events).
    low = np.searchsorted(captured_ts, when, side="left")
    high = np.searchsorted(captured_ts, when, side="right")
    bound = np.where(group < 1, low, np.where(group > 1, high, np.clip(position + 1, low, high)))
    places = np.searchsorted(staying, bound) + np.arange(len(index))
    out = np.empty(len(staying) + len(index), dtype=np.int64)
    rest = np.ones(len(out), dtype=bool)
    rest[places] = False
    out[rest] = staying
    out[places] = index
    return out


def _restarts(parsed: Any, keyed: list, liveness: WireLiveness | None) -> tuple[list[Restart], list[str]]:
    """A member's JVM restarts where its agent log starts a new clock (a second ``log started`` line).

    The previous life ended with ``MemberStop`` when its log shows the consensus module reaching
    CLOSED, else with ``MemberCrash``, just after the last thing known of it (its last log line, or
    the last message the capture saw it send): a crash may have come up to a heartbeat interval
    later, which a replay misses, rather than sending what the recording does not show.  The new
    life is a ``MemberStart`` where its election left INIT (its INIT -> CANVASS line, else its
    NEW_ELECTION "node started" line).  What the wire adds (ICMP
    answers in between, when the member was heard again) goes into the evidence.
    """
    out: list[Restart] = []
    notes: list[str] = []
    node = parsed.node
    name = os.path.basename(parsed.source)
    lives = [segment for segment in parsed.segments if segment.records]
    for previous, segment in zip(lives, lives[1:], strict=False):
        offset = segment.alignment.offset_ns if segment.alignment is not None else 0
        before = previous.alignment.offset_ns if previous.alignment is not None else 0
        mine = [r for r in segment.records if r.fields.get("memberId") == node]
        # Its election left INIT in its first duty cycle (what the model does at its start), logged
        # somewhat after NEW_ELECTION "node started".
        left_init = [r for r in mine if r.event == "ELECTION_STATE_CHANGE" and r.fields.get("from") == "INIT"]
        started = [r for r in mine if r.event == "NEW_ELECTION" and r.fields.get("reason") == "node started"]
        if left_init:
            restart, why = (left_init[0].ts_ns + offset,
                            f"its INIT -> CANVASS line ({name} line {left_init[0].line_number})")
        elif started:
            restart, why = started[0].ts_ns + offset, f"its NEW_ELECTION 'node started' line ({name} line {started[0].line_number})"
        elif segment.started is not None:
            restart, why = segment.started.ts_ns + offset, f"a new 'log started' line in {name} (a new JVM)"
        else:
            first = mine[0] if mine else segment.records[0]
            restart, why = first.ts_ns + offset, f"its first line after a new clock in {name}"
        last_line = previous.records[-1].ts_ns + before
        closed = [r for r in previous.records
                  if r.event == "STATE_CHANGE" and r.fields.get("to") == "CLOSED" and r.fields.get("memberId") == node]
        # What the old process did: before the new JVM began (its 'log started' line), else before its election.
        limit = segment.started.ts_ns + offset if segment.started is not None else restart
        sent = [item[0] for item in keyed
                if item[4].node == node and item[4].dir == "out" and item[0] < limit]
        heard = [end for _, end in (liveness.heard if liveness is not None else ()) if end < limit]
        end = max([last_line] + sent[-1:] + heard[-1:] + [r.ts_ns + before for r in closed]) + 1
        if end >= restart:
            notes.append(f"{parsed.source}: member {node} restarts at {restart} but was still seen at {end - 1}:"
                         " no stop or crash added")
            continue
        facts, back = wire_facts(liveness, end, restart)
        if closed:
            kind, how = "MemberStop", f"its consensus module reached CLOSED ({name} line {closed[-1].line_number}): a clean stop"
        else:
            kind, how = "MemberCrash", f"its log ends without its consensus module closing ({name}): killed"
        new_clock = f"a new 'log started' line in {name} (a new JVM)" if segment.started is not None else None
        out.append(Restart(node, end, kind, (how, *facts), back if back is not None else restart, restart,
                           tuple(w for w in (new_clock, f"its election began at {why}") if w)))
        notes.append(f"{parsed.source}: member {node} {'stopped' if closed else 'crashed'} (last seen at {end - 1})"
                     f" and started again at {restart} (a new 'log started' clock)")
    return out, notes


def _final_stop(parsed: Any, ends: Sequence[int]) -> Event | None:
    """The clean stop that ends a member's last life, where its agent log shows its consensus module
    reaching CLOSED in that life (a restart's stop is `_restarts`'s): a ``MemberStop`` just after the
    CLOSED line, so that nothing reaching the member afterwards is handled by a module that was gone.
    h_five_members_leader_kill: at the SIGTERM that ends the capture, leader 0's module was CLOSED at
    19:25:48.6526 (agent log) when member 4's CanvassPosition of 48.7076 reached it; the model, still
    ACTIVE, answered with a NewLeadershipTerm the real one never sent."""
    lives = [segment for segment in parsed.segments if segment.records]
    if not lives:
        return None
    last = lives[-1]
    offset = last.alignment.offset_ns if last.alignment is not None else 0
    node = parsed.node
    closed = [r for r in last.records
              if r.event == "STATE_CHANGE" and r.fields.get("to") == "CLOSED" and r.fields.get("memberId") == node]
    if not closed:
        return None
    at = closed[-1].ts_ns + offset + 1
    if any(end >= at for end in ends):
        return None  # a death `_restarts` already found there
    name = os.path.basename(parsed.source)
    return Event(ts=at, node=node, dir="local", peer=None, channel="local", type="MemberStop", fields={},
                 extra={"source": name, "evidence": [
                     f"its consensus module reached CLOSED ({name} line {closed[-1].line_number}): a clean stop"]})


def _lifecycle_events(restart: Restart, cluster_members: str | None, source: str) -> list[tuple]:
    """A restart as keyed events: the death, and the new life's MemberStart (clusterMembers only, so
    that the replay keeps the files the member itself wrote), each with its evidence."""
    node = restart.member
    fields = {"clusterMembers": cluster_members} if cluster_members else {}
    death = Event(ts=restart.end_ns, node=node, dir="local", peer=None, channel="local", type=restart.kind,
                  fields={}, extra={"source": source, "evidence": list(restart.end_evidence)})
    start = Event(ts=restart.restart_ns, node=node, dir="local", peer=None, channel="local", type="MemberStart",
                  fields=fields, extra={"source": source, "restart": True, "evidence": list(restart.start_evidence)})
    return [(restart.end_ns, 3, node, 0, death), (restart.restart_ns, 0, node, 0, start)]


def _first_heard(liveness: dict[int, WireLiveness]) -> dict[int, tuple[int, int]]:
    """Members the capture shows answered by ICMP port unreachable before it first heard them: (the
    first such answer, when it was first heard)."""
    return {member: (alive.unreachable[0], alive.heard[0][0]) for member, alive in liveness.items()
            if alive.heard and alive.unreachable and alive.unreachable[0] < alive.heard[0][0]}


def _down_spans(restarts: Sequence[Restart], first_heard: dict[int, tuple[int, int]]) -> dict[int, list[tuple[int, int]]]:
    """Per member, the spans [from, to) in which what reached it was not received: from each death to
    its new process being heard again, and before its first life from the first ICMP port unreachable
    answer to when it was first heard."""
    down: dict[int, list[tuple[int, int]]] = {}
    for restart in restarts:
        down.setdefault(restart.member, []).append((restart.end_ns, restart.back_ns))
    for member, (since, heard) in first_heard.items():
        down.setdefault(member, []).append((since, heard))
    return down


def _dropped_notes(dropped: dict[int, int]) -> list[str]:
    return [f"member {member}: {count} message(s) sent to it while its process was down were not delivered"
            " (dropped)" for member, count in sorted(dropped.items())]


def _not_delivered_while_down(keyed: list, restarts: Sequence[Restart], first_heard: dict[int, tuple[int, int]]
                              ) -> tuple[list, list[str]]:
    """What reached a member while its process was down was not received: ``in`` events in its
    `_down_spans` are dropped; those from its new process being heard again to its new election are
    read by it at the start (`_queued_until_start`)."""
    down = _down_spans(restarts, first_heard)
    dropped: dict[int, int] = {}
    out = []
    for item in keyed:
        event = item[4]
        if event.dir == "in" and any(a <= item[0] < b for a, b in down.get(event.node, ())):
            dropped[event.node] = dropped.get(event.node, 0) + 1
            continue
        out.append(item)
    return out, _dropped_notes(dropped)


def _life_ends(restarts: Sequence[Restart]) -> dict[int, list[int]]:
    """Each member's crash and stop times, in order."""
    ends: dict[int, list[int]] = {}
    for restart in restarts:
        ends.setdefault(restart.member, []).append(restart.end_ns)
    return {node: sorted(times) for node, times in ends.items()}


def _with_restart_state(item: tuple, wire: list[Event], logged: list[Event], ends: dict[int, list[int]],
                        logs: list) -> tuple:
    """A restart's MemberStart with the append position the member itself gave at that start (its first
    CanvassPosition, its INIT -> CANVASS line) and where it came from, and the driver waits its new
    process's agent log shows; the rest of its disk is what its previous life in the replay left (the
    engine's rule for a restart)."""
    from recorder.capture.starting_state import EXACT, Known, own_words_in_agent_log, own_words_on_wire

    event = item[4]
    if event.type != "MemberStart":
        return item
    waited = _with_waits(dict(event.fields), logs, event.node, at=event.ts)
    if waited != event.fields:
        event = dataclasses.replace(event, fields=waited)
        item = (*item[:4], event)
    end = next((t for t in ends.get(event.node, ()) if t > event.ts), None)
    own = [w for w in (own_words_on_wire(wire, event.node, event.ts, end),
                       own_words_in_agent_log(logged, event.node, event.ts, end)) if w is not None]
    if not own:
        return item
    first = own[0]
    provenance = {"appendPosition": Known(first.append_position, first.source, EXACT,
                                          f"{first.where}: {first.says()}").to_json()}
    fields = {**event.fields, "appendPosition": first.append_position}
    extra = {**(event.extra or {}), "startingState": provenance}
    return (*item[:4], dataclasses.replace(event, fields=fields, extra=extra))


def _archive_dirs_noted(load: CaptureLoad, archives: Sequence[str]) -> None:
    """The archive dirs given, as inputs; a note for each that no cluster dir given used."""
    used = {os.path.realpath(i["archive"]) for i in load.inputs if i.get("archive")}
    for archive in archives:
        if os.path.realpath(archive) not in used:
            load.notes.append(f"{archive}: an archive dir next to or inside no cluster dir given; not read (give the"
                              " member's cluster dir beside it)")
        load.inputs.append({"kind": "archive-dir", "path": archive})


def _log_recording(directory: Any, given: Sequence[str]) -> tuple[Any, list[str]]:
    """The cluster log's recording in the member's archive catalog: an archive dir given as an input
    that lies next to or inside the cluster dir, else where Aeron lays the archive out
    (`recorder.cluster_dir.find_member_archive`); and what could not be read of it."""
    from recorder.capture.starting_state import LogRecording
    from recorder.cluster_dir import find_member_archive, load_archive_catalog

    here = os.path.realpath(directory.path)
    archive = next((a for a in given if os.path.dirname(os.path.realpath(a)) in (here, os.path.dirname(here))),
                   None) or find_member_archive(directory.path)
    if archive is None:
        return None, []
    try:
        catalog = load_archive_catalog(archive)
    except (DecodeError, OSError) as error:
        return None, [f"{archive}: the archive catalog cannot be read ({error}); not used"]
    notes = [f"{archive}: {catalog.problem}; the recordings before it are used"] if catalog.problem else []
    recording = LogRecording.of(catalog, str(archive))
    if recording is None:
        notes.append(f"{archive}: the archive catalog holds no cluster log recording")
    return recording, notes


def _with_waits(fields: dict[str, Any], logs: list, node: int, at: int | None = None) -> dict[str, Any]:
    """A MemberStart's fields with the driver waits its agent log shows, if any: of the log's first clock
    segment, or (``at``, a restart) of the segment that life's process wrote."""
    for parsed in logs:
        if parsed.node == node and parsed.segments:
            segment = parsed.segments[0] if at is None else _segment_at(parsed, at)
            if segment is None:
                return fields
            waits = {"logPublicationWaitsNs": segment.log_publication_waits, "logImageWaitsNs": segment.log_image_waits,
                     "snapshotDurationsNs": segment.snapshot_durations, "leaderJoinWaitsNs": segment.leader_join_waits,
                     "logReplayDurationsNs": segment.log_replay_durations,
                     "logReplayStartWaitsNs": segment.log_replay_start_waits,
                     "catchupReplayWaitsNs": segment.catchup_replay_waits}
            fields = {**fields, **{key: list(values) for key, values in waits.items() if values}}
            if segment.aborts:
                offset = segment.alignment.offset_ns if segment.alignment is not None else 0
                fields["abortsNs"] = [at + offset for at in segment.aborts]
            if segment.follower_joins:
                offset = segment.alignment.offset_ns if segment.alignment is not None else 0
                fields["followerJoinsNs"] = [[session] + [None if at is None else at + offset for at in times]
                                             for session, *times in segment.follower_joins]
            if segment.shutdown_snapshot is not None:
                fields["shutdownSnapshot"] = segment.shutdown_snapshot
            return fields
    return fields


def _segment_at(parsed: Any, ts: int) -> Any:
    """The clock segment (one JVM's life) of an agent log that was running at ``ts`` (capture time)."""
    found = None
    for segment in parsed.segments:
        if not segment.records:
            continue
        offset = segment.alignment.offset_ns if segment.alignment is not None else 0
        first = (segment.started.ts_ns if segment.started is not None else segment.records[0].ts_ns) + offset
        if first <= ts:
            found = segment
    return found


def _in_receipt_order(keyed: list, driver_stalls: Mapping[int, Sequence[tuple[int, int]]] | None = None) -> list:
    """Captured messages a member's agent log shows it handled in another order get their times swapped,
    and those that waited in a stalled driver and were polled long after it, their receipt lines' times."""
    from recorder.capture.agent_log_import import late_receipts, receipt_order

    out = list(keyed)
    for node in sorted({item[4].node for item in keyed if item[1] == 2}):
        received = [(k, item) for k, item in enumerate(keyed) if item[1] == 1 and item[4].node == node
                    and item[4].dir == "in"]
        logged = [item[4] for item in keyed if item[1] == 2 and item[4].node == node]
        moved = receipt_order([item[4] for _, item in received], logged)
        for index, ts in moved.items():
            k, item = received[index]
            event = dataclasses.replace(item[4], ts=ts, extra={**(item[4].extra or {}), "capturedTs": item[4].ts})
            out[k] = (ts, *item[1:4], event)
        stalls = (driver_stalls or {}).get(node)
        if stalls:
            received = [(k, out[k]) for k, _ in received]
            for index, ts in late_receipts([item[4] for _, item in received], logged, stalls).items():
                k, item = received[index]
                extra = {**(item[4].extra or {}), "receivedLate": "polled as its agent log's receipt line shows"}
                extra.setdefault("capturedTs", item[4].ts)
                out[k] = (ts, *item[1:4], dataclasses.replace(item[4], ts=ts, extra=extra))
    return out


def _typed_sends(sent: list[Event]) -> dict[int, tuple[list[int], list[str]]]:
    """member → (when it sent each of ``sent``, in order; each one's type)."""
    sends: dict[int, tuple[list[int], list[str]]] = {}
    for event in sorted(sent, key=lambda e: e.ts):
        times, types = sends.setdefault(event.node, ([], []))
        times.append(event.ts)
        types.append(event.type)
    return sends


def _end_of_stream_answered(keyed: list, sends: dict[int, tuple[list[int], list[str]]], skip: set[int]) -> list:
    """Each wire ``LogEndOfStream`` of a member without an agent log moved to the CanvassPosition that
    answered it, or dropped when the member sent nothing more (`recorder.capture.end_of_stream`)."""
    ends = [i for i, item in enumerate(keyed) if item[1] == 1 and item[4].type == "LogEndOfStream"
            and item[4].node not in skip]
    if not ends:
        return keyed
    lives_end: dict[int, list[int]] = {}
    for item in keyed:
        if item[4].type in ("MemberCrash", "MemberStop", "End") and item[4].dir == "local":
            lives_end.setdefault(item[4].node, []).append(item[0])
    found = end_of_stream_times([(keyed[i][4].node, keyed[i][0]) for i in ends], sends,
                                {m: sorted(t) for m, t in lives_end.items()})
    dropped = set()
    out = list(keyed)
    for i, new in zip(ends, found, strict=True):
        if new is None:
            dropped.add(i)
        elif new is not True:
            event = out[i][4]
            out[i] = (new, *out[i][1:4], dataclasses.replace(event, ts=new, extra={**(event.extra or {}),
                                                                                   "capturedTs": event.ts}))
    return [item for i, item in enumerate(out) if i not in dropped]


def _queued_until_start(keyed: list, node: int, start: int, *, since: int | None = None) -> list:
    """Messages a member received before its start (from ``since``, for a restart: when its new
    process was receiving again) are read by it at the start (kept in the image); their capture time
    stays in ``extra.capturedTs``."""
    out = []
    for item in keyed:
        event = item[4]
        if event.node == node and event.dir == "in" and item[0] < start and (since is None or item[0] >= since):
            moved = dataclasses.replace(event, ts=start, extra={**(event.extra or {}), "capturedTs": event.ts})
            item = (start, *item[1:4], moved)
        out.append(item)
    return out


def _mark_start(directory: Any) -> int | None:
    """When the consensus module of the directory's last life started (cluster-mark.dat), in ns."""
    mark = directory.mark_files.get("cluster-mark.dat")
    return mark.header.start_timestamp * 1_000_000 if mark is not None and mark.header.start_timestamp > 0 else None


def _capture_name(kinds: dict[str, list[str]]) -> str:
    captures = kinds["pcap"] + kinds["recording"]
    return os.path.basename(captures[0]) if len(captures) == 1 else "the captures"


def _start_time(directory: Any, node: int | None, capture_start: int | None, keyed: list, *,
                last_life: bool = True) -> int:
    """When a member's replay begins (its MemberStart), and so the moment its directory is taken back to
    (`_start_time_from`, from what ``keyed`` holds of the member)."""
    mine = [item for item in keyed if item[4].node == node]
    first = min((item[0] for item in mine), default=None)
    # The election leaves INIT for CANVASS in its first duty cycle, which the model runs at its start;
    # the real one logged that line up to 0.2 s after its NEW_ELECTION "node started" (j_…'s member 1).
    started = [item[0] for item in mine if item[4].type == "ElectionStateChange"
               and item[4].fields.get("from") == "INIT"][:1]
    if not started:
        started = [item[0] for item in mine
                   if item[4].type == "NewElection" and item[4].fields.get("reason") == "node started"]
    # What the member received before its consensus module started waited in the image for it
    # (`_queued_until_start`), so only what it did itself can start the replay earlier.
    # (Its agent log's own lines may come earlier: they are observations, not inputs.)
    own = min((item[0] for item in mine if item[4].dir != "in" and item[1] != 2), default=None) if started else None
    sent = [item for item in mine if item[4].dir == "out" and item[4].channel == "consensus"]
    first_sent = (sent[0][4].type, sent[0][0]) if sent else None
    return _start_time_from(directory, capture_start, first, started, own, first_sent, last_life=last_life)


def _start_time_from(directory: Any, capture_start: int | None, first: int | None, started: list[int],
                     own: int | None, first_sent: tuple[str, int] | None, *, last_life: bool = True) -> int:
    """When a member's replay begins, from its first event (``first``), when its agent log shows its
    election starting (``started``), its first event other than a message it received (``own``) and the
    type and time of its first consensus message (``first_sent``).

    Where the member's agent log shows its election starting, the moment it left INIT for CANVASS
    (else its NEW_ELECTION "node started" line), or the first message it sent, if that is earlier (a
    replay begins before everything the member did).  Else, when its first consensus message is a
    CanvassPosition sent well after the capture began, that moment (its election began there; the mark
    file's start time is its consensus module's, up to seconds earlier: 2.1 s for j_…'s member 1).
    Else, when its mark file says it started during the capture, that start time; else the capture's
    first packet (or the member's first event if earlier): it was already running.
    """
    if started:
        return min(started) if own is None else min(min(started), own)
    # Without its agent log: where the capture shows its election beginning, its first consensus
    # message, a CanvassPosition (an election always begins by canvassing), sent well after the capture
    # began (a member already canvassing when it began would have sent one within a status interval).
    if (first_sent is not None and first_sent[0] == "CanvassPosition" and capture_start is not None
            and first_sent[1] - capture_start >= ALREADY_RUNNING_NS):
        return first_sent[1]
    # The mark file holds its last life's start: no help for the first when the member restarted.
    start_ns = _mark_start(directory) if directory is not None and last_life else None
    if start_ns is not None and (capture_start is None or start_ns >= capture_start):
        return start_ns if first is None else min(start_ns, first)
    candidates = [t for t in (capture_start, first) if t is not None]
    if candidates:
        return min(candidates)
    return start_ns if start_ns is not None else 0
