"""The documented scenario format (`recount simulate --help-format`) is the parser's: no key missing,
none made up, the defaults it states are the ones the parser applies, and its example parses."""

from __future__ import annotations

import re

import pytest

from cli.app import run
from recorder.simulate import scenario as format_module
from recorder.simulate.scenario import (
    DEFAULT_LINK,
    EXAMPLE,
    FAULT_KINDS,
    SCENARIO_KEYS,
    parse_duration_ns,
    parse_scenario,
)

#: Scenarios that between them take every branch of the parser (each fault kind, each cluster form).
EXERCISES = [
    EXAMPLE,
    """
    [cluster]
    hosts = ["10.0.0.5", "10.0.0.6", "10.0.0.7"]
    members = 3
    appointedLeaderId = 1
    [[member]]
    id = 0
    seed = 5
    config = { "aeron.cluster.election.timeout" = "2s" }
    nodeState = { candidateTermId = 4 }
    recordingLog = [ { recordingId = 0, leadershipTermId = 0, termBaseLogPosition = 0, logPosition = -1, timestamp = 0 } ]
    appendPosition = 0
    [network]
    loss = 0.0
    duplicate = 0.0
    [[network.link]]
    from = 1
    to = "client"
    jitter = "1ms"
    loss = 0.1
    duplicate = 0.1
    [[client]]
    size = 10
    [[fault]]
    at = "1s"
    kind = "partition"
    groups = [[0], [1, 2]]
    until = "2s"
    [[fault]]
    at = "3s"
    kind = "oneway"
    from = "leader"
    to = "follower"
    [[fault]]
    at = "4s"
    kind = "link"
    from = 0
    to = 1
    latency = "1ms"
    jitter = "1ms"
    loss = 0.5
    duplicate = 0.5
    [[fault]]
    at = "5s"
    kind = "isolate"
    member = 2
    [[fault]]
    at = "6s"
    kind = "heal"
    [[fault]]
    at = "7s"
    kind = "stop"
    member = "follower"
    """,
    """
    start = "2026-01-01T00:00:00Z"
    [cluster]
    clusterMembers = "0,10.0.0.1:1,10.0.0.1:2,10.0.0.1:3,10.0.0.1:4,10.0.0.1:5|1,10.0.0.2:1,10.0.0.2:2,10.0.0.2:3,10.0.0.2:4,10.0.0.2:5"
    """,
]


def _normal(key: str) -> str:
    """A key path as the parser names it (``fault[3].at``) in the documentation's form (``fault[].at``)."""
    return re.sub(r"\[\d+\]", "[]", key)


def _keys_the_parser_reads(monkeypatch) -> set[str]:
    seen: set[str] = set()
    reader = format_module._Reader
    raw, has = reader.raw, reader.has

    def recording_raw(self, name, default=None):
        seen.add(_normal(self.key(name)))
        return raw(self, name, default)

    def recording_has(self, name):
        seen.add(_normal(self.key(name)))
        return has(self, name)

    monkeypatch.setattr(reader, "raw", recording_raw)
    monkeypatch.setattr(reader, "has", recording_has)
    for text in EXERCISES:
        parse_scenario(text.replace("\n    ", "\n"), source="exercise.toml")
    return seen


def test_every_key_the_parser_reads_is_documented_and_every_documented_key_is_read(monkeypatch):
    documented = {key.replace(".<property>", "") for key, _, _ in SCENARIO_KEYS}
    tables = {d.rsplit(".", 1)[0].removesuffix("[]") for d in documented if "." in d}
    read = _keys_the_parser_reads(monkeypatch) - tables  # [cluster], [[fault]], ...: their keys are listed
    assert read - documented == set(), "keys the parser reads that --help-format does not document"
    assert documented - read == set(), "documented keys the parser never reads"


def test_the_documented_defaults_are_the_parsers():
    documented = {key: default for key, _, default in SCENARIO_KEYS}
    parsed = parse_scenario('name = "x"')
    assert documented["seed"] == str(parsed.seed)
    assert documented["description"] == f'"{parsed.description}"'
    assert parse_duration_ns(documented["duration"].strip('"'), key="duration") == parsed.duration_ns
    assert documented["cluster.appointedLeaderId"] == str(parsed.appointed_leader_id)
    assert documented["cluster.members"].startswith(str(len(parsed.members)))
    assert parse_duration_ns(documented["network.latency"].strip('"'), key="l") == DEFAULT_LINK.latency_ns
    assert parse_duration_ns(documented["network.jitter"].strip('"'), key="j") == DEFAULT_LINK.jitter_ns
    assert parse_scenario('name = "y"').network.default == DEFAULT_LINK
    with_client = parse_scenario("[[client]]")
    client = with_client.clients[0]
    assert parse_duration_ns(documented["client[].every"].strip('"'), key="e") == client.every_ns
    assert (documented["client[].count"], documented["client[].size"]) == (str(client.count), str(client.size))


def test_help_format_prints_every_key_every_fault_kind_and_an_example_that_parses(capsys):
    assert run(["simulate", "--help-format"]) == 0
    text = capsys.readouterr().out
    for key, _, default in SCENARIO_KEYS:
        assert re.search(rf"^{re.escape(key)}\s.*\(default: {re.escape(default)}\)$", text, re.MULTILINE), key
    for kind in FAULT_KINDS:
        assert f"  {kind} " in text
    example = text.split("Example:\n", 1)[1]
    assert parse_scenario("\n".join(line[2:] for line in example.splitlines())).name == "leader-failover"


@pytest.mark.parametrize("bad", ['nmae = "typo"', "[cluster]\nmember = 3"])
def test_a_key_outside_the_format_is_refused_naming_it(bad):
    with pytest.raises(format_module.ScenarioError, match="unknown key"):
        parse_scenario(bad)
