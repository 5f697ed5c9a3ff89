"""The simulator's one virtual clock: a priority queue of (time, seq, action).

Everything that happens in a simulation (a datagram arriving, a member's deadline, a fault, a
client's next request) is an action scheduled at a time in ns.  `Scheduler.run_until` pops them in
(time, seq) order, where seq is the order they were scheduled in, so ties resolve the same way in
every run and in every process: there is no other source of ordering.  An action may schedule more
actions, at its own time or later, never earlier (that would be a bug in the caller, and raises).

Actions can be cancelled through the `Timer` handle `at` returns (a cancelled action stays in the
heap and is skipped when popped, which keeps cancellation O(1)).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable


class Timer:
    __slots__ = ("time_ns", "action", "cancelled")

    def __init__(self, time_ns: int, action: Callable[[], None]) -> None:
        self.time_ns = time_ns
        self.action = action
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Scheduler:
    def __init__(self) -> None:
        self.now_ns = 0
        self._queue: list[tuple[int, int, Timer]] = []
        self._seq = 0
        self.actions_run = 0

    def at(self, time_ns: int, action: Callable[[], None]) -> Timer:
        """Run ``action`` at ``time_ns`` (after everything already scheduled for that time)."""
        if time_ns < self.now_ns:
            raise ValueError(f"cannot schedule at {time_ns} ns: the clock is already at {self.now_ns} ns")
        timer = Timer(time_ns, action)
        heapq.heappush(self._queue, (time_ns, self._seq, timer))
        self._seq += 1
        return timer

    def after(self, delay_ns: int, action: Callable[[], None]) -> Timer:
        return self.at(self.now_ns + delay_ns, action)

    def next_time(self) -> int | None:
        while self._queue and self._queue[0][2].cancelled:
            heapq.heappop(self._queue)
        return self._queue[0][0] if self._queue else None

    def run_until(self, end_ns: int, on_progress: Callable[[int], None] | None = None) -> None:
        """Run every action scheduled up to and including ``end_ns``, then set the clock to ``end_ns``."""
        queue = self._queue
        while queue and queue[0][0] <= end_ns:
            time_ns, _, timer = heapq.heappop(queue)
            if timer.cancelled:
                continue
            self.now_ns = time_ns
            self.actions_run += 1
            timer.action()
            if on_progress is not None and self.actions_run % 4096 == 0:
                on_progress(time_ns)
        self.now_ns = max(self.now_ns, end_ns)
