"""The one virtual clock every run of the model shares: what is due, in a total order.

Everything that happens in a run — a member's own deadline, a message arriving, a recorded input, a
fault, a client's next request — is an action scheduled at a time in ns.  `Clock.run_until` pops them
in ``(time, phase, order, seq)`` order:

* at one instant, the members' own deadlines (`TIMERS`) come first, in member-id order: a member's
  timers run before what reaches it at the same instant, as `Node.step` itself does, and members are
  always visited in id order;
* then everything else (`ACTIONS`), in the order it was scheduled (``seq``), so that ties resolve the
  same way in every run and in every process.  There is no other source of ordering.

An action may schedule more actions, at its own time or later, never earlier (that would be a bug in
the caller, and raises).  An action is a callable and its arguments, so that a checkpoint that copies
the copies.  Cancelling is O(1): a cancelled action stays in the heap and is skipped when popped;
every `COMPACT_EVERY` pushes, a heap that is mostly cancelled actions is rebuilt without them (a
member's wakeup is moved on nearly every input, so they would otherwise pile up for as long as its
longest deadline, and every checkpoint would copy them).  The keys are unique, so the order in
which actions run is the same either way.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

#: The phase of a member's own deadline: first at an instant, in member-id order.
TIMERS = 0
#: The phase of everything else: after the timers, in the order scheduled.
ACTIONS = 1
#: Pushes between two looks at how much of the heap is cancelled actions.
COMPACT_EVERY = 64


class Timer:
    """A scheduled action; `cancel()` keeps it from running."""

    __slots__ = ("time_ns", "action", "args", "cancelled")

    def __init__(self, time_ns: int, action: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.time_ns = time_ns
        self.action = action
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Clock:
    """A priority queue of actions and the time now (ns)."""

    __slots__ = ("now_ns", "_queue", "_seq", "actions_run")

    def __init__(self, now_ns: int = 0) -> None:
        self.now_ns = now_ns
        self._queue: list[tuple[int, int, int, int, Timer]] = []
        self._seq = 0
        self.actions_run = 0

    def at(self, time_ns: int, action: Callable[..., Any], *args: Any) -> Timer:
        """Run ``action(*args)`` at ``time_ns``, after everything already scheduled for that time."""
        return self._push(time_ns, ACTIONS, 0, action, args)

    def after(self, delay_ns: int, action: Callable[..., Any], *args: Any) -> Timer:
        return self.at(self.now_ns + delay_ns, action, *args)

    def member_timer(self, time_ns: int, member_id: int, action: Callable[..., Any], *args: Any) -> Timer:
        """A member's own deadline: before the other actions of its instant, in member-id order."""
        return self._push(time_ns, TIMERS, member_id, action, args)

    def _push(self, time_ns: int, phase: int, order: int, action: Callable[..., Any], args: tuple[Any, ...]) -> Timer:
        if time_ns < self.now_ns:
            raise ValueError(f"cannot schedule at {time_ns} ns: the clock is already at {self.now_ns} ns")
        timer = Timer(time_ns, action, args)
        heapq.heappush(self._queue, (time_ns, phase, order, self._seq, timer))
        self._seq += 1
        if self._seq % COMPACT_EVERY == 0:
            self._compact()
        return timer

    def _compact(self) -> None:
        """Drop cancelled actions when they are most of the heap."""
        queue = self._queue
        live = [entry for entry in queue if not entry[4].cancelled]
        if len(live) * 2 < len(queue):
            queue[:] = live  # in place: `run_until` may be iterating this very list
            heapq.heapify(queue)

    def next_time(self) -> int | None:
        queue = self._queue
        while queue and queue[0][4].cancelled:
            heapq.heappop(queue)
        return queue[0][0] if queue else None

    def run_until(self, end_ns: int, on_progress: Callable[[int], None] | None = None) -> None:
        """Run every action due up to and including ``end_ns``, then set the clock to ``end_ns``."""
        queue = self._queue
        if not queue or queue[0][0] > end_ns:  # the common case in a replay: nothing due yet
            if end_ns > self.now_ns:
                self.now_ns = end_ns
            return
        pop = heapq.heappop
        while queue and queue[0][0] <= end_ns:
            time_ns, _, _, _, timer = pop(queue)
            if timer.cancelled:
                continue
            self.now_ns = time_ns
            self.actions_run += 1
            timer.action(*timer.args)
            if on_progress is not None and self.actions_run % 4096 == 0:
                on_progress(time_ns)
        if end_ns > self.now_ns:
            self.now_ns = end_ns

    def pending(self) -> int:
        """How many actions are scheduled and not cancelled."""
        return sum(1 for entry in self._queue if not entry[4].cancelled)
