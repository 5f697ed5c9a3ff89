"""Conditions over the members' state: one small language, parsed here and never `eval`'d.

Two front-ends ask questions in it.  `recorder.checks` (``recount bisect --check``) asks them of a whole
replay: its functions (``leader_elected_within(5s)``, ``max_term()``) read the trace, its fields the
members' final state in the summary.  `cli.tui.breakpoints` asks them of the members' state after each
event, and of the state before it (``changes``, ``watch``).  Each brings a `Language`: the fields and
functions it knows and how its users are told what was expected; the grammar, the parser and the
evaluator are this module's.  The grammar::

    expression := or
    or         := and ("or" and)*
    and        := unary ("and" unary)*
    unary      := "not" unary | "node" INT primary | primary
    primary    := "(" or ")"
                | "watch" ["node" INT] field ["changes"]
                | field "changes"
                | operand OP operand
                | predicate                                  a function that answers true or false
    operand    := field | GLOBAL "." path | function | literal
    field      := "node" "[" INT "]" "." path | path         member INT's state, or "the member"'s
    path       := NAME ("." NAME | "[" INT "]")*
    function   := NAME ["(" [operand ("," operand)*] ")"]
    literal    := INT | DURATION | "text" | true | false | null
                | NAME                                       right of an operator: a constant (LEADER)
    OP         := "==" | "=" | "!=" | "<" | "<=" | ">" | ">="
    DURATION   := a number and a unit, "2.5s", "200ms" (`engine.model.config.parse_duration_ns`), in ns

``node 2 state == CLOSED`` and ``node[2].electionState == "CLOSED"`` say the same.  ``state``, ``term``
and ``leader`` are short for ``electionState``, ``leadershipTermId`` and ``leaderMemberId``;
``nodeState.candidateTermId`` for ``nodeState.candidateTerm.candidateTermId``; ``members[N]`` picks the
entry whose ``memberId`` is N (else the N-th).  A bare NAME on the left of an operator is a field; in a
language with functions, ``NAME(`` is a call.

Meaning.  A field with no member (not under ``node N``) is "the member's", and the whole expression
holds when it holds for some member: ``role == LEADER and term == 2`` means one member leads term 2.
A field that leads nowhere (no such member, no such key) reads as ``null``.  ``==`` and ``!=`` compare
by type (a boolean is not a number; an enum compares by its name); ``<`` ``<=`` ``>`` ``>=`` compare
numbers and are false for anything else, and a literal that is not a number beside one is refused when
parsed.  ``field changes`` (or ``watch field``) holds at an event after which the field's value differs
from its value before it (never without a "before").

`parse(text, language)` gives an `Expression`; a mistake is an `ExpressionError` naming the column
(`Expected` when a token was not what the grammar wanted there; ``found`` None at the end).
`validate` refuses members the replay does not have, fields a language knows only later, and
state and role names Aeron does not have.  The evaluator reads a `Scene`: a plain mapping of member id
to that member's state (a dict with Aeron's camelCase keys, as ``MemberView.to_json()`` and the summary give
it), the states before the event, the language's globals, and its functions.  Pure: no I/O.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from engine.model.config import parse_duration_ns

#: Short names for the paths users write most.
ALIASES: dict[str, tuple[str, ...]] = {
    "state": ("electionState",),
    "term": ("leadershipTermId",),
    "leader": ("leaderMemberId",),
    "nodeState.candidateTermId": ("nodeState", "candidateTerm", "candidateTermId"),
    "nodeState.logPosition": ("nodeState", "candidateTerm", "logPosition"),
    "nodeState.timestamp": ("nodeState", "candidateTerm", "timestamp"),
}

KEYWORDS = frozenset({"and", "or", "not", "node", "watch", "changes"})
OPERATORS = "== != < <= > >="

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<duration>-?[0-9]+(?:\.[0-9]+)?(?:ns|us|µs|ms|s|m)\b)
      | (?P<number>-?[0-9]+)
      | (?P<string>"[^"]*")
      | (?P<op>==|!=|<=|>=|=|<|>)
      | (?P<punct>[()\[\],.])
      | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)
_LITERALS = {"true": True, "false": False, "null": None}
#: What `lookup` gives when a path leads nowhere.
MISSING = object()


class ExpressionError(ValueError):
    """An expression that does not parse, or names what cannot be; one line."""

    def __init__(self, message: str, *, column: int | None = None) -> None:
        super().__init__(f"column {column}: {message}" if column is not None else message)
        self.column = column


class Expected(ExpressionError):
    """A token that is not what the grammar wanted at ``column``; ``found`` is None at the end."""

    def __init__(self, column: int, expected: str, found: str | None) -> None:
        super().__init__(f"expected {expected}, got {'the end' if found is None else repr(found)}", column=column)
        self.expected = expected
        self.found = found


# -- what a front-end brings ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Parameter:
    """One argument of a function: how it is named to users (``a duration``) and its type."""

    description: str
    kind: type
    #: For a member id or a state name: checked by `validate` (``member``, ``electionState``).
    names: str | None = None


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    parameters: tuple[Parameter, ...] = ()
    #: True: answers true or false, and stands alone as a condition; False: a value, compared.
    predicate: bool = True

    @property
    def shape(self) -> str:
        if self.parameters:
            return f"{self.name}({', '.join(p.description for p in self.parameters)})"
        return self.name if self.predicate else f"{self.name}()"


@dataclass(frozen=True)
class Language:
    """What a front-end's expressions may say."""

    #: What users call one expression ("check", "condition"), in messages.
    noun: str
    #: What may start an operand, as this front-end's users are told.
    operand: str
    #: What may stand right of an operator, likewise.
    value: str
    #: The first names a field's path may have, checked as it is read; None: any (see `validate`).
    fields: frozenset[str] | None = None
    functions: Mapping[str, Function] = field(default_factory=dict)
    #: Names of values that are not a member's (``summary``): ``NAME.path`` reads them.
    globals: frozenset[str] = frozenset()

    def known_functions(self) -> str:
        predicates = [f.name for f in self.functions.values() if f.predicate]
        measures = [f"{f.name}()" for f in self.functions.values() if not f.predicate]
        return f"predicates: {', '.join(predicates)}; measures: {', '.join(measures)}"


@dataclass(frozen=True, slots=True)
class Scene:
    """What an expression is evaluated over."""

    #: member id -> that member's state (camelCase keys), after the event.
    states: Mapping[int, Mapping[str, Any]]
    #: The same before the event (for ``changes``), or None.
    previous: Mapping[int, Mapping[str, Any]] | None = None
    #: The language's global values, by name.
    globals: Mapping[str, Any] = field(default_factory=dict)
    #: The language's functions: (name, arguments) -> value.
    call: Callable[[str, tuple[Any, ...]], Any] | None = None


# -- the syntax tree, which evaluates itself -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Literal:
    value: Any

    def value_in(self, scene: Scene, member: int | None) -> Any:
        return self.value


@dataclass(frozen=True, slots=True)
class Field:
    """A member's field: member ``node``'s, or (None) the member the expression is asked about."""

    path: tuple[str | int, ...]
    node: int | None
    written: str  # as the user wrote it (before aliases), for messages

    def value_in(self, scene: Scene, member: int | None) -> Any:
        value = self.lookup(scene.states, member)
        return None if value is MISSING else value

    def lookup(self, states: Mapping[int, Mapping[str, Any]] | None, member: int | None) -> Any:
        target = self.node if self.node is not None else member
        state = states.get(target) if states is not None and target is not None else None
        return MISSING if state is None else lookup(state, self.path)

    def __str__(self) -> str:
        return self.written if self.node is None else f"node[{self.node}].{self.written}"


@dataclass(frozen=True, slots=True)
class Global:
    name: str
    path: tuple[str | int, ...]

    def value_in(self, scene: Scene, member: int | None) -> Any:
        value = lookup(scene.globals.get(self.name, {}), self.path)
        return None if value is MISSING else value


@dataclass(frozen=True, slots=True)
class Call:
    function: Function
    arguments: tuple[Any, ...]

    def value_in(self, scene: Scene, member: int | None) -> Any:
        if scene.call is None:
            return None
        return scene.call(self.function.name, self.arguments)

    def holds(self, scene: Scene, member: int | None) -> bool:
        return bool(self.value_in(scene, member))


@dataclass(frozen=True, slots=True)
class Compare:
    op: str
    left: Literal | Field | Global | Call
    right: Literal | Field | Global | Call

    def holds(self, scene: Scene, member: int | None) -> bool:
        return compare(self.left.value_in(scene, member), self.op, self.right.value_in(scene, member))


@dataclass(frozen=True, slots=True)
class Changes:
    """``field changes``: the value after the event differs from the value before it."""

    field: Field

    def holds(self, scene: Scene, member: int | None) -> bool:
        if scene.previous is None:
            return False
        value = self.field.lookup(scene.states, member)
        return value is not MISSING and value != self.field.lookup(scene.previous, member)


@dataclass(frozen=True, slots=True)
class Not:
    inner: Any

    def holds(self, scene: Scene, member: int | None) -> bool:
        return not self.inner.holds(scene, member)


@dataclass(frozen=True, slots=True)
class All:
    parts: tuple[Any, ...]

    def holds(self, scene: Scene, member: int | None) -> bool:
        return all(part.holds(scene, member) for part in self.parts)


@dataclass(frozen=True, slots=True)
class AnyOf:
    parts: tuple[Any, ...]

    def holds(self, scene: Scene, member: int | None) -> bool:
        return any(part.holds(scene, member) for part in self.parts)


def lookup(state: Any, path: tuple[str | int, ...]) -> Any:
    """The value at ``path`` in a member's state (``members[N]`` by memberId, else by position), or
    `MISSING` when the path leads nowhere."""
    value: Any = state
    for step in path:
        if isinstance(step, int):
            if not isinstance(value, list):
                return MISSING
            by_id = [v for v in value if isinstance(v, Mapping) and v.get("memberId") == step]
            if by_id:
                value = by_id[0]
            elif 0 <= step < len(value):
                value = value[step]
            else:
                return MISSING
        else:
            if not isinstance(value, Mapping) or step not in value:
                return MISSING
            value = value[step]
    return value


def _plain(value: Any) -> Any:
    return value.name if isinstance(value, enum.Enum) else value


def _is_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def compare(left: Any, op: str, right: Any) -> bool:
    if op in ("==", "!="):
        left, right = _plain(left), _plain(right)
        if _is_number(left) and _is_number(right):
            equal = left == right
        else:
            equal = type(left) is type(right) and left == right
        return equal if op == "==" else not equal
    if not (_is_number(left) and _is_number(right)):
        return False
    if op == "<":
        return left < right
    if op == "<=":
        return left <= right
    if op == ">":
        return left > right
    return left >= right


def _nodes(tree: Any) -> Iterator[Any]:
    """Every node of ``tree``, depth first, left to right."""
    yield tree
    if isinstance(tree, Not):
        yield from _nodes(tree.inner)
    elif isinstance(tree, (All, AnyOf)):
        for part in tree.parts:
            yield from _nodes(part)
    elif isinstance(tree, Compare):
        yield from _nodes(tree.left)
        yield from _nodes(tree.right)
    elif isinstance(tree, Changes):
        yield tree.field


def _scope(tree: Any, node: int) -> Any:
    """``tree`` with every field that has no member yet bound to ``node``."""
    if isinstance(tree, Field):
        return tree if tree.node is not None else Field(tree.path, node, tree.written)
    if isinstance(tree, Compare):
        return Compare(tree.op, _scope(tree.left, node), _scope(tree.right, node))
    if isinstance(tree, Changes):
        return Changes(_scope(tree.field, node))
    if isinstance(tree, Not):
        return Not(_scope(tree.inner, node))
    if isinstance(tree, (All, AnyOf)):
        return type(tree)(tuple(_scope(part, node) for part in tree.parts))
    return tree


# -- a parsed expression ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Expression:
    text: str
    tree: Any
    #: Has a field of "the member": it holds when it holds for some member.
    unscoped: bool
    #: Has a ``changes`` part.
    watches: bool

    @classmethod
    def of(cls, text: str, tree: Any) -> Expression:
        nodes = list(_nodes(tree))
        return cls(
            text,
            tree,
            unscoped=any(isinstance(n, Field) and n.node is None for n in nodes),
            watches=any(isinstance(n, Changes) for n in nodes),
        )

    def holds(self, scene: Scene) -> bool:
        if not self.unscoped:
            return bool(self.tree.holds(scene, None))
        return any(self.tree.holds(scene, member) for member in sorted(scene.states))

    def members(self, scene: Scene) -> list[int]:
        """The members it holds for: of those it names, when it names its members."""
        if not self.unscoped:
            named = {n.node for n in _nodes(self.tree) if isinstance(n, Field)}
            return sorted(named & set(scene.states)) if self.tree.holds(scene, None) else []
        return [member for member in sorted(scene.states) if self.tree.holds(scene, member)]

    def fields(self) -> list[Field]:
        return [n for n in _nodes(self.tree) if isinstance(n, Field)]


@cache
def enum_values() -> dict[str, tuple[str, ...]]:
    """The names a field holding one of Aeron's enums may take (imported when first validated)."""
    from engine.model.agent import ModuleState, Role
    from engine.model.election import ElectionState

    return {
        "electionState": tuple(ElectionState.__members__),
        "role": tuple(Role.__members__),
        "moduleState": tuple(ModuleState.__members__),
    }


def _names(values: Collection[Any]) -> str:
    return ", ".join(str(v) for v in values)


def validate(expression: Expression, members: Collection[int], *, fields: Collection[str] | None = None) -> None:
    """Refuse, with an `ExpressionError` saying what exists, an expression that names a member the replay
    does not have, a field not in ``fields`` (when given), or a state or role Aeron does not have: it
    would quietly never hold."""
    known = sorted(members)

    def member(node: int) -> None:
        if node not in known:
            raise ExpressionError(f"no member {node} in this replay (members: {_names(known)})")

    for node in _nodes(expression.tree):
        if isinstance(node, Field):
            if node.node is not None:
                member(node.node)
            if fields is not None and node.path[0] not in fields:
                raise ExpressionError(f"{node}: no such field (fields: {_names(fields)})")
        elif isinstance(node, Compare):
            for side, other in ((node.left, node.right), (node.right, node.left)):
                if isinstance(side, Field) and len(side.path) == 1 and isinstance(other, Literal):
                    allowed = enum_values().get(str(side.path[0]))
                    if allowed and isinstance(other.value, str) and other.value not in allowed:
                        raise ExpressionError(f"{other.value!r} is not a value of {side.path[0]} ({_names(allowed)})")
        elif isinstance(node, Call):
            for parameter, value in zip(node.function.parameters, node.arguments, strict=True):
                if parameter.names == "member":
                    member(value)
                elif parameter.names is not None:
                    allowed = enum_values()[parameter.names]
                    if value not in allowed:
                        raise ExpressionError(f"{value!r} is not {parameter.description} ({_names(allowed)})")


# -- the parser ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # duration, number, string, op, punct, name, end
    text: str
    column: int  # 1-based


class _Parser:
    """Recursive descent over tokens read as they are needed, so a mistake is reported where it is
    first met, reading from the left."""

    def __init__(self, text: str, language: Language) -> None:
        self.text = text
        self.language = language
        self.position = 0
        self.tokens: list[_Token] = []
        self.i = 0
        self.scopes = 0  # how many ``node N`` the parser is under

    # -- tokens
    def peek(self, ahead: int = 0) -> _Token:
        while len(self.tokens) <= self.i + ahead:
            self.tokens.append(self._scan())
        return self.tokens[self.i + ahead]

    def _scan(self) -> _Token:
        text, position = self.text, self.position
        if text[position:].strip() == "":
            self.position = len(text)
            return _Token("end", "", len(text) + 1)
        match = _TOKEN.match(text, position)
        if match is None:
            column = len(text) - len(text[position:].lstrip()) + 1
            raise ExpressionError(f"unexpected {text[column - 1]!r}", column=column)
        kind = match.lastgroup or "?"
        self.position = match.end()
        return _Token(kind, match.group(kind), match.start(kind) + 1)

    def take(self) -> _Token:
        token = self.peek()
        self.i += 1
        return token

    def is_(self, kind: str, text: str | None = None, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token.kind == kind and (text is None or token.text == text)

    def keyword(self, word: str) -> bool:
        if self.is_("name", word):
            self.i += 1
            return True
        return False

    def expected(self, what: str) -> Expected:
        token = self.peek()
        return Expected(token.column, what, None if token.kind == "end" else token.text)

    def expect(self, kind: str, text: str, what: str) -> _Token:
        if not self.is_(kind, text):
            raise self.expected(what)
        return self.take()

    # -- the grammar
    def parse(self) -> Any:
        if self.is_("end"):
            raise self.expected(f"a {self.language.noun}")
        tree = self.or_()
        token = self.peek()
        if token.kind != "end":
            raise ExpressionError(
                f"unexpected {token.text!r} (join {self.language.noun}s with and/or)", column=token.column
            )
        return tree

    def or_(self) -> Any:
        parts = [self.and_()]
        while self.keyword("or"):
            parts.append(self.and_())
        return parts[0] if len(parts) == 1 else AnyOf(tuple(parts))

    def and_(self) -> Any:
        parts = [self.unary()]
        while self.keyword("and"):
            parts.append(self.unary())
        return parts[0] if len(parts) == 1 else All(tuple(parts))

    def unary(self) -> Any:
        if self.keyword("not"):
            return Not(self.unary())
        if self.is_("name", "node") and not self.is_("punct", "[", ahead=1):
            self.take()
            node = self.member_id()
            self.scopes += 1
            scoped = self.primary()
            self.scopes -= 1
            return _scope(scoped, node)
        return self.primary()

    def member_id(self) -> int:
        if not self.is_("number"):
            raise self.expected("a member id")
        return int(self.take().text)

    def primary(self) -> Any:
        if self.is_("punct", "("):
            self.take()
            inner = self.or_()
            self.expect("punct", ")", "')'")
            if self.is_("op"):
                token = self.peek()
                raise ExpressionError(f"the left side of {token.text} must be a value", column=token.column)
            return inner
        if self.keyword("watch"):
            node = self.member_id() if self.keyword("node") else None
            watched = self.path(self.take(), node)
            self.keyword("changes")
            return Changes(watched)
        start = self.peek()
        left = self.operand(left=True)
        if self.keyword("changes"):
            if not isinstance(left, Field):
                raise ExpressionError("only a member's field changes", column=start.column)
            return Changes(left)
        if self.is_("op"):
            op_token = self.take()
            op = "==" if op_token.text == "=" else op_token.text
            right_token = self.peek()
            right = self.operand(left=False)
            if isinstance(right, Call) and right.function.predicate:
                raise ExpressionError(
                    f"the right side of {op} must be a value, not the predicate {right.function.name}",
                    column=right_token.column,
                )
            if isinstance(left, Call) and left.function.predicate:
                raise ExpressionError(f"the left side of {op} must be a value", column=op_token.column)
            if op not in ("==", "!="):
                for side in (left, right):
                    if isinstance(side, Literal) and not _is_number(side.value):
                        raise ExpressionError(f"{op} compares numbers, got {side.value!r}", column=op_token.column)
            return Compare(op, left, right)
        if isinstance(left, Call) and left.function.predicate:
            return left
        if isinstance(left, Field) and left.node is None and not self.scopes and len(left.path) == 1 and self.language.functions:
            # Most likely a misspelt predicate: say what there is.
            raise ExpressionError(
                f"unknown name {start.text!r} ({self.language.known_functions()}; "
                f"or a field compared with {OPERATORS})",
                column=start.column,
            )
        raise self.expected(f"a comparison operator ({OPERATORS})")

    def operand(self, *, left: bool) -> Any:
        token = self.peek()
        kind, text = token.kind, token.text
        if kind == "duration":
            self.take()
            return Literal(parse_duration_ns(text))
        if kind == "number":
            self.take()
            return Literal(int(text))
        if kind == "string":
            self.take()
            return Literal(text[1:-1])
        if kind != "name" or text in KEYWORDS - {"node"}:
            raise self.expected(self.language.operand if left else self.language.value)
        if text in _LITERALS:
            self.take()
            return Literal(_LITERALS[text])
        if text == "node":
            self.take()
            self.expect("punct", "[", "'['")
            node = self.member_id()
            self.expect("punct", "]", "']'")
            self.expect("punct", ".", "'.'")
            return self.path(self.take(), node)
        functions = self.language.functions
        if text in functions or (functions and self.is_("punct", "(", ahead=1)):
            return self.call()
        if text in self.language.globals:
            self.take()
            self.expect("punct", ".", "'.'")
            return Global(text, self.path(self.take(), None, checked=False).path)
        if not left:
            self.take()
            return Literal(text)  # a constant such as LEADER
        return self.path(self.take(), None)

    def call(self) -> Call:
        name_token = self.take()
        arguments: list[Any] = []
        if self.is_("punct", "("):
            self.take()
            if not self.is_("punct", ")"):
                arguments.append(self.operand(left=False))
                while self.is_("punct", ","):
                    self.take()
                    arguments.append(self.operand(left=False))
            self.expect("punct", ")", "')'")
        function = self.language.functions.get(name_token.text)
        if function is None:
            raise ExpressionError(
                f"unknown name {name_token.text!r} ({self.language.known_functions()})", column=name_token.column
            )
        parameters = function.parameters
        if len(arguments) != len(parameters) or not all(
            isinstance(a, Literal) and isinstance(a.value, p.kind) and not isinstance(a.value, bool)
            for a, p in zip(arguments, parameters, strict=False)
        ):
            raise ExpressionError(f"expected {function.shape}", column=name_token.column)
        return Call(function, tuple(a.value for a in arguments))

    def path(self, first: _Token, node: int | None, *, checked: bool = True) -> Field:
        if first.kind != "name" or first.text in KEYWORDS:
            raise Expected(first.column, "a field name such as electionState", None if first.kind == "end" else first.text)
        known = self.language.fields
        if checked and known is not None and first.text not in known:
            raise ExpressionError(f"unknown field {first.text!r} (known: {_names(sorted(known))})", column=first.column)
        names: list[str | int] = [first.text]
        while self.is_("punct", ".") or self.is_("punct", "["):
            if self.take().text == ".":
                if not self.is_("name"):
                    raise self.expected("a field name")
                names.append(self.take().text)
            else:
                if not self.is_("number"):
                    raise self.expected("an index")
                names.append(int(self.take().text))
                self.expect("punct", "]", "']'")
        written = ".".join(str(n) for n in names)
        if written in ALIASES:
            path = ALIASES[written]
        elif isinstance(names[0], str) and names[0] in ALIASES:
            path = ALIASES[names[0]] + tuple(names[1:])
        else:
            path = tuple(names)
        return Field(path, node, written)


def parse(text: str, language: Language) -> Expression:
    """An `Expression` in ``language``, or an `ExpressionError` naming the column of the mistake."""
    return Expression.of(text.strip(), _Parser(text, language).parse())


def parse_field(text: str, language: Language) -> Field:
    """One field as an expression writes it (``node 1 candidateTermId`` without the node)."""
    parser = _Parser(text, language)
    found = parser.path(parser.take(), None)
    if not parser.is_("end"):
        raise parser.expected("the end of the field")
    return found
