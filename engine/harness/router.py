"""The in-process network between members: a delay per link, and cuts that drop what they separate.

`LinkRouter.route(send)` turns one member's `Send` into the input its peer receives (a
`ConsensusMessage`, or a `LogFrame` on the log channel), scheduled on the driver's clock at
``send.ts`` + that link's delay, unless a cut separates the two when it is sent.  Whether the peer is
running when it arrives is the driver's to say (`ClusterDriver.feed_at`).

Cuts are named so that a heal can lift some and keep others: ``isolate N``, ``partition 0,1 | 2``,
``oneway 0->1`` (the simulator's ``NetworkFault`` observations, `apply_fault`, and the scenario
runner's ``isolate``/``heal``).  A ``link`` fault changes a link's delay (or every link's) from then on.

Used by cluster replay and the scenario runner; the simulator has Aeron's wire instead
(`recorder.simulate.wire`), on the same clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from engine.model.inputs import ConsensusMessage, Input, LogFrame
from engine.model.outputs import Send

MS = 1_000_000
DEFAULT_LINK_DELAY_NS = MS
ROUTED_CHANNELS = frozenset({"consensus", "log"})

#: Schedules ``item`` to reach ``member_id`` at ``at_ns``; ``send`` is what it came from.
Arrival = Callable[[int, int, Input, Send], Any]


class LinkRouter:
    """Links between members: delays and cuts (see the module docstring)."""

    def __init__(
        self,
        arrive: Arrival,
        members: Iterable[int],
        *,
        delays: Mapping[tuple[int, int], int] | None = None,
        default_ns: int | None = None,
    ) -> None:
        self.arrive = arrive
        self.members = sorted(members)
        self.delays = dict(delays or {})
        if default_ns is None:
            overall = sorted(self.delays.values())
            default_ns = overall[(len(overall) - 1) // 2] if overall else DEFAULT_LINK_DELAY_NS
        self.default_ns = default_ns
        self.cuts: list[tuple[str, frozenset[tuple[int, int]]]] = []

    # -- links ----------------------------------------------------------------------------------------------

    def delay(self, source: int, target: int) -> int:
        return self.delays.get((source, target), self.default_ns)

    def is_cut(self, source: int, target: int) -> bool:
        return any((source, target) in pairs for _, pairs in self.cuts)

    def cut(self, name: str, pairs: Iterable[tuple[int, int]]) -> None:
        self.cuts.append((name, frozenset(pairs)))

    def isolate(self, member: int) -> None:
        others = [o for o in self.members if o != member]
        self.cut(f"isolate {member}", [(member, o) for o in others] + [(o, member) for o in others])

    def heal(self, names: Iterable[str] | None = None) -> None:
        """Lift the cuts named (every cut when ``names`` is None)."""
        if names is None:
            self.cuts = []
        else:
            lifted = set(names)
            self.cuts = [c for c in self.cuts if c[0] not in lifted]

    def apply_fault(self, fields: Mapping[str, Any]) -> None:
        """One ``NetworkFault`` observation (the simulator's fields)."""
        kind = fields.get("fault")
        if kind == "partition":
            groups: Sequence[tuple[int, ...]] = [tuple(int(m) for m in g) for g in fields.get("groups") or []]
            pairs = {(a, b) for i, g in enumerate(groups) for j, h in enumerate(groups) if i != j for a in g for b in h}
            self.cut("partition " + " | ".join(",".join(str(m) for m in g) for g in groups), pairs)
        elif kind == "isolate":
            self.isolate(int(fields["member"]))
        elif kind == "oneway":
            source, target = int(fields["from"]), int(fields["to"])
            self.cut(f"oneway {source}->{target}", {(source, target)})
        elif kind == "heal":
            healed = fields.get("healed")
            self.heal(healed if isinstance(healed, list) else None)
        elif kind == "link":
            latency = fields.get("latency")
            if isinstance(latency, int) and not isinstance(latency, bool):
                source, target = fields.get("from"), fields.get("to")
                if isinstance(source, int) and isinstance(target, int):
                    self.delays[(source, target)] = latency
                else:
                    self.default_ns = latency
                    for link in self.delays:
                        self.delays[link] = latency

    # -- routing ----------------------------------------------------------------------------------------------

    def deliverable(self, send: Send) -> bool:
        """Would ``send`` reach its peer (a member of this cluster, on a routed channel, no cut between)?"""
        source, target = send.node, send.peer
        return (
            target is not None
            and target != source
            and target in self.members
            and send.channel in ROUTED_CHANNELS
            and not self.is_cut(source, target)
        )

    def route(self, send: Send) -> bool:
        """Schedule ``send``'s arrival at its peer; False when nothing will arrive."""
        if not self.deliverable(send):
            return False
        target = send.peer
        assert target is not None
        if send.channel == "log":
            item: Input = LogFrame(message=send.message, log_position=send.log_position)
        else:
            item = ConsensusMessage(message=send.message, peer=send.node)
        self.arrive(send.ts + self.delay(send.node, target), target, item, send)
        return True
