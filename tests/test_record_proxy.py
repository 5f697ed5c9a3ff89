"""`recount record`: the members strings it hands out, the crash-safe file, and the live proxy.

Plain UDP sockets on loopback stand in for the members (a "member" binds its real consensus and
log endpoints and answers the way an Aeron receiver does: to the datagram's source address).  The
crash tests run the proxy as a real `python -m cli record` process and kill it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from cli.app import run
from formats.errors import DecodeError
from recorder.record import batch_io
from recorder.record import members as record_members
from recorder.record.proxy import ProxyError, RecordingProxy
from recorder.record.reader import Datagram, read_recording, read_recording_table
from recorder.record.storage import (
    COLUMNS,
    END_OF_STREAM,
    FIELDS,
    BackgroundWriter,
    RecordingFile,
    recording_schema,
)

ROOT = Path(__file__).resolve().parents[1]
REAL = (
    "0,127.0.0.1:20002,127.0.0.1:20003,127.0.0.1:20004,127.0.0.1:20005,127.0.0.1:20001|"
    "1,127.0.0.1:20102,127.0.0.1:20103,127.0.0.1:20104,127.0.0.1:20105,127.0.0.1:20101|"
    "2,127.0.0.1:20202,127.0.0.1:20203,127.0.0.1:20204,127.0.0.1:20205,127.0.0.1:20201"
)


# --- the members strings ------------------------------------------------------------------------


def test_each_member_keeps_its_own_entry_and_reaches_the_others_through_the_proxy():
    members = record_members.parse_members(REAL)
    proxies = {
        (m, c): f"10.0.0.9:{30000 + 10 * m + i}" for m in range(3) for i, c in enumerate(("consensus", "log"))
    }
    strings = record_members.member_cluster_members(members, proxies)
    entries = {member_id: text.split("|") for member_id, text in strings.items()}
    assert entries[1][1] == REAL.split("|")[1]  # its own entry: the endpoints it binds
    assert entries[1][0] == "0,127.0.0.1:20002,10.0.0.9:30000,10.0.0.9:30001,127.0.0.1:20005,127.0.0.1:20001"
    assert entries[1][2] == "2,127.0.0.1:20202,10.0.0.9:30020,10.0.0.9:30021,127.0.0.1:20205,127.0.0.1:20201"
    assert entries[0][0] == REAL.split("|")[0] and entries[0][1] != REAL.split("|")[1]
    # Every string is one Aeron parses back to the same ids.
    assert all([m.id for m in record_members.parse_members(text)] == [0, 1, 2] for text in strings.values())
    everywhere = record_members.rewrite_members(members, proxies)
    assert "127.0.0.1:20003" not in everywhere and "127.0.0.1:20103" not in everywhere


def test_optional_endpoints_and_untapped_channels_are_written_back_verbatim():
    text = "3,h:1,h:2,h:3,h:0,h:5,h:6,h:7|4,i:1,i:2,i:3,i:4,i:5,i:6"
    members = record_members.parse_members(text)
    assert record_members.rewrite_members(members, {}) == text
    rewritten = record_members.rewrite_members(members, {(4, "ingress"): "p:9"})
    assert rewritten == "3,h:1,h:2,h:3,h:0,h:5,h:6,h:7|4,p:9,i:2,i:3,i:4,i:5,i:6"
    assert record_members.ingress_endpoints(members, {(4, "ingress"): "p:9"}) == "3=h:1,4=p:9"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", "at least one member"),
        ("0,a:1,b:2,c:3,d:4", "invalid member value"),
        ("0,a:1,b:2,c:3,d:4,e:5,f:6,g:7,h:8", "invalid member value"),
        ("x,a:1,b:2,c:3,d:4,e:5", "x"),
        ("0,a:1,b:2,c:3,d:4,e:5|0,a:1,b:7,c:8,d:4,e:5", "member id 0 appears twice"),
    ],
)
def test_a_members_string_aeron_would_reject_is_a_decode_error(text, expected):
    with pytest.raises(DecodeError, match=expected) as caught:
        record_members.parse_members(text)
    assert "\n" not in str(caught.value) and str(caught.value).startswith("clusterMembers")


@pytest.mark.parametrize(
    "endpoint, expected",
    [
        ("h", "expected host:port"),
        ("h:", "expected host:port"),
        (":9", "expected host:port"),
        ("h:0", "1..65535"),
        ("h:65536", "1..65535"),
        ("::1:9", r"\[address\]:port"),
        ("h:9a", "expected host:port"),
    ],
)
def test_a_proxied_endpoint_must_be_a_host_and_a_real_port(endpoint, expected):
    with pytest.raises(DecodeError, match=expected):
        record_members.split_endpoint(endpoint)


def test_ipv6_endpoints_are_read_and_written_in_brackets():
    assert record_members.split_endpoint("[::1]:20003") == ("::1", 20003)
    assert record_members.format_endpoint("::1", 20003) == "[::1]:20003"
    assert record_members.format_endpoint("127.0.0.1", 20003) == "127.0.0.1:20003"


# --- the file -----------------------------------------------------------------------------------


def _rows(start: int, count: int) -> list[list]:
    return [
        [1_000 + i for i in range(start, start + count)],
        ["127.0.0.1:40000"] * count,
        ["127.0.0.1:20103"] * count,
        [None] * count,
        [1] * count,
        ["consensus"] * count,
        ["toMember"] * count,
        ["127.0.0.1:30000"] * count,
        ["127.0.0.1:41000"] * count,
        [b"payload %d" % i for i in range(start, start + count)],
    ]


def _write(path: Path, batches: list[int], *, clean: bool = True) -> list[int]:
    """A recording with batches of the given sizes; returns the byte offset after the schema and
    after each batch."""
    recording = RecordingFile.create(path, recording_schema(REAL, {"recount.channels": "consensus,log"}))
    ends = [recording.bytes_written]
    written = 0
    for size in batches:
        recording.append(_rows(written, size))
        written += size
        ends.append(recording.bytes_written)
    if clean:
        recording.close()
    else:
        recording.abandon()
    return ends


def test_a_new_recording_is_readable_before_anything_is_recorded(tmp_path):
    path = tmp_path / "recording.arrows"
    recording = RecordingFile.create(path, recording_schema(REAL))
    try:
        datagrams, metadata, problems = read_recording(path)  # read while the recorder still has it open
    finally:
        recording.close()
    assert datagrams == [] and metadata.cluster_members == REAL and metadata.format_version == 1
    assert [p.offset for p in problems] == [path.stat().st_size - len(END_OF_STREAM)]
    assert "did not stop cleanly" in str(problems[0])
    assert read_recording(path)[1].clean_end and read_recording(path)[2] == []


def test_batches_read_back_in_order_as_datagrams_with_seq_running_across_batches(tmp_path):
    path = tmp_path / "recording.arrows"
    _write(path, [3, 1, 4])
    table, metadata, problems = read_recording_table(path)
    assert problems == [] and metadata.clean_end and metadata.channels == ("consensus", "log")
    assert table.column_names == list(COLUMNS) and table.schema == pa.schema(
        FIELDS, metadata=table.schema.metadata
    )
    assert table.column("seq").to_pylist() == list(range(8))
    datagrams, _, _ = read_recording(path)
    assert datagrams[5] == Datagram(1_005, "127.0.0.1", 40000, "127.0.0.1", 20103, b"payload 5")


def test_a_torn_last_batch_is_dropped_and_reported_and_every_whole_batch_before_it_kept(tmp_path):
    whole = tmp_path / "whole.arrows"
    ends = _write(whole, [5, 6, 7], clean=False)
    data = whole.read_bytes()
    torn = tmp_path / "torn.arrows"
    # Every cut inside the last batch (every 3rd byte keeps this fast but hits each header field).
    for cut in range(ends[2] + 1, ends[3], 3):
        torn.write_bytes(data[:cut])
        datagrams, _, problems = read_recording(torn)
        assert [d.payload for d in datagrams] == [b"payload %d" % i for i in range(11)], cut
        assert len(problems) == 1 and problems[0].offset == ends[2], cut
        assert f"the last {cut - ends[2]} bytes are ignored" in str(problems[0])
    # A cut exactly between batches is not torn: only the missing end-of-stream marker is reported.
    torn.write_bytes(data[: ends[2]])
    datagrams, metadata, problems = read_recording(torn)
    assert len(datagrams) == 11 and not metadata.clean_end and "did not stop cleanly" in str(problems[0])


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"", "empty stream"),
        (b"not arrow at all, just text" * 3, "expected an Arrow IPC stream schema"),
        (
            pa.schema([("ts", pa.int64())], metadata={"recount.format": "replay"}).serialize().to_pybytes(),
            "found recount.format=replay",
        ),
        (
            recording_schema(REAL)
            .with_metadata({"recount.format": "recording", "recount.formatVersion": "2"})
            .serialize()
            .to_pybytes(),
            "newer than this recount reads",
        ),
        (
            pa.schema(
                [("seq", pa.int64())], metadata={"recount.format": "recording", "recount.formatVersion": "1"}
            )
            .serialize()
            .to_pybytes(),
            "column 'seq': expected uint64",
        ),
    ],
)
def test_a_file_that_is_not_a_readable_recording_is_one_decode_error(tmp_path, content, expected):
    path = tmp_path / "bad.arrows"
    path.write_bytes(content)
    with pytest.raises(DecodeError, match=expected) as caught:
        read_recording(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_a_recording_whose_seq_goes_backwards_is_rejected(tmp_path):
    schema = recording_schema(REAL)

    def batch(seqs: list[int]) -> bytes:
        return (
            pa.RecordBatch.from_arrays(
                [
                    pa.array(seqs, pa.uint64()),
                    *(pa.array(values, f.type) for values, f in zip(_rows(0, 3), FIELDS[1:], strict=True)),
                ],
                schema=schema,
            )
            .serialize()
            .to_pybytes()
        )

    path = tmp_path / "edited.arrows"
    path.write_bytes(schema.serialize().to_pybytes() + batch([0, 1, 2]) + batch([3, 3, 4]) + END_OF_STREAM)
    with pytest.raises(DecodeError, match="seq 3 follows seq 3"):
        read_recording(path)


def test_an_existing_recording_is_never_overwritten_without_force(tmp_path):
    path = tmp_path / "recording.arrows"
    _write(path, [2])
    before = path.read_bytes()
    with pytest.raises(FileExistsError):
        RecordingFile.create(path, recording_schema(REAL))
    assert path.read_bytes() == before
    RecordingFile.create(path, recording_schema("x"), force=True).close()
    assert read_recording(path)[1].cluster_members == "x"


def test_a_disk_full_mid_recording_stops_the_writer_and_keeps_what_was_written(tmp_path):
    path = tmp_path / "recording.arrows"
    recording = RecordingFile.create(path, recording_schema(REAL))
    errors = []
    writer = BackgroundWriter(recording, on_error=errors.append)
    writer.submit(_rows(0, 4))
    deadline = time.monotonic() + 5
    while recording.rows_written < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        os.dup2(full, recording._fd)  # from now on every write fails as on a full disk: ENOSPC
    finally:
        os.close(full)
    writer.submit(_rows(4, 3))
    writer.submit(_rows(7, 2))
    writer.close()
    assert isinstance(writer.error, OSError) and errors == [writer.error]
    assert writer.rows_lost == 5 and recording.rows_written == 4
    datagrams, _, _ = read_recording(path)
    assert [d.payload for d in datagrams] == [b"payload %d" % i for i in range(4)]


# --- the proxy, in process ----------------------------------------------------------------------


def _udp(host: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((host, 0))
    sock.settimeout(5)
    return sock


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


class Cluster:
    """Stand-in members: member N binds consensus and log on 127.0.0.(N+2), its own "host"."""

    def __init__(self, count: int = 3) -> None:
        self.sockets = {
            m: {"consensus": _udp(f"127.0.0.{m + 2}"), "log": _udp(f"127.0.0.{m + 2}")} for m in range(count)
        }
        self.members = "|".join(
            f"{m},127.0.0.{m + 2}:1,{self.endpoint(m, 'consensus')},{self.endpoint(m, 'log')},127.0.0.{m + 2}:0,"
            f"127.0.0.{m + 2}:2"
            for m in range(count)
        )

    def endpoint(self, member: int, channel: str) -> str:
        host, port = self.sockets[member][channel].getsockname()
        return f"{host}:{port}"

    def close(self) -> None:
        for by_channel in self.sockets.values():
            for sock in by_channel.values():
                sock.close()


@pytest.fixture
def cluster():
    stand_ins = Cluster()
    yield stand_ins
    stand_ins.close()


def _run_in_thread(proxy: RecordingProxy, recording: RecordingFile, **options):
    result = {}
    thread = threading.Thread(
        target=lambda: result.setdefault("summary", proxy.run(recording, handle_signals=False, **options)),
        daemon=True,
    )
    thread.start()
    return thread, result


@pytest.fixture(params=["recvmmsg", "recvfrom"])
def socket_io(request, monkeypatch):
    """Both ways of moving datagrams: batched (Linux) and one call per datagram (everywhere)."""
    if request.param == "recvmmsg" and not batch_io.available():
        pytest.skip("no recvmmsg/sendmmsg here (not Linux)")
    monkeypatch.setenv("RECOUNT_RECORD_BATCH_IO", "1" if request.param == "recvmmsg" else "0")
    return request.param


def test_datagrams_go_through_unchanged_both_ways_and_are_recorded_as_the_wire_would_show_them(
    cluster, tmp_path, socket_io
):
    proxy = RecordingProxy(cluster.members, listen_host="127.0.0.1")
    assert proxy.socket_io == socket_io
    with proxy:
        recording = proxy.create_recording(tmp_path / "out")
        thread, result = _run_in_thread(proxy, recording, flush_ms=10)
        to_member1 = _address(proxy.proxies[(1, "consensus")])
        from_member0 = _udp("127.0.0.2")  # member 0's publication: its host's address, a port of its own
        from_elsewhere = _udp("127.0.0.1")  # on no member's host
        member1 = cluster.sockets[1]["consensus"]
        seen_by_member = []
        for i in range(3):
            for sender in (from_member0, from_elsewhere):
                message = b"\x00" * i + bytes([i, sender.getsockname()[1] & 0xFF]) + b"\xff" * 40
                sender.sendto(message, to_member1)
                data, source = member1.recvfrom(2048)
                assert data == message
                seen_by_member.append(source)
                member1.sendto(b"SM" + message, source)  # as an Aeron receiver answers: to the source
                reply, replier = sender.recvfrom(2048)
                assert reply == b"SM" + message and replier == to_member1
        leader_log = _udp("127.0.0.4")  # member 2 as leader, sending the log to member 0
        leader_log.sendto(b"log", _address(proxy.proxies[(0, "log")]))
        assert cluster.sockets[0]["log"].recvfrom(100)[0] == b"log"
        time.sleep(0.05)
        proxy.stop()
        thread.join(5)
    summary = result["summary"]
    # One upstream socket per sender, on the listen host, kept for that sender.
    assert len(set(seen_by_member)) == 2 and {s[0] for s in seen_by_member} == {"127.0.0.1"}
    assert seen_by_member[0::2] == [seen_by_member[0]] * 3

    rows = read_recording_table(recording.path)[0].to_pylist()
    assert [r["seq"] for r in rows] == list(range(13)) and summary.recorded == 13
    first, reply = rows[0], rows[1]
    assert first["src"] == "%s:%d" % from_member0.getsockname() and first["dst"] == cluster.endpoint(
        1, "consensus"
    )
    assert (first["srcMember"], first["dstMember"], first["direction"]) == (0, 1, "toMember")
    assert (
        first["proxy"] == proxy.proxies[(1, "consensus")]
        and first["proxyUpstream"] == "%s:%d" % seen_by_member[0]
    )
    assert reply["src"] == cluster.endpoint(1, "consensus") and reply["dst"] == first["src"]
    assert (reply["srcMember"], reply["dstMember"], reply["direction"]) == (1, 0, "fromMember")
    assert reply["payload"] == b"SM" + first["payload"]
    assert rows[2]["srcMember"] is None  # 127.0.0.1 is no member's host
    assert (rows[12]["channel"], rows[12]["srcMember"], rows[12]["dstMember"]) == ("log", 2, 0)
    assert all(a["ts"] <= b["ts"] for a, b in zip(rows, rows[1:], strict=False))
    counts = summary.to_json()["channels"]
    sent_bytes = 2 * sum(i + 42 for i in range(3))
    assert counts["consensus"] == {
        "toMember": {"datagrams": 6, "bytes": sent_bytes},
        "fromMember": {"datagrams": 6, "bytes": sent_bytes + 6 * len(b"SM")},
    }
    assert counts["log"]["toMember"]["datagrams"] == 1 and summary.stopped_by == "stop"
    assert summary.kernel_drops == 0 and summary.warnings == () and summary.socket_io == socket_io


def test_a_burst_of_mtu_sized_datagrams_from_senders_taking_turns_goes_through_in_order(cluster, tmp_path, socket_io):
    proxy = RecordingProxy(cluster.members)
    senders = [_udp("127.0.0.2"), _udp("127.0.0.3")]
    member1 = cluster.sockets[1]["consensus"]
    member1.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)  # the burst must not overflow the member
    messages = [bytes([i % 251]) * (1 + (i * 97) % 1400) for i in range(300)]
    with proxy:
        recording = proxy.create_recording(tmp_path)
        thread, result = _run_in_thread(proxy, recording, flush_ms=10)
        target = _address(proxy.proxies[(1, "consensus")])
        for i, message in enumerate(messages):  # runs of 1..3 from one sender, then the other
            senders[(i // (1 + i % 3)) % 2].sendto(message, target)
        received = [member1.recvfrom(2048)[0] for _ in messages]
        time.sleep(0.05)
        proxy.stop()
        thread.join(5)
    by_sender: dict[int, list[bytes]] = {0: [], 1: []}
    for i, message in enumerate(messages):
        by_sender[(i // (1 + i % 3)) % 2].append(message)
    assert sorted(received) == sorted(messages)
    rows = read_recording_table(recording.path)[0].to_pylist()
    for index, sender in enumerate(senders):
        source = "%s:%d" % sender.getsockname()
        assert [r["payload"] for r in rows if r["src"] == source] == by_sender[index]
    assert result["summary"].recorded == len(messages) == result["summary"].datagrams


def test_over_ipv6_loopback_datagrams_and_replies_go_through_and_are_recorded(tmp_path, socket_io):
    def udp6() -> socket.socket:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        sock.bind(("::1", 0))
        sock.settimeout(5)
        return sock

    try:
        members_sockets = [(udp6(), udp6()) for _ in range(3)]
    except OSError:
        pytest.skip("no IPv6 loopback here")
    members = "|".join(
        f"{i},[::1]:1,[::1]:{c.getsockname()[1]},[::1]:{log.getsockname()[1]},[::1]:0,[::1]:2"
        for i, (c, log) in enumerate(members_sockets)
    )
    sender, member1 = udp6(), members_sockets[1][0]
    with RecordingProxy(members, listen_host="::1") as proxy:
        recording = proxy.create_recording(tmp_path)
        thread, result = _run_in_thread(proxy, recording, flush_ms=10)
        target = ("::1", int(proxy.proxies[(1, "consensus")].rsplit(":", 1)[1]))
        for i in range(3):
            sender.sendto(b"to %d" % i, target)
            data, source = member1.recvfrom(100)
            member1.sendto(b"re " + data, source)
            assert sender.recvfrom(100) == (b"re to %d" % i, (*target, 0, 0))
        time.sleep(0.05)
        proxy.stop()
        thread.join(5)
    rows = read_recording_table(recording.path)[0].to_pylist()
    assert [(r["direction"], r["payload"]) for r in rows[:2]] == [("toMember", b"to 0"), ("fromMember", b"re to 0")]
    assert rows[0]["src"] == "[::1]:%d" % sender.getsockname()[1] and rows[1]["src"] == "[::1]:%d" % (
        member1.getsockname()[1])
    assert result["summary"].recorded == 6
    for pair in members_sockets:
        for sock in pair:
            sock.close()


def test_a_writer_falling_behind_is_said_at_once_and_nothing_is_lost(cluster, tmp_path, monkeypatch):
    import recorder.record.proxy as proxy_module

    monkeypatch.setattr(proxy_module, "WRITER_BACKLOG_WARN_BYTES", 1000)
    slow_append = RecordingFile.append

    def append_slowly(self, columns):
        time.sleep(0.3)  # a disk far slower than the traffic
        slow_append(self, columns)

    monkeypatch.setattr(RecordingFile, "append", append_slowly)
    proxy = RecordingProxy(cluster.members)
    sender, member1 = _udp("127.0.0.2"), cluster.sockets[1]["consensus"]
    warnings: list[str] = []
    with proxy:
        recording = proxy.create_recording(tmp_path)
        thread = threading.Thread(target=lambda: warnings.append(proxy.run(
            recording, flush_ms=5, handle_signals=False, on_warning=warnings.append)), daemon=True)
        thread.start()
        for i in range(40):
            sender.sendto(b"%d" % i + bytes(200), _address(proxy.proxies[(1, "consensus")]))
            member1.recvfrom(1000)
            time.sleep(0.005)
        proxy.stop()
        thread.join(30)
    *said, summary = warnings
    assert said and "the recording writer is" in said[0] and "behind" in said[0]
    assert list(summary.warnings) == said and summary.recorded == 40 and summary.lost == 0


def test_datagrams_the_kernel_dropped_are_said_at_once_and_counted_in_the_summary(cluster, tmp_path, socket_io):
    proxy = RecordingProxy(cluster.members)
    listener = next(r.listener for r in proxy._routes if (r.member_id, r.channel) == (1, "consensus"))
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a proxy starved of buffer space
    sender = _udp("127.0.0.2")
    warnings: list[str] = []
    with proxy:
        recording = proxy.create_recording(tmp_path)
        for i in range(200):  # before the loop runs: the proxy is "behind"
            sender.sendto(b"x%d" % i + bytes(500), _address(proxy.proxies[(1, "consensus")]))
        summary = proxy.run(recording, duration_s=0.3, handle_signals=False, on_warning=warnings.append)
    if not os.path.exists("/proc/net/udp"):
        pytest.skip("no /proc/net/udp here: kernel drops are not visible")
    assert summary.kernel_drops > 0 and summary.datagrams + summary.kernel_drops == 200
    assert warnings and list(summary.warnings) == warnings
    assert "falling behind" in warnings[0] and proxy.proxies[(1, "consensus")] in warnings[0]
    assert summary.to_json()["kernelDrops"] == summary.kernel_drops
    assert f"DROPPED {summary.kernel_drops} datagrams" in summary.describe()


def test_a_member_given_its_string_would_bind_its_own_endpoints_and_send_to_the_proxy(cluster):
    with RecordingProxy(cluster.members, channels=("consensus", "log", "ingress")) as proxy:
        for member_id, text in proxy.member_cluster_members().items():
            for member in record_members.parse_members(text):
                own = member.id == member_id
                assert (member.consensus_endpoint == cluster.endpoint(member.id, "consensus")) == own
                assert (member.log_endpoint == cluster.endpoint(member.id, "log")) == own
        assert proxy.ingress_endpoints() == ",".join(f"{m}={proxy.proxies[(m, 'ingress')]}" for m in range(3))
        document = proxy.describe_json("r.arrows")
        assert [e["channel"] for e in document["endpoints"]][:3] == ["consensus", "log", "ingress"]


def test_a_port_already_in_use_fails_before_anything_is_written(cluster, tmp_path):
    blocker = _udp()
    with pytest.raises(ProxyError, match="address already in use|Address already in use"):
        RecordingProxy(cluster.members, base_port=blocker.getsockname()[1] - 1)
    blocker.close()
    assert not (tmp_path / "recording.arrows").exists()


def test_no_socket_for_a_new_sender_stops_the_run_keeping_what_was_recorded(cluster, tmp_path, monkeypatch):
    import recorder.record.proxy as proxy_module

    proxy = RecordingProxy(cluster.members)
    with proxy:
        recording = proxy.create_recording(tmp_path)
        thread, result = _run_in_thread(proxy, recording, flush_ms=10)
        first, second = _udp("127.0.0.2"), _udp("127.0.0.3")
        first.sendto(b"one", _address(proxy.proxies[(1, "consensus")]))
        assert cluster.sockets[1]["consensus"].recvfrom(100)[0] == b"one"

        def out_of_descriptors(family):
            raise OSError(24, "Too many open files")

        monkeypatch.setattr(proxy_module, "_udp_socket", out_of_descriptors)
        second.sendto(b"two", _address(proxy.proxies[(1, "consensus")]))
        thread.join(5)
    summary = result["summary"]
    assert summary.stopped_by == "socketError" and isinstance(summary.error, ProxyError)
    assert "Too many open files" in str(summary.error) and "127.0.0.3" in str(summary.error)
    assert [d.payload for d in read_recording(recording.path)[0]] == [b"one"]


# --- the command, in process and as a process ---------------------------------------------------


def test_bad_configuration_is_exit_2_with_one_line(cluster, tmp_path, capsys):
    blocker = _udp()
    port = blocker.getsockname()[1]
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "recording.arrows").write_bytes(b"keep me")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    cases = [
        (["--members", "0,a:1,b:2"], "invalid member value"),
        (["--members", "0,h:1,nohost,h:3,h:4,h:5"], "expected host:port"),
        (["--members", cluster.members, "--base-port", str(port)], f"127.0.0.1:{port}"),
        (["--members", cluster.members, "--listen-host", "0.0.0.0"], "not a wildcard"),
        (["--members", "0,h:1,no-such-host.invalid:2,h:3,h:4,h:5"], "cannot resolve"),
        (["--members", cluster.members, "--out", str(existing)], "already exists (use --force"),
        (["--members", cluster.members, "--out", str(a_file / "sub")], "a-file"),
    ]
    try:
        for arguments, expected in cases:
            if "--out" not in arguments:
                arguments = [*arguments, "--out", str(tmp_path / "out")]
            assert run(["record", *arguments, "--duration", "0"]) == 2, arguments
            err = capsys.readouterr().err
            assert expected in err and err.count("\n") == 1 and "Traceback" not in err, (arguments, err)
    finally:
        blocker.close()
    assert (existing / "recording.arrows").read_bytes() == b"keep me"
    assert not (tmp_path / "out" / "recording.arrows").exists()


def _non_loopback_address() -> str | None:
    """An address of this host that is not loopback (found by routing, nothing sent), or None."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1: a route lookup only
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_listening_beyond_loopback_warns_that_anything_reaching_the_ports_is_forwarded(cluster, tmp_path, capsys):
    assert run(["record", "--members", cluster.members, "--out", str(tmp_path / "a"), "--duration", "0",
                "--json"]) == 0
    assert "warning" not in capsys.readouterr().err
    address = _non_loopback_address()
    if address is None:
        pytest.skip("this host has no address but loopback")
    assert run(["record", "--members", cluster.members, "--out", str(tmp_path / "b"), "--duration", "0",
                "--listen-host", address, "--json"]) == 0
    err = capsys.readouterr().err
    assert f"listening on {address}, not a loopback address" in err and "forwarded to the cluster" in err


def test_socket_buffers_the_kernel_clamps_are_reported(cluster, tmp_path, capsys, monkeypatch):
    import recorder.record.proxy as proxy_module

    monkeypatch.setattr(proxy_module, "_FORCE_OPTIONS", {socket.SO_RCVBUF: None, socket.SO_SNDBUF: None})
    monkeypatch.setattr(proxy_module, "SOCKET_BUFFER_BYTES", 1 << 30)  # past any net.core.rmem_max
    assert run(["record", "--members", cluster.members, "--out", str(tmp_path), "--duration", "0"]) == 0
    out, err = capsys.readouterr()
    assert "Socket buffers: receive" in out and "(asked 1024 MiB)" in out
    assert "warning: the kernel clamped the receive buffers" in err and "net.core.rmem_max" in err


def test_without_json_each_member_is_told_its_members_string_and_the_summary_follows(
    cluster, tmp_path, capsys
):
    assert (
        run(
            [
                "record",
                "--members",
                cluster.members,
                "--out",
                str(tmp_path),
                "--ingress",
                "--duration",
                "0.05",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    for member_id in range(3):
        line = next(line for line in lines if line.startswith(f"  member {member_id}: "))
        own = line.split(": ", 1)[1].split("|")[member_id]
        assert own == cluster.members.split("|")[member_id]
    assert any(line.startswith("Clients' aeron.cluster.ingress.endpoints: 0=127.0.0.1:") for line in lines)
    assert lines[-1].startswith("recorded 0 datagrams (0 bytes; consensus 0 datagrams/0 bytes")
    assert "stop with Ctrl-C or SIGTERM" in captured.err


def test_force_replaces_a_recording_and_a_full_disk_at_start_is_exit_2(cluster, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "recording.arrows").write_bytes(b"old")
    assert (
        run(
            [
                "record",
                "--members",
                cluster.members,
                "--out",
                str(out),
                "--force",
                "--duration",
                "0",
                "--json",
            ]
        )
        == 0
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["kind"] for line in lines] == ["proxy", "summary"] and lines[1]["stoppedBy"] == "duration"
    assert read_recording(out / "recording.arrows")[1].clean_end

    full = tmp_path / "full"
    full.mkdir()
    (full / "recording.arrows").symlink_to("/dev/full")
    assert (
        run(["record", "--members", cluster.members, "--out", str(full), "--force", "--duration", "0"]) == 2
    )
    err = capsys.readouterr().err
    assert "No space left on device" in err and err.count("\n") == 1


def _start(members: str, out: Path, *options: str, preexec_fn=None) -> tuple[subprocess.Popen, dict]:
    process = subprocess.Popen(
        [sys.executable, "-m", "cli", "record", "--members", members, "--out", str(out), "--json", *options],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=preexec_fn,
    )
    line = process.stdout.readline()
    assert line, process.stderr.read()
    return process, json.loads(line)


class Exchange:
    """A sender (member 0's publication) talking to member 1's consensus endpoint through the proxy,
    member 1 answering every datagram; everything numbered."""

    def __init__(self, cluster: Cluster, plan: dict) -> None:
        target = next(
            e["proxy"] for e in plan["endpoints"] if e["memberId"] == 1 and e["channel"] == "consensus"
        )
        self.target = _address(target)
        self.sender = _udp("127.0.0.2")
        self.member = cluster.sockets[1]["consensus"]
        for sock in (self.sender, self.member):
            sock.settimeout(1)  # short: a round trip through a killed proxy must give up soon
        self.sent = 0

    def round_trip(self) -> None:
        message = b"M%06d" % self.sent + bytes(range(self.sent % 200))
        self.sender.sendto(message, self.target)
        data, source = self.member.recvfrom(4096)
        assert data == message
        self.member.sendto(b"R" + data, source)
        assert self.sender.recvfrom(4096)[0] == b"R" + data
        self.sent += 1

    def expected(self, count: int) -> list[bytes]:
        messages = [b"M%06d" % i + bytes(range(i % 200)) for i in range(count)]
        return [payload for message in messages for payload in (message, b"R" + message)]


def test_sigkill_mid_stream_keeps_every_datagram_sent_before_the_last_flush(cluster, tmp_path):
    process, plan = _start(cluster.members, tmp_path, "--flush-ms", "20")
    exchange = Exchange(cluster, plan)
    try:
        for _ in range(200):
            exchange.round_trip()
        flushed = exchange.sent
        time.sleep(0.3)  # many flush intervals: all of the above is on disk now
        stop = threading.Event()

        def stream() -> None:
            while not stop.is_set():
                try:
                    exchange.round_trip()
                except TimeoutError:
                    return  # the proxy is gone

        streaming = threading.Thread(target=stream, daemon=True)
        streaming.start()  # mid-stream: datagrams keep flowing while the recorder dies
        time.sleep(0.15)
        process.send_signal(signal.SIGKILL)
        process.wait(5)
        stop.set()
        streaming.join(5)
    finally:
        process.kill()
        process.communicate()
    assert process.returncode == -signal.SIGKILL
    datagrams, metadata, problems = read_recording(plan["recording"])
    payloads = [d.payload for d in datagrams]
    assert payloads[: 2 * flushed] == exchange.expected(flushed)
    # What got in after that is a prefix of what was sent: nothing lost in between, nothing altered.
    assert len(payloads) > 2 * flushed and payloads == exchange.expected(exchange.sent + 1)[: len(payloads)]
    assert not metadata.clean_end and problems and all(p.source == plan["recording"] for p in problems)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_sigint_stops_cleanly_with_a_summary(cluster, tmp_path, signum):
    process, plan = _start(cluster.members, tmp_path)
    exchange = Exchange(cluster, plan)
    for _ in range(25):
        exchange.round_trip()
    process.send_signal(signum)
    out, err = process.communicate(timeout=10)
    assert process.returncode == 0, err
    summary = json.loads(out)
    assert summary["kind"] == "summary" and summary["stoppedBy"] == signal.Signals(signum).name
    assert summary["recorded"] == summary["datagrams"] == 50 and summary["lost"] == 0
    assert summary["channels"]["consensus"]["fromMember"]["datagrams"] == 25
    datagrams, metadata, problems = read_recording(plan["recording"])
    assert [d.payload for d in datagrams] == exchange.expected(25) and metadata.clean_end and problems == []


def test_a_write_error_while_recording_stops_with_one_line_and_keeps_what_was_flushed(cluster, tmp_path):
    # The file may not grow past this (EFBIG, as a full disk gives ENOSPC); far more than one batch.
    limit = 256 * 1024

    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    process, plan = _start(cluster.members, tmp_path, "--flush-ms", "5", preexec_fn=limit_file_size)
    exchange = Exchange(cluster, plan)
    try:
        deadline = time.monotonic() + 10
        while process.poll() is None and time.monotonic() < deadline:
            try:
                exchange.round_trip()
            except (TimeoutError, AssertionError):
                break  # the proxy stopped between a send and its reply
    finally:
        out, err = process.communicate(timeout=10)
    assert process.returncode == 2, err
    assert err.count("\n") == 1 and "File too large; recording stopped" in err and "Traceback" not in err, err
    summary = json.loads(out.splitlines()[-1])
    assert summary["stoppedBy"] == "writeError" and summary["recorded"] > 0, summary
    datagrams, _, problems = read_recording(plan["recording"])
    assert len(datagrams) == summary["recorded"]
    assert [d.payload for d in datagrams] == exchange.expected(exchange.sent + 1)[: len(datagrams)]
    assert os.path.getsize(plan["recording"]) <= limit and problems


def test_a_file_that_cannot_take_even_the_schema_is_exit_2_and_leaves_nothing_behind(cluster, tmp_path):
    def tiny_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))

    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "record",
            "--members",
            cluster.members,
            "--out",
            str(tmp_path),
            "--duration",
            "0",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        preexec_fn=tiny_files,
        timeout=30,
    )
    assert completed.returncode == 2 and completed.stdout == ""
    assert (
        completed.stderr.count("\n") == 1 and "cannot write the recording: File too large" in completed.stderr
    )
    assert not (tmp_path / "recording.arrows").exists()


def test_a_short_load_goes_through_with_nothing_lost_reordered_or_altered(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "bench_record_proxy", ROOT / "benchmarks" / "bench_record_proxy.py"
    )
    bench = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, bench)  # dataclasses look their module up there
    spec.loader.exec_module(bench)
    # A tenth of the benchmark's rate: the suite may share its machine with other heavy jobs.
    result = bench.run_load(rate=5_000, seconds=2, flush_ms=50, out_dir=str(tmp_path))
    assert result.sent == 10_000 and result.received == result.sent
    assert (result.lost, result.reordered, result.altered) == (0, 0, 0)
    assert result.replies_received == result.replies_sent == 1_250 and result.replies_bad == 0
    assert (result.recorded_to_member, result.recorded_from_member) == (10_000, 1_250)
    assert result.recording_mismatches == 0 and result.recording_problems == []
    assert result.perfect
