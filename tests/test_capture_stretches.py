"""What keeps a conversion's memory and time down around the file system: the capture importer reads a
memory-mapped capture a stretch at a time and lets each stretch's pages go
(`recorder.capture.pcap_import._read_through`), so that the whole file is never resident at once; a
replay file written over another lets the old one's pages go on a thread of its own.

`flow_control.header_words` (the flow-control and driver-stall scans' one read of the frame headers)
gathers the headers a stretch at a time and reports each stretch read: the words must be the ones a
single gather gives, and the stretches reported must follow one another through the file.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pyarrow as pa
import pytest

from formats.pcap import PcapReader, PcapWriter
from recorder.capture import flow_control
from recorder.capture.flow_control import header_words
from recorder.convert import write_atomically


def _capture(count: int) -> bytes:
    """A classic pcap of ``count`` UDP datagrams of varied lengths (some shorter than a frame header)."""
    writer = PcapWriter()
    records = [writer.file_header()]
    for n in range(count):
        payload = bytes((n * 7 + k) & 0xFF for k in range(8 + (n * 37) % 90))
        records.append(writer.udp_packet(1_000_000_000 + n * 1000, "127.0.0.1", 40000 + n % 3, "127.0.0.1",
                                         20003, payload))
    return b"".join(records)


def _one_gather(table, rows: np.ndarray) -> np.ndarray:
    """Each row's first 32 payload bytes as int32 words, copied one row at a time (zeros past the file)."""
    data = bytes(table.data)
    out = np.zeros((len(rows), 32), dtype=np.uint8)
    for k, row in enumerate(rows.tolist()):
        at = int(table.payload_offset[row])
        piece = data[at:at + 32]
        out[k, :len(piece)] = np.frombuffer(piece, dtype=np.uint8)
    return out.view("<i4")


def test_header_words_read_a_stretch_at_a_time_are_the_words_of_one_gather(monkeypatch):
    table = PcapReader(_capture(300)).columns()
    monkeypatch.setattr(flow_control, "STRETCH_BYTES", 1000)  # a few dozen datagrams a stretch
    rows = np.flatnonzero(table.payload_length >= 0)
    reads: list[tuple[int, int]] = []
    words = header_words(table, rows, lambda start, end: reads.append((start, end)))
    assert np.array_equal(words, _one_gather(table, rows))
    assert len(reads) > 10  # many stretches, each reported once it is read
    offsets = table.payload_offset[rows].tolist()
    assert reads[0][0] == offsets[0] and reads[-1][1] == offsets[-1]
    assert all(end < next_start for (_, end), (next_start, _) in zip(reads, reads[1:], strict=False))
    assert all(start <= end for start, end in reads)


def test_header_words_of_the_last_datagram_of_the_file_are_zero_past_its_end(monkeypatch):
    table = PcapReader(_capture(40)).columns()
    monkeypatch.setattr(flow_control, "STRETCH_BYTES", 256)
    rows = np.arange(len(table))
    words = header_words(table, rows, lambda start, end: None)
    assert np.array_equal(words, _one_gather(table, rows))
    assert (words[-1].view(np.uint8)[int(table.payload_length[-1]):] == 0).all()


def test_header_words_of_rows_out_of_file_order_are_gathered_at_once_and_no_stretch_reported(monkeypatch):
    table = PcapReader(_capture(120)).columns()
    monkeypatch.setattr(flow_control, "STRETCH_BYTES", 500)
    rows = np.arange(len(table))[::-1].copy()
    reads: list[tuple[int, int]] = []
    words = header_words(table, rows, lambda start, end: reads.append((start, end)))
    assert np.array_equal(words, _one_gather(table, rows))
    assert reads == []  # nothing said read: pages are let go only behind a pass in file order


def _open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd (Linux)")
def test_a_replay_file_written_over_another_replaces_it_and_lets_the_old_one_go(tmp_path):
    """`write_atomically` over an existing file (``--force``) holds the old file's descriptor across the
    rename so that its pages are freed by a thread of its own: the new bytes are in place, the old ones
    gone, and no descriptor is left open once that thread is done."""
    out = tmp_path / "incident.arrow"
    out.write_bytes(b"the user's old replay file")
    before = _open_descriptors()
    table = pa.table({"seq": pa.array([1, 2, 3], type=pa.uint64())})
    write_atomically(table, out)
    for thread in threading.enumerate():
        if thread.name == "recount-let-go":
            thread.join()
    assert _open_descriptors() == before
    assert pa.ipc.open_file(pa.OSFile(str(out))).read_all().equals(table)
    assert [p.name for p in tmp_path.iterdir()] == ["incident.arrow"]  # no temporary left beside it


def test_a_fifo_where_the_replay_file_goes_is_replaced_without_being_opened_for_reading(tmp_path):
    out = tmp_path / "incident.arrow"
    os.mkfifo(out)  # opening it to read would wait for a writer: it is replaced as it is
    write_atomically(pa.table({"seq": pa.array([1], type=pa.uint64())}), out)
    assert out.is_file()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd (Linux)")
def test_a_forced_replay_file_takes_the_old_ones_place_through_free_names_and_leaves_nothing_beside(tmp_path,
                                                                                                   monkeypatch):
    """With ``force`` the old file is renamed aside and removed after the new one is in place (no rename
    over an existing file, which ext4 makes write the new file out at once): the new bytes are in place,
    neither the old file nor the temporary is left beside it, and no descriptor stays open."""
    out = tmp_path / "incident.arrow"
    out.write_bytes(b"the user's old replay file")
    renames: list[tuple[str, str]] = []
    real_rename, real_replace = os.rename, os.replace

    def rename(source, target):
        assert not os.path.lexists(target), "a rename over an existing file"
        renames.append((os.path.basename(source), os.path.basename(target)))
        real_rename(source, target)

    def replace(source, target):
        raise AssertionError("replaced in one step")

    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(os, "replace", replace)
    before = _open_descriptors()
    table = pa.table({"seq": pa.array([1, 2, 3], type=pa.uint64())})
    write_atomically(table, out, force=True)
    monkeypatch.setattr(os, "rename", real_rename)
    monkeypatch.setattr(os, "replace", real_replace)
    for thread in threading.enumerate():
        if thread.name == "recount-let-go":
            thread.join()
    assert _open_descriptors() == before
    assert pa.ipc.open_file(pa.OSFile(str(out))).read_all().equals(table)
    assert [p.name for p in tmp_path.iterdir()] == ["incident.arrow"]
    assert [target for _, target in renames] == [f"incident.arrow.old-{os.getpid()}", "incident.arrow"]


def test_a_forced_replay_file_that_cannot_take_the_old_ones_place_puts_the_old_one_back(tmp_path, monkeypatch):
    out = tmp_path / "incident.arrow"
    out.write_bytes(b"the user's old replay file")
    real_rename = os.rename

    def rename(source, target):
        if os.path.basename(str(source)).startswith("incident.arrow.tmp-"):
            raise OSError(28, "No space left on device")
        real_rename(source, target)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="cannot write it: No space left on device"):
        write_atomically(pa.table({"seq": pa.array([1], type=pa.uint64())}), out, force=True)
    assert out.read_bytes() == b"the user's old replay file"
    assert [p.name for p in tmp_path.iterdir()] == ["incident.arrow"]


def test_a_file_left_at_the_aside_name_is_kept_and_the_replay_file_replaced_in_one_step(tmp_path):
    out = tmp_path / "incident.arrow"
    out.write_bytes(b"the user's old replay file")
    left = tmp_path / f"incident.arrow.old-{os.getpid()}"
    left.write_bytes(b"left by a run killed between its renames")
    table = pa.table({"seq": pa.array([1], type=pa.uint64())})
    write_atomically(table, out, force=True)
    assert left.read_bytes() == b"left by a run killed between its renames"
    assert pa.ipc.open_file(pa.OSFile(str(out))).read_all().equals(table)
