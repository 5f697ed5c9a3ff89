"""The simulated network: seeded per-link latency, jitter, loss and duplication, and partitions.

Hosts are the members (by id) and ``"client"``.  `Network.transmit(source, target)` says what
becomes of one datagram sent now: a list of one-way delays in ns, one per copy that arrives (empty
when it is lost or the path is cut, two when it is duplicated).  Each copy gets its own jitter, so
datagrams may overtake each other, as on a real network (Aeron's receivers put them back in order).

Cuts are rules that stay until healed: `partition` (groups that cannot reach each other),
`isolate` (one host from everyone, both ways) and `oneway` (an asymmetric cut: ``a`` cannot reach
``b`` while ``b`` still reaches ``a``).  Each rule gets an id so a timed fault can heal exactly its
own rule; `heal()` with no id lifts them all.  Link behaviour can be changed while running
(`set_link`), for one direction or for every link.

Determinism: the only randomness is the `random.Random` the caller passes, drawn in call order;
the same calls in the same order give the same fates.  No clocks: delays are relative.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from recorder.simulate.scenario import LinkSpec, NetworkSpec

Host = int | str


@dataclass(frozen=True, slots=True)
class Cut:
    """One active cut rule: the directed (source, target) pairs it blocks."""

    rule_id: int
    name: str
    pairs: frozenset[tuple[Host, Host]]


class Network:
    """Fates of datagrams between hosts, drawn from one seeded generator."""

    def __init__(self, spec: NetworkSpec, rng: random.Random, hosts: list[Host]) -> None:
        self._rng = rng
        self._hosts = list(hosts)
        self._default = spec.default
        self._links: dict[tuple[Host, Host], LinkSpec] = {}
        for source, target, link in spec.links:
            self._links[(source, target)] = link.over(self._links.get((source, target), LinkSpec()))
        self._cuts: list[Cut] = []
        self._next_rule_id = 1
        self.sent = 0
        self.lost = 0
        self.duplicated = 0
        self.cut = 0

    # --- link behaviour ---------------------------------------------------------------------------
    def link(self, source: Host, target: Host) -> LinkSpec:
        return self._links.get((source, target), LinkSpec()).over(self._default)

    def set_link(self, change: LinkSpec, source: Host | None = None, target: Host | None = None) -> None:
        """Change one direction's behaviour, or the default for every link when no pair is given."""
        if source is None:
            self._default = change.over(self._default)
            return
        self._links[(source, target)] = change.over(self._links.get((source, target), LinkSpec()))

    # --- cuts -------------------------------------------------------------------------------------
    def partition(self, groups: tuple[tuple[int, ...], ...]) -> int:
        """Members in different groups cannot reach each other (members in no group are untouched)."""
        pairs = set()
        for i, group in enumerate(groups):
            for j, other in enumerate(groups):
                if i != j:
                    pairs.update((a, b) for a in group for b in other)
        text = " | ".join(",".join(str(m) for m in g) for g in groups)
        return self._add_cut(f"partition {text}", pairs)

    def isolate(self, host: Host) -> int:
        pairs = {(host, other) for other in self._hosts if other != host}
        pairs |= {(other, host) for other in self._hosts if other != host}
        return self._add_cut(f"isolate {host}", pairs)

    def oneway(self, source: Host, target: Host) -> int:
        return self._add_cut(f"oneway {source}->{target}", {(source, target)})

    def heal(self, rule_id: int | None = None) -> list[str]:
        """Lift one rule (by id) or all of them; returns the names of the rules lifted."""
        lifted = [c for c in self._cuts if rule_id is None or c.rule_id == rule_id]
        self._cuts = [c for c in self._cuts if c not in lifted]
        return [c.name for c in lifted]

    def is_cut(self, source: Host, target: Host) -> bool:
        return any((source, target) in c.pairs for c in self._cuts)

    @property
    def active_cuts(self) -> list[str]:
        return [c.name for c in self._cuts]

    def _add_cut(self, name: str, pairs: set[tuple[Host, Host]]) -> int:
        rule_id = self._next_rule_id
        self._next_rule_id += 1
        self._cuts.append(Cut(rule_id, name, frozenset(pairs)))
        return rule_id

    # --- datagrams ----------------------------------------------------------------------------------
    def transmit(self, source: Host, target: Host) -> list[int]:
        """One-way delays (ns) of the copies of one datagram that arrive; [] if none does."""
        self.sent += 1
        if self.is_cut(source, target):
            self.cut += 1
            return []
        link = self.link(source, target)
        rng = self._rng
        # Draw every value whatever the outcome, so that a change of loss rate on one link does not
        # shift the random sequence seen by the fates of later, unrelated datagrams.
        lost = rng.random() < link.loss
        duplicated = rng.random() < link.duplicate
        delays = [link.latency_ns + self._jitter(link.jitter_ns) for _ in range(2)]
        if lost:
            self.lost += 1
            return []
        if duplicated:
            self.duplicated += 1
            return sorted(delays)
        return delays[:1]

    def _jitter(self, jitter_ns: int) -> int:
        return self._rng.randrange(jitter_ns) if jitter_ns > 0 else 0
