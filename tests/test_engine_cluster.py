"""Several Nodes wired together by a tiny deterministic router: elections end to end, the steady state
after them (heartbeats, commit = quorum position, log traffic) and what starts the next election
(aeron-election.md §6.2–6.4)."""

from __future__ import annotations

import heapq
from typing import Any

from engine import JavaRandom, Node
from engine.harness.events import input_of, member_start_of
from formats.cluster_codecs import CommitPosition, NewLeadershipTerm, RequestVote, SessionMessageHeader
from formats.events import Event, message_event

MS = 1_000_000
SECOND = 1_000 * MS


def members(n: int) -> str:
    return "|".join(f"{i},h{i}:2,h{i}:3,h{i}:4,h{i}:5,h{i}:1" for i in range(n))


class Cluster:
    """n members started at t=0; every Send reaches its peer ``latency_ns`` later (unless the peer is down)."""

    def __init__(self, n: int = 3, seeds: tuple[int, ...] = (11, 2024, 777), latency_ns: int = MS) -> None:
        self.latency_ns = latency_ns
        self.queue: list[tuple[int, int, Event]] = []
        self.sequence = 0
        self.outputs: list[Any] = []
        self.nodes: dict[int, Node] = {}
        for i in range(n):
            start = Event(ts=0, node=i, dir="local", peer=None, channel="local", type="MemberStart",
                          fields={"clusterMembers": members(n)})
            self.nodes[i] = Node(i, member_start_of(start), random=JavaRandom(seeds[i]))
            self._collect(i)

    def _collect(self, i: int) -> None:
        for output in self.nodes[i].take_outputs():
            self.outputs.append(output)
            if type(output).__name__ == "Send":
                event = Event(
                    ts=output.ts + self.latency_ns, node=output.peer, dir="in", peer=output.node, channel=output.channel,
                    type=output.type, fields=output.message.to_fields(),
                    extra={"logPosition": output.log_position} if output.log_position is not None else None,
                )
                self.post(event)

    def post(self, event: Event) -> None:
        self.sequence += 1
        heapq.heappush(self.queue, (event.ts, self.sequence, event))

    def run(self, until_ns: int) -> None:
        while True:
            wakeups = [w for w in (n.next_wakeup_ns() for n in self.nodes.values()) if w is not None]
            if self.queue:
                wakeups.append(self.queue[0][0])
            if not wakeups or min(wakeups) > until_ns:
                break
            now = min(wakeups)
            for i, node in self.nodes.items():
                node.advance(now)
                self._collect(i)
            while self.queue and self.queue[0][0] == now:
                _, _, event = heapq.heappop(self.queue)
                node = self.nodes[event.node]
                if node.is_running:
                    node.step(input_of(event), now)
                    self._collect(event.node)
        for i, node in self.nodes.items():
            node.advance(until_ns)
            self._collect(i)

    def crash(self, i: int, at_ns: int) -> None:
        self.run(at_ns)
        self.nodes[i].step(input_of(Event(ts=at_ns, node=i, dir="local", peer=None, channel="local", type="MemberCrash")), at_ns)

    def deliver(self, at_ns: int, sender: int, receiver: int, message: Any, channel: str = "consensus") -> None:
        self.run(at_ns)
        self.post(message_event(message, ts=at_ns, node=receiver, dir="in", peer=sender, channel=channel))
        self.run(at_ns)

    def leader(self) -> int:
        (leader,) = [i for i, n in self.nodes.items() if n.is_running and n.view().to_json()["role"] == "LEADER"]
        return leader

    def of(self, kind: str, node: int | None = None, since_ns: int = 0) -> list:
        return [o for o in self.outputs if type(o).__name__ == kind and (node is None or o.node == node) and o.ts >= since_ns]


def elected(**kwargs: Any) -> Cluster:
    cluster = Cluster(**kwargs)
    cluster.run(5 * SECOND)
    return cluster


def test_three_members_elect_exactly_one_leader_and_all_close_their_elections():
    cluster = elected()
    views = [n.view().to_json() for n in cluster.nodes.values()]
    assert sorted(v["role"] for v in views) == ["FOLLOWER", "FOLLOWER", "LEADER"]
    assert {v["electionState"] for v in views} == {"CLOSED"}
    assert len({v["leadershipTermId"] for v in views}) == 1
    assert {v["leaderMemberId"] for v in views} == {cluster.leader()}
    assert {v["commitPosition"] for v in views} == {96}  # the leader's NewLeadershipTermEvent, committed everywhere


def test_the_leader_heartbeats_commit_position_every_interval_and_followers_append_position():
    cluster = elected()
    leader = cluster.leader()
    commits = [o.ts for o in cluster.of("Send", leader, since_ns=3 * SECOND) if o.type == "CommitPosition" and o.peer == (leader + 1) % 3]
    assert all(b - a == 200 * MS for a, b in zip(commits, commits[1:], strict=False)) and len(commits) >= 9
    follower = (leader + 1) % 3
    appends = [o.ts for o in cluster.of("Send", follower, since_ns=3 * SECOND) if o.type == "AppendPosition"]
    assert all(b - a == 200 * MS for a, b in zip(appends, appends[1:], strict=False))


def test_idle_seconds_cost_only_the_ticks_where_a_timer_is_due():
    cluster = elected()
    before = len(cluster.outputs)
    cluster.run(15 * SECOND)
    # ten seconds of heartbeats: 5 per second per member pair, nothing else
    kinds = {type(o).__name__ for o in cluster.outputs[before:]}
    assert kinds == {"Send"}


def test_ingress_messages_are_appended_to_the_leaders_log_and_committed_on_every_member():
    cluster = elected()
    leader = cluster.leader()
    payload = SessionMessageHeader(leadership_term_id=0, cluster_session_id=1, timestamp=0).encode() + b"x" * 100
    event = Event(ts=6 * SECOND, node=leader, dir="in", peer=None, channel="ingress", type="SessionMessageHeader",
                  fields={}, payload=payload)
    cluster.run(6 * SECOND)
    cluster.nodes[leader].step(input_of(event), event.ts)
    cluster._collect(leader)
    cluster.run(7 * SECOND)
    (append,) = cluster.of("LogAppend", leader, since_ns=6 * SECOND)
    assert append.position == 96 + 192  # align(32-byte frame header + 32-byte SessionMessageHeader + 100, 32)
    assert {n.view().to_json()["commitPosition"] for n in cluster.nodes.values()} == {288}


def test_followers_start_an_election_at_the_first_slow_tick_after_the_leader_heartbeat_timeout():
    cluster = elected()
    leader = cluster.leader()
    cluster.crash(leader, 6 * SECOND)
    cluster.run(20 * SECOND)
    follower = (leader + 1) % 3
    last_heard = max(o.ts for o in cluster.of("Send", leader) if o.peer == follower) + cluster.latency_ns
    (started,) = [e for e in cluster.of("ElectionStarted", follower) if e.reason == "leader heartbeat timeout"]
    assert last_heard + 10 * SECOND <= started.ts < last_heard + 10 * SECOND + 10 * MS
    views = [cluster.nodes[i].view().to_json() for i in range(3) if i != leader]
    assert sorted(v["role"] for v in views) == ["FOLLOWER", "LEADER"]
    assert {v["leadershipTermId"] for v in views} == {cluster.nodes[follower].view().to_json()["leadershipTermId"]}


def test_a_leader_that_hears_no_follower_for_the_heartbeat_timeout_steps_down():
    cluster = elected()
    leader = cluster.leader()
    for follower in range(3):
        if follower != leader:
            cluster.crash(follower, 6 * SECOND)
    cluster.run(20 * SECOND)
    last_append = max(o.ts for o in cluster.outputs if type(o).__name__ == "Send" and o.peer == leader) + cluster.latency_ns
    (started,) = cluster.of("ElectionStarted", leader, since_ns=6 * SECOND)
    assert started.reason == "inactive follower quorum"
    assert last_append + 10 * SECOND < started.ts <= last_append + 10 * SECOND + 10 * MS
    assert cluster.nodes[leader].view().to_json()["role"] == "FOLLOWER"
    assert cluster.nodes[leader].view().to_json()["electionState"] == "CANVASS"


def test_messages_from_a_newer_term_start_an_election_on_a_follower_and_are_dropped():
    cases = [
        (RequestVote(log_leadership_term_id=0, log_position=96, candidate_term_id=9, candidate_member_id=2, protocol_version=1 << 16),
         "unexpected vote request"),
        (CommitPosition(leadership_term_id=9, log_position=96, leader_member_id=2), "unexpected commit position from new leader"),
        (NewLeadershipTerm(log_leadership_term_id=0, next_leadership_term_id=-1, next_term_base_log_position=-1,
                           next_log_position=-1, leadership_term_id=9, term_base_log_position=96, log_position=96,
                           leader_recording_id=0, timestamp=0, leader_member_id=2, log_session_id=5, app_version=1,
                           is_startup=0), "unexpected new leadership term event"),
    ]
    for message, reason in cases:
        cluster = elected()
        follower = (cluster.leader() + 1) % 3
        cluster.deliver(6 * SECOND, 2 if follower != 2 else 0, follower, message)
        started = cluster.of("ElectionStarted", follower, since_ns=6 * SECOND)
        assert [s.reason for s in started][:1] == [reason]
        assert not [o for o in cluster.of("Send", follower, since_ns=6 * SECOND) if o.type == "Vote"]


def test_a_restarted_follower_rejoins_by_catching_up_in_the_same_term():
    cluster = elected()
    leader = cluster.leader()
    follower = (leader + 1) % 3
    cluster.crash(follower, 6 * SECOND)
    payload = SessionMessageHeader(leadership_term_id=0, cluster_session_id=1, timestamp=0).encode()
    for k in range(3):  # the leader's log moves on while the follower is down
        t = 6 * SECOND + (k + 1) * 100 * MS
        cluster.run(t)
        cluster.nodes[leader].step(input_of(Event(ts=t, node=leader, dir="in", peer=None, channel="ingress",
                                         type="SessionMessageHeader", fields={}, payload=payload)), t)
        cluster._collect(leader)
    restart = Event(ts=7 * SECOND, node=follower, dir="local", peer=None, channel="local", type="MemberStart",
                    fields={"clusterMembers": members(3)})
    cluster.run(7 * SECOND)
    cluster.nodes[follower].step(input_of(restart), restart.ts)
    cluster._collect(follower)
    cluster.run(9 * SECOND)
    path = [f"{c.from_state}→{c.to_state}" for c in cluster.of("StateChange", follower, since_ns=7 * SECOND)]
    assert "FOLLOWER_CATCHUP_AWAIT→FOLLOWER_CATCHUP" in path and path[-1] == "FOLLOWER_READY→CLOSED"
    assert [o.type for o in cluster.of("Send", leader, since_ns=7 * SECOND) if o.peer == follower and o.type == "StopCatchup"]
    views = {i: n.view().to_json() for i, n in cluster.nodes.items()}
    assert len({v["commitPosition"] for v in views.values()}) == 1 and views[follower]["commitPosition"] == 96 + 3 * 64


def test_the_same_inputs_give_the_same_outputs_and_a_clone_runs_on_independently():
    def trace(cluster: Cluster) -> list:
        return [o.to_json() for o in cluster.outputs]

    a, b = elected(), elected()
    assert trace(a) == trace(b)
    clone = {i: n.clone() for i, n in a.nodes.items()}
    a.crash(a.leader(), 6 * SECOND)
    a.run(20 * SECOND)
    assert all(n.is_running for n in clone.values())
    assert clone[0].view().to_json() == b.nodes[0].view().to_json()


def test_outputs_are_byte_identical_across_processes_with_different_hash_seeds():
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = (
        "import hashlib, json\n"
        "from tests.test_engine_cluster import SECOND, elected\n"
        "c = elected(); c.crash(c.leader(), 6 * SECOND); c.run(30 * SECOND)\n"
        "print(hashlib.sha256('\\n'.join(json.dumps(o.to_json(), separators=(',', ':')) for o in c.outputs).encode()).hexdigest())\n"
    )
    root = Path(__file__).resolve().parents[1]
    digests = {
        subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "4242")
    }
    assert len(digests) == 1
