"""When a member's media driver read nothing from its sockets, from the wire (`DriverStall` evidence).

A media driver whose conductor, sender and receiver share one thread (Aeron's SHARED threading mode,
which the captures' members run) does nothing else while its conductor creates an image: it maps a
new log buffer, and a 64 MiB log takes ~100 ms.  Meanwhile it sends nothing (no heartbeat, no status
message) and reads no datagram: what reaches the member waits in its sockets.  Whether its consensus
module then polls those messages before or after it finds the new image (and blocks joining its log)
is a race the capture cannot show; the member's agent log can (`agent_log_import.late_receipts` takes
the receipt lines' times for messages that arrived in a stall).  In i_restart_all_one_member_behind,
member 1's driver got leader 0's catch-up SETUP at 19:26:57.316 and sent nothing until it answered it
at .425 (its publications heartbeat every 100 ms otherwise); leader 0's CommitPosition of .324 was
polled at .485, once the module had found the image and joined the log.

`DriverStallScanner` reads the log stream's SETUPs to member endpoints (a new log or catch-up image,
whose 64 MiB buffers take that long to map; a consensus image's 64 KiB do not, and a consensus SETUP
answered late found no subscription yet, not a busy driver) and the status messages that answer
them: a SETUP answered more than `STALL_NS` later (and less than `MAX_WAIT_NS`: longer is a receiver that
was not there) by a member whose driver sent nothing in between (from its endpoints or its
publications, whose ephemeral ports `stalls` is told) is a stall from the SETUP to the answer.  A
driver heard after the SETUP was running then; when it then fell silent, from a later sending of the
SETUP (the publisher repeats it until answered) to the answer, for more than `STALL_NS` and at most
`MAX_SILENCE_NS`, that silence is a stall: in h_five_members_leader_kill, members 3 and 4 heartbeat
until 19:23:57.54, then neither sent anything until they answered member 1's term-1 log SETUP at
59.33 and 59.36 (the SETUP had first reached them before they had the destination; their agent logs
show the image at 59.30 and 59.34 and nothing polled in between, then leader 0's and leader 1's
NewLeadershipTerms polled image by image, leader 0's first).  A driver with threads of its own goes
on sending while its conductor works, and is never taken for stalled.

Pure: datagrams in, spans out.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping

import numpy as np

from formats.pcap import PacketColumns
from recorder.capture.flow_control import endpoint_pair_keys, header_words, on_ports
from recorder.capture.members import MemberMap

_HEADER = struct.Struct("<iBBH")
_SESSION = struct.Struct("<i")
_SESSION_STREAM = struct.Struct("<ii")
_TYPE_SM, _TYPE_SETUP = 0x03, 0x05
_SM_SETUP_FLAG = 0x80
#: A SETUP is normally answered within a millisecond; one answered this much later found the driver busy.
STALL_NS = 50_000_000
#: A SETUP unanswered for this long had no receiver (the member was down), not a busy one.
MAX_WAIT_NS = 1_000_000_000
#: A driver heard after the SETUP (it was running, its publications heartbeating) and silent from a later
#: sending of it to the answer was stalled for up to this long: h_five_members_leader_kill's members 3 and 4,
#: silent 19:23:57.56 -> 59.33 and -> 59.36 while they created the image of member 1's term-1 log.
MAX_SILENCE_NS = 2_000_000_000
#: Datagram lengths of a lone SM (with and without its group tag) and a lone SETUP.
_LENGTHS = (36, 40, 44)

Endpoint = tuple[str, int]


class DriverStallScanner:
    """Feed the datagrams of a capture in order (`feed`, or `feed_columns` for a whole table); `stalls`."""

    def __init__(self, members: MemberMap, log_stream_id: int) -> None:
        self.members = members
        self.log_stream_id = log_stream_id
        self._ports = sorted({endpoint.port for member in members.members for endpoint in member.endpoints.values()
                              if endpoint.port})
        #: (capture, member endpoint, publisher endpoint, session) → [first SETUP time, member,
        #: {endpoint that sent since: its last time}, [the SETUP's times since the last answer]]
        self._open: dict[tuple, list] = {}
        #: (capture, member, the SETUP's times, the answer's, {endpoint that sent meanwhile: its last time}) of
        #: each SETUP answered late
        self._late: list[tuple[int, int, list[int], int, dict[Endpoint, int]]] = []

    def feed(self, ts: int, src: Endpoint, dst: Endpoint, payload: bytes | memoryview, *, capture: int = 0) -> None:
        closed = self._setup_or_answer(ts, src, dst, payload, capture)
        if self._open:
            for window in self._open.values():
                window[2][src] = ts
        if closed is not None:
            setups, member, senders = closed
            self._late.append((capture, member, setups, ts, senders))

    def _setup_or_answer(self, ts: int, src: Endpoint, dst: Endpoint, payload: bytes | memoryview, capture: int
                         ) -> tuple[list[int], int, dict[Endpoint, int]] | None:
        """Open a window at a SETUP to a member endpoint (its repeats noted in it); at the status message
        answering it, close it and return (the SETUP's times, the member, who sent meanwhile) when it was
        answered late."""
        if len(payload) < 16:
            return None
        _, _, flags, frame_type = _HEADER.unpack_from(payload, 0)
        if frame_type == _TYPE_SETUP and len(payload) >= 40:
            owner = self.members.lookup(*dst)
            if owner is not None:
                session, stream = _SESSION_STREAM.unpack_from(payload, 12)
                if stream != self.log_stream_id:
                    return None
                key = (capture, dst, src, session)
                window = self._open.get(key)
                if window is None:
                    self._open[key] = [ts, owner[0], {}, [ts]]
                else:
                    window[3].append(ts)  # a repeat: the publisher sends it until it is answered
        elif frame_type == _TYPE_SM and not flags & _SM_SETUP_FLAG:
            (session,) = _SESSION.unpack_from(payload, 8)
            window = self._open.pop((capture, src, dst, session), None)
            if window is not None and STALL_NS < ts - window[0]:
                return window[3], window[1], window[2]
        return None

    def feed_columns(self, table: PacketColumns, *, capture: int = 0,
                     read: Callable[[int, int], None] | None = None) -> None:
        """The same over a whole table (one capture file): its log SETUPs to member endpoints are read one by
        one (they are few), each one's answer and who sent in its window looked up in the table's columns
        (``read``: see `flow_control.header_words`)."""
        if not len(table):
            return
        names = table.addresses
        length = table.payload_length
        lone = (length == _LENGTHS[0]) | (length == _LENGTHS[1]) | (length == _LENGTHS[2])
        rows = np.flatnonzero(on_ports(table, self._ports) & lone & (table.payload_offset >= 0))
        if not len(rows):
            return
        words = header_words(table, rows, read)
        frame_type = words.view(np.uint16)[:, 3]
        flags = words.view(np.uint8)[:, 5]
        setups = (frame_type == _TYPE_SETUP) & (words[:, 4] == self.log_stream_id)
        setup_rows = rows[setups]
        setup_sessions = words[setups, 3]
        # Only the answers that can answer one of the SETUPs, by the low 16 bits of their session ids (an answer
        # has its SETUP's session): the many status messages of the other publications are never keyed.
        asked = np.zeros(1 << 16, dtype=bool)
        asked[setup_sessions.astype(np.intp) & 0xFFFF] = True
        answer = ((frame_type == _TYPE_SM) & ((flags & _SM_SETUP_FLAG) == 0)
                  & asked.take(words[:, 2].astype(np.intp) & 0xFFFF))
        answers = rows[answer]
        # One key per (sender endpoint, receiver endpoint, session): the answers' own, and each SETUP's seen
        # from its answer's side (receiver -> sender).  A SETUP's answer is the first of the answers with its
        # key after it, in row order (kept within a key by the stable sort).
        keys = endpoint_pair_keys(np.concatenate([table.src[answers], table.dst[setup_rows]]),
                                  np.concatenate([table.src_port[answers], table.dst_port[setup_rows]]),
                                  np.concatenate([table.dst[answers], table.src[setup_rows]]),
                                  np.concatenate([table.dst_port[answers], table.src_port[setup_rows]]),
                                  np.concatenate([words[answer, 2], setup_sessions]))
        answer_keys, wanted_keys = keys[: len(answers)], keys[len(answers):]
        order = np.argsort(answer_keys, kind="stable")
        answer_keys, answers = answer_keys[order], answers[order]
        opened: dict[tuple, tuple[int | None, list[int]]] = {}  # key -> (its answer, the SETUPs it answers)
        windows: list[tuple[int, int, list[int]]] = []
        for row, session, wanted in zip(setup_rows.tolist(), setup_sessions.tolist(), wanted_keys.tolist(),
                                        strict=True):
            dst = (names[table.dst[row]], int(table.dst_port[row]))
            owner = self.members.lookup(*dst)
            if owner is None:
                continue
            ts = int(table.ts_ns[row])
            key = (table.src[row], table.src_port[row], table.dst[row], table.dst_port[row], session)
            if key in opened and (opened[key][0] is None or ts < opened[key][0]):
                opened[key][1].append(ts)  # a repeat: the publisher sends it until it is answered
                continue
            low, high = np.searchsorted(answer_keys, wanted, side="left"), np.searchsorted(answer_keys, wanted, side="right")
            candidates = answers[low:high]
            answered = candidates[table.ts_ns[candidates] > ts]
            until = int(table.ts_ns[answered[0]]) if len(answered) else None
            opened[key] = (until, [ts])
            if until is not None and STALL_NS < until - ts:
                windows.append((owner[0], until, opened[key][1]))
        for member, until, times in windows:
            inside = np.flatnonzero((table.ts_ns > times[0]) & (table.ts_ns < until))
            senders: dict[Endpoint, int] = {}
            for s, p, t in zip(table.src[inside].tolist(), table.src_port[inside].tolist(),
                               table.ts_ns[inside].tolist(), strict=True):
                senders[(names[s], int(p))] = int(t)  # in time order: each one's last
            self._late.append((capture, member, times, until, senders))

    def stalls(self, publication_senders: Mapping[Endpoint, int]) -> dict[int, list[tuple[int, int]]]:
        """Member → the spans (from, until) its driver was stalled, in time order: from the first sending
        of the SETUP after which nothing came from the member's endpoints or its publications
        (``publication_senders``: each publication's source endpoint → its member) to the late answer."""
        out: dict[int, list[tuple[int, int]]] = {}
        for _, member, setups, until, senders in self._late:
            last = max((ts for endpoint, ts in senders.items()
                        if self._sender(endpoint, publication_senders) == member), default=None)
            # The SETUP's window began at its first sending, again at the first one more than MAX_WAIT_NS on.
            start = setups[0]
            for ts in setups:
                if ts - start > MAX_WAIT_NS:
                    start = ts
            if not ((last is None or last < start) and STALL_NS < until - start <= MAX_WAIT_NS):
                # heard in it, the driver was running: stalled from a later sending to the answer, if silent
                start = next((ts for ts in setups if last is not None and ts > last), None)
                if start is None or not STALL_NS < until - start <= MAX_SILENCE_NS:
                    continue
            out.setdefault(member, []).append((start, until))
        return {member: sorted(set(spans)) for member, spans in sorted(out.items())}

    def _sender(self, endpoint: Endpoint, publication_senders: Mapping[Endpoint, int]) -> int | None:
        owner = self.members.lookup(*endpoint)
        return owner[0] if owner is not None else publication_senders.get(endpoint)
