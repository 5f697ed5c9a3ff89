"""Breakpoints: conditions over the members' state at each event, in the language of `recorder.expressions`.

A condition reads like what one would say about the cluster::

    node 2 state == FOLLOWER_CATCHUP
    candidateTermId > 3
    role == LEADER and term >= 2
    node 0 isRunning == false or (node 1 nodeState.candidateTermId >= 5)
    members[1].logPosition > 1024
    watch node 1 candidateTermId            (a watchpoint: stops wherever the value changes)
    node 2 state changes and node 2 role == LEADER

The grammar and its meaning are `recorder.expressions`' (``recount bisect --check`` speaks it too, so
``node[2].electionState == "CLOSED"`` works here as well); this module gives it what a breakpoint may
read, the fields of `MemberView.to_json()`, checked as a condition is parsed.  A comparison under ``node N``
reads member N's state; one without reads "the member", and the whole condition holds when it holds for
some member.  A path that leads nowhere reads as null.  ``path changes`` (or ``watch path``) holds at
an event after which the value differs from its value before it; a condition that has one fires at
every such event, not only when it becomes true.

`parse(text)` returns a `Condition` (a callable over ``{memberId: state}``) or raises
`BreakpointError` with the column of the mistake; `Condition.validate` refuses members, states and
roles that cannot be (the enum values come from the engine's own enums).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from recorder import expressions
from recorder.expressions import Expected, Expression, ExpressionError, Language, Scene, lookup

#: The first names a path may start with (what `MemberView.to_json()` gives), and the aliases.
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
        *(name for name in expressions.ALIASES if "." not in name),
    }
)

LANGUAGE = Language(
    noun="condition",
    operand="a field name such as electionState",
    value='a value such as LEADER, 3, "text", true or null',
    fields=KNOWN_FIELDS,
)


class BreakpointError(ValueError):
    """A condition that does not parse; the message names the column."""


def _error(error: ExpressionError) -> BreakpointError:
    """The shared parser's error in the words the TUI has always used."""
    if isinstance(error, Expected):
        if error.found is None:
            return BreakpointError(f"column {error.column}: the condition ends too early (expected {error.expected})")
        if error.expected in ("a member id", "an index"):
            return BreakpointError(f"column {error.column}: expected number ({error.expected}), got {error.found!r}")
    return BreakpointError(str(error))


@dataclass(frozen=True, slots=True)
class Condition:
    """A parsed breakpoint condition; call it with ``{memberId: MemberView.to_json()}``."""

    expression: Expression

    @property
    def text(self) -> str:
        return self.expression.text

    @property
    def watches(self) -> bool:
        """Has a ``changes`` part: it fires at every event where it holds, not only where it starts to."""
        return self.expression.watches

    def __call__(self, states: Mapping[int, Mapping[str, Any]], previous: Mapping[int, Mapping[str, Any]] | None = None) -> bool:
        """Does it hold with ``states`` after an event (``previous``: before it, for ``changes``)?"""
        return self.expression.holds(Scene(states, previous))

    def members(self, states: Mapping[int, Mapping[str, Any]], previous: Mapping[int, Mapping[str, Any]] | None = None) -> list[int]:
        """The members for which the condition holds (those it names, when it names its members)."""
        return self.expression.members(Scene(states, previous))

    def validate(self, members: Collection[int]) -> None:
        """Refuse a condition naming a member not in the replay, or a state or role Aeron does not have
        (it would never hold, and a breakpoint that never fires looks like "nothing happened")."""
        try:
            expressions.validate(self.expression, members)
        except ExpressionError as error:
            raise _error(error) from None


def root_of(field: str) -> str:
    """The member value a field path starts from, aliases resolved (``state`` → ``electionState``,
    ``nodeState.logPosition`` → ``nodeState``, ``members[1].logPosition`` → ``members``)."""
    return str(expressions.parse_field(field, LANGUAGE).path[0])


def value_at(state: Mapping[str, Any] | None, field: str) -> Any:
    """The value ``field`` (a path as conditions write it, aliases included) has in ``state``; ``-``
    when the member or the field is not there."""
    if state is None:
        return "-"
    value = lookup(state, expressions.parse_field(field, LANGUAGE).path)
    return "-" if value is expressions.MISSING else getattr(value, "name", value)


def parse(text: str) -> Condition:
    if not text.strip():
        raise BreakpointError("column 1: empty condition")
    try:
        return Condition(expressions.parse(text, LANGUAGE))
    except ExpressionError as error:
        raise _error(error) from None
