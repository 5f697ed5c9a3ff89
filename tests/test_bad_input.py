"""Bad input, case by case, through the command line (issue 14 item 1): one line on stderr naming the
file (and the line, row or offset) and what was expected, exit status 2, no traceback, no output
file.  Each case damages a real-looking file the way a full disk, a half copy, a newer tool or a
hostile hand would.  (The fuzzer, `tests/test_fuzz.py`, tries the same at random.)
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from cli.app import run
from formats import replay_file
from formats.pcap import PcapReader
from recorder.record.storage import END_OF_STREAM, FIELDS, recording_schema
from tests.conftest import CAPTURE, _require

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "clean-start"
MEMBERS = "0,127.0.0.1:20110,127.0.0.1:20220,127.0.0.1:20330,127.0.0.1:20440,127.0.0.1:8010"


@pytest.fixture(scope="module")
def sample_table() -> pa.Table:
    if not (SAMPLE / "incident.arrow").exists():
        pytest.skip(f"sample {SAMPLE} not found (recount simulate writes the samples)")
    with pa.memory_map(str(SAMPLE / "incident.arrow")) as source:
        return replay_file.read_table(source)


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _buffer_offset(data: bytes, column: str, buffer: int, *, indices: bool = False) -> int:
    """Where in the (uncompressed) IPC file ``data`` a buffer of ``column``'s first batch starts."""
    whole = pa.py_buffer(data)
    batch = ipc.open_file(whole).get_batch(0)
    array = batch.column(batch.schema.get_field_index(column))
    if indices:
        array = array.indices
    return array.buffers()[buffer].address - whole.address


def _few_bytes_changed(table: pa.Table) -> bytes:
    """Four bytes of the payload column's offsets set to 0x7fffffff: a string view past the end."""
    data = bytearray(_ipc(table))
    at = _buffer_offset(bytes(data), "payload", 1) + 4 * 600
    data[at:at + 4] = b"\xff\xff\xff\x7f"
    return bytes(data)


def _dictionary_index_out_of_range(table: pa.Table) -> bytes:
    data = bytearray(_ipc(table))
    at = _buffer_offset(bytes(data), "dir", 1, indices=True) + 4 * 10
    data[at:at + 4] = struct.pack("<i", 1000)
    return bytes(data)


def _with_column(table: pa.Table, name: str, values: list, kind: pa.DataType | None = None) -> bytes:
    index = table.schema.get_field_index(name)
    array = pa.array(values, kind)
    field = pa.field(name, array.type)
    return _ipc(table.set_column(index, field, array).replace_schema_metadata(table.schema.metadata))


def _with_value(table: pa.Table, name: str, row: int, value) -> bytes:
    column = table.column(name)
    if pa.types.is_dictionary(column.type):
        column = column.cast(pa.string())
    values = column.to_pylist()
    values[row] = value
    return _with_column(table, name, values, column.type)


def _with_metadata(table: pa.Table, **changes: str | None) -> bytes:
    meta = {k.decode(): v.decode() for k, v in table.schema.metadata.items()}
    for key, value in changes.items():
        key = key.replace("_", ".")
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    return _ipc(table.replace_schema_metadata(meta))


# --- JSON Lines ---------------------------------------------------------------------------------

START = {"ts": 1, "node": 0, "dir": "local", "peer": None, "channel": "local", "type": "MemberStart",
         "fields": {"clusterMembers": MEMBERS}}
VOTE_PAYLOAD = "2a0034006f000c00" + "00" * 42  # an SBE header (Vote: block 42, template 52) and a zeroed body


def _vote(**changes) -> dict:
    event = {"ts": 2, "node": 0, "dir": "in", "peer": 1, "channel": "consensus", "type": "Vote",
             "fields": {"candidateTermId": 1, "logLeadershipTermId": -1, "logPosition": 0, "candidateMemberId": 0,
                        "followerMemberId": 1, "vote": "TRUE"}}
    event.update(changes)
    return event


def _jsonl(*events) -> bytes:
    return "".join((e if isinstance(e, str) else json.dumps(e)) + "\n" for e in events).encode()


# --- recordings ---------------------------------------------------------------------------------


def _sample_members() -> str:
    with pa.memory_map(str(SAMPLE / "incident.arrow")) as source:
        return replay_file.check_metadata(ipc.open_file(source).schema).cluster_members


def _recording(src: str | None = None, payload: bytes | None = None, ts: int | None = None,
               metadata: dict | None = None, nulls: bool = False, rows: int = 5, start: int = 0) -> bytes:
    packets = list(PcapReader((SAMPLE / "host0.pcap").read_bytes()).packets())[start:start + rows]
    schema = recording_schema(_sample_members(), metadata)
    rows = len(packets)
    columns = [
        pa.array(range(start, start + rows), pa.uint64()),
        pa.array([p.ts_ns if ts is None else ts + i for i, p in enumerate(packets)], pa.int64()),
        pa.array([f"{p.src_ip}:{p.src_port}" if src is None else src for p in packets]),
        pa.array([None if nulls else f"{p.dst_ip}:{p.dst_port}" for p in packets]),
        pa.array([0] * rows, pa.int32()),
        pa.array([None] * rows, pa.int32()),
        pa.array(["consensus"] * rows),
        pa.array(["toMember"] * rows),
        pa.array(["127.0.0.1:1"] * rows),
        pa.array(["127.0.0.1:2"] * rows),
        pa.array([payload if payload is not None else bytes(p.payload) for p in packets], pa.binary()),
    ]
    columns = [c.cast(f.type) for c, f in zip(columns, FIELDS, strict=True)]
    batch = pa.RecordBatch.from_arrays(columns, schema=schema)
    return schema.serialize().to_pybytes() + batch.serialize().to_pybytes() + END_OF_STREAM


def _batch_message(data: bytes) -> bytes:
    """The record batch message of a one-batch recording from `_recording`."""
    schema_length = len(recording_schema(_sample_members()).serialize())
    return data[schema_length:-len(END_OF_STREAM)]


# --- member files -------------------------------------------------------------------------------


def _member_file(name: str) -> bytes:
    """A member's file from the clean-start sample; the simulator writes no mark files, so those come
    from the real 1.47.3 capture in ../shared (skipped without it, failed in CI)."""
    path = SAMPLE / "node0" / "cluster" / name
    if not path.exists():
        path = _require(CAPTURE / "node0" / name)
    return path.read_bytes()


def _patched(data: bytes, at: int, new: bytes) -> bytes:
    return data[:at] + new + data[at + len(new):]


def _pcap_with_record_length(length: int) -> bytes:
    data = (SAMPLE / "host0.pcap").read_bytes()
    return _patched(data, 24 + 8, struct.pack("<I", length))


def _pcapng_block_length(length: int) -> bytes:
    # A section header block (byte-order magic), then an interface block whose total length is absurd.
    shb_body = struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1)
    shb = struct.pack("<II", 0x0A0D0D0A, 12 + len(shb_body)) + shb_body + struct.pack("<I", 12 + len(shb_body))
    idb = struct.pack("<IIHHI", 1, length, 1, 0, 0)
    return shb + idb


# (reader, case, file name, make(sample_table) -> bytes, argv with {path} and {out}, expected message)
Case = tuple[str, str, str, Callable[[pa.Table], bytes], list[str], str]

CASES: list[Case] = [
    # The replay file (contract §2): every command that reads one.
    ("replay file", "a few bytes changed (offsets past the end)", "incident.arrow", _few_bytes_changed,
     ["replay", "{path}"], r"record batch 0 is damaged \(in column 7 \(payload\): Invalid: Offset invariant failure"),
    ("replay file", "a few bytes changed, recount query", "incident.arrow", _few_bytes_changed,
     ["query", "{path}", "SELECT count(*) FROM events"], r"record batch 0 is damaged"),
    ("replay file", "a few bytes changed, recount diff", "incident.arrow", _few_bytes_changed,
     ["diff", "{path}", str(SAMPLE / "incident.arrow")], r"record batch 0 is damaged"),
    ("replay file", "a few bytes changed, recount export-scenario", "incident.arrow", _few_bytes_changed,
     ["export-scenario", "{path}", "-o", "{out}"], r"record batch 0 is damaged"),
    ("replay file", "dictionary index out of range", "incident.arrow", _dictionary_index_out_of_range,
     ["replay", "{path}"], r"record batch 0 is damaged \(in column 3 \(dir\): Invalid: Dictionary indices invalid"),
    ("replay file", "not Arrow at all", "incident.arrow", lambda t: b"hello, not arrow\n" * 10,
     ["replay", "{path}"], r"offset 0: not an Arrow IPC file or stream"),
    ("replay file", "cut in half", "incident.arrow", lambda t: _ipc(t)[: len(_ipc(t)) // 2],
     ["query", "{path}", "SELECT 1"], r"offset 0: not an Arrow IPC file or stream \(Not an Arrow file\)"),
    ("replay file", "an Arrow file that is not a replay", "incident.arrow", lambda t: _ipc(pa.table({"a": [1]})),
     ["replay", "{path}"], r"not a recount replay file"),
    ("replay file", "a newer format version", "incident.arrow", lambda t: _with_metadata(t, recount_formatVersion="9"),
     ["replay", "{path}"], r"replay format version 9 is newer than this recount reads"),
    ("replay file", "format version not a number", "incident.arrow",
     lambda t: _with_metadata(t, recount_formatVersion="one"), ["replay", "{path}"], r"formatVersion is not an integer"),
    ("replay file", "ts column of strings", "incident.arrow",
     lambda t: _with_column(t, "ts", [str(v) for v in t.column("ts").to_pylist()]),
     ["replay", "{path}"], r"column 'ts' is string, expected an integer"),
    ("replay file", "fields JSON a list", "incident.arrow", lambda t: _with_value(t, "fields", 3, "[1, 2]"),
     ["replay", "{path}"], r"row 3: the fields column holds JSON list, expected an object"),
    ("replay file", "fields not JSON", "incident.arrow", lambda t: _with_value(t, "fields", 4, "{oops"),
     ["replay", "{path}", "--json"], r"row 4: the fields column holds invalid JSON"),
    ("replay file", "extra not JSON", "incident.arrow", lambda t: _with_value(t, "extra", 5, "[["),
     ["replay", "{path}"], r"row 5: the extra column holds invalid JSON"),
    ("replay file", "an unknown dir", "incident.arrow", lambda t: _with_value(t, "dir", 6, "sideways"),
     ["replay", "{path}"], r"row 6: dir 'sideways', expected one of in, out, local"),
    ("replay file", "a null ts", "incident.arrow", lambda t: _with_value(t, "ts", 7, None),
     ["replay", "{path}"], r"row 7: ts is null"),
    ("replay file", "an unknown event type", "incident.arrow", lambda t: _with_value(t, "type", 8, "Bogus"),
     ["replay", "{path}"], r"row 8: unknown event type 'Bogus'"),
    # JSON Lines events (contract §1): the types of every known key.
    ("JSON Lines", "type is an object", "events.jsonl", lambda t: _jsonl(START, _vote(type={"name": "Vote"})),
     ["replay", "{path}"], r"line 2: 'type' must be a string, got dict"),
    ("JSON Lines", "type is an object, recount convert", "events.jsonl",
     lambda t: _jsonl(START, _vote(type={"name": "Vote"})), ["convert", "{path}", "-o", "{out}"],
     r"line 2: 'type' must be a string"),
    ("JSON Lines", "ts a string", "events.jsonl", lambda t: _jsonl(START, _vote(ts="2")),
     ["replay", "{path}"], r"line 2: event: 'ts' must be an integer"),
    ("JSON Lines", "ts beyond int64", "events.jsonl", lambda t: _jsonl(START, _vote(ts=2**63)),
     ["convert", "{path}", "-o", "{out}"], r"line 2: event: 'ts' must be an integer from"),
    ("JSON Lines", "node negative", "events.jsonl", lambda t: _jsonl(START, _vote(node=-1)),
     ["replay", "{path}"], r"line 2: event: 'node' must be an integer from 0"),
    ("JSON Lines", "peer a list", "events.jsonl", lambda t: _jsonl(START, _vote(peer=[1])),
     ["replay", "{path}"], r"line 2: event: 'peer' must be an integer"),
    ("JSON Lines", "dir a list", "events.jsonl", lambda t: _jsonl(START, _vote(dir=["in"])),
     ["replay", "{path}"], r"line 2: 'dir' must be a string, got list"),
    ("JSON Lines", "channel a number", "events.jsonl", lambda t: _jsonl(START, _vote(channel=3)),
     ["replay", "{path}"], r"line 2: 'channel' must be a string, got int"),
    ("JSON Lines", "fields a list", "events.jsonl", lambda t: _jsonl(START, _vote(fields=[1])),
     ["replay", "{path}"], r"line 2: 'fields' must be an object, got list"),
    ("JSON Lines", "a field of the wrong type", "events.jsonl",
     lambda t: _jsonl(START, _vote(fields={**_vote()["fields"], "candidateTermId": {}})),
     ["replay", "{path}"], r"line 2: Vote: Vote.candidateTermId: expected an integer \(int64\), got \{\}"),
    ("JSON Lines", "payload a number", "events.jsonl", lambda t: _jsonl(START, _vote(payload=12)),
     ["replay", "{path}"], r"line 2: 'payload' must be a string of hex bytes, got int"),
    ("JSON Lines", "payload not hex", "events.jsonl", lambda t: _jsonl(START, _vote(payload="zz")),
     ["replay", "{path}"], r"line 2: 'payload' must be hex bytes"),
    ("JSON Lines", "fields disagree with the payload", "events.jsonl",
     lambda t: _jsonl(START, _vote(payload=VOTE_PAYLOAD)),
     ["replay", "{path}"], r"line 2: Vote: fields.candidateTermId is 1 but the payload says 0"),
    ("JSON Lines", "payload of another message", "events.jsonl",
     lambda t: _jsonl(START, _vote(type="RequestVote", fields={}, payload=VOTE_PAYLOAD)),
     ["replay", "{path}"], r"line 2: 'type' is RequestVote but the payload holds a Vote"),
    ("JSON Lines", "not JSON", "events.jsonl", lambda t: _jsonl(START, "{not json"),
     ["replay", "{path}"], r"line 2: not valid JSON"),
    ("JSON Lines", "a line that is a list", "events.jsonl", lambda t: _jsonl(START, "[1, 2]"),
     ["replay", "{path}"], r"line 2: expected a JSON object, got list"),
    ("JSON Lines", "not UTF-8", "events.jsonl", lambda t: _jsonl(START) + b"\xff\xfe\n",
     ["replay", "{path}"], r"line 2: not UTF-8 text"),
    # The proxy recording (`recount record`): schema, then values, checked before use.
    ("recording", "a source that is not ip:port", "recording.arrows", lambda t: _recording(src="somewhere"),
     ["convert", "{path}", "-o", "{out}"], r"seq 0: src 'somewhere': expected ip:port"),
    ("recording", "a datagram longer than UDP allows", "recording.arrows",
     lambda t: _recording(payload=b"\x00" * 70_000), ["convert", "{path}", "-o", "{out}"],
     r"seq 0: a payload of 70000 bytes: expected at most 65507"),
    ("recording", "nulls in a column that has none", "recording.arrows", lambda t: _recording(nulls=True),
     ["convert", "{path}", "-o", "{out}"], r"column 'dst' holds nulls"),
    ("recording", "endpoints metadata not a list", "recording.arrows",
     lambda t: _recording(metadata={"recount.endpoints": "7"}), ["convert", "{path}", "-o", "{out}"],
     r"recount.endpoints: expected a JSON list of objects"),
    ("recording", "a time past what pcap holds (2106)", "recording.arrows",
     lambda t: _recording(ts=2**62), ["convert", "{path}", "-o", "{out}"], r"datagram 0: cannot be a UDP datagram"),
    ("recording", "a time before 1970", "recording.arrows", lambda t: _recording(ts=-5),
     ["convert", "{path}", "-o", "{out}"], r"seq 0: ts -5: expected ns since 1970"),
    ("recording", "a newer format version", "recording.arrows",
     lambda t: _recording(metadata={"recount.formatVersion": "7"}), ["convert", "{path}", "-o", "{out}"],
     r"recording format version 7 is newer"),
    # pcap and pcapng: lengths checked before anything is taken from them.
    ("pcap", "a record length of 4 GiB", "capture.pcap", lambda t: _pcap_with_record_length(0xFFFFFFF0),
     ["convert", "{path}", "-o", "{out}"], r"offset 24: a record of at most \d+ bytes, header says 4294967280"),
    ("pcapng", "a block total length of 4 GiB", "capture.pcapng", lambda t: _pcapng_block_length(0xFFFFFFF0),
     ["convert", "{path}", "-o", "{out}"], r"offset 28: a pcapng block of 4294967280 bytes, only 16 left"),
    ("pcap", "not a capture at all", "capture.pcap", lambda t: b"\x00" * 100,
     ["convert", "{path}", "-o", "{out}"], r"offset 0: pcap magic a1b2c3d4/a1b23c4d or pcapng 0a0d0d0a, found 00000000"),
    # Member files, through `recount inspect`.
    ("recording.log", "a serviceId no TERM has", "recording.log",
     lambda t: _patched(_member_file("recording.log"), 40, struct.pack("<i", 77)),
     ["inspect", "recording-log", "{path}"], r"offset 0: TERM entry with serviceId 77; Aeron writes -1"),
    ("recording.log", "an unknown entry type", "recording.log",
     lambda t: _patched(_member_file("recording.log"), 44, struct.pack("<i", 9)),
     ["inspect", "recording-log", "{path}"], r"offset 0: entry type 9 \(0x00000009\) is not TERM, SNAPSHOT"),
    ("recording.log", "an archiveEndpoint length of 2 GiB", "recording.log",
     lambda t: _patched(_member_file("recording.log"), 44, struct.pack("<ii", 2, 0x7FFFFFF0)),
     ["inspect", "recording-log", "{path}"], r"offset 0: STANDBY_SNAPSHOT archiveEndpoint length 2147483632 exceeds"),
    ("node-state.dat", "a newer major version", "node-state.dat",
     lambda t: _patched(_member_file("node-state.dat"), 0, struct.pack("<i", 0x050000)),
     ["inspect", "node-state", "{path}"], r"offset 0: nodeStateHeader version 0x00050000 has major version 5"),
    ("node-state.dat", "a record of absurd length", "node-state.dat",
     lambda t: _patched(_member_file("node-state.dat"), 8 + 8, struct.pack("<i", 0x7FFFFFF0)),
     ["inspect", "node-state", "{path}"], r"offset 8: record \(templateId 301, frameLength 2147483632\) is cut short"),
    ("node-state.dat", "empty", "node-state.dat", lambda t: b"", ["inspect", "node-state", "{path}"],
     r"empty file; expected a node-state.dat"),
    ("cluster-mark.dat", "a string length past the end", "cluster-mark.dat",
     lambda t: _patched(_member_file("cluster-mark.dat"), 8 + 128, struct.pack("<I", 0x7FFFFFF0)),
     ["inspect", "mark-file", "{path}"], r"length 2147483632 runs past the end of the file"),
    ("cluster-mark.dat", "cut to 50 bytes", "cluster-mark.dat", lambda t: _member_file("cluster-mark.dat")[:50],
     ["inspect", "mark-file", "{path}"], r"only 50 bytes"),
    ("agent log", "no CLUSTER events", "agent-events.log",
     lambda t: b"[1.000000000] log started 2026-01-01 00:00:00.000+0000\n[2.000000000] garbage\n",
     ["convert", "{path}", "-o", "{out}"], r"no aeron-agent CLUSTER events \(line 2"),
]


@pytest.mark.parametrize(("reader", "case", "name", "make", "argv", "expected"), CASES,
                         ids=[f"{c[0]}: {c[1]}" for c in CASES])
def test_bad_input_is_one_line_naming_the_file_and_exit_2(reader, case, name, make, argv, expected, sample_table,
                                                           tmp_path, capsys):
    path = tmp_path / name
    path.write_bytes(make(sample_table))
    out = tmp_path / "out.arrow"
    code = run([a.format(path=path, out=out) for a in argv])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert lines[0].startswith(f"recount: {path}"), err
    assert re.search(expected, lines[0]), lines[0]
    assert "Traceback" not in err
    assert not out.exists()


def test_a_damaged_last_batch_of_a_recording_costs_that_batch_only(tmp_path, capsys):
    """A recording is written a batch at a time: a batch whose offsets point past its data (here its
    body zeroed from the middle on) is reported with its offset, and the batches before it convert."""
    first = _recording(rows=60)
    second = bytearray(_batch_message(_recording(rows=5, start=60)))
    second[len(second) // 2:] = b"\xff" * (len(second) - len(second) // 2)
    path = tmp_path / "recording.arrows"
    path.write_bytes(first[:-len(END_OF_STREAM)] + bytes(second) + END_OF_STREAM)
    out = tmp_path / "out.arrow"
    code = run(["convert", str(path), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert re.search(r"record batch cut short or corrupt .* the last \d+ bytes are ignored", err), err
    with pa.memory_map(str(out)) as source:
        assert replay_file.read_table(source).num_rows > 0
