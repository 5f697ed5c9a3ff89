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

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
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
    kinds = {type(v) for v in values}
    kinds.discard(type(None))
    if kinds == {int}:
        return "int" if all(v is None or -(1 << 63) <= v < (1 << 63) for v in values) else "json"
    if kinds == {bool}:
        return "bool"
    if kinds == {str}:
        return "str"
    return "json"


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_dumps = _ENCODER.encode


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
    events = events if isinstance(events, list) else list(events)
    count = len(events)
    dumps = _dumps
    fields_json: list[str] = []
    extra_json: list[str | None] = []
    # One pass over the events: every field value goes straight into its column's slot.
    columns: dict[str, list[Any]] = {}
    for i, event in enumerate(events):
        fields = _canonical_fields(event)
        fields_json.append(dumps(fields if type(fields) is dict else dict(fields)))
        extra_json.append(dumps(dict(event.extra)) if event.extra else None)
        for name, value in fields.items():
            column = columns.get(name)
            if column is None:
                if name in BASE_COLUMNS:
                    continue
                column = columns[name] = [None] * count
            column[i] = value
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
    for name in sorted(columns):
        values = columns[name]
        kind = _column_type(values)
        if kind == "int":
            arrays[name] = pa.array(values, type=pa.int64())
        elif kind == "bool":
            arrays[name] = pa.array(values, type=pa.bool_())
        elif kind == "str":
            arrays[name] = pa.array(values, type=pa.string())
        else:
            arrays[name] = pa.array([None if v is None else dumps(v) for v in values], type=pa.string())
    meta = {"recount.format": FORMAT, "recount.formatVersion": str(FORMAT_VERSION), "recount.source": source}
    if cluster_members:
        meta["clusterMembers"] = cluster_members
    if metadata:
        meta.update(metadata)
    table = pa.table(arrays)
    return table.replace_schema_metadata(meta)


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
