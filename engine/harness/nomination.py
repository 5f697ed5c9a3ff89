"""Where a member's nomination delay comes from: the `RandomSource`s the harness gives a `Node`.

Aeron draws one ``nextDouble()`` per CANVASS → NOMINATE and scales it by ``electionTimeoutNs >> 1``.
The model asks its source and reports every draw as a `NominationDraw` output, with the source's
``source`` label; nobody reconstructs a draw afterwards.  The sources:

* `SeededNomination` — `java.util.Random(seed)`, bit for bit (``seeded``);
* `RecordedNomination` — node replay's oracle: the value that puts the nomination on the millisecond
  of the member's next recorded RequestVote, or the longest delay when none is within reach
  (``recorded``);
* `RecordedOrLate` — cluster replay's: the same where a recorded nomination is within reach, else as
  late as possible but one millisecond early (``recorded-late``), or the longest delay when the
  member has no recorded nomination left (``latest``);
* `ScriptedDelays` — a scenario's chosen delays, then another source (``scripted``).

`member_seed` says which seed a member's generator gets.  A restarted member is a new JVM: it gets a
new source (the recorded seed of its MemberStart), never the previous life's generator.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine.model.javarandom import JavaRandom, RandomSource

MS = 1_000_000


def member_seed(member_id: int, start_fields: Mapping[str, Any], seed: int | None) -> int:
    """MemberStart.seed when present and no seed is given, else ``(seed or 0) + memberId``."""
    recorded = start_fields.get("seed")
    if seed is None and isinstance(recorded, int) and not isinstance(recorded, bool):
        return recorded
    return (seed or 0) + member_id


class NodeClock:
    """The member's current tick, read during a draw (the oracles' clock).  An object, not a closure,
    so that a checkpoint's deep copy of a node copies the clock that reads it."""

    __slots__ = ("node", "fallback_ns")

    def __init__(self, node: Any = None, *, fallback_ns: int = 0) -> None:
        self.node = node
        self.fallback_ns = fallback_ns  # before the node exists (a draw while it boots)

    def __call__(self) -> int:
        return self.node.agent.clock_ns() if self.node is not None else self.fallback_ns


class SeededNomination:
    """`JavaRandom(seed)`."""

    __slots__ = ("seed", "random")
    source = "seeded"

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.random = JavaRandom(seed)

    def next_double(self) -> float:
        return self.random.next_double()


class RecordedNomination:
    """The oracle: the ``nextDouble()`` that puts the nomination where the recording shows it.

    ``nominations_ns`` are the times the member was seen sending its first RequestVote of each
    candidate term.  At a draw at time ``now`` (read from ``clock``) the oracle takes the first of
    them at or after ``now`` not yet used, and returns ``(delay + 0.5) / (electionTimeoutNs >> 1)``,
    so that Aeron's ``(long)(d * (electionTimeoutNs >> 1))`` gives back ``delay`` = that time
    (truncated to the millisecond tick) minus ``now``.  When no recorded nomination is within reach
    of this draw, the member did not nominate before something else ended its NOMINATE (a vote, a
    new leader): any delay that long fits, and the oracle returns the longest one.
    """

    __slots__ = ("nominations_ns", "half_timeout_ns", "clock", "seed", "_next")
    source = "recorded"

    def __init__(self, nominations_ns: Sequence[int], election_timeout_ns: int, clock: Callable[[], int], seed: int):
        self.nominations_ns = sorted(nominations_ns)
        self.half_timeout_ns = election_timeout_ns >> 1
        self.clock = clock
        self.seed = seed  # stated in the trace; the oracle itself draws nothing
        self._next = 0

    def next_double(self) -> float:
        now = self.clock()
        now_tick = now - now % MS
        times = self.nominations_ns
        half = self.half_timeout_ns
        delay = half - 1
        i = bisect.bisect_left(times, now_tick, lo=self._next)
        if i < len(times):
            target = times[i] - times[i] % MS
            if target - now_tick < half:
                delay = target - now_tick
                self._next = i + 1
        return (delay + 0.5) / half


class RecordedOrLate:
    """The nomination delays a recording implies, for a member whose generator is unknown.

    A draw puts the nomination on the millisecond of the member's next recorded RequestVote when that
    is within reach (as `RecordedNomination`), or as late as possible but one millisecond early when
    it is not (a capture's MemberStart times are often earlier than the processes really started).  A
    member with no recorded RequestVote left did not nominate, most likely because another member's
    request reached it first: its draw is the longest possible delay (``nextDouble`` just below 1),
    so that a recorded nominator is not beaten by an invented early one.  ``source`` says which of
    the three the last draw was.
    """

    __slots__ = ("nominations_ns", "half_timeout_ns", "clock", "source", "_next")

    def __init__(self, nominations_ns: Sequence[int], election_timeout_ns: int, clock: Callable[[], int]) -> None:
        self.nominations_ns = sorted(nominations_ns)
        self.half_timeout_ns = election_timeout_ns >> 1
        self.clock = clock
        self.source = "recorded"
        self._next = 0

    def next_double(self) -> float:
        now = self.clock()
        now_tick = now - now % MS
        times = self.nominations_ns
        while self._next < len(times) and times[self._next] - times[self._next] % MS < now_tick:
            self._next += 1
        if self._next < len(times):
            delay = times[self._next] - times[self._next] % MS - now_tick
            self._next += 1
            if delay < self.half_timeout_ns:
                self.source = "recorded"
                return (delay + 0.5) / self.half_timeout_ns
            # Out of reach (a capture's MemberStart times are often earlier than the real starts): as
            # late as possible, yet a millisecond before the members that never nominated.
            self.source = "recorded-late"
            return (max(self.half_timeout_ns - MS, 0) + 0.5) / self.half_timeout_ns
        self.source = "latest"
        return (self.half_timeout_ns - 0.5) / self.half_timeout_ns


class ScriptedDelays:
    """Chosen nomination delays, then ``fallback`` (default `java.util.Random(seed)`).

    Remembers every delay drawn (``draws``), so that a run with a member's own randomness can be
    written back as a scripted list."""

    __slots__ = ("delays_ns", "half_ns", "random", "draws")
    source = "scripted"

    def __init__(
        self, delays_ns: Sequence[int], election_timeout_ns: int, seed: int, fallback: RandomSource | None = None
    ) -> None:
        self.delays_ns = list(delays_ns)
        self.half_ns = election_timeout_ns >> 1
        self.random = fallback if fallback is not None else JavaRandom(seed)
        self.draws: list[int] = []

    def next_double(self) -> float:
        if self.delays_ns:
            delay = self.delays_ns.pop(0)
            if not 0 <= delay < self.half_ns:
                raise ValueError(f"a nomination delay must be in [0, {self.half_ns}) ns, got {delay}")
            value = (delay + 0.5) / self.half_ns
        else:
            value = self.random.next_double()
        self.draws.append(int(value * self.half_ns))
        return value
