"""The engine: a deterministic, single-threaded model of Aeron 1.47.3 cluster members, and the one
driver that runs them.

Two folders and what stands on them:

* `engine.model` — one member, as a value: `Node` (etcd raft's RawNode, h11's Connection) fed typed
  inputs (`engine.model.inputs`) with their time, giving a `Ready` of typed outputs
  (`engine.model.outputs`: sends, state and role changes, node-state.dat and recording.log writes,
  log appends, nomination draws) and a frozen `MemberView`.  Inside: Aeron's ConsensusModuleAgent
  and Election, the cluster-member table, config, behaviour flags per release, the simulated driver,
  archive and service, Aeron's exceptions.
* `engine.harness` — the one cluster driver: a virtual clock, the members on it, the router between
  them, checkpoints, the nomination sources, and the edge from capture rows to typed inputs.
* on top of both: node replay and its comparison with a recording (`engine.replay`), cluster replay
  (`engine.cluster_replay`), the datadriven scenario runner (`engine.scenario`), the trace format
  (`engine.trace`), the Raft safety checks (`engine.invariants`), and the models by Aeron version and
  the user-model plug-in loader (`engine.versions`).

What it may import: only `formats` (message types, recording.log and node-state.dat models).

Invariants.  No wall clock: time is an input.  No randomness but the injected `RandomSource`
(`JavaRandom`, bit-exact `java.util.Random`, or a replay's oracle), and every draw is an output.  No
threads.  Outputs never depend on set or dict hash order.  The same inputs give the same outputs,
byte for byte.
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
    from engine.model.inputs import MemberStart
    from engine.model.javarandom import JavaRandom, RandomSource
    from engine.model.members import ClusterMember, parse_cluster_members
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
