"""One language over member state, `recorder.expressions`, behind two front-ends: `recount bisect --check`
(`recorder.checks`) and the TUI's breakpoints (`cli.tui.breakpoints`).  Each accepts the other's syntax and
means the same by it; each refuses a mistake in its own words, at the column where it is first met."""

from __future__ import annotations

import enum

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.tui.breakpoints import BreakpointError
from cli.tui.breakpoints import parse as parse_condition
from recorder import expressions
from recorder.checks import CheckError, parse_check
from recorder.expressions import ExpressionError, Function, Language, Parameter, Scene

STATES = {
    0: {"electionState": "CLOSED", "role": "LEADER", "leadershipTermId": 2, "candidateTermId": 2, "isRunning": True,
        "members": [{"memberId": 1, "logPosition": 96}, {"memberId": 0, "logPosition": 192}]},
    1: {"electionState": "FOLLOWER_CATCHUP", "role": "FOLLOWER", "leadershipTermId": 1, "candidateTermId": 4,
        "isRunning": False, "members": []},
}


def _records(states: dict[int, dict]) -> list[dict]:
    """A trace whose summary holds ``states`` (what a check reads its fields from)."""
    return [{"kind": "summary", "ts": 10, "node": None, "divergences": 0,
             "nodes": {str(m): state for m, state in states.items()}}]


def _check(text: str, states: dict[int, dict] = STATES) -> bool:
    return parse_check(text).evaluate(_records(states))


def _condition(text: str, states: dict[int, dict] = STATES) -> bool:
    return parse_condition(text)(states)


# == one syntax for both =======================================================================================


@pytest.mark.parametrize(
    ("text", "holds"),
    [
        ('node[1].electionState == "FOLLOWER_CATCHUP"', True),  # the checks' way of naming a member
        ("node 1 state == FOLLOWER_CATCHUP", True),  # the breakpoints' way, aliases included
        ("node 1 (state == FOLLOWER_CATCHUP and term == 1)", True),
        ("node[0].leadershipTermId > node[1].leadershipTermId", True),  # a field on either side
        ("role == LEADER and term == 2", True),  # some one member: member 0
        ("role == LEADER and term == 1", False),  # no one member leads term 1
        ("not role == LEADER", True),  # member 1
        ("node 1 isRunning == false", True),
        ("node 0 isRunning == 1", False),  # a boolean is not a number
        ("node[7].role == null", True),  # what leads nowhere is null
        ("node 7 role != LEADER", True),  # ... so != holds, as `not ==` does
        ("node[7].leadershipTermId > 0", False),  # ordering needs numbers
        ("node 0 electionState > 0", False),
        ("node 0 members[1].logPosition == 96", True),  # members[N] is the entry with memberId N
        ("node 0 candidateTermId == 3 or node 1 candidateTermId >= 5", False),
        ("node 0 candidateTermId < 2.5s", True),  # durations are nanoseconds
    ],
)
def test_both_front_ends_read_the_same_text_the_same_way(text, holds):
    assert _check(text) is holds
    assert _condition(text) is holds


def test_a_check_may_name_the_member_by_its_state_and_a_breakpoint_says_which():
    assert _check("role == LEADER and candidateTermId == 2")
    condition = parse_condition("role == LEADER or candidateTermId > 3")
    assert condition.members(STATES) == [0, 1]
    assert parse_condition("node 1 role == FOLLOWER").members(STATES) == [1]


def test_a_check_adds_functions_of_the_whole_trace_and_the_summary():
    assert _check("no_invariant_violations and summary.divergences == 0 and node 1 role == FOLLOWER")
    assert _check("max_term() == 2 and not leader_elections() > 0")
    assert _check('state_reached(1, FOLLOWER_CATCHUP) or node 0 state == "CLOSED"')


def test_enums_compare_by_name_and_values_by_type():
    class Role(enum.Enum):
        LEADER = 1

    language = Language(noun="condition", operand="a field", value="a value")
    scene = Scene({0: {"role": Role.LEADER, "flag": True, "text": "1", "count": 1}})
    assert expressions.parse("role == LEADER", language).holds(scene)
    assert not expressions.parse("flag == 1", language).holds(scene)
    assert expressions.parse("flag == true", language).holds(scene)
    assert not expressions.parse("text == 1", language).holds(scene)
    assert expressions.parse('text == "1" and count == 1', language).holds(scene)


def test_a_watch_compares_the_state_after_an_event_with_the_state_before_it():
    before = {0: STATES[0], 1: dict(STATES[1], candidateTermId=3)}
    for text in ("watch node 1 candidateTermId", "node 1 candidateTermId changes", "node[1].candidateTermId changes"):
        condition = parse_condition(text)
        assert condition.watches and condition(STATES, before) and not condition(STATES, STATES)
        assert not condition(STATES)  # no "before", no change
    assert parse_condition("candidateTermId changes and role == FOLLOWER").members(STATES, before) == [1]
    with pytest.raises(CheckError, match="a check is asked of the end of a replay"):
        parse_check("node 1 candidateTermId changes")


def test_the_functions_a_front_end_gives_are_called_with_literal_arguments():
    calls = []

    def call(name, arguments):
        calls.append((name, arguments))
        return name == "ok" or 5

    language = Language(noun="check", operand="x", value="y",
                        functions={"ok": Function("ok", (Parameter("a duration", int),)),
                                   "five": Function("five", predicate=False)})
    assert expressions.parse("ok(2s) and five() == 5 and five() > 4", language).holds(Scene({}, call=call))
    assert calls == [("ok", (2_000_000_000,)), ("five", ()), ("five", ())]


# == errors, in each front-end's words ==========================================================================


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "check: column 1: expected a check, got the end"),
        ("leader_elected_within(5s", "check: column 25: expected ')', got the end"),
        ("leader_elected_within()", "check: column 1: expected leader_elected_within(a duration)"),
        ("state_reached(x, 1)", "check: column 1: expected state_reached(a member id, an election state)"),
        ("max_term(1)", "check: column 1: expected max_term()"),
        ("node[x].role", "check: column 6: expected a member id, got 'x'"),
        ("node 0 role", "check: column 12: expected a comparison operator (== != < <= > >=), got the end"),
        ("leader_electd", "check: column 1: unknown name 'leader_electd' (predicates: no_invariant_violations,"),
        ("open(1)", "check: column 1: unknown name 'open'"),
        ("__import__('os').system('true')", "check: column 12: unexpected \"'\""),  # first met reading from the left
        ("leader_elected ==", "check: column 18: expected a predicate, a value or '(', got the end"),
        ("1 == leader_elected", "check: column 6: the right side of == must be a value, not the predicate leader_elected"),
        ("(leader_elected) == 1", "check: column 18: the left side of == must be a value"),
        ('node[0].role < "LEADER"', "check: column 14: < compares numbers, got 'LEADER'"),
        ("leader_elected extra", "check: column 16: unexpected 'extra' (join checks with and/or)"),
    ],
)
def test_a_check_that_does_not_parse_says_where_and_what_was_expected(text, message):
    with pytest.raises(CheckError) as caught:
        parse_check(text)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "column 1: empty condition"),
        ("state ==", 'column 9: the condition ends too early (expected a value such as LEADER, 3, "text", true or null)'),
        ("(state == LEADER", "column 17: the condition ends too early (expected ')')"),
        ("node x state == LEADER", "column 6: expected number (a member id), got 'x'"),
        ("members[a].logPosition > 0", "column 9: expected number (an index), got 'a'"),
        ("colour == red", "column 1: unknown field 'colour' (known: "),
        ("__import__('os').system('true') == 0", "column 1: unknown field '__import__'"),  # a field: no functions here
        ("leader_elected", "column 1: unknown field 'leader_elected'"),  # the checks' functions read a trace
        ("and state == LEADER", "column 1: expected a field name such as electionState, got 'and'"),
        ("state == LEADER; rm", "column 16: unexpected ';'"),
        ("state == LEADER extra", "column 17: unexpected 'extra' (join conditions with and/or)"),
        ("role < LEADER", "column 6: < compares numbers, got 'LEADER'"),
        ("watch node 1 candidateTerm", "column 14: unknown field 'candidateTerm'"),
    ],
)
def test_a_breakpoint_that_does_not_parse_says_where_and_what_was_expected(text, message):
    with pytest.raises(BreakpointError) as caught:
        parse_condition(text)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "check_message", "condition_message"),
    [
        ("node 7 role == LEADER", "check: no member 7 in this replay (members: 0, 1)", "no member 7 in this replay"),
        ('node[1].electionState == "CLOSD"', "check: 'CLOSD' is not a value of electionState (INIT, CANVASS,",
         "'CLOSD' is not a value of electionState"),
        ("role == LEDER", "check: 'LEDER' is not a value of role (FOLLOWER, CANDIDATE, LEADER)", "'LEDER' is not a value of role"),
        ("node 1 moduleState == CLOSD", "check: 'CLOSD' is not a value of moduleState", "'CLOSD' is not a value of moduleState"),
    ],
)
def test_both_front_ends_refuse_members_and_states_that_cannot_be(text, check_message, condition_message):
    with pytest.raises(CheckError) as caught:
        parse_check(text).validate([0, 1])
    assert str(caught.value).startswith(check_message)
    with pytest.raises(BreakpointError) as caught:
        parse_condition(text).validate([0, 1])
    assert str(caught.value).startswith(condition_message)


def test_a_check_learns_its_fields_from_the_summary_and_its_arguments_are_validated_too():
    with pytest.raises(CheckError, match=r"check: node\[1\].electionStat: no such field \(fields: electionState, role,"):
        parse_check('node[1].electionStat == "CLOSED"').validate([0, 1])
    with pytest.raises(CheckError, match="check: isRunning: no such field"):
        parse_check("isRunning == true").validate([0, 1])  # the summary does not carry it; inspect() does
    with pytest.raises(CheckError, match="check: 'LEADR' is not an election state"):
        parse_check('state_reached(1, "LEADR")').validate([0, 1])
    with pytest.raises(CheckError, match="check: no member 5 in this replay"):
        parse_check("state_reached(5, CLOSED)").validate([0, 1])
    parse_check("node 1 state == CLOSED and state_reached(0, CANVASS) and term >= 1").validate([0, 1])


def test_a_breakpoint_learns_its_fields_as_it_is_parsed():
    parse_condition("node 1 nodeState.candidateTermId >= 5 and recordingLog[0].leadershipTermId == 1").validate([0, 1])
    assert parse_condition("isRunning == true")(STATES)


# == what holds for any input ===================================================================================

_FIELDS = st.sampled_from(["electionState", "role", "leadershipTermId", "candidateTermId"])
_VALUES = st.sampled_from(['LEADER', '"FOLLOWER"', "CLOSED", "1", "2", "4", "null", "true"])
_OPS = st.sampled_from(["==", "!=", "<", ">=", "="])


@given(st.lists(st.tuples(st.integers(0, 2), _FIELDS, _OPS, _VALUES), min_size=1, max_size=4),
       st.lists(st.sampled_from(["and", "or"]), min_size=3, max_size=3))
def test_node_n_field_and_node_brackets_field_are_one_syntax(parts, joins):
    def render(style: str) -> str:
        out = []
        for index, (node, field, op, value) in enumerate(parts):
            if op not in ("==", "!=", "=") and not value.isdigit():
                value = "1"
            out.append(f"node {node} {field} {op} {value}" if style == "words" else f"node[{node}].{field} {op} {value}")
            if index < len(parts) - 1:
                out.append(joins[index])
        return " ".join(out)

    words, brackets = render("words"), render("brackets")
    assert _condition(words) == _condition(brackets) == _check(words) == _check(brackets)


@given(st.lists(st.sampled_from(list("[]().=<>!\"',") + ["node", "and", "or", "not", "watch", "changes", "0", "12",
                                                         "2.5s", "LEADER", "state", "max_term", "summary", " "]),
                max_size=16).map("".join))
def test_any_text_either_parses_or_is_one_expression_error(text):
    for language in (parse_check, parse_condition):
        try:
            language(text)
        except (CheckError, BreakpointError) as error:
            assert "\n" not in str(error) and str(error)
    try:
        expressions.parse(text, Language(noun="x", operand="y", value="z"))
    except ExpressionError:
        pass
