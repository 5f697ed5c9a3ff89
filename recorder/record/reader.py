"""Reading a proxy recording back: the datagrams as the wire carried them, and what is wrong with the file.

`read_recording(path)` returns ``(datagrams, metadata, problems)``.  Each `Datagram` has the fields
the pcap importer gives its packets (``ts_ns, src_ip, src_port, dst_ip, dst_port, payload``), with
the original endpoints (see `proxy`), so the one datagram decoder serves both.  `read_recording_table`
gives the same rows as an Arrow table, for queries and for checking big recordings quickly.

The file is an Arrow IPC stream written one whole batch at a time (`storage`).  We walk it message by
message, noting each message's byte offset, so that a recorder killed mid-write costs only its torn
last batch: every whole batch before it is kept, and the torn tail is reported (a `DecodeError` in
``problems`` naming the offset and how many bytes were dropped) rather than raised.  A stream without
its end-of-stream marker (the recorder did not stop cleanly) is reported the same way.  What is
raised is only what leaves nothing to read: no schema, not a recording, a newer format version,
columns of the wrong type.
"""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from formats.cluster_members import split_endpoint
from formats.errors import DecodeError
from recorder.record.storage import END_OF_STREAM, FIELDS, FORMAT, FORMAT_VERSION

#: The most a UDP datagram over IPv4 carries.
MAX_UDP_PAYLOAD = 65507


@dataclass(frozen=True, slots=True)
class Datagram:
    """One UDP datagram: when it was received (ns since the epoch), from where, to where, its bytes."""

    ts_ns: int
    src_ip: str
    src_port: int
    dst_ip: str
    dst_port: int
    payload: bytes


@dataclass(frozen=True, slots=True)
class RecordingMetadata:
    format_version: int
    cluster_members: str  #: the members string as the cluster had it before the proxy
    channels: tuple[str, ...]
    endpoints: tuple[Mapping[str, Any], ...]  #: {memberId, channel, member, proxy} per proxied endpoint
    clean_end: bool  #: the recorder stopped cleanly (the stream has its end-of-stream marker)
    schema_metadata: Mapping[str, str]


def read_recording(path: str | os.PathLike) -> tuple[list[Datagram], RecordingMetadata, list[DecodeError]]:
    table, metadata, problems = read_recording_table(path)
    name = os.fspath(path)
    seqs = table.column("seq").to_pylist()
    timestamps = table.column("ts").to_pylist()
    sources = table.column("src").to_pylist()
    destinations = table.column("dst").to_pylist()
    payloads = table.column("payload").to_pylist()
    addresses: dict[str, tuple[str, int]] = {}

    def address(text: str, seq: int, column: str) -> tuple[str, int]:
        parsed = addresses.get(text)
        if parsed is None:
            parsed = addresses[text] = _split_address(text, name, seq, column)
        return parsed

    datagrams = []
    for seq, ts, src, dst, payload in zip(seqs, timestamps, sources, destinations, payloads, strict=True):
        if ts < 0:
            raise DecodeError(f"seq {seq}: ts {ts}: expected ns since 1970", source=name)
        if len(payload) > MAX_UDP_PAYLOAD:
            raise DecodeError(f"seq {seq}: a payload of {len(payload)} bytes: expected at most {MAX_UDP_PAYLOAD}"
                              " (one UDP datagram)", source=name)
        src_ip, src_port = address(src, seq, "src")
        dst_ip, dst_port = address(dst, seq, "dst")
        datagrams.append(Datagram(ts, src_ip, src_port, dst_ip, dst_port, payload))
    return datagrams, metadata, problems


def read_recording_table(path: str | os.PathLike) -> tuple[pa.Table, RecordingMetadata, list[DecodeError]]:
    name = os.fspath(path)
    size = os.path.getsize(name)
    problems: list[DecodeError] = []
    # Read, not memory-mapped: the arrays we return own their memory, whatever happens to the file.
    with pa.OSFile(name) as source:
        reader = pa.ipc.MessageReader.open_stream(source)
        try:
            message = reader.read_next_message()
        except StopIteration:
            raise DecodeError(
                "expected an Arrow IPC stream schema, found an empty stream", source=name, offset=0
            ) from None
        except (pa.ArrowException, OSError) as error:
            raise DecodeError(
                f"expected an Arrow IPC stream schema: {_one_line(error)}", source=name, offset=0
            ) from None
        if message.type != "schema":
            raise DecodeError(
                f"expected an Arrow IPC stream schema, found a {message.type} message", source=name, offset=0
            )
        try:
            schema = pa.ipc.read_schema(message)
        except (pa.ArrowException, OSError) as error:
            raise DecodeError(
                f"expected an Arrow IPC stream schema: {_one_line(error)}", source=name, offset=0
            ) from None
        metadata_text = _check_schema(schema, name)

        batches = []
        clean_end = False
        while True:
            offset = source.tell()
            try:
                message = reader.read_next_message()
                if message.type != "record batch":
                    raise ValueError(f"unexpected {message.type} message")
                batch = pa.ipc.read_record_batch(message, schema)
                # Offsets, lengths and UTF-8 checked before anything reads the values.
                batch.validate(full=True)
                batches.append(batch)
            except StopIteration:
                clean_end = _check_end(source, offset, size, name, problems)
                break
            except (pa.ArrowException, OSError, ValueError) as error:
                problems.append(
                    DecodeError(
                        f"record batch cut short or corrupt (the recorder stopped mid-write?); the last "
                        f"{size - offset} bytes are ignored: {_one_line(error)}",
                        source=name,
                        offset=offset,
                    )
                )
                break
        table = pa.Table.from_batches(batches, schema=schema)
    for expected in FIELDS:
        if not expected.nullable and table.column(expected.name).null_count:
            raise DecodeError(f"column {expected.name!r} holds nulls, expected a value in every row", source=name)
    _check_sequence(table, name)
    return table, _metadata(metadata_text, clean_end, name), problems


def _check_end(source: pa.NativeFile, offset: int, size: int, name: str, problems: list[DecodeError]) -> bool:
    if offset == size:
        problems.append(
            DecodeError(
                "no end-of-stream marker: the recorder did not stop cleanly (killed?); what it received "
                "after its last flush is not in the file",
                source=name,
                offset=offset,
            )
        )
        return False
    source.seek(offset)
    if source.read(len(END_OF_STREAM)) == END_OF_STREAM and offset + len(END_OF_STREAM) == size:
        return True
    problems.append(
        DecodeError(
            f"{size - offset - len(END_OF_STREAM)} unexpected bytes after the end-of-stream marker are ignored",
            source=name,
            offset=offset + len(END_OF_STREAM),
        )
    )
    return True


def _check_schema(schema: pa.Schema, name: str) -> dict[str, str]:
    metadata = {
        key.decode("utf-8", "replace"): value.decode("utf-8", "replace")
        for key, value in (schema.metadata or {}).items()
    }
    kind = metadata.get("recount.format")
    if kind != FORMAT:
        raise DecodeError(
            f"expected a recount proxy recording (recount.format={FORMAT}), found recount.format={kind}",
            source=name,
            offset=0,
        )
    version_text = metadata.get("recount.formatVersion", "")
    if not (version_text.isascii() and version_text.isdigit()):
        raise DecodeError(
            f"expected an integer recount.formatVersion, found {version_text!r}", source=name, offset=0
        )
    if int(version_text) > FORMAT_VERSION:
        raise DecodeError(
            f"recording format version {version_text} is newer than this recount reads ({FORMAT_VERSION}); upgrade recount",
            source=name,
            offset=0,
        )
    for expected in FIELDS:
        index = schema.get_field_index(expected.name)
        if index < 0:
            raise DecodeError(f"expected a column {expected.name!r}", source=name, offset=0)
        if schema.field(index).type != expected.type:
            raise DecodeError(
                f"column {expected.name!r}: expected {expected.type}, found {schema.field(index).type}",
                source=name,
                offset=0,
            )
    return metadata


def _check_sequence(table: pa.Table, name: str) -> None:
    seq = table.column("seq")
    if len(seq) < 2:
        return
    increasing = pc.greater(seq.slice(1), seq.slice(0, len(seq) - 1))
    if not pc.all(increasing).as_py():
        index = pc.index(increasing, False).as_py()
        previous, current = seq[index].as_py(), seq[index + 1].as_py()
        raise DecodeError(
            f"seq {current} follows seq {previous}: expected strictly increasing seq", source=name
        )


def _metadata(metadata: dict[str, str], clean_end: bool, name: str) -> RecordingMetadata:
    try:
        endpoints = json.loads(metadata.get("recount.endpoints", "[]"))
    except ValueError:
        endpoints = None
    if not isinstance(endpoints, list) or not all(isinstance(e, dict) for e in endpoints):
        raise DecodeError("schema metadata recount.endpoints: expected a JSON list of objects", source=name, offset=0)
    endpoints = tuple(endpoints)
    channels = tuple(channel for channel in metadata.get("recount.channels", "").split(",") if channel)
    return RecordingMetadata(
        format_version=int(metadata["recount.formatVersion"]),
        cluster_members=metadata.get("clusterMembers", ""),
        channels=channels,
        endpoints=endpoints,
        clean_end=clean_end,
        schema_metadata=metadata,
    )


def _split_address(text: str, name: str, seq: int, column: str) -> tuple[str, int]:
    try:
        host, port = split_endpoint(text)
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise DecodeError(f"seq {seq}: {column} {text[:60]!r}: expected ip:port", source=name) from None
    return str(ip), port


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())
