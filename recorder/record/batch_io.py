"""Many datagrams per system call: Linux's recvmmsg(2) and sendmmsg(2) through ctypes.

Why.  At 50,000 datagrams/s the proxy's cost is mostly per call, not per byte: one ``recvfrom`` and
one ``sendto`` per datagram, each a Python call that allocates and a system call that enters the
kernel.  `BatchSocketIO` reads up to `BATCH` datagrams from a socket in one ``recvmmsg`` into fixed
slots of one buffer it owns, and sends a run of them on in one ``sendmmsg`` straight from those slots
(no copy).  The only per-datagram Python work left is copying the payload into the recording's
pending bytes.  A busy proxy therefore gets cheaper per datagram as it falls behind, instead of
dearer, and drains its queue.

Layout.  Slot ``i`` of the receive buffer is ``SLOT_BYTES`` (larger than any UDP payload, so nothing
is ever truncated) at ``i * SLOT_BYTES``; its source address goes to ``names[i]``.  The receive
headers are written once and restored from a pristine copy with one ``memmove`` before each call (the
kernel overwrites ``msg_namelen``).  Sending uses its own headers, all pointing at one destination
address buffer, with ``iov[i]`` pointing at slot ``i``; a send sets the lengths of the run's iovecs in
one ``struct.pack_into``.

Addresses travel as raw ``sockaddr`` bytes (`sockaddr_bytes`, `sockaddr_tuple` convert): comparing and
hashing 16 bytes is cheaper than building an ``(ip, port)`` tuple per datagram.

`available()` says whether this works here (Linux with a C library exposing both calls); the proxy
falls back to ``recvfrom``/``sendto`` otherwise, or when ``RECOUNT_RECORD_BATCH_IO=0``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import socket
import struct
import sys

#: Datagrams per recvmmsg call.
BATCH = 64
#: One receive slot: at least the largest UDP payload (65507 over IPv4, 65527 over IPv6).
SLOT_BYTES = 65536
#: Room for a sockaddr_in6 (28 bytes), rounded up.
NAME_BYTES = 32


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class _MsgHdr(ctypes.Structure):
    _fields_ = [
        ("msg_name", ctypes.c_void_p),
        ("msg_namelen", ctypes.c_uint32),
        ("msg_iov", ctypes.POINTER(_IoVec)),
        ("msg_iovlen", ctypes.c_size_t),
        ("msg_control", ctypes.c_void_p),
        ("msg_controllen", ctypes.c_size_t),
        ("msg_flags", ctypes.c_int),
    ]


class _MMsgHdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _MsgHdr), ("msg_len", ctypes.c_uint)]


_MMSG_SIZE = ctypes.sizeof(_MMsgHdr)
_MSG_LEN_OFFSET = _MMsgHdr.msg_len.offset
_NAMELEN_OFFSET = _MsgHdr.msg_namelen.offset
_IOVEC_SIZE = ctypes.sizeof(_IoVec)
_MSG_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0x40)

_libc = None


def _load_libc():
    global _libc
    if _libc is None:
        if not sys.platform.startswith("linux"):
            raise OSError("recvmmsg/sendmmsg are Linux calls")
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        recvmmsg, sendmmsg = libc.recvmmsg, libc.sendmmsg  # AttributeError where the libc lacks them
        recvmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]
        recvmmsg.restype = ctypes.c_int
        sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
        sendmmsg.restype = ctypes.c_int
        _libc = libc
    return _libc


def available() -> bool:
    """Whether batched socket I/O works on this system (and is not switched off)."""
    if os.environ.get("RECOUNT_RECORD_BATCH_IO", "1") == "0":
        return False
    try:
        _load_libc()
    except (OSError, AttributeError):
        return False
    return True


def sockaddr_bytes(family: int, address: tuple) -> bytes:
    """The raw ``sockaddr_in``/``sockaddr_in6`` the kernel reports for ``address``."""
    if family == socket.AF_INET:
        return struct.pack("=H", socket.AF_INET) + struct.pack("!H", address[1]) + socket.inet_pton(
            socket.AF_INET, address[0]) + bytes(8)
    flowinfo = address[2] if len(address) > 2 else 0
    scope_id = address[3] if len(address) > 3 else 0
    return (struct.pack("=H", socket.AF_INET6) + struct.pack("!HI", address[1], flowinfo)
            + socket.inet_pton(socket.AF_INET6, address[0].split("%")[0]) + struct.pack("=I", scope_id))


def sockaddr_tuple(raw: bytes) -> tuple:
    """The address tuple Python's socket module would give for a raw sockaddr."""
    family = struct.unpack_from("=H", raw)[0]
    if family == socket.AF_INET:
        return socket.inet_ntop(socket.AF_INET, raw[4:8]), struct.unpack_from("!H", raw, 2)[0]
    port, flowinfo = struct.unpack_from("!HI", raw, 2)
    return socket.inet_ntop(socket.AF_INET6, raw[8:24]), port, flowinfo, struct.unpack_from("=I", raw, 24)[0]


class BatchSocketIO:
    """The buffers and headers for batched receives and sends (one per proxy: it is not thread-safe,
    and a batch received must be sent on before the next receive overwrites its slots)."""

    def __init__(self, name_length: int) -> None:
        libc = _load_libc()
        self._recvmmsg = libc.recvmmsg
        self._sendmmsg = libc.sendmmsg
        self.name_length = name_length
        self.buffer = ctypes.create_string_buffer(BATCH * SLOT_BYTES)
        self.view = memoryview(self.buffer).cast("B")
        self._names = ctypes.create_string_buffer(BATCH * NAME_BYTES)
        self._names_view = memoryview(self._names).cast("B")
        base = ctypes.addressof(self.buffer)
        self._slot_addresses = [base + i * SLOT_BYTES for i in range(BATCH)]

        self._recv_iov = (_IoVec * BATCH)()
        self._recv = (_MMsgHdr * BATCH)()
        names = ctypes.addressof(self._names)
        for i in range(BATCH):
            self._recv_iov[i].iov_base = self._slot_addresses[i]
            self._recv_iov[i].iov_len = SLOT_BYTES
            header = self._recv[i].msg_hdr
            header.msg_name = names + i * NAME_BYTES
            header.msg_namelen = NAME_BYTES
            header.msg_iov = ctypes.pointer(self._recv_iov[i])
            header.msg_iovlen = 1
        self._recv_pristine = ctypes.create_string_buffer(ctypes.string_at(self._recv, ctypes.sizeof(self._recv)))
        self._recv_view = memoryview(self._recv).cast("B")
        # Per count n, a Struct reading exactly the first n headers' msg_len (or msg_namelen).
        self._lengths = [struct.Struct("=" + f"{_MSG_LEN_OFFSET}xI{_MMSG_SIZE - _MSG_LEN_OFFSET - 4}x" * n)
                         for n in range(BATCH + 1)]
        self._namelens = [struct.Struct("=" + f"{_NAMELEN_OFFSET}xI{_MMSG_SIZE - _NAMELEN_OFFSET - 4}x" * n)
                          for n in range(BATCH + 1)]
        self._dirty = BATCH  # headers the kernel may have changed since they were last restored

        self._destination = ctypes.create_string_buffer(NAME_BYTES)
        self._send_iov = (_IoVec * BATCH)()
        self._send = (_MMsgHdr * BATCH)()
        for i in range(BATCH):
            self._send_iov[i].iov_base = self._slot_addresses[i]
            header = self._send[i].msg_hdr
            header.msg_name = ctypes.addressof(self._destination)
            header.msg_namelen = name_length
            header.msg_iov = ctypes.pointer(self._send_iov[i])
            header.msg_iovlen = 1
        self._send_iov_view = memoryview(self._send_iov).cast("B")
        self._send_address = ctypes.addressof(self._send)
        self._recv_address = ctypes.addressof(self._recv)
        self._iov_structs = [struct.Struct("=" + "QQ" * n) for n in range(BATCH + 1)]

    def receive(self, fd: int) -> tuple[list[int], list[bytes]]:
        """Read what is waiting on ``fd`` (up to `BATCH` datagrams, without blocking): their lengths
        and raw source addresses; payload ``i`` is ``view[i * SLOT_BYTES : ... + lengths[i]]``.
        Nothing waiting is two empty lists; an error is an `OSError`."""
        if self._dirty:  # only the headers of the last batch were written by the kernel
            ctypes.memmove(self._recv_address, self._recv_pristine, self._dirty * _MMSG_SIZE)
        count = self._recvmmsg(fd, self._recv_address, BATCH, _MSG_DONTWAIT, None)
        if count <= 0:
            self._dirty = 0
            error = ctypes.get_errno()
            if count == 0 or error in (11, 4):  # EAGAIN/EWOULDBLOCK, EINTR
                return [], []
            raise OSError(error, os.strerror(error))
        self._dirty = count
        lengths = list(self._lengths[count].unpack_from(self._recv_view))
        names = self._names_view
        name_lengths = self._namelens[count].unpack_from(self._recv_view)
        sources = [bytes(names[i * NAME_BYTES : i * NAME_BYTES + name_lengths[i]]) for i in range(count)]
        return lengths, sources

    def send(self, fd: int, destination: bytes, first: int, lengths: list[int]) -> int:
        """Send slots ``first .. first + len(lengths) - 1`` (with those lengths) to ``destination``
        from ``fd``; returns how many datagrams failed (each failure is skipped, as the wire would
        lose it)."""
        count = len(lengths)
        if not count:
            return 0
        ctypes.memmove(self._destination, destination, len(destination))
        pairs = [0] * (2 * count)
        pairs[0::2] = self._slot_addresses[first : first + count]
        pairs[1::2] = lengths
        self._iov_structs[count].pack_into(self._send_iov_view, first * _IOVEC_SIZE, *pairs)
        failed = 0
        sent = first
        end = first + count
        while sent < end:
            done = self._sendmmsg(fd, self._send_address + sent * _MMSG_SIZE, end - sent, 0)
            if done < 0:
                if ctypes.get_errno() == 4:  # EINTR: try again
                    continue
                failed += 1  # this datagram cannot go (e.g. an ICMP error queued): skip it
                sent += 1
            else:
                sent += done
        return failed
