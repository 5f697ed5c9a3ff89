"""Hypothesis properties beside the mutation fuzzer (issue 14 item 2): for any input, each reader
gives a value or recount's own one-line `DecodeError`, never another exception.

The mutation fuzzer (`tests/test_fuzz.py`) starts from real files; these start from the shapes:
arbitrary bytes into each binary decoder, arbitrary JSON values under every known key of an event,
and replay tables whose metadata, column types and values are chosen by Hypothesis.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formats import node_state, replay_file
from formats.agent_log import read_agent_log
from formats.cluster_codecs_ext import decode_cluster
from formats.errors import DecodeError
from formats.events import CHANNELS, DIRECTIONS, LOCAL_TYPES, event_from_json, parse_jsonl
from formats.mark_file import MarkFile
from formats.pcap import PcapReader
from formats.recording_log import RecordingLog

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _reads_or_refuses(read, *args, **kwargs):
    try:
        return read(*args, **kwargs)
    except DecodeError as error:
        assert "\n" not in str(error)
        return None


# --- binary decoders: any bytes -----------------------------------------------------------------

# Headers that get the decoders past their first check, so that the bytes after them matter.
_PREFIXES = st.sampled_from([
    b"",
    struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1),  # pcap, nanoseconds, Ethernet
    struct.pack("<II", 0x0A0D0D0A, 28) + struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1),  # pcapng section start
    struct.pack("<HHHH", 42, 52, 111, 12),  # an SBE header: Vote
    struct.pack("<HHHH", 32, 51, 111, 12),  # RequestVote
    struct.pack("<HHHH", 128, 200, 110, 2),  # a mark file header
    struct.pack("<ii", 0x0300, 0),  # node-state.dat's header
])


@PROPERTY
@given(_PREFIXES, st.binary(max_size=600))
def test_any_bytes_are_a_capture_or_a_decode_error(prefix, data):
    reader = _reads_or_refuses(PcapReader, prefix + data, source="x.pcap")
    packets = None if reader is None else _reads_or_refuses(lambda: list(reader.packets()))
    if packets is not None:
        assert all(p.index >= 1 for p in packets)
        assert all(isinstance(problem, DecodeError) for problem in reader.problems)


@PROPERTY
@given(_PREFIXES, st.binary(max_size=300))
def test_any_bytes_are_a_message_or_a_decode_error(prefix, data):
    decoded = _reads_or_refuses(decode_cluster, prefix + data)
    if decoded is not None:
        decoded.message.to_fields()


@PROPERTY
@given(st.binary(max_size=400), st.booleans())
def test_any_bytes_are_a_recording_log_or_a_decode_error(data, strict):
    log = _reads_or_refuses(RecordingLog.decode, data, source="recording.log", strict=strict)
    if log is not None:
        assert len(log.entries) <= len(data) // 64 + 1


@PROPERTY
@given(_PREFIXES, st.binary(max_size=400))
def test_any_bytes_are_a_node_state_or_a_decode_error(prefix, data):
    state = _reads_or_refuses(node_state.NodeStateFile.decode, prefix + data, source="node-state.dat")
    if state is not None:
        node_state.node_state_to_json(state.state)


@PROPERTY
@given(_PREFIXES, st.binary(max_size=600))
def test_any_bytes_are_a_mark_file_or_a_decode_error(prefix, data):
    mark = _reads_or_refuses(MarkFile.decode, prefix + data, source="cluster-mark.dat")
    if mark is not None:
        mark.to_json()


@PROPERTY
@given(st.lists(st.text(max_size=200), max_size=8))
def test_any_text_is_an_agent_log_with_problems_never_an_exception(lines):
    log = read_agent_log([f"[1.000000000] CLUSTER: {line}" for line in lines], source="agent.log")
    assert all(isinstance(problem, DecodeError) for problem in log.problems)


# --- JSON Lines: every known key with a value of any JSON type -----------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False)
    | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=6,
)
_GOOD = {"ts": 1, "node": 0, "dir": "in", "peer": 1, "channel": "consensus", "type": "Vote",
         "fields": {"candidateTermId": 1, "logLeadershipTermId": -1, "logPosition": 0, "candidateMemberId": 0,
                    "followerMemberId": 1, "vote": "TRUE"}}
_KEYS = st.sampled_from([*_GOOD, "payload", "extraKey"])
_PLAUSIBLE = {
    "dir": st.sampled_from(DIRECTIONS),
    "channel": st.sampled_from(CHANNELS),
    "type": st.sampled_from(["Vote", "RequestVote", "NewLeadershipTerm", *LOCAL_TYPES]),
}


@PROPERTY
@given(st.dictionaries(_KEYS, _JSON, max_size=4), st.data())
def test_an_event_with_any_values_under_its_keys_is_an_event_or_a_decode_error(changes, data):
    record = dict(_GOOD)
    for key, value in changes.items():
        record[key] = data.draw(st.one_of(st.just(value), _PLAUSIBLE.get(key, st.just(value))))
    event = _reads_or_refuses(event_from_json, record, source="e.jsonl", line=1)
    if event is not None:
        # What an accepted event must be: the replay file holds it.
        assert isinstance(event.type, str) and isinstance(event.ts, int) and isinstance(event.fields, dict)
        replay_file.events_to_table([event], source="e.jsonl")


@PROPERTY
@given(st.lists(st.text(max_size=80), max_size=5))
def test_any_lines_are_events_or_a_decode_error_naming_a_line(lines):
    try:
        list(parse_jsonl(lines, source="e.jsonl"))
    except DecodeError as error:
        assert error.unit == "line" and 1 <= error.offset <= len(lines)


# --- replay tables: metadata, column types and values chosen by Hypothesis ------------------------

_TYPES = st.sampled_from([pa.int8(), pa.uint64(), pa.int64(), pa.int32(), pa.float64(), pa.string(), pa.binary(),
                          pa.bool_(), pa.list_(pa.int32()), pa.dictionary(pa.int32(), pa.string()), pa.null()])


def _array(kind: pa.DataType, rows: int, draw) -> pa.Array:
    if pa.types.is_dictionary(kind):
        return pa.array(draw(st.lists(st.sampled_from(["in", "out", "local", "log", "Vote", "x"]),
                                      min_size=rows, max_size=rows))).dictionary_encode()
    if pa.types.is_integer(kind):
        info = (0, 2**64 - 1) if kind == pa.uint64() else (-(2 ** (kind.bit_width - 1)), 2 ** (kind.bit_width - 1) - 1)
        values = st.none() | st.integers(*info)
    elif pa.types.is_string(kind):
        values = st.none() | st.sampled_from(["in", "local", "Vote", "{}", "[]", "{\"a\":1}", "x"]) | st.text(max_size=5)
    elif pa.types.is_binary(kind):
        values = st.none() | st.binary(max_size=60)
    elif pa.types.is_boolean(kind):
        values = st.none() | st.booleans()
    elif pa.types.is_floating(kind):
        values = st.none() | st.floats()
    elif pa.types.is_list(kind):
        values = st.none() | st.lists(st.integers(-5, 5), max_size=2)
    else:
        values = st.none()
    return pa.array(draw(st.lists(values, min_size=rows, max_size=rows)), type=kind)


@PROPERTY
@given(st.data())
def test_any_replay_table_reads_or_is_a_decode_error(data):
    rows = data.draw(st.integers(0, 4))
    names = data.draw(st.lists(st.sampled_from([*replay_file.BASE_COLUMNS, "candidateTermId", "vote"]),
                               min_size=0, max_size=12, unique=True))
    columns = {name: _array(data.draw(_TYPES), rows, data.draw) for name in names}
    metadata = data.draw(st.fixed_dictionaries({}, optional={
        "recount.format": st.sampled_from(["replay", "recording", ""]),
        "recount.formatVersion": st.sampled_from(["1", "0", "2", "x", "-1", "¹"]),
        "clusterMembers": st.text(max_size=10),
    }))
    table = pa.table(columns).replace_schema_metadata(metadata) if columns else pa.table({"a": []})
    table = table.replace_schema_metadata(metadata)
    table_bytes = replay_file.to_ipc_bytes(table)
    read = _reads_or_refuses(replay_file.read_table, table_bytes, name="x.arrow")
    if read is not None:
        events = _reads_or_refuses(replay_file.table_to_events, read, name="x.arrow")
        if events is not None:
            assert len(events) == rows
            assert all(isinstance(e.fields, dict) for e in events)


@pytest.mark.parametrize("text", ["[]", "1", "\"x\"", "null"])
def test_fields_json_that_is_not_an_object_is_refused_with_its_row(text):
    table = pa.table({"seq": pa.array([0], pa.uint64()), "ts": [1], "node": pa.array([0], pa.int32()),
                      "dir": ["in"], "channel": ["consensus"], "type": ["MemberStart"],
                      "peer": pa.array([None], pa.int32()), "fields": [text]})
    table = table.replace_schema_metadata({"recount.format": "replay", "recount.formatVersion": "1"})
    read = replay_file.read_table(replay_file.to_ipc_bytes(table), name="x.arrow")
    if text == "null":
        assert replay_file.table_to_events(read)[0].fields == {}
        return
    with pytest.raises(DecodeError, match=r"x.arrow, row 0: the fields column holds JSON \w+, expected an object"):
        replay_file.table_to_events(read, name="x.arrow")


def test_replay_metadata_values_that_are_not_utf8_are_refused_not_raised():
    table = pa.table({"seq": pa.array([], pa.uint64())})
    table = table.replace_schema_metadata({b"recount.format": b"replay", b"recount.formatVersion": b"\xff\xfe"})
    with pytest.raises(DecodeError, match="formatVersion is not an integer"):
        replay_file.read_table(replay_file.to_ipc_bytes(table), name="x.arrow")
