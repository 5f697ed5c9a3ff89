"""Divergences a user can trust (issue 12, item 5; engine.divergences): each says its cause — missing
evidence (and what would settle it), timing, or the model — repeats of one cause are one run, state
changes are held to their own, stated tolerance, and the summary (and `recount replay`) gives a
verdict per member."""

from __future__ import annotations

import dataclasses

from cli.render_replay import verdict_line
from engine.divergences import EvidenceGap, EvidenceGaps, Runs, count_causes
from engine.replay import DEFAULT_STATE_TOLERANCE_NS, replay
from formats.describe import describe_record
from formats.events import Event
from tests.test_replay import STARTUP, record

MS = 1_000_000


def _divergences(events, **options):
    records = list(replay(events, **options))
    return [r for r in records if r["kind"] == "divergence"], records[-1]


def _shifted(events, predicate, by_ns):
    return [dataclasses.replace(e, ts=e.ts + by_ns) if predicate(e) else e for e in events]


def test_a_send_recorded_a_second_later_is_one_timing_divergence_with_its_offset():
    events = record(*STARTUP)
    late = _shifted(events, lambda e: e.node == 1 and e.dir == "out" and e.type == "RequestVote" and e.peer == 2, 1000 * MS)
    divergences, summary = _divergences(late)
    # The model's send unmatched and the recorded one unmatched are one finding, not two.
    assert [(d["node"], d["cause"], d["actual"]["type"], d["expected"]["type"]) for d in divergences] == [
        (1, "timing", "RequestVote", "RequestVote")
    ]
    assert divergences[0]["offsetNs"] == -1000 * MS  # the model sent it a second before the recording shows it
    assert "1000 ms earlier" in divergences[0]["why"]
    assert summary["divergences"] == 1 and summary["divergenceChecks"] == 2
    assert summary["verdicts"]["1"]["timing"] == 1 and summary["verdicts"]["1"]["model"] == 0


def test_a_send_the_model_never_makes_is_blamed_on_the_model():
    events = record(*STARTUP)
    vote = next(e for e in events if e.node == 0 and e.dir == "out" and e.type == "Vote")
    wrong = [dataclasses.replace(e, fields={**e.fields, "candidateTermId": 7}) if e is vote else e for e in events]
    divergences, summary = _divergences(wrong)
    recorded = [d for d in divergences if d["unmatched"] == "recording"]
    assert [(d["cause"], d["expected"]["fields"]["candidateTermId"]) for d in recorded] == [("model", 7)]
    assert "no such send within 5 s" in recorded[0]["why"]
    assert summary["verdicts"]["0"]["model"] >= 1 and summary["verdicts"]["0"]["firstModelTs"] is not None


def test_a_divergence_where_the_starting_state_was_only_bounded_is_missing_evidence_and_says_what_settles_it():
    events = record(*STARTUP)
    vote = next(e for e in events if e.node == 0 and e.dir == "out" and e.type == "Vote")
    wrong = [dataclasses.replace(e, fields={**e.fields, "candidateTermId": 7}) if e is vote else e for e in events]
    bounded = {"appendPosition": {"value": 0, "source": "recording.log", "certainty": "bound",
                                  "note": "the open term's base is a lower bound"}}
    wrong = [dataclasses.replace(e, extra={"startingState": bounded})
             if e.type == "MemberStart" and e.node == 0 else e for e in wrong]
    divergences, summary = _divergences(wrong)
    assert {d["cause"] for d in divergences if d["node"] == 0} == {"evidence"}
    settled = divergences[0]["settledBy"]
    assert "member 0's agent log" in settled and "archive directory" in settled
    assert summary["verdicts"]["0"]["evidence"] >= 1 and summary["verdicts"]["0"]["settledBy"] == [settled]
    # ... and only while that start decides anything: once its election has closed, the gap is closed too.
    gaps = EvidenceGaps([EvidenceGap(0, 100, None, "why", "its agent log", until_closed=True)])
    gaps.started(0, 100)
    gaps.closed(0, 200)
    assert gaps.at(0, 150) is not None and gaps.at(0, 250) is None


def test_repeats_of_one_cause_are_one_run_and_another_cause_starts_a_new_one():
    runs, out = Runs(), []
    base = {"kind": "divergence", "node": 2, "unmatched": "model", "actual": {"type": "AppendPosition", "peer": 0}}
    for ts in (10, 20, 30):
        runs.add({**base, "ts": ts, "cause": "model"}, out)
    runs.add({**base, "ts": 40, "cause": "timing"}, out)
    runs.flush(out)
    assert [(r["cause"], r["count"], r["ts"], r["lastTs"]) for r in out] == [("model", 3, 10, 30), ("timing", 1, 40, 40)]
    assert describe_record(out[0]).startswith("2 DIVERGENCE [model ×3]")
    assert count_causes(out, members=[0, 2])["0"]["divergences"] == 0
    assert count_causes(out)["2"]["checks"] == 4


def _observed(events, node):
    states = [r for r in replay(events, nodes=[node]) if r["kind"] == "state" and r["from"] is not None]
    return [Event(ts=r["ts"], node=node, dir="local", peer=None, channel="local", type="ElectionStateChange",
                  fields={"from": r["from"], "to": r["to"]}) for r in states]


def test_a_state_change_the_agent_log_shows_at_another_time_is_a_timing_divergence_beyond_the_stated_tolerance():
    events = record(*STARTUP)
    observed = _observed(events, 0)
    assert DEFAULT_STATE_TOLERANCE_NS == 200 * MS
    near = [dataclasses.replace(o, ts=o.ts + 150 * MS) if i == 2 else o for i, o in enumerate(observed)]
    assert _divergences(events + near)[0] == []
    far = [dataclasses.replace(o, ts=o.ts + 264 * MS) if i == 2 else o for i, o in enumerate(observed)]
    divergences, summary = _divergences(events + far)
    assert [(d["cause"], d["offsetNs"]) for d in divergences] == [("timing", -264 * MS)]
    assert summary["stateToleranceNs"] == 200 * MS
    # The tolerance is the caller's to state.
    assert _divergences(events + far, state_tolerance_ns=300 * MS)[0] == []


def test_the_verdict_line_says_whether_a_member_replayed_and_if_not_why():
    clean = {"divergences": 0}
    assert verdict_line("0", clean)[0] == "member 0: replayed as recorded, no divergence"
    settled = {"divergences": 2, "checks": 5, "model": 0, "timing": 1, "evidence": 1,
               "settledBy": ["member 1's agent log"], "firstModelTs": None}
    text, style = verdict_line("1", settled)
    assert text == ("member 1: 2 divergence(s) (5 checks), none from the model: 1 timing (the same behaviour at"
                    " another time), 1 from missing evidence (member 1's agent log would settle it)")
    assert style == "yellow"
    blamed = {"divergences": 1, "checks": 1, "model": 1, "timing": 0, "evidence": 0, "settledBy": [],
              "firstModelTs": 3_500_000_000}
    text, style = verdict_line("2", blamed, origin=1_000_000_000)
    assert text == "member 2: DIVERGES: 1 divergence(s): 1 from the model, the first at +2.500s" and style == "bold red"
