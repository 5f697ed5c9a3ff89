"""Checks: small true/false questions about a replay, in the language of `recorder.expressions`.

A check is asked of one replay's trace records (contract §3; the summary record last), as `recount
bisect --check` does for each version it tries.  The grammar is `recorder.expressions`' (the TUI's
breakpoints speak it too); a check's fields are the members' state at the end, as the summary gives it
(electionState, role, leadershipTermId, leaderMemberId, candidateTermId, logPosition, appendPosition,
commitPosition): ``node[2].electionState == "CLOSED"``, or ``node 2 state == CLOSED``, or ``role ==
LEADER`` (some member); ``summary.FIELD`` reads the summary itself (divergences, model, seed, ...);
durations (``5s``, ``2.5s``, ``200ms``) are numbers of nanoseconds.  What this module adds are the
functions, which read the whole trace.

Predicates (true or false):

``no_invariant_violations``
    no ``invariant`` record.
``no_divergences``
    no ``divergence`` record (node replay).
``leader_elected``
    at the end some member is LEADER with its election CLOSED.
``leader_elected_within(D)``
    the cluster is never without a leader for longer than D (see below).
``no_replay_past_commit``
    no member leaves FOLLOWER_REPLAY having replayed past the highest commit position any leader
    had announced by then (CommitPosition, or NewLeadershipTerm's ``commitPosition``): the 1.50.0 fix
    of aeron-io/aeron#1898.
``state_reached(ID, "STATE")``
    member ID entered election state STATE at some point.

Measures (numbers, for comparisons): ``longest_leaderless()`` (ns), ``leader_elections()`` (elections
a member closed as LEADER), ``invariant_violations()``, ``max_term()`` (highest leadershipTermId at the
end).

Leaderless stretches.  A leader is *established* when a member closes an election (state → CLOSED)
while its role is LEADER.  It stops being one when it crashes or stops (``input`` records of cluster
replay, or its module state going CLOSED), when it starts another election or leaves the LEADER
role, or when a majority of the members are in an election at once (they no longer follow it).  The
cluster is leaderless from the first record until the first leader is established, and from each
such loss until the next one; a stretch still open at the end of the trace lasts until the summary's
time.

Examples: ``leader_elected_within(5s)``, ``no_invariant_violations and node[2].electionState ==
"CLOSED"``, ``longest_leaderless() < 2s or not leader_elected``.

Errors: a check that does not parse is a `CheckError` (a `ValueError`) naming the column and what
was expected; ``changes`` and ``watch`` are refused (there is no "before" at the end of a replay).
Evaluation never fails: a missing member or field is ``null``, and ordering comparisons with a
non-number are false.  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recorder import expressions
from recorder.expressions import Expression, Function, Language, Parameter, Scene

_DURATION = Parameter("a duration", int)
_MEMBER = Parameter("a member id", int, names="member")
_STATE = Parameter("an election state", str, names="electionState")

#: What a check may ask of the whole trace (see the module docstring).
FUNCTIONS = {
    function.name: function
    for function in (
        Function("no_invariant_violations"),
        Function("no_divergences"),
        Function("leader_elected"),
        Function("leader_elected_within", (_DURATION,)),
        Function("no_replay_past_commit"),
        Function("state_reached", (_MEMBER, _STATE)),
        Function("longest_leaderless", predicate=False),
        Function("leader_elections", predicate=False),
        Function("invariant_violations", predicate=False),
        Function("max_term", predicate=False),
    )
}
PREDICATES = tuple(name for name, function in FUNCTIONS.items() if function.predicate)
MEASURES = tuple(name for name, function in FUNCTIONS.items() if not function.predicate)

LANGUAGE = Language(
    noun="check",
    operand="a predicate, a value or '('",
    value="a predicate, a value or '('",
    fields=None,  # the summary's keys, checked by `Check.validate` (the engine's list, imported late)
    functions=FUNCTIONS,
    globals=frozenset({"summary"}),
)

HELP = (
    "Checks are small expressions over the replay, e.g. 'leader_elected_within(5s)', "
    "'no_invariant_violations', 'node[2].electionState == \"CLOSED\"' (or 'node 2 state == CLOSED'), "
    "'no_replay_past_commit', 'longest_leaderless() < 2s', combined with and/or/not and parentheses.  Predicates: "
    + ", ".join(PREDICATES)
    + "; measures: "
    + ", ".join(f"{m}()" for m in MEASURES)
    + "; node[ID].FIELD reads the summary (electionState, role, leadershipTermId, leaderMemberId, "
    "candidateTermId, logPosition, appendPosition, commitPosition); a FIELD without a node holds for some member."
)


class CheckError(ValueError):
    """A check that does not parse: ``str()`` says where and what was expected."""


@dataclass(frozen=True)
class Check:
    """A parsed check; `evaluate(records)` answers it for one replay."""

    expression: Expression

    @property
    def text(self) -> str:
        return self.expression.text

    def evaluate(self, records: Sequence[Mapping[str, Any]]) -> bool:
        facts = _Facts(records)
        nodes = facts.summary.get("nodes") or {}
        states = {int(k): v for k, v in nodes.items() if str(k).lstrip("-").isdigit() and isinstance(v, Mapping)}
        return self.expression.holds(Scene(states, None, {"summary": facts.summary}, facts.call))

    def validate(self, members: Sequence[int]) -> None:
        """Refuse, with a `CheckError` saying what exists, a check that names a member the replay does
        not have, a member field the summary does not carry or a state or role Aeron does not have:
        such a check would be quietly false on every version."""
        from engine.replay import SUMMARY_KEYS

        try:
            expressions.validate(self.expression, members, fields=SUMMARY_KEYS)
        except expressions.ExpressionError as error:
            raise CheckError(f"check: {error}") from None

    def __str__(self) -> str:
        return self.text


def parse_check(text: str) -> Check:
    try:
        expression = expressions.parse(text, LANGUAGE)
    except expressions.ExpressionError as error:
        raise CheckError(f"check: {error}") from None
    if expression.watches:
        raise CheckError("check: 'changes' and 'watch' compare a member's state with the state before an event;"
                         " a check is asked of the end of a replay")
    return Check(expression)


# -- evaluation ----------------------------------------------------------------------------------------------


class _Facts:
    """What the checks ask of a trace, computed once on demand."""

    def __init__(self, records: Sequence[Mapping[str, Any]]) -> None:
        self.records = [r for r in records if r.get("kind") != "summary"]
        summaries = [r for r in records if r.get("kind") == "summary"]
        self.summary: Mapping[str, Any] = summaries[-1] if summaries else {}
        self._stretches: list[int] | None = None

    def count(self, kind: str) -> int:
        return sum(1 for r in self.records if r.get("kind") == kind)

    def node_field(self, node: int, field: str) -> Any:
        nodes = self.summary.get("nodes") or {}
        return (nodes.get(str(node)) or {}).get(field)

    def leader_elected(self) -> bool:
        for state in (self.summary.get("nodes") or {}).values():
            if state.get("role") == "LEADER" and state.get("electionState") == "CLOSED":
                return True
        return False

    def stretches(self) -> list[int]:
        if self._stretches is None:
            self._stretches = leaderless_stretches(self.records, self.summary)
        return self._stretches

    def leader_elections(self) -> int:
        role: dict[Any, str] = {}
        count = 0
        for r in self.records:
            if r.get("kind") == "role":
                role[r.get("node")] = r.get("to")
            elif r.get("kind") == "state" and r.get("to") == "CLOSED" and role.get(r.get("node")) == "LEADER":
                count += 1
        return count

    def replay_past_commit(self) -> bool:
        committed = 0
        for r in self.records:
            kind = r.get("kind")
            if kind == "send":
                fields = r.get("fields") or {}
                if r.get("type") == "CommitPosition":
                    committed = max(committed, _int(fields.get("logPosition"), 0))
                elif r.get("type") == "NewLeadershipTerm" and "commitPosition" in fields:
                    committed = max(committed, _int(fields.get("commitPosition"), 0))
            elif kind == "state" and r.get("from") == "FOLLOWER_REPLAY":
                if _int(r.get("logPosition"), 0) > committed:
                    return True
        return False

    def state_reached(self, node: Any, state: Any) -> bool:
        return any(r.get("kind") == "state" and r.get("node") == node and r.get("to") == state for r in self.records)

    def call(self, name: str, args: tuple[Any, ...]) -> Any:
        """The answer of predicate or measure ``name`` (`FUNCTIONS`) for this trace."""
        if name == "no_invariant_violations":
            return self.count("invariant") == 0
        if name == "no_divergences":
            return self.count("divergence") == 0 and not self.summary.get("divergences")
        if name == "leader_elected":
            return self.leader_elected()
        if name == "leader_elected_within":
            return all(s <= args[0] for s in self.stretches())
        if name == "no_replay_past_commit":
            return not self.replay_past_commit()
        if name == "state_reached":
            return self.state_reached(args[0], args[1])
        if name == "longest_leaderless":
            return max(self.stretches(), default=0)
        if name == "leader_elections":
            return self.leader_elections()
        if name == "invariant_violations":
            return self.count("invariant")
        if name == "max_term":
            return self.max_term()
        raise AssertionError(f"unknown check function {name!r}")

    def max_term(self) -> Any:
        terms = [s.get("leadershipTermId") for s in (self.summary.get("nodes") or {}).values()]
        terms = [t for t in terms if isinstance(t, int)]
        return max(terms) if terms else None


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def leaderless_stretches(records: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]) -> list[int]:
    """Durations (ns) of the stretches without an established leader (see the module docstring)."""
    members = {r.get("node") for r in records if r.get("node") is not None}
    members |= {int(k) for k in (summary.get("nodes") or {})}
    quorum = len(members) // 2 + 1
    role: dict[Any, str] = {}
    in_election: dict[Any, bool] = {}
    leader: Any = None
    start: int | None = None
    stretches: list[int] = []
    first_ts = next((r.get("ts") for r in records if r.get("ts") is not None), None)
    if first_ts is not None:
        start = first_ts

    def lose(ts: int) -> None:
        nonlocal leader, start
        if leader is not None:
            leader = None
            start = ts

    for r in records:
        ts, node, kind = r.get("ts"), r.get("node"), r.get("kind")
        if ts is None:
            continue
        if kind == "role":
            role[node] = r.get("to")
            if node == leader and r.get("to") != "LEADER":
                lose(ts)
        elif kind == "state":
            to = r.get("to")
            if to == "CLOSED":
                in_election[node] = False
                if role.get(node) == "LEADER" and leader != node:
                    if leader is None and start is not None:
                        stretches.append(ts - start)
                    leader, start = node, None
            else:
                in_election[node] = True
                if node == leader:
                    lose(ts)
                elif leader is not None and sum(1 for v in in_election.values() if v) >= quorum:
                    lose(ts)
        elif (kind == "input" and r.get("type") in ("MemberCrash", "MemberStop")) or (
            kind == "moduleState" and r.get("to") == "CLOSED"
        ):
            in_election[node] = False
            role[node] = "FOLLOWER"
            if node == leader:
                lose(ts)
        elif kind == "input" and r.get("type") == "MemberStart":
            in_election[node] = True
            role[node] = "FOLLOWER"
    if leader is None and start is not None:
        end = summary.get("ts")
        if not isinstance(end, int):
            end = max((r.get("ts") for r in records if r.get("ts") is not None), default=start)
        stretches.append(max(0, end - start))
    return stretches
