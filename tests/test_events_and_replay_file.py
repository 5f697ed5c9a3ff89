"""JSON Lines events (contract §1) and the Arrow replay file (contract §2)."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from formats import cluster_codecs as codecs
from formats.errors import DecodeError
from formats.events import Event, message_event, parse_jsonl
from formats.replay_file import (
    FORMAT_VERSION,
    events_to_table,
    read_events,
    read_table,
    to_ipc_bytes,
)
from formats.sbe import encode

MEMBERS = "0,h:1,h:2,h:3,h:4,h:5|1,h:11,h:12,h:13,h:14,h:15|2,h:21,h:22,h:23,h:24,h:25"

LINES = [
    "# a hand-written scenario",
    '{"ts":0,"node":0,"dir":"local","peer":null,"channel":"local","type":"MemberStart","fields":{"clusterMembers":"%s"}}' % MEMBERS,
    "",
    '{"ts":5000000,"node":0,"dir":"in","peer":1,"channel":"consensus","type":"RequestVote","fields":'
    '{"logLeadershipTermId":-1,"logPosition":0,"candidateTermId":0,"candidateMemberId":1,"protocolVersion":65536}}',
    '{"ts":5000000,"node":0,"dir":"out","peer":1,"channel":"consensus","type":"Vote","fields":{"candidateTermId":0,'
    '"logLeadershipTermId":-1,"logPosition":0,"candidateMemberId":1,"followerMemberId":0,"vote":true},"note":"kept"}',
]


def test_jsonl_lines_become_events_skipping_comments_and_blanks():
    events = list(parse_jsonl(LINES, source="s.jsonl"))
    assert [e.type for e in events] == ["MemberStart", "RequestVote", "Vote"]
    assert events[2].extra == {"note": "kept"}
    assert events[2].message().vote is codecs.BooleanType.TRUE


@pytest.mark.parametrize(
    "line, expected",
    [
        ("{not json", "line 1: not valid JSON"),
        ("[1,2]", "expected a JSON object"),
        ('{"ts":1,"node":0,"dir":"in","peer":1,"channel":"consensus","type":"Voet","fields":{}}', "unknown message type 'Voet'"),
        ('{"ts":1,"node":0,"dir":"in","peer":1,"channel":"consensus","type":"Vote","fields":{}}', "missing field 'candidateTermId'"),
        ('{"ts":1,"node":0,"dir":"sideways","peer":1,"channel":"consensus","type":"Vote","fields":{}}', "'dir' must be"),
        ('{"node":0,"dir":"in","peer":1,"channel":"consensus","type":"Vote","fields":{}}', "missing key 'ts'"),
        ('{"ts":"soon","node":0,"dir":"in","peer":1,"channel":"consensus","type":"Vote"}', "'ts' must be an integer"),
    ],
)
def test_a_malformed_line_names_the_file_and_line(line, expected):
    with pytest.raises(DecodeError) as error:
        list(parse_jsonl([line], source="bad.jsonl"))
    assert str(error.value).startswith("bad.jsonl, line 1")
    assert expected.split(": ", 1)[-1] in str(error.value)


def test_time_going_backwards_for_one_node_is_refused():
    a = '{"ts":10,"node":0,"dir":"local","peer":null,"channel":"local","type":"End","fields":{}}'
    b = '{"ts":5,"node":0,"dir":"local","peer":null,"channel":"local","type":"End","fields":{}}'
    c = '{"ts":5,"node":1,"dir":"local","peer":null,"channel":"local","type":"End","fields":{}}'
    assert len(list(parse_jsonl([a, c]))) == 2
    with pytest.raises(DecodeError, match="line 2: ts 5 is earlier"):
        list(parse_jsonl([a, b]))


def _sample_events():
    events = list(parse_jsonl(LINES))
    commit = codecs.CommitPosition(leadership_term_id=0, log_position=96, leader_member_id=1)
    events.append(message_event(commit, ts=6_000_000, node=0, dir="in", peer=1, channel="consensus", payload=encode(commit)))
    return events


def test_replay_file_round_trips_events_losslessly():
    events = _sample_events()
    table = events_to_table(events, source="unit", cluster_members=MEMBERS)
    back, meta = read_events(to_ipc_bytes(table))
    assert meta.cluster_members == MEMBERS and meta.source == "unit" and meta.format_version == FORMAT_VERSION
    expected = [
        Event(ts=e.ts, node=e.node, dir=e.dir, peer=e.peer, channel=e.channel, type=e.type,
              fields=e.message().to_fields() if e.is_message else e.fields, payload=e.payload, extra=e.extra).to_json()
        for e in events
    ]
    assert [e.to_json() for e in back] == expected
    assert back[-1].payload == encode(codecs.CommitPosition(leadership_term_id=0, log_position=96, leader_member_id=1))


def test_every_field_is_queryable_by_its_aeron_name_from_plain_duckdb():
    table = events_to_table(_sample_events(), source="unit")
    con = duckdb.connect()
    con.register("events", table)
    rows = con.execute(
        "select type, candidateTermId, vote, logPosition from events where dir = 'out' or type = 'CommitPosition' order by seq"
    ).fetchall()
    assert rows == [("Vote", 0, "TRUE", 0), ("CommitPosition", None, None, 96)]
    assert table.schema.field("seq").type == pa.uint64()
    assert table.schema.field("peer").type == pa.int32()


def test_a_newer_format_version_is_refused_with_a_clear_message():
    table = events_to_table(_sample_events(), source="unit")
    newer = table.replace_schema_metadata({**{k.decode(): v.decode() for k, v in table.schema.metadata.items()},
                                           "recount.formatVersion": str(FORMAT_VERSION + 1)})
    with pytest.raises(DecodeError, match="newer than this recount reads"):
        read_table(to_ipc_bytes(newer), name="future.arrow")


def test_a_stream_format_file_is_accepted_and_a_cut_stream_keeps_whole_batches():
    table = events_to_table(_sample_events(), source="unit")
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        for batch in table.to_batches(max_chunksize=1):
            writer.write_batch(batch)
    data = sink.getvalue().to_pybytes()
    assert read_table(data).num_rows == table.num_rows
    cut = read_table(data[: len(data) - 40])
    assert 0 < cut.num_rows < table.num_rows


def test_random_bytes_are_not_a_replay_file():
    with pytest.raises(DecodeError, match="not an Arrow IPC"):
        read_table(b"\x00\x01garbage" * 10, name="x.arrow")


def test_compressed_files_read_back_and_other_metadata_is_kept():
    table = events_to_table(_sample_events(), source="unit", metadata={"recount.seed": "42"})
    small = to_ipc_bytes(table, compression="zstd")
    back, meta = read_events(small)
    assert len(back) == table.num_rows
    assert meta.extra == {"recount.seed": "42"}
