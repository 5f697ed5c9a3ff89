"""When each member's process was down, and when it came back: lives inferred from the evidence.

A replay must stop feeding a member when its process dies and start it again, from its disk, when a
new process begins its election.  The inputs show this in several ways, used in this order:

1. **The agent log** (`recorder.capture._restarts`): a new ``log started`` line is a new JVM; its
   NEW_ELECTION "node started" line is when the new consensus module began its election; a previous
   life whose consensus module reached CLOSED stopped cleanly (SIGTERM), otherwise it was killed.
2. **The wire** (`wire_restarts`), from what the member itself sent — status messages from its own
   endpoints and the frames of its publications (`recorder.capture.datagrams.DatagramDecoder.heard`):
   a silence of at least `LIFE_GAP_NS` is a death and a new life when something shows that a new
   process came back, not merely that the member went quiet (a consensus module stuck in a wait keeps
   its media driver answering; a member cut off by the network goes quiet too):

   * ICMP "port unreachable" answers to datagrams sent to its consensus endpoint during the silence:
     nothing listened there (only in captures that kept ICMP).  Its other endpoints do not count: a
     live member closes its log endpoint when it stops following (f_…, member 1 at 19:21:06.9);
   * consensus publications with session ids never seen before from it, appearing after the silence
     (a new consensus module makes them as it starts; a leader's new log publication proves nothing);
   * status messages from its consensus endpoint asking for SETUPs after the silence (it had lost
     its images of its peers' consensus publications);
   * its mark file's start time (``cluster-mark.dat`` holds the last life's) inside the silence.

   The new life starts at the member's first consensus message after the silence: a consensus module
   begins its election by canvassing at once, which is what the replay's MemberStart does.  A process
   that came up but sent no consensus message before going quiet again (a launch that failed, as in
   f_…'s ``active Mark file detected`` attempts) is not a life: it is noted and the member stays down.
   The wire cannot tell a kill from a clean stop; it says so, and the death is a ``MemberCrash``
   (nothing more is sent or written: what a replay needs either way).

Pure: the evidence is passed in.  Times are capture times, ns since the epoch.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

#: A member silent this long on the wire may have been down (a live media driver sends status
#: messages at least every 200 ms, and publication heartbeats every 100 ms, to each live peer).
LIFE_GAP_NS = 1_000_000_000
#: After a silence, how long the evidence of a new process (its first SETUP requests) may lag.
SETTLE_NS = 2_000_000_000
#: A silence with no sign of a new process is worth a note from this long on (shorter ones are common
#: in elections: a SHARED-mode media driver creating a 64 MiB log buffer sends nothing meanwhile).
NOTE_SILENCE_NS = 3_000_000_000


@dataclass(frozen=True, slots=True)
class WireLiveness:
    """What one member sent, and what was sent to it in vain, as the capture shows."""

    heard: tuple[tuple[int, int], ...]  #: spans (first, last) of datagrams it sent, split at silences
    unreachable: tuple[int, ...] = ()  #: times of ICMP port unreachable for datagrams to its consensus endpoint
    setup_requests: tuple[int, ...] = ()  #: times its consensus endpoint asked for a SETUP (it had no image)
    publications: tuple[tuple[int, int, int], ...] = ()  #: its consensus publications (first seen, session, stream)


@dataclass(frozen=True, slots=True)
class Restart:
    """A member's death and its next life."""

    member: int
    end_ns: int  #: the process was gone from here (just after the last thing known of it)
    kind: str  #: "MemberCrash" or "MemberStop"
    end_evidence: tuple[str, ...]
    back_ns: int  #: its new process was receiving again from here (its driver up)
    restart_ns: int  #: its consensus module began its election here (the MemberStart)
    start_evidence: tuple[str, ...]


@dataclass(slots=True)
class WireLives:
    restarts: list[Restart] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _ms(ns: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%H:%M:%S.%f")[:-3]


def wire_restarts(member: int, liveness: WireLiveness, consensus_sends: Sequence[int],
                  mark_start_ns: int | None = None) -> WireLives:
    """The restarts the wire shows for ``member`` (see the module docstring).  ``consensus_sends``
    are the times of the consensus messages it sent, in order; ``mark_start_ns`` its mark file's
    start time (the last life's), if known."""
    out = WireLives()
    try:  # (an array: tens of thousands of times)
        sends = np.sort(np.asarray(consensus_sends, dtype=np.int64))
    except OverflowError:  # a time beyond int64 (a corrupt capture's): the same, with Python's integers
        sends = np.array(sorted(consensus_sends), dtype=object)
    # Its own messages count as heard too: a frame whose publication was not yet known to be its own
    # when it was captured is not in ``heard``.  (Taken as runs less than `LIFE_GAP_NS` apart first:
    # the same spans as merging each alone, without a tuple per message.)
    spans = _merged([*liveness.heard, *_runs(sends)])
    seen_sessions: set[int] = set()
    publications = sorted(liveness.publications)
    index = 0
    down_since: int | None = None  # a death already established, waiting for a life that elects
    down_evidence: tuple[str, ...] = ()
    for before, after in zip(spans, spans[1:], strict=False):
        while index < len(publications) and publications[index][0] <= before[1]:
            seen_sessions.add(publications[index][1])
            index += 1
        gap_start, gap_end = before[1], after[0]
        if gap_end - gap_start < LIFE_GAP_NS:
            continue
        evidence = []
        icmp = [t for t in liveness.unreachable if gap_start < t <= gap_end]
        if icmp:
            evidence.append(f"{len(icmp)} ICMP port unreachable for datagrams to its consensus endpoint from"
                            f" {_ms(icmp[0])} to {_ms(icmp[-1])} (nothing listened there)")
        fresh = [(t, session) for t, session, _ in publications[index:]
                 if gap_end - SETTLE_NS <= t <= gap_end + SETTLE_NS and session not in seen_sessions]
        if fresh:
            sessions = ", ".join(str(s) for _, s in fresh[:4]) + (", ..." if len(fresh) > 4 else "")
            evidence.append(f"new consensus publications from {_ms(fresh[0][0])} (session ids {sessions}, never"
                            " seen before)")
        asked = [t for t in liveness.setup_requests if gap_end <= t <= gap_end + SETTLE_NS]
        if asked:
            evidence.append(f"it asked for SETUPs from {_ms(asked[0])} (it had no images)")
        if mark_start_ns is not None and gap_start < mark_start_ns <= gap_end + SETTLE_NS:
            evidence.append(f"cluster-mark.dat says its last consensus module started at {_ms(mark_start_ns)}")
        if not evidence and down_since is None:
            if gap_end - gap_start < NOTE_SILENCE_NS:
                continue
            out.notes.append(f"member {member}: silent on the wire from {_ms(gap_start)} to {_ms(gap_end)}, but"
                             " nothing shows a new process (a hang or a cut-off network?): not taken as a restart")
            continue
        if down_since is None:
            down_since, down_evidence = gap_start, tuple(evidence)
        at = bisect.bisect_left(sends, gap_end)
        first_send = int(sends[at]) if at < len(sends) else None
        next_gap = next((b[0] for a, b in zip(spans, spans[1:], strict=False)
                         if a[1] >= after[1] and b[0] - a[1] >= LIFE_GAP_NS), None)
        if first_send is None or (next_gap is not None and first_send >= next_gap):
            out.notes.append(f"member {member}: its ports answered from {_ms(gap_end)} to {_ms(after[1])} but it sent"
                             " no consensus message (a launch that never began its election?): not a life; it"
                             " stays down")
            continue
        out.restarts.append(Restart(
            member=member,
            end_ns=down_since + 1,
            kind="MemberCrash",
            end_evidence=(f"its last datagram on the wire at {_ms(down_since)}", *down_evidence,
                          "the wire cannot tell a kill from a clean stop"),
            back_ns=gap_end,
            restart_ns=first_send,
            start_evidence=(*evidence, f"heard again from {_ms(gap_end)}",
                            f"its first consensus message of the new life at {_ms(first_send)}"),
        ))
        down_since, down_evidence = None, ()
    return out


def _runs(times: np.ndarray) -> list[tuple[int, int]]:
    """Sorted ``times`` as spans (first, last) of times less than `LIFE_GAP_NS` apart."""
    if not len(times):
        return []
    breaks = np.flatnonzero(np.diff(times) >= LIFE_GAP_NS)
    firsts = np.concatenate([[0], breaks + 1])
    lasts = np.concatenate([breaks, [len(times) - 1]])
    return list(zip(times[firsts].tolist(), times[lasts].tolist(), strict=True))


def _merged(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans less than `LIFE_GAP_NS` apart as one, in time order."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start - out[-1][1] < LIFE_GAP_NS:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def wire_facts(liveness: WireLiveness | None, end_ns: int, restart_ns: int) -> tuple[tuple[str, ...], int | None]:
    """What the wire says about a death at ``end_ns`` and a new life at ``restart_ns`` that another
    source (the agent log) found: its evidence sentences, and when the member was heard again."""
    if liveness is None:
        return (), None
    facts = []
    icmp = [t for t in liveness.unreachable if end_ns <= t <= restart_ns]
    if icmp:
        facts.append(f"{len(icmp)} ICMP port unreachable for datagrams to its consensus endpoint from {_ms(icmp[0])}"
                     f" to {_ms(icmp[-1])}")
    # The new process: the last span of activity that began before its election (an earlier one
    # may be a launch that failed, whose images the new process does not have).
    back = max((start for start, _ in liveness.heard if end_ns <= start <= restart_ns), default=None)
    if back is not None:
        facts.append(f"heard again on the wire from {_ms(back)}")
    before = [end for _, end in liveness.heard if end < end_ns]
    if before:
        facts.insert(0, f"its last datagram on the wire before that at {_ms(before[-1])}")
    return tuple(facts), back
