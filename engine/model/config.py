"""The Aeron Cluster properties the election model reads, with Aeron 1.47.3's defaults.

`Config` is a frozen value; build one with `Config()` (Aeron's defaults, aeron-election.md §5 and
aeron-formats.md §8.2) or `Config.from_properties({...})` from Aeron property names, as a
`MemberStart` event's ``config`` gives them.  Durations are nanoseconds; a property may be an int
(ns) or a duration string as `parse_duration_ns` reads it (Agrona's ``"1s"``, ``"200ms"``,
``"500us"``, ``"10ns"``, no suffix meaning ns).  An unknown property is a `ValueError` naming it, and
so is a value Aeron's `ConsensusModule.Context.conclude()` would refuse.

`parse_duration_ns` is recount's one reader of a duration, wherever one is written: Aeron properties,
scenario files (TOML and datadriven), ``--until``/``--tolerance``/``--window``, the TUI's ``time 12s``
jump and the durations in checks and breakpoint conditions.  `format_duration` writes one that it
reads back exactly.
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

_DURATION = re.compile(r"\s*(-?)([0-9]+)(?:\.([0-9]+))?\s*(ns|us|µs|μs|ms|s|m)?\s*", re.IGNORECASE)
#: Nanoseconds per unit (lower case; a number without one is nanoseconds).
DURATION_UNITS_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": MS, "s": SECOND, "m": 60 * SECOND}


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
    if kind == "duration":
        try:
            return parse_duration_ns(value)
        except ValueError:
            raise ValueError(f"{name}: expected a duration (ns, or a string such as '200ms', '1s'), got {value!r}") from None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ValueError(f"{name}: expected an integer, got {value!r}")


def parse_duration_ns(value: str | int) -> int:
    """A duration in nanoseconds: an int is ns; a string is a decimal number with an optional unit,
    ``ns``, ``us`` (or ``µs``), ``ms``, ``s`` or ``m`` (minutes), in any case, none meaning ns: Agrona's
    durations (``"200ms"``, ``"1s"``, ``"7"``) and a little more (``"2.5s"``, ``"-5ms"``, ``"1m"``).
    Exact decimal arithmetic (``"1.1s"`` is 1_100_000_000, not a float's neighbour); a value that is not
    a whole number of nanoseconds is refused, like anything else that is not a duration, with a
    `ValueError` saying what was expected.  Range checks are the caller's."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _DURATION.fullmatch(value) if isinstance(value, str) else None
    if match is not None:
        sign, whole, fraction, unit = match.groups()
        scale = DURATION_UNITS_NS[unit.lower()] if unit else 1
        fraction = fraction or ""
        parts, rest = divmod(int(fraction or 0) * scale, 10 ** len(fraction))
        if rest:
            raise ValueError(f"{value!r} is not a whole number of nanoseconds")
        result = int(whole) * scale + parts
        return -result if sign else result
    raise ValueError(f"expected a duration such as '200ms', '2.5s' or an integer of nanoseconds, got {value!r}")


def format_duration(ns: int) -> str:
    """``ns`` in the largest unit that divides it (``1500ms``, ``2s``, ``7ns``): what `parse_duration_ns`
    reads back exactly."""
    for unit in ("s", "ms", "us"):
        size = DURATION_UNITS_NS[unit]
        if ns % size == 0:
            return f"{ns // size}{unit}"
    return f"{ns}ns"
