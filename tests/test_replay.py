"""Node replay (engine.replay): recordings made by simulating a cluster with the scenario world,
replayed member by member; the comparison, the nomination oracle, invariants, checkpoints."""

from __future__ import annotations

import dataclasses

import pytest

from engine.replay import ReplaySession, UnknownModelError, comparison_key, member_seed, replay
from engine.scenario import World, run_command
from engine.trace import encode_record, verify
from formats.errors import DecodeError
from formats.events import Event


def record(*commands: str) -> list[Event]:
    """A capture of a simulated cluster: what every member started with, received and sent."""
    world = World(recording=[])
    for command in commands:
        run_command(world, command)
    return world.recording


STARTUP = ("cluster 3 delays=0:300ms,1:100ms,2:200ms", "advance 2s")
#: A leader dies; the followers elect a new one (follower_heartbeat_timeout.txt).
FAILOVER = (
    "cluster 3 delays=0:300ms/150ms,1:100ms,2:200ms/250ms",
    "advance 1s",
    "crash 1",
    "advance 12s",
)


def kinds(records, kind):
    return [r for r in records if r["kind"] == kind]


def test_replaying_a_faithful_recording_finds_no_divergence():
    records = list(replay(record(*FAILOVER)))
    assert kinds(records, "divergence") == []
    assert kinds(records, "invariant") == []
    summary = records[-1]
    assert summary["kind"] == "summary" and summary["divergences"] == 0
    assert summary["nodes"]["0"]["role"] == "LEADER" and summary["nodes"]["0"]["leadershipTermId"] == 1
    assert summary["nodes"]["2"]["leaderMemberId"] == 0


def test_the_trace_is_time_ordered_and_its_hash_covers_every_line_before_the_summary():
    records = list(replay(record(*STARTUP)))
    times = [r["ts"] for r in records[:-1]]
    assert times == sorted(times)
    assert verify([encode_record(r) for r in records])


def test_each_member_is_fed_only_its_own_inbound_events():
    # Member 1 alone: the others' sends are not inputs to it, and its trace has only its records.
    records = list(replay(record(*STARTUP), nodes=[1]))
    assert {r["node"] for r in records[:-1]} == {1}
    assert list(records[-1]["nodes"]) == ["1"]
    assert records[-1]["divergences"] == 0


def _flip_vote(events: list[Event], member: int) -> list[Event]:
    out = []
    for event in events:
        if event.node == member and event.dir == "out" and event.type == "Vote":
            event = dataclasses.replace(event, fields={**event.fields, "vote": "FALSE"})
        out.append(event)
    return out


def test_a_recorded_vote_the_model_would_not_send_is_a_divergence_naming_the_event():
    events = _flip_vote(record(*STARTUP), member=0)
    vote_index = next(i for i, e in enumerate(events) if e.node == 0 and e.dir == "out" and e.type == "Vote")
    records = list(replay(events))
    divergences = kinds(records, "divergence")
    assert divergences, "a NO vote in the recording where the model votes YES must be reported"
    assert {d["node"] for d in divergences} == {0}
    recorded_side = [d for d in divergences if d["event"] == vote_index]
    assert recorded_side, divergences
    assert recorded_side[0]["expected"]["fields"]["vote"] == "FALSE"
    assert recorded_side[0]["actual"]["fields"]["vote"] == "TRUE"
    assert recorded_side[0]["state"]["electionState"] is not None
    assert records[-1]["divergences"] == len(divergences)


def test_a_send_the_recording_does_not_have_is_a_divergence():
    events = [e for e in record(*STARTUP) if not (e.node == 1 and e.dir == "out" and e.type == "RequestVote" and e.peer == 2)]
    divergences = kinds(list(replay(events)), "divergence")
    assert [(d["node"], d["actual"]["type"], d["actual"]["peer"], d["expected"], d["event"]) for d in divergences] == [
        (1, "RequestVote", 2, None, None)
    ]


def test_periodic_positions_are_compared_by_range_not_by_count():
    # The recorded follower reported the same position with half its heartbeats missing: no divergence.
    events = record(*STARTUP)
    thinned, seen = [], 0
    for event in events:
        if event.node == 0 and event.dir == "out" and event.type == "AppendPosition":
            seen += 1
            if seen % 2 == 0 and seen > 2:
                continue
        thinned.append(event)
    assert kinds(list(replay(thinned)), "divergence") == []


def test_a_periodic_position_the_member_never_reported_is_a_divergence():
    events = record(*STARTUP)
    changed = [
        dataclasses.replace(e, fields={**e.fields, "logPosition": 4096})
        if e.node == 1 and e.dir == "out" and e.type == "CommitPosition" and e.fields["logPosition"] == 96
        else e
        for e in events
    ]
    divergences = kinds(list(replay(changed)), "divergence")
    assert divergences and all(d["node"] == 1 for d in divergences)
    assert any((d["expected"] or {}).get("fields", {}).get("logPosition") == 4096 for d in divergences)


def test_timestamps_and_session_ids_are_not_compared_and_booleans_compare_in_any_spelling():
    vote = {"candidateTermId": 1, "logLeadershipTermId": 0, "logPosition": 9, "candidateMemberId": 0, "followerMemberId": 2}
    assert comparison_key("Vote", {**vote, "vote": True}) == comparison_key("Vote", {**vote, "vote": "TRUE"})
    key_a, _ = comparison_key("NewLeadershipTerm", {"leadershipTermId": 0, "timestamp": 1, "logSessionId": 5})
    key_b, _ = comparison_key("NewLeadershipTerm", {"leadershipTermId": 0, "timestamp": 2, "logSessionId": 6})
    assert key_a == key_b
    key, position = comparison_key("AppendPosition", {"leadershipTermId": 0, "logPosition": 96, "followerMemberId": 2})
    assert position == 96 and key == (0, 2, None)  # leadershipTermId, followerMemberId, flags


def test_the_nomination_delay_implied_by_the_recording_reproduces_it_without_a_seed():
    # Scripted delays that java.util.Random would not give: only the oracle can reproduce them.
    events = record(*STARTUP)
    auto = list(replay(events))
    assert auto[-1]["divergences"] == 0
    assert auto[-1]["nominationDelay"] == {"0": "recorded", "1": "recorded", "2": "recorded"}
    draws = [r for r in auto if r["kind"] == "random" and r["node"] == 1]
    assert int(draws[0]["value"] * 500_000_000) == 100_000_000  # Aeron's (long)(d * (timeout >> 1))
    seeded = list(replay(events, nomination="seeded"))
    assert seeded[-1]["nominationDelay"] == {"0": "seeded", "1": "seeded", "2": "seeded"}
    assert seeded[-1]["divergences"] > 0


def test_a_seed_in_member_start_is_used_and_reproduces_a_seeded_run():
    # A run whose members drew from java.util.Random(7 + id), as its MemberStart events say.
    world = World(recording=[])
    for member in range(3):
        world.start(member, {"seed": str(7 + member)}, [])
    run_command(world, "advance 3s")
    events = [dataclasses.replace(e, fields={**e.fields, "seed": 7 + e.node}) if e.type == "MemberStart" else e for e in world.recording]
    records = list(replay(events))
    assert records[-1]["seeds"] == {"0": 7, "1": 8, "2": 9}
    assert records[-1]["nominationDelay"] == {"0": "seeded", "1": "seeded", "2": "seeded"}
    assert records[-1]["divergences"] == 0
    # A given seed overrides MemberStart.seed: member N draws from java.util.Random(seed + N).
    other = list(replay(events, seed=100))
    assert other[-1]["seeds"] == {"0": 100, "1": 101, "2": 102}
    assert other[-1]["seed"] == 100
    assert [r["value"] for r in other if r["kind"] == "random"] != [r["value"] for r in records if r["kind"] == "random"]


def test_member_seed_rule():
    assert member_seed(2, {"seed": 42}, None) == 42
    assert member_seed(2, {"seed": 42}, 10) == 12
    assert member_seed(2, {}, None) == 2


def test_until_stops_the_time_line():
    records = list(replay(record(*STARTUP), until=50_000_000))
    assert max(r["ts"] for r in records[:-1]) <= 50_000_000
    assert records[-1]["ts"] == 50_000_000
    assert {s["electionState"] for s in records[-1]["nodes"].values()} == {"NOMINATE"}


def test_recorded_agent_log_state_changes_are_compared():
    events = record(*STARTUP)
    states = [r for r in replay(events, nodes=[0]) if r["kind"] == "state" and r["from"] is not None]
    observed = [
        Event(ts=r["ts"], node=0, dir="local", peer=None, channel="local", type="ElectionStateChange",
              fields={"from": r["from"], "to": r["to"]})
        for r in states
    ]
    assert replay_divergences(events + observed) == 0
    wrong = observed[:2] + [dataclasses.replace(observed[2], fields={"from": observed[2].fields["from"], "to": "CANVASS"})] + observed[3:]
    assert replay_divergences(events + wrong) == 2  # the model's change unmatched, and the recorded one


def replay_divergences(events):
    return list(replay(events))[-1]["divergences"]


def _vote_in(member, candidate, term, ts):
    return Event(ts=ts, node=member, dir="in", peer=candidate, channel="consensus", type="Vote", fields={
        "candidateTermId": term, "logLeadershipTermId": -1, "logPosition": 0, "candidateMemberId": member,
        "followerMemberId": candidate, "vote": "TRUE"})


def test_two_members_made_leaders_of_the_same_term_break_an_invariant():
    # A recording no real cluster produces: members 0 and 2 each receive YES votes for term 0.
    members = "|".join(f"{i},h:{i}1,h:{i}2,h:{i}3,h:{i}4,h:{i}5" for i in range(3))
    events = []
    for member, peers in ((0, (1, 2)), (2, (0, 1))):
        events.append(Event(ts=0, node=member, dir="local", peer=None, channel="local", type="MemberStart",
                            fields={"clusterMembers": members, "seed": 0}))
        for peer in peers:
            events.append(Event(ts=1_000_000, node=member, dir="in", peer=peer, channel="consensus", type="CanvassPosition",
                                fields={"logLeadershipTermId": -1, "logPosition": 0, "leadershipTermId": -1,
                                        "followerMemberId": peer, "protocolVersion": 65536}))
        for peer in peers:
            events.append(dataclasses.replace(_vote_in(member, peer, 0, 600_000_000), fields={
                **_vote_in(member, peer, 0, 0).fields, "candidateMemberId": member, "followerMemberId": peer}))
    events.append(Event(ts=700_000_000, node=0, dir="local", peer=None, channel="local", type="End", fields={}))
    records = list(replay(events))
    violations = kinds(records, "invariant")
    assert [v["name"] for v in violations] == ["one-leader-per-term"]
    assert "both lead term 0" in violations[0]["detail"]


def test_an_unknown_model_lists_the_known_ones():
    with pytest.raises(UnknownModelError, match="1.47.3"):
        list(replay([], model="1.99.0"))


def test_an_input_event_before_its_member_start_is_bad_input_naming_the_event():
    events = record(*STARTUP)
    first_in = next(i for i, e in enumerate(events) if e.dir == "in")
    orphan = [e for e in events if not (e.type == "MemberStart" and e.node == events[first_in].node)]
    with pytest.raises(DecodeError, match="before its MemberStart"):
        list(replay(orphan, refs=[10 + i for i in range(len(orphan))], ref_kind="line"))


def test_a_session_seeks_back_through_checkpoints_to_the_same_state():
    events = record(*FAILOVER)
    session = ReplaySession(events, checkpoint_every=40)
    states_at = {}
    for k in range(len(session)):
        session.step()
        if k + 1 in (30, 95, len(session) // 2):
            states_at[k + 1] = session.views()
    for k, expected in sorted(states_at.items(), reverse=True):
        session.seek(k)
        assert session.views() == expected
    session.seek(len(session))
    final = session.finish()
    assert final[-1]["kind"] == "summary"


def test_the_same_recording_replays_to_the_same_bytes():
    events = record(*FAILOVER)
    assert [encode_record(r) for r in replay(events)] == [encode_record(r) for r in replay(list(events))]


def test_the_lines_are_the_records_encoded_once():
    from engine.replay import replay_lines

    events = record(*STARTUP)
    assert list(replay_lines(events)) == [encode_record(r) for r in replay(events)]


def test_a_recorded_election_start_with_another_reason_is_a_divergence():
    events = record(*FAILOVER)
    starts = [r for r in replay(events, nodes=[0]) if r["kind"] == "election"]
    assert [s["reason"] for s in starts] == ["node started", "leader heartbeat timeout"]

    def observed(reason_of_second):
        return [
            Event(ts=s["ts"], node=0, dir="local", peer=None, channel="local", type="NewElection",
                  fields={"reason": s["reason"] if i == 0 else reason_of_second, "leadershipTermId": s["leadershipTermId"]})
            for i, s in enumerate(starts)
        ]

    assert replay_divergences(events + observed("leader heartbeat timeout")) == 0
    divergences = kinds(list(replay(events + observed("inactive follower quorum"))), "divergence")
    assert {(d["expected"] or {}).get("fields", {}).get("reason") for d in divergences} >= {"inactive follower quorum"}


def test_a_series_quiet_past_the_prune_cutoff_can_still_extend_its_last_run():
    # Regression (issue 13): pruning kept a series' last run but dropped its key's index entry, so
    # the same value sent again after a long quiet stretch raised IndexError in `_Series.add`.
    from engine.replay import _Series

    series = _Series()
    key = ("CommitPosition", 7)
    assert series.add(0, key, 100, None, dict) is not None
    series.add(10, key, 100, None, dict)
    series.prune(1_000)  # the only run ended long before the cutoff: kept, as the series' last
    assert series.add(2_000, key, 100, None, dict) is None  # extends that run
    run = series.newest()
    assert (run.start, run.end) == (0, 2_000)
    assert series.covers(run, 1_500, 2_500)  # the extended run is found in a window of its new end
    other = ("CommitPosition", 8)
    series.prune(5_000)
    assert series.add(6_000, other, 200, None, dict) is not None
    assert not series.covers(run, 5_500, 6_500)  # the old key's run is forgotten once superseded
