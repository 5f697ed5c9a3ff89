"""Without a member's agent log, what only that log times is missing evidence, not the model.

The wire shows a member's images and publications, not how long its media driver, archive and services
kept its consensus module waiting: a log replay followed by no catch-up, a follower's join of the
leader's log.  Only the agent log does (the waits on `MemberStart`).  (A new leader's log publication
and its join of its log the wire does time: its NewLeadershipTerm naming the log session, its first
CommitPosition of the term; `recorder.capture.leader_joins`.)
Replayed without it, the model takes those steps as at once; when it then differs from the recording,
and the same thing does not appear at another time (a timing difference), the divergence is put down
to that missing evidence, naming the agent log as what settles it.
"""

from __future__ import annotations

import pytest

from recorder.conformance import find_capture_folders
from tests.conftest import REFERENCE, _require

CAPTURES = REFERENCE / "aeron-1.47.3-capture"


def _divergences(name: str, *, agent_logs: bool) -> list[dict]:
    from engine.replay import replay
    from recorder.convert import build

    _require(CAPTURES)
    folder = next((f for f in find_capture_folders(CAPTURES) if f.name == name), None)
    if folder is None:
        pytest.skip(f"capture {name} not in {CAPTURES}")
    return [r for r in replay(build(folder.inputs(agent_logs=agent_logs)).events) if r.get("kind") == "divergence"]


def test_a_new_leader_replayed_without_its_agent_log_is_timed_by_the_wire():
    # f_follower_kill_rejoin_catchup: member 2's first leadership; its log publication took 1.24 s to add
    # (the agent log shows it).  Its first NewLeadershipTerm naming the log session shows when the
    # publication was there, its first CommitPosition of the term when its join was over: no gap is left.
    without = _divergences("f_follower_kill_rejoin_catchup", agent_logs=False)
    assert without and not [r for r in without if r["node"] == 2]
    assert not [r for r in without if r["cause"] == "model"]


def test_with_its_agent_log_the_same_leader_has_no_such_gap():
    with_logs = _divergences("f_follower_kill_rejoin_catchup", agent_logs=True)
    assert not [r for r in with_logs if r["cause"] == "evidence"]
    assert not [r for r in with_logs if r["node"] == 2]
