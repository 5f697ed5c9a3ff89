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

Loop.  One thread runs a `selectors` loop over blocking sockets read with ``MSG_DONTWAIT`` (a full
send buffer makes a send wait rather than drop); each readable socket is drained up to
`DRAIN_LIMIT` datagrams per turn so that no socket starves the others.  A datagram costs the loop
three list appends (time, key, bytes; `_PendingRows`); every ``flush_ms`` those lists become Arrow
columns in a few vectorised calls and go to the `storage.BackgroundWriter`, which writes them as one
batch.  SIGINT/SIGTERM (or `stop()`, a duration, a write error, no socket for a new sender) end the
loop through a self-pipe; the rows still pending are written, the stream is closed and a
`RecordingSummary` returned.  A proxy runs once.
"""

from __future__ import annotations

import ipaddress
import json
import os
import selectors
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from engine.members import ClusterMember
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
#: Open upstream sockets, all routes together, before the least recently used is closed.
MAX_UPSTREAMS = 512
#: Socket buffers asked for.  A deep receive buffer is what lets the proxy be starved of CPU for a
#: while (the writer thread, a busy host) without dropping a datagram: 32 MiB holds about half a
#: second of 50,000 small datagrams/s.  Unprivileged, the kernel caps it at net.core.rmem_max /
#: wmem_max; with CAP_NET_ADMIN we ask past that cap (SO_RCVBUFFORCE), as a recorder's job is not
#: to lose anything.
SOCKET_BUFFER_BYTES = 32 * 1024 * 1024
_FORCE_OPTIONS = {
    socket.SO_RCVBUF: getattr(socket, "SO_RCVBUFFORCE", None),
    socket.SO_SNDBUF: getattr(socket, "SO_SNDBUFFORCE", None),
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
        return f"recorded {self.recorded} datagrams ({self.bytes} bytes; {', '.join(parts)}){lost} to {self.path}"


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
        # Only members send on consensus and log, so a sender's IP can name it; ingress is clients.
        self.infer_peer_member = channel != "ingress"
        self.datagrams = 0
        self.bytes = 0
        self.reply_datagrams = 0
        self.reply_bytes = 0


class _Upstream:
    """The socket that stands for one sender towards one member.  Rows it forwards are keyed
    ``key`` (to the member) and ``key + 1`` (replies)."""

    __slots__ = ("sock", "text", "peer", "route", "key", "last_used_ns")

    def __init__(self, sock: socket.socket, peer: tuple, route: _Route, key: int, now_ns: int) -> None:
        self.sock = sock
        self.text = format_address(sock.getsockname())
        self.peer = peer
        self.route = route
        self.key = key
        self.last_used_ns = now_ns


class _PendingRows:
    """The rows received since the last flush, column by column, so that turning them into Arrow
    arrays is a handful of vectorised calls.  A row's ``key`` stands for everything that is the same
    for all datagrams from one sender to one member in one direction (`_KeyTable`); ``sources``
    holds the rare reply whose source is not the member's endpoint, by row index."""

    __slots__ = ("ts", "keys", "payloads", "sources")

    def __init__(self) -> None:
        self.ts: list[int] = []
        self.keys: list[int] = []
        self.payloads: list[bytes] = []
        self.sources: dict[int, tuple] = {}

    def __len__(self) -> int:
        return len(self.ts)

    def clear(self) -> None:
        self.ts.clear()
        self.keys.clear()
        self.payloads.clear()
        self.sources.clear()


class _KeyTable:
    """The per-key values of the recording's columns (src, dst, srcMember, dstMember, channel,
    direction, proxy, proxyUpstream), two keys per upstream socket ever opened."""

    TYPES = tuple(field.type for field in FIELDS[2:10])

    def __init__(self) -> None:
        self._values: tuple[list, ...] = tuple([] for _ in self.TYPES)
        self._arrays: list[pa.Array] | None = None

    def add(self, upstream: _Upstream, peer_member: int | None) -> None:
        route, peer = upstream.route, format_address(upstream.peer)
        to_member = (peer, route.member_text, peer_member, route.member_id, route.channel, TO_MEMBER)
        from_member = (route.member_text, peer, route.member_id, peer_member, route.channel, FROM_MEMBER)
        for row in (to_member, from_member):
            for values, value in zip(self._values, (*row, route.proxy_text, upstream.text), strict=True):
                values.append(value)
        self._arrays = None

    def take(self, keys: pa.Array) -> list[pa.Array]:
        if self._arrays is None:
            self._arrays = [
                pa.array(values, type_) for values, type_ in zip(self._values, self.TYPES, strict=True)
            ]
        return [array.take(keys) for array in self._arrays]


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
        self.members: list[ClusterMember] = cluster_members.parse_members(members_text)
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
    ) -> RecordingSummary:
        """Forward and record until stopped; always writes what it received and closes the file."""
        writer = BackgroundWriter(recording, on_error=lambda error: self.stop("writeError"))
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
            writer.submit(self._take_columns())
            writer.close()
            selector.close()
            self._restore_signal_handlers(previous_handlers)
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
        )

    def _loop(self, selector, writer, flush_ms, duration_s, on_ready) -> None:
        pending = self._pending
        flush_ns = max(1, int(flush_ms * 1_000_000))
        monotonic_ns = time.monotonic_ns
        start = monotonic_ns()
        deadline = None if duration_s is None else start + int(duration_s * 1_000_000_000)
        next_flush = start + flush_ns
        if on_ready is not None:
            on_ready()
        select = selector.select
        while self._stop_reason is None:
            now = monotonic_ns()
            wake_at = next_flush if deadline is None else min(next_flush, deadline)
            for key, _ in select(max(0, wake_at - now) / 1e9):
                key.data()
            now = monotonic_ns()
            if now >= next_flush or len(pending) >= MAX_PENDING_ROWS:
                writer.submit(self._take_columns())
                next_flush = now + flush_ns
            if deadline is not None and now >= deadline:
                self.stop("duration")

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _listener_handler(self, route: _Route, selector: selectors.BaseSelector) -> Callable[[], None]:
        recvfrom = route.listener.recvfrom
        upstreams = route.upstreams
        member_address = route.member_address
        append_ts, append_key, append_payload = self._appenders()
        time_ns = time.time_ns
        dontwait = socket.MSG_DONTWAIT

        def on_readable() -> None:
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
                append_payload(data)
                route.datagrams += 1
                route.bytes += len(data)

        return on_readable

    def _upstream_handler(self, upstream: _Upstream) -> Callable[[], None]:
        recvfrom = upstream.sock.recvfrom
        route = upstream.route
        peer = upstream.peer
        reply = route.listener.sendto
        member_address = route.member_address
        key = upstream.key + 1
        pending = self._pending
        append_ts, append_key, append_payload = self._appenders()
        sources = pending.sources
        time_ns = time.time_ns
        dontwait = socket.MSG_DONTWAIT

        def on_readable() -> None:
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
                append_payload(data)
                route.reply_datagrams += 1
                route.reply_bytes += len(data)

        return on_readable

    def _open_upstream(
        self, route: _Route, peer: tuple, now_ns: int, selector: selectors.BaseSelector
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
        upstream = _Upstream(sock, peer, route, self._next_key, now_ns)
        self._next_key += 2
        peer_member = self._member_by_ip.get(peer[0]) if route.infer_peer_member else None
        self._key_table.add(upstream, peer_member)
        route.upstreams[peer] = upstream
        self._upstreams[sock] = upstream
        selector.register(sock, selectors.EVENT_READ, self._upstream_handler(upstream))
        return upstream

    def _close_upstream(self, upstream: _Upstream, selector: selectors.BaseSelector | None) -> None:
        if selector is not None:
            try:
                selector.unregister(upstream.sock)
            except (KeyError, ValueError):
                pass
        del upstream.route.upstreams[upstream.peer]
        del self._upstreams[upstream.sock]
        upstream.sock.close()

    # --- rows to columns --------------------------------------------------------------------

    def _appenders(self) -> tuple[Callable, Callable, Callable]:
        pending = self._pending
        return pending.ts.append, pending.keys.append, pending.payloads.append

    def _members_by_ip(self) -> dict[str, int]:
        owners: dict[str, set[int]] = {}
        for route in self._routes:
            owners.setdefault(route.member_address[0], set()).add(route.member_id)
        return {ip: ids.pop() for ip, ids in owners.items() if len(ids) == 1}

    def _take_columns(self) -> list[pa.Array]:
        """The pending rows as Arrow columns (every column but seq), and a fresh start."""
        pending = self._pending
        if not pending:
            return []
        keys = pa.array(pending.keys, pa.int32())
        src, *per_key = self._key_table.take(keys)
        if pending.sources:
            texts = src.to_pylist()
            for index, source in pending.sources.items():
                texts[index] = format_address(source)
            src = pa.array(texts, pa.string())
        columns = [pa.array(pending.ts, pa.int64()), src, *per_key, pa.array(pending.payloads, pa.binary())]
        pending.clear()
        return columns

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
