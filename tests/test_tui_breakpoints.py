"""Breakpoint conditions: the tiny grammar, what it means over member states, and what it refuses."""

from __future__ import annotations

import pytest

from cli.tui.breakpoints import BreakpointError, parse

STATES = {
    0: {
        "electionState": "CLOSED",
        "role": "LEADER",
        "leadershipTermId": 2,
        "candidateTermId": 2,
        "isRunning": True,
        "nodeState": {"candidateTerm": {"candidateTermId": 2, "logPosition": 96, "timestamp": 5}},
        "members": [{"memberId": 0, "logPosition": 192}, {"memberId": 1, "logPosition": 96}],
        "recordingLog": [{"entryIndex": 0, "leadershipTermId": 1}],
    },
    1: {
        "electionState": "FOLLOWER_CATCHUP",
        "role": "FOLLOWER",
        "leadershipTermId": 1,
        "candidateTermId": 4,
        "isRunning": False,
        "nodeState": {"candidateTerm": {"candidateTermId": 4, "logPosition": 0, "timestamp": 1}},
        "members": [],
        "recordingLog": [],
    },
}


@pytest.mark.parametrize(
    ("text", "holds", "members"),
    [
        ("node 1 state == FOLLOWER_CATCHUP", True, [1]),  # the member it names
        ("node 0 state == FOLLOWER_CATCHUP", False, []),
        ("candidateTermId > 3", True, [1]),
        ("candidateTermId > 4", False, []),
        ("role == LEADER and term == 2", True, [0]),
        # One member must satisfy both sides: member 0 leads term 2, member 1 is in term 1.
        ("role == LEADER and term == 1", False, []),
        ("role == LEADER or term == 1", True, [0, 1]),
        ("not role == LEADER", True, [1]),
        ("node 0 nodeState.candidateTermId >= 2", True, [0]),
        ("nodeState.candidateTerm.candidateTermId == 4", True, [1]),
        ("members[1].logPosition < 100", True, [0]),
        ("node 1 isRunning == false", True, [1]),
        ("recordingLog[0].leadershipTermId = 1", True, [0]),
        ("node 0 (role == LEADER and term == 2) and node 1 role == FOLLOWER", True, [0, 1]),
        ('role == "LEADER"', True, [0]),
        ("node 2 role == LEADER", False, []),
        ("leader == 1", False, []),
    ],
)
def test_condition_holds_for_the_members_it_describes(text, holds, members):
    condition = parse(text)
    assert condition(STATES) is holds
    assert condition.members(STATES) == members


def test_a_path_that_leads_nowhere_is_false_not_an_error():
    assert parse("members[7].logPosition > 0")(STATES) is False
    assert parse("deadlines.election > 0")(STATES) is False
    assert parse("state == CANVASS")({}) is False


def test_ordering_compares_numbers_only():
    assert parse("role != LEADER")(STATES) is True
    # A string value never satisfies an ordering, whatever the member holds.
    assert parse("electionState > 0")(STATES) is False
    with pytest.raises(BreakpointError, match="column 6: < compares numbers"):
        parse("role < LEADER")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "column 1: empty condition"),
        ("state ==", "column 9: the condition ends too early"),
        ("state == LEADER extra", "column 17: unexpected 'extra'"),
        ("node x state == LEADER", "column 6: expected number"),
        ("(state == LEADER", "ends too early"),
        ("colour == red", "column 1: unknown field 'colour'"),
        ("__import__('os').system('true') == 0", "column 1: unknown field '__import__'"),
        ("state == LEADER; rm", "unexpected ';'"),
        ("members[a].logPosition > 0", "expected number"),
        ("and state == LEADER", "expected a field name"),
    ],
)
def test_a_bad_condition_is_refused_with_the_column_of_the_mistake(text, message):
    with pytest.raises(BreakpointError, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse(text)


def test_a_watch_holds_where_the_value_differs_from_before_the_event():
    before = {0: dict(STATES[0]), 1: dict(STATES[1], candidateTermId=3)}
    for text in ("watch node 1 candidateTermId", "node 1 candidateTermId changes", "watch node 1 candidateTermId changes"):
        condition = parse(text)
        assert condition.watches
        assert condition(STATES, before) and condition.members(STATES, before) == [1]
        assert not condition(STATES, STATES)  # nothing changed
        assert not condition(STATES)  # no "before": nothing to compare with
    unscoped = parse("candidateTermId changes and role == FOLLOWER")
    assert unscoped(STATES, before) and unscoped.members(STATES, before) == [1]
    assert not parse("node 0 candidateTermId changes")(STATES, before)
    assert not parse("role == LEADER").watches


def test_a_watch_names_a_field_that_exists():
    with pytest.raises(BreakpointError, match="unknown field 'candidateTerm'"):
        parse("watch node 1 candidateTerm")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("node 7 role == LEADER", "no member 7 in this replay (members: 0, 1)"),
        ("watch node 9 candidateTermId", "no member 9"),
        ("state == FOLLOWR_CATCHUP", "'FOLLOWR_CATCHUP' is not a value of electionState"),
        ("node 1 role == LEDER", "'LEDER' is not a value of role"),
    ],
)
def test_a_condition_naming_what_cannot_be_is_refused(text, message):
    with pytest.raises(BreakpointError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(text).validate(STATES)
    parse("node 1 state == FOLLOWER_CATCHUP and role == LEADER").validate(STATES)  # all of it exists
