"""Cluster messages of schema versions after the 1.47.3 schema (version 12): v13, v14 and v15.

`formats.cluster_codecs` is generated from Aeron 1.47.3's schema (version 12) and is not edited by
hand.  Aeron 1.50.0 (#1898, commit ae89386d1d) raised the cluster schema to version 15 and gave
``NewLeadershipTerm`` one more field, ``commitPosition`` (id 14, int64, ``sinceVersion="15"``), at
offset 88 after ``isStartup``; the block grows from 88 to 96 bytes.  This module adds that layout as
an extension: `NewLeadershipTerm` here is a subclass of the generated class with the one extra
attribute, its own `MessageSpec` (template 53, schema version 15), and the lookups that pick it.

Interoperation follows SBE's rules, which `formats.sbe` already keeps:

* a version-12 reader given a version-15 message uses the acting block length (96) and skips the
  extra 8 bytes, so `formats.sbe.decode_message` still reads every version-12 field;
* `decode_message` here reads ``commitPosition`` when the acting version is 15 or more, and gives the
  field's null value (−1 is *not* the null: SBE's int64 null is ``-2**63``; Aeron treats anything that
  is not a real position as "not sent") to version-12 messages, which it returns as the generated
  class so that 1.47.3 behaviour is unchanged;
* `message_of(event)` is `Event.message()` for everything, except a NewLeadershipTerm event whose
  payload is version 15 or whose fields carry ``commitPosition``: that one becomes the extended class.

The same way, schema version 13 (Aeron 1.48.0) gave ``SessionEvent`` ``leaderHeartbeatTimeoutNs``
(int64, optional, offset 36, block 36 → 44) and version 14 (1.49.0) gave ``SessionConnectRequest`` a
third var field, ``clientInfo``; both are here, read from messages of those versions.  Older schema
versions (v10, v11) need nothing here: their messages are the generated ones less the fields added
since, which `formats.sbe` reads and writes at the message's acting version.

No I/O; imports only `formats`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from formats import cluster_codecs as generated
from formats.sbe import (
    INT64_NULL,
    BlockSpec,
    Decoded,
    FieldSpec,
    MessageSpec,
    VarDataSpec,
    from_fields,
    read_header,
)
from formats.sbe import decode_message as _decode

#: The cluster schema version that introduced NewLeadershipTerm.commitPosition (Aeron 1.50.0).
SCHEMA_VERSION_COMMIT_POSITION = 15
NEW_LEADERSHIP_TERM_TEMPLATE_ID = 53


@dataclass(frozen=True, slots=True, kw_only=True)
class NewLeadershipTerm(generated.NewLeadershipTerm):
    """NewLeadershipTerm as of schema version 15 (Aeron 1.50.0): the leader's commit position as well."""

    commit_position: int = INT64_NULL


def _v15_spec() -> MessageSpec:
    base = generated.MESSAGES_BY_TEMPLATE_ID[NEW_LEADERSHIP_TERM_TEMPLATE_ID]
    fields = base.block.fields + (
        FieldSpec(
            "commitPosition", 88, "int64", "int64", since_version=SCHEMA_VERSION_COMMIT_POSITION, attr="commit_position"
        ),
    )
    return MessageSpec(
        template_id=base.template_id,
        schema_id=base.schema_id,
        schema_version=SCHEMA_VERSION_COMMIT_POSITION,
        block=BlockSpec(name=base.block.name, block_length=96, fields=fields, cls=NewLeadershipTerm),
    )


NewLeadershipTerm.SPEC = _v15_spec()
NewLeadershipTerm.BLOCK = NewLeadershipTerm.SPEC.block

@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEvent(generated.SessionEvent):
    """SessionEvent as of schema version 13 (Aeron 1.48.0): the leader's heartbeat timeout as well."""

    leader_heartbeat_timeout_ns: int = INT64_NULL


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionConnectRequest(generated.SessionConnectRequest):
    """SessionConnectRequest as of schema version 14 (Aeron 1.49.0): the client's own description too."""

    client_info: str = ""


def _extended(cls: type, base: MessageSpec, version: int, block_length: int, fields=(), var_data=()) -> MessageSpec:
    return MessageSpec(
        template_id=base.template_id,
        schema_id=base.schema_id,
        schema_version=version,
        block=BlockSpec(name=base.block.name, block_length=block_length, fields=base.block.fields + tuple(fields),
                        groups=base.block.groups, var_data=base.block.var_data + tuple(var_data), cls=cls),
    )


SessionEvent.SPEC = _extended(
    SessionEvent, generated.SessionEvent.SPEC, 13, 44,
    fields=(FieldSpec("leaderHeartbeatTimeoutNs", 36, "int64", "int64", since_version=13, presence="optional",
                      attr="leader_heartbeat_timeout_ns"),),
)
SessionEvent.BLOCK = SessionEvent.SPEC.block
SessionConnectRequest.SPEC = _extended(
    SessionConnectRequest, generated.SessionConnectRequest.SPEC, 14, generated.SessionConnectRequest.SPEC.block_length,
    var_data=(VarDataSpec("clientInfo", True, since_version=14, attr="client_info"),),
)
SessionConnectRequest.BLOCK = SessionConnectRequest.SPEC.block

#: Each extended message: (its spec, the schema version from which its template decodes to it).
EXTENDED: dict[int, tuple[MessageSpec, int]] = {
    NEW_LEADERSHIP_TERM_TEMPLATE_ID: (NewLeadershipTerm.SPEC, SCHEMA_VERSION_COMMIT_POSITION),
    SessionEvent.SPEC.template_id: (SessionEvent.SPEC, 13),
    SessionConnectRequest.SPEC.template_id: (SessionConnectRequest.SPEC, 14),
}
#: The newest schema version any message here has (Aeron 1.50's cluster schema).
NEWEST_SCHEMA_VERSION = SCHEMA_VERSION_COMMIT_POSITION

#: Template id -> spec, with every extended message of schema version 15 in place of the generated one.
MESSAGES_BY_TEMPLATE_ID_V15: dict[int, MessageSpec] = {
    **generated.MESSAGES_BY_TEMPLATE_ID,
    **{template_id: spec for template_id, (spec, _) in EXTENDED.items()},
}


def decode_cluster(
    buf: bytes | bytearray | memoryview, offset: int = 0, *, limit: int | None = None, source: str | None = None
) -> Decoded:
    """A cluster message (schema 111) as the generated classes: `formats.sbe.decode_message` given the
    generated registry.  Bad input raises `DecodeError`."""
    return _decode(
        buf, offset, limit=limit, source=source, registry=generated.MESSAGES_BY_TEMPLATE_ID, schema_id=generated.SCHEMA_ID
    )


def decode_message(buf: bytes | bytearray | memoryview, offset: int = 0, *, source: str | None = None) -> Decoded:
    """`formats.sbe.decode_message`, except that a message of a schema version that extends it
    (NewLeadershipTerm ≥ 15, SessionEvent ≥ 13, SessionConnectRequest ≥ 14) decodes to the extended
    class.  Bad input raises `DecodeError`."""
    _, template_id, _, version = read_header(buf, offset, source=source)
    extended = EXTENDED.get(template_id)
    if extended is not None and version >= extended[1]:
        return _decode(buf, offset, source=source, registry=MESSAGES_BY_TEMPLATE_ID_V15, schema_id=generated.SCHEMA_ID)
    return decode_cluster(buf, offset, source=source)


def with_commit_position(message: generated.NewLeadershipTerm, commit_position: int) -> NewLeadershipTerm:
    """The version-15 form of ``message``, carrying ``commit_position``."""
    values = {f.attr: getattr(message, f.attr) for f in generated.NewLeadershipTerm.BLOCK.fields}
    return NewLeadershipTerm(**values, commit_position=commit_position)


def message_of(event: Any, *, source: str | None = None) -> Any:
    """`Event.message()`, reading NewLeadershipTerm's ``commitPosition`` when the event carries one."""
    if event.type == "NewLeadershipTerm":
        if event.payload is not None:
            return decode_message(event.payload, source=source).message
        if "commitPosition" in event.fields:
            return from_fields(NewLeadershipTerm, event.fields, source=source)
    return event.message(source=source)


def commit_position_of(message: Any) -> int | None:
    """The NewLeadershipTerm's commit position, or None when the message does not carry one."""
    value = getattr(message, "commit_position", None)
    if value is None or value == INT64_NULL:
        return None
    return value
