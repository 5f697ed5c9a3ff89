"""SBE framing as Aeron uses it (Simple Binary Encoding 1.x, little-endian).

A message is an 8-byte header (blockLength, templateId, schemaId, version; uint16 each), a root
block of fixed fields, then every repeating group in declaration order, then every var-length
field in declaration order.  Two rules make old and new peers interoperate, and we keep both:

* the *acting* block length from the header, not the schema's, says where the root block ends
  (a newer encoder may send a longer block; the extra bytes are skipped);
* the *acting* version says which fields exist: a field whose ``sinceVersion`` is above it is
  absent and reads as its null value; a var field above it is not in the buffer at all.

Message classes are frozen, slotted, keyword-only dataclasses generated from Aeron's schema XML
(`formats.cluster_codecs`); each carries a `MessageSpec` describing its layout.  This module is the
one generic encoder/decoder that walks those specs.  It does no I/O.
"""

from __future__ import annotations

import enum
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, ClassVar, NamedTuple

from formats.errors import DecodeError

HEADER = struct.Struct("<HHHH")
HEADER_LENGTH = HEADER.size
GROUP_HEADER = struct.Struct("<HH")
VAR_LENGTH = struct.Struct("<I")
VAR_MAX_LENGTH = 1 << 30

#: primitive name -> (struct code, size, SBE null value)
PRIMITIVES: dict[str, tuple[str, int, int | float]] = {
    "char": ("B", 1, 0),
    "int8": ("b", 1, -(1 << 7)),
    "uint8": ("B", 1, (1 << 8) - 1),
    "int16": ("h", 2, -(1 << 15)),
    "uint16": ("H", 2, (1 << 16) - 1),
    "int32": ("i", 4, -(1 << 31)),
    "uint32": ("I", 4, (1 << 32) - 1),
    "int64": ("q", 8, -(1 << 63)),
    "uint64": ("Q", 8, (1 << 64) - 1),
    "float": ("f", 4, float("nan")),
    "double": ("d", 8, float("nan")),
}

INT32_NULL = -(1 << 31)
INT64_NULL = -(1 << 63)


def snake_case(name: str) -> str:
    """Aeron's camelCase field name as a Python attribute (``logLeadershipTermId`` -> ``log_leadership_term_id``)."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    offset: int
    primitive: str
    type_name: str
    since_version: int = 0
    null_value: int | float | None = None
    presence: str = "required"
    enum: type[enum.Enum] | None = None
    attr: str = ""

    @property
    def size(self) -> int:
        return PRIMITIVES[self.primitive][1]

    @property
    def code(self) -> str:
        return PRIMITIVES[self.primitive][0]

    @property
    def null(self) -> int | float:
        return PRIMITIVES[self.primitive][2] if self.null_value is None else self.null_value


@dataclass(frozen=True, slots=True)
class VarDataSpec:
    name: str
    is_ascii: bool
    since_version: int = 0
    attr: str = ""


def _attribute_tuple(attrs: tuple[str, ...]) -> Any:
    """A function from an object to the tuple of its ``attrs`` (what attrgetter gives for two or more)."""
    if len(attrs) >= 2:
        return attrgetter(*attrs)
    if len(attrs) == 1:
        only = attrs[0]
        return lambda value: (getattr(value, only),)
    return lambda value: ()


@dataclass(slots=True)
class BlockSpec:
    """The layout of a root block or of one group entry, with what follows it."""

    name: str
    block_length: int
    fields: tuple[FieldSpec, ...]
    groups: tuple[GroupSpec, ...] = ()
    var_data: tuple[VarDataSpec, ...] = ()
    cls: type | None = None
    # Compiled once: a struct covering the whole block (gaps as pad bytes), for the common case.
    _struct: struct.Struct = field(init=False, repr=False)
    _max_since: int = field(init=False, repr=False)
    # (position, enum) of each enum field, and every field's attr and Aeron name, in order.
    _enums: tuple[tuple[int, type[enum.Enum]], ...] = field(init=False, repr=False, compare=False)
    _attrs: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _names: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _get: Any = field(init=False, repr=False, compare=False)  # value -> tuple of its fields' values
    # Built at the first decode, for the `cls` of that moment: (cls, builder from values in order).
    _builder: tuple[type, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        code = "<"
        cursor = 0
        for f in sorted(self.fields, key=lambda f: f.offset):
            if f.offset < cursor:
                raise ValueError(f"{self.name}.{f.name} overlaps the previous field")
            code += "x" * (f.offset - cursor) + f.code
            cursor = f.offset + f.size
        if cursor > self.block_length:
            raise ValueError(f"{self.name}: fields end at {cursor}, beyond blockLength {self.block_length}")
        code += "x" * (self.block_length - cursor)
        self._struct = struct.Struct(code)
        self._max_since = max([f.since_version for f in self.fields] + [0])
        self._enums = tuple((i, f.enum) for i, f in enumerate(self.fields) if f.enum is not None)
        self._attrs = tuple(f.attr for f in self.fields)
        self._names = tuple(f.name for f in self.fields)
        self._get = _attribute_tuple(self._attrs)
        if list(self.fields) != sorted(self.fields, key=lambda f: f.offset):
            raise ValueError(f"{self.name}: fields must be listed in offset order")


@dataclass(slots=True)
class GroupSpec:
    name: str
    entry: BlockSpec
    since_version: int = 0
    attr: str = ""


@dataclass(slots=True)
class MessageSpec:
    template_id: int
    schema_id: int
    schema_version: int
    block: BlockSpec
    since_version: int = 0
    deprecated: int | None = None

    @property
    def name(self) -> str:
        return self.block.name

    @property
    def block_length(self) -> int:
        return self.block.block_length


class SbeMessage:
    """Base of every generated message and group-entry class: values, no behaviour beyond codecs."""

    __slots__ = ()
    SPEC: ClassVar[MessageSpec]
    BLOCK: ClassVar[BlockSpec]

    def encode(self) -> bytes:
        return encode(self)

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, offset: int = 0, *, source: str | None = None):
        decoded = decode_message(buf, offset, source=source, registry={cls.SPEC.template_id: cls.SPEC})
        return decoded.message

    def to_fields(self) -> dict[str, Any]:
        return _block_to_fields(self.BLOCK, self)

    @classmethod
    def from_fields(cls, fields: Mapping[str, Any], *, source: str | None = None):
        return from_fields(cls, fields, source=source)


class Decoded(NamedTuple):
    """A decoded message and where it ended.  A NamedTuple: one per message decoded, built several
    times faster than a frozen dataclass, and as immutable."""

    message: Any
    end: int  # offset just past the message's last byte
    acting_version: int
    acting_block_length: int
    template_id: int


_make_decoded = Decoded._make  # every field at once, in order: no argument parsing (the hot path)


def _builder(spec: BlockSpec) -> Any:
    """A function from the block's values (fields, groups, var data, in that order) to its class."""
    cls = spec.cls
    if spec._builder is not None and spec._builder[0] is cls:
        return spec._builder[1]
    attrs = spec._attrs + tuple(g.attr for g in spec.groups) + tuple(v.attr for v in spec.var_data)
    slots = [getattr(cls, name, None) for name in attrs]
    if all(type(slot).__name__ == "member_descriptor" for slot in slots) and set(attrs) == set(
        getattr(cls, "__slots__", ())
    ):
        # A slotted class: each value put in its slot by the slot's own descriptor, as the generated
        # __init__ does after parsing its keywords; decoding gives every attribute, in order, so
        # there is nothing to parse or default (the hot path of every replay and import).
        setters = tuple(slot.__set__ for slot in slots)
        new = object.__new__

        def build(values: list[Any]) -> Any:
            value = new(cls)
            for put, item in zip(setters, values, strict=True):
                put(value, item)
            return value

    else:

        def build(values: list[Any]) -> Any:
            return cls(**dict(zip(attrs, values, strict=False)))  # one value per attribute, by construction

    spec._builder = (cls, build)
    return build


def _decode_block(
    spec: BlockSpec,
    buf: memoryview,
    pos: int,
    limit: int,
    acting_block_length: int,
    acting_version: int,
    template_id: int | None,
    source: str | None,
) -> tuple[Any, int]:
    if pos + acting_block_length > limit:
        raise DecodeError(
            f"{spec.name} needs a {acting_block_length}-byte block, only {max(limit - pos, 0)} bytes left",
            source=source,
            offset=pos,
            template_id=template_id,
        )
    if acting_block_length >= spec.block_length and acting_version >= spec._max_since:
        values = list(spec._struct.unpack_from(buf, pos))
        for i, kind in spec._enums:
            value = values[i]
            values[i] = kind._value2member_map_.get(value, value)
    else:
        values = []
        for f in spec.fields:
            if f.since_version > acting_version or f.offset + f.size > acting_block_length:
                value = f.null
            else:
                (value,) = struct.unpack_from("<" + f.code, buf, pos + f.offset)
            if f.enum is not None:
                value = f.enum._value2member_map_.get(value, value)
            values.append(value)
    pos += acting_block_length

    for group in spec.groups:
        if group.since_version > acting_version:
            values.append(())
            continue
        if pos + GROUP_HEADER.size > limit:
            raise DecodeError(
                f"{spec.name}.{group.name} group header needs 4 bytes, only {max(limit - pos, 0)} left",
                source=source,
                offset=pos,
                template_id=template_id,
            )
        entry_block_length, count = GROUP_HEADER.unpack_from(buf, pos)
        pos += GROUP_HEADER.size
        entries = []
        for _ in range(count):
            entry, pos = _decode_block(
                group.entry, buf, pos, limit, entry_block_length, acting_version, template_id, source
            )
            entries.append(entry)
        values.append(tuple(entries))

    for var in spec.var_data:
        if var.since_version > acting_version:
            values.append("" if var.is_ascii else b"")
            continue
        if pos + VAR_LENGTH.size > limit:
            raise DecodeError(
                f"{spec.name}.{var.name} length needs 4 bytes, only {max(limit - pos, 0)} left",
                source=source,
                offset=pos,
                template_id=template_id,
            )
        (length,) = VAR_LENGTH.unpack_from(buf, pos)
        pos += VAR_LENGTH.size
        if length > VAR_MAX_LENGTH or pos + length > limit:
            raise DecodeError(
                f"{spec.name}.{var.name} of {length} bytes runs past the end ({max(limit - pos, 0)} bytes left)",
                source=source,
                offset=pos - VAR_LENGTH.size,
                template_id=template_id,
            )
        data = bytes(buf[pos : pos + length])
        values.append(data.decode("latin-1") if var.is_ascii else data)
        pos += length
    return _builder(spec)(values), pos



def read_header(buf: bytes | bytearray | memoryview, offset: int = 0, *, source: str | None = None):
    """(blockLength, templateId, schemaId, version) of the message at ``offset``."""
    if len(buf) - offset < HEADER_LENGTH:
        raise DecodeError(
            f"an SBE message header needs 8 bytes, only {max(len(buf) - offset, 0)} left",
            source=source,
            offset=offset,
        )
    return HEADER.unpack_from(buf, offset)


def decode_message(
    buf: bytes | bytearray | memoryview,
    offset: int = 0,
    *,
    limit: int | None = None,
    source: str | None = None,
    registry: Mapping[int, MessageSpec],
    schema_id: int | None = None,
) -> Decoded:
    """Decode the message at ``offset`` as one of ``registry``'s templates (template id -> spec; the
    cluster schema's is `formats.cluster_codecs_ext.decode_cluster`); bytes after it (an
    application payload) are left alone.  ``schema_id``, when given, must be the header's.

    Raises `DecodeError` for anything that is not a whole message of a known template.
    """
    view = buf if type(buf) is bytes else memoryview(buf)
    size = len(view)
    if limit is None:
        end = head = size
    else:
        end = min(limit, size)
        head = len(view[:end])
    if head - offset < HEADER_LENGTH:
        raise DecodeError(
            f"an SBE message header needs 8 bytes, only {max(head - offset, 0)} left", source=source, offset=offset
        )
    block_length, template_id, msg_schema_id, version = HEADER.unpack_from(view if limit is None else view[:end], offset)
    spec = registry.get(template_id)
    if schema_id is None and spec is not None:
        schema_id = spec.schema_id
    if schema_id is not None and msg_schema_id != schema_id:
        raise DecodeError(
            f"schemaId {msg_schema_id} is not the expected schema {schema_id}",
            source=source,
            offset=offset,
            template_id=template_id,
        )
    if spec is None:
        known = ", ".join(str(t) for t in sorted(registry))
        raise DecodeError(
            f"unknown templateId {template_id} (known: {known})", source=source, offset=offset, template_id=template_id
        )
    message, pos = _decode_block(
        spec.block, view, offset + HEADER_LENGTH, end, block_length, version, template_id, source
    )
    return _make_decoded((message, pos, version, block_length, template_id))


def acting_block_length(spec: BlockSpec, version: int) -> int:
    """The block length an encoder of schema ``version`` writes: the schema's own when every field is
    that old, else the end of the last field it has (SBE adds fields only at the end of a block)."""
    if version >= spec._max_since:
        return spec.block_length
    return max((f.offset + f.size for f in spec.fields if f.since_version <= version), default=0)


def _encode_block(spec: BlockSpec, value: Any, out: bytearray, acting_version: int | None = None) -> None:
    raw = []
    for f in spec.fields:
        v = getattr(value, f.attr)
        if isinstance(v, enum.Enum):
            v = v.value
        raw.append(v)
    try:
        block = spec._struct.pack(*raw)
    except struct.error as error:
        raise ValueError(f"{spec.name}: a field does not fit its type: {error}") from None
    if acting_version is not None:
        block = block[: acting_block_length(spec, acting_version)]
    out += block
    for group in spec.groups:
        if acting_version is not None and group.since_version > acting_version:
            continue
        entries = getattr(value, group.attr)
        entry_length = group.entry.block_length if acting_version is None else acting_block_length(group.entry, acting_version)
        out += GROUP_HEADER.pack(entry_length, len(entries))
        for entry in entries:
            _encode_block(group.entry, entry, out, acting_version)
    for var in spec.var_data:
        if acting_version is not None and var.since_version > acting_version:
            continue
        data = getattr(value, var.attr)
        if var.is_ascii:
            data = "".join(c if ord(c) < 256 else "?" for c in data).encode("latin-1")
        out += VAR_LENGTH.pack(len(data))
        out += data


def encode(message: SbeMessage, *, version: int | None = None, acting_version: int | None = None) -> bytes:
    """The message's bytes, header included, as Aeron's current encoders write them.

    ``version`` only changes the header's version; ``acting_version`` writes what an encoder of that
    older schema version writes: its block length, and none of the fields, groups or var data added
    after it (so a message decoded from an older peer encodes back to the same bytes).
    """
    spec = message.SPEC
    if acting_version is not None:
        out = bytearray(HEADER.pack(acting_block_length(spec.block, acting_version), spec.template_id, spec.schema_id,
                                    acting_version))
        _encode_block(spec.block, message, out, acting_version)
        return bytes(out)
    out = bytearray(
        HEADER.pack(spec.block_length, spec.template_id, spec.schema_id, spec.schema_version if version is None else version)
    )
    _encode_block(spec.block, message, out)
    return bytes(out)


def _field_to_json(f: FieldSpec | None, value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name
    return value


def _block_to_fields(spec: BlockSpec, value: Any) -> dict[str, Any]:
    # `_field_to_json` of each field; most blocks hold only ints, which it leaves as they are.
    values = spec._get(value)
    for v in values:
        if type(v) is not int:
            values = [v if type(v) is int else _field_to_json(None, v) for v in values]
            break
    out = dict(zip(spec._names, values, strict=False))  # as long as each other: both from spec.fields
    for group in spec.groups:
        out[group.name] = [_block_to_fields(group.entry, e) for e in getattr(value, group.attr)]
    for var in spec.var_data:
        v = getattr(value, var.attr)
        out[var.name] = v if var.is_ascii else v.hex()
    return out


def to_fields(message: Any) -> dict[str, Any]:
    """Fields by Aeron name, JSON-ready: enums by name, var data as text (ASCII) or hex (binary)."""
    return _block_to_fields(message.BLOCK, message)


def _coerce_field(f: FieldSpec, value: Any, where: str, source: str | None) -> Any:
    if f.enum is not None:
        if isinstance(value, f.enum):
            return value
        if isinstance(value, bool) and f.enum.__name__ == "BooleanType":
            return f.enum["TRUE" if value else "FALSE"]
        if isinstance(value, str):
            try:
                return f.enum[value]
            except KeyError:
                names = ", ".join(m.name for m in f.enum)
                raise DecodeError(f"{where}: {value!r} is not a {f.enum.__name__} ({names})", source=source) from None
        if isinstance(value, int) and not isinstance(value, bool):
            return f.enum._value2member_map_.get(value, value)
        raise DecodeError(f"{where}: expected a {f.enum.__name__} name, got {value!r}", source=source)
    if isinstance(value, bool) or not isinstance(value, int):
        if f.primitive in ("float", "double") and isinstance(value, float):
            return value
        raise DecodeError(f"{where}: expected an integer ({f.type_name}), got {value!r}", source=source)
    lo, hi = _RANGES[f.primitive]
    if not lo <= value <= hi:
        raise DecodeError(f"{where}: {value} does not fit {f.primitive}", source=source)
    return value


def _range_of(primitive: str) -> tuple[int, int]:
    _, size, _ = PRIMITIVES[primitive]
    if primitive.startswith("uint") or primitive == "char":
        return 0, (1 << (8 * size)) - 1
    return -(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1


#: The values each primitive holds, as `_coerce_field` checks an integer against them.
_RANGES = {primitive: _range_of(primitive) for primitive in PRIMITIVES}


def _block_from_fields(spec: BlockSpec, fields: Mapping[str, Any], where: str, source: str | None) -> Any:
    if not isinstance(fields, Mapping):
        raise DecodeError(f"{where}: expected an object of fields, got {type(fields).__name__}", source=source)
    kwargs: dict[str, Any] = {}
    ranges = _RANGES
    for f in spec.fields:
        name = f.name
        if name in fields:
            value = fields[name]
            # What `_coerce_field` returns at once for the common cases, without making its message.
            kind = f.enum
            if kind is None:
                if type(value) is int:
                    lo, hi = ranges[f.primitive]
                    if lo <= value <= hi:
                        kwargs[f.attr] = value
                        continue
            elif type(value) is str:
                member = kind._member_map_.get(value)
                if member is not None:
                    kwargs[f.attr] = member
                    continue
            kwargs[f.attr] = _coerce_field(f, value, f"{where}.{name}", source)
        elif f.presence == "optional" or f.since_version > 0:
            value = f.null
            kwargs[f.attr] = f.enum._value2member_map_.get(value, value) if f.enum is not None else value
        else:
            raise DecodeError(f"{where}: missing field {f.name!r}", source=source)
    for group in spec.groups:
        entries = fields.get(group.name, [])
        if not isinstance(entries, list):
            raise DecodeError(f"{where}.{group.name}: expected a list", source=source)
        kwargs[group.attr] = tuple(
            _block_from_fields(group.entry, e, f"{where}.{group.name}[{i}]", source) for i, e in enumerate(entries)
        )
    for var in spec.var_data:
        v = fields.get(var.name, "" if var.is_ascii else b"")
        if var.is_ascii:
            if not isinstance(v, str):
                raise DecodeError(f"{where}.{var.name}: expected a string", source=source)
        elif isinstance(v, str):
            try:
                v = bytes.fromhex(v)
            except ValueError:
                raise DecodeError(f"{where}.{var.name}: expected hex bytes", source=source) from None
        elif not isinstance(v, bytes | bytearray):
            raise DecodeError(f"{where}.{var.name}: expected hex bytes", source=source)
        kwargs[var.attr] = v if var.is_ascii else bytes(v)
    return spec.cls(**kwargs)


def from_fields(cls: type, fields: Mapping[str, Any], *, source: str | None = None) -> Any:
    """Build a message from fields by Aeron name (the JSON Lines form).  Missing required fields,
    unknown enum names and out-of-range values raise `DecodeError`."""
    return _block_from_fields(cls.BLOCK, fields, cls.BLOCK.name, source)
