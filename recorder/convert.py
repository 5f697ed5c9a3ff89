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

Cluster configuration that captures do not record (timeouts, intervals, ...) comes from the user as
Aeron properties (``config``); `cluster_config` checks them with `engine.config.Config` and `convert`
writes them, as numbers, into every MemberStart's ``config`` (over what an input already said).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from engine.config import Config
from formats import replay_file
from formats.errors import DecodeError
from formats.events import Event, parse_jsonl
from recorder import capture
from recorder.evidence import to_metadata


class OutputExistsError(FileExistsError):
    """The output file exists and overwriting it was not asked for."""


@dataclass(frozen=True, slots=True)
class LoadedEvents:
    events: list[Event]
    refs: list[Any]
    ref_kind: str  # "line" or "seq"
    source: str
    cluster_members: str | None = None
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

    def to_json(self) -> dict[str, Any]:
        document = {
            "out": self.out,
            "events": self.events,
            "nodes": list(self.nodes),
            "inputs": list(self.inputs),
            "clusterMembers": self.cluster_members,
        }
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
                        dict(metadata.extra))


def read_capture(path: Path) -> LoadedEvents:
    """One capture input on its own (a pcap, an agent log or a cluster dir); `convert` reads them together."""
    return _loaded_captures(capture.load_captures([path]))


def _loaded_captures(load: capture.CaptureLoad) -> LoadedEvents:
    # A capture's events come from packets, log lines and directories alike: refer to them by number
    # (each event also keeps its packet or line number under extra).
    refs = list(range(1, len(load.events) + 1))
    source = ",".join(str(i.get("path")) for i in load.inputs)
    return LoadedEvents(load.events, refs, "event", source, load.cluster_members)


READERS: dict[str, InputReader] = {
    "jsonl": InputReader("jsonl", (".jsonl", ".ndjson"), read_jsonl, "JSON Lines events (contract §1)"),
    "pcap": InputReader("pcap", (".pcap", ".cap"), read_capture, "a tcpdump capture of the cluster's UDP traffic",
                        captures=True),
    "pcapng": InputReader("pcapng", (".pcapng",), read_capture, "a pcapng capture (Wireshark, dumpcap)",
                          captures=True),
    "agent-log": InputReader("agent-log", (), read_capture, "an aeron-agent event log (Aeron 1.40-1.50 text)", captures=True),
    "cluster-dir": InputReader("cluster-dir", (), read_capture, "a member's cluster directory", captures=True),
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
    detected = capture.detect_format(path)  # by magic bytes, a log's first line, a directory's files
    if detected is not None and detected in readers:
        return readers[detected]
    suffixes = ", ".join(s for r in readers.values() for s in r.suffixes)
    raise DecodeError(f"cannot tell the input format from the file name (expected one of {suffixes})", source=str(path))


def load(path: str | Path, *, format: str | None = None, readers: dict[str, InputReader] = REPLAY_READERS) -> LoadedEvents:
    """Read one input (a capture or a replay file) into events."""
    path = Path(path)
    if path.is_dir() and format not in ("cluster-dir", "auto", None):
        raise IsADirectoryError(21, "is a directory, expected a file", str(path))
    reader = reader_for(path, format=format, readers=readers)
    if path.is_dir() and reader.name != "cluster-dir":
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
    """Convert ``inputs`` into the replay file ``out`` (atomically; refuses to overwrite without force).

    Captures (pcap/pcapng, agent logs, cluster dirs) are read together by `recorder.capture`, with
    ``members`` (the cluster members string) and ``progress`` (called with bytes read).  ``config``
    (Aeron property → value) goes into every member's MemberStart; a bad property is a `ValueError`
    raised before anything is read.
    """
    if not inputs:
        raise ValueError("no inputs given")
    properties = cluster_config(config) if config else None
    out = Path(out)
    if out.exists() and not force:
        raise OutputExistsError(17, "exists (use --force to overwrite it)", str(out))
    if out.is_dir():
        raise IsADirectoryError(21, "is a directory, expected a file name", str(out))
    kinds = [reader_for(path, format=format, readers=READERS) for path in inputs]
    captured = None
    capture_paths = [path for path, kind in zip(inputs, kinds, strict=True) if kind.captures]
    if capture_paths:
        kind_of = "auto" if format in (None, "auto") else format
        captured = capture.load_captures(capture_paths, members=members, format=kind_of, progress=progress)
    loaded = []
    for path, kind in zip(inputs, kinds, strict=True):
        if not kind.captures:
            loaded.append(load(path, format=kind.name, readers=READERS))
        elif path == capture_paths[0]:
            loaded.append(_loaded_captures(captured))
    events = merge(loaded)
    if not events:
        names = ", ".join(str(p) for p in inputs)
        raise DecodeError("holds no events (expected at least one JSON Lines event or decodable capture)", source=names)
    if properties:
        events = with_config(events, properties)
    members = members or next((one.cluster_members for one in loaded if one.cluster_members), None)
    source = ",".join(os.path.basename(str(p)) for p in inputs)
    table = replay_file.events_to_table(events, source=source, cluster_members=members,
                                        metadata=to_metadata(captured.evidence) if captured is not None else None)
    temporary = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    try:
        with pa.OSFile(str(temporary), "wb") as sink:
            replay_file.write_table(table, sink)
        os.replace(temporary, out)
    finally:
        if temporary.exists():
            temporary.unlink()
    return ConvertResult(
        out=str(out),
        events=len(events),
        nodes=tuple(sorted({e.node for e in events})),
        inputs=tuple(str(p) for p in inputs),
        cluster_members=members,
        capture=captured.summary() if captured is not None else None,
    )
