"""`recount export-scenario FILE -o X.txt`: a replay as a minimised datadriven scenario file."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from cli import output, progress
from cli.commands.replay import load_input
from cli.errors import UserError
from recorder.convert import check_output
from recorder.export_scenario import (
    DEFAULT_BUDGET,
    DEFAULT_HIDDEN,
    ExportError,
    export_scenario,
    parse_window,
)


def export_scenario_command(
    file: Annotated[str, typer.Argument(help="A capture or replay file (anything `recount replay` reads).", show_default=False)],
    out: Annotated[str, typer.Option("--out", "-o", help="The scenario file to write (*.txt).", show_default=False)],
    window: Annotated[
        str | None,
        typer.Option("--window", help="START..END from the start of the recording (2s..5s; either may be empty).",
                     show_default=False),
    ] = None,
    node: Annotated[
        list[int] | None, typer.Option("--node", help="Export only this member (repeat for more).", show_default=False)
    ] = None,
    budget: Annotated[int, typer.Option("--budget", min=0, help="At most this many runs to minimise.")] = DEFAULT_BUDGET,
    minimise: Annotated[bool, typer.Option("--minimise/--no-minimise", help="Drop deliveries that do not change the outcome.")] = True,
    show_all: Annotated[
        bool, typer.Option("--show-all", help=f"Show every message in the transcript (default hides {', '.join(DEFAULT_HIDDEN)}).")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite OUT if it exists.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON document (what was kept) on stdout.")] = False,
) -> None:
    """Write a datadriven scenario file that reproduces the recording (or a window of it), minimised."""
    try:
        target = check_output(out, force=force)
    except OSError as error:
        raise UserError(f"{error.filename}: {error.strerror}") from None
    try:
        bounds = parse_window(window)
        loaded = load_input(file)
        with progress.phase("exporting the scenario (replaying and minimising)"):
            exported = export_scenario(
                loaded.events,
                window=bounds,
                nodes=node or None,
                minimise=minimise,
                budget=budget,
                hidden=() if show_all else DEFAULT_HIDDEN,
                source=file,
                window_text=window,
            )
    except ExportError as error:
        raise UserError(str(error)) from None
    except OSError as error:
        raise UserError(f"{error.filename or file}: {error.strerror or error}") from None
    # Written beside the target and renamed, so a failure never leaves half a file.
    temporary = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    try:
        temporary.write_text(exported.text, encoding="utf-8")
        os.replace(temporary, target)
    finally:
        if temporary.exists():
            temporary.unlink()
    if json_output:
        output.print_json({"out": out, **exported.to_json()})
        return
    output.stderr.print(
        f"{out}: members {', '.join(map(str, exported.members))}; {exported.kept} of {exported.deliveries} deliveries kept"
        f" ({exported.runs} runs); outcome:",
        markup=False,
    )
    for line in exported.outcome:
        output.stderr.print(f"  {line}", markup=False)


def register(app: typer.Typer) -> None:
    app.command(
        "export-scenario",
        epilog=(
            "Examples:\n\n"
            "  recount export-scenario incident.arrow -o issue.txt\n\n"
            "  recount export-scenario incident.arrow --window 2s..6s --node 0 -o follower0.txt --budget 50\n\n"
            "  RECOUNT_REWRITE=0 pytest tests/test_scenarios.py   # after copying it into tests/testdata/election/"
        ),
    )(export_scenario_command)
