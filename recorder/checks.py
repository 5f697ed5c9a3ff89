"""Checks: small true/false questions about a replay, in a tiny language that is parsed, never eval'd.

A check is asked of one replay's trace records (contract §3; the summary record last), as `recount
bisect --check` does for each version it tries.  The language::

    check      := term ("or" term)*
    term       := factor ("and" factor)*
    factor     := "not" factor | "(" check ")" | comparison | predicate
    comparison := value ("==" | "!=" | "<" | "<=" | ">" | ">=") value
    value      := "node[" INT "]." FIELD       a member's field in the summary (electionState, role,
                                               leadershipTermId, leaderMemberId, candidateTermId,
                                               logPosition, appendPosition, commitPosition)
                | "summary." FIELD              a summary field (divergences, model, seed, ...)
                | NAME "(" args ")"            a measure (below)
                | INT | DURATION | "STRING" | true | false | null
    DURATION   := a number and a unit, "2.5s" "200ms" (`engine.model.config.parse_duration_ns`; ns)

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
was expected.  Evaluation never fails: a missing member or field is ``null``, and ordering
comparisons with a non-number are false.  Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.model.config import parse_duration_ns

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<duration>\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m)\b)
  | (?P<int>-?\d+)
  | (?P<string>"[^"\\]*")
  | (?P<op>==|!=|<=|>=|<|>)
  | (?P<punct>[()\[\],.])
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    """,
    re.VERBOSE,
)

PREDICATES = ("no_invariant_violations", "no_divergences", "leader_elected", "leader_elected_within", "no_replay_past_commit", "state_reached")
MEASURES = ("longest_leaderless", "leader_elections", "invariant_violations", "max_term")
KEYWORDS = ("and", "or", "not", "true", "false", "null", "node", "summary")

HELP = (
    "Checks are small expressions over the replay, e.g. 'leader_elected_within(5s)', "
    "'no_invariant_violations', 'node[2].electionState == \"CLOSED\"', 'no_replay_past_commit', "
    "'longest_leaderless() < 2s', combined with and/or/not and parentheses.  Predicates: "
    + ", ".join(PREDICATES)
    + "; measures: "
    + ", ".join(f"{m}()" for m in MEASURES)
    + "; node[ID].FIELD reads the summary (electionState, role, leadershipTermId, leaderMemberId, "
    "candidateTermId, logPosition, appendPosition, commitPosition)."
)


class CheckError(ValueError):
    """A check that does not parse: ``str()`` says where and what was expected."""


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str
    text: str
    column: int  # 1-based


def _tokens(text: str) -> list[_Tok]:
    out = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise CheckError(f"check: column {position + 1}: unexpected {text[position]!r}")
        kind = match.lastgroup or ""
        if kind != "space":
            out.append(_Tok(kind, match.group(), position + 1))
        position = match.end()
    out.append(_Tok("end", "", len(text) + 1))
    return out


# -- the syntax tree: nested tuples, evaluated by `_eval` ---------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.i = 0

    def peek(self) -> _Tok:
        return self.tokens[self.i]

    def take(self) -> _Tok:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def fail(self, expected: str) -> CheckError:
        token = self.peek()
        got = "the end" if token.kind == "end" else repr(token.text)
        return CheckError(f"check: column {token.column}: expected {expected}, got {got}")

    def expect(self, text: str) -> None:
        if self.peek().text != text:
            raise self.fail(repr(text))
        self.take()

    def parse(self) -> tuple:
        if self.peek().kind == "end":
            raise self.fail("a check")
        tree = self.check()
        if self.peek().kind != "end":
            raise self.fail("'and', 'or' or the end")
        return tree

    def check(self) -> tuple:
        left = self.term()
        while self.peek().text == "or":
            self.take()
            left = ("or", left, self.term())
        return left

    def term(self) -> tuple:
        left = self.factor()
        while self.peek().text == "and":
            self.take()
            left = ("and", left, self.factor())
        return left

    def factor(self) -> tuple:
        token = self.peek()
        if token.text == "not":
            self.take()
            return ("not", self.factor())
        if token.text == "(":
            self.take()
            inner = self.check()
            self.expect(")")
            return self._maybe_comparison(("group", inner))
        left = self.value_or_predicate()
        return self._maybe_comparison(left)

    def _maybe_comparison(self, left: tuple) -> tuple:
        if self.peek().kind == "op":
            op = self.take().text
            right = self.value_or_predicate()
            if right[0] == "pred":
                raise CheckError(f"check: the right side of {op} must be a value, not the predicate {right[1]}")
            if left[0] in ("pred", "group"):
                raise CheckError(f"check: the left side of {op} must be a value")
            return ("cmp", op, left, right)
        if left[0] not in ("pred", "group"):
            raise self.fail("a comparison operator (== != < <= > >=) after a value")
        return left[1] if left[0] == "group" else left

    def value_or_predicate(self) -> tuple:
        token = self.take()
        if token.kind == "duration":
            return ("lit", parse_duration_ns(token.text))
        if token.kind == "int":
            return ("lit", int(token.text))
        if token.kind == "string":
            return ("lit", token.text[1:-1])
        if token.kind != "name":
            self.i -= 1
            raise self.fail("a predicate, a value or '('")
        name = token.text
        if name in ("true", "false"):
            return ("lit", name == "true")
        if name == "null":
            return ("lit", None)
        if name == "node":
            self.expect("[")
            index = self.take()
            if index.kind != "int":
                self.i -= 1
                raise self.fail("a member id")
            self.expect("]")
            self.expect(".")
            field = self.take()
            if field.kind != "name":
                self.i -= 1
                raise self.fail("a field name")
            return ("node", int(index.text), field.text)
        if name == "summary":
            self.expect(".")
            field = self.take()
            if field.kind != "name":
                self.i -= 1
                raise self.fail("a field name")
            return ("summary", field.text)
        if name in KEYWORDS:
            self.i -= 1
            raise self.fail("a predicate, a value or '('")
        args: list[tuple] = []
        if self.peek().text == "(":
            self.take()
            if self.peek().text != ")":
                args.append(self.value_or_predicate())
                while self.peek().text == ",":
                    self.take()
                    args.append(self.value_or_predicate())
            self.expect(")")
        if name in PREDICATES:
            _check_arity(name, args, token.column)
            return ("pred", name, tuple(args))
        if name in MEASURES:
            if args:
                raise CheckError(f"check: column {token.column}: {name}() takes no arguments")
            return ("measure", name)
        raise CheckError(
            f"check: column {token.column}: unknown name {name!r}"
            f" (predicates: {', '.join(PREDICATES)}; measures: {', '.join(MEASURES)})"
        )


_ARITY = {
    "no_invariant_violations": (),
    "no_divergences": (),
    "leader_elected": (),
    "leader_elected_within": ("a duration",),
    "no_replay_past_commit": (),
    "state_reached": ("a member id", "a state name"),
}


def _check_arity(name: str, args: list[tuple], column: int) -> None:
    wanted = _ARITY[name]
    if len(args) != len(wanted) or any(a[0] != "lit" for a in args):
        shape = f"{name}({', '.join(wanted)})" if wanted else name
        raise CheckError(f"check: column {column}: expected {shape}")


@dataclass(frozen=True)
class Check:
    """A parsed check; `evaluate(records)` answers it for one replay."""

    text: str
    tree: tuple

    def evaluate(self, records: Sequence[Mapping[str, Any]]) -> bool:
        return bool(_eval(self.tree, _Facts(records)))

    def validate(self, members: Sequence[int]) -> None:
        """Refuse, with a `CheckError` saying what exists, a check that names a member the replay does
        not have, a member field the summary does not carry or a state or role Aeron does not have:
        such a check would be quietly false on every version."""
        _validate(self.tree, sorted(members))

    def __str__(self) -> str:
        return self.text


def _names(values: Sequence[Any]) -> str:
    return ", ".join(str(v) for v in values)


def _validate(tree: tuple, members: list[int]) -> None:
    from engine.model.agent import Role
    from engine.model.election import ElectionState
    from engine.replay import SUMMARY_KEYS

    kind = tree[0]
    if kind in ("or", "and"):
        _validate(tree[1], members)
        _validate(tree[2], members)
    elif kind == "not":
        _validate(tree[1], members)
    elif kind == "node":
        if tree[1] not in members:
            raise CheckError(f"check: no member {tree[1]} in this replay (members: {_names(members)})")
        if tree[2] not in SUMMARY_KEYS:
            raise CheckError(f"check: node[{tree[1]}].{tree[2]}: no such field (fields: {_names(SUMMARY_KEYS)})")
    elif kind == "cmp":
        _validate(tree[2], members)
        _validate(tree[3], members)
        for side, other in ((tree[2], tree[3]), (tree[3], tree[2])):
            if side[0] == "node" and other[0] == "lit" and isinstance(other[1], str):
                allowed = {"electionState": ElectionState, "role": Role}.get(side[2])
                if allowed is not None and other[1] not in allowed.__members__:
                    raise CheckError(f"check: {other[1]!r} is not a value of {side[2]} ({_names(allowed.__members__)})")
    elif kind == "pred" and tree[1] == "state_reached":
        member, state = (a[1] for a in tree[2])
        if member not in members:
            raise CheckError(f"check: no member {member} in this replay (members: {_names(members)})")
        if state not in ElectionState.__members__:
            raise CheckError(f"check: {state!r} is not an election state ({_names(ElectionState.__members__)})")


def parse_check(text: str) -> Check:
    return Check(text.strip(), _Parser(text).parse())


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


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _eval(tree: tuple, facts: _Facts) -> Any:
    kind = tree[0]
    if kind == "or":
        return _eval(tree[1], facts) or _eval(tree[2], facts)
    if kind == "and":
        return _eval(tree[1], facts) and _eval(tree[2], facts)
    if kind == "not":
        return not _eval(tree[1], facts)
    if kind == "lit":
        return tree[1]
    if kind == "node":
        return facts.node_field(tree[1], tree[2])
    if kind == "summary":
        return facts.summary.get(tree[1])
    if kind == "cmp":
        op, left, right = tree[1], _eval(tree[2], facts), _eval(tree[3], facts)
        if op in ("==", "!="):
            return _COMPARE[op](left, right)
        return _number(left) and _number(right) and _COMPARE[op](left, right)
    if kind == "measure":
        name = tree[1]
        if name == "longest_leaderless":
            return max(facts.stretches(), default=0)
        if name == "leader_elections":
            return facts.leader_elections()
        if name == "invariant_violations":
            return facts.count("invariant")
        return facts.max_term()
    if kind == "pred":
        name, args = tree[1], [a[1] for a in tree[2]]
        if name == "no_invariant_violations":
            return facts.count("invariant") == 0
        if name == "no_divergences":
            return facts.count("divergence") == 0 and not facts.summary.get("divergences")
        if name == "leader_elected":
            return facts.leader_elected()
        if name == "leader_elected_within":
            return _number(args[0]) and all(s <= args[0] for s in facts.stretches())
        if name == "no_replay_past_commit":
            return not facts.replay_past_commit()
        return facts.state_reached(args[0], args[1])
    raise AssertionError(f"unknown check node {kind!r}")
