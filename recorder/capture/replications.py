"""How far a follower's log replication got, and when, read from the wire when no agent log says it.

A follower whose log ends short of the leader's previous term replicates the rest from the leader's
archive in FOLLOWER_LOG_REPLICATION (`Election.followerLogReplication`): its archive copies the
recording, and the module publishes each new position the archive signals as an AppendPosition to the
leader (`publishFollowerReplicationPosition`); REPLICATE_END and STOP at the stop position end it.  With
agent logs the archive's RECORDING_SIGNAL lines drive the model's replication; without them the wire
shows the same progress in the member's own words: in i_restart_all_one_member_behind member 1
replicated 56352 -> 60480 from leader 0 and sent it AppendPosition 56352 at 19:26:56.548 (its archive's
EXTEND at .5449) and 60480 at .5562 (STOP at .5559; back to CANVASS at .5569); the model, which took
the replication as done when made, went on 1.17 s early and skipped the catch-up the real member made.

So each MemberStart without an agent log gets, as ``replicationPositionsNs``, the [ns, position] of the
member's AppendPositions (flags 0) of a term it had no image of the leader's log for yet (a follower
sends those in FOLLOWER_BALLOT and FOLLOWER_LOG_REPLICATION only), where the positions moved (a
replication made progress); the model drops those from before its replication began.

Pure: decoded sends in, start fields out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from formats.event_columns import EventColumns
from formats.events import DIRECTIONS, Event
from recorder.capture.publications import Life, with_start_evidence

#: Columns of what a member sent: ts, member, term, position, flags, peer (-1: none).
AppendRows = np.ndarray


def _rows(values: list[tuple[int, int, int, int, int, int]]) -> AppendRows:
    return np.array(values, dtype=np.int64).reshape(-1, 6)


def append_rows(events: Iterable[Event]) -> AppendRows:
    """Every AppendPosition a member sent, as (ts, member, leadershipTermId, logPosition, flags, peer) rows."""
    return _rows([(e.ts, e.node, e.fields.get("leadershipTermId", -1), e.fields.get("logPosition", -1),
                   e.fields.get("flags", 0), -1 if e.peer is None else e.peer)
                  for e in events if e.type == "AppendPosition" and e.dir == "out"])


def append_rows_in_columns(rows: EventColumns, kept: np.ndarray) -> AppendRows:
    """`append_rows` on a capture's columns (``kept``: the rows still in)."""
    found = rows.rows_of_type("AppendPosition")
    found = found[kept[found] & (rows.dir[found] == DIRECTIONS.index("out"))]
    if not len(found):
        return _rows([])
    entries, inverse = np.unique(rows.entry[found], return_inverse=True)
    fields = [rows.entries.fields[int(e)] for e in entries]
    per_entry = np.array([(f.get("leadershipTermId", -1), f.get("logPosition", -1), f.get("flags", 0)) for f in fields],
                         dtype=np.int64).reshape(-1, 3)
    peers = np.where(rows.has_peer[found], rows.peer[found], -1).astype(np.int64)
    return np.column_stack([rows.ts[found], rows.node[found].astype(np.int64), per_entry[inverse], peers])


def terms_of_sessions(events: Iterable[Event]) -> dict[int, int]:
    """log session id → the term its leader's NewLeadershipTerms name for it."""
    out: dict[int, int] = {}
    for event in events:
        if event.type == "NewLeadershipTerm" and event.dir == "out" and event.fields.get("leaderMemberId") == event.node:
            session, term = event.fields.get("logSessionId"), event.fields.get("leadershipTermId")
            if isinstance(session, int) and isinstance(term, int):
                out.setdefault(session, term)
    return out


def with_replication_evidence(keyed: list[tuple], appends: AppendRows, terms: Mapping[int, int],
                              skip: Iterable[int] = ()) -> list[tuple]:
    """``keyed`` (sort key tuples ending with their event) with ``replicationPositionsNs`` on each MemberStart
    of a member not in ``skip`` (its agent log gave the archive's signals), after `with_publication_evidence`
    (the starts' ``logImagesNs``)."""
    if not len(appends):
        return keyed

    def find(start: Event, life: Life) -> list[list[int]] | None:
        if "replicationPositionsNs" in start.fields:
            return None
        return _replication_positions(appends, life, start.fields.get("logImagesNs") or [], terms)

    return with_start_evidence(keyed, "replicationPositionsNs", "its AppendPositions of a term before it had the"
                               " image of that term's log, on the wire", skip, find)


def _replication_positions(appends: AppendRows, life, images: list, terms: Mapping[int, int]) -> list[list[int]]:
    mine = appends[(appends[:, 1] == life.member) & (appends[:, 0] >= life.start_ns) & (appends[:, 4] == 0)]
    if life.end_ns is not None:
        mine = mine[mine[:, 0] <= life.end_ns]
    if not len(mine):
        return []
    imaged: dict[int, int] = {}
    for session, at in images:
        term = terms.get(session)
        if term is not None:
            imaged[term] = min(at, imaged.get(term, at))
    found: list[list[int]] = []
    for term in np.unique(mine[:, 2]).tolist():
        before = mine[mine[:, 2] == term]
        if term in imaged:
            before = before[before[:, 0] < imaged[term]]
        before = before[np.argsort(before[:, 0], kind="stable")]
        if len(before) > 1 and len(np.unique(before[:, 3])) > 1:
            found += [[int(ts), int(position)] for ts, position in before[:, [0, 3]].tolist()]
    return sorted(found)
