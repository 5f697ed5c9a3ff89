"""The Aeron Cluster properties the election model reads, with Aeron 1.47.3's defaults.

`Config` is a frozen value; build one with `Config()` (Aeron's defaults, aeron-election.md §5 and
aeron-formats.md §8.2) or `Config.from_properties({...})` from Aeron property names, as a
`MemberStart` event's ``config`` gives them.  Durations are nanoseconds; a property may be an int
(ns) or an Agrona duration string (``"1s"``, ``"200ms"``, ``"500us"``, ``"10ns"``; no suffix means
ns).  An unknown property is a `ValueError` naming it, and so is a value Aeron's
`ConsensusModule.Context.conclude()` would refuse.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

MS = 1_000_000
SECOND = 1_000_000_000

#: `SemanticVersion.compose(0, 0, 1)`: the default `appVersion`.
DEFAULT_APP_VERSION = 1
#: `ConsensusModule.Configuration.PROTOCOL_SEMANTIC_VERSION` = compose(1, 0, 0), sent in CanvassPosition
#: and RequestVote (the capture's agent log prints it as ``protocolVersion=1.0.0``).
PROTOCOL_SEMANTIC_VERSION = 1 << 16

_DURATION = re.compile(r"^\s*(\d+)\s*(ns|us|ms|s)?\s*$", re.IGNORECASE)
_UNIT_NS = {None: 1, "ns": 1, "us": 1_000, "ms": MS, "s": SECOND}


@dataclass(frozen=True, slots=True)
class Config:
    election_timeout_ns: int = 1 * SECOND
    election_status_interval_ns: int = 100 * MS
    startup_canvass_timeout_ns: int = 60 * SECOND
    leader_heartbeat_timeout_ns: int = 10 * SECOND
    leader_heartbeat_interval_ns: int = 200 * MS
    session_timeout_ns: int = 10 * SECOND
    termination_timeout_ns: int = 10 * SECOND
    replication_progress_timeout_ns: int = 10 * SECOND
    appointed_leader_id: int = -1
    app_version: int = DEFAULT_APP_VERSION
    file_sync_level: int = 0
    service_count: int = 1
    #: log term length: `isCatchupNearLive` uses min(termLength / 4, LIVE_ADD_MAX_WINDOW).
    log_term_length: int = 64 * 1024 * 1024

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any] | None) -> Config:
        config = cls()
        if not properties:
            return config
        changes: dict[str, int] = {}
        for name in sorted(properties):
            spec = _PROPERTIES.get(name)
            if spec is None:
                known = ", ".join(sorted(_PROPERTIES))
                raise ValueError(f"unknown Aeron property {name!r} (known: {known})")
            attr, kind = spec
            changes[attr] = _parse(name, properties[name], kind)
        return replace(config, **changes).conclude()

    def conclude(self) -> Config:
        """Aeron's `conclude()` checks on these values; returns self."""
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name.endswith("_ns") and value <= 0:
                raise ValueError(f"{f.name} must be positive, got {value}")
        if self.startup_canvass_timeout_ns // self.leader_heartbeat_timeout_ns < 2:
            raise ValueError(
                f"startupCanvassTimeoutNs={self.startup_canvass_timeout_ns} must be a multiple of "
                f"leaderHeartbeatTimeoutNs={self.leader_heartbeat_timeout_ns}"
            )
        if self.service_count < 0:
            raise ValueError(f"serviceCount must be >= 0, got {self.service_count}")
        return self

    def to_properties(self) -> dict[str, int]:
        """Aeron property name → value (ns for durations), in a fixed order."""
        return {name: getattr(self, attr) for name, (attr, _) in _PROPERTIES.items()}


_PROPERTIES: dict[str, tuple[str, str]] = {
    "aeron.cluster.election.timeout": ("election_timeout_ns", "duration"),
    "aeron.cluster.election.status.interval": ("election_status_interval_ns", "duration"),
    "aeron.cluster.startup.canvass.timeout": ("startup_canvass_timeout_ns", "duration"),
    "aeron.cluster.leader.heartbeat.timeout": ("leader_heartbeat_timeout_ns", "duration"),
    "aeron.cluster.leader.heartbeat.interval": ("leader_heartbeat_interval_ns", "duration"),
    "aeron.cluster.session.timeout": ("session_timeout_ns", "duration"),
    "aeron.cluster.termination.timeout": ("termination_timeout_ns", "duration"),
    "aeron.cluster.replication.progress.timeout": ("replication_progress_timeout_ns", "duration"),
    "aeron.cluster.appointed.leader.id": ("appointed_leader_id", "int"),
    "aeron.cluster.app.version": ("app_version", "int"),
    "aeron.cluster.file.sync.level": ("file_sync_level", "int"),
    "aeron.cluster.service.count": ("service_count", "int"),
    "aeron.cluster.log.term.length": ("log_term_length", "int"),
}


def _parse(name: str, value: Any, kind: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{name}: expected {'a duration' if kind == 'duration' else 'an integer'}, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if kind == "duration":
            match = _DURATION.match(value)
            if match:
                return int(match.group(1)) * _UNIT_NS[match.group(2).lower() if match.group(2) else None]
        else:
            try:
                return int(value.strip())
            except ValueError:
                pass
    expected = "a duration (ns, or a string such as '200ms', '1s')" if kind == "duration" else "an integer"
    raise ValueError(f"{name}: expected {expected}, got {value!r}")


def parse_duration_ns(text: str | int) -> int:
    """An Agrona duration (``"1s"``, ``"200ms"``, an int of ns) in nanoseconds."""
    return _parse("duration", text, "duration")
