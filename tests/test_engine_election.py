"""The Election's states, transitions and handlers, one member driven by hand (aeron-election.md §2–3).

Each test feeds member 0 of a 3-member cluster (or a 1-member one) the messages a peer would send,
at chosen milliseconds, and checks what the reference says Aeron 1.47.3 does.  The nomination delay
is fixed with a chosen `nextDouble` so that times are exact.
"""

from __future__ import annotations

from typing import Any

from engine import ModelFlags, Node
from engine.harness.events import input_of, member_start_of
from engine.model.election import ElectionState
from formats.cluster_codecs import (
    AppendPosition,
    BooleanType,
    CanvassPosition,
    CommitPosition,
    NewLeadershipTerm,
    RequestVote,
    StopCatchup,
    Vote,
)
from formats.events import Event, message_event

MS = 1_000_000
PROTOCOL = 1 << 16


def members(n: int) -> str:
    return "|".join(f"{i},h{i}:2,h{i}:3,h{i}:4,h{i}:5,h{i}:1" for i in range(n))


class FixedDraw:
    def __init__(self, value: float) -> None:
        self.value = value
        self.draws = 0

    def next_double(self) -> float:
        self.draws += 1
        return self.value


class One:
    """Member ``me`` of an ``n``-member cluster, started at t=0, driven message by message (times in ms)."""

    def __init__(self, me: int = 0, n: int = 3, draw: float = 0.5, flags: ModelFlags = ModelFlags(), **fields: Any) -> None:
        start = Event(ts=0, node=me, dir="local", peer=None, channel="local", type="MemberStart",
                      fields={"clusterMembers": members(n), **fields})
        self.me = me
        self.random = FixedDraw(draw)
        self.node = Node(me, member_start_of(start), random=self.random, flags=flags)
        self.outputs = list(self.node.take_outputs())

    def deliver(self, at_ms: float, sender: int, message: Any) -> list:
        event = message_event(message, ts=int(at_ms * MS), node=self.me, dir="in", peer=sender, channel="consensus")
        self.node.step(input_of(event), event.ts)
        return self.take()

    def log_frame(self, at_ms: float, sender: int, message: Any, position: int) -> list:
        event = message_event(message, ts=int(at_ms * MS), node=self.me, dir="in", peer=sender, channel="log")
        event = Event(ts=event.ts, node=event.node, dir="in", peer=sender, channel="log", type=event.type,
                      fields=event.fields, extra={"logPosition": position})
        self.node.step(input_of(event), event.ts)
        return self.take()

    def advance(self, to_ms: float) -> list:
        self.node.advance(int(to_ms * MS))
        return self.take()

    def take(self) -> list:
        outputs = list(self.node.take_outputs())
        self.outputs += outputs
        return outputs

    @property
    def state(self) -> str:
        return self.node.view().to_json()["electionState"]

    @property
    def election(self):
        return self.node.agent.election


def kinds(outputs: list, kind: str) -> list:
    return [o for o in outputs if type(o).__name__ == kind]


def states(outputs: list) -> list[str]:
    return [f"{o.from_state}→{o.to_state}" for o in kinds(outputs, "StateChange")]


def sent(outputs: list, type_name: str | None = None) -> list[tuple[int, Any]]:
    return [(o.peer, o.message) for o in kinds(outputs, "Send") if type_name is None or o.type == type_name]


def canvass(sender: int, log_term: int = -1, position: int = 0, term: int = -1) -> CanvassPosition:
    return CanvassPosition(log_leadership_term_id=log_term, log_position=position, leadership_term_id=term,
                           follower_member_id=sender, protocol_version=PROTOCOL)


def request_vote(candidate: int, cand_term: int, log_term: int = -1, position: int = 0) -> RequestVote:
    return RequestVote(log_leadership_term_id=log_term, log_position=position, candidate_term_id=cand_term,
                       candidate_member_id=candidate, protocol_version=PROTOCOL)


def vote(follower: int, cand_term: int, yes: bool, candidate: int = 0) -> Vote:
    return Vote(candidate_term_id=cand_term, log_leadership_term_id=-1, log_position=0, candidate_member_id=candidate,
                follower_member_id=follower, vote=BooleanType.TRUE if yes else BooleanType.FALSE)


def new_leadership_term(**fields: Any) -> NewLeadershipTerm:
    values = dict(log_leadership_term_id=-1, next_leadership_term_id=0, next_term_base_log_position=0, next_log_position=-1,
                  leadership_term_id=0, term_base_log_position=0, log_position=0, leader_recording_id=0, timestamp=0,
                  leader_member_id=1, log_session_id=77, app_version=1, is_startup=BooleanType.FALSE)
    values.update(fields)
    return NewLeadershipTerm(**values)


def term_entry(term: int, base: int, position: int = -1, recording_id: int = 0) -> dict:
    return {"recordingId": recording_id, "leadershipTermId": term, "termBaseLogPosition": base, "logPosition": position,
            "timestamp": 0, "serviceId": -1, "type": "TERM"}


def nominated(draw: float = 0.5, **fields: Any) -> One:
    """Member 0 in NOMINATE at 10 ms: both peers canvassed with logs no better than its own."""
    one = One(draw=draw, **fields)
    one.deliver(10, 1, canvass(1))
    one.deliver(10, 2, canvass(2))
    assert one.state == "NOMINATE"
    return one


def candidate(draw: float = 0.5) -> One:
    """Member 0 in CANDIDATE_BALLOT for candidateTermId 0 since 260 ms."""
    one = nominated(draw)
    one.advance(260)
    assert one.state == "CANDIDATE_BALLOT"
    return one


def leader_ready() -> One:
    one = candidate()
    one.deliver(300, 1, vote(1, 0, True))
    one.deliver(301, 2, vote(2, 0, True))
    assert one.state == "LEADER_READY"
    return one


# -- start-up and CANVASS (§2.0–2.2, §6.1) ------------------------------------------------------------------


def test_a_starting_member_reports_node_started_canvasses_and_becomes_active():
    one = One()
    assert [o.describe() for o in one.outputs[:3]] == [
        "0 election 'node started' term=-1 log=0 append=0",
        "0 INIT → CANVASS",
        "0 module INIT → ACTIVE",
    ]
    assert sent(one.outputs) == [(1, canvass(0)), (2, canvass(0))]


def test_canvass_position_goes_out_every_status_interval():
    one = One()
    assert one.advance(99) == []
    at_100 = one.advance(100)
    assert [(o.ts, o.peer) for o in at_100] == [(100 * MS, 1), (100 * MS, 2)]
    assert [o.ts for o in one.advance(350)] == [200 * MS, 200 * MS, 300 * MS, 300 * MS]


def test_startup_canvass_waits_60s_for_unanimity_before_a_quorum_may_nominate():
    one = One()
    one.deliver(5, 1, canvass(1))  # a quorum (0 and 1), not unanimous: 2 has not reported
    assert one.state == "CANVASS"
    one.advance(59_999)
    assert one.state == "CANVASS"
    changes = kinds(one.advance(60_000), "StateChange")
    assert [(c.ts, c.to_state) for c in changes] == [(60_000 * MS, "NOMINATE")]


def test_unanimous_canvass_nominates_at_once_after_one_random_draw():
    one = nominated(draw=0.5)
    assert one.random.draws == 1
    assert kinds(one.outputs, "StateChange")[-1].ts == 10 * MS
    assert one.election.nomination_deadline_ns == 10 * MS + 250 * MS  # draw × electionTimeout/2


def test_nominate_keeps_canvassing_and_at_the_deadline_becomes_candidate_and_requests_votes():
    one = nominated(draw=0.5)
    entry = [i for i, o in enumerate(one.outputs) if type(o).__name__ == "StateChange"][-1]
    assert [p for p, _ in sent(one.outputs[entry:], "CanvassPosition")] == [1, 2]  # at once on entry (1.47.0)
    between = one.advance(259)
    assert [o.ts for o in between] == [110 * MS, 110 * MS, 210 * MS, 210 * MS]
    at_deadline = one.advance(260)
    assert [o.describe() for o in at_deadline] == [
        "0 node-state candidateTermId=0 logPosition=0",
        "0 role FOLLOWER → CANDIDATE",
        "0 NOMINATE → CANDIDATE_BALLOT",
        "0→1 RequestVote candidateTermId=0 log=(-1,0)",
        "0→2 RequestVote candidateTermId=0 log=(-1,0)",
    ]


def test_before_1_47_nominate_sends_no_canvass():
    one = nominated(draw=0.5, flags=ModelFlags(nominate_sends_canvass=False))
    assert one.advance(259) == []


def test_an_appointed_leader_setting_keeps_other_members_from_nominating():
    one = One(appointedLeaderId=2)
    one.deliver(10, 1, canvass(1))
    one.deliver(10, 2, canvass(2))
    one.advance(70_000)
    assert one.state == "CANVASS"
    assert one.random.draws == 0


# -- voting (§3.2) ---------------------------------------------------------------------------------------


def test_a_vote_request_during_nominate_is_granted_and_the_member_follows_the_ballot():
    one = nominated()
    out = one.deliver(100, 1, request_vote(1, 0, position=64))
    assert [o.describe() for o in out] == [
        "0 node-state candidateTermId=0 logPosition=64",  # the candidate's logPosition, not ours
        "0→1 Vote candidateTermId=0 log=(-1,0) ✓",
        "0 NOMINATE → FOLLOWER_BALLOT",
    ]


def test_a_candidate_whose_term_is_not_newer_than_ours_gets_a_no_and_nothing_is_written():
    one = nominated()
    one.deliver(100, 1, request_vote(1, 0))
    out = one.deliver(150, 2, request_vote(2, 0))
    assert [o.describe() for o in out] == ["0→2 Vote candidateTermId=0 log=(-1,0) ✗"]
    assert one.state == "FOLLOWER_BALLOT"


def test_a_candidate_with_a_worse_log_gets_a_no_but_its_term_is_recorded():
    one = One(recordingLog=[term_entry(0, 0)], appendPosition=1000, nodeState={"candidateTermId": 0})
    out = one.deliver(10, 1, request_vote(1, 1, log_term=0, position=500))
    assert [o.describe() for o in out] == [
        "0 node-state candidateTermId=1 logPosition=500",
        "0→1 Vote candidateTermId=1 log=(0,1000) ✗",
    ]
    assert one.state == "CANVASS"
    assert one.deliver(20, 2, request_vote(2, 1, log_term=0, position=1000))[0].describe() == "0→2 Vote candidateTermId=1 log=(0,1000) ✗"


def test_an_old_candidate_term_is_refused_after_a_restart_because_node_state_remembers_it():
    one = One(nodeState={"candidateTermId": 5, "logPosition": 0, "timestamp": 1})
    out = one.deliver(10, 1, request_vote(1, 3))
    assert [o.describe() for o in out] == ["0→1 Vote candidateTermId=3 log=(-1,0) ✗"]
    out = one.deliver(20, 1, request_vote(1, 6))
    assert [o.describe() for o in out][:2] == ["0 node-state candidateTermId=6 logPosition=0", "0→1 Vote candidateTermId=6 log=(-1,0) ✓"]


def test_follower_ballot_times_out_to_canvass_after_the_election_timeout():
    one = nominated()
    one.deliver(100, 1, request_vote(1, 0))
    one.advance(1099)
    assert one.state == "FOLLOWER_BALLOT"
    assert states(one.advance(1100)) == ["FOLLOWER_BALLOT→CANVASS"]


def test_a_second_vote_in_follower_ballot_does_not_rearm_its_timeout():
    one = nominated()
    one.deliver(100, 1, request_vote(1, 0))
    out = one.deliver(600, 2, request_vote(2, 1))
    assert states(out) == [] and sent(out, "Vote")[0][1].vote is BooleanType.TRUE
    assert states(one.advance(1100)) == ["FOLLOWER_BALLOT→CANVASS"]


# -- CANDIDATE_BALLOT (§2.4) -------------------------------------------------------------------------------


def test_unanimous_votes_win_the_ballot_at_once():
    one = candidate()
    assert states(one.deliver(300, 1, vote(1, 0, True))) == []
    out = one.deliver(301, 2, vote(2, 0, True))
    assert states(out)[0] == "CANDIDATE_BALLOT→LEADER_LOG_REPLICATION"
    assert kinds(out, "RoleChange")[0].to_role == "LEADER"


def test_a_quorum_of_votes_wins_only_at_the_ballot_timeout():
    one = candidate()
    one.deliver(300, 1, vote(1, 0, True))
    one.advance(1259)
    assert one.state == "CANDIDATE_BALLOT"
    out = one.advance(1260)
    assert states(out)[0] == "CANDIDATE_BALLOT→LEADER_LOG_REPLICATION"
    assert kinds(out, "StateChange")[0].ts == 1260 * MS


def test_before_1_41_a_majority_with_every_canvassed_member_voted_wins_at_once_even_with_a_no():
    one = candidate_with_flags(ModelFlags(unanimous_or_timeout_ballot=False))
    one.deliver(300, 1, vote(1, 0, True))
    out = one.deliver(301, 2, vote(2, 0, False))
    assert states(out)[0] == "CANDIDATE_BALLOT→LEADER_LOG_REPLICATION"


def candidate_with_flags(flags: ModelFlags) -> One:
    one = One(flags=flags)
    one.deliver(10, 1, canvass(1))
    one.deliver(10, 2, canvass(2))
    one.advance(260)
    assert one.state == "CANDIDATE_BALLOT"
    return one


def test_a_no_vote_loses_the_ballot_at_the_timeout_and_the_retry_proposes_the_next_term():
    one = candidate()
    one.deliver(300, 1, vote(1, 0, False))
    one.deliver(301, 2, vote(2, 0, True))
    out = one.advance(1260)
    assert states(out) == ["CANDIDATE_BALLOT→CANVASS"]
    assert kinds(out, "RoleChange")[0].to_role == "FOLLOWER"
    assert one.node.view().to_json()["candidateTermId"] == 0  # the raised term stays
    one.deliver(1300, 1, canvass(1))
    one.deliver(1300, 2, canvass(2))
    out = one.advance(1550)
    assert [o.describe() for o in kinds(out, "NodeStateWrite")] == ["0 node-state candidateTermId=1 logPosition=0"]
    assert sent(out, "RequestVote")[0][1].candidate_term_id == 1


def test_votes_for_another_candidate_or_term_are_not_counted():
    one = candidate()
    one.deliver(300, 1, vote(1, 0, True, candidate=2))
    one.deliver(300, 2, vote(2, 5, True))
    assert states(one.advance(1260)) == ["CANDIDATE_BALLOT→CANVASS"]


# -- leader states (§2.6–2.9) --------------------------------------------------------------------------------


def test_a_new_leader_goes_through_replay_and_init_and_waits_for_its_voters_to_append():
    one = candidate()
    one.deliver(300, 1, vote(1, 0, True))
    out = one.deliver(301, 2, vote(2, 0, True))
    assert states(out) == [
        "CANDIDATE_BALLOT→LEADER_LOG_REPLICATION",
        "LEADER_LOG_REPLICATION→LEADER_REPLAY",
        "LEADER_REPLAY→LEADER_INIT",
        "LEADER_INIT→LEADER_READY",
    ]
    assert [o.describe() for o in kinds(out, "RecordingLogChange")] == ["0 recording.log appendTerm term=0 base=0 pos=-1"]
    assert states(one.deliver(400, 1, AppendPosition(leadership_term_id=0, log_position=0, follower_member_id=1, flags=0))) == []
    out = one.deliver(401, 2, AppendPosition(leadership_term_id=0, log_position=0, follower_member_id=2, flags=0))
    assert states(out) == ["LEADER_READY→CLOSED"]
    assert [(o.position, type(o.message).__name__) for o in kinds(out, "LogAppend")] == [(96, "NewLeadershipTermEvent")]


def test_leader_ready_completes_on_a_quorum_at_position_after_the_heartbeat_timeout():
    one = leader_ready()
    one.deliver(400, 1, AppendPosition(leadership_term_id=0, log_position=0, follower_member_id=1, flags=0))
    one.advance(10_300)
    assert one.state == "LEADER_READY"
    assert states(one.advance(10_301)) == ["LEADER_READY→CLOSED"]


def test_leader_ready_publishes_new_leadership_term_every_heartbeat_interval():
    one = leader_ready()
    out = one.advance(701)
    assert [o.ts for o in kinds(out, "Send") if o.type == "NewLeadershipTerm"] == [501 * MS] * 2 + [701 * MS] * 2


def test_a_canvass_from_a_newer_log_term_during_leader_ready_sends_the_election_back_to_init():
    one = leader_ready()
    out = one.deliver(400, 1, canvass(1, log_term=5, position=10))
    assert kinds(out, "StateChange")[0].reason == "WARN - potential new election in progress"
    assert states(out)[:2] == ["LEADER_READY→INIT", "INIT→CANVASS"]
    assert kinds(out, "RoleChange")[0].to_role == "FOLLOWER"


def test_a_commit_position_from_a_newer_term_during_leader_ready_sends_the_election_back_to_init():
    one = leader_ready()
    out = one.deliver(400, 2, CommitPosition(leadership_term_id=3, log_position=0, leader_member_id=2))
    assert [(c.to_state, c.reason) for c in kinds(out, "StateChange")][0] == (
        "INIT",
        "WARN - new leader detected due to commit position",
    )


def test_a_lagging_member_canvassing_a_leader_gets_a_tailored_new_leadership_term():
    one = leader_ready()
    out = one.deliver(400, 1, canvass(1, log_term=-1))
    (peer, message), = sent(out, "NewLeadershipTerm")
    assert peer == 1 and message.log_leadership_term_id == -1 and message.timestamp == 400
    assert (message.next_leadership_term_id, message.next_term_base_log_position, message.next_log_position) == (0, 0, 0)


def test_a_single_member_cluster_leads_at_once_bumping_the_term_in_the_constructor():
    one = One(n=1, nodeState={"candidateTermId": 4})
    assert [o.describe() for o in one.outputs[:3]] == [
        "0 election 'node started' term=-1 log=0 append=0",
        "0 node-state candidateTermId=5 logPosition=0",
        "0 role FOLLOWER → LEADER",
    ]
    assert states(one.outputs) == [
        "INIT→LEADER_LOG_REPLICATION",
        "LEADER_LOG_REPLICATION→LEADER_REPLAY",
        "LEADER_REPLAY→LEADER_INIT",
        "LEADER_INIT→LEADER_READY",
        "LEADER_READY→CLOSED",
    ]
    assert one.node.view().to_json()["leadershipTermId"] == 5


def test_a_single_member_re_election_after_an_error_reuses_its_term():
    """Aeron 1.47.3 bumps a single node's term only in the Election constructor (fixed in 1.50.1/1.51.0)."""
    from engine.model.exceptions import ClusterEvent

    one = One(n=1)
    agent = one.node.agent
    agent.set_time(50 * MS, 50 * MS)
    agent.enter_election(False, "test")
    election = agent.election
    assert election.leadership_term_id == 1  # a new Election bumps the term ...
    election.handle_error(50 * MS, ClusterEvent("boom"))
    out = one.advance(60)
    assert [(c.to_state, c.reason) for c in kinds(out, "StateChange") if c.to_state == "INIT"] == [("INIT", "WARN - boom")]
    assert states(out)[-1] == "LEADER_READY→CLOSED"
    assert [w.candidate_term_id for w in kinds(out, "NodeStateWrite")] == [1]
    assert one.node.view().to_json()["leadershipTermId"] == 1  # ... but the INIT pass does not bump it again


# -- follower states (§2.10–2.17, §3.4) -----------------------------------------------------------------------


def test_a_new_leadership_term_in_the_voted_term_takes_a_follower_with_the_log_to_the_live_log():
    one = nominated()
    one.deliver(100, 1, request_vote(1, 0))
    out = one.deliver(120, 1, new_leadership_term())
    assert states(out) == [
        "FOLLOWER_BALLOT→FOLLOWER_REPLAY",
        "FOLLOWER_REPLAY→FOLLOWER_LOG_INIT",
        "FOLLOWER_LOG_INIT→FOLLOWER_LOG_AWAIT",
        "FOLLOWER_LOG_AWAIT→FOLLOWER_READY",
        "FOLLOWER_READY→CLOSED",
    ]
    assert [o.describe() for o in kinds(out, "RecordingLogChange")] == ["0 recording.log appendTerm term=0 base=0 pos=-1"]
    assert sent(out, "AppendPosition")[0] == (1, AppendPosition(leadership_term_id=0, log_position=0, follower_member_id=0, flags=0))


def test_a_new_leadership_term_for_another_term_is_ignored_in_follower_ballot():
    one = nominated()
    one.deliver(100, 1, request_vote(1, 0))
    assert states(one.deliver(120, 1, new_leadership_term(leadership_term_id=1))) == []


def test_a_new_leadership_term_from_another_log_term_sends_a_ballot_follower_back_to_canvass():
    one = nominated()
    one.deliver(100, 1, request_vote(1, 0))
    out = one.deliver(120, 1, new_leadership_term(log_leadership_term_id=3))
    assert states(out) == ["FOLLOWER_BALLOT→CANVASS"]
    assert states(one.deliver(130, 1, new_leadership_term(log_leadership_term_id=3, leadership_term_id=7))) == []


def test_conflicting_entries_are_truncated_and_the_election_restarts_from_the_truncated_log():
    one = One(recordingLog=[term_entry(0, 0)], appendPosition=1000, nodeState={"candidateTermId": 0})
    out = one.deliver(10, 1, new_leadership_term(log_leadership_term_id=0, next_leadership_term_id=1,
                                                   next_term_base_log_position=500, leadership_term_id=1,
                                                   term_base_log_position=500, log_position=800))
    assert [o.describe() for o in kinds(out, "RecordingLogChange")] == ["0 recording.log commitLogPosition term=0 base=0 pos=500"]
    to_init, to_canvass = kinds(out, "StateChange")[:2]
    assert to_init.reason == (
        "WARN - Truncating Cluster Log - memberId=0 state=CANVASS this.logLeadershipTermId=0 this.leadershipTermId=0"
        " this.candidateTermId=0 this.commitPosition=0 this.logPosition=0 this.appendPosition=1000"
        " oldPosition=800 newPosition=500"
    )
    assert (to_canvass.from_state, to_canvass.to_state, to_canvass.append_position) == ("INIT", "CANVASS", 500)


def test_a_new_leadership_term_the_member_cannot_follow_is_an_error_naming_it():
    one = One()
    out = one.deliver(10, 1, new_leadership_term(next_leadership_term_id=-1, term_base_log_position=100, log_position=100))
    reason = kinds(out, "StateChange")[0].reason
    assert reason.startswith("ERROR - invalid newLeadershipTerm - this.appendPosition=0 < termBaseLogPosition=100"
                             " and nextLeadershipTermId=-1, logLeadershipTermId=-1")
    assert reason.endswith("leaderMemberId=1, logSessionId=77, isStartup=false")
    assert one.state == "CANVASS"


def replicating() -> One:
    one = One()
    out = one.deliver(10, 1, new_leadership_term(next_log_position=1024, leadership_term_id=1,
                                                   term_base_log_position=1024, log_position=1024, leader_recording_id=7))
    assert states(out) == ["CANVASS→FOLLOWER_LOG_REPLICATION"]
    return one


def test_a_follower_missing_a_whole_term_replicates_it_and_canvasses_again_once_committed():
    one = replicating()
    assert sent(one.outputs, "AppendPosition")[-1][1] == AppendPosition(
        leadership_term_id=1, log_position=1024, follower_member_id=0, flags=0
    )
    assert one.state == "FOLLOWER_LOG_REPLICATION"  # replicated, but not yet known to be committed
    out = one.deliver(50, 1, CommitPosition(leadership_term_id=0, log_position=1024, leader_member_id=1))
    assert [o.describe() for o in kinds(out, "RecordingLogChange")] == [
        "0 recording.log appendTerm term=0 base=0 pos=-1",
        "0 recording.log commitLogPosition term=0 base=0 pos=1024",
    ]
    assert states(out) == ["FOLLOWER_LOG_REPLICATION→CANVASS"]
    assert sent(out, "CanvassPosition")[0][1] == canvass(0, log_term=0, position=1024, term=1)


def test_replication_without_a_commit_position_times_out_after_the_heartbeat_timeout():
    one = replicating()
    one.advance(10_009)
    assert one.state == "FOLLOWER_LOG_REPLICATION"
    out = one.advance(10_010)
    assert kinds(out, "StateChange")[0].reason == "WARN - timeout awaiting commit position"


def test_follower_replay_runs_to_the_local_append_position_even_past_the_commit_position():
    """Aeron 1.47.3 replays the whole local log (fixed in 1.50.0): no CommitPosition has said 1000 is committed."""
    one = One(recordingLog=[term_entry(0, 0)], appendPosition=1000, nodeState={"candidateTermId": 0})
    out = one.deliver(10, 1, new_leadership_term(log_leadership_term_id=0, next_leadership_term_id=-1,
                                                   next_term_base_log_position=-1, leadership_term_id=1,
                                                   term_base_log_position=1000, log_position=1000))
    replay_done = [c for c in kinds(out, "StateChange") if c.from_state == "FOLLOWER_REPLAY"][0]
    assert (replay_done.to_state, replay_done.log_position) == ("FOLLOWER_LOG_INIT", 1000)


def catching_up() -> One:
    one = One(recordingLog=[term_entry(0, 0)], appendPosition=500, nodeState={"candidateTermId": 0})
    out = one.deliver(10, 1, new_leadership_term(log_leadership_term_id=0, next_leadership_term_id=-1,
                                                   next_term_base_log_position=-1, leadership_term_id=0,
                                                   term_base_log_position=0, log_position=800))
    assert states(out) == [
        "CANVASS→FOLLOWER_REPLAY",
        "FOLLOWER_REPLAY→FOLLOWER_CATCHUP_INIT",
        "FOLLOWER_CATCHUP_INIT→FOLLOWER_CATCHUP_AWAIT",
        "FOLLOWER_CATCHUP_AWAIT→FOLLOWER_CATCHUP",
    ]
    assert kinds(out, "StateChange")[0].catchup_position == 800
    return one


def test_a_follower_behind_in_the_same_term_catches_up_and_joins_once_the_leader_stops_the_catchup():
    from formats.cluster_codecs import SessionMessageHeader

    one = catching_up()
    (peer, request), = sent(one.outputs, "CatchupPosition")
    assert peer == 1 and (request.leadership_term_id, request.log_position, request.catchup_endpoint) == (0, 500, "h0:5")
    frame = SessionMessageHeader(leadership_term_id=0, cluster_session_id=1, timestamp=0)
    out = one.log_frame(20, 1, frame, 800)
    assert sent(out, "AppendPosition") == [(1, AppendPosition(leadership_term_id=0, log_position=800, follower_member_id=0, flags=1))]
    one.deliver(30, 1, CommitPosition(leadership_term_id=0, log_position=800, leader_member_id=1))
    assert one.state == "FOLLOWER_CATCHUP"  # caught up, but the catch-up destination is still there
    out = one.deliver(40, 1, StopCatchup(leadership_term_id=0, follower_member_id=0))
    assert states(out) == ["FOLLOWER_CATCHUP→FOLLOWER_LOG_INIT", "FOLLOWER_LOG_INIT→FOLLOWER_READY", "FOLLOWER_READY→CLOSED"]
    assert kinds(out, "StateChange")[0].append_position == 800


def test_catchup_without_progress_for_the_heartbeat_timeout_is_an_error():
    one = catching_up()
    one.advance(10_010)
    assert one.state == "FOLLOWER_CATCHUP"
    out = one.advance(10_011)
    assert kinds(out, "StateChange")[0].reason.startswith("WARN - no catchup progress commitPosition=500 limitPosition=0")


def test_election_states_have_aerons_codes():
    assert [s.name for s in ElectionState][:3] == ["INIT", "CANVASS", "NOMINATE"]
    assert ElectionState.CLOSED.code == 17 and ElectionState.from_code(9) is ElectionState.FOLLOWER_LOG_REPLICATION


def signal(one: One, at_ms: float, kind: str, position: int, recording_id: int = 0) -> list:
    event = Event(ts=int(at_ms * MS), node=one.me, dir="local", peer=None, channel="local", type="RecordingSignal",
                  fields={"recordingId": recording_id, "position": position, "signal": kind, "correlationId": 1})
    one.node.step(input_of(event), event.ts)
    return one.take()


def test_with_archive_evidence_replication_follows_the_recording_signals():
    one = One()
    signal(one, 5, "START", 0)  # the capture has archive signals: replication now waits for them
    one.deliver(10, 1, new_leadership_term(next_log_position=1024, leadership_term_id=1, term_base_log_position=1024,
                                           log_position=1024, leader_recording_id=7))
    assert one.state == "FOLLOWER_LOG_REPLICATION"
    # Aeron's RecordingReplication has no position (NULL_POSITION) until the archive gives one: nothing
    # goes out before the first signal (i_restart_all_one_member_behind, member 1)
    assert [m.log_position for _, m in sent(one.outputs, "AppendPosition")] == []
    out = signal(one, 50, "EXTEND", 512)
    assert [m.log_position for _, m in sent(out, "AppendPosition")] == [512]
    one.deliver(60, 1, CommitPosition(leadership_term_id=1, log_position=1024, leader_member_id=1))
    signal(one, 70, "REPLICATE_END", 1024)
    assert one.state == "FOLLOWER_LOG_REPLICATION"  # ended, not yet stopped
    out = signal(one, 80, "STOP", 1024)
    assert [m.log_position for _, m in sent(out, "AppendPosition")] == [1024]
    assert states(out) == ["FOLLOWER_LOG_REPLICATION→CANVASS"]


def test_with_archive_evidence_a_replication_that_does_not_progress_fails_after_its_progress_timeout():
    one = One()
    signal(one, 5, "START", 0)
    one.deliver(10, 1, new_leadership_term(next_log_position=1024, leadership_term_id=1, term_base_log_position=1024,
                                           log_position=1024, leader_recording_id=7))
    for t in range(1000, 10_000, 1000):  # the leader keeps the replication deadline alive
        one.deliver(t, 1, CommitPosition(leadership_term_id=1, log_position=1024, leader_member_id=1))
    out = one.advance(10_300)
    reasons = [c.reason for c in kinds(out, "StateChange") if c.to_state == "INIT"]
    assert reasons == ["ERROR - log replication has not progressed"]


def test_a_log_known_only_by_its_length_replays_the_new_leadership_term_events_recording_log_implies():
    one = One(recordingLog=[term_entry(0, 0, 1120), term_entry(1, 1120, 1120), term_entry(2, 1120)], appendPosition=1500,
              nodeState={"candidateTermId": 2})
    frames = one.node.agent.log_frames(0, 1500)
    described = [(end, None if m is None else (m.leadership_term_id, m.term_base_log_position, m.log_position)) for end, m in frames]
    # term 1 is empty (term 2 starts at the same base), so the event at 1120 is term 2's
    assert described == [(96, (0, 0, 96)), (1120, None), (1216, (2, 1120, 1216)), (1500, None)]


def test_a_new_leadership_term_from_an_incompatible_major_app_version_terminates_the_member():
    one = One()
    out = one.deliver(10, 1, new_leadership_term(app_version=2 << 16))
    assert [o.describe() for o in out] == ["0 module ACTIVE → CLOSED"]
    assert not one.node.is_running
