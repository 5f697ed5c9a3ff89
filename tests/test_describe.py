"""The one-line descriptions every front-end prints (formats.describe)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats import cluster_codecs as c
from formats.describe import describe_event, describe_fields, describe_message, describe_record, format_ts
from formats.events import message_event

VOTE_YES = c.Vote(
    candidate_term_id=3, log_leadership_term_id=5, log_position=96, candidate_member_id=0, follower_member_id=1,
    vote=c.BooleanType.TRUE,
)


def test_a_vote_reads_sender_to_receiver_with_a_check_mark():
    assert describe_message(VOTE_YES, 1, 0) == "1→0 Vote candidateTermId=3 log=(5,96) ✓"


def test_a_negative_vote_reads_with_a_cross_whatever_the_spelling_of_the_flag():
    assert describe_fields("Vote", {**VOTE_YES.to_fields(), "vote": False}, 1, 0).endswith("✗")
    assert describe_fields("Vote", {**VOTE_YES.to_fields(), "vote": "FALSE"}, 1, 0).endswith("✗")


def test_a_member_id_the_prefix_already_shows_is_left_out_and_a_different_one_is_news():
    canvass = c.CanvassPosition(log_leadership_term_id=-1, log_position=0, leadership_term_id=-1, follower_member_id=0)
    assert describe_message(canvass, 0) == "0→* CanvassPosition log=(-1,0) term=-1"
    assert describe_message(canvass, 2, 1) == "2→1 CanvassPosition log=(-1,0) term=-1 from=0"


def test_new_leadership_term_leaves_out_the_wall_clock_timestamp():
    message = c.NewLeadershipTerm(
        log_leadership_term_id=-1, next_leadership_term_id=0, next_term_base_log_position=0, next_log_position=-1,
        leadership_term_id=0, term_base_log_position=0, log_position=0, leader_recording_id=0, timestamp=1_700_000,
        leader_member_id=1, log_session_id=-7, app_version=1, is_startup=c.BooleanType.TRUE,
    )
    line = describe_message(message, 1, 0)
    assert line == "1→0 NewLeadershipTerm term=0 base=0 pos=0 logTerm=-1 next=(0,0,-1) session=-7 rec=0 startup"
    assert "1700000" not in line


def test_catchup_append_positions_say_so():
    message = c.AppendPosition(leadership_term_id=0, log_position=96, follower_member_id=2, flags=1)
    assert describe_message(message, 2, 1) == "2→1 AppendPosition term=0 pos=96 catchup"
    plain = c.AppendPosition(leadership_term_id=0, log_position=96, follower_member_id=2, flags=0)
    assert describe_message(plain, 2, 1) == "2→1 AppendPosition term=0 pos=96"


@pytest.mark.parametrize("type_name,fields,sender,line", [
    ("AppendPosition", {"leadershipTermId": 0, "logPosition": 96, "followerMemberId": 2, "flags": 255}, 2,
     "AppendPosition term=0 pos=96"),
    ("AppendPosition", {"leadershipTermId": 0, "logPosition": 96, "followerMemberId": 0, "flags": 2}, 2,
     "AppendPosition term=0 pos=96 from=0 flags=2"),
    ("AppendPosition", {"leadershipTermId": 0, "logPosition": 96, "followerMemberId": 0, "flags": 3}, None,
     "AppendPosition term=0 pos=96 from=0 catchup"),
    ("AppendPosition", {"leadershipTermId": None, "logPosition": 96, "flags": "x"}, 2,
     "AppendPosition term=null pos=96 flags=x"),
    ("CommitPosition", {"leadershipTermId": 1, "logPosition": 0, "leaderMemberId": 1}, 1, "CommitPosition term=1 pos=0"),
    ("CommitPosition", {"leadershipTermId": 1, "logPosition": 0, "leaderMemberId": 2}, 1,
     "CommitPosition term=1 pos=0 leader=2"),
    ("CommitPosition", {"leadershipTermId": 1, "logPosition": 0, "leaderMemberId": 2}, None,
     "CommitPosition term=1 pos=0 leader=2"),
])
def test_position_heartbeats_show_a_member_id_only_when_it_is_news_and_odd_flags(type_name, fields, sender, line):
    assert describe_fields(type_name, fields, sender, 0) == line


def test_a_send_record_reads_as_its_message_with_channel_and_log_position():
    record = {"kind": "send", "ts": 1, "node": 1, "peer": 0, "channel": "log", "type": "SessionMessageHeader",
              "fields": {"leadershipTermId": 0, "clusterSessionId": 7, "timestamp": 400}, "logPosition": 192}
    assert describe_record(record) == "1→0 [log] SessionMessageHeader term=0 session=7 @192"
    assert describe_record({**record, "channel": "consensus", "peer": None, "logPosition": None}) == (
        "1→? SessionMessageHeader term=0 session=7")


def test_a_message_without_a_compact_form_prints_every_field_by_aeron_name():
    assert describe_message(c.SessionKeepAlive(leadership_term_id=0, cluster_session_id=4)) == (
        "SessionKeepAlive leadershipTermId=0 clusterSessionId=4"
    )


def test_an_event_is_described_from_its_direction():
    received = message_event(VOTE_YES, ts=5, node=0, dir="in", peer=1, channel="consensus")
    sent = message_event(VOTE_YES, ts=5, node=1, dir="out", peer=0, channel="consensus")
    assert describe_event(received) == describe_event(sent) == "1→0 Vote candidateTermId=3 log=(5,96) ✓"


@pytest.mark.parametrize(
    "record, line",
    [
        ({"kind": "state", "ts": 0, "node": 0, "from": "INIT", "to": "CANVASS", "reason": ""}, "0 INIT → CANVASS"),
        (
            {"kind": "state", "ts": 0, "node": 2, "from": "FOLLOWER_READY", "to": "INIT", "reason": "WARN - boom"},
            "2 FOLLOWER_READY → INIT (WARN - boom)",
        ),
        ({"kind": "role", "ts": 0, "node": 1, "from": "FOLLOWER", "to": "CANDIDATE"}, "1 role FOLLOWER → CANDIDATE"),
        (
            {"kind": "nodeState", "ts": 0, "node": 1, "candidateTermId": 0, "logPosition": 0, "timestamp": 9},
            "1 node-state candidateTermId=0 logPosition=0",
        ),
        (
            {
                "kind": "recordingLog", "ts": 0, "node": 1, "op": "appendTerm",
                "entry": {"leadershipTermId": 0, "termBaseLogPosition": 0, "logPosition": -1, "type": "TERM"},
            },
            "1 recording.log appendTerm term=0 base=0 pos=-1",
        ),
        (
            {"kind": "random", "ts": 0, "node": 1, "draw": "nextDouble", "value": 0.25, "source": "seeded"},
            "1 random nextDouble=0.25 (seeded)",
        ),
        (
            {"kind": "invariant", "ts": 0, "node": 1, "name": "log-contiguous", "detail": "gap"},
            "1 INVARIANT log-contiguous: gap",
        ),
        (
            {
                "kind": "send", "ts": 0, "node": 1, "peer": 0, "channel": "consensus", "type": "CommitPosition",
                "fields": {"leadershipTermId": -1, "logPosition": 0, "leaderMemberId": 1},
            },
            "1→0 CommitPosition term=-1 pos=0",
        ),
    ],
)
def test_trace_records_read_as_one_line(record, line):
    assert describe_record(record) == line


def test_a_divergence_names_both_sides():
    record = {
        "kind": "divergence", "ts": 0, "node": 1, "event": 12,
        "expected": {"ts": 0, "node": 1, "dir": "out", "peer": 0, "type": "Vote", "fields": VOTE_YES.to_fields()},
        "actual": None, "state": {},
    }
    assert describe_record(record) == "1 DIVERGENCE expected 1→0 Vote candidateTermId=3 log=(5,96) ✓ actual nothing"


def test_times_are_whole_milliseconds_when_they_can_be():
    assert format_ts(1_150_000_000) == "1150ms"
    assert format_ts(1_150_000_123) == "1150.000123ms"


def test_a_divergence_on_an_observation_reads_like_the_agent_log_line():
    record = {
        "kind": "divergence", "ts": 0, "node": 0, "event": 3,
        "expected": {"ts": 0, "node": 0, "dir": "local", "type": "ElectionStateChange", "fields": {"from": "INIT", "to": "CANVASS"}},
        "actual": None, "state": {},
    }
    assert describe_record(record) == "0 DIVERGENCE expected 0 INIT → CANVASS (observed) actual nothing"


_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.integers(-(2**63), 2**63 - 1), st.floats(0, 2),
                    st.sampled_from(["", "x y", "1"]))


@given(st.sampled_from(["AppendPosition", "CommitPosition", "SessionMessageHeader"]),
       st.dictionaries(st.sampled_from(["leadershipTermId", "logPosition", "followerMemberId", "flags", "leaderMemberId",
                                        "clusterSessionId", "timestamp"]), _VALUES, max_size=2),
       st.one_of(st.none(), st.integers(0, 3)), st.one_of(st.none(), st.integers(0, 3)),
       st.sampled_from([None, "consensus", "log"]), st.one_of(st.none(), st.integers(0, 99), _VALUES))
@settings(max_examples=400)
def test_a_send_written_at_once_reads_as_its_fields_describe_it(type_name, fields, node, peer, channel, log_position):
    """`describe_send` writes a cluster at work's sends without `describe_fields` (the timeline's most lines):
    the same text, whatever the values (ints, the member ids the prefix shows, or anything else)."""
    from formats.describe import _send_head, _v, describe_fields, describe_send

    # the values of a send written at once, with some replaced by the drawn ones (near the case, each way out)
    fields = {"leadershipTermId": 1, "logPosition": 64, "followerMemberId": node, "leaderMemberId": node, "flags": 0,
              "clusterSessionId": 7, **fields}
    text = _send_head(node, peer, channel) + describe_fields(type_name, fields, node, peer)
    expected = text if log_position is None else f"{text} @{_v(log_position)}"
    assert describe_send(node, peer, channel, type_name, fields, log_position) == expected
