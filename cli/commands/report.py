"""`recount report FILE -o incident.html`: the replay as one self-contained HTML page to attach to an issue."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from cli import output
from cli.commands.replay import load_input
from cli.errors import UserError
from engine.replay import MODELS, UnknownModelError
from formats.errors import DecodeError
from recorder.report import Incident, build_incident

#: The options `report` and `export` share.
ModelOption = Annotated[
    str, typer.Option("--model", help="Aeron version to model: any release or user model listed by `recount versions`.")
]
SeedOption = Annotated[
    int | None,
    typer.Option("--seed", help="Base seed: member N draws from java.util.Random(seed + N). Default: MemberStart.seed, else 0.",
                 show_default=False),
]
ForceOption = Annotated[bool, typer.Option("--force", help="Overwrite OUT if it exists.")]


def check_output(out: str, force: bool) -> Path:
    """Refuse, before any work, an output that exists (without ``force``), is a directory, or has no
    directory to go in; every message names the path as the user gave it."""
    target = Path(out)
    if target.is_dir():
        raise UserError(f"{out}: is a directory, expected a file name")
    if target.exists() and not force:
        raise UserError(f"{out}: exists (use --force to overwrite it)")
    parent = target.parent
    if not parent.is_dir():
        raise UserError(f"{out}: directory {parent} does not exist")
    return target


def write_output(out: str, text: str) -> int:
    """Write ``text`` beside ``out`` and rename it over ``out``, so a failure never leaves half a file.
    Returns the bytes written."""
    target = Path(out)
    temporary = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    data = text.encode("utf-8")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, target)
    except OSError as error:
        raise UserError(f"{out}: {error.strerror or error}") from None
    finally:
        if temporary.exists():
            temporary.unlink()
    return len(data)


#: Replays of fewer events than this take about a second or less: no progress bar.
PROGRESS_MIN_EVENTS = 50_000


def load_incident(file: str, *, model: str, seed: int | None) -> Incident:
    """Read what `recount replay` reads and node-replay it into an `Incident` (a progress bar on
    stderr for long recordings)."""
    if model not in MODELS:
        raise UserError(str(UnknownModelError(model)))
    loaded = load_input(file)
    options = dict(source=file, refs=loaded.refs, ref_kind=loaded.ref_kind, model=model, seed=seed)
    try:
        if len(loaded.events) < PROGRESS_MIN_EVENTS:
            return build_incident(loaded.events, **options)
        columns = (TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        with Progress(*columns, console=output.stderr, transient=True) as progress:
            task = progress.add_task("replay", total=len(loaded.events))
            return build_incident(loaded.events, **options,
                                  on_progress=lambda done, total: progress.update(task, completed=done))
    except DecodeError as error:
        raise error.with_context(source=error.source or file) from None


def report_command(
    file: Annotated[str, typer.Argument(help="A capture or replay file (anything `recount replay` reads).", metavar="FILE",
                                        show_default=False)],
    out: Annotated[str, typer.Option("--out", "-o", help="The HTML page to write.", show_default=False)],
    model: ModelOption = "1.47.3",
    seed: SeedOption = None,
    force: ForceOption = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON document (what the report holds) on stdout.")] = False,
) -> None:
    """Write an incident as one self-contained HTML page, to attach to an issue.

    The page (inline SVG and CSS, nothing fetched) has each member's swimlanes, the leader of each term, every election as a sequence diagram, the divergences and invariant violations, and each member's node-state.dat and recording.log at start and end."""  # noqa: E501 - one paragraph for the help
    from recorder.report.html import render_html

    check_output(out, force)
    incident = load_incident(file, model=model, seed=seed)
    command = f"recount report {file}" + (f" --model {model}" if model != "1.47.3" else "") + (
        f" --seed {seed}" if seed is not None else "")
    size = write_output(out, render_html(incident, command=command))
    if json_output:
        output.print_json({"out": out, "bytes": size, **incident.to_json()})
        return
    output.stderr.print(
        f"{out}: {len(incident.members)} members, {len(incident.elections)} election(s), "
        f"{len(incident.terms)} term(s) with a leader, {len(incident.divergences)} divergence(s), "
        f"{len(incident.invariants)} invariant violation(s); {size} bytes",
        markup=False,
    )


def register(app: typer.Typer) -> None:
    app.command(
        "report",
        epilog=(
            "Examples:\n\n"
            "  recount report samples/leader-failover/incident.arrow -o incident.html\n\n"
            "  recount report capture.pcapng -o incident.html --force --json | jq .terms\n\n"
            "  recount report incident.arrow -o under-1.41.html --model 1.41.0"
        ),
    )(report_command)
