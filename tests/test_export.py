"""`recount export --format perfetto`: Chrome trace-event JSON that Perfetto UI and chrome://tracing load.

No trace viewer runs here (Perfetto's trace processor is a download), so the checks are the
format's own rules, on every sample, a one-host capture and a real Aeron capture: the document is
``{"traceEvents": [...]}`` with known phases and the keys each needs; on every track (pid, tid)
timestamps never go back, B/E slices nest (each E closes the B open on its track, by name) and
none is left open; every flow id has one start and one end, each right after the consensus
instant it binds to; every recorded consensus send and receipt is an instant; divergences are marked.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from cli.app import run
from recorder import convert
from recorder.report import build_incident
from recorder.report.perfetto import CONSENSUS_TID, PROBLEMS_TID, STATE_TID, trace_document

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted((ROOT / "samples").glob("*/incident.arrow"))
HOST0 = ROOT / "samples" / "leader-failover" / "host0.pcap"
PHASES = {"B", "E", "X", "i", "s", "f", "M"}


def _document(path: Path):
    loaded = convert.load(str(path))
    incident = build_incident(loaded.events, source=path.name, refs=loaded.refs, ref_kind=loaded.ref_kind)
    return trace_document(incident), incident, loaded


def check_trace_event_format(document: dict) -> dict:
    """Assert the rules above; return what was counted (for further checks)."""
    assert set(document) >= {"traceEvents"} and isinstance(document["traceEvents"], list)
    json.loads(json.dumps(document))  # plain JSON: no NaN, no non-string keys
    last_ts: dict[tuple, float] = {}
    open_slices: dict[tuple, list[str]] = defaultdict(list)
    previous: dict[tuple, dict] = {}
    flows: dict[int, list[str]] = defaultdict(list)
    for event in document["traceEvents"]:
        phase = event["ph"]
        assert phase in PHASES, event
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int) and isinstance(event["name"], str)
        if phase == "M":
            assert event["name"] in ("process_name", "process_sort_index", "thread_name", "thread_sort_index")
            continue
        track = (event["pid"], event["tid"])
        assert isinstance(event["ts"], int | float) and event["ts"] >= 0
        assert event["ts"] >= last_ts.get(track, 0), f"time goes back on track {track}: {event}"
        last_ts[track] = event["ts"]
        if phase == "B":
            open_slices[track].append(event["name"])
        elif phase == "E":
            assert open_slices[track] and open_slices[track][-1] == event["name"], f"unmatched E on {track}: {event}"
            open_slices[track].pop()
        elif phase == "X":
            raise AssertionError("complete events are not used: B/E pairs never overlap by rounding")
        elif phase == "i":
            assert event["s"] in ("t", "p", "g")
        elif phase in ("s", "f"):
            assert isinstance(event["id"], int) and event["bp"] == "e"
            before = previous.get(track)
            assert before is not None and before["ph"] == "i" and before["ts"] == event["ts"], \
                f"flow {event['id']} does not follow the instant it binds to"
            flows[event["id"]].append(phase)
        previous[track] = event
    assert not any(open_slices.values()), f"slices left open: {dict(open_slices)}"
    assert all(sorted(ends) == ["f", "s"] for ends in flows.values()), "a flow without both ends"
    return {"flows": len(flows), "tracks": len(last_ts)}


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.parent.name)
def test_every_sample_exports_a_well_formed_trace(sample):
    document, incident, loaded = _document(sample)
    counted = check_trace_event_format(document)
    events = document["traceEvents"]
    names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {f"member {m}" for m in incident.members}
    instants = sum(1 for e in events if e["ph"] == "i" and e["tid"] == CONSENSUS_TID)
    recorded = sum(1 for e in loaded.events if e.channel == "consensus" and e.dir in ("in", "out") and isinstance(e.peer, int))
    assert instants == recorded
    paired = sum(1 for m in incident.messages if m.send_ns is not None and m.receive_ns is not None)
    assert counted["flows"] == paired > 0


def test_the_failover_trace_has_each_members_states_and_roles_and_the_crash():
    document, incident, _ = _document(ROOT / "samples" / "leader-failover" / "incident.arrow")
    slices = [e for e in document["traceEvents"] if e["ph"] == "B"]
    member = {m: [e["name"] for e in slices if e["pid"] == m + 1 and e["tid"] == STATE_TID] for m in incident.members}
    assert member[0][-1] == "DOWN (crash)"
    assert "CANDIDATE_BALLOT" in member[1] and "FOLLOWER_BALLOT" in member[2]
    roles = [e["name"] for e in slices if e["pid"] == 2 and e["tid"] == 2]
    assert roles == ["FOLLOWER", "CANDIDATE", "LEADER"]
    leader_ready = next(e for e in slices if e["pid"] == 2 and e["name"] == "LEADER_READY" and e["ts"] > 1e6)
    assert leader_ready["args"]["via"] == ["LEADER_LOG_REPLICATION", "LEADER_REPLAY", "LEADER_INIT"]


def test_a_flow_joins_the_send_of_a_vote_to_its_receipt():
    document, _, _ = _document(ROOT / "samples" / "leader-failover" / "incident.arrow")
    events = document["traceEvents"]
    starts = {e["id"]: e for e in events if e["ph"] == "s" and e["name"] == "Vote"}
    ends = {e["id"]: e for e in events if e["ph"] == "f" and e["name"] == "Vote"}
    assert starts and set(starts) == set(ends)
    for flow_id, start in starts.items():
        end = ends[flow_id]
        assert start["pid"] != end["pid"] and end["ts"] >= start["ts"]


def test_divergences_are_marked_on_the_member_that_diverged():
    document, incident, _ = _document(HOST0)
    check_trace_event_format(document)
    marks = [e for e in document["traceEvents"] if e["tid"] == PROBLEMS_TID and e["ph"] == "i"]
    assert len(marks) == len(incident.divergences) == 7
    assert Counter(e["pid"] - 1 for e in marks) == Counter(p.member for p in incident.divergences)
    assert all(e["cat"] == "divergence" and "DIVERGENCE" in e["args"]["what"] for e in marks)


def test_export_writes_the_file_refuses_to_overwrite_and_reports_counts(tmp_path, capsys):
    out = tmp_path / "trace.json"
    assert run(["export", str(ROOT / "samples" / "split-vote" / "incident.arrow"), "--format", "perfetto",
                "-o", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    document = json.loads(out.read_text())
    assert summary["traceEvents"] == len(document["traceEvents"]) and summary["flows"] > 0
    check_trace_event_format(document)
    assert run(["export", str(HOST0), "-o", str(out)]) == 2
    assert f"{out}: exists (use --force" in capsys.readouterr().err
    assert json.loads(out.read_text()) == document


def test_export_refuses_an_unknown_format_before_reading(tmp_path, capsys):
    assert run(["export", str(HOST0), "--format", "otlp", "-o", str(tmp_path / "t.json")]) == 2
    assert "--format must be one of perfetto" in capsys.readouterr().err


def test_export_help_has_an_example(capsys):
    assert run(["export", "--help"]) == 0
    assert "recount export samples/leader-failover/incident.arrow -o trace.json" in capsys.readouterr().out
