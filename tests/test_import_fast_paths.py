"""The fast paths of the pcap → replay file import give what the plain rules say.

`formats.replay_file` builds its per-name columns group by group and puts them back in event
order with one `take`; these tests read the fields row by row, as the contract words it, and
compare.  Also: decoded messages and events built through their mutable twins are ordinary frozen
values, and the garbage collector paused during an import is back on afterwards, even after an error.
"""

from __future__ import annotations

import dataclasses
import gc
import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats import cluster_codecs as cc
from formats import replay_file
from formats.cluster_codecs_ext import decode_cluster
from formats.errors import DecodeError
from formats.events import Event
from recorder.capture.pcap_import import decode_captures

NAMES = ("leadershipTermId", "logPosition", "vote", "endpoint", "members", "ts", "big")
VALUES = st.one_of(
    st.none(),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
    st.integers(min_value=1 << 63, max_value=1 << 70),
    st.booleans(),
    st.text(max_size=5),
    st.lists(st.integers(min_value=0, max_value=9), max_size=2),
)
FIELDS = st.dictionaries(st.sampled_from(NAMES), VALUES, max_size=5)


def expected_column(values: list) -> tuple[pa.DataType, list]:
    """A per-name column as the contract (§2) words it, from the values row by row."""
    present = [v for v in values if v is not None]
    kinds = {type(v) for v in present}
    if kinds == {int} and all(-(1 << 63) <= v < (1 << 63) for v in present):
        return pa.int64(), values
    if kinds == {bool}:
        return pa.bool_(), values
    if kinds == {str}:
        return pa.string(), values
    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    return pa.string(), [None if v is None else dumps(v) for v in values]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(FIELDS, st.booleans()), max_size=12))
def test_per_name_columns_and_fields_text_match_a_row_by_row_reading(rows):
    events = []
    for fields, share_previous in rows:
        if share_previous and events:
            fields = events[-1].fields  # an out and an in event of one message share one dict
        events.append(Event(ts=len(events), node=0, dir="local", peer=None, channel="local",
                            type="AgentEvent", fields=fields, extra={"packet": len(events)}))
    table = replay_file.events_to_table(events, source="test")
    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    assert table.column("fields").to_pylist() == [dumps(e.fields) for e in events]
    assert table.column("extra").to_pylist() == [dumps(e.extra) for e in events]
    names = sorted({name for e in events for name in e.fields if name not in replay_file.BASE_COLUMNS})
    assert [n for n in table.column_names if n not in replay_file.BASE_COLUMNS] == names
    for name in names:
        kind, values = expected_column([e.fields.get(name) for e in events])
        column = table.column(name)
        assert column.type == kind, name
        assert column.to_pylist() == values, name


def test_a_name_that_shadows_a_base_column_stays_only_in_fields():
    events = [Event(ts=1, node=0, dir="local", peer=None, channel="local", type="AgentEvent",
                    fields={"ts": 5, "node": "x", "other": 1})]
    table = replay_file.events_to_table(events, source="test")
    assert table.column("ts").to_pylist() == [1]
    assert table.column("node").to_pylist() == [0]
    assert json.loads(table.column("fields")[0].as_py()) == {"ts": 5, "node": "x", "other": 1}


def test_the_garbage_collector_is_on_again_after_a_table_and_after_a_failed_one():
    assert gc.isenabled()
    replay_file.events_to_table([], source="test")
    assert gc.isenabled()
    broken = Event(ts=1, node=0, dir="local", peer=None, channel="local", type="AgentEvent",
                   fields={"what": object()})  # not JSON: the encoder raises
    with pytest.raises(TypeError):
        replay_file.events_to_table([broken], source="test")
    assert gc.isenabled()


def test_the_garbage_collector_is_on_again_after_a_capture_that_holds_nothing():
    header = bytes.fromhex("d4c3b2a1020004000000000000000000ffff000001000000")  # classic pcap, Ethernet
    with pytest.raises(DecodeError):
        decode_captures([("empty.pcap", header)], None)
    assert gc.isenabled()


def test_a_garbage_collector_turned_off_by_the_caller_stays_off():
    gc.disable()
    try:
        replay_file.events_to_table([], source="test")
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("spec", cc.MESSAGES, ids=lambda spec: spec.name)
def test_a_decoded_message_is_a_frozen_instance_of_its_own_class(spec):
    fields = {f.attr: (next(iter(f.enum)) if f.enum is not None else 7) for f in spec.block.fields}
    message = spec.block.cls(**fields)
    decoded = decode_cluster(message.encode())
    assert type(decoded.message) is spec.block.cls
    assert decoded.message == message
    assert type(decoded).__name__ == "Decoded"
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(decoded.message, spec.block.fields[0].attr, 1)


def test_enum_values_become_their_names_in_fields_and_unknown_ones_stay_numbers():
    vote = cc.Vote(candidate_term_id=2, log_leadership_term_id=1, log_position=64, candidate_member_id=0,
                   follower_member_id=1, vote=cc.BooleanType.TRUE)
    assert vote.to_fields()["vote"] == "TRUE"
    odd = decode_cluster(dataclasses.replace(vote, vote=7).encode()).message  # a value not in the schema
    assert odd.vote == 7 and odd.to_fields()["vote"] == 7


def test_an_event_is_frozen_and_gets_its_own_empty_fields_when_none_are_given():
    first = Event(ts=1, node=0, dir="in", peer=1, channel="consensus", type="Vote")
    second = Event(ts=1, node=0, dir="in", peer=1, channel="consensus", type="Vote")
    assert first == second and first.fields == {} and first.fields is not second.fields
    assert type(first) is Event
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.ts = 2
    with pytest.raises(TypeError):
        Event(ts=1, node=0, dir="in", peer=1, channel="consensus")  # type is required
    assert dataclasses.replace(first, ts=9).ts == 9
