"""Events as columns, and the replay file written from them record batch by record batch.

An `EventColumns` holds events (contract §1) as arrays, one row per event, the way the capture
importer produces them in bulk: a pcap of a few hundred thousand datagrams becomes as many rows
without a Python object per event.  What many events share is held once: an *entry* is a type, its
fields and its payload bytes (a message's ``out`` and ``in`` events, a heartbeat repeated byte for
byte, are one entry).  ``extra`` is held as columns in its usual shapes (``{"packet": n}`` and
``{"logPosition": p, "packet": n}``, each possibly followed by ``"capturedTs"``); any other mapping
is kept as it is.  `event` and iteration give `formats.events.Event` values equal to the events the
rows were made from, so code that wants events still has them.

`write_replay` writes the replay file (contract §2) with exactly the bytes that
``replay_file.write_table(replay_file.events_to_table(events, ...), sink)`` writes for the same
events (the tests check it on every sample and real capture), one record batch at a time, so that
the whole table is never in memory at once; `to_table` gives the whole table.

Sans-I/O: callers pass pyarrow sinks.  Imports `formats.events` and `formats.replay_file` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

try:  # the take kernel itself: pyarrow.compute's Python wrappers take 40 ms to import, a tenth of a start-up
    from pyarrow._compute import call_function as _call_function
except ImportError:  # pragma: no cover - a pyarrow that moved it
    from pyarrow.compute import call_function as _call_function

from formats import replay_file
from formats.events import CHANNELS, DIRECTIONS, MESSAGE_CLASSES, Event

#: ``extra_kind`` values: no extra; ``{"packet"}``; ``{"logPosition", "packet"}``; another mapping.
EXTRA_NONE, EXTRA_PACKET, EXTRA_LOG, EXTRA_OTHER = 0, 1, 2, 3
BATCH_ROWS = 65536  #: rows per record batch, as `replay_file.write_table` cuts them
#: How far past a batch (in rows) its text columns are made to bring the next rows' bytes (`_rows_to_cover`).
NEAR_ROWS = (16, 256, 4096)

_DIRECTION = {name: code for code, name in enumerate(DIRECTIONS)}
_CHANNEL = {name: code for code, name in enumerate(CHANNELS)}


class Entries:
    """The distinct (type, fields, payload) of some events; rows refer to them by number."""

    __slots__ = ("types", "fields", "payloads", "_index")

    def __init__(self) -> None:
        self.types: list[str] = []
        self.fields: list[Mapping[str, Any]] = []
        self.payloads: list[bytes | None] = []
        self._index: dict[tuple, int] = {}

    def __len__(self) -> int:
        return len(self.types)

    def add(self, type_name: str, fields: Mapping[str, Any], payload: bytes | None, *, key: Any = None) -> int:
        """The number of this entry, added if new.  Without ``key``, entries are told apart by the
        identity of their fields (events that share one fields dict share an entry)."""
        marker = (type_name, id(fields) if key is None else key, payload)
        number = self._index.get(marker)
        if number is None:
            number = self._index[marker] = len(self.types)
            self.types.append(type_name)
            self.fields.append(fields)
            self.payloads.append(payload)
        return number


class EventColumns:
    """Events as columns; see the module docstring.

    Per row: ``ts``, ``node``, ``dir`` (index into `DIRECTIONS`), ``peer`` (``has_peer`` False
    for null), ``channel`` (index into `CHANNELS`), ``entry`` (into ``entries``), and the extra:
    ``extra_kind``, ``packet``, ``log_position``, ``captured`` with ``captured_ts`` (a
    ``"capturedTs"`` key after the others), and ``extra_ref`` (into ``others``, for `EXTRA_OTHER`).
    """

    __slots__ = ("ts", "node", "dir", "peer", "has_peer", "channel", "entry", "extra_kind", "packet",
                 "log_position", "captured", "captured_ts", "extra_ref", "entries", "others")

    def __init__(self, *, ts, node, dir, peer, has_peer, channel, entry, extra_kind, packet, log_position,
                 captured, captured_ts, extra_ref, entries: Entries, others: list[Mapping[str, Any]]) -> None:
        self.ts, self.node, self.dir, self.peer, self.has_peer = ts, node, dir, peer, has_peer
        self.channel, self.entry = channel, entry
        self.extra_kind, self.packet, self.log_position = extra_kind, packet, log_position
        self.captured, self.captured_ts, self.extra_ref = captured, captured_ts, extra_ref
        self.entries, self.others = entries, others

    _ROW_COLUMNS = ("ts", "node", "dir", "peer", "has_peer", "channel", "entry", "extra_kind", "packet",
                    "log_position", "captured", "captured_ts", "extra_ref")

    # --- building -------------------------------------------------------------------------------
    @classmethod
    def empty(cls, entries: Entries | None = None) -> EventColumns:
        return cls.from_events([], entries=entries)

    @classmethod
    def from_events(cls, events: Iterable[Event], *, entries: Entries | None = None) -> EventColumns:
        """Rows for ``events``, in their order (a loop in Python: for the few events of other sources)."""
        entries = entries if entries is not None else Entries()
        others: list[Mapping[str, Any]] = []
        rows = []
        for event in events:
            kind, packet, position, captured, ref = _extra_shape(event.extra, others)
            rows.append((event.ts, event.node, _DIRECTION[event.dir], 0 if event.peer is None else event.peer,
                         event.peer is not None, _CHANNEL[event.channel],
                         entries.add(event.type, event.fields, event.payload), kind, packet, position,
                         captured is not None, 0 if captured is None else captured, ref))
        count = len(rows)
        columns = list(zip(*rows, strict=True)) if rows else [()] * 13
        kinds = (np.int64, np.int64, np.int8, np.int64, bool, np.int8, np.int32, np.int8, np.int64, np.int64, bool,
                 np.int64, np.int32)
        arrays = [np.fromiter(values, kind, count) for values, kind in zip(columns, kinds, strict=True)]
        return cls(**dict(zip(cls._ROW_COLUMNS, arrays, strict=True)), entries=entries, others=others)

    @classmethod
    def concat(cls, parts: Sequence[EventColumns]) -> EventColumns:
        """The rows of ``parts`` one after the other (entries and other extras renumbered)."""
        entries = Entries()
        others: list[Mapping[str, Any]] = []
        pieces: dict[str, list[np.ndarray]] = {name: [] for name in cls._ROW_COLUMNS}
        for part in parts:
            mapping = np.array([entries.add(t, f, p, key=("part", id(part), n)) for n, (t, f, p)
                                in enumerate(zip(part.entries.types, part.entries.fields, part.entries.payloads,
                                                 strict=True))], dtype=np.int32)
            for name in cls._ROW_COLUMNS:
                values = getattr(part, name)
                if name == "entry":
                    values = mapping[values] if len(values) else values
                elif name == "extra_ref":
                    values = np.where(values >= 0, values + len(others), -1).astype(np.int32)
                pieces[name].append(values)
            others.extend(part.others)
        arrays = {name: np.concatenate(values) if values else np.zeros(0) for name, values in pieces.items()}
        return cls(**arrays, entries=entries, others=others)

    @classmethod
    def concat_shared(cls, parts: Sequence[EventColumns]) -> EventColumns:
        """The rows of ``parts``, which share one `Entries`, one after the other."""
        entries = parts[0].entries
        if any(part.entries is not entries for part in parts):
            return cls.concat(parts)
        others: list[Mapping[str, Any]] = []
        arrays: dict[str, list[np.ndarray]] = {name: [] for name in cls._ROW_COLUMNS}
        for part in parts:
            for name in cls._ROW_COLUMNS:
                values = getattr(part, name)
                if name == "extra_ref":
                    values = np.where(values >= 0, values + len(others), -1).astype(np.int32)
                arrays[name].append(values)
            others.extend(part.others)
        return cls(**{name: np.concatenate(values) for name, values in arrays.items()}, entries=entries,
                   others=others)

    @classmethod
    def gathered(cls, parts: Sequence[EventColumns], rows: np.ndarray) -> EventColumns:
        """``concat_shared(parts).take(rows)``, a column at a time (one column's copy in memory at once).

        The rows are taken from the largest part directly, and those of the others (few, usually)
        put in after: the parts are never joined into one array first."""
        entries = parts[0].entries
        if any(part.entries is not entries for part in parts):
            return cls.concat(parts).take(rows)
        others: list[Mapping[str, Any]] = []
        refs = []
        for part in parts:
            refs.append(np.where(part.extra_ref >= 0, part.extra_ref + len(others), -1).astype(np.int32))
            others.extend(part.others)
        sizes = [len(part) for part in parts]
        main = int(np.argmax(sizes)) if parts else 0
        before = sum(sizes[:main])
        local = rows - before  # rows of the largest part, numbered within it
        elsewhere = np.flatnonzero((local < 0) | (local >= sizes[main])) if len(parts) > 1 else np.zeros(0, np.int64)
        local[elsewhere] = 0
        # The other rows, numbered within the other parts one after the other.
        rest = rows.take(elsewhere)
        rest -= np.where(rest >= before + sizes[main], sizes[main], 0)
        arrays = {}
        for name in cls._ROW_COLUMNS:
            pieces = refs if name == "extra_ref" else [getattr(part, name) for part in parts]
            kind = np.result_type(*pieces)
            column = pieces[main].take(local)
            if column.dtype != kind:
                column = column.astype(kind)
            if len(elsewhere):
                column[elsewhere] = np.concatenate(pieces[:main] + pieces[main + 1:]).take(rest)
            arrays[name] = column
        return cls(**arrays, entries=entries, others=others)

    def replaced(self, **columns: np.ndarray) -> EventColumns:
        """These rows with some columns replaced (the others shared)."""
        arrays = {name: columns.get(name, getattr(self, name)) for name in self._ROW_COLUMNS}
        return EventColumns(**arrays, entries=self.entries, others=self.others)

    def take(self, rows: np.ndarray) -> EventColumns:
        """These rows, in the order given (entries and other extras are shared)."""
        return EventColumns(**{name: getattr(self, name)[rows] for name in self._ROW_COLUMNS},
                            entries=self.entries, others=self.others)

    def with_events(self, replacements: Mapping[int, Event]) -> EventColumns:
        """These rows with some replaced by other events (e.g. a MemberStart given its settings); the
        columns those rows do not change are shared, not copied."""
        if not replacements:
            return self
        others = list(self.others)
        values: dict[int, tuple] = {}
        for row, event in replacements.items():
            kind, packet, position, captured, ref = _extra_shape(event.extra, others)
            values[row] = (event.ts, event.node, _DIRECTION[event.dir], 0 if event.peer is None else event.peer,
                           event.peer is not None, _CHANNEL[event.channel],
                           self.entries.add(event.type, event.fields, event.payload), kind, packet, position,
                           captured is not None, 0 if captured is None else captured, ref)
        arrays = {}
        for k, name in enumerate(self._ROW_COLUMNS):
            column = getattr(self, name)
            if all(column[row] == value[k] for row, value in values.items()):
                arrays[name] = column
                continue
            column = column.copy()
            for row, value in values.items():
                column[row] = value[k]
            arrays[name] = column
        return EventColumns(**arrays, entries=self.entries, others=others)

    # --- reading --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.ts)

    def type_codes(self) -> tuple[np.ndarray, list[str]]:
        """Each row's type as a number into the returned names (one number per distinct name)."""
        names = sorted(set(self.entries.types))
        number = {name: code for code, name in enumerate(names)}
        of_entry = np.fromiter((number[t] for t in self.entries.types), np.int32, len(self.entries.types))
        return (of_entry[self.entry] if len(self.entry) else np.zeros(0, np.int32)), names

    def nodes(self) -> list[int]:
        """The members the rows are about, sorted."""
        return distinct_rows(self.node)[:, 0].tolist()

    def rows_of_type(self, *names: str) -> np.ndarray:
        """The rows whose type is one of ``names``, in order."""
        wanted = np.fromiter((t in names for t in self.entries.types), bool, len(self.entries.types))
        return np.flatnonzero(wanted[self.entry]) if len(self.entry) else np.zeros(0, np.int64)

    def extra(self, row: int) -> Mapping[str, Any] | None:
        kind = self.extra_kind[row]
        if kind == EXTRA_NONE:
            return None
        if kind == EXTRA_OTHER:
            return self.others[self.extra_ref[row]]
        extra: dict[str, Any] = {}
        if kind == EXTRA_LOG:
            extra["logPosition"] = int(self.log_position[row])
        extra["packet"] = int(self.packet[row])
        if self.captured[row]:
            extra["capturedTs"] = int(self.captured_ts[row])
        return extra

    def event(self, row: int) -> Event:
        entry = int(self.entry[row])
        entries = self.entries
        return Event(ts=int(self.ts[row]), node=int(self.node[row]), dir=DIRECTIONS[self.dir[row]],
                     peer=int(self.peer[row]) if self.has_peer[row] else None, channel=CHANNELS[self.channel[row]],
                     type=entries.types[entry], fields=entries.fields[entry], payload=entries.payloads[entry],
                     extra=self.extra(row))

    def __iter__(self) -> Iterator[Event]:
        for row in range(len(self.ts)):
            yield self.event(row)

    def to_events(self) -> list[Event]:
        return list(self)

    # --- the replay file ------------------------------------------------------------------------
    def to_table(self, *, source: str, cluster_members: str | None = None,
                 metadata: Mapping[str, str] | None = None) -> pa.Table:
        """The replay table (`replay_file.events_to_table` of these events)."""
        plan = _TablePlan(self, source, cluster_members, metadata)
        return pa.Table.from_batches(list(plan.batches(len(self) or 1)), schema=plan.schema)

    def write_replay(self, sink: Any, *, source: str, cluster_members: str | None = None,
                     metadata: Mapping[str, str] | None = None, compression: str | None = None) -> None:
        """Write the replay file to ``sink`` as `replay_file.write_table` writes the table."""
        plan = _TablePlan(self, source, cluster_members, metadata)
        options = ipc.IpcWriteOptions(compression=compression)
        pool = pa.default_memory_pool()
        with ipc.new_file(sink, plan.schema, options=options) as writer:
            for batch in plan.batches(BATCH_ROWS) if len(self) else ():  # no rows: no record batch, as write_table
                writer.write_batch(batch)
                del batch
                pool.release_unused()  # a batch's buffers back to the system: memory stays one batch deep


#: `stable_order` sorts one 16-bit key (numpy's radix sort, one pass) where the keys' ranges multiply to at
#: most this: a capture's members, peers, streams or lengths.
_SMALL_KEYS = 1 << 16


def stable_order(*keys: np.ndarray) -> np.ndarray:
    """``np.lexsort(keys[::-1])`` of integer arrays of one length: the rows by the first key, then by the
    next, in their order among equals (with one key, ``np.argsort(key, kind="stable")``); by a radix sort of
    one 16-bit key where the keys' ranges allow."""
    if not len(keys[0]):
        return np.zeros(0, dtype=np.intp)
    if len(keys) == 1:
        key = keys[0]
        low, high = int(key.min()), int(key.max())
        if high - low >= _SMALL_KEYS:
            return np.argsort(key, kind="stable")
        return np.argsort((key - low if low else key).astype(np.uint16), kind="stable")
    composite = np.zeros(len(keys[0]), dtype=np.int64)
    span = 1
    for key in keys:
        low, high = int(key.min()), int(key.max())
        span *= high - low + 1
        if span > _SMALL_KEYS:
            return np.lexsort(keys[::-1])
        composite = composite * (high - low + 1) + (key.astype(np.int64) - low)
    return np.argsort(composite.astype(np.uint16), kind="stable")


def _packing(columns: Sequence[np.ndarray]) -> tuple[np.ndarray, list[int], list[int]] | None:
    """(one int64 per row, each column's lowest value, its width in bits) for non-empty integer columns whose
    ranges fit in 62 bits together, else None: the rows packed into numbers that compare as the rows do."""
    lows = [int(c.min()) for c in columns]
    widths = [max(1, (int(c.max()) - low).bit_length()) for c, low in zip(columns, lows, strict=True)]
    if sum(widths) > 62:
        return None
    packed = np.zeros(len(columns[0]), dtype=np.int64)
    for column, low, width in zip(columns, lows, widths, strict=True):
        packed = (packed << width) | (column.astype(np.int64) - low)
    return packed, lows, widths


def packed_rows(*columns: np.ndarray) -> np.ndarray | None:
    """One int64 per row of some non-empty integer columns, equal where the rows are equal and ordered as
    they are (by the first column, then the next), when their ranges fit in 62 bits together; else None."""
    packing = _packing(columns)
    return None if packing is None else packing[0]


def packed_rows_and_width(*columns: np.ndarray) -> tuple[np.ndarray, int] | None:
    """`packed_rows`, and how many bits its numbers take (each is below ``1 << width``)."""
    packing = _packing(columns)
    return None if packing is None else (packing[0], sum(packing[2]))


def distinct_rows(*columns: np.ndarray) -> np.ndarray:
    """The distinct rows of some integer columns (as a 2-D array, sorted), packed into one int64 sort
    when their ranges allow it (the common case: a handful of members, directions and channels)."""
    if not len(columns[0]):
        return np.zeros((0, len(columns)), dtype=np.int64)
    packing = _packing(columns)
    if packing is not None:
        packed, lows, widths = packing
        # Few distinct values in a small range are counted rather than sorted.
        packed = np.flatnonzero(np.bincount(packed)) if sum(widths) <= 22 else np.unique(packed)
        out = np.empty((len(packed), len(columns)), dtype=np.int64)
        for k in range(len(columns) - 1, -1, -1):
            out[:, k] = (packed & ((1 << widths[k]) - 1)) + lows[k]
            packed = packed >> widths[k]
        return out
    return np.unique(np.stack([c.astype(np.int64) for c in columns], axis=1), axis=0)


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _extra_shape(extra: Mapping[str, Any] | None, others: list) -> tuple[int, int, int, int | None, int]:
    """(kind, packet, logPosition, capturedTs or None, ref into ``others``) for one event's extra."""
    if not extra:
        return EXTRA_NONE, 0, 0, None, -1
    if type(extra) is dict:  # the two usual shapes first, as the general case below takes them
        if len(extra) == 1:
            packet = extra.get("packet")
            if type(packet) is int and _INT64_MIN <= packet <= _INT64_MAX:
                return EXTRA_PACKET, packet, 0, None, -1
        elif len(extra) == 2:
            position, packet = extra.get("logPosition"), extra.get("packet")
            if (type(position) is int and type(packet) is int and _INT64_MIN <= position <= _INT64_MAX
                    and _INT64_MIN <= packet <= _INT64_MAX and next(iter(extra)) == "logPosition"):
                return EXTRA_LOG, packet, position, None, -1
    if type(extra) is dict and 1 <= len(extra) <= 3:
        keys = tuple(extra)
        captured = None
        if keys[-1] == "capturedTs" and len(keys) > 1:
            captured = extra["capturedTs"]
            keys = keys[:-1]
        values = [extra[key] for key in keys] + ([captured] if captured is not None else [])
        if all(type(v) is int and -(1 << 63) <= v < (1 << 63) for v in values):
            if keys == ("packet",):
                return EXTRA_PACKET, extra["packet"], 0, captured, -1
            if keys == ("logPosition", "packet"):
                return EXTRA_LOG, extra["packet"], extra["logPosition"], captured, -1
    others.append(extra)
    return EXTRA_OTHER, 0, 0, None, len(others) - 1


class _TablePlan:
    """What every record batch of one replay table shares: the schema, the dictionaries, and each
    entry's cells (fields text, payload, per-name values) as arrays to take rows from."""

    def __init__(self, columns: EventColumns, source: str, cluster_members: str | None,
                 metadata: Mapping[str, str] | None) -> None:
        self.columns = columns
        self._lengths: dict[Any, np.ndarray] = {}  # per text or binary array: its values' lengths, starts
        entries = columns.entries
        count = len(entries)
        rows = len(columns.entry)
        first_row = np.full(count, rows, dtype=np.int64)  # each entry's first row (``rows``: unused)
        np.minimum.at(first_row, columns.entry, np.arange(rows))
        used = first_row < rows
        # Each used entry's canonical fields (replay_file._canonical_fields) and their JSON text.
        canonical: list[dict[str, Any] | None] = [None] * count
        for number in np.flatnonzero(used).tolist():
            fields, payload, type_name = entries.fields[number], entries.payloads[number], entries.types[number]
            if payload is not None and fields:
                value = fields
            elif type_name in MESSAGE_CLASSES:
                value = Event(ts=0, node=0, dir="local", peer=None, channel="local", type=type_name, fields=fields,
                              payload=payload).message().to_fields()
            else:
                value = fields
            canonical[number] = value if type(value) is dict else dict(value)
        encode = replay_file._encode_object
        self.fields_text = pa.array([None if c is None else encode(c) for c in canonical], type=pa.string())
        self.payloads = pa.array(entries.payloads, type=pa.binary())
        # One array per field name, over the entries (a name's type from the values of used entries).
        names = sorted({name for c in canonical if c is not None for name in c if name not in replay_file.BASE_COLUMNS})
        self.name_arrays: dict[str, pa.Array] = {}
        # Fixed-width ones (int64, bool) are taken row by row as numpy arrays: each entry's value (0 where
        # null, as pyarrow leaves it) and whether it is there.
        self.fixed: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        #: Per name, the entries that have a value: a batch none of whose rows has one gets an all-null
        #: column made of shared zeros (`_nulls`), which is what ``take`` would make, without the take.
        self.valid: dict[str, np.ndarray] = {}
        #: Per name, those entries' numbers (see `_rare_cells`).
        self.valid_entries: dict[str, np.ndarray] = {}
        self._zeros: dict[int, pa.Buffer] = {}
        self._by_entry: _RowsOfEntries | None = None
        self._step = BATCH_ROWS  #: rows per batch (`batches`)
        self._batch_rows: dict[int, _RowsOfEntries] = {}  #: the rows of the batch being made and the next
        same_entries: dict[bytes, np.ndarray] = {}
        values_of: dict[str, list[Any]] = {name: [None] * count for name in names}
        for number, value in enumerate(canonical):
            for name, cell in value.items() if value is not None else ():
                column = values_of.get(name)
                if column is not None:
                    column[number] = cell
        for name in names:
            values = values_of.pop(name)
            self.valid[name] = np.array([v is not None for v in values], dtype=bool)
            # (One array for the names of the same entries, e.g. one message type's: a batch finds their rows once.)
            self.valid_entries[name] = same_entries.setdefault(self.valid[name].tobytes(),
                                                               np.flatnonzero(self.valid[name]))
            array = self.name_arrays[name] = replay_file._typed_arrays([values])[0]
            if pa.types.is_int64(array.type) or pa.types.is_boolean(array.type):
                kind = bool if pa.types.is_boolean(array.type) else np.int64
                self.fixed[name] = (np.array([0 if v is None else v for v in values], dtype=kind),
                                    np.array([v is not None for v in values], dtype=bool))
        # The dictionaries of dir, channel and type, in order of first appearance over the whole table, and
        # each one's numbers of the rows' values (a batch takes its codes through ``remaps``).
        self.dictionaries = {}
        self.remaps: dict[str, np.ndarray] = {}
        type_of_entry, type_names = _entry_type_codes(entries)
        positions = np.arange(rows)
        for column, names_of in (("dir", DIRECTIONS), ("channel", CHANNELS), ("type", type_names)):
            first = np.full(max(len(names_of), 1), rows, dtype=np.int64)  # each value's first row
            if column == "type":
                np.minimum.at(first, type_of_entry, first_row)
            else:
                np.minimum.at(first, getattr(columns, column), positions)
            present = np.flatnonzero(first < rows)
            order = present[np.argsort(first[present], kind="stable")]  # the values in order of first appearance
            remap = np.zeros(max(len(names_of), 1), dtype=np.int32)
            remap[order] = np.arange(len(order), dtype=np.int32)
            self.remaps[column] = remap[type_of_entry] if column == "type" else remap
            self.dictionaries[column] = pa.array([names_of[c] for c in order.tolist()], type=pa.string())
        del positions
        meta = {"recount.format": replay_file.FORMAT, "recount.formatVersion": str(replay_file.FORMAT_VERSION),
                "recount.source": source}
        if cluster_members:
            meta["clusterMembers"] = cluster_members
        if metadata:
            meta.update(metadata)
        self.metadata = meta
        self.schema = self._batch(0, min(len(columns), 1), last=True).schema  # (no bytes of later rows needed)

    def batches(self, rows: int) -> Iterator[pa.RecordBatch]:
        total = len(self.columns)
        if total == 0:
            yield self._batch(0, 0)
            return
        self._step = rows
        for start in range(0, total, rows):
            yield self._batch(start, min(total, start + rows))

    def _batch(self, start: int, end: int, last: bool | None = None) -> pa.RecordBatch:
        c = self.columns
        part = slice(start, end)
        entry = pa.array(c.entry[part], type=pa.int32())
        last = end >= len(c) if last is None else last
        peer = c.peer[part].copy()
        missing = ~c.has_peer[part]
        peer[missing] = 0
        arrays = {
            "seq": pa.array(np.arange(start, end, dtype=np.uint64), type=pa.uint64()),
            "ts": pa.array(c.ts[part], type=pa.int64()),
            "node": pa.array(c.node[part], type=pa.int32()),
            "dir": self._codes("dir", c.dir[part]),
            "channel": self._codes("channel", c.channel[part]),
            "type": self._codes("type", c.entry[part]),
            "peer": pa.array(peer, type=pa.int32(), mask=missing if missing.any() else None),
            "payload": self._entry_cells(self.payloads, entry, end, last),
            "fields": self._entry_cells(self.fields_text, entry, end, last),
            "extra": self._extra(start, end, last),
        }
        entry_rows = c.entry[part].astype(np.intp)  # (``take`` with native indices: twice as fast as ``[]``)
        rows_of = self._rows_of(start, end)
        for done in [at for at in self._batch_rows if at < start]:
            del self._batch_rows[done]
        for name, values in self.name_arrays.items():
            valid_entries = self.valid_entries[name]
            present = int(rows_of.counts.take(valid_entries).sum())  # rows with a value
            if not present and _nullable(values.type):
                arrays[name] = self._nulls(values.type, end - start)
                continue
            if present * 8 <= end - start and _nullable(values.type):  # a few rows: made from theirs alone
                arrays[name] = self._rare_cells(name, values, rows_of, valid_entries, end, last)
                continue
            fixed = self.fixed.get(name)
            if fixed is not None:
                arrays[name] = _fixed_cells(values.type, *fixed, entry_rows)
            else:
                cells = self._sparse_text(name, values, entry_rows, end, last) if pa.types.is_string(values.type) else None
                arrays[name] = cells if cells is not None else self._entry_cells(values, entry, end, last)
        batch = pa.RecordBatch.from_arrays(list(arrays.values()), names=list(arrays))
        return batch.replace_schema_metadata(self.metadata)

    def _rows_of(self, start: int, end: int) -> _RowsOfEntries:
        """The rows ``start`` to ``end`` (a batch) grouped by entry, kept for the batch (a batch before it
        may look into them for the bytes its text columns bring along, `_following_rare`)."""
        found = self._batch_rows.get(start)
        if found is None or found.count != end - start:
            found = self._batch_rows[start] = _RowsOfEntries(self.columns.entry[start:end].astype(np.intp),
                                                             len(self.columns.entries))
        return found

    def _codes(self, column: str, values: np.ndarray) -> pa.DictionaryArray:
        """A dictionary column's rows (``values``: the rows' direction, channel or entry numbers; every
        code is in its dictionary: not checked again)."""
        return pa.DictionaryArray.from_arrays(pa.array(self.remaps[column].take(values.astype(np.intp))),
                                              self.dictionaries[column], safe=False)

    def _nulls(self, kind: pa.DataType, count: int) -> pa.Array:
        """``count`` nulls of ``kind`` (int64, bool, text or binary), as ``take`` makes them: a validity
        bitmap of zeros, and zero values (int64, bool) or zero offsets and no bytes (text, binary), all
        slices of one buffer of zeros."""
        width = 8 * count if pa.types.is_int64(kind) else -(-count // 8) if pa.types.is_boolean(kind) else 4 * (count + 1)
        size = max(width, -(-count // 8))
        zeros = self._zeros.get(0)
        if zeros is None or zeros.size < size:
            zeros = self._zeros[0] = pa.py_buffer(np.zeros(max(size, 8 * BATCH_ROWS + 8), dtype=np.uint8))
        validity = zeros.slice(0, -(-count // 8))
        if pa.types.is_int64(kind) or pa.types.is_boolean(kind):
            return pa.Array.from_buffers(kind, count, [validity, zeros.slice(0, width)], null_count=count)
        return pa.Array.from_buffers(kind, count, [validity, zeros.slice(0, width), zeros.slice(0, 0)],
                                     null_count=count)

    def _rare_cells(self, name: str, values: pa.Array, rows_of: _RowsOfEntries, valid_entries: np.ndarray,
                    end: int, last: bool) -> pa.Array:
        """`_entry_cells` of a per-name column (int64, bool, text or binary) few of whose rows have a value,
        made from those rows alone: zeros (values, validity, lengths) elsewhere, as ``take`` leaves them;
        a text or binary column brings the bytes of the next rows that the IPC writer copies along (see
        `_following`)."""
        count = rows_of.count
        rows, entries, validity = rows_of.rows(valid_entries)
        nulls = count - len(rows)
        kind = values.type
        fixed = self.fixed.get(name)
        if fixed is not None:
            taken = np.zeros(count, dtype=fixed[0].dtype)
            taken[rows] = fixed[0].take(entries)
            data = pa.py_buffer(np.packbits(taken, bitorder="little") if pa.types.is_boolean(kind) else taken)
            return pa.Array.from_buffers(kind, count, [validity, data], null_count=nulls)
        lengths = self._entry_lengths(values)
        sizes = lengths.take(entries)
        total = int(sizes.sum())
        # Each row's end offset: constant between rows with a value (0 up to the first, the total after the last).
        ends = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(sizes, out=ends[1:])
        runs = np.diff(rows, prepend=-1, append=count)
        offsets = np.repeat(ends.astype(np.int32), runs)
        data_buffer = values.buffers()[2]
        blob = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
        starts = self._entry_starts(values)
        pieces = [_gather_values(blob, starts.take(entries), sizes, total)]
        wanted = 0 if last else (-total) % 64
        if wanted:
            pieces += self._following_rare(valid_entries, lengths, blob, starts, end, wanted)
        data = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
        return pa.Array.from_buffers(kind, count, [validity, pa.py_buffer(offsets), pa.py_buffer(data)],
                                     null_count=nulls)

    def _following_rare(self, valid_entries: np.ndarray, lengths: np.ndarray, blob: np.ndarray,
                        starts: np.ndarray, end: int, wanted: int) -> list[np.ndarray]:
        """`_following_bytes` of a per-name column few rows have (entries ``valid_entries``): found among
        the rows of the next batches that have it, which those batches use again (`_rows_of`); where a
        batch has it in many rows, the rows are looked through (`_following_bytes`)."""
        pieces = []
        total = len(self.columns)
        while wanted > 0 and end < total:
            stop = min(total, end + self._step)
            rows_of = self._rows_of(end, stop)
            if int(rows_of.counts.take(valid_entries).sum()) * 8 > stop - end:  # (as `_batch` decides)
                return pieces + self._following_bytes(lengths, blob, starts, end, wanted)
            entries = rows_of.rows(valid_entries)[1]
            sizes = lengths.take(entries)
            having = np.flatnonzero(sizes)[:wanted]  # (each has a byte at least)
            if len(having):
                sizes = sizes.take(having)
                pieces.append(_gather_values(blob, starts.take(entries.take(having)), sizes, int(sizes.sum()))[:wanted])
                wanted -= len(pieces[-1])
            end = stop
        return pieces

    def _following_bytes(self, lengths: np.ndarray, blob: np.ndarray, starts: np.ndarray, end: int,
                         wanted: int) -> list[np.ndarray]:
        """The first ``wanted`` bytes of the values (one per entry: ``lengths`` bytes at ``starts`` in
        ``blob``) of the rows after ``end``, in pieces: looked for in the next rows, then, for a value that
        few rows have, among the rows that have bytes (`_rows_with_bytes`)."""
        entries, total, row, step = self.columns.entry, len(self.columns), end, 64
        pieces = []
        while wanted > 0 and row < total:
            if step > 64:
                index = self._rows_with_bytes(lengths)
                if index is not None:
                    after = index[np.searchsorted(index, row):][:wanted]  # (each has a byte at least)
                    following = entries.take(after).astype(np.intp)
                    sizes = lengths.take(following)
                    if len(after):
                        pieces.append(_gather_values(blob, starts.take(following), sizes, int(sizes.sum()))[:wanted])
                    return pieces
            following = entries[row:row + step].astype(np.intp)
            following_lengths = lengths.take(following)
            found = int(following_lengths.sum())
            if found:
                pieces.append(_gather_bytes(blob, starts, following, following_lengths, found)[:wanted])
                wanted -= min(found, wanted)
            row += step
            step *= 4
        return pieces

    def _rows_with_bytes(self, lengths: np.ndarray) -> np.ndarray | None:
        """The rows of the table (increasing) whose value (``lengths`` bytes, one per entry) has bytes;
        None when they are more than an eighth of the rows (the next rows are then looked through)."""
        key = ("rows", id(lengths))
        if key in self._lengths:
            return self._lengths[key]
        if self._by_entry is None:  # the table's rows by entry, each entry's in row order
            entries = self.columns.entry
            small = len(self.columns.entries) <= 1 << 16
            self._by_entry = _RowsOfEntries(entries.astype(np.uint16) if small else entries.astype(np.intp),
                                            len(self.columns.entries))
        having = np.flatnonzero(lengths)
        index = None
        if int(self._by_entry.counts.take(having).sum()) * 8 <= len(self.columns):
            index = self._by_entry._rows(having)[0]
        self._lengths[key] = index
        return index

    def _sparse_text(self, name: str, values: pa.Array, rows: np.ndarray, end: int, last: bool) -> pa.Array | None:
        """`_entry_cells` of a text column few of whose rows have bytes (most per-name columns: a name
        belongs to a few message types), made with numpy rather than ``take``: the rows' offsets, their
        bytes, and the bytes of the rows after them the IPC writer copies along (`_following`).  None
        where the rows hold many bytes (``take`` is then the quicker)."""
        lengths = self._entry_lengths(values)
        count = len(rows)
        row_lengths = lengths.take(rows)
        offsets = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(row_lengths, out=offsets[1:])
        used = int(offsets[-1])
        if used > 4 * count:
            return None
        data_buffer = values.buffers()[2]
        blob = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
        starts = self._entry_starts(values)
        pieces = [_gather_bytes(blob, starts, rows, row_lengths, used)]
        wanted = 0 if last else (-used) % 64
        if wanted:  # the bytes after these rows', up to the next multiple of 64
            pieces += self._following_bytes(lengths, blob, starts, end, wanted)
        present = self.valid[name].take(rows)
        nulls = count - int(np.count_nonzero(present))
        validity = pa.py_buffer(np.packbits(present, bitorder="little")) if nulls else None
        data = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
        return pa.Array.from_buffers(pa.string(), count, [validity, pa.py_buffer(offsets.astype(np.int32)),
                                                          pa.py_buffer(data)], null_count=nulls)

    def _entry_starts(self, values: pa.Array) -> np.ndarray:
        """Where each value of a text or binary array starts in its data buffer."""
        key = ("starts", id(values))
        cached = self._lengths.get(key)
        if cached is None:
            offsets = np.frombuffer(values.buffers()[1], dtype=np.int32, count=len(values) + 1,
                                    offset=values.offset * 4)
            cached = self._lengths[key] = offsets[:-1].astype(np.int64)
        return cached

    def _entry_cells(self, values: pa.Array, entry: pa.Array, end: int, last: bool) -> pa.Array:
        """``values`` (one per entry) for these rows; a text or binary column also brings the bytes of
        the rows after them that the IPC writer copies along (see `_following`)."""
        if last or not (pa.types.is_string(values.type) or pa.types.is_binary(values.type)):
            return _take(values, entry)
        lengths = self._entry_lengths(values)
        rows = self.columns.entry
        start = end - len(entry)
        more = _rows_to_cover(lambda a, b: lengths[rows[a:b]], int(lengths[rows[start:end]].sum()), end, len(rows))
        if more is None:
            return _following(_take(values, entry), lambda r: lengths[rows[r]],
                              lambda r: _take(values, pa.array(rows[r], type=pa.int32())), end, len(rows))
        return _take(values, pa.array(rows[start:end + more], type=pa.int32())).slice(0, len(entry))

    def _entry_lengths(self, values: pa.Array) -> np.ndarray:
        cached = self._lengths.get(id(values))
        if cached is None:
            cached = self._lengths[id(values)] = _value_lengths(values)
        return cached

    def _extra(self, start: int, end: int, last: bool = True) -> pa.Array:
        """The extra column's JSON text (`replay_file._encode_extra`'s, written from the columns)."""
        if last:
            return self._extra_texts(start, end)
        total = len(self.columns)
        texts = self._extra_texts(start, min(total, end + NEAR_ROWS[0]))  # a few rows more: usually enough
        lengths = _value_lengths(texts)
        own = int(lengths[:end - start].sum())
        if end + NEAR_ROWS[0] >= total or int(lengths[end - start:].sum()) >= (-own) % 64:
            return texts.slice(0, end - start)
        more = _rows_to_cover(lambda a, b: _value_lengths(self._extra_texts(a, b)), own, end, total)
        if more is None:
            return _following(self._extra_texts(start, end),
                              lambda r: _value_lengths(self._extra_texts(int(r[0]), int(r[-1]) + 1)),
                              lambda r: self._extra_texts(int(r[0]), int(r[-1]) + 1), end, len(self.columns))
        return self._extra_texts(start, end + more).slice(0, end - start)

    def _extra_texts(self, start: int, end: int) -> pa.Array:
        """Rows ``start`` to ``end`` of the extra column: the usual shapes composed as bytes with array
        operations (`_Texts`), any other mapping encoded on its own."""
        c = self.columns
        kinds = c.extra_kind[start:end]
        texts = _Texts(end - start)
        packets, positions = c.packet[start:end], c.log_position[start:end]
        captured, captured_ts = c.captured[start:end], c.captured_ts[start:end]
        for kind in (EXTRA_PACKET, EXTRA_LOG):
            for late in (False, True):
                rows = np.flatnonzero((kinds == kind) & (captured == late))
                if not len(rows):
                    continue
                parts: list[bytes | np.ndarray] = (
                    [b'{"packet":', packets[rows]] if kind == EXTRA_PACKET
                    else [b'{"logPosition":', positions[rows], b',"packet":', packets[rows]])
                if late:
                    parts += [b',"capturedTs":', captured_ts[rows]]
                texts.set(rows, parts + [b"}"])
        for row in np.flatnonzero(kinds == EXTRA_OTHER).tolist():
            texts.set(np.array([row]), [replay_file._encode_extra(c.others[c.extra_ref[start + row]]).encode()])
        return texts.array()


class _Texts:
    """A text column built from rows of pieces (bytes, or int64 arrays written in decimal as ``str``
    writes them), with array operations rather than a string per row; rows never set are null."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.groups: list[tuple[np.ndarray, list]] = []
        self.lengths = np.zeros(count, dtype=np.int64)
        self.valid = np.zeros(count, dtype=bool)

    def set(self, rows: np.ndarray, parts: list) -> None:
        lengths = np.zeros(len(rows), dtype=np.int64)
        pieces = []  # each part with its widths (a number's, per row)
        for part in parts:
            widths = len(part) if isinstance(part, bytes) else _decimal_widths(part)
            lengths += widths
            pieces.append((part, widths))
        self.lengths[rows] = lengths
        self.valid[rows] = True
        self.groups.append((rows, pieces))

    def array(self) -> pa.Array:
        offsets = np.zeros(self.count + 1, dtype=np.int64)
        np.cumsum(self.lengths, out=offsets[1:])
        data = np.empty(int(offsets[-1]), dtype=np.uint8)
        for rows, pieces in self.groups:
            starts, at = [], offsets[rows]
            for _, widths in pieces:
                starts.append(at)
                at = at + widths
            # The numbers first: one may be written as a block of digits whose leading zeros fall on the
            # end of the text before it (`_write_decimal`), which is written after.
            room = 0
            for (part, widths), start in zip(pieces, starts, strict=True):
                if not isinstance(part, bytes):
                    _write_decimal(data, start, part, widths, room=room)
                room = len(part) if isinstance(part, bytes) else 0
            for (part, _), start in zip(pieces, starts, strict=True):
                if isinstance(part, bytes):
                    _write_bytes(data, start, part)
        nulls = self.count - int(np.count_nonzero(self.valid))
        validity = pa.py_buffer(np.packbits(self.valid, bitorder="little")) if nulls else None
        return pa.Array.from_buffers(pa.string(), self.count,
                                     [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)],
                                     null_count=nulls)


_POWERS = 10 ** np.arange(19, dtype=np.int64)


def _decimal_widths(values: np.ndarray) -> np.ndarray:
    """How many characters ``str`` writes for each int64 value."""
    magnitude = np.abs(values.astype(np.int64, copy=False))
    widths = np.searchsorted(_POWERS, magnitude, side="right").astype(np.int64)
    widths = np.maximum(widths, 1)
    widths[values == -(1 << 63)] = 19  # its magnitude does not fit: 9223372036854775808 has 19 digits
    return widths + (values < 0)


def _write_bytes(data: np.ndarray, at: np.ndarray, part: bytes) -> None:
    """Write ``part`` at each of the positions ``at`` in ``data``: all of it at once (a window of
    ``data`` as wide as it, `_windows`), not a byte position at a time."""
    if len(part) == 1 or len(part) > len(data):
        for k, byte in enumerate(part):
            data[at + k] = byte
        return
    _windows(data, len(part))[at] = np.frombuffer(part, dtype=np.dtype((np.void, len(part))))[0]


def _windows(data: np.ndarray, width: int) -> np.ndarray:
    """The ``width`` bytes at every offset of ``data``, each one value (a view)."""
    return np.ndarray((len(data) - width + 1,), dtype=np.dtype((np.void, width)), buffer=data, strides=(1,))


#: The four digits of each number below 10**4 as one little-endian word: its bytes in writing order.
_DIGITS4 = np.array([int.from_bytes(b"%04d" % number, "little") for number in range(10_000)], dtype="<u4")


def _write_decimal(data: np.ndarray, at: np.ndarray, values: np.ndarray,
                   widths: np.ndarray | None = None, room: int = 0) -> np.ndarray:
    """Write each value in decimal at its position in ``data`` (``widths``: `_decimal_widths`, if known);
    the positions after them.  With ``room`` >= 7 (there are at least that many bytes before each
    position, to be written after this), values from 0 to 99,999,999 are written as eight digits at
    once, their leading zeros on those bytes."""
    values = values.astype(np.int64, copy=False)
    widths = _decimal_widths(values) if widths is None else widths
    digits_end = at + widths
    if not len(values):
        return digits_end
    if room >= 7 and len(data) >= 8 and int(values.min()) >= 0 and int(values.max()) < 10 ** 8:
        low = values.astype(np.uint32)
        high = low // np.uint32(10_000)
        low -= high * np.uint32(10_000)
        blocks = np.empty((len(values), 2), dtype="<u4")
        blocks[:, 0] = _DIGITS4.take(high)
        blocks[:, 1] = _DIGITS4.take(low)
        _windows(data, 8)[digits_end - 8] = blocks.view(np.dtype((np.void, 8))).reshape(-1)
        return digits_end
    negative = values < 0
    data[at[negative]] = ord("-")
    remaining = np.abs(values).astype(np.uint64)  # -2**63 wraps to 2**63, its magnitude, as uint64
    digits = widths - negative
    if int(digits.max()) <= 9:  # magnitudes below 10**9: 32-bit division, twice as quick as 64-bit
        remaining = remaining.astype(np.uint32)
    ten = remaining.dtype.type(10)
    every = int(digits.min())  # places every value has a digit in: written without picking rows
    position = digits_end - 1
    for place in range(int(digits.max())):
        if place < every:
            quotient = remaining // ten
            data[position] = (remaining - quotient * ten).astype(np.uint8) + ord("0")
            remaining = quotient
        else:
            has = digits > place
            data[position[has]] = (remaining[has] % ten).astype(np.uint8) + ord("0")
            remaining //= ten
        position -= 1
    return digits_end


def _fixed_cells(kind: pa.DataType, values: np.ndarray, valid: np.ndarray, rows: np.ndarray) -> pa.Array:
    """``take`` of an int64 or bool column (one value per entry) by entry numbers, made with numpy."""
    present = valid.take(rows)
    nulls = len(rows) - int(np.count_nonzero(present))
    validity = pa.py_buffer(np.packbits(present, bitorder="little")) if nulls else None
    taken = values.take(rows)
    data = pa.py_buffer(np.packbits(taken, bitorder="little") if pa.types.is_boolean(kind) else taken)
    return pa.Array.from_buffers(kind, len(rows), [validity, data], null_count=nulls)


def _gather_bytes(blob: np.ndarray | None, starts: np.ndarray, rows: np.ndarray, lengths: np.ndarray,
                  total: int) -> np.ndarray:
    """The bytes of entries ``rows`` (``lengths`` each, ``total`` in all; ``starts`` into ``blob``), one
    after the other."""
    if not total:
        return np.zeros(0, dtype=np.uint8)
    has = np.flatnonzero(lengths)
    sizes = lengths.take(has)
    firsts = starts.take(rows.take(has))
    # Each byte's place in ``blob``: its value's start, plus its place in the output less the value's.
    before = np.zeros(len(has), dtype=np.int64)
    np.cumsum(sizes[:-1], out=before[1:])
    where = np.repeat(firsts - before, sizes) + np.arange(total, dtype=np.int64)
    return blob.take(where)


class _RowsOfEntries:
    """Rows (of a batch, or of the whole table) grouped by their entry (``entries``: each row's, of
    ``entry_count``)."""

    def __init__(self, entries: np.ndarray, entry_count: int) -> None:
        self.entries = entries
        self.count = len(entries)
        self.counts = np.bincount(entries, minlength=entry_count)  #: rows per entry
        self._order: np.ndarray | None = None
        self._found: dict[int, tuple[np.ndarray, np.ndarray, pa.Buffer]] = {}

    def rows(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray, pa.Buffer]:
        """The rows whose entry is one of ``wanted`` (increasing), their entries, and a validity bitmap
        of them (once per array ``wanted``: the columns of the same entries share them)."""
        found = self._found.get(id(wanted))
        if found is None:
            rows, entries = self._rows(wanted)
            validity = np.zeros(self.count, dtype=bool)
            validity[rows] = True
            found = self._found[id(wanted)] = (rows, entries, pa.py_buffer(np.packbits(validity, bitorder="little")))
        return found

    def _rows(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._order is None:  # rows by entry, each entry's in row order (a radix sort when entries are few)
            small = len(self.counts) <= 1 << 16
            self._order = np.argsort(self.entries.astype(np.uint16, copy=False) if small else self.entries,
                                     kind="stable")
            self._first = np.cumsum(self.counts) - self.counts
        counts = self.counts.take(wanted)
        wanted, counts = wanted[counts > 0], counts[counts > 0]
        total = int(counts.sum())
        before = np.cumsum(counts) - counts
        rows = self._order.take(np.repeat(self._first.take(wanted) - before, counts) + np.arange(total))
        entries = np.repeat(wanted, counts)
        order = np.argsort(rows, kind="stable")
        return rows.take(order), entries.take(order)


def _gather_values(blob: np.ndarray, firsts: np.ndarray, sizes: np.ndarray, total: int) -> np.ndarray:
    """The values of ``sizes`` bytes (``total`` in all) starting at ``firsts`` in ``blob``, one after the other."""
    if not total:
        return np.zeros(0, dtype=np.uint8)
    sizes = sizes.astype(np.int64)
    before = np.zeros(len(sizes), dtype=np.int64)
    np.cumsum(sizes[:-1], out=before[1:])
    # Each byte's place in ``blob``: its value's start, plus its place in the output less the value's.
    return blob.take(np.repeat(firsts - before, sizes) + np.arange(total, dtype=np.int64))


def _nullable(kind: pa.DataType) -> bool:
    """The types `_TablePlan._nulls` makes."""
    return (pa.types.is_int64(kind) or pa.types.is_boolean(kind) or pa.types.is_string(kind)
            or pa.types.is_binary(kind))


def _take(values: pa.Array, rows: pa.Array) -> pa.Array:
    """``values.take(rows)``, calling the kernel directly."""
    return _call_function("take", [values, rows])


def _value_lengths(values: pa.Array) -> np.ndarray:
    """Each value's length in bytes (0 for a null) of a text or binary array."""
    if not len(values):
        return np.zeros(0, dtype=np.int64)
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32, count=len(values) + 1, offset=values.offset * 4)
    return np.diff(offsets).astype(np.int64)


def _value_range(cells: pa.Array) -> tuple[int, int]:
    """Where a text or binary array's values start and end in its data buffer."""
    if not len(cells):
        return 0, 0
    offsets = np.frombuffer(cells.buffers()[1], dtype=np.int32, count=len(cells) + 1, offset=cells.offset * 4)
    return int(offsets[0]), int(offsets[-1])


def _rows_to_cover(lengths_of, used: int, end: int, total: int) -> int | None:
    """How many rows after ``end`` a batch's text column must be made with (then sliced off again), for
    its value buffer to hold the bytes `replay_file.write_table`'s slices bring along (see `_following`):
    enough rows for the bytes up to the next multiple of 64 after ``used``, or every row to the end.
    None when those bytes lie too far on (rows of nothing in between): `_following` copies them."""
    wanted = (-used) % 64
    if not wanted:
        return 0
    found = 0
    for window in NEAR_ROWS:
        stop = min(total, end + window)
        lengths = lengths_of(end, stop)
        covered = np.cumsum(lengths) + found if len(lengths) else lengths
        if len(covered) and covered[-1] >= wanted:
            return int(np.searchsorted(covered, wanted, side="left")) + 1
        if stop >= total:
            return total - end
        found = 0  # the next window starts again from ``end``
    return None


def _following(cells: pa.Array, lengths_of, cells_of, end: int, total: int) -> pa.Array:
    """``cells`` (rows up to ``end`` of a text or binary column) with the bytes of the next rows after
    its own, up to the next multiple of 64.

    `replay_file.write_table` writes a whole table's column in slices of `BATCH_ROWS` rows, and
    Arrow's IPC writer copies a slice's value bytes rounded up to 64 bytes (less only at the end of
    the column's buffer): a slice brings the first bytes of the next rows along.  Record batches
    written one by one must bring the same bytes to be the same file.
    """
    own = cells.buffers()[2]
    start, stop = _value_range(cells)
    used = stop - start
    wanted = (-used) % 64
    if not wanted:
        return cells
    pieces: list[bytes] = []
    found = 0
    row = end
    step = 64
    while found < wanted and row < total:
        rows = np.arange(row, min(total, row + step))
        lengths = lengths_of(rows)
        if lengths.sum():
            more = cells_of(rows)
            data = more.buffers()[2]
            first, last = _value_range(more)
            size = last - first
            pieces.append(data.to_pybytes()[first:last])
            found += size
        row += step
        step *= 4
    if not found:
        return cells
    data = (own.to_pybytes()[start:stop] if own is not None else b"") + b"".join(pieces)[:wanted]
    validity, offsets = cells.buffers()[0], cells.buffers()[1]
    if start or cells.offset:
        raise AssertionError("a freshly taken column starts at offset 0")
    return pa.Array.from_buffers(cells.type, len(cells), [validity, offsets, pa.py_buffer(data)],
                                 null_count=cells.null_count)


def _entry_type_codes(entries: Entries) -> tuple[np.ndarray, list[str]]:
    names: list[str] = []
    number: dict[str, int] = {}
    codes = np.zeros(len(entries), dtype=np.int32)
    for k, name in enumerate(entries.types):
        code = number.get(name)
        if code is None:
            code = number[name] = len(names)
            names.append(name)
        codes[k] = code
    return codes, names
