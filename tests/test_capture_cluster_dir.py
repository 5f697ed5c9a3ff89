"""A member's cluster directory → its MemberStart, as it was then or as of the capture's start."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from formats.errors import DecodeError
from formats.node_state import NodeStateFile
from formats.pcap import PcapReader
from formats.recording_log import RecordingLog
from recorder.capture.cluster_dir_import import cluster_time_to_ns, is_cluster_dir, read_member_dir

MEMBER_ID_OFFSET = 8 + 56  # 1.47 mark file: the 8-byte SBE header, then memberId at body offset 56


def make_dir(tmp_path: Path, capture: Path, *, member: int, log: RecordingLog | None, state: NodeStateFile | None
             ) -> Path:
    """A cluster dir with a real 1.47.3 mark file (its memberId changed) and the given files."""
    directory = tmp_path / f"member{member}"
    directory.mkdir()
    mark = bytearray((capture / "node0" / "cluster-mark.dat").read_bytes())
    struct.pack_into("<i", mark, MEMBER_ID_OFFSET, member)
    (directory / "cluster-mark.dat").write_bytes(bytes(mark))
    if log is not None:
        (directory / "recording.log").write_bytes(log.to_bytes())
    if state is not None:
        (directory / "node-state.dat").write_bytes(state.to_bytes())
    return directory


def test_the_real_directories_give_each_member_its_end_state(capture):
    for node in (0, 1, 2):
        info = read_member_dir(capture / f"node{node}")
        assert info.node == node
        log = info.fields["recordingLog"]
        assert [(e["type"], e["leadershipTermId"], e["logPosition"], e["serviceId"]) for e in log] == [
            ("TERM", 0, 10272, -1), ("SNAPSHOT", 0, 10272, 0), ("SNAPSHOT", 0, 10272, -1)]
        assert info.fields["nodeState"]["candidateTermId"] == 0
        assert info.fields["appendPosition"] == 10272
        assert "clusterMembers" not in info.fields  # 1.47 no longer writes the legacy record
        assert info.ingress_stream_id == 101 and info.start_ns is not None


def test_as_of_the_capture_start_the_real_directories_are_empty_again(capture):
    first_packet_ns = next(PcapReader((capture / "capture.pcap").read_bytes()).packets()).ts_ns
    info = read_member_dir(capture / "node1", cluster_members="0,h:1,h:2,h:3,h:4,h:5", as_of_ns=first_packet_ns)
    assert info.fields["recordingLog"] == []
    assert info.fields["nodeState"] == {"candidateTermId": -1, "logPosition": -1, "timestamp": -1}
    assert info.fields["appendPosition"] == 0
    assert info.fields["clusterMembers"] == "0,h:1,h:2,h:3,h:4,h:5"
    assert any("3 recording.log entries were written after the replay's starting point" in n for n in info.notes)
    assert any("candidateTermId 0 was written after the replay's starting point" in n for n in info.notes)


def test_a_term_committed_by_a_later_terms_append_is_open_again_before_that_append(tmp_path, capture):
    log = RecordingLog.decode(b"")
    log.append_term(5, 0, 0, 1_700_000_000_000)
    log.append_term(5, 1, 4096, 1_700_000_010_000)  # commits term 0 at 4096
    state = NodeStateFile.create()
    state.update_candidate_term_id(1, 4096, 1_700_000_009_000)
    directory = make_dir(tmp_path, capture, member=2, log=log, state=state)
    now = read_member_dir(directory)
    assert [e["logPosition"] for e in now.fields["recordingLog"]] == [4096, -1]
    assert now.fields["appendPosition"] == 4096  # open term 1: its base, said so
    assert any("term 1 is still open" in n for n in now.notes)
    before = read_member_dir(directory, as_of_ns=1_700_000_005_000 * 1_000_000)
    assert [(e["leadershipTermId"], e["logPosition"]) for e in before.fields["recordingLog"]] == [(0, -1)]
    assert before.fields["nodeState"]["candidateTermId"] == 0  # written later: the last term it held, a guess
    assert before.fields["appendPosition"] == 0
    assert before.node == 2


def test_a_committed_last_term_gives_the_append_position(tmp_path, capture):
    log = RecordingLog.decode(b"")
    log.append_term(5, 0, 0, 1_700_000_000_000)
    log.commit_log_position(0, 8192)
    info = read_member_dir(make_dir(tmp_path, capture, member=1, log=log, state=NodeStateFile.create()))
    assert info.fields["appendPosition"] == 8192
    assert info.fields["nodeState"]["candidateTermId"] == -1


def test_a_directory_that_does_not_say_whose_it_is_is_refused(tmp_path):
    directory = tmp_path / "anon"
    directory.mkdir()
    (directory / "node-state.dat").write_bytes(NodeStateFile.create().to_bytes())
    with pytest.raises(DecodeError, match="anon: cannot tell which member this directory belongs to"):
        read_member_dir(directory)


def test_cluster_times_in_ms_us_and_ns_are_told_apart_by_magnitude():
    assert cluster_time_to_ns(1_795_312_188_643) == 1_795_312_188_643_000_000
    assert cluster_time_to_ns(1_795_312_188_643_000) == 1_795_312_188_643_000_000
    assert cluster_time_to_ns(1_795_312_188_643_000_000) == 1_795_312_188_643_000_000


def test_cluster_directories_are_recognised_by_their_files(tmp_path, capture):
    assert is_cluster_dir(capture / "node0")
    assert not is_cluster_dir(tmp_path)
    assert not is_cluster_dir(capture / "capture.pcap")


def test_a_directory_without_a_mark_file_takes_its_member_from_a_node_or_member_name(tmp_path):
    import shutil

    from recorder.capture.cluster_dir_import import member_start
    from recorder.cluster_dir import read_cluster_dir

    source = Path(__file__).resolve().parents[1] / "samples" / "leader-failover" / "node2" / "cluster"
    named = tmp_path / "member-2" / "cluster"
    shutil.copytree(source, named)
    info = member_start(read_cluster_dir(named))
    assert info.node == 2
    assert any("taken from the directory's name" in note for note in info.notes)

    anonymous = tmp_path / "somewhere" / "else"
    shutil.copytree(source, anonymous)
    with pytest.raises(DecodeError, match="not named nodeN or memberN"):
        member_start(read_cluster_dir(anonymous))
