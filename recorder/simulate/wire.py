"""Genuine Aeron UDP traffic for the simulated cluster: media drivers, publications and images.

Every message a member sends goes through an Aeron publication exactly as Aeron's media driver
would put it on the wire (aeron-formats.md §7, `NetworkPublication`, `PublicationImage`,
`DataPacketDispatcher`), so that the per-host pcaps decode in Wireshark and in our own importer:

* **Publications** (sender side).  One per (member, destination) on the consensus channel (stream
  108, term length 64 KiB), one multi-destination publication per leadership term on the log
  (stream 100, term length 64 MiB, initial term id 0 so stream positions are log positions), one per
  client on ingress (stream 101).  Each has a session id from its driver (a random start, counting
  up, as in the real capture), a random initial term id, and its own ephemeral source port.  An offer
  appends the message to the term buffer as DATA frames (`formats.udp.fragment_message`: MTU 1408,
  B/E flags, 32-byte alignment); a message that does not fit the rest of the term gets a PAD frame
  and goes to the next term.  The sender then sends what flow control allows, several frames per
  datagram up to the MTU; SETUP every 100 ms until a status message arrives (and again when a
  receiver asks with the SEND_SETUP flag); a heartbeat (a bare DATA header at the tail) after 100 ms
  without sending; retransmits on NAK; an end-of-stream heartbeat when the publication closes cleanly.
* **Images** (receiver side).  Created by a SETUP on a subscribed port, at the SETUP's position.
  Frames are put back in order; duplicates and frames below the rebuild position are dropped; a gap
  is NAKed after 100 µs and again every 10 ms; complete messages are handed to the member in stream
  order with the position after them (Aeron's ``Header.position()``).  Status messages go back when
  the consumed position has moved by a quarter of the window, and every 200 ms otherwise, carrying
  the last reported position (as the real capture shows).  Data for a session with no image elicits a
  SETUP (an SM with the SEND_SETUP flag), as `DataPacketDispatcher` does; an image that hears nothing
  for 10 s is dropped.

Offers, as `ExclusivePublication` takes them: refused (BACK_PRESSURED) when the publication's
position has reached its publisher limit, the sender position plus the term window (half a term); a
message that does not fit the rest of the term pads it and goes to the next one (Aeron's appender
pads, the publisher tries again).  A consensus publication also refuses every offer (NOT_CONNECTED)
before its first status message and from `CONNECTION_TIMEOUT_NS` after its last, as Aeron's driver
drops the publisher limit to the sender position when it has no receivers.  What a member's
consensus publication takes is the engine's business too: each change of whether it is connected,
and of how far its sender has sent when that falls short of what was offered, goes to the transport's
``on_publication_status`` (the simulator records it as a ``PublicationStatus`` event and
feeds it to the member, so that node replay refuses the same offers).  The log and ingress
publications take offers while nobody listens (the engine's leader appends whatever happens), up to
the term window.

Deliberate simplification: the term cleaning of `cleanBufferTo` is not modelled (no bytes are reused).

Time comes from the caller's `Clock` (engine.harness.clock, the cluster driver's); randomness (session ids, ports, term ids, receiver ids)
from the `random.Random` given to each driver.  Datagrams go through the `Network` (loss,
duplication, jitter, cuts) and are written to the sending host's capture when sent and to the
receiving host's capture when they arrive, while that host's capture runs.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.harness.clock import Clock, Timer
from formats.udp import (
    BEGIN_FLAG,
    DATA_HEADER_LENGTH,
    DEFAULT_MTU,
    END_FLAG,
    EOS_FLAG,
    SM_EOS_FLAG,
    SM_SEND_SETUP_FLAG,
    UNFRAGMENTED,
    DataFrame,
    Nak,
    PadFrame,
    SetupFrame,
    StatusMessage,
    align,
    compute_position,
    compute_term_id_from_position,
    compute_term_offset_from_position,
    decode_datagram,
    encode_datagram,
    fragment_message,
    position_bits_to_shift,
)
from recorder.simulate.network import Host, Network

CONSENSUS_STREAM_ID = 108
LOG_STREAM_ID = 100
INGRESS_STREAM_ID = 101
EGRESS_STREAM_ID = 102
CONSENSUS_TERM_LENGTH = 64 * 1024
LOG_TERM_LENGTH = 64 * 1024 * 1024
INGRESS_TERM_LENGTH = 16 * 1024 * 1024

MS = 1_000_000
#: `PUBLICATION_SETUP_TIMEOUT_NS`, `PUBLICATION_HEARTBEAT_TIMEOUT_NS`: Aeron tests `(last + timeout) - now < 0`.
SETUP_TIMEOUT_NS = 100 * MS
HEARTBEAT_TIMEOUT_NS = 100 * MS
#: `aeron.publication.connection.timeout`: no status message for this long means no receivers.
CONNECTION_TIMEOUT_NS = 5_000 * MS
#: `aeron.rcv.status.message.timeout`.
STATUS_MESSAGE_TIMEOUT_NS = 200 * MS
#: `aeron.image.liveness.timeout`.
IMAGE_LIVENESS_TIMEOUT_NS = 10_000 * MS
#: `aeron.nak.unicast.delay` and the retry delay (ratio 100).
NAK_DELAY_NS = 100_000
NAK_RETRY_NS = 10 * MS
#: `aeron.retransmit.unicast.linger`: a range just retransmitted is not sent again within this time.
RETRANSMIT_LINGER_NS = 60 * MS
#: The receiver socket buffer caps the window: min(termLength / 2, so_rcvbuf 128 KiB), as the capture shows.
MAX_RECEIVER_WINDOW = 128 * 1024
#: `ConsensusPublisher.SEND_ATTEMPTS`: an offer that meets the end of a term pads it and is tried again.
SEND_ATTEMPTS = 3

EPHEMERAL_PORTS = (32768, 60999)


@dataclass(frozen=True, slots=True, order=True)
class Endpoint:
    ip: str
    port: int

    def __str__(self) -> str:
        return f"{self.ip}:{self.port}"


@dataclass(frozen=True, slots=True)
class Delivery:
    """A whole message handed to a receiving member by one of its images."""

    time_ns: int
    host: Host
    channel: str
    source: Endpoint
    source_host: Host | None
    session_id: int
    stream_id: int
    payload: bytes
    position: int  #: stream position after the message (Aeron's Header.position())


@dataclass(slots=True)
class CaptureRecord:
    time_ns: int
    source: Endpoint
    destination: Endpoint
    payload: bytes


def receiver_window(term_length: int) -> int:
    return min(term_length // 2, MAX_RECEIVER_WINDOW)


def _int32(value: int) -> int:
    value &= 0xFFFF_FFFF
    return value - (1 << 32) if value & 0x8000_0000 else value


def _int64(value: int) -> int:
    value &= (1 << 64) - 1
    return value - (1 << 64) if value & (1 << 63) else value


# --- Publications -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Destination:
    endpoint: Endpoint
    host: Host


class Publication:
    """The sending side of one Aeron stream (a `NetworkPublication`), possibly to several destinations."""

    def __init__(
        self,
        driver: Driver,
        *,
        stream_id: int,
        session_id: int,
        initial_term_id: int,
        term_length: int,
        source: Endpoint,
        destinations: list[tuple[Endpoint, Host]],
        initial_position: int = 0,
        setup_flags: int = 0,
        mtu: int = DEFAULT_MTU,
        refuses_unconnected: bool = False,
        tag: object = None,
    ) -> None:
        self.driver = driver
        self.stream_id = stream_id
        self.session_id = session_id
        self.initial_term_id = initial_term_id
        self.term_length = term_length
        self.shift = position_bits_to_shift(term_length)
        self.mtu = mtu
        self.source = source
        self.destinations = [_Destination(e, h) for e, h in destinations]
        self.setup_flags = setup_flags
        self.term_window = term_length // 2
        #: `FrameDescriptor.computeMaxMessageLength`: min(termLength / 8, 16 MiB).
        self.max_message_length = min(term_length // 8, 16 * 1024 * 1024)
        # Term buffer: frames by stream position (PAD frames too), kept for retransmission while a NAK can
        # still reach them (Aeron resends only within half a term below the sender position).
        self._frames: dict[int, DataFrame | PadFrame] = {}
        self._frame_starts: deque[int] = deque()
        self.tail = initial_position
        self.sender_position = initial_position
        self.sender_limit = initial_position
        self.has_receivers = False
        self.status_deadline_ns = 0
        #: Receivers heard from (receiver id -> when it is given up: `CONNECTION_TIMEOUT_NS` after its last
        #: status message), Aeron's `ReceiverLivenessTracker`; one that closed (an SM with EOS) is gone at once.
        self._receivers: dict[int, int] = {}
        #: Aeron's `hasInitialConnection` (a status message came) and `isSetupElicited` (a receiver asked
        #: for a SETUP): SETUPs go out every `SETUP_TIMEOUT_NS` until the first, and while the second holds.
        self.has_initial_connection = False
        self.setup_elicited = False
        self.time_of_last_setup_ns: int | None = None
        self.time_of_last_send_or_heartbeat_ns: int | None = None
        self.closing = False
        self.closed = False
        self.refused = 0
        self._retransmitted: dict[int, int] = {}
        self._tags: deque[tuple[int, object]] = deque()
        self._timer: Timer | None = None
        self._flush_pending = False
        #: Refuse offers while no receiver is heard (Aeron's NOT_CONNECTED): the consensus publications.
        self.refuses_unconnected = refuses_unconnected
        #: What the owner knows this publication by; with it, status changes go to the transport.
        self.tag = tag
        self._reported: tuple[bool, int | None] = (False, None)

    @property
    def should_send_setup(self) -> bool:
        return not self.has_initial_connection or self.setup_elicited

    @property
    def position_limit(self) -> int:
        """The publisher limit: nothing is taken from this position on."""
        if self.refuses_unconnected and not self.has_receivers:
            return self.sender_position
        return self.sender_position + self.term_window

    def offer(self, payload: bytes, tag: object = None) -> int | None:
        """Append one message; the position after it, or None when refused (closed, not connected, or
        back pressure).

        A ``tag`` is handed to the transport's ``on_sent`` when the message's last frame first leaves.
        """
        if self.closing or self.closed or len(payload) > self.max_message_length:
            return None
        length = framed_length(len(payload), self.mtu)
        for _ in range(SEND_ATTEMPTS):
            if self.tail >= self.position_limit:
                self.refused += 1
                return None
            term_offset = compute_term_offset_from_position(self.tail, self.shift)
            if term_offset + length <= self.term_length:
                break
            pad = self.term_length - term_offset
            term_id = compute_term_id_from_position(self.tail, self.shift, self.initial_term_id)
            self._store(self.tail, PadFrame(frame_length=pad, flags=UNFRAGMENTED, term_offset=term_offset,
                                            session_id=self.session_id, stream_id=self.stream_id, term_id=term_id))
            self.tail += pad
        else:
            self.refused += 1
            return None
        term_offset = compute_term_offset_from_position(self.tail, self.shift)
        term_id = compute_term_id_from_position(self.tail, self.shift, self.initial_term_id)
        frames = fragment_message(payload, session_id=self.session_id, stream_id=self.stream_id, term_id=term_id,
                                  term_offset=term_offset, mtu=self.mtu, term_length=self.term_length)
        for frame in frames:
            self._store(self.tail, frame)
            self.tail += align(frame.frame_length)
        if tag is not None:
            self._tags.append((self.tail, tag))
        self._schedule_flush()
        if self.tail - self.sender_position >= self.term_window >> 1:
            self._report_status()  # half the window offered and not sent: say so before the next offer
        return self.tail

    def _report_status(self) -> None:
        """Tell the transport when a tagged publication's connection changes, or how far its sender has
        sent when that falls short of what was offered (frames past it wait for the receiver's status
        messages, and the publisher limit is that position plus the term window)."""
        if self.tag is None or self.closed:
            return
        connected = self.has_receivers or not self.refuses_unconnected
        status = (connected, self.sender_position if self.tail > self.sender_position else None)
        if status != self._reported:
            self._reported = status
            self.driver.transport.on_publication_status(self.driver.transport.scheduler.now_ns, self, *status)

    def _store(self, position: int, frame: DataFrame | PadFrame) -> None:
        self._frames[position] = frame
        self._frame_starts.append(position)

    def add_destination(self, endpoint: Endpoint, host: Host) -> None:
        if all(d.endpoint != endpoint for d in self.destinations):
            self.destinations.append(_Destination(endpoint, host))
            self.setup_elicited = True
            self._schedule_flush()

    def remove_destination(self, endpoint: Endpoint) -> None:
        self.destinations = [d for d in self.destinations if d.endpoint != endpoint]

    def abandon(self) -> None:
        """Stop at once, without end of stream (an archive replay that is stopped)."""
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()

    def close(self) -> None:
        """Close cleanly: drain what was offered, then send end of stream (and stop)."""
        if not self.closing:
            self.closing = True
            self._schedule_flush()

    # --- the sender's duty cycle -----------------------------------------------------------------
    def _schedule_flush(self) -> None:
        # Offers made in the same instant (one duty cycle of the member) leave together, batched into
        # datagrams as Aeron's sender does; so the send runs after the current action, at the same time.
        if not self._flush_pending and not self.closed:
            self._flush_pending = True
            self.driver.transport.scheduler.at(self.driver.transport.scheduler.now_ns, self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        if self.driver.alive and not self.closed:
            self.send(self.driver.transport.scheduler.now_ns)

    def send(self, now: int) -> None:
        if self.closed:
            return
        if self.should_send_setup and (
            self.time_of_last_setup_ns is None or now - (self.time_of_last_setup_ns + SETUP_TIMEOUT_NS) > 0
        ):
            self._send_setup(now)
        sent = self._send_data(now)
        is_end_of_stream = self.closing and self.sender_position >= self.tail
        if not sent and (
            self.time_of_last_send_or_heartbeat_ns is None
            or now - (self.time_of_last_send_or_heartbeat_ns + HEARTBEAT_TIMEOUT_NS) > 0
            or (is_end_of_stream and not self.closed)
        ):
            self._send_heartbeat(now, is_end_of_stream)
            if is_end_of_stream:
                # One end-of-stream heartbeat, then the publication is gone (its process is stopping).
                self.closed = True
        if self.has_receivers and now - self.status_deadline_ns > 0:
            self._receivers = {r: d for r, d in self._receivers.items() if now - d <= 0}
            self.has_receivers = bool(self._receivers)
            self.status_deadline_ns = max(self._receivers.values(), default=0)
        self._report_status()
        self._arm_timer(now)

    def _arm_timer(self, now: int) -> None:
        if self.closed:
            return
        due = []
        if self.should_send_setup and self.time_of_last_setup_ns is not None:
            due.append(self.time_of_last_setup_ns + SETUP_TIMEOUT_NS + 1)
        if self.time_of_last_send_or_heartbeat_ns is not None:
            due.append(self.time_of_last_send_or_heartbeat_ns + HEARTBEAT_TIMEOUT_NS + 1)
        if self.has_receivers:
            due.append(self.status_deadline_ns + 1)
        if not due:
            return
        when = max(now, min(due))
        if self._timer is not None and not self._timer.cancelled:
            if self._timer.time_ns <= when:
                return
            self._timer.cancel()
        self._timer = self.driver.transport.scheduler.at(when, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self.driver.alive:
            self.send(self.driver.transport.scheduler.now_ns)

    def _send_setup(self, now: int) -> None:
        self.time_of_last_setup_ns = now
        self.time_of_last_send_or_heartbeat_ns = now
        setup = SetupFrame(
            term_offset=compute_term_offset_from_position(self.sender_position, self.shift),
            session_id=self.session_id,
            stream_id=self.stream_id,
            initial_term_id=self.initial_term_id,
            active_term_id=compute_term_id_from_position(self.sender_position, self.shift, self.initial_term_id),
            term_length=self.term_length,
            mtu=self.mtu,
            ttl=0,
            flags=self.setup_flags,
        )
        self._send_to_all(now, encode_datagram([setup]))
        if self.setup_elicited and self.has_receivers:
            self.setup_elicited = False

    def _send_data(self, now: int) -> bool:
        sent = False
        while True:
            available = min(self.sender_limit, self.tail) - self.sender_position
            if available <= 0:
                return sent
            frames: list[DataFrame | PadFrame] = []
            used = 0
            position = self.sender_position
            budget = min(available, self.mtu)
            while position < self.tail:
                frame = self._frames[position]
                if type(frame) is PadFrame:
                    size, wire = frame.frame_length, DATA_HEADER_LENGTH
                else:
                    size = wire = align(frame.frame_length)
                # A PAD takes only its header on the wire but moves the position to the term's end.
                if used + wire > budget or (type(frame) is not PadFrame and position + size > self.sender_limit):
                    break
                frames.append(frame)
                used += wire
                position += size
                if type(frame) is PadFrame:
                    break
            if not frames:
                return sent
            self._send_to_all(now, encode_datagram(frames))
            self.sender_position = position
            self.time_of_last_send_or_heartbeat_ns = now
            sent = True
            tags = self._tags
            while tags and tags[0][0] <= position:
                self.driver.transport.on_sent(now, self, tags.popleft()[1])
            starts = self._frame_starts
            bottom = position - (self.term_length >> 1)
            while starts and starts[0] < bottom:
                del self._frames[starts.popleft()]

    def _send_heartbeat(self, now: int, end_of_stream: bool) -> None:
        frame = DataFrame(
            frame_length=0,
            flags=UNFRAGMENTED | (EOS_FLAG if end_of_stream else 0),
            term_offset=compute_term_offset_from_position(self.sender_position, self.shift),
            session_id=self.session_id,
            stream_id=self.stream_id,
            term_id=compute_term_id_from_position(self.sender_position, self.shift, self.initial_term_id),
        )
        self._send_to_all(now, encode_datagram([frame]))
        self.time_of_last_send_or_heartbeat_ns = now

    def _send_to_all(self, now: int, payload: bytes) -> None:
        for destination in self.destinations:
            self.driver.transport.send(now, self.driver.host, self.source, destination.endpoint, destination.host,
                                       payload)

    # --- control frames from receivers -------------------------------------------------------------
    def on_status_message(self, now: int, sm: StatusMessage) -> None:
        if sm.flags & SM_EOS_FLAG:
            self._receivers.pop(sm.receiver_id, None)  # the receiver closed its image: gone now
        else:
            self._receivers[sm.receiver_id] = now + CONNECTION_TIMEOUT_NS
        self.has_receivers = bool(self._receivers)
        self.status_deadline_ns = max(self._receivers.values(), default=0)
        position = compute_position(sm.consumption_term_id, sm.consumption_term_offset, self.shift,
                                    self.initial_term_id)
        # Max flow control (the default for multi-destination cast; the same for one receiver).
        self.sender_limit = max(self.sender_limit, position + sm.receiver_window)
        self.has_initial_connection = True
        if sm.flags & SM_SEND_SETUP_FLAG and not self.closing:
            self.setup_elicited = True
        self.send(now)

    def on_nak(self, now: int, nak: Nak) -> None:
        start = compute_position(nak.term_id, nak.term_offset, self.shift, self.initial_term_id)
        bottom = self.sender_position - (self.term_length >> 1)
        if not bottom <= start < self.sender_position:
            return
        last = self._retransmitted.get(start)
        if last is not None and now - last < RETRANSMIT_LINGER_NS:
            return
        if len(self._retransmitted) > 4096:
            self._retransmitted = {p: t for p, t in self._retransmitted.items() if now - t < RETRANSMIT_LINGER_NS}
        self._retransmitted[start] = now
        end = min(start + nak.length, self.sender_position)
        position = start
        while position < end:
            frames: list[DataFrame | PadFrame] = []
            used = 0
            while position < end:
                frame = self._frames.get(position)
                if frame is None:
                    return  # a NAK not on a frame boundary: Aeron's scan would stop too
                wire = DATA_HEADER_LENGTH if type(frame) is PadFrame else align(frame.frame_length)
                if frames and used + wire > self.mtu:
                    break
                frames.append(frame)
                used += wire
                position += frame.frame_length if type(frame) is PadFrame else align(frame.frame_length)
                if type(frame) is PadFrame:
                    break
            self._send_to_all(now, encode_datagram(frames))


def framed_length(payload_length: int, mtu: int = DEFAULT_MTU) -> int:
    """How far a message of this length moves a stream's position (its fragments, each aligned)."""
    max_payload = mtu - DATA_HEADER_LENGTH
    if payload_length <= max_payload:
        return align(DATA_HEADER_LENGTH + payload_length)
    full, rest = divmod(payload_length, max_payload)
    return full * mtu + (align(DATA_HEADER_LENGTH + rest) if rest else 0)


# --- Images -------------------------------------------------------------------------------------


class Image:
    """The receiving side of one stream at one member (a `PublicationImage`)."""

    def __init__(self, driver: Driver, *, port: int, channel: str, setup: SetupFrame, source: Endpoint,
                 source_host: Host | None, receiver_id: int, now: int) -> None:
        self.driver = driver
        self.port = port
        self.channel = channel
        self.session_id = setup.session_id
        self.stream_id = setup.stream_id
        self.initial_term_id = setup.initial_term_id
        self.term_length = setup.term_length
        self.shift = position_bits_to_shift(setup.term_length)
        self.source = source
        self.source_host = source_host
        self.receiver_id = receiver_id
        self.window = receiver_window(setup.term_length)
        self.join_position = compute_position(setup.active_term_id, setup.term_offset, self.shift,
                                              setup.initial_term_id)
        self.rebuild_position = self.join_position
        self.high_water_mark = self.join_position
        self.last_sm_position = self.join_position
        self.time_of_last_sm_ns = now
        self.time_of_last_packet_ns = now
        self.end_of_stream = False
        self.end_of_stream_reported = False
        self.last_message_end = self.join_position
        self.closed = False
        self._pending: dict[int, DataFrame | PadFrame] = {}
        self._parts: list[bytes] = []
        self._nak_timer: Timer | None = None
        self._sm_timer: Timer | None = None
        self.duplicates = 0

    def on_frames(self, now: int, frames: list) -> None:
        self.time_of_last_packet_ns = now
        for frame in frames:
            position = compute_position(frame.term_id, frame.term_offset, self.shift, self.initial_term_id)
            if type(frame) is DataFrame and frame.frame_length == 0:
                if frame.flags & EOS_FLAG:
                    self.end_of_stream = True
                self.high_water_mark = max(self.high_water_mark, position)
                continue
            length = frame.frame_length if type(frame) is PadFrame else align(frame.frame_length)
            if position < self.rebuild_position or position in self._pending:
                self.duplicates += 1
                continue
            self._pending[position] = frame
            self.high_water_mark = max(self.high_water_mark, position + length)
        self._drain(now)
        if self.rebuild_position < self.high_water_mark:
            self._maybe_nak(now, first=True)
        if self.end_of_stream and not self.end_of_stream_reported and self.rebuild_position >= self.high_water_mark:
            self.end_of_stream_reported = True
            self.driver.transport.on_end_of_stream(now, self)

    def _drain(self, now: int) -> None:
        pending = self._pending
        before = self.rebuild_position
        while True:
            frame = pending.pop(self.rebuild_position, None)
            if frame is None:
                break
            position = self.rebuild_position
            if type(frame) is PadFrame:
                self.rebuild_position = position + frame.frame_length
                self._parts = []
                continue
            self.rebuild_position = position + align(frame.frame_length)
            if frame.flags & BEGIN_FLAG:
                self._parts = []
            self._parts.append(frame.payload)
            if frame.flags & END_FLAG:
                payload = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
                self._parts = []
                self.last_message_end = self.rebuild_position
                self.driver.transport.deliver(Delivery(
                    time_ns=now, host=self.driver.host, channel=self.channel, source=self.source,
                    source_host=self.source_host, session_id=self.session_id, stream_id=self.stream_id,
                    payload=payload, position=self.rebuild_position,
                ))
                if self.closed:
                    return  # the member stopped while handling the message
        if self.rebuild_position > before and self.rebuild_position - self.last_sm_position >= self.window // 4:
            self.send_status_message(now)

    def _maybe_nak(self, now: int, first: bool) -> None:
        if self._nak_timer is not None and not self._nak_timer.cancelled:
            return
        delay = NAK_DELAY_NS if first else NAK_RETRY_NS
        self._nak_timer = self.driver.transport.scheduler.at(now + delay, self._on_nak_timer)

    def _on_nak_timer(self) -> None:
        self._nak_timer = None
        if self.closed or not self.driver.alive or self.rebuild_position >= self.high_water_mark:
            return
        now = self.driver.transport.scheduler.now_ns
        gap_end = min(self._pending) if self._pending else self.high_water_mark
        nak = Nak(
            session_id=self.session_id,
            stream_id=self.stream_id,
            term_id=compute_term_id_from_position(self.rebuild_position, self.shift, self.initial_term_id),
            term_offset=compute_term_offset_from_position(self.rebuild_position, self.shift),
            length=gap_end - self.rebuild_position,
        )
        self.driver.transport.send(now, self.driver.host, Endpoint(self.driver.ip, self.port), self.source,
                                   self.source_host, encode_datagram([nak]))
        self._maybe_nak(now, first=False)

    def send_status_message(self, now: int, flags: int = 0) -> None:
        self.last_sm_position = self.rebuild_position
        self._send_sm(now, self.rebuild_position, flags)

    def _send_sm(self, now: int, position: int, flags: int = 0) -> None:
        self.time_of_last_sm_ns = now
        sm = StatusMessage(
            session_id=self.session_id,
            stream_id=self.stream_id,
            consumption_term_id=compute_term_id_from_position(position, self.shift, self.initial_term_id),
            consumption_term_offset=compute_term_offset_from_position(position, self.shift),
            receiver_window=self.window,
            receiver_id=self.receiver_id,
            flags=flags,
        )
        self.driver.transport.send(now, self.driver.host, Endpoint(self.driver.ip, self.port), self.source,
                                   self.source_host, encode_datagram([sm]))
        self._arm_sm_timer()

    def _arm_sm_timer(self) -> None:
        if self._sm_timer is not None:
            self._sm_timer.cancel()
        self._sm_timer = self.driver.transport.scheduler.at(self.time_of_last_sm_ns + STATUS_MESSAGE_TIMEOUT_NS,
                                                            self._on_sm_timer)

    def _on_sm_timer(self) -> None:
        self._sm_timer = None
        if self.closed or not self.driver.alive:
            return
        now = self.driver.transport.scheduler.now_ns
        if now - self.time_of_last_packet_ns >= IMAGE_LIVENESS_TIMEOUT_NS:
            self.driver.remove_image(self)
            return
        # The periodic SM repeats the last reported position (the real capture shows this).
        self._send_sm(now, self.last_sm_position)

    def close(self, now: int | None = None, *, end_of_stream_sm: bool = False) -> None:
        if self.closed:
            return
        if end_of_stream_sm and now is not None:
            self._send_sm(now, self.last_sm_position, SM_EOS_FLAG)
        self.closed = True
        for timer in (self._nak_timer, self._sm_timer):
            if timer is not None:
                timer.cancel()


# --- Drivers ------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Subscription:
    port: int
    stream_id: int
    channel: str


@dataclass(slots=True)
class _PendingSetup:
    elicited_ns: int


class Driver:
    """One host's media driver, for one life of its process (a restart makes a new one)."""

    def __init__(self, transport: Transport, host: Host, ip: str, rng: random.Random) -> None:
        self.transport = transport
        self.host = host
        self.ip = ip
        self.rng = rng
        self.alive = True
        self._next_session_id = _int32(rng.getrandbits(32))
        self._receiver_id_base = _int64(rng.getrandbits(64))
        self._receiver_ids: dict[int, int] = {}
        self._ports_in_use: set[int] = set()
        self.subscriptions: dict[tuple[int, int], _Subscription] = {}
        self.images: dict[tuple[int, int, int], Image] = {}
        self.pending_setups: dict[tuple[int, int, int], _PendingSetup] = {}
        self.publications: dict[int, Publication] = {}

    # --- resources ----------------------------------------------------------------------------------
    def next_session_id(self) -> int:
        session_id = self._next_session_id
        self._next_session_id = _int32(session_id + 1)
        return session_id

    def receiver_id(self, port: int) -> int:
        # One receiver id per receive channel endpoint, counting up from a random start (the capture's
        # consensus and log endpoints of one member differ by one).
        if port not in self._receiver_ids:
            self._receiver_ids[port] = _int64(self._receiver_id_base + len(self._receiver_ids))
        return self._receiver_ids[port]

    def ephemeral_port(self) -> int:
        low, high = EPHEMERAL_PORTS
        while True:
            port = low + self.rng.randrange(high - low + 1)
            if port not in self._ports_in_use:
                self._ports_in_use.add(port)
                return port

    def add_publication(
        self,
        *,
        stream_id: int,
        term_length: int,
        destinations: list[tuple[Endpoint, Host]],
        initial_term_id: int | None = None,
        initial_position: int = 0,
        setup_flags: int = 0,
        session_id: int | None = None,
        refuses_unconnected: bool = False,
        tag: object = None,
    ) -> Publication:
        """A new publication; ``refuses_unconnected`` and ``tag``: see `Publication`."""
        port = self.ephemeral_port()
        if initial_term_id is None:
            initial_term_id = _int32(self.rng.getrandbits(32))
        publication = Publication(
            self,
            stream_id=stream_id,
            session_id=self.next_session_id() if session_id is None else session_id,
            initial_term_id=initial_term_id,
            term_length=term_length,
            source=Endpoint(self.ip, port),
            destinations=destinations,
            initial_position=initial_position,
            setup_flags=setup_flags,
            refuses_unconnected=refuses_unconnected,
            tag=tag,
        )
        self.publications[port] = publication
        publication._schedule_flush()
        return publication

    def subscribe(self, port: int, stream_id: int, channel: str) -> None:
        self.subscriptions[(port, stream_id)] = _Subscription(port, stream_id, channel)

    def unsubscribe(self, port: int, stream_id: int) -> None:
        self.subscriptions.pop((port, stream_id), None)
        for key in sorted(k for k in self.images if k[0] == port and k[1] == stream_id):
            self.images.pop(key).close()
        for key in [k for k in self.pending_setups if k[0] == port and k[1] == stream_id]:
            del self.pending_setups[key]

    def remove_image(self, image: Image) -> None:
        key = (image.port, image.stream_id, image.session_id)
        if self.images.get(key) is image:
            del self.images[key]
        image.close()

    def image(self, port: int, stream_id: int, session_id: int) -> Image | None:
        return self.images.get((port, stream_id, session_id))

    # --- life ----------------------------------------------------------------------------------------
    def kill(self) -> None:
        """kill -9: everything stops at once, nothing more is sent."""
        self.alive = False
        for image in self.images.values():
            image.close()
        self.images.clear()
        for publication in self.publications.values():
            publication.closed = True
            if publication._timer is not None:
                publication._timer.cancel()

    def close_cleanly(self, now: int) -> None:
        """A clean stop: publications drain and send end of stream, images say goodbye (SM with EOS)."""
        for port in sorted(self.publications):
            self.publications[port].close()
            self.publications[port].send(now)
        for key in sorted(self.images):
            self.images[key].close(now, end_of_stream_sm=True)
        self.images.clear()
        self.alive = False

    # --- receiving -------------------------------------------------------------------------------------
    def on_datagram(self, now: int, source: Endpoint, port: int, payload: bytes) -> None:
        frames = decode_datagram(payload)
        first = frames[0]
        kind = type(first)
        if kind is DataFrame or kind is PadFrame:
            self._on_data(now, source, port, frames)
        elif kind is SetupFrame:
            self._on_setup(now, source, port, first)
        elif kind is StatusMessage or kind is Nak:
            publication = self.publications.get(port)
            if publication is None or publication.closed or publication.session_id != first.session_id:
                return
            if kind is StatusMessage:
                publication.on_status_message(now, first)
            else:
                publication.on_nak(now, first)

    def _on_data(self, now: int, source: Endpoint, port: int, frames: list) -> None:
        first = frames[0]
        key = (port, first.stream_id, first.session_id)
        image = self.images.get(key)
        if image is not None:
            image.on_frames(now, frames)
            return
        if (port, first.stream_id) not in self.subscriptions:
            return
        if first.flags & EOS_FLAG:
            return  # Aeron does not elicit a SETUP for a stream that is ending
        pending = self.pending_setups.get(key)
        if pending is not None and now - pending.elicited_ns < SETUP_TIMEOUT_NS:
            return
        self.pending_setups[key] = _PendingSetup(now)
        # An SM with the SEND_SETUP flag asks the source for a SETUP; the receiver knows no position yet.
        sm = StatusMessage(
            session_id=first.session_id,
            stream_id=first.stream_id,
            consumption_term_id=first.term_id,
            consumption_term_offset=0,
            receiver_window=0,
            receiver_id=self.receiver_id(port),
            flags=SM_SEND_SETUP_FLAG,
        )
        self.transport.send(now, self.host, Endpoint(self.ip, port), source, self.transport.host_of(source.ip),
                            encode_datagram([sm]))

    def _on_setup(self, now: int, source: Endpoint, port: int, setup: SetupFrame) -> None:
        key = (port, setup.stream_id, setup.session_id)
        subscription = self.subscriptions.get((port, setup.stream_id))
        if subscription is None:
            return
        image = self.images.get(key)
        if image is not None:
            # A repeated SETUP for a live image: the sender has not heard us yet; answer with an SM.
            image.send_status_message(now)
            return
        self.pending_setups.pop(key, None)
        image = Image(self, port=port, channel=subscription.channel, setup=setup, source=source,
                      source_host=self.transport.host_of(source.ip), receiver_id=self.receiver_id(port), now=now)
        self.images[key] = image
        image.send_status_message(now)


# --- The transport ----------------------------------------------------------------------------------


@dataclass(slots=True)
class HostInfo:
    host: Host
    ip: str
    capture: list[CaptureRecord] | None = None  #: None for hosts we do not capture on (clients)
    capturing: bool = False
    driver: Driver | None = None
    lives: int = 0
    datagrams_dropped_while_down: int = 0
    stats: dict[str, int] = field(default_factory=dict)


class Transport:
    """Routes datagrams between the hosts' drivers through the simulated network, capturing them."""

    def __init__(
        self,
        scheduler: Clock,
        network: Network,
        *,
        on_message: Callable[[Delivery], None],
        on_end_of_stream: Callable[[int, Image], None] | None = None,
        on_sent: Callable[[int, Publication, object], None] | None = None,
        on_publication_status: Callable[[int, Publication, bool, int | None], None] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.network = network
        self._on_message = on_message
        self._on_end_of_stream = on_end_of_stream
        self._on_sent = on_sent
        self._on_publication_status = on_publication_status
        self.hosts: dict[Host, HostInfo] = {}
        self._by_ip: dict[str, Host] = {}
        self.datagrams = 0

    def add_host(self, host: Host, ip: str, *, capture: bool) -> HostInfo:
        info = HostInfo(host=host, ip=ip, capture=[] if capture else None)
        self.hosts[host] = info
        self._by_ip[ip] = host
        return info

    def host_of(self, ip: str) -> Host | None:
        return self._by_ip.get(ip)

    def start(self, host: Host, rng: random.Random) -> Driver:
        """A new life of the host's process: a fresh driver, and its capture runs again."""
        info = self.hosts[host]
        info.lives += 1
        info.driver = Driver(self, host, info.ip, rng)
        info.capturing = info.capture is not None
        return info.driver

    def crash(self, host: Host) -> None:
        info = self.hosts[host]
        if info.driver is not None:
            info.driver.kill()
        info.driver = None
        # The host goes dark with its process: what arrives from now on is neither received nor captured.
        info.capturing = False

    def stop(self, host: Host, now: int) -> None:
        info = self.hosts[host]
        if info.driver is not None:
            info.driver.close_cleanly(now)
        info.driver = None
        info.capturing = False

    def driver(self, host: Host) -> Driver | None:
        return self.hosts[host].driver

    # --- datagrams --------------------------------------------------------------------------------------
    def send(self, now: int, source_host: Host, source: Endpoint, destination: Endpoint,
             destination_host: Host | None, payload: bytes) -> None:
        self.datagrams += 1
        sender = self.hosts[source_host]
        if sender.capturing:
            sender.capture.append(CaptureRecord(now, source, destination, payload))
        if destination_host is None or destination_host not in self.hosts:
            return
        for delay in self.network.transmit(source_host, destination_host):
            self.scheduler.at(now + delay, lambda d=destination_host, s=source, e=destination, p=payload:
                              self._arrive(d, s, e, p))

    def _arrive(self, host: Host, source: Endpoint, destination: Endpoint, payload: bytes) -> None:
        info = self.hosts[host]
        now = self.scheduler.now_ns
        if info.driver is None or not info.driver.alive:
            info.datagrams_dropped_while_down += 1
            return
        if info.capturing:
            info.capture.append(CaptureRecord(now, source, destination, payload))
        info.driver.on_datagram(now, source, destination.port, payload)

    # --- up-calls from images ----------------------------------------------------------------------------
    def deliver(self, delivery: Delivery) -> None:
        self._on_message(delivery)

    def on_end_of_stream(self, now: int, image: Image) -> None:
        if self._on_end_of_stream is not None:
            self._on_end_of_stream(now, image)

    def on_sent(self, now: int, publication: Publication, tag: object) -> None:
        if self._on_sent is not None:
            self._on_sent(now, publication, tag)

    def on_publication_status(self, now: int, publication: Publication, connected: bool, limit: int | None) -> None:
        """A tagged publication's connection or binding publisher limit changed (`Publication._report_status`)."""
        if self._on_publication_status is not None:
            self._on_publication_status(now, publication, connected, limit)
