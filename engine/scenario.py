"""Datadriven scenarios: the one runner behind tests/testdata/election/*.txt and `recount export-scenario`.

A scenario file is a sequence of stanzas, in the manner of etcd-io/raft's testdata::

    # why this stanza exists, and the section of aeron-election.md it checks
    deliver 1→0 RequestVote candidateTermId=2 logLeadershipTermId=-1 logPosition=0
    ----
    1000ms 0→1 Vote candidateTermId=2 log=(-1,0) ✓
    1000ms 0 NOMINATE → FOLLOWER_BALLOT

The command lines run in order against one `World` (state carries over from stanza to stanza); the
lines after ``----`` are the transcript they produce: every trace record the members emitted, as
``<time> <formats.describe.describe_record line>``, in the order produced.  A blank line ends the
transcript; blank and ``#`` lines before a stanza are its preamble, kept as written.

The rewrite rule (`rewritten`): each stanza's transcript becomes what the engine produced, except a
stanza marked ``# xfail: <why>``, a known engine bug, whose transcript stays what the reference says.

Commands (times are Agrona-style durations: ``1s``, ``250ms``; ``→`` may be written ``->``):

``members N``
    The cluster has members 0..N-1 (default 3).
``start ID [appointed=ID] [candidateTermId=N] [log=TERM:BASE:POS,...] [append=P] [seed=S] [delay=D,...]
[timeout=D] [config.<aeron property>=V]``
    A MemberStart for member ID now.  ``log`` gives recording.log TERM entries; ``delay`` the
    nomination delays its successive draws return (else java.util.Random(seed), seed default = ID).
``cluster [N] [latency=D] [appointed=ID] [delays=ID:D[/D...],...]``
    Start every member now, wired through the in-process router.
``deliver S→R Type field=value ... [@POS] [channel=log|ingress]``
    Member R receives a message from S now.  Member-id fields left out default to S or R as the
    message implies; ``@POS`` is a log frame's end position (channel log).
``advance D``
    Time passes.  Sends between started members are delivered ``latency`` (default 1ms) after they
    were sent, unless a partition drops them.
``crash ID`` / ``stop ID`` / ``restart ID [start options]``
    kill -9, clean shutdown, and a new MemberStart with the member's files as they were.
``isolate ID`` / ``heal``
    Drop every message to and from ID / deliver again.
``state [ID ...]`` / ``files ID``
    One line of the member's election state; its node-state.dat and recording.log.
``hide NAME ...`` / ``show NAME ...``
    Leave records of these kinds (state, role, send, ...) or message types out of the transcript
    (or back in).

Pure: drives engine `Node`s and builds text; callers read and write the files.  Imports only
`formats` and `engine`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.harness.driver import ClusterDriver, Member
from engine.harness.events import input_of, member_start_of
from engine.harness.nomination import ScriptedDelays
from engine.harness.router import LinkRouter
from engine.model.config import Config, parse_duration_ns
from engine.model.inputs import Input
from engine.model.javarandom import RandomSource
from engine.model.outputs import NominationDraw, Ready, Send
from engine.versions import release_model
from formats.describe import describe_record, format_ts
from formats.events import MESSAGE_CLASSES, Event
from formats.recording_log import entry_to_json
from formats.sbe import from_fields

MS = 1_000_000

#: For one member life (member id, 0 for its start, 1 for its first restart, ...): a factory, given
#: the world's clock, of the randomness its draws come from once its scripted delays are used up.
SourceFactory = Callable[[Callable[[], int]], RandomSource]

# -- the world ---------------------------------------------------------------------------------------------


def members_string(count: int) -> str:
    return "|".join(
        f"{i},localhost:2{i}001,localhost:2{i}002,localhost:2{i}003,localhost:2{i}004,localhost:2{i}005" for i in range(count)
    )


class World:
    """The members of a scenario on the one cluster driver, wired by a `LinkRouter`.

    Sends between started members arrive ``latency_ns`` after they were sent unless an isolation cuts
    them; at an instant where both are due, the members' timers run first, then what arrives, in the
    order it was sent (`engine.harness.clock`)."""

    def __init__(
        self,
        *,
        recording: list[Event] | None = None,
        sources: Mapping[tuple[int, int], SourceFactory] | None = None,
    ) -> None:
        self.member_count = 3
        self.latency_ns = MS
        self.driver = ClusterDriver(release_model("1.47.3"), on_ready=self._on_ready)
        self.router: LinkRouter | None = None
        self.start_options: dict[int, dict[str, str]] = {}
        self.hidden: set[str] = set()
        self.shown: set[str] = set()  # message types shown although their kind is hidden
        #: When a list, every member's events as a capture would show them (contract §1): MemberStart,
        #: crashes, what each received and what each sent.  tests/test_replay.py replays them.
        self.recording = recording
        #: Where a member life draws once its scripted delays are used up (else java.util.Random(seed)).
        self.sources: Mapping[tuple[int, int], SourceFactory] = dict(sources or {})
        #: Each member's current life: 0 after ``start``, one more at each ``restart``.
        self.lives: dict[int, int] = {}
        #: Each member life's randomness, (member, life) -> ScriptedDelays, for the delays it drew.
        self.randoms: dict[tuple[int, int], ScriptedDelays] = {}
        self._lines: list[str] = []

    @property
    def now(self) -> int:
        return self.driver.clock.now_ns

    @property
    def members(self) -> Mapping[int, Member]:
        return self.driver.members

    def _record(self, event: Event) -> None:
        if self.recording is not None:
            self.recording.append(event)

    def _wire(self) -> LinkRouter:
        if self.router is None or self.router.members != list(range(self.member_count)):
            cuts = self.router.cuts if self.router is not None else []
            self.router = LinkRouter(self._arrive, range(self.member_count), default_ns=self.latency_ns)
            self.router.cuts = cuts
        self.router.default_ns = self.latency_ns
        return self.router

    def isolate(self, member_id: int) -> None:
        self._wire().isolate(member_id)

    def heal(self) -> None:
        self._wire().heal()

    # -- running members ---------------------------------------------------------------------------

    def start(self, member_id: int, options: dict[str, str], lines: list[str]) -> None:
        self.start_options[member_id] = dict(options)
        fields: dict[str, Any] = {"clusterMembers": members_string(self.member_count)}
        config: dict[str, Any] = {}
        for key, value in options.items():
            if key.startswith("config."):
                config[key[len("config."):]] = value
            elif key == "timeout":
                config["aeron.cluster.election.timeout"] = value
        if "appointed" in options:
            fields["appointedLeaderId"] = int(options["appointed"])
        if "candidateTermId" in options:
            fields["nodeState"] = {"candidateTermId": int(options["candidateTermId"]), "logPosition": 0, "timestamp": 0}
        if "log" in options:
            fields["recordingLog"] = [term_entry(text) for text in options["log"].split(",")]
        if "append" in options:
            fields["appendPosition"] = int(options["append"])
        if config:
            fields["config"] = config
        timeout = Config.from_properties(fields.get("config")).election_timeout_ns
        self.lives[member_id] = 0
        random = self._random(member_id, options, timeout)
        event = Event(ts=self.now, node=member_id, dir="local", peer=None, channel="local", type="MemberStart", fields=fields)
        self._record(event)
        self._wire()
        self._run(lines, self.driver.start, member_id, member_start_of(event), random)

    def restart(self, member_id: int, options: dict[str, str], lines: list[str]) -> None:
        """A new process on the same cluster directory: node-state.dat, recording.log and the log
        recording as the member left them (a MemberStart that gives no files)."""
        merged = {**self.start_options.get(member_id, {}), **options}
        if "delay" not in options:
            merged.pop("delay", None)
        fields: dict[str, Any] = {"clusterMembers": members_string(self.member_count)}
        if "appointed" in merged:
            fields["appointedLeaderId"] = int(merged["appointed"])
        self.lives[member_id] = self.lives.get(member_id, 0) + 1
        random = self._random(member_id, merged, Config().election_timeout_ns)
        event = Event(ts=self.now, node=member_id, dir="local", peer=None, channel="local", type="MemberStart", fields=fields)
        self._record(event)
        self._run(lines, self.driver.start, member_id, member_start_of(event), random)

    def _random(self, member_id: int, options: Mapping[str, str], election_timeout_ns: int) -> ScriptedDelays:
        seed = int(options.get("seed", member_id))
        delays = [parse_duration_ns(d) for d in options["delay"].split(",")] if options.get("delay") else []
        life = (member_id, self.lives.get(member_id, 0))
        make_source = self.sources.get(life)
        source = make_source(lambda: self.now) if make_source is not None else None
        self.randoms[life] = ScriptedDelays(delays, election_timeout_ns, seed, source)
        return self.randoms[life]

    def local(self, member_id: int, kind: str, lines: list[str]) -> None:
        event = Event(ts=self.now, node=member_id, dir="local", peer=None, channel="local", type=kind, fields={})
        self._record(event)
        item = input_of(event)
        assert item is not None
        self._run(lines, self.driver.feed, member_id, item, self.now)

    def deliver(self, event: Event, lines: list[str]) -> None:
        member = self.members.get(event.node)
        if member is None or not member.running:
            return
        self._record(event)
        item = input_of(event)
        assert item is not None
        self._run(lines, self.driver.feed, event.node, item, event.ts)

    def advance(self, duration_ns: int, lines: list[str]) -> None:
        """Time passes to now + duration (see the class docstring)."""
        self._run(lines, self.driver.run_until, self.now + duration_ns)

    def _run(self, lines: list[str], action: Callable[..., Any], *args: Any) -> None:
        self._lines = lines
        try:
            action(*args)
        finally:
            self._lines = []

    def _arrive(self, at_ns: int, member_id: int, item: Input, send: Send) -> None:
        if self.recording is None:
            self.driver.feed_at(at_ns, member_id, item)
        else:
            self.driver.clock.at(at_ns, self._arrive_recorded, member_id, item, send)

    def _arrive_recorded(self, member_id: int, item: Input, send: Send) -> None:
        member = self.members.get(member_id)
        if member is None or not member.running:
            return
        self._record(_captured(send, "in", self.now))
        self.driver.feed(member_id, item, self.now)

    # -- outputs ----------------------------------------------------------------------------------------

    def _on_ready(self, member_id: int, ready: Ready) -> None:
        lines = self._lines
        router = self.router
        for output in ready:
            kind = type(output)
            if kind is NominationDraw:
                self._show(lines, "random", None, output.ts, f"{member_id} nomination delay {format_ts(output.delay_ns)}")
                continue
            if kind is Send:
                if self.recording is not None and output.peer is not None:
                    self._record(_captured(output, "out", output.ts))
                if router is not None:
                    router.route(output)
                self._show(lines, "send", output.type, output.ts, output.describe())
                continue
            record = output.to_json()
            self._show(lines, record["kind"], record.get("type"), output.ts, output.describe())

    def _show(self, lines: list[str], kind: str, type_name: str | None, ts: int, text: str) -> None:
        if type_name in self.hidden or (kind in self.hidden and type_name not in self.shown):
            return
        lines.append(f"{format_ts(ts)} {text}")

    def state_line(self, member_id: int) -> str:
        v = self.members[member_id].node.view()
        return (
            f"{member_id} {v.election_state.name} {v.role.name} term={v.leadership_term_id} logTerm={v.log_leadership_term_id}"
            f" cand={v.candidate_term_id} leader={v.leader_member_id} log={v.log_position}"
            f" append={v.append_position} commit={v.commit_position}"
        )

    def files_lines(self, member_id: int) -> list[str]:
        v = self.members[member_id].node.view()
        term = v.node_state.candidate_term
        out = [f"{member_id} node-state candidateTermId={term.candidate_term_id} logPosition={term.log_position}"]
        for entry in v.recording_log:
            out.append(describe_record({"kind": "recordingLog", "node": member_id, "op": "entry", "entry": entry_to_json(entry)}))
        return out


def _captured(send: Send, direction: str, ts: int) -> Event:
    """``send`` as a capture on the sender's (``out``) or the receiver's (``in``) host would show it."""
    extra = {"logPosition": send.log_position} if send.log_position is not None else None
    node, peer = (send.node, send.peer) if direction == "out" else (send.peer, send.node)
    return Event(ts=ts, node=node, dir=direction, peer=peer, channel=send.channel, type=send.type,
                 fields=send.message.to_fields(), extra=extra)


def term_entry(text: str) -> dict[str, Any]:
    """A recording.log TERM entry from ``TERM:BASE:POS`` (a ``log=`` option)."""
    term, base, position = (int(part) for part in text.split(":"))
    return {
        "recordingId": 0,
        "leadershipTermId": term,
        "termBaseLogPosition": base,
        "logPosition": position,
        "timestamp": 0,
        "serviceId": -1,
        "type": "TERM",
    }


# -- commands ----------------------------------------------------------------------------------------------

_ARROW = re.compile(r"^(\d+)(?:→|->)(\d+)$")

#: For a message whose member-id field is left out: which end of the arrow it names.
_IMPLIED_IDS = {
    "CanvassPosition": {"followerMemberId": "sender"},
    "RequestVote": {"candidateMemberId": "sender"},
    "Vote": {"candidateMemberId": "receiver", "followerMemberId": "sender"},
    "NewLeadershipTerm": {"leaderMemberId": "sender"},
    "AppendPosition": {"followerMemberId": "sender"},
    "CommitPosition": {"leaderMemberId": "sender"},
    "CatchupPosition": {"followerMemberId": "sender"},
    "StopCatchup": {"followerMemberId": "receiver"},
    "NewLeadershipTermEvent": {"leaderMemberId": "sender"},
}
#: Defaults for fields a scenario need not spell out.
_DEFAULTS = {
    "CanvassPosition": {"protocolVersion": 1 << 16},
    "RequestVote": {"protocolVersion": 1 << 16},
    "NewLeadershipTerm": {"appVersion": 1, "isStartup": "FALSE", "timestamp": 0, "leaderRecordingId": 0},
    "AppendPosition": {"flags": 0},
    "CatchupPosition": {"catchupEndpoint": ""},
}


def _options(words: list[str]) -> tuple[list[str], dict[str, str]]:
    positional, options = [], {}
    for word in words:
        if "=" in word:
            key, value = word.split("=", 1)
            options[key] = value
        else:
            positional.append(word)
    return positional, options


def _value(text: str) -> Any:
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def run_command(world: World, line: str) -> list[str]:
    """Run one command line against ``world``; the transcript lines it produced."""
    words = line.split()
    command, rest = words[0], words[1:]
    lines: list[str] = []
    positional, options = _options(rest)
    if command == "members":
        world.member_count = int(positional[0])
    elif command == "start":
        world.start(int(positional[0]), options, lines)
    elif command == "cluster":
        if positional:
            world.member_count = int(positional[0])
        if "latency" in options:
            world.latency_ns = parse_duration_ns(options["latency"])
        # delays=0:300ms/150ms,1:100ms: member 0 draws 300ms then 150ms, member 1 draws 100ms.
        delays = {k: v.replace("/", ",") for k, v in (item.split(":") for item in options.get("delays", "").split(",") if item)}
        for member_id in range(world.member_count):
            member_options = {k: v for k, v in options.items() if k not in ("latency", "delays")}
            if str(member_id) in delays:
                member_options["delay"] = delays[str(member_id)]
            world.start(member_id, member_options, lines)
    elif command == "restart":
        world.restart(int(positional[0]), options, lines)
    elif command in ("crash", "stop"):
        world.local(int(positional[0]), "MemberCrash" if command == "crash" else "MemberStop", lines)
    elif command == "deliver":
        world.deliver(_message_event(world, positional, options), lines)
    elif command == "advance":
        world.advance(parse_duration_ns(positional[0]), lines)
    elif command == "isolate":
        world.isolate(int(positional[0]))
    elif command == "heal":
        world.heal()
    elif command == "state":
        ids = [int(p) for p in positional] or sorted(world.members)
        lines.extend(world.state_line(i) for i in ids)
    elif command == "files":
        lines.extend(world.files_lines(int(positional[0])))
    elif command == "hide":
        world.hidden.update(positional)
        world.shown.difference_update(positional)
    elif command == "show":
        world.hidden.difference_update(positional)
        world.shown.update(positional)
    else:
        raise ValueError(f"unknown scenario command {command!r}")
    return lines


def _message_event(world: World, positional: list[str], options: dict[str, str]) -> Event:
    arrow, type_name = positional[0], positional[1]
    match = _ARROW.match(arrow)
    if match is None:
        raise ValueError(f"expected SENDER→RECEIVER, got {arrow!r}")
    sender, receiver = int(match.group(1)), int(match.group(2))
    channel = options.pop("channel", "consensus")
    log_position = None
    for word in positional[2:]:
        if word.startswith("@"):
            log_position = int(word[1:])
            channel = "log"
    fields: dict[str, Any] = dict(_DEFAULTS.get(type_name, {}))
    for name, end in _IMPLIED_IDS.get(type_name, {}).items():
        fields[name] = sender if end == "sender" else receiver
    fields.update({k: _value(v) for k, v in options.items()})
    message = from_fields(MESSAGE_CLASSES[type_name], fields)  # a missing field fails here, loudly
    return Event(
        ts=world.now,
        node=receiver,
        dir="in",
        peer=sender,
        channel=channel,
        type=type_name,
        fields=message.to_fields(),
        extra={"logPosition": log_position} if log_position is not None else None,
    )


# -- the file format -----------------------------------------------------------------------------------


@dataclass
class Stanza:
    preamble: list[str]
    commands: list[str]  # as written, comments included; `run_stanzas` skips those
    expected: list[str]
    line: int = 0  # where its first command stands in the file (1-based; 0 when not read from one)

    def xfail(self) -> str | None:
        """A ``# xfail: <why>`` comment before the stanza marks a known engine bug: the expectation
        stays as the reference says, the difference is reported as an expected failure."""
        for text in self.preamble + self.commands:
            if text.startswith("# xfail:"):
                return text[len("# xfail:"):].strip()
        return None

    def command_lines(self) -> list[str]:
        """The commands to run: the lines that are neither blank nor comments."""
        return [c for c in self.commands if c.strip() and not c.startswith("#")]


def parse_file(text: str) -> tuple[list[Stanza], list[str]]:
    """The stanzas of a scenario file, and the lines after the last one (its trailer)."""
    stanzas: list[Stanza] = []
    preamble: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            preamble.append(line)
            i += 1
            continue
        start = i + 1
        commands = []
        while i < len(lines) and lines[i] != "----":
            commands.append(lines[i])
            i += 1
        if i == len(lines):
            raise ValueError(f"line {start}: a stanza needs a ---- line")
        i += 1
        expected = []
        while i < len(lines) and lines[i].strip():
            expected.append(lines[i])
            i += 1
        stanzas.append(Stanza(preamble, commands, expected, start))
        preamble = []
    return stanzas, preamble


def render_file(stanzas: Sequence[Stanza], trailer: Sequence[str]) -> str:
    """The file text: `parse_file`'s inverse (byte for byte on a file it read)."""
    out: list[str] = []
    for stanza in stanzas:
        out.extend(stanza.preamble)
        out.extend(stanza.commands)
        out.append("----")
        out.extend(stanza.expected)
    out.extend(trailer if trailer else [""])
    text = "\n".join(out)
    return text if text.endswith("\n") else text + "\n"


def run_stanzas(stanzas: Sequence[Stanza], world: World | None = None) -> list[list[str]]:
    """Each stanza's transcript, the stanzas run in order against one world (a new one by default)."""
    world = world if world is not None else World()
    actual = []
    for stanza in stanzas:
        lines: list[str] = []
        for command in stanza.command_lines():
            lines.extend(run_command(world, command))
        actual.append(lines)
    return actual


def rewritten(stanzas: Sequence[Stanza], trailer: Sequence[str], actual: Sequence[Sequence[str]]) -> str:
    """The file with each transcript replaced by what the engine produced (``actual``), except where a
    stanza is marked ``# xfail:``: a known bug's expectation stays what the reference says."""
    stanzas = [
        stanza if stanza.xfail() is not None else Stanza(stanza.preamble, stanza.commands, list(lines), stanza.line)
        for stanza, lines in zip(stanzas, actual, strict=True)
    ]
    return render_file(stanzas, trailer)
