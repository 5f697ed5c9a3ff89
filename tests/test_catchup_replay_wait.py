"""A leader's catch-up replay reaches the follower when the archive's replay session starts sending.

On a follower's CatchupPosition, Aeron's leader asks its archive to replay the log to the follower's
catch-up endpoint (`archive.startReplay`); the replay session sends nothing until its publication is
connected, which takes the follower's driver answering its SETUPs.  The leader's agent log shows when
the session started (ARCHIVE REPLAY_SESSION_STATE_CHANGE ``INIT -> REPLAY``): in
f_follower_kill_rejoin_catchup 501 ms after the request, and the catch-up frames are on the wire then.
"""

from __future__ import annotations

import pytest

from recorder.capture.agent_log_import import parse_agent_log
from recorder.conformance import find_capture_folders
from tests.conftest import REFERENCE, _require

CAPTURES = REFERENCE / "aeron-1.47.3-capture"

#: Member 1 of f_follower_kill_rejoin_catchup serving member 0's catch-up (the lines that matter).
CATCHUP = """\
[1462.083406108] log started 2026-11-23 19:21:25.028+0000
[1470.952324241] CLUSTER: CATCHUP_POSITION [43/43]: memberId=1 leadershipTermId=1 logPosition=8320 followerMemberId=0 \
catchupEndpoint=127.0.0.1:20005
[1470.964113092] ARCHIVE: CMD_IN_REPLAY [144/144]: controlSessionId=1152927019 correlationId=109 recordingId=0 \
position=8320 length=9223372036854775807 replayStreamId=100 replayChannel=aeron:udp?session-id=-1066949272|\
endpoint=127.0.0.1:20005
[1471.453093598] ARCHIVE: REPLAY_SESSION_STATE_CHANGE [46/46]: replaySessionId=7522985320 replayId=1 \
sessionId=-1066949272 recordingId=0 position=8320 INIT -> REPLAY reason=""
"""


def test_a_catch_up_replay_is_timed_from_the_request_to_the_replay_session_starting():
    segment = parse_agent_log(CATCHUP, source="node1").segments[0]
    assert segment.catchup_replay_waits == [500_769_357]


def test_an_elections_local_replay_is_no_catch_up_replay():
    local = CATCHUP.replace("replayChannel=aeron:udp?session-id=-1066949272|endpoint=127.0.0.1:20005",
                            "replayChannel=aeron:ipc")
    assert parse_agent_log(local, source="node1").segments[0].catchup_replay_waits == []


def test_the_leaders_catch_up_frames_go_out_when_the_real_ones_did():
    from engine.replay import replay
    from recorder.convert import build

    _require(CAPTURES)
    folder = next((f for f in find_capture_folders(CAPTURES) if f.name == "f_follower_kill_rejoin_catchup"), None)
    if folder is None:
        pytest.skip(f"capture f_follower_kill_rejoin_catchup not in {CAPTURES}")
    built = build(folder.inputs(agent_logs=True))
    records = list(replay(built.events))
    asked = next(e.ts for e in built.events if e.node == 1 and e.dir == "in" and e.type == "CatchupPosition")
    # The replay's first frames, from 8320 (the live log to member 0 is far ahead, past 45000).
    captured = next(e.ts for e in built.events if e.node == 1 and e.dir == "out" and e.channel == "log"
                    and e.peer == 0 and e.ts > asked and (e.extra or {}).get("logPosition", 0) < 10_000)
    modelled = next(r["ts"] for r in records if r.get("kind") == "send" and r.get("node") == 1
                    and r.get("channel") == "log" and r.get("peer") == 0 and r["ts"] >= asked
                    and r.get("logPosition", 0) < 10_000)
    assert captured - asked > 400_000_000
    assert abs(modelled - captured) < 50_000_000
    assert not [r for r in records if r.get("kind") == "divergence"]
