"""A mutation fuzzer for every reader of user files, shared by the tests and `benchmarks/fuzz.py`.

Each `Reader` names a file kind, where its seed files come from (the shared real captures and each
member's files when ``../shared`` is there, the samples' files always) and what reading one means:
the same calls the command line makes (`recorder.convert`, `recorder.capture`, `recorder.cluster_dir`,
`recorder.query`), on the bytes written to a file.  An input *passes* when it reads or when the
reader raises the project's own `DecodeError`; anything else (another exception, a crash of the
interpreter, a hang) is a failure.

Inputs are made deterministically from ``(reader, seed, index)``: a seed file, then one to eight
mutations among bit flips, byte sets (0, 0xff, 0x7f, 0x80, random), truncations, insertions,
duplicated or removed chunks and splices with another seed file; text readers also get line-level
mutations (a line dropped, duplicated, swapped) and JSON Lines a value of another JSON type.  The
same index always gives the same bytes, which is how a crash of a child process is written down.

Readers built on pyarrow (the replay file, the proxy recording) run in a child process
(``python -m tests.fuzzing``), so that a segfault there is a failure to report rather than the end
of the fuzzer; the child writes each input to ``current.bin`` before reading it.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from formats.errors import DecodeError

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
REGRESSIONS = ROOT / "tests" / "testdata" / "fuzz"


def shared_dir() -> Path:
    configured = os.environ.get("RECOUNT_SHARED")
    return Path(configured) if configured else ROOT.parent / "shared"


def _reference_files(pattern: str) -> list[Path]:
    reference = shared_dir() / "reference"
    if not reference.is_dir():
        return []
    return sorted(reference.glob(pattern))


def _sample_files(pattern: str) -> list[Path]:
    return sorted(SAMPLES.glob(pattern)) if SAMPLES.is_dir() else []


# --- readers --------------------------------------------------------------------------------------


def _read_replay(path: Path) -> None:
    from recorder import convert, query

    # What `recount replay` streams: the first pass, then every event in replay order.  It may refuse a
    # file (only with a DecodeError) or read one the whole-table reader refuses (a damaged fields text
    # of a row it builds from typed columns), never crash.
    try:
        for _ in convert.ReplayFileInput(path).ordered().read():
            pass
    except DecodeError:
        pass
    convert.read_replay_file(path)
    # What `recount query` does: DuckDB over the mapped table, every column of every row.
    query.query([path], "SELECT * FROM events")


#: How long one `recount` command may take on a mutated sample (a few hundred ms when well).
CLI_TIMEOUT_SECONDS = 60


def _read_replay_cli(path: Path) -> None:
    """The real command line, in subprocesses: a segfault is exit 139 there, a traceback exit 1.
    Each command must succeed, or end with exit 2 and one line on stderr."""
    for args in (["replay", str(path)], ["query", str(path), "SELECT type, count(*), max(ts) FROM events GROUP BY ALL"]):
        try:
            done = subprocess.run([sys.executable, "-m", "cli", *args], cwd=ROOT, capture_output=True, text=True,
                                  timeout=CLI_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"recount {args[0]} took over {CLI_TIMEOUT_SECONDS} s") from None
        lines = done.stderr.strip().splitlines()
        if done.returncode == 0:
            continue
        if done.returncode != 2 or len(lines) != 1 or not lines[0].startswith("recount: "):
            how = _death(done.returncode, lines) if done.returncode < 0 else f"exit {done.returncode}"
            raise RuntimeError(f"recount {args[0]}: {how}, stderr {' | '.join(lines[-3:])[:300]}")


def _read_recording(path: Path) -> None:
    from recorder.capture.recording_import import recording_as_pcap

    recording_as_pcap(path)


def _read_jsonl(path: Path) -> None:
    from formats import replay_file
    from recorder import convert

    loaded = convert.read_jsonl(path)
    replay_file.events_to_table(loaded.events, source=str(path))


def _read_pcap(path: Path) -> None:
    from recorder import capture

    capture.load_captures([path], format="pcap")


def _read_agent_log(path: Path) -> None:
    from recorder.capture.agent_log_import import agent_log_events, read_agent_log_file

    agent_log_events(read_agent_log_file(path))


def _read_recording_log(path: Path) -> None:
    from formats import recording_log as rl
    from recorder import cluster_dir

    lenient = cluster_dir.load_recording_log(path, strict=False)
    rl.to_json(lenient)
    rl.to_clustertool(lenient)
    cluster_dir.load_recording_log(path, strict=True)


def _read_node_state(path: Path) -> None:
    from formats.node_state import node_state_to_json
    from recorder import cluster_dir

    node_state_to_json(cluster_dir.load_node_state(path).state)


def _read_mark_file(path: Path) -> None:
    from recorder import cluster_dir

    mark = cluster_dir.load_mark_file(path)
    mark.to_json()
    mark.to_clustertool_describe_body()


def _read_sbe(path: Path) -> None:
    from formats.cluster_codecs_ext import decode_cluster

    decode_cluster(path.read_bytes()).message.to_fields()


@dataclass(frozen=True)
class Reader:
    name: str
    suffix: str  #: the file name the input is written to (readers sniff some formats by name)
    read: Callable[[Path], None]
    seed_paths: Callable[[], list[Path]] = lambda: []
    seed_bytes: Callable[[], list[bytes]] = lambda: []  #: seeds made in memory from sample files
    isolated: bool = False  #: run in a child process (pyarrow underneath: a crash must not end the fuzzer)
    text: bool = False  #: line-level mutations too
    jsonl: bool = False  #: JSON-typed mutations too


def _read_archive_catalog(path: Path) -> None:
    from recorder import cluster_dir

    cluster_dir.load_archive_catalog(path).to_json()


def _archive_catalog_seeds() -> list[bytes]:
    """The used part of the real catalogs (inside the captures' archive.tar.gz; the rest is zeros)."""
    from formats.archive_catalog import DESCRIPTOR_HEADER_LENGTH, read_catalog
    from recorder import cluster_dir

    seeds = []
    for tarball in _reference_files("*/*/node*/archive.tar.gz")[:4]:
        data, _ = cluster_dir.read_archive_catalog_bytes(tarball)
        catalog = read_catalog(data)
        last = catalog.recordings[-1] if catalog.recordings else None
        end = last.offset + DESCRIPTOR_HEADER_LENGTH + last.length if last else catalog.header.length
        seeds.append(data[: end + 64])
    return seeds


def _member_files(name: str) -> Callable[[], list[Path]]:
    return lambda: _reference_files(f"*/*/node*/{name}") + _sample_files(f"*/node*/cluster/{name}")


def _jsonl_seeds() -> list[bytes]:
    """JSON Lines text of two sample incidents (a few hundred events each, every kind of event)."""
    import pyarrow as pa

    from formats.events import dump_jsonl
    from formats.replay_file import read_events

    seeds = []
    for sample in ("clean-start", "leader-failover"):
        path = SAMPLES / sample / "incident.arrow"
        if path.exists():
            with pa.memory_map(str(path)) as source:
                events, _ = read_events(source)
            text = "".join(dump_jsonl(events[:400]))
            seeds.append(text.encode())
            # The same events without payloads: messages built from their fields.
            bare = [json.loads(line) for line in text.splitlines()[:200]]
            for record in bare:
                record.pop("payload", None)
            seeds.append("".join(json.dumps(r) + "\n" for r in bare).encode())
    return seeds


def _uncompressed_replay_seeds() -> list[bytes]:
    """The samples' replay files are zstd-compressed: most byte mutations then land in compressed
    buffers.  Uncompressed slices (as `write_table` writes by default), in several batches, and one as
    an IPC stream, put offsets, lengths and dictionary indices within reach of a bit flip."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    from formats.replay_file import read_table

    seeds = []
    for sample, rows in (("clean-start", 300), ("leader-failover", 200)):
        path = SAMPLES / sample / "incident.arrow"
        if not path.exists():
            continue
        with pa.memory_map(str(path)) as source:
            table = read_table(source).slice(0, rows)
        sink = pa.BufferOutputStream()
        with ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table, max_chunksize=100)
        seeds.append(sink.getvalue().to_pybytes())
    if seeds:
        sink = pa.BufferOutputStream()
        with ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table.slice(0, 120), max_chunksize=60)
        seeds.append(sink.getvalue().to_pybytes())
    return seeds


def _recording_seeds() -> list[bytes]:
    """Proxy recordings (what `recount record` writes) of a sample's datagrams: clean and torn."""
    import pyarrow as pa

    from formats.pcap import PcapReader
    from recorder.record.storage import END_OF_STREAM, FIELDS, recording_schema

    pcap = SAMPLES / "clean-start" / "host0.pcap"
    if not pcap.exists():
        return []
    packets = list(PcapReader(pcap.read_bytes()).packets())[:120]
    schema = recording_schema("0,127.0.0.1:20110,127.0.0.1:20220,127.0.0.1:20330,127.0.0.1:20440,"
                              "127.0.0.1:8010", {"recount.channels": "consensus,log"})
    columns = [
        [p.ts_ns for p in packets],
        [f"{p.src_ip}:{p.src_port}" for p in packets],
        [f"{p.dst_ip}:{p.dst_port}" for p in packets],
        [0] * len(packets),
        [None] * len(packets),
        ["consensus"] * len(packets),
        ["toMember"] * len(packets),
        ["127.0.0.1:1"] * len(packets),
        ["127.0.0.1:2"] * len(packets),
        [bytes(p.payload) for p in packets],
    ]
    parts = [schema.serialize().to_pybytes()]
    for start in range(0, len(packets), 40):
        arrays = [pa.array(range(start, min(start + 40, len(packets))), pa.uint64())]
        arrays += [pa.array(c[start:start + 40], f.type) for c, f in zip(columns, FIELDS[1:], strict=True)]
        parts.append(pa.RecordBatch.from_arrays(arrays, schema=schema).serialize().to_pybytes())
    clean = b"".join(parts) + END_OF_STREAM
    return [clean, b"".join(parts)[:-100]]


def _sbe_seeds() -> list[bytes]:
    """Every distinct message template's payload in two samples."""
    import pyarrow as pa

    from formats.replay_file import read_table

    seeds: dict[str, bytes] = {}
    for sample in ("clean-start", "leader-failover", "restart-catchup"):
        path = SAMPLES / sample / "incident.arrow"
        if path.exists():
            with pa.memory_map(str(path)) as source:
                table = read_table(source)
                for kind, payload in zip(table.column("type").to_pylist(), table.column("payload").to_pylist(),
                                         strict=True):
                    if payload is not None:
                        seeds.setdefault(kind, payload)
    return list(seeds.values())


READERS: dict[str, Reader] = {
    reader.name: reader
    for reader in (
        Reader("replay", ".arrow", _read_replay, lambda: _sample_files("*/incident.arrow"),
               seed_bytes=_uncompressed_replay_seeds, isolated=True),
        # The same mutations through `recount replay` and `recount query` in subprocesses (slow: a
        # few inputs a second; the in-process reader above is the wide net, this the real path).
        Reader("replay_cli", ".arrow", _read_replay_cli, lambda: _sample_files("*/incident.arrow"),
               seed_bytes=_uncompressed_replay_seeds),
        Reader("recording", ".arrows", _read_recording, seed_bytes=_recording_seeds, isolated=True),
        Reader("jsonl", ".jsonl", _read_jsonl, seed_bytes=_jsonl_seeds, text=True, jsonl=True),
        Reader("pcap", ".pcap", _read_pcap,
               lambda: _reference_files("*/*/capture.pcap*") + _sample_files("*/host*.pcap")),
        Reader("agent_log", ".log", _read_agent_log,
               lambda: _reference_files("*/*/node*/agent-events.log") + _sample_files("*/node*/agent-events.log"),
               text=True),
        Reader("recording_log", ".log", _read_recording_log, _member_files("recording.log")),
        Reader("node_state", ".dat", _read_node_state, _member_files("node-state.dat")),
        Reader("mark_file", ".dat", _read_mark_file, _member_files("cluster-mark*.dat")),
        Reader("sbe", ".bin", _read_sbe, seed_bytes=_sbe_seeds),
        Reader("archive_catalog", ".catalog", _read_archive_catalog, seed_bytes=_archive_catalog_seeds),
    )
}


def _crash_on_purpose(path: Path) -> None:
    """The fuzzer's own check (tests/test_fuzz.py): a reader that crashes the interpreter on a zero
    byte, raises TypeError on a short input and DecodeError otherwise."""
    data = path.read_bytes()
    if b"\x00" in data:
        os.kill(os.getpid(), signal.SIGSEGV)
    if len(data) < 4:
        raise TypeError("a bug on purpose")
    raise DecodeError("refused on purpose", source=str(path))


#: Readers for testing the fuzzer itself, not fuzzed by default.
SELF_TEST_READERS = {
    "crash-on-purpose": Reader("crash-on-purpose", ".bin", _crash_on_purpose,
                               seed_bytes=lambda: [b"\x01\x02\x03\x04\x05\x06"], isolated=True),
}


def reader_named(name: str) -> Reader:
    return READERS[name] if name in READERS else SELF_TEST_READERS[name]


@functools.cache
def labelled_seeds(name: str) -> tuple[tuple[str, bytes], ...]:
    """(where it came from, bytes) of every seed of reader ``name``."""
    reader = reader_named(name)
    found = [(str(path), path.read_bytes()) for path in reader.seed_paths()]
    found += [(f"{name} seed {i} (made from samples/)", data) for i, data in enumerate(reader.seed_bytes())]
    if not found:
        raise RuntimeError(f"no seed files for the {name} reader (samples/ and ../shared/reference missing?)")
    return tuple(found)


def seeds(name: str) -> tuple[bytes, ...]:
    return tuple(data for _, data in labelled_seeds(name))


# --- mutations ------------------------------------------------------------------------------------

_INTERESTING = (b"\x00", b"\xff", b"\x7f", b"\x80", b"\x00\x00\x00\x00", b"\xff\xff\xff\xff",
                b"\xff\xff\xff\x7f", b"\x00\x00\x00\x80", b"\xff" * 8, b"\x00" * 8, b"\x10\x00\x00\x00")
_JSON_VALUES = ({}, [], {"a": 1}, [1, "x"], "", "x", "in", "Vote", 0, -1, 1.5, 2**63, -(2**63) - 1, 10**30,
                True, False, None, "ff", "zz")


def _position(rng: random.Random, size: int) -> int:
    """Anywhere, but often near either end (headers, footers, schema and metadata live there)."""
    if size <= 0:
        return 0
    choice = rng.random()
    if choice < 0.4:
        return rng.randrange(size)
    if choice < 0.7:
        return rng.randrange(min(size, 1024))
    if choice < 0.85:
        return rng.randrange(min(size, 16384))
    return size - 1 - rng.randrange(min(size, 1024))


def _mutate_bytes(buf: bytearray, rng: random.Random, others: tuple[bytes, ...]) -> None:
    op = rng.randrange(8)
    size = len(buf)
    at = _position(rng, size)
    if op == 0 and size:  # bit flip
        buf[at] ^= 1 << rng.randrange(8)
    elif op == 1 and size:  # byte set
        buf[at] = rng.randrange(256)
    elif op == 2:  # an interesting value (little or big endian)
        value = rng.choice(_INTERESTING)
        buf[at:at + len(value)] = value[::-1] if rng.random() < 0.3 else value
        del buf[size:]
    elif op == 3:  # truncation
        del buf[at:]
    elif op == 4:  # insertion of random bytes
        buf[at:at] = rng.randbytes(rng.choice((1, 2, 4, 8, 64, 1000)))
    elif op == 5 and size:  # duplicate a chunk
        end = min(size, at + rng.choice((4, 16, 64, 512)))
        buf[at:at] = buf[at:end]
    elif op == 6 and size:  # remove a chunk
        del buf[at:at + rng.choice((1, 4, 16, 64, 512))]
    elif op == 7:  # splice: our head, another seed's tail
        other = rng.choice(others)
        cut = _position(rng, len(other))
        buf[at:] = other[cut:]


def _mutate_lines(buf: bytearray, rng: random.Random) -> None:
    lines = bytes(buf).split(b"\n")
    if not lines:
        return
    i = rng.randrange(len(lines))
    op = rng.randrange(4)
    if op == 0:
        del lines[i]
    elif op == 1:
        lines.insert(i, lines[rng.randrange(len(lines))])
    elif op == 2:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    else:
        lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
    buf[:] = b"\n".join(lines)


def _mutate_json(buf: bytearray, rng: random.Random) -> None:
    """One value of one line (a top-level key or a field) replaced by a value of another JSON type."""
    lines = bytes(buf).split(b"\n")
    candidates = [i for i, line in enumerate(lines) if line.startswith(b"{")]
    if not candidates:
        return
    i = rng.choice(candidates)
    try:
        record = json.loads(lines[i])
    except ValueError:
        return
    if not isinstance(record, dict):
        return
    target = record
    fields = record.get("fields")
    if isinstance(fields, dict) and fields and rng.random() < 0.5:
        target = fields
    keys = list(target) + ["payload"]
    key = rng.choice(keys)
    if rng.random() < 0.1:
        target.pop(key, None)
    else:
        target[key] = rng.choice(_JSON_VALUES)
    lines[i] = json.dumps(record).encode()
    buf[:] = b"\n".join(lines)


def make_input(name: str, seed: int, index: int) -> bytes:
    """The ``index``-th input of a run with ``seed``: always the same bytes."""
    reader = reader_named(name)
    pool = seeds(name)
    rng = random.Random(f"{name}:{seed}:{index}")
    buf = bytearray(rng.choice(pool))
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3, 4, 8))):
        choice = rng.random()
        if reader.jsonl and choice < 0.35:
            _mutate_json(buf, rng)
        elif reader.text and choice < 0.5:
            _mutate_lines(buf, rng)
        else:
            _mutate_bytes(buf, rng, pool)
    return bytes(buf)


# --- running --------------------------------------------------------------------------------------


@dataclass
class Failure:
    reader: str
    index: int | None  #: None for a regression file
    what: str  #: the exception, or how the child died
    data: bytes = field(repr=False, default=b"")

    def describe(self) -> str:
        where = f"input {self.index}" if self.index is not None else "regression file"
        return f"{self.reader} {where}: {self.what}"


def check(name: str, data: bytes, work: Path, *, refusal_fails: bool = False) -> str | None:
    """Read ``data`` as reader ``name`` would; None if it read or was refused with a one-line
    DecodeError (unless ``refusal_fails``: then only reading counts, as for a seed file)."""
    reader = reader_named(name)
    path = work / f"input{reader.suffix}"
    path.write_bytes(data)
    try:
        reader.read(path)
    except DecodeError as error:
        text = str(error)
        if "\n" in text:
            return f"DecodeError spans lines: {text!r}"
        return f"DecodeError: {text}" if refusal_fails else None
    except Exception as error:  # noqa: BLE001 - that is the point: anything else is a finding
        frames = traceback.extract_tb(error.__traceback__)
        last = frames[-1] if frames else None
        place = f" at {Path(last.filename).name}:{last.lineno}" if last else ""
        return f"{type(error).__name__}: {' '.join(str(error).split())[:300]}{place}"
    return None


def run_inline(name: str, seed: int, start: int, count: int | None, deadline: float | None,
               work: Path) -> tuple[int, list[Failure]]:
    """Inputs ``start``, ``start + 1``... in this process, until ``count`` or the ``deadline``."""
    tried = 0
    failures = []
    index = start
    while (count is None or tried < count) and (deadline is None or time.monotonic() < deadline):
        data = make_input(name, seed, index)
        problem = check(name, data, work)
        if problem is not None:
            failures.append(Failure(name, index, problem, data))
        tried += 1
        index += 1
    return tried, failures


def _child_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "tests.fuzzing", *args]


def run_isolated(name: str, seed: int, count: int | None, seconds: float | None, work: Path,
                 *, stall_seconds: float = 60.0) -> tuple[int, list[Failure]]:
    """The same inputs in a child process; a child that dies (a segfault) or stalls is a failure,
    and a new child goes on from the next input."""
    deadline = None if seconds is None else time.monotonic() + seconds
    tried = 0
    failures: list[Failure] = []
    index = 0
    while (count is None or tried < count) and (deadline is None or time.monotonic() < deadline):
        remaining = "" if count is None else str(count - tried)
        left = "" if deadline is None else f"{max(deadline - time.monotonic(), 0.1):.1f}"
        child = subprocess.Popen(
            _child_command("child", name, str(seed), str(index), remaining, left, str(work)),
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )
        current: int | None = None
        stalled = False
        stderr_lines: list[str] = []
        with child:
            while True:
                line = _readline(child, stall_seconds)
                if line is None:
                    stalled = True
                    os.killpg(child.pid, signal.SIGKILL)
                    break
                if not line:
                    break
                message = json.loads(line)
                if "start" in message:
                    current = message["start"]
                elif "failure" in message:
                    failures.append(Failure(name, message["index"], message["failure"],
                                            make_input(name, seed, message["index"])))
                elif "tried" in message:
                    tried += message["tried"]
                    current = None
            stderr_lines = child.stderr.read().splitlines() if not stalled else []
            code = child.wait()
        if current is None:
            if code != 0:
                raise RuntimeError(f"fuzz child for {name} failed (exit {code}): {' | '.join(stderr_lines[-3:])}")
            break
        # The child died (or stalled) while reading input `current`.
        how = "no answer within %.0f s (a hang)" % stall_seconds if stalled else _death(code, stderr_lines)
        failures.append(Failure(name, current, how, make_input(name, seed, current)))
        tried += current - index + 1
        index = current + 1
    return tried, failures


def _readline(child: subprocess.Popen, timeout: float) -> str | None:
    """The child's next line, "" at its end, None when it says nothing for ``timeout`` seconds."""
    import selectors

    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            return None
    return child.stdout.readline()


def _death(code: int, stderr_lines: list[str]) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the interpreter died of {name} (exit {128 - code})"
    return f"the child exited {code}: {' | '.join(stderr_lines[-2:])}"


def _child(name: str, seed: int, start: int, count: int | None, seconds: float | None, work: Path) -> None:
    """Run inputs in this process and report on stdout, one JSON object a line (see `run_isolated`)."""
    deadline = None if seconds is None else time.monotonic() + seconds
    out = sys.stdout
    tried = 0
    index = start
    while (count is None or tried < count) and (deadline is None or time.monotonic() < deadline):
        data = make_input(name, seed, index)
        out.write(json.dumps({"start": index}) + "\n")
        out.flush()
        problem = check(name, data, work)
        if problem is not None:
            out.write(json.dumps({"index": index, "failure": problem}) + "\n")
        tried += 1
        index += 1
    out.write(json.dumps({"tried": tried}) + "\n")
    out.flush()


def fuzz(name: str, *, seed: int = 0, count: int | None = None, seconds: float | None = None,
         isolated: bool | None = None) -> tuple[int, list[Failure]]:
    """Fuzz one reader for ``count`` inputs or ``seconds``; returns (inputs tried, failures)."""
    reader = reader_named(name)
    with tempfile.TemporaryDirectory(prefix=f"recount-fuzz-{name}-") as work:
        if reader.isolated if isolated is None else isolated:
            return run_isolated(name, seed, count, seconds, Path(work))
        deadline = None if seconds is None else time.monotonic() + seconds
        return run_inline(name, seed, 0, count, deadline, Path(work))


def regression_files(name: str) -> list[Path]:
    folder = REGRESSIONS / name
    return sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")) if folder.is_dir() else []


def keep(failure: Failure) -> Path:
    """Write a failing input under tests/testdata/fuzz/<reader>/ (named by its content)."""
    import hashlib

    folder = REGRESSIONS / failure.reader
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{hashlib.sha256(failure.data).hexdigest()[:16]}{reader_named(failure.reader).suffix}"
    path.write_bytes(failure.data)
    return path


def replay_regressions(name: str) -> list[Failure]:
    """Every kept regression file of reader ``name``, read again (in a child for isolated readers)."""
    files = regression_files(name)
    if not files:
        return []
    if not reader_named(name).isolated:
        with tempfile.TemporaryDirectory() as work:
            return [Failure(name, None, f"{path.name}: {problem}") for path in files
                    if (problem := check(name, path.read_bytes(), Path(work))) is not None]
    failures = []
    with tempfile.TemporaryDirectory() as work:
        # All files in one child; should it die, each file in a child of its own says which one.
        batches = [files]
        while batches:
            batch = batches.pop()
            result = subprocess.run(_child_command("file", name, *map(str, batch), "--work", work), cwd=ROOT,
                                    capture_output=True, text=True, timeout=300)
            if result.returncode != 0 and len(batch) > 1:
                batches += [[path] for path in batch]
            elif result.returncode != 0:
                death = _death(result.returncode, result.stderr.splitlines())
                failures.append(Failure(name, None, f"{batch[0].name}: {death}"))
            else:
                failures += [Failure(name, None, line) for line in result.stdout.splitlines() if line.strip()]
    return failures


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzzing", description="fuzzer child process")
    sub = parser.add_subparsers(dest="mode", required=True)
    child = sub.add_parser("child")
    child.add_argument("reader")
    child.add_argument("seed", type=int)
    child.add_argument("start", type=int)
    child.add_argument("count")
    child.add_argument("seconds")
    child.add_argument("work", type=Path)
    files = sub.add_parser("file")
    files.add_argument("reader")
    files.add_argument("paths", type=Path, nargs="+")
    files.add_argument("--work", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.mode == "child":
        _child(args.reader, args.seed, args.start, int(args.count) if args.count else None,
               float(args.seconds) if args.seconds else None, args.work)
        return 0
    for path in args.paths:
        problem = check(args.reader, path.read_bytes(), args.work)
        if problem is not None:
            print(f"{path.name}: {problem}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
