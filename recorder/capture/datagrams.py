"""The one decoder from captured UDP datagrams to recount events (contract §1), sans-I/O.

Every capture source (pcap/pcapng files, the recording proxy) ends here: a `Datagram` (defined with
the proxy's recordings in `recorder.record.reader`; a `formats.pcap.Packet` has the same attributes
and may be fed as it is) is fed with its packet number, and `DatagramDecoder` returns the events that
became certain (see "Receivers" below for why an ``in`` event can come a little later); `finish`
returns the rest.

How a datagram becomes events:

1. `formats.udp.decode_datagram` splits it into Aeron frames.  SETUP, DATA, PAD and heartbeats go to
   a `formats.reassembly.Reassembler` per stream (source endpoint, destination endpoint, session,
   stream id), which rebuilds whole messages with their stream positions and drops retransmitted and
   duplicate frames, so a message never becomes two events.  NAK, RTTM and other control frames are
   only counted; status messages (SM) are counted and tell whether the receiver was alive.
2. The destination says the channel: a member's consensus endpoint on the consensus stream (108)
   is ``consensus``; its log or catch-up endpoint on the log stream (100) is ``log``; its ingress
   endpoint on the ingress stream (101) is ``ingress``; the egress stream (102) to anyone else is
   ``egress``.  Archive streams (10, 20) and traffic to endpoints that are no member's are counted and
   skipped, with an example packet number.
3. Each message is SBE-decoded (cluster schema 111).  Other schemas, unknown template ids and
   corrupt messages are counted and skipped with their packet number; nothing stops the decoding.
4. The *sender* is never known from the port (members send from ephemeral ports).  In order:
   the message's own member-id field (`members.SENDER_FIELD`: CanvassPosition.followerMemberId,
   RequestVote.candidateMemberId, Vote.followerMemberId, NewLeadershipTerm.leaderMemberId, ...), which
   also identifies every other message of the same publication (source endpoint + session + stream);
   the source IP when exactly one member lives there; for the log, the NewLeadershipTerm whose
   logSessionId is the stream's session; then a media driver's habit of numbering its publications'
   session ids consecutively (a publication whose session id is within `SESSION_WINDOW` of the
   identified publications of exactly one member is that member's, noted); for the log and catch-up,
   finally, the receiver's leader as its last NewLeadershipTerm named it.  Messages wait until their
   publication's sender is known, and keep their capture time and order.
5. Events: a consensus message is an ``in`` event at the receiver (peer = sender) and an ``out``
   event at the sender (peer = receiver); a log message an ``in`` event at the receiving member
   (peer = leader) and an ``out`` event at the leader (peer = receiver), both with the extra key
   ``logPosition`` = the stream position after the message (what Aeron Cluster calls its log
   position); ingress an ``in`` event at the receiving member (peer
   null); egress an ``out`` event at the sending member (peer null).  An end-of-stream flag on a log
   stream is a ``LogEndOfStream`` local event at the receiver.  ``payload`` holds the exact SBE bytes;
   every event has the extra key ``packet`` (the packet number, as Wireshark numbers it).

Several captures (one per host): feed them all to one decoder with ``capture=`` set, and give
``local_members`` (capture → the members whose host it was taken on, see `members.local_members`).
A member's events then come only from its own host's capture (its ``in`` events with its own clock,
its ``out`` events as it sent them).  A member whose host was not captured gets its events from
whichever capture saw them; either way each message is taken once (the first capture to show it
wins), a message being identified by its publication, destination and stream position.

Times: an event has the capture time of the datagram that completed its message; a message held
back behind a hole is received when a captured frame (a retransmission) fills it, as Aeron's
receiver delivers in stream order.  A hole the capture never fills was a frame the capture missed
but the member got: the messages behind it keep the time their own frames were captured.

Receivers (Aeron's image rules).  A member receives a stream only while it has an *image* of it.
A receiver without one (it restarted) answers data with a status message carrying the SEND_SETUP
flag; from then on nothing is delivered to it until the publisher's SETUP, and then only from that
SETUP's position (the image's join position; a first SETUP seen before any data sets it too).  So an
``in`` event is held until the receiver's next status message: a regular one releases it, a
SEND_SETUP one drops what reached the member after it went down, "down" being a silence of more
than `RESTART_SILENCE_NS` in everything the member sends, from `HEARTBEAT_INTERVAL_NS` after the
last thing it sent before the silence.  The sender's ``out`` events stand either way.  Dropped
messages are reported ("not received").  A capture without status messages releases everything at
`finish`.

Deterministic: no clocks, no threads; output order is ``(ts, capture, packet, order)``.

`recorder.capture.bulk` feeds a whole capture, passing over the steady traffic of each stream in
runs and feeding the rest here one datagram at a time; while it does, ``bulk`` answers what the
decoder would otherwise have kept from the datagrams it did not see (when a stream's status
messages came, which held events a run made, what a member sent).  What the decoder keeps as
evidence of the members' lives (`heard`: each member's spans of activity, from that same log of
sends; `setup_requests`; `publications`) is therefore the same either way.
"""

from __future__ import annotations

import struct
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from formats.cluster_codecs import MESSAGES_BY_TEMPLATE_ID, SCHEMA_ID
from formats.cluster_codecs_ext import decode_cluster
from formats.errors import DecodeError
from formats.events import Event, new_event
from formats.reassembly import Gap, Message, Reassembler
from formats.udp import (
    BEGIN_FLAG,
    DATA_HEADER_LENGTH,
    HDR_TYPE_NAK,
    HDR_TYPE_RTTM,
    HDR_TYPE_SM,
    NAK_LENGTH,
    RTTM_LENGTH,
    SM_EOS_FLAG,
    SM_LENGTH,
    SM_SEND_SETUP_FLAG,
    DataFrame,
    PadFrame,
    SetupFrame,
    compute_position,
    decode_datagram,
    position_bits_to_shift,
)
from recorder.capture.members import LOG_ROLES, SENDER_FIELD, MemberMap, TrafficSurvey

if TYPE_CHECKING:  # imported for its annotations only: a capture converts without the recorder's modules
    from recorder.record.reader import Datagram  # the one definition, shared with the proxy's recordings

#: How far apart (in session ids) two publications of one media driver may be and still be matched.
SESSION_WINDOW = 256
#: Problems kept with their details per category (all are counted).
MAX_EXAMPLES = 10
#: A member silent this long was down (a live member sends status messages and publication data or
#: heartbeats at least every 200 ms).
RESTART_SILENCE_NS = 500_000_000
#: A live member's media driver sends data or a heartbeat on each publication at least this often
#: (Aeron's publication heartbeat interval): what reached a member that long after it last sent
#: anything, before a silence, arrived when it was down.
HEARTBEAT_INTERVAL_NS = 100_000_000
#: Decoded messages kept by their bytes (a cache: heartbeats repeat exactly).
MAX_DECODED = 4096
#: Arrival times kept per stream for messages not yet delivered.
MAX_ARRIVALS = 1 << 16
#: `DatagramDecoder._now` after the last packet: what `finish` makes comes after every packet.
AFTER_THE_END = 1 << 62

_SBE_HEADER = struct.Struct("<HHHH")
_FRAME_HEADER = struct.Struct("<iBBH")
_SESSION_STREAM = struct.Struct("<ii")
#: Control frames counted without decoding: type → (name, smallest valid frame_length).
_COUNTED_CONTROL = {HDR_TYPE_SM: ("SM", SM_LENGTH), HDR_TYPE_NAK: ("NAK", NAK_LENGTH), HDR_TYPE_RTTM: ("RTTM", RTTM_LENGTH)}


@dataclass(frozen=True, slots=True)
class Streams:
    """The Aeron stream ids of the cluster's channels (defaults as in aeron-formats.md §8.1)."""

    consensus: int = 108
    log: int = 100
    ingress: int = 101
    egress: int = 102
    archive: tuple[int, ...] = (10, 20)


DEFAULT_STREAMS = Streams()


@dataclass(frozen=True, slots=True)
class Problem:
    """Something that was skipped: where (file, packet number, byte offset or line) and why."""

    category: str
    detail: str
    file: str | None = None
    packet: int | None = None
    offset: int | None = None
    line: int | None = None

    def __str__(self) -> str:
        where = [part for part in (self.file, f"packet {self.packet}" if self.packet is not None else None,
                                   f"offset {self.offset}" if self.offset is not None else None,
                                   f"line {self.line}" if self.line is not None else None) if part]
        return (", ".join(where) + ": " if where else "") + self.detail

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"category": self.category, "detail": self.detail}
        for key in ("file", "packet", "offset", "line"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


class DecodedMessage(NamedTuple):
    """What the observer sees for each decoded cluster message, before it becomes events."""

    ts_ns: int
    capture: int
    packet: int
    channel: str
    sender: int | None
    receiver: int | None
    session_id: int
    stream_id: int
    start_position: int
    end_position: int
    type: str
    message: Any
    payload: bytes


class _Publication:
    """One sender's publication (source endpoint, session, stream), whatever its destinations."""

    __slots__ = ("key", "sender", "how", "pending", "first_ts", "first_data_ts")

    def __init__(self, key: tuple, first_ts: int = 0) -> None:
        self.key = key
        self.sender: int | None = None
        self.how = ""
        self.pending: list[tuple] = []
        self.first_ts = first_ts  #: when the capture first saw it (a SETUP or its first frame)
        self.first_data_ts: int | None = None  #: when it first carried a message


class _Stream:
    """One (capture, source, destination, session, stream): what it carries and its reassembly."""

    __slots__ = ("channel", "receiver", "role", "publication", "reassembler", "eos_seen", "destination", "skip",
                 "last_ts", "last_packet", "end_position", "arrivals", "seen_data", "awaiting_setup", "join", "held",
                 "unreceived", "answered", "made_at", "answers_from")

    def __init__(self, channel: str | None, receiver: int | None, role: str | None, publication: _Publication,
                 destination: tuple[str, int], skip: str | None) -> None:
        self.channel = channel
        self.receiver = receiver
        self.role = role
        self.publication = publication
        self.destination = destination
        self.skip = skip
        self.reassembler = Reassembler() if skip is None else None
        self.eos_seen = False
        self.last_ts = 0
        self.last_packet = 0
        self.end_position = 0
        #: (term_id, term_offset) of each message's BEGIN frame → (ts, packet) it arrived with
        self.arrivals: dict[tuple[int, int], tuple[int, int]] = {}
        self.seen_data = False
        #: the receiver asked for a SETUP (it has no image): nothing is delivered until one comes
        self.awaiting_setup = False
        #: (join position, position bits, initial term id) of the receiver's image, until a frame there
        self.join: tuple[int, int, int] | None = None
        #: ``in`` events since the receiver's last status message, each with the packet number being
        #: decoded when it was made: the receiver was alive to receive them only if its next status
        #: message is a regular one, not a request for a SETUP
        self.held: list[tuple[int, Keyed]] = []
        #: start positions of messages completed while the receiver had no image
        self.unreceived: set[int] = set()
        #: the receiver has sent a status message for it: it has an image, which a later SETUP does not move
        self.answered = False
        #: the packet number of the datagram that made the stream (`DatagramDecoder._stream`)
        self.made_at = 0
        #: the packet from which the receiver's regular status messages answer the current image (the one
        #: that made the stream, or the SETUP that began a new image): `DatagramDecoder._answered`
        self.answers_from = 0


Keyed = tuple[tuple, Event]


class ConsensusPublicationSeen(NamedTuple):
    """One member's consensus publication to another, as the capture saw it (`consensus_publications`)."""

    sender: int
    receiver: int
    session_id: int
    first_seen_ns: int  #: its first SETUP or frame
    first_data_ns: int | None  #: its first message
    status_messages: tuple[tuple[int, bool], ...]  #: (ts, end of stream) of each status message its receiver sent
    #: (from, until) spans its sender sat at its receiver's flow-control limit (`recorder.capture.flow_control`;
    #: until None: to the end of the capture)
    stalls: tuple[tuple[int, int | None], ...] = ()


class DatagramDecoder:
    """Datagrams in, events out.  See the module docstring for the rules."""

    def __init__(
        self,
        members: MemberMap,
        *,
        streams: Streams = DEFAULT_STREAMS,
        observer: Callable[[DecodedMessage], None] | None = None,
        local_members: Mapping[int, frozenset[int]] | None = None,
        sources: Mapping[int, str] | None = None,
    ) -> None:
        self.members = members
        self.streams = streams
        self.observer = observer
        self.local_members = dict(local_members) if local_members is not None else None
        self._local_anywhere = frozenset().union(*self.local_members.values()) if self.local_members else frozenset()
        self.sources = dict(sources or {})
        self.problems: list[Problem] = []
        self.notes: list[str] = []
        self.skipped: Counter[str] = Counter()
        self.frames: Counter[str] = Counter()
        #: decoded messages by (channel, type); `messages` names them "channel/type"
        self._message_counts: Counter[tuple[str, str]] = Counter()
        self.datagrams = 0
        self._streams: dict[tuple, _Stream] = {}
        self._publications: dict[tuple, _Publication] = {}
        #: (session id, stream id) → its publications, in the order they were first seen
        self._by_session: dict[tuple[int, int], list[_Publication]] = {}
        #: session ids (unsigned) of publications whose sender is known other than by session numbering,
        #: sorted, each with its sender (`_nearest_session`)
        self._numbered: list[tuple[int, int]] = []
        self._log_sessions: dict[int, int] = {}
        #: (leader, log session id) → when a NewLeadershipTerm of that leader first named the session
        self._log_sessions_named: dict[tuple[int, int], int] = {}
        self._leader_of: dict[int, int] = {}
        self._emitted: set[tuple] = set()
        self._decoded: dict[bytes, tuple[Any, dict[str, Any], str]] = {}  # bytes → (message, fields, type)
        #: (capture, member) → (packet number, time) of everything it was seen to send, in packet order
        self._sends: dict[tuple[int, int], array] = {}
        #: (capture, member) → its spans of activity (`heard`), once its capture has been walked in bulk
        self._spans: dict[tuple[int, int], list[tuple[int, int]]] = {}
        #: (member, role, ts) of each status message asking for a SETUP: the member had lost its image
        self._setup_requests: list[tuple[int, str, int]] = []
        #: stream key → (packet number, time, flags) of each status message the receiver of a consensus or
        #: log stream sent for it while the stream was known, in packet order (what `consensus_publications`
        #: and `log_images` read); `recorder.capture.bulk` adds those it decoded (`settle_status`)
        self._status: dict[tuple, array | np.ndarray] = {}
        self._order = 0
        self._finished = False
        #: the packet being decoded (held ``in`` events remember it); after the last one, at `finish`
        self._now = 0
        #: set by `recorder.capture.bulk` while it feeds a capture: what it decoded in bulk
        self.bulk: Any = None

    # --- public ---------------------------------------------------------------------------------
    @property
    def messages(self) -> Counter[str]:
        """Decoded messages counted by ``channel/type``."""
        return Counter({f"{channel}/{type_name}": count
                        for (channel, type_name), count in self._message_counts.items()})

    def feed(self, datagram: Datagram, packet_index: int, *, capture: int = 0,
             payload_offset: int | None = None) -> list[Event]:
        return [event for _, event in self.feed_keyed(datagram, packet_index, capture=capture,
                                                      payload_offset=payload_offset)]

    def finish(self) -> tuple[list[Event], list[Problem]]:
        return [event for _, event in self.finish_keyed()], self.problems

    def feed_keyed(self, datagram: Datagram, packet_index: int, *, capture: int = 0,
                   payload_offset: int | None = None) -> list[Keyed]:
        """As `feed`, each event with its sort key ``(ts, capture, packet, order, in/out)``."""
        self.datagrams += 1
        self._now = packet_index
        out: list[Keyed] = []
        payload = datagram.payload
        if len(payload) >= 8:
            # Status messages, NAKs and RTTMs (a fifth of a cluster's datagrams) are only counted:
            # check their header and length without building them.
            frame_length, version, flags, frame_type = _FRAME_HEADER.unpack_from(payload, 0)
            minimum = _COUNTED_CONTROL.get(frame_type)
            if minimum is not None and version == 0 and minimum[1] <= frame_length <= len(payload):
                self.frames[minimum[0]] += 1
                if frame_type == HDR_TYPE_SM:
                    self._on_status(datagram, payload, capture, flags, packet_index, out)
                return out
        try:
            frames = decode_datagram(payload)
        except DecodeError as error:
            self._on_undecodable(datagram, packet_index, capture, error, payload_offset)
            return out
        for frame in frames:
            kind = type(frame)
            if kind is DataFrame or kind is PadFrame:
                self._on_term_frame(datagram, frame, packet_index, capture, out)
            elif kind is SetupFrame:
                self.frames["SETUP"] += 1
                self._on_setup(datagram, frame, packet_index, capture)
            else:
                self.frames[_FRAME_NAMES.get(kind.__name__, kind.__name__)] += 1
        return out

    def heard(self) -> dict[int, list[tuple[int, int]]]:
        """Each member's spans of activity on the wire, (first, last) datagram it sent (status
        messages from its endpoints, frames of its publications), split at silences longer than
        `RESTART_SILENCE_NS` and merged across captures: a member is silent only where every capture
        that heard it is."""
        spans: dict[int, list[tuple[int, int]]] = {}
        for key in sorted(set(self._sends) | set(self._spans)):
            spans.setdefault(key[1], []).extend(self._activity(key))
        return {member: _merged(own) for member, own in sorted(spans.items()) if own}

    def settle_activity(self, capture: int, senders: Iterable[int] = ()) -> None:
        """Every datagram of ``capture`` has been seen (`recorder.capture.bulk` calls this as its walk of
        the capture ends, ``senders`` being the members it saw send): each of its members' spans of
        activity is worked out now, while ``bulk`` still knows what it decoded, and the log of its sends
        let go."""
        keys = {key for key in self._sends if key[0] == capture} | {(capture, member) for member in senders}
        for key in sorted(keys):
            self._spans[key] = self._activity(key)
        for key in keys:
            self._sends.pop(key, None)

    def setup_requests(self, role: str = "consensus") -> dict[int, list[int]]:
        """When each member asked, from its ``role`` endpoint, for a SETUP (a status message with the
        flag): it had no image of that stream."""
        out: dict[int, list[int]] = {}
        for member, where, ts in self._setup_requests:
            if where == role:
                out.setdefault(member, []).append(ts)
        return out

    def publications(self) -> dict[int, list[tuple[int, int, int]]]:
        """Each member's publications seen: (first seen, session id, stream id), in time order."""
        out: dict[int, list[tuple[int, int, int]]] = {}
        for publication in self._publications.values():
            if publication.sender is not None:
                out.setdefault(publication.sender, []).append((publication.first_ts, publication.key[2],
                                                               publication.key[3]))
        return {member: sorted(own) for member, own in sorted(out.items())}

    def consensus_publications(self) -> list[ConsensusPublicationSeen]:
        """Every consensus publication whose sender is known, with the status messages its receiver
        sent it (what says when Aeron's publication was connected), in (sender, receiver, first seen)
        order."""
        status: dict[tuple, list[tuple[int, bool]]] = {}
        receivers: dict[tuple, tuple[tuple[int, int], int]] = {}  # publication → (capture, packet), receiver
        for key, seen in self._status.items():
            stream = self._streams[key]
            rows = _status_rows(seen)
            if stream.channel != "consensus" or not len(rows):
                continue
            publication = stream.publication.key
            status.setdefault(publication, []).extend(
                zip(rows[:, 1].tolist(), ((rows[:, 2] & SM_EOS_FLAG) != 0).tolist(), strict=True))
            last = (key[0], int(rows[-1, 0]))  # the receiver of its last status message, as captures are fed
            if publication not in receivers or last > receivers[publication][0]:
                receivers[publication] = (last, stream.receiver)
        first_receiver: dict[tuple, int] = {}
        for stream in self._streams.values():
            if stream.receiver is not None:
                first_receiver.setdefault(stream.publication.key, stream.receiver)
        out = []
        for publication in self._publications.values():
            if publication.sender is None or publication.key[3] != self.streams.consensus:
                continue
            answered = receivers.get(publication.key)
            receiver = answered[1] if answered is not None else first_receiver.get(publication.key)
            if receiver is None:
                continue
            out.append(ConsensusPublicationSeen(publication.sender, receiver, publication.key[2], publication.first_ts,
                                                publication.first_data_ts, tuple(sorted(status.get(publication.key, ())))))
        return sorted(out, key=lambda p: (p.sender, p.receiver, p.first_seen_ns, p.session_id))

    def log_publications(self) -> dict[tuple[int, int], int]:
        """(leader, log session id) -> when the capture first saw that log publication (its SETUP or first
        frame), or a NewLeadershipTerm of the leader naming its session, if earlier: the leader's driver had
        added it by then (the session id is the publication's, so no NewLeadershipTerm can name it before
        `addLogPublication` returned).  In j_short_timeouts_leader_kill, leader 1's first NewLeadershipTerm
        naming session 1195139053 left at 19:27:45.8746, 0.1 ms after its agent log's LEADER_LOG_REPLICATION
        (the call returned), its log's first SETUP only at 19:27:45.9640.  A catch-up replay from the
        leader's archive shares the session id and comes later: the earliest is the publication."""
        out: dict[tuple[int, int], int] = dict(self._log_sessions_named)
        for publication in self._publications.values():
            if publication.sender is None or publication.key[3] != self.streams.log:
                continue
            key = (publication.sender, publication.key[2])
            if key not in out or publication.first_ts < out[key]:
                out[key] = publication.first_ts
        return dict(sorted(out.items()))

    def log_images(self) -> dict[tuple[int, int], list[int]]:
        """(member, log session id) -> when its driver had an image of that log: each time its log or
        catch-up endpoint began answering it with regular status messages (the first, and each after a
        silence of more than `RESTART_SILENCE_NS`: a new image after a restart, or the catch-up image
        beside the live one), in time order."""
        images: dict[tuple[int, int], list[int]] = {}
        for key, seen in self._status.items():
            stream = self._streams[key]
            if stream.channel != "log":
                continue
            rows = _status_rows(seen)
            times = rows[(rows[:, 2] & (SM_SEND_SETUP_FLAG | SM_EOS_FLAG)) == 0, 1]
            if len(times):
                starts = times[np.concatenate([[True], np.diff(times) > RESTART_SILENCE_NS])]
                images.setdefault((stream.receiver, key[5]), []).extend(starts.tolist())
        return {key: sorted(times) for key, times in sorted(images.items())}

    def settle_status(self, found: Mapping[tuple, np.ndarray]) -> None:
        """``found``: stream key → (packet number, time, flags) of the regular status messages that
        `recorder.capture.bulk` decoded for a consensus or log stream after the stream was made, in packet
        order; merged with those fed one by one (a SETUP request, ...)."""
        for key, rows in found.items():
            own = self._status.get(key)
            if own is not None and len(own):
                rows = np.concatenate([_status_rows(own), rows])
                rows = rows[np.argsort(rows[:, 0], kind="stable")]
            self._status[key] = rows

    def publication_senders(self) -> dict[tuple[str, int], int]:
        """ip:port → the member whose publication sends from it (an ephemeral port), where known."""
        return {(p.key[0], p.key[1]): p.sender for p in self._publications.values() if p.sender is not None}

    def finish_keyed(self) -> list[Keyed]:
        """The capture(s) ended: flush streams, settle senders still unknown, report assumptions."""
        out: list[Keyed] = []
        if self._finished:
            return out
        self._finished = True
        self._now = AFTER_THE_END
        for key, stream in self._streams.items():
            if stream.reassembler is None:
                continue
            for item in stream.reassembler.finish():
                # Released only now that the capture ended: it arrived with its frames.
                arrival = stream.arrivals.pop((item.term_id, item.term_offset), None) if type(item) is Message else None
                ts, packet = arrival if arrival is not None else (stream.last_ts, stream.last_packet)
                self._on_item(stream, item, ts, packet, key[0], out)
        for publication in self._publications.values():
            if publication.pending:
                self._settle_at_end(publication, out)
        for key, stream in self._streams.items():
            if stream.held:
                out += [item for _, item in stream.held]
                stream.held = []
            if stream.reassembler is not None:
                for note in stream.reassembler.notes:
                    self.notes.append(f"{self._describe_stream(key)}: {note}")
        return out

    # --- frames ---------------------------------------------------------------------------------
    def _on_undecodable(self, datagram: Datagram, packet: int, capture: int, error: DecodeError,
                        payload_offset: int | None) -> None:
        to_member = self.members.lookup(datagram.dst_ip, datagram.dst_port)
        from_member = self.members.lookup(datagram.src_ip, datagram.src_port)
        offset = None
        if payload_offset is not None and error.offset is not None:
            offset = payload_offset + error.offset
        if to_member is not None or from_member is not None:
            self._problem("corrupt frame", f"not a valid Aeron frame ({error.expected})", capture, packet, offset)
        else:
            self._problem(
                "not Aeron",
                f"UDP {datagram.src_ip}:{datagram.src_port} → {datagram.dst_ip}:{datagram.dst_port} is not"
                f" Aeron traffic ({error.expected})",
                capture,
                packet,
                offset,
            )

    def _on_status(self, datagram: Datagram, payload: bytes | memoryview, capture: int, flags: int,
                   packet: int, out: list[Keyed]) -> None:
        """A receiver's status message: it is alive with an image, or (SEND_SETUP) it has none."""
        asks_setup = bool(flags & SM_SEND_SETUP_FLAG)
        session_id, stream_id = _SESSION_STREAM.unpack_from(payload, 8)
        owner = self.members.lookup(datagram.src_ip, datagram.src_port)
        receiver = (capture, owner[0]) if owner is not None else None
        ts = datagram.ts_ns
        if receiver is not None:
            self._transmitted(receiver, ts, packet)
            if asks_setup:
                self._setup_requests.append((owner[0], owner[1], ts))
        key = (capture, datagram.dst_ip, datagram.dst_port, datagram.src_ip, datagram.src_port, session_id, stream_id)
        stream = self._streams.get(key)
        if stream is None or stream.reassembler is None:
            return
        if stream.receiver is not None and (stream.channel == "consensus" or stream.channel == "log"):
            seen = self._status.get(key)
            if seen is None:
                seen = self._status[key] = array("q")
            seen.extend((packet, ts, flags))
        if not asks_setup:
            stream.answered = True
            if stream.held:
                out += [item for _, item in stream.held]
                stream.held = []
            return
        # No image: the receiver restarted (Aeron answers data it has no image for with this request).
        # It went down when it last fell silent; what reached it after that was not received.
        down = self._down_since(receiver, packet) if receiver is not None else None
        # Decoded in bulk, the stream's regular status messages were not fed one by one: what was
        # made before the last of them was released by it.
        released = self.bulk.last_status(key, packet) if self.bulk is not None else -1
        held = []
        for made, item in stream.held:
            (held if made > released else out).append(item)
        stream.held = []
        kept = [item for item in held if down is not None and item[0][0] <= down]
        lost = len(held) - len(kept)
        out += kept
        if self.bulk is not None:
            lost += self.bulk.drop_held(key, released, packet, down)
        if lost:
            self._problem("not received", f"{lost} message(s) to member {stream.receiver} arrived while it was"
                          " down or had no image (it asked for a SETUP): not received", capture, packet)
        if stream.seen_data:
            stream.awaiting_setup = True

    def _transmitted(self, member: tuple[int, int], ts: int, packet: int) -> None:
        """A member sent something (a long silence before something it sends means it was down)."""
        sends = self._sends.get(member)
        if sends is None:
            sends = self._sends[member] = array("q")
        sends.append(packet)
        sends.append(ts)

    def _own_sends(self, member: tuple[int, int]) -> np.ndarray:
        """(packet, time) of what ``member`` was seen to send in the datagrams fed here, in the order fed."""
        sends = self._sends.get(member)
        return np.frombuffer(sends, dtype=np.int64).reshape(-1, 2) if sends else np.zeros((0, 2), np.int64)

    def _send_times(self, member: tuple[int, int], packet: int | None = None) -> np.ndarray:
        """When ``member`` sent what it was seen to send (up to packet ``packet``), in packet order."""
        pairs = self._own_sends(member)
        if self.bulk is not None:
            pairs = np.concatenate([pairs, self.bulk.sends(member)])
            pairs = pairs[np.argsort(pairs[:, 0], kind="stable")]
        return pairs[:, 1] if packet is None else pairs[pairs[:, 0] <= packet, 1]

    def _down_since(self, member: tuple[int, int], packet: int) -> int | None:
        """When ``member`` went down last, as seen up to packet ``packet``: a silence of more than
        `RESTART_SILENCE_NS` in what it sent means it went down at most a heartbeat interval after
        the last thing it sent before the silence (None: no such silence)."""
        times = self._send_times(member, packet)
        if len(times) < 2:
            return None
        latest = np.maximum.accumulate(times)[:-1]  # the last send so far, before each send
        silent = np.flatnonzero((times[1:] > latest) & (times[1:] - latest > RESTART_SILENCE_NS))
        return int(latest[silent[-1]]) + HEARTBEAT_INTERVAL_NS if len(silent) else None

    def _activity(self, member: tuple[int, int]) -> list[tuple[int, int]]:
        """``member``'s spans of activity in its capture: from its first send, split where the next send
        comes more than `RESTART_SILENCE_NS` after the latest one so far."""
        spans = self._spans.get(member)
        if spans is not None:
            return spans
        if self.bulk is not None:  # the same spans, from the stretches of what it decoded in bulk
            spans = self.bulk.activity(member, self._own_sends(member))
            if spans is not None:
                return spans
        times = self._send_times(member)
        if not len(times):
            return []
        latest = np.maximum.accumulate(times)
        again = np.flatnonzero(times[1:] - latest[:-1] > RESTART_SILENCE_NS) + 1
        starts = [int(times[0]), *times[again].tolist()]
        ends = [*latest[again - 1].tolist(), int(latest[-1])]
        return list(zip(starts, ends, strict=True))

    def _on_setup(self, datagram: Datagram, frame: SetupFrame, packet: int, capture: int) -> None:
        stream = self._stream(datagram, frame.session_id, frame.stream_id, capture)
        if stream.reassembler is None:
            return
        try:
            if stream.awaiting_setup or not (stream.seen_data or self._answered(stream, datagram, frame, packet, capture)):
                # The receiver's image starts here (Aeron's join position): a new image after a restart
                # starts over, and frames before the SETUP's position are not delivered to it.  Once the
                # receiver has answered, its image exists: a repeated SETUP does not move it.
                shift = position_bits_to_shift(frame.term_length)
                if stream.awaiting_setup:
                    stream.reassembler = Reassembler()
                    stream.arrivals.clear()
                    stream.awaiting_setup = stream.eos_seen = stream.answered = False
                    stream.answers_from = packet
                    self.notes.append(f"{self._describe_stream(self._key_of(datagram, frame, capture))}: the"
                                      f" receiver asked for a SETUP (no image: it restarted?); a new image"
                                      f" starts at packet {packet}")
                if stream.join is None or not stream.seen_data:
                    join = compute_position(frame.active_term_id, frame.term_offset, shift, frame.initial_term_id)
                    stream.join = (join, shift, frame.initial_term_id)
            stream.reassembler.on_setup(frame)
        except ValueError as error:
            self._problem("corrupt frame", f"SETUP for session {frame.session_id}: {error}", capture, packet)

    def _answered(self, stream: _Stream, datagram: Datagram, frame: SetupFrame, packet: int, capture: int) -> bool:
        """Has the receiver answered the stream's current image with a regular status message before
        ``packet``?  (Decoded in bulk, those status messages were not fed: `bulk` knows them.)"""
        if stream.answered:
            return True
        # (Nothing comes after ``answers_from`` and before ``packet`` when the image began with this SETUP.)
        return self.bulk is not None and stream.answers_from < packet and self.bulk.answered(
            self._key_of(datagram, frame, capture), stream.answers_from, packet)

    @staticmethod
    def _key_of(datagram: Datagram, frame: SetupFrame, capture: int) -> tuple:
        return (capture, datagram.src_ip, datagram.src_port, datagram.dst_ip, datagram.dst_port, frame.session_id,
                frame.stream_id)

    def _on_term_frame(self, datagram: Datagram, frame: DataFrame | PadFrame, packet: int, capture: int,
                       out: list[Keyed]) -> None:
        self.frames["DATA" if type(frame) is DataFrame else "PAD"] += 1
        # `_stream`'s lookup, inlined (a known stream is the rule); `_stream` makes new ones.
        stream = self._streams.get((capture, datagram.src_ip, datagram.src_port, datagram.dst_ip,
                                    datagram.dst_port, frame.session_id, frame.stream_id))
        if stream is None:
            stream = self._stream(datagram, frame.session_id, frame.stream_id, capture)
        if stream.reassembler is None:
            self._problem("skipped stream", stream.skip, capture, packet)
            return
        sender = stream.publication.sender
        if sender is None:
            sender = self.members.member_at_ip(datagram.src_ip)
        ts = datagram.ts_ns
        if sender is not None:
            # `_transmitted`, inlined: this runs for every frame.
            sends = self._sends.get((capture, sender))
            if sends is None:
                sends = self._sends[(capture, sender)] = array("q")
            sends.append(packet)
            sends.append(ts)
        if stream.awaiting_setup:
            # Sent, so its sender's out event stands; not received: the receiver has no image.
            self.frames["DATA before a new image's SETUP"] += 1
        elif stream.join is not None:
            join, shift, initial = stream.join
            if compute_position(frame.term_id, frame.term_offset, shift, initial) < join:
                self.frames["DATA before the image's join position"] += 1
                return
            stream.join = None  # from here on the reassembler's own position rules
        stream.seen_data = True
        if type(frame) is DataFrame and frame.frame_length > DATA_HEADER_LENGTH:
            first = stream.publication.first_data_ts
            if first is None or ts < first:
                stream.publication.first_data_ts = ts
        try:
            items = stream.reassembler.on_frame(frame)
        except ValueError as error:
            self._problem("corrupt frame", f"session {frame.session_id} stream {frame.stream_id}: {error}",
                          capture, packet)
            return
        stream.last_ts = ts
        stream.last_packet = packet
        arrivals = stream.arrivals
        if frame.flags & BEGIN_FLAG and type(frame) is DataFrame and frame.frame_length:
            if (len(items) == 1 and type(items[0]) is Message and items[0].term_offset == frame.term_offset
                    and items[0].term_id == frame.term_id):
                # The common case: this frame delivers its own message at once.  Its arrival would be
                # recorded and taken back unused; only the bookkeeping's side effects are kept (the
                # key goes, and a full table still loses its oldest entry).
                if arrivals and arrivals.pop((frame.term_id, frame.term_offset), None) is None \
                        and len(arrivals) >= MAX_ARRIVALS:
                    del arrivals[next(iter(arrivals))]
                item = items[0]
                if stream.awaiting_setup:
                    stream.unreceived.add(item.start_position)
                self._on_item(stream, item, ts, packet, capture, out)
                items = ()
            else:
                arrivals.setdefault((frame.term_id, frame.term_offset), (ts, packet))
                if len(arrivals) > MAX_ARRIVALS:  # begin frames seen again after their message was delivered
                    del arrivals[next(iter(arrivals))]
        given_up = False
        for item in items:
            if stream.awaiting_setup and type(item) is Message:
                stream.unreceived.add(item.start_position)
            if type(item) is Message:
                # Delivered by this frame (which may fill a hole that held later messages back, as a
                # captured retransmission does): received now.  Released because a hole was given up
                # (the capture missed a frame the member got): received when its own frames came.
                arrival = arrivals.pop((item.term_id, item.term_offset), None)
                if given_up and arrival is not None:
                    self._on_item(stream, item, arrival[0], arrival[1], capture, out)
                    continue
            else:
                given_up = True
            self._on_item(stream, item, ts, packet, capture, out)
        if (stream.channel == "log" and not stream.eos_seen and stream.reassembler.end_of_stream
                and stream.receiver is not None):
            stream.eos_seen = True
            publication = stream.publication
            node = stream.receiver
            position = stream.end_position  # the end of the last message: where the stream ended
            self._order += 1
            key = (ts, capture, packet, self._order, 2)
            if self._keep(node, capture, ("eos", node, publication.key)):
                out.append((key, new_event(ts, node, "local", None, "local", "LogEndOfStream",
                                           {"logSessionId": frame.session_id, "logPosition": position}, None,
                                           {"packet": packet})))

    def _stream(self, datagram: Datagram, session_id: int, stream_id: int, capture: int) -> _Stream:
        key = (capture, datagram.src_ip, datagram.src_port, datagram.dst_ip, datagram.dst_port, session_id,
               stream_id)
        stream = self._streams.get(key)
        if stream is not None:
            return stream
        pub_key = (datagram.src_ip, datagram.src_port, session_id, stream_id)
        publication = self._publications.get(pub_key)
        if publication is None:
            publication = self._publications[pub_key] = _Publication(pub_key, datagram.ts_ns)
            self._by_session.setdefault((session_id, stream_id), []).append(publication)
        elif datagram.ts_ns < publication.first_ts:
            publication.first_ts = datagram.ts_ns  # another host's capture saw it earlier
        destination = (datagram.dst_ip, datagram.dst_port)
        channel, receiver, role, skip = self._classify(destination, stream_id)
        stream = self._streams[key] = _Stream(channel, receiver, role, publication, destination, skip)
        stream.made_at = stream.answers_from = self._now
        return stream

    def _classify(self, destination: tuple[str, int], stream_id: int):
        streams = self.streams
        owner = self.members.lookup(*destination)
        if stream_id in streams.archive:
            return None, None, None, f"archive traffic (stream {stream_id}, schema 101): not decoded"
        if owner is not None:
            member, role = owner
            if role == "consensus" and stream_id == streams.consensus:
                return "consensus", member, role, None
            if role in LOG_ROLES and stream_id == streams.log:
                return "log", member, role, None
            if role == "ingress" and stream_id == streams.ingress:
                return "ingress", member, role, None
            return (None, member, role,
                    f"stream {stream_id} to member {member}'s {role} endpoint {destination[0]}:{destination[1]}:"
                    " not decoded")
        if stream_id == streams.egress:
            return "egress", None, None, None
        return (None, None, None,
                f"stream {stream_id} to {destination[0]}:{destination[1]}, which is no member endpoint: not decoded")

    # --- messages -------------------------------------------------------------------------------
    def _on_item(self, stream: _Stream, item: Message | Gap, ts: int, packet: int, capture: int,
                 out: list[Keyed]) -> None:
        if type(item) is Gap:
            self._problem(
                "lost stream data",
                f"{stream.channel} stream session {item.session_id} to {stream.destination[0]}:"
                f"{stream.destination[1]}: bytes {item.start_position}..{item.end_position} lost ({item.reason})",
                capture,
                packet,
            )
            return
        stream.end_position = item.end_position
        payload = item.payload
        # Bytes decoded before passed every check below and decode the same way again.
        decoded = self._decoded.get(payload)
        if decoded is None:
            decoded = self._decode(stream, payload, capture, packet)
            if decoded is None:
                return
        message, fields, type_name = decoded
        channel = stream.channel
        # A tuple key, not an f-string per message: the names are only joined for the summary.
        self._message_counts[channel, type_name] += 1
        self._order += 1  # `_next_order`, inlined: this runs for every message
        info = (ts, capture, packet, self._order, stream, item, message, type_name)
        publication = stream.publication
        if channel == "consensus":
            attr = SENDER_FIELD.get(type_name)
            sender = getattr(message, attr) if attr is not None else None
            if type_name == "NewLeadershipTerm":
                self._leader_of[stream.receiver] = message.leader_member_id
                self._learn_log_session(message.log_session_id, message.leader_member_id, out)
                named = (message.leader_member_id, message.log_session_id)
                if named not in self._log_sessions_named or ts < self._log_sessions_named[named]:
                    self._log_sessions_named[named] = ts
            if sender is not None:
                if publication.sender is None:
                    self._identify(publication, sender, f"{type_name} names its sender", out)
                elif publication.sender != sender:
                    self._problem("sender mismatch", f"{type_name} names member {sender} as sender, but earlier"
                                  f" messages of the same publication came from member {publication.sender}",
                                  capture, packet)
                self._emit(info, sender, out, fields)
                return
        elif channel == "log":
            if type_name == "NewLeadershipTermEvent" and message.log_session_id == item.session_id:
                self._learn_log_session(message.log_session_id, message.leader_member_id, out)
        elif channel == "egress":
            if publication.sender is None:
                if type_name == "SessionEvent" and getattr(message.code, "name", "") == "OK":
                    self._identify(publication, message.leader_member_id, "SessionEvent OK comes from the leader",
                                   out)
                elif type_name == "NewLeaderEvent":
                    self._identify(publication, message.leader_member_id, "NewLeaderEvent comes from the leader",
                                   out)
        elif channel == "ingress":
            self._emit(info, None, out, fields)
            return
        if publication.sender is None:
            self._resolve(publication, stream, out)
        if publication.sender is None:
            leader = self._leader_of.get(stream.receiver) if channel == "log" else None
            publication.pending.append(info + (leader,))
            return
        self._emit(info, publication.sender, out, fields)

    def _decode(self, stream: _Stream, payload: bytes, capture: int, packet: int) -> tuple | None:
        """Check and SBE-decode a message not seen before; None (a problem noted) when it is skipped."""
        if len(payload) < 8:
            self._problem("corrupt message", f"a {len(payload)}-byte message, shorter than an SBE header",
                          capture, packet)
            return None
        _, template_id, schema_id, _ = _SBE_HEADER.unpack_from(payload, 0)
        if schema_id != SCHEMA_ID:
            self._problem("other schema", f"{stream.channel} message of schema {schema_id} (template {template_id}),"
                          f" not the cluster schema {SCHEMA_ID}: skipped", capture, packet)
            return None
        spec = MESSAGES_BY_TEMPLATE_ID.get(template_id)
        if spec is None:
            self._problem("unknown template", f"{stream.channel} message with unknown templateId {template_id}:"
                          " skipped", capture, packet)
            return None
        try:
            message = decode_cluster(payload).message
        except DecodeError as error:
            self._problem("corrupt message", f"{spec.name}: {error.expected}", capture, packet)
            return None
        # Heartbeats repeat byte for byte (CommitPosition, AppendPosition while idle): decode once.
        if len(self._decoded) >= MAX_DECODED:
            self._decoded.clear()
        decoded = self._decoded[payload] = (message, message.to_fields(), spec.name)
        return decoded

    def _identify(self, publication: _Publication, sender: int, how: str, out: list[Keyed]) -> None:
        publication.sender = sender
        publication.how = how
        if not how.startswith("session ids"):
            # Each (session id, sender) once: `_nearest_session` asks which senders are near, and a session
            # id seen on many streams (a member's publication to each of its peers) would be walked each time.
            pair = (publication.key[2] & 0xFFFF_FFFF, sender)
            at = bisect_left(self._numbered, pair)
            if at == len(self._numbered) or self._numbered[at] != pair:
                self._numbered.insert(at, pair)
        if publication.pending:
            pending, publication.pending = publication.pending, []
            for entry in pending:
                self._emit(entry[:8], sender, out)

    def _learn_log_session(self, log_session_id: int, leader: int, out: list[Keyed]) -> None:
        if self._log_sessions.get(log_session_id) == leader:
            return
        self._log_sessions[log_session_id] = leader
        for publication in self._by_session.get((log_session_id, self.streams.log), ()):
            if publication.sender is None:
                self._identify(publication, leader, "NewLeadershipTerm.logSessionId names its leader", out)

    def _resolve(self, publication: _Publication, stream: _Stream, out: list[Keyed] | None) -> None:
        """Find an unknown sender from the source IP, the log session or the session numbering."""
        src_ip, _, session_id, stream_id = publication.key
        member = self.members.member_at_ip(src_ip)
        if member is not None:
            self._identify(publication, member, f"the only member at {src_ip}", out or [])
            return
        if stream.channel == "log":
            leader = self._log_sessions.get(session_id)
            if leader is not None:
                self._identify(publication, leader, "NewLeadershipTerm.logSessionId names its leader", out or [])
                return
        member = self._nearest_session(session_id)
        if member is not None:
            self._identify(publication, member, "session ids numbered by the same media driver", out or [])
            self.notes.append(
                f"publication {src_ip}:{publication.key[1]} session {session_id} stream {stream_id} attributed to"
                f" member {member}: its session id is next to that member's other publications"
            )

    def _nearest_session(self, session_id: int) -> int | None:
        """The one member whose identified publications have session ids within `SESSION_WINDOW` of
        this one (wrapping around, as Aeron's int session ids do), else None."""
        numbered = self._numbered
        target = session_id & 0xFFFF_FFFF
        senders: set[int] = set()
        low, high = target - SESSION_WINDOW, target + SESSION_WINDOW
        for start, end in ((low, high), (low + (1 << 32), high + (1 << 32)), (low - (1 << 32), high - (1 << 32))):
            if end < 0 or start > 0xFFFF_FFFF:
                continue
            at = bisect_left(numbered, (start, -1 << 62))
            while at < len(numbered) and numbered[at][0] <= end:
                senders.add(numbered[at][1])
                at += 1
        if len(senders) == 1:
            return next(iter(senders))
        return None

    def _settle_at_end(self, publication: _Publication, out: list[Keyed]) -> None:
        pending, publication.pending = publication.pending, []
        stream = pending[0][4]
        self._resolve(publication, stream, None)
        for entry in pending:
            info, leader = entry[:8], entry[8]
            sender = publication.sender
            if sender is None and leader is not None and info[4].channel == "log":
                sender = leader
                self.notes.append(
                    f"log message at packet {info[2]} attributed to member {leader}, the receiver's leader"
                    " per its last NewLeadershipTerm"
                )
            if sender is None:
                stream = info[4]
                if stream.channel == "egress":
                    self._problem("unattributed", f"egress {info[7]} from an unidentified member: skipped",
                                  info[1], info[2])
                    continue
                self._problem("unattributed", f"{stream.channel} {info[7]} to member {stream.receiver}: sender"
                              " unknown, kept with peer null", info[1], info[2])
            self._emit(info, sender, out)

    def _emit(self, info: tuple, sender: int | None, out: list[Keyed], fields: dict | None = None) -> None:
        """A decoded message's events; ``fields`` is its entry in the decoded cache when the caller has it."""
        ts, capture, packet, order, stream, item, message, type_name = info
        channel = stream.channel
        receiver = stream.receiver
        start_position = item.start_position
        payload = item.payload
        if self.observer is not None:
            self.observer(DecodedMessage(ts, capture, packet, channel, sender, receiver, item.session_id,
                                         item.stream_id, start_position, item.end_position, type_name,
                                         message, payload))
        if fields is None:  # a message that waited for its sender: the cache may have moved on
            cached = self._decoded.get(payload)
            # Events carrying the same bytes share one fields dict (nothing mutates an event's fields);
            # the replay table then encodes each distinct dict once.
            fields = cached[1] if cached is not None else message.to_fields()
        received = True
        if stream.unreceived and start_position in stream.unreceived:
            stream.unreceived.discard(start_position)
            received = False
            self._problem("not received", f"{type_name} to member {receiver} while it had no image (it had asked"
                          " for a SETUP): not received", capture, packet)
        # One capture (no `local_members`): every event is kept, so skip `_keep` and the identities it
        # would be asked about (most imports are of one capture).
        several = self.local_members is not None
        identity = (stream.publication.key, stream.destination, start_position) if several else None
        keep_out = sender is not None and (not several
                                           or self._keep(sender, capture, ("out", sender, identity)))
        if channel == "consensus":
            if keep_out:
                out.append(((ts, capture, packet, order, 0), new_event(
                    ts, sender, "out", receiver, channel, type_name, fields, payload, {"packet": packet})))
            if received and (not several or self._keep(receiver, capture, ("in", receiver, identity))):
                stream.held.append((self._now, ((ts, capture, packet, order, 1), new_event(
                    ts, receiver, "in", sender, channel, type_name, fields, payload, {"packet": packet}))))
        elif channel == "log":
            # The leader's own appends (and its archive's catch-up replays): each frame it sent to one
            # follower's log or catch-up endpoint is an ``out`` event at the leader, with the position.
            if keep_out:
                out.append(((ts, capture, packet, order, 0), new_event(
                    ts, sender, "out", receiver, channel, type_name, fields, payload,
                    {"logPosition": item.end_position, "packet": packet})))
            if received and (not several or self._keep(receiver, capture, ("in", receiver, identity))):
                stream.held.append((self._now, ((ts, capture, packet, order, 1), new_event(
                    ts, receiver, "in", sender, channel, type_name, fields, payload,
                    {"logPosition": item.end_position, "packet": packet}))))
        elif channel == "ingress":
            if received and (not several or self._keep(receiver, capture, ("in", receiver, identity))):
                stream.held.append((self._now, ((ts, capture, packet, order, 1), new_event(
                    ts, receiver, "in", None, channel, type_name, fields, payload, {"packet": packet}))))
        elif channel == "egress" and keep_out:
            out.append(((ts, capture, packet, order, 0), new_event(
                ts, sender, "out", None, channel, type_name, fields, payload, {"packet": packet})))

    def _keep(self, node: int, capture: int, identity: tuple) -> bool:
        """Whether this capture is where ``node``'s event should come from (several captures)."""
        if self.local_members is None:
            return True
        if node not in self.local_members.get(capture, ()) and node in self._local_anywhere:
            return False
        if identity in self._emitted:  # already taken from another capture (of the same host, or any)
            return False
        self._emitted.add(identity)
        return True

    # --- bookkeeping ----------------------------------------------------------------------------
    def _problem(self, category: str, detail: str, capture: int, packet: int | None,
                 offset: int | None = None) -> None:
        self.skipped[category] += 1
        if self.skipped[category] <= MAX_EXAMPLES:
            self.problems.append(Problem(category, detail, self.sources.get(capture), packet, offset))

    def _describe_stream(self, key: tuple) -> str:
        capture, src_ip, src_port, dst_ip, dst_port, session_id, stream_id = key
        source = self.sources.get(capture)
        prefix = f"{source}: " if source else ""
        return f"{prefix}stream {stream_id} session {session_id} {src_ip}:{src_port} → {dst_ip}:{dst_port}"


_FRAME_NAMES = {
    "StatusMessage": "SM",
    "Nak": "NAK",
    "Rttm": "RTTM",
    "ErrorFrame": "ERR",
    "RspSetup": "RSP_SETUP",
    "ResolutionFrame": "RES",
    "UnknownFrame": "unknown frame type",
}


def _status_rows(seen: array | np.ndarray) -> np.ndarray:
    """`DatagramDecoder._status`'s record of one stream as rows of (packet number, time, flags)."""
    if isinstance(seen, np.ndarray):
        return seen
    return np.frombuffer(seen, dtype=np.int64).reshape(-1, 3) if seen else np.zeros((0, 3), np.int64)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching (within `RESTART_SILENCE_NS`) spans as one, in time order."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start - out[-1][1] <= RESTART_SILENCE_NS:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def survey_datagrams(datagrams, *, streams: Streams = DEFAULT_STREAMS) -> TrafficSurvey:
    """A first pass for `members.infer_members`: who sends consensus messages to which endpoint.

    ``datagrams`` yields `Datagram`s.  Only consensus-stream messages are reassembled and decoded.
    """
    survey = TrafficSurvey()
    reassemblers: dict[tuple, Reassembler] = {}
    for datagram in datagrams:
        try:
            frames = decode_datagram(datagram.payload)
        except DecodeError:
            continue
        destination = (datagram.dst_ip, datagram.dst_port)
        for frame in frames:
            kind = type(frame)
            if kind is not DataFrame and kind is not PadFrame and kind is not SetupFrame:
                continue
            if frame.stream_id == streams.log:
                survey.log_destinations.add(destination)
                continue
            if frame.stream_id == streams.ingress:
                survey.ingress_destinations.add(destination)
                continue
            if frame.stream_id != streams.consensus:
                continue
            key = (datagram.src_ip, datagram.src_port, destination, frame.session_id)
            reassembler = reassemblers.get(key)
            if reassembler is None:
                reassembler = reassemblers[key] = Reassembler()
            try:
                if kind is SetupFrame:
                    reassembler.on_setup(frame)
                    continue
                items = reassembler.on_frame(frame)
            except ValueError:
                continue
            for item in items:
                if type(item) is not Message:
                    continue
                try:
                    decoded = decode_cluster(item.payload)
                except DecodeError:
                    continue
                survey.on_consensus(datagram.src_ip, destination, decoded.message.BLOCK.name, decoded.message)
    return survey


@dataclass(slots=True)
class DecodeSummary:
    """Counts for the convert summary."""

    datagrams: int = 0
    frames: Mapping[str, int] = field(default_factory=dict)
    messages: Mapping[str, int] = field(default_factory=dict)
    skipped: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, decoder: DatagramDecoder) -> DecodeSummary:
        return cls(
            datagrams=decoder.datagrams,
            frames=dict(sorted(decoder.frames.items())),
            messages=dict(sorted(decoder.messages.items())),
            skipped=dict(sorted(decoder.skipped.items())),
        )
