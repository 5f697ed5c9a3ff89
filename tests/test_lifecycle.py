"""Members' lives from the evidence (`recorder.capture.lifecycle`): when a process died, when a new one
began its election, what it was sent meanwhile, and what `recount replay` says about it.

The real captures f_… to j_… kill (kill -9) or stop (SIGTERM) members and start them again.  Their
agent logs say exactly when (a new ``log started`` clock, NEW_ELECTION "node started", the consensus
module reaching CLOSED); the wire alone must find the same lives.
"""

from __future__ import annotations

import socket
import struct

import pytest

from cli.app import run
from formats.pcap import PCAP_MAGIC_NANOSECONDS, PcapReader
from recorder.capture.lifecycle import LIFE_GAP_NS, WireLiveness, wire_restarts
from recorder.conformance import find_capture_folders
from recorder.convert import build
from tests.conftest import REFERENCE, _require

CAPTURES = REFERENCE / "aeron-1.47.3-capture"
S = 1_000_000_000
MS = 1_000_000
#: The README's account of each scenario: who was killed (kill -9) or stopped (SIGTERM, ClusterTool abort).
KILLED = {"f_follower_kill_rejoin_catchup": {0}, "h_five_members_leader_kill": {2, 3},
          "j_short_timeouts_leader_kill": {0}}
STOPPED = {"g_leader_sigterm_reelection_rejoin": {0}, "i_restart_all_one_member_behind": {0, 1, 2}}


def _folders():
    return {folder.name: folder for folder in find_capture_folders(_require(CAPTURES))}


def _lives(events):
    """Each death a new life follows (a member's last life may end in a stop too: `test_a_last_life_
    that_stopped_cleanly_ends_in_a_member_stop`), and each restart."""
    restarts = sorted((e.node, e.ts) for e in events if e.type == "MemberStart" and (e.extra or {}).get("restart"))
    deaths = sorted((e.node, e.ts, e.type) for e in events if e.type in ("MemberCrash", "MemberStop")
                    and any(node == e.node and ts > e.ts for node, ts in restarts))
    return deaths, restarts


@pytest.fixture(scope="module")
def converted():
    """Each capture with a death, converted with and without its agent logs."""
    folders = _folders()
    return {name: (build(folders[name].inputs(agent_logs=True)).events,
                   build(folders[name].inputs(agent_logs=False)).events)
            for name in sorted({**KILLED, **STOPPED})}


@pytest.mark.parametrize("name", sorted({**KILLED, **STOPPED}))
def test_the_wire_alone_finds_the_lives_the_agent_logs_show(converted, name):
    with_logs, wire_only = converted[name]
    (logged_deaths, logged_restarts), (wire_deaths, wire_restarts_) = _lives(with_logs), _lives(wire_only)
    assert {d[0] for d in logged_deaths} == KILLED.get(name, set()) | STOPPED.get(name, set())
    assert [d[0] for d in wire_deaths] == [d[0] for d in logged_deaths]
    assert [r[0] for r in wire_restarts_] == [r[0] for r in logged_restarts]
    for logged, wire in zip(logged_deaths, wire_deaths, strict=True):
        assert abs(wire[1] - logged[1]) <= 50 * MS, f"member {logged[0]} died at {logged[1]}, wire says {wire[1]}"
    for logged, wire in zip(logged_restarts, wire_restarts_, strict=True):
        # The wire's restart is the new life's first consensus message: after its NEW_ELECTION line.
        assert 0 <= wire[1] - logged[1] <= 150 * MS, f"member {logged[0]}"


@pytest.mark.parametrize("name", sorted({**KILLED, **STOPPED}))
def test_the_agent_log_tells_a_kill_from_a_clean_stop_and_the_wire_says_it_cannot(converted, name):
    with_logs, wire_only = converted[name]
    kinds = {node: kind for node, _, kind in _lives(with_logs)[0]}
    assert kinds == {**dict.fromkeys(KILLED.get(name, ()), "MemberCrash"),
                     **dict.fromkeys(STOPPED.get(name, ()), "MemberStop")}
    for event in wire_only:
        if event.type == "MemberCrash":
            assert any("cannot tell" in line for line in event.extra["evidence"])


@pytest.mark.parametrize("name", sorted({**KILLED, **STOPPED}))
def test_nothing_is_delivered_to_a_member_while_its_process_is_down(converted, name):
    for events in converted[name]:
        down: dict[int, list[list[int]]] = {}
        for event in events:
            if event.type in ("MemberCrash", "MemberStop"):
                down.setdefault(event.node, []).append([event.ts, None])
            elif event.type == "MemberStart" and (event.extra or {}).get("restart"):
                down[event.node][-1][1] = event.ts
        assert down
        for event in events:
            if event.dir == "in":
                for start, end in down.get(event.node, ()):
                    assert not (start <= event.ts and (end is None or event.ts < end)), (
                        f"{event.type} to member {event.node} at {event.ts}")


def test_each_death_and_restart_carries_its_evidence(converted):
    _, wire_only = converted["f_follower_kill_rejoin_catchup"]
    crash = next(e for e in wire_only if e.type == "MemberCrash")
    restart = next(e for e in wire_only if e.type == "MemberStart" and (e.extra or {}).get("restart"))
    assert any("ICMP port unreachable" in line and "consensus endpoint" in line for line in crash.extra["evidence"])
    assert any("new consensus publications" in line for line in restart.extra["evidence"])
    assert any("cluster-mark.dat" in line for line in restart.extra["evidence"])
    # The failed launches between (an 'active Mark file detected' JVM that never began its election) are no life.
    assert [e.type for e in wire_only if e.node == 0 and e.type.startswith("Member")] == [
        "MemberStart", "MemberCrash", "MemberStart"]


def test_a_consensus_module_stuck_in_a_wait_is_not_a_death(converted):
    """h's member 3 stopped logging at 19:23:59.4 (its consensus module waited for its service for ever),
    but its media driver answered on the wire until it was killed at 19:25:29.285."""
    for events in converted["h_five_members_leader_kill"]:
        deaths = [e for e in events if e.type in ("MemberCrash", "MemberStop") and e.node == 3
                  and e.ts < 1795461948_000_000_000]  # (not its clean stop at the SIGTERM that ends the capture)
        assert len(deaths) == 1
        assert abs(deaths[0].ts - 1795461929_189_000_000) < 100 * MS


def test_replay_prints_each_death_and_restart_with_its_evidence(tmp_path, capsys):
    folder = _folders()["j_short_timeouts_leader_kill"]
    out = tmp_path / "j.arrow"
    assert run(["convert", *folder.inputs(agent_logs=False), "-o", str(out)]) == 0
    capsys.readouterr()
    run(["replay", str(out)])
    text = capsys.readouterr().out
    assert "0 process down (killed or stopped: the inputs cannot tell) (MemberCrash in the inputs)" in text
    assert "0 process restarted (MemberStart in the inputs)" in text
    assert "evidence: its first consensus message of the new life at 19:27:55" in text
    assert "evidence: appendPosition 3264: wire, exact" in text
    assert "│      0 │ running │" in text  # it came back


# --- the rules on small inputs ----------------------------------------------------------------------------


def test_a_silence_with_nothing_showing_a_new_process_is_not_a_restart():
    quiet = WireLiveness(heard=((0, 10 * S), (15 * S, 20 * S)))
    found = wire_restarts(1, quiet, [1 * S, 16 * S])
    assert found.restarts == []
    assert any("nothing shows a new process" in note for note in found.notes)


def test_a_short_silence_is_not_even_noted():
    found = wire_restarts(1, WireLiveness(heard=((0, 10 * S), (10 * S + LIFE_GAP_NS + 1, 20 * S))), [16 * S])
    assert found.restarts == [] and found.notes == []


def test_a_process_that_came_up_without_electing_leaves_the_member_down_until_one_does():
    liveness = WireLiveness(heard=((0, 10 * S), (12 * S, 14 * S), (16 * S, 20 * S)),
                            unreachable=(11 * S, 15 * S), setup_requests=(12 * S, 16 * S))
    found = wire_restarts(1, liveness, [5 * S, 16 * S + 50 * MS])
    assert [(r.end_ns, r.back_ns, r.restart_ns) for r in found.restarts] == [(10 * S + 1, 16 * S, 16 * S + 50 * MS)]
    assert any("never began its election" in note for note in found.notes)


def _icmp_port_unreachable_pcap(ts_ns: int, quoted_dst_port: int) -> bytes:
    """A raw-IPv4 pcap of one ICMP port unreachable quoting a UDP datagram 127.0.0.1:40000 → :port."""
    loopback = socket.inet_aton("127.0.0.1")
    quoted = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + 8, 1, 0, 64, 17, 0, loopback, loopback)
    quoted += struct.pack("!HHHH", 40000, quoted_dst_port, 16, 0)
    icmp = struct.pack("!BBHI", 3, 3, 0, 0) + quoted
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(icmp), 2, 0, 64, 1, 0, loopback, loopback) + icmp
    header = struct.pack("<IHHiIII", PCAP_MAGIC_NANOSECONDS, 2, 4, 0, 0, 65535, 101)
    seconds, nanos = divmod(ts_ns, S)
    return header + struct.pack("<IIII", seconds, nanos, len(ip), len(ip)) + ip


def test_an_icmp_port_unreachable_is_kept_as_evidence_of_the_quoted_datagram():
    reader = PcapReader(_icmp_port_unreachable_pcap(5 * S, 20003))
    assert list(reader.packets()) == []
    [answer] = reader.unreachable
    assert (answer.index, answer.ts_ns, answer.dst_ip, answer.dst_port, answer.src_port) == (1, 5 * S, "127.0.0.1",
                                                                                           20003, 40000)
    assert reader.skipped == {"ICMP port unreachable (kept as evidence)": 1}
