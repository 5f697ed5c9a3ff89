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
"""

from __future__ import annotations

import gc
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from formats.errors import DecodeError
from formats.events import Event

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


def read_table(source: Any, *, name: str | None = None) -> pa.Table:
    """A replay table from an Arrow IPC file or stream (bytes, pyarrow Buffer, NativeFile or memory map)."""
    label = name or "replay file"
    if isinstance(source, bytes | bytearray | memoryview):
        source = pa.py_buffer(source)
    try:
        table = ipc.open_file(source).read_all()
    except (pa.ArrowInvalid, OSError):
        try:
            if hasattr(source, "seek"):
                source.seek(0)
            reader = ipc.open_stream(source)
            batches = []
            try:
                for batch in reader:
                    batches.append(batch)
            except (pa.ArrowInvalid, OSError):
                pass  # A stream cut short (a killed recorder): keep the whole batches read before the cut.
            table = pa.Table.from_batches(batches, schema=reader.schema)
        except (pa.ArrowInvalid, OSError) as error:
            raise DecodeError(f"not an Arrow IPC file or stream ({error})", source=label, offset=0) from None
    check_metadata(table.schema, name=label)
    return table


def check_metadata(schema: pa.Schema, *, name: str = "replay file") -> ReplayMetadata:
    meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    if meta.get("recount.format") != FORMAT:
        raise DecodeError("not a recount replay file (schema metadata recount.format is not 'replay')", source=name)
    try:
        version = int(meta.get("recount.formatVersion", ""))
    except ValueError:
        raise DecodeError("recount.formatVersion is not an integer", source=name) from None
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


def _column(table: pa.Table, name: str) -> list[Any]:
    column = table.column(name)
    if pa.types.is_dictionary(column.type):
        column = column.cast(pa.string())
    return column.to_pylist()


def table_to_events(table: pa.Table, *, name: str = "replay file") -> list[Event]:
    """Events back from a replay table, losslessly (from ``fields``/``payload``/``extra``)."""
    seqs = _column(table, "seq")
    for i in range(1, len(seqs)):
        if seqs[i] <= seqs[i - 1]:
            raise DecodeError(f"seq is not strictly increasing at row {i}", source=name)
    ts = _column(table, "ts")
    node = _column(table, "node")
    direction = _column(table, "dir")
    channel = _column(table, "channel")
    kind = _column(table, "type")
    peer = _column(table, "peer")
    payload = _column(table, "payload") if "payload" in table.column_names else [None] * len(ts)
    fields = _column(table, "fields") if "fields" in table.column_names else None
    extra = _column(table, "extra") if "extra" in table.column_names else [None] * len(ts)
    if fields is None:
        # A file written by another tool: rebuild fields from the per-name columns.
        names = [n for n in table.column_names if n not in BASE_COLUMNS]
        columns = {n: _column(table, n) for n in names}
        fields = [{n: columns[n][i] for n in names if columns[n][i] is not None} for i in range(len(ts))]
    else:
        try:
            fields = [json.loads(f) if f is not None else {} for f in fields]
        except json.JSONDecodeError as error:
            raise DecodeError(f"the fields column holds invalid JSON ({error.msg})", source=name) from None
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
                extra=json.loads(extra[i]) if extra[i] else None,
            )
        )
    return out


def read_events(source: Any, *, name: str | None = None) -> tuple[list[Event], ReplayMetadata]:
    table = read_table(source, name=name)
    label = name or "replay file"
    return table_to_events(table, name=label), check_metadata(table.schema, name=label)
