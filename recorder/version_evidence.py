"""What a capture shows of the Aeron version that made it, for `recount replay` to pick its model.

Two kinds of evidence, each an item ``{"source", "says", "first", "last", "exact"}`` as
`engine.versions.model_from_evidence` takes them:

* the agent log: 1.50 and later name the release at ``log started`` (``exact``); older dialects
  narrow it to a range of lines (`formats.agent_log.DIALECTS`);
* the wire: the cluster codec schema version in the SBE header of every captured message
  (`engine.versions.SCHEMA_VERSION_LINES`).  Messages recount itself encoded (simulations, JSON Lines
  written by hand) carry no payload or recount's own version 12, so only captures count: events
  with a ``packet`` in ``extra``.

`convert` stores the items in the replay file's metadata (``recount.aeronEvidence``, JSON), since
the agent log's ``log started`` line is not an event; `evidence_of` reads them back, or takes the
wire's from the events of a file written before.  Pure.
"""

from __future__ import annotations

import json
import struct
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from engine.versions import SCHEMA_VERSION_LINES
from formats.event_columns import EventColumns
from formats.events import Event

METADATA_KEY = "recount.aeronEvidence"
CLUSTER_SCHEMA_ID = 111
_HEADER = struct.Struct("<HHHH")


def schema_versions(events: Iterable[Event] | EventColumns) -> dict[int, int]:
    """Captured messages by the cluster schema version in their SBE header."""
    counts: Counter[int] = Counter()
    if isinstance(events, EventColumns):
        return _schema_versions_of_columns(events)
    for event in events:
        payload = event.payload
        if payload is None or len(payload) < 8 or not (event.extra and "packet" in event.extra):
            continue
        _, _, schema_id, version = _HEADER.unpack_from(payload, 0)
        if schema_id == CLUSTER_SCHEMA_ID:
            counts[version] += 1
    return dict(sorted(counts.items()))


def _schema_versions_of_columns(columns: EventColumns) -> dict[int, int]:
    """`schema_versions` of events held as columns: counted per entry (distinct payload), then weighed."""
    from formats.event_columns import EXTRA_LOG, EXTRA_OTHER, EXTRA_PACKET

    kinds = columns.extra_kind
    with_packet = (kinds == EXTRA_PACKET) | (kinds == EXTRA_LOG)
    for row in np.flatnonzero(kinds == EXTRA_OTHER).tolist():
        with_packet[row] = "packet" in columns.others[columns.extra_ref[row]]
    rows_per_entry = np.bincount(columns.entry[with_packet], minlength=len(columns.entries))
    counts: Counter[int] = Counter()
    for entry in np.flatnonzero(rows_per_entry).tolist():
        payload = columns.entries.payloads[entry]
        if payload is None or len(payload) < 8:
            continue
        _, _, schema_id, version = _HEADER.unpack_from(payload, 0)
        if schema_id == CLUSTER_SCHEMA_ID:
            counts[version] += int(rows_per_entry[entry])
    return dict(sorted(counts.items()))


def wire_evidence(events: Iterable[Event] | EventColumns) -> list[dict[str, Any]]:
    return evidence_of_schema_versions(schema_versions(events))


def evidence_of_schema_versions(counts: Mapping[int, int]) -> list[dict[str, Any]]:
    """The wire's evidence items from captured messages counted by cluster schema version
    (`schema_versions`, or a replay file's columns)."""
    items = []
    for version, count in sorted(counts.items()):
        first, last = SCHEMA_VERSION_LINES.get(version, ("1.51", None) if version > 16 else ("1.40", "1.40"))
        items.append({"source": "wire", "says": f"cluster schema v{version} in {count} messages (Aeron "
                      + (f"{first}–{last}" if last and last != first else first if last else f"{first} or later") + ")",
                      "first": first, "last": last, "exact": None, "schemaVersion": version})
    return items


def agent_log_evidence(source: str, dialect_first: str, dialect_last: str | None, dialect_name: str,
                       version: str | None) -> dict[str, Any]:
    if version:
        line = ".".join(version.split(".")[:2])
        return {"source": source, "says": f"Aeron {version} (log started)", "first": line, "last": line,
                "exact": version}
    return {"source": source, "says": f"agent log dialect {dialect_name}", "first": dialect_first,
            "last": dialect_last, "exact": None}


def to_metadata(evidence: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    return {METADATA_KEY: json.dumps(list(evidence), separators=(",", ":"), sort_keys=True)} if evidence else {}


def evidence_of(events: Sequence[Event], metadata: Mapping[str, str] | None) -> list[dict[str, Any]]:
    """The evidence a replay file or capture carries (stored at convert, else the wire's)."""
    stored = stored_evidence(metadata)
    return stored if stored is not None else wire_evidence(events)


def stored_evidence(metadata: Mapping[str, str] | None) -> list[dict[str, Any]] | None:
    """The evidence `convert` stored in a replay file's metadata, or None (none, or unreadable)."""
    stored = (metadata or {}).get(METADATA_KEY)
    if stored:
        try:
            items = json.loads(stored)
        except ValueError:
            items = None
        if isinstance(items, list) and all(isinstance(i, dict) and "first" in i and "says" in i for i in items):
            return items
    return None
