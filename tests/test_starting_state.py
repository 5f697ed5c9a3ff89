"""A member's starting state, from the evidence in its order of trust (`recorder.capture.starting_state`).

The real captures g_… and i_… start from data left by earlier runs, and keep a copy of each member's
starting files in ``nodeN/before/``.  Those copies are the witness here, never an input: the starting
state is reconstructed from what a user has (the capture, the agent logs, the member directories as
copied *after* the incident) and must agree with them.  The rest pins each rule on small inputs.
"""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

import pytest

from formats import recording_log as rl
from recorder.capture.starting_state import LogRecording, OwnWords, reconcile
from recorder.cluster_dir import load_archive_catalog, load_node_state, load_recording_log
from recorder.convert import build
from tests.conftest import REFERENCE, _require

CAPTURES = REFERENCE / "aeron-1.47.3-capture"
STARTING_FROM_DATA = ("g_leader_sigterm_reelection_rejoin", "i_restart_all_one_member_behind")
INPUTS = {
    "capture and dirs": lambda folder, nodes: [folder / "capture.pcapng", *nodes],
    "capture, dirs and agent logs": lambda folder, nodes: [folder / "capture.pcapng", *nodes,
                                                           *(n / "agent-events.log" for n in nodes)],
    "dirs and agent logs": lambda folder, nodes: [*nodes, *(n / "agent-events.log" for n in nodes)],
}


def _entries(documents) -> list[tuple]:
    return [(d["type"], d["leadershipTermId"], d["termBaseLogPosition"], d["logPosition"], d["timestamp"],
             d["serviceId"], d["recordingId"]) for d in documents]


def _effective_candidate(candidate: int, entries: list[tuple]) -> int:
    """What Aeron's election starts from: max(node-state.dat's candidateTermId, the last term)."""
    return max([candidate] + [e[1] for e in entries if e[0] == "TERM"])


@pytest.mark.parametrize("inputs", sorted(INPUTS))
@pytest.mark.parametrize("name", STARTING_FROM_DATA)
def test_the_reconstructed_starting_state_agrees_with_the_before_directories(name, inputs):
    folder = _require(CAPTURES / name)
    nodes = sorted(p for p in folder.iterdir() if p.is_dir() and p.name.startswith("node"))
    built = build([str(p) for p in INPUTS[inputs](folder, nodes)])
    for node in nodes:
        member = int(node.name.removeprefix("node"))
        start = next(e for e in built.events if e.type == "MemberStart" and e.node == member)
        witness = node / "before"  # read as the witness only
        want = _entries([rl.entry_to_json(e) for e in load_recording_log(witness / "recording.log").entries])
        got = _entries(start.fields["recordingLog"])
        assert got == want, f"member {member}: recording.log"
        log = LogRecording.of(load_archive_catalog(witness / "archive.tar.gz"), "before")
        assert start.fields["appendPosition"] == log.stop_position, f"member {member}: append position"
        candidate = load_node_state(witness / "node-state.dat").state.candidate_term.candidate_term_id
        assert (_effective_candidate(start.fields["nodeState"]["candidateTermId"], got)
                == _effective_candidate(candidate, want)), f"member {member}: candidateTermId"
        provenance = start.extra["startingState"]
        assert provenance["appendPosition"]["certainty"] == "exact"
        assert provenance["appendPosition"]["source"] == ("agent log" if inputs == "dirs and agent logs" else "wire")


def test_without_the_members_own_words_an_open_term_gives_only_a_lower_bound(tmp_path):
    """g's node0 directory before the scenario, given alone: its last term is open, nothing says how far
    its log reached, so the base is taken and said to be a bound."""
    before = _require(CAPTURES / "g_leader_sigterm_reelection_rejoin" / "node0" / "before")
    member = tmp_path / "node0"
    member.mkdir()
    for name in ("recording.log", "node-state.dat", "cluster-mark.dat"):
        shutil.copy(before / name, member / name)
    built = build([str(member)])
    start = next(e for e in built.events if e.type == "MemberStart")
    assert start.fields["appendPosition"] == 0
    assert start.extra["startingState"]["appendPosition"]["certainty"] == "bound"
    assert any("still open" in note for note in built.captured.notes)


def _archive_dir(tarball: Path, into: Path) -> Path:
    """Only the catalog of an archive tarball (its segment files are 128 MiB sparse files)."""
    with tarfile.open(tarball) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("archive.catalog"))
        data = tar.extractfile(member).read()
    into.mkdir(parents=True)
    (into / "archive.catalog").write_bytes(data)
    return into


@pytest.mark.parametrize("layout", ["inside the cluster dir", "next to the cluster dir", "given on its own"])
def test_convert_reads_the_members_archive_where_aeron_lays_it_out(tmp_path, layout):
    before = _require(CAPTURES / "g_leader_sigterm_reelection_rejoin" / "node0" / "before")
    cluster = tmp_path / "node0" / "cluster"
    cluster.mkdir(parents=True)
    for name in ("recording.log", "node-state.dat", "cluster-mark.dat"):
        shutil.copy(before / name, cluster / name)
    where = cluster / "archive" if layout == "inside the cluster dir" else tmp_path / "node0" / "archive"
    archive = _archive_dir(before / "archive.tar.gz", where)
    inputs = [str(cluster), str(archive)] if layout == "given on its own" else [str(cluster)]
    built = build(inputs)
    start = next(e for e in built.events if e.type == "MemberStart")
    # The open term's log reached 46080: the catalog's log recording stopped there.
    assert start.fields["appendPosition"] == 46080
    assert start.extra["startingState"]["appendPosition"]["source"] == "archive catalog"


def test_an_archive_dir_beside_no_cluster_dir_is_noted_not_read(tmp_path):
    before = _require(CAPTURES / "g_leader_sigterm_reelection_rejoin" / "node0" / "before")
    cluster = tmp_path / "a" / "cluster"
    cluster.mkdir(parents=True)
    for name in ("recording.log", "node-state.dat", "cluster-mark.dat"):
        shutil.copy(before / name, cluster / name)
    archive = _archive_dir(before / "archive.tar.gz", tmp_path / "elsewhere" / "archive")
    built = build([str(cluster), str(archive)])
    start = next(e for e in built.events if e.type == "MemberStart")
    assert start.fields["appendPosition"] == 0
    assert any("next to or inside no cluster dir" in note for note in built.captured.notes)


# --- the rules, one by one --------------------------------------------------------------------------------

S = 1_000_000_000


def _term(term: int, base: int, end: int, ts_ms: int) -> rl.Entry:
    return rl.Entry(recording_id=0, leadership_term_id=term, term_base_log_position=base, log_position=end,
                    timestamp=ts_ms, service_id=-1, type=rl.EntryType.TERM, entry_index=term)


def _snapshot(term: int, base: int, position: int, ts_ms: int, service: int) -> rl.Entry:
    return rl.Entry(recording_id=1, leadership_term_id=term, term_base_log_position=base, log_position=position,
                    timestamp=ts_ms, service_id=service, type=rl.EntryType.SNAPSHOT, entry_index=9)


NO_STATE = {"candidateTermId": -1, "logPosition": -1, "timestamp": -1}


def test_the_members_first_canvass_decides_the_append_position_of_an_open_term():
    entries = [_term(0, 0, 0, 1000), _term(1, 0, -1, 1001)]
    wire = OwnWords("wire", "CanvassPosition, packet 7", 5 * S, 46080, 1, 1)
    state = reconcile(entries, [], NO_STATE, as_of_ns=5 * S, node_state_written_later=False, own=[wire])
    assert state.append_position == 46080
    assert state.known["appendPosition"].source == "wire" and state.known["appendPosition"].certainty == "exact"
    assert state.entries[-1].log_position == -1


def test_a_term_ended_where_a_dropped_term_began_is_open_unless_a_shutdown_snapshot_sits_there():
    kept = [_term(0, 0, 0, 1000), _term(1, 0, 4096, 1001)]
    dropped = [_term(2, 4096, -1, 9000)]
    opened = reconcile(kept, dropped, NO_STATE, as_of_ns=5 * S, node_state_written_later=False)
    assert opened.entries[-1].log_position == -1 and opened.known["lastTerm"].certainty == "assumed"
    with_snapshot = kept + [_snapshot(1, 0, 4096, 1002, 0), _snapshot(1, 0, 4096, 1002, -1)]
    closed = reconcile(with_snapshot, dropped, NO_STATE, as_of_ns=5 * S, node_state_written_later=False)
    assert [e.log_position for e in closed.entries if e.type == rl.EntryType.TERM] == [0, 4096]
    assert closed.known["lastTerm"].certainty == "probable" and closed.append_position == 4096


def test_terms_after_the_one_the_member_names_are_left_out():
    entries = [_term(0, 0, 1024, 1000), _term(1, 1024, -1, 1001)]  # term 1 stamped early (a clock off)
    words = OwnWords("agent log", "INIT -> CANVASS, agent log line 3", 5 * S, 1024, 0, 0, 0, 0)
    state = reconcile(entries, [], NO_STATE, as_of_ns=5 * S, node_state_written_later=False, own=[words])
    assert [e.leadership_term_id for e in state.entries] == [0]
    assert any("says its last term was 0" in note for note in state.notes)


def test_a_candidate_term_above_the_leadership_term_in_the_agent_log_is_node_states_exactly():
    entries = [_term(0, 0, -1, 1000)]
    words = OwnWords("agent log", "INIT -> CANVASS, agent log line 9", 5 * S, 4224, 0, 0, 2, 0)
    state = reconcile(entries, [], {"candidateTermId": 3, "logPosition": -1, "timestamp": 9000}, as_of_ns=5 * S,
                      node_state_written_later=True, own=[words])
    assert state.node_state["candidateTermId"] == 2
    assert state.known["candidateTermId"].certainty == "exact"


def test_the_catalog_is_exact_when_the_log_recording_stopped_before_the_start_and_a_bound_otherwise():
    entries = [_term(0, 0, -1, 1000)]
    stopped = LogRecording("catalog", 0, 1000, 4000, 0, 8192)
    state = reconcile(entries, [], NO_STATE, as_of_ns=5 * S, node_state_written_later=False, log_recording=stopped)
    assert state.append_position == 8192 and state.known["appendPosition"].source == "archive catalog"
    later = LogRecording("catalog", 0, 1000, 9000, 0, 8192)
    state = reconcile(entries, [], NO_STATE, as_of_ns=5 * S, node_state_written_later=False, log_recording=later)
    assert state.append_position == 0 and state.known["appendPosition"].certainty == "bound"
    assert any("at most 8192" in note for note in state.notes)


def test_the_wire_and_the_agent_log_disagreeing_is_said_and_the_wire_wins():
    entries = [_term(0, 0, -1, 1000)]
    wire = OwnWords("wire", "CanvassPosition, packet 7", 5 * S, 2048, 0, 0)
    logged = OwnWords("agent log", "INIT -> CANVASS, agent log line 3", 5 * S, 1024, 0, 0, 0, 0)
    state = reconcile(entries, [], NO_STATE, as_of_ns=5 * S, node_state_written_later=False, own=[wire, logged])
    assert state.append_position == 2048
    assert any("disagree" in note for note in state.notes)
