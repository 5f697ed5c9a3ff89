"""The incident model behind `recount report` and `recount export`: lanes, terms, elections, messages.

The bundled samples say what happened in them (samples/README.md); the model must say the same:
leader-failover has leader 0 of term 0 killed at 4 s and member 1 elected for term 1, restart-catchup
has follower 0 killed at 1.5 s and restarted at 9 s.  Synthetic events pin the pairing of sends with
receipts and how zero-length states are shown.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from formats.events import Event
from recorder import convert
from recorder.report import build_incident
from recorder.report.model import MAX_LATENCY_NS, Span, _pair_messages, _spans

ROOT = Path(__file__).resolve().parents[1]
SECOND = 1_000_000_000


def _incident(name: str):
    loaded = convert.load(str(ROOT / "samples" / name / "incident.arrow"))
    return build_incident(loaded.events, source=name, refs=loaded.refs, ref_kind=loaded.ref_kind), loaded


@pytest.fixture(scope="module")
def failover():
    return _incident("leader-failover")


@pytest.fixture(scope="module")
def restart():
    return _incident("restart-catchup")


def test_leader_failover_has_member_0_leading_term_0_and_member_1_term_1(failover):
    incident, _ = failover
    assert [(t.leadership_term_id, t.leader) for t in incident.terms] == [(0, 0), (1, 1)]
    assert incident.terms[1].followers == (2,)
    # member 1 won at the 1 s ballot timeout after nominating at 14.06 s (samples/README.md)
    assert 15.0 < (incident.terms[1].elected_ns - incident.start_ns) / SECOND < 15.1


def test_the_killed_leader_is_down_from_its_crash_to_the_end(failover):
    incident, _ = failover
    lanes = {lane.member: lane for lane in incident.lanes}
    (down,) = lanes[0].down
    assert (down.cause, down.restarted) == ("crash", False)
    assert down.start_ns - incident.start_ns == 4 * SECOND and down.end_ns == incident.end_ns
    assert lanes[1].down == lanes[2].down == ()
    # nothing is held while down: the state and role lanes stop at the crash
    for span in lanes[0].states + lanes[0].roles:
        assert span.end_ns <= down.start_ns


def test_lanes_are_ordered_non_overlapping_spans_within_the_recording(failover, restart):
    for incident, _ in (failover, restart):
        for lane in incident.lanes:
            for spans in (lane.states, lane.roles):
                for before, after in zip(spans, spans[1:], strict=False):
                    assert before.end_ns <= after.start_ns
                for span in spans:
                    assert incident.start_ns <= span.start_ns < span.end_ns <= incident.end_ns
                    assert not any(d.start_ns < span.end_ns and span.start_ns < d.end_ns for d in lane.down)


def test_a_restarted_follower_is_down_between_crash_and_start_then_a_follower_again(restart):
    incident, _ = restart
    lane = next(lane for lane in incident.lanes if lane.member == 0)
    (down,) = lane.down
    assert down.restarted and down.cause == "crash"
    assert ((down.start_ns - incident.start_ns) / SECOND, (down.end_ns - incident.start_ns) / SECOND) == (1.5, 9.0)
    after = [span for span in lane.roles if span.start_ns >= down.end_ns]
    assert after and after[0].value == "FOLLOWER" and after[0].start_ns == down.end_ns
    assert any(span.value == "FOLLOWER_CATCHUP" for span in lane.states if span.start_ns >= down.end_ns)


def test_elections_group_the_members_that_were_in_them(failover, restart):
    incident, _ = failover
    assert [e.members for e in incident.elections] == [(0, 1, 2), (1, 2)]
    assert [tuple(t.leader for t in e.terms) for e in incident.elections] == [(0,), (1,)]
    incident, _ = restart
    # the restarted member's own election, which joins the term the others already have
    assert incident.elections[-1].members == (0,) and incident.elections[-1].terms == ()


def test_election_messages_are_the_canvass_votes_and_new_leadership_terms_within_it(failover):
    incident, _ = failover
    election = incident.elections[1]
    types = {m.type for m in election.messages}
    assert {"CanvassPosition", "RequestVote", "Vote", "NewLeadershipTerm"} <= types
    assert "AppendPosition" not in types and "CommitPosition" not in types
    assert all(election.start_ns <= m.ts <= election.end_ns for m in election.messages)
    votes = [m for m in election.messages if m.type == "Vote"]
    assert [(m.sender, m.receiver) for m in votes] == [(2, 1)]


def test_every_recorded_consensus_send_and_receipt_is_one_end_of_one_message(failover):
    incident, loaded = failover
    recorded = sum(1 for e in loaded.events if e.channel == "consensus" and e.dir in ("in", "out"))
    ends = sum((m.send_ns is not None) + (m.receive_ns is not None) for m in incident.messages)
    assert ends == recorded
    for m in incident.messages:
        if m.send_ns is not None and m.receive_ns is not None:
            assert 0 <= m.receive_ns - m.send_ns <= MAX_LATENCY_NS
    # the crashed member receives nothing: what was sent to it after 4 s has no receipt
    late = [m for m in incident.messages if m.receiver == 0 and m.send_ns and m.send_ns > incident.start_ns + 5 * SECOND]
    assert late and all(m.receive_ns is None for m in late)


def test_the_files_at_start_and_end_show_the_new_candidate_term(failover):
    incident, _ = failover
    files = {f.member: f for f in incident.files}
    assert files[1].node_state_start["candidateTermId"] == -1
    assert files[1].node_state_end["candidateTermId"] == 1
    assert files[1].recording_log_start == ()
    assert [e["leadershipTermId"] for e in files[1].recording_log_end] == [0, 1]


def _event(ts, node, dir, peer, type="Vote", **fields):
    return Event(ts=ts, node=node, dir=dir, peer=peer, channel="consensus", type=type, fields=fields or {"vote": True})


def test_a_send_is_paired_with_the_equal_receipt_and_a_lost_one_is_left_alone():
    events = [
        _event(100, 0, "out", 1, candidateTermId=1),
        _event(150, 0, "out", 2, candidateTermId=1),  # never received
        _event(180, 1, "in", 0, candidateTermId=1),
        _event(200, 1, "in", 0, candidateTermId=2),  # received, its send not recorded
    ]
    messages = _pair_messages(events, range(len(events)), list(range(len(events))))
    summary = [(m.sender, m.receiver, m.send_ns, m.receive_ns) for m in messages]  # in time order
    assert summary == [(0, 1, 100, 180), (0, 2, 150, None), (0, 1, None, 200)]


def test_a_receipt_recorded_before_its_send_is_still_paired_and_a_stale_send_is_not():
    events = [
        _event(90, 1, "in", 0),  # the receiver's clock is behind the sender's
        _event(100, 0, "out", 1),
        _event(200, 0, "out", 2),
        _event(200 + MAX_LATENCY_NS + 1, 2, "in", 0),  # too late to be that send's receipt
    ]
    messages = _pair_messages(events, range(len(events)), list(range(len(events))))
    pairs = sorted((m.send_ns, m.receive_ns) for m in messages if m.send_ns and m.receive_ns)
    assert pairs == [(100, 90)]
    assert len(messages) == 3


def test_states_passed_through_in_one_instant_become_the_next_spans_via():
    spans = _spans([(0, "CANVASS"), (10, "CANDIDATE_BALLOT"), (20, "LEADER_LOG_REPLICATION"), (20, "LEADER_REPLAY"),
                    (20, "LEADER_READY"), (25, "CLOSED")], None, 0, 40, [(30, 35, None)])
    assert spans == (
        Span("CANVASS", 0, 10),
        Span("CANDIDATE_BALLOT", 10, 20),
        Span("LEADER_READY", 20, 25, ("LEADER_LOG_REPLICATION", "LEADER_REPLAY")),
        Span("CLOSED", 25, 30),
    )


def test_the_summary_for_json_counts_what_the_report_holds(failover):
    incident, _ = failover
    summary = incident.to_json()
    assert [t["leader"] for t in summary["terms"]] == [0, 1]
    assert summary["downPeriods"] == [{"member": 0, "startTs": incident.start_ns + 4 * SECOND, "endTs": incident.end_ns,
                                       "cause": "crash", "restarted": False}]
    assert summary["divergences"] == 0 and len(summary["elections"]) == 2
