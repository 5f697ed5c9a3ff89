"""The replay file (contract §2): one Arrow IPC table of events, in global order.

Columns, in this order:

* ``seq`` uint64 (strictly increasing), ``ts`` int64, ``node`` int32, ``dir``, ``channel``, ``type``
  (dictionary-encoded strings), ``peer`` int32 (nullable);
* ``payload`` binary: the raw SBE message bytes when the event came from bytes (null otherwise);
* ``fields`` string: the event's fields as canonical JSON, the lossless form we read back;
* ``extra`` string: unknown JSON Lines keys, kept (null when none);
* then one column per field name, sorted, each queryable from plain DuckDB by its Aeron name.
  A name whose values are all integers is int64, all booleans bool, all strings string; anything
  else (lists, objects, mixed) is the value's JSON text.  Names that would shadow a column above are
  only in ``fields``.

Message events are stored with their canonical fields (`to_fields` of the decoded message), so a
file converted from JSON Lines and one converted from a pcap hold the same values.

Schema metadata: ``recount.format`` = ``replay``, ``recount.formatVersion``, ``recount.source`` and
``clusterMembers`` when known.  A reader refuses a newer format version, or a file that is not a
replay, with one line.  This module does no I/O: callers pass pyarrow files or buffers.

Two readers: `read_table` + `table_to_events` give every event at once; `ReplayFile` checks a file
batch by batch and builds one batch's events at a time from the typed columns (what `recount replay`
streams, in memory bounded by a batch; see the section "reading a batch at a time").
"""

from __future__ import annotations

import bisect
import gc
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from formats import arrow_compute
from formats.cluster_codecs_ext import EXTENDED
from formats.errors import DecodeError
from formats.events import CHANNELS, DIRECTIONS, LOCAL_TYPES, MESSAGE_CLASSES, Event, new_event
from formats.sbe import _builder as sbe_builder

FORMAT = "replay"
FORMAT_VERSION = 1

_OWN_KEYS = frozenset({"recount.format", "recount.formatVersion", "recount.source", "clusterMembers"})
BASE_COLUMNS = ("seq", "ts", "node", "dir", "channel", "type", "peer", "payload", "fields", "extra")
_DICT = pa.dictionary(pa.int32(), pa.string())


def _canonical_fields(event: Event) -> Mapping[str, Any]:
    """Fields by Aeron name, in canonical form.

    An event that came from bytes carries the decoder's own fields (importers guarantee that
    ``fields`` is the decoding of ``payload``), so only hand-written message events, which may say
    ``"vote": true`` for ``"TRUE"``, are rebuilt through their message class.
    """
    if event.payload is not None and event.fields:
        return event.fields
    if event.is_message:
        return event.message().to_fields()
    return event.fields


def _column_type(values: list[Any]) -> str:
    """"int", "bool", "str" or "json" for a column's values (None, a missing value, fits any)."""
    kinds = set(map(type, values))
    kinds.discard(type(None))
    if kinds == {int}:
        return "int"  # unless a value overflows int64: `_typed_arrays` then falls back to JSON text
    if kinds == {bool}:
        return "bool"
    if kinds == {str}:
        return "str"
    return "json"


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_dumps = _ENCODER.encode
# JSONEncoder.encode builds this same C encoder on every call (for the one-shot case); building it
# once halves the cost of the per-event JSON text.  Without a circular-reference check (markers
# None): every value here came from a decoder or from JSON text, which cannot hold a cycle.
_c_encoder = (
    json.encoder.c_make_encoder(
        None, _ENCODER.default, json.encoder.encode_basestring, None, ":", ",", False, False, True
    )
    if json.encoder.c_make_encoder is not None
    else None
)


def _encode_object(value: dict[str, Any]) -> str:
    """``_dumps(value)`` for a dict, through the prebuilt C encoder when there is one."""
    if _c_encoder is None:
        return _dumps(value)
    return "".join(_c_encoder(value, 0))


def _encode_extra(extra: Mapping[str, Any]) -> str:
    """``_encode_object(extra)``, written directly for the two shapes the capture importers give every
    event (``{"packet": n}`` and ``{"logPosition": p, "packet": n}``, plain ints: the same text)."""
    if type(extra) is dict:
        size = len(extra)
        if size == 1:
            packet = extra.get("packet")
            if type(packet) is int:
                return f'{{"packet":{packet}}}'
        elif size == 2:
            first, second = extra
            if first == "logPosition" and second == "packet":
                position, packet = extra["logPosition"], extra["packet"]
                if type(position) is int and type(packet) is int:
                    return f'{{"logPosition":{position},"packet":{packet}}}'
        return _encode_object(extra)
    return _encode_object(dict(extra))


def _typed_arrays(pieces: list[list[Any] | int]) -> list[pa.Array]:
    """A per-name column's pieces as arrays of one type: int64, bool or string by the values, else
    each value's JSON text.  A piece is a list of values, or a count of missing values (nulls)."""
    values = [piece for piece in pieces if type(piece) is list]
    kind = _column_type([v for piece in values for v in piece]) if len(values) > 1 else _column_type(values[0])
    if kind == "int":
        try:
            return [pa.array(p, type=pa.int64()) if type(p) is list else pa.nulls(p, pa.int64()) for p in pieces]
        except (OverflowError, pa.ArrowInvalid):
            kind = "json"  # a value beyond int64
    if kind == "bool":
        return [pa.array(p, type=pa.bool_()) if type(p) is list else pa.nulls(p, pa.bool_()) for p in pieces]
    if kind == "str":
        return [pa.array(p, type=pa.string()) if type(p) is list else pa.nulls(p, pa.string()) for p in pieces]
    dumps = _dumps
    return [
        pa.array([None if v is None else dumps(v) for v in p], type=pa.string())
        if type(p) is list
        else pa.nulls(p, pa.string())
        for p in pieces
    ]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a block that allocates hundreds of thousands of
    small containers (rows, dicts, events) and frees few: each automatic collection would walk every
    object the import holds, which costs about a fifth of a conversion's time.  Nothing allocated
    there forms cycles; the collector resumes (if it was on) when the block ends, even on an error.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True, slots=True)
class ReplayMetadata:
    source: str
    format_version: int
    cluster_members: str | None
    extra: Mapping[str, str]


def events_to_table(
    events: Iterable[Event],
    *,
    source: str,
    cluster_members: str | None = None,
    metadata: Mapping[str, str] | None = None,
) -> pa.Table:
    """The replay table for ``events``, already in global order."""
    with gc_paused():
        return _events_to_table(events, source=source, cluster_members=cluster_members, metadata=metadata)


def _events_to_table(
    events: Iterable[Event],
    *,
    source: str,
    cluster_members: str | None,
    metadata: Mapping[str, str] | None,
) -> pa.Table:
    events = events if isinstance(events, list) else list(events)
    count = len(events)
    # Every mapping stays referenced from this list until the end, so id() names each one uniquely.
    canonical = [
        fields if type(fields := event.fields) is dict and event.payload is not None and fields
        else _canonical_fields(event) for event in events
    ]
    canonical = [f if type(f) is dict else dict(f) for f in canonical]
    # The JSON text of each distinct mapping once: a message's out and in events share one dict.
    ids = list(map(id, canonical))
    distinct = dict(zip(ids, canonical, strict=True))  # in order of first use
    texts = {key: _encode_object(fields) for key, fields in distinct.items()}
    fields_json = list(map(texts.__getitem__, ids))
    extra_json = [None if not e.extra else _encode_extra(e.extra) for e in events]
    arrays: dict[str, pa.Array] = {
        "seq": pa.array(range(count), type=pa.uint64()),
        "ts": pa.array([e.ts for e in events], type=pa.int64()),
        "node": pa.array([e.node for e in events], type=pa.int32()),
        "dir": pa.array([e.dir for e in events], type=pa.string()).dictionary_encode(),
        "channel": pa.array([e.channel for e in events], type=pa.string()).dictionary_encode(),
        "type": pa.array([e.type for e in events], type=pa.string()).dictionary_encode(),
        "peer": pa.array([e.peer for e in events], type=pa.int32()),
        "payload": pa.array([e.payload for e in events], type=pa.binary()),
        "fields": pa.array(fields_json, type=pa.string()),
        "extra": pa.array(extra_json, type=pa.string()),
    }
    arrays.update(_name_columns(canonical, ids, distinct))
    meta = {"recount.format": FORMAT, "recount.formatVersion": str(FORMAT_VERSION), "recount.source": source}
    if cluster_members:
        meta["clusterMembers"] = cluster_members
    if metadata:
        meta.update(metadata)
    table = pa.table(arrays)
    return table.replace_schema_metadata(meta)


def _name_columns(canonical: list[dict[str, Any]], ids: list[int], distinct: dict[int, dict[str, Any]]
                  ) -> dict[str, pa.Array]:
    """One array per field name (sorted), in event order.

    The rows are grouped by their field names (a handful of message shapes) and each group is
    transposed, so that every column is built by pyarrow from whole lists: its values group by
    group (a group without the name gives nulls), then put back in event order with one `take`.
    """
    shape_ids: dict[tuple[str, ...], int] = {}
    # Each distinct mapping's names once (events share them), taken in order of first use so that
    # the shapes are numbered as a pass over every row would number them.
    shape_by_id = {key: shape_ids.setdefault(tuple(fields), len(shape_ids)) for key, fields in distinct.items()}
    shape_of = list(map(shape_by_id.__getitem__, ids))
    if len(shape_ids) <= 1:
        order = range(len(canonical))
        where = None
    else:
        # Stable: within a group the rows stay in event order.
        import pyarrow.compute as pc  # here, not at the top: converting a capture never needs it

        order_array = pc.sort_indices(pa.array(shape_of, type=pa.int32()))
        order = order_array.to_pylist()
        where = pc.sort_indices(order_array)  # the inverse permutation: each event's place in group order
    sizes = Counter(shape_of)
    groups: list[tuple[tuple[str, ...], int, list[dict[str, Any]]]] = []  # (names, rows, their fields)
    start = 0
    for names, shape in shape_ids.items():
        rows = order[start : start + sizes[shape]]
        start += len(rows)
        groups.append((names, len(rows), [canonical[i] for i in rows]))
    columns: dict[str, pa.Array] = {}
    for name in sorted({name for names in shape_ids for name in names if name not in BASE_COLUMNS}):
        value = itemgetter(name)
        pieces = [list(map(value, dicts)) if name in names else rows for names, rows, dicts in groups]
        arrays = _typed_arrays(pieces)
        array = arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)
        columns[name] = array if where is None else array.take(where)
    return columns


def write_table(table: pa.Table, sink: Any, *, compression: str | None = None) -> None:
    """Write ``table`` to ``sink`` (a pyarrow output stream or file object) as an Arrow IPC file.

    ``compression`` (``"zstd"`` or ``"lz4"``) shrinks the buffers; pyarrow and DuckDB-through-pyarrow
    read either, but a reader without codec support needs the uncompressed default.
    """
    options = ipc.IpcWriteOptions(compression=compression)
    with ipc.new_file(sink, table.schema, options=options) as writer:
        writer.write_table(table, max_chunksize=65536)


def to_ipc_bytes(table: pa.Table, *, compression: str | None = None) -> bytes:
    sink = pa.BufferOutputStream()
    write_table(table, sink, compression=compression)
    return sink.getvalue().to_pybytes()


#: What pyarrow raises on a damaged file: ArrowInvalid, ArrowIOError (an OSError), ArrowKeyError,
#: ArrowIndexError, ArrowMemoryError (an absurd length), ArrowNotImplementedError (an impossible type)...
ARROW_ERRORS = (pa.ArrowException, OSError)


def one_line(error: BaseException) -> str:
    """An exception's text on one line (pyarrow's often spans several)."""
    return " ".join(str(error).split()) or type(error).__name__


def read_table(source: Any, *, name: str | None = None) -> pa.Table:
    """A replay table from an Arrow IPC file or stream (bytes, pyarrow Buffer, NativeFile or memory map).

    Nothing is trusted before it is checked: the schema metadata and the column types first, then
    every record batch is validated in full (offsets, lengths, dictionary indices, UTF-8) before any
    compute touches it, so a damaged or hostile file is a `DecodeError` naming it, never a crash of
    the interpreter or a raw pyarrow error.
    """
    label = name or "replay file"
    if isinstance(source, bytes | bytearray | memoryview):
        source = pa.py_buffer(source)
    try:
        schema, batches = _read_batches(source, label)
    except ARROW_ERRORS as error:
        raise DecodeError(f"not an Arrow IPC file or stream ({one_line(error)})", source=label, offset=0) from None
    check_names(schema, name=label)
    check_metadata(schema, name=label)
    check_columns(schema, name=label)
    for number, batch in enumerate(batches):
        validate_batch(batch, name=label, number=number)
    try:
        return pa.Table.from_batches(batches, schema=schema)
    except ARROW_ERRORS as error:
        raise DecodeError(f"record batches do not match the schema ({one_line(error)})", source=label) from None


def _read_batches(source: Any, label: str) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    """The schema and record batches of an IPC file, or else of an IPC stream (a stream cut short, as
    a killed writer leaves it, gives the whole batches before the cut)."""
    try:
        reader = ipc.open_file(source)
        return reader.schema, [reader.get_batch(i) for i in range(reader.num_record_batches)]
    except ARROW_ERRORS as error:
        file_error = error
    if hasattr(source, "seek"):
        source.seek(0)
    try:
        stream = ipc.open_stream(source)
    except ARROW_ERRORS:
        raise file_error from None
    batches = []
    try:
        for batch in stream:
            batches.append(batch)
    except ARROW_ERRORS:
        pass  # A stream cut short (a killed recorder): keep the whole batches read before the cut.
    return stream.schema, batches


def validate_batch(batch: pa.RecordBatch, *, name: str, number: int) -> None:
    """Arrow's full validation of one batch: every buffer and offset within bounds, dictionary indices
    within their dictionary, strings UTF-8.  Only then may pyarrow, DuckDB or Python read the values."""
    try:
        batch.validate(full=True)
    except ARROW_ERRORS as error:
        # pyarrow says "In column 7: ..."; the user knows the column by its name.
        text = re.sub(r"^In column (\d+)", lambda m: _column_label(batch.schema, int(m.group(1))), one_line(error))
        raise DecodeError(f"record batch {number} is damaged ({text})", source=name) from None


def _column_label(schema: pa.Schema, index: int) -> str:
    return f"in column {index} ({schema.names[index]})" if 0 <= index < len(schema.names) else f"in column {index}"


def check_names(schema: pa.Schema, *, name: str = "replay file") -> None:
    """Column names (nested ones too) are UTF-8 text: pyarrow raises on the first read of one that is not."""
    def walk(fields: Iterable[pa.Field]) -> None:
        for column in fields:
            column.name  # noqa: B018 - decoding the name is the check
            kind = column.type
            walk(kind.field(i) for i in range(kind.num_fields))
            if pa.types.is_dictionary(kind):
                walk(kind.value_type.field(i) for i in range(kind.value_type.num_fields))

    try:
        walk(schema)
    except UnicodeDecodeError as error:
        raise DecodeError(f"a column name is not UTF-8 text ({one_line(error)})", source=name) from None


def _metadata_text(schema: pa.Schema) -> dict[str, str]:
    return {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in (schema.metadata or {}).items()}


def check_metadata(schema: pa.Schema, *, name: str = "replay file") -> ReplayMetadata:
    meta = _metadata_text(schema)
    if meta.get("recount.format") != FORMAT:
        raise DecodeError("not a recount replay file (schema metadata recount.format is not 'replay')", source=name)
    version_text = meta.get("recount.formatVersion", "")
    if not (version_text.isascii() and version_text.isdigit()):
        raise DecodeError(f"recount.formatVersion is not an integer: {version_text[:40]!r}", source=name)
    version = int(version_text)
    if version > FORMAT_VERSION:
        raise DecodeError(
            f"replay format version {version} is newer than this recount reads ({FORMAT_VERSION}); upgrade recount",
            source=name,
        )
    missing = [c for c in ("seq", "ts", "node", "dir", "channel", "type", "peer") if c not in schema.names]
    if missing:
        raise DecodeError(f"missing required column(s) {', '.join(missing)}", source=name)
    return ReplayMetadata(
        source=meta.get("recount.source", ""),
        format_version=version,
        cluster_members=meta.get("clusterMembers"),
        extra={k: v for k, v in meta.items() if k not in _OWN_KEYS},
    )


def _is_text(kind: pa.DataType) -> bool:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


_COLUMN_KINDS = {
    "seq": ("an integer", pa.types.is_integer),
    "ts": ("an integer", pa.types.is_integer),
    "node": ("an integer", pa.types.is_integer),
    "peer": ("an integer", pa.types.is_integer),
    "dir": ("a string", _is_text),
    "channel": ("a string", _is_text),
    "type": ("a string", _is_text),
    "payload": ("binary", lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t)),
    "fields": ("a string", lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)),
    "extra": ("a string", lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)),
}


def check_columns(schema: pa.Schema, *, name: str = "replay file") -> None:
    """The columns of contract §2 have their types (per-name columns may have any type), once each."""
    for column, (expected, fits) in _COLUMN_KINDS.items():
        indexes = schema.get_all_field_indices(column)
        if len(indexes) > 1:
            raise DecodeError(f"column {column!r} appears {len(indexes)} times", source=name)
        if indexes and not fits(schema.field(indexes[0]).type):
            raise DecodeError(
                f"column {column!r} is {schema.field(indexes[0]).type}, expected {expected}", source=name
            )


def _column(table: pa.Table, name: str) -> list[Any]:
    column = table.column(name)
    if pa.types.is_dictionary(column.type):
        column = column.cast(pa.string())
    return column.to_pylist()


def _row_error(expected: str, row: int, name: str) -> DecodeError:
    return DecodeError(expected, source=name, offset=row, unit="row")


def _json_object(text: str | None, column: str, row: int, name: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as error:
        raise _row_error(f"the {column} column holds invalid JSON ({one_line(error)})", row, name) from None
    if value is None:
        return None  # JSON null: no fields, as a missing value
    if not isinstance(value, dict):
        raise _row_error(f"the {column} column holds JSON {type(value).__name__}, expected an object", row, name)
    return value


def _check_events_columns(table: pa.Table, name: str) -> None:
    """Values the engine relies on: no nulls where contract §2 has none, known dir and channel names."""
    import pyarrow.compute as pc

    for column in ("seq", "ts", "node", "dir", "channel", "type"):
        values = table.column(column)
        if values.null_count:
            row = pc.index(pc.is_null(values), True).as_py()
            raise _row_error(f"{column} is null, expected a value", row, name)
    for column, allowed in (("dir", DIRECTIONS), ("channel", CHANNELS)):
        found = set(pc.unique(table.column(column).cast(pa.string())).to_pylist())
        if not found <= set(allowed):
            bad = sorted(found - set(allowed))[0]
            row = pc.index(table.column(column).cast(pa.string()), bad).as_py()
            raise _row_error(f"{column} {bad[:40]!r}, expected one of {', '.join(allowed)}", row, name)


def _check_time_order(ts: list[int], node: list[int], name: str) -> None:
    """Each member's events in time order, as in JSON Lines (a replay re-runs each member's clock
    forward through its events; one that goes back is a damaged or hand-edited file)."""
    last: dict[int, int] = {}
    for row, (when, member) in enumerate(zip(ts, node, strict=True)):
        previous = last.get(member)
        if previous is not None and when < previous:
            raise _row_error(f"ts {when} is earlier than node {member}'s previous event at {previous} "
                             "(each member's events are in time order)", row, name)
        last[member] = when


def table_to_events(table: pa.Table, *, name: str = "replay file") -> list[Event]:
    """Events back from a replay table, losslessly (from ``fields``/``payload``/``extra``).

    ``table`` comes from `read_table` (validated); a value no event can hold (a null ``ts``, an
    unknown ``dir`` or ``type``, ``fields`` that are not a JSON object) is a `DecodeError` naming the row.
    """
    _check_events_columns(table, name)
    seqs = _column(table, "seq")
    for i in range(1, len(seqs)):
        if seqs[i] <= seqs[i - 1]:
            raise DecodeError(f"seq is not strictly increasing at row {i}", source=name)
    ts = _column(table, "ts")
    node = _column(table, "node")
    _check_time_order(ts, node, name)
    direction = _column(table, "dir")
    channel = _column(table, "channel")
    kind = _column(table, "type")
    peer = _column(table, "peer")
    unknown = {value for value in set(kind) if value not in MESSAGE_CLASSES and value not in LOCAL_TYPES}
    if unknown:
        row = next(row for row, value in enumerate(kind) if value in unknown)
        raise _row_error(f"unknown event type {kind[row][:60]!r}", row, name)
    payload = _column(table, "payload") if "payload" in table.column_names else [None] * len(ts)
    fields = _column(table, "fields") if "fields" in table.column_names else None
    extra = _column(table, "extra") if "extra" in table.column_names else [None] * len(ts)
    if fields is None:
        # A file written by another tool: rebuild fields from the per-name columns.
        names = [n for n in table.column_names if n not in BASE_COLUMNS]
        columns = {n: _column(table, n) for n in names}
        fields = [{n: columns[n][i] for n in names if columns[n][i] is not None} for i in range(len(ts))]
    else:
        fields = [_json_object(f, "fields", row, name) or {} for row, f in enumerate(fields)]
    out = []
    for i in range(len(ts)):
        out.append(
            Event(
                ts=ts[i],
                node=node[i],
                dir=direction[i],
                peer=peer[i],
                channel=channel[i],
                type=kind[i],
                fields=fields[i],
                payload=payload[i],
                extra=_json_object(extra[i], "extra", i, name) if extra[i] else None,
            )
        )
    return out


def read_events(source: Any, *, name: str | None = None) -> tuple[list[Event], ReplayMetadata]:
    table = read_table(source, name=name)
    label = name or "replay file"
    return table_to_events(table, name=label), check_metadata(table.schema, name=label)


# -- reading a batch at a time -----------------------------------------------------------------------------
#
# `ReplayFile` is what `recount replay` streams: the schema is checked when it is opened; `checked()` is
# the first pass, which validates every record batch and the columns the engine relies on (everything
# `table_to_events` checks before it builds an event, except the JSON of rows built from typed columns,
# below) without building any event; `events(number)` then builds one batch's events.  A message row whose
# typed columns hold every field of its message (ints, and enum names) becomes a `ColumnarEvent`: its
# ``fields`` are those column values, in the message's schema order, and its message is built from them
# by position, without decoding its payload or JSON or re-validating the values; any other row (local
# events, messages with var data or groups, a row with a null or unexpected cell) is read from its
# ``fields`` JSON as `table_to_events` reads it.  Memory: one batch's Python values at a time.


class ColumnarEvent(Event):
    """An `Event` read from a replay file's typed columns (`ReplayFile.events`).

    Its ``fields`` hold every field of its message, by Aeron name in schema order (an extended message's
    own fields last, as `to_fields` gives them), each an int or an enum's name: so `message()` builds
    the message from them by position, as decoding the payload would (`formats.sbe`'s slot-by-slot
    builder), without the payload decode or `from_fields`' checks (the values were checked as the row
    was read).  It equals the `Event` with the same values; `dataclasses.replace` gives a plain `Event`.
    """

    __slots__ = ()

    def message(self, *, source: str | None = None) -> Any:
        count, enums, build = _message_plan(self.type)
        values = list(self.fields.values())[:count]
        key = (self.type, *values)  # ints and enum names: hashable
        message = _RECENT_MESSAGES.get(key)
        if message is not None:
            return message
        for position, kind in enums:
            value = values[position]
            values[position] = kind._member_map_[value] if type(value) is str else kind._value2member_map_.get(value, value)
        message = build(values)
        if len(_RECENT_MESSAGES) >= RECENT_MESSAGES:
            _RECENT_MESSAGES.clear()
        _RECENT_MESSAGES[key] = message
        return message

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Event):
            return _values(self) == _values(other)
        return NotImplemented

    __hash__ = Event.__hash__


_values = attrgetter("ts", "node", "dir", "peer", "channel", "type", "fields", "payload", "extra")

#: Messages built lately, by type and values: one copy of a message that several rows carry (a log frame
#: as its leader appended it and as each follower received it, a heartbeat repeated within a
#: millisecond), so what a replay keeps of them (each member's log recording: every frame's message) is
#: one object, not one per row.  Messages are immutable values, so sharing one changes nothing else.
#: A plain dict emptied when full: a bounded window over the rows lately read, in file order.
_RECENT_MESSAGES: dict[tuple[Any, ...], Any] = {}
RECENT_MESSAGES = 4096
_MESSAGE_PLANS: dict[str, tuple[int, tuple[tuple[int, Any], ...], Any]] = {}


def _message_plan(type_name: str) -> tuple[int, tuple[tuple[int, Any], ...], Any]:
    """(how many of the fields are the message's own, (position, enum) of each enum field, builder)."""
    plan = _MESSAGE_PLANS.get(type_name)
    if plan is None:
        block = MESSAGE_CLASSES[type_name].BLOCK
        enums = tuple((i, f.enum) for i, f in enumerate(block.fields) if f.enum is not None)
        plan = _MESSAGE_PLANS[type_name] = (len(block.fields), enums, sbe_builder(block))
    return plan


def _field_orders(type_name: str) -> list[tuple[tuple[str, ...], frozenset[str]]]:
    """The field-name orders a row of this message type may have in the replay file, with the names
    that are enums: the message's own (schema) order, and its schema extensions' (`cluster_codecs_ext`:
    e.g. NewLeadershipTerm with commitPosition).  Empty when the message has groups or var data (their
    values are lists or text that only the JSON holds exactly) or a name that is a base column."""
    cls = MESSAGE_CLASSES[type_name]
    blocks = [cls.BLOCK]
    extended = EXTENDED.get(cls.SPEC.template_id)
    if extended is not None:
        blocks.append(extended[0].block)
    orders = []
    for block in blocks:
        names = tuple(f.name for f in block.fields)
        if block.groups or block.var_data or any(name in BASE_COLUMNS for name in names):
            return []
        orders.append((names, frozenset(f.name for f in block.fields if f.enum is not None)))
    return orders


#: ``extra`` as importers write it: a flat object of one or two integers (``{"packet":n}``,
#: ``{"logPosition":p,"packet":n}``), read without the JSON decoder (longer numbers go to it).
_INT = r"(-?(?:0|[1-9][0-9]{0,18}))"
_FLAT_INTS = re.compile(rf'\{{"([A-Za-z]+)":{_INT}(?:,"([A-Za-z]+)":{_INT})?\}}')


def extra_of(text: str | None, row: int, name: str) -> dict[str, Any] | None:
    """A row's ``extra``, as `table_to_events` reads it."""
    if not text:
        return None
    match = _FLAT_INTS.fullmatch(text)
    if match is None:
        return _json_object(text, "extra", row, name)
    key, value, second, other = match.groups()
    if second is None:
        return {key: int(value)}
    return {key: int(value), second: int(other)}  # a repeated key keeps its last value, as in JSON


def _strings(array: pa.Array) -> list[str | None]:
    """A string column's values; a dictionary-encoded one without building a string per row."""
    if pa.types.is_dictionary(array.type):
        names = array.dictionary.to_pylist()
        return [names[i] for i in array.indices.to_pylist()]
    return array.to_pylist()


def column_codes(array: pa.Array) -> tuple[np.ndarray, list[str]]:
    """(an int code per row, the names the codes stand for) of a string column without nulls."""
    if not pa.types.is_dictionary(array.type):
        array = arrow_compute.dictionary_encode(array)
    return array.indices.to_numpy(zero_copy_only=False), array.dictionary.to_pylist()


def codes_present(codes: np.ndarray, count: int) -> list[int]:
    """The distinct values of ``codes`` (`column_codes`' codes of a column without nulls, each below ``count``),
    ascending, as ``np.unique(codes).tolist()`` gives them: counted rather than sorted or hashed, and without
    the import of `numpy.ma` that `np.unique` makes (6 ms of a replay's start)."""
    return np.flatnonzero(np.bincount(codes.astype(np.intp, copy=False), minlength=count)).tolist()


class ReplayFile:
    """A replay file read one record batch at a time (see the section comment above).

    ``source`` is what `read_table` takes (a memory map, for a file of any size).  Opening checks the
    schema; `checked()` yields each record batch once it and its rows are checked, in file order, and
    leaves ``in_order`` saying whether ``ts`` never decreases from row to row (then file order is replay
    order); `events(number)` builds a batch's events.  The rows' ``seq`` are their refs.
    """

    def __init__(self, source: Any, *, name: str | None = None) -> None:
        self.name = label = name or "replay file"
        if isinstance(source, bytes | bytearray | memoryview):
            source = pa.py_buffer(source)
        try:
            self.schema, self.batches = _read_batches(source, label)
        except ARROW_ERRORS as error:
            raise DecodeError(f"not an Arrow IPC file or stream ({one_line(error)})", source=label, offset=0) from None
        check_names(self.schema, name=label)
        self.metadata = check_metadata(self.schema, name=label)
        check_columns(self.schema, name=label)
        for batch in self.batches:
            if not batch.schema.equals(self.schema):
                raise DecodeError("record batches do not match the schema", source=label)
        #: Each batch's first row.
        self.starts: list[int] = []
        rows = 0
        for batch in self.batches:
            self.starts.append(rows)
            rows += batch.num_rows
        self.rows = rows
        self.in_order = True
        self._field_columns = [n for n in self.schema.names if n not in BASE_COLUMNS]
        self._contexts: dict[tuple[int, int, int], dict[str, set[str]]] = {}  # `events`' contexts, read

    def __len__(self) -> int:
        return self.rows

    def batch_of(self, row: int) -> int:
        """The number of the batch holding ``row``."""
        return bisect.bisect_right(self.starts, row) - 1

    # -- the first pass ----------------------------------------------------------------------------------

    def checked(self) -> Iterator[tuple[int, pa.RecordBatch]]:
        """(first row, batch) of every batch, in file order, each once it passed `table_to_events`' checks."""
        self.in_order = True
        last_seq: int | None = None
        last_ts: int | None = None
        last_by_node: dict[int, int] = {}
        for number, batch in enumerate(self.batches):
            first = self.starts[number]
            validate_batch(batch, name=self.name, number=number)
            self._check_values(batch, first)
            seq = batch.column("seq").to_numpy()
            if len(seq):
                if last_seq is not None and seq[0] <= last_seq:
                    raise DecodeError(f"seq is not strictly increasing at row {first}", source=self.name)
                bad = np.flatnonzero(seq[1:] <= seq[:-1])
                if len(bad):
                    raise DecodeError(f"seq is not strictly increasing at row {first + int(bad[0]) + 1}",
                                      source=self.name)
                last_seq = int(seq[-1])
                ts = batch.column("ts").to_numpy()
                node = batch.column("node").to_numpy()
                if self.in_order and ((last_ts is not None and ts[0] < last_ts) or bool(np.any(ts[1:] < ts[:-1]))):
                    self.in_order = False
                if not self.in_order:
                    self._check_time_order(ts, node, first, last_by_node)
                last_ts = int(ts[-1])
                # Each member's last ts in this batch (the last occurrence of each node value).
                members, last_index = np.unique(node[::-1], return_index=True)
                for member, index in zip(members.tolist(), (len(node) - 1 - last_index).tolist(), strict=True):
                    last_by_node[member] = int(ts[index])
            self._check_types(batch, first)
            self._check_json(batch, first)
            yield first, batch

    def _check_values(self, batch: pa.RecordBatch, first: int) -> None:
        for column in ("seq", "ts", "node", "dir", "channel", "type"):
            values = batch.column(column)
            if values.null_count:
                import pyarrow.compute as pc  # an error, once

                row = first + pc.index(pc.is_null(values), True).as_py()
                raise _row_error(f"{column} is null, expected a value", row, self.name)
        for column, allowed in (("dir", DIRECTIONS), ("channel", CHANNELS)):
            codes, names = column_codes(batch.column(column))
            used = {names[code] for code in codes_present(codes, len(names))}
            if not used <= set(allowed):
                bad = sorted(used - set(allowed))[0]
                row = first + int(np.flatnonzero(codes == names.index(bad))[0])
                raise _row_error(f"{column} {bad[:40]!r}, expected one of {', '.join(allowed)}", row, self.name)

    def _check_time_order(self, ts: np.ndarray, node: np.ndarray, first: int, last_by_node: dict[int, int]) -> None:
        """`_check_time_order` of one batch, given each member's last ts before it."""
        worst: tuple[int, int, int, int] | None = None  # (row, ts, member, previous)
        for member in np.unique(node).tolist():
            rows = np.flatnonzero(node == member)
            times = ts[rows]
            previous = last_by_node.get(member)
            if previous is not None and times[0] < previous:
                found = (int(rows[0]), int(times[0]), member, previous)
            else:
                back = np.flatnonzero(times[1:] < times[:-1])
                if not len(back):
                    continue
                k = int(back[0])
                found = (int(rows[k + 1]), int(times[k + 1]), member, int(times[k]))
            if worst is None or found[0] < worst[0]:
                worst = found
        if worst is not None:
            row, when, member, previous = worst
            raise _row_error(f"ts {when} is earlier than node {member}'s previous event at {previous} "
                             "(each member's events are in time order)", first + row, self.name)

    def _check_types(self, batch: pa.RecordBatch, first: int) -> None:
        codes, names = column_codes(batch.column("type"))
        unknown = [code for code in codes_present(codes, len(names))
                   if names[code] not in MESSAGE_CLASSES and names[code] not in LOCAL_TYPES]
        if unknown:
            row = min(int(np.flatnonzero(codes == code)[0]) for code in unknown)
            raise _row_error(f"unknown event type {names[codes[row]][:60]!r}", first + row, self.name)

    def _check_json(self, batch: pa.RecordBatch, first: int) -> None:
        """Each ``fields`` and ``extra`` text looks like a JSON object (or null); a row that does not is
        parsed as `table_to_events` would parse it, so it fails with the same words.  (Rows whose fields
        come from typed columns are not parsed: a damaged text inside braces goes unnoticed there.)"""
        pc = arrow_compute
        names = batch.schema.names
        for column, empty_is_none in (("fields", False), ("extra", True)):
            if column not in names:
                continue
            texts = batch.column(column)
            looks = pc.or_(pc.and_(pc.starts_with(texts, "{"), pc.ends_with(texts, "}")), pc.equal(texts, "null"))
            if empty_is_none:
                looks = pc.or_(looks, pc.equal(texts, ""))
            looks = pc.fill_null(looks, True)
            if looks.false_count:
                for index in np.flatnonzero(~looks.to_numpy(zero_copy_only=False)).tolist():
                    _json_object(texts[index].as_py(), column, first + index, self.name)

    # -- events ------------------------------------------------------------------------------------------

    def events(self, number: int, rows: Sequence[int] | slice | None = None, *, context: slice | None = None
               ) -> tuple[list[Event], list[int]]:
        """The events of batch ``number`` (or of its ``rows``: numbers within it, or a slice of them) and
        their seqs; only for a batch `checked()` has passed.  ``context``: the slice of the batch whose
        rows decide, per message type, whether fields come from the typed columns (`_fields_from_columns`),
        so that a few of its rows are built as the whole slice would build them."""
        batch = self.batches[number]
        first = self.starts[number]
        around = None
        if context is not None:
            start, stop, _ = context.indices(batch.num_rows)
            key = (number, start, stop)
            around = self._contexts.get(key)
            if around is None:
                if len(self._contexts) > 8:
                    self._contexts.clear()
                # what the slice's rows have values in, by message type: read once per slice
                around = self._contexts[key] = _columns_used(batch.slice(start, max(stop - start, 0)),
                                                             self._field_columns)
        if rows is None:
            numbers: Sequence[int] = range(first, first + batch.num_rows)
        elif isinstance(rows, slice):
            start, stop, _ = rows.indices(batch.num_rows)
            batch = batch.slice(start, max(stop - start, 0))
            numbers = range(first + start, first + start + batch.num_rows)
        elif len(rows) and rows[-1] - rows[0] == len(rows) - 1 and all(
                b == a + 1 for a, b in zip(rows[:-1], rows[1:], strict=True)):
            batch = batch.slice(rows[0], len(rows))  # consecutive rows: a view, not a copy of every column
            numbers = [first + r for r in rows]
        else:
            batch = arrow_compute.take(batch, pa.array(rows, type=pa.int64()))
            numbers = [first + r for r in rows]
        return _batch_events(batch, numbers, self._field_columns, self.name, around)


def _batch_events(batch: pa.RecordBatch, numbers: Sequence[int], field_columns: list[str], name: str,
                  context: dict[str, set[str]] | None = None) -> tuple[list[Event], list[int]]:
    count = batch.num_rows
    column = batch.column
    names = batch.schema.names
    type_codes, type_names = column_codes(column("type"))
    built: list[dict[str, Any] | None] = [None] * count
    if "fields" in names:
        _fields_from_columns(batch, type_codes, type_names, field_columns, built, context)
        columnar = [fields is not None for fields in built]
        missing = [i for i in range(count) if built[i] is None]
        if missing:
            texts = arrow_compute.take(column("fields"), pa.array(missing, type=pa.int64())).to_pylist()
            for i, text in zip(missing, texts, strict=True):
                built[i] = _json_object(text, "fields", numbers[i], name) or {}
    else:
        # A file written by another tool: fields from the per-name columns (as `table_to_events` does).
        values = {n: column(n).to_pylist() for n in field_columns}
        built = [{n: values[n][i] for n in field_columns if values[n][i] is not None} for i in range(count)]
        columnar = [False] * count
    kind = list(map(type_names.__getitem__, type_codes.tolist()))
    payload = column("payload").to_pylist() if "payload" in names else [None] * count
    extra = column("extra").to_pylist() if "extra" in names else [None] * count
    if any(extra):
        extra = [extra_of(text, row, name) if text else None for text, row in zip(extra, numbers, strict=True)]
    classes = [ColumnarEvent if is_columnar else Event for is_columnar in columnar]
    events = list(map(new_event, column("ts").to_pylist(), column("node").to_pylist(), _strings(column("dir")),
                      column("peer").to_pylist(), _strings(column("channel")), kind, built, payload, extra, classes))
    return events, column("seq").to_pylist()


def _columns_used(batch: pa.RecordBatch, field_columns: list[str]) -> dict[str, set[str]]:
    """Message type name -> the per-name columns its rows in ``batch`` have values in."""
    type_codes, type_names = column_codes(batch.column("type"))
    by_name: dict[str, set[str]] = {}
    for name in field_columns:
        values = batch.column(name)
        if values.null_count == len(values):
            continue
        codes = type_codes if values.null_count == 0 else type_codes[
            arrow_compute.is_valid(values).to_numpy(zero_copy_only=False)]
        for code in codes_present(codes, len(type_names)):
            by_name.setdefault(type_names[code], set()).add(name)
    return by_name


def _fields_from_columns(batch: pa.RecordBatch, type_codes: np.ndarray, type_names: list[str],
                         field_columns: list[str], built: list[dict[str, Any] | None],
                         context: dict[str, set[str]] | None = None) -> None:
    """Set ``built[i]`` to row i's fields from the typed columns where they hold all of them (see
    `ColumnarEvent`); other rows stay None.  Which columns a message type has values in is ``context``'s
    (`_columns_used` of the rows around these, which they are read as part of) when given, else ``batch``'s."""
    pc = arrow_compute
    present = [code for code in codes_present(type_codes, len(type_names)) if type_names[code] in MESSAGE_CLASSES]
    if not present:
        return
    # Which per-name columns each message type present has values in (in this batch, or its context).
    by_name = context if context is not None else _columns_used(batch, field_columns)
    used = {code: by_name.get(type_names[code], set()) for code in present}
    schema = batch.schema
    for code in present:
        type_name = type_names[code]
        plan = next(((order, enums) for order, enums in _field_orders(type_name) if set(order) == used[code]), None)
        if plan is None:
            continue
        order, enums = plan
        if not all(pa.types.is_integer(schema.field(n).type) or (n in enums and _is_text(schema.field(n).type))
                   for n in order):
            continue
        rows = pc.int64_array(np.flatnonzero(type_codes == code))
        columns = [pc.take(batch.column(n), rows) for n in order]
        # Rows whose every name has a value, enums as one of the enum's names (a text column of an enum
        # holds JSON text when its values were mixed: those rows are read from their JSON).
        keep = None
        for n, values in zip(order, columns, strict=True):
            ok = pc.is_valid(values)
            if n in enums and _is_text(values.type):
                ok = pc.and_(ok, pc.fill_null(pc.is_in(values, value_set=_enum_names(type_name, n)), False))
            keep = ok if keep is None else pc.and_(keep, ok)
        if keep is not None and keep.false_count:
            rows = pc.filter(rows, keep)
            columns = [pc.filter(values, keep) for values in columns]
        for i, values in zip(rows.to_pylist(), zip(*(values.to_pylist() for values in columns), strict=True),
                             strict=True):
            built[i] = dict(zip(order, values, strict=True))


_ENUM_NAMES: dict[tuple[str, str], pa.Array] = {}


def _enum_names(type_name: str, field_name: str) -> pa.Array:
    names = _ENUM_NAMES.get((type_name, field_name))
    if names is None:
        cls = MESSAGE_CLASSES[type_name]
        extended = EXTENDED.get(cls.SPEC.template_id)
        fields = extended[0].block.fields if extended is not None else cls.BLOCK.fields
        field = next(f for f in fields if f.name == field_name)
        names = _ENUM_NAMES[(type_name, field_name)] = pa.array(list(field.enum.__members__), type=pa.string())
    return names
