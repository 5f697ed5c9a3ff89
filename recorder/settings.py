"""Cluster settings a capture shows plainly, inferred so that a replay runs with them (issue 12 item 4).

A member's timing is visible on the wire:

* ``aeron.cluster.leader.heartbeat.interval``: a leader sends CommitPosition, and a follower
  AppendPosition, at least once per interval; with no traffic exactly once, so the gaps between
  consecutive sends to one peer have a peak at the interval (client traffic adds shorter gaps,
  never longer ones).  The largest gap value that a clear share of the gaps sits around is taken.
* ``aeron.cluster.election.status.interval``: a canvassing member sends CanvassPosition to each peer
  once per interval; the densest cluster of those gaps is taken.
* ``aeron.cluster.leader.heartbeat.timeout``: a follower whose leader has gone silent starts an
  election (its first CanvassPosition) one timeout after the last message it had from that leader.
  Each such silence of at least a second is a sample; the shortest, to the 100 ms below, is taken.

* ``aeron.cluster.election.timeout``, from the agent logs' ELECTION_STATE_CHANGE times (one clock per
  member, so their differences are exact): a ballot that times out goes back to CANVASS one election
  timeout after it began (FOLLOWER_BALLOT -> CANVASS, CANDIDATE_BALLOT -> CANVASS), so each such
  ballot's length is a sample of it; the median, to the nearest 10 ms, is taken (the logged times are
  the logging moments, a millisecond either side of the duty cycle's clock: 999.4 to 1001.6 ms in
  h_…).  Lower bounds are checked against it: a ballot that ended otherwise (the member voted, or won)
  ended before the timeout, and a NOMINATE lasts a random part of half of it.  Without agent logs, the
  wire shows the same ballots: a member that sent a RequestVote, or a Vote granting one, enters a
  ballot, and if it then neither leads nor hears of a new term, its next message is a CanvassPosition,
  sent as its ballot times out (it had not canvassed for longer than the status interval): from the
  RequestVote or Vote to that CanvassPosition is a sample (991 to 1002 ms in f, g, h; 495 to 503 ms in
  j).  At least two wire samples are needed.  The wire gives no other bound: after a leader loss the
  real members nominated 0.08–0.16 s after they began to canvass.

Each value comes with a note saying what it was inferred from.  Values are rounded (intervals to
10 ms, the timeout to 100 ms below) because what is measured is the setting plus duty-cycle jitter.
Nothing is inferred from too few samples.  Pure: events in, values out.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from engine.model.config import Config
from formats.event_columns import EventColumns, stable_order
from formats.events import CHANNELS, DIRECTIONS, Event

MS = 1_000_000
HEARTBEAT_INTERVAL = "aeron.cluster.leader.heartbeat.interval"
STATUS_INTERVAL = "aeron.cluster.election.status.interval"
HEARTBEAT_TIMEOUT = "aeron.cluster.leader.heartbeat.timeout"
ELECTION_TIMEOUT = "aeron.cluster.election.timeout"
#: Ballot states whose timeout returns the member to CANVASS after one election timeout.
_BALLOTS = ("FOLLOWER_BALLOT", "CANDIDATE_BALLOT")


@dataclass(frozen=True, slots=True)
class Inferred:
    name: str  # the Aeron property
    value_ns: int
    note: str


def _gaps(times: dict[tuple[int, int | None], list[int]], low: int, high: int) -> np.ndarray:
    gaps = []
    for ts in times.values():
        ts.sort()
        gaps += [b - a for a, b in zip(ts, ts[1:], strict=False) if low <= b - a <= high]
    return np.array(gaps, dtype=np.int64)


def _gaps_of_rows(node: np.ndarray, peer: np.ndarray, ts: np.ndarray, low: int, high: int) -> np.ndarray:
    """`_gaps` of sends given as arrays in time order: each send's member, peer (None as a value no peer has)
    and time."""
    order = stable_order(node, peer)  # by (member, peer), each in time order
    node, peer, ts = node[order], peer[order], ts[order]
    gaps = ts[1:] - ts[:-1]
    return gaps[(node[1:] == node[:-1]) & (peer[1:] == peer[:-1]) & (gaps >= low) & (gaps <= high)]


def _round(value_ns: int, step_ns: int) -> int:
    return max(step_ns, (value_ns + step_ns // 2) // step_ns * step_ns)


def _near(gaps: np.ndarray, centre: int, spread: float) -> np.ndarray:
    """The sorted ``gaps`` within ``centre * spread`` of ``centre`` (the integers within the float
    bound are one slice of them)."""
    reach = math.floor(centre * spread)
    return gaps[np.searchsorted(gaps, centre - reach, side="left"):np.searchsorted(gaps, centre + reach, side="right")]


def _near_counts(gaps: np.ndarray, centres: np.ndarray, spread: float) -> np.ndarray:
    """How many of the sorted ``gaps`` `_near` finds around each of ``centres``."""
    reach = np.array([math.floor(c * spread) for c in centres.tolist()], dtype=np.int64)
    return np.searchsorted(gaps, centres + reach, side="right") - np.searchsorted(gaps, centres - reach, side="left")


def _heartbeat_interval(gaps: np.ndarray) -> Inferred | None:
    """From the gaps (10 ms to 2 s) between consecutive AppendPosition/CommitPosition sends to one peer."""
    gaps = np.sort(gaps)
    if len(gaps) < 20:
        return None
    needed = max(10, len(gaps) * 3 // 100)
    centres = np.unique(gaps // MS * MS)
    counts = _near_counts(gaps, centres, 0.03)
    peaks = [(centre, count) for centre, count in zip(centres.tolist(), counts.tolist(), strict=True)
             if count >= needed]
    if not peaks:
        return None
    # The heartbeat is the longest regular gap; of the peaks near it (jitter spreads one peak over a
    # few ms) the best supported, measured at its low end (a gap is the interval plus a duty cycle).
    longest = peaks[-1][0]
    centre, _ = max((p for p in peaks if p[0] >= longest * 0.8), key=lambda p: (p[1], p[0]))
    near = _near(gaps, centre, 0.03)
    value = _round(int(near[len(near) // 10]), 10 * MS)
    return Inferred(HEARTBEAT_INTERVAL, value, f"{HEARTBEAT_INTERVAL}={value // MS}ms inferred from "
                    f"{len(near)} of {len(gaps)} gaps between consecutive AppendPosition/CommitPosition sends")


def _status_interval(gaps: np.ndarray) -> Inferred | None:
    """From the gaps (10 ms to 1 s) between consecutive CanvassPosition sends to one peer."""
    gaps = np.sort(gaps)
    if len(gaps) < 8:
        return None
    centres = np.unique(gaps)
    counts = _near_counts(gaps, centres, 0.05)
    best = _near(gaps, int(centres[int(np.argmax(counts))]), 0.05)  # the first centre with the most gaps near it
    if len(best) < max(4, len(gaps) // 4):
        return None
    value = _round(int(best[len(best) // 10]), 10 * MS)  # its low end: a gap is the interval plus a duty cycle
    return Inferred(STATUS_INTERVAL, value, f"{STATUS_INTERVAL}={value // MS}ms inferred from {len(best)} of "
                    f"{len(gaps)} gaps between consecutive CanvassPosition sends")


def _heartbeat_timeout(events: list[Event]) -> Inferred | None:
    """A follower's silences: from its last message from its leader to its next canvass."""
    leader_of: dict[int, int] = {}  # member -> the peer it last had a CommitPosition/NewLeadershipTerm from
    last_from: dict[tuple[int, int], int] = {}  # (member, peer) -> ts of the last message received
    canvassing: set[int] = set()
    samples: list[int] = []
    for event in events:
        if event.dir == "in" and event.peer is not None and event.channel in ("consensus", "log"):
            last_from[(event.node, event.peer)] = event.ts
            if event.type in ("CommitPosition", "NewLeadershipTerm"):
                leader_of[event.node] = event.peer
                canvassing.discard(event.node)
        elif event.dir == "out" and event.channel == "consensus" and event.type == "CanvassPosition":
            if event.node in canvassing:
                continue
            canvassing.add(event.node)
            leader = leader_of.pop(event.node, None)
            last = last_from.get((event.node, leader)) if leader is not None else None
            if last is not None and event.ts - last >= 1_000 * MS:
                samples.append(event.ts - last)
        elif event.dir == "local" and event.type == "MemberStart":
            leader_of.pop(event.node, None)
            canvassing.discard(event.node)
    return _timeout_from(samples)


def _timeout_from(samples: list[int]) -> Inferred | None:
    if not samples:
        return None
    shortest = min(samples)
    value = max(100 * MS, shortest // (100 * MS) * 100 * MS)
    return Inferred(HEARTBEAT_TIMEOUT, value, f"{HEARTBEAT_TIMEOUT}={value // MS}ms inferred from {len(samples)} "
                    f"follower(s) canvassing {shortest / 1e9:.3f}s after their leader's last message")


def _election_timeout(events: list[Event], wire_samples: Callable[[], list[int]]) -> Inferred | None:
    """Ballots that timed out (back to CANVASS), each member's agent-log times, else ``wire_samples()``
    (`_ballots_on_the_wire`); see the module docstring.  Only ``events``' local ones are read."""
    entered: dict[int, tuple[str, int]] = {}  # member -> (state, when it entered it)
    samples: list[int] = []
    lower: list[tuple[int, str]] = []  # (ns the timeout must exceed, why)
    for event in events:
        if event.dir != "local":
            continue
        if event.type == "MemberStart":
            entered.pop(event.node, None)
            continue
        if event.type != "ElectionStateChange":
            continue
        source, target = event.fields.get("from"), event.fields.get("to")
        previous = entered.get(event.node)
        if previous is not None and previous[0] == source:
            length = event.ts - previous[1]
            if source in _BALLOTS and target == "CANVASS":
                samples.append(length)
            elif source == "FOLLOWER_BALLOT":
                lower.append((length, f"member {event.node}'s FOLLOWER_BALLOT -> {target} after {length / MS:.1f}ms"))
            elif source == "NOMINATE":
                lower.append((2 * length, f"member {event.node}'s NOMINATE of {length / MS:.1f}ms (at most half of it)"))
        entered[event.node] = (target, event.ts)
    where = "in the agent logs"
    if not samples:
        samples, where = wire_samples(), "on the wire (from a RequestVote or granted Vote to the next CanvassPosition)"
        if len(samples) < 2:
            return None
    samples.sort()
    median = samples[len(samples) // 2]
    value = _round(median, 10 * MS)
    note = (f"{ELECTION_TIMEOUT}={value // MS}ms inferred from {len(samples)} ballot(s) timing out back to CANVASS"
            f" {where} ({samples[0] / MS:.1f} to {samples[-1] / MS:.1f}ms)")
    above = [why for bound, why in lower if bound >= value]
    if above:
        note += f"; but {len(above)} earlier exit(s) say it is longer (e.g. {above[0]}): check it"
    return Inferred(ELECTION_TIMEOUT, value, note)


def _ballots_on_the_wire(events: list[Event]) -> list[int]:
    """From each member's RequestVote or granted Vote to its next CanvassPosition, when nothing in
    between says it led or followed (its own NewLeadershipTerm/AppendPosition/CommitPosition, or a
    NewLeadershipTerm to it)."""
    ballot: dict[int, int] = {}
    samples: list[int] = []
    for event in events:
        if event.dir == "local" and event.type == "MemberStart":
            ballot.pop(event.node, None)
        elif event.dir == "in" and event.type == "NewLeadershipTerm":
            ballot.pop(event.node, None)
        elif event.dir == "out" and event.channel == "consensus":
            if event.type == "RequestVote" or (event.type == "Vote" and event.fields.get("vote") in ("TRUE", True)):
                ballot.setdefault(event.node, event.ts)
            elif event.type == "CanvassPosition" and event.node in ballot:
                samples.append(event.ts - ballot.pop(event.node))
            elif event.type in ("NewLeadershipTerm", "AppendPosition", "CommitPosition"):
                ballot.pop(event.node, None)
    return samples


def infer_settings(events: Iterable[Event] | EventColumns) -> list[Inferred]:
    """What the capture's sends show of the members' settings (possibly nothing)."""
    if isinstance(events, EventColumns):
        return _infer_from_columns(events)
    ordered = sorted(events, key=lambda e: e.ts)
    heartbeats: dict[tuple[int, int | None], list[int]] = defaultdict(list)
    canvass: dict[tuple[int, int | None], list[int]] = defaultdict(list)
    for event in ordered:
        if event.dir != "out" or event.channel != "consensus":
            continue
        if event.type in ("AppendPosition", "CommitPosition"):
            heartbeats[(event.node, event.peer)].append(event.ts)
        elif event.type == "CanvassPosition":
            canvass[(event.node, event.peer)].append(event.ts)
    found = [_heartbeat_interval(_gaps(heartbeats, 10 * MS, 2_000 * MS)),
             _status_interval(_gaps(canvass, 10 * MS, 1_000 * MS)), _heartbeat_timeout(ordered),
             _election_timeout(ordered, lambda: _ballots_on_the_wire(ordered))]
    return [one for one in found if one is not None]


#: The types `_infer_from_columns` tells apart (a granted Vote apart from the others), each a number.
_COLUMN_TYPES = ("AppendPosition", "CommitPosition", "CanvassPosition", "NewLeadershipTerm", "MemberStart",
                 "ElectionStateChange", "RequestVote", "granted Vote")


def _infer_from_columns(columns: EventColumns) -> list[Inferred]:
    """`infer_settings` of events held as columns: the same sends gathered with array operations, and
    the silences of `_heartbeat_timeout` found from the few canvasses that begin an election."""
    order = None  # the importer's columns are in time order already: then they are read as they are
    if len(columns.ts) > 1 and not bool((columns.ts[1:] >= columns.ts[:-1]).all()):
        order = np.argsort(columns.ts, kind="stable")

    def in_time_order(values: np.ndarray) -> np.ndarray:
        return values if order is None else values[order]

    ts, node, direction = in_time_order(columns.ts), in_time_order(columns.node), in_time_order(columns.dir)
    has_peer, peer, channel = in_time_order(columns.has_peer), in_time_order(columns.peer), in_time_order(columns.channel)
    # Each row's type as its number in _COLUMN_TYPES (1 on; 0 for the others), from its entry's.
    number = {name: code for code, name in enumerate(_COLUMN_TYPES, start=1)}
    entries = columns.entries
    of_entry = np.fromiter((number["granted Vote"] if t == "Vote" and f.get("vote") in ("TRUE", True)
                            else number.get(t, 0) for t, f in zip(entries.types, entries.fields, strict=True)),
                           np.uint8, len(entries.types))
    kind = in_time_order(of_entry[columns.entry]) if len(columns.entry) else np.zeros(0, np.uint8)

    def of_type(*wanted: str) -> np.ndarray:
        found = kind == number[wanted[0]]
        for name in wanted[1:]:
            found |= kind == number[name]
        return found

    out, inward, local = (direction == DIRECTIONS.index(name) for name in ("out", "in", "local"))
    consensus = channel == CHANNELS.index("consensus")

    peer_or_none = np.where(has_peer, peer.astype(np.int64), 1 << 40)  # no peer: a value no peer has

    def gaps(mask: np.ndarray, high: int) -> np.ndarray:
        rows = np.flatnonzero(mask)
        return _gaps_of_rows(node[rows], peer_or_none[rows], ts[rows], 10 * MS, high)

    heartbeat_gaps = gaps(out & consensus & of_type("AppendPosition", "CommitPosition"), 2_000 * MS)
    canvass_rows = out & consensus & of_type("CanvassPosition")
    canvass_gaps = gaps(canvass_rows, 1_000 * MS)
    # _heartbeat_timeout: per member, a canvass begins an election when the last of its marks (a
    # CommitPosition/NewLeadershipTerm received, a canvass, a MemberStart) before it is not a canvass;
    # the leader is the sender of that mark when it is a CommitPosition/NewLeadershipTerm.
    received = inward & has_peer & (consensus | (channel == CHANNELS.index("log")))
    leads = received & of_type("CommitPosition", "NewLeadershipTerm")
    starts = local & of_type("MemberStart")
    marks = np.flatnonzero(leads | canvass_rows | starts)
    marks = marks[stable_order(node[marks])]
    heard_rows = np.flatnonzero(received)  # by (member, peer), each in order
    heard_node, heard_peer = node[heard_rows], peer[heard_rows]
    heard_pair = (heard_node << 32) + heard_peer
    small = bool(len(heard_rows)) and (0 <= int(heard_peer.min()) and int(heard_peer.max()) < 1 << 32
                                       and -(1 << 31) <= int(heard_node.min()) and int(heard_node.max()) < 1 << 31)
    # the order of heard_pair: by (member, peer) where heard_pair numbers them in that order
    by_pair = stable_order(heard_node, heard_peer) if small else np.argsort(heard_pair, kind="stable")
    heard_rows, heard_pair = heard_rows[by_pair], heard_pair[by_pair]
    samples: list[int] = []
    # The canvasses whose mark before (the same member's) is a lead and not a canvass (a canvass after a
    # canvass is still canvassing; with no lead before it, its leader_of entry was never set or was taken).
    follows_lead = np.zeros(len(marks), dtype=bool)
    if len(marks):
        follows_lead[1:] = ((node[marks[1:]] == node[marks[:-1]]) & leads[marks[:-1]] & ~canvass_rows[marks[:-1]])
    beginning = np.flatnonzero(canvass_rows[marks] & follows_lead)
    if small and len(beginning):
        # Each canvass's last message from its leader before it, all at once: the heard rows numbered by
        # (pair, row), in order, and each canvass placed among them.
        rows, leader = marks[beginning], peer[marks[beginning - 1]]
        pair = (node[rows] << 32) + leader
        low = np.searchsorted(heard_pair, pair, side="left")
        pair_number = np.zeros(len(heard_pair), dtype=np.int64)
        pair_number[1:] = np.cumsum(heard_pair[1:] != heard_pair[:-1])
        span = len(ts) + 1
        numbered = pair_number * span + heard_rows
        at = np.searchsorted(numbered, pair_number[np.minimum(low, len(heard_pair) - 1)] * span + rows,
                             side="left") - 1
        heard = (low < len(heard_pair)) & (heard_pair[np.minimum(low, len(heard_pair) - 1)] == pair) & (at >= low)
        silence = ts[rows] - ts[heard_rows[np.maximum(at, 0)]]
        samples = silence[heard & (silence >= 1_000 * MS)].tolist()
    for k in ([] if small else beginning.tolist()):
        row, before = int(marks[k]), int(marks[k - 1])
        pair = (int(node[row]) << 32) + int(peer[before])
        low = int(np.searchsorted(heard_pair, pair, side="left"))
        high = int(np.searchsorted(heard_pair, pair, side="right"))
        last = int(np.searchsorted(heard_rows[low:high], row, side="left")) - 1  # the last one before the canvass
        if last >= 0 and ts[row] - ts[heard_rows[low + last]] >= 1_000 * MS:
            samples.append(int(ts[row] - ts[heard_rows[low + last]]))
    # _election_timeout: the agent logs' ballots (local rows, few), else the ballots on the wire.
    ballots = [columns.event(row if order is None else int(order[row]))
               for row in np.flatnonzero(local & of_type("MemberStart", "ElectionStateChange")).tolist()]
    on_wire = functools.partial(
        _ballots_of_rows, node, ts,
        begins=out & consensus & of_type("RequestVote", "granted Vote"),
        ends=canvass_rows,
        resets=(starts | (inward & of_type("NewLeadershipTerm"))
                | (out & consensus & of_type("NewLeadershipTerm", "AppendPosition", "CommitPosition"))))
    found = [_heartbeat_interval(heartbeat_gaps), _status_interval(canvass_gaps), _timeout_from(samples),
             _election_timeout(ballots, on_wire)]
    return [one for one in found if one is not None]


def _ballots_of_rows(node: np.ndarray, ts: np.ndarray, *, begins: np.ndarray, ends: np.ndarray,
                     resets: np.ndarray) -> list[int]:
    """`_ballots_on_the_wire` of rows in time order: per member, from the first row that ``begins`` a
    ballot after the last row that ``ends`` one (a CanvassPosition, a sample if a ballot began) or
    ``resets`` it, to the next row that ends one."""
    rows = np.flatnonzero(begins | ends | resets)
    rows = rows[stable_order(node[rows])]  # by member, each in time order
    count = len(rows)
    if not count:
        return []
    member = node[rows]
    positions = np.arange(count)
    new_member = np.ones(count, dtype=bool)
    new_member[1:] = member[1:] != member[:-1]
    group_start = np.maximum.accumulate(np.where(new_member, positions, 0))  # each row's member's first row
    boundary = ends[rows] | resets[rows]
    last_boundary = np.maximum.accumulate(np.where(boundary, positions, -1))
    before = np.full(count, -1, dtype=np.int64)
    before[1:] = last_boundary[:-1]
    before = np.maximum(before, group_start - 1)  # the last boundary before each row, within its member
    begin_at = np.where(begins[rows], positions, count)
    next_begin = np.append(np.minimum.accumulate(begin_at[::-1])[::-1], count)
    closing = np.flatnonzero(ends[rows])
    first = next_begin[before[closing] + 1]
    taken = first < closing
    return (ts[rows[closing[taken]]] - ts[rows[first[taken]]]).tolist()


def apply_inferred(events: Iterable[Event], inferred: Iterable[Inferred]) -> tuple[list[Event], list[str]]:
    """``events`` with each inferred setting in every MemberStart's ``config`` where the member's own
    config (the inputs', or ``--config``) does not set it and it is not Aeron's default anyway; and the
    notes: each setting used, and each clash with a value given (the given one is kept)."""
    inferred = list(inferred)
    defaults = Config().to_properties()
    notes: list[str] = []
    out: list[Event] = []
    used: set[str] = set()
    clashes: set[str] = set()
    for event in events:
        if event.type != "MemberStart" or event.dir != "local":
            out.append(event)
            continue
        own = dict(event.fields.get("config") or {})
        added = {}
        for one in inferred:
            if one.name in own:
                given = Config.from_properties({one.name: own[one.name]}).to_properties()[one.name]
                if given != one.value_ns and one.name not in clashes:
                    clashes.add(one.name)
                    notes.append(f"warning: {one.name} is {given // MS}ms as given, but the capture shows "
                                 f"{one.value_ns // MS}ms ({one.note}); keeping {given // MS}ms")
            elif one.value_ns != defaults.get(one.name):
                added[one.name] = one.value_ns
        if added:
            try:
                Config.from_properties({**own, **added})
            except ValueError as error:
                notes.append(f"the settings the capture shows were not used: {error}")
                added = {}
        if added:
            used.update(added)
            event = dataclasses.replace(event, fields={**event.fields, "config": dict(sorted({**own, **added}.items()))})
        out.append(event)
    notes[:0] = [f"{one.note} (--config overrides)" for one in inferred if one.name in used]
    return out, notes
