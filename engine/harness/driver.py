"""The one cluster driver: members on one virtual clock, what reaches them, checkpoints.

Every run of the model is this driver with different inputs (STYLE.md, "One driver"):

* node replay (`engine.replay`) feeds each member what the recording shows it received, and
  compares what the members produce with what the recording shows they sent;
* cluster replay (`engine.cluster_replay`) feeds the recording's external inputs and lets
  `LinkRouter` carry the members' own messages to each other;
* the datadriven scenario runner (`engine.scenario`) delivers hand-written messages and carries the
  members' own through a `LinkRouter` with a fixed latency and isolations;
* the simulator (`recorder.simulate`) puts Aeron's wire between members: it schedules datagrams on
  this driver's clock and feeds what completes a message.

What it holds.  A `Clock` (engine.harness.clock), and for each member its `Node`, the `RandomSource`
of its current life and its lifecycle.  Each member's next deadline (`Node.next_wakeup_ns`) is a
member timer on the clock, rescheduled after anything the member does, so `run_until` visits every
instant at which some member's timer can act, in time order (member-id order at one instant, before
anything else due then).  Whatever a member produced is handed to ``on_ready(member_id, ready)`` at
once, as one `Ready`, by the one method every path goes through (`_collect`); what to do with it
(compare it, route it, record it, print it) is the runner's business.

Checkpoints.  `checkpoint()` is a copy of the members and the clock that shares nothing mutable with
the running driver (the log's frames and node-state.dat's bytes are immutable, so they are shared,
not copied); `restore()` puts a copy of one back.  Runners that keep state of their own (a
comparison, a trace hash) checkpoint it beside this one.

Sans I/O: no clock but its own, no threads, no randomness but the members' sources.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from engine.harness.clock import Clock, Timer
from engine.model.inputs import End, Input, MemberStart
from engine.model.outputs import Ready

MS = 1_000_000


@dataclass(slots=True)
class Member:
    """What the driver knows of one member: its node, its current life's randomness, its lifecycle."""

    member_id: int
    node: Any
    nomination: Any
    lives: int = 1
    #: No more inputs will come (its End was fed, or the run stopped feeding it): its timers stop.
    ended: bool = False
    wakeup: Timer | None = None
    wakeup_ns: int | None = None

    @property
    def running(self) -> bool:
        return not self.ended and self.node.is_running


ReadyHandler = Callable[[int, Ready], None]


@dataclass(frozen=True, slots=True)
class DriverCheckpoint:
    """The members and the clock at one moment (opaque; give it to `ClusterDriver.restore`)."""

    now_ns: int
    state: tuple[Any, ...]


class ClusterDriver:
    """Members of one cluster on one clock; inputs in, `Ready` batches out (see the module docstring)."""

    def __init__(self, model: Any, *, on_ready: ReadyHandler, clock: Clock | None = None) -> None:
        self.model = model
        self.on_ready = on_ready
        self.clock = clock if clock is not None else Clock()
        self.members: dict[int, Member] = {}

    @property
    def now_ns(self) -> int:
        return self.clock.now_ns

    # -- members ------------------------------------------------------------------------------------------

    def start(self, member_id: int, start: MemberStart, nomination: Any, *, log_evidence: bool = False) -> Member:
        """A member's process starts at ``start.ts``: a new `Node` the first time, else a restart of the
        one it had (keeping the files ``start`` does not give) with ``nomination`` as its new generator."""
        member = self.members.get(member_id)
        if member is None:
            node = self.model.new_node(member_id, start, random=nomination)
            member = self.members[member_id] = Member(member_id, node, nomination)
        else:
            member.lives += 1
            member.ended = False
            member.nomination = nomination
            member.node.random = nomination  # a new process draws from a new generator
            member.node.step(start, start.ts)
        attach = getattr(nomination, "clock", None)
        if attach is not None and hasattr(attach, "node"):
            attach.node = member.node  # an oracle reads the time of the node it draws for
        if log_evidence:
            expect = getattr(member.node, "expect_log_evidence", None)  # a user model's Node may not take it
            if expect is not None:
                expect()
        member.node.advance(start.ts)
        self._collect(member)
        return member

    def feed(self, member_id: int, item: Input, now_ns: int) -> None:
        """``item`` reaches the member now (its timers due by then run first)."""
        member = self.members[member_id]
        if member.ended:
            return
        member.node.step(item, now_ns)
        if type(item) is End:
            member.ended = True
        self._collect(member)

    def feed_at(self, at_ns: int, member_id: int, item: Input) -> Timer:
        """``item`` reaches the member at ``at_ns`` (after the timers due then), if it is running then."""
        return self.clock.at(at_ns, self._arrive, member_id, item)

    def _arrive(self, member_id: int, item: Input) -> None:
        member = self.members.get(member_id)
        if member is not None and member.running:
            self.feed(member_id, item, self.clock.now_ns)

    def touch(self, member_id: int, now_ns: int) -> None:
        """Time passes for one member up to ``now_ns`` (something it is not fed happened then)."""
        member = self.members[member_id]
        if member.running:
            member.node.advance(now_ns)
            self._collect(member)

    def end(self, member_id: int) -> None:
        """Feed the member nothing more: its timers stop (the evidence of it ends here)."""
        member = self.members[member_id]
        member.ended = True
        self._cancel_wakeup(member)

    # -- time ---------------------------------------------------------------------------------------------

    def run_until(self, end_ns: int, on_progress: Callable[[int], None] | None = None) -> None:
        """Run everything due up to and including ``end_ns``: members' timers and scheduled actions."""
        self.clock.run_until(end_ns, on_progress)

    def advance_all(self, now_ns: int) -> None:
        """Every running member's clock to ``now_ns`` (in member-id order): the end of a run."""
        self.run_until(now_ns)
        for member_id in sorted(self.members):
            member = self.members[member_id]
            if member.running:
                member.node.advance(now_ns)
                self._collect(member)

    def _wake(self, member_id: int) -> None:
        member = self.members[member_id]
        member.wakeup = None
        member.wakeup_ns = None
        if member.running:
            member.node.advance(self.clock.now_ns)
            self._collect(member)

    # -- outputs ------------------------------------------------------------------------------------------

    def collect(self, member_id: int) -> None:
        """Hand over what the member produced outside a feed (e.g. after a runner stepped it directly)."""
        self._collect(self.members[member_id])

    def _collect(self, member: Member) -> None:
        node = member.node
        ready = node.take_outputs()
        if ready.outputs:
            self.on_ready(member.member_id, ready)
        # The member's next deadline, rescheduled when it moved (the hot path: it seldom does).
        tick = node.next_wakeup_ns() if not member.ended and node.is_running else None
        if tick is not None and tick < self.clock.now_ns:
            tick = self.clock.now_ns
        if tick == member.wakeup_ns and (tick is None or member.wakeup is not None):
            return
        self._cancel_wakeup(member)
        if tick is not None:
            member.wakeup = self.clock.member_timer(tick, member.member_id, self._wake, member.member_id)
            member.wakeup_ns = tick

    @staticmethod
    def _cancel_wakeup(member: Member) -> None:
        if member.wakeup is not None:
            member.wakeup.cancel()
        member.wakeup = None
        member.wakeup_ns = None

    # -- views and checkpoints ---------------------------------------------------------------------------

    def views(self) -> dict[int, Any]:
        """Each started member's `MemberView` now, by member id."""
        return {member_id: self.members[member_id].node.view() for member_id in sorted(self.members)}

    def checkpoint(self, keep: Iterable[Any] = ()) -> DriverCheckpoint:
        """The members and the clock now.  Objects in ``keep`` are referenced, not copied (what the
        clock's actions are bound to, when it is not the driver: the runner that owns it)."""
        state = copy.deepcopy((self.members, self.clock), self.copy_memo((self, *keep)))
        return DriverCheckpoint(self.clock.now_ns, state)

    def restore(self, checkpoint: DriverCheckpoint, keep: Iterable[Any] = ()) -> None:
        """Back to ``checkpoint`` (which stays usable: the driver gets a copy of it).  The clock's
        member timers stay bound to this driver; a runner's own actions to what ``keep`` names."""
        memo = self.copy_memo((self, *keep))
        for member in checkpoint.state[0].values():
            share = getattr(member.node, "clone_memo", None)
            if share is not None:
                memo.update(share())
        self.members, self.clock = copy.deepcopy(checkpoint.state, memo)

    def copy_memo(self, keep: Iterable[Any] = ()) -> dict[int, Any]:
        """A `copy.deepcopy` memo for a copy of this driver's state, or of an object holding it: the
        model and ``keep`` referenced, each node's big immutable buffers shared (`Node.clone_memo`)."""
        memo: dict[int, Any] = {id(self.model): self.model}
        for item in keep:
            memo[id(item)] = item
        for member in self.members.values():
            share = getattr(member.node, "clone_memo", None)
            if share is not None:
                memo.update(share())
        return memo
