"""Aeron's UDP transport frames: decode a datagram into frames, encode frames into datagrams.

What travels between media drivers (aeron-formats.md §7; `io.aeron.protocol.*Flyweight` and
`aeron_udp_protocol.h`).  Everything is little-endian.  Every frame opens with the same 8 bytes
(frame_length int32, version int8, flags uint8, type uint16).

* A datagram whose first frame is DATA or PAD is a slice of the sender's term buffer: DATA frames
  packed back to back, each starting at a 32-byte aligned offset (``align(frame_length, 32)``), the
  last one padded to alignment too.  A heartbeat is a lone 32-byte DATA header with
  frame_length 0.  A PAD frame fills the rest of a term, but only its 32-byte header is sent.
* Any other type is a control frame (SETUP, SM, NAK, RTTM, ERR, RSP_SETUP, RES), one per datagram;
  like Aeron's receiver we read the first frame and ignore bytes after it.

Frames are values with Aeron's field names in snake_case: frozen, slotted, keyword-only
dataclasses, except the one a capture holds by the hundred thousand, `DataFrame`, a NamedTuple (as
`formats.pcap.Packet` is): a tuple is built several times faster than a frozen dataclass, is just
as immutable (assigning a field raises `dataclasses.FrozenInstanceError`, as for the others) and
compares, hashes and prints the same way.  A type we do not model (ATS, extensions, types added later) is kept raw as an
`UnknownFrame` so nothing is lost.  Corrupt input raises `DecodeError` with the byte offset in the
datagram; callers add the file name and the datagram's own offset (`DecodeError.with_context`).

Stream positions (§7.3): ``position = ((term_id - initial_term_id) << bits) + term_offset`` with the
subtraction in Java's wrapping 32-bit int arithmetic, as `LogBufferDescriptor.computePosition`.

Wireshark's Aeron dissector (4.0.x, as in Debian 12) decodes DATA, PAD, heartbeats, SETUP, SM,
NAK and RTTM as we do, but reads ERR with an older layout (error code in the flags byte, then the
offending header) and does not know RES or RSP_SETUP; it shows a B|E heartbeat as a "Heartbeat
Frame" outside ``aeron.data.*`` and prints session and term ids unsigned.

This module does no I/O and imports nothing of ours but `formats.errors`.
"""

from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterable, Sequence
from dataclasses import FrozenInstanceError, dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from formats.errors import DecodeError

# --- Frame types (HeaderFlyweight.HDR_TYPE_*) -------------------------------------------------
HDR_TYPE_PAD = 0x00
HDR_TYPE_DATA = 0x01
HDR_TYPE_NAK = 0x02
HDR_TYPE_SM = 0x03
HDR_TYPE_ERR = 0x04
HDR_TYPE_SETUP = 0x05
HDR_TYPE_RTTM = 0x06
HDR_TYPE_RES = 0x07
HDR_TYPE_ATS_DATA = 0x08
# 0x09 and 0x0A are ATS_SM / ATS_SETUP in Java but swapped in C (§7.1); both are premium-only and
# are kept raw as UnknownFrame, so we do not pick a side.
HDR_TYPE_RSP_SETUP = 0x0B
HDR_TYPE_EXT = 0xFFFF

CURRENT_VERSION = 0
HEADER_LENGTH = 8
DATA_HEADER_LENGTH = 32
FRAME_ALIGNMENT = 32

# --- Flags ----------------------------------------------------------------------------------------
BEGIN_FLAG = 0x80
END_FLAG = 0x40
EOS_FLAG = 0x20
UNFRAGMENTED = BEGIN_FLAG | END_FLAG
#: Set by Aeron releases after 1.47 on a revoked publication's last frame; never by 1.47.3.
REVOKED_FLAG = 0x10

SETUP_SEND_RESPONSE_FLAG = 0x80
SETUP_GROUP_FLAG = 0x40
SM_SEND_SETUP_FLAG = 0x80
SM_EOS_FLAG = 0x40
RTTM_REPLY_FLAG = 0x80
ERR_HAS_GROUP_TAG_FLAG = 0x08
RES_SELF_FLAG = 0x80

RES_TYPE_IPV4 = 1
RES_TYPE_IPV6 = 2

# --- Lengths and limits ---------------------------------------------------------------------------
NAK_LENGTH = 28
SM_LENGTH = 36
SM_WITH_GROUP_TAG_LENGTH = 44
SETUP_LENGTH = 40
RTTM_LENGTH = 40
ERR_HEADER_LENGTH = 40
ERR_MAX_TEXT_LENGTH = 1023
RSP_SETUP_LENGTH = 20
RES_ENTRY_ALIGNMENT = 8
RES_MAX_NAME_LENGTH = 512

DEFAULT_MTU = 1408
MAX_MESSAGE_LENGTH = 16 * 1024 * 1024
MAX_UDP_PAYLOAD_LENGTH = 65504
TERM_MIN_LENGTH = 64 * 1024
TERM_MAX_LENGTH = 1024 * 1024 * 1024

# --- Layouts --------------------------------------------------------------------------------------
_FRAME_HEADER = struct.Struct("<iBBH")
_DATA_HEADER = struct.Struct("<iBBHiiiiq")
_NAK = struct.Struct("<iBBHiiiii")
_SM = struct.Struct("<iBBHiiiiiq")
_GROUP_TAG = struct.Struct("<q")
_SETUP = struct.Struct("<iBBHiiiiiiii")
_RTTM = struct.Struct("<iBBHiiqqq")
_ERR = struct.Struct("<iBBHiiqqii")
_RSP_SETUP = struct.Struct("<iBBHiii")
_RES_ENTRY = struct.Struct("<bBHi")
_NAME_LENGTH = struct.Struct("<h")


# --- Frames ---------------------------------------------------------------------------------------
def _refuse_assignment(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


class DataFrame(NamedTuple):
    """A DATA frame: one fragment of a message, or a heartbeat (frame_length 0, no payload).

    ``frame_length`` is the unaligned header-plus-payload length exactly as on the wire.  A NamedTuple
    for speed (see the module notes).
    """

    frame_length: int
    flags: int
    term_offset: int
    session_id: int
    stream_id: int
    term_id: int
    reserved_value: int = 0
    payload: bytes = b""

    __setattr__ = _refuse_assignment

    @property
    def is_heartbeat(self) -> bool:
        return self.frame_length == 0

    @property
    def is_begin(self) -> bool:
        return bool(self.flags & BEGIN_FLAG)

    @property
    def is_end(self) -> bool:
        return bool(self.flags & END_FLAG)

    @property
    def is_end_of_stream(self) -> bool:
        return bool(self.flags & EOS_FLAG)


@dataclass(frozen=True, slots=True, kw_only=True)
class PadFrame:
    """Padding to the end of a term.  ``frame_length`` covers the whole padding; 32 bytes are sent."""

    frame_length: int
    flags: int
    term_offset: int
    session_id: int
    stream_id: int
    term_id: int
    reserved_value: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class SetupFrame:
    """SETUP: a new stream announces its initial term id, active term, term length and MTU."""

    term_offset: int
    session_id: int
    stream_id: int
    initial_term_id: int
    active_term_id: int
    term_length: int
    mtu: int
    ttl: int = 0
    flags: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusMessage:
    """SM: a receiver's consumption position and window, sent back to the publisher.

    ``group_tag`` is the optional 8-byte tail (frame_length 44).  Any other tail is application
    specific feedback, kept raw in ``feedback`` (Aeron's Java code refuses to read it as a tag).
    """

    session_id: int
    stream_id: int
    consumption_term_id: int
    consumption_term_offset: int
    receiver_window: int
    receiver_id: int
    group_tag: int | None = None
    feedback: bytes = b""
    flags: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Nak:
    """NAK: a receiver asks for a retransmit of ``length`` bytes at term_id/term_offset."""

    session_id: int
    stream_id: int
    term_id: int
    term_offset: int
    length: int
    flags: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Rttm:
    """RTT measurement request (or reply, with RTTM_REPLY_FLAG)."""

    session_id: int
    stream_id: int
    echo_timestamp_ns: int
    reception_delta: int
    receiver_id: int
    flags: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorFrame:
    """ERR: a receiver tells the publisher why it rejected the stream."""

    session_id: int
    stream_id: int
    receiver_id: int
    group_tag: int
    error_code: int
    error_message: str
    flags: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RspSetup:
    """RSP_SETUP: links a response stream to the request stream's session."""

    session_id: int
    stream_id: int
    response_session_id: int
    flags: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolutionEntry:
    """One name-resolution entry of a RES frame (driver name resolver gossip)."""

    res_type: int
    flags: int
    udp_port: int
    age_in_ms: int
    address: str
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ResolutionFrame:
    entries: tuple[ResolutionEntry, ...]
    flags: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownFrame:
    """A frame type we do not model; ``frame`` holds all of its bytes, header included."""

    type: int
    flags: int
    frame: bytes


Frame = (
    DataFrame
    | PadFrame
    | SetupFrame
    | StatusMessage
    | Nak
    | Rttm
    | ErrorFrame
    | RspSetup
    | ResolutionFrame
    | UnknownFrame
)


# --- Positions ------------------------------------------------------------------------------------
def align(value: int, alignment: int = FRAME_ALIGNMENT) -> int:
    """Round ``value`` up to a multiple of ``alignment`` (a power of two)."""
    return (value + alignment - 1) & -alignment


def _int32(value: int) -> int:
    return ((value + 0x8000_0000) & 0xFFFF_FFFF) - 0x8000_0000


def position_bits_to_shift(term_length: int) -> int:
    """log2(term_length); the term length must be a power of two from 64 KiB to 1 GiB."""
    if not TERM_MIN_LENGTH <= term_length <= TERM_MAX_LENGTH or term_length & (term_length - 1):
        raise ValueError(f"term length must be a power of two in [64 KiB, 1 GiB], got {term_length}")
    return term_length.bit_length() - 1


def compute_position(
    term_id: int, term_offset: int, position_bits_to_shift: int, initial_term_id: int
) -> int:
    """Stream position of ``term_offset`` in ``term_id`` (Java's 32-bit wrapping term count)."""
    term_count = _int32(term_id - initial_term_id)
    return (term_count << position_bits_to_shift) + term_offset


def compute_term_id_from_position(position: int, position_bits_to_shift: int, initial_term_id: int) -> int:
    """The term id holding ``position`` (inverse of `compute_position`, wrapping like Java's int)."""
    return _int32((position >> position_bits_to_shift) + initial_term_id)


def compute_term_offset_from_position(position: int, position_bits_to_shift: int) -> int:
    return position & ((1 << position_bits_to_shift) - 1)


# --- Building frames ------------------------------------------------------------------------------
def data_frame(
    *,
    session_id: int,
    stream_id: int,
    term_id: int,
    term_offset: int,
    payload: bytes,
    flags: int = UNFRAGMENTED,
    reserved_value: int = 0,
) -> DataFrame:
    """A DATA frame carrying ``payload`` (frame_length computed)."""
    return DataFrame(
        frame_length=DATA_HEADER_LENGTH + len(payload),
        flags=flags,
        term_offset=term_offset,
        session_id=session_id,
        stream_id=stream_id,
        term_id=term_id,
        reserved_value=reserved_value,
        payload=bytes(payload),
    )


def heartbeat(
    *, session_id: int, stream_id: int, term_id: int, term_offset: int, end_of_stream: bool = False
) -> DataFrame:
    """A heartbeat at the publisher's tail (B|E flags, plus EOS when the stream ends)."""
    return DataFrame(
        frame_length=0,
        flags=UNFRAGMENTED | (EOS_FLAG if end_of_stream else 0),
        term_offset=term_offset,
        session_id=session_id,
        stream_id=stream_id,
        term_id=term_id,
    )


def fragment_message(
    payload: bytes,
    *,
    session_id: int,
    stream_id: int,
    term_id: int,
    term_offset: int,
    mtu: int = DEFAULT_MTU,
    term_length: int | None = None,
    reserved_value: int = 0,
) -> list[DataFrame]:
    """Cut one message into DATA frames as `ExclusivePublication.appendFragmentedMessage` does.

    Chunks of ``mtu - 32`` bytes, consecutive aligned term offsets, flags B / 0 / E, or B|E when the
    message fits in one frame.  With ``term_length`` given, what Aeron's publication refuses is
    refused here (ValueError): a message longer than ``min(term_length / 8, 16 MiB)``, and one
    that would not fit before the end of the term (the caller pads the term and starts the next).
    """
    if mtu % FRAME_ALIGNMENT or not DATA_HEADER_LENGTH < mtu <= MAX_UDP_PAYLOAD_LENGTH:
        raise ValueError(f"MTU must be a multiple of 32 in (32, {MAX_UDP_PAYLOAD_LENGTH}], got {mtu}")
    max_payload = mtu - DATA_HEADER_LENGTH
    chunks = [payload[i : i + max_payload] for i in range(0, len(payload), max_payload)] or [b""]
    frames = []
    offset = term_offset
    last = len(chunks) - 1
    for index, chunk in enumerate(chunks):
        flags = (BEGIN_FLAG if index == 0 else 0) | (END_FLAG if index == last else 0)
        frame = data_frame(
            session_id=session_id,
            stream_id=stream_id,
            term_id=term_id,
            term_offset=offset,
            payload=chunk,
            flags=flags,
            reserved_value=reserved_value,
        )
        frames.append(frame)
        offset += align(frame.frame_length)
    if term_length is not None and len(payload) > min(term_length // 8, MAX_MESSAGE_LENGTH):
        raise ValueError(
            f"a message of {len(payload)} bytes exceeds Aeron's maximum for a term of {term_length} bytes"
            f" ({min(term_length // 8, MAX_MESSAGE_LENGTH)})"
        )
    if term_length is not None and offset > term_length:
        raise ValueError(
            f"message of {len(payload)} bytes at term offset {term_offset} does not fit the term"
        )
    return frames


def batch_frames(
    frames: Iterable[DataFrame | PadFrame], mtu: int = DEFAULT_MTU
) -> list[list[DataFrame | PadFrame]]:
    """Group consecutive term frames into datagrams of at most ``mtu`` bytes, as the sender scans.

    A PAD frame takes 32 bytes and ends its datagram (the term ends there).
    """
    batches: list[list[DataFrame | PadFrame]] = []
    current: list[DataFrame | PadFrame] = []
    used = 0
    for frame in frames:
        size = (
            DATA_HEADER_LENGTH
            if type(frame) is PadFrame or frame.frame_length == 0
            else align(frame.frame_length)
        )
        if current and used + size > mtu:
            batches.append(current)
            current, used = [], 0
        current.append(frame)
        used += size
        if type(frame) is PadFrame:
            batches.append(current)
            current, used = [], 0
    if current:
        batches.append(current)
    return batches


# --- Decoding -------------------------------------------------------------------------------------
def decode_datagram(buf: bytes | bytearray | memoryview) -> list[Frame]:
    """All frames in one UDP payload.  Offsets in errors are relative to the datagram's start."""
    length = len(buf)
    if length < HEADER_LENGTH:
        raise DecodeError(f"Aeron frame header needs {HEADER_LENGTH} bytes, datagram has {length}", offset=0)
    # The type's high byte is 0 for DATA and PAD; peek at it rather than unpack a header twice.
    if buf[6] > HDR_TYPE_DATA or buf[7]:
        frame_length, version, flags, frame_type = _FRAME_HEADER.unpack_from(buf, 0)
        if version != CURRENT_VERSION:
            raise DecodeError(f"Aeron frame version {CURRENT_VERSION}, found {version}", offset=4)
        if frame_length < HEADER_LENGTH or frame_length > length:
            raise DecodeError(
                f"frame_length between {HEADER_LENGTH} and the datagram's {length} bytes, found {frame_length}",
                offset=0,
            )
        decoder = _CONTROL_DECODERS.get(frame_type)
        if decoder is None:
            return [UnknownFrame(type=frame_type, flags=flags, frame=bytes(buf[:frame_length]))]
        return [decoder(buf, frame_length, flags)]

    # DATA and PAD: the hot path of every capture import, one precompiled unpack per frame, and each
    # DataFrame made from a tuple of all its fields (NamedTuple._make: no argument parsing).
    unpack = _DATA_HEADER.unpack_from
    make_data_frame = DataFrame._make
    frames: list[Frame] = []
    offset = 0
    while offset < length:
        if length - offset < DATA_HEADER_LENGTH:
            raise DecodeError(
                f"a {DATA_HEADER_LENGTH}-byte DATA header, only {length - offset} bytes left", offset=offset
            )
        frame_length, version, flags, frame_type, term_offset, session_id, stream_id, term_id, reserved = (
            unpack(buf, offset)
        )
        if version != CURRENT_VERSION:
            raise DecodeError(f"Aeron frame version {CURRENT_VERSION}, found {version}", offset=offset + 4)
        if term_offset < 0 or term_offset & (FRAME_ALIGNMENT - 1):
            raise DecodeError(f"a 32-byte aligned term_offset, found {term_offset}", offset=offset + 8)
        if frame_type == HDR_TYPE_DATA:
            if frame_length == 0:  # heartbeat
                frames.append(make_data_frame((0, flags, term_offset, session_id, stream_id, term_id, reserved, b"")))
                offset += DATA_HEADER_LENGTH
                continue
            end = offset + frame_length
            if frame_length < DATA_HEADER_LENGTH or end > length:
                raise DecodeError(
                    f"DATA frame_length 0 or {DATA_HEADER_LENGTH}..{length - offset} (what the datagram holds),"
                    f" found {frame_length}",
                    offset=offset,
                )
            payload = bytes(buf[offset + DATA_HEADER_LENGTH : end])
            frames.append(
                make_data_frame((frame_length, flags, term_offset, session_id, stream_id, term_id, reserved, payload))
            )
            offset += (frame_length + FRAME_ALIGNMENT - 1) & -FRAME_ALIGNMENT
        elif frame_type == HDR_TYPE_PAD:
            if frame_length < DATA_HEADER_LENGTH:
                raise DecodeError(
                    f"PAD frame_length of at least {DATA_HEADER_LENGTH}, found {frame_length}", offset=offset
                )
            frames.append(
                PadFrame(
                    frame_length=frame_length,
                    flags=flags,
                    term_offset=term_offset,
                    session_id=session_id,
                    stream_id=stream_id,
                    term_id=term_id,
                    reserved_value=reserved,
                )
            )
            offset += DATA_HEADER_LENGTH
        else:
            raise DecodeError(
                f"a DATA or PAD frame after the first DATA frame, found type {frame_type:#x}", offset=offset
            )
    return frames


def _need(frame_length: int, minimum: int, what: str) -> None:
    if frame_length < minimum:
        raise DecodeError(f"{what} frame_length of at least {minimum}, found {frame_length}", offset=0)


def _decode_nak(buf, frame_length: int, flags: int) -> Nak:
    _need(frame_length, NAK_LENGTH, "NAK")
    _, _, _, _, session_id, stream_id, term_id, term_offset, nak_length = _NAK.unpack_from(buf, 0)
    return Nak(
        session_id=session_id,
        stream_id=stream_id,
        term_id=term_id,
        term_offset=term_offset,
        length=nak_length,
        flags=flags,
    )


def _decode_sm(buf, frame_length: int, flags: int) -> StatusMessage:
    _need(frame_length, SM_LENGTH, "SM")
    return _status_message(bytes(buf[:frame_length]), flags)


@lru_cache(maxsize=4096)
def _status_message(frame: bytes, flags: int) -> StatusMessage:
    """An SM from its bytes, remembered: receivers repeat the same SM while nothing is consumed (450
    SMs, 22 distinct, in the real 1.47.3 capture), and a frozen value is several times dearer to build
    than to look up."""
    frame_length = len(frame)
    _, _, _, _, session_id, stream_id, term_id, term_offset, window, receiver_id = _SM.unpack_from(frame, 0)
    group_tag = None
    feedback = b""
    if frame_length == SM_WITH_GROUP_TAG_LENGTH:
        (group_tag,) = _GROUP_TAG.unpack_from(frame, SM_LENGTH)
    elif frame_length > SM_LENGTH:
        feedback = frame[SM_LENGTH:]
    return StatusMessage(
        session_id=session_id,
        stream_id=stream_id,
        consumption_term_id=term_id,
        consumption_term_offset=term_offset,
        receiver_window=window,
        receiver_id=receiver_id,
        group_tag=group_tag,
        feedback=feedback,
        flags=flags,
    )


def _decode_setup(buf, frame_length: int, flags: int) -> SetupFrame:
    _need(frame_length, SETUP_LENGTH, "SETUP")
    (
        _,
        _,
        _,
        _,
        term_offset,
        session_id,
        stream_id,
        initial_term_id,
        active_term_id,
        term_length,
        mtu,
        ttl,
    ) = _SETUP.unpack_from(buf, 0)
    return SetupFrame(
        term_offset=term_offset,
        session_id=session_id,
        stream_id=stream_id,
        initial_term_id=initial_term_id,
        active_term_id=active_term_id,
        term_length=term_length,
        mtu=mtu,
        ttl=ttl,
        flags=flags,
    )


def _decode_rttm(buf, frame_length: int, flags: int) -> Rttm:
    _need(frame_length, RTTM_LENGTH, "RTTM")
    _, _, _, _, session_id, stream_id, echo, delta, receiver_id = _RTTM.unpack_from(buf, 0)
    return Rttm(
        session_id=session_id,
        stream_id=stream_id,
        echo_timestamp_ns=echo,
        reception_delta=delta,
        receiver_id=receiver_id,
        flags=flags,
    )


def _decode_err(buf, frame_length: int, flags: int) -> ErrorFrame:
    _need(frame_length, ERR_HEADER_LENGTH, "ERR")
    _, _, _, _, session_id, stream_id, receiver_id, group_tag, error_code, text_length = _ERR.unpack_from(
        buf, 0
    )
    if not 0 <= text_length <= min(ERR_MAX_TEXT_LENGTH, frame_length - ERR_HEADER_LENGTH):
        raise DecodeError(
            f"ERR error_string_length 0..{min(ERR_MAX_TEXT_LENGTH, frame_length - ERR_HEADER_LENGTH)},"
            f" found {text_length}",
            offset=36,
        )
    raw = bytes(buf[ERR_HEADER_LENGTH : ERR_HEADER_LENGTH + text_length])
    try:
        message = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DecodeError("ERR error text in UTF-8", offset=ERR_HEADER_LENGTH + error.start) from None
    return ErrorFrame(
        session_id=session_id,
        stream_id=stream_id,
        receiver_id=receiver_id,
        group_tag=group_tag,
        error_code=error_code,
        error_message=message,
        flags=flags,
    )


def _decode_rsp_setup(buf, frame_length: int, flags: int) -> RspSetup:
    _need(frame_length, RSP_SETUP_LENGTH, "RSP_SETUP")
    _, _, _, _, session_id, stream_id, response_session_id = _RSP_SETUP.unpack_from(buf, 0)
    return RspSetup(
        session_id=session_id, stream_id=stream_id, response_session_id=response_session_id, flags=flags
    )


def _decode_res(buf, frame_length: int, flags: int) -> ResolutionFrame:
    entries = []
    offset = HEADER_LENGTH
    while offset < frame_length:
        if frame_length - offset < _RES_ENTRY.size:
            raise DecodeError("a resolution entry header (8 bytes)", offset=offset)
        res_type, entry_flags, udp_port, age_in_ms = _RES_ENTRY.unpack_from(buf, offset)
        if res_type == RES_TYPE_IPV4:
            address_length = 4
        elif res_type == RES_TYPE_IPV6:
            address_length = 16
        else:
            raise DecodeError(f"resolution type 1 (IPv4) or 2 (IPv6), found {res_type}", offset=offset)
        name_offset = offset + _RES_ENTRY.size + address_length + _NAME_LENGTH.size
        if name_offset > frame_length:
            raise DecodeError("a whole resolution entry", offset=offset)
        address = bytes(buf[offset + _RES_ENTRY.size : offset + _RES_ENTRY.size + address_length])
        (name_length,) = _NAME_LENGTH.unpack_from(buf, name_offset - _NAME_LENGTH.size)
        if not 0 <= name_length <= RES_MAX_NAME_LENGTH or name_offset + name_length > frame_length:
            raise DecodeError(
                f"resolution name_length 0..{RES_MAX_NAME_LENGTH} within the frame", offset=offset
            )
        try:
            name = bytes(buf[name_offset : name_offset + name_length]).decode("ascii")
        except UnicodeDecodeError:
            raise DecodeError("an ASCII host name", offset=name_offset) from None
        entries.append(
            ResolutionEntry(
                res_type=res_type,
                flags=entry_flags,
                udp_port=udp_port,
                age_in_ms=age_in_ms,
                address=str(ipaddress.ip_address(address)),
                name=name,
            )
        )
        offset += align(name_offset + name_length - offset, RES_ENTRY_ALIGNMENT)
    return ResolutionFrame(entries=tuple(entries), flags=flags)


_CONTROL_DECODERS = {
    HDR_TYPE_NAK: _decode_nak,
    HDR_TYPE_SM: _decode_sm,
    HDR_TYPE_ERR: _decode_err,
    HDR_TYPE_SETUP: _decode_setup,
    HDR_TYPE_RTTM: _decode_rttm,
    HDR_TYPE_RES: _decode_res,
    HDR_TYPE_RSP_SETUP: _decode_rsp_setup,
}


# --- Encoding -------------------------------------------------------------------------------------
def encode_frame(frame: Frame) -> bytes:
    """The frame's bytes exactly as Aeron puts them on the wire (unaligned; see `encode_datagram`)."""
    encoder = _ENCODERS.get(type(frame))
    if encoder is None:
        raise TypeError(f"not an Aeron frame: {frame!r}")
    return encoder(frame)


def encode_datagram(frames: Sequence[Frame]) -> bytes:
    """One UDP payload: DATA/PAD frames back to back at 32-byte alignment, or one control frame."""
    if not frames:
        raise ValueError("a datagram holds at least one frame")
    if all(type(frame) in (DataFrame, PadFrame) for frame in frames):
        parts = []
        for frame in frames:
            encoded = encode_frame(frame)
            parts.append(encoded)
            parts.append(bytes(align(len(encoded)) - len(encoded)))
        return b"".join(parts)
    if len(frames) != 1:
        raise ValueError("a control frame travels alone in its datagram")
    return encode_frame(frames[0])


def _encode_data(frame: DataFrame) -> bytes:
    if frame.frame_length == 0:
        if frame.payload:
            raise ValueError("a heartbeat (frame_length 0) carries no payload")
    elif frame.frame_length != DATA_HEADER_LENGTH + len(frame.payload):
        raise ValueError(f"frame_length {frame.frame_length} != 32 + {len(frame.payload)} payload bytes")
    header = _DATA_HEADER.pack(
        frame.frame_length,
        CURRENT_VERSION,
        frame.flags,
        HDR_TYPE_DATA,
        frame.term_offset,
        frame.session_id,
        frame.stream_id,
        frame.term_id,
        frame.reserved_value,
    )
    return header + frame.payload


def _encode_pad(frame: PadFrame) -> bytes:
    if frame.frame_length < DATA_HEADER_LENGTH:
        raise ValueError(f"PAD frame_length must be at least 32, got {frame.frame_length}")
    return _DATA_HEADER.pack(
        frame.frame_length,
        CURRENT_VERSION,
        frame.flags,
        HDR_TYPE_PAD,
        frame.term_offset,
        frame.session_id,
        frame.stream_id,
        frame.term_id,
        frame.reserved_value,
    )


def _encode_setup(frame: SetupFrame) -> bytes:
    return _SETUP.pack(
        SETUP_LENGTH,
        CURRENT_VERSION,
        frame.flags,
        HDR_TYPE_SETUP,
        frame.term_offset,
        frame.session_id,
        frame.stream_id,
        frame.initial_term_id,
        frame.active_term_id,
        frame.term_length,
        frame.mtu,
        frame.ttl,
    )


def _encode_sm(frame: StatusMessage) -> bytes:
    if frame.group_tag is not None and frame.feedback:
        raise ValueError("an SM carries a group tag or feedback, not both")
    if len(frame.feedback) == _GROUP_TAG.size:
        raise ValueError("8 bytes of SM feedback would read back as a group tag")
    tail = _GROUP_TAG.pack(frame.group_tag) if frame.group_tag is not None else frame.feedback
    header = _SM.pack(
        SM_LENGTH + len(tail),
        CURRENT_VERSION,
        frame.flags,
        HDR_TYPE_SM,
        frame.session_id,
        frame.stream_id,
        frame.consumption_term_id,
        frame.consumption_term_offset,
        frame.receiver_window,
        frame.receiver_id,
    )
    return header + tail


def _encode_nak(frame: Nak) -> bytes:
    return _NAK.pack(
        NAK_LENGTH,
        CURRENT_VERSION,
        frame.flags,
        HDR_TYPE_NAK,
        frame.session_id,
        frame.stream_id,
        frame.term_id,
        frame.term_offset,
        frame.length,
    )


def _encode_rttm(frame: Rttm) -> bytes:
    return _RTTM.pack(
        RTTM_LENGTH,
        CURRENT_VERSION,
        frame.flags,
        HDR_TYPE_RTTM,
        frame.session_id,
        frame.stream_id,
        frame.echo_timestamp_ns,
        frame.reception_delta,
        frame.receiver_id,
    )


def _encode_err(frame: ErrorFrame) -> bytes:
    text = frame.error_message.encode("utf-8")
    if len(text) > ERR_MAX_TEXT_LENGTH:
        raise ValueError(f"error text longer than {ERR_MAX_TEXT_LENGTH} bytes")
    header = _ERR.pack(
        ERR_HEADER_LENGTH + len(text),
        CURRENT_VERSION,
        frame.flags,
        HDR_TYPE_ERR,
        frame.session_id,
        frame.stream_id,
        frame.receiver_id,
        frame.group_tag,
        frame.error_code,
        len(text),
    )
    return header + text


def _encode_rsp_setup(frame: RspSetup) -> bytes:
    return _RSP_SETUP.pack(
        RSP_SETUP_LENGTH,
        CURRENT_VERSION,
        frame.flags,
        HDR_TYPE_RSP_SETUP,
        frame.session_id,
        frame.stream_id,
        frame.response_session_id,
    )


def _encode_res(frame: ResolutionFrame) -> bytes:
    body = bytearray()
    for entry in frame.entries:
        address = ipaddress.ip_address(entry.address).packed
        expected = 4 if entry.res_type == RES_TYPE_IPV4 else 16 if entry.res_type == RES_TYPE_IPV6 else None
        if expected != len(address):
            raise ValueError(f"resolution type {entry.res_type} does not match address {entry.address}")
        name = entry.name.encode("ascii")
        if len(name) > RES_MAX_NAME_LENGTH:
            raise ValueError(f"resolution name longer than {RES_MAX_NAME_LENGTH} bytes")
        encoded = (
            _RES_ENTRY.pack(entry.res_type, entry.flags, entry.udp_port, entry.age_in_ms)
            + address
            + _NAME_LENGTH.pack(len(name))
            + name
        )
        body += encoded + bytes(align(len(encoded), RES_ENTRY_ALIGNMENT) - len(encoded))
    return _FRAME_HEADER.pack(HEADER_LENGTH + len(body), CURRENT_VERSION, frame.flags, HDR_TYPE_RES) + bytes(
        body
    )


def _encode_unknown(frame: UnknownFrame) -> bytes:
    return frame.frame


_ENCODERS = {
    DataFrame: _encode_data,
    PadFrame: _encode_pad,
    SetupFrame: _encode_setup,
    StatusMessage: _encode_sm,
    Nak: _encode_nak,
    Rttm: _encode_rttm,
    ErrorFrame: _encode_err,
    RspSetup: _encode_rsp_setup,
    ResolutionFrame: _encode_res,
    UnknownFrame: _encode_unknown,
}
