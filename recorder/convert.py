"""Captures in, one replay file out (`recount convert`, local engine), and replay inputs loaded.

Theory of operation: every supported input format has an `InputReader` in `READERS`: a name (the
``--format`` value), the file suffixes it claims, and a function from a path to `LoadedEvents`
(events in the file's own order, a reference per event for error messages and divergence records
(a line number for JSON Lines, a seq for replay files), and the cluster's member string when the
input knows it).  JSON Lines (contract §1) is read file by file; pcap/pcapng captures, aeron-agent
logs and cluster directories (``captures=True``) are read together by `recorder.capture`, since they
inform each other (members string, clock alignment, starting state), and are told apart by suffix,
magic bytes or content when ``--format`` is ``auto`` (the default).

`convert` reads every input, merges them into one global order (by ``ts``; ties keep the order of
the inputs on the command line, then file order), and writes the replay file through
`formats.replay_file`.  The output is written to ``OUT.tmp-<pid>`` and renamed over ``OUT`` only
when complete, so a failed or interrupted conversion never leaves a half-written replay file; an
existing ``OUT`` is refused unless ``force`` (`OutputExistsError`).  Bad input raises
`formats.errors.DecodeError` naming the file and line.

`recount replay` of a replay file does not load it: `ReplayFileInput` memory-maps it, checks it and
summarises it in one pass over a few columns, then gives its events in replay order a batch at a time.

Cluster configuration that captures do not record (timeouts, intervals, ...) comes from the user as
Aeron properties (``config``); `cluster_config` checks them with `engine.model.config.Config` and `convert`
writes them, as numbers, into every MemberStart's ``config`` (over what an input already said).
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import stat
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from engine.model.config import Config
from formats import arrow_compute, replay_file
from formats.errors import DecodeError
from formats.event_columns import EventColumns, packed_rows_and_width
from formats.events import Event, parse_jsonl
from recorder import discovery
from recorder.version_evidence import (
    CLUSTER_SCHEMA_ID,
    evidence_of_schema_versions,
    stored_evidence,
    to_metadata,
)


class OutputExistsError(FileExistsError):
    """The output file exists and overwriting it was not asked for."""


@dataclass(frozen=True, slots=True)
class LoadedEvents:
    events: list[Event]
    refs: list[Any]
    ref_kind: str  # "line" or "seq"
    source: str
    cluster_members: str | None = None
    #: For an incident read from directories: what was found and read (`ConvertResult.to_json` without ``out``).
    summary: dict[str, Any] | None = None
    metadata: Mapping[str, str] | None = None  #: a replay file's schema metadata beyond recount's own keys


@dataclass(frozen=True, slots=True)
class InputReader:
    name: str
    suffixes: tuple[str, ...]
    read: Callable[[Path], LoadedEvents]
    description: str
    #: Inputs of this kind are read together, in one call (the captures of one incident: pcaps, agent
    #: logs and cluster dirs inform each other), by `recorder.capture.load_captures`.
    captures: bool = False


@dataclass(frozen=True, slots=True)
class ConvertResult:
    out: str
    events: int
    nodes: tuple[int, ...]
    inputs: tuple[str, ...]
    cluster_members: str | None
    #: What the captures held, what was skipped and why (`recorder.capture.CaptureLoad.summary`).
    capture: dict[str, Any] | None = None
    #: Directories and tarballs looked into, and what was found in each (`discovery.Expanded.found`).
    found: tuple[dict[str, Any], ...] = ()
    #: Inputs given twice, nested cluster directories passed over, ...
    notes: tuple[str, ...] = ()
    #: Which members' own side the inputs show (`evidence.coverage`).
    coverage: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        document = {
            "out": self.out,
            "events": self.events,
            "nodes": list(self.nodes),
            "inputs": list(self.inputs),
            "clusterMembers": self.cluster_members,
        }
        if self.found:
            document["found"] = list(self.found)
        if self.notes:
            document["notes"] = list(self.notes)
        if self.coverage is not None:
            document["coverage"] = self.coverage
        if self.capture is not None:
            document["capture"] = self.capture
        return document


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise DecodeError("not UTF-8 text", source=str(path), offset=line, unit="line") from None


def _cluster_members(events: Iterable[Event]) -> str | None:
    for event in events:
        if event.type == "MemberStart":
            members = event.fields.get("clusterMembers")
            if isinstance(members, str) and members:
                return members
    return None


def read_jsonl(path: Path) -> LoadedEvents:
    """A JSON Lines capture; each event's ref is its 1-based line number."""
    lines = _read_text(path).split("\n")
    events = list(parse_jsonl(lines, source=str(path)))
    refs = [n for n, text in enumerate(lines, start=1) if text.strip() and not text.strip().startswith("#")]
    return LoadedEvents(events, refs, "line", str(path), _cluster_members(events))


def read_replay_file(path: Path) -> LoadedEvents:
    """A replay file (contract §2); each event's ref is its ``seq``."""
    with pa.memory_map(str(path), "r") as source:
        table = replay_file.read_table(source, name=str(path))
        events = replay_file.table_to_events(table, name=str(path))
        refs = table.column("seq").to_pylist()
        metadata = replay_file.check_metadata(table.schema, name=str(path))
    return LoadedEvents(events, refs, "seq", str(path), metadata.cluster_members or _cluster_members(events),
                        metadata=dict(metadata.extra))


class _Seen(NamedTuple):
    """What the whole-recording summaries (`engine.replay.scan`, `recorder.evidence.coverage`) read of
    an event; one stands for every row of a replay file with its node, dir, channel, type and peer."""

    ts: int
    node: int
    dir: str
    channel: str
    type: str
    peer: int | None
    fields: Mapping[str, Any]
    extra: Mapping[str, Any] | None = None  # the lifecycle events, which carry one, are kept whole


#: Rows `ReplayFileInput` keeps whole: the members' lifecycle (any dir), and RequestVote sends (scan's
#: nomination times need their candidateTermId).  A handful per member and election.
_LIFECYCLE_TYPES = ("MemberStart", "MemberStop", "MemberCrash")
#: Local events `engine.replay.scan` reads whole: the lifecycle, and the agent log's state changes (a
#: recorded nomination's time).
_WHOLE_LOCAL_TYPES = (*_LIFECYCLE_TYPES, "ElectionStateChange")
_SHAPE_KEYS = ["node", "dir", "channel", "type", "peer"]


#: Packed shapes of at most this many bits are summarised through a table of 2**bits (`_first_of_each_shape`).
_TABLE_BITS = 16


def _first_of_each_shape(batch: pa.RecordBatch) -> list[tuple[tuple[Any, ...], int]]:
    """Each (node, dir, channel, type, peer) of a checked batch (``peer`` None where null) with its
    earliest ``ts``, in the order the shapes first appear: the rows packed into one number each
    (`packed_rows_and_width`), then each number's first row and earliest time in a table indexed by it (a
    few bits wide, as a real file's are: 0.17 ms a 65k-row batch, against 2.0 ms for `np.unique`'s sort), or
    `np.unique` (no Arrow group-by: its engine costs a replay 50 ms to load)."""
    pc = arrow_compute
    ts = batch.column("ts").to_numpy(zero_copy_only=False)
    node = batch.column("node").to_numpy(zero_copy_only=False)
    codes, names = zip(*(replay_file.column_codes(batch.column(name)) for name in ("dir", "channel", "type")),
                       strict=True)
    peer = batch.column("peer")
    has_peer = pc.is_valid(peer).to_numpy(zero_copy_only=False)
    peers = pc.fill_null(peer, 0).to_numpy(zero_copy_only=False)

    def shape(row: int) -> tuple[Any, ...]:
        return (int(node[row]), names[0][codes[0][row]], names[1][codes[1][row]], names[2][codes[2][row]],
                int(peers[row]) if has_peer[row] else None)

    packing = packed_rows_and_width(node, *codes, has_peer, peers)
    if packing is None:  # (not with the member ids and names of any real file) the rows one by one
        firsts: dict[tuple[Any, ...], int] = {}
        for row, when in enumerate(ts.tolist()):
            one = shape(row)
            if when < firsts.get(one, when + 1):
                firsts[one] = when
        return list(firsts.items())
    key, width = packing
    if width <= _TABLE_BITS:  # (a handful of members, directions, channels, types, peers) a table, no sort
        rows = len(key)
        first = np.full(1 << width, rows, dtype=np.int64)
        np.minimum.at(first, key, np.arange(rows, dtype=np.int64))
        present = np.flatnonzero(first < rows)
        earliest = np.full(1 << width, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(earliest, key, ts)
        return [(shape(int(first[packed])), int(earliest[packed]))
                for packed in present[np.argsort(first[present], kind="stable")].tolist()]
    unique, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    earliest = np.full(len(unique), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(earliest, inverse, ts)
    return [(shape(int(first[group])), int(earliest[group])) for group in np.argsort(first, kind="stable").tolist()]


class ReplayFileInput:
    """A replay file opened for `recount replay` to stream (contract §2): memory-mapped, read a record
    batch at a time, never all its events at once.

    Opening it is the first pass (`formats.replay_file.ReplayFile.checked`: every batch validated and
    its rows checked as `read_replay_file` checks them), which keeps only what the command needs
    before it replays, from a few columns: the first time each (node, dir, channel, type, peer) occurs
    (so the members, the coverage warnings and `engine.replay.scan`'s facts, for any ``--until``), the
    last time, the members' lifecycle events and the RequestVote sends (whole), and, for a file whose
    metadata does not say what Aeron made it, the cluster schema versions of its captured messages.
    `ordered(until)` gives the events in replay order: file order when ``ts`` never decreases in the
    file (what `convert` writes), else by a stable sort of the ``ts`` column alone (the order kept as 4
    bytes per event).
    Pages of the mapping are given back to the OS after each batch (`release`), so resident memory
    stays that of one batch whatever the file's size.
    """

    ref_kind = "seq"

    def __init__(self, path: str | Path) -> None:
        self.source = str(path)
        with open(path, "rb") as handle:
            try:
                self._map: mmap.mmap | None = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError:  # an empty file cannot be mapped
                self._map = None
        data = pa.py_buffer(self._map) if self._map is not None else b""
        self.file = replay_file.ReplayFile(data, name=self.source)
        metadata = self.file.metadata
        self.metadata: dict[str, str] = dict(metadata.extra)
        self.rows = len(self.file)
        self._shapes: dict[tuple[Any, ...], int] = {}  # (node, dir, channel, type, peer) -> first ts
        self.last_ts: int | None = None
        self._kept: list[tuple[int, Event]] = []  # (row, event)
        stored = stored_evidence(self.metadata)
        versions: Counter[int] | None = Counter() if stored is None else None
        for first, batch in self.file.checked():
            self._summarise(first, batch, versions)
            self.release()
        self.evidence = stored if stored is not None else evidence_of_schema_versions(versions or {})
        self.nodes = tuple(sorted({key[0] for key in self._shapes}))
        self.first_ts = min(self._shapes.values(), default=None)
        self.cluster_members = metadata.cluster_members or _cluster_members(
            event for _, event in self._kept if event.type == "MemberStart")

    def _summarise(self, first: int, batch: pa.RecordBatch, versions: Counter[int] | None) -> None:
        pc = arrow_compute
        if not batch.num_rows:
            return
        for key, ts in _first_of_each_shape(batch):
            known = self._shapes.get(key)
            if known is None or ts < known:
                self._shapes[key] = ts
        last = pc.max(batch.column("ts")).as_py()
        self.last_ts = last if self.last_ts is None else max(self.last_ts, last)
        # the rows kept whole, from the columns' codes (no string compared per row; type and dir have no nulls)
        kinds, kind_names = replay_file.column_codes(batch.column("type"))
        directions, direction_names = replay_file.column_codes(batch.column("dir"))
        whole = np.array([name in _WHOLE_LOCAL_TYPES for name in kind_names], dtype=bool)
        vote = np.array([name == "RequestVote" for name in kind_names], dtype=bool)
        out = np.array([name == "out" for name in direction_names], dtype=bool)
        rows = np.flatnonzero(whole[kinds] | (vote[kinds] & out[directions])).tolist()
        if rows:
            number = self.file.batch_of(first)
            events, _ = self.file.events(number, rows)
            self._kept.extend(zip((first + r for r in rows), events, strict=True))
        if versions is not None:
            _count_schema_versions(batch, first, versions, self.source)

    def release(self) -> None:
        """Give the pages of the mapping read so far back to the OS (they are read again if needed)."""
        if self._map is not None and hasattr(self._map, "madvise"):
            self._map.madvise(mmap.MADV_DONTNEED)

    def close(self) -> None:
        self.file = None  # type: ignore[assignment]
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # events or batches still refer to it: the OS unmaps it at exit
                pass

    def lifecycle_events(self) -> list[Event]:
        """The members' MemberStart/MemberStop/MemberCrash events, in file order."""
        return [event for _, event in self._kept if event.type in _LIFECYCLE_TYPES]

    def coverage(self) -> Any:
        """`recorder.evidence.coverage` of the file's events (which is all about who sent what to whom)."""
        from recorder.evidence import coverage

        return coverage((_Seen(ts, *key, {}) for key, ts in self._shapes.items()), self.cluster_members)

    def facts(self, until: int | None = None, tolerance_ns: int | None = None) -> Any:
        """`engine.replay.scan` of the events up to ``until``: it asks which channels and observation
        kinds each member's rows have, when each first started, when it first sent RequestVote for each
        term or logged NOMINATE -> CANDIDATE_BALLOT, and what evidence gaps the lifecycle events'
        ``extra`` reports (at ``tolerance_ns``); stand-ins at each shape's first time, and the RequestVote
        sends, state changes and lifecycle events kept whole, give it the same answers as every row would."""
        from engine.replay import DEFAULT_TOLERANCE_NS, scan

        whole = ("RequestVote", *_WHOLE_LOCAL_TYPES)
        seen = [(ts, -1, _Seen(ts, *key, {})) for key, ts in self._shapes.items()
                if key[3] not in whole and (until is None or ts <= until)]
        seen += [(event.ts, row, event) for row, event in self._kept
                 if (event.type in _WHOLE_LOCAL_TYPES or (event.type == "RequestVote" and event.dir == "out"))
                 and (until is None or event.ts <= until)]
        seen.sort(key=lambda item: (item[0], item[1]))
        return scan((item[2] for item in seen), DEFAULT_TOLERANCE_NS if tolerance_ns is None else tolerance_ns)

    def ordered(self, until: int | None = None) -> Any:
        """The events up to ``until`` in replay order (`engine.replay.OrderedEvents`), read a batch at a time."""
        return _FileEvents(self, until)


def _count_schema_versions(batch: pa.RecordBatch, first: int, versions: Counter[int], name: str) -> None:
    """`recorder.version_evidence.schema_versions` over a batch's rows, from its payload and extra columns."""
    pc = arrow_compute
    names = batch.schema.names
    if "payload" not in names or "extra" not in names:
        return
    payload, extra = batch.column("payload"), batch.column("extra")
    candidates = pc.fill_null(pc.and_(pc.greater_equal(pc.binary_length(payload), 8), pc.is_valid(extra)), False)
    rows = np.flatnonzero(candidates.to_numpy(zero_copy_only=False))
    if not len(rows):
        return
    texts = pc.take(extra, pc.int64_array(rows)).to_pylist()
    captured = [r for r, text in zip(rows.tolist(), texts, strict=True)
                if text and "packet" in (replay_file.extra_of(text, first + r, name) or {})]
    if not captured:
        return
    headers = pc.take(payload, pa.array(captured, type=pa.int64()))
    offsets = np.frombuffer(headers.buffers()[1], dtype=np.int64 if pa.types.is_large_binary(headers.type) else np.int32)
    starts = offsets[headers.offset : headers.offset + len(headers)]
    data = np.frombuffer(headers.buffers()[2], dtype=np.uint8)

    def uint16(at: int) -> np.ndarray:
        return data[starts + at].astype(np.int64) | (data[starts + at + 1].astype(np.int64) << 8)

    schema_ids, schema_versions = uint16(4), uint16(6)
    for version, count in zip(*np.unique(schema_versions[schema_ids == CLUSTER_SCHEMA_ID], return_counts=True),
                              strict=True):
        versions[int(version)] += int(count)


class _FileEvents:
    """A `ReplayFileInput`'s events up to ``until``, in replay order, built a batch at a time: an
    `engine.replay.OrderedEvents`."""

    ref_kind = "seq"

    #: Events built at a time from a batch read in file order (a batch is 65,536 rows as `convert` writes it).
    SLICE = 8192
    #: Events taken at a time when the file is read in sorted order rather than file order.
    CHUNK = 8192

    def __init__(self, opened: ReplayFileInput, until: int | None) -> None:
        pc = arrow_compute
        self._opened = opened
        self.until = until
        file = opened.file
        self._order: np.ndarray | None = None
        if file.in_order:
            if until is None:
                self._count = file.rows
            else:  # ts never decreases: the events up to until are the first ones
                self._count = sum(int(pc.sum(pc.less_equal(batch.column("ts"), until)).as_py() or 0)
                                  for batch in file.batches)
        else:
            ts = np.concatenate([batch.column("ts").to_numpy() for batch in file.batches] or [np.zeros(0, np.int64)])
            order = np.argsort(ts, kind="stable")
            if until is not None:
                order = order[: int(np.searchsorted(ts[order], until, side="right"))]
            self._order = order.astype(np.int32 if file.rows < 2**31 else np.int64)
            self._count = len(order)
        opened.release()
        self._facts: dict[int | None, Any] = {}

    def facts(self, tolerance_ns: int | None = None) -> Any:
        """`engine.replay.scan` of these events (`ReplayFileInput.facts`)."""
        facts = self._facts.get(tolerance_ns)
        if facts is None:
            facts = self._facts[tolerance_ns] = self._opened.facts(self.until, tolerance_ns)
        return facts

    def __len__(self) -> int:
        return self._count

    def at(self, k: int) -> tuple[Event, Any]:
        """The k-th event in replay order, built on its own (not the slice `read` builds around it)."""
        if self._order is not None:
            return next(iter(self.read(k)))
        file = self._opened.file
        number = file.batch_of(k)
        first = file.starts[number]
        # as `read` builds it: within the slice of SLICE rows it reads it in (from the batch's start)
        start = first + (k - first) // self.SLICE * self.SLICE
        stop = min(start + self.SLICE, first + file.batches[number].num_rows, self._count)
        events, seqs = file.events(number, [k - first], context=slice(start - first, stop - first))
        return events[0], seqs[0]

    #: Events built at a time for the rows the steady-state lane gives back to the model's path, and how
    #: many times a slice builds some before it builds them all.
    LANE_BLOCK = 64
    LANE_SINGLES = 16

    def lane_chunks(self, start: int = 0, chunk_rows: int | None = None
                    ) -> Iterator[tuple[int, list[tuple], Any]] | None:
        """The events from ``start`` as rows of the steady-state lane (`engine.steady`): the typed
        columns of a slice of a batch at a time (no `Event` built; ``chunk_rows`` at most, default `SLICE`),
        with a function giving the event of one of its rows (built a block at a time when the lane
        declines one).  None when the file is not in replay order."""
        if self._order is not None:
            return None
        return self._lane_chunks(start, chunk_rows or self.SLICE)

    def _lane_chunks(self, start: int, size: int) -> Iterator[tuple[int, list[tuple], Any]]:
        from engine.steady import lane_rows

        file, release, count = self._opened.file, self._opened.release, self._count
        position = start
        while position < count:
            number = file.batch_of(position)
            first = file.starts[number]
            stop = min(count, position + size, first + file.batches[number].num_rows)
            batch = file.batches[number].slice(position - first, stop - position)
            rows = lane_rows(batch)
            built: dict[int, tuple[Event, Any]] = {}
            calls = [0]

            def event_at(i: int, number: int = number, offset: int = position - first, built: dict = built,
                         size: int = stop - position, block: int = self.LANE_BLOCK, calls: list = calls
                         ) -> tuple[Event, Any]:
                # one event, or a block of them once the lane declines two in a row (an election), or the
                # whole slice once it has declined often in it (as `read` builds it)
                one = built.get(i)
                if one is None:
                    calls[0] += 1
                    if calls[0] > self.LANE_SINGLES:
                        at, count = 0, size
                    else:
                        at, count = i, min(block, size - i) if i - 1 in built else 1
                    events, seqs = file.events(number, slice(offset + at, offset + at + count),
                                               context=slice(offset, offset + size))
                    for j in range(count):
                        built.setdefault(at + j, (events[j], seqs[j]))
                    one = built[i]
                return one

            yield position, rows, event_at
            position = stop
            if position == first + file.batches[number].num_rows:
                release()

    def read(self, start: int = 0) -> Iterator[tuple[Event, Any]]:
        file, release, count = self._opened.file, self._opened.release, self._count
        if self._order is None:
            position = start
            while position < count:
                number = file.batch_of(position)
                first = file.starts[number]
                # A slice of the batch at a time: the Python values of SLICE events are what is held.
                stop = min(count, position + self.SLICE, first + file.batches[number].num_rows)
                events, seqs = file.events(number, slice(position - first, stop - first))
                yield from zip(events, seqs, strict=True)
                position = stop
                if position == first + file.batches[number].num_rows:
                    release()
            return
        order, starts = self._order, np.asarray(file.starts, dtype=np.int64)
        for chunk in range(start, count, self.CHUNK):
            rows = order[chunk : min(chunk + self.CHUNK, count)].astype(np.int64)
            numbers = np.searchsorted(starts, rows, side="right") - 1
            placed: list[Any] = [None] * len(rows)
            for number in np.unique(numbers).tolist():
                where = np.flatnonzero(numbers == number)
                events, seqs = file.events(number, (rows[where] - starts[number]).tolist())
                for at, event, seq in zip(where.tolist(), events, seqs, strict=True):
                    placed[at] = (event, seq)
            yield from placed
            release()


def read_capture(path: Path) -> LoadedEvents:
    """One capture input on its own (a pcap, an agent log or a cluster dir); `convert` reads them together."""
    from recorder import capture  # here: reading a replay file never needs the capture importers

    return _loaded_captures(capture.load_captures([path]))


def _loaded_captures(load: Any) -> LoadedEvents:  # a `recorder.capture.CaptureLoad`
    # A capture's events come from packets, log lines and directories alike: refer to them by number
    # (each event also keeps its packet or line number under extra).
    refs = list(range(1, len(load.events) + 1))
    source = ",".join(str(i.get("path")) for i in load.inputs)
    return LoadedEvents(load.events, refs, "event", source, load.cluster_members,
                        metadata=to_metadata(load.evidence) or None)


READERS: dict[str, InputReader] = {
    "jsonl": InputReader("jsonl", (".jsonl", ".ndjson"), read_jsonl, "JSON Lines events (contract §1)"),
    "pcap": InputReader("pcap", (".pcap", ".cap"), read_capture, "a tcpdump capture of the cluster's UDP traffic",
                        captures=True),
    "pcapng": InputReader("pcapng", (".pcapng",), read_capture, "a pcapng capture (Wireshark, dumpcap)",
                          captures=True),
    "agent-log": InputReader("agent-log", (), read_capture, "an aeron-agent event log (Aeron 1.40-1.50 text)", captures=True),
    "cluster-dir": InputReader("cluster-dir", (), read_capture, "a member's cluster directory", captures=True),
    "archive-dir": InputReader("archive-dir", (), read_capture,
                               "a member's archive directory, next to or inside its cluster directory", captures=True),
    "recording": InputReader("recording", (".arrows",), read_capture, "a `recount record` recording", captures=True),
}

#: What `recount replay` reads: every capture format, and replay files.
REPLAY_READERS: dict[str, InputReader] = {
    **READERS,
    "arrow": InputReader("arrow", (".arrow", ".feather", ".ipc"), read_replay_file, "a recount replay file"),
}


def reader_for(path: str | Path, *, format: str | None = None, readers: dict[str, InputReader] = READERS) -> InputReader:
    """The reader for ``path``: the one named by ``format``, else the one claiming its suffix."""
    if format == "auto":
        format = None
    if format is not None:
        reader = readers.get(format)
        if reader is None:
            raise DecodeError(f"unknown input format {format!r} (known: {', '.join(sorted(readers))})", source=str(path))
        return reader
    name = str(path).lower()
    for reader in readers.values():
        if reader.suffixes and name.endswith(reader.suffixes):
            return reader
    from recorder import capture

    detected = capture.detect_format(path)  # by magic bytes, a log's first line, a directory's files
    if detected is not None and detected in readers:
        return readers[detected]
    suffixes = ", ".join(s for r in readers.values() for s in r.suffixes)
    raise DecodeError(f"cannot tell the input format from the file name (expected one of {suffixes})", source=str(path))


def load(path: str | Path, *, format: str | None = None, readers: dict[str, InputReader] = REPLAY_READERS,
         progress: Callable[[int], None] | None = None) -> LoadedEvents:
    """Read one input (a capture or a replay file) into events; an incident directory, a member's
    directory or a tarball of one is converted in memory (`load_incident`)."""
    if format in (None, "auto") and discovery.is_container(path):
        return load_incident(path, progress=progress)
    path = Path(path)
    if path.is_dir() and format not in ("cluster-dir", "archive-dir", "auto", None):
        raise IsADirectoryError(21, "is a directory, expected a file", str(path))
    reader = reader_for(path, format=format, readers=readers)
    if path.is_dir() and reader.name not in ("cluster-dir", "archive-dir"):
        raise IsADirectoryError(21, "is a directory, expected a file", str(path))
    return reader.read(path)


def cluster_config(properties: Mapping[str, Any]) -> dict[str, int]:
    """Aeron properties (values as numbers or Agrona strings such as ``"2s"``), checked as
    `Config.from_properties` checks them (a `ValueError` names a bad one), each as its number."""
    parsed = Config.from_properties(properties).to_properties()
    return {name: parsed[name] for name in sorted(properties)}


def with_config(events: Iterable[Event], config: Mapping[str, int]) -> list[Event]:
    """The events with ``config`` set in every MemberStart (over the event's own values)."""
    out = []
    for event in events:
        if event.type == "MemberStart" and event.dir == "local":
            own = event.fields.get("config")
            merged = {**(own if isinstance(own, Mapping) else {}), **config}
            event = dataclasses.replace(event, fields={**event.fields, "config": dict(sorted(merged.items()))})
        out.append(event)
    return out


def merge(loaded: Sequence[LoadedEvents]) -> list[Event]:
    """All inputs' events in one global order: by ts; ties keep input order, then file order."""
    keyed = [(event.ts, i, j, event) for i, one in enumerate(loaded) for j, event in enumerate(one.events)]
    keyed.sort(key=lambda t: (t[0], t[1], t[2]))
    return [t[3] for t in keyed]


@dataclass(slots=True)
class Built:
    """One incident's events in replay order, and what was found, assumed and noted on the way.

    ``events`` are `EventColumns` when the inputs were captures read in bulk (no agent logs, nothing
    else to merge): a replay file is then written from the columns without an object per event."""

    events: list[Event] | EventColumns
    inputs: list[str]
    cluster_members: str | None
    captured: Any | None  #: `recorder.capture.CaptureLoad` when there were captures
    found: list[dict[str, Any]]
    notes: list[str]

    def table(self) -> pa.Table:
        if isinstance(self.events, EventColumns):
            return self.events.to_table(source=self.source(), cluster_members=self.cluster_members,
                                        metadata=self.metadata())
        return replay_file.events_to_table(self.events, source=self.source(), cluster_members=self.cluster_members,
                                           metadata=self.metadata())

    def write(self, sink: Any) -> None:
        """The replay file (`table`'s bytes), written record batch by record batch when it can be."""
        if isinstance(self.events, EventColumns):
            from recorder.capture.bulk import give_back_memory

            give_back_memory()  # what building the incident freed, before the batches are made
            self.events.write_replay(sink, source=self.source(), cluster_members=self.cluster_members,
                                     metadata=self.metadata())
        else:
            replay_file.write_table(self.table(), sink)

    def source(self) -> str:
        return ",".join(os.path.basename(str(p).rstrip("/")) for p in self.inputs)

    def metadata(self) -> dict[str, str] | None:
        """What the captures show of the Aeron version (`recorder.version_evidence`), for the file's metadata."""
        return to_metadata(self.captured.evidence) if self.captured is not None else None

    def result(self, out: str) -> ConvertResult:
        from recorder.evidence import coverage

        return ConvertResult(
            out=out,
            events=len(self.events),
            nodes=tuple(self.events.nodes() if isinstance(self.events, EventColumns)
                        else sorted({e.node for e in self.events})),
            inputs=tuple(self.inputs),
            cluster_members=self.cluster_members,
            capture=self.captured.summary() if self.captured is not None else None,
            found=tuple(_assigned(self.found, self.captured)),
            notes=tuple(self.notes),
            coverage=coverage(self.events, self.cluster_members).to_json(),
        )


def _assigned(found: Sequence[dict[str, Any]], captured: Any | None) -> list[dict[str, Any]]:
    """``found`` (`discovery.Expanded.found`) with the member each input was taken for: ``members``
    (an agent log's or cluster dir's member; the members a capture was taken beside)."""
    members_of: dict[str, list[int]] = {}
    for item in captured.inputs if captured is not None else []:
        if item.get("kind") in ("agent-log", "cluster-dir") and item.get("node") is not None:
            members_of[os.path.realpath(item["path"])] = [item["node"]]
        elif item.get("kind") == "capture":
            members_of[os.path.realpath(item["path"])] = list(item.get("localMembers") or [])
    out = []
    for given in found:
        items = []
        for item in given["found"]:
            assigned = members_of.get(os.path.realpath(item["absolute"])) if "absolute" in item else None
            items.append({"path": item["path"], "kind": item["kind"], "members": assigned or []})
        out.append({"given": given["given"], "found": items})
    return out


def build(
    inputs: Sequence[str | Path],
    *,
    format: str | None = None,
    members: str | None = None,
    progress: Callable[[int], None] | None = None,
    config: Mapping[str, Any] | None = None,
    bulk: bool = True,
) -> Built:
    """Read ``inputs`` (files, cluster dirs, incident directories, tarballs) into one incident's events.

    Directories and tarballs are looked into by `recorder.discovery.expand_inputs` (the bulk mode's
    discovery); an input given twice is read once.  Captures (pcap/pcapng, agent logs, cluster dirs)
    are read together by `recorder.capture`, with ``members`` (the cluster members string) and
    ``progress`` (called with bytes read).  ``config`` (Aeron property → value) goes into every
    member's MemberStart; a bad property is a `ValueError` raised before anything is read.
    ``bulk=False`` takes the reference path (`recorder.capture.load_captures`): the same events, and
    the same replay file, made one `Event` at a time.
    """
    if not inputs:
        raise ValueError("no inputs given")
    properties = cluster_config(config) if config else None
    for given in inputs:
        if not os.path.exists(given):
            raise FileNotFoundError(2, "no such file or directory", str(given))
    names = [str(p) for p in inputs]
    # With --format given, every input is of that format: nothing to look into.
    expanded = discovery.expand_inputs(names) if format in (None, "auto") else discovery.Expanded(names)
    with expanded:
        paths, repeated = discovery.distinct_inputs(expanded.paths)
        notes = expanded.notes + repeated
        kinds = [reader_for(path, format=format, readers=READERS) for path in paths]
        captured = None
        capture_paths = [path for path, kind in zip(paths, kinds, strict=True) if kind.captures]
        if capture_paths:
            from recorder import capture

            kind_of = "auto" if format in (None, "auto") else format
            captured = capture.load_captures(capture_paths, members=members, format=kind_of, progress=progress,
                                             bulk=bulk)
        in_bulk = captured is not None and captured.columns is not None and len(capture_paths) == len(paths)
        loaded = []
        for path, kind in zip(paths, kinds, strict=True):
            if not kind.captures:
                loaded.append(load(path, format=kind.name, readers=READERS))
            elif path == capture_paths[0] and not in_bulk:
                loaded.append(_loaded_captures(captured))
    # Captures alone, read in bulk: one input, already in time order (what `merge` would keep).
    events = captured.columns if in_bulk else merge(loaded)
    if not len(events):
        raise DecodeError("holds no events (expected at least one JSON Lines event or decodable capture)",
                          source=", ".join(names))
    if properties:
        events = _member_starts_changed(events, lambda starts: (with_config(starts, properties), None))[0]
    if captured is not None:  # settings the wire shows plainly (recorder.settings); --config wins
        from recorder.settings import apply_inferred, infer_settings

        inferred = infer_settings(events)
        events, inferred_notes = _member_starts_changed(events, lambda starts: apply_inferred(starts, inferred))
        notes = list(notes) + inferred_notes
    members = members or ((captured.cluster_members or None) if in_bulk else
                          next((one.cluster_members for one in loaded if one.cluster_members), None))
    return Built(events, paths, members, captured, expanded.found, notes)


def _member_starts_changed(events: list[Event] | EventColumns,
                           change: Callable[[list[Event]], tuple[list[Event], Any]]) -> tuple[Any, Any]:
    """``change`` (which replaces MemberStart events and passes the others through) applied to
    ``events``: on columns, only their MemberStart rows are made into events and changed."""
    if not isinstance(events, EventColumns):
        return change(list(events))
    rows = events.rows_of_type("MemberStart").tolist()
    starts = [events.event(row) for row in rows]
    changed, extra = change(starts)
    replaced = {row: new for row, new, old in zip(rows, changed, starts, strict=True) if new is not old}
    return events.with_events(replaced), extra


def check_output(out: str | Path, *, force: bool = False) -> Path:
    """``out`` as a replay file to write: refused when it exists (without ``force``), is a directory,
    or its directory does not exist; every error names ``out`` as the user gave it."""
    out = Path(out)
    if out.exists() and not force:
        raise OutputExistsError(17, "exists (use --force to overwrite it)", str(out))
    if out.is_dir():
        raise IsADirectoryError(21, "is a directory, expected a file name", str(out))
    parent = out.parent
    if not parent.is_dir():
        raise FileNotFoundError(2, f"cannot write it: directory {str(parent)!r} does not exist", str(out))
    if not os.access(parent, os.W_OK):
        raise PermissionError(13, f"cannot write it: directory {str(parent)!r} is not writable", str(out))
    return out


def write_atomically(table: pa.Table | Built, out: Path, *, force: bool = False) -> None:
    """``table`` (or a `Built` incident's replay file) as ``out``, written aside then renamed; errors
    name ``out``.

    With ``force`` (the user's ``--force``), a regular file already at ``out`` is first renamed aside
    and removed only once the new file is in place (`_replace_aside`): a rename over an existing file
    makes ext4 (``auto_da_alloc``) write the new file out there and then, 50-90 ms for a 150 MB replay
    file, while renames to free names do not.  ``out`` is missing for that moment (the old file is
    beside it, and put back if the rename fails); without ``force`` the rename replaces in one step."""
    temporary = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    try:
        with pa.OSFile(str(temporary), "wb") as sink:
            if isinstance(table, Built):
                table.write(sink)
            else:
                replay_file.write_table(table, sink)
        replaced = _held(out)
        try:
            if force and replaced is not None:
                _replace_aside(temporary, out)
            else:
                os.replace(temporary, out)
        finally:
            _let_go(replaced)
    except OSError as error:
        reason = error.strerror or str(error).replace(str(temporary), str(out))
        raise OSError(error.errno or 5, f"cannot write it: {reason}", str(out)) from None
    finally:
        if temporary.exists():
            temporary.unlink()


def _replace_aside(new: Path, out: Path) -> None:
    """``new`` renamed to ``out``, the regular file at ``out`` renamed aside first and removed after
    (put back if ``new`` cannot take its place).  A file already at the aside name (left by a run that
    was killed there) is left alone: ``out`` is then replaced in one step."""
    aside = out.with_name(f"{out.name}.old-{os.getpid()}")
    if os.path.lexists(aside):
        os.replace(new, out)
        return
    os.rename(out, aside)
    try:
        os.rename(new, out)
    except OSError:
        os.rename(aside, out)
        raise
    os.unlink(aside)


def _held(path: Path) -> int | None:
    """A descriptor of the regular file ``path`` names now (None: none, or not on POSIX), so that
    replacing it does not free its pages there and then (see `_let_go`)."""
    if os.name != "posix":
        return None
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:  # no file there yet, or not readable: replaced as it is
        return None
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        return None
    return descriptor


def _let_go(descriptor: int | None) -> None:
    """Close the replaced file's last descriptor on a thread of its own: the kernel frees the file's
    pages then (60 ms for a 150 MB replay file, half a small conversion's writing), while the command
    goes on to its summary.  The process's exit waits for it as for any system call under way."""
    if descriptor is not None:
        threading.Thread(target=os.close, args=(descriptor,), name="recount-let-go", daemon=True).start()


def convert(
    inputs: Sequence[str | Path],
    out: str | Path,
    *,
    force: bool = False,
    format: str | None = None,
    members: str | None = None,
    progress: Callable[[int], None] | None = None,
    config: Mapping[str, Any] | None = None,
) -> ConvertResult:
    """Convert ``inputs`` into the replay file ``out`` (atomically; refuses to overwrite without force):
    `check_output`, `build`, `Built.table`, `write_atomically`.  See `build` for the inputs and options."""
    out = check_output(out, force=force)
    built = build(inputs, format=format, members=members, progress=progress, config=config)
    write_atomically(built, out, force=force)
    return built.result(str(out))


def load_incident(path: str | Path, *, progress: Callable[[int], None] | None = None) -> LoadedEvents:
    """An incident directory, a member's directory or a tarball of one, converted in memory: the same
    events, in the same order and with the same refs, as converting it to a file and loading that."""
    built = build([path], progress=progress)
    table = built.table()
    events = replay_file.table_to_events(table, name=str(path))
    refs = table.column("seq").to_pylist()
    summary = built.result("").to_json()
    summary.pop("out")
    return LoadedEvents(events, refs, "seq", str(path), built.cluster_members, summary=summary,
                        metadata=built.metadata())
