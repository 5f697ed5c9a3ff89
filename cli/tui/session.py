"""The read-only session the TUI's widgets read: one replay, indexed, seekable to any event.

Theory of operation
-------------------
`ReplaySource` reads a replay file from its memory map as it is needed (`_FileRows`): at open, only
the columns every screen needs (``ts``, ``node``, ``dir``, ``channel``, ``type``, ``peer``, ``seq``),
as compact numpy arrays in replay order (the order of `engine.replay`: by ``ts``, ties in file
order; a file already in that order needs no permutation); an event's fields and payload when
something asks for that event, a block of `ReplaySource.block_size` events at a time, from the
record batch that holds it (a few batches and blocks are kept).  Opening a million-event file costs
a few column reads and no decoding.

The index is one pass of the node replay (`engine.replay.NodeReplay`, the same code as `recount
replay`) over every event, run by `build_index` in a background worker while the screen is already
usable, and paused while the screen re-executes something of its own.  It keeps, per event, how
many trace records the event produced; the records that tell the story (state, role, election,
node-state.dat and recording.log writes with their causes, significant sends, divergences,
invariant violations), the member lanes for the timeline, per member the events where it changed
something it records, and an engine checkpoint every `block_size` events: the comparison-free
replay (`NodeReplay.comparing_nothing`) pickled and compressed, the big immutable parts it shares
with the others (log chunks, node-state buffers) referred to, not copied (`SharedParts`): a few
kilobytes each.  Until it is done, `pending` says how far it got, and every answer that depends on
it says so.

Going to event ``i`` restores the nearest checkpoint at or before it and re-executes the events in
between (at most one block): stepping back is re-execution, never an approximation.  The state
"after event ``i``" is each member's `MemberView` once events ``0..i`` have been fed.  A live
stepper stays at the last position asked for, so stepping forward costs one event.  Records of
periodic sends are not kept by the index; the event list gets them by re-executing the block it
shows (the same exact re-execution), so memory stays proportional to the story, not the capture.
`last_change` finds where a member's value last changed, and why: from the index for the values
only its records change (`RECORDED_FIELDS`), by re-execution for the others.

Threads: the index worker owns its own replay; the screen's seeks (one at a time: `moment` holds a
lock), record blocks and breakpoint searches restore their own copies from checkpoints, which are
immutable bytes.  The block caches are locked.  Nothing here draws or prints; the widgets render
what it returns.
"""

from __future__ import annotations

import bisect
import difflib
import gc
import io
import pickle
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from cli.times import duration, relative_time, wall_time
from engine.model.view import MemberView
from engine.replay import (
    DEFAULT_TOLERANCE_NS,
    MODELS,
    OBSERVATIONS,
    PERIODIC,
    SIGNIFICANT,
    NodeReplay,
    RecordingFacts,
    UnknownModelError,
    flags_for,
    scan,
)
from formats import replay_file
from formats.describe import describe_event, describe_record
from formats.errors import DecodeError
from formats.events import Event

MS = 1_000_000
#: Events per block: an engine checkpoint every this many events (a seek re-executes fewer), and the
#: unit the file is decoded in and records are kept in.
DEFAULT_BLOCK_SIZE = 200
#: Re-executing up to this many events is done on the spot (well under a millisecond); more goes to a
#: worker, with "seeking…" on screen meanwhile.
INLINE_STEPS = 16
#: Stepping forward past a checkpoint costs less than restoring it, up to this many events.
RESTORE_AFTER = 64
#: Moments (member state after an event) kept: those around the cursor, worked out on one re-execution.
MOMENTS_KEPT = 1024
#: The records of this many of the events the screen's stepper last went through are kept.
STEPPED_KEPT = 4096

#: Record kinds that change what a member's lane shows.
LANE_KINDS = frozenset({"state", "role", "moduleState", "election"})
#: Local events that start or end a member's process.
LIFECYCLE = frozenset({"MemberStart", "MemberStop", "MemberCrash", "End"})
#: Record kinds that are problems, marked on the timeline.
PROBLEM_KINDS = frozenset({"divergence", "invariant"})
#: Record kinds that carry their cause (`engine.model.outputs.Cause`): a member's changes.
CAUSED_KINDS = frozenset({"state", "role", "moduleState", "election", "nodeState", "markFile", "recordingLog"})
#: A member's values that change only at an event where it has a record of `CAUSED_KINDS` or a lifecycle
#: event (what a member view shows of its election, role, terms and files; `tests/test_tui_session.py`
#: holds every sample and real capture to it): their last change is found from the index, not by a scan.
RECORDED_FIELDS = frozenset(
    {
        "electionState",
        "role",
        "moduleState",
        "isRunning",
        "leadershipTermId",
        "logLeadershipTermId",
        "candidateTermId",
        "leaderMemberId",
        "nodeState",
        "recordingLog",
        "logRecordingId",
        "logSessionId",
        "electionCount",
        "catchupJoinPosition",
    }
)
#: Which records say why a recorded field changed.
FIELD_RECORDS = {
    "electionState": ("state",),
    "role": ("role",),
    "moduleState": ("moduleState",),
    "nodeState": ("nodeState", "markFile"),
    "recordingLog": ("recordingLog",),
    "logRecordingId": ("recordingLog",),
    "electionCount": ("election",),
}


def cause_of(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """What caused the change ``record`` reports (`engine.model.outputs.Cause` as a mapping), or None: a
    divergence's ``cause`` is not one but its attribution (``model``, ``capture``), shown by its description."""
    cause = record.get("cause")
    return cause if isinstance(cause, Mapping) and cause else None


def format_duration(ns: int) -> str:
    """``15.064s``: a duration as `recount replay` prints times (`cli.times`)."""
    return duration(ns)


class SessionError(Exception):
    """The session cannot do what was asked (outside the replay, not indexed yet, ...); one line."""


class SeekCancelled(Exception):
    """A re-execution was given up because its answer is no longer wanted (the cursor moved on)."""


# -- the replay file ---------------------------------------------------------------------------------------


def _codes(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """(int codes, names) of a string column, dictionary-encoded or not."""
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if isinstance(array, pa.ChunkedArray):  # an empty table
        array = pa.array([], type=pa.dictionary(pa.int32(), pa.string()))
    names = [str(name) for name in array.dictionary.to_pylist()]
    indices = array.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    return indices.astype(np.int16 if len(names) < 2**15 else np.int32), names


def _ints(column: pa.ChunkedArray, null: int = -1, dtype: Any = np.int64) -> np.ndarray:
    return column.fill_null(null).to_numpy().astype(dtype, copy=False)


#: The columns every screen needs for every event (read in full when a replay opens).
INDEX_COLUMNS = ("seq", "ts", "node", "dir", "channel", "type", "peer")
#: The columns an event is decoded from (read a record batch at a time, when an event is asked for).
EVENT_COLUMNS = ("seq", "ts", "node", "dir", "channel", "type", "peer", "payload", "fields", "extra")


class _TableRows:
    """Rows of a replay table held in memory (a capture converted on the spot, a stream, tests)."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.column_names = table.column_names

    def columns(self, names: Sequence[str]) -> pa.Table:
        return self.table.select(list(names))

    def column(self, name: str) -> pa.ChunkedArray:
        return self.table.column(name)

    def rows(self, ordered_rows: np.ndarray) -> pa.Table:
        low, high = int(ordered_rows[0]), int(ordered_rows[-1])
        if high - low + 1 == len(ordered_rows):
            return self.table.slice(low, high - low + 1)
        return self.table.take(pa.array(ordered_rows))


class _FileRows:
    """Rows of a replay file, read from its memory map only when asked for, and checked then.

    Opening reads the schema and `INDEX_COLUMNS` of every record batch (validated in full, as
    `formats.replay_file.read_table` validates a whole file); an event's other columns are read (and
    validated) a record batch at a time when one of its events is asked for, and a few such batches are
    kept.  A compressed file is therefore never decompressed whole, and an uncompressed one stays in
    the page cache rather than in the process."""

    CACHED_BATCHES = 8

    def __init__(self, source: pa.NativeFile, name: str) -> None:
        self.source = source
        self.name = name
        reader = ipc.open_file(source)
        self.schema = reader.schema
        self.column_names = self.schema.names
        self.count = reader.num_record_batches
        replay_file.check_names(self.schema, name=name)
        replay_file.check_metadata(self.schema, name=name)
        replay_file.check_columns(self.schema, name=name)
        base = self.columns(INDEX_COLUMNS)
        sizes = [batch.num_rows for batch in base.to_batches()] if base.num_rows else []
        self.base = base
        self.offsets = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))) if sizes else np.zeros(1, np.int64)
        wanted = [n for n in EVENT_COLUMNS if n in self.column_names]
        if "fields" not in self.column_names:  # another tool's file: fields come from the per-name columns
            wanted = list(self.column_names)
        self._event_fields = sorted(self.schema.get_field_index(n) for n in wanted)
        self._batches: OrderedDict[int, pa.RecordBatch] = OrderedDict()
        self._lock = threading.Lock()

    def _reader(self, fields: list[int]) -> Any:
        return ipc.open_file(self.source, options=ipc.IpcReadOptions(included_fields=fields, use_threads=False))

    def columns(self, names: Sequence[str]) -> pa.Table:
        """``names`` of every record batch, validated."""
        present = [n for n in names if n in self.column_names]
        fields = sorted(self.schema.get_field_index(n) for n in present)
        try:
            reader = self._reader(fields)
            batches = [reader.get_batch(i) for i in range(self.count)]
        except replay_file.ARROW_ERRORS as error:
            raise DecodeError(f"cannot read columns {', '.join(present)} ({replay_file.one_line(error)})",
                              source=self.name) from None
        for number, batch in enumerate(batches):
            replay_file.validate_batch(batch, name=self.name, number=number)
        schema = pa.schema([self.schema.field(i) for i in fields], metadata=self.schema.metadata)
        return pa.Table.from_batches(batches, schema=schema)

    def column(self, name: str) -> pa.ChunkedArray:
        return self.columns([name]).column(name)

    def _batch(self, number: int) -> pa.RecordBatch:
        with self._lock:
            batch = self._batches.get(number)
            if batch is not None:
                self._batches.move_to_end(number)
                return batch
        try:
            batch = self._reader(self._event_fields).get_batch(number)
        except replay_file.ARROW_ERRORS as error:
            raise DecodeError(f"record batch {number} cannot be read ({replay_file.one_line(error)})",
                              source=self.name) from None
        replay_file.validate_batch(batch, name=self.name, number=number)
        with self._lock:
            self._batches[number] = batch
            while len(self._batches) > self.CACHED_BATCHES:
                self._batches.popitem(last=False)
        return batch

    def rows(self, ordered_rows: np.ndarray) -> pa.Table:
        numbers = np.searchsorted(self.offsets, ordered_rows, side="right") - 1
        parts = []
        for number in np.unique(numbers).tolist():
            batch = self._batch(number)
            within = ordered_rows[numbers == number] - int(self.offsets[number])
            low, high = int(within[0]), int(within[-1])
            if high - low + 1 == len(within):
                parts.append(batch.slice(low, high - low + 1))
            else:
                parts.append(batch.take(pa.array(within)))
        return pa.Table.from_batches(parts)


class ReplaySource:
    """A replay, in replay order, its events decoded a block at a time on demand.

    Per event it holds only the few columns every screen needs, as compact numpy arrays (`INDEX_COLUMNS`:
    ts and seq as int64, node and peer int32, dir, channel and type as int16 codes); a replay file is
    read from its memory map a record batch at a time as events are asked for (`_FileRows`).  Replay
    order is the order of `engine.replay`: by ``ts``, ties in file order (a stable sort); a file already
    in that order (what `recount convert` writes) needs no permutation at all.
    """

    def __init__(
        self,
        table: pa.Table | None = None,
        *,
        name: str,
        refs: Sequence[Any] | None = None,
        ref_kind: str = "seq",
        block_size: int = DEFAULT_BLOCK_SIZE,
        rows: _TableRows | _FileRows | None = None,
    ) -> None:
        if rows is None:
            assert table is not None
            metadata = replay_file.check_metadata(table.schema, name=name)
            rows = _TableRows(table)
            base = table
        else:
            metadata = replay_file.check_metadata(rows.schema, name=name)
            base = rows.base
        self._rows = rows
        self.name = name
        self.cluster_members = metadata.cluster_members
        self.block_size = block_size
        self.ref_kind = ref_kind
        rows_ts = _ints(base.column("ts"), 0)
        seq_rows = _ints(base.column("seq"), 0)
        if len(seq_rows) > 1:
            bad = np.flatnonzero(np.diff(seq_rows) <= 0)
            if len(bad):
                raise DecodeError(f"seq is not strictly increasing at row {int(bad[0]) + 1}", source=name)
        self.seq_rows = seq_rows
        in_order = len(rows_ts) < 2 or bool(np.all(rows_ts[1:] >= rows_ts[:-1]))
        #: position (replay order) -> row, and back; None when the file is in replay order already.
        self.order: np.ndarray | None = None
        self.row_position: np.ndarray | None = None
        if not in_order:
            index_type = np.int32 if len(rows_ts) < 2**31 else np.int64
            self.order = np.argsort(rows_ts, kind="stable").astype(index_type)
            self.row_position = np.empty_like(self.order)
            self.row_position[self.order] = np.arange(len(self.order), dtype=index_type)
        self.ts = self._in_order(rows_ts)
        self.node = self._in_order(_ints(base.column("node"), -1, np.int32))
        self.peer = self._in_order(_ints(base.column("peer"), -1, np.int32))
        self.seq = self._in_order(seq_rows)
        dir_codes, self.dir_names = _codes(base.column("dir"))
        channel_codes, self.channel_names = _codes(base.column("channel"))
        type_codes, self.type_names = _codes(base.column("type"))
        self.dir = self._in_order(dir_codes)
        self.channel = self._in_order(channel_codes)
        self.type = self._in_order(type_codes)
        self._refs = list(refs) if refs is not None else None
        self.members = sorted({int(n) for n in np.unique(self.node)})
        #: Times are shown from the first event, as `recount replay` shows them (``+ms``).
        self.origin = int(self.ts[0]) if len(self.ts) else 0
        #: Show times as UTC instead of from the first event (the TUI's ``w`` key).
        self.wall_clock = False
        self._heartbeats: np.ndarray | None = None
        self._blocks: OrderedDict[int, list[Event]] = OrderedDict()
        self._lock = threading.Lock()
        self._positions_of: dict[tuple[str, Any], np.ndarray] = {}
        self._field_columns: OrderedDict[str, np.ndarray | None] = OrderedDict()
        self._prescanned: dict[str, Any] | None = None

    def _in_order(self, by_row: np.ndarray) -> np.ndarray:
        return by_row if self.order is None else by_row[self.order]

    def row_of(self, k: int) -> int:
        return k if self.order is None else int(self.order[k])

    @property
    def table(self) -> pa.Table:
        """The whole table (in memory for a capture converted on the spot; read in full from a file)."""
        if isinstance(self._rows, _TableRows):
            return self._rows.table
        return self._rows.columns(self._rows.column_names)

    @classmethod
    def open(cls, path: str | Path, *, block_size: int = DEFAULT_BLOCK_SIZE) -> ReplaySource:
        """A replay file (memory-mapped) or any capture `recount convert` reads (converted in memory)."""
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(2, "No such file or directory", str(path))
        if path.suffix in (".arrow", ".feather", ".ipc"):
            mapped = pa.memory_map(str(path), "r")
            try:
                rows = _FileRows(mapped, str(path))
            except replay_file.ARROW_ERRORS:  # not an IPC file: perhaps a stream (read whole, as before)
                table = replay_file.read_table(pa.memory_map(str(path), "r"), name=str(path))
                return cls(table, name=str(path), block_size=block_size)
            return cls(name=str(path), block_size=block_size, rows=rows)
        from recorder import convert as loader  # only for captures that are not replay files yet

        return cls.from_loaded(loader.load(path), name=str(path), block_size=block_size)

    @classmethod
    def from_loaded(cls, loaded: Any, *, name: str, block_size: int = DEFAULT_BLOCK_SIZE) -> ReplaySource:
        """Events read by `recorder.convert.load` (a capture, or an incident directory converted in memory)."""
        table = replay_file.events_to_table(
            loaded.events, source=Path(name).name, cluster_members=loaded.cluster_members
        )
        return cls(table, name=name, refs=loaded.refs, ref_kind=loaded.ref_kind, block_size=block_size)

    @classmethod
    def from_events(
        cls, events: Sequence[Event], *, name: str = "events", block_size: int = DEFAULT_BLOCK_SIZE
    ) -> ReplaySource:
        table = replay_file.events_to_table(events, source=name)
        return cls(table, name=name, block_size=block_size)

    def __len__(self) -> int:
        return len(self.ts)

    # -- decoding ---------------------------------------------------------------------------------------

    def ref(self, k: int) -> Any:
        """How divergence records and errors name event ``k``: its seq (or its line in a capture)."""
        if self._refs is not None:
            return self._refs[self.row_of(k)]
        return int(self.seq[k])

    def block(self, b: int) -> list[Event]:
        """Events of positions ``b*block_size ..`` decoded (cached)."""
        with self._lock:
            cached = self._blocks.get(b)
            if cached is not None:
                self._blocks.move_to_end(b)
                return cached
        events = self._decode_block(b)
        with self._lock:
            self._blocks[b] = events
            while len(self._blocks) > 128:
                self._blocks.popitem(last=False)
        return events

    def _decode_block(self, b: int) -> list[Event]:
        start = b * self.block_size
        end = min(start + self.block_size, len(self))
        if end <= start:
            return []
        rows = np.arange(start, end) if self.order is None else self.order[start:end]
        ordered_rows = np.sort(rows)
        low, high = int(ordered_rows[0]), int(ordered_rows[-1])
        try:
            part = self._rows.rows(ordered_rows)
            decoded = replay_file.table_to_events(part, name=self.name)
        except DecodeError as error:
            raise DecodeError(f"rows {low}..{high}: {error.expected}", source=self.name) from None
        if self.order is None:
            return decoded
        by_row = dict(zip(ordered_rows.tolist(), decoded, strict=True))
        return [by_row[int(r)] for r in rows]

    def event(self, k: int) -> Event:
        if not 0 <= k < len(self):
            raise SessionError(f"event {k} is outside 0..{len(self) - 1}")
        return self.block(k // self.block_size)[k % self.block_size]

    def is_decoded(self, k: int) -> bool:
        """Is event ``k``'s block decoded and kept (`describe`/`event` answer without reading the file)?"""
        return k // self.block_size in self._blocks

    def describe(self, k: int) -> str:
        try:
            return describe_event(self.event(k))
        except DecodeError as error:
            return f"(undecodable: {error.expected})"

    def type_name(self, k: int) -> str:
        return self.type_names[self.type[k]]

    def dir_name(self, k: int) -> str:
        return self.dir_names[self.dir[k]]

    def channel_name(self, k: int) -> str:
        return self.channel_names[self.channel[k]]

    # -- finding -----------------------------------------------------------------------------------------

    def positions_where(self, column: str, value: Any) -> np.ndarray:
        """Sorted positions whose ``column`` (node, type, channel, dir) equals ``value`` (cached)."""
        key = (column, value)
        found = self._positions_of.get(key)
        if found is None:
            if column == "node":
                found = np.flatnonzero(self.node == int(value))
            else:
                names = {"type": self.type_names, "channel": self.channel_names, "dir": self.dir_names}[
                    column
                ]
                codes = {"type": self.type, "channel": self.channel, "dir": self.dir}[column]
                found = (
                    np.flatnonzero(codes == names.index(value)) if value in names else np.empty(0, np.int64)
                )
            self._positions_of[key] = found
        return found

    def field_column(self, name: str) -> np.ndarray | None:
        """A per-field column (``logPosition``, ``leadershipTermId``...) in replay order, nulls as -2**62
        (read on demand; the last few asked for are kept)."""
        with self._lock:
            if name in self._field_columns:
                self._field_columns.move_to_end(name)
                return self._field_columns[name]
        found = None
        if name in self._rows.column_names and name not in replay_file.BASE_COLUMNS:
            column = self._rows.column(name)
            if pa.types.is_integer(column.type):
                found = self._in_order(column.fill_null(-(2**62)).to_numpy().astype(np.int64))
        with self._lock:
            self._field_columns[name] = found
            while len(self._field_columns) > 3:
                self._field_columns.popitem(last=False)
        return found

    def relative(self, ts: int) -> str:
        """``+15.064s``: ``ts`` from the first event."""
        return relative_time(int(ts), self.origin)

    def heartbeat_mask(self) -> np.ndarray:
        """True for each periodic position message on the consensus channel (CanvassPosition,
        AppendPosition, CommitPosition): the heartbeats the event list hides by default."""
        if self._heartbeats is None:
            types = [i for i, name in enumerate(self.type_names) if name in PERIODIC]
            consensus = [i for i, name in enumerate(self.channel_names) if name == "consensus"]
            self._heartbeats = np.isin(self.type, types) & np.isin(self.channel, consensus)
        return self._heartbeats

    def when(self, ts: int) -> str:
        """``ts`` as the screens show it: from the first event, or UTC while ``wall_clock`` is on."""
        return wall_time(int(ts)) if self.wall_clock else relative_time(int(ts), self.origin)

    def position_at_time(self, ts: int) -> int:
        """The first event at or after ``ts`` (the last event when none is)."""
        k = int(np.searchsorted(self.ts, ts, side="left"))
        return min(k, len(self) - 1)

    def position_of_seq(self, seq: int) -> int | None:
        row = int(np.searchsorted(self.seq_rows, seq))
        if row < len(self.seq_rows) and int(self.seq_rows[row]) == seq:
            return row if self.row_position is None else int(self.row_position[row])
        return None


# -- the stepper: node replay with light checkpoints -------------------------------------------------------
#
# The index runs `engine.replay.NodeReplay` (the same code as `recount replay`) with its comparison, once;
# every checkpoint is `NodeReplay.checkpoint(compare=False)`: a copy that leaves the comparison state
# behind and compares nothing when re-executed (the index already holds the divergences).


class SharedParts:
    """The immutable parts checkpoints share instead of writing each out again.

    A checkpoint is `NodeReplay.checkpoint(compare=False)` pickled and compressed: a few kilobytes of
    bytes, one object for the garbage collector, instead of a copied object graph.  What is immutable
    and big is not written into it but referred to: the replay's facts, flags and model, every ``bytes``
    of 1 KiB or more (node-state.dat's buffers), and every hashable tuple of 64 items or more (the frozen
    chunks of a member's log, `engine.model.sim_parts.LogStore`), kept here once for all checkpoints.
    These pickles are made and read by this process only, from its own objects: never from a file.
    """

    def __init__(self) -> None:
        objects: dict[int, Any] = {}
        refused: set[int] = set()  # tuples found unhashable: written out, not shared
        self._objects = objects

        # The pickler and unpickler classes are made once here, not per checkpoint: a class made per call
        # is a new type each time, and garbage in a cycle (a type refers to itself) the collector must find.
        class _Pickler(pickle.Pickler):
            def persistent_id(self, obj: Any) -> int | None:
                key = id(obj)
                if key in objects:
                    return key
                kind = type(obj)
                if kind is bytes and len(obj) >= 1024:
                    objects[key] = obj
                    return key
                if kind is tuple and len(obj) >= 64 and key not in refused:
                    try:
                        hash(obj)
                    except TypeError:
                        refused.add(key)
                        return None
                    objects[key] = obj
                    return key
                return None

        class _Unpickler(pickle.Unpickler):
            def persistent_load(self, pid: Any) -> Any:
                return objects[pid]

        self._pickler, self._unpickler = _Pickler, _Unpickler

    def pack(self, replay: NodeReplay) -> bytes:
        objects = self._objects
        for kept in (replay.facts, replay.flags, replay.driver.model):
            objects.setdefault(id(kept), kept)
        out = io.BytesIO()
        self._pickler(out, protocol=pickle.HIGHEST_PROTOCOL).dump(replay)
        return zlib.compress(out.getbuffer(), 1)

    def unpack(self, blob: bytes) -> NodeReplay:
        return self._unpickler(io.BytesIO(zlib.decompress(blob))).load()


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The replay after ``position`` events, packed (`SharedParts`); `replay()` gives a fresh copy."""

    position: int
    blob: bytes
    shared: SharedParts

    def replay(self) -> NodeReplay:
        return self.shared.unpack(self.blob)


class Stepper:
    """Feeds events to a node replay one at a time; `checkpoint()`/`restore()` copy it."""

    def __init__(self, source: ReplaySource, replay: NodeReplay, position: int = 0) -> None:
        self.source = source
        self.replay = replay
        self.position = position

    @classmethod
    def start(cls, source: ReplaySource, *, model: str = "1.47.3", seed: int | None = None) -> Stepper:
        flags_for(model)
        return cls(source, NodeReplay(_facts(source), seed=seed, model=model, tolerance_ns=DEFAULT_TOLERANCE_NS))

    def step(self) -> list[dict[str, Any]]:
        k = self.position
        records = self.replay.feed(self.source.event(k), self.source.ref(k), self.source.ref_kind)
        self.position = k + 1
        return records

    def finish(self) -> list[dict[str, Any]]:
        return self.replay.finish()

    def views(self) -> dict[int, MemberView]:
        return self.replay.views()

    def states(self) -> dict[int, dict[str, Any]]:
        """Each started member's view, as the screens name its values (Aeron's names)."""
        return _as_states(self.replay.views())

    def checkpoint(self, shared: SharedParts) -> Checkpoint:
        """The replay now, packed as `NodeReplay.checkpoint(compare=False)` would copy it (no copy made)."""
        with self.replay.comparing_nothing() as bare:
            return Checkpoint(self.position, shared.pack(bare), shared)

    @classmethod
    def restore(cls, source: ReplaySource, checkpoint: Checkpoint) -> Stepper:
        return cls(source, checkpoint.replay(), checkpoint.position)


class _Seen:
    """The little of an event `engine.replay.scan` looks at, built from columns (no decoding)."""

    __slots__ = ("ts", "node", "dir", "channel", "type", "fields", "extra")

    def __init__(
        self, ts: int, node: int, direction: str, channel: str, kind: str, fields: Mapping[str, Any]
    ) -> None:
        self.ts = ts
        self.node = node
        self.dir = direction
        self.channel = channel
        self.type = kind
        self.fields = fields
        self.extra: Mapping[str, Any] = {}  # the lifecycle events that carry one are read whole


def _facts(source: ReplaySource) -> RecordingFacts:
    """The replay's whole-recording facts, by `engine.replay.scan`, fed column-built stand-ins.

    `scan` asks which channels each member's sends were recorded on, which observation kinds each
    member has, and when each member first sent RequestVote for each candidate term.  One stand-in
    per distinct (member, channel) of the ``out`` events, per distinct (member, type) of the
    observations, and one per recorded RequestVote (in replay order), and the lifecycle events
    themselves (MemberStart, MemberCrash, MemberStop: when each member first started, the evidence gaps
    they carry) and the agent log's ElectionStateChanges (when a member logged its nomination) give it
    the same answers as every event would, decoding only those few.
    """
    with source._lock:
        cached = getattr(source, "_prescanned", None)
    if cached is not None:
        return cached
    names = source.dir_names
    out_code = names.index("out") if "out" in names else -2
    local_code = names.index("local") if "local" in names else -2
    rows: list[tuple[int, int, _Seen]] = []
    outs = np.flatnonzero(source.dir == out_code)
    for key in np.unique(source.node[outs] * 65536 + source.channel[outs]).tolist():
        node, channel = divmod(int(key), 65536)
        rows.append((0, 0, _Seen(0, node, "out", source.channel_names[channel], "", {})))
    observation_codes = [i for i, t in enumerate(source.type_names) if t in OBSERVATIONS]
    observed = np.flatnonzero((source.dir == local_code) & np.isin(source.type, observation_codes))
    for key in np.unique(source.node[observed] * 65536 + source.type[observed]).tolist():
        node, kind = divmod(int(key), 65536)
        rows.append((0, 0, _Seen(0, node, "local", "local", source.type_names[kind], {})))
    if "RequestVote" in source.type_names:
        candidate = source.field_column("candidateTermId")
        votes = np.flatnonzero(
            (source.dir == out_code) & (source.type == source.type_names.index("RequestVote"))
        )
        for k in votes.tolist():
            fields = {"candidateTermId": int(candidate[k])} if candidate is not None else {}
            rows.append(
                (
                    int(source.ts[k]),
                    k,
                    _Seen(
                        int(source.ts[k]),
                        int(source.node[k]),
                        "out",
                        source.channel_names[source.channel[k]],
                        "RequestVote",
                        fields,
                    ),
                )
            )
    # Lifecycle events and the agent log's state changes are few: each is read whole, in replay order
    # (its first MemberStart, the evidence gaps its ``extra`` holds, a logged nomination's time).
    lives = [i for i, t in enumerate(source.type_names)
             if t in ("MemberStart", "MemberCrash", "MemberStop", "ElectionStateChange")]
    lifecycle = np.flatnonzero((source.dir == local_code) & np.isin(source.type, lives))
    events = [seen for _, _, seen in rows] + [source.event(k) for k in lifecycle.tolist()]
    result = scan(events)
    with source._lock:
        source._prescanned = result
    return result


# -- the index ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LaneSegment:
    """What a member's lane shows from ``position`` on."""

    position: int
    ts: int
    election_state: str
    role: str
    leadership_term_id: int
    leader_member_id: int
    running: bool


@dataclass(frozen=True, slots=True)
class Problem:
    """A divergence or invariant violation, anchored at the event it concerns."""

    position: int
    ts: int
    node: int | None
    record: dict[str, Any]


@dataclass(frozen=True, slots=True)
class TermStart:
    """The moment a member became leader of a term."""

    position: int
    ts: int
    leadership_term_id: int
    leader_member_id: int


@dataclass(frozen=True, slots=True)
class ElectionStart:
    """An election beginning at a member (Aeron's NEW_ELECTION), with the reason Aeron gives."""

    position: int
    ts: int
    node: int
    reason: str
    leadership_term_id: int


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """A term's leader, and the election that made it: from the first member's election start since
    the previous leader to this one's becoming leader."""

    term: TermStart
    election: ElectionStart | None

    @property
    def election_ns(self) -> int | None:
        return self.term.ts - self.election.ts if self.election is not None else None


@dataclass
class Index:
    """What one replay pass found.  Filled by `build_index` (possibly in another thread)."""

    total: int
    done: int = 0
    finished: bool = False
    error: str | None = None
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    notable: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    changes: list[int] = field(default_factory=list)
    member_changes: dict[int, list[int]] = field(default_factory=dict)
    lanes: dict[int, list[LaneSegment]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    problem_positions: list[int] = field(default_factory=list)
    #: Per member, the events where it changed something it records (`CAUSED_KINDS`) or started/stopped.
    member_records: dict[int, list[int]] = field(default_factory=dict)
    terms: list[TermStart] = field(default_factory=list)
    elections: list[ElectionStart] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    #: Where each checkpoint is (events fed), for bisecting.
    checkpoint_positions: list[int] = field(default_factory=list)
    #: The records of each heavy step (`HEAVY_STEP_S`), a checkpoint after each: re-executing a block
    #: takes them from here and restores that checkpoint instead of running the step again.
    heavy_records: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    shared: SharedParts = field(default_factory=SharedParts)
    summary: dict[str, Any] | None = None

    def add_checkpoint(self, checkpoint: Checkpoint) -> None:
        self.checkpoints.append(checkpoint)
        self.checkpoint_positions.append(checkpoint.position)


def _is_notable(record: Mapping[str, Any]) -> bool:
    """Part of the story: not the summary, and not the traffic (periodic sends, log frames and appends)."""
    kind = record.get("kind")
    if kind == "send":
        return record.get("type") in SIGNIFICANT and record.get("channel", "consensus") == "consensus"
    return kind != "summary" and kind != "logAppend"


def _lane(position: int, ts: int, view: MemberView) -> LaneSegment:
    return LaneSegment(
        position,
        ts,
        view.election_state.name,
        view.role.name,
        view.leadership_term_id,
        view.leader_member_id,
        view.is_running,
    )


#: Events indexed between two `_settle_heap` calls.
SETTLE_HEAP_EVERY = 20_000
#: A step of the index that took longer than this (CPU) gets a checkpoint right after it, besides the
#: one every block: a seek past it then restores that checkpoint instead of stepping through it again
#: (an election's log replay, a catch-up: tens of milliseconds each on a 1M-event replay).
HEAVY_STEP_S = 0.004


def _settle_heap() -> None:
    """Take what is alive now out of the cyclic garbage collector's view (`gc.freeze`), young cycles
    collected first.

    What the index builds (notable records, lanes, checkpoints, the log's chunks) lives as long as the
    session, and every full collection walks all of it: on a 1M-event replay one took 0.3-0.4 s with
    the interpreter held, and those were the slowest seeks (a seek's 20 ms of re-execution landing on a
    collection: p99 381 ms; frozen, 47 ms).  The price: a cycle alive now that later becomes garbage is
    never collected (the steppers alive at that moment, a few each time)."""
    gc.collect(1)
    gc.freeze()


def build_index(
    source: ReplaySource,
    *,
    model: str = "1.47.3",
    seed: int | None = None,
    index: Index | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    should_pause: Callable[[], bool] = lambda: False,
) -> Index:
    """Replay every event once, filling ``index`` as it goes (readers may look at it meanwhile).

    ``should_pause`` is asked every few events: while it says so the index waits, so that the screen's
    own re-execution (a seek) has the interpreter to itself."""
    total = len(source)
    index = index or Index(total=total)
    index.counts = np.zeros(total, np.int32)
    block = source.block_size
    stepper = Stepper.start(source, model=model, seed=seed)
    index.add_checkpoint(stepper.checkpoint(index.shared))
    last_lane: dict[int, LaneSegment] = {}
    try:
        for k in range(total):
            if should_stop():
                return index
            if k & 63 == 0:
                while should_pause() and not should_stop():
                    time.sleep(0.002)
            started = time.thread_time()
            records = stepper.step()
            heavy = time.thread_time() - started > HEAVY_STEP_S
            _note(index, source, stepper, k, records, last_lane)
            if heavy:
                index.heavy_records[k] = [r for r in records if r.get("kind") != "divergence"]
            if (k + 1) % block == 0 or heavy:
                index.add_checkpoint(stepper.checkpoint(index.shared))
            if (k + 1) % SETTLE_HEAP_EVERY == 0:
                _settle_heap()
            index.done = k + 1
        final = stepper.finish()
    except DecodeError as error:
        index.error = f"replay stopped at event {index.done}: {error}"
        index.finished = True
        return index
    if total:
        _note(
            index,
            source,
            stepper,
            total - 1,
            [r for r in final if r.get("kind") != "summary"],
            last_lane,
            final=True,
        )
    index.summary = final[-1] if final and final[-1].get("kind") == "summary" else None
    if total >= SETTLE_HEAP_EVERY:
        _settle_heap()
    index.finished = True
    return index


def _note(
    index: Index,
    source: ReplaySource,
    stepper: Stepper,
    k: int,
    records: list[dict[str, Any]],
    last_lane: dict[int, LaneSegment],
    *,
    final: bool = False,
) -> None:
    if records:
        index.counts[k] += len(records)
        notable = [r for r in records if _is_notable(r)]
        if notable:
            index.notable.setdefault(k, []).extend(notable)
    touched: set[int] = set()
    for record in records:
        if record.get("kind") in CAUSED_KINDS and record.get("node") is not None:
            positions = index.member_records.setdefault(int(record["node"]), [])
            if not positions or positions[-1] != k:
                positions.append(k)
        if record.get("kind") == "election" and record.get("node") is not None:
            index.elections.append(ElectionStart(
                k, int(record.get("ts") or source.ts[k]), int(record["node"]), str(record.get("reason", "")),
                int(record.get("leadershipTermId", -1)),
            ))
    event_type = source.type_name(k)
    if event_type in LIFECYCLE and source.dir_name(k) == "local":
        touched.add(int(source.node[k]))
        positions = index.member_records.setdefault(int(source.node[k]), [])
        if not positions or positions[-1] != k:
            positions.append(k)
    for record in records:
        kind = record.get("kind")
        node = record.get("node")
        if kind in LANE_KINDS and node is not None:
            touched.add(int(node))
        if kind in PROBLEM_KINDS:
            anchor = k
            ref = record.get("event")
            if ref is not None and source.ref_kind == "seq":
                found = source.position_of_seq(int(ref))
                anchor = found if found is not None else k
            elif record.get("ts") is not None:
                anchor = min(k, source.position_at_time(int(record["ts"])))
            problem = Problem(anchor, int(record.get("ts") or source.ts[k]), node, record)
            i = bisect.bisect_right(index.problem_positions, anchor)
            index.problem_positions.insert(i, anchor)
            index.problems.insert(i, problem)
    if not touched:
        return
    views = stepper.views()
    ts = int(source.ts[k])
    if not index.changes or index.changes[-1] != k:
        index.changes.append(k)
    for node_id in sorted(touched):
        view = views.get(node_id)
        if view is None:
            continue
        changes = index.member_changes.setdefault(node_id, [])
        if not changes or changes[-1] != k:
            changes.append(k)
        segment = _lane(k, ts, view)
        previous = last_lane.get(node_id)
        if previous is None or (
            previous.election_state,
            previous.role,
            previous.leadership_term_id,
            previous.leader_member_id,
            previous.running,
        ) != (
            segment.election_state,
            segment.role,
            segment.leadership_term_id,
            segment.leader_member_id,
            segment.running,
        ):
            index.lanes.setdefault(node_id, []).append(segment)
            last_lane[node_id] = segment
            if (
                segment.role == "LEADER"
                and segment.running
                and (previous is None or previous.role != "LEADER")
            ):
                index.terms.append(TermStart(k, ts, segment.leadership_term_id, node_id))


# -- the session -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LastChange:
    """Where a member's value last changed (the event after which it differs), and what changed it:
    ``cause`` as trace records give it (`formats.describe.describe_cause`), and the record that says so
    when there is one."""

    position: int
    member: int
    path: str
    before: Any
    after: Any
    cause: dict[str, Any] | None
    record: dict[str, Any] | None

    @property
    def is_the_event(self) -> bool:
        """The cause is the event at ``position`` itself (an input the member received, or a local event)."""
        return bool(self.cause) and self.cause.get("kind") in ("message", "local")


class Moment:
    """Every member's state after event ``position`` and after the one before it.

    Held as the members' frozen views; `states` and `previous` (the screens' dicts, Aeron's names) are
    made when first asked for: of the moments a seek works out around the cursor, most are never shown.
    """

    __slots__ = ("position", "_views", "_previous_views", "_states", "_previous")

    def __init__(self, position: int, views: Mapping[int, MemberView], previous_views: Mapping[int, MemberView]) -> None:
        self.position = position
        self._views = views
        self._previous_views = previous_views
        self._states: dict[int, dict[str, Any]] | None = None
        self._previous: dict[int, dict[str, Any]] | None = None

    @property
    def states(self) -> dict[int, dict[str, Any]]:
        if self._states is None:
            self._states = _as_states(self._views)
        return self._states

    @property
    def previous(self) -> dict[int, dict[str, Any]]:
        if self._previous is None:
            self._previous = _as_states(self._previous_views)
        return self._previous

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Moment):
            return NotImplemented
        return (self.position, self.states, self.previous) == (other.position, other.states, other.previous)

    __hash__ = None  # type: ignore[assignment]  # equal by value, and its dicts are not hashable


def _as_states(views: Mapping[int, MemberView]) -> dict[int, dict[str, Any]]:
    return {n: view.to_json() for n, view in views.items()}


class Session:
    """One replay as the TUI sees it: events, index, and member state at any event."""

    def __init__(self, source: ReplaySource, *, model: str = "1.47.3", seed: int | None = None) -> None:
        if model not in MODELS:
            raise UnknownModelError(model)
        self.source = source
        self.model = model
        self.seed = seed
        self.index = Index(total=len(source))
        self._stepper: Stepper | None = None
        self._moments: OrderedDict[int, Moment] = OrderedDict()
        #: The moments at the places s/S/d/D go to, and the records around them (`pin`): kept for good.
        self._pinned: dict[int, Moment] = {}
        self._pinned_records: dict[int, list[dict[str, Any]]] = {}
        #: The records of the events the screen's stepper last went through (what the cursor's event did).
        self._stepped: OrderedDict[int, list[dict[str, Any]]] = OrderedDict()
        self._record_blocks: OrderedDict[int, tuple[list[list[dict[str, Any]]], int]] = OrderedDict()
        # The screen's stepper and its moments are used by one thread at a time (the seek worker, a
        # search's last step, a test); record blocks may be filled by another.
        self._state_lock = threading.RLock()
        self._records_lock = threading.Lock()

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        model: str = "1.47.3",
        seed: int | None = None,
        block_size: int = DEFAULT_BLOCK_SIZE,
    ) -> Session:
        return cls(ReplaySource.open(path, block_size=block_size), model=model, seed=seed)

    def __len__(self) -> int:
        return len(self.source)

    @property
    def name(self) -> str:
        return self.source.name

    @property
    def members(self) -> list[int]:
        return self.source.members

    def build_index(
        self, should_stop: Callable[[], bool] = lambda: False, should_pause: Callable[[], bool] = lambda: False
    ) -> Index:
        return build_index(
            self.source,
            model=self.model,
            seed=self.seed,
            index=self.index,
            should_stop=should_stop,
            should_pause=should_pause,
        )

    # -- state at a position ------------------------------------------------------------------------------

    def _fresh(self, count: int) -> Stepper:
        checkpoint = self._checkpoint_at_or_before(count)
        if checkpoint is None:
            return Stepper.start(self.source, model=self.model, seed=self.seed)
        return Stepper.restore(self.source, checkpoint)

    def _stepper_at(self, count: int, should_stop: Callable[[], bool] = lambda: False) -> Stepper:
        """The screen's stepper, moved to exactly ``count`` events fed (forward when it can, else from a
        checkpoint).  `SeekCancelled` when ``should_stop`` says so on the way."""
        stepper = self._stepper
        if stepper is None or stepper.position > count:
            stepper = self._fresh(count)
        else:
            checkpoint = self._checkpoint_at_or_before(count)
            if checkpoint is not None and (
                checkpoint.position - stepper.position > RESTORE_AFTER
                or checkpoint.position > stepper.position and checkpoint.position % self.source.block_size
            ):  # far ahead, or just past a heavy step (`HEAVY_STEP_S`): restored, not stepped to
                stepper = Stepper.restore(self.source, checkpoint)
        self._stepper = stepper
        stepped = self._stepped
        last = len(self) - 1
        while stepper.position < count:
            if stepper.position & 63 == 0 and should_stop():
                raise SeekCancelled
            k = stepper.position
            records = stepper.step()
            if k != last:  # the last event's records include the replay's end (see `_replay_block`)
                stepped[k] = records
                if len(stepped) > STEPPED_KEPT:
                    stepped.popitem(last=False)
        return stepper

    def moment(self, position: int, should_stop: Callable[[], bool] = lambda: False) -> Moment:
        """Every member's state after event ``position``, and after event ``position - 1``."""
        if not 0 <= position < len(self):
            raise SessionError(f"event {position} is outside 0..{len(self) - 1}")
        with self._state_lock:
            moments = self._moments
            cached = moments.get(position)
            if cached is not None:
                moments.move_to_end(position)
                return cached
            pinned = self._pinned.get(position)
            if pinned is not None:
                return pinned
            before = moments.get(position - 1)
            if before is not None:
                previous = before._views
            else:
                previous = self._stepper_at(position, should_stop).views()
            moment = Moment(position, self._stepper_at(position + 1, should_stop).views(), previous)
            self._keep(moment)
            return moment

    def _keep(self, moment: Moment) -> None:
        moments = self._moments
        moments[moment.position] = moment
        moments.move_to_end(moment.position)
        while len(moments) > MOMENTS_KEPT:
            moments.popitem(last=False)

    def prepare(
        self, position: int, around: Sequence[int] | np.ndarray = (), should_stop: Callable[[], bool] = lambda: False
    ) -> Moment:
        """`moment(position)`, and on the same re-execution the moments of the events ``around`` it (those
        the list shows near the cursor: moving the cursor to one of them then needs no re-execution) and
        the records of every event from the first of them to the last (what the list draws under them).

        One pass from the checkpoint before the first of them: the few states asked for are taken on
        the way (a member view each), so a screenful costs little more than the cursor's moment alone."""
        if not 0 <= position < len(self):
            raise SessionError(f"event {position} is outside 0..{len(self) - 1}")
        total = len(self)
        with self._state_lock:
            moments = self._moments
            wanted = sorted({position} | {int(p) for p in around if 0 <= int(p) < total and int(p) not in moments})
            if position in moments:
                wanted.remove(position)
                if not wanted:
                    return self.moment(position)
            need = set(wanted) | {p + 1 for p in wanted}  # states after p - 1 and after p: counts fed
            counts = sorted(need)
            stepper = self._stepper_at(counts[0], should_stop)
            states = {counts[0]: stepper.views()}
            for count in counts[1:]:
                stepper = self._stepper_at(count, should_stop)
                states[count] = stepper.views()
            for p in wanted:
                if p != position:
                    self._keep(Moment(p, states[p + 1], states[p]))
            moment = moments.get(position) or Moment(position, states[position + 1], states[position])
            self._keep(moment)  # the cursor's, kept last: the first to stay
            return moment

    def moment_cached(self, position: int) -> Moment | None:
        """`moment(position)` if it is at hand (no re-execution), else None."""
        return self._moments.get(position) or self._pinned.get(position)

    def landmarks(self, limit: int = 2000) -> list[int]:
        """Where s/S/d/D go (state changes, problems), as far as indexed: the first ``limit`` of them."""
        return sorted(set(self.index.changes) | set(self.index.problem_positions))[:limit]

    def pin(self, position: int, around: Sequence[int] = (), should_stop: Callable[[], bool] = lambda: False) -> None:
        """Work out `prepare(position, around)` and keep its moment and the records from the first event
        ``around`` to the last for good: a landmark (a state change, a divergence) that s/S/d/D go to is
        then at hand, however much re-executing to it costs (an election's log replay can take a tenth of
        a second of the engine's time)."""
        if position in self._pinned:
            return
        moment = self.prepare(position, around, should_stop)
        span = [position, *around]
        kept = {}
        for k in range(max(min(span), 0), min(max(span), len(self) - 1) + 1):
            records = self.records_cached(k)
            if records:
                kept[k] = records
        with self._state_lock:
            self._pinned_records.update(kept)
            self._pinned[position] = moment

    def steps_to(self, position: int) -> int:
        """How many events `moment(position)` would re-execute (from the screen's stepper or a checkpoint)."""
        if position in self._moments or position in self._pinned:
            return 0
        count = position + 1
        checkpoint = self._checkpoint_at_or_before(count)
        start = checkpoint.position if checkpoint is not None else 0
        stepper = self._stepper
        heavy = checkpoint is not None and checkpoint.position % self.source.block_size != 0
        if stepper is not None and start - RESTORE_AFTER <= stepper.position <= count and not (
            heavy and stepper.position < start
        ):
            start = stepper.position  # it steps on (past a checkpoint close ahead, see `_stepper_at`)
        return count - start + (0 if position - 1 in self._moments else 1)

    def states_at(self, position: int) -> dict[int, dict[str, Any]]:
        return self.moment(position).states

    # -- records ------------------------------------------------------------------------------------------

    def record_count(self, position: int) -> int:
        return (
            int(self.index.counts[position])
            if position < self.index.done or self.index.finished and position < len(self.index.counts)
            else 0
        )

    def records_at(self, position: int) -> list[dict[str, Any]]:
        """The trace records event ``position`` produced (empty until the index has reached it)."""
        cached = self.records_cached(position)
        if cached is not None:
            return cached
        size = self.source.block_size
        return self.load_records(position // size)[position % size]

    def load_records(self, b: int) -> list[list[dict[str, Any]]]:
        """The records of every event of block ``b``, by re-executing it.  Kept, with how far they hold:
        in a block the index is still going through, only the events it has passed (the rest grow)."""
        size = self.source.block_size
        with self._records_lock:
            kept = self._record_blocks.get(b)
        if kept is not None and (kept[1] >= min((b + 1) * size, len(self)) or kept[1] >= self.index.done):
            return kept[0]
        valid = len(self) if self.index.finished else self.index.done
        block = self._replay_block(b)
        with self._records_lock:
            self._record_blocks[b] = (block, valid)
            while len(self._record_blocks) > 64:
                self._record_blocks.popitem(last=False)
        return block

    def records_cached(self, position: int) -> list[dict[str, Any]] | None:
        """`records_at(position)` if it is at hand (no re-execution), else None."""
        if self.record_count(position) == 0:
            return []
        size = self.source.block_size
        b = position // size
        with self._records_lock:
            kept = self._record_blocks.get(b)
            if kept is not None and position < kept[1]:
                self._record_blocks.move_to_end(b)
                return kept[0][position - b * size]
        pinned = self._pinned_records.get(position)
        if pinned is not None:
            return pinned
        heavy = self.index.heavy_records.get(position)
        if heavy is not None and position != len(self) - 1:
            return heavy + self._problems_at(position)
        stepped = self._stepped.get(position)
        if stepped is None or len(stepped) + self._problem_count(position) != self.record_count(position):
            return None
        return [r for r in stepped if r.get("kind") != "divergence"] + self._problems_at(position)

    def _problem_count(self, position: int) -> int:
        return sum(1 for r in self.index.notable.get(position, ()) if r.get("kind") == "divergence")

    def _problems_at(self, position: int) -> list[dict[str, Any]]:
        return [r for r in self.index.notable.get(position, ()) if r.get("kind") == "divergence"]

    def _replay_block(self, b: int) -> list[list[dict[str, Any]]]:
        size = self.source.block_size
        start = b * size
        end = min(start + size, len(self))
        stepper = self._fresh(start)
        while stepper.position < start:
            stepper.step()
        out: list[list[dict[str, Any]]] = []
        done = self.index.done  # the index stopped there if the replay hit bad input: so does this
        heavy = self.index.heavy_records
        for k in range(start, end):
            kept = heavy.get(k) if k < done and k != len(self) - 1 else None
            if kept is not None:  # a heavy step: its records from the index, the checkpoint after it restored
                checkpoint = self._checkpoint_at_or_before(k + 1)
                if checkpoint is not None and checkpoint.position == k + 1:
                    stepper = Stepper.restore(self.source, checkpoint)
                    out.append(kept + [r for r in self.index.notable.get(k, ()) if r.get("kind") == "divergence"])
                    continue
            records = stepper.step() if k < done else []
            if k == len(self) - 1 and self.index.finished and self.index.error is None:
                records = records + [r for r in stepper.finish() if r.get("kind") != "summary"]
            problems = [r for r in self.index.notable.get(k, ()) if r.get("kind") == "divergence"]
            out.append([r for r in records if r.get("kind") != "divergence"] + problems)
        return out

    # -- moving -------------------------------------------------------------------------------------------

    def member_positions(self, member: int) -> np.ndarray:
        return self.source.positions_where("node", member)

    def next_of(self, positions: Sequence[int] | np.ndarray, position: int, direction: int) -> int | None:
        """The first of the sorted ``positions`` after (direction 1) or before (-1) ``position``."""
        if direction > 0:
            i = (
                bisect.bisect_right(positions, position)
                if isinstance(positions, list)
                else int(np.searchsorted(positions, position, side="right"))
            )
            return int(positions[i]) if i < len(positions) else None
        i = (
            bisect.bisect_left(positions, position)
            if isinstance(positions, list)
            else int(np.searchsorted(positions, position, side="left"))
        )
        return int(positions[i - 1]) if i > 0 else None

    def state_changes(self, member: int | None = None) -> list[int]:
        if member is None:
            return self.index.changes
        return self.index.member_changes.get(member, [])

    def election_of(self, member: int, position: int) -> ElectionStart | None:
        """The last election ``member`` started at or before event ``position`` (as far as indexed)."""
        found = None
        for start in self.index.elections:
            if start.position > position:
                break
            if start.node == member:
                found = start
        return found

    def leader_history(self, position: int) -> list[LeaderChange]:
        """Each term's leader up to event ``position``, with the election that chose it."""
        history = []
        elections = self.index.elections
        previous = -1
        for term in self.index.terms:
            if term.position > position:
                break
            first = next((e for e in elections if previous < e.position <= term.position), None)
            history.append(LeaderChange(term, first))
            previous = term.position
        return history

    def position_of_term(self, term: int) -> int | None:
        """When a member became leader of ``term`` (else the first event mentioning the term)."""
        for start in self.index.terms:
            if start.leadership_term_id == term:
                return start.position
        for name in ("leadershipTermId", "candidateTermId"):
            column = self.source.field_column(name)
            if column is not None:
                hits = np.flatnonzero(column == term)
                if len(hits):
                    return int(hits[0])
        return None

    def position_of_log_position(self, log_position: int) -> int | None:
        """The first event carrying a ``logPosition`` at or past ``log_position``."""
        column = self.source.field_column("logPosition")
        if column is None:
            return None
        hits = np.flatnonzero(column >= log_position)
        return int(hits[0]) if len(hits) else None

    # -- searching with a predicate ------------------------------------------------------------------------

    def search(
        self,
        conditions: Sequence[Callable[[Mapping[int, Mapping[str, Any]]], bool]],
        position: int,
        direction: int,
        *,
        should_stop: Callable[[], bool] = lambda: False,
        progress: Callable[[int], None] = lambda k: None,
    ) -> tuple[int, list[int]] | None:
        """The next (direction 1) or previous (-1) event after which one of ``conditions`` became true.

        Returns the event and which conditions became true there.  "Became true" means it holds
        after that event and did not after the one before, so a condition that holds at the cursor is
        not found again at the cursor.  Searches run on their own stepper restored from checkpoints:
        forward by stepping on to the end, backward a block at a time (each block re-executed from its
        checkpoint, the latest hit in it kept).
        """

        # A watchpoint (a condition with ``changes``) compares the states after an event with those
        # before it, and fires at every event where it holds; other conditions fire where they start to hold.
        watching = [bool(getattr(condition, "watches", False)) for condition in conditions]
        last: dict[str, Any] = {}

        def truth(stepper: Stepper) -> tuple[bool, ...]:
            states = stepper.states()
            previous = last.get("states")
            last["states"] = states
            return tuple(
                bool(condition(states, previous)) if watches else bool(condition(states))
                for condition, watches in zip(conditions, watching, strict=True)
            )

        def fired(now: tuple[bool, ...], before: tuple[bool, ...]) -> list[int]:
            return [
                i for i, (a, b) in enumerate(zip(now, before, strict=True)) if a and (not b or watching[i])
            ]

        if direction > 0:
            stepper = self._fresh(position + 1)
            while stepper.position < position + 1:
                stepper.step()
            last.clear()
            before = truth(stepper)
            for k in range(position + 1, len(self)):
                if should_stop():
                    return None
                stepper.step()
                now = truth(stepper)
                hits = fired(now, before)
                if hits:
                    return k, hits
                before = now
                if k % 1000 == 0:
                    progress(k)
            return None
        end = position  # events < end are examined
        while end > 0:
            stepper = self._fresh(end - 1)
            start = stepper.position
            last.clear()
            before = truth(stepper)
            found = None
            for k in range(start, end):
                if should_stop():
                    return None
                stepper.step()
                now = truth(stepper)
                hits = fired(now, before)
                if hits:
                    found = (k, hits)
                before = now
            if found is not None:
                return found
            progress(start)
            end = start
        return None

    def moment_ready(self, position: int) -> bool:
        """Can `moment(position)` answer quickly (a checkpoint or the live stepper is close by)?"""
        if self.index.finished or position < 2 * self.source.block_size:
            return True
        nearest = self._checkpoint_at_or_before(position + 1)
        closest = nearest.position if nearest is not None else 0
        if self._stepper is not None and self._stepper.position <= position + 1:
            closest = max(closest, self._stepper.position)
        return position + 1 - closest <= 2 * self.source.block_size

    def problem_counts(self) -> tuple[int, int]:
        """(divergences, invariant violations) the index has found so far."""
        problems = self.index.problems
        cached = getattr(self, "_problem_counts", None)
        if cached is None or cached[0] != len(problems):
            divergences = sum(1 for p in problems if p.record.get("kind") == "divergence")
            cached = self._problem_counts = (len(problems), divergences, len(problems) - divergences)
        return cached[1], cached[2]

    def problems_at(self, position: int) -> list[Problem]:
        """The problems anchored at event ``position``."""
        index = self.index
        i = bisect.bisect_left(index.problem_positions, position)
        j = bisect.bisect_right(index.problem_positions, position)
        return index.problems[i:j]

    # -- how far the index has got ---------------------------------------------------------------------

    def settled(self) -> int:
        """Events before this one have all their problems found: the index is past them by more than
        the comparison's tolerance (a divergence is established up to that much later than the event
        it concerns).  The whole replay once indexed."""
        index = self.index
        if index.finished:
            return len(self)
        if index.done == 0:
            return 0
        return self.source.position_at_time(int(self.source.ts[index.done - 1]) - DEFAULT_TOLERANCE_NS)

    def pending(self) -> str:
        """What is not indexed yet, in words (empty once it all is): answers about the rest wait for it."""
        index = self.index
        if index.finished:
            return ""
        done = index.done
        at = f"#{int(self.source.seq[done - 1])}" if done else "the start"
        return f"indexed up to {at} ({100 * done // max(len(self), 1)}%), the rest is pending"

    # -- where a value last changed, and why --------------------------------------------------------------

    def last_change(
        self,
        member: int,
        path: str,
        position: int,
        *,
        should_stop: Callable[[], bool] = lambda: False,
        progress: Callable[[int], None] = lambda k: None,
    ) -> LastChange | None:
        """The last event at or before ``position`` after which member ``member``'s value at ``path`` (a
        field as conditions write it: ``candidateTermId``, ``nodeState.logPosition``, ``members[1].logPosition``)
        differed from before it, with the cause of that change.  None: it has not changed since the
        member started (or the search was stopped).

        A value in `RECORDED_FIELDS` changes only where the member has a record or a lifecycle event, so
        the index's list of those events is walked back; any other is found by re-executing back from the
        cursor, a block at a time (`search`)."""
        from cli.tui import breakpoints  # the language of conditions; it imports nothing of the session

        root = breakpoints.root_of(path)
        if root in RECORDED_FIELDS and (self.index.finished or position < self.index.done):
            candidates = self.index.member_records.get(member, [])
            i = bisect.bisect_right(candidates, position)
            while i > 0:
                if should_stop():
                    return None
                i -= 1
                k = candidates[i]
                moment = self.moment(k, should_stop)
                before = breakpoints.value_at(moment.previous.get(member), path)
                after = breakpoints.value_at(moment.states.get(member), path)
                if before != after:
                    return self._explain(k, member, path, root, before, after)
                progress(k)
            return None
        condition = breakpoints.parse(f"node {member} {path} changes")
        found = self.search([condition], min(position + 1, len(self)), -1, should_stop=should_stop, progress=progress)
        if found is None:
            return None
        k = found[0]
        moment = self.moment(k, should_stop)
        before = breakpoints.value_at(moment.previous.get(member), path)
        after = breakpoints.value_at(moment.states.get(member), path)
        return self._explain(k, member, path, root, before, after)

    def _explain(self, k: int, member: int, path: str, root: str, before: Any, after: Any) -> LastChange:
        """What changed ``member``'s ``path`` at event ``k``: the cause its own record there gives, else
        (a value no record speaks for) its deadlines if they alone change it, else the event itself."""
        from cli.tui import breakpoints

        records = [r for r in self.records_at(k) if r.get("node") == member and cause_of(r)]
        wanted = FIELD_RECORDS.get(root)
        chosen = [r for r in records if wanted is None or r.get("kind") in wanted] if root in RECORDED_FIELDS else []
        if chosen:
            return LastChange(k, member, path, before, after, chosen[-1]["cause"], chosen[-1])
        stepper = self._fresh(k)
        while stepper.position < k:
            stepper.step()
        ts = int(self.source.ts[k])
        states = stepper.states()
        deadlines = (states.get(member) or {}).get("deadlines") or {}
        timers = [r for r in stepper.replay.advance(ts) if r.get("node") == member]
        if breakpoints.value_at(stepper.states().get(member), path) != before:
            caused = [r for r in timers if cause_of(r)]
            if caused:
                return LastChange(k, member, path, before, after, caused[-1]["cause"], caused[-1])
            due = sorted((at, name) for name, at in deadlines.items() if at <= ts and name != "slowTick")
            name = due[0][1] if due else "slowTick"
            return LastChange(k, member, path, before, after, {"kind": "timer", "type": name}, None)
        event = self.source.event(k)
        if event.node == member and event.dir == "in":
            cause = {"kind": "message", "type": event.type, "peer": event.peer, "channel": event.channel}
        elif event.node == member and event.dir == "out" and event.channel == "log":
            cause = {"kind": "local", "type": "OwnLogAppend", "channel": "log"}
        else:
            cause = {"kind": "local", "type": event.type}
        return LastChange(k, member, path, before, after, cause, None)

    def _checkpoint_at_or_before(self, count: int) -> Checkpoint | None:
        index = self.index
        i = bisect.bisect_right(index.checkpoint_positions, count) - 1
        return index.checkpoints[i] if i >= 0 else None


# -- filtering and the list's layout ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EventFilter:
    """Which events the list shows: members, channels, message types (empty = all)."""

    nodes: frozenset[int] = frozenset()
    channels: frozenset[str] = frozenset()
    types: frozenset[str] = frozenset()

    @property
    def is_empty(self) -> bool:
        return not (self.nodes or self.channels or self.types)

    def describe(self) -> str:
        parts = []
        if self.nodes:
            parts.append("node=" + ",".join(str(n) for n in sorted(self.nodes)))
        if self.channels:
            parts.append("channel=" + ",".join(sorted(self.channels)))
        if self.types:
            parts.append("type=" + ",".join(sorted(self.types)))
        return " ".join(parts)

    @classmethod
    def parse(cls, text: str) -> EventFilter:
        """``node=1,2 channel=consensus type=Vote,RequestVote`` (any order; empty text = no filter)."""
        nodes: set[int] = set()
        channels: set[str] = set()
        types: set[str] = set()
        for word in text.split():
            key, sep, value = word.partition("=")
            if not sep or not value:
                raise ValueError(f"expected key=value (node=, channel=, type=), got {word!r}")
            items = [v for v in value.split(",") if v]
            if key in ("node", "member"):
                try:
                    nodes.update(int(v) for v in items)
                except ValueError:
                    raise ValueError(f"node= takes member ids, got {value!r}") from None
            elif key == "channel":
                channels.update(items)
            elif key == "type":
                types.update(items)
            else:
                raise ValueError(f"unknown filter key {key!r} (node, channel, type)")
        return cls(frozenset(nodes), frozenset(channels), frozenset(types))

    def positions(self, source: ReplaySource) -> np.ndarray:
        if self.is_empty:
            return np.arange(len(source))
        mask = np.ones(len(source), dtype=bool)
        if self.nodes:
            mask &= np.isin(source.node, sorted(self.nodes))
        if self.channels:
            codes = [i for i, name in enumerate(source.channel_names) if name in self.channels]
            mask &= np.isin(source.channel, codes)
        if self.types:
            codes = [i for i, name in enumerate(source.type_names) if name in self.types]
            mask &= np.isin(source.type, codes)
        return np.flatnonzero(mask)


class ListLayout:
    """Lines of the event list: each shown event, then (optionally) its trace records."""

    def __init__(self, positions: np.ndarray, counts: np.ndarray | None) -> None:
        self.positions = positions
        lines = np.ones(len(positions), dtype=np.int64)
        if counts is not None and len(positions):
            lines += counts[positions]
        self.starts = np.concatenate(([0], np.cumsum(lines)))  # line where each shown event begins

    @property
    def height(self) -> int:
        return int(self.starts[-1])

    def line(self, y: int) -> tuple[int, int]:
        """(index into positions, 0 for the event line or 1+j for its j-th record) of line ``y``."""
        i = int(np.searchsorted(self.starts, y, side="right")) - 1
        return i, y - int(self.starts[i])

    def index_of(self, position: int) -> int:
        """The shown event at or before ``position`` (the first one when none is)."""
        i = int(np.searchsorted(self.positions, position, side="right")) - 1
        return max(i, 0)

    def line_of(self, position: int) -> int:
        return int(self.starts[self.index_of(position)]) if len(self.positions) else 0


# -- two replays side by side --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoryLine:
    position: int
    ts: int
    node: int | None
    text: str


@dataclass(frozen=True, slots=True)
class DiffRow:
    """One row of the aligned view: a line from each side (None = nothing there) and whether they differ."""

    left: StoryLine | None
    right: StoryLine | None
    differs: bool


def story(session: Session) -> list[StoryLine]:
    """What the replay says happened, one line per notable trace record (no periodic sends)."""
    lines = []
    index = session.index
    for position in sorted(index.notable):
        for record in index.notable[position]:
            if record.get("kind") == "random":
                continue  # the draw's value; its effect (the nomination) is what is compared
            lines.append(
                StoryLine(
                    position,
                    int(record.get("ts") or session.source.ts[position]),
                    record.get("node"),
                    describe_record(record),
                )
            )
    return lines


def align(left: Sequence[StoryLine], right: Sequence[StoryLine]) -> list[DiffRow]:
    """The two stories aligned line by line (difflib on the description, time not compared)."""
    matcher = difflib.SequenceMatcher(None, [s.text for s in left], [s.text for s in right], autojunk=False)
    rows: list[DiffRow] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows.extend(DiffRow(left[i1 + d], right[j1 + d], False) for d in range(i2 - i1))
            continue
        for d in range(max(i2 - i1, j2 - j1)):
            a = left[i1 + d] if i1 + d < i2 else None
            b = right[j1 + d] if j1 + d < j2 else None
            rows.append(DiffRow(a, b, True))
    return rows


def difference_starts(rows: Sequence[DiffRow]) -> list[int]:
    """Row numbers where a run of differing rows begins (what "next difference" walks)."""
    return [i for i, row in enumerate(rows) if row.differs and (i == 0 or not rows[i - 1].differs)]


def iter_positions(layout: ListLayout, first_line: int, height: int) -> Iterator[tuple[int, int, int]]:
    """(line, position, record slot) for ``height`` lines from ``first_line``."""
    for y in range(first_line, min(first_line + height, layout.height)):
        i, slot = layout.line(y)
        yield y, int(layout.positions[i]), slot
