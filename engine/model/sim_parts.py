"""Simulated parts outside the consensus module: the local log recording, images, replays, replication.

The real consensus module leans on the media driver (publications, subscriptions, images), the
archive (the log recording, local replays, replication from the leader's archive) and the
clustered service (ServiceAck).  The engine replaces them with small deterministic components:

* They succeed at once by default: an image is there as soon as it is looked for (with the join
  position the election expects), a local replay is done in its first `do_work`, a replication
  reaches its stop position when it starts, services acknowledge at once.
* When the capture has evidence, it drives them instead: log frames received (``in`` events on
  channel ``log``) extend the local recording; a ``RecordingSignal`` local event moves a replication
  (after the first signal a node has seen, replications wait for REPLICATE_END and STOP signals);
  a ``LogEndOfStream`` local event closes the log image; ``PublicationStatus`` local events say when
  a consensus publication is connected and where its publisher limit stands (`SimPublication`); the
  start's recorded waits say how long the log publication, the log image, the leader's join, an
  election's log replay and a snapshot took (`engine.model.inputs.MemberStart`).

`LogStore` is the content of the local log recording as far as it is known: a contiguous run of
frames, each kept as (end position, message).  Stretches whose content is unknown (a replication
without evidence, or a log given only by its length in `MemberStart`) are a single entry whose
message is None.  Messages are immutable values, so copying a store copies its open chunk of
frames and shares the frozen ones (`LogStore`), never the messages.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from typing import Any

from engine.model.exceptions import ClusterException

NULL_POSITION = -1

FRAME_ALIGNMENT = 32
DATA_HEADER_LENGTH = 32
#: NewLeadershipTermEvent: 8-byte SBE header + 48-byte block, in a 32-byte DATA frame, aligned: 96.
NEW_LEADERSHIP_TERM_EVENT_FRAME_LENGTH = 96


def align(value: int, alignment: int = FRAME_ALIGNMENT) -> int:
    return (value + alignment - 1) & ~(alignment - 1)


def framed_length(message_length: int) -> int:
    """How far one unfragmented message moves the log position (Aeron's DATA frame framing)."""
    return align(DATA_HEADER_LENGTH + message_length)


#: Frames per frozen chunk of a `LogStore`, and chunks per frozen group of chunks.
LOG_CHUNK = 64
LOG_GROUP = 64


class LogStore:
    """The local log recording: frames from ``base`` to ``end``, each (end position, message | None).

    Frames are kept in chunks of `LOG_CHUNK`, chunks in groups of `LOG_GROUP`: a full chunk or group
    is frozen (tuples, and a chunk's ends an ``array('q')``: 8 bytes a frame, not an int object; never
    changed once frozen) and shared by every copy of the store, so copying a store
    costs the open chunk and the open group's directory (under `LOG_CHUNK` + `LOG_GROUP` pointers)
    however long its log.  A debugger that checkpoints a replay every few hundred events therefore
    stays linear in the log's length, not quadratic.

    Layout: ``_groups`` (frozen groups, each ``(lasts, ends, messages)``: per chunk its last end, its
    ends, its messages) with ``_group_last`` (each group's last end); ``_chunks`` (the open group's
    frozen chunks, each ``(ends, messages)``) with ``_chunk_last``; ``_ends`` / ``_messages`` (the open
    chunk, the only mutable part)."""

    __slots__ = ("base", "_groups", "_group_last", "_chunks", "_chunk_last", "_ends", "_messages")

    def __init__(self, base: int = 0) -> None:
        self.base = base
        self._groups: tuple[tuple[tuple[int, ...], tuple[array, ...], tuple[tuple[Any, ...], ...]], ...] = ()
        self._group_last: tuple[int, ...] = ()
        self._chunks: tuple[tuple[array, tuple[Any, ...]], ...] = ()
        self._chunk_last: tuple[int, ...] = ()
        self._ends: list[int] = []
        self._messages: list[Any] = []

    @property
    def end(self) -> int:
        if self._ends:
            return self._ends[-1]
        if self._chunk_last:
            return self._chunk_last[-1]
        return self._group_last[-1] if self._group_last else self.base

    def append(self, end: int, message: Any) -> None:
        if end > self.end:
            self._push(end, message)

    def extend_unknown(self, end: int) -> None:
        """The recording grew to ``end`` with content we do not know."""
        if end > self.end:
            self._push(end, None)

    def _push(self, end: int, message: Any) -> None:
        self._ends.append(end)
        self._messages.append(message)
        if len(self._ends) < LOG_CHUNK:
            return
        try:
            ends: Any = array("q", self._ends)
        except OverflowError:  # not a 64-bit position (a hand-made input): kept as it is
            ends = tuple(self._ends)
        self._chunks += ((ends, tuple(self._messages)),)
        self._chunk_last += (end,)
        self._ends = []
        self._messages = []
        if len(self._chunks) == LOG_GROUP:
            chunks = self._chunks
            self._groups += ((self._chunk_last, tuple(c[0] for c in chunks), tuple(c[1] for c in chunks)),)
            self._group_last += (end,)
            self._chunks = ()
            self._chunk_last = ()

    # -- frames by index: group, chunk, offset ----------------------------------------------------------

    def __len__(self) -> int:
        return (len(self._groups) * LOG_GROUP + len(self._chunks)) * LOG_CHUNK + len(self._ends)

    def _index_after(self, position: int) -> int:
        """The index of the first frame ending after ``position`` (bisect_right over every end)."""
        group = bisect_right(self._group_last, position)
        if group < len(self._groups):
            lasts, ends, _ = self._groups[group]
            chunk = bisect_right(lasts, position)
            return (group * LOG_GROUP + chunk) * LOG_CHUNK + bisect_right(ends[chunk], position)
        base = len(self._groups) * LOG_GROUP
        chunk = bisect_right(self._chunk_last, position)
        if chunk < len(self._chunks):
            return (base + chunk) * LOG_CHUNK + bisect_right(self._chunks[chunk][0], position)
        return (base + len(self._chunks)) * LOG_CHUNK + bisect_right(self._ends, position)

    def _frame(self, index: int) -> tuple[int, Any]:
        chunk, offset = divmod(index, LOG_CHUNK)
        group, within = divmod(chunk, LOG_GROUP)
        if group < len(self._groups):
            _, ends, messages = self._groups[group]
            return ends[within][offset], messages[within][offset]
        if within < len(self._chunks):
            ends, messages = self._chunks[within]
            return ends[offset], messages[offset]
        return self._ends[offset], self._messages[offset]

    def end_at_or_before(self, position: int) -> int:
        """Where the last frame ending at or before ``position`` ends (``base`` when none does)."""
        return self._end_of(self._index_after(position) - 1)

    def _end_of(self, index: int) -> int:
        """Where frame ``index`` ends; ``base`` for index -1."""
        return self._frame(index)[0] if index >= 0 else self.base

    def truncate(self, position: int) -> None:
        """Keep what ends at or before ``position``; a frame cut in two becomes unknown content."""
        if position >= self.end:
            return
        if position <= self.base:
            self.base = position
            self._groups, self._group_last, self._chunks, self._chunk_last = (), (), (), ()
            self._ends, self._messages = [], []
            return
        index = self._index_after(position)
        chunk, offset = divmod(index, LOG_CHUNK)
        group, within = divmod(chunk, LOG_GROUP)
        if group < len(self._groups):  # the cut is in a frozen group: it becomes the open one
            lasts, ends, messages = self._groups[group]
            self._groups = self._groups[:group]
            self._group_last = self._group_last[:group]
            self._chunks = tuple(zip(ends, messages, strict=True))
            self._chunk_last = lasts
        if within < len(self._chunks):  # the cut is in a frozen chunk: it becomes the open one
            ends, messages = self._chunks[within]
            self._ends, self._messages = list(ends[:offset]), list(messages[:offset])
            self._chunks = self._chunks[:within]
            self._chunk_last = self._chunk_last[:within]
        else:
            del self._ends[offset:], self._messages[offset:]
        if self.end < position:
            self.extend_unknown(position)

    def set_end(self, position: int) -> None:
        if position > self.end:
            self.extend_unknown(position)
        else:
            self.truncate(position)

    def after(self, position: int, limit: int | None = None) -> list[tuple[int, int, Any]]:
        """(start, end, message) of the frames ending after ``position`` (and at or before ``limit``)."""
        index = self._index_after(position)
        count = len(self)
        out = []
        start = self._end_of(index - 1)
        while index < count:
            end, message = self._frame(index)
            if limit is not None and end > limit:
                break
            out.append((start, end, message))
            start = end
            index += 1
        return out

    def overlapping(self, start: int, stop: int) -> list[tuple[int, int, Any]]:
        """(start, end, message) of the frames that overlap (start, stop]."""
        index = self._index_after(start)
        count = len(self)
        out = []
        frame_start = self._end_of(index - 1)
        while index < count:
            if frame_start >= stop:
                break
            end, message = self._frame(index)
            out.append((frame_start, end, message))
            frame_start = end
            index += 1
        return out

    def __deepcopy__(self, memo: dict) -> LogStore:
        other = LogStore(self.base)
        # frozen groups and chunks (and their directories, tuples too) are shared; the open chunk is copied
        other._groups, other._group_last = self._groups, self._group_last
        other._chunks, other._chunk_last = self._chunks, self._chunk_last
        other._ends = list(self._ends)
        other._messages = list(self._messages)
        return other


#: The consensus channel's term length (Aeron Cluster's default consensus channel: ``term-length=64k``).
CONSENSUS_TERM_LENGTH = 64 * 1024
#: The publication's term window: the publisher limit runs this far ahead of the sender position.
CONSENSUS_TERM_WINDOW = CONSENSUS_TERM_LENGTH // 2
#: `ConsensusPublisher.SEND_ATTEMPTS`: a claim that meets the end of a term pads it and tries again.
SEND_ATTEMPTS = 3


class SimPublication:
    """One consensus publication to a peer, as `ExclusivePublication.tryClaim` sees it.

    Only with evidence (``PublicationStatus`` inputs; without it the agent has none of these and every
    offer succeeds).  An offer succeeds while the publication is connected and its position is below
    the publisher limit (the sender position the evidence gives, plus the term window; none while the
    sender has sent everything); the position moves by each accepted message's framed length, and a
    message that does not fit the rest of the term pads it first (Aeron's appender returns
    ADMIN_ACTION and the publisher tries again, up to `SEND_ATTEMPTS` times).  A new publication
    starts at position 0, not connected: Aeron refuses offers until the first status message.
    """

    __slots__ = ("connected", "position", "limit", "stalled_at")

    def __init__(self) -> None:
        self.connected = False
        self.position = 0
        self.limit: int | None = None
        #: Where the sender stopped at its receiver's flow-control limit (`PublicationStatus.sender_stalled`):
        #: this publication's position when the stall began.
        self.stalled_at: int | None = None

    def on_status(self, connected: bool, sender_position: int | None, sender_stalled: bool = False) -> None:
        self.connected = connected
        if sender_stalled:
            if self.stalled_at is None:
                self.stalled_at = self.position
            sender_position = self.stalled_at
        else:
            self.stalled_at = None
        self.limit = None if sender_position is None else sender_position + CONSENSUS_TERM_WINDOW

    def offer(self, message_length: int) -> bool:
        """Take a message of ``message_length`` bytes (False: refused); `position` is then after it."""
        if not self.connected:
            return False
        length = framed_length(message_length)
        for _ in range(SEND_ATTEMPTS):
            position = self.position
            if self.limit is not None and position >= self.limit:
                return False  # BACK_PRESSURED
            term_offset = position & (CONSENSUS_TERM_LENGTH - 1)
            if term_offset + length > CONSENSUS_TERM_LENGTH:
                self.position = position + CONSENSUS_TERM_LENGTH - term_offset  # padded: the next term
                continue
            self.position = position + length
            return True
        return False


class SimImage:
    """A log image as the consensus module sees it: where it joined, and whether it has closed."""

    __slots__ = ("session_id", "join_position", "is_closed", "is_end_of_stream")

    def __init__(self, session_id: int, join_position: int) -> None:
        self.session_id = session_id
        self.join_position = join_position
        self.is_closed = False
        self.is_end_of_stream = False


class SimLogReplay:
    """`LogReplay`: the local archive replays [from, to) of the log into the services.

    The first `do_work` replays everything (immediate success); `events` are the
    NewLeadershipTermEvents met on the way, handed to the agent as Aeron's LogAdapter would.
    """

    __slots__ = ("agent", "start_position", "stop_position", "done", "done_at_ns")

    def __init__(self, agent: Any, start_position: int, stop_position: int) -> None:
        self.agent = agent
        self.start_position = start_position
        self.stop_position = stop_position
        self.done = False
        #: With a recorded duration, the replay is done then, not in its first `do_work`.
        self.done_at_ns: int | None = None

    def do_work(self) -> int:
        if self.done or (self.done_at_ns is not None and self.agent.output_ts < self.done_at_ns):
            return 0
        self.agent.replay_local_log(self.start_position, self.stop_position)
        self.done = True
        return 1

    def is_done(self) -> bool:
        return self.done

    def close(self) -> None:
        pass


class SimReplication:
    """`RecordingReplication`: copy the leader's log recording up to ``stop_position``.

    Without archive evidence it completes when created.  With evidence (the node has seen a
    RecordingSignal) it follows the signals: EXTEND/SYNC/STOP positions move it, REPLICATE_END and
    STOP complete it, DELETE fails it; and, as Aeron's, it fails after 10 s without progress.
    """

    __slots__ = (
        "recording_id",
        "stop_position",
        "position",
        "has_replication_ended",
        "has_stopped",
        "has_synced",
        "evidence_driven",
        "progress_timeout_ns",
        "progress_check_interval_ns",
        "progress_deadline_ns",
        "progress_check_deadline_ns",
        "last_position",
        "src_archive_channel",
        "error",
    )

    def __init__(
        self,
        *,
        recording_id: int,
        start_position: int,
        stop_position: int,
        evidence_driven: bool,
        now_ns: int,
        progress_timeout_ns: int,
        progress_check_interval_ns: int,
        src_archive_channel: str,
    ) -> None:
        self.recording_id = recording_id
        self.stop_position = stop_position
        self.evidence_driven = evidence_driven
        self.progress_timeout_ns = progress_timeout_ns
        self.progress_check_interval_ns = progress_check_interval_ns
        self.progress_deadline_ns = now_ns + progress_timeout_ns
        self.progress_check_deadline_ns = now_ns + progress_check_interval_ns
        self.src_archive_channel = src_archive_channel
        self.has_synced = False
        self.error: str | None = None
        if evidence_driven:
            # Aeron's RecordingReplication knows no position until the archive says one (NULL_POSITION):
            # the follower publishes none before the first signal (i_restart_all_one_member_behind:
            # member 1's first AppendPosition of its replication came with the EXTEND, 1.17 s in).
            self.position = NULL_POSITION
            self.has_replication_ended = False
            self.has_stopped = False
        else:
            self.position = stop_position
            self.has_replication_ended = True
            self.has_stopped = True
            self.has_synced = True
        self.last_position = self.position

    def on_signal(self, correlation_id: int, recording_id: int, position: int, signal: str) -> None:
        if signal == "DELETE":
            self.error = f"recording was deleted during replication: recordingId={recording_id}"
            return
        if recording_id is not None and recording_id >= 0:
            self.recording_id = recording_id
        if signal == "SYNC":
            self.has_synced = True
        elif signal == "REPLICATE_END":
            self.has_replication_ended = True
            return
        elif signal == "STOP":
            self.has_stopped = True
        # STOP carries the final position (§3.8); EXTEND and SYNC stand in for the recording counter
        # Aeron polls, which the capture does not have.
        if position is not None and position > self.position:
            self.position = position

    def poll(self, now_ns: int) -> None:
        """Aeron checks progress every interval and gives up after the progress timeout."""
        if self.error is not None:
            raise ClusterException(self.error)
        if not self.evidence_driven or self.has_replication_ended and self.has_stopped:
            return
        if now_ns >= self.progress_check_deadline_ns:
            self.progress_check_deadline_ns = now_ns + self.progress_check_interval_ns
            if self.position > self.last_position:
                self.last_position = self.position
                self.progress_deadline_ns = now_ns + self.progress_timeout_ns
            elif now_ns >= self.progress_deadline_ns:
                if self.position >= self.stop_position:
                    raise ClusterException("log replication failed to stop")
                raise ClusterException("log replication has not progressed")

    def next_deadline_ns(self) -> int | None:
        if not self.evidence_driven or self.has_replication_ended and self.has_stopped:
            return None
        return self.progress_check_deadline_ns

    def close(self) -> None:
        pass
