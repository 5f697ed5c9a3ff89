"""A member's cluster directory in: the ``MemberStart`` that makes its replay start where it was.

From one member's directory (read by `recorder.cluster_dir.read_cluster_dir`):

* ``node`` is the consensus module's mark file ``memberId`` (``cluster-mark.dat``), else the
  memberId of node-state.dat's legacy ClusterMembers record (1.41/1.42).
* ``recordingLog`` is recording.log's entries in Aeron's in-memory order, each with the keys of
  ``inspect recording-log --json`` (`formats.recording_log.entry_to_json`).
* ``nodeState`` is node-state.dat's candidateTerm ``{candidateTermId, logPosition, timestamp}``.
* ``appendPosition`` is where the member's log recording ended: the last TERM's logPosition when the
  term was committed; for a term still open (logPosition −1) it lies somewhere after the term base,
  in the archive's catalog, which a cluster directory does not hold: we take the term base and say so.
* ``clusterMembers`` is the string given by the caller, else node-state.dat's legacy ClusterMembers
  record when there is one.

**As of a time.**  Directories are often copied *after* the incident, so they hold what happened
during the capture too.  Given ``as_of_ns`` (the capture's first packet), the state is taken back to
that moment from the timestamps Aeron writes: recording.log entries stamped later (cluster time:
ms, µs or ns since the epoch, told apart by magnitude) were appended during the capture and are
dropped; a TERM whose logPosition was set by appending a dropped term is open again (−1); a
candidateTerm written later is replaced by what the remaining log implies (the last remaining
term, or −1), which is a guess and said so.  Every such step is a note.

`member_start` is pure; `read_member_dir` does the I/O.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from formats import recording_log as rl
from formats.errors import DecodeError
from recorder.cluster_dir import MARK_FILE, ClusterDir, read_cluster_dir

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


def member_start(cluster_dir: ClusterDir, *, cluster_members: str | None = None, as_of_ns: int | None = None
                 ) -> MemberStartInfo:
    """The MemberStart fields for this directory's member (see the module docstring)."""
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
    if as_of_ns is not None:
        entries, node_state = _rewind(entries, node_state, as_of_ns, source, notes)

    terms = [e for e in entries if e.type == rl.EntryType.TERM and e.is_valid]
    append_position = 0
    if terms:
        last = terms[-1]
        if last.log_position != NULL_VALUE:
            append_position = last.log_position
        else:
            append_position = last.term_base_log_position
            notes.append(
                f"{source}: term {last.leadership_term_id} is still open in recording.log; its recording ends"
                " after the term base, where the archive's catalog says: appendPosition taken as the term base"
                f" {last.term_base_log_position}"
            )
    fields: dict[str, Any] = {}
    members = cluster_members or legacy_members
    if members:
        fields["clusterMembers"] = members
    fields["recordingLog"] = [rl.entry_to_json(e) for e in entries]
    fields["nodeState"] = node_state
    fields["appendPosition"] = append_position
    mark = cluster_dir.mark_files.get(MARK_FILE)
    start_ns = None
    ingress_stream = None
    if mark is not None:
        if mark.header.start_timestamp > 0:
            start_ns = mark.header.start_timestamp * 1_000_000
        if mark.header.ingress_stream_id > 0:
            ingress_stream = mark.header.ingress_stream_id
    return MemberStartInfo(source, node, fields, start_ns, legacy_members, ingress_stream, notes)


def _rewind(entries: list[rl.Entry], node_state: dict[str, int], as_of_ns: int, source: str, notes: list[str]
            ) -> tuple[list[rl.Entry], dict[str, int]]:
    kept = [e for e in entries if cluster_time_to_ns(e.timestamp) <= as_of_ns]
    dropped = [e for e in entries if cluster_time_to_ns(e.timestamp) > as_of_ns]
    if dropped:
        notes.append(
            f"{source}: {len(dropped)} recording.log entr{'y was' if len(dropped) == 1 else 'ies were'} written after"
            f" the replay's starting point and {'is' if len(dropped) == 1 else 'are'} left out of its starting state: "
            + "; ".join(f"{e.type_name} term {e.leadership_term_id} @{e.log_position}" for e in dropped)
        )
        dropped_terms = sorted((e for e in dropped if e.type == rl.EntryType.TERM), key=lambda e: e.leadership_term_id)
        kept_terms = [e for e in kept if e.type == rl.EntryType.TERM]
        if dropped_terms and kept_terms:
            last = kept_terms[-1]
            if last.log_position != NULL_VALUE and last.log_position == dropped_terms[0].term_base_log_position:
                # appendTerm commits the previous term: before the later term existed, this one was open.
                kept = [replace(e, log_position=NULL_VALUE) if e is last else e for e in kept]
                notes.append(f"{source}: term {last.leadership_term_id} was committed by a later term's append;"
                             " it is open in the starting state")
    if node_state["timestamp"] != NULL_VALUE and node_state["timestamp"] * 1_000_000 > as_of_ns:
        terms = [e for e in kept if e.type == rl.EntryType.TERM]
        guess = terms[-1].leadership_term_id if terms else NULL_VALUE
        notes.append(
            f"{source}: node-state.dat's candidateTermId {node_state['candidateTermId']} was written after the replay's"
            f" starting point; the value before it is unknown and taken as {guess} (the last term the starting log holds)"
        )
        node_state = {"candidateTermId": guess, "logPosition": NULL_VALUE, "timestamp": NULL_VALUE}
    return kept, node_state


def read_member_dir(path: str | os.PathLike[str], *, cluster_members: str | None = None,
                    as_of_ns: int | None = None) -> MemberStartInfo:
    """Read one member's cluster directory and build its MemberStart (errors name the directory)."""
    return member_start(read_cluster_dir(path), cluster_members=cluster_members, as_of_ns=as_of_ns)


def is_cluster_dir(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a directory holding any of a member's cluster files."""
    if not os.path.isdir(path):
        return False
    names = set(os.listdir(path))
    return bool(names & {"recording.log", "node-state.dat", MARK_FILE}) or any(
        n.startswith("cluster-mark") for n in names
    )
