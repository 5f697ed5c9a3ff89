"""The seeded property loop over the simulator (issue 11, item 6): random incidents, two properties.

A seed gives one incident, as a scenario file (`scenario_for`): 3 or 5 members, Aeron timeouts drawn
short enough that elections happen within the run, network loss and duplication, a client at low
load (a message every 20-50 ms) or at high load (one per ms), and one to three faults — crash or
clean stop of the leader or a follower (most of them restarted later), a partition, an isolation, a
one-way cut (each healed after a while), or a lossy link.  `check` simulates it (`recorder.simulate`:
the engine's members on Aeron's wire, the one cluster driver) and replays the simulator's own output
node by node (`engine.replay`), and holds it to:

* every Raft invariant of `engine.invariants` (checked by the replay as the members' records come out);
* node replay reproduces the simulator's run exactly: zero divergences.  The simulator and node
  replay are the same model on the same driver; a divergence means the harness lost or invented an
  input (a draw, an offer the wire refused, frames that arrived together), which is what drifted
  before (issue 11: re-seeding; issue 12: the back-pressure a leader meets sending to a dead follower).

Plain seeds, not Hypothesis: a seed is the whole test case, printed on failure and replayable with
`python benchmarks/simulation_properties.py --seed N --load high`; a failing seed is kept as a
regression scenario in ``tests/testdata/simulation/`` (``--keep``), which the test suite replays too.
Shared by `tests/test_simulation_properties.py` (a few hundred runs within CI time) and the benchmark
script (long runs).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from engine.replay import replay
from recorder.simulate.cluster import simulate
from recorder.simulate.scenario import parse_scenario

REGRESSIONS = Path(__file__).resolve().parent / "testdata" / "simulation"
LOADS = ("low", "high")


def scenario_for(seed: int, load: str) -> str:
    """The incident of ``seed`` at ``load`` ("low" or "high"), as scenario TOML."""
    if load not in LOADS:
        raise ValueError(f"load must be one of {LOADS}, got {load!r}")
    rng = random.Random(f"recount-properties:{seed}:{load}")
    members = rng.choice((3, 3, 5))
    high = load == "high"
    duration_ms = rng.randint(3500, 4500) if high else rng.randint(3000, 6000)
    heartbeat_timeout_ms = rng.choice((500, 1000, 1500, 2000))
    election_timeout_ms = rng.choice((300, 500, 1000))
    lines = [
        f'name = "property-{load}-{seed}"',
        f'description = "tests/simulation_properties.py: seed {seed}, {load} load"',
        f"seed = {seed}",
        f'duration = "{duration_ms}ms"',
        "[cluster]",
        f"members = {members}",
        "[config]",
        f'"aeron.cluster.leader.heartbeat.timeout" = "{heartbeat_timeout_ms}ms"',
        f'"aeron.cluster.leader.heartbeat.interval" = "{rng.choice((50, 100, 200))}ms"',
        f'"aeron.cluster.election.timeout" = "{election_timeout_ms}ms"',
        f'"aeron.cluster.election.status.interval" = "{rng.choice((20, 50, 100))}ms"',
        f'"aeron.cluster.startup.canvass.timeout" = "{heartbeat_timeout_ms * rng.choice((2, 3))}ms"',
        "[network]",
        f"loss = {rng.choice((0.0, 0.0, 0.01, 0.03))}",
        f"duplicate = {rng.choice((0.0, 0.0, 0.01))}",
        "[[client]]",
        f'start = "{rng.randint(300, 1200)}ms"',
    ]
    if high:
        lines += ['every = "1ms"', f"count = {rng.randint(800, 1500)}", "size = 32"]
    else:
        lines += [f'every = "{rng.choice((20, 50))}ms"', f"count = {rng.randint(20, 100)}", "size = 32"]
    at = rng.randint(800, 1800)
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(("crash", "crash", "stop", "partition", "isolate", "oneway", "loss"))
        lines += ["[[fault]]", f'at = "{at}ms"']
        if kind in ("crash", "stop"):
            lines += [f'kind = "{kind}"', f'member = "{rng.choice(("leader", "follower"))}"']
            if rng.random() < 0.7:
                at += rng.randint(300, 1500)
                lines += ["[[fault]]", f'at = "{at}ms"', 'kind = "restart"', 'member = "crashed"']
        elif kind == "partition":
            ids = list(range(members))
            rng.shuffle(ids)
            cut = rng.randint(1, members // 2)
            groups = [sorted(ids[:cut]), sorted(ids[cut:])]
            lines += ['kind = "partition"', f"groups = {groups}", f'until = "{at + rng.randint(300, 3000)}ms"']
        elif kind == "isolate":
            lines += ['kind = "isolate"', f'member = "{rng.choice(("leader", "follower"))}"',
                      f'until = "{at + rng.randint(300, 3000)}ms"']
        elif kind == "oneway":
            lines += ['kind = "oneway"', 'from = "leader"', 'to = "follower"', f'until = "{at + rng.randint(300, 3000)}ms"']
        else:
            source, target = rng.sample(range(members), 2)
            lines += ['kind = "link"', f"from = {source}", f"to = {target}", f"loss = {rng.choice((0.2, 0.5))}"]
        at += rng.randint(300, 1500)
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one incident gave: its divergences and broken invariants (the first few of each)."""

    name: str
    divergences: int
    invariants: tuple[str, ...]
    first_divergences: tuple[str, ...]
    elections: int
    refused_offers: int
    #: PublicationStatus events: a consensus publication that lost its receiver, and one whose sender
    #: fell behind what was offered (the environment the replay must be told about).
    disconnections: int = 0
    sender_behind: int = 0

    @property
    def holds(self) -> bool:
        return self.divergences == 0 and not self.invariants and self.refused_offers == 0

    def describe(self) -> str:
        parts = [f"{self.name}: {self.divergences} divergence(s), {len(self.invariants)} invariant(s) broken"]
        if self.refused_offers:
            parts.append(f"{self.refused_offers} offer(s) the engine made that the simulated wire refused")
        return "; ".join(parts + list(self.invariants[:3]) + list(self.first_divergences[:3]))


def check(text: str, *, source: str = "scenario") -> Outcome:
    """Simulate the scenario ``text`` and replay its output node by node: the two properties."""
    scenario = parse_scenario(text, source=source)
    result = simulate(scenario)
    records = list(replay(result.events))
    summary = records[-1]
    invariants = tuple(f"invariant {r['name']} at member {r['node']}: {r['detail']}" for r in records
                       if r["kind"] == "invariant")
    divergences = [r for r in records if r["kind"] == "divergence"]
    first = tuple(_describe_divergence(r) for r in divergences[:3])
    elections = sum(result.stats["elections"].values())
    statuses = [e.fields for e in result.events if e.type == "PublicationStatus"]
    return Outcome(scenario.name, summary["divergences"], invariants, first, elections, result.stats["refusedOffers"],
                   sum(1 for f in statuses if not f["connected"]),
                   sum(1 for f in statuses if f["senderPosition"] is not None))


def check_seed(seed: int, load: str) -> Outcome:
    return check(scenario_for(seed, load), source=f"seed {seed} ({load} load)")


def regression_scenarios() -> list[Path]:
    """The scenarios kept because a seed once failed (``tests/testdata/simulation/*.toml``)."""
    return sorted(REGRESSIONS.glob("*.toml"))


def _describe_divergence(record: dict) -> str:
    side = record.get("expected") or record.get("actual") or {}
    return (f"member {record['node']} at {record['ts']}: {side.get('type')} to {side.get('peer')}"
            f" {'recorded, not modelled' if record.get('actual') is None else 'differs'}")
