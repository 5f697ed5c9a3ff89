"""`node-state.dat`: a cluster member's persistent candidateTermId (schema 112 v10), byte for byte.

Theory of operation.  The file (aeron-formats.md §5) starts with an 8-byte `nodeStateHeader` body
(semantic version, padding) and is followed by records, each a 16-byte header (blockLength,
templateId, schemaId, version, frameLength, padding) and a body, 8-byte aligned, up to a
`nodeStateFooter` (template 304).  Aeron finds records by *scanning* from offset 8
(`scanForMessageTypeOffset`), so this reader scans too and never assumes where candidateTerm sits.
Files written by Aeron 1.41/1.42 also hold a `ClusterMembers` record (template 303), kept here as a
read-only legacy value.

`NodeStateFile` is an in-memory model of the whole (normally 1 MiB) file with Aeron's two writers,
`update_candidate_term_id` and `propose_max_candidate_term_id`; `NodeStateFile.create()` is the file
Aeron 1.41+ makes when none exists.  A file Aeron would refuse to load (bad major version, no footer,
no candidateTerm record, a negative frame length) or a record that is
not schema 112 raises `DecodeError` with the offset.  No I/O here.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from formats.errors import DecodeError

FILE_LENGTH = 1 << 20
SCHEMA_ID = 112
SCHEMA_VERSION = 10
SEMANTIC_VERSION = 0x0300  # ClusterMarkFile.SEMANTIC_VERSION 0.3.0, also the node-state header version
MAJOR_VERSION = 0
ALIGNMENT = 8
HEADER_LENGTH = 8  # nodeStateHeader blockLength: where the first record starts
RECORD_HEADER_LENGTH = 16

NODE_STATE_HEADER_TEMPLATE_ID = 300
CANDIDATE_TERM_TEMPLATE_ID = 301
CLUSTER_MEMBERS_TEMPLATE_ID = 303
FOOTER_TEMPLATE_ID = 304
CANDIDATE_TERM_BLOCK_LENGTH = 24
CLUSTER_MEMBERS_BLOCK_LENGTH = 16

#: Schema names of the record types, as they appear in JSON.
TEMPLATE_NAMES = {
    NODE_STATE_HEADER_TEMPLATE_ID: "nodeStateHeader",
    CANDIDATE_TERM_TEMPLATE_ID: "candidateTerm",
    CLUSTER_MEMBERS_TEMPLATE_ID: "ClusterMembers",
    FOOTER_TEMPLATE_ID: "nodeStateFooter",
}

_RECORD_HEADER = struct.Struct("<HHHHii")
_FILE_HEADER = struct.Struct("<ii")
_CANDIDATE_TERM = struct.Struct("<qqq")  # candidateTermId, timestamp, logPosition
_CLUSTER_MEMBERS = struct.Struct("<qiiI")  # leadershipTermId, memberId, highMemberId, varAscii length
_INT64 = struct.Struct("<q")
NULL_VALUE = -1


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) & ~(alignment - 1)


@dataclass(frozen=True, slots=True)
class CandidateTerm:
    candidate_term_id: int
    timestamp: int  # epoch ms (the node's epoch clock)
    log_position: int


@dataclass(frozen=True, slots=True)
class ClusterMembers:
    """The 1.41/1.42 `ClusterMembers` record (dynamic membership, no longer written)."""

    leadership_term_id: int
    member_id: int
    high_member_id: int
    cluster_members: str


@dataclass(frozen=True, slots=True)
class Record:
    """Where one record sits and what its 16-byte header says."""

    offset: int
    block_length: int
    template_id: int
    schema_id: int
    version: int
    frame_length: int

    @property
    def name(self) -> str:
        return TEMPLATE_NAMES.get(self.template_id, f"template{self.template_id}")


@dataclass(frozen=True, slots=True)
class NodeState:
    """What a node-state.dat says, as values."""

    version: int
    padding: int
    candidate_term: CandidateTerm
    cluster_members: ClusterMembers | None
    records: tuple[Record, ...]
    file_length: int


class NodeStateFile:
    """The whole node-state.dat in memory, with Aeron's `NodeStateFile` writers."""

    def __init__(self, data: bytes, state: NodeState, candidate_term_offset: int, source: str | None) -> None:
        # Immutable bytes, replaced on each write (copy-on-write): a copy of the file shares them.
        self._data = bytes(data)
        self._state = state
        self._body = candidate_term_offset
        self._source = source

    @classmethod
    def create(cls) -> NodeStateFile:
        """What Aeron 1.41+ writes when no node-state.dat exists: candidateTerm all −1, then the footer."""
        data = bytearray(FILE_LENGTH)
        _FILE_HEADER.pack_into(data, 0, SEMANTIC_VERSION, 0)
        frame_length = RECORD_HEADER_LENGTH + CANDIDATE_TERM_BLOCK_LENGTH
        _RECORD_HEADER.pack_into(
            data, HEADER_LENGTH, CANDIDATE_TERM_BLOCK_LENGTH, CANDIDATE_TERM_TEMPLATE_ID, SCHEMA_ID,
            SCHEMA_VERSION, frame_length, 0,
        )
        _CANDIDATE_TERM.pack_into(data, HEADER_LENGTH + RECORD_HEADER_LENGTH, NULL_VALUE, NULL_VALUE, NULL_VALUE)
        footer = _align(HEADER_LENGTH + frame_length, ALIGNMENT)
        _RECORD_HEADER.pack_into(data, footer, 0, FOOTER_TEMPLATE_ID, SCHEMA_ID, SCHEMA_VERSION, RECORD_HEADER_LENGTH, 0)
        return cls.decode(data, source="<new node-state.dat>")

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, *, source: str | None = None) -> NodeStateFile:
        state, body = _decode(data, source)
        return cls(bytes(data), state, body, source)

    @property
    def state(self) -> NodeState:
        return self._state

    @property
    def candidate_term(self) -> CandidateTerm:
        return self._state.candidate_term

    def update_candidate_term_id(self, candidate_term_id: int, log_position: int, timestamp: int) -> None:
        """Unconditional write, in Aeron's order: logPosition, timestamp, then candidateTermId."""
        body = self._body
        data = bytearray(self._data)
        _INT64.pack_into(data, body + 16, log_position)
        _INT64.pack_into(data, body + 8, timestamp)
        _INT64.pack_into(data, body, candidate_term_id)
        self._data = bytes(data)
        self._state = NodeState(
            self._state.version,
            self._state.padding,
            CandidateTerm(candidate_term_id, timestamp, log_position),
            self._state.cluster_members,
            self._state.records,
            self._state.file_length,
        )

    def propose_max_candidate_term_id(self, candidate_term_id: int, log_position: int, timestamp: int) -> int:
        """Write only if higher than the stored candidateTermId; return the (new) maximum."""
        existing = self._state.candidate_term.candidate_term_id
        if candidate_term_id > existing:
            self.update_candidate_term_id(candidate_term_id, log_position, timestamp)
            return candidate_term_id
        return existing

    def to_bytes(self) -> bytes:
        return self._data

    def to_json(self) -> dict[str, Any]:
        return node_state_to_json(self._state)


def node_state_to_json(state: NodeState) -> dict[str, Any]:
    """Contract §3: candidateTerm first, then every other record by its schema name, in file order."""
    term = state.candidate_term
    document: dict[str, Any] = {
        "candidateTerm": {
            "candidateTermId": term.candidate_term_id,
            "logPosition": term.log_position,
            "timestamp": term.timestamp,
        },
        "nodeStateHeader": {"version": state.version, "padding": state.padding},
    }
    for record in state.records:
        if record.template_id == CLUSTER_MEMBERS_TEMPLATE_ID and state.cluster_members is not None:
            members = state.cluster_members
            document["ClusterMembers"] = {
                "leadershipTermId": members.leadership_term_id,
                "memberId": members.member_id,
                "highMemberId": members.high_member_id,
                "clusterMembers": members.cluster_members,
            }
        elif record.template_id == FOOTER_TEMPLATE_ID:
            document["nodeStateFooter"] = {}
        elif record.template_id != CANDIDATE_TERM_TEMPLATE_ID:
            document.setdefault("unknownRecords", []).append(
                {"templateId": record.template_id, "offset": record.offset, "frameLength": record.frame_length}
            )
    return document


def _decode(data: bytes | bytearray | memoryview, source: str | None) -> tuple[NodeState, int]:
    size = len(data)
    if size == 0:
        raise DecodeError("empty file; expected a node-state.dat (1 MiB, starting with the nodeStateHeader)", source=source)
    if size < HEADER_LENGTH:
        raise DecodeError(f"only {size} bytes; the nodeStateHeader alone needs {HEADER_LENGTH}", source=source, offset=0)
    version, padding = _FILE_HEADER.unpack_from(data, 0)
    major = (version >> 16) & 0xFF
    if major != MAJOR_VERSION:
        raise DecodeError(
            f"nodeStateHeader version {version & 0xFFFF_FFFF:#010x} has major version {major}; Aeron expects {MAJOR_VERSION} "
            "(mark file major version does not match software)",
            source=source,
            offset=0,
        )

    records: list[Record] = []
    position = HEADER_LENGTH
    footer = None
    while position < size:
        if position + RECORD_HEADER_LENGTH > size:
            raise DecodeError(
                f"record header cut short: {size - position} of {RECORD_HEADER_LENGTH} bytes", source=source, offset=position
            )
        block_length, template_id, schema_id, record_version, frame_length, _ = _RECORD_HEADER.unpack_from(data, position)
        if schema_id != SCHEMA_ID and any(data[position : position + RECORD_HEADER_LENGTH]):
            raise DecodeError(
                f"record header has schemaId {schema_id} (templateId {template_id}); node-state records are "
                f"schema {SCHEMA_ID}",
                source=source,
                offset=position,
            )
        record = Record(position, block_length, template_id, schema_id, record_version, frame_length)
        records.append(record)
        if template_id == FOOTER_TEMPLATE_ID:
            footer = record
            break
        if frame_length < 0:
            raise DecodeError(f"frameLength {frame_length} < 0, file corrupt?", source=source, offset=position)
        if frame_length == 0:
            break  # Aeron's scan gives up here: the footer is never reached
        if position + frame_length > size:
            raise DecodeError(
                f"record (templateId {template_id}, frameLength {frame_length}) is cut short by the end of the "
                f"file ({size} bytes)",
                source=source,
                offset=position,
            )
        if frame_length < RECORD_HEADER_LENGTH + block_length:
            raise DecodeError(
                f"frameLength {frame_length} is shorter than the record header and its {block_length}-byte block",
                source=source,
                offset=position,
            )
        position += _align(frame_length, ALIGNMENT)
    if footer is None:
        raise DecodeError(
            "failed to find NodeStateFooter entry, file corrupt? (no record with templateId 304 before "
            f"{'a zero frameLength' if records and records[-1].frame_length == 0 else 'the end of the file'})",
            source=source,
            offset=records[-1].offset if records else HEADER_LENGTH,
        )

    candidate = next((r for r in records if r.template_id == CANDIDATE_TERM_TEMPLATE_ID), None)
    if candidate is None:
        raise DecodeError("failed to find CandidateTerm entry (templateId 301)", source=source, offset=HEADER_LENGTH)
    body = candidate.offset + RECORD_HEADER_LENGTH  # 8-aligned, as records start at 8 and step by align(_, 8)
    if body + _CANDIDATE_TERM.size > size:
        raise DecodeError("candidateTerm body cut short", source=source, offset=body)
    candidate_term_id, timestamp, log_position = _CANDIDATE_TERM.unpack_from(data, body)

    members = None
    members_record = next((r for r in records if r.template_id == CLUSTER_MEMBERS_TEMPLATE_ID), None)
    if members_record is not None:
        members = _decode_cluster_members(data, members_record, source)

    state = NodeState(
        version=version,
        padding=padding,
        candidate_term=CandidateTerm(candidate_term_id, timestamp, log_position),
        cluster_members=members,
        records=tuple(records),
        file_length=size,
    )
    return state, body


def _decode_cluster_members(data: bytes | bytearray | memoryview, record: Record, source: str | None) -> ClusterMembers:
    body = record.offset + RECORD_HEADER_LENGTH
    end = record.offset + record.frame_length
    var_offset = body + record.block_length  # the acting block length finds the var field
    if record.block_length < CLUSTER_MEMBERS_BLOCK_LENGTH or var_offset + 4 > end:
        raise DecodeError(
            f"ClusterMembers record too short for its fields (blockLength {record.block_length}, "
            f"frameLength {record.frame_length})",
            source=source,
            offset=record.offset,
        )
    leadership_term_id, member_id, high_member_id = struct.unpack_from("<qii", data, body)
    (length,) = struct.unpack_from("<I", data, var_offset)
    if var_offset + 4 + length > end:
        raise DecodeError(
            f"ClusterMembers clusterMembers length {length} runs past the record's frameLength {record.frame_length}",
            source=source,
            offset=var_offset,
        )
    text = bytes(data[var_offset + 4 : var_offset + 4 + length]).decode("ascii", "replace")
    return ClusterMembers(leadership_term_id, member_id, high_member_id, text)
