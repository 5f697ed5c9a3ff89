"""An election's log replay starts with a synchronous archive call, as in Aeron.

`LogReplay` (LEADER_REPLAY, FOLLOWER_REPLAY) begins with `AeronArchive.startReplay`, which waits for the
archive's answer: the consensus module does nothing else until then.  The agent log shows how long
(ARCHIVE CMD_IN_REPLAY to the CMD_OUT_RESPONSE of its correlationId), and the replay waits as long:
g_leader_sigterm_reelection_rejoin's member 0 waited 1.85 s (its archive's driver adding the 64 MB-term
replay publication), and its NewLeadershipTerm from LEADER_REPLAY reached the wire that much later,
stamped with the time the state was entered.
"""

from __future__ import annotations

import pytest

from recorder.capture.agent_log_import import parse_agent_log
from recorder.conformance import find_capture_folders
from tests.conftest import REFERENCE, _require

CAPTURES = REFERENCE / "aeron-1.47.3-capture"

#: Member 0 of g_leader_sigterm_reelection_rejoin in LEADER_REPLAY (the lines that matter).
LEADER_REPLAY = """\
[1506.361575376] log started 2026-11-23 19:22:09.306+0000
[1513.121694498] CLUSTER: ELECTION_STATE_CHANGE [103/103]: memberId=0 LEADER_LOG_REPLICATION -> LEADER_REPLAY \
leaderId=0 candidateTermId=2 leadershipTermId=2 logPosition=0 logLeadershipTermId=1 appendPosition=46080 \
catchupPosition=-1 reason=
[1513.132355664] ARCHIVE: CMD_IN_REPLAY [77/77]: controlSessionId=1668191387 correlationId=73 recordingId=0 \
position=0 length=46080 replayStreamId=103 replayChannel=aeron:ipc
[1513.752581787] ARCHIVE: CMD_OUT_RESPONSE [44/44]: controlSessionId=1668191387 correlationId=-1 relevantId=-1 \
code=OK version=68352 errorMessage=
[1514.985690546] ARCHIVE: CMD_OUT_RESPONSE [44/44]: controlSessionId=1668191387 correlationId=73 \
relevantId=6560699949 code=OK version=68352 errorMessage=
[1515.060229587] CLUSTER: SERVICE_ACK [56/56]: memberId=0 logPosition=0 timestamp=0 timeUnit=MILLISECONDS \
ackId=1 relevantId=-1 serviceId=0
[1515.074079552] CLUSTER: ELECTION_STATE_CHANGE [92/92]: memberId=0 LEADER_REPLAY -> LEADER_INIT leaderId=0 \
candidateTermId=2 leadershipTermId=2 logPosition=46080 logLeadershipTermId=1 appendPosition=46080 \
catchupPosition=-1 reason=
"""


def test_a_log_replay_is_timed_and_so_is_the_archives_answer_to_its_request():
    segment = parse_agent_log(LEADER_REPLAY, source="node0").segments[0]
    assert segment.log_replay_durations == [1_938_535_089]  # entering LEADER_REPLAY -> the services' ack
    assert segment.log_replay_start_waits == [1_853_334_882]  # CMD_IN_REPLAY -> its own CMD_OUT_RESPONSE


def test_the_new_leadership_term_sent_from_leader_replay_waits_for_the_archive_as_the_real_one_did():
    from engine.replay import replay
    from recorder.convert import build

    _require(CAPTURES)
    folder = next((f for f in find_capture_folders(CAPTURES) if f.name == "g_leader_sigterm_reelection_rejoin"), None)
    if folder is None:
        pytest.skip(f"capture g_leader_sigterm_reelection_rejoin not in {CAPTURES}")
    built = build(folder.inputs(agent_logs=True))
    records = list(replay(built.events))

    def startup_terms(items, *, recorded):
        found = []
        for item in items:
            if recorded:
                ok = item.node == 0 and item.dir == "out" and item.type == "NewLeadershipTerm" and item.peer == 1
                ts, fields = item.ts, item.fields
            else:
                ok = item.get("kind") == "send" and item.get("node") == 0 and item.get("type") == "NewLeadershipTerm" \
                    and item.get("peer") == 1
                ts, fields = item.get("ts"), item.get("fields") or {}
            if ok and fields.get("isStartup") == "TRUE":
                found.append((ts, fields["timestamp"]))
        return found[0]

    captured_ts, captured_stamp = startup_terms(built.events, recorded=True)
    modelled_ts, modelled_stamp = startup_terms(records, recorded=False)
    assert captured_ts - captured_stamp * 1_000_000 > 1_800_000_000  # on the wire 1.9 s after its timestamp
    assert modelled_ts - modelled_stamp * 1_000_000 > 1_800_000_000
    assert abs(modelled_ts - captured_ts) < 100_000_000
    assert not [r for r in records if r.get("kind") == "divergence"]
