"""`recount export-scenario`: a replay (or a window of it) as a datadriven scenario file, minimised.

The output is a file in the format of ``tests/testdata/election/*.txt`` (stanzas of commands, a
``----`` line, the exact transcript), ready to attach to an issue report or to drop into the test
data: it reproduces what the model does with the recording, and the scenario runner checks it.

What the scenario holds.  It replays the recording the way node replay does (`engine.replay`):
every member is started (``start``) and cut off from the runner's router (``isolate``), so that
nothing the model sends reaches another member; each member then receives exactly what it received
in the recording (``deliver S→R Type field=value ...``, log frames with ``@position``, client ingress
with ``channel=ingress``) at the recorded time (``advance`` in between), and crashes, stops and
restarts as recorded.  Times are counted from the start of the window.  The last stanza is
``state``: each member's election state, role, terms and positions at the end, the *outcome*.

Nomination delays.  The runner draws them from a scripted list (``delay=…`` on ``start`` /
``restart``).  The list is what the member drew when the scenario was first run with the member's
own randomness: ``java.util.Random(MemberStart.seed)`` when the recording has a seed, otherwise the
delay implied by the member's recorded RequestVotes (as node replay's oracle does).

A window that starts after a member started begins it there, as a restart from the files it had
then (recording.log TERM entries, candidateTermId, append position, from a node replay up to that
time): the member runs a fresh startup election rather than continuing mid-term.

What cannot be said in the format, and is left out (counted in the header): local evidence events
(``RecordingSignal``, ``LogEndOfStream``, agent-log observations), recording.log snapshot entries,
application payload lengths of ingress (the runner's messages have none, so log positions after
client messages differ from the recording's), events whose text values contain spaces, and members
whose ids are not 0..N-1.

Minimising.  Delta debugging (Zeller's ddmin) over the ``deliver`` commands: a subset is kept when
the outcome (the final ``state`` lines) is the same as with every command, so messages that do not
change how the members end up are dropped; starts, crashes, stops and restarts are always kept.
The search runs the scenario at most ``budget`` times (deterministic: subsets are tried in a fixed
order), and the header says how many commands were kept.

The runner is engine.scenario's, the one tests/test_scenarios.py runs the test data with: each
run here is a `World` fed the exported commands, so an exported file passes that test as it is.
Pure apart from building text: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.model.config import Config, format_duration, parse_duration_ns
from engine.model.javarandom import JavaRandom
from engine.scenario import MS, SourceFactory, Stanza, World, render_file, run_command
from formats.errors import DecodeError
from formats.events import MESSAGE_CLASSES, Event

DEFAULT_HIDDEN = ("CanvassPosition", "AppendPosition", "CommitPosition")
DEFAULT_BUDGET = 200
_EVIDENCE = frozenset({"RecordingSignal", "LogEndOfStream"})


class ExportError(ValueError):
    """The recording cannot be exported as asked (one line, for the CLI)."""


def parse_window(text: str | None) -> tuple[int | None, int | None]:
    """``A..B`` (either may be empty): durations from the start of the recording (``2s``, ``1500ms``, ns)."""
    if text is None:
        return None, None
    if ".." not in text:
        raise ExportError(f"--window: expected START..END (durations such as 2s..5s, either may be empty), got {text!r}")
    start, end = (part.strip() for part in text.split("..", 1))
    try:
        low = parse_duration_ns(start) if start else None
        high = parse_duration_ns(end) if end else None
    except ValueError:
        raise ExportError(f"--window: expected durations such as 2s..5s, got {text!r}") from None
    if low is not None and high is not None and high < low:
        raise ExportError(f"--window: the end ({end}) is before the start ({start})")
    return low, high


# -- turning events into commands ---------------------------------------------------------------------------------


@dataclass
class _Step:
    """One command at one time (scenario time, ns); ``removable`` only for deliveries."""

    at: int
    text: str
    removable: bool


def _value_text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | str):
        text = str(value)
        return None if any(c.isspace() for c in text) else text
    return None


def _deliver_text(event: Event, sender: int) -> str | None:
    """``deliver S→R Type field=value ...`` for an inbound message event (None: not expressible)."""
    if event.type not in MESSAGE_CLASSES:
        return None
    try:
        fields = event.message().to_fields()
    except DecodeError:
        return None
    words = [f"deliver {sender}→{event.node} {event.type}"]
    for name, value in fields.items():
        text = _value_text(value)
        if text is None:
            return None
        words.append(f"{name}={text}")
    if event.channel == "log":
        position = (event.extra or {}).get("logPosition")
        if not isinstance(position, int):
            return None
        words.append(f"@{position}")
    elif event.channel == "ingress":
        words.append("channel=ingress")
    return " ".join(words)


def _start_options(fields: Mapping[str, Any], skipped: dict[str, int]) -> list[str]:
    """``start`` options from MemberStart fields (or from a member's state at the window start)."""
    options = []
    appointed = fields.get("appointedLeaderId")
    if isinstance(appointed, int) and appointed != -1:
        options.append(f"appointed={appointed}")
    node_state = fields.get("nodeState")
    if isinstance(node_state, Mapping):
        node_state = node_state.get("candidateTerm", node_state)
        term = node_state.get("candidateTermId", -1)
        if isinstance(term, int) and term != -1:
            options.append(f"candidateTermId={term}")
    entries = []
    for entry in fields.get("recordingLog") or []:
        if entry.get("type", "TERM") != "TERM" or entry.get("isValid") is False:
            skipped["recording.log entries that are not valid TERM entries"] = (
                skipped.get("recording.log entries that are not valid TERM entries", 0) + 1
            )
            continue
        entries.append(f"{entry['leadershipTermId']}:{entry['termBaseLogPosition']}:{entry['logPosition']}")
    if entries:
        options.append("log=" + ",".join(entries))
    append = fields.get("appendPosition")
    if isinstance(append, int):
        options.append(f"append={append}")
    config = fields.get("config") or {}
    if isinstance(config, Mapping):
        for name in sorted(config):
            text = _value_text(config[name])
            if text is not None:
                options.append(f"config.{name}={text}")
    return options


class _Recorded:
    """The recording's own randomness for one member life (the first run draws from it)."""

    def __init__(self, seed: int | None, nominations_ns: Sequence[int], election_timeout_ns: int) -> None:
        self.seed = seed
        self.nominations_ns = list(nominations_ns)
        self.half_ns = election_timeout_ns >> 1

    def source(self, clock: Callable[[], int]) -> Any:
        if self.seed is not None:
            return JavaRandom(self.seed)
        return _Oracle(self.nominations_ns, self.half_ns, clock)


class _Oracle:
    """The nextDouble() that puts a nomination at the member's next recorded RequestVote (node replay's rule)."""

    def __init__(self, nominations_ns: Sequence[int], half_ns: int, clock: Callable[[], int]) -> None:
        self.times = sorted(nominations_ns)
        self.half_ns = half_ns
        self.clock = clock
        self.used = 0
        self.fallback = JavaRandom(0)

    def next_double(self) -> float:
        now = self.clock()
        now_tick = now - now % MS
        while self.used < len(self.times):
            target = self.times[self.used] - self.times[self.used] % MS
            self.used += 1
            delay = target - now_tick
            if 0 <= delay < self.half_ns:
                return (delay + 0.5) / self.half_ns
        return self.fallback.next_double()


@dataclass
class Export:
    text: str
    members: list[int]
    deliveries: int
    kept: int
    runs: int
    outcome: list[str]
    skipped: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return {
            "members": self.members,
            "deliveries": self.deliveries,
            "kept": self.kept,
            "runs": self.runs,
            "outcome": self.outcome,
            "skipped": dict(sorted(self.skipped.items())),
        }


def export_scenario(
    events: Sequence[Event],
    *,
    window: tuple[int | None, int | None] = (None, None),
    nodes: Iterable[int] | None = None,
    minimise: bool = True,
    budget: int = DEFAULT_BUDGET,
    hidden: Sequence[str] = DEFAULT_HIDDEN,
    source: str = "",
    window_text: str | None = None,
) -> Export:
    """The scenario file text for ``events`` (see the module docstring)."""
    ordered = [events[i] for i in sorted(range(len(events)), key=lambda i: (events[i].ts, i))]
    starts = [e for e in ordered if e.dir == "local" and e.type == "MemberStart"]
    if not starts:
        raise ExportError("the recording has no MemberStart: nothing to start")
    all_ids = sorted({e.node for e in starts})
    if all_ids != list(range(len(all_ids))):
        raise ExportError(f"the scenario format numbers members 0..N-1; this recording has members {all_ids}")
    chosen = sorted(set(nodes)) if nodes is not None else all_ids
    unknown = [n for n in chosen if n not in all_ids]
    if unknown:
        raise ExportError(f"--node {unknown[0]}: no such member (members: {', '.join(map(str, all_ids))})")
    origin = ordered[0].ts
    low = origin + window[0] if window[0] is not None else origin
    high = origin + window[1] if window[1] is not None else ordered[-1].ts
    skipped: dict[str, int] = {}
    steps, recorded = _steps(ordered, chosen, low, high, skipped)
    count = len(all_ids)
    header_lines = ["members " + str(count), *[f"isolate {m}" for m in chosen]]
    if hidden:
        header_lines.append("hide " + " ".join(hidden))

    def run(kept: Sequence[_Step], sources: Mapping[tuple[int, int], SourceFactory]) -> tuple[list[list[str]], list[str], World]:
        world = World(sources=sources)
        outputs = [run_command(world, line) for line in [*header_lines, *_timed(kept), "state"]]
        return outputs, outputs[-1], world

    sources = {key: value.source for key, value in recorded.items()}
    first_outputs, outcome, world = run(steps, sources)
    steps = _with_delays(steps, world)
    _, check, _ = run(steps, {})
    runs = 0
    if check != outcome:  # the scripted delays must give the same run as the recording's randomness
        raise AssertionError("exported delays do not reproduce the run")
    deliveries = sum(1 for s in steps if s.removable)
    kept = steps
    if minimise and deliveries:
        kept, used = _ddmin(steps, lambda subset: run(subset, {})[1] == outcome, budget)
        kept = _with_delays(kept, run(kept, {})[2])
        runs = used
    outputs, final, _ = run(kept, {})
    if final != outcome:
        raise AssertionError("the minimised scenario lost the outcome")
    text = _render(header_lines, _timed(kept), outputs, source=source, window_text=window_text, chosen=chosen,
                   deliveries=deliveries, kept=sum(1 for s in kept if s.removable), runs=runs, skipped=skipped,
                   minimise=minimise, budget=budget)
    return Export(text, chosen, deliveries, sum(1 for s in kept if s.removable), runs, outcome, skipped)


def _steps(
    ordered: Sequence[Event], chosen: Sequence[int], low: int, high: int, skipped: dict[str, int]
) -> tuple[list[_Step], dict[tuple[int, int], _Recorded]]:
    """Commands for the chosen members' inputs in [low, high], and each member life's randomness."""
    steps: list[_Step] = []
    recorded: dict[tuple[int, int], _Recorded] = {}
    lives: dict[int, int] = {}
    started: set[int] = set()
    nominations: dict[int, list[int]] = {}
    seen_terms: dict[int, set[Any]] = {}
    for event in ordered:
        if event.dir == "out" and event.type == "RequestVote" and event.node in chosen:
            term = event.fields.get("candidateTermId")
            if term not in seen_terms.setdefault(event.node, set()):
                seen_terms[event.node].add(term)
                nominations.setdefault(event.node, []).append(event.ts - low)
    before = _state_before(ordered, chosen, low)
    for member_id, fields in sorted(before.items()):
        options = _start_options(fields, skipped)
        steps.append(_Step(0, f"start {member_id} " + " ".join(options) if options else f"start {member_id}", False))
        started.add(member_id)
        timeout = _timeout(fields)
        recorded[(member_id, 0)] = _Recorded(_seed(fields), nominations.get(member_id, []), timeout)
        lives[member_id] = 0
    for event in ordered:
        if event.ts < low or event.ts > high or event.node not in chosen:
            continue
        at = event.ts - low
        node = event.node
        if event.dir == "local" and event.type == "MemberStart":
            if node in started:
                lives[node] += 1
                steps.append(_Step(at, f"restart {node}", False))
                if any(k in event.fields for k in ("recordingLog", "nodeState", "appendPosition")):
                    skipped["files given by a restart's MemberStart"] = skipped.get("files given by a restart's MemberStart", 0) + 1
            else:
                lives[node] = 0
                started.add(node)
                options = _start_options(event.fields, skipped)
                steps.append(_Step(at, f"start {node} " + " ".join(options) if options else f"start {node}", False))
            recorded[(node, lives[node])] = _Recorded(_seed(event.fields), nominations.get(node, []), _timeout(event.fields))
        elif node not in started:
            continue
        elif event.dir == "local" and event.type in ("MemberCrash", "MemberStop"):
            steps.append(_Step(at, f"{'crash' if event.type == 'MemberCrash' else 'stop'} {node}", False))
        elif event.dir == "in" and event.channel in ("consensus", "log", "ingress"):
            sender = event.peer if event.channel != "ingress" and event.peer is not None else node
            text = _deliver_text(event, sender)
            if text is None:
                skipped["messages the format cannot spell"] = skipped.get("messages the format cannot spell", 0) + 1
            else:
                steps.append(_Step(at, text, True))
                if event.channel == "ingress":
                    skipped["ingress payload lengths (positions after client messages differ)"] = (
                        skipped.get("ingress payload lengths (positions after client messages differ)", 0) + 1
                    )
        elif event.dir == "local" and event.type in _EVIDENCE:
            skipped[f"{event.type} events"] = skipped.get(f"{event.type} events", 0) + 1
    end = high - low
    steps.append(_Step(end, "", False))  # the end of the window: the last advance
    return steps, recorded


def _seed(fields: Mapping[str, Any]) -> int | None:
    seed = fields.get("seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def _timeout(fields: Mapping[str, Any]) -> int:
    try:
        return Config.from_properties(fields.get("config") if isinstance(fields.get("config"), Mapping) else None).election_timeout_ns
    except ValueError:
        return Config().election_timeout_ns


def _state_before(ordered: Sequence[Event], chosen: Sequence[int], low: int) -> dict[int, dict[str, Any]]:
    """MemberStart-like fields for the chosen members already started before ``low``."""
    early = [e for e in ordered if e.ts < low]
    started = sorted({e.node for e in early if e.dir == "local" and e.type == "MemberStart" and e.node in chosen})
    if not started:
        return {}
    from engine.replay import ReplaySession

    session = ReplaySession(early)
    session.seek(len(session))
    views = session.views()
    fields: dict[int, dict[str, Any]] = {}
    for member_id in started:
        view = views.get(member_id)
        if view is None or not view.is_running:
            continue
        state = view.to_json()
        node_state = state.get("nodeState") or {}
        fields[member_id] = {
            "recordingLog": state.get("recordingLog") or [],
            "nodeState": node_state,
            "appendPosition": state.get("appendPosition"),
        }
        # No seed: a generator mid-run is not at its start; the recorded RequestVotes set the delays.
        start = next(e for e in reversed(early) if e.node == member_id and e.type == "MemberStart")
        for key in ("appointedLeaderId", "config"):
            if key in start.fields:
                fields[member_id][key] = start.fields[key]
    return fields


def _with_delays(steps: Sequence[_Step], world: World) -> list[_Step]:
    """The steps with each start/restart given the delays its member life drew in ``world``'s run."""
    lives: dict[int, int] = {}
    out = []
    for step in steps:
        words = step.text.split()
        if words and words[0] in ("start", "restart"):
            member_id = int(words[1])
            life = 0 if words[0] == "start" else lives.get(member_id, 0) + 1
            lives[member_id] = life
            random = world.randoms.get((member_id, life))
            delays = random.draws if random is not None else []
            kept_words = [w for w in words if not w.startswith("delay=")]
            if delays:
                kept_words.append("delay=" + ",".join(format_duration(d) for d in delays))
            out.append(_Step(step.at, " ".join(kept_words), step.removable))
        else:
            out.append(step)
    return out


def _timed(steps: Sequence[_Step]) -> list[str]:
    """The commands with ``advance`` between steps of different times."""
    commands: list[str] = []
    now = 0
    for step in steps:
        if step.at > now:
            commands.append(f"advance {format_duration(step.at - now)}")
            now = step.at
        if step.text:
            commands.append(step.text)
    return commands


def _ddmin(steps: list[_Step], keeps_outcome: Callable[[list[_Step]], bool], budget: int) -> tuple[list[_Step], int]:
    """Zeller's ddmin over the removable steps, at most ``budget`` runs of ``keeps_outcome``."""
    fixed = [i for i, s in enumerate(steps) if not s.removable]
    items = [i for i, s in enumerate(steps) if s.removable]
    runs = 0

    def build(chosen: Sequence[int]) -> list[_Step]:
        keep = set(fixed) | set(chosen)
        return [s for i, s in enumerate(steps) if i in keep]

    granularity = 2
    while len(items) >= 2 and runs < budget:
        size = max(1, len(items) // granularity)
        chunks = [items[i : i + size] for i in range(0, len(items), size)]
        reduced = False
        for chunk in chunks:  # try a subset
            if runs >= budget:
                break
            runs += 1
            if keeps_outcome(build(chunk)):
                items, granularity, reduced = chunk, 2, True
                break
        if not reduced:
            for chunk in chunks:  # try a complement
                if runs >= budget:
                    break
                complement = [i for i in items if i not in set(chunk)]
                runs += 1
                if keeps_outcome(build(complement)):
                    items, granularity, reduced = complement, max(granularity - 1, 2), True
                    break
        if not reduced:
            if granularity >= len(items):
                break
            granularity = min(len(items), granularity * 2)
    if len(items) == 1 and runs < budget:
        runs += 1
        if keeps_outcome(build([])):
            items = []
    return build(items), runs


def _render(
    header_lines: Sequence[str],
    commands: Sequence[str],
    outputs: Sequence[Sequence[str]],
    *,
    source: str,
    window_text: str | None,
    chosen: Sequence[int],
    deliveries: int,
    kept: int,
    runs: int,
    skipped: Mapping[str, int],
    minimise: bool,
    budget: int,
) -> str:
    lines = [
        f"# Exported by `recount export-scenario` from {source or 'a recording'}"
        + (f", window {window_text}" if window_text else "")
        + "; times are from the start of the window.",
        f"# Members {', '.join(map(str, chosen))} run the Aeron 1.47.3 model, each cut off from the others and fed",
        "# exactly what it received in the recording (node replay); the last stanza is the outcome.",
    ]
    if minimise:
        lines.append(f"# Minimised by delta debugging ({runs} of at most {budget} runs): {kept} of {deliveries} deliveries"
                     " kept; the others do not change the outcome.")
    for what, count in sorted(skipped.items()):
        lines.append(f"# Left out (the format cannot say it): {count} {what}.")
    stanzas: list[Stanza] = []
    preamble = [*lines, ""]
    pending: list[str] = []
    all_commands = list(header_lines) + list(commands) + ["state"]
    last = len(all_commands) - 1
    for index, (command, produced) in enumerate(zip(all_commands, outputs, strict=True)):
        pending.append(command)
        # A stanza ends at the header's end, at each command that produced lines, and at the end.
        if produced or index == len(header_lines) - 1 or index == last:
            stanzas.append(Stanza(preamble, pending, list(produced)))
            preamble, pending = [""], []
    return render_file(stanzas, [""])
