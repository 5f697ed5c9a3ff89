"""`recount export FILE --format perfetto -o trace.json`: the replay as a trace for Perfetto UI or chrome://tracing."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from cli import output
from cli.commands.report import (
    ForceOption,
    ModelOption,
    SeedOption,
    check_output,
    load_incident,
    write_output,
)
from cli.options import ExportFormat


def export_command(
    file: Annotated[str, typer.Argument(help="A capture or replay file (anything `recount replay` reads).", metavar="FILE",
                                        show_default=False)],
    out: Annotated[str, typer.Option("--out", "-o", help="The file to write (trace.json).", show_default=False)],
    format_name: Annotated[
        ExportFormat, typer.Option("--format", help="perfetto: Chrome trace-event JSON (Perfetto UI, chrome://tracing).")
    ] = ExportFormat.perfetto,
    model: ModelOption = "1.47.3",
    seed: SeedOption = None,
    force: ForceOption = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON document (what was written) on stdout.")] = False,
) -> None:
    """Write the replay as a Chrome trace for Perfetto UI or chrome://tracing.

    Chrome trace-event JSON: a process per member with election-state and role slices, an instant for every consensus message sent or received, a flow arrow from each send to its receipt, and the divergences and invariant violations marked."""  # noqa: E501 - one paragraph for the help
    from recorder.report.perfetto import trace_document

    check_output(out, force)
    incident = load_incident(file, model=model, seed=seed)
    document = trace_document(incident)
    size = write_output(out, json.dumps(document, separators=(",", ":"), ensure_ascii=False) + "\n")
    events = document["traceEvents"]
    counts = {
        "traceEvents": len(events),
        "slices": sum(1 for e in events if e["ph"] == "B"),
        "instants": sum(1 for e in events if e["ph"] == "i"),
        "flows": sum(1 for e in events if e["ph"] == "s"),
    }
    if json_output:
        output.print_json({"out": out, "format": format_name, "bytes": size, "members": list(incident.members), **counts,
                           "divergences": len(incident.divergences), "invariants": len(incident.invariants)})
        return
    output.stderr.print(
        f"{out}: {counts['traceEvents']} trace events ({counts['slices']} slices, {counts['instants']} instants, "
        f"{counts['flows']} flows) for members {', '.join(map(str, incident.members))}; open it in ui.perfetto.dev "
        "(Open trace file) or chrome://tracing (Load)",
        markup=False,
    )


def register(app: typer.Typer) -> None:
    app.command(
        "export",
        epilog=(
            "Examples:\n\n"
            "  recount export samples/leader-failover/incident.arrow -o trace.json\n\n"
            "  recount export capture.pcapng --format perfetto -o trace.json --force --json\n\n"
            "Then open trace.json in ui.perfetto.dev (Open trace file) or chrome://tracing (Load): it is read in the browser."
        ),
    )(export_command)
