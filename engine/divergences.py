"""Why node replay diverged: each divergence's cause, and repeats of one cause as one run.

A divergence (`engine.replay`) says the model and the recording disagree about one member: it did
something (a send, a state change) the recording does not show within the tolerance, or the reverse.
That alone tells a user little when there are hundreds; each one here also says which of three causes
it is, in this order:

``evidence``
    The inputs are known to be uncertain where it happened, and it names the input that would settle
    it (``settledBy``): the member's starting state was assumed or only bounded (`MemberStart`'s
    ``extra.startingState``, from its first start until its first election ends), or the wire could
    not tell whether its process was killed or stopped cleanly (a ``MemberCrash``/``MemberStop``
    whose evidence says so, around that moment).
``timing``
    The same thing happened on the other side, only further apart than the tolerance, within
    `TIMING_WINDOW_NS`: the same send (all compared fields, the position within the other side's
    range) or the same state change.  ``offsetNs`` is the model's time less the recording's.  A
    recorded send and the model's late one are one divergence, not two.
``model``
    Neither: the model did what the recording does not show, or did not do what it shows.

Consecutive divergences of one member with one cause, side, peer and message type collapse into one
record (``count``, ``lastTs``): a follower reporting every position late is one finding.

Pure: facts in, records out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MS = 1_000_000
#: How far apart the same behaviour may be on the two sides and still be a timing difference.
TIMING_WINDOW_NS = 5_000 * MS
#: A run of divergences stays open this long after its last one for another to join it.
RUN_WINDOW_NS = TIMING_WINDOW_NS

CAUSES = ("evidence", "timing", "model")
#: Starting values whose uncertainty can change what the member does (a candidateTermId taken as the
#: last term cannot: the election uses max(candidateTermId, leadershipTermId)).
SIGNIFICANT_START_VALUES = ("appendPosition", "lastTerm", "leadershipTermId", "logLeadershipTermId", "recordingLog")
UNCERTAIN = ("assumed", "bound")


@dataclass(frozen=True, slots=True)
class EvidenceGap:
    """A stretch of one member's replay where the inputs are known to be uncertain.

    ``until_closed``: the gap lasts until the member's election next reaches CLOSED (a starting state
    matters for the election it starts); else it ends at ``end_ns``."""

    member: int
    start_ns: int
    end_ns: int | None
    why: str
    settled_by: str
    until_closed: bool = False
    #: The gap explains only what is not the same behaviour at another time: a divergence with a timing
    #: counterpart stays a timing difference (a wait the inputs do not show moves things, it does not
    #: make them different).
    timing_first: bool = False


def gaps_of(event: Any, tolerance_ns: int) -> list[EvidenceGap]:
    """The evidence gaps a MemberStart, MemberCrash or MemberStop event of a recording says there are."""
    extra = event.extra or {}
    node = event.node
    if event.type == "MemberStart":
        out = []
        for name, known in (extra.get("startingState") or {}).items():
            if not isinstance(known, Mapping) or name not in SIGNIFICANT_START_VALUES:
                continue
            if known.get("certainty") in UNCERTAIN:
                if name in ("lastTerm", "recordingLog"):
                    settled = f"member {node}'s recording.log as it was before the incident (its cluster directory then)"
                else:
                    settled = (f"member {node}'s agent log (its INIT -> CANVASS line), or its archive directory (the"
                               " log recording's stop position)")
                out.append(EvidenceGap(
                    node, event.ts, None,
                    f"member {node}'s starting {name} is {known.get('certainty')} ({known.get('note')})",
                    settled,
                    until_closed=True,
                ))
        return out
    if event.type in ("MemberCrash", "MemberStop"):
        evidence = [str(line) for line in extra.get("evidence") or ()]
        if any("cannot tell" in line for line in evidence):
            return [EvidenceGap(
                node, event.ts - tolerance_ns, event.ts + tolerance_ns,
                f"the wire shows member {node}'s process gone, not whether it was killed or stopped cleanly",
                f"member {node}'s agent log (how and when its process ended)",
            )]
    return []


class EvidenceGaps:
    """The gaps of every member, and which are open now (see `EvidenceGap.until_closed`)."""

    __slots__ = ("_pending", "_gaps", "_open")

    def __init__(self, gaps: Iterable[EvidenceGap] = ()) -> None:
        self._pending: dict[tuple[int, int], list[EvidenceGap]] = {}
        self._gaps: dict[int, list[tuple[int, int | None, EvidenceGap]]] = {}
        self._open: dict[int, list[EvidenceGap]] = {}
        for gap in gaps:
            if gap.until_closed:
                self._pending.setdefault((gap.member, gap.start_ns), []).append(gap)
            else:
                self._gaps.setdefault(gap.member, []).append((gap.start_ns, gap.end_ns, gap))

    def started(self, member: int, ts: int) -> None:
        """The member's replay starts (or restarts) at ``ts``: what was uncertain about it opens."""
        self._open.pop(member, None)
        opened = self._pending.pop((member, ts), None)
        if opened:
            self._open[member] = opened
            for gap in opened:
                self._gaps.setdefault(member, []).append((ts, None, gap))

    def add_open(self, gap: EvidenceGap) -> None:
        """A gap the replay finds as it goes, from ``gap.start_ns`` until the member's election next closes."""
        self._open.setdefault(gap.member, []).append(gap)
        self._gaps.setdefault(gap.member, []).append((gap.start_ns, None, gap))

    def closed(self, member: int, ts: int) -> None:
        """The member's election reached CLOSED at ``ts``: a starting state no longer decides anything."""
        opened = self._open.pop(member, None)
        if not opened:
            return
        spans = self._gaps[member]
        for i, (start, end, gap) in enumerate(spans):
            if end is None and gap in opened:
                spans[i] = (start, ts, gap)

    def at(self, member: int, ts: int) -> EvidenceGap | None:
        for start, end, gap in self._gaps.get(member, ()):
            if start <= ts and (end is None or ts <= end):
                return gap
        return None


def signature(record: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes two divergences of one member one finding: cause, side, peer, type, what settles it."""
    side = record.get("expected") if record.get("unmatched") == "recording" else record.get("actual")
    side = side or record.get("expected") or record.get("actual") or {}
    return (record.get("node"), record.get("cause"), record.get("unmatched"), side.get("peer"), side.get("type"),
            record.get("settledBy"))


class Runs:
    """Collapses consecutive divergences of one signature per member (see the module docstring)."""

    __slots__ = ("open",)

    def __init__(self) -> None:
        #: member -> its run of divergences still open (what the next one may join)
        self.open: dict[int, dict[str, Any]] = {}

    def add(self, record: dict[str, Any], out: list[dict[str, Any]]) -> None:
        node = record["node"]
        current = self.open.get(node)
        if current is not None and signature(current) == signature(record):
            current["count"] += 1
            current["lastTs"] = max(current["lastTs"], record["ts"])
            return
        if current is not None:
            out.append(current)
        record["count"] = 1
        record["lastTs"] = record["ts"]
        self.open[node] = record

    def __bool__(self) -> bool:
        return bool(self.open)

    def due(self, now: int) -> bool:
        """Some run has had nothing join it for `RUN_WINDOW_NS`."""
        return any(record["lastTs"] + RUN_WINDOW_NS < now for record in self.open.values())

    def flush(self, out: list[dict[str, Any]], now: int | None = None) -> None:
        """Emit the runs nothing joined within `RUN_WINDOW_NS` of their last divergence (all: ``now`` None)."""
        for node in sorted(self.open):
            record = self.open[node]
            if now is None or record["lastTs"] + RUN_WINDOW_NS < now:
                out.append(self.open.pop(node))


def count_causes(records: Iterable[Mapping[str, Any]], members: Iterable[int] = ()) -> dict[str, dict[str, Any]]:
    """Per member (each of ``members`` too, with none): its divergence records by cause, the checks they
    hold, what would settle the evidence ones, and when the first one blamed on the model happened."""

    def empty() -> dict[str, Any]:
        return {"divergences": 0, "checks": 0, **{cause: 0 for cause in CAUSES}, "settledBy": [], "firstModelTs": None}

    out: dict[str, dict[str, Any]] = {str(member): empty() for member in members}
    for record in records:
        member = out.setdefault(str(record["node"]), empty())
        member["divergences"] += 1
        member["checks"] += record.get("count", 1)
        cause = record.get("cause", "model")
        member[cause] += 1
        settled = record.get("settledBy")
        if settled and settled not in member["settledBy"]:
            member["settledBy"].append(settled)
        if cause == "model" and (member["firstModelTs"] is None or record["ts"] < member["firstModelTs"]):
            member["firstModelTs"] = record["ts"]
    return dict(sorted(out.items(), key=lambda item: int(item[0])))
