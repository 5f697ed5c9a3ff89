"""The second round of pcap-import shortcuts give what the plain code gives.

`formats.events.new_event` is ``Event(...)`` with positional values; `formats.replay_file` writes
the importers' usual ``extra`` mappings as text directly; `DatagramDecoder` counts messages by
(channel, type) and names them ``channel/type`` only when asked, and skips the arrival bookkeeping
of a frame that delivers its own message.  Each is compared here with the long way round.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats import cluster_codecs as cc
from formats import replay_file
from formats.events import Event, new_event
from formats.udp import BEGIN_FLAG, END_FLAG, DataFrame, encode_frame
from recorder.capture.datagrams import DatagramDecoder
from recorder.capture.members import MemberMap
from recorder.record.reader import Datagram

DUMPS = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
MEMBERS = MemberMap.parse("0,10.0.0.1:1,10.0.0.1:2,10.0.0.1:3,10.0.0.1:4,10.0.0.1:5|"
                          "1,10.0.0.2:1,10.0.0.2:2,10.0.0.2:3,10.0.0.2:4,10.0.0.2:5")


def test_a_positional_event_equals_the_keyword_one_and_is_frozen():
    fields = {"vote": "TRUE"}
    fast = new_event(5, 1, "in", 0, "consensus", "Vote", fields, b"\x01", {"packet": 3})
    plain = Event(ts=5, node=1, dir="in", peer=0, channel="consensus", type="Vote", fields=fields,
                  payload=b"\x01", extra={"packet": 3})
    assert fast == plain and type(fast) is Event and fast.fields is fields
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.ts = 6


EXTRA_VALUES = st.one_of(st.integers(min_value=-(1 << 70), max_value=1 << 70), st.booleans(), st.none(),
                         st.text(max_size=3))
EXTRAS = st.one_of(
    st.builds(lambda p: {"packet": p}, EXTRA_VALUES),
    st.builds(lambda q, p: {"logPosition": q, "packet": p}, EXTRA_VALUES, EXTRA_VALUES),
    st.builds(lambda p, q: {"packet": p, "logPosition": q}, EXTRA_VALUES, EXTRA_VALUES),  # other order
    st.dictionaries(st.sampled_from(("packet", "logPosition", "line", "é\"")), EXTRA_VALUES, max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(EXTRAS, min_size=1, max_size=8))
def test_the_extra_column_is_each_events_extra_as_json_text(extras):
    events = [Event(ts=i, node=0, dir="local", peer=None, channel="local", type="End", extra=extra)
              for i, extra in enumerate(extras)]
    table = replay_file.events_to_table(events, source="test")
    assert table.column("extra").to_pylist() == [DUMPS(extra) if extra else None for extra in extras]


def data_frame(session: int, term_offset: int, payload: bytes) -> bytes:
    return encode_frame(DataFrame(frame_length=32 + len(payload), flags=BEGIN_FLAG | END_FLAG,
                                  term_offset=term_offset, session_id=session, stream_id=108, term_id=0,
                                  payload=payload))


def test_messages_in_order_after_a_filled_hole_keep_their_times_and_are_counted_by_channel_and_type():
    decoder = DatagramDecoder(MEMBERS)
    vote = cc.Vote(candidate_term_id=1, log_leadership_term_id=0, log_position=0, candidate_member_id=1,
                   follower_member_id=0, vote=cc.BooleanType.TRUE).encode()
    size = (32 + len(vote) + 31) & -32
    sent = [(10, 0), (20, 2 * size), (30, size), (40, 3 * size)]  # the second frame overtakes the first
    events = []
    for packet, (ts, offset) in enumerate(sent, 1):
        datagram = Datagram(ts, "10.0.0.1", 40000, "10.0.0.2", 2, data_frame(7, offset, vote))
        events += decoder.feed(datagram, packet)
    events += decoder.finish()[0]
    received = sorted((e.ts, e.extra["packet"]) for e in events if e.dir == "in")
    # The held-back message is received with the frame that filled the hole; the others at once.
    assert received == [(10, 1), (30, 3), (30, 3), (40, 4)]
    assert dict(decoder.messages) == {"consensus/Vote": 4}
