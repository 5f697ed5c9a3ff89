"""Rich tables for `recount inspect`: one function per file kind, plus the whole cluster directory.

Numbers are printed as Aeron stores them; epoch-millisecond timestamps that Aeron takes from the
wall clock (node-state, mark files) also get a UTC rendering.  recording.log timestamps are in the
cluster's time unit, which the file does not record, so they stay raw.
"""

from __future__ import annotations

import datetime

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from formats import archive_catalog as ac
from formats import recording_log as rl
from formats.mark_file import MarkFile
from formats.node_state import NodeState
from recorder.cluster_dir import ClusterDir, find_problems


def _epoch_ms(value: int) -> str:
    if value <= 0:
        return str(value)
    try:
        moment = datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return str(value)
    return f"{value} ({moment.strftime('%Y-%m-%dT%H:%M:%S')}.{value % 1000:03d}Z)"


def _cells(values: list[str]) -> list[Text]:
    """Data from files goes in as Text, never as rich markup ('[...]' in a path or a stack trace)."""
    return [Text(value) for value in values]


def _print_table(console: Console, table: Table) -> None:
    """On a terminal, fit the terminal; into a pipe or file, print at the table's natural width
    (rather than rich's 80-column default, which would cut numbers short)."""
    if console.is_terminal:
        console.print(table)
        return
    natural = Measurement.get(console, console.options.update(max_width=100_000), table).maximum
    saved = console.width
    console.width = max(saved, natural)
    try:
        console.print(table)
    finally:
        console.width = saved


def recording_log_table(log: rl.RecordingLog, title: str) -> Table:
    table = Table(title=Text(f"{title}: {len(log.entries)} entries (Aeron's in-memory order)"), title_justify="left")
    for name in ("entryIndex", "type", "valid", "term", "termBase", "logPosition", "timestamp", "serviceId", "recordingId"):
        table.add_column(name, justify="left" if name in ("type", "valid") else "right")
    has_endpoint = any(e.archive_endpoint is not None for e in log.entries)
    if has_endpoint:
        table.add_column("archiveEndpoint")
    for entry in log.entries:
        style = None if entry.is_valid else "dim"
        row = [
            str(entry.entry_index),
            entry.type_name,
            "yes" if entry.is_valid else "NO",
            str(entry.leadership_term_id),
            str(entry.term_base_log_position),
            str(entry.log_position),
            str(entry.timestamp),
            str(entry.service_id),
            str(entry.recording_id),
        ]
        if has_endpoint:
            row.append(entry.archive_endpoint or "")
        table.add_row(*_cells(row), style=style)
    return table


def print_recording_log(console: Console, log: rl.RecordingLog, title: str) -> None:
    _print_table(console, recording_log_table(log, title))
    if not log.entries and not log.removed_entry_indexes and not log.anomalies:
        console.print(Text("an empty recording.log: what Aeron creates before the member's first election completes"))
    if log.removed_entry_indexes:
        console.print(Text(f"removed records (entry type -1): entryIndex {', '.join(map(str, log.removed_entry_indexes))}"))
    last = log.find_last_term()
    if last is not None:
        console.print(
            Text(
                f"last term: {last.leadership_term_id} from {last.term_base_log_position} to "
                f"{'(open)' if last.log_position == rl.NULL_VALUE else last.log_position}; "
                f"next entryIndex {log.next_entry_index}"
            )
        )
    snapshot = log.get_latest_snapshot(rl.CONSENSUS_MODULE_SERVICE_ID)
    if snapshot is not None:
        console.print(
            Text(
                f"latest snapshot: term {snapshot.leadership_term_id} at logPosition {snapshot.log_position} "
                f"(recordingId {snapshot.recording_id})"
            )
        )
    _print_findings(console, "anomalies", log.anomalies)


def node_state_table(state: NodeState, title: str) -> Table:
    table = Table(title=Text(f"{title}: version {state.version:#x}, {state.file_length} bytes"), title_justify="left")
    table.add_column("offset", justify="right")
    table.add_column("record")
    table.add_column("header")
    table.add_column("fields")
    table.add_row(*_cells(["0", "nodeStateHeader", "", f"version={state.version} padding={state.padding}"]))
    for record in state.records:
        header = (
            f"blockLength={record.block_length} templateId={record.template_id} schemaId={record.schema_id} "
            f"version={record.version} frameLength={record.frame_length}"
        )
        if record.template_id == 301:
            term = state.candidate_term
            fields = (
                f"candidateTermId={term.candidate_term_id}\nlogPosition={term.log_position}\n"
                f"timestamp={_epoch_ms(term.timestamp)}"
            )
        elif record.template_id == 303 and state.cluster_members is not None:
            members = state.cluster_members
            fields = (
                f"leadershipTermId={members.leadership_term_id}\nmemberId={members.member_id}\n"
                f"highMemberId={members.high_member_id}\nclusterMembers={members.cluster_members}"
            )
        else:
            fields = ""
        table.add_row(*_cells([str(record.offset), record.name, header, fields]))
    return table


def archive_catalog_table(catalog: ac.Catalog, title: str) -> Table:
    header = catalog.header
    table = Table(
        title=Text(f"{title}: catalog version {header.semantic_version}, {len(catalog.recordings)} recording(s), "
                   f"nextRecordingId {header.next_recording_id}"),
        title_justify="left",
    )
    for name in ("recordingId", "state", "alias", "streamId", "sessionId", "startPosition", "stopPosition",
                 "startTimestamp", "stopTimestamp", "sourceIdentity"):
        table.add_column(name, justify="left" if name in ("state", "alias", "sourceIdentity") else "right")
    for r in catalog.recordings:
        table.add_row(*_cells([
            str(r.recording_id), r.state_name, r.alias or "", str(r.stream_id), str(r.session_id), str(r.start_position),
            str(r.stop_position) if r.stop_position != ac.NULL_POSITION else "recording",
            _epoch_ms(r.start_timestamp), _epoch_ms(r.stop_timestamp), r.source_identity,
        ]), style=None if r.state == ac.RecordingState.VALID else "dim")
    return table


def print_archive_catalog(console: Console, catalog: ac.Catalog, title: str) -> None:
    _print_table(console, archive_catalog_table(catalog, title))


def print_node_state(console: Console, state: NodeState, title: str) -> None:
    _print_table(console, node_state_table(state, title))


def mark_file_table(mark: MarkFile, title: str) -> Table:
    layout = (
        f"SBE header at 0, body at {mark.body_offset}"
        if mark.body_offset
        else "no SBE header (Aeron < 1.47), body at 0"
    )
    table = Table(
        title=Text(f"{title}: {mark.component_type_name}, {layout}, acting version {mark.acting_version}"),
        title_justify="left",
    )
    table.add_column("field")
    table.add_column("value", overflow="fold")
    for name, value in mark.to_json().items():
        if name in ("layout", "errors"):
            continue
        shown = _epoch_ms(value) if name in ("activityTimestamp", "startTimestamp") else str(value)
        table.add_row(*_cells([name, shown]))
    return table


def print_mark_file(console: Console, mark: MarkFile, title: str) -> None:
    _print_table(console, mark_file_table(mark, title))
    if not mark.errors:
        console.print(Text("error log: no errors recorded"))
        return
    errors = Table(title=f"error log: {len(mark.errors)} distinct error(s)", title_justify="left")
    errors.add_column("count", justify="right")
    errors.add_column("first seen")
    errors.add_column("last seen")
    errors.add_column("error", overflow="fold")
    for error in mark.errors:
        first_line = error.encoded_error.splitlines()[0] if error.encoded_error else ""
        errors.add_row(
            *_cells(
                [
                    str(error.observation_count),
                    _epoch_ms(error.first_observation_timestamp),
                    _epoch_ms(error.last_observation_timestamp),
                    first_line,
                ]
            )
        )
    _print_table(console, errors)


def print_cluster_dir(console: Console, cluster_dir: ClusterDir) -> None:
    console.print(Text(f"cluster directory {cluster_dir.path}", style="bold"))
    if cluster_dir.recording_log is not None:
        print_recording_log(console, cluster_dir.recording_log, "recording.log")
    if cluster_dir.node_state is not None:
        print_node_state(console, cluster_dir.node_state.state, "node-state.dat")
    for name, mark in cluster_dir.mark_files.items():
        print_mark_file(console, mark, name)
    problems = find_problems(cluster_dir)
    if problems:
        _print_findings(console, "problems", problems)
    else:
        console.print(Text("no problems found", style="green"))


def _print_findings(console: Console, heading: str, findings: tuple[str, ...] | list[str]) -> None:
    if not findings:
        return
    console.print(Text(f"{heading} ({len(findings)}):", style="bold yellow"))
    for finding in findings:
        console.print(Text(f"  - {finding}", style="yellow"))
