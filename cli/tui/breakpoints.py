"""Breakpoints: conditions over the members' state, in a tiny grammar parsed here (never `eval`).

A condition reads like what one would say about the cluster::

    node 2 state == FOLLOWER_CATCHUP
    candidateTermId > 3
    role == LEADER and term >= 2
    node 0 isRunning == false or (node 1 nodeState.candidateTermId >= 5)
    members[1].logPosition > 1024
    watch node 1 candidateTermId            (a watchpoint: stops wherever the value changes)
    node 2 state changes and node 2 role == LEADER

Grammar (keywords are lower case; names are Aeron's, as `Node.inspect()` gives them)::

    condition  := or
    or         := and ("or" and)*
    and        := not ("and" not)*
    not        := "not" not | scoped
    scoped     := ["node" INT] primary
    primary    := "(" or ")" | "watch" ["node" INT] path ["changes"] | path "changes" | path OP value
    path       := NAME ("." NAME | "[" INT "]")*
    OP         := "==" | "=" | "!=" | "<" | "<=" | ">" | ">="
    value      := INT | NAME | "quoted text" | true | false | null

Meaning: a comparison under ``node N`` reads member N's state; one without reads "the member", and
the whole condition holds when it holds for some member (so ``role == LEADER and term == 2`` means
one member is leader of term 2, not that one member leads and another is in term 2).  A path that
leads nowhere (a member not started, a key the state does not have) makes its comparison false.
``state``, ``term`` and ``leader`` are short for ``electionState``, ``leadershipTermId`` and
``leaderMemberId``; ``nodeState.candidateTermId`` for ``nodeState.candidateTerm.candidateTermId``;
``members[N]`` picks the entry whose ``memberId`` is N.  Ordering operators need a number.
``path changes`` (or ``watch path``) holds at an event after which the value differs from its value
before it; a condition that has one fires at every such event, not only when it becomes true.

`parse(text)` returns a `Condition` (a callable over ``{memberId: state}``) or raises
`BreakpointError` with the column of the mistake; `Condition.validate` refuses members, states and
roles that cannot be (the enum values come from the engine's own enums).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.model.agent import ModuleState, Role
from engine.model.election import ElectionState

ALIASES = {
    "state": ("electionState",),
    "term": ("leadershipTermId",),
    "leader": ("leaderMemberId",),
    "nodeState.candidateTermId": ("nodeState", "candidateTerm", "candidateTermId"),
    "nodeState.logPosition": ("nodeState", "candidateTerm", "logPosition"),
    "nodeState.timestamp": ("nodeState", "candidateTerm", "timestamp"),
}

#: The first names a path may start with (what `Node.inspect()` documents), and the aliases.
KNOWN_FIELDS = frozenset(
    {
        "electionState",
        "role",
        "moduleState",
        "leadershipTermId",
        "logLeadershipTermId",
        "candidateTermId",
        "leaderMemberId",
        "logPosition",
        "appendPosition",
        "commitPosition",
        "catchupJoinPosition",
        "agentLeadershipTermId",
        "notifiedCommitPosition",
        "logRecordingId",
        "logSessionId",
        "electionCount",
        "errors",
        "deadlines",
        "members",
        "nodeState",
        "recordingLog",
        "memberId",
        "isRunning",
        "now",
        "state",
        "term",
        "leader",
    }
)

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<number>-?\d+)
      | (?P<op>==|!=|<=|>=|=|<|>)
      | (?P<punct>[().\[\]])
      | (?P<string>"[^"]*"|'[^']*')
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)

KEYWORDS = frozenset({"and", "or", "not", "node", "watch", "changes"})
_MISSING = object()


class BreakpointError(ValueError):
    """A condition that does not parse; the message names the column."""


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    text: str
    column: int


def _tokens(text: str) -> list[_Token]:
    out = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            column = len(text) - len(text[position:].lstrip()) + 1
            raise BreakpointError(f"column {column}: unexpected {text[column - 1]!r}")
        kind = match.lastgroup or "?"
        value = match.group(kind)
        out.append(_Token(kind, value, match.start(kind) + 1))
        position = match.end()
    return out


# -- the syntax tree ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Compare:
    path: tuple[str | int, ...]
    op: str
    value: Any
    node: int | None

    def holds(self, states: Mapping[int, Mapping[str, Any]], member: int | None, previous=None) -> bool:
        target = self.node if self.node is not None else member
        state = states.get(target) if target is not None else None
        if state is None:
            return False
        actual = _lookup(state, self.path)
        if actual is _MISSING:
            return False
        return _compare(actual, self.op, self.value)

    def unscoped(self) -> bool:
        return self.node is None

    def watches(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class _Changes:
    """``path changes``: the value after the event differs from the value before it."""

    path: tuple[str | int, ...]
    node: int | None

    def holds(self, states: Mapping[int, Mapping[str, Any]], member: int | None, previous=None) -> bool:
        target = self.node if self.node is not None else member
        if target is None or previous is None:
            return False
        now, before = states.get(target), previous.get(target)
        value = _lookup(now, self.path) if now is not None else _MISSING
        old = _lookup(before, self.path) if before is not None else _MISSING
        return value is not _MISSING and value != old

    def unscoped(self) -> bool:
        return self.node is None

    def watches(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class _Not:
    inner: Any

    def holds(self, states, member, previous=None):
        return not self.inner.holds(states, member, previous)

    def watches(self) -> bool:
        return self.inner.watches()

    def unscoped(self) -> bool:
        return self.inner.unscoped()


@dataclass(frozen=True, slots=True)
class _All:
    parts: tuple[Any, ...]

    def holds(self, states, member, previous=None):
        return all(p.holds(states, member, previous) for p in self.parts)

    def unscoped(self) -> bool:
        return any(p.unscoped() for p in self.parts)

    def watches(self) -> bool:
        return any(p.watches() for p in self.parts)


@dataclass(frozen=True, slots=True)
class _Any:
    parts: tuple[Any, ...]

    def holds(self, states, member, previous=None):
        return any(p.holds(states, member, previous) for p in self.parts)

    def unscoped(self) -> bool:
        return any(p.unscoped() for p in self.parts)

    def watches(self) -> bool:
        return any(p.watches() for p in self.parts)


def _lookup(state: Mapping[str, Any], path: tuple[str | int, ...]) -> Any:
    value: Any = state
    for step in path:
        if isinstance(step, int):
            if not isinstance(value, list):
                return _MISSING
            by_id = [v for v in value if isinstance(v, Mapping) and v.get("memberId") == step]
            if by_id:
                value = by_id[0]
            elif 0 <= step < len(value):
                value = value[step]
            else:
                return _MISSING
        else:
            if not isinstance(value, Mapping) or step not in value:
                return _MISSING
            value = value[step]
    return value


def _compare(actual: Any, op: str, expected: Any) -> bool:
    if op in ("==", "!="):
        if isinstance(expected, bool) or expected is None:
            equal = actual is expected or actual == expected
        elif isinstance(expected, int):
            equal = isinstance(actual, int) and not isinstance(actual, bool) and actual == expected
        else:
            equal = str(getattr(actual, "name", actual)) == expected
        return equal if op == "==" else not equal
    if isinstance(actual, bool) or not isinstance(actual, int):
        return False
    if op == "<":
        return actual < expected
    if op == "<=":
        return actual <= expected
    if op == ">":
        return actual > expected
    return actual >= expected


# -- the parser -----------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.i = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise BreakpointError(f"column {len(self.text) + 1}: the condition ends too early")
        self.i += 1
        return token

    def keyword(self, word: str) -> bool:
        token = self.peek()
        if token is not None and token.kind == "name" and token.text == word:
            self.i += 1
            return True
        return False

    def expect(self, kind: str, text: str | None = None) -> _Token:
        token = self.take()
        if token.kind != kind or (text is not None and token.text != text):
            wanted = repr(text) if text is not None else kind
            raise BreakpointError(f"column {token.column}: expected {wanted}, got {token.text!r}")
        return token

    def parse(self) -> Any:
        tree = self.or_()
        token = self.peek()
        if token is not None:
            raise BreakpointError(
                f"column {token.column}: unexpected {token.text!r} (join conditions with and/or)"
            )
        return tree

    def or_(self) -> Any:
        parts = [self.and_()]
        while self.keyword("or"):
            parts.append(self.and_())
        return parts[0] if len(parts) == 1 else _Any(tuple(parts))

    def and_(self) -> Any:
        parts = [self.not_()]
        while self.keyword("and"):
            parts.append(self.not_())
        return parts[0] if len(parts) == 1 else _All(tuple(parts))

    def not_(self) -> Any:
        if self.keyword("not"):
            return _Not(self.not_())
        return self.scoped(None)

    def scoped(self, node: int | None) -> Any:
        if self.keyword("watch"):
            if self.keyword("node"):
                node = int(self.expect("number").text)
            path = self.path()
            self.keyword("changes")
            return _Changes(path, node)
        if self.keyword("node"):
            token = self.expect("number")
            node = int(token.text)
        token = self.peek()
        if token is not None and token.kind == "punct" and token.text == "(":
            self.take()
            inner = self.or_()
            self.expect("punct", ")")
            return _scope(inner, node) if node is not None else inner
        return self.comparison(node)

    def comparison(self, node: int | None) -> Any:
        path = self.path()
        if self.keyword("changes"):
            return _Changes(path, node)
        op_token = self.take()
        if op_token.kind != "op":
            raise BreakpointError(
                f"column {op_token.column}: expected a comparison (== != < <= > >=), got {op_token.text!r}"
            )
        op = "==" if op_token.text == "=" else op_token.text
        value = self.value()
        if op not in ("==", "!=") and (isinstance(value, bool) or not isinstance(value, int)):
            raise BreakpointError(f"column {op_token.column}: {op} compares numbers, got {value!r}")
        return _Compare(path, op, value, node)

    def path(self) -> tuple[str | int, ...]:
        first = self.take()
        if first.kind != "name" or first.text in KEYWORDS:
            raise BreakpointError(
                f"column {first.column}: expected a field name such as electionState, got {first.text!r}"
            )
        if first.text not in KNOWN_FIELDS:
            known = ", ".join(sorted(KNOWN_FIELDS))
            raise BreakpointError(f"column {first.column}: unknown field {first.text!r} (known: {known})")
        names: list[str | int] = [first.text]
        while True:
            token = self.peek()
            if token is None or token.kind != "punct" or token.text not in (".", "["):
                break
            self.take()
            if token.text == ".":
                names.append(self.expect("name").text)
            else:
                names.append(int(self.expect("number").text))
                self.expect("punct", "]")
        dotted = ".".join(str(n) for n in names)
        if dotted in ALIASES:
            return ALIASES[dotted]
        if isinstance(names[0], str) and names[0] in ALIASES:
            return ALIASES[names[0]] + tuple(names[1:])
        return tuple(names)

    def value(self) -> Any:
        token = self.take()
        if token.kind == "number":
            return int(token.text)
        if token.kind == "string":
            return token.text[1:-1]
        if token.kind == "name":
            return {"true": True, "false": False, "null": None}.get(token.text, token.text)
        raise BreakpointError(f"column {token.column}: expected a value, got {token.text!r}")


def _scope(tree: Any, node: int) -> Any:
    """Bind every comparison in ``tree`` that has no member yet to ``node``."""
    if isinstance(tree, _Compare):
        return tree if tree.node is not None else _Compare(tree.path, tree.op, tree.value, node)
    if isinstance(tree, _Changes):
        return tree if tree.node is not None else _Changes(tree.path, node)
    if isinstance(tree, _Not):
        return _Not(_scope(tree.inner, node))
    if isinstance(tree, _All):
        return _All(tuple(_scope(p, node) for p in tree.parts))
    return _Any(tuple(_scope(p, node) for p in tree.parts))


#: The values a state name may take, for the fields that hold one (Aeron's enum constants).
ENUM_VALUES = {
    "electionState": tuple(ElectionState.__members__),
    "role": tuple(Role.__members__),
    "moduleState": tuple(ModuleState.__members__),
}


def _compares(tree: Any) -> list[Any]:
    if isinstance(tree, (_Compare, _Changes)):
        return [tree]
    if isinstance(tree, _Not):
        return _compares(tree.inner)
    return [c for p in tree.parts for c in _compares(p)]


def _named(tree: Any) -> set[int]:
    """The members a condition names with ``node N``."""
    if isinstance(tree, (_Compare, _Changes)):
        return {tree.node} if tree.node is not None else set()
    if isinstance(tree, _Not):
        return _named(tree.inner)
    return set().union(*(_named(p) for p in tree.parts))


@dataclass(frozen=True, slots=True)
class Condition:
    """A parsed breakpoint condition; call it with ``{memberId: Node.inspect()}``."""

    text: str
    tree: Any

    def __call__(self, states: Mapping[int, Mapping[str, Any]], previous: Mapping[int, Mapping[str, Any]] | None = None) -> bool:
        """Does it hold with ``states`` after an event (``previous``: before it, for ``changes``)?"""
        if not self.tree.unscoped():
            return bool(self.tree.holds(states, None, previous))
        return any(self.tree.holds(states, member, previous) for member in sorted(states))

    def validate(self, members: Any) -> None:
        """Refuse a condition naming a member not in the replay, or a state or role Aeron does not have
        (it would never hold, and a breakpoint that never fires looks like "nothing happened")."""
        known = sorted(members)
        for part in _compares(self.tree):
            if part.node is not None and part.node not in known:
                raise BreakpointError(f"no member {part.node} in this replay (members: {', '.join(map(str, known))})")
            allowed = ENUM_VALUES.get(part.path[0]) if len(part.path) == 1 else None
            if isinstance(part, _Compare) and allowed and isinstance(part.value, str) and part.value not in allowed:
                raise BreakpointError(f"{part.value!r} is not a value of {part.path[0]} ({', '.join(allowed)})")

    @property
    def watches(self) -> bool:
        """Has a ``changes`` part: it fires at every event where it holds, not only where it starts to."""
        return self.tree.watches()

    def members(self, states: Mapping[int, Mapping[str, Any]], previous: Mapping[int, Mapping[str, Any]] | None = None) -> list[int]:
        """The members for which the condition holds (those it names, when it names its members)."""
        if not self.tree.unscoped():
            return sorted(_named(self.tree) & set(states)) if self.tree.holds(states, None, previous) else []
        return [m for m in sorted(states) if self.tree.holds(states, m, previous)]


def value_at(state: Mapping[str, Any] | None, field: str) -> Any:
    """The value ``field`` (a path as conditions write it, aliases included) has in ``state``; ``-``
    when the member or the field is not there."""
    if state is None:
        return "-"
    parser = _Parser(field)
    path = parser.path()
    value = _lookup(state, path)
    if value is _MISSING:
        return "-"
    return getattr(value, "name", value)


def parse(text: str) -> Condition:
    text = text.strip()
    if not text:
        raise BreakpointError("column 1: empty condition")
    return Condition(text, _Parser(text).parse())
