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
4. A member whose agent log starts a second clock (a new ``log started`` line: a new JVM) crashed or
   stopped and started again: ``MemberCrash``/``MemberStop`` just after the last thing known of its
   first life, then a ``MemberStart`` (see `_restarts`).
5. Each member that the captures cover ends with an ``End`` event at the end of its host's capture.

Order: by ``ts``; at equal times MemberStart first, then captured messages (in capture order), then
agent-log observations, then End.  Everything here is deterministic.

Modules: `datagrams` (the shared datagram decoder), `bulk` (its steady traffic decoded as arrays),
`members` (endpoints and inference), `pcap_import`, `agent_log_import`, `cluster_dir_import`, `align`
(clock alignment).  This package does file I/O (it is part of `recorder`); the decoding itself is in
pure functions beside it.  The agent-log and cluster-directory readers are imported where such an
input is read: a conversion of captures alone starts without them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from formats.errors import DecodeError
from formats.event_columns import EventColumns
from formats.events import DIRECTIONS, Event
from recorder.capture.datagrams import DEFAULT_STREAMS, Streams
from recorder.capture.members import MemberMap
from recorder.capture.pcap_import import import_pcaps, sniff_capture
from recorder.version_evidence import agent_log_evidence, wire_evidence

FORMATS = ("auto", "pcap", "pcapng", "agent-log", "cluster-dir", "recording")


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
    """"pcap", "pcapng", "agent-log", "cluster-dir", "recording" or None, from what ``path`` holds."""
    if os.path.isdir(path):
        from recorder.capture.cluster_dir_import import is_cluster_dir

        return "cluster-dir" if is_cluster_dir(path) else None
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
    kinds: dict[str, list[str]] = {"pcap": [], "agent-log": [], "cluster-dir": [], "recording": []}
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
        load.columns = _assembled(load, captured, directories, member_map)
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
        keyed = _in_receipt_order(keyed)
    capture_start = captured.first_ts_ns if captured is not None else None
    started: set[int] = set()
    for directory in directories:
        node = member_of(directory)
        ts = _start_time(directory, node, capture_start, keyed)
        info = build_member_start(directory, cluster_members=load.cluster_members,
                                  as_of_ns=ts if capture_start is not None else None)
        if info.node in started:
            raise DecodeError(f"a second cluster directory for member {info.node}", source=info.source)
        started.add(info.node)
        keyed = _queued_until_start(keyed, info.node, ts)
        keyed.append((ts, 0, info.node, 0, Event(ts=ts, node=info.node, dir="local", peer=None, channel="local",
                                                type="MemberStart", fields=_with_waits(info.fields, logs, info.node),
                                                extra={"source": os.path.basename(info.source.rstrip("/"))})))
        load.inputs.append({"kind": "cluster-dir", "path": info.source, "node": info.node})
        load.notes += info.notes

    for parsed in logs:
        restarts, notes = _restarts(parsed, keyed, load.cluster_members)
        keyed += restarts
        load.notes += notes

    if captured is not None and member_map is not None:
        for member in member_map.member_ids:
            if member not in started:
                start = _start_time(None, member, capture_start, keyed)
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


def _assembled(load: CaptureLoad, captured: Any, directories: list, member_map: MemberMap | None) -> EventColumns:
    """The incident's events when no agent log was given: what the loop over ``keyed`` in
    `load_captures` does (each member's MemberStart, messages it received before it started moved
    to its start, End), done on the captured events' columns."""
    rows = captured.columns
    ts = rows.ts.copy()
    captured_flag = rows.captured.copy()
    captured_ts = rows.captured_ts.copy()
    incoming = rows.dir == DIRECTIONS.index("in")
    extra: list[tuple[int, int, int, Event]] = []  # (ts, order group, position, event)
    capture_start = captured.first_ts_ns

    def start_of(directory: Any, node: int) -> int:
        mine = rows.node == node
        firsts = [int(ts[mine].min())] if mine.any() else []
        firsts += [item[0] for item in extra if item[3].node == node]
        return _start_time_from(directory, capture_start, min(firsts, default=None), [], None)

    def queue_until(node: int, start: int) -> None:
        early = (rows.node == node) & incoming & (ts < start)
        captured_ts[early] = ts[early]
        captured_flag[early] = True
        ts[early] = start

    started: set[int] = set()
    if directories:
        from recorder.capture.cluster_dir_import import member_of
        from recorder.capture.cluster_dir_import import member_start as build_member_start
    for directory in directories:
        node = member_of(directory)
        at = start_of(directory, node)
        info = build_member_start(directory, cluster_members=load.cluster_members,
                                  as_of_ns=at if capture_start is not None else None)
        if info.node in started:
            raise DecodeError(f"a second cluster directory for member {info.node}", source=info.source)
        started.add(info.node)
        queue_until(info.node, at)
        extra.append((at, 0, info.node, Event(ts=at, node=info.node, dir="local", peer=None, channel="local",
                                              type="MemberStart", fields=_with_waits(info.fields, [], info.node),
                                              extra={"source": os.path.basename(info.source.rstrip("/"))})))
        load.inputs.append({"kind": "cluster-dir", "path": info.source, "node": info.node})
        load.notes += info.notes
    if member_map is not None:
        for member in member_map.member_ids:
            if member not in started:
                at = start_of(None, member)
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
    moved = rows.replaced(ts=ts, captured=captured_flag, captured_ts=captured_ts)
    others = EventColumns.from_events([item[3] for item in extra], entries=rows.entries)
    count = len(rows)
    when = np.concatenate([ts, np.array([item[0] for item in extra], dtype=np.int64)])
    group = np.concatenate([np.ones(count, np.int64), np.array([item[1] for item in extra], dtype=np.int64)])
    position = np.concatenate([np.arange(count), np.array([item[2] for item in extra], dtype=np.int64)])
    order = np.lexsort((position, group, when))
    del when, group, position
    return EventColumns.gathered([moved, others], order)


def _restarts(parsed: Any, keyed: list, cluster_members: str | None) -> tuple[list, list[str]]:
    """A member's JVM restarts where its agent log starts a new clock (a second ``log started`` line).

    The previous life ended with ``MemberStop`` when its log shows the consensus module reaching
    CLOSED, else with ``MemberCrash``, just after the last thing known of it (its last log line, or
    the last message the capture saw it send): a crash may have come up to a heartbeat interval
    later, which a replay misses, rather than sending what the recording does not show.  The new
    life is a ``MemberStart`` at its NEW_ELECTION "node started" line, giving only clusterMembers,
    so that the replay keeps the files the member itself wrote (the engine's rule for a restart).
    """
    out: list = []
    notes: list[str] = []
    node = parsed.node
    lives = [segment for segment in parsed.segments if segment.records]
    for previous, segment in zip(lives, lives[1:], strict=False):
        offset = segment.alignment.offset_ns if segment.alignment is not None else 0
        before = previous.alignment.offset_ns if previous.alignment is not None else 0
        mine = [r for r in segment.records if r.fields.get("memberId") == node]
        started = [r.ts_ns + offset for r in mine if r.event == "NEW_ELECTION" and r.fields.get("reason") == "node started"]
        if segment.started is not None:
            restart = started[0] if started else segment.started.ts_ns + offset
        else:
            restart = started[0] if started else mine[0].ts_ns + offset if mine else segment.records[0].ts_ns + offset
        last_line = previous.records[-1].ts_ns + before
        closed = [r.ts_ns + before for r in previous.records
                  if r.event == "STATE_CHANGE" and r.fields.get("to") == "CLOSED" and r.fields.get("memberId") == node]
        sent = [item[0] for item in keyed
                if item[4].node == node and item[4].dir == "out" and item[0] < restart]
        end = max([last_line] + sent[-1:] + closed) + 1
        if end >= restart:
            notes.append(f"{parsed.source}: member {node} restarts at {restart} but was still seen at {end - 1}:"
                         " no stop or crash added")
            continue
        kind = "MemberStop" if closed else "MemberCrash"
        out.append((end, 3, node, 0, Event(ts=end, node=node, dir="local", peer=None, channel="local", type=kind,
                                          fields={}, extra={"source": os.path.basename(parsed.source)})))
        fields = {"clusterMembers": cluster_members} if cluster_members else {}
        out.append((restart, 0, node, 0, Event(ts=restart, node=node, dir="local", peer=None, channel="local",
                                              type="MemberStart", fields=fields,
                                              extra={"source": os.path.basename(parsed.source), "restart": True})))
        notes.append(f"{parsed.source}: member {node} {'stopped' if closed else 'crashed'} (last seen at {end - 1})"
                     f" and started again at {restart} (a new 'log started' clock)")
    return out, notes


def _with_waits(fields: dict[str, Any], logs: list, node: int) -> dict[str, Any]:
    """A MemberStart's fields with the driver waits its agent log shows (first clock segment), if any."""
    for parsed in logs:
        if parsed.node == node and parsed.segments:
            first = parsed.segments[0]
            waits = {"logPublicationWaitsNs": first.log_publication_waits, "logImageWaitsNs": first.log_image_waits,
                     "snapshotDurationsNs": first.snapshot_durations}
            fields = {**fields, **{key: list(values) for key, values in waits.items() if values}}
            if first.shutdown_snapshot is not None:
                fields["shutdownSnapshot"] = first.shutdown_snapshot
            return fields
    return fields


def _in_receipt_order(keyed: list) -> list:
    """Captured messages a member's agent log shows it handled in another order get their times swapped."""
    from recorder.capture.agent_log_import import receipt_order

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
    return out


def _queued_until_start(keyed: list, node: int, start: int) -> list:
    """Messages a member received before its start are read by it at the start (kept in the image);
    their capture time stays in ``extra.capturedTs``."""
    out = []
    for item in keyed:
        event = item[4]
        if event.node == node and event.dir == "in" and item[0] < start:
            moved = dataclasses.replace(event, ts=start, extra={**(event.extra or {}), "capturedTs": event.ts})
            item = (start, *item[1:4], moved)
        out.append(item)
    return out


def _start_time(directory: Any, node: int | None, capture_start: int | None, keyed: list) -> int:
    """When a member's replay begins (its MemberStart), and so the moment its directory is taken back to
    (`_start_time_from`, from what ``keyed`` holds of the member)."""
    mine = [item for item in keyed if item[4].node == node]
    first = min((item[0] for item in mine), default=None)
    started = [item[0] for item in mine
               if item[4].type == "NewElection" and item[4].fields.get("reason") == "node started"]
    if not started:  # logs before 1.44 have no NEW_ELECTION: the first election leaving INIT
        started = [item[0] for item in mine if item[4].type == "ElectionStateChange"][:1]
    own = min((item[0] for item in mine if item[4].dir != "in"), default=None)
    return _start_time_from(directory, capture_start, first, started, own)


def _start_time_from(directory: Any, capture_start: int | None, first: int | None, started: list[int],
                     own: int | None) -> int:
    """When a member's replay begins, from its first event (``first``), when its agent log shows its
    consensus module starting (``started``) and its first event other than a message it received (``own``).

    Where the member's agent log shows its consensus module starting (NEW_ELECTION "node started"),
    that moment, its election beginning there (or the member's first event, if that is earlier: a
    replay begins before everything that happened to the member).  Else, when its mark file says it started during the
    capture, that start time; else the capture's first packet (or the member's first event if
    earlier): it was already running.
    """
    if started:
        # What the member received before its consensus module started waited in the image for it
        # (`_queued_until_start`), so only what it did itself can start the replay earlier.
        return min(started) if own is None else min(min(started), own)
    mark = directory.mark_files.get("cluster-mark.dat") if directory is not None else None
    start_ns = mark.header.start_timestamp * 1_000_000 if mark is not None and mark.header.start_timestamp > 0 else None
    if start_ns is not None and (capture_start is None or start_ns >= capture_start):
        return start_ns if first is None else min(start_ns, first)
    candidates = [t for t in (capture_start, first) if t is not None]
    if candidates:
        return min(candidates)
    return start_ns if start_ns is not None else 0
