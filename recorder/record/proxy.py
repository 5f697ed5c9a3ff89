"""The recording proxy: forward a cluster's UDP traffic unchanged, both ways, and record every datagram.

Routing.  For each member M and tapped channel C (consensus and log; ingress on request) the proxy
listens on a proxy endpoint P(M, C), which the cluster is told is M's endpoint for C (see
`members` for which string each member gets).  A datagram arriving at P from a sender S (an Aeron
publication's send socket, an ephemeral port) is sent on to M's real endpoint R(M, C) from an
*upstream* socket U(M, C, S) that belongs to that one sender.  Aeron's receivers answer a publication
(status messages, NAKs, RTTM replies) by sending to the source address of the data they received,
so M answers to U; the proxy sends whatever reaches U back to S *from P*.  S therefore sees its
replies come from the address it sends to, which matters: a unicast publication's socket is
connected to that address, and a multi-destination (log) publication matches replies to its
destinations by address.  One upstream socket per sender keeps two publications to the same member
apart, as they would be on the wire.  Upstream sockets are bound to the listen host and closed
least-recently-used first past `MAX_UPSTREAMS`.

What a recording holds.  Each datagram is recorded as the real wire would have shown it without the
proxy: a datagram to a member as S → R(M, C) (``direction`` ``toMember``), a reply as the address it
came from (R, as Aeron answers from the receiving socket) → S (``fromMember``), plus the proxy's own
endpoints (``proxy`` = P, ``proxyUpstream`` = U).  A decoder given the original members string
therefore reads a recording as it reads a pcap of the same traffic.  ``srcMember``/``dstMember`` are
the member at the far end when known: always for the member side, and for the sender side of
consensus and log traffic when exactly one member's endpoints are on the sender's IP address (one
member per host, as in staging); otherwise null, and the decoder tells members apart by what they
send.  Timestamps are ``time.time_ns()`` at receipt, before forwarding.

Not tapped, by construction: catch-up (the leader's archive replays to the catch-up endpoint the
follower names in its own CatchupPosition message), archive, egress.  Clients redirected by the
leader (NewLeaderEvent) are told the leader's own ingress endpoint, so ingress recording only sees
clients that keep the endpoints they were given.

Loop.  One thread runs a `selectors` loop over blocking sockets (a full send buffer makes a send
wait rather than drop).  On Linux each readable socket is read `batch_io.BATCH` datagrams per
``recvmmsg`` call, and each run of datagrams from one sender goes on in one ``sendmmsg`` from the
same buffer; elsewhere (or with ``RECOUNT_RECORD_BATCH_IO=0``) one ``recvfrom``/``sendto`` per
datagram.  A socket is drained up to `DRAIN_LIMIT` datagrams per turn so that none starves the others.
The forwarding path does no Arrow work: a datagram costs it a copy of its payload onto one pending
``bytearray`` and a few array appends (`_PendingRows`).  Every ``flush_ms`` those are copied out and
handed to the `storage.BackgroundWriter`, whose thread turns them into Arrow columns (zero-copy
buffers, a cumulative sum for the offsets) and writes one batch, so the loop never holds the GIL for
long and never waits for the disk.  SIGINT/SIGTERM (or `stop()`, a duration, a write error, no
socket for a new sender) end the loop through a self-pipe; the rows still pending are written, the
stream is closed and a `RecordingSummary` returned.  A proxy runs once.

Falling behind is said, never silent.  The writer thread reads the kernel's per-socket drop counters
(``/proc/net/udp``, ``/proc/net/udp6``; Linux) for every socket of the proxy at each flush (at most
every `DROP_CHECK_SECONDS`): datagrams dropped because a receive buffer was full are reported through
``on_warning`` (the command prints it on stderr) the first time at once, then at most once a second,
and counted in the summary (``kernelDrops``); a writer whose queue grows past
`WRITER_BACKLOG_WARN_BYTES` is reported the same way.  The socket buffers asked for and granted are in
`socket_buffers` (the kernel may clamp them to ``net.core.rmem_max``).
"""

from __future__ import annotations

import ipaddress
import json
import os
import platform
import selectors
import signal
import socket
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from formats.cluster_members import MemberEntry
from recorder.record import batch_io
from recorder.record import members as cluster_members
from recorder.record.storage import (
    FIELDS,
    RECORDING_FILE,
    BackgroundWriter,
    RecordingFile,
    recording_schema,
)

DEFAULT_CHANNELS = ("consensus", "log")
TO_MEMBER = "toMember"
FROM_MEMBER = "fromMember"
DIRECTIONS = (TO_MEMBER, FROM_MEMBER)

#: Larger than any UDP payload (65507 over IPv4, 65527 over IPv6).
MAX_DATAGRAM = 65536
#: Datagrams read from one socket before the loop looks at the others.
DRAIN_LIMIT = 256
#: Rows handed to the writer early when this many are pending (bounds one batch's size).
MAX_PENDING_ROWS = 32768
#: Payload bytes handed to the writer early when this many are pending (keeps offsets in int32).
MAX_PENDING_BYTES = 64 * 1024 * 1024
#: Bytes queued for the writer past which the proxy says the disk is not keeping up.
WRITER_BACKLOG_WARN_BYTES = 64 * 1024 * 1024
#: How often, at most, the kernel's drop counters are read (seconds).
DROP_CHECK_SECONDS = 0.1
#: Open upstream sockets, all routes together, before the least recently used is closed.
MAX_UPSTREAMS = 512
#: Socket buffers asked for.  A deep receive buffer is what lets the proxy be starved of CPU for a
#: while (the writer thread, a busy host) without dropping a datagram.  Linux charges a small
#: datagram about 830 bytes on loopback and doubles the size asked, so 64 MiB holds about 160,000
#: small datagrams, some 3 s of 50,000/s.  Memory is used only while the proxy is behind.
#: Unprivileged, the kernel caps it at net.core.rmem_max / wmem_max (often 208 KiB to 4 MiB; the
#: command warns); with CAP_NET_ADMIN we ask past that cap (SO_RCVBUFFORCE), as a recorder's job is
#: not to lose anything.
SOCKET_BUFFER_BYTES = 64 * 1024 * 1024
#: Python's socket module does not name SO_RCVBUFFORCE/SO_SNDBUFFORCE (3.11): Linux's generic values
#: (33, 32), on the architectures that use them (alpha, mips, parisc and sparc number them otherwise).
_GENERIC_SOCKET_OPTIONS = sys.platform.startswith("linux") and platform.machine().lower().startswith(
    ("x86_64", "amd64", "i386", "i686", "aarch64", "arm", "riscv", "ppc", "s390", "loongarch")
)
_FORCE_OPTIONS = {
    socket.SO_RCVBUF: getattr(socket, "SO_RCVBUFFORCE", 33 if _GENERIC_SOCKET_OPTIONS else None),
    socket.SO_SNDBUF: getattr(socket, "SO_SNDBUFFORCE", 32 if _GENERIC_SOCKET_OPTIONS else None),
}


class ProxyError(Exception):
    """The proxy cannot start or go on: a port in use, a host that does not resolve, an unwritable
    file.  ``str(error)`` is one line naming what and where."""


@dataclass(frozen=True, slots=True)
class ProxiedEndpoint:
    """One member endpoint the proxy stands in front of."""

    member_id: int
    channel: str
    member: str  #: the member's real endpoint, resolved ("ip:port")
    proxy: str  #: where the proxy listens for it ("ip:port")

    def to_json(self) -> dict[str, Any]:
        return {
            "memberId": self.member_id,
            "channel": self.channel,
            "member": self.member,
            "proxy": self.proxy,
        }


@dataclass(frozen=True, slots=True)
class ChannelCount:
    datagrams: int = 0
    bytes: int = 0

    def to_json(self) -> dict[str, int]:
        return {"datagrams": self.datagrams, "bytes": self.bytes}


@dataclass(frozen=True, slots=True)
class RecordingSummary:
    """What a run did.  ``channels`` counts forwarded datagrams by channel and direction;
    ``recorded`` of them reached the file, ``lost`` did not (only after a write error).  ``error``
    is what stopped the run early: an `OSError` from the file, a `ProxyError` from the sockets, or
    (a bug of ours) anything else the writer raised."""

    path: str
    channels: Mapping[str, Mapping[str, ChannelCount]]
    recorded: int
    lost: int
    forward_errors: int
    stopped_by: str
    error: Exception | None = field(default=None)
    #: Datagrams the kernel dropped on the proxy's sockets because a receive buffer was full (the
    #: proxy fell behind): neither forwarded nor recorded.
    kernel_drops: int = 0
    #: What was said on the way (falling behind, a writer backlog), in order.
    warnings: tuple[str, ...] = ()
    #: How datagrams were read and sent: "recvmmsg" (batched) or "recvfrom".
    socket_io: str = "recvfrom"

    @property
    def datagrams(self) -> int:
        return sum(
            count.datagrams for by_direction in self.channels.values() for count in by_direction.values()
        )

    @property
    def bytes(self) -> int:
        return sum(count.bytes for by_direction in self.channels.values() for count in by_direction.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "summary",
            "recording": self.path,
            "datagrams": self.datagrams,
            "bytes": self.bytes,
            "recorded": self.recorded,
            "lost": self.lost,
            "forwardErrors": self.forward_errors,
            "kernelDrops": self.kernel_drops,
            "warnings": list(self.warnings),
            "socketIo": self.socket_io,
            "stoppedBy": self.stopped_by,
            "error": None if self.error is None else str(self.error),
            "channels": {
                channel: {direction: count.to_json() for direction, count in by_direction.items()}
                for channel, by_direction in self.channels.items()
            },
        }

    def describe(self) -> str:
        parts = []
        for channel, by_direction in self.channels.items():
            datagrams = sum(count.datagrams for count in by_direction.values())
            size = sum(count.bytes for count in by_direction.values())
            parts.append(f"{channel} {datagrams} datagrams/{size} bytes")
        lost = f", {self.lost} not written" if self.lost else ""
        dropped = (
            f"; the kernel DROPPED {self.kernel_drops} datagrams before the proxy could read them (it fell behind)"
            if self.kernel_drops
            else ""
        )
        return (
            f"recorded {self.recorded} datagrams ({self.bytes} bytes; {', '.join(parts)}){lost} to {self.path}"
            f"{dropped}"
        )


def format_address(address: tuple) -> str:
    return cluster_members.format_endpoint(address[0], address[1])


class _Route:
    """One (member, channel): its listening socket and the upstream sockets of its senders."""

    __slots__ = (
        "member_id",
        "channel",
        "member_address",
        "member_text",
        "listener",
        "proxy_text",
        "upstreams",
        "upstreams_by_raw",
        "member_raw",
        "infer_peer_member",
        "datagrams",
        "bytes",
        "reply_datagrams",
        "reply_bytes",
    )

    def __init__(self, member_id: int, channel: str, member_address: tuple, listener: socket.socket) -> None:
        self.member_id = member_id
        self.channel = channel
        self.member_address = member_address
        self.member_text = format_address(member_address)
        self.listener = listener
        self.proxy_text = format_address(listener.getsockname())
        self.upstreams: dict[tuple, _Upstream] = {}
        self.upstreams_by_raw: dict[bytes, _Upstream] = {}  # the same, by raw sockaddr (batched I/O)
        self.member_raw = batch_io.sockaddr_bytes(listener.family, member_address)
        # Only members send on consensus and log, so a sender's IP can name it; ingress is clients.
        self.infer_peer_member = channel != "ingress"
        self.datagrams = 0
        self.bytes = 0
        self.reply_datagrams = 0
        self.reply_bytes = 0


class _Upstream:
    """The socket that stands for one sender towards one member.  Rows it forwards are keyed
    ``key`` (to the member) and ``key + 1`` (replies)."""

    __slots__ = ("sock", "text", "peer", "peer_raw", "route", "key", "last_used_ns")

    def __init__(
        self, sock: socket.socket, peer: tuple, peer_raw: bytes, route: _Route, key: int, now_ns: int
    ) -> None:
        self.sock = sock
        self.text = format_address(sock.getsockname())
        self.peer = peer
        self.peer_raw = peer_raw
        self.route = route
        self.key = key
        self.last_used_ns = now_ns


class _PendingRows:
    """The rows received since the last flush, column by column, in plain buffers: receive times,
    keys, payload lengths, and every payload back to back in one ``bytearray``.  A row's ``key``
    stands for everything that is the same for all datagrams from one sender to one member in one
    direction (`_KeyTable`); ``sources`` holds the rare reply whose source is not the member's
    endpoint, by row index.  `take` copies them out (cheap C copies) and starts afresh, so that the
    loop's bound appenders stay valid."""

    __slots__ = ("ts", "keys", "lengths", "payloads", "sources")

    def __init__(self) -> None:
        self.ts = array("q")
        self.keys = array("i")
        self.lengths = array("i")
        self.payloads = bytearray()
        self.sources: dict[int, tuple] = {}

    def __len__(self) -> int:
        return len(self.ts)

    def add_slots(self, view: memoryview, lengths: list[int], ts: int) -> None:
        """Rows for a batch received into `batch_io` slots (their keys are the caller's)."""
        payloads, slot = self.payloads, batch_io.SLOT_BYTES
        for index, length in enumerate(lengths):
            offset = index * slot
            payloads += view[offset : offset + length]
        self.ts.extend(repeat(ts, len(lengths)))
        self.lengths.extend(lengths)

    def take(self, key_count: int) -> _TakenRows | None:
        if not self.ts:
            return None
        rows = _TakenRows(self.ts.tobytes(), self.keys.tobytes(), self.lengths.tobytes(), bytes(self.payloads),
                          dict(self.sources), key_count)
        del self.ts[:], self.keys[:], self.lengths[:], self.payloads[:]
        self.sources.clear()
        return rows


@dataclass(frozen=True, slots=True)
class _TakenRows:
    """One flush's rows, handed to the writer thread, which turns them into columns."""

    ts: bytes
    keys: bytes
    lengths: bytes
    payloads: bytes
    sources: dict[int, tuple]
    key_count: int  #: keys defined when the rows were taken (the loop may add more meanwhile)

    def __len__(self) -> int:
        return len(self.ts) // 8

    @property
    def size(self) -> int:
        return len(self.payloads) + 2 * len(self.ts)


class _KeyTable:
    """The per-key values of the recording's columns (src, dst, srcMember, dstMember, channel,
    direction, proxy, proxyUpstream), two keys per upstream socket ever opened.  The loop adds keys;
    the writer thread reads the first ``key_count`` of them."""

    TYPES = tuple(field.type for field in FIELDS[2:10])

    def __init__(self) -> None:
        self._values: tuple[list, ...] = tuple([] for _ in self.TYPES)
        self._arrays: list[pa.Array] = []
        self._arrays_count = -1

    def __len__(self) -> int:
        return len(self._values[-1])

    def add(self, upstream: _Upstream, peer_member: int | None) -> None:
        route, peer = upstream.route, format_address(upstream.peer)
        to_member = (peer, route.member_text, peer_member, route.member_id, route.channel, TO_MEMBER)
        from_member = (route.member_text, peer, route.member_id, peer_member, route.channel, FROM_MEMBER)
        for row in (to_member, from_member):
            # Column by column, the last one last: a reader sees a key's row once len() counts it.
            for values, value in zip(self._values, (*row, route.proxy_text, upstream.text), strict=True):
                values.append(value)

    def take(self, keys: pa.Array, key_count: int) -> list[pa.Array]:
        if self._arrays_count != key_count:
            self._arrays = [
                pa.array(values[:key_count], type_) for values, type_ in zip(self._values, self.TYPES, strict=True)
            ]
            self._arrays_count = key_count
        return [array_.take(keys) for array_ in self._arrays]


def _resolve(host: str, port: int, family: int, *, what: str) -> tuple:
    """A concrete socket address for host:port in ``family`` (IP literals need no lookup)."""
    try:
        infos = socket.getaddrinfo(host, port, family, socket.SOCK_DGRAM)
    except (socket.gaierror, UnicodeError) as error:
        raise ProxyError(
            f"{what} {cluster_members.format_endpoint(host, port)}: cannot resolve host: {error}"
        ) from None
    if not infos:
        raise ProxyError(
            f"{what} {cluster_members.format_endpoint(host, port)}: no address of the listen host's family"
        )
    return infos[0][4]


def _listen_family(listen_host: str) -> tuple[int, str]:
    try:
        infos = socket.getaddrinfo(listen_host, 0, socket.AF_UNSPEC, socket.SOCK_DGRAM)
    except (socket.gaierror, UnicodeError) as error:
        raise ProxyError(f"listen host {listen_host!r}: cannot resolve: {error}") from None
    family, _, _, _, address = infos[0]
    if ipaddress.ip_address(address[0].split("%")[0]).is_unspecified:
        raise ProxyError(
            f"listen host {listen_host!r}: give the address members can reach the proxy at, not a wildcard"
        )
    return family, address[0]


def _udp_socket(family: int) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_DGRAM)
    for option, forced in _FORCE_OPTIONS.items():
        for name in (forced, option):
            if name is None:
                continue
            try:
                sock.setsockopt(socket.SOL_SOCKET, name, SOCKET_BUFFER_BYTES)
                break
            except OSError:
                pass  # not privileged (or not Linux): the capped size, or the default, still works
    return sock


def socket_buffer_sizes(sock: socket.socket) -> dict[str, int]:
    """The receive and send buffer sizes the kernel granted, comparable with what was asked (Linux
    doubles the size it is given, for its bookkeeping, and reports the doubled figure)."""
    scale = 2 if sys.platform.startswith("linux") else 1
    return {
        "receive": sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) // scale,
        "send": sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) // scale,
    }


def read_udp_drops(inodes: Iterable[int]) -> dict[int, int]:
    """The kernel's count of datagrams dropped on arrival (receive buffer full) for each socket inode
    in ``inodes`` that ``/proc/net/udp`` or ``udp6`` lists; empty where there is no such file."""
    wanted = set(inodes)
    found: dict[int, int] = {}
    for name in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(name, encoding="ascii") as table:
                next(table, None)  # the header line
                for line in table:
                    columns = line.split()
                    if len(columns) >= 13:
                        inode = int(columns[9])
                        if inode in wanted:
                            found[inode] = int(columns[12])
        except (OSError, ValueError):
            continue
    return found


class RecordingProxy:
    """Binds the proxy endpoints at construction (so a port in use fails at once), then `run`."""

    def __init__(
        self,
        members_text: str,
        *,
        channels: Iterable[str] = DEFAULT_CHANNELS,
        listen_host: str = "127.0.0.1",
        base_port: int = 0,
    ) -> None:
        self.members_text = members_text
        self.members: tuple[MemberEntry, ...] = cluster_members.parse_members(members_text)
        wanted = set(channels)
        unknown = wanted - set(cluster_members.CHANNELS)
        if unknown:
            raise ProxyError(
                f"unknown channel(s) {sorted(unknown)}: expected some of {list(cluster_members.CHANNELS)}"
            )
        self.channels = tuple(channel for channel in cluster_members.CHANNELS if channel in wanted)
        if not 0 <= base_port <= 0xFFFF:
            raise ProxyError(f"base port {base_port}: expected 0 (any free port) or 1..65535")
        family, self.listen_ip = _listen_family(listen_host)
        self._family = family

        planned = []
        for member in self.members:
            for channel in self.channels:
                endpoint = cluster_members.channel_endpoint(member, channel)
                what = f"member {member.id} {channel} endpoint"
                host, port = cluster_members.split_endpoint(endpoint, what=what)
                planned.append((member.id, channel, _resolve(host, port, family, what=what)))
        last_port = base_port + len(planned) - 1
        if base_port and last_port > 0xFFFF:
            raise ProxyError(f"base port {base_port}: {len(planned)} proxy ports do not fit below 65536")

        self.forward_errors = 0
        self._routes: list[_Route] = []
        self._upstreams: dict[socket.socket, _Upstream] = {}
        self._stop_reason: str | None = None
        self._stop_lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        try:
            for index, (member_id, channel, member_address) in enumerate(planned):
                port = base_port + index if base_port else 0
                listener = _udp_socket(family)
                where = f"{cluster_members.format_endpoint(self.listen_ip, port)} (proxy for member {member_id} {channel})"
                if port and (self.listen_ip, port) == member_address[:2]:
                    listener.close()
                    raise ProxyError(f"cannot listen on {where}: it is the member's own endpoint")
                try:
                    listener.bind((self.listen_ip, port))
                except OSError as error:
                    listener.close()
                    raise ProxyError(f"cannot listen on {where}: {error.strerror or error}") from None
                self._routes.append(_Route(member_id, channel, member_address, listener))
        except BaseException:
            self.close()
            raise
        self._member_by_ip = self._members_by_ip()
        self._pending = _PendingRows()
        self._key_table = _KeyTable()
        self._next_key = 0
        self._batch_io = batch_io.BatchSocketIO(len(self._routes[0].member_raw)) if (
            self._routes and batch_io.available()) else None
        #: Socket inode -> what the socket is, for the kernel's drop counters (loop adds, writer reads).
        self._inodes: dict[int, str] = {
            os.fstat(route.listener.fileno()).st_ino: f"{route.proxy_text} (proxy for member {route.member_id} "
                                                      f"{route.channel})"
            for route in self._routes
        }
        self._drops_seen: dict[int, int] = {}
        self._drops_unreported: dict[str, int] = {}
        self._drops_reported_at = -1e9
        self._drop_checked_at = 0.0
        self.kernel_drops = 0
        self.warnings: list[str] = []
        self._on_warning: Callable[[str], None] | None = None
        self._warning_lock = threading.Lock()
        self._drops_lock = threading.Lock()

    @property
    def socket_io(self) -> str:
        return "recvmmsg" if self._batch_io is not None else "recvfrom"

    @property
    def listens_beyond_this_host(self) -> bool:
        """Whether the listen address is reachable from other hosts (not loopback): then anything
        that reaches a proxy port is forwarded to the cluster."""
        return not ipaddress.ip_address(self.listen_ip.split("%")[0]).is_loopback

    @property
    def socket_buffers(self) -> dict[str, int]:
        """Bytes asked for each socket buffer, and what the kernel granted a listener."""
        granted = socket_buffer_sizes(self._routes[0].listener) if self._routes else {"receive": 0, "send": 0}
        return {"asked": SOCKET_BUFFER_BYTES, **granted}

    # --- what to tell the cluster -------------------------------------------------------------

    @property
    def proxies(self) -> dict[tuple[int, str], str]:
        return {(route.member_id, route.channel): route.proxy_text for route in self._routes}

    @property
    def endpoints(self) -> list[ProxiedEndpoint]:
        return [ProxiedEndpoint(r.member_id, r.channel, r.member_text, r.proxy_text) for r in self._routes]

    def member_cluster_members(self) -> dict[int, str]:
        return cluster_members.member_cluster_members(self.members, self.proxies)

    def proxied_cluster_members(self) -> str:
        return cluster_members.rewrite_members(self.members, self.proxies)

    def ingress_endpoints(self) -> str | None:
        if "ingress" not in self.channels:
            return None
        return cluster_members.ingress_endpoints(self.members, self.proxies)

    def describe_json(self, recording_path: str) -> dict[str, Any]:
        return {
            "kind": "proxy",
            "recording": recording_path,
            "clusterMembers": self.members_text,
            "memberClusterMembers": {str(k): v for k, v in self.member_cluster_members().items()},
            "proxiedClusterMembers": self.proxied_cluster_members(),
            "ingressEndpoints": self.ingress_endpoints(),
            "channels": list(self.channels),
            "endpoints": [endpoint.to_json() for endpoint in self.endpoints],
            "socketBuffers": self.socket_buffers,
            "socketIo": self.socket_io,
        }

    def schema_metadata(self) -> dict[str, str]:
        return {
            "recount.channels": ",".join(self.channels),
            "recount.endpoints": json.dumps([e.to_json() for e in self.endpoints], separators=(",", ":")),
        }

    # --- the output file --------------------------------------------------------------------

    def create_recording(
        self, out_dir: str | os.PathLike, *, force: bool = False, fsync: bool = False
    ) -> RecordingFile:
        """``out_dir/recording.arrows`` with the schema written; an existing recording is kept
        unless ``force``."""
        directory = Path(out_dir)
        path = directory / RECORDING_FILE
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ProxyError(
                f"{directory}: cannot create the output directory: {error.strerror or error}"
            ) from None
        if not directory.is_dir():
            raise ProxyError(f"{directory}: not a directory")
        schema = recording_schema(self.members_text, self.schema_metadata())
        try:
            return RecordingFile.create(path, schema, force=force, fsync=fsync)
        except FileExistsError:
            raise ProxyError(f"{path}: a recording already exists (use --force to overwrite it)") from None
        except OSError as error:
            raise ProxyError(f"{path}: cannot write the recording: {error.strerror or error}") from None

    # --- running ------------------------------------------------------------------------------

    def stop(self, reason: str = "stop") -> None:
        """Ask `run` to finish (from any thread, or a signal handler); the first reason wins."""
        with self._stop_lock:
            if self._stop_reason is None:
                self._stop_reason = reason
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass  # the pipe is full or closed: the loop is waking or gone anyway

    def run(
        self,
        recording: RecordingFile,
        *,
        flush_ms: float = 100,
        duration_s: float | None = None,
        handle_signals: bool = True,
        on_ready: Callable[[], None] | None = None,
        on_warning: Callable[[str], None] | None = None,
    ) -> RecordingSummary:
        """Forward and record until stopped; always writes what it received and closes the file.
        ``on_warning`` hears at once (from the writer thread or the loop) when the proxy falls
        behind: datagrams the kernel dropped, a writer queue growing."""
        self._on_warning = on_warning
        writer = BackgroundWriter(recording, on_error=lambda error: self.stop("writeError"),
                                  build=self._build_columns)
        previous_handlers = self._install_signal_handlers() if handle_signals else {}
        selector = selectors.DefaultSelector()
        failure: ProxyError | None = None
        try:
            selector.register(self._wake_r, selectors.EVENT_READ, self._drain_wake)
            for route in self._routes:
                selector.register(
                    route.listener, selectors.EVENT_READ, self._listener_handler(route, selector)
                )
            self._loop(selector, writer, flush_ms, duration_s, on_ready)
        except ProxyError as error:
            # No socket for a new sender (out of file descriptors, say): stop, keeping all recorded.
            failure = error
            self.stop("socketError")
        finally:
            writer.submit(self._take_rows())
            writer.close()
            selector.close()
            self._restore_signal_handlers(previous_handlers)
            self._check_drops(force=True)
        stopped_by = self._stop_reason or "stop"
        channels: dict[str, dict[str, ChannelCount]] = {}
        for channel in self.channels:
            routes = [route for route in self._routes if route.channel == channel]
            channels[channel] = {
                TO_MEMBER: ChannelCount(sum(r.datagrams for r in routes), sum(r.bytes for r in routes)),
                FROM_MEMBER: ChannelCount(
                    sum(r.reply_datagrams for r in routes), sum(r.reply_bytes for r in routes)
                ),
            }
        return RecordingSummary(
            path=recording.path,
            channels=channels,
            recorded=recording.rows_written,
            lost=writer.rows_lost,
            forward_errors=self.forward_errors,
            stopped_by=stopped_by,
            error=writer.error or failure,
            kernel_drops=self.kernel_drops,
            warnings=tuple(self.warnings),
            socket_io=self.socket_io,
        )

    def _loop(self, selector, writer, flush_ms, duration_s, on_ready) -> None:
        pending = self._pending
        flush_ns = max(1, int(flush_ms * 1_000_000))
        monotonic_ns = time.monotonic_ns
        start = monotonic_ns()
        deadline = None if duration_s is None else start + int(duration_s * 1_000_000_000)
        next_flush = start + flush_ns
        backlog_reported = False
        if on_ready is not None:
            on_ready()
        select = selector.select
        while self._stop_reason is None:
            now = monotonic_ns()
            wake_at = next_flush if deadline is None else min(next_flush, deadline)
            for key, _ in select(max(0, wake_at - now) / 1e9):
                key.data()
            now = monotonic_ns()
            if now >= next_flush or len(pending) >= MAX_PENDING_ROWS or len(pending.payloads) >= MAX_PENDING_BYTES:
                writer.submit(self._take_rows())
                next_flush = now + flush_ns
                backlog = writer.queued_bytes
                if backlog > WRITER_BACKLOG_WARN_BYTES and not backlog_reported:
                    self._warn(f"the recording writer is {backlog / 2**20:.0f} MiB behind (the disk is slower than "
                               "the traffic): still forwarding, holding the rows in memory")
                    backlog_reported = True
                elif backlog < WRITER_BACKLOG_WARN_BYTES // 2:
                    backlog_reported = False
            if deadline is not None and now >= deadline:
                self.stop("duration")

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _listener_handler(self, route: _Route, selector: selectors.BaseSelector) -> Callable[[], None]:
        if self._batch_io is not None:
            return self._batched_listener_handler(route, selector)
        recvfrom = route.listener.recvfrom
        upstreams = route.upstreams
        member_address = route.member_address
        pending = self._pending
        append_ts, append_key, append_length = pending.ts.append, pending.keys.append, pending.lengths.append
        payloads = pending.payloads
        time_ns = time.time_ns
        dontwait = socket.MSG_DONTWAIT

        def on_readable() -> None:
            nonlocal payloads
            for _ in range(DRAIN_LIMIT):
                try:
                    data, peer = recvfrom(MAX_DATAGRAM, dontwait)
                except BlockingIOError:
                    return
                except OSError:
                    # e.g. an ICMP error queued on the socket: nothing was received; carry on.
                    self.forward_errors += 1
                    return
                ts = time_ns()
                upstream = upstreams.get(peer)
                if upstream is None:
                    upstream = self._open_upstream(route, peer, ts, selector)
                upstream.last_used_ns = ts
                try:
                    upstream.sock.sendto(data, member_address)
                except OSError:
                    self.forward_errors += 1  # the wire would have lost it too; it is still recorded
                append_ts(ts)
                append_key(upstream.key)
                append_length(len(data))
                payloads += data
                route.datagrams += 1
                route.bytes += len(data)

        return on_readable

    def _batched_listener_handler(self, route: _Route, selector: selectors.BaseSelector) -> Callable[[], None]:
        io = self._batch_io
        receive, send, view = io.receive, io.send, io.view
        fd = route.listener.fileno()
        by_raw = route.upstreams_by_raw
        member_raw = route.member_raw
        add_slots, extend_keys = self._pending.add_slots, self._pending.keys.extend
        time_ns = time.time_ns
        batches = max(1, DRAIN_LIMIT // batch_io.BATCH)

        def on_readable() -> None:
            for _ in range(batches):
                try:
                    lengths, sources = receive(fd)
                except OSError:
                    self.forward_errors += 1
                    return
                count = len(lengths)
                if not count:
                    return
                ts = time_ns()
                start = 0
                while start < count:  # one sendmmsg per run of datagrams from one sender
                    raw = sources[start]
                    end = start + 1
                    while end < count and sources[end] == raw:
                        end += 1
                    upstream = by_raw.get(raw)
                    if upstream is None:
                        upstream = self._open_upstream(route, batch_io.sockaddr_tuple(raw), ts, selector, raw)
                    upstream.last_used_ns = ts
                    self.forward_errors += send(upstream.sock.fileno(), member_raw, start, lengths[start:end])
                    extend_keys(repeat(upstream.key, end - start))
                    start = end
                add_slots(view, lengths, ts)
                route.datagrams += count
                route.bytes += sum(lengths)
                if count < batch_io.BATCH:
                    return

        return on_readable

    def _upstream_handler(self, upstream: _Upstream) -> Callable[[], None]:
        if self._batch_io is not None:
            return self._batched_upstream_handler(upstream)
        recvfrom = upstream.sock.recvfrom
        route = upstream.route
        peer = upstream.peer
        reply = route.listener.sendto
        member_address = route.member_address
        key = upstream.key + 1
        pending = self._pending
        append_ts, append_key, append_length = pending.ts.append, pending.keys.append, pending.lengths.append
        payloads = pending.payloads
        sources = pending.sources
        time_ns = time.time_ns
        dontwait = socket.MSG_DONTWAIT

        def on_readable() -> None:
            nonlocal payloads
            if upstream.sock.fileno() < 0:
                return  # closed (least recently used) earlier in this turn of the loop
            for _ in range(DRAIN_LIMIT):
                try:
                    data, source = recvfrom(MAX_DATAGRAM, dontwait)
                except BlockingIOError:
                    return
                except OSError:
                    self.forward_errors += 1
                    return
                ts = time_ns()
                upstream.last_used_ns = ts
                try:
                    reply(data, peer)
                except OSError:
                    self.forward_errors += 1
                if source != member_address:
                    sources[len(pending)] = source
                append_ts(ts)
                append_key(key)
                append_length(len(data))
                payloads += data
                route.reply_datagrams += 1
                route.reply_bytes += len(data)

        return on_readable

    def _batched_upstream_handler(self, upstream: _Upstream) -> Callable[[], None]:
        io = self._batch_io
        receive, send, view = io.receive, io.send, io.view
        route = upstream.route
        listener_fd = route.listener.fileno()
        peer_raw = upstream.peer_raw
        member_raw = route.member_raw
        key = upstream.key + 1
        pending = self._pending
        add_slots, extend_keys, sources = pending.add_slots, pending.keys.extend, pending.sources
        time_ns = time.time_ns
        batches = max(1, DRAIN_LIMIT // batch_io.BATCH)

        def on_readable() -> None:
            if upstream.sock.fileno() < 0:
                return  # closed (least recently used) earlier in this turn of the loop
            fd = upstream.sock.fileno()
            for _ in range(batches):
                try:
                    lengths, raw_sources = receive(fd)
                except OSError:
                    self.forward_errors += 1
                    return
                count = len(lengths)
                if not count:
                    return
                ts = time_ns()
                upstream.last_used_ns = ts
                self.forward_errors += send(listener_fd, peer_raw, 0, lengths)
                first = len(pending)
                for index, raw in enumerate(raw_sources):
                    if raw != member_raw:
                        sources[first + index] = batch_io.sockaddr_tuple(raw)
                add_slots(view, lengths, ts)
                extend_keys(repeat(key, count))
                route.reply_datagrams += count
                route.reply_bytes += sum(lengths)
                if count < batch_io.BATCH:
                    return

        return on_readable

    def _open_upstream(
        self,
        route: _Route,
        peer: tuple,
        now_ns: int,
        selector: selectors.BaseSelector,
        peer_raw: bytes | None = None,
    ) -> _Upstream:
        if len(self._upstreams) >= MAX_UPSTREAMS:
            oldest = min(self._upstreams.values(), key=lambda upstream: upstream.last_used_ns)
            self._close_upstream(oldest, selector)
        sock = None
        try:
            sock = _udp_socket(self._family)
            sock.bind((self.listen_ip, 0))
        except OSError as error:
            if sock is not None:
                sock.close()
            raise ProxyError(
                f"cannot open a socket on {self.listen_ip} for sender {format_address(peer)} to member "
                f"{route.member_id} {route.channel}: {error.strerror or error}"
            ) from None
        if peer_raw is None:
            peer_raw = batch_io.sockaddr_bytes(self._family, peer)
        upstream = _Upstream(sock, peer, peer_raw, route, self._next_key, now_ns)
        self._next_key += 2
        peer_member = self._member_by_ip.get(peer[0]) if route.infer_peer_member else None
        self._key_table.add(upstream, peer_member)
        route.upstreams[peer] = upstream
        route.upstreams_by_raw[peer_raw] = upstream
        self._upstreams[sock] = upstream
        self._inodes[os.fstat(sock.fileno()).st_ino] = (
            f"{upstream.text} (proxy's socket towards member {route.member_id} {route.channel} "
            f"for sender {format_address(peer)})"
        )
        selector.register(sock, selectors.EVENT_READ, self._upstream_handler(upstream))
        return upstream

    def _close_upstream(self, upstream: _Upstream, selector: selectors.BaseSelector | None) -> None:
        if selector is not None:
            try:
                selector.unregister(upstream.sock)
            except (KeyError, ValueError):
                pass
        del upstream.route.upstreams[upstream.peer]
        del upstream.route.upstreams_by_raw[upstream.peer_raw]
        del self._upstreams[upstream.sock]
        self._check_drops(force=True)  # what it dropped before it goes, as its counter goes with it
        self._inodes.pop(os.fstat(upstream.sock.fileno()).st_ino, None)
        upstream.sock.close()

    # --- rows to columns --------------------------------------------------------------------

    def _members_by_ip(self) -> dict[str, int]:
        owners: dict[str, set[int]] = {}
        for route in self._routes:
            owners.setdefault(route.member_address[0], set()).add(route.member_id)
        return {ip: ids.pop() for ip, ids in owners.items() if len(ids) == 1}

    def _take_rows(self) -> _TakenRows | None:
        return self._pending.take(len(self._key_table))

    def _build_columns(self, rows: _TakenRows) -> list[pa.Array]:
        """The rows as Arrow columns (every column but seq): runs on the writer thread, mostly in C."""
        self._check_drops()
        count = len(rows)
        keys = pa.array(np.frombuffer(rows.keys, np.int32))
        src, *per_key = self._key_table.take(keys, rows.key_count)
        if rows.sources:
            texts = src.to_pylist()
            for index, source in rows.sources.items():
                texts[index] = format_address(source)
            src = pa.array(texts, pa.string())
        offsets = np.zeros(count + 1, np.int32)
        np.cumsum(np.frombuffer(rows.lengths, np.int32), out=offsets[1:])
        payloads = pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(rows.payloads)])
        return [pa.array(np.frombuffer(rows.ts, np.int64)), src, *per_key, payloads]

    # --- falling behind -----------------------------------------------------------------------

    def _check_drops(self, force: bool = False) -> None:
        """Read the kernel's drop counters of our sockets and report new drops: the first at once,
        then at most one line a second (a summing line), so that a proxy far behind does not also
        flood its stderr."""
        now = time.monotonic()
        if not force and now - self._drop_checked_at < DROP_CHECK_SECONDS:
            return
        self._drop_checked_at = now
        inodes = dict(self._inodes)
        with self._drops_lock:  # the writer thread, and the loop closing a socket
            for inode, drops in read_udp_drops(inodes).items():
                new = drops - self._drops_seen.get(inode, 0)
                if new > 0:
                    self._drops_seen[inode] = drops
                    self.kernel_drops += new
                    self._drops_unreported[inodes[inode]] = self._drops_unreported.get(inodes[inode], 0) + new
            if not self._drops_unreported or (not force and now - self._drops_reported_at < 1.0):
                return
            where = "; ".join(f"{count} on {name}" for name, count in self._drops_unreported.items())
            self._drops_unreported.clear()
            self._drops_reported_at = now
            total = self.kernel_drops
        self._warn(f"falling behind: the kernel dropped datagrams, its receive buffer full: {where} "
                   f"({total} in all so far); they were neither forwarded nor recorded")

    def _warn(self, message: str) -> None:
        with self._warning_lock:
            self.warnings.append(message)
            if self._on_warning is not None:
                self._on_warning(message)

    # --- signals and teardown ---------------------------------------------------------------

    def _install_signal_handlers(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            name = signal.Signals(signum).name
            previous[signum] = signal.signal(signum, lambda _signum, _frame, name=name: self.stop(name))
        return previous

    @staticmethod
    def _restore_signal_handlers(previous: Mapping[int, Any]) -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    def close(self) -> None:
        for upstream in list(self._upstreams.values()):
            self._close_upstream(upstream, None)
        for route in self._routes:
            route.listener.close()
        self._wake_r.close()
        self._wake_w.close()

    def __enter__(self) -> RecordingProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
