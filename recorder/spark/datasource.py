"""The ``aeron-capture`` Spark data source: captures under a directory → one row per decoded event.

    spark.read.format("aeron-capture").load("captures/")            # events
    spark.read.format("aeron-capture-errors").load("captures/")     # what could not be read

Both formats are registered by `register(spark)` (`recorder.spark.job.spark_session` does it).

**Inputs and incidents.**  `recorder.discovery.discover` (the same discovery the single-incident
commands use) walks each path given to ``load``: captures, aeron-agent logs, JSON Lines and members'
cluster directories, grouped into *incidents*: the directories ``incidentDepth`` levels below a path
given to ``load`` (default 1, so ``captures/<incident>/...``); inputs lying higher up belong to the
incident of their own directory.  ``groupBy=file`` makes every input its own incident.  Within an
incident, inputs are in path order.

**Partitions** (option ``split``):

* ``file`` (the default): one partition per input file.  Each capture file is decoded alone into the
  messages it holds (without the MemberStart/End events a replay adds), with the incident's members
  string (option ``members``, else the one a cluster directory of the incident holds, else inferred
  from the file's own traffic).
  Classic pcap files larger than ``chunkBytes`` (default 128 MiB) are split at record boundaries
  (found on the driver by walking the record headers, `plan_pcap_chunks`) when the members string
  is known, so that one big capture is decoded by many tasks.  A chunk's decoder needs the stream
  state the packets before it built up; it gets it this way:

  - *SETUP*: the planning walk keeps, per stream, the last SETUP frame seen before the chunk's
    warm-up; the chunk decoder replays it (with its active term and offset moved to the stream's first
    frame in the chunk) before that frame, so stream positions (and log positions) are exact.
  - *Reassembly*: the chunk starts decoding ``warmupBytes`` (default 8 MiB) of records before its
    first packet and keeps only events completed at its own packets, and decodes on for
    ``warmupBytes`` after its last packet before flushing, so that a message cut by the chunk
    boundary is whole in exactly one chunk (the one holding its last fragment).
  - *Senders*: consensus messages name their sender; log and egress publications are identified
    by source address, or by a NewLeadershipTerm / SessionEvent seen in the warm-up.  A publication
    identified only by a message outside the warm-up falls back to the decoder's end-of-capture rules
    (the receiver's leader; an ``unattributed`` error row when none applies), which the whole-file
    decode might not have needed.

  Splitting is therefore limited to between-record boundaries with a warm-up overlap; a message
  longer than the warm-up, or a stream whose identity was shown only long before, can differ from the
  whole-file decode.  Pcapng files are not split (each block's meaning depends on the section's
  interface blocks).  Agent logs, JSON Lines files and cluster directories are one partition each.
  Several hosts' captures of one incident each show the messages they saw, so a message can appear
  once per capture.

* ``incident``: one partition per incident, all its inputs decoded together exactly as the local
  converter does (`decode_incident` runs `recorder.convert.convert` itself): the rows are the
  replay file's rows, in its order, ``seq`` included.  ``recount convert --engine spark`` writes the
  same files (`recorder.spark.job`).

**Schema.**  A Spark schema is fixed before any file is read, while a replay file has one column per
field name it meets.  The rows carry the replay file's base columns (``seq`` — null in ``file``
mode, where a file's rows are in ``ts`` then ``packet`` order —, ``ts``, ``node``, ``dir``,
``channel``, ``type``, ``peer``, ``payload``, ``fields`` (the canonical JSON, the lossless form),
``extra``), then ``incident``, ``sourceFile`` (in ``incident`` mode the replay's source: its inputs'
names) and ``packet`` (the capture's packet number, when the event came from one), then the common
consensus fields in `FIELD_COLUMNS` (typed; null when the event has no such field or its value is of
another type: ``fields`` always has it).  Rows are produced as Arrow record batches.

**Errors.**  Unreadable records never fail the job: ``aeron-capture-errors`` (or option
``errors=true``) yields one row per problem — ``incident``, ``sourceFile``, ``category``,
``detail``, ``packet``, ``offset``, ``line`` — from the same partitions: records skipped inside a file
(truncation, corrupt frames, unknown templates, ...) and inputs that could not be read at all
(category ``unreadable input``).  The events output of such an input is empty.

Workers need recount importable (installed, or shipped with ``--py-files``).  Everything here is
deterministic: partitions and rows come out in the same order for the same files.
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

# Discovery is shared with the single-incident commands: one walk, one set of rules.
from recorder.discovery import INPUT_KINDS, Incident, Input, discover, input_kind  # noqa: F401

FORMAT_NAME = "aeron-capture"
ERRORS_FORMAT_NAME = "aeron-capture-errors"

DEFAULT_CHUNK_BYTES = 128 * 1024 * 1024
DEFAULT_WARMUP_BYTES = 8 * 1024 * 1024
BATCH_ROWS = 65536

#: The consensus fields every row has a typed column for (by Aeron name), and their Spark types.
FIELD_COLUMNS: dict[str, str] = {
    "candidateTermId": "long",
    "leadershipTermId": "long",
    "logLeadershipTermId": "long",
    "logPosition": "long",
    "termBaseLogPosition": "long",
    "nextLeadershipTermId": "long",
    "nextTermBaseLogPosition": "long",
    "nextLogPosition": "long",
    "leaderMemberId": "long",
    "followerMemberId": "long",
    "candidateMemberId": "long",
    "memberId": "long",
    "logSessionId": "long",
    "leaderRecordingId": "long",
    "timestamp": "long",
    "vote": "string",
    "isStartup": "string",
}

_BASE_SCHEMA = [
    ("seq", "long", pa.int64()),
    ("ts", "long", pa.int64()),
    ("node", "int", pa.int32()),
    ("dir", "string", pa.string()),
    ("channel", "string", pa.string()),
    ("type", "string", pa.string()),
    ("peer", "int", pa.int32()),
    ("payload", "binary", pa.binary()),
    ("fields", "string", pa.string()),
    ("extra", "string", pa.string()),
    ("incident", "string", pa.string()),
    ("sourceFile", "string", pa.string()),
    ("packet", "long", pa.int64()),
]
_ARROW_TYPES = {"long": pa.int64(), "string": pa.string()}

EVENTS_ARROW_SCHEMA = pa.schema(
    [pa.field(name, arrow) for name, _, arrow in _BASE_SCHEMA]
    + [pa.field(name, _ARROW_TYPES[kind]) for name, kind in FIELD_COLUMNS.items()]
)
EVENTS_SCHEMA = ", ".join(
    [f"`{name}` {kind}" for name, kind, _ in _BASE_SCHEMA] + [f"`{name}` {kind}" for name, kind in FIELD_COLUMNS.items()]
)
ERRORS_ARROW_SCHEMA = pa.schema([
    pa.field("incident", pa.string()),
    pa.field("sourceFile", pa.string()),
    pa.field("category", pa.string()),
    pa.field("detail", pa.string()),
    pa.field("packet", pa.int64()),
    pa.field("offset", pa.int64()),
    pa.field("line", pa.int64()),
])
ERRORS_SCHEMA = ("`incident` string, `sourceFile` string, `category` string, `detail` string, `packet` long,"
                 " `offset` long, `line` long")

def incident_members(incident: Incident, given: str | None = None) -> str | None:
    """The members string for ``incident``: ``given``, else the first cluster directory's node-state."""
    if given:
        return given
    from recorder.cluster_dir import read_cluster_dir

    for item in incident.inputs:
        if item.kind != "cluster-dir":
            continue
        try:
            directory = read_cluster_dir(item.path)
        except Exception:  # noqa: BLE001 - an unreadable directory is reported when it is decoded
            continue
        state = directory.node_state.state if directory.node_state is not None else None
        members = getattr(getattr(state, "cluster_members", None), "cluster_members", None)
        if members:
            return members
    return None


# --- decoding --------------------------------------------------------------------------------------
@dataclass(slots=True)
class Decoded:
    """What one partition decoded: its replay table (rows in order) and the problems met."""

    table: pa.Table | None  #: None when there were no events
    problems: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    summary: dict[str, Any] | None = None  #: the local converter's result (``incident`` mode)


def _problem_rows(problems: Sequence[Any], default_file: str | None) -> list[dict[str, Any]]:
    rows = []
    for problem in problems:
        row = problem.to_json() if hasattr(problem, "to_json") else dict(problem)
        row.setdefault("file", default_file)
        rows.append(row)
    return rows


def _decoded_events(events: Sequence[Any], source: str, cluster_members: str | None,
                    problems: list[dict[str, Any]], notes: Sequence[str]) -> Decoded:
    from formats import replay_file

    table = replay_file.events_to_table(events, source=source, cluster_members=cluster_members) if events else None
    return Decoded(table, problems, list(notes))


def convert_incident_file(inputs: Sequence[str], out: str | os.PathLike[str], *, members: str | None = None
                          ) -> dict[str, Any]:
    """Write the replay file of an incident with the local converter itself; its result as JSON.

    This is the one place the Spark side decodes an incident: `recorder.convert.convert`, the
    function behind ``recount convert INPUT... -o OUT``, so both give the same file.
    """
    from recorder import convert as converter

    return converter.convert(list(inputs), out, force=True, members=members).to_json()


def decode_incident(inputs: Sequence[str], *, members: str | None = None) -> Decoded:
    """All of an incident's inputs decoded together by the local converter: its replay table."""
    import tempfile

    from formats import replay_file

    with tempfile.TemporaryDirectory(prefix="recount-incident-") as scratch:
        path = os.path.join(scratch, "incident.arrow")
        result = convert_incident_file(inputs, path, members=members)
        with pa.OSFile(path, "rb") as source:
            table = replay_file.read_table(source.read_buffer(), name=path)
    problems = (result.get("capture") or {}).get("problems", [])
    notes = (result.get("capture") or {}).get("notes", [])
    return Decoded(table, _problem_rows(problems, None), list(notes), result)


def decode_file(item: Input, *, members: str | None = None) -> Decoded:
    """One input decoded alone (``file`` mode): a capture's messages, a log's observations, a directory's start."""
    name = os.path.basename(item.path.rstrip("/"))
    if item.kind == "jsonl":
        from recorder.convert import read_jsonl

        loaded = read_jsonl(item.path)
        return _decoded_events(loaded.events, name, loaded.cluster_members, [], [])
    if item.kind in ("pcap", "pcapng"):
        # Only what the capture holds: the MemberStart/End events a replay adds belong to the incident.
        from recorder.capture.members import MemberMap
        from recorder.capture.pcap_import import import_pcaps

        member_map = MemberMap.parse(members, source="members") if members else None
        captured = import_pcaps([item.path], member_map)
        return _decoded_events(captured.events, name, captured.members.text,
                               _problem_rows(captured.problems, item.path), captured.notes)
    from recorder.capture import load_captures

    load = load_captures([item.path], members=members, format=item.kind)
    return _decoded_events(load.events, name, load.cluster_members, _problem_rows(load.problems, item.path),
                           load.notes)


@dataclass(frozen=True, slots=True)
class Chunk:
    """Records [start_offset, end_offset) of a classic pcap, packets first_packet..last_packet."""

    start_offset: int
    end_offset: int
    first_packet: int
    last_packet: int | None  #: None for the last chunk
    warmup_offset: int
    warmup_packet: int
    #: per stream, the last SETUP before the warm-up: (src_ip, src_port, dst_ip, dst_port, SetupFrame fields)
    primers: tuple[tuple[str, int, str, int, tuple], ...] = ()


_SETUP_FIELDS = ("term_offset", "session_id", "stream_id", "initial_term_id", "active_term_id", "term_length",
                 "mtu", "ttl", "flags")


def plan_pcap_chunks(path: str, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                     warmup_bytes: int = DEFAULT_WARMUP_BYTES) -> list[Chunk]:
    """Cut a classic pcap into chunks of about ``chunk_bytes`` at record boundaries (one pass on the driver).

    The pass reads only record headers and the first frame header of each UDP payload: where each
    chunk and its warm-up start, and the SETUP frames a chunk's decoder must replay.
    """
    from formats.errors import DecodeError
    from formats.pcap import PcapReader
    from formats.udp import SetupFrame, decode_datagram

    size = os.path.getsize(path)
    if size <= chunk_bytes:
        return [Chunk(24, size, 1, None, 24, 1)]
    targets: list[tuple[int, int, int]] = []  # (offset, 0 = warm-up start / 1 = chunk start, chunk number)
    for k in range(1, (size - 1) // chunk_bytes + 1):
        targets.append((max(24, k * chunk_bytes - warmup_bytes), 0, k))
        targets.append((k * chunk_bytes, 1, k))
    targets.sort()
    starts: dict[int, tuple[int, int]] = {0: (24, 1)}
    warmups: dict[int, tuple[int, int, tuple]] = {0: (24, 1, ())}
    setups: dict[tuple, tuple] = {}
    def scan(view: memoryview) -> bool:
        reader = PcapReader(view, source=path)
        if reader.format != "pcap":
            return False
        next_target = 0
        for packet in reader.packets():
            while next_target < len(targets) and targets[next_target][0] <= packet.file_offset:
                _, kind, k = targets[next_target]
                if kind == 0:
                    warmups[k] = (packet.file_offset, packet.index, tuple(sorted(setups.values())))
                else:
                    starts[k] = (packet.file_offset, packet.index)
                next_target += 1
            payload = packet.payload
            if len(payload) >= 40 and payload[6] == 0x05 and payload[7] == 0:  # a SETUP frame first
                try:
                    frames = decode_datagram(payload)
                except DecodeError:
                    continue
                for frame in frames:
                    if type(frame) is SetupFrame:
                        key = (packet.src_ip, packet.src_port, packet.dst_ip, packet.dst_port, frame.session_id,
                               frame.stream_id)
                        setups[key] = key[:4] + (tuple(getattr(frame, f) for f in _SETUP_FIELDS),)
        return True

    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        view = memoryview(mapped)
        try:
            # Every view into the map (the reader's, the packets') dies with `scan`'s frame.
            is_pcap = scan(view)
        finally:
            view.release()
    if not is_pcap:
        return [Chunk(24, size, 1, None, 24, 1)]
    numbers = sorted(k for k in starts if k in warmups)
    chunks = []
    for position, k in enumerate(numbers):
        start_offset, first_packet = starts[k]
        if position + 1 < len(numbers):
            end_offset, next_first = starts[numbers[position + 1]]
            last_packet: int | None = next_first - 1
        else:
            end_offset, last_packet = size, None
        warmup_offset, warmup_packet, primers = warmups[k]
        if end_offset > start_offset:
            chunks.append(Chunk(start_offset, end_offset, first_packet, last_packet, warmup_offset, warmup_packet,
                                primers))
    return chunks


def decode_pcap_chunk(path: str, chunk: Chunk, members: str, *, warmup_bytes: int = DEFAULT_WARMUP_BYTES) -> Decoded:
    """The events of one chunk of a classic pcap, decoded with a warm-up (see the module docstring)."""
    from formats.errors import DecodeError
    from formats.pcap import PcapReader
    from formats.udp import DataFrame, PadFrame, SetupFrame, decode_datagram, encode_datagram
    from recorder.capture.datagrams import DatagramDecoder, Problem
    from recorder.capture.members import MemberMap
    from recorder.record.reader import Datagram

    size = os.path.getsize(path)
    region_end = size if chunk.last_packet is None else min(size, chunk.end_offset + warmup_bytes)
    with open(path, "rb") as file:
        header = file.read(24)
        file.seek(chunk.warmup_offset)
        region = file.read(region_end - chunk.warmup_offset)
    buffer = header + region
    shift = chunk.warmup_offset - 24  # buffer offset + shift = file offset (past the header)
    first, last = chunk.first_packet, chunk.last_packet
    member_map = MemberMap.parse(members, source="members")
    decoder = DatagramDecoder(member_map, sources={0: path})
    pending: dict[tuple, tuple] = {}
    for src_ip, src_port, dst_ip, dst_port, values in chunk.primers:
        setup = dict(zip(_SETUP_FIELDS, values, strict=True))
        pending[(src_ip, src_port, dst_ip, dst_port, setup["session_id"], setup["stream_id"])] = setup
    endpoints = {key[:4] for key in pending}
    reader = PcapReader(buffer, source=path)
    keyed: list[tuple[tuple, Any]] = []
    last_ts = 0
    for packet in reader.packets():
        index = packet.index + chunk.warmup_packet - 1
        ts = packet.ts_ns if packet.ts_ns is not None else last_ts
        last_ts = ts
        datagram = Datagram(ts, packet.src_ip, packet.src_port, packet.dst_ip, packet.dst_port, packet.payload)
        here = (packet.src_ip, packet.src_port, packet.dst_ip, packet.dst_port)
        if here in endpoints:
            try:
                frames = decode_datagram(packet.payload)
            except DecodeError:
                frames = []
            for frame in frames:
                key = here + (frame.session_id, frame.stream_id)
                setup = pending.pop(key, None)
                if setup is None or type(frame) is SetupFrame:
                    continue
                if type(frame) is DataFrame or type(frame) is PadFrame:
                    # The stream's SETUP again, as if it had been sent just before this frame: the right
                    # basis for positions, and reassembly starting here.
                    moved = SetupFrame(**{**setup, "active_term_id": frame.term_id, "term_offset": frame.term_offset})
                    decoder.feed_keyed(Datagram(ts, *here, encode_datagram([moved])), index)
            endpoints = {k[:4] for k in pending}
        offset = packet.payload_offset + shift if packet.payload_offset is not None else None
        keyed += decoder.feed_keyed(datagram, index, payload_offset=offset)
    keyed += decoder.finish_keyed()
    keyed.sort(key=lambda item: item[0])
    events = [event for key, event in keyed if key[2] >= first and (last is None or key[2] <= last)]

    def mine(packet: int | None, offset: int | None) -> bool:
        if packet is not None:
            return packet >= first and (last is None or packet <= last)
        if offset is not None:
            return chunk.start_offset <= offset < chunk.end_offset
        return chunk.first_packet == 1

    problems = [p for p in decoder.problems if mine(p.packet, p.offset)]
    for error in reader.problems:
        offset = error.offset + shift if error.offset is not None else None
        if mine(None, offset):
            problems.append(Problem("capture file", error.expected, path, None, offset))
    return _decoded_events(events, os.path.basename(path), members, _problem_rows(problems, path), decoder.notes)


# --- rows ------------------------------------------------------------------------------------------
def _string_column(column: pa.ChunkedArray) -> pa.ChunkedArray:
    return column.cast(pa.string()) if pa.types.is_dictionary(column.type) else column


def events_batches(table: pa.Table | None, *, incident: str, source_file: str | None, with_seq: bool
                   ) -> Iterator[pa.RecordBatch]:
    """The rows of a replay table as record batches of `EVENTS_ARROW_SCHEMA`, values as the file holds them."""
    if table is None or table.num_rows == 0:
        return
    rows = table.num_rows
    columns: dict[str, Any] = {
        "seq": table.column("seq").cast(pa.int64()) if with_seq else pa.nulls(rows, pa.int64()),
        "ts": table.column("ts"),
        "node": table.column("node"),
        "dir": _string_column(table.column("dir")),
        "channel": _string_column(table.column("channel")),
        "type": _string_column(table.column("type")),
        "peer": table.column("peer"),
        "payload": table.column("payload"),
        "fields": table.column("fields"),
        "extra": table.column("extra"),
        "incident": pa.array([incident] * rows, pa.string()),
        "sourceFile": pa.array([source_file] * rows, pa.string()),
        "packet": pa.array([_packet_of(extra) for extra in table.column("extra").to_pylist()], pa.int64()),
    }
    for name, kind in FIELD_COLUMNS.items():
        wanted = _ARROW_TYPES[kind]
        if name in table.column_names and table.column(name).type == wanted:
            columns[name] = table.column(name)
        else:
            columns[name] = pa.nulls(rows, wanted)
    out = pa.table(columns, schema=EVENTS_ARROW_SCHEMA)
    yield from out.to_batches(max_chunksize=BATCH_ROWS)


def _packet_of(extra: str | None) -> int | None:
    if not extra or '"packet"' not in extra:
        return None
    packet = json.loads(extra).get("packet")
    return packet if isinstance(packet, int) and not isinstance(packet, bool) else None


def errors_batch(rows: Sequence[dict[str, Any]], *, incident: str) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [{"incident": incident, "sourceFile": r.get("file"), "category": r.get("category"), "detail": r.get("detail"),
          "packet": r.get("packet"), "offset": r.get("offset"), "line": r.get("line")} for r in rows],
        schema=ERRORS_ARROW_SCHEMA,
    )


def failure_row(error: BaseException, path: str | None) -> dict[str, Any]:
    """An input that could not be read at all, as an errors row."""
    from formats.errors import DecodeError

    if isinstance(error, DecodeError):
        row = {"category": "unreadable input", "detail": str(error), "file": error.source or path}
        if error.offset is not None:
            row["line" if error.unit == "line" else "offset"] = error.offset
        return row
    filename = getattr(error, "filename", None)
    return {"category": "unreadable input", "detail": f"{filename or path}: {getattr(error, 'strerror', None) or error}",
            "file": filename or path}


# --- the Spark data source -------------------------------------------------------------------------
try:
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
except ImportError:  # pragma: no cover - pyspark is a dependency; this keeps `import recorder.spark` cheap to fail
    DataSource = DataSourceReader = InputPartition = object  # type: ignore[assignment,misc]


class CapturePartition(InputPartition):
    """One partition: an incident, one input, or one chunk of a classic pcap."""

    def __init__(self, mode: str, incident: str, paths: list[str], *, kind: str | None = None,
                 members: str | None = None, chunk: Chunk | None = None, size: int = 0) -> None:
        super().__init__(None)
        self.mode = mode  # "incident", "file" or "chunk"
        self.incident = incident
        self.paths = paths
        self.kind = kind
        self.members = members
        self.chunk = chunk
        self.size = size

    def __repr__(self) -> str:
        where = f" @{self.chunk.start_offset}" if self.chunk is not None else ""
        return f"CapturePartition({self.mode} {self.incident}: {','.join(self.paths)}{where})"


@dataclass(frozen=True, slots=True)
class Options:
    paths: tuple[str, ...]
    split: str
    incident_depth: int
    group_by: str
    members: str | None
    chunk_bytes: int
    warmup_bytes: int
    errors: bool

    @classmethod
    def parse(cls, options: Any, *, errors: bool = False) -> Options:
        def get(name: str, default: str | None = None) -> str | None:
            value = options.get(name)
            if value is None:
                value = options.get(name.lower())
            return default if value is None else str(value)

        if get("paths"):
            paths = tuple(json.loads(get("paths")))
        elif get("path"):
            paths = (get("path"),)
        else:
            raise ValueError("aeron-capture needs a path: spark.read.format('aeron-capture').load('captures/')")
        split = get("split", "file")
        if split not in ("file", "incident"):
            raise ValueError(f"option split must be 'file' or 'incident', not {split!r}")
        return cls(
            paths=paths,
            split=split,
            incident_depth=int(get("incidentDepth", "1")),
            group_by=get("groupBy", "directory"),
            members=get("members"),
            chunk_bytes=max(1 << 20, int(get("chunkBytes", str(DEFAULT_CHUNK_BYTES)))),
            warmup_bytes=max(0, int(get("warmupBytes", str(DEFAULT_WARMUP_BYTES)))),
            errors=errors or get("errors", "false").lower() == "true",
        )


def plan_partitions(options: Options) -> list[CapturePartition]:
    """The partitions for ``options``, in a fixed order (see the module docstring)."""
    partitions: list[CapturePartition] = []
    for incident in discover(options.paths, incident_depth=options.incident_depth, group_by=options.group_by):
        if options.split == "incident":
            partitions.append(CapturePartition("incident", incident.name, incident.paths, members=options.members,
                                               size=incident.size))
            continue
        members = incident_members(incident, options.members)
        for item in incident.inputs:
            if item.kind == "pcap" and members and item.size > options.chunk_bytes:
                chunks = plan_pcap_chunks(item.path, chunk_bytes=options.chunk_bytes,
                                          warmup_bytes=options.warmup_bytes)
                if len(chunks) > 1:
                    partitions += [CapturePartition("chunk", incident.name, [item.path], kind=item.kind,
                                                    members=members, chunk=chunk,
                                                    size=chunk.end_offset - chunk.start_offset) for chunk in chunks]
                    continue
            partitions.append(CapturePartition("file", incident.name, [item.path], kind=item.kind, members=members,
                                               size=item.size))
    return partitions


def read_partition(partition: CapturePartition, options: Options) -> Iterator[pa.RecordBatch]:
    """The record batches of one partition: its events, or with ``options.errors`` its problems."""
    from formats.errors import DecodeError

    path = partition.paths[0] if len(partition.paths) == 1 else None
    try:
        if partition.mode == "incident":
            decoded = decode_incident(partition.paths, members=partition.members)
            source_file = ",".join(os.path.basename(p.rstrip("/")) for p in partition.paths)
        elif partition.mode == "chunk":
            decoded = decode_pcap_chunk(partition.paths[0], partition.chunk, partition.members,
                                        warmup_bytes=options.warmup_bytes)
            source_file = partition.paths[0]
        else:
            decoded = decode_file(Input(partition.paths[0], partition.kind, partition.size), members=partition.members)
            source_file = partition.paths[0]
    except (DecodeError, OSError) as error:
        if options.errors:
            yield errors_batch([failure_row(error, path)], incident=partition.incident)
        return
    if options.errors:
        if decoded.problems:
            yield errors_batch(decoded.problems, incident=partition.incident)
        return
    yield from events_batches(decoded.table, incident=partition.incident, source_file=source_file,
                              with_seq=partition.mode == "incident")


class _Reader(DataSourceReader):
    def __init__(self, options: Options) -> None:
        self.options = options

    def partitions(self) -> list[CapturePartition]:
        return plan_partitions(self.options)

    def read(self, partition: CapturePartition) -> Iterator[pa.RecordBatch]:
        return read_partition(partition, self.options)


class AeronCaptureDataSource(DataSource):
    """``spark.read.format("aeron-capture")``: decoded events, one row per event."""

    errors = False

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> str:
        return ERRORS_SCHEMA if Options.parse(self.options, errors=self.errors).errors else EVENTS_SCHEMA

    def reader(self, schema: Any) -> _Reader:
        return _Reader(Options.parse(self.options, errors=self.errors))


class AeronCaptureErrorsDataSource(AeronCaptureDataSource):
    """``spark.read.format("aeron-capture-errors")``: one row per record or input that could not be read."""

    errors = True

    @classmethod
    def name(cls) -> str:
        return ERRORS_FORMAT_NAME


def register(spark: Any) -> None:
    """Make ``aeron-capture`` and ``aeron-capture-errors`` known to ``spark``."""
    spark.dataSource.register(AeronCaptureDataSource)
    spark.dataSource.register(AeronCaptureErrorsDataSource)
