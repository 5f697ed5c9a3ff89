"""`recount convert` over real captures: any mix in, one replay file out that plain DuckDB can query."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from cli.app import run
from formats import replay_file
from formats.pcap import PcapReader, PcapWriter

ROOT = Path(__file__).resolve().parents[1]


def readme_members(capture: Path) -> str:
    return re.search(r"`(0,127\.0\.0\.1:[^`]+)`", (capture.parent / "README.md").read_text()).group(1)


def everything(capture: Path) -> list[str]:
    return [str(capture / "capture.pcap")] + [str(capture / f"node{n}") for n in (0, 1, 2)] + [
        str(capture / f"node{n}" / "agent-events.log") for n in (0, 1, 2)]


def convert_json(capsys, *args) -> tuple[int, dict | None, str]:
    code = run(["convert", *args, "--json"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


@pytest.fixture(scope="module")
def incident(capture, tmp_path_factory):
    out = tmp_path_factory.mktemp("convert") / "incident.arrow"
    assert run(["convert", *everything(capture), "-o", str(out), "--members", readme_members(capture)]) == 0
    return out


def test_a_pcap_cluster_dirs_and_agent_logs_convert_into_one_replay(capture, tmp_path, capsys):
    out = tmp_path / "incident.arrow"
    code, document, _ = convert_json(capsys, *everything(capture), "-o", str(out), "--members", readme_members(capture))
    assert code == 0
    summary = document["capture"]
    assert document["nodes"] == [0, 1, 2] and document["clusterMembers"] == readme_members(capture)
    assert summary["clusterMembersFrom"] == "--members"
    assert summary["eventTypes"]["MemberStart"] == 3 and summary["eventTypes"]["End"] == 3
    assert summary["eventTypes"]["ElectionStateChange"] == 24
    assert [a["node"] for a in summary["alignment"]] == [0, 1, 2]
    assert all(a["method"] == "capture" and a["boundNs"] < 500_000 for a in summary["alignment"])
    assert summary["problems"] == []
    kinds = sorted(i["kind"] for i in summary["inputs"])
    assert kinds == ["agent-log"] * 3 + ["capture"] + ["cluster-dir"] * 3
    with pa.memory_map(str(out)) as source:
        events, metadata = replay_file.read_events(source)
    assert metadata.cluster_members == readme_members(capture)
    # The member starts before anything it received or sent (its agent log's lines from before its
    # election left INIT, NEW_ELECTION and SERVICE_ACK among them, are observations and may come first).
    first = [e.type for e in events if e.node == 0 and "line" not in (e.extra or {})][0]
    assert first == "MemberStart"
    assert [e.type for e in events if e.node == 0][-1] == "End"
    assert all(a.ts <= b.ts for a, b in zip(events, events[1:], strict=False))


def test_every_decoded_field_is_queryable_by_its_aeron_name_from_plain_duckdb(incident):
    connection = duckdb.connect()  # plain pyarrow and DuckDB: no recount code involved
    connection.register("replay", pa.ipc.open_file(pa.memory_map(str(incident))).read_all())
    rows = connection.sql(
        "SELECT node, peer, candidateTermId, followerMemberId, vote, payload FROM replay"
        " WHERE type = 'Vote' AND dir = 'in' ORDER BY peer"
    ).fetchall()
    assert [r[:5] for r in rows] == [(1, 0, 0, 0, "TRUE"), (1, 2, 0, 2, "TRUE")]
    assert all(bytes(r[5])[2:4] == b"\x34\x00" for r in rows)  # the raw SBE bytes: templateId 52
    changes = connection.sql(
        "SELECT node, \"from\", \"to\" FROM replay WHERE type = 'ElectionStateChange' AND node = 1 ORDER BY seq"
    ).fetchall()
    assert changes[2:4] == [(1, "NOMINATE", "CANDIDATE_BALLOT"), (1, "CANDIDATE_BALLOT", "LEADER_LOG_REPLICATION")]


def test_the_format_is_told_by_magic_bytes_whatever_the_file_is_called(capture, tmp_path, capsys):
    disguised = tmp_path / "traffic.bin"
    disguised.write_bytes((capture / "capture.pcapng").read_bytes())
    code, document, _ = convert_json(capsys, str(disguised), "-o", str(tmp_path / "x.arrow"),
                                     "--members", readme_members(capture))
    assert code == 0
    assert document["capture"]["inputs"][0]["format"] == "pcapng"
    assert document["capture"]["eventTypes"]["RequestVote"] == 4


def test_without_members_the_members_are_inferred_with_a_warning(capture, tmp_path, capsys):
    out = tmp_path / "x.arrow"
    code = run(["convert", str(capture / "capture.pcap"), "-o", str(out)])
    _, err = capsys.readouterr()
    assert code == 0
    assert "cluster members inferred from the traffic" in err
    with pa.memory_map(str(out)) as source:
        events, metadata = replay_file.read_events(source)
    votes = sorted((e.node, e.peer) for e in events if e.type == "Vote" and e.dir == "in")
    assert votes == [(1, 0), (1, 2)]
    assert metadata.cluster_members.startswith("0,")


def test_a_capture_cut_short_converts_what_was_read_and_says_so(capture, tmp_path, capsys):
    data = (capture / "capture.pcap").read_bytes()
    cut = tmp_path / "killed.pcap"
    cut.write_bytes(data[: len(data) // 2 + 7])
    out = tmp_path / "x.arrow"
    code = run(["convert", str(cut), "-o", str(out), "--members", readme_members(capture)])
    _, err = capsys.readouterr()
    assert code == 0 and out.exists()
    assert "killed.pcap: the file ends inside a packet" in err
    assert re.search(r"killed\.pcap, offset \d+: ", err)


def test_a_capture_of_unrelated_traffic_fails_with_one_line_and_writes_nothing(capture, tmp_path, capsys):
    writer = PcapWriter()
    path = tmp_path / "dns.pcap"
    path.write_bytes(writer.file_header() + b"".join(
        writer.udp_packet(1_000 + i, "10.1.1.1", 53, "10.1.1.2", 40000 + i, b"\x12\x34\x81\x80" + bytes(20))
        for i in range(3)))
    out = tmp_path / "x.arrow"
    code = run(["convert", str(path), "-o", str(out), "--members", readme_members(capture)])
    _, err = capsys.readouterr()
    assert code == 2 and not out.exists()
    assert err.count("\n") == 1 and "dns.pcap: no Aeron cluster messages found" in err and "3 not Aeron" in err


def test_a_file_that_is_no_capture_at_all_fails_with_one_line(tmp_path, capsys):
    path = tmp_path / "notes.pcap"
    path.write_bytes(b"this is a text file, not a capture\n")
    code = run(["convert", str(path), "-o", str(tmp_path / "x.arrow")])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1
    assert "notes.pcap" in err and "pcap magic" in err


def test_an_unrecognisable_input_asks_for_its_format(tmp_path, capsys):
    path = tmp_path / "mystery.dat"
    path.write_bytes(bytes(range(64)))
    code = run(["convert", str(path), "-o", str(tmp_path / "x.arrow")])
    _, err = capsys.readouterr()
    assert code == 2 and "mystery.dat" in err and err.count("\n") == 1


def test_convert_runs_as_a_real_process_with_json_on_stdout_only(capture, tmp_path):
    out = tmp_path / "x.arrow"
    done = subprocess.run(
        [sys.executable, "-m", "cli", "convert", str(capture / "capture.pcapng"), str(capture / "node1"),
         "-o", str(out), "--members", readme_members(capture), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["events"] > 1000 and document["capture"]["eventTypes"]["MemberStart"] == 3
    assert PcapReader((capture / "capture.pcapng").read_bytes()).format == "pcapng"
