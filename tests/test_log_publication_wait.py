"""A new leader's log publication keeps its consensus module waiting until the publication is usable.

Entering LEADER_LOG_REPLICATION, Aeron's election calls `addLogPublication`, which adds an exclusive
publication (a blocking client call: the driver's answer, then the client maps the log buffers) before
the state change is logged.  The agent log shows the request and the driver's READY, and the module's
next line shows when it went on: in f_follower_kill_rejoin_catchup's member 2 that was 387 ms after the
READY (a few ms elsewhere), and the replay waits as long.
"""

from __future__ import annotations

import pytest

from recorder.capture.agent_log_import import parse_agent_log
from recorder.conformance import find_capture_folders
from tests.conftest import REFERENCE, _require

CAPTURES = REFERENCE / "aeron-1.47.3-capture"

#: Member 2 of f_follower_kill_rejoin_catchup becoming leader of term 0 (the lines that matter).
NEW_LEADER = """\
[1438.965596488] log started 2026-11-23 19:21:01.910+0000
[1441.887255076] CLUSTER: ELECTION_STATE_CHANGE [92/92]: memberId=2 NOMINATE -> CANDIDATE_BALLOT leaderId=-1 \
candidateTermId=0 leadershipTermId=-1 logPosition=0 logLeadershipTermId=-1 appendPosition=0 catchupPosition=-1 reason=
[1441.903995866] DRIVER: CMD_IN_ADD_EXCLUSIVE_PUBLICATION [139/139]: streamId=100 clientId=17 correlationId=68 \
channel=aeron:udp?term-id=0|term-length=64m|tags=67,66|term-offset=0|control-mode=manual|alias=log
[1442.756981507] DRIVER: CMD_OUT_EXCLUSIVE_PUBLICATION_READY [89/89]: sessionId=1542476072 streamId=100 \
publicationLimitCounterId=121 channelStatusCounterId=117 correlationId=68 registrationId=68 logFileName=x
[1443.144224643] CLUSTER: ELECTION_STATE_CHANGE [106/106]: memberId=2 CANDIDATE_BALLOT -> LEADER_LOG_REPLICATION \
leaderId=2 candidateTermId=0 leadershipTermId=0 logPosition=0 logLeadershipTermId=-1 appendPosition=0 catchupPosition=-1 \
reason=
"""


def test_a_log_publication_wait_lasts_until_the_module_logs_again_after_the_drivers_answer():
    segment = parse_agent_log(NEW_LEADER, source="node2").segments[0]
    assert segment.log_publication_waits == [1_240_228_777]  # request -> the next CLUSTER line, not READY's 852 ms


def test_the_new_leader_of_a_real_incident_changes_state_and_sends_when_the_real_one_did():
    from engine.replay import replay
    from recorder.convert import build

    _require(CAPTURES)
    folder = next((f for f in find_capture_folders(CAPTURES) if f.name == "f_follower_kill_rejoin_catchup"), None)
    if folder is None:
        pytest.skip(f"capture f_follower_kill_rejoin_catchup not in {CAPTURES}")
    built = build(folder.inputs(agent_logs=True))
    records = list(replay(built.events))
    logged = next(e.ts for e in built.events if e.node == 2 and e.type == "ElectionStateChange"
                  and e.fields.get("to") == "LEADER_LOG_REPLICATION")
    modelled = next(r["ts"] for r in records if r.get("kind") == "state" and r.get("node") == 2
                    and r.get("to") == "LEADER_LOG_REPLICATION")
    assert abs(modelled - logged) < 20_000_000  # the 387 ms after the READY included
    assert not [r for r in records if r.get("kind") == "divergence" and r.get("node") == 2]
