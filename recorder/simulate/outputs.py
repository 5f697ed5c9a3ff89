"""What a simulated incident leaves behind, written to a directory.

For a cluster of members 0..N-1 the directory holds:

* ``hostN.pcap`` — what ``tcpdump`` on member N's host would have captured: every datagram to and
  from that host, while its process ran (classic pcap, nanosecond timestamps, Ethernet framing
  with zero MAC addresses as on loopback, IPv4/UDP with real checksums).  A crash takes the host
  dark: nothing is captured until it restarts.
* ``nodeN/agent-events.log`` — the aeron-agent cluster event log of member N in Aeron 1.47's text
  format (`formats.agent_log`): ``log started`` at each process start, NEW_ELECTION,
  ELECTION_STATE_CHANGE, ROLE_CHANGE, STATE_CHANGE and every consensus message the member received.
  Timestamps are that host's ``System.nanoTime()``: each host has its own origin.
* ``nodeN/cluster/recording.log`` and ``nodeN/cluster/node-state.dat`` — the member's cluster
  directory as the engine left it (byte for byte what Aeron would have written; node-state.dat is
  Aeron's full 1 MiB, mostly zeros).
* ``incident.arrow`` — the replay file (contract §2) of the events the simulator recorded:
  MemberStart (with the seed), consensus ``in``/``out``, log and ingress ``in``, LogEndOfStream,
  MemberCrash/MemberStop, NetworkFault observations and End; the seed is in the schema metadata.
* ``summary.json`` — the scenario, the seed, who led which term, each member's final state, traffic
  counts and the size and SHA-256 of every file above.

Files are written through a temporary name and renamed, so a reader never sees half a file.  Without
``force`` nothing existing is overwritten; with it, our own files from an earlier run are replaced
(and ones this run does not produce, such as the pcap of a member that no longer exists, removed),
while anything else in the directory (the scenario, a README) is left alone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc

from formats.pcap import PcapWriter
from formats.replay_file import events_to_table
from recorder.simulate.cluster import SimulationResult

#: Our files in an output directory, as patterns (for --force cleanup of an earlier run's leftovers).
_OWN_FILES = re.compile(
    r"^(host\d+\.pcap|incident\.arrow|summary\.json|node\d+/agent-events\.log|node\d+/cluster/recording\.log"
    r"|node\d+/cluster/node-state\.dat)$"
)
SUMMARY_KEYS = ("electionState", "role", "leadershipTermId", "logLeadershipTermId", "leaderMemberId",
                "candidateTermId", "logPosition", "appendPosition", "commitPosition")


class OutputExistsError(Exception):
    """An output file exists and ``force`` was not given."""

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(f"{path}: already exists (use --force to overwrite the simulator's files)")


def planned_files(member_ids: list[int] | tuple[int, ...]) -> list[str]:
    """The files a run with these members writes (to refuse an overwrite before simulating)."""
    files = [f"host{m}.pcap" for m in member_ids]
    for m in member_ids:
        files += [f"node{m}/agent-events.log", f"node{m}/cluster/recording.log", f"node{m}/cluster/node-state.dat"]
    return sorted(files + ["incident.arrow", "summary.json"])


def check_free(directory: Path, member_ids: list[int] | tuple[int, ...]) -> None:
    """Raise `OutputExistsError` for the first planned file that exists already."""
    for relative in planned_files(member_ids):
        if (directory / relative).exists():
            raise OutputExistsError(directory / relative)


def render_files(result: SimulationResult) -> dict[str, bytes]:
    """Every output file's bytes by its path relative to the output directory (summary.json last)."""
    files: dict[str, bytes] = {}
    for member_id in sorted(result.captures):
        files[f"host{member_id}.pcap"] = render_pcap(result.captures[member_id])
    for member_id in sorted(result.agent_logs):
        lines = result.agent_logs[member_id]
        files[f"node{member_id}/agent-events.log"] = "".join(line + "\n" for line in lines).encode("ascii")
        if member_id in result.recording_logs:
            files[f"node{member_id}/cluster/recording.log"] = result.recording_logs[member_id]
            files[f"node{member_id}/cluster/node-state.dat"] = result.node_states[member_id]
    files["incident.arrow"] = render_replay(result)
    files["summary.json"] = render_summary(result, files)
    return files


def render_pcap(records: list[Any]) -> bytes:
    writer = PcapWriter()
    parts = [writer.file_header()]
    for record in records:
        parts.append(writer.udp_packet(record.time_ns, record.source.ip, record.source.port, record.destination.ip,
                                       record.destination.port, record.payload))
    return b"".join(parts)


def render_replay(result: SimulationResult) -> bytes:
    scenario = result.scenario
    table = events_to_table(
        result.events,
        source=f"recount simulate {scenario.name}",
        cluster_members=scenario.cluster_members,
        metadata={"recount.seed": str(result.seed), "recount.scenario": scenario.name},
    )
    # Compressed record batches (zstd, deterministic) keep the bundled samples small: most of the
    # per-field columns are null for most rows.  pyarrow and DuckDB (through pyarrow) read them as is.
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema, options=ipc.IpcWriteOptions(compression="zstd")) as writer:
        writer.write_table(table, max_chunksize=65536)
    return sink.getvalue().to_pybytes()


def summary_document(result: SimulationResult, files: dict[str, bytes] | None = None) -> dict[str, Any]:
    scenario = result.scenario
    members = {}
    for member_id in sorted(result.final_states):
        state = result.final_states[member_id]
        members[str(member_id)] = {key: state.get(key) for key in SUMMARY_KEYS}
        members[str(member_id)]["running"] = state.get("isRunning")
    document: dict[str, Any] = {
        "scenario": scenario.name,
        "description": scenario.description,
        "seed": result.seed,
        "start": scenario.start_epoch_ns,
        "durationNs": scenario.duration_ns,
        "clusterMembers": scenario.cluster_members,
        "leaders": result.stats.get("leaders", []),
        "members": members,
        "events": len(result.events),
        "stats": {key: value for key, value in result.stats.items() if key != "leaders"},
    }
    if files is not None:
        document["files"] = {
            path: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()} for path, data in sorted(files.items())
        }
    return document


def render_summary(result: SimulationResult, files: dict[str, bytes]) -> bytes:
    return (json.dumps(summary_document(result, files), indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def write_outputs(directory: Path, files: dict[str, bytes], *, force: bool) -> list[Path]:
    """Write ``files`` under ``directory``; returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    targets = {relative: directory / relative for relative in files}
    if not force:
        for relative in sorted(targets):
            if targets[relative].exists():
                raise OutputExistsError(targets[relative])
    if force:
        for stale in _own_files(directory):
            relative = stale.relative_to(directory).as_posix()
            if relative not in files:
                stale.unlink()
    written = []
    for relative in sorted(files):
        path = targets[relative]
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        temporary.write_bytes(files[relative])
        temporary.replace(path)
        written.append(path)
    return written


def _own_files(directory: Path) -> list[Path]:
    found = []
    for path in sorted(directory.rglob("*")):
        if path.is_file() and _OWN_FILES.match(path.relative_to(directory).as_posix()):
            found.append(path)
    return found
