"""Fragment reassembly and stream positions: order, duplicates, gaps, assumptions, the real log stream."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.pcap import PcapReader
from formats.reassembly import DEFAULT_TERM_LENGTH, Gap, Message, Reassembler
from formats.udp import (
    DataFrame,
    PadFrame,
    SetupFrame,
    align,
    batch_frames,
    decode_datagram,
    encode_datagram,
    fragment_message,
    heartbeat,
)

SESSION, STREAM, INITIAL = 7, 100, 1000
TERM = 65536


def setup(initial_term_id: int = INITIAL, term_length: int = TERM) -> SetupFrame:
    return SetupFrame(
        term_offset=0,
        session_id=SESSION,
        stream_id=STREAM,
        initial_term_id=initial_term_id,
        active_term_id=initial_term_id,
        term_length=term_length,
        mtu=1408,
    )


def _fragments(payload: bytes, term_id: int, term_offset: int) -> list[DataFrame]:
    return fragment_message(
        payload, session_id=SESSION, stream_id=STREAM, term_id=term_id, term_offset=term_offset
    )


def publish(sizes, *, term_id: int = INITIAL, term_offset: int = 0, term_length: int = TERM):
    """Frames of consecutive messages (message i is bytes([i]) * size) as a publication appends them:
    a message that does not fit the rest of its term goes to the next, after a PAD to the term's end.
    """
    frames: list[DataFrame | PadFrame] = []
    messages = []
    for index, size in enumerate(sizes):
        payload = bytes([index % 256]) * size

        chunk = _fragments(payload, term_id, term_offset)
        if chunk[-1].term_offset + align(chunk[-1].frame_length) > term_length:
            if term_offset < term_length:
                frames.append(
                    PadFrame(
                        frame_length=term_length - term_offset,
                        flags=0,
                        term_offset=term_offset,
                        session_id=SESSION,
                        stream_id=STREAM,
                        term_id=term_id,
                    )
                )
            term_id, term_offset = term_id + 1, 0
            chunk = _fragments(payload, term_id, term_offset)
        frames += chunk
        messages.append(payload)
        term_offset = chunk[-1].term_offset + align(chunk[-1].frame_length)
    return frames, messages


def feed(reassembler: Reassembler, frames) -> list[Message | Gap]:
    out: list[Message | Gap] = []
    for frame in frames:
        out += reassembler.on_frame(frame)
    return out + reassembler.finish()


def test_a_fragmented_message_comes_back_whole_with_its_start_and_end_positions():
    frames, (message,) = publish([5000])
    reassembler = Reassembler()
    reassembler.on_setup(setup())
    (result,) = feed(reassembler, frames)
    assert result.payload == message
    assert result.fragments == 4
    assert (result.start_position, result.end_position) == (0, 4 * 1408 - 1408 + align(32 + 5000 - 3 * 1376))
    assert not result.inferred and reassembler.notes == []


def test_messages_sent_as_mtu_sized_datagrams_on_the_wire_come_back_whole():
    frames, messages = publish([5000, 7, 1376, 1377, 8192, 0])
    reassembler = Reassembler()
    reassembler.on_setup(setup())
    out = []
    for batch in batch_frames(frames, mtu=1408):
        wire = encode_datagram(batch)
        assert len(wire) <= 1408
        for frame in decode_datagram(wire):
            out += reassembler.on_frame(frame)
    out += reassembler.finish()
    assert [m.payload for m in out] == messages
    assert [m.fragments for m in out] == [4, 1, 1, 2, 6, 1]


# Seven 8000-byte messages take 7 x 8192 bytes of a 64 KiB term, a 5000-byte one 5152 more; the
# next 8000-byte message does not fit the 3040 bytes left, so the term is padded.
ACROSS_A_TERM = [8000] * 7 + [5000, 8000, 10]


def test_positions_continue_across_a_padded_term_end():
    frames, messages = publish(ACROSS_A_TERM, term_length=TERM)
    pads = [f for f in frames if type(f) is PadFrame]
    assert [(p.term_offset, p.frame_length) for p in pads] == [(62496, 3040)]
    reassembler = Reassembler(initial_term_id=INITIAL, term_length=TERM)
    results = feed(reassembler, frames)
    assert [m.payload for m in results] == messages
    after = results[8]
    assert after.term_id == INITIAL + 1 and after.term_offset == 0
    assert after.start_position == TERM and results[9].start_position == TERM + 8192


def test_a_term_filled_exactly_needs_no_padding():
    frames, messages = publish([8000] * 9, term_length=TERM)
    assert not any(type(f) is PadFrame for f in frames)
    results = feed(Reassembler(initial_term_id=INITIAL, term_length=TERM), frames)
    assert [m.payload for m in results] == messages
    assert results[8].start_position == TERM and results[8].term_id == INITIAL + 1


def test_frames_arriving_out_of_order_still_give_messages_in_stream_order():
    frames, messages = publish([3000, 10, 2000])
    reassembler = Reassembler()
    reassembler.on_setup(setup())
    out = []
    out += reassembler.on_frame(frames[0])
    for frame in reversed(frames[1:]):
        out += reassembler.on_frame(frame)
    out += reassembler.finish()
    assert [m.payload for m in out] == messages


def test_duplicated_and_retransmitted_frames_never_yield_a_message_twice():
    frames, messages = publish([3000, 10, 2000])
    reassembler = Reassembler()
    reassembler.on_setup(setup())
    doubled = [frame for frame in frames for _ in (1, 2)] + frames  # sent twice, then all retransmitted
    results = feed(reassembler, doubled)
    assert [m.payload for m in results] == messages
    assert reassembler.duplicate_frames == 2 * len(frames)


def test_a_lost_fragment_gives_one_gap_and_nothing_glued_across_it():
    frames, messages = publish([10, 3000, 10])
    lost = frames[2]  # the middle fragment of the second message
    reassembler = Reassembler(reorder_window=0)
    reassembler.on_setup(setup())
    results = feed(reassembler, [f for f in frames if f is not lost])
    assert [type(r).__name__ for r in results] == ["Message", "Gap", "Message"]
    first, gap, last = results
    assert first.payload == messages[0] and last.payload == messages[2]
    assert gap.start_position == first.end_position  # from the start of the broken message
    assert gap.end_position == last.start_position  # to the next BEGIN
    assert "not captured" in gap.reason


def test_a_hole_waits_for_its_retransmission_within_the_reorder_window():
    frames, messages = publish([10, 3000, 10])
    reassembler = Reassembler()
    reassembler.on_setup(setup())
    late = frames[2]
    out = []
    for frame in frames:
        if frame is not late:
            out += reassembler.on_frame(frame)
    assert [m.payload for m in out] == messages[:1]
    out += reassembler.on_frame(late)
    out += reassembler.finish()
    assert [m.payload for m in out] == messages


def test_a_capture_that_begins_mid_message_reports_the_orphan_fragments_as_a_gap():
    frames, messages = publish([3000, 20])
    reassembler = Reassembler(initial_term_id=INITIAL, term_length=TERM)
    results = feed(reassembler, frames[1:])
    gap, message = results
    assert isinstance(gap, Gap) and "without their BEGIN" in gap.reason
    assert gap.start_position == frames[1].term_offset and gap.end_position == message.start_position
    assert message.payload == messages[1]


def test_a_message_begun_but_never_ended_is_a_gap_at_the_end_of_the_capture():
    frames, _ = publish([3000])
    reassembler = Reassembler(initial_term_id=INITIAL, term_length=TERM)
    (gap,) = feed(reassembler, frames[:-1])
    assert isinstance(gap, Gap) and gap.start_position == 0 and "never ended" in gap.reason


def test_a_heartbeat_beyond_the_last_frame_seen_reveals_data_that_was_not_captured():
    frames, _ = publish([10])
    reassembler = Reassembler(initial_term_id=INITIAL, term_length=TERM)
    out = reassembler.on_frame(frames[0])
    out += reassembler.on_frame(
        heartbeat(session_id=SESSION, stream_id=STREAM, term_id=INITIAL, term_offset=4096)
    )
    out += reassembler.finish()
    message, gap = out
    assert gap.start_position == message.end_position and gap.end_position == 4096


def test_an_end_of_stream_heartbeat_is_noted():
    reassembler = Reassembler(initial_term_id=INITIAL, term_length=TERM)
    reassembler.on_frame(
        heartbeat(session_id=SESSION, stream_id=STREAM, term_id=INITIAL, term_offset=0, end_of_stream=True)
    )
    assert reassembler.end_of_stream and reassembler.finish() == []


def test_without_setup_the_first_term_is_assumed_initial_and_said_so():
    frames, messages = publish([10, 20], term_id=INITIAL + 3, term_offset=512)
    reassembler = Reassembler()
    results = feed(reassembler, frames)
    assert [m.payload for m in results] == messages
    assert all(m.inferred for m in results)
    assert results[0].start_position == 512
    assert reassembler.inferred
    assert any("initial term id" in note for note in reassembler.notes)
    assert any(str(DEFAULT_TERM_LENGTH) in note for note in reassembler.notes)


def test_a_pad_frame_corrects_an_assumed_term_length():
    frames, messages = publish(ACROSS_A_TERM, term_length=TERM)
    reassembler = Reassembler()  # assumes 16 MiB until the PAD shows the term ends at 64 KiB
    results = feed(reassembler, frames)
    assert [m.payload for m in results] == messages
    assert results[8].start_position == TERM
    assert any("corrected" in note for note in reassembler.notes)


def test_a_late_setup_moves_positions_onto_its_basis():
    frames, messages = publish([10, 20, 30], term_id=INITIAL + 2)
    reassembler = Reassembler()
    first = reassembler.on_frame(frames[0])
    assert first[0].start_position == 0 and first[0].inferred
    reassembler.on_setup(setup())
    rest = feed(reassembler, frames[1:])
    assert rest[0].start_position == 2 * TERM + first[0].end_position
    assert not rest[0].inferred
    assert [m.payload for m in first + rest] == messages


def test_a_reassembler_refuses_frames_of_another_stream():
    reassembler = Reassembler(session_id=SESSION, stream_id=STREAM)
    other = heartbeat(session_id=SESSION + 1, stream_id=STREAM, term_id=0, term_offset=0)
    with pytest.raises(ValueError):
        reassembler.on_frame(other)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 4000), min_size=1, max_size=12),
    st.randoms(use_true_random=False),
    st.integers(0, 3),
)
def test_shuffled_and_duplicated_frames_give_back_exactly_the_messages_sent(sizes, rng, extra_copies):
    frames, messages = publish(sizes)
    delivered = list(frames)
    for _ in range(extra_copies):
        delivered += rng.sample(frames, k=max(1, len(frames) // 2))
    rng.shuffle(delivered)
    reassembler = Reassembler(reorder_window=10 * TERM)
    reassembler.on_setup(setup())
    results = feed(reassembler, delivered)
    assert [m.payload for m in results] == messages
    ends = [m.end_position for m in results]
    assert ends == sorted(ends) and all(m.start_position < m.end_position for m in results)


# --- The real capture: the leader's log stream against what the clustered service logged ----------
SERVICE_LINE = re.compile(
    r"onSessionMessage .* length=(\d+) headerPosition=(\d+) logPosition=(\d+) termId=(\d+) termOffset=(\d+)"
    r" sessionId=(-?\d+) payloadPrefix=\"([^\"]*)\""
)


def test_the_real_log_stream_positions_match_the_services_own_log(capture):
    packets = PcapReader((capture / "capture.pcap").read_bytes()).packets()
    streams: dict[tuple[int, int], Reassembler] = {}
    messages: list[Message] = []
    for packet in packets:
        for frame in decode_datagram(packet.payload):
            if type(frame) not in (SetupFrame, DataFrame, PadFrame) or frame.stream_id != 100:
                continue
            reassembler = streams.setdefault((frame.session_id, frame.stream_id), Reassembler())
            if type(frame) is SetupFrame:
                reassembler.on_setup(frame)
            else:
                messages += [m for m in reassembler.on_frame(frame) if isinstance(m, Message)]
    assert all(not r.inferred for r in streams.values())
    by_end = {m.end_position: m for m in messages}
    seen = 0
    for line in (capture / "node0" / "node-stdout.log").read_text().splitlines():
        match = SERVICE_LINE.search(line)
        if match is None:
            continue
        length, header_position, _, term_id, term_offset, session_id, prefix = match.groups()
        message = by_end[int(header_position)]
        assert message.session_id == int(session_id)
        assert message.term_offset == int(term_offset) and message.term_id == int(term_id)
        body = message.payload[32:]  # after the SBE header and SessionMessageHeader
        assert len(body) == int(length) and body.startswith(prefix.encode())
        seen += 1
    assert seen == 100  # the client sent 100 messages
