"""Crash-safe storage for a proxy recording: an Arrow IPC *stream* written one whole batch at a time.

The file (``recording.arrows``) is the IPC stream format byte for byte: the schema message, then one
record-batch message per flush, then the end-of-stream marker on a clean stop.  We serialise each
message ourselves and hand it to the kernel with ``os.write`` (no user-space buffer), so:

* the schema is on disk before the proxy forwards anything: the file is readable from its first
  moment, with zero rows;
* after ``kill -9`` of the recorder every batch whose write returned is in the page cache and reads
  back; a batch cut short (a kill or a full disk mid-write) is a torn tail that `reader` drops and
  reports, keeping the batches before it;
* ``fsync=True`` also survives the machine going down, at the cost of one fsync per flush.

`RecordingFile` is the synchronous file; `BackgroundWriter` runs it on its own thread so that the
proxy's socket loop never waits for the disk.  The loop hands over Arrow columns every flush
interval (built with a few vectorised calls, so the writer thread holds the GIL only briefly: a
thread that runs Python for milliseconds makes every socket call of the loop wait for the GIL, and
forwarding latency goes from microseconds to the switch interval).  A write error stops the writer,
keeps what was written and is reported through ``error`` and the ``on_error`` callback; rows handed
over after it are counted as lost.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

RECORDING_FILE = "recording.arrows"
FORMAT = "recording"
FORMAT_VERSION = 1

#: Rows a batch's seq column is ready for without building a longer ramp.
INITIAL_RAMP_ROWS = 32768

#: The IPC stream's end-of-stream marker: continuation token, then a zero metadata length.
END_OF_STREAM = b"\xff\xff\xff\xff\x00\x00\x00\x00"

FIELDS = (
    pa.field("seq", pa.uint64(), nullable=False),
    pa.field("ts", pa.int64(), nullable=False),
    pa.field("src", pa.string(), nullable=False),
    pa.field("dst", pa.string(), nullable=False),
    pa.field("srcMember", pa.int32()),
    pa.field("dstMember", pa.int32()),
    pa.field("channel", pa.string(), nullable=False),
    pa.field("direction", pa.string(), nullable=False),
    pa.field("proxy", pa.string(), nullable=False),
    pa.field("proxyUpstream", pa.string(), nullable=False),
    pa.field("payload", pa.binary(), nullable=False),
)
COLUMNS = tuple(field.name for field in FIELDS)


def recording_schema(cluster_members: str, extra_metadata: Mapping[str, str] | None = None) -> pa.Schema:
    metadata = {
        "recount.format": FORMAT,
        "recount.formatVersion": str(FORMAT_VERSION),
        "clusterMembers": cluster_members,
    }
    metadata.update(extra_metadata or {})
    return pa.schema(FIELDS, metadata=metadata)


class RecordingFile:
    """The stream file, written synchronously: `create`, then `append` a batch at a time, `close`."""

    def __init__(self, fd: int, path: str, schema: pa.Schema, *, fsync: bool) -> None:
        self._fd = fd
        self.path = path
        self.schema = schema
        self.fsync = fsync
        self.rows_written = 0
        self.bytes_written = 0
        # Built (and the compute kernel loaded) here, at start, not on the first flush.
        self._ramp = pa.array(range(INITIAL_RAMP_ROWS), pa.uint64())
        self._seq(1)

    @classmethod
    def create(
        cls, path: str | os.PathLike, schema: pa.Schema, *, force: bool = False, fsync: bool = False
    ) -> RecordingFile:
        """Create the file and write the schema.  Without ``force`` an existing file is an error
        (`FileExistsError`, from O_EXCL, so two recorders cannot race for one file)."""
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if force else os.O_EXCL)
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        recording = cls(fd, os.fspath(path), schema, fsync=fsync)
        try:
            recording._write(schema.serialize())
        except BaseException:
            recording._close_fd()
            if not force:
                os.unlink(path)  # ours alone (O_EXCL): leave no half-written file to block a retry
            raise
        return recording

    def append(self, columns: Sequence[pa.Array | Sequence[Any]]) -> None:
        """Write one record batch as one message.  ``columns`` are every column but ``seq``, in
        `COLUMNS` order (Arrow arrays, or Python sequences to convert); ``seq`` is assigned here,
        continuing from the rows already written."""
        count = len(columns[0]) if columns else 0
        if count == 0:
            return
        arrays = [self._seq(count)] + [
            values if isinstance(values, pa.Array) else pa.array(values, field.type)
            for values, field in zip(columns, FIELDS[1:], strict=True)
        ]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        self._write(batch.serialize())
        self.rows_written += count

    def _seq(self, count: int) -> pa.Array:
        # A cached 0..n-1 ramp plus an offset: a vectorised add instead of n Python ints.
        if len(self._ramp) < count:
            self._ramp = pa.array(range(max(count, 2 * len(self._ramp))), pa.uint64())
        return pc.add(self._ramp.slice(0, count), pa.scalar(self.rows_written, pa.uint64()))

    def close(self) -> None:
        """Write the end-of-stream marker and close (a clean stop)."""
        try:
            self._write(END_OF_STREAM)
        finally:
            self._close_fd()

    def abandon(self) -> None:
        """Close without the end-of-stream marker (after a write error: the file stays as it is)."""
        self._close_fd()

    def _write(self, data: bytes | pa.Buffer) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self.bytes_written += len(data)
        if self.fsync:
            os.fsync(self._fd)

    def _close_fd(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


class BackgroundWriter:
    """Owns a `RecordingFile` on a thread of its own; rows arrive in batches through `submit`.

    ``build``, when given, turns what is submitted into the columns on the writer thread (the
    proxy submits raw buffers, so that the forwarding loop does no Arrow work); what is submitted
    then needs ``len()`` (rows) and ``size`` (bytes, for `queued_bytes`)."""

    def __init__(
        self,
        recording: RecordingFile,
        *,
        on_error: Callable[[Exception], None] | None = None,
        build: Callable[[Any], Sequence[pa.Array | Sequence[Any]]] | None = None,
    ) -> None:
        self.recording = recording
        self._on_error = on_error
        self._build = build
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        #: Bytes submitted and not yet written (a writer falling behind shows here).
        self.queued_bytes = 0
        self._queued_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="recount-record-writer", daemon=True)
        self.error: Exception | None = None
        self.rows_lost = 0
        self._closed = False
        self._thread.start()

    def submit(self, columns: Any) -> None:
        """Queue one batch (as `RecordingFile.append` takes it, or what ``build`` takes) for writing."""
        if self._build is not None:
            if columns is not None and len(columns):
                with self._queued_lock:
                    self.queued_bytes += columns.size
                self._queue.put(columns)
        elif columns and len(columns[0]):
            self._queue.put(columns)

    def close(self) -> None:
        """Write everything submitted, then the end-of-stream marker (unless a write failed)."""
        if not self._closed:
            self._closed = True
            self._queue.put(None)
            self._thread.join()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                break
            rows = len(item) if self._build is not None else len(item[0])
            try:
                if self.error is not None:
                    self.rows_lost += rows
                    continue
                try:
                    self.recording.append(item if self._build is None else self._build(item))
                except Exception as error:  # an OSError is the disk's fault; anything else is ours
                    self.error = error
                    self.rows_lost += rows
                    if self._on_error is not None:
                        self._on_error(error)
            finally:
                if self._build is not None:
                    with self._queued_lock:
                        self.queued_bytes -= item.size
        if self.error is None:
            try:
                self.recording.close()
                return
            except Exception as error:
                self.error = error
                if self._on_error is not None:
                    self._on_error(error)
        self.recording.abandon()
