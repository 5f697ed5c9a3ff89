"""Every real Aeron 1.47.3 capture, converted as a user would and replayed, held against what its members
logged (`recorder.conformance`): the issue 12 conformance suite.

Each capture folder under ``../shared/reference/aeron-1.47.3-capture/`` (found by walking it, so a capture
dropped in is picked up) is converted from its capture, its members' directories as copied after the
incident and, in one run, their agent logs, in the other not (the common case in production).  The
members' agent logs judge both runs: the ELECTION_STATE_CHANGE sequence with every field it prints,
ROLE_CHANGE, the NewLeadershipTerms each member handled, and every RequestVote, Vote and
NewLeadershipTerm each member sent, per receiver (the capture's own record of them).

Two tests per capture and run:

* ``conforms``: zero divergences and every one of those exactly.  A capture that does not conform yet
  is a strict xfail whose reason carries its figures (from the baseline below), so that the day it
  conforms the xfail fails and must be lifted.
* ``no worse``: the figures of today's baseline (``tests/testdata/conformance/``, written by
  ``benchmarks/real_captures.py --write-baseline``) as a floor: nothing reproduced may be lost, no
  divergence may be added.  A capture without a baseline must conform.

About 0.4-1.4 s per capture and run (h_…, 46,000 packets, is the longest).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recorder.conformance import (
    BASELINE_KEYS,
    CaptureReport,
    Score,
    _running_deliveries,
    find_capture_folders,
    in_order,
    read_witness,
    replay_noting_unpolled,
    run_capture,
)
from tests.conftest import REFERENCE, _require

CAPTURES = REFERENCE / "aeron-1.47.3-capture"
BASELINE_FILE = Path(__file__).parent / "testdata" / "conformance" / "aeron-1.47.3-capture.json"
BASELINE = json.loads(BASELINE_FILE.read_text())
RUNS = {"withAgentLogs": True, "withoutAgentLogs": False}


def _names() -> list[str]:
    found = [folder.name for folder in find_capture_folders(CAPTURES)] if CAPTURES.exists() else []
    return found or ["(no captures: ../shared absent)"]


def _figures(figures: dict) -> str:
    cells = [f"{key} {figures[key]['reproduced']}/{figures[key]['expected']}"
             + (f" +{figures[key]['extra']}" if figures[key]["extra"] else "") for key in BASELINE_KEYS]
    return f"{figures['divergences']} divergence(s); " + ", ".join(cells)


def _params() -> list:
    params = []
    for name in _names():
        for run in RUNS:
            known = BASELINE.get(name, {}).get(run)
            marks = []
            if known is not None and not _conforming(known):
                marks.append(pytest.mark.xfail(strict=True, raises=AssertionError,
                                               reason=f"does not conform yet: {_figures(known)}"))
            params.append(pytest.param(name, run, marks=marks, id=f"{name}-{run}"))
    return params


def _conforming(figures: dict) -> bool:
    return figures["divergences"] == 0 and all(
        figures[key]["reproduced"] == figures[key]["expected"] and figures[key]["extra"] == 0 for key in BASELINE_KEYS)


_REPORTS: dict[tuple[str, str], CaptureReport] = {}


def _report(name: str, run: str) -> CaptureReport:
    _require(CAPTURES)
    if (name, run) not in _REPORTS:
        folder = next((f for f in find_capture_folders(CAPTURES) if f.name == name), None)
        if folder is None:
            pytest.fail(f"capture folder {name} is gone from {CAPTURES}")
        _REPORTS[(name, run)] = run_capture(folder, agent_logs=RUNS[run])
    return _REPORTS[(name, run)]


@pytest.mark.parametrize(("name", "run"), _params())
def test_the_capture_replays_as_its_members_logged(name, run):
    report = _report(name, run)
    differences = [f"member {m.member}: first state change that differs, #{m.first_difference[0]}: logged"
                   f" {m.first_difference[1]}, modelled {m.first_difference[2]}"
                   for m in report.members if m.first_difference is not None]
    assert report.conforms, f"{_figures(report.figures())}; " + "; ".join(differences[:3])


@pytest.mark.parametrize(("name", "run"), [pytest.param(*p.values, id=p.id) for p in _params()])
def test_the_capture_replays_no_worse_than_its_baseline(name, run):
    report = _report(name, run)
    figures = report.figures()
    known = BASELINE.get(name, {}).get(run)
    if known is None:
        assert report.conforms, (f"{name} has no baseline in {BASELINE_FILE.name} and does not conform"
                                 f" ({_figures(figures)}); record it with benchmarks/real_captures.py --write-baseline")
        return
    assert figures["divergences"] <= known["divergences"], _figures(figures)
    assert figures.get("divergencesFromModel", 0) <= known.get("divergencesFromModel", figures["divergences"]), (
        f"more divergences blamed on the model: {_figures(figures)}")
    for key in BASELINE_KEYS:
        assert figures[key]["expected"] == known[key]["expected"], f"{key}: the witness changed"
        assert figures[key]["reproduced"] >= known[key]["reproduced"], f"{key}: {_figures(figures)}"
        assert figures[key]["extra"] <= known[key]["extra"] or figures[key]["reproduced"] > known[key]["reproduced"], (
            f"{key}: {_figures(figures)}")


def test_a_change_the_member_never_made_counts_against_the_reproduced_count():
    logged = [("INIT", "CANVASS"), ("CANVASS", "NOMINATE"), ("NOMINATE", "CANDIDATE_BALLOT")]
    modelled = [("INIT", "CANVASS"), ("CANVASS", "FOLLOWER_BALLOT"), ("CANVASS", "NOMINATE")]
    score = Score.of(logged, modelled)
    assert (score.in_order, score.extra, score.reproduced, score.exact) == (2, 1, 1, False)
    assert Score.of(logged, logged).exact and Score.of(logged, []).reproduced == 0
    assert in_order(logged, list(reversed(logged))) == 1  # order matters


def test_what_a_dead_members_model_never_polled_is_not_counted_as_handled():
    """NewLeadershipTerms still held when a life ends (its module waiting on something else) are the
    life's last deliveries: they are left out of what it handled, those of other lives are not."""
    from formats.events import Event

    def nlt(ts: int, term: int) -> Event:
        return Event(ts=ts, node=3, dir="in", peer=0, channel="consensus", type="NewLeadershipTerm",
                     fields={"leadershipTermId": term, "leaderMemberId": 0})

    def local(ts: int, kind: str) -> Event:
        return Event(ts=ts, node=3, dir="local", peer=None, channel="local", type=kind, fields={})

    events = [local(0, "MemberStart"), nlt(1, 1), nlt(2, 2), nlt(3, 2), local(4, "MemberCrash"), nlt(5, 2),
              local(6, "MemberStart"), nlt(7, 2)]
    key = {k: None for k in ("logLeadershipTermId", "nextLeadershipTermId", "nextTermBaseLogPosition",
                             "nextLogPosition", "termBaseLogPosition", "logPosition", "leaderRecordingId",
                             "isStartup")}

    def keyed(term: int) -> tuple:
        from recorder.conformance import NEW_TERM_FIELDS
        return tuple({**key, "leadershipTermId": term, "leaderMemberId": 0}[k] for k in NEW_TERM_FIELDS)

    assert len(_running_deliveries(events, 3)) == 4
    assert _running_deliveries(events, 3, [[keyed(2), keyed(2)], []]) == [keyed(1), keyed(2)]
    # held messages that are not the life's last deliveries are not what was delivered: nothing is dropped
    assert len(_running_deliveries(events, 3, [[keyed(1)], []])) == 4


def test_a_module_blocked_for_ever_handles_no_more_new_leadership_terms():
    """h_five_members_leader_kill, member 3: its module joined member 1's term-1 log at 19:23:59.4 and
    waited in `awaitServicesReady` until it was killed 90 s later; its agent log has no CLUSTER line at
    all in between, and the 45 NewLeadershipTerms leader 0 sent it meanwhile are not in it.  The model
    waits as it did (`engine.model.agent.try_join_log_as_follower`, a recorded 'never'), and the count
    takes what the model polled, not what reached the member: 34 handled as logged, none extra."""
    _require(CAPTURES)
    folder = next(f for f in find_capture_folders(CAPTURES) if f.name == "h_five_members_leader_kill")
    from recorder.convert import build

    built = build(folder.inputs(agent_logs=True))
    _, unpolled = replay_noting_unpolled(built.events)
    logged = read_witness(folder.agent_logs[3], 3).new_terms
    first_life = _running_deliveries(built.events, 3)
    assert [len(held) for held in unpolled[3]] == [45, 0]
    assert len(logged) == 34 and len(_running_deliveries(built.events, 3, unpolled[3])) == 34
    assert len(first_life) == 79  # what reached it while its process ran
    text = folder.agent_logs[3].read_text()
    lines = [line for line in text.splitlines() if "CLUSTER:" in line and "memberId=3" in line]
    stamps = [float(line[1:line.index("]")]) for line in lines]
    last_nlt = max(t for t, line in zip(stamps, lines, strict=True)
                   if "NEW_LEADERSHIP_TERM" in line and t < 1700)
    # (the CanvassPosition polled with that last NewLeadershipTerm aside) nothing until its kill, 90 s on
    assert not [t for t in stamps if last_nlt + 0.05 < t < 1700], "member 3 logged something while blocked"
    report = _report("h_five_members_leader_kill", "withAgentLogs").members[3]
    assert report.new_terms.modelled == report.new_terms.expected == 34
