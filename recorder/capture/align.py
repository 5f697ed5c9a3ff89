"""Put each aeron-agent log on one timeline: the capture's clock (ns since the epoch).

An agent log stamps its lines with its JVM's ``System.nanoTime()``: a clock per process, with an
arbitrary origin.  We want ``timeline = nanoTime + offset`` for each log (each *segment* of a log:
a log appended to by several runs restarts its clock at every ``log started`` line).

1. **First estimate: the ``log started`` line.**  It prints the wall clock (ms, truncated) next to
   the nanoTime of the same moment, so ``offset = epochMs·10⁶ − nanoTime`` with the true value in
   ``[offset, offset + 1 ms)``, *if* the wall clock of the member's host agrees with the clock that
   stamped the capture (true on one host; otherwise off by the hosts' clock difference, unknown).
2. **Refined with the capture** (when a pcap of the same traffic is given).  Aeron logs each
   consensus message when the member *receives* it (aeron-formats.md §9.2), so a receipt line
   (CANVASS_POSITION, REQUEST_VOTE, NEW_LEADERSHIP_TERM, APPEND_POSITION, COMMIT_POSITION,
   CATCHUP_POSITION, STOP_CATCHUP, TERMINATION_POSITION, TERMINATION_ACK) was written *after* the
   capture saw the packet: ``logTs + O ≥ captureTs``, i.e. ``O ≥ captureTs − logTs``.  Receipts are
   paired with the captured ``in`` events of the same member by their fields, the k-th line of a
   given content with the k-th captured message of that content (heartbeats repeat identical
   content; a content whose counts differ between log and capture is not used).  Some state changes
   are logged *before* a message that the capture then sees leave the member:
   ``→ CANDIDATE_BALLOT`` (candidateTermId c) before its first RequestVote for c,
   ``→ LEADER_LOG_REPLICATION`` (term t) before its first NewLeadershipTerm for t (aeron-election.md
   §2.4, §2.6), and ``INIT → CANVASS`` before the next CanvassPosition it sends.  Those give
   ``O ≤ captureTs − logTs``.

The estimate is the tightest lower bound, ``Ô = max(captureTs − logTs)`` over receipts: the true
offset exceeds it by the smallest receipt latency in the log (capture → JVM → log line, typically
tens of µs on one host).  The stated error bound is ``[Ô, U]`` with ``U`` the smallest of the upper
bounds from sends and the ``log started`` bound (the latter only when it is consistent with the
receipts, and only as good as the assumption that the member's host clock is the capture's).  Lower
bounds above an upper bound from a send (a mismatched pair) are discarded and counted.

Pure computation; no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from formats.agent_log import AgentLogRecord, LogStarted
from formats.events import Event

MS = 1_000_000

#: Agent receipt events: the message type they log, and (printed name → message field name) pairs.
RECEIPTS: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "CANVASS_POSITION": ("CanvassPosition", (("logLeadershipTermId", "logLeadershipTermId"),
                                             ("logPosition", "logPosition"), ("leadershipTermId", "leadershipTermId"),
                                             ("followerMemberId", "followerMemberId"))),
    "REQUEST_VOTE": ("RequestVote", (("logLeadershipTermId", "logLeadershipTermId"), ("logPosition", "logPosition"),
                                     ("candidateTermId", "candidateTermId"), ("candidateId", "candidateMemberId"))),
    "NEW_LEADERSHIP_TERM": ("NewLeadershipTerm", (
        ("logLeadershipTermId", "logLeadershipTermId"), ("nextLeadershipTermId", "nextLeadershipTermId"),
        ("nextTermBaseLogPosition", "nextTermBaseLogPosition"), ("nextLogPosition", "nextLogPosition"),
        ("leadershipTermId", "leadershipTermId"), ("termBaseLogPosition", "termBaseLogPosition"),
        ("logPosition", "logPosition"), ("leaderRecordingId", "leaderRecordingId"), ("timestamp", "timestamp"),
        ("leaderId", "leaderMemberId"), ("logSessionId", "logSessionId"))),
    "APPEND_POSITION": ("AppendPosition", (("leadershipTermId", "leadershipTermId"), ("logPosition", "logPosition"),
                                           ("followerMemberId", "followerMemberId"), ("flags", "flags"))),
    "COMMIT_POSITION": ("CommitPosition", (("leadershipTermId", "leadershipTermId"), ("logPosition", "logPosition"),
                                           ("leaderId", "leaderMemberId"))),
    "CATCHUP_POSITION": ("CatchupPosition", (("leadershipTermId", "leadershipTermId"), ("logPosition", "logPosition"),
                                             ("followerMemberId", "followerMemberId"))),
    "STOP_CATCHUP": ("StopCatchup", (("leadershipTermId", "leadershipTermId"),
                                     ("followerMemberId", "followerMemberId"))),
    "TERMINATION_POSITION": ("TerminationPosition", (("logLeadershipTermId", "leadershipTermId"),
                                                     ("logPosition", "logPosition"))),
    "TERMINATION_ACK": ("TerminationAck", (("logLeadershipTermId", "leadershipTermId"),
                                           ("logPosition", "logPosition"), ("senderMemberId", "memberId"))),
}


@dataclass(frozen=True, slots=True)
class ClockAlignment:
    """``timeline_ns = nanoTime + offset_ns``; the true offset lies in ``[offset + low, offset + high]``.

    ``high_ns`` is None when nothing bounds the offset from above.
    """

    offset_ns: int
    low_ns: int
    high_ns: int | None
    method: str  #: "capture" (receipt pairs), "log started", or "none"
    lower_pairs: int = 0
    upper_pairs: int = 0
    discarded_pairs: int = 0
    detail: str = ""

    @property
    def bound_ns(self) -> int | None:
        """The width of the interval the true offset is known to lie in (None: unbounded)."""
        return None if self.high_ns is None else self.high_ns - self.low_ns

    def to_json(self) -> dict[str, Any]:
        return {
            "offsetNs": self.offset_ns,
            "lowNs": self.low_ns,
            "highNs": self.high_ns,
            "boundNs": self.bound_ns,
            "method": self.method,
            "lowerPairs": self.lower_pairs,
            "upperPairs": self.upper_pairs,
            "discardedPairs": self.discarded_pairs,
            "detail": self.detail,
        }


def from_log_started(started: LogStarted | None) -> ClockAlignment:
    """The first estimate: the wall clock printed on the ``log started`` line (ms, truncated)."""
    if started is None:
        return ClockAlignment(0, 0, None, "none", detail="no 'log started' line: times are the JVM's nanoTime")
    offset = started.epoch_ms * MS - started.ts_ns
    return ClockAlignment(
        offset, 0, MS, "log started",
        detail=f"wall clock {started.wall_clock} at nanoTime {started.ts_ns}; exact to 1 ms if this host's wall"
               " clock agrees with the capture's",
    )


def _content(fields: dict[str, Any], pairs: tuple[tuple[str, str], ...], *, printed: bool) -> tuple | None:
    try:
        return tuple(fields[p if printed else m] for p, m in pairs)
    except KeyError:
        return None


def receipt_pairs(records: Iterable[AgentLogRecord], captured_in: Iterable[Event]) -> tuple[list[tuple[int, int]], int]:
    """(logTs, captureTs) for each receipt line matched to the captured message it logs.

    Returns the pairs and the number of receipt lines left unmatched.  ``captured_in`` are the
    captured ``in`` events on the consensus channel, in capture order; a line is paired only with
    events of the member it names (``memberId``), so one JVM's log may hold several members.
    """
    logged: dict[tuple, list[int]] = defaultdict(list)
    for record in records:
        spec = RECEIPTS.get(record.event)
        if spec is None:
            continue
        content = _content(record.fields, spec[1], printed=True)
        if content is not None:
            logged[(record.fields.get("memberId"), spec[0]) + content].append(record.ts_ns)
    by_type = {message: pairs for message, pairs in RECEIPTS.values()}
    seen: dict[tuple, list[int]] = defaultdict(list)
    for event in captured_in:
        pairs = by_type.get(event.type)
        if pairs is None or event.dir != "in":
            continue
        content = _content(event.fields, pairs, printed=False)
        if content is not None:
            seen[(event.node, event.type) + content].append(event.ts)
    matched: list[tuple[int, int]] = []
    unmatched = 0
    for key, log_times in logged.items():
        capture_times = seen.get(key, [])
        if len(capture_times) != len(log_times):
            unmatched += len(log_times)
            continue
        matched.extend(zip(log_times, capture_times, strict=True))
    return matched, unmatched


def send_pairs(records: Sequence[AgentLogRecord], captured_out: Sequence[Event], lower_offset: int | None
               ) -> list[tuple[int, int]]:
    """(logTs, captureTs) for state changes logged before a message the capture saw the member send."""
    out: list[tuple[int, int]] = []
    first_vote: dict[tuple, int] = {}
    first_term: dict[tuple, int] = {}
    canvasses: dict[int, list[int]] = defaultdict(list)
    for event in captured_out:
        if event.dir != "out":
            continue
        if event.type == "RequestVote":
            first_vote.setdefault((event.node, event.fields.get("candidateTermId")), event.ts)
        elif event.type == "NewLeadershipTerm":
            first_term.setdefault((event.node, event.fields.get("leadershipTermId")), event.ts)
        elif event.type == "CanvassPosition":
            canvasses[event.node].append(event.ts)
    for times in canvasses.values():
        times.sort()
    for record in records:
        if record.event != "ELECTION_STATE_CHANGE":
            continue
        node = record.fields.get("memberId")
        to = record.fields.get("to")
        vote_key = (node, record.fields.get("candidateTermId"))
        term_key = (node, record.fields.get("leadershipTermId"))
        if to == "CANDIDATE_BALLOT" and vote_key in first_vote:
            out.append((record.ts_ns, first_vote[vote_key]))
        elif to == "LEADER_LOG_REPLICATION" and term_key in first_term:
            out.append((record.ts_ns, first_term[term_key]))
        elif to == "CANVASS" and record.fields.get("from") == "INIT" and lower_offset is not None:
            # The next canvass it sends: the first one captured after this line could have been written.
            earliest = record.ts_ns + lower_offset
            following = next((ts for ts in canvasses.get(node, ()) if ts >= earliest), None)
            if following is not None:
                out.append((record.ts_ns, following))
    return out


def align_with_capture(records: Sequence[AgentLogRecord], captured: Sequence[Event], prior: ClockAlignment
                       ) -> ClockAlignment:
    """Refine ``prior`` (one JVM's clock) with the captured events of the members its log names."""
    pairs, unmatched = receipt_pairs(records, (e for e in captured if e.dir == "in" and e.channel == "consensus"))
    if not pairs:
        detail = prior.detail + "; no receipt line matched a captured message" if captured else prior.detail
        return ClockAlignment(prior.offset_ns, prior.low_ns, prior.high_ns, prior.method, detail=detail)
    lowers = sorted(capture - log for log, capture in pairs)
    uppers = sorted(capture - log for log, capture in send_pairs(
        records, [e for e in captured if e.dir == "out" and e.channel == "consensus"], lowers[-1]))
    discarded = 0
    if uppers:
        # A lower bound above an upper bound cannot be: one of them paired the wrong lines.
        keep = [value for value in lowers if value <= uppers[0]]
        discarded = len(lowers) - len(keep)
        if keep:
            lowers = keep
        else:
            uppers, discarded = [], 0
    offset = lowers[-1]
    bounds: list[tuple[int, str]] = []
    if uppers:
        bounds.append((uppers[0], f"{len(uppers)} state change(s) logged before a captured send"))
    if prior.method == "log started" and prior.high_ns is not None and prior.offset_ns + prior.high_ns >= offset:
        bounds.append((prior.offset_ns + prior.high_ns, "the 'log started' wall clock (same-host clocks assumed)"))
    high: int | None
    if bounds:
        limit, why = min(bounds)
        high = limit - offset
        how = f"bounded from above by {why}"
    else:
        high = None
        how = "nothing bounds it from above (the receipt latency is typically tens of µs)"
    detail = (f"{len(pairs)} receipt line(s) matched to captured messages ({unmatched} not matched); "
              f"offset = the largest capture-minus-log difference; {how}")
    if discarded:
        detail += f"; {discarded} receipt pair(s) above an upper bound discarded"
    return ClockAlignment(offset, 0, high, "capture", len(pairs) - discarded, len(uppers), discarded, detail)
