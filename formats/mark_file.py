"""`cluster-mark.dat` / `cluster-mark-service-N.dat`: the cluster components' mark files (schema 110).

Theory of operation.  A mark file (aeron-formats.md §6) is a `MarkFileHeader` SBE body (block of 128
bytes, then six length-prefixed ASCII strings) followed, at the absolute file offset `headerLength`
(8192), by an Agrona `DistinctErrorLog` of `errorBufferLength` bytes.  Aeron 1.47.0 put an 8-byte SBE
message header in front of the body; older files start with the body.  Like
`ClusterMarkFile.headerOffset`, the reader looks for (templateId 200, schemaId 110) at bytes 2..5 to
tell them apart; an older file is decoded as Aeron 1.47.3 decodes it (acting version 2, block 128),
unless the caller says which schema version wrote it.

`MarkFile` is a read-only value: the header fields, the layout, and the distinct errors.  It keeps
no reference to the input, so a caller may decode from a memory map and close it.  Input that is
not a mark file Aeron writes (too short, strings or the error region past the end of the file or the
header, an impossible version, a corrupt error record) raises `DecodeError` with the offset.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from formats.errors import DecodeError

SCHEMA_ID = 110
SCHEMA_VERSION = 2
TEMPLATE_ID = 200
BLOCK_LENGTH = 128
MESSAGE_HEADER_LENGTH = 8
HEADER_LENGTH = 8 * 1024  # ClusterMarkFile.HEADER_LENGTH: where the error log starts
MAJOR_VERSION = 0
VERSION_FAILED = -1
ERROR_RECORD_HEADER_LENGTH = 24
ERROR_RECORD_ALIGNMENT = 8
INT32_MIN = -(1 << 31)

#: ClusterComponentType by schema version: v0 (before 1.43) calls 0 `NULL` and has no STANDBY.
COMPONENT_TYPES_V0 = {0: "NULL", 1: "CONSENSUS_MODULE", 2: "CONTAINER", 3: "BACKUP"}
COMPONENT_TYPES = {0: "UNKNOWN", 1: "CONSENSUS_MODULE", 2: "CONTAINER", 3: "BACKUP", 4: "STANDBY"}

#: (schema name, struct format, body offset) of the fixed fields, in schema order.
_FIXED_FIELDS = (
    ("version", "i", 0),
    ("componentType", "i", 4),
    ("activityTimestamp", "q", 8),
    ("startTimestamp", "q", 16),
    ("pid", "q", 24),
    ("candidateTermId", "q", 32),
    ("archiveStreamId", "i", 40),
    ("serviceStreamId", "i", 44),
    ("consensusModuleStreamId", "i", 48),
    ("ingressStreamId", "i", 52),
    ("memberId", "i", 56),
    ("serviceId", "i", 60),
    ("headerLength", "i", 64),
    ("errorBufferLength", "i", 68),
    ("clusterId", "i", 72),
)
#: (schema name, sinceVersion) of the var-length ASCII fields, in schema order.
_VAR_FIELDS = (
    ("aeronDirectory", 0),
    ("controlChannel", 0),
    ("ingressChannel", 0),
    ("serviceName", 0),
    ("authenticator", 0),
    ("servicesClusterDir", 1),
)
_MESSAGE_HEADER = struct.Struct("<HHHH")
_UINT32 = struct.Struct("<I")
_ERROR_RECORD = struct.Struct("<iiqq")


def component_type_name(value: int, schema_version: int = SCHEMA_VERSION) -> str:
    """The enum name the schema of that version gives `value` (Java's NULL_VAL / SBE_UNKNOWN otherwise)."""
    if value == INT32_MIN:
        return "NULL_VAL"
    names = COMPONENT_TYPES_V0 if schema_version < 1 else COMPONENT_TYPES
    return names.get(value, "SBE_UNKNOWN")


@dataclass(frozen=True, slots=True)
class MarkFileHeader:
    version: int
    component_type: int
    activity_timestamp: int
    start_timestamp: int
    pid: int
    candidate_term_id: int
    archive_stream_id: int
    service_stream_id: int
    consensus_module_stream_id: int
    ingress_stream_id: int
    member_id: int
    service_id: int
    header_length: int
    error_buffer_length: int
    cluster_id: int
    aeron_directory: str
    control_channel: str
    ingress_channel: str
    service_name: str
    authenticator: str
    services_cluster_dir: str


@dataclass(frozen=True, slots=True)
class ErrorRecord:
    """One distinct error: how often, first and last seen (epoch ms), and the stack trace text."""

    offset: int
    observation_count: int
    first_observation_timestamp: int
    last_observation_timestamp: int
    encoded_error: str


@dataclass(frozen=True, slots=True)
class MarkFile:
    body_offset: int  # 8 for files written by Aeron >= 1.47.0 (SBE header first), 0 before
    acting_block_length: int
    acting_version: int
    header: MarkFileHeader
    errors: tuple[ErrorRecord, ...]
    file_length: int

    @classmethod
    def decode(
        cls, data: bytes | bytearray | memoryview, *, source: str | None = None, legacy_version: int = SCHEMA_VERSION
    ) -> MarkFile:
        """Decode a mark file.  `legacy_version`: the schema version to assume for a pre-1.47 file
        (no SBE header); Aeron 1.47.3 itself assumes its own, 2."""
        return _decode(data, source, legacy_version)

    @property
    def component_type_name(self) -> str:
        return component_type_name(self.header.component_type, self.acting_version)

    @property
    def is_ready(self) -> bool:
        """The component signalled ready (version is set last, to 0.3.0-compatible)."""
        return self.header.version not in (0, VERSION_FAILED)

    def to_json(self) -> dict[str, Any]:
        """MarkFileHeader fields by schema name (componentType by enum name), the layout, the errors."""
        values = _field_values(self.header)
        values["componentType"] = self.component_type_name
        values["layout"] = {
            "bodyOffset": self.body_offset,
            "actingBlockLength": self.acting_block_length,
            "actingVersion": self.acting_version,
            "fileLength": self.file_length,
        }
        values["errors"] = [
            {
                "offset": e.offset,
                "observationCount": e.observation_count,
                "firstObservationTimestamp": e.first_observation_timestamp,
                "lastObservationTimestamp": e.last_observation_timestamp,
                "encodedError": e.encoded_error,
            }
            for e in self.errors
        ]
        return values

    def to_clustertool_describe_body(self) -> str:
        """The `[MarkFileHeader](...)` line of `ClusterTool <dir> describe`: the 1.47.3 SBE decoder's
        toString, acting/schema version and block length shown as `acting/schema` when they differ."""
        version = (
            f"{self.acting_version}/{SCHEMA_VERSION}" if self.acting_version != SCHEMA_VERSION else str(SCHEMA_VERSION)
        )
        block = (
            f"{self.acting_block_length}/{BLOCK_LENGTH}" if self.acting_block_length != BLOCK_LENGTH else str(BLOCK_LENGTH)
        )
        parts = []
        for name, value in _field_values(self.header).items():
            if name == "componentType":
                value = component_type_name(self.header.component_type, SCHEMA_VERSION)  # the 1.47.3 codec's names
            parts.append(f"{name}='{value}'" if isinstance(value, str) and name != "componentType" else f"{name}={value}")
        return (
            f"[MarkFileHeader](sbeTemplateId={TEMPLATE_ID}|sbeSchemaId={SCHEMA_ID}|sbeSchemaVersion={version}"
            f"|sbeBlockLength={block}):" + "|".join(parts)
        )


def _field_values(header: MarkFileHeader) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for (name, _, _), value in zip(_FIXED_FIELDS, _fixed_tuple(header), strict=True):
        values[name] = value
    for (name, _), value in zip(_VAR_FIELDS, _var_tuple(header), strict=True):
        values[name] = value
    return values


def _fixed_tuple(h: MarkFileHeader) -> tuple[int, ...]:
    return (
        h.version, h.component_type, h.activity_timestamp, h.start_timestamp, h.pid, h.candidate_term_id,
        h.archive_stream_id, h.service_stream_id, h.consensus_module_stream_id, h.ingress_stream_id,
        h.member_id, h.service_id, h.header_length, h.error_buffer_length, h.cluster_id,
    )


def _var_tuple(h: MarkFileHeader) -> tuple[str, ...]:
    return (h.aeron_directory, h.control_channel, h.ingress_channel, h.service_name, h.authenticator, h.services_cluster_dir)


def _decode(data: bytes | bytearray | memoryview, source: str | None, legacy_version: int) -> MarkFile:
    size = len(data)
    if size == 0:
        raise DecodeError("empty file; expected a cluster mark file (MarkFileHeader, then the error log)", source=source)
    if size < MESSAGE_HEADER_LENGTH:
        raise DecodeError(f"only {size} bytes; a mark file starts with at least {MESSAGE_HEADER_LENGTH}", source=source, offset=0)
    block_length, template_id, schema_id, version = _MESSAGE_HEADER.unpack_from(data, 0)
    if (template_id, schema_id) == (TEMPLATE_ID, SCHEMA_ID):
        body, acting_block, acting_version = MESSAGE_HEADER_LENGTH, block_length, version
    else:
        body, acting_block, acting_version = 0, BLOCK_LENGTH, legacy_version
    if acting_block < 76:  # the fixed fields end at 76; shorter blocks are not MarkFileHeaders
        raise DecodeError(
            f"MarkFileHeader blockLength {acting_block} is too short for its fields (expected {BLOCK_LENGTH})",
            source=source,
            offset=0,
        )
    if size < body + acting_block:
        raise DecodeError(
            f"only {size} bytes; the MarkFileHeader block needs {body + acting_block}", source=source, offset=body
        )
    if not any(data[: min(size, HEADER_LENGTH)]):
        raise DecodeError("the mark file header is all zeros (never written)", source=source, offset=0)

    fixed = [struct.unpack_from("<" + fmt, data, body + offset)[0] for _, fmt, offset in _FIXED_FIELDS]
    file_version = fixed[0]
    semantic = 0 < file_version < (1 << 24) and (file_version >> 16) & 0xFF == MAJOR_VERSION
    if not semantic and file_version not in (0, VERSION_FAILED):
        raise DecodeError(
            f"MarkFileHeader version {file_version} is not a cluster mark file version (expected major "
            f"{MAJOR_VERSION}, or 0 = not ready yet, or -1 = failed start)",
            source=source,
            offset=body,
        )

    strings = []
    position = body + acting_block
    for name, since in _VAR_FIELDS:
        if since > acting_version:
            strings.append("")  # absent in this version: the decoder returns "" and reads nothing
            continue
        if position + 4 > size:
            raise DecodeError(f"{name} length cut short", source=source, offset=position)
        (length,) = _UINT32.unpack_from(data, position)
        if position + 4 + length > size:
            raise DecodeError(
                f"{name} length {length} runs past the end of the file ({size} bytes)", source=source, offset=position
            )
        strings.append(bytes(data[position + 4 : position + 4 + length]).decode("ascii", "replace"))
        position += 4 + length
    header = MarkFileHeader(*fixed, *strings)

    error_start, error_length = header.header_length, header.error_buffer_length
    if error_start < position:
        raise DecodeError(
            f"headerLength {error_start} lies inside the MarkFileHeader, which ends at {position}",
            source=source,
            offset=body + 64,
        )
    if error_length < 0 or error_start + error_length > size:
        raise DecodeError(
            f"the error log [headerLength {error_start}, + errorBufferLength {error_length}) runs past the "
            f"end of the file ({size} bytes)",
            source=source,
            offset=body + 68,
        )
    errors = _decode_errors(data, error_start, error_length, source)
    return MarkFile(body, acting_block, acting_version, header, errors, size)


def _decode_errors(data: bytes | bytearray | memoryview, start: int, capacity: int, source: str | None) -> tuple[ErrorRecord, ...]:
    """Agrona `ErrorLogReader.read`: records until a zero length or the end of the region."""
    records = []
    offset = 0
    while offset + 4 <= capacity:
        (length,) = struct.unpack_from("<i", data, start + offset)
        if length == 0:
            break
        if length < ERROR_RECORD_HEADER_LENGTH or offset + length > capacity:
            raise DecodeError(
                f"distinct error record length {length} (expected 0 to end, or {ERROR_RECORD_HEADER_LENGTH}.."
                f"{capacity - offset} bytes)",
                source=source,
                offset=start + offset,
            )
        _, count, last, first = _ERROR_RECORD.unpack_from(data, start + offset)
        text = bytes(data[start + offset + ERROR_RECORD_HEADER_LENGTH : start + offset + length]).decode("utf-8", "replace")
        records.append(ErrorRecord(start + offset, count, first, last, text))
        offset += (length + ERROR_RECORD_ALIGNMENT - 1) & ~(ERROR_RECORD_ALIGNMENT - 1)
    return tuple(records)
