"""A `recount record` recording converts into the same replay file a pcap of the same traffic gives
(issue 8 item 4), and `recount replay` reads it directly."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from cli.app import run
from formats.pcap import PcapReader
from formats.replay_file import read_events
from recorder.record.storage import RecordingFile, recording_schema

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "clean-start"


def _members() -> str:
    _, meta = read_events(pa.memory_map(str(SAMPLE / "incident.arrow")))
    return meta.cluster_members


def _record_like_the_proxy(pcap: Path, out: Path, members: str, *, clean: bool = True) -> int:
    """Write what the proxy would have recorded for the datagrams of ``pcap``: each with its receive
    time and original endpoints, in the order they were seen."""
    reader = PcapReader(pcap.read_bytes(), source=str(pcap))
    packets = list(reader.packets())
    recording = RecordingFile.create(out, recording_schema(members))
    columns = [
        [p.ts_ns for p in packets],
        [f"{p.src_ip}:{p.src_port}" for p in packets],
        [f"{p.dst_ip}:{p.dst_port}" for p in packets],
        [None] * len(packets),
        [None] * len(packets),
        ["consensus"] * len(packets),
        ["toMember"] * len(packets),
        ["127.0.0.1:1"] * len(packets),
        ["127.0.0.1:2"] * len(packets),
        [bytes(p.payload) for p in packets],
    ]
    half = len(packets) // 2
    recording.append([c[:half] for c in columns])
    recording.append([c[half:] for c in columns])
    if clean:
        recording.close()
    else:
        recording.abandon()
    return len(packets)


def _events(path: Path) -> list[dict]:
    events, _ = read_events(pa.memory_map(str(path)))
    out = []
    for event in events:
        record = event.to_json()
        record.pop("extra", None)  # packet numbers: the same here, but not the point
        out.append(record)
    return out


def test_a_recording_converts_to_the_same_events_as_a_pcap_of_the_same_traffic(tmp_path):
    members = _members()
    recording = tmp_path / "recording.arrows"
    count = _record_like_the_proxy(SAMPLE / "host0.pcap", recording, members)
    assert count > 100
    assert run(["convert", str(SAMPLE / "host0.pcap"), "--members", members, "-o", str(tmp_path / "pcap.arrow")]) == 0
    assert run(["convert", str(recording), "-o", str(tmp_path / "rec.arrow")]) == 0  # members from the recording
    from_pcap, from_recording = _events(tmp_path / "pcap.arrow"), _events(tmp_path / "rec.arrow")
    assert len(from_pcap) > 100
    assert from_recording == from_pcap


def test_replay_reads_a_recording_directly_and_says_where_its_members_came_from(tmp_path, capsys):
    recording = tmp_path / "recording.arrows"
    _record_like_the_proxy(SAMPLE / "host0.pcap", recording, _members(), clean=False)
    assert run(["convert", str(recording), "-o", str(tmp_path / "r.arrow"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    capture = summary["capture"]
    assert capture["clusterMembersFrom"] == "recording"
    assert any("did not stop cleanly" in note for note in capture["notes"])
    assert run(["replay", str(recording), "--json"]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["kind"] == "summary" and set(last["nodes"]) == {"0", "1", "2"}


def test_a_torn_recording_keeps_every_whole_batch(tmp_path, capsys):
    recording = tmp_path / "recording.arrows"
    _record_like_the_proxy(SAMPLE / "host0.pcap", recording, _members(), clean=False)
    data = recording.read_bytes()
    recording.write_bytes(data[: len(data) - 50])  # the second batch torn: the first stays
    assert run(["convert", str(recording), "-o", str(tmp_path / "t.arrow"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["events"] > 0
    assert summary["capture"]["notes"], "the torn tail is said"


@pytest.mark.parametrize("content", [b"", b"\xff\xff\xff\xffgarbage"])
def test_something_that_is_not_a_recording_is_one_line_exit_2(tmp_path, capsys, content):
    path = tmp_path / "bad.arrows"
    path.write_bytes(content)
    assert run(["convert", str(path), "-o", str(tmp_path / "x.arrow")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.arrows" in err
