"""The 54 cluster messages: conformance with Aeron's schema XML, golden bytes, round-trips and
corrupt input, in the manner of h11's codec tests."""

from __future__ import annotations

import enum
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import formats.cluster_codecs as codecs
from formats.cluster_codecs_ext import decode_cluster
from formats.errors import DecodeError
from formats.sbe import PRIMITIVES, encode, from_fields, snake_case
from tests.tools.gen_sbe_codecs import generate, parse_schema

# Golden vectors: aeron-formats.md §2.9, produced there by SBE-generated Java codecs (schema 111 v12).
GOLDEN = [
    (
        codecs.AppendPosition(leadership_term_id=3, log_position=1234567, follower_member_id=2, flags=1),
        "150036006f000c00 0300000000000000 87d6120000000000 0200000001",
        b"",
    ),
    (
        codecs.CanvassPosition(
            log_leadership_term_id=5, log_position=4096, leadership_term_id=6, follower_member_id=1, protocol_version=0x010000
        ),
        "200032006f000c00 0500000000000000 0010000000000000 0600000000000000 0100000000000100",
        b"",
    ),
    (
        codecs.SessionMessageHeader(leadership_term_id=1, cluster_session_id=7, timestamp=1700000000123),
        "180001006f000c00 0100000000000000 0700000000000000 7b68e5cf8b010000 68656c6c6f",
        b"hello",
    ),
    (
        codecs.SessionOpenEvent(
            leadership_term_id=1,
            correlation_id=42,
            cluster_session_id=7,
            timestamp=1700000000000,
            response_stream_id=102,
            response_channel="aeron:udp?endpoint=localhost:9020",
            encoded_principal=bytes([1, 2, 3]),
        ),
        "240015006f000c00 0100000000000000 2a00000000000000 0700000000000000"
        "0068e5cf8b010000 6600000021000000 6165726f6e3a7564 703f656e64706f69"
        "6e743d6c6f63616c 686f73743a393032 3003000000010203",
        b"",
    ),
    (
        codecs.StandbySnapshot(
            correlation_id=9,
            version=0x010000,
            response_stream_id=-1,
            snapshots=(
                codecs.StandbySnapshotSnapshots(
                    recording_id=11,
                    leadership_term_id=2,
                    term_base_log_position=0,
                    log_position=8192,
                    timestamp=1000,
                    service_id=-1,
                    archive_endpoint="host:8010",
                ),
            ),
        ),
        "100051006f000c00 0900000000000000 00000100ffffffff 2c0001000b000000"
        "0000000002000000 0000000000000000 0000000000200000 00000000e8030000"
        "00000000ffffffff 09000000686f7374 3a38303130000000 0000000000",
        b"",
    ),
]


def _hex(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


@pytest.mark.parametrize("message, golden, payload", GOLDEN, ids=lambda v: type(v).__name__ if hasattr(v, "SPEC") else "")
def test_golden_vectors_encode_and_decode_byte_for_byte(message, golden, payload):
    expected = _hex(golden)
    assert encode(message) + payload == expected
    decoded = decode_cluster(expected)
    assert decoded.message == message
    assert expected[decoded.end :] == payload


def test_the_schema_has_all_54_messages_of_version_12():
    assert codecs.SCHEMA_ID == 111 and codecs.SCHEMA_VERSION == 12
    assert len(codecs.MESSAGES) == 54
    assert len({s.template_id for s in codecs.MESSAGES}) == 54


def test_every_message_matches_the_official_schema_xml(schemas):
    """Parse Aeron's XML here, independently of the generator's output, and compare layouts."""
    import xml.etree.ElementTree as ET

    root = ET.parse(schemas / "aeron-cluster-codecs.xml").getroot()
    ns = "{http://fixprotocol.io/2016/sbe}"
    types = {el.get("name"): el for el in root.find("types")}
    sizes = {"int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8}

    def primitive_of(type_name: str) -> str:
        if type_name in sizes:
            return type_name
        el = types[type_name]
        if el.tag == "enum":
            return el.get("encodingType")
        return el.get("primitiveType")

    def check_block(xml_el, spec_block, label):
        offset = 0
        xml_fields = [c for c in xml_el if c.tag == "field"]
        assert [f.name for f in spec_block.fields] == [c.get("name") for c in xml_fields], label
        for child, f in zip(xml_fields, spec_block.fields, strict=True):
            primitive = primitive_of(child.get("type"))
            assert f.primitive == primitive, f"{label}.{f.name} type"
            assert f.offset == offset, f"{label}.{f.name} offset"
            assert f.since_version == int(child.get("sinceVersion", 0)), f"{label}.{f.name} sinceVersion"
            offset += sizes[primitive]
        assert spec_block.block_length == offset, f"{label} blockLength"
        xml_groups = [c for c in xml_el if c.tag == "group"]
        assert [g.name for g in spec_block.groups] == [c.get("name") for c in xml_groups], label
        for child, g in zip(xml_groups, spec_block.groups, strict=True):
            check_block(child, g.entry, f"{label}.{g.name}")
        xml_data = [c for c in xml_el if c.tag == "data"]
        assert [v.name for v in spec_block.var_data] == [c.get("name") for c in xml_data], label
        for child, v in zip(xml_data, spec_block.var_data, strict=True):
            assert v.is_ascii == (child.get("type") == "varAsciiEncoding"), f"{label}.{v.name}"

    xml_messages = root.findall(f"{ns}message")
    assert len(xml_messages) == 54
    for el in xml_messages:
        spec = codecs.MESSAGES_BY_TEMPLATE_ID[int(el.get("id"))]
        assert spec.name == el.get("name")
        check_block(el, spec.block, spec.name)
        assert spec.deprecated == (int(el.get("deprecated")) if el.get("deprecated") else None)


def test_the_generated_module_is_what_the_generator_makes_of_the_schema(schemas):
    from pathlib import Path

    generated = generate(parse_schema(schemas / "aeron-cluster-codecs.xml"), "aeron-cluster-codecs.xml")
    on_disk = (Path(codecs.__file__)).read_text()
    assert generated == on_disk, "regenerate with tests/tools/gen_sbe_codecs.py"


def test_block_lengths_match_the_table_in_the_notes():
    # aeron-formats.md §2.1, a few chosen across the channels.
    expected = {"SessionMessageHeader": 24, "SessionEvent": 36, "NewLeadershipTerm": 88, "AppendPosition": 21,
                "Vote": 36, "BackupResponse": 60, "ClusterMembersExtendedResponse": 24, "requestServiceAck": 8,
                "ConsensusModule": 28, "StandbySnapshot": 16}
    for name, length in expected.items():
        assert codecs.MESSAGES_BY_NAME[name].block_length == length, name


# --- Hypothesis round-trips over every message -------------------------------------------------


def _value_strategy(f):
    if f.enum is not None:
        return st.one_of(st.sampled_from(list(f.enum)), st.integers(-(1 << 31), (1 << 31) - 1))
    code, size, _ = PRIMITIVES[f.primitive]
    if f.primitive.startswith("uint"):
        return st.integers(0, (1 << (8 * size)) - 1)
    return st.integers(-(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1)


def _block_strategy(block):
    kwargs = {f.attr: _value_strategy(f) for f in block.fields}
    for g in block.groups:
        kwargs[g.attr] = st.lists(_block_strategy(g.entry), max_size=3).map(tuple)
    for v in block.var_data:
        kwargs[v.attr] = st.text(alphabet=string.printable, max_size=40) if v.is_ascii else st.binary(max_size=40)
    return st.builds(block.cls, **kwargs)


def _normalise(message):
    """An unknown raw int that happens to be a valid enum value decodes as the member: compare by value."""

    def norm(value):
        if isinstance(value, enum.Enum):
            return value.value
        if isinstance(value, tuple):
            return tuple(norm(v) for v in value)
        if hasattr(value, "BLOCK"):
            return tuple(norm(getattr(value, f.attr)) for f in value.BLOCK.fields) + tuple(
                norm(getattr(value, g.attr)) for g in value.BLOCK.groups
            ) + tuple(getattr(value, v.attr) for v in value.BLOCK.var_data)
        return value

    return norm(message)


ALL_MESSAGES = st.sampled_from(codecs.MESSAGES).flatmap(lambda spec: _block_strategy(spec.block))


@settings(max_examples=400, deadline=None)
@given(ALL_MESSAGES)
def test_every_message_round_trips_through_its_bytes(message):
    data = encode(message)
    decoded = decode_cluster(data)
    assert decoded.end == len(data)
    assert _normalise(decoded.message) == _normalise(message)
    assert encode(decoded.message) == data


@settings(max_examples=300, deadline=None)
@given(ALL_MESSAGES, st.data())
def test_a_buffer_cut_short_anywhere_raises_decode_error_and_nothing_else(message, data):
    raw = encode(message)
    cut = data.draw(st.integers(0, len(raw) - 1))
    try:
        decoded = decode_cluster(raw[:cut])
    except DecodeError as error:
        assert error.offset is not None and error.offset <= cut
    else:  # Only possible when the cut falls inside trailing var data that was empty... never for a whole message.
        pytest.fail(f"decoded {decoded.message!r} from {cut} of {len(raw)} bytes")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_decode_or_raise_decode_error_only(blob):
    try:
        decode_cluster(blob)
    except DecodeError:
        pass


@settings(max_examples=200, deadline=None)
@given(ALL_MESSAGES)
def test_fields_by_aeron_name_round_trip(message):
    fields = message.to_fields()
    assert _normalise(from_fields(type(message), fields)) == _normalise(message)


def test_a_message_decodes_the_same_fed_as_one_buffer_or_with_trailing_bytes():
    message = codecs.NewLeadershipTerm(
        log_leadership_term_id=1, next_leadership_term_id=2, next_term_base_log_position=3, next_log_position=4,
        leadership_term_id=5, term_base_log_position=6, log_position=7, leader_recording_id=8, timestamp=9,
        leader_member_id=1, log_session_id=-2037162306, app_version=1, is_startup=codecs.BooleanType.TRUE,
    )
    data = encode(message)
    assert decode_cluster(data + b"\xff" * 7).message == message
    assert decode_cluster(b"\x00" * 5 + data, 5).end == 5 + len(data)


def test_a_newer_encoder_with_a_longer_block_still_decodes():
    """Acting block length: fields a newer peer appends after ours are skipped."""
    spec = codecs.MESSAGES_BY_NAME["CommitPosition"]
    body = encode(codecs.CommitPosition(leadership_term_id=4, log_position=640, leader_member_id=2))[8:]
    longer = bytes.fromhex("1c0037006f000f00") + body + b"\x01" * 8  # blockLength 28, version 15
    decoded = decode_cluster(longer)
    assert decoded.message == codecs.CommitPosition(leadership_term_id=4, log_position=640, leader_member_id=2)
    assert decoded.end == 8 + 28 and decoded.acting_version == 15 and spec.block_length == 20


def test_an_older_encoder_leaves_newer_fields_at_their_null_values():
    """AppendPosition.flags is sinceVersion 8: a version-7 message has a 20-byte block and no flags."""
    old = bytes.fromhex("140036006f000700") + bytes.fromhex("0300000000000000" "87d6120000000000" "02000000")
    decoded = decode_cluster(old)
    assert decoded.message.flags == 255  # uint8 null
    assert decoded.message.log_position == 1234567


def test_unknown_template_id_names_it():
    with pytest.raises(DecodeError) as error:
        decode_cluster(bytes.fromhex("08006300" "6f000c00") + b"\x00" * 8)
    assert error.value.template_id == 99
    assert "unknown templateId 99" in str(error.value)


def test_another_schema_is_refused_with_its_id():
    with pytest.raises(DecodeError, match="schemaId 101"):
        decode_cluster(bytes.fromhex("20000100" "65000a00") + b"\x00" * 32)


def test_missing_field_in_json_form_is_a_decode_error():
    with pytest.raises(DecodeError, match="missing field 'candidateTermId'"):
        from_fields(codecs.Vote, {"logLeadershipTermId": 0})


def test_vote_accepts_booleans_and_aeron_names():
    base = {"candidateTermId": 1, "logLeadershipTermId": 0, "logPosition": 0, "candidateMemberId": 1, "followerMemberId": 2}
    assert from_fields(codecs.Vote, {**base, "vote": True}).vote is codecs.BooleanType.TRUE
    assert from_fields(codecs.Vote, {**base, "vote": "FALSE"}).vote is codecs.BooleanType.FALSE
    with pytest.raises(DecodeError, match="not a BooleanType"):
        from_fields(codecs.Vote, {**base, "vote": "MAYBE"})


def test_integers_are_held_to_their_primitives_range_at_both_ends():
    """`from_fields` takes an integer at its type's limits and refuses one past them (the fast path for
    plain integers checks the same ranges as the full check)."""
    base = {"candidateTermId": 1, "logLeadershipTermId": 0, "logPosition": 0, "candidateMemberId": 1,
            "followerMemberId": 2, "vote": "TRUE"}
    int32, int64 = (1 << 31) - 1, (1 << 63) - 1
    assert from_fields(codecs.Vote, {**base, "followerMemberId": int32, "logPosition": -int64 - 1}).follower_member_id == int32
    with pytest.raises(DecodeError, match=r"Vote.followerMemberId: 2147483648 does not fit int32"):
        from_fields(codecs.Vote, {**base, "followerMemberId": int32 + 1})
    with pytest.raises(DecodeError, match=r"Vote.logPosition: .* does not fit int64"):
        from_fields(codecs.Vote, {**base, "logPosition": int64 + 1})
    with pytest.raises(DecodeError, match=r"Vote.candidateTermId: expected an integer \(int64\), got True"):
        from_fields(codecs.Vote, {**base, "candidateTermId": True})
    assert from_fields(codecs.Vote, {**base, "vote": 1}).vote is codecs.BooleanType.TRUE


def test_attribute_names_are_snake_case_of_aeron_names():
    assert snake_case("logLeadershipTermId") == "log_leadership_term_id"
    assert snake_case("timeOfLastAppendNs") == "time_of_last_append_ns"
    assert [f.attr for f in codecs.Vote.BLOCK.fields][-1] == "vote"


# --- The written-out dataclass methods behave as the ones `dataclasses` generates ------------------


def _ordinary_twin(cls):
    """``cls`` declared again as an ordinary frozen, slotted, keyword-only dataclass: every method generated."""
    import dataclasses

    spec = [(f.name, f.type) if f.default is dataclasses.MISSING else (f.name, f.type, dataclasses.field(default=f.default))
            for f in dataclasses.fields(cls)]
    return dataclasses.make_dataclass(cls.__name__, spec, bases=(codecs.SbeMessage,), frozen=True, slots=True,
                                      kw_only=True)


def _entry_classes(block):
    yield block.cls
    for group in block.groups:
        yield from _entry_classes(group.entry)


EVERY_CLASS = sorted({cls for spec in codecs.MESSAGES for cls in _entry_classes(spec.block)}, key=lambda c: c.__name__)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_written_out_methods_behave_as_the_generated_ones(data):
    import copy
    import dataclasses
    import pickle

    spec = data.draw(st.sampled_from(codecs.MESSAGES))
    block = spec.block
    if block.groups and data.draw(st.booleans()):  # a group entry's class as well as the message's
        block = data.draw(st.sampled_from(block.groups)).entry
    message = data.draw(_block_strategy(block))
    cls = type(message)
    twin = _ordinary_twin(cls)
    values = {f.name: getattr(message, f.name) for f in dataclasses.fields(cls)}
    other = twin(**values)
    assert repr(message) == repr(other)
    assert hash(message) == hash(other)
    assert message == cls(**values) and not message != cls(**values)
    assert message != other  # another class: unequal, as between two dataclasses
    assert dataclasses.astuple(message) == dataclasses.astuple(other)
    assert pickle.loads(pickle.dumps(message)) == message
    assert copy.deepcopy(message) == message
    assert dataclasses.replace(message) == message
    for name in values:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(message, name, 1)
        with pytest.raises(dataclasses.FrozenInstanceError):
            delattr(message, name)
    required = [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING]
    if required:
        missing = dict(values)
        del missing[required[-1]]
        with pytest.raises(TypeError):
            cls(**missing)
        with pytest.raises(TypeError):
            cls(*values.values())  # keyword-only
    defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
    given_only = cls(**{name: values[name] for name in required})
    assert all(getattr(given_only, name) == default for name, default in defaults.items())
    assert repr(given_only) == repr(twin(**{name: values[name] for name in required}))


def test_every_class_keeps_the_dataclass_interface():
    import dataclasses

    for cls in EVERY_CLASS:
        twin = _ordinary_twin(cls)
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls
        assert [(f.name, f.default) for f in dataclasses.fields(cls)] == \
            [(f.name, f.default) for f in dataclasses.fields(twin)], cls
        assert cls.__slots__ == twin.__slots__ and cls.__match_args__ == twin.__match_args__, cls
        assert not hasattr(cls(**{f.name: f.default if f.default is not dataclasses.MISSING else 0
                                  for f in dataclasses.fields(cls)}), "__dict__"), cls
