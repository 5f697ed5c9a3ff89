"""Raft safety checks evaluated while a replay runs (issue 3, item 4).

The checker watches the trace records every member produces (and what the recording says the cluster
committed) and reports a broken property as a record ``{"kind":"invariant","ts","node","name",
"detail"}``.  It never raises: a model that breaks Raft is exactly what a replay must show, not a
crash.  Each distinct violation is reported once.

Properties (names as they appear in the records):

``one-leader-per-term``
    No two members lead the same term.  A member claims a term by sending NewLeadershipTerm (its
    ``leadershipTermId``/``leaderMemberId``), by appending a NewLeadershipTermEvent to its log, or by
    becoming LEADER (the term then read from the member's state).  The same member claiming the same
    term again is fine: Aeron 1.47.3's single-node re-election reuses its term (aeron-election.md
    §2.1, fixed in 1.50.1).
``committed-position-truncated``
    A member's log is cut back to below a position the cluster had committed for that term: a
    recording.log TERM entry's ``logPosition`` is lowered (Aeron truncates through
    ``commitLogPosition``, §3.9), or the ``appendPosition`` its election states carry goes down (an
    open term truncated: recording.log cannot show it, the archive's stop position can; the term is
    the state's ``logLeadershipTermId``).  What the cluster committed of a term: the highest
    CommitPosition a leader sent (or the recording shows arriving) with that ``leadershipTermId``, and,
    once a later term is committed, everything of it below the first later term's base (the
    cluster's log up to that commit is the committed history).  A cut of an older term's suffix that
    no commit covered is Raft's own repair of a deposed leader's log (a later term's commit at the same
    positions is other content), not a violation.  A commit whose term is unknown covers every term.
``log-contiguous``
    In a member's recording.log the valid TERM entries, by term, each start where the previous one
    ended (``termBaseLogPosition`` == previous ``logPosition``), only the last one may be open
    (``logPosition`` −1), and no entry ends before it begins.
``candidate-term-monotonic``
    node-state.dat's ``candidateTermId`` is never written lower than it was (at the member's start,
    or by an earlier write).

The checker keeps its own image of each member's TERM entries, built from the MemberStart fields and
the ``recordingLog`` change records, so it needs no call into the model on the hot path; it only
asks for the member's state (a callable) when a member becomes LEADER without saying its term.
Imports nothing of ours.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

NULL = -1


def invariant_record(ts: int | None, node: int | None, name: str, detail: str) -> dict[str, Any]:
    return {"kind": "invariant", "ts": ts, "node": node, "name": name, "detail": detail}


@dataclass(slots=True)
class _Term:
    base: int
    position: int
    valid: bool = True


@dataclass(slots=True)
class InvariantChecker:
    """Watches records as they are produced; `observe` returns the invariant records to add."""

    leaders: dict[int, int] = field(default_factory=dict)  # term -> member that led it
    committed: int = 0  # highest position the cluster is known to have committed
    committed_terms: dict[int, int] = field(default_factory=dict)  # term -> highest position committed in it
    bases: dict[int, int] = field(default_factory=dict)  # term -> its termBaseLogPosition, as first seen
    candidate_terms: dict[int, int] = field(default_factory=dict)  # member -> highest candidateTermId on disk
    terms: dict[int, dict[int, _Term]] = field(default_factory=dict)  # member -> term -> entry
    appends: dict[int, int] = field(default_factory=dict)  # member -> last appendPosition its records showed
    reported: set[tuple[Any, ...]] = field(default_factory=set)

    def member_started(self, node: int, start_fields: Mapping[str, Any], *, restart: bool = False) -> None:
        """Baselines from a MemberStart's fields (contract §1): node state and recording log.

        On a ``restart`` the files the event does not give are the member's own, as it left them.
        """
        node_state = start_fields.get("nodeState")
        if isinstance(node_state, Mapping) and isinstance(node_state.get("candidateTerm"), Mapping):
            node_state = node_state["candidateTerm"]
        if node_state is not None or not restart:
            candidate = node_state.get("candidateTermId", NULL) if isinstance(node_state, Mapping) else NULL
            self.candidate_terms[node] = candidate if isinstance(candidate, int) else NULL
        append = start_fields.get("appendPosition")
        if isinstance(append, int) and not isinstance(append, bool):
            self.appends[node] = append
        elif not restart:
            self.appends.pop(node, None)
        if start_fields.get("recordingLog") is None and restart:
            return
        entries: dict[int, _Term] = {}
        for entry in start_fields.get("recordingLog") or ():
            if not isinstance(entry, Mapping) or entry.get("type", "TERM") != "TERM":
                continue
            term = entry.get("leadershipTermId")
            if isinstance(term, int):
                entries[term] = _Term(
                    _int(entry.get("termBaseLogPosition")),
                    _int(entry.get("logPosition")),
                    entry.get("isValid", True) is not False,
                )
        self.terms[node] = entries

    def observe_committed(self, position: int, leadership_term_id: int | None = None) -> None:
        """The recording shows the cluster committed ``position`` (an inbound CommitPosition) in
        ``leadership_term_id`` (None: a term not known, which then covers every term)."""
        if position > self.committed:
            self.committed = position
        term = NULL if leadership_term_id is None else leadership_term_id
        if position > self.committed_terms.get(term, -1):
            self.committed_terms[term] = position

    def committed_of(self, term: int | None) -> int:
        """How far the cluster is known to have committed term ``term`` (None: any term)."""
        if term is None or term == NULL:
            return self.committed
        extent = max(self.committed_terms.get(term, 0), self.committed_terms.get(NULL, 0))
        later_bases = [base for other, base in self.bases.items() if other > term]
        later_commits = [position for other, position in self.committed_terms.items() if other > term]
        if later_bases and later_commits:
            extent = max(extent, min(min(later_bases), max(later_commits)))
        return extent

    def observe(
        self,
        node: int,
        records: Iterable[Mapping[str, Any]],
        state: Callable[[], Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Check the records ``node`` just produced; ``state`` gives its `MemberView` when needed."""
        out: list[dict[str, Any]] = []
        log_changed_at: int | None = None
        last_role_to_leader: Mapping[str, Any] | None = None
        for record in records:
            kind = record.get("kind")
            ts = record.get("ts")
            if kind == "send":
                kind_type = record.get("type")
                fields = record.get("fields") or {}
                if kind_type == "CommitPosition":
                    self.observe_committed(_int(fields.get("logPosition"), 0), _int(fields.get("leadershipTermId")))
                elif kind_type == "NewLeadershipTerm":
                    self._base(_int(fields.get("leadershipTermId")), _int(fields.get("termBaseLogPosition")))
                    self._claim(out, ts, node, _int(fields.get("leadershipTermId")), _int(fields.get("leaderMemberId"), node))
            elif kind == "logAppend":
                message = record.get("message") or {}
                if (record.get("type") or message.get("type")) == "NewLeadershipTermEvent":
                    fields = message.get("fields", message)
                    self._base(_int(fields.get("leadershipTermId")), _int(fields.get("termBaseLogPosition")))
                    self._claim(out, ts, node, _int(fields.get("leadershipTermId")), _int(fields.get("leaderMemberId"), node))
            elif kind == "role":
                last_role_to_leader = record if record.get("to") == "LEADER" else None
            elif kind == "state" or kind == "election":
                term = record.get("logLeadershipTermId")
                self._check_append(out, ts, node, record.get("appendPosition"), term if isinstance(term, int) else None)
            elif kind == "nodeState":
                self._check_candidate_term(out, ts, node, _int(record.get("candidateTermId")))
            elif kind == "recordingLog":
                self._apply_log_change(out, ts, node, record.get("op"), record.get("entry") or {})
                log_changed_at = ts
        if last_role_to_leader is not None and state is not None:
            try:
                current = state()
                leads = current.role.name == "LEADER"
            except Exception:  # the checker must never take the replay down
                leads = False
            if leads:
                self._claim(out, last_role_to_leader.get("ts"), node, _int(current.leadership_term_id), node)
        if log_changed_at is not None:
            self._check_contiguous(out, log_changed_at, node)
        return out

    # -- the properties -------------------------------------------------------------------------

    def _report(self, out: list, key: tuple[Any, ...], ts: int | None, node: int, name: str, detail: str) -> None:
        if key not in self.reported:
            self.reported.add(key)
            out.append(invariant_record(ts, node, name, detail))

    def _claim(self, out: list, ts: int | None, node: int, term: int, leader: int) -> None:
        if term == NULL:
            return
        holder = self.leaders.setdefault(term, leader)
        if holder != leader:
            self._report(
                out,
                ("one-leader-per-term", term, min(holder, leader), max(holder, leader)),
                ts,
                node,
                "one-leader-per-term",
                f"members {holder} and {leader} both lead term {term}",
            )

    def _base(self, term: int, base: int) -> None:
        if term != NULL and base != NULL:
            self.bases.setdefault(term, base)

    def _check_append(self, out: list, ts: int | None, node: int, append: Any, term: int | None = None) -> None:
        if not isinstance(append, int) or isinstance(append, bool) or append < 0:
            return
        before = self.appends.get(node)
        self.appends[node] = append
        if before is None or append >= before:
            return
        committed = self.committed_of(term)
        if append < committed:
            self._report(
                out,
                ("committed-position-truncated", node, "append", append),
                ts,
                node,
                "committed-position-truncated",
                f"member {node}'s log was cut from {before} to {append}, below the committed position {committed}",
            )

    def _check_candidate_term(self, out: list, ts: int | None, node: int, candidate: int) -> None:
        before = self.candidate_terms.get(node, NULL)
        if candidate < before:
            self._report(
                out,
                ("candidate-term-monotonic", node, before, candidate),
                ts,
                node,
                "candidate-term-monotonic",
                f"member {node} wrote candidateTermId {candidate} to node-state.dat after {before}",
            )
        else:
            self.candidate_terms[node] = candidate

    def _apply_log_change(self, out: list, ts: int | None, node: int, op: Any, entry: Mapping[str, Any]) -> None:
        if entry.get("type", "TERM") != "TERM":
            return
        term = entry.get("leadershipTermId")
        if not isinstance(term, int):
            return
        entries = self.terms.setdefault(node, {})
        position = _int(entry.get("logPosition"))
        known = entries.get(term)
        if op == "removeEntry":
            entries.pop(term, None)
            return
        if entry.get("isValid", True) is not False:
            self._base(term, _int(entry.get("termBaseLogPosition")))
        if known is not None and known.position != NULL and position != NULL and position < known.position:
            committed = self.committed_of(term)
            if position < committed:
                self._report(
                    out,
                    ("committed-position-truncated", node, term, position),
                    ts,
                    node,
                    "committed-position-truncated",
                    f"member {node} truncated term {term} from {known.position} to {position},"
                    f" below the committed position {committed}",
                )
        entries[term] = _Term(_int(entry.get("termBaseLogPosition")), position, entry.get("isValid", True) is not False)

    def _check_contiguous(self, out: list, ts: int | None, node: int) -> None:
        entries = self.terms.get(node, {})
        valid = sorted((term, e) for term, e in entries.items() if e.valid)
        for i, (term, e) in enumerate(valid):
            problem = None
            if e.position != NULL and e.position < e.base:
                problem = f"term {term} ends at {e.position} before its base {e.base}"
            elif i + 1 < len(valid):
                next_term, nxt = valid[i + 1]
                if e.position == NULL:
                    problem = f"term {term} is still open (logPosition -1) but term {next_term} follows it"
                elif nxt.base != e.position:
                    problem = f"term {next_term} starts at {nxt.base} but term {term} ends at {e.position}"
            if problem is not None:
                self._report(out, ("log-contiguous", node, problem), ts, node, "log-contiguous", f"member {node}: {problem}")


def _int(value: Any, default: int = NULL) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
