"""Canonical trace lines, the trace hash, and the Raft safety checks (engine.trace, engine.invariants)."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import pytest

from engine.invariants import InvariantChecker
from engine.model.agent import Role
from engine.trace import TraceHasher, encode_record, summary_record, verify


def test_a_record_starts_with_kind_ts_node_whatever_order_it_was_built_in():
    assert encode_record({"to": "CANVASS", "node": 0, "from": "INIT", "ts": 5, "kind": "state"}) == (
        '{"kind":"state","ts":5,"node":0,"to":"CANVASS","from":"INIT"}'
    )


def test_a_set_is_written_sorted_and_a_nan_is_refused():
    assert encode_record({"kind": "x", "ts": 0, "node": 0, "ids": {3, 1, 2}}).endswith('"ids":[1,2,3]}')
    with pytest.raises(ValueError):
        encode_record({"kind": "x", "ts": 0, "node": 0, "value": float("nan")})


def test_the_trace_hash_is_sha256_over_the_lines_before_the_summary():
    records = [{"kind": "state", "ts": 1, "node": 0, "from": "INIT", "to": "CANVASS"}, {"kind": "role", "ts": 2, "node": 0}]
    hasher = TraceHasher()
    lines = [hasher.add(r) for r in records]
    expected = hashlib.sha256("".join(line + "\n" for line in lines).encode()).hexdigest()
    assert hasher.hexdigest() == expected
    summary = summary_record(ts=2, model="1.47.3", seed=0, nodes={}, divergences=0, trace_sha256=hasher.hexdigest())
    assert verify(lines + [encode_record(summary)])
    assert not verify(lines[:1] + [encode_record(summary)])


def _send(node, type_name, **fields):
    return {"kind": "send", "ts": 10, "node": node, "peer": 0, "channel": "consensus", "type": type_name, "fields": fields}


def test_two_members_leading_the_same_term_break_one_leader_per_term():
    checker = InvariantChecker()
    assert checker.observe(1, [_send(1, "NewLeadershipTerm", leadershipTermId=4, leaderMemberId=1)]) == []
    found = checker.observe(2, [_send(2, "NewLeadershipTerm", leadershipTermId=4, leaderMemberId=2)])
    assert [(r["name"], r["node"]) for r in found] == [("one-leader-per-term", 2)]
    # Reported once, however often it is seen again.
    assert checker.observe(2, [_send(2, "NewLeadershipTerm", leadershipTermId=4, leaderMemberId=2)]) == []


def test_the_same_member_leading_its_term_again_is_not_a_violation():
    # Aeron 1.47.3's single-node re-election reuses the term (aeron-election.md §2.1).
    checker = InvariantChecker()
    for _ in range(2):
        assert checker.observe(0, [{"kind": "role", "ts": 0, "node": 0, "from": "FOLLOWER", "to": "LEADER"}],
                               lambda: _view("LEADER", 3)) == []


def _view(role: str, leadership_term_id: int) -> SimpleNamespace:
    """The two values of a member's `MemberView` the checker reads."""
    return SimpleNamespace(role=Role[role], leadership_term_id=leadership_term_id)


def test_a_leader_claim_is_read_from_state_only_when_the_member_still_leads():
    checker = InvariantChecker()
    checker.observe(0, [{"kind": "role", "ts": 0, "node": 0, "to": "LEADER"}], lambda: _view("LEADER", 1))
    stepped_down = checker.observe(
        1, [{"kind": "role", "ts": 0, "node": 1, "to": "LEADER"}], lambda: _view("FOLLOWER", 1)
    )
    assert stepped_down == []
    clash = checker.observe(1, [{"kind": "role", "ts": 0, "node": 1, "to": "LEADER"}], lambda: _view("LEADER", 1))
    assert [r["name"] for r in clash] == ["one-leader-per-term"]


def _log(op, term, base, position, valid=True):
    entry = {"leadershipTermId": term, "termBaseLogPosition": base, "logPosition": position, "type": "TERM", "isValid": valid}
    return {"kind": "recordingLog", "ts": 7, "node": 2, "op": op, "entry": entry}


def test_truncating_below_the_committed_position_is_reported_and_above_it_is_not():
    checker = InvariantChecker()
    checker.member_started(2, {"recordingLog": [{"leadershipTermId": 0, "termBaseLogPosition": 0, "logPosition": 1024}]})
    checker.observe_committed(512)
    assert checker.observe(2, [_log("commitLogPosition", 0, 0, 768)]) == []
    found = checker.observe(2, [_log("commitLogPosition", 0, 0, 256)])
    assert [r["name"] for r in found] == ["committed-position-truncated"]
    assert "from 768 to 256, below the committed position 512" in found[0]["detail"]


def test_commit_positions_a_leader_sends_count_as_committed():
    checker = InvariantChecker()
    checker.member_started(2, {"recordingLog": [{"leadershipTermId": 0, "termBaseLogPosition": 0, "logPosition": 1024}]})
    checker.observe(1, [_send(1, "CommitPosition", leadershipTermId=0, logPosition=900, leaderMemberId=1)])
    assert [r["name"] for r in checker.observe(2, [_log("commitLogPosition", 0, 0, 800)])] == ["committed-position-truncated"]


def test_aeron_append_term_keeps_the_log_contiguous():
    checker = InvariantChecker()
    checker.member_started(0, {})
    records = [
        _log("appendTerm", 0, 0, -1),
        _log("commitLogPosition", 0, 0, 96),
        _log("appendTerm", 1, 96, -1),
    ]
    assert checker.observe(0, records) == []


def test_a_gap_between_terms_breaks_contiguity():
    checker = InvariantChecker()
    checker.member_started(0, {})
    found = checker.observe(0, [_log("appendTerm", 0, 0, 96), _log("appendTerm", 1, 128, -1)])
    assert [(r["name"], r["detail"]) for r in found] == [
        ("log-contiguous", "member 0: term 1 starts at 128 but term 0 ends at 96")
    ]


def test_an_open_term_followed_by_another_breaks_contiguity_but_an_invalid_one_is_ignored():
    checker = InvariantChecker()
    checker.member_started(0, {})
    found = checker.observe(0, [_log("appendTerm", 0, 0, -1), _log("appendTerm", 1, 0, -1)])
    assert [r["name"] for r in found] == ["log-contiguous"]
    other = InvariantChecker()
    other.member_started(0, {})
    assert other.observe(0, [_log("appendTerm", 0, 0, -1, valid=False), _log("appendTerm", 1, 0, -1)]) == []


def test_candidate_term_written_lower_than_on_disk_breaks_monotonicity():
    checker = InvariantChecker()
    checker.member_started(1, {"nodeState": {"candidateTermId": 5}})
    write = {"kind": "nodeState", "ts": 3, "node": 1, "candidateTermId": 4, "logPosition": 0, "timestamp": 0}
    found = checker.observe(1, [write])
    assert [(r["name"], r["node"], r["ts"]) for r in found] == [("candidate-term-monotonic", 1, 3)]
    assert checker.observe(1, [{**write, "candidateTermId": 6}]) == []


def test_a_failing_state_callable_does_not_take_the_replay_down():
    def broken():
        raise RuntimeError("model bug")

    checker = InvariantChecker()
    assert checker.observe(0, [{"kind": "role", "ts": 0, "node": 0, "to": "LEADER"}], broken) == []


def test_cutting_an_open_term_below_the_committed_position_is_reported_from_the_append_position():
    # An open term (logPosition -1) cut back leaves recording.log unchanged; the append position shows it.
    checker = InvariantChecker()
    checker.member_started(2, {"appendPosition": 1500})
    checker.observe_committed(1300)
    state = {"kind": "state", "ts": 9, "node": 2, "from": "CANVASS", "to": "INIT", "appendPosition": 1500}
    assert checker.observe(2, [state]) == []
    found = checker.observe(2, [{**state, "from": "INIT", "to": "CANVASS", "appendPosition": 1200}])
    assert [(r["name"], r["detail"]) for r in found] == [
        ("committed-position-truncated", "member 2's log was cut from 1500 to 1200, below the committed position 1300")
    ]


def test_cutting_uncommitted_entries_is_not_a_violation():
    checker = InvariantChecker()
    checker.member_started(2, {"appendPosition": 1500})
    checker.observe_committed(1200)
    assert checker.observe(2, [{"kind": "state", "ts": 9, "node": 2, "appendPosition": 1200}]) == []


def test_cutting_a_deposed_leaders_uncommitted_suffix_below_a_later_terms_commit_is_not_a_violation():
    # tests/testdata/simulation/partitioned-minority-truncates-old-term.toml: member 3 held term 0 to 3488
    # in a minority partition; the majority closed term 0 at 2816 and committed term 1 to 2912.  Cutting
    # term 0 back to 2816 is Raft's repair of the log: positions 2816..2912 were committed in term 1,
    # with other content.
    checker = InvariantChecker()
    checker.member_started(3, {"appendPosition": 3488})
    checker.observe(1, [_send(1, "NewLeadershipTerm", leadershipTermId=1, termBaseLogPosition=2816, leaderMemberId=1)])
    checker.observe(1, [_send(1, "CommitPosition", leadershipTermId=1, logPosition=2912, leaderMemberId=1)])
    state = {"kind": "state", "ts": 9, "node": 3, "from": "INIT", "to": "CANVASS", "logLeadershipTermId": 0}
    assert checker.observe(3, [{**state, "appendPosition": 2816}]) == []
    # ... but term 0 was committed up to term 1's base: cutting it below that is a violation.
    checker.member_started(3, {"appendPosition": 3488}, restart=True)
    found = checker.observe(3, [{**state, "appendPosition": 2000}])
    assert [(r["name"], r["detail"]) for r in found] == [
        ("committed-position-truncated", "member 3's log was cut from 3488 to 2000, below the committed position 2816")
    ]
