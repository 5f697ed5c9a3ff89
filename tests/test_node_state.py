"""node-state.dat: the file Aeron creates, record scanning, Aeron's writers, the real 1.42 and 1.47 files."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.errors import DecodeError
from formats.node_state import FILE_LENGTH, CandidateTerm, NodeStateFile, node_state_to_json

# What Aeron 1.41+ writes on creation (aeron-formats.md §5), written out by hand.
NEW_FILE_HEAD = bytes.fromhex(
    "00030000" "00000000"  # nodeStateHeader: version 0.3.0 (768), padding
    "1800" "2d01" "7000" "0a00" "28000000" "00000000"  # blockLength 24, template 301, schema 112, v10, frameLength 40
    + "ff" * 24  # candidateTermId, timestamp, logPosition = -1
    + "0000" "3001" "7000" "0a00" "10000000" "00000000"  # footer: template 304, frameLength 16
)


def _file(*records: bytes, version: int = 0x300) -> bytearray:
    data = bytearray(FILE_LENGTH)
    data[0:8] = struct.pack("<ii", version, 0)
    position = 8
    for record in records:
        data[position : position + len(record)] = record
        position += (len(record) + 7) & ~7
    return data


def _record(template_id: int, body: bytes, *, block_length: int | None = None, frame_length: int | None = None,
            schema_id: int = 112) -> bytes:
    length = 16 + len(body) if frame_length is None else frame_length
    block = len(body) if block_length is None else block_length
    return struct.pack("<HHHHii", block, template_id, schema_id, 10, length, 0) + body


FOOTER = _record(304, b"")


def test_a_new_file_is_exactly_what_aeron_creates():
    data = NodeStateFile.create().to_bytes()
    assert len(data) == FILE_LENGTH
    assert data[: len(NEW_FILE_HEAD)] == NEW_FILE_HEAD
    assert not any(data[len(NEW_FILE_HEAD) :])


def test_a_new_file_reads_candidate_term_id_minus_one():
    assert NodeStateFile.create().candidate_term == CandidateTerm(-1, -1, -1)


def test_update_writes_all_three_fields_unconditionally():
    state = NodeStateFile.create()
    state.update_candidate_term_id(5, 4096, 1700000000000)
    state.update_candidate_term_id(2, 0, 1)
    assert struct.unpack_from("<qqq", state.to_bytes(), 24) == (2, 1, 0)
    assert NodeStateFile.decode(state.to_bytes()).candidate_term == CandidateTerm(2, 1, 0)


def test_propose_max_writes_only_a_higher_candidate_term_and_returns_the_maximum():
    state = NodeStateFile.create()
    assert state.propose_max_candidate_term_id(3, 100, 7) == 3
    before = state.to_bytes()
    assert state.propose_max_candidate_term_id(3, 999, 8) == 3
    assert state.propose_max_candidate_term_id(1, 999, 8) == 3
    assert state.to_bytes() == before
    assert state.propose_max_candidate_term_id(4, 200, 9) == 4
    assert state.candidate_term == CandidateTerm(4, 9, 200)


def test_the_candidate_term_is_found_by_scanning_not_at_a_fixed_offset():
    unknown = _record(399, bytes(13))  # 29 bytes: the next record starts 8-aligned at +32
    data = _file(unknown, _record(301, struct.pack("<qqq", 7, 8, 9)), FOOTER)
    state = NodeStateFile.decode(data).state
    assert state.candidate_term == CandidateTerm(7, 8, 9)
    assert [r.offset for r in state.records] == [8, 40, 80]
    assert node_state_to_json(state)["unknownRecords"] == [{"templateId": 399, "offset": 8, "frameLength": 29}]


def test_json_puts_candidate_term_first_with_the_contract_keys():
    document = NodeStateFile.create().to_json()
    assert list(document) == ["candidateTerm", "nodeStateHeader", "nodeStateFooter"]
    assert document["candidateTerm"] == {"candidateTermId": -1, "logPosition": -1, "timestamp": -1}


@settings(max_examples=100, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1))
def test_any_candidate_term_round_trips_through_the_file(term, position, timestamp):
    state = NodeStateFile.create()
    state.update_candidate_term_id(term, position, timestamp)
    assert NodeStateFile.decode(state.to_bytes()).candidate_term == CandidateTerm(term, timestamp, position)


# --- files Aeron refuses, and files that are not node-state.dat at all ---


@pytest.mark.parametrize(
    "data, offset, message",
    [
        (b"", None, "empty file"),
        (b"\x00\x03\x00", 0, "only 3 bytes"),
        (bytes(_file(FOOTER, version=0x010300)), 0, "major version 1"),
        (bytes(_file(_record(301, bytes(24)))), 48, "failed to find NodeStateFooter"),
        (bytes(_file(_record(301, bytes(24), frame_length=-8), FOOTER)), 8, "frameLength -8 < 0"),
        (bytes(_file(_record(301, bytes(24), frame_length=0), FOOTER)), 8, "failed to find NodeStateFooter"),
        (bytes(_file(_record(303, bytes(16) + bytes(4)), FOOTER)), 8, "failed to find CandidateTerm"),
        (bytes(_file(_record(301, bytes(24), schema_id=111), FOOTER)), 8, "schemaId 111"),
        (bytes(_file(_record(301, bytes(24)))[:30]), 8, "cut short by the end of the file"),
        (bytes(_file(_record(301, bytes(24)))[:20]), 8, "record header cut short"),
    ],
    ids=["empty", "short", "major", "no-footer", "negative-frame", "zero-frame", "no-candidate-term",
         "wrong-schema", "record-cut", "header-cut"],
)
def test_damaged_files_raise_decode_error_with_the_offset(data, offset, message):
    with pytest.raises(DecodeError, match=message) as raised:
        NodeStateFile.decode(data, source="node-state.dat")
    assert raised.value.offset == offset
    assert str(raised.value).startswith("node-state.dat")


def test_a_recording_log_passed_as_node_state_is_refused(capture):
    with pytest.raises(DecodeError, match="offset 8: failed to find NodeStateFooter"):
        NodeStateFile.decode((capture / "node0" / "recording.log").read_bytes(), source="recording.log")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_arbitrary_bytes_decode_or_raise_decode_error_and_nothing_else(data):
    try:
        NodeStateFile.decode(data)
    except DecodeError as error:
        assert "\n" not in str(error)


# --- real files ---


def test_the_real_aeron_1_42_file_decodes_to_the_values_aerons_test_expects(schemas):
    data = (schemas / "test-vectors" / "v1_42_x" / "node-state.dat").read_bytes()
    state = NodeStateFile.decode(data, source="v1_42_x/node-state.dat")
    assert state.candidate_term == CandidateTerm(982374, 9878967687234, 89723648762342)
    members = state.state.cluster_members
    assert (members.leadership_term_id, members.member_id, members.high_member_id) == (10001, 10002, 10003)
    assert len(members.cluster_members) == 252 and members.cluster_members.startswith("10001,localhost:20110,")
    assert [(r.name, r.offset) for r in state.state.records] == [
        ("candidateTerm", 8), ("ClusterMembers", 48), ("nodeStateFooter", 336)
    ]
    assert state.to_json()["ClusterMembers"]["highMemberId"] == 10003
    assert state.to_bytes() == data


@pytest.mark.parametrize("node", [0, 1, 2])
def test_the_real_1_47_files_are_a_new_file_plus_one_update(capture, node):
    data = (capture / f"node{node}" / "node-state.dat").read_bytes()
    term = NodeStateFile.decode(data).candidate_term
    assert term.candidate_term_id == 0 and term.log_position == 0
    rebuilt = NodeStateFile.create()
    rebuilt.update_candidate_term_id(term.candidate_term_id, term.log_position, term.timestamp)
    assert rebuilt.to_bytes() == data
