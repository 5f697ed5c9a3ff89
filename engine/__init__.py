"""The engine: a deterministic, single-threaded model of an Aeron 1.47.3 cluster member.

What it holds.  `Node` (engine.model.node) is the driving API, sans I/O in the manner of etcd's RawNode
and h11: feed it an input with its time (`step`), let time pass (`advance`), take what it produced
(`take_outputs`: sends, election state and role changes, node-state.dat and recording.log writes,
log appends — engine.model.outputs).  Inside, `ConsensusModuleAgent` (engine.model.agent) runs Aeron's duty
cycle and owns an `Election` (engine.model.election: all 18 states of `io.aeron.cluster.Election`) while
one is running; `engine.model.members` has `ClusterMember` and Aeron's quorum helpers; the media driver,
archive and clustered service are simulated in engine.model.sim_parts.  `engine.replay`, `engine.trace`
and `engine.invariants` re-run recorded members and check them; `engine.scenario` runs the
datadriven scenario files (tests/testdata) and `recount export-scenario`'s output.

What it may import: only `formats` (message types, recording.log and node-state.dat models).

Invariants.  No wall clock: time is an input.  No randomness but the injected `RandomSource`
(`JavaRandom`, bit-exact `java.util.Random`, or a replay's oracle).  No threads.  Outputs never
depend on set or dict hash order.  The same inputs give the same outputs, byte for byte.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

#: Where each public name lives.  Imported on first use (PEP 562), so that a command that needs only
#: `engine.model.config` does not load the whole model: `recount convert` starts faster.
_HOMES = {
    "Config": "engine.model.config",
    "Election": "engine.model.election",
    "ElectionState": "engine.model.election",
    "ModelFlags": "engine.model.flags",
    "JavaRandom": "engine.model.javarandom",
    "RandomSource": "engine.model.javarandom",
    "ClusterMember": "engine.model.members",
    "parse_cluster_members": "engine.model.members",
    "MemberStart": "engine.model.inputs",
    "Node": "engine.model.node",
    **{name: "engine.model.outputs" for name in (
        "Divergence", "ElectionStarted", "Invariant", "LogAppend", "ModuleStateChange", "NodeStateWrite", "Output",
        "RecordingLogChange", "RoleChange", "Send", "StateChange",
    )},
}

if TYPE_CHECKING:
    from engine.model.config import Config
    from engine.model.election import Election, ElectionState
    from engine.model.flags import ModelFlags
    from engine.model.javarandom import JavaRandom, RandomSource
    from engine.model.members import ClusterMember, parse_cluster_members
    from engine.model.inputs import MemberStart
    from engine.model.node import Node
    from engine.model.outputs import (
        Divergence,
        ElectionStarted,
        Invariant,
        LogAppend,
        ModuleStateChange,
        NodeStateWrite,
        Output,
        RecordingLogChange,
        RoleChange,
        Send,
        StateChange,
    )


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


__all__ = [
    "ClusterMember",
    "Config",
    "Divergence",
    "Election",
    "ElectionStarted",
    "ElectionState",
    "Invariant",
    "JavaRandom",
    "LogAppend",
    "MemberStart",
    "ModelFlags",
    "ModuleStateChange",
    "Node",
    "NodeStateWrite",
    "Output",
    "RandomSource",
    "RecordingLogChange",
    "RoleChange",
    "Send",
    "StateChange",
    "parse_cluster_members",
]
