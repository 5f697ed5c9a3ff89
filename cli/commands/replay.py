"""`recount replay`: re-run each member from its own recorded inbound events (contract §3)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from cli import output, progress, render_capture
from cli.errors import UserError
from cli.options import DURATION, Mode, Nomination, duration_ns
from engine.model.config import format_duration
from engine.replay import (
    DEFAULT_STATE_TOLERANCE_NS,
    DEFAULT_TOLERANCE_NS,
    MODELS,
    UnknownModelError,
    replay_byte_blocks,
    replay_timeline_blocks,
)
from engine.trace import encode_record
from engine.versions import BASELINE, flags_for_version, model_for, model_from_evidence
from formats.errors import DecodeError
from recorder import convert as loader
from recorder.version_evidence import evidence_of

#: What `recount replay` (and diff, bisect, export-scenario) read, for error messages.
INPUTS = ("a replay file (*.arrow), a capture (*.jsonl, *.pcap, *.pcapng, an agent log, a cluster dir),"
          " or an incident directory or .tar.gz holding captures")


def check_input(file: str) -> None:
    """Fail with one line when ``file`` is missing, before its name is taken for a format."""
    if not Path(file).exists():
        raise UserError(f"{file}: no such file (expected {INPUTS})")


def load_input(file: str) -> loader.LoadedEvents:
    """Read anything `recount replay` reads; one line naming the file when it is missing, unreadable
    or holds no events (a replay of nothing would report success on an empty or wrong file).

    A directory or tarball is an incident converted in memory: what was found in it and how it was
    assigned to members goes to stderr; so do warnings about members whose side the inputs do not show."""
    check_input(file)
    try:
        with progress.phase(f"reading {file}"):
            loaded = loader.load(file)
    except OSError as error:
        raise UserError(f"{error.filename or file}: {error.strerror or error}") from None
    except ValueError as error:  # a directory with nothing recount reads, a tarball that cannot be unpacked
        raise UserError(str(error)) from None
    if not loaded.events:
        raise UserError(f"{file}: holds no events (expected {INPUTS})")
    report_evidence(loaded)
    return loaded


def report_evidence(loaded: loader.LoadedEvents) -> None:
    """On stderr, before any result: what a directory held, and what the inputs do not show."""
    from recorder.evidence import coverage

    if loaded.summary is not None:
        render_capture.print_found(loaded.summary)
        capture = loaded.summary.get("capture")
        if capture is not None:
            render_capture.print_summary(capture)
    render_capture.print_warnings(coverage(loaded.events, loaded.cluster_members).warnings())


def check_until(until_ns: int | None, loaded: loader.LoadedEvents, file: str) -> None:
    """Refuse an ``--until`` before the first event: the replay would be empty and look like success.
    Captures carry epoch timestamps, so ``--until 2500ms`` there means 1970; say what would work."""
    if until_ns is None or not loaded.events:
        return
    check_until_at(until_ns, min(event.ts for event in loaded.events), file)


def check_until_at(until_ns: int | None, first: int, file: str) -> None:
    """`check_until`, given the first event's ts."""
    if until_ns is not None and until_ns < first:
        text = format_duration(until_ns)
        raise UserError(f"--until {text}: before the first event of {file} (ts {first} ns); times are the "
                        f"recording's own ts in ns, e.g. --until {first + max(until_ns, 0)} for {text} after it")


def open_replay_file(file: str) -> loader.ReplayFileInput:
    """A replay file opened to be streamed (`recorder.convert.ReplayFileInput`: its first pass checks
    every batch); one line naming the file when it is unreadable or holds no events, and the coverage
    warnings on stderr, as `load_input` gives them."""
    check_input(file)
    try:
        with progress.phase(f"reading {file}"):
            opened = loader.ReplayFileInput(file)
    except OSError as error:
        raise UserError(f"{error.filename or file}: {error.strerror or error}") from None
    if not opened.rows:
        raise UserError(f"{file}: holds no events (expected {INPUTS})")
    render_capture.print_warnings(opened.coverage().warnings())
    return opened


def streams(file: str, mode: Mode) -> bool:
    """Is ``file`` replayed as it is read (a replay file, in node mode), rather than loaded whole first?"""
    path = Path(file)
    return mode == Mode.node and path.is_file() and path.name.lower().endswith(loader.REPLAY_READERS["arrow"].suffixes)


def choose_model(explicit: str | None, evidence: list[dict]) -> tuple[str, dict]:
    """The model to replay under: ``--model``, else the version the capture shows (``evidence``:
    `recorder.version_evidence.evidence_of`), else the baseline.

    Says so on stderr (a warning when ``--model`` clashes with the evidence); the returned dict is the
    summary's ``modelChosen``: ``model``, ``from`` (option / evidence / default), ``evidence``, ``why``.
    """
    shown, why = model_from_evidence(evidence)
    if explicit is not None:
        if shown is not None and flags_for_version(shown) != _flags_of(explicit):
            output.warn(f"--model {explicit} overrides the Aeron {shown} the capture shows ({why})")
        return explicit, {"model": explicit, "from": "option", "evidence": shown, "why": why}
    if shown is None:
        return BASELINE, {"model": BASELINE, "from": "default", "evidence": None, "why": why}
    output.stderr.print(f"note: replaying with model {shown}, the version the capture shows ({why});"
                        " --model overrides", markup=False)
    return shown, {"model": shown, "from": "evidence", "evidence": shown, "why": why}


def _block_ts(block: list[Any] | bytes) -> int | None:
    """The time a block of trace lines or records reached (its last one's; a block of bytes ends with a newline)."""
    if type(block) is bytes:
        return progress.record_ts(block[block.rfind(b"\n", 0, len(block) - 1) + 1:-1].decode("utf-8"))
    return progress.record_ts(block[-1])


def _bytes_writer() -> Any:
    """Where the bytes of ``--json`` go: standard output's own buffer (what it holds in text flushed first), or
    its text layer when it has no buffer (a test's capture)."""
    stdout = sys.stdout
    buffer = getattr(stdout, "buffer", None)
    if buffer is None:
        return lambda data: stdout.write(data.decode("utf-8"))
    stdout.flush()
    return buffer.write


def _flags_of(name: str):
    try:
        return model_for(name).flags
    except ValueError:
        return None


def replay_command(
    file: Annotated[str, typer.Argument(help="A replay file (*.arrow), any capture `recount convert` reads, or an incident directory (or .tar.gz) holding them.", metavar="FILE", show_default=False)],
    node: Annotated[
        list[int] | None, typer.Option("--node", help="Replay only this member (repeat for more).", show_default=False)
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Aeron version to model: any release or user model listed by `recount versions`"
                     " (default: the version the capture shows, else 1.47.3).", show_default=False),
    ] = None,
    mode: Annotated[
        Mode,
        typer.Option("--mode", help="node: each member re-run from its own recorded inputs, compared with what it sent;"
                                    " cluster: all members re-run together, messages between them made by the model."),
    ] = Mode.node,
    seed: Annotated[
        int | None,
        typer.Option("--seed", help="Base seed: member N draws from java.util.Random(seed + N). Default: MemberStart.seed, else 0."),
    ] = None,
    until: Annotated[
        int | None,
        typer.Option("--until", help="Stop at this time (ns, or a duration such as 2500ms).", parser=duration_ns,
                     metavar=DURATION, show_default=False),
    ] = None,
    nomination: Annotated[
        Nomination,
        typer.Option(
            "--nomination",
            help="Nomination delay source: seeded (java.util.Random), recorded (implied by the recording's RequestVote times), or auto.",
        ),
    ] = Nomination.auto,
    tolerance: Annotated[
        int,
        typer.Option("--tolerance", help="How far apart in time a send and its recorded counterpart may be.",
                     parser=duration_ns, metavar=DURATION, show_default=format_duration(DEFAULT_TOLERANCE_NS)),
    ] = DEFAULT_TOLERANCE_NS,
    state_tolerance: Annotated[
        int,
        typer.Option("--state-tolerance", help="How far apart in time a modelled state or role change and the one the"
                     " member's agent log shows may be.", parser=duration_ns, metavar=DURATION,
                     show_default=format_duration(DEFAULT_STATE_TOLERANCE_NS)),
    ] = DEFAULT_STATE_TOLERANCE_NS,
    heartbeats: Annotated[
        bool, typer.Option("--heartbeats", help="Show every periodic position send; by default a repeat of the"
                                                " last value sent to that peer is hidden (text timeline only).")
    ] = False,
    wall_clock: Annotated[
        bool, typer.Option("--wall-clock", help="Show each record's time as UTC instead of seconds from the first.")
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="JSON Lines on stdout: one trace record per line, summary last.")] = False,
) -> None:
    """Re-run each member from its own recorded inbound events and show where it would differ."""
    if mode == Mode.cluster:
        try:
            model is None or model_for(model)
        except ValueError as error:
            raise UserError(str(error)) from None
        if node:
            raise UserError("--node applies to --mode node only: a cluster replay runs every member")
    elif model is not None and model not in MODELS:
        raise UserError(str(UnknownModelError(model)))
    until_ns, tolerance_ns = until, tolerance
    if streams(file, mode):
        opened = open_replay_file(file)
        check_until_at(until_ns, opened.first_ts, file)
        members, evidence = list(opened.nodes), opened.evidence
        first, last_ts = opened.first_ts, opened.last_ts
        source, refs, ref_kind = opened.ordered(until_ns), None, opened.ref_kind
        lifecycle_events: list = opened.lifecycle_events()
    else:
        loaded = load_input(file)
        check_until(until_ns, loaded, file)
        members = sorted({event.node for event in loaded.events})
        evidence = evidence_of(loaded.events, loaded.metadata)
        first = min(event.ts for event in loaded.events)
        last_ts = max(event.ts for event in loaded.events)
        source, refs, ref_kind = loaded.events, loaded.refs, loaded.ref_kind
        lifecycle_events = loaded.events
    missing = [n for n in node or () if n not in members]
    if missing:
        raise UserError(f"--node {missing[0]}: no member {missing[0]} in {file} (members: {', '.join(map(str, members))})")
    model, chosen = choose_model(model, evidence)
    if mode == Mode.cluster:
        from engine.cluster_replay import cluster_replay  # here: a node replay never needs it

        records = cluster_replay(
            loaded.events, model=model, seed=seed, until=until_ns, nomination=nomination.value, refs=loaded.refs,
            ref_kind=loaded.ref_kind,
        )
        lines = None
    else:
        options = dict(
            nodes=node or None,
            until=until_ns,
            seed=seed,
            model=model,
            nomination=nomination.value,
            tolerance_ns=tolerance_ns,
            state_tolerance_ns=state_tolerance,
            refs=refs,
            ref_kind=ref_kind,
        )
        if json_output:  # each record encoded once, a chunk's lines joined once: the bytes the trace hash is over
            lines = replay_byte_blocks(source, **options)
        else:  # the timeline writes the lane's records from their values, a chunk at a time (`render_replay`)
            records = replay_timeline_blocks(source, **options)
    last = min(last_ts, until_ns if until_ns is not None else 1 << 62)
    try:
        if json_output and lines is not None:
            write = _bytes_writer()
            # a chunk of the replay's lines at a time, as the bytes they were hashed as, the summary alone last
            for block in progress.tracked(lines, "replaying", first, last, _block_ts, every=1):
                if block.startswith(b'{"kind":"summary"'):  # the last line: say where the model came from
                    block = block[:-2] + b',"modelChosen":' + json.dumps(chosen, separators=(",", ":")).encode() + b"}\n"
                write(block)
        elif json_output:
            write = sys.stdout.write
            for block in progress.tracked(([encode_record(r)] for r in records), "replaying", first, last, _block_ts):
                last_line = block[-1]
                if last_line.startswith('{"kind":"summary"'):  # the last line: say where the model came from
                    block[-1] = last_line[:-1] + ',"modelChosen":' + json.dumps(chosen, separators=(",", ":")) + "}"
                write("\n".join(block) + "\n")
        else:
            from cli import render_replay  # here: --json never needs rich's tables

            blocks = mode != Mode.cluster  # node replay gives its records a chunk at a time
            tracked = (progress.tracked(records, "replaying", first, last, _block_ts, every=1) if blocks
                       else progress.tracked(records, "replaying", first, last, progress.record_ts))
            render_replay.print_timeline(output.stdout, tracked, source=file, heartbeats=heartbeats,
                                         wall_clock=wall_clock, blocks=blocks,
                                         lifecycle=[] if mode == Mode.cluster else [
                                             one for one in render_replay.lifecycle_of(lifecycle_events, until_ns)
                                             if not node or one.node in node])
    except DecodeError as error:
        raise error.with_context(source=error.source or file) from None


def register(app: typer.Typer) -> None:
    app.command(
        "replay",
        epilog=(
            "Examples:\n\n"
            "  recount replay election.arrow\n\n"
            "  recount replay samples/leader-failover      (an incident directory: what it holds is converted in memory)\n\n"
            "  recount replay election.jsonl --node 1 --until 2500ms\n\n"
            "  recount replay incident.arrow --heartbeats --wall-clock   (every position send, times in UTC)\n\n"
            "  recount replay election.arrow --seed 7 --json | jq 'select(.kind==\"divergence\")'\n\n"
            "  recount replay incident.arrow --mode cluster --model 1.41.0"
        ),
    )(replay_command)
