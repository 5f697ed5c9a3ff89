"""Aeron UDP frames: golden bytes, round trips, corrupt input, positions, and the real capture."""

from __future__ import annotations

import csv
import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from formats.errors import DecodeError
from formats.pcap import PcapReader
from formats.udp import (
    BEGIN_FLAG,
    DEFAULT_MTU,
    END_FLAG,
    EOS_FLAG,
    UNFRAGMENTED,
    DataFrame,
    ErrorFrame,
    Nak,
    PadFrame,
    ResolutionEntry,
    ResolutionFrame,
    RspSetup,
    Rttm,
    SetupFrame,
    StatusMessage,
    UnknownFrame,
    align,
    batch_frames,
    compute_position,
    compute_term_id_from_position,
    compute_term_offset_from_position,
    data_frame,
    decode_datagram,
    encode_datagram,
    encode_frame,
    fragment_message,
    heartbeat,
    position_bits_to_shift,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
UINT8 = st.integers(0, 255)
ALIGNED_OFFSET = st.integers(0, 2**25).map(lambda n: n * 32)

# Golden vectors written by hand from the layout tables of aeron-formats.md §7 (little-endian).
GOLDEN_DATA = bytes.fromhex(
    "23000000"
    "00"
    "c0"
    "0100"  # frame_length 35, version 0, flags B|E, type DATA
    "40000000"
    "07000000"
    "6c000000"
    "fbffffff"  # term_offset 64, session 7, stream 108, term_id -5
    "0000000000000000"
    "010203"  # reserved_value 0, payload
)
GOLDEN_SETUP = bytes.fromhex(
    "28000000"
    "00"
    "00"
    "0500"  # frame_length 40, type SETUP
    "00000000"
    "07000000"
    "6c000000"  # term_offset 0, session 7, stream 108
    "fbffffff"
    "fbffffff"
    "00000100"
    "80050000"
    "00000000"  # initial/active term -5, 64 KiB, MTU 1408, ttl 0
)
GOLDEN_SM = bytes.fromhex(
    "24000000"
    "00"
    "00"
    "0300"  # frame_length 36, type SM
    "07000000"
    "6c000000"
    "fbffffff"
    "00100000"  # session, stream, consumption term -5 / offset 4096
    "00000200"
    "0807060504030201"  # receiver window 131072, receiver id
)


def test_a_golden_data_frame_decodes_to_its_fields():
    (frame,) = decode_datagram(GOLDEN_DATA)
    assert frame == DataFrame(
        frame_length=35,
        flags=UNFRAGMENTED,
        term_offset=64,
        session_id=7,
        stream_id=108,
        term_id=-5,
        payload=b"\1\2\3",
    )
    assert frame.is_begin and frame.is_end and not frame.is_heartbeat and not frame.is_end_of_stream


def test_a_data_frame_encodes_to_the_golden_bytes_and_its_datagram_is_padded_to_32_bytes():
    frame = data_frame(session_id=7, stream_id=108, term_id=-5, term_offset=64, payload=b"\1\2\3")
    assert encode_frame(frame) == GOLDEN_DATA
    assert encode_datagram([frame]) == GOLDEN_DATA + bytes(64 - 35)
    assert decode_datagram(GOLDEN_DATA + bytes(64 - 35)) == [frame]


def test_golden_setup_and_status_message_decode_and_encode_back():
    setup = SetupFrame(
        term_offset=0,
        session_id=7,
        stream_id=108,
        initial_term_id=-5,
        active_term_id=-5,
        term_length=65536,
        mtu=1408,
    )
    status = StatusMessage(
        session_id=7,
        stream_id=108,
        consumption_term_id=-5,
        consumption_term_offset=4096,
        receiver_window=131072,
        receiver_id=0x0102030405060708,
    )
    assert decode_datagram(GOLDEN_SETUP) == [setup]
    assert decode_datagram(GOLDEN_SM) == [status]
    assert encode_frame(setup) == GOLDEN_SETUP
    assert encode_frame(status) == GOLDEN_SM


def test_a_status_message_of_44_bytes_carries_a_group_tag_and_longer_ones_keep_feedback_raw():
    tagged = (
        GOLDEN_SM[:0] + (44).to_bytes(4, "little") + GOLDEN_SM[4:] + (-3).to_bytes(8, "little", signed=True)
    )
    (frame,) = decode_datagram(tagged)
    assert frame.group_tag == -3 and frame.feedback == b""
    feedback = (40).to_bytes(4, "little") + GOLDEN_SM[4:] + b"abcd"
    (frame,) = decode_datagram(feedback)
    assert frame.group_tag is None and frame.feedback == b"abcd"
    assert encode_frame(frame) == feedback


def test_a_heartbeat_is_a_lone_32_byte_header_with_frame_length_zero():
    beat = heartbeat(session_id=1, stream_id=2, term_id=3, term_offset=4096)
    wire = encode_datagram([beat])
    assert len(wire) == 32 and wire[:4] == bytes(4) and wire[5] == UNFRAGMENTED
    assert decode_datagram(wire) == [beat]
    assert decode_datagram(wire)[0].is_heartbeat
    end = heartbeat(session_id=1, stream_id=2, term_id=3, term_offset=4096, end_of_stream=True)
    assert decode_datagram(encode_datagram([end]))[0].flags == UNFRAGMENTED | EOS_FLAG


def test_a_pad_frame_sends_only_its_header_but_keeps_the_whole_padding_length():
    pad = PadFrame(frame_length=65536 - 4096, flags=0, term_offset=4096, session_id=1, stream_id=2, term_id=3)
    wire = encode_datagram([pad])
    assert len(wire) == 32
    assert decode_datagram(wire) == [pad]


def test_several_data_frames_share_a_datagram_at_32_byte_alignment():
    first = data_frame(session_id=1, stream_id=2, term_id=3, term_offset=0, payload=b"x" * 40)
    second = data_frame(session_id=1, stream_id=2, term_id=3, term_offset=96, payload=b"y" * 28)
    wire = encode_datagram([first, second])
    assert len(wire) == align(72) + align(60) == 160
    assert decode_datagram(wire) == [first, second]
    assert decode_datagram(wire[:-4]) == [first, second]  # the last frame's alignment tail may be absent


def test_unknown_frame_types_are_kept_raw_and_reencode_identically():
    raw = (12).to_bytes(4, "little") + bytes([0, 0x12]) + (0x09).to_bytes(2, "little") + b"\xaa\xbb\xcc\xdd"
    assert decode_datagram(raw) == [UnknownFrame(type=9, flags=0x12, frame=raw)]
    assert encode_datagram(decode_datagram(raw)) == raw


def test_control_frames_ignore_bytes_after_the_frame_like_aerons_receiver():
    assert decode_datagram(GOLDEN_SM + b"\xff" * 8) == decode_datagram(GOLDEN_SM)


@pytest.mark.parametrize(
    ("datagram", "offset"),
    [
        (b"\x20\x00\x00", 0),  # shorter than a frame header
        (GOLDEN_DATA[:4] + b"\x01" + GOLDEN_DATA[5:], 4),  # version 1
        ((20).to_bytes(4, "little") + GOLDEN_DATA[4:], 0),  # DATA frame_length below its header
        ((99).to_bytes(4, "little") + GOLDEN_DATA[4:], 0),  # DATA frame_length beyond the datagram
        (GOLDEN_DATA[:8] + (65).to_bytes(4, "little") + GOLDEN_DATA[12:], 8),  # unaligned term_offset
        (GOLDEN_DATA + bytes(29) + GOLDEN_DATA[:10], 64),  # a partial second header
        (GOLDEN_DATA + bytes(29) + GOLDEN_SM[:4] + GOLDEN_DATA[4:6] + b"\x03\x00" + GOLDEN_DATA[8:], 64),
        ((28).to_bytes(4, "little") + GOLDEN_SM[4:28], 0),  # SM frame_length below 36
        ((80).to_bytes(4, "little") + GOLDEN_SETUP[4:], 0),  # SETUP frame_length beyond the datagram
    ],
)
def test_corrupt_datagrams_raise_decode_error_naming_the_offset(datagram, offset):
    with pytest.raises(DecodeError) as error:
        decode_datagram(datagram)
    assert error.value.offset == offset
    assert "\n" not in str(error.value)


def test_decoded_frames_are_frozen_values_like_those_built_by_hand():
    wire = encode_datagram([data_frame(session_id=1, stream_id=2, term_id=3, term_offset=0, payload=b"p")])
    (frame,) = decode_datagram(wire)
    (status,) = decode_datagram(GOLDEN_SM)
    assert type(frame) is DataFrame and type(status) is StatusMessage
    with pytest.raises(dataclasses.FrozenInstanceError):
        frame.term_offset = 32
    with pytest.raises(dataclasses.FrozenInstanceError):
        status.receiver_window = 0
    assert hash(frame) == hash(data_frame(session_id=1, stream_id=2, term_id=3, term_offset=0, payload=b"p"))
    assert repr(frame).startswith("DataFrame(frame_length=33,")


def test_every_truncation_of_a_valid_datagram_raises_only_decode_error():
    frames = fragment_message(b"m" * 3000, session_id=1, stream_id=2, term_id=3, term_offset=0)
    for wire in (encode_datagram(frames[:1]), GOLDEN_SETUP, GOLDEN_SM, encode_frame(_error_frame())):
        for cut in range(len(wire)):
            try:
                decode_datagram(wire[:cut])
            except DecodeError:
                pass


@given(st.binary(max_size=200))
def test_arbitrary_bytes_decode_to_frames_or_raise_decode_error_and_nothing_else(data):
    try:
        frames = decode_datagram(data)
    except DecodeError:
        return
    assert frames


@given(st.binary(min_size=1, max_size=120), st.integers(0, 119), UINT8)
def test_a_valid_datagram_with_one_byte_changed_decodes_or_raises_decode_error(payload, where, value):
    frame = data_frame(session_id=1, stream_id=2, term_id=3, term_offset=0, payload=payload)
    wire = bytearray(
        encode_datagram([frame, heartbeat(session_id=1, stream_id=2, term_id=3, term_offset=256)])
    )
    wire[where % len(wire)] = value
    try:
        decode_datagram(bytes(wire))
    except DecodeError:
        pass


def _error_frame() -> ErrorFrame:
    return ErrorFrame(
        session_id=1, stream_id=2, receiver_id=3, group_tag=4, error_code=5, error_message="no such channel"
    )


data_frames = st.builds(
    data_frame,
    session_id=INT32,
    stream_id=INT32,
    term_id=INT32,
    term_offset=ALIGNED_OFFSET,
    payload=st.binary(max_size=300),
    flags=UINT8,
    reserved_value=INT64,
)
control_frames = st.one_of(
    st.builds(
        SetupFrame,
        term_offset=INT32,
        session_id=INT32,
        stream_id=INT32,
        initial_term_id=INT32,
        active_term_id=INT32,
        term_length=INT32,
        mtu=INT32,
        ttl=INT32,
        flags=UINT8,
    ),
    st.builds(
        StatusMessage,
        session_id=INT32,
        stream_id=INT32,
        consumption_term_id=INT32,
        consumption_term_offset=INT32,
        receiver_window=INT32,
        receiver_id=INT64,
        group_tag=st.none() | INT64,
        flags=UINT8,
    ),
    st.builds(
        Nak, session_id=INT32, stream_id=INT32, term_id=INT32, term_offset=INT32, length=INT32, flags=UINT8
    ),
    st.builds(
        Rttm,
        session_id=INT32,
        stream_id=INT32,
        echo_timestamp_ns=INT64,
        reception_delta=INT64,
        receiver_id=INT64,
        flags=UINT8,
    ),
    st.builds(
        ErrorFrame,
        session_id=INT32,
        stream_id=INT32,
        receiver_id=INT64,
        group_tag=INT64,
        error_code=INT32,
        error_message=st.text(max_size=200),
        flags=UINT8,
    ),
    st.builds(RspSetup, session_id=INT32, stream_id=INT32, response_session_id=INT32, flags=UINT8),
    st.builds(
        ResolutionFrame,
        entries=st.lists(
            st.one_of(
                st.builds(
                    ResolutionEntry,
                    res_type=st.just(1),
                    flags=UINT8,
                    udp_port=st.integers(0, 65535),
                    age_in_ms=INT32,
                    address=st.ip_addresses(v=4).map(str),
                    name=st.text("abcdefghijklmnopqrstuvwxyz0123456789.-", max_size=40),
                ),
                st.builds(
                    ResolutionEntry,
                    res_type=st.just(2),
                    flags=UINT8,
                    udp_port=st.integers(0, 65535),
                    age_in_ms=INT32,
                    address=st.ip_addresses(v=6).map(str),
                    name=st.text("abcdefghijklmnopqrstuvwxyz0123456789.-", max_size=40),
                ),
            ),
            max_size=4,
        ).map(tuple),
        flags=UINT8,
    ),
)


@given(control_frames)
def test_every_control_frame_round_trips(frame):
    assert decode_datagram(encode_datagram([frame])) == [frame]


@given(st.lists(data_frames, min_size=1, max_size=6))
def test_data_frames_round_trip_through_one_datagram(frames):
    assert decode_datagram(encode_datagram(frames)) == frames


def test_position_bits_to_shift_is_log2_of_a_valid_term_length():
    assert position_bits_to_shift(64 * 1024) == 16
    assert position_bits_to_shift(64 * 1024 * 1024) == 26
    assert position_bits_to_shift(1024 * 1024 * 1024) == 30
    for bad in (32 * 1024, 3 * 65536, 2 * 1024 * 1024 * 1024):
        with pytest.raises(ValueError):
            position_bits_to_shift(bad)


def test_position_wraps_the_term_count_like_java_int_arithmetic():
    # initialTermId near INT32_MAX: the next term id wraps to INT32_MIN, and the term count is 1.
    assert compute_position(-(2**31), 96, 16, 2**31 - 1) == (1 << 16) + 96
    assert compute_term_id_from_position((1 << 16) + 96, 16, 2**31 - 1) == -(2**31)
    assert compute_position(10, 0, 16, 7) == 3 << 16
    assert compute_position(7, 4096, 26, 7) == 4096


@given(INT32, st.integers(0, 2**31 - 1), st.integers(16, 30), st.data())
def test_term_id_and_offset_come_back_from_a_position(initial_term_id, term_count, shift, data):
    term_offset = data.draw(st.integers(0, (1 << shift) - 1))
    term_id = ((initial_term_id + term_count + 2**31) % 2**32) - 2**31
    position = compute_position(term_id, term_offset, shift, initial_term_id)
    assert position == (term_count << shift) + term_offset
    assert compute_term_id_from_position(position, shift, initial_term_id) == term_id
    assert compute_term_offset_from_position(position, shift) == term_offset


def test_a_long_message_is_cut_at_the_mtu_with_begin_middle_and_end_flags():
    message = bytes(range(256)) * 20  # 5120 bytes
    frames = fragment_message(
        message, session_id=1, stream_id=2, term_id=3, term_offset=1024, mtu=DEFAULT_MTU
    )
    assert [f.flags for f in frames] == [BEGIN_FLAG, 0, 0, END_FLAG]
    assert [f.term_offset for f in frames] == [1024, 1024 + 1408, 1024 + 2816, 1024 + 4224]
    assert [len(f.payload) for f in frames] == [1376, 1376, 1376, 992]
    assert b"".join(f.payload for f in frames) == message
    assert all(len(encode_datagram([f])) <= DEFAULT_MTU for f in frames)


def test_a_message_that_fits_one_frame_is_unfragmented_and_one_past_the_term_end_is_refused():
    (frame,) = fragment_message(b"hi", session_id=1, stream_id=2, term_id=3, term_offset=0)
    assert frame.flags == UNFRAGMENTED and frame.frame_length == 34
    with pytest.raises(ValueError):
        fragment_message(
            b"x" * 100, session_id=1, stream_id=2, term_id=3, term_offset=65536 - 64, term_length=65536
        )
    fragment_message(bytes(8192), session_id=1, stream_id=2, term_id=3, term_offset=0, term_length=65536)
    with pytest.raises(ValueError):  # longer than a term / 8
        fragment_message(bytes(8193), session_id=1, stream_id=2, term_id=3, term_offset=0, term_length=65536)


def test_batches_fill_the_mtu_and_padding_ends_a_batch():
    frames = [
        data_frame(session_id=1, stream_id=2, term_id=3, term_offset=i * 512, payload=bytes(480))
        for i in range(5)
    ]
    pad = PadFrame(frame_length=1024, flags=0, term_offset=2560, session_id=1, stream_id=2, term_id=3)
    batches = batch_frames([*frames, pad], mtu=1408)
    assert [len(b) for b in batches] == [2, 2, 2]
    assert batches[-1][-1] is pad
    assert all(len(encode_datagram(b)) <= 1408 for b in batches)


# --- The real capture, against Wireshark's own decode -------------------------------------------
TSV_FIELDS = (
    "aeron.data.session_id",
    "aeron.data.stream_id",
    "aeron.data.term_id",
    "aeron.data.term_offset",
    "aeron.data.frame_length",
    "aeron.data.flags",
)


def _capture_packets(capture):
    return list(PcapReader((capture / "capture.pcap").read_bytes(), source="capture.pcap").packets())


def test_every_datagram_of_the_real_capture_decodes(capture):
    counts: dict[str, int] = {}
    for packet in _capture_packets(capture):
        for frame in decode_datagram(packet.payload):
            counts[type(frame).__name__] = counts.get(type(frame).__name__, 0) + 1
    assert counts.keys() == {"DataFrame", "StatusMessage", "SetupFrame"}
    assert counts["SetupFrame"] == 17 and counts["StatusMessage"] == 450


def test_every_real_datagram_encodes_back_to_the_same_bytes(capture):
    packets = _capture_packets(capture)
    assert all(encode_datagram(decode_datagram(p.payload)) == bytes(p.payload) for p in packets)


def test_every_data_frame_matches_wiresharks_decode_of_the_same_packet(capture):
    with (capture / "capture-wireshark-aeron-frames.tsv").open(newline="") as tsv:
        rows = {int(row["frame.number"]): row for row in csv.DictReader(tsv, delimiter="\t")}
    packets = _capture_packets(capture)
    assert len(packets) == len(rows)
    compared = 0
    for packet in packets:
        row = rows[packet.index]
        frames = decode_datagram(packet.payload)
        # Wireshark shows a B|E heartbeat as a "Heartbeat Frame" (not in aeron.data.*), but an
        # end-of-stream heartbeat as DATA with frame_length 0; and it prints ids unsigned.
        shown = [
            f
            for f in frames
            if type(f) in (DataFrame, PadFrame) and not (f.frame_length == 0 and not f.flags & EOS_FLAG)
        ]
        expected = (
            list(zip(*(row[name].split(",") for name in TSV_FIELDS), strict=True))
            if row[TSV_FIELDS[0]]
            else []
        )
        actual = [
            (
                str(f.session_id & 0xFFFFFFFF),
                str(f.stream_id),
                str(f.term_id & 0xFFFFFFFF),
                str(f.term_offset),
                str(f.frame_length),
                f"{f.flags:#04x}",
            )
            for f in shown
        ]
        assert actual == expected, f"packet {packet.index}"
        assert row["_ws.col.Info"].count("Status") == sum(type(f) is StatusMessage for f in frames)
        assert row["_ws.col.Info"].count("Setup") == sum(type(f) is SetupFrame for f in frames)
        compared += len(actual)
    assert compared > 1000  # 1109 DATA frames Wireshark lists; the rest are B|E heartbeats
