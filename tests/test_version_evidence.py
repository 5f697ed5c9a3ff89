"""The Aeron version a capture shows, and the model `recount replay` picks from it."""

from __future__ import annotations

import json

from cli.app import run
from engine.versions import BASELINE, model_from_evidence
from formats.cluster_codecs import CanvassPosition
from formats.events import message_event
from recorder.version_evidence import evidence_of, schema_versions, to_metadata, wire_evidence


def _item(says, first, last, exact=None):
    return {"source": "x", "says": says, "first": first, "last": last, "exact": exact}


def test_an_exact_release_wins_and_a_range_gives_its_newest_modelled_release():
    assert model_from_evidence([_item("log started", "1.50", "1.50", "1.50.4"), _item("v15", "1.50", "1.50")])[0] == "1.50.4"
    assert model_from_evidence([_item("dialect", "1.40", "1.43"), _item("v10", "1.41", "1.41")])[0] == "1.41.7"
    assert model_from_evidence([_item("v12", "1.43", "1.47")])[0] == BASELINE


def test_clashing_or_missing_evidence_picks_nothing_and_says_why():
    model, why = model_from_evidence([_item("dialect", "1.40", "1.43"), _item("v15", "1.50", "1.50")])
    assert model is None and "clash" in why
    assert model_from_evidence([_item("a", "1.50", "1.50", "1.50.4"), _item("b", "1.41", "1.41", "1.41.7")])[0] is None
    assert model_from_evidence([]) == (None, "no evidence of the Aeron version")


def _replace(event, **changes):
    import dataclasses
    return dataclasses.replace(event, extra={"packet": 1}, **changes)


def test_only_captured_messages_count_as_wire_evidence():
    message = CanvassPosition(log_leadership_term_id=-1, log_position=0, leadership_term_id=-1, follower_member_id=1,
                              protocol_version=65536)
    ours = message_event(message, ts=1, node=0, dir="in", peer=1, channel="consensus", payload=message.encode())
    assert schema_versions([ours]) == {}  # encoded by recount (no packet): not evidence
    captured = _replace(ours, payload=ours.payload[:6] + (10).to_bytes(2, "little") + ours.payload[8:])
    assert schema_versions([captured, captured]) == {10: 2}
    assert wire_evidence([captured])[0]["first"] == "1.41"
    stored = to_metadata([_item("log started", "1.50", "1.50", "1.50.4")])
    assert evidence_of([captured], stored)[0]["exact"] == "1.50.4"
    assert evidence_of([captured], {})[0]["schemaVersion"] == 10


def test_replay_says_which_model_it_chose_and_warns_when_model_clashes(tmp_path, capsys):
    sample = "samples/clean-start/incident.arrow"
    assert run(["replay", sample, "--json"]) == 0
    out = capsys.readouterr()
    summary = json.loads(out.out.strip().splitlines()[-1])
    assert summary["model"] == BASELINE and summary["modelChosen"]["from"] == "default"
    assert run(["replay", sample, "--json", "--model", "1.50.4"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["modelChosen"] == {"model": "1.50.4", "from": "option", "evidence": None,
                                      "why": "no evidence of the Aeron version"}
