"""The harness: the one cluster driver every run of the model stands on.

What it holds.  `driver.ClusterDriver`: the members' `Node`s on one virtual clock (`clock.Clock`),
each member's next deadline scheduled on it, inputs fed now or at a time, whatever a member produced
handed over as one `Ready` to the runner that owns the driver, and checkpoints of it all.
`router.LinkRouter` carries members' sends to each other (link delays, named cuts).
`nomination` has the `RandomSource`s a member's nomination delay comes from (a seeded
java.util.Random, a recording's oracle, a scenario's script).  `events` is the edge where a capture
row (`formats.events.Event`) becomes a typed input.

Who stands on it.  Node replay and its comparison with a recording (`engine.replay`), cluster
replay (`engine.cluster_replay`), the datadriven scenario runner (`engine.scenario`) and the
simulator (`recorder.simulate`, which puts Aeron's wire on this clock): one driver, different
inputs, so they cannot drift apart.

What it may import: `formats` and `engine.model`; nothing of what stands on it (checked by
tests/test_architecture.py).

Invariants.  The clock is the only time; at one instant members' timers run first, in member-id
order, then everything else in the order it was scheduled.  No I/O, no threads, no randomness but
the members' sources.
"""
