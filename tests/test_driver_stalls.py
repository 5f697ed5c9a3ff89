"""A member's media driver stalled creating a log image, and the messages that waited in it
(`recorder.capture.driver_stalls`, `recorder.capture.agent_log_import.late_receipts`).

i_restart_all_one_member_behind showed it: member 1's driver (SHARED threading) got leader 0's catch-up
SETUP at 19:26:57.316 and sent nothing until it answered at .425; leader 0's CommitPosition of .324 was
polled (its agent log's COMMIT_POSITION line) only at .485, after FOLLOWER_CATCHUP, where it sets the
catch-up's commit position, so its next AppendPosition carried term 5 where the model's had said 4.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from formats.events import Event
from formats.udp import SetupFrame, StatusMessage, encode_datagram, heartbeat
from recorder.capture.agent_log_import import late_receipts
from recorder.capture.driver_stalls import DriverStallScanner
from recorder.capture.members import MemberMap
from tests.test_flow_control_stall import _at
from tests.test_real_incident_behaviours import _replayed

MS = 1_000_000
MEMBERS = MemberMap.parse("0,127.0.0.1:20002,127.0.0.1:20003,127.0.0.1:20004,127.0.0.1:20005,127.0.0.1:20001|"
                          "1,127.0.0.1:20102,127.0.0.1:20103,127.0.0.1:20104,127.0.0.1:20105,127.0.0.1:20101")
LEADER_REPLAY = ("127.0.0.1", 58761)  # leader 0's catch-up replay publication
CATCHUP = ("127.0.0.1", 20105)  # member 1's catch-up endpoint
MEMBER_1_PUBLICATION = ("127.0.0.1", 51460)  # member 1's consensus publication to member 0


def _setup(stream: int) -> bytes:
    return encode_datagram([SetupFrame(term_offset=0, session_id=9, stream_id=stream, initial_term_id=1,
                                       active_term_id=1, term_length=64 * 1024 * 1024, mtu=1408)])


def _answer(stream: int) -> bytes:
    return encode_datagram([StatusMessage(session_id=9, stream_id=stream, consumption_term_id=1,
                                          consumption_term_offset=0, receiver_window=128 * 1024, receiver_id=3)])


def _scan(stream: int, *, heartbeat_at: int | None) -> dict:
    scanner = DriverStallScanner(MEMBERS, 100)
    scanner.feed(316 * MS, LEADER_REPLAY, CATCHUP, _setup(stream))
    if heartbeat_at is not None:
        scanner.feed(heartbeat_at, MEMBER_1_PUBLICATION, ("127.0.0.1", 20003),
                     encode_datagram([heartbeat(session_id=4, stream_id=108, term_id=1, term_offset=0)]))
    scanner.feed(425 * MS, CATCHUP, LEADER_REPLAY, _answer(stream))
    return scanner.stalls({MEMBER_1_PUBLICATION: 1})


def test_a_log_setup_answered_late_by_a_driver_that_sent_nothing_meanwhile_is_a_stall():
    assert _scan(100, heartbeat_at=None) == {1: [(316 * MS, 425 * MS)]}


def test_a_driver_that_went_on_sending_was_not_stalled():
    assert _scan(100, heartbeat_at=380 * MS) == {}


def test_a_driver_heard_after_the_setup_and_then_silent_until_its_answer_was_stalled_from_then():
    scanner = DriverStallScanner(MEMBERS, 100)
    scanner.feed(316 * MS, LEADER_REPLAY, CATCHUP, _setup(100))
    scanner.feed(380 * MS, MEMBER_1_PUBLICATION, ("127.0.0.1", 20003),
                 encode_datagram([heartbeat(session_id=4, stream_id=108, term_id=1, term_offset=0)]))
    for at in (416, 516, 616):  # the publisher repeats its SETUP until it is answered
        scanner.feed(at * MS, LEADER_REPLAY, CATCHUP, _setup(100))
    scanner.feed(1_900 * MS, CATCHUP, LEADER_REPLAY, _answer(100))
    assert scanner.stalls({MEMBER_1_PUBLICATION: 1}) == {1: [(416 * MS, 1_900 * MS)]}
    # silent for longer than MAX_SILENCE_NS: not a stall
    late = DriverStallScanner(MEMBERS, 100)
    late.feed(316 * MS, LEADER_REPLAY, CATCHUP, _setup(100))
    late.feed(380 * MS, MEMBER_1_PUBLICATION, ("127.0.0.1", 20003),
              encode_datagram([heartbeat(session_id=4, stream_id=108, term_id=1, term_offset=0)]))
    late.feed(416 * MS, LEADER_REPLAY, CATCHUP, _setup(100))
    late.feed(2_500 * MS, CATCHUP, LEADER_REPLAY, _answer(100))
    assert late.stalls({MEMBER_1_PUBLICATION: 1}) == {}


def test_a_consensus_setup_answered_late_found_no_subscription_not_a_busy_driver():
    assert _scan(108, heartbeat_at=None) == {}


def _commit(ts: int) -> Event:
    return Event(ts=ts, node=1, dir="in", peer=0, channel="consensus", type="CommitPosition",
                 fields={"leadershipTermId": 5, "logPosition": 60576, "leaderMemberId": 0})


def _receipt(ts: int) -> Event:
    return Event(ts=ts, node=1, dir="local", peer=None, channel="local", type="AgentEvent",
                 fields={"event": "COMMIT_POSITION", "memberId": 1, "leadershipTermId": 5, "logPosition": 60576,
                         "leaderId": 0})


def test_a_message_that_waited_in_a_stalled_driver_is_handled_when_the_agent_log_shows_it_polled():
    received = [_commit(100 * MS), _commit(324 * MS), _commit(523 * MS)]
    logged = [_receipt(101 * MS), _receipt(485 * MS), _receipt(525 * MS)]
    assert late_receipts(received, logged, [(316 * MS, 425 * MS)]) == {1: 485 * MS}
    # Outside a stall, or polled as the stall ended, a message keeps its capture time.
    assert late_receipts(received, logged, []) == {}
    assert late_receipts(received, [_receipt(101 * MS), _receipt(430 * MS), _receipt(525 * MS)],
                         [(316 * MS, 425 * MS)]) == {}


def test_a_commit_position_polled_after_the_catchup_began_sets_its_limit():
    """i_restart_all_one_member_behind with agent logs: member 1's first AppendPosition after the catch-up
    frame says term 5, as the real one did, and nothing diverges."""
    events, records = _replayed("i_restart_all_one_member_behind")
    moved = [e for e in events if e.node == 1 and e.type == "CommitPosition" and (e.extra or {}).get("receivedLate")]
    assert [(e.extra["capturedTs"], e.ts) for e in moved] == [(_at("19:26:57.323906"), _at("19:26:57.484911139"))]
    assert not [r for r in records if r["kind"] == "divergence"]


def test_new_leadership_terms_that_waited_in_stalled_drivers_are_polled_image_by_image_as_logged():
    """h_five_members_leader_kill with agent logs: members 3 and 4's drivers sent nothing from 19:23:57.54
    until they answered member 1's term-1 log SETUP at 59.33/59.36; what reached them meanwhile (leader 1's
    NewLeadershipTerms from 57.64, leader 0's from 58.46) their modules polled image by image, leader
    0's first (Subscription.poll, ConsensusAdapter's fragment limit of 10), as their agent logs show.  With
    the stall found, those messages are handled at their receipt lines' times, in the logged order."""
    from pathlib import Path

    from recorder.conformance import read_witness, run_capture
    from tests.test_real_capture_conformance import CAPTURES, _require

    _require(CAPTURES)
    events, _ = _replayed("h_five_members_leader_kill")
    for member in (3, 4):
        moved = [e for e in events if e.node == member and e.type == "NewLeadershipTerm"
                 and (e.extra or {}).get("receivedLate")]
        assert [e.peer for e in moved].count(1) == 5
        # in the order handled: leader 0's image first (as they arrived), then leader 1's, then leader 0's next
        stalled = sorted((e for e in events if e.node == member and e.type == "NewLeadershipTerm"
                          and _at("19:23:57.5633") <= e.ts <= max(m.ts for m in moved)), key=lambda e: e.ts)
        peers = [e.peer for e in stalled]
        assert peers[:6] == [0] * 6 and peers[6:11] == [1] * 5 and peers[11:] == [0]
    from recorder.conformance import find_capture_folders
    folder = next(f for f in find_capture_folders(CAPTURES) if f.name == "h_five_members_leader_kill")
    report = run_capture(folder, agent_logs=True)
    assert report.total("new_terms").exact and report.conforms
    assert Path(folder.agent_logs[3]).exists() and read_witness(folder.agent_logs[3], 3).new_terms


def test_both_decode_paths_find_the_same_stalls():
    """`feed` (a datagram at a time) and `feed_columns` (a whole table) agree, the silences included."""
    from recorder.capture.pcap_import import decode_captures
    from tests.test_real_capture_conformance import CAPTURES, _require

    path = _require(CAPTURES / "h_five_members_leader_kill") / "capture.pcap"
    data = path.read_bytes()
    bulk = decode_captures([(str(path), data)], bulk=True).driver_stalls
    assert bulk == decode_captures([(str(path), data)], bulk=False).driver_stalls
    assert (_at("19:23:57.563290"), _at("19:23:59.326449")) in bulk[3]


def _setup_of(session: int) -> bytes:
    return encode_datagram([SetupFrame(term_offset=0, session_id=session, stream_id=100, initial_term_id=1,
                                       active_term_id=1, term_length=64 * 1024 * 1024, mtu=1408)])


def _answer_of(session: int) -> bytes:
    return encode_datagram([StatusMessage(session_id=session, stream_id=100, consumption_term_id=1,
                                          consumption_term_offset=0, receiver_window=128 * 1024, receiver_id=3)])


def _both_ways(datagrams: list) -> tuple[dict, dict]:
    from tests.test_flow_control_stall import _table
    one_by_one = DriverStallScanner(MEMBERS, 100)
    for ts, src, dst, payload in datagrams:
        one_by_one.feed(ts, src, dst, payload)
    columns = DriverStallScanner(MEMBERS, 100)
    columns.feed_columns(_table(datagrams))
    senders = {MEMBER_1_PUBLICATION: 1}
    return columns.stalls(senders), one_by_one.stalls(senders)


def test_answers_of_sessions_sharing_a_setups_low_bits_are_told_apart_by_the_table_scan():
    """The table scan keys only the status messages whose session ids share their low 16 bits with a
    SETUP's: here the SETUP's own answer comes late, after early ones (from member 0's catch-up endpoint)
    for another session of the same low bits and for a session no SETUP has; the stall is the one `feed`
    finds, from the SETUP to its own answer."""
    member_0 = ("127.0.0.1", 20005)
    datagrams = [
        (316 * MS, LEADER_REPLAY, CATCHUP, _setup_of(9)),
        (317 * MS, member_0, LEADER_REPLAY, _answer_of(9 + (1 << 16))),
        (318 * MS, member_0, LEADER_REPLAY, _answer_of(9)),  # the same session from another endpoint
        (319 * MS, member_0, LEADER_REPLAY, _answer_of(12345)),
        (425 * MS, CATCHUP, LEADER_REPLAY, _answer_of(9)),
    ]
    columns, one_by_one = _both_ways(datagrams)
    assert columns == one_by_one == {1: [(316 * MS, 425 * MS)]}


@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["setup", "answer", "heartbeat"]),
                          st.integers(1, 400)), min_size=1, max_size=20))
def test_the_table_scan_finds_the_driver_stalls_feed_finds_whatever_the_sessions(script):
    """Made-up SETUPs, answers and heartbeats, their session ids sharing low bits: `feed_columns` and `feed`
    find the same stalls."""
    datagrams, ts = [], 0
    for session_bits, kind, step in script:
        ts += step * MS
        session = 9 + (session_bits << 16)
        if kind == "setup":
            datagrams.append((ts, LEADER_REPLAY, CATCHUP, _setup_of(session)))
        elif kind == "answer":
            datagrams.append((ts, CATCHUP if session_bits < 2 else ("127.0.0.1", 20005), LEADER_REPLAY,
                              _answer_of(session)))
        else:
            datagrams.append((ts, MEMBER_1_PUBLICATION, ("127.0.0.1", 20003),
                              encode_datagram([heartbeat(session_id=4, stream_id=108, term_id=1, term_offset=0)])))
    columns, one_by_one = _both_ways(datagrams)
    assert columns == one_by_one
