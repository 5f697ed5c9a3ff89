"""`recount convert`: captures into one replay file (contract §2)."""

from __future__ import annotations

from typing import Annotated

import typer

from cli import output, progress, render_capture
from cli.commands import convert_spark
from cli.errors import UserError
from cli.options import GroupBy
from recorder import convert as converter


def convert(
    inputs: Annotated[list[str], typer.Argument(help="Captures: pcap/pcapng, aeron-agent logs, member cluster dirs, JSON Lines (*.jsonl), or a replay file; or an incident directory, a member's directory, or a .tar.gz of one (looked into as bulk mode does).", metavar="INPUT...", show_default=False)],
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
    group_by: convert_spark.GroupByOption = GroupBy.directory,
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
        # convert(), step by step, so that each step has its own progress display.
        target = converter.check_output(out, force=force)
        with render_capture.progress_by_bytes(inputs) as read_progress:
            built = converter.build(inputs, format=input_format, members=members, progress=read_progress,
                                    config=properties)
        with progress.phase("writing the replay file"):
            converter.write_atomically(built, target, force=force)
        result = built.result(str(target))
    except converter.OutputExistsError as error:
        raise UserError(f"{error.filename}: {error.strerror}") from None
    except OSError as error:
        raise UserError(f"{error.filename or out}: {error.strerror or error}") from None
    except ValueError as error:  # a directory holding nothing recount reads, a tarball that cannot be unpacked
        raise UserError(str(error)) from None
    if json_output:
        output.print_json(result.to_json())
        return
    summary = result.to_json()
    render_capture.print_found(summary)
    nodes = ", ".join(str(n) for n in result.nodes) or "none"
    output.stdout.print(f"wrote {result.events} events (members {nodes}) to {result.out}")
    if result.capture is not None:
        render_capture.print_summary(result.capture)
        shown = result.capture.get("aeronVersion") or {}
        if shown.get("model"):
            output.stderr.print(f"Aeron version: {shown['model']} ({shown['why']})", markup=False)
    if result.coverage is not None:
        from recorder.evidence import Coverage

        render_capture.print_warnings(Coverage.from_json(result.coverage).warnings())


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
            "  recount convert samples/leader-failover -o incident.arrow\n\n"
            "(an incident directory, or a .tar.gz of one: its captures, agent logs and members' cluster dirs are"
            " found as bulk mode finds them, and read together)\n\n"
            "  recount convert samples/leader-failover/host0.pcap samples/leader-failover/node0/"
            " samples/leader-failover/node1/ samples/leader-failover/node2/ -o host0.arrow --members"
            " '0,10.42.0.1:20002,10.42.0.1:20003,10.42.0.1:20004,10.42.0.1:20005,10.42.0.1:20001"
            "|1,10.42.0.2:20002,10.42.0.2:20003,10.42.0.2:20004,10.42.0.2:20005,10.42.0.2:20001"
            "|2,10.42.0.3:20002,10.42.0.3:20003,10.42.0.3:20004,10.42.0.3:20005,10.42.0.3:20001'\n\n"
            "(one host's capture and every member's directory, with the members string the captures lack)\n\n"
            "  recount convert capture.pcap -o incident.arrow --members '...'"
            " --config aeron.cluster.leader.heartbeat.timeout=2s --config aeron.cluster.election.timeout=500ms\n\n"
            "(cluster configuration the captures do not record, by Aeron property name)\n\n"
            "  recount convert captures/ --out-dir replays/ --engine spark --master 'local[*]'\n\n"
            "(bulk: one replay file per incident directory, and replays/catalog/*.parquet)\n\n"
            "Then replay it:  recount replay cluster.arrow"
        ),
    )(convert)
