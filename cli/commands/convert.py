"""`recount convert`: captures into one replay file (contract §2)."""

from __future__ import annotations

from typing import Annotated

import typer

from cli import output, render_capture
from cli.commands import convert_spark
from cli.errors import UserError
from recorder import convert as converter


def convert(
    inputs: Annotated[list[str], typer.Argument(help="Captures: pcap/pcapng, aeron-agent logs, member cluster dirs, JSON Lines (*.jsonl), or a replay file.", metavar="INPUT...", show_default=False)],
    out: Annotated[
        str | None, typer.Option("--out", "-o", help="The replay file to write (*.arrow).", show_default=False)
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite OUT if it exists.")] = False,
    input_format: Annotated[
        str,
        typer.Option("--format", help=f"Input format: auto (by suffix, magic bytes or content), or one of"
                                      f" {', '.join(converter.READERS)}."),
    ] = "auto",
    members: Annotated[
        str | None,
        typer.Option("--members", help="The cluster members string (aeron.cluster.members: id,ingress,consensus,"
                                       "log,catchup,archive|...), to tell members apart in captures."),
    ] = None,
    config: Annotated[
        list[str] | None,
        typer.Option("--config", metavar="PROPERTY=VALUE",
                     help="Cluster configuration the captures do not record, by Aeron property name (repeatable),"
                          " e.g. aeron.cluster.leader.heartbeat.timeout=2s; set in every member's MemberStart.",
                     show_default=False),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
    engine: convert_spark.EngineOption = None,
    out_dir: convert_spark.OutDirOption = None,
    master: convert_spark.MasterOption = None,
    conf: convert_spark.ConfOption = None,
    incident_depth: convert_spark.IncidentDepthOption = 1,
    group_by: convert_spark.GroupByOption = "directory",
) -> None:
    """Convert captures into one replay file, events in global time order."""
    properties = _config_properties(config or [])
    if convert_spark.wants_bulk(engine, out_dir):  # one replay file per incident (Spark or local)
        if properties:
            raise UserError("--config applies to one replay file (-o OUT.arrow), not to bulk conversion")
        return convert_spark.run_bulk(inputs, out_dir=out_dir, out=out, engine=engine, master=master, conf=conf,
                                      incident_depth=incident_depth, group_by=group_by, members=members,
                                      force=force, json_output=json_output)
    if out is None:
        raise UserError("give -o OUT.arrow (or --out-dir OUT_DIR for one replay file per incident)")
    try:
        with render_capture.progress_by_bytes(inputs) as progress:
            result = converter.convert(inputs, out, force=force, format=input_format, members=members,
                                       progress=progress, config=properties)
    except converter.OutputExistsError as error:
        raise UserError(f"{error.filename}: {error.strerror}") from None
    except OSError as error:
        raise UserError(f"{error.filename or ''}: {error.strerror or error}") from None
    if json_output:
        output.print_json(result.to_json())
        return
    nodes = ", ".join(str(n) for n in result.nodes) or "none"
    output.stdout.print(f"wrote {result.events} events (members {nodes}) to {result.out}")
    if result.capture is not None:
        render_capture.print_summary(result.capture)
        shown = result.capture.get("aeronVersion") or {}
        if shown.get("model"):
            output.stderr.print(f"Aeron version: {shown['model']} ({shown['why']})", markup=False)


def _config_properties(options: list[str]) -> dict[str, int]:
    """``PROPERTY=VALUE`` options as checked Aeron properties (a bad one is a `UserError` naming it)."""
    properties: dict[str, str] = {}
    for option in options:
        name, equals, value = option.partition("=")
        name, value = name.strip(), value.strip()
        if not equals or not name or not value:
            raise UserError(f"--config {option!r}: expected PROPERTY=VALUE, e.g. aeron.cluster.election.timeout=1s")
        properties[name] = value
    try:
        return converter.cluster_config(properties)
    except ValueError as error:
        raise UserError(f"--config: {error}") from None


def register(app: typer.Typer) -> None:
    app.command(
        "convert",
        epilog=(
            "Examples:\n\n"
            "  recount convert election.jsonl -o election.arrow\n\n"
            "  recount convert node0.jsonl node1.jsonl node2.jsonl -o cluster.arrow --force --json\n\n"
            "  recount convert capture.pcap node0/ node1/ node2/ node*/agent-events.log -o incident.arrow"
            " --members '0,h0:9002,h0:9003,h0:9004,h0:9005,h0:9001|1,...'\n\n"
            "(pcap/pcapng captures, aeron-agent logs and members' cluster dirs, read together)\n\n"
            "  recount convert capture.pcap -o incident.arrow --members '...'"
            " --config aeron.cluster.leader.heartbeat.timeout=2s --config aeron.cluster.election.timeout=500ms\n\n"
            "(cluster configuration the captures do not record, by Aeron property name)\n\n"
            "  recount convert captures/ --out-dir replays/ --engine spark --master 'local[*]'\n\n"
            "(bulk: one replay file per incident directory, and replays/catalog/*.parquet)\n\n"
            "Then replay it:  recount replay cluster.arrow"
        ),
    )(convert)
