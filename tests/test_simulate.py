"""`recount simulate`: scenarios, the simulated network and Aeron transport, determinism, the samples.

The samples under ``samples/`` are checked four ways: they regenerate to the committed bytes, every
frame of their pcaps is Aeron as Wireshark knows it (when tshark is installed), their replay files
replay with zero divergences (and the replayed election states are the ones the agent logs show),
and converting their pcaps with the capture importer gives back the events the simulator recorded.

The committed samples are regression pins made by our own simulator: that they regenerate byte for
byte proves the simulator is deterministic and unchanged, nothing about Aeron.  Evidence of fidelity
comes from real captures (tests/test_real_capture_conformance.py and the other test_real_* modules).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from cli.app import run
from engine.harness.clock import Clock
from engine.replay import replay
from formats.agent_log import AgentLogRecord, read_agent_log
from formats.cluster_codecs import CanvassPosition, SessionMessageHeader
from formats.cluster_codecs_ext import decode_cluster
from formats.node_state import NodeStateFile
from formats.reassembly import Reassembler
from formats.recording_log import RecordingLog
from formats.replay_file import read_events
from formats.sbe import encode
from formats.udp import DataFrame, PadFrame, SetupFrame, decode_datagram
from recorder.simulate import load_scenario, parse_scenario, simulate
from recorder.simulate.network import Network
from recorder.simulate.outputs import render_files
from recorder.simulate.scenario import LinkSpec, NetworkSpec, ScenarioError, parse_duration_ns
from recorder.simulate.wire import CONSENSUS_TERM_LENGTH, Endpoint, Transport

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"
SAMPLE_NAMES = ("clean-start", "leader-failover", "split-vote", "restart-catchup", "graceful-leader-close-slow")

SMALL = """
name = "small"
seed = 9
duration = "3s"
[[client]]
start = "1s"
every = "50ms"
count = 10
size = 40
"""


@pytest.fixture(scope="module")
def small_run():
    return simulate(parse_scenario(SMALL, source="small.toml"))


@pytest.fixture(scope="module")
def sample_runs():
    """Every sample simulated once in memory: name -> (result, files)."""
    runs = {}
    for name in SAMPLE_NAMES:
        result = simulate(load_scenario(SAMPLES / name / "scenario.toml"))
        runs[name] = (result, render_files(result))
    return runs


# --- scenarios ----------------------------------------------------------------------------------


def test_a_full_scenario_parses_into_members_network_clients_and_a_sorted_fault_timeline():
    scenario = parse_scenario(
        """
        name = "x"
        seed = 4
        duration = "1.5s"
        [cluster]
        hosts = ["10.0.0.5", "10.0.0.6", "10.0.0.7"]
        [config]
        "aeron.cluster.election.timeout" = "2s"
        [[member]]
        id = 1
        start = "300ms"
        seed = 1
        [network]
        latency = "1ms"
        loss = 0.25
        [[network.link]]
        from = 0
        to = 2
        latency = "5ms"
        [[client]]
        every = "10ms"
        [[fault]]
        at = "2s"
        kind = "heal"
        [[fault]]
        at = "1s"
        kind = "partition"
        groups = [[0], [1, 2]]
        until = "1500ms"
        """,
        source="x.toml",
    )
    assert scenario.duration_ns == 1_500_000_000
    assert scenario.cluster_members.startswith("0,10.0.0.5:20002,10.0.0.5:20003,10.0.0.5:20004,10.0.0.5:20005,")
    assert scenario.member(1).start_ns == 300_000_000 and scenario.member(1).seed == 1
    assert scenario.member_config(0) == {"aeron.cluster.election.timeout": "2s"}
    assert scenario.network.default.latency_ns == 1_000_000 and scenario.network.default.loss == 0.25
    assert scenario.network.links == ((0, 2, LinkSpec(latency_ns=5_000_000)),)
    assert [f.kind for f in scenario.faults] == ["partition", "heal"]
    assert scenario.faults[0].groups == ((0,), (1, 2)) and scenario.faults[0].until_ns == 1_500_000_000


def test_the_format_example_in_the_scenario_module_docstring_is_a_valid_scenario():
    import textwrap

    from recorder.simulate import scenario as module

    example = module.__doc__.split("::", 1)[1].split("Member ids are", 1)[0]
    parsed = parse_scenario(textwrap.dedent(example), source="docstring")
    assert parsed.name == "leader-failover" and [f.kind for f in parsed.faults] == ["crash", "restart"]
    assert parsed.faults[0].member == 1 and parsed.faults[1].member == "crashed"


def test_durations_are_exact_decimals_with_aeron_style_units():
    assert parse_duration_ns("1.1s", key="k") == 1_100_000_000
    assert parse_duration_ns("250us", key="k") == 250_000
    assert parse_duration_ns(42, key="k") == 42
    with pytest.raises(ScenarioError, match="'k'"):
        parse_duration_ns("5 parsecs", key="k")


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        ("sede = 1", "sede", "unknown key"),
        ('duration = "soon"', "duration", "duration"),
        ('[[fault]]\nat = "1s"\nkind = "crush"', "fault[0].kind", "expected one of crash"),
        ('[[fault]]\nat = "1s"\nkind = "crash"\nmember = 7', "fault[0].member", "no member 7"),
        ('[[fault]]\nat = "1s"\nkind = "restart"\nmember = "leader"', "fault[0].member", "'crashed'"),
        ('[config]\n"aeron.cluster.nonsense" = 1', "config", "unknown Aeron property"),
        ('[[fault]]\nat = "2s"\nkind = "isolate"\nmember = 0\nuntil = "1s"', "fault[0].until", "later"),
        ("[cluster]\nmembers = 0", "cluster.members", "1..16"),
    ],
)
def test_a_bad_scenario_names_the_file_and_the_key(text, key, message):
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(text, source="bad.toml")
    line = str(caught.value)
    assert line.startswith(f"bad.toml, key '{key}'") and message in line and "\n" not in line


def test_a_scenario_that_is_not_toml_is_a_scenario_error():
    with pytest.raises(ScenarioError, match="bad.toml: not valid TOML"):
        parse_scenario("name = ", source="bad.toml")


# --- the network ----------------------------------------------------------------------------------


def test_the_same_seed_gives_the_same_fates_and_another_seed_does_not():
    spec = NetworkSpec(default=LinkSpec(latency_ns=100_000, jitter_ns=50_000, loss=0.3, duplicate=0.2))

    def fates(seed):
        network = Network(spec, random.Random(seed), [0, 1])
        return [tuple(network.transmit(0, 1)) for _ in range(200)]

    assert fates(1) == fates(1)
    assert fates(1) != fates(2)
    outcomes = {len(f) for f in fates(1)}
    assert outcomes == {0, 1, 2}  # lost, delivered, duplicated


def test_a_partition_cuts_between_groups_both_ways_and_heals_by_rule():
    network = Network(NetworkSpec(), random.Random(0), [0, 1, 2])
    rule = network.partition(((0,), (1, 2)))
    assert network.transmit(0, 1) == [] and network.transmit(2, 0) == []
    assert network.transmit(1, 2)
    oneway = network.oneway(1, 2)
    assert network.transmit(1, 2) == [] and network.transmit(2, 1)
    assert network.heal(rule) == ["partition 0 | 1,2"]
    assert network.transmit(0, 1) and network.transmit(1, 2) == []
    network.heal(oneway)
    assert network.transmit(1, 2)


# --- the Aeron transport --------------------------------------------------------------------------


def _pair(link: LinkSpec, seed: int = 3):
    """Two hosts, a consensus-style publication from 0 to 1, and what host 1 receives."""
    scheduler = Clock()
    network = Network(NetworkSpec(default=link), random.Random(seed), [0, 1])
    received = []
    transport = Transport(scheduler, network, on_message=received.append)
    transport.add_host(0, "10.0.0.1", capture=True)
    transport.add_host(1, "10.0.0.2", capture=True)
    sender = transport.start(0, random.Random(seed + 1))
    receiver = transport.start(1, random.Random(seed + 2))
    receiver.subscribe(9000, 108, "consensus")
    publication = sender.add_publication(stream_id=108, term_length=CONSENSUS_TERM_LENGTH,
                                         destinations=[(Endpoint("10.0.0.2", 9000), 1)])
    return scheduler, transport, publication, received


def test_over_a_lossy_reordering_duplicating_network_every_message_arrives_once_and_in_order():
    scheduler, transport, publication, received = _pair(
        LinkSpec(latency_ns=200_000, jitter_ns=400_000, loss=0.2, duplicate=0.2))
    payloads = [encode(CanvassPosition(log_leadership_term_id=i, log_position=i * 32, leadership_term_id=i,
                                       follower_member_id=0, protocol_version=65536)) for i in range(300)]
    positions = []
    for index, payload in enumerate(payloads):
        scheduler.at(1_000_000 + index * 300_000, lambda p=payload: positions.append(publication.offer(p)))
    scheduler.run_until(5_000_000_000)
    assert [d.payload for d in received] == payloads
    assert [d.position for d in received] == positions
    assert transport.network.lost > 0 and transport.network.duplicated > 0


def test_the_capture_of_a_sender_reassembles_to_what_it_published_across_terms_and_fragments():
    scheduler, transport, publication, received = _pair(LinkSpec(latency_ns=100_000, jitter_ns=0, loss=0.0,
                                                                 duplicate=0.0))
    # 7000-byte messages (Aeron's largest on a 64 KiB term is 8 KiB): 6 fragments of MTU 1408 each;
    # nine fill term 0 but for a PAD, and the tenth starts term 1.
    messages = [encode(SessionMessageHeader(leadership_term_id=1, cluster_session_id=i, timestamp=0))
                + bytes([i]) * 6968 for i in range(12)]
    for index, message in enumerate(messages):
        scheduler.at(1_000_000 + index * 10_000_000, lambda m=message: publication.offer(m))
    scheduler.run_until(1_000_000_000)
    assert [d.payload for d in received] == messages
    frames = [f for r in transport.hosts[0].capture for f in decode_datagram(r.payload)]
    assert any(type(f) is PadFrame for f in frames)
    assert max(len(r.payload) for r in transport.hosts[0].capture) <= 1408
    reassembler = Reassembler()
    out = []
    for frame in frames:
        if type(frame) is SetupFrame:
            reassembler.on_setup(frame)
        elif type(frame) in (DataFrame, PadFrame) and frame.session_id == publication.session_id:
            out += reassembler.on_frame(frame)
    assert [m.payload for m in out] == messages
    assert [m.end_position for m in out] == [d.position for d in received]
    assert out[8].term_id == publication.initial_term_id and out[9].term_id == publication.initial_term_id + 1
    assert out[9].term_offset == 0 and out[9].start_position == CONSENSUS_TERM_LENGTH
    assert publication.offer(bytes(CONSENSUS_TERM_LENGTH // 8 + 1)) is None  # longer than Aeron allows


def test_a_publication_sends_setup_until_a_status_message_then_heartbeats_when_idle_and_eos_on_close():
    scheduler, transport, publication, received = _pair(LinkSpec(latency_ns=100_000, jitter_ns=0, loss=0.0,
                                                                 duplicate=0.0))
    scheduler.run_until(1_000_000_000)
    publication.close()
    scheduler.run_until(1_100_000_000)
    sent = [(r.time_ns, decode_datagram(r.payload)[0]) for r in transport.hosts[0].capture
            if r.source == publication.source]
    assert type(sent[0][1]) is SetupFrame and sent[0][0] == 0
    heartbeats = [t for t, f in sent if type(f) is DataFrame and f.frame_length == 0]
    # Heartbeats every 100 ms (Aeron sends when more than 100 ms passed since the last send).
    assert len(heartbeats) >= 9 and all(99_000_000 < b - a <= 100_000_001 for a, b in zip(heartbeats, heartbeats[1:], strict=False))
    assert type(sent[-1][1]) is DataFrame and sent[-1][1].is_end_of_stream
    assert received == []


# --- whole simulations ----------------------------------------------------------------------------


def test_two_runs_of_a_scenario_give_byte_identical_outputs(small_run):
    again = simulate(parse_scenario(SMALL, source="small.toml"))
    assert render_files(again) == render_files(small_run)


def test_another_seed_gives_another_incident(small_run):
    other = simulate(parse_scenario(SMALL, source="small.toml"), seed=10)
    assert render_files(other)["host0.pcap"] != render_files(small_run)["host0.pcap"]
    assert other.seed == 10


def test_the_replay_file_records_what_the_members_did_with_the_seed_in_it(small_run):
    files = render_files(small_run)
    events, metadata = read_events(pa.py_buffer(files["incident.arrow"]))
    schema_metadata = pa.ipc.open_file(pa.py_buffer(files["incident.arrow"])).schema.metadata
    assert schema_metadata[b"recount.seed"] == b"9" and metadata.cluster_members == small_run.scenario.cluster_members
    starts = [e for e in events if e.type == "MemberStart"]
    assert [e.node for e in starts] == [0, 1, 2] and all(isinstance(e.fields["seed"], int) for e in starts)
    assert [e.type for e in events[-3:]] == ["End", "End", "End"]
    # A message sent by one member is received by its peer with the same bytes.
    sent = {(e.node, e.peer, e.payload) for e in events if e.dir == "out"}
    received = {(e.peer, e.node, e.payload) for e in events if e.dir == "in" and e.channel == "consensus"}
    assert received <= sent and len(received) > 50
    log = [e for e in events if e.dir == "in" and e.channel == "log" and e.node == 0]
    assert [e.type for e in log[:2]] == ["NewLeadershipTermEvent", "SessionOpenEvent"]
    assert log[0].extra["logPosition"] == 96
    assert small_run.stats["logPositionMismatches"] == 0 and small_run.stats["refusedOffers"] == 0
    # The leader appended the client's 10 messages with their payloads (a log frame is header + payload).
    assert len(log) == 12 and log[-1].payload[32:] == (b"client 0 message 10 " * 2)[:40]
    assert decode_cluster(log[-1].payload).message.cluster_session_id == 1


def test_cluster_files_are_what_the_members_ended_with(small_run):
    files = render_files(small_run)
    for member_id, state in small_run.final_states.items():
        log = RecordingLog.decode(files[f"node{member_id}/cluster/recording.log"])
        assert [e.leadership_term_id for e in log.entries] == [0]
        node_state = NodeStateFile.decode(files[f"node{member_id}/cluster/node-state.dat"])
        assert node_state.candidate_term.candidate_term_id == state["candidateTermId"]
        assert len(files[f"node{member_id}/cluster/node-state.dat"]) == 1 << 20


def test_agent_logs_parse_as_aeron_prints_them_each_host_on_its_own_clock(small_run):
    origins = set()
    for lines in small_run.agent_logs.values():
        log = read_agent_log(lines)
        assert log.problems == []
        assert log.started is not None and log.started.epoch_ms == small_run.scenario.start_epoch_ns // 1_000_000
        origins.add(log.started.ts_ns)
        events = [r.event for r in log.records if type(r) is AgentLogRecord]
        assert events[:2] == ["NEW_ELECTION", "ELECTION_STATE_CHANGE"] and "CANVASS_POSITION" in events
    assert len(origins) == 3


# --- the bundled samples --------------------------------------------------------------------------


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_each_sample_regenerates_to_the_committed_bytes(sample_runs, name):
    _, files = sample_runs[name]
    for relative, data in sorted(files.items()):
        committed = SAMPLES / name / relative
        assert committed.exists(), f"{committed} missing"
        assert _sha(committed.read_bytes()) == _sha(data), (
            f"{committed} differs from a fresh run; if the model changed on purpose, regenerate with "
            f"`recount simulate samples/{name}/scenario.toml -o samples/{name} --force`"
        )


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_each_sample_is_small_apart_from_aerons_fixed_size_node_state_files(name):
    total = sum(p.stat().st_size for p in (SAMPLES / name).rglob("*") if p.is_file() and p.name != "node-state.dat")
    assert total < 1_000_000


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_each_sample_replays_with_zero_divergences_through_the_states_its_agent_logs_show(name):
    events, _ = read_events(pa.memory_map(str(SAMPLES / name / "incident.arrow")))
    records = list(replay(events))
    assert records[-1]["kind"] == "summary" and records[-1]["divergences"] == 0
    assert not [r for r in records if r["kind"] in ("divergence", "invariant")]
    for member_id in (0, 1, 2):
        text = (SAMPLES / name / f"node{member_id}" / "agent-events.log").read_text()
        logged = [(r.fields["from"], r.fields["to"]) for r in read_agent_log(text).records
                  if type(r) is AgentLogRecord and r.event == "ELECTION_STATE_CHANGE"]
        replayed = [(r["from"], r["to"]) for r in records if r["kind"] == "state" and r["node"] == member_id]
        assert replayed == logged


def _message_events(events):
    out = {}
    for e in events:
        if e.dir in ("in", "out") or e.type == "LogEndOfStream":
            extra = {k: v for k, v in (e.extra or {}).items() if k != "packet"}
            out.setdefault(e.node, []).append(
                (e.ts, e.dir, e.peer, e.channel, e.type, json.dumps(dict(e.fields), sort_keys=True),
                 e.payload, json.dumps(extra, sort_keys=True)))
    return out


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_converting_a_samples_pcaps_gives_back_the_events_the_simulator_recorded(name):
    from recorder.capture.members import MemberMap
    from recorder.capture.pcap_import import import_pcaps

    directory = SAMPLES / name
    recorded, metadata = read_events(pa.memory_map(str(directory / "incident.arrow")))
    imported = import_pcaps(sorted(directory.glob("host*.pcap")), MemberMap.parse(metadata.cluster_members))
    # The importer also shows the leader's own log frames as ``out`` events (the simulator records
    # its appends as engine outputs, not as events): those are checked against what was received.
    appended = [e for e in imported.events if e.dir == "out" and e.channel == "log"]
    mine = _message_events(recorded)
    theirs = _message_events([e for e in imported.events if not (e.dir == "out" and e.channel == "log")])
    assert sorted(mine) == sorted(theirs)
    for node in sorted(mine):
        assert theirs[node] == mine[node], f"member {node}'s events differ"
    sent = Counter((e.node, e.peer, e.type, e.payload, e.extra["logPosition"]) for e in appended)
    received = Counter((e.peer, e.node, e.type, e.payload, e.extra["logPosition"])
                       for e in recorded if e.dir == "in" and e.channel == "log")
    assert received and not received - sent, "a log frame a member received is missing from its leader's sends"


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_a_sample_converted_from_its_pcaps_and_agent_logs_replays_with_zero_divergences(name, tmp_path, capsys):
    directory = SAMPLES / name
    members = json.loads((directory / "summary.json").read_text())["clusterMembers"]
    inputs = [str(p) for p in sorted(directory.glob("host*.pcap")) + sorted(directory.glob("node*/agent-events.log"))]
    # Captures do not record the cluster's configuration: the user gives it, as for a real incident.
    scenario = load_scenario(directory / "scenario.toml")
    properties = {m: scenario.member_config(m) for m in scenario.member_ids}
    assert len({json.dumps(c, sort_keys=True) for c in properties.values()}) == 1, "one config for all members"
    config = [f"--config={key}={value}" for key, value in sorted(properties[0].items())]
    out = tmp_path / "converted.arrow"
    assert run(["convert", *inputs, "--members", members, *config, "-o", str(out)]) == 0, capsys.readouterr().err
    events, _ = read_events(pa.memory_map(str(out)))
    summary = list(replay(events))[-1]
    assert summary["divergences"] == 0


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")
@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_tshark_decodes_every_frame_of_a_samples_pcaps_as_aeron_without_malformed_packets(name):
    for pcap in sorted((SAMPLES / name).glob("host*.pcap")):
        ports = [a for port in (20002, 20003, 20004, 20005) for a in ("-d", f"udp.port=={port},aeron")]
        done = subprocess.run(
            ["tshark", "-r", str(pcap), *ports, "-T", "fields", "-e", "frame.protocols", "-e", "_ws.malformed",
             "-e", "_ws.expert.severity"],
            capture_output=True, text=True, check=True, timeout=120,
        )
        rows = [line.split("\t") for line in done.stdout.splitlines()]
        assert rows and all(":udp:aeron" in row[0] for row in rows), pcap
        # Expert notes (a NAK is one) are fine; warnings (0x600000) and errors (0x800000, malformed) are not.
        assert not [row for row in rows if row[1] or any(int(s) >= 0x600000 for s in row[2].split(",") if s)], pcap
        assert "Malformed" not in done.stdout + done.stderr


# --- the command line -----------------------------------------------------------------------------


def _scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(SMALL)
    return path


def test_simulate_writes_the_incident_and_prints_the_seed_as_json(tmp_path, capsys):
    out = tmp_path / "incident"
    assert run(["simulate", str(_scenario_file(tmp_path)), "-o", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["seed"] == 9 and "seed 9" in captured.err
    assert sorted(document["files"]) == sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    for relative, info in document["files"].items():
        if relative != "summary.json":
            assert _sha((out / relative).read_bytes()) == info["sha256"]


def test_simulate_refuses_to_overwrite_without_force_and_keeps_other_files_with_it(tmp_path, capsys):
    scenario = _scenario_file(tmp_path)
    out = tmp_path / "incident"
    assert run(["simulate", str(scenario), "-o", str(out)]) == 0
    (out / "README.md").write_text("mine")
    before = (out / "host0.pcap").read_bytes()
    assert run(["simulate", str(scenario), "-o", str(out), "--seed", "3"]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (out / "host0.pcap").read_bytes() == before
    assert run(["simulate", str(scenario), "-o", str(out), "--seed", "3", "--force"]) == 0
    assert (out / "host0.pcap").read_bytes() != before and (out / "README.md").read_text() == "mine"


def test_simulate_says_in_one_line_which_key_of_a_bad_scenario_is_wrong(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text('[[fault]]\nat = "1s"\nkind = "crash"\nmember = "everyone"\n')
    assert run(["simulate", str(path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bad.toml" in err and "fault[0].member" in err
    assert not (tmp_path / "out").exists()


def test_simulate_in_another_process_with_another_hash_seed_writes_the_same_bytes(tmp_path, small_run):
    out = tmp_path / "incident"
    env = dict(os.environ, PYTHONHASHSEED="12345")
    done = subprocess.run([sys.executable, "-m", "cli", "simulate", str(_scenario_file(tmp_path)), "-o", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for relative, data in render_files(small_run).items():
        assert (out / relative).read_bytes() == data, relative


CRASH_RESTART_CRASH = """
name = "crash-restart-crash"
seed = {seed}
duration = "14s"
[[client]]
start = "500ms"
every = "50ms"
count = 100
size = 64
[[fault]]
at = "1500ms"
kind = "crash"
member = "leader"
[[fault]]
at = "6s"
kind = "restart"
member = "crashed"
[[fault]]
at = "9s"
kind = "crash"
member = "leader"
"""


def test_a_restarted_member_draws_from_a_new_generator_that_node_replay_reproduces():
    # Regression (issue 11): the simulator kept a restarted member's generator while node replay
    # re-seeded it from the restart's MemberStart, so 12 of these 30 seeds replayed with 10-12
    # divergences.  A new process has a new generator: each life's seed is in its MemberStart.
    diverging = []
    for seed in range(30):
        result = simulate(parse_scenario(CRASH_RESTART_CRASH.format(seed=seed), source="crash-restart-crash.toml"))
        starts = [e for e in result.events if e.type == "MemberStart"]
        restarted = [e for e in starts if sum(s.node == e.node for s in starts) > 1]
        assert restarted, seed
        lives = {}
        for event in restarted:
            lives.setdefault(event.node, []).append(event.fields["seed"])
        assert all(len(set(seeds)) == len(seeds) for seeds in lives.values())  # each life its own seed
        summary = list(replay(result.events))[-1]
        if summary["divergences"]:
            diverging.append((seed, summary["divergences"]))
    assert diverging == []
