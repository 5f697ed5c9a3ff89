"""Aeron Archive's ``archive.catalog``: what each recording is, where it starts and where it stopped.

A member's log is an archive recording, so the catalog says how far a member's log really reached
(the log recording's ``stopPosition``) even when recording.log, written only at term boundaries and
snapshots, does not.  The layout, as Aeron 1.47's ``io.aeron.archive.Catalog`` writes it (the
messages are those of ``aeron-archive-codecs.xml``, schema 101, written without SBE message headers):

* at offset 0, a ``CatalogHeader`` block: ``version`` (int32, semantic version), ``length`` (int32,
  the header's length: where the first entry starts), ``nextRecordingId`` (int64), ``alignment``
  (int32, the entries' alignment), a reserved byte at 31;
* then one entry per recording, each a 32-byte ``RecordingDescriptorHeader`` — ``length`` (int32, of
  the descriptor that follows, padding included), ``state`` (int32 ``RecordingState``: INVALID 0,
  VALID 1, DELETED 2), ``checksum`` (int32; 0 unless the archive computes one), reserved byte at 31 —
  followed by a ``RecordingDescriptor``: an 80-byte block of fields, then the ``strippedChannel``,
  ``originalChannel`` and ``sourceIdentity`` strings, each a uint32 length and that many ASCII bytes;
* the file is pre-sized (1 MiB by default): an entry whose ``length`` is 0 ends the catalog.

`read_catalog` keeps every whole entry before a damaged one and says where and what was wrong
(``Catalog.problem``), so a catalog torn by a crash still gives what it held.  No I/O here.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Any

from formats.errors import DecodeError

#: ``CatalogHeader``: version, length, nextRecordingId, alignment (reserved byte at 31).
CATALOG_HEADER = struct.Struct("<iiqi")
CATALOG_HEADER_LENGTH = 32
#: ``RecordingDescriptorHeader``: length, state, checksum (reserved byte at 31).
DESCRIPTOR_HEADER = struct.Struct("<iii")
DESCRIPTOR_HEADER_LENGTH = 32
#: ``RecordingDescriptor``'s fixed block, in schema order.
DESCRIPTOR_BLOCK = struct.Struct("<qqqqqqqiiiiii")
DESCRIPTOR_BLOCK_LENGTH = 80
BLOCK_FIELDS = (
    "controlSessionId",
    "correlationId",
    "recordingId",
    "startTimestamp",
    "stopTimestamp",
    "startPosition",
    "stopPosition",
    "initialTermId",
    "segmentFileLength",
    "termBufferLength",
    "mtuLength",
    "sessionId",
    "streamId",
)
STRING_FIELDS = ("strippedChannel", "originalChannel", "sourceIdentity")
_LENGTH = struct.Struct("<I")
#: Channel aliases Aeron Cluster gives its log: the leader's publication, a follower's subscription.
LOG_ALIASES = ("log-cm", "log")
#: Aeron's ``NULL_POSITION``: a recording still going has no stop position.
NULL_POSITION = -1


class RecordingState(enum.IntEnum):
    INVALID = 0
    VALID = 1
    DELETED = 2


@dataclass(frozen=True, slots=True)
class CatalogHeader:
    version: int
    length: int
    next_recording_id: int
    alignment: int

    @property
    def semantic_version(self) -> str:
        """``3.1.0`` from Aeron's packed ``major << 16 | minor << 8 | patch``."""
        return f"{(self.version >> 16) & 0xFF}.{(self.version >> 8) & 0xFF}.{self.version & 0xFF}"

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "semanticVersion": self.semantic_version,
            "length": self.length,
            "nextRecordingId": self.next_recording_id,
            "alignment": self.alignment,
        }


@dataclass(frozen=True, slots=True)
class RecordingDescriptor:
    """One catalog entry: its place in the file, its header, and the descriptor's fields."""

    offset: int  # of the entry's RecordingDescriptorHeader in the file
    length: int
    state: RecordingState | int
    checksum: int
    control_session_id: int
    correlation_id: int
    recording_id: int
    start_timestamp: int  # epoch ms
    stop_timestamp: int  # epoch ms; NULL_TIMESTAMP (-1) while recording
    start_position: int
    stop_position: int  # NULL_POSITION (-1) while recording
    initial_term_id: int
    segment_file_length: int
    term_buffer_length: int
    mtu_length: int
    session_id: int
    stream_id: int
    stripped_channel: str
    original_channel: str
    source_identity: str

    @property
    def state_name(self) -> str:
        return self.state.name if isinstance(self.state, RecordingState) else str(self.state)

    @property
    def alias(self) -> str | None:
        """The channel's ``alias`` parameter (Aeron Cluster names its log ``log-cm``, snapshots
        ``snapshot``), or None."""
        _, _, params = self.original_channel.partition("?")
        for param in params.split("|"):
            key, _, value = param.partition("=")
            if key == "alias":
                return value
        return None

    def to_json(self) -> dict[str, Any]:
        values = (
            self.control_session_id,
            self.correlation_id,
            self.recording_id,
            self.start_timestamp,
            self.stop_timestamp,
            self.start_position,
            self.stop_position,
            self.initial_term_id,
            self.segment_file_length,
            self.term_buffer_length,
            self.mtu_length,
            self.session_id,
            self.stream_id,
        )
        out: dict[str, Any] = {"offset": self.offset, "length": self.length, "state": self.state_name,
                               "checksum": self.checksum}
        out.update(zip(BLOCK_FIELDS, values, strict=True))
        out.update(zip(STRING_FIELDS, (self.stripped_channel, self.original_channel, self.source_identity), strict=True))
        return out


@dataclass(frozen=True, slots=True)
class Catalog:
    header: CatalogHeader
    recordings: tuple[RecordingDescriptor, ...]
    #: What stopped the reading before the end, when something did; the recordings before it are kept.
    problem: DecodeError | None = None

    def recording(self, recording_id: int) -> RecordingDescriptor | None:
        for descriptor in self.recordings:
            if descriptor.recording_id == recording_id:
                return descriptor
        return None

    def log_recordings(self) -> tuple[RecordingDescriptor, ...]:
        """The cluster log's recordings.  A member records its log under the channel it had when the
        recording started: the leader's own publication (alias ``log-cm``, control-mode manual) or the
        follower's subscription (alias ``log``) — as seen in every real 1.47.3 capture."""
        return tuple(r for r in self.recordings if r.alias in LOG_ALIASES)

    def to_json(self) -> dict[str, Any]:
        return {
            "header": self.header.to_json(),
            "recordings": [r.to_json() for r in self.recordings],
            "problem": str(self.problem) if self.problem is not None else None,
        }


def _string(data: bytes, at: int, end: int, name: str, source: str | None) -> tuple[str, int]:
    if at + _LENGTH.size > end:
        raise DecodeError(f"RecordingDescriptor.{name}: a 4-byte length, only {max(end - at, 0)} bytes left in the entry",
                          source=source, offset=at)
    (length,) = _LENGTH.unpack_from(data, at)
    at += _LENGTH.size
    if length > end - at:
        raise DecodeError(f"RecordingDescriptor.{name}: {length} bytes, only {end - at} left in the entry",
                          source=source, offset=at - _LENGTH.size)
    raw = bytes(data[at : at + length])
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise DecodeError(f"RecordingDescriptor.{name}: not US-ASCII", source=source, offset=at) from None
    return text, at + length


def _header(data: bytes, source: str | None) -> CatalogHeader:
    if len(data) < CATALOG_HEADER_LENGTH:
        raise DecodeError(f"a catalog header of {CATALOG_HEADER_LENGTH} bytes, the file has {len(data)}",
                          source=source, offset=0)
    version, length, next_recording_id, alignment = CATALOG_HEADER.unpack_from(data, 0)
    if not CATALOG_HEADER_LENGTH <= length <= len(data):
        raise DecodeError(f"CatalogHeader.length between {CATALOG_HEADER_LENGTH} and the file's {len(data)} bytes, "
                          f"got {length}", source=source, offset=4)
    if alignment <= 0 or alignment & (alignment - 1):
        raise DecodeError(f"CatalogHeader.alignment a power of two, got {alignment}", source=source, offset=16)
    if next_recording_id < 0:
        raise DecodeError(f"CatalogHeader.nextRecordingId >= 0, got {next_recording_id}", source=source, offset=8)
    return CatalogHeader(version, length, next_recording_id, alignment)


def _entry(data: bytes, at: int, source: str | None) -> RecordingDescriptor | None:
    """The entry at ``at``; None at the end of the catalog (no room for a header, or length 0)."""
    size = len(data)
    if at + DESCRIPTOR_HEADER_LENGTH > size:
        return None
    length, state, checksum = DESCRIPTOR_HEADER.unpack_from(data, at)
    if length == 0:
        return None
    body = at + DESCRIPTOR_HEADER_LENGTH
    if length < DESCRIPTOR_BLOCK_LENGTH + 3 * _LENGTH.size:
        raise DecodeError(f"RecordingDescriptorHeader.length at least {DESCRIPTOR_BLOCK_LENGTH + 12}, got {length}",
                          source=source, offset=at)
    if length > size - body:
        raise DecodeError(f"a RecordingDescriptor of {length} bytes, only {size - body} left (a torn catalog?)",
                          source=source, offset=at)
    try:
        state_value: RecordingState | int = RecordingState(state)
    except ValueError:
        raise DecodeError(f"RecordingDescriptorHeader.state INVALID (0), VALID (1) or DELETED (2), got {state}",
                          source=source, offset=at + 4) from None
    values = DESCRIPTOR_BLOCK.unpack_from(data, body)
    end = body + length
    at_string = body + DESCRIPTOR_BLOCK_LENGTH
    strings = []
    for name in STRING_FIELDS:
        text, at_string = _string(data, at_string, end, name, source)
        strings.append(text)
    return RecordingDescriptor(at, length, state_value, checksum, *values, *strings)


def read_catalog(data: bytes | bytearray | memoryview, *, source: str | None = None) -> Catalog:
    """Every entry of an ``archive.catalog``.  A bad header raises `DecodeError`; a bad entry ends
    the reading there, kept as ``Catalog.problem`` with the entries before it."""
    data = bytes(data)
    header = _header(data, source)
    recordings: list[RecordingDescriptor] = []
    at = header.length
    problem = None
    while True:
        try:
            entry = _entry(data, at, source)
        except DecodeError as error:
            problem = error
            break
        if entry is None:
            break
        recordings.append(entry)
        at += DESCRIPTOR_HEADER_LENGTH + entry.length
    return Catalog(header, tuple(recordings), problem)
