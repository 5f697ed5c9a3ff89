"""Rebuild one Aeron stream's messages from its DATA frames, with their stream positions.

A `Reassembler` serves one (source, session_id, stream_id) stream, as seen in one capture.  It is
fed that stream's SETUP (when seen) and its DATA/PAD frames in capture order, and returns what
became complete: `Message`s in stream order and `Gap`s where the stream could not be read.

* **Positions.**  ``position = ((term_id - initial_term_id) << log2(term_length)) + term_offset``
  (`formats.udp.compute_position`).  SETUP gives the initial term id and term length.  Without a
  SETUP (the capture began after the stream did) the first frame's term id is taken as the initial
  term id and the term length is the one given, else Aeron's default 16 MiB; every such assumption
  is written to ``notes`` and the messages say ``inferred=True``.  A PAD frame shows where a term
  really ends and corrects an assumed term length; a SETUP that arrives later moves everything
  still held onto its basis.
* **Start.**  A SETUP seen before any data says where the stream starts (its active term id and
  term offset), as it does for Aeron's receiver; otherwise the first frame or heartbeat does.
* **Order and duplicates.**  Like Aeron's receiver we keep a rebuild position: the end of what is
  contiguous.  A frame at it is delivered at once; a frame beyond it waits; a frame before it, or
  one already waiting, is a retransmission or a duplicate and is counted and dropped, so no message
  is ever returned twice.
* **Gaps.**  When frames wait more than ``reorder_window`` bytes beyond a hole (default: one term),
  or at `finish`, the hole is given up: one `Gap` covers every byte that could not become a message
  (a message begun before the hole, the missing bytes, and fragments after it up to the next
  BEGIN).  Nothing is glued across a gap.
* **Fragments.**  Payloads from a BEGIN frame to an END frame are concatenated (Aeron's
  FragmentAssembler); B|E frames are whole messages.  ``Message.end_position`` is Aeron's
  ``Header.position()`` of the last fragment, which is what Aeron Cluster calls a log message's
  position.

Sans-I/O and deterministic: no clocks, no threads; imports only `formats`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from formats.udp import (
    BEGIN_FLAG,
    END_FLAG,
    EOS_FLAG,
    FRAME_ALIGNMENT,
    TERM_MAX_LENGTH,
    TERM_MIN_LENGTH,
    UNFRAGMENTED,
    DataFrame,
    PadFrame,
    SetupFrame,
    compute_position,
    compute_term_id_from_position,
    compute_term_offset_from_position,
    position_bits_to_shift,
)

#: `aeron.term.buffer.length`'s default, assumed when neither a SETUP nor the caller says otherwise.
DEFAULT_TERM_LENGTH = 16 * 1024 * 1024


class Message(NamedTuple):
    """One whole Aeron message of the stream.  A NamedTuple, as `formats.udp.DataFrame` is: one per
    message of a capture, built several times faster than a frozen dataclass, and as immutable."""

    payload: bytes
    start_position: int  #: stream position of the message's first frame header
    end_position: int  #: position after its last frame, aligned (Aeron's Header.position())
    session_id: int
    stream_id: int
    term_id: int  #: of the first fragment
    term_offset: int  #: of the first fragment
    fragments: int
    inferred: bool = False  #: positions rest on an assumed initial term id or term length


@dataclass(frozen=True, slots=True, kw_only=True)
class Gap:
    """Stream bytes [start_position, end_position) that did not become messages, and why."""

    start_position: int
    end_position: int
    session_id: int
    stream_id: int
    reason: str


_make_message = Message._make  # every field at once, in order: no argument parsing (the hot path)


class Reassembler:
    """Messages of one stream from its frames.  Feed `on_setup` / `on_frame`, then call `finish`."""

    def __init__(
        self,
        *,
        session_id: int | None = None,
        stream_id: int | None = None,
        initial_term_id: int | None = None,
        term_length: int | None = None,
        reorder_window: int | None = None,
    ) -> None:
        self.session_id = session_id
        self.stream_id = stream_id
        self.notes: list[str] = []
        self.duplicate_frames = 0
        self.end_of_stream = False
        self._reorder_window = reorder_window
        self._initial_term_id = initial_term_id
        self._term_length = term_length
        self._shift = position_bits_to_shift(term_length) if term_length is not None else None
        self._initial_known = initial_term_id is not None
        self._length_known = term_length is not None
        self._next: int | None = None  # rebuild position: everything before it has been handled
        self._highest = 0  # highest position the publisher has shown (frames and heartbeats)
        self._pending: dict[int, DataFrame | PadFrame] = {}
        self._parts: list[bytes] = []
        self._assembly_start: int | None = None
        self._assembly_first: DataFrame | None = None
        self._gap_start: int | None = None
        self._gap_reason = ""

    # --- inputs ---------------------------------------------------------------------------------
    @property
    def inferred(self) -> bool:
        """True while positions rest on an assumption rather than a SETUP or the caller's word."""
        return not (self._initial_known and self._length_known)

    def on_setup(self, setup: SetupFrame) -> None:
        """Take the stream's initial term id and term length from its SETUP frame.

        A SETUP whose term length Aeron could not have sent is noted and otherwise ignored.
        """
        self._check_stream(setup.session_id, setup.stream_id)
        length = setup.term_length
        if length & (length - 1) or not TERM_MIN_LENGTH <= length <= TERM_MAX_LENGTH:
            self.notes.append(
                f"ignored a SETUP with term length {length} (not a power of two in 64 KiB..1 GiB)"
            )
            return
        if self._shift is None:
            self._initial_term_id, self._term_length = setup.initial_term_id, length
            self._shift = position_bits_to_shift(length)
        elif (setup.initial_term_id, length) != (self._initial_term_id, self._term_length):
            self.notes.append(
                f"SETUP gives initial term id {setup.initial_term_id} and term length {length}; positions move"
                f" from the {'given' if not self.inferred else 'assumed'} {self._initial_term_id} and"
                f" {self._term_length}"
            )
            self._rebase(setup.initial_term_id, length)
        self._initial_known = self._length_known = True
        if self._next is None:
            # Like a receiver creating its image: the stream starts where the SETUP says it is, so
            # frames that overtake each other at the very start are still put in order.
            self._next = compute_position(
                setup.active_term_id, setup.term_offset, self._shift, self._initial_term_id
            )
            self._highest = self._next

    def on_frame(self, frame: DataFrame | PadFrame) -> list[Message | Gap]:
        """Take one DATA or PAD frame (heartbeats included); return what became complete."""
        if frame.session_id != self.session_id or frame.stream_id != self.stream_id:
            self._check_stream(frame.session_id, frame.stream_id)
        if self._shift is None:
            self._assume_basis(frame)
        is_pad = type(frame) is PadFrame
        if not is_pad and frame.frame_length == 0:
            return self._on_heartbeat(frame)
        if not self._length_known:
            self._maybe_correct_term_length(frame, is_pad)
        # compute_position, inlined: this runs for every frame of a capture.
        position = (
            (((frame.term_id - self._initial_term_id + 0x8000_0000) & 0xFFFF_FFFF) - 0x8000_0000) << self._shift
        ) + frame.term_offset
        length = (
            frame.frame_length if is_pad else (frame.frame_length + FRAME_ALIGNMENT - 1) & -FRAME_ALIGNMENT
        )
        if self._next is None:
            self._next = position
        if position + length > self._highest:
            self._highest = position + length
        if position == self._next and not self._pending:
            self._next = position + length
            if (
                not is_pad
                and frame.flags & UNFRAGMENTED == UNFRAGMENTED
                and self._assembly_start is None
                and self._gap_start is None
            ):
                # The common case, a whole message in order: what `_deliver` would return.
                inferred = not (self._initial_known and self._length_known)
                return [
                    _make_message((frame.payload, position, position + length, frame.session_id, frame.stream_id,
                                   frame.term_id, frame.term_offset, 1, inferred))
                ]
            return self._deliver(frame, position, length)
        if position < self._next or position in self._pending:
            self.duplicate_frames += 1
            return []
        self._pending[position] = frame
        return self._drain(flush=False)

    def steady(self) -> tuple[int, int, int, int, bool] | None:
        """While nothing waits, nothing is half assembled and no hole is open: (initial term id,
        position bits, rebuild position, term length, whether the term length is known); else None.

        In that state a whole message (B|E) at the rebuild position is returned at once and moves it
        on, and a heartbeat at it changes nothing but the highest position: a caller that has checked
        a run of such frames itself may pass over them with `skip_ahead`."""
        if (self._shift is None or self._next is None or self._pending or self._assembly_start is not None
                or self._gap_start is not None):
            return None
        return self._initial_term_id, self._shift, self._next, self._term_length, self._length_known

    def skip_ahead(self, next_position: int, highest: int) -> None:
        """The state after in-order whole messages and heartbeats (see `steady`) up to ``next_position``,
        the publisher having shown ``highest``; their messages are the caller's to make."""
        self._next = next_position
        if highest > self._highest:
            self._highest = highest

    def finish(self) -> list[Message | Gap]:
        """The capture has ended: give up on holes, messages left open and unseen data."""
        out = self._drain(flush=True)
        if self._next is None:
            return out
        if self._assembly_start is not None:
            self._open_gap(
                self._assembly_start, f"the message begun at position {self._assembly_start} never ended"
            )
            self._drop_assembly()
        if self._highest > self._next:
            self._open_gap(
                self._next,
                f"the publisher reached position {self._highest} but frames from "
                f"{self._next} on were not captured",
            )
            self._next = self._highest
        if self._gap_start is not None:
            out.append(self._close_gap(self._next))
        return out

    # --- delivery -------------------------------------------------------------------------------
    def _deliver(self, frame: DataFrame | PadFrame, position: int, length: int) -> list[Message | Gap]:
        out: list[Message | Gap] = []
        if type(frame) is PadFrame:
            if self._assembly_start is not None:
                self._open_gap(
                    self._assembly_start,
                    f"the message begun at position {self._assembly_start} ran into the term's padding",
                )
                self._drop_assembly()
            return out
        flags = frame.flags
        if flags & BEGIN_FLAG:
            if self._assembly_start is not None:
                self._open_gap(
                    self._assembly_start,
                    f"the message begun at position {self._assembly_start} has no END fragment",
                )
                self._drop_assembly()
            if self._gap_start is not None:
                out.append(self._close_gap(position))
            if flags & END_FLAG:
                out.append(self._message(frame, [frame.payload], position, position + length))
            else:
                self._assembly_start = position
                self._assembly_first = frame
                self._parts = [frame.payload]
            return out
        if self._assembly_start is None:
            if self._gap_start is None:
                self._open_gap(
                    position, "fragments without their BEGIN (the message began before the first frame seen)"
                )
            return out
        self._parts.append(frame.payload)
        if flags & END_FLAG:
            out.append(
                self._message(self._assembly_first, self._parts, self._assembly_start, position + length)
            )
            self._drop_assembly()
        return out

    def _message(self, first: DataFrame, parts: list[bytes], start: int, end: int) -> Message:
        return Message(
            payload=parts[0] if len(parts) == 1 else b"".join(parts),
            start_position=start,
            end_position=end,
            session_id=first.session_id,
            stream_id=first.stream_id,
            term_id=first.term_id,
            term_offset=first.term_offset,
            fragments=len(parts),
            inferred=not (self._initial_known and self._length_known),
        )

    def _drain(self, *, flush: bool) -> list[Message | Gap]:
        out: list[Message | Gap] = []
        pending = self._pending
        window = self._reorder_window if self._reorder_window is not None else self._term_length
        while pending:
            frame = pending.pop(self._next, None)
            if frame is not None:
                length = self._length(frame)
                position = self._next
                self._next = position + length
                out.extend(self._deliver(frame, position, length))
                continue
            resume = min(pending)
            if not flush and self._highest - self._next <= window:
                break
            start = self._assembly_start if self._assembly_start is not None else self._next
            if self._gap_start is None:
                self._open_gap(start, f"frames from position {self._next} to {resume} were not captured")
            self._drop_assembly()
            self._next = resume
        return out

    def _on_heartbeat(self, frame: DataFrame) -> list[Message | Gap]:
        # compute_position and is_end_of_stream, inlined: a third of a cluster's frames are heartbeats.
        position = (
            (((frame.term_id - self._initial_term_id + 0x8000_0000) & 0xFFFF_FFFF) - 0x8000_0000) << self._shift
        ) + frame.term_offset
        if frame.flags & EOS_FLAG:
            self.end_of_stream = True
        if self._next is None:
            self._next = position
        if position > self._highest:
            self._highest = position
        return self._drain(flush=False) if self._pending else []

    # --- gaps -----------------------------------------------------------------------------------
    def _open_gap(self, start: int, reason: str) -> None:
        if self._gap_start is None:
            self._gap_start = start
            self._gap_reason = reason
        else:
            self._gap_start = min(self._gap_start, start)

    def _close_gap(self, end: int) -> Gap:
        gap = Gap(
            start_position=self._gap_start,
            end_position=end,
            session_id=self.session_id,
            stream_id=self.stream_id,
            reason=self._gap_reason,
        )
        self._gap_start = None
        self._gap_reason = ""
        return gap

    def _drop_assembly(self) -> None:
        self._assembly_start = None
        self._assembly_first = None
        self._parts = []

    # --- positions ------------------------------------------------------------------------------
    def _length(self, frame: DataFrame | PadFrame) -> int:
        if type(frame) is PadFrame:
            return frame.frame_length
        return (frame.frame_length + FRAME_ALIGNMENT - 1) & -FRAME_ALIGNMENT

    def _check_stream(self, session_id: int, stream_id: int) -> None:
        if self.session_id is None:
            self.session_id = session_id
        if self.stream_id is None:
            self.stream_id = stream_id
        if (session_id, stream_id) != (self.session_id, self.stream_id):
            raise ValueError(
                f"a Reassembler serves session {self.session_id} stream {self.stream_id},"
                f" not session {session_id} stream {stream_id}"
            )

    def _assume_basis(self, frame: DataFrame | PadFrame) -> None:
        if self._initial_term_id is None:
            self._initial_term_id = frame.term_id
            self.notes.append(
                f"no SETUP seen for session {frame.session_id} stream {frame.stream_id}: initial term id"
                f" assumed to be the first frame's term id {frame.term_id}, so positions count from that term"
            )
        if self._term_length is None:
            self._term_length = DEFAULT_TERM_LENGTH
            self.notes.append(
                f"no SETUP seen for session {frame.session_id} stream {frame.stream_id}: term length assumed"
                f" to be {DEFAULT_TERM_LENGTH} until a PAD frame shows a term's end"
            )
        self._shift = position_bits_to_shift(self._term_length)

    def _maybe_correct_term_length(self, frame: DataFrame | PadFrame, is_pad: bool) -> None:
        """A PAD frame ends its term; a frame past the assumed end proves the term is longer."""
        if is_pad:
            actual = frame.term_offset + frame.frame_length
        else:
            end = frame.term_offset + frame.frame_length
            if end <= self._term_length:
                return
            actual = 1 << (end - 1).bit_length()
        if (
            actual == self._term_length
            or actual & (actual - 1)
            or not TERM_MIN_LENGTH <= actual <= TERM_MAX_LENGTH
        ):
            return
        self.notes.append(
            f"term length corrected from the assumed {self._term_length} to {actual}"
            f" ({'a PAD frame ends the term there' if is_pad else 'a frame lies beyond the assumed end'})"
        )
        self._rebase(self._initial_term_id, actual)
        if is_pad:
            self._length_known = True

    def _rebase(self, initial_term_id: int, term_length: int) -> None:
        """Move every position held onto a new initial term id and term length."""
        old_shift, old_initial = self._shift, self._initial_term_id
        new_shift = position_bits_to_shift(term_length)

        def move(position: int) -> int:
            term_id = compute_term_id_from_position(position, old_shift, old_initial)
            offset = compute_term_offset_from_position(position, old_shift)
            return compute_position(term_id, offset, new_shift, initial_term_id)

        if self._next is not None:
            self._next = move(self._next)
        self._highest = move(self._highest) if self._next is not None else 0
        self._pending = {move(position): frame for position, frame in self._pending.items()}
        if self._assembly_start is not None:
            self._assembly_start = move(self._assembly_start)
        if self._gap_start is not None:
            self._gap_start = move(self._gap_start)
        self._initial_term_id, self._term_length, self._shift = initial_term_id, term_length, new_shift
