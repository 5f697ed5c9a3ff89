"""A member's cluster directory in: the ``MemberStart`` that makes its replay start where it was.

From one member's directory (read by `recorder.cluster_dir.read_cluster_dir`):

* ``node`` is the consensus module's mark file ``memberId`` (``cluster-mark.dat``), else the
  memberId of node-state.dat's legacy ClusterMembers record (1.41/1.42).
* ``recordingLog`` is recording.log's entries in Aeron's in-memory order, each with the keys of
  ``inspect recording-log --json`` (`formats.recording_log.entry_to_json`).
* ``nodeState`` is node-state.dat's candidateTerm ``{candidateTermId, logPosition, timestamp}``.
* ``appendPosition`` is where the member's log recording ended: what the member itself said at its
  start (its first CanvassPosition, its agent log's INIT -> CANVASS line), else the archive catalog's
  log recording when it stopped before the moment, else the last TERM's logPosition when the term was
  committed; for a term still open (logPosition −1) it lies somewhere after the term base: we take
  the base and say so (`starting_state` has the whole order of trust).
* ``clusterMembers`` is the string given by the caller, else node-state.dat's legacy ClusterMembers
  record when there is one.

**As of a time.**  Directories are often copied *after* the incident, so they hold what happened
during the capture too.  Given ``as_of_ns`` (the capture's first packet), the state is taken back to
that moment from the timestamps Aeron writes: recording.log entries stamped later (cluster time:
ms, µs or ns since the epoch, told apart by magnitude) were appended during the capture and are
dropped; `starting_state.reconcile` then decides what the dropped entries leave uncertain (was the
last term still open? what was candidateTermId?) from the rest of the evidence.  Every such step is
a note, and every value chosen carries its provenance.

`member_start` is pure; `read_member_dir` does the I/O.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formats import recording_log as rl
from formats.errors import DecodeError
from recorder.capture.starting_state import LogRecording, OwnWords, reconcile
from recorder.cluster_dir import ARCHIVE_CATALOG, MARK_FILE, ClusterDir, read_cluster_dir

NULL_VALUE = -1


@dataclass(slots=True)
class MemberStartInfo:
    """What one directory says: the member, its MemberStart fields and when it started."""

    source: str
    node: int
    fields: dict[str, Any]
    start_ns: int | None  #: the consensus module's start time (mark file startTimestamp), ns since the epoch
    cluster_members: str | None  #: from the legacy node-state record, when present
    ingress_stream_id: int | None
    notes: list[str] = field(default_factory=list)
    #: Where each starting value came from and how sure it is (`starting_state.Known.to_json`).
    provenance: dict[str, Any] = field(default_factory=dict)


def cluster_time_to_ns(timestamp: int) -> int:
    """An epoch timestamp in the cluster's time unit (ms, µs or ns), told apart by magnitude, in ns."""
    magnitude = abs(timestamp)
    if magnitude < 10**14:  # ms: until the year 5138
        return timestamp * 1_000_000
    if magnitude < 10**17:  # µs
        return timestamp * 1_000
    return timestamp


_MEMBER_DIR_NAME = re.compile(r"(?:node|member)[-_]?(\d+)", re.IGNORECASE)


def member_of(cluster_dir: ClusterDir) -> int | None:
    """The member a cluster directory belongs to: what its files say (`member_from_files`), else the
    name of the directory or its parent when it is ``nodeN`` / ``memberN`` (how captures and the
    samples lay out members' directories)."""
    from_files = member_from_files(cluster_dir)
    return from_files if from_files is not None else member_from_name(cluster_dir.path)


def member_from_files(cluster_dir: ClusterDir) -> int | None:
    """cluster-mark.dat's memberId, else the legacy ClusterMembers record of node-state.dat."""
    mark = cluster_dir.mark_files.get(MARK_FILE)
    if mark is not None and mark.header.member_id >= 0:
        return mark.header.member_id
    state = cluster_dir.node_state.state if cluster_dir.node_state is not None else None
    if state is not None and state.cluster_members is not None and state.cluster_members.member_id >= 0:
        return state.cluster_members.member_id
    return None


def member_from_name(path: str | os.PathLike[str]) -> int | None:
    resolved = Path(path).resolve()
    for part in (resolved.name, resolved.parent.name):
        match = _MEMBER_DIR_NAME.fullmatch(part)
        if match:
            return int(match.group(1))
    return None


def member_start(cluster_dir: ClusterDir, *, cluster_members: str | None = None, as_of_ns: int | None = None,
                 own: Sequence[OwnWords | None] = (), log_recording: LogRecording | None = None) -> MemberStartInfo:
    """The MemberStart fields for this directory's member (see the module docstring), reconciled with
    the member's own words (``own``: what it sent or logged at its start, most trusted first) and its
    archive's log recording (`starting_state.reconcile`); each value's provenance is in ``provenance``."""
    source = str(cluster_dir.path)
    node = member_of(cluster_dir)
    if node is None:
        raise DecodeError(
            "cannot tell which member this directory belongs to (no cluster-mark.dat with a memberId, no"
            " legacy ClusterMembers record in node-state.dat, and it is not named nodeN or memberN)",
            source=source,
        )
    notes = [f"{source}: {problem}" for problem in cluster_dir.problems]
    if member_from_files(cluster_dir) is None:
        notes.append(f"{source}: member {node} taken from the directory's name (no cluster-mark.dat)")
    state = cluster_dir.node_state.state if cluster_dir.node_state is not None else None
    legacy_members = state.cluster_members.cluster_members if state is not None and state.cluster_members else None

    entries = list(cluster_dir.recording_log.entries) if cluster_dir.recording_log is not None else []
    candidate = state.candidate_term if state is not None else None
    node_state = (
        {"candidateTermId": candidate.candidate_term_id, "logPosition": candidate.log_position,
         "timestamp": candidate.timestamp}
        if candidate is not None
        else {"candidateTermId": NULL_VALUE, "logPosition": NULL_VALUE, "timestamp": NULL_VALUE}
    )
    dropped: list[rl.Entry] = []
    written_later = False
    if as_of_ns is not None:
        entries, dropped, written_later = _rewind(entries, node_state, as_of_ns, source, notes)
    mark = cluster_dir.mark_files.get(MARK_FILE)
    starting = reconcile(entries, dropped, node_state, as_of_ns=as_of_ns, node_state_written_later=written_later,
                         own=own, log_recording=log_recording,
                         mark_candidate_term_id=mark.header.candidate_term_id if mark is not None else None,
                         source=source)
    notes += starting.notes
    fields: dict[str, Any] = {}
    members = cluster_members or legacy_members
    if members:
        fields["clusterMembers"] = members
    fields["recordingLog"] = [rl.entry_to_json(e) for e in starting.entries]
    fields["nodeState"] = starting.node_state
    fields["appendPosition"] = starting.append_position
    start_ns = None
    ingress_stream = None
    if mark is not None:
        if mark.header.start_timestamp > 0:
            start_ns = mark.header.start_timestamp * 1_000_000
        if mark.header.ingress_stream_id > 0:
            ingress_stream = mark.header.ingress_stream_id
    return MemberStartInfo(source, node, fields, start_ns, legacy_members, ingress_stream, notes,
                           starting.provenance())


def _rewind(entries: list[rl.Entry], node_state: dict[str, int], as_of_ns: int, source: str, notes: list[str]
            ) -> tuple[list[rl.Entry], list[rl.Entry], bool]:
    """The entries stamped by ``as_of_ns``, those stamped later, and whether node-state.dat was written later."""
    kept = [e for e in entries if cluster_time_to_ns(e.timestamp) <= as_of_ns]
    dropped = [e for e in entries if cluster_time_to_ns(e.timestamp) > as_of_ns]
    if dropped:
        notes.append(
            f"{source}: {len(dropped)} recording.log entr{'y was' if len(dropped) == 1 else 'ies were'} written after"
            f" the replay's starting point and {'is' if len(dropped) == 1 else 'are'} left out of its starting state: "
            + "; ".join(f"{e.type_name} term {e.leadership_term_id} @{e.log_position}" for e in dropped)
        )
    written_later = node_state["timestamp"] != NULL_VALUE and node_state["timestamp"] * 1_000_000 > as_of_ns
    if written_later:
        notes.append(f"{source}: node-state.dat's candidateTermId {node_state['candidateTermId']} was written after"
                     " the replay's starting point; the value before it is unknown")
    return kept, dropped, written_later


def read_member_dir(path: str | os.PathLike[str], *, cluster_members: str | None = None,
                    as_of_ns: int | None = None) -> MemberStartInfo:
    """Read one member's cluster directory and build its MemberStart (errors name the directory)."""
    return member_start(read_cluster_dir(path), cluster_members=cluster_members, as_of_ns=as_of_ns)


def is_archive_dir(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is an Aeron Archive's directory (it holds ``archive.catalog``)."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, ARCHIVE_CATALOG))


def is_cluster_dir(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a directory holding any of a member's cluster files."""
    if not os.path.isdir(path):
        return False
    names = set(os.listdir(path))
    return bool(names & {"recording.log", "node-state.dat", MARK_FILE}) or any(
        n.startswith("cluster-mark") for n in names
    )
