"""The model: one Aeron 1.47.3 cluster member, as a value that is fed inputs and gives outputs.

What it holds.  `Node` (model.node) is the driving API in the manner of etcd raft's RawNode and h11:
``step(input, now_ns)``, ``advance(now_ns)``, ``take_outputs()`` and a frozen view of the member.
Inside, `ConsensusModuleAgent` (model.agent) runs Aeron's duty cycle and owns an `Election`
(model.election: all 18 states of `io.aeron.cluster.Election`) while one runs; model.members has
`ClusterMember` and Aeron's quorum helpers; the media driver, archive and clustered service the agent
talks to are the simulated parts of model.sim_parts; model.flags switches behaviour between Aeron
releases; model.exceptions are Aeron's exceptions.

What it may import: `formats` (message types, recording.log and node-state.dat) and itself.  It knows
nothing of recordings, clusters of nodes, traces or comparisons: those are the harness's
(`engine.harness`) and what is built on it (`engine.replay`, `engine.cluster_replay`,
`engine.scenario`).

Invariants.  No wall clock: time is an argument.  No randomness but the `RandomSource` the caller
injects, and every draw is an output.  No threads, no I/O.  Outputs never depend on hash order.
"""
