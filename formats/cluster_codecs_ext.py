"""Cluster messages of schema versions after the 1.47.3 schema (version 12) that recount models.

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

No I/O; imports only `formats`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from formats import cluster_codecs as generated
from formats.sbe import INT64_NULL, BlockSpec, Decoded, FieldSpec, MessageSpec, from_fields, read_header
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

#: Template id -> spec, with the version-15 NewLeadershipTerm in place of the generated one.
MESSAGES_BY_TEMPLATE_ID_V15: dict[int, MessageSpec] = {
    **generated.MESSAGES_BY_TEMPLATE_ID,
    NEW_LEADERSHIP_TERM_TEMPLATE_ID: NewLeadershipTerm.SPEC,
}


def decode_message(buf: bytes | bytearray | memoryview, offset: int = 0, *, source: str | None = None) -> Decoded:
    """`formats.sbe.decode_message`, except that a NewLeadershipTerm of version ≥ 15 decodes to the
    extended class (with ``commitPosition``).  Bad input raises `DecodeError`."""
    _, template_id, _, version = read_header(buf, offset, source=source)
    if template_id == NEW_LEADERSHIP_TERM_TEMPLATE_ID and version >= SCHEMA_VERSION_COMMIT_POSITION:
        return _decode(buf, offset, source=source, registry=MESSAGES_BY_TEMPLATE_ID_V15, schema_id=generated.SCHEMA_ID)
    return _decode(buf, offset, source=source)


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
