"""`recount inspect`: read one of Aeron Cluster's own files (or a member's whole cluster directory)."""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable
from typing import Annotated, TypeVar

import typer

from cli import output, render_inspect
from cli.app import help_when_bare
from cli.errors import UserError
from formats import recording_log as rl
from formats.node_state import node_state_to_json
from recorder import cluster_dir

T = TypeVar("T")

inspect_app = typer.Typer(
    name="inspect",
    help="Read Aeron Cluster's files: recording.log, node-state.dat, cluster-mark*.dat, archive.catalog, or a whole"
         " cluster dir.",
    epilog=(
        "Examples:\n\n"
        "  recount inspect cluster-dir samples/leader-failover/node1/cluster\n\n"
        "  recount inspect node-state samples/leader-failover/node1/cluster/node-state.dat --json\n\n"
        "Each subcommand's --help has more."
    ),
)

inspect_app.callback(invoke_without_command=True)(help_when_bare)

JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout (see the contract, §3).")]


class RecordingLogFormat(enum.StrEnum):
    table = "table"
    json = "json"
    clustertool = "clustertool"


def _load(loader: Callable[[str], T], path: str) -> T:
    """Run a loader; turn any OS error into one line naming the file."""
    try:
        return loader(path)
    except OSError as error:
        raise UserError(f"{error.filename or path}: {error.strerror or error}") from None


@inspect_app.command(
    "recording-log",
    epilog=(
        "Examples:\n\n"
        "  recount inspect recording-log aeron-cluster/recording.log\n\n"
        "  recount inspect recording-log recording.log --format clustertool\n\n"
        "(prints exactly what Aeron's `ClusterTool <dir> recording-log` prints, to compare)\n\n"
        "  recount inspect recording-log recording.log --json | jq '.entries[] | select(.type==\"TERM\")'"
    ),
)
def recording_log(
    path: Annotated[str, typer.Argument(help="The recording.log file.", show_default=False)],
    json_output: JsonOption = False,
    format_: Annotated[
        RecordingLogFormat,
        typer.Option("--format", help="table (default), json, or clustertool: Aeron's own ClusterTool text."),
    ] = RecordingLogFormat.table,
) -> None:
    """Show a recording.log: every term and snapshot entry, in the order Aeron keeps them."""
    if json_output and format_ not in (RecordingLogFormat.table, RecordingLogFormat.json):
        raise UserError("use either --json or --format, not both")
    log = _load(cluster_dir.load_recording_log, path)
    if json_output or format_ == RecordingLogFormat.json:
        output.print_json(rl.to_json(log))
    elif format_ == RecordingLogFormat.clustertool:
        sys.stdout.write(rl.to_clustertool(log) + "\n")  # plain text: no rich wrapping or markup
    else:
        render_inspect.print_recording_log(output.stdout, log, path)


@inspect_app.command(
    "node-state",
    epilog=(
        "Examples:\n\n"
        "  recount inspect node-state aeron-cluster/node-state.dat\n\n"
        "  recount inspect node-state node-state.dat --json | jq .candidateTerm.candidateTermId"
    ),
)
def node_state(
    path: Annotated[str, typer.Argument(help="The node-state.dat file.", show_default=False)],
    json_output: JsonOption = False,
) -> None:
    """Show a node-state.dat: the member's candidateTermId and every record in the file."""
    state = _load(cluster_dir.load_node_state, path).state
    if json_output:
        output.print_json(node_state_to_json(state))
    else:
        render_inspect.print_node_state(output.stdout, state, path)


@inspect_app.command(
    "mark-file",
    epilog=(
        "Examples:\n\n"
        "  recount inspect mark-file aeron-cluster/cluster-mark.dat\n\n"
        "  recount inspect mark-file cluster-mark-service-0.dat --json | jq '.errors | length'"
    ),
)
def mark_file(
    path: Annotated[str, typer.Argument(help="A cluster-mark.dat or cluster-mark-service-N.dat file.", show_default=False)],
    json_output: JsonOption = False,
) -> None:
    """Show a cluster mark file: the MarkFileHeader fields and the distinct-error log."""
    mark = _load(cluster_dir.load_mark_file, path)
    if json_output:
        output.print_json(mark.to_json())
    else:
        render_inspect.print_mark_file(output.stdout, mark, path)


@inspect_app.command(
    "cluster-dir",
    epilog=(
        "Examples:\n\n"
        "  recount inspect cluster-dir node0/aeron-cluster\n\n"
        "  recount inspect cluster-dir node0/aeron-cluster --json | jq .problems"
    ),
)
def cluster_dir_command(
    path: Annotated[str, typer.Argument(help="One member's cluster directory (aeron.cluster.dir).", show_default=False)],
    json_output: JsonOption = False,
) -> None:
    """Show one member's cluster directory at a glance, and what in it does not add up."""
    directory = _load(cluster_dir.read_cluster_dir, path)
    if json_output:
        output.print_json(cluster_dir.cluster_dir_to_json(directory))
    else:
        render_inspect.print_cluster_dir(output.stdout, directory)


@inspect_app.command(
    "archive-catalog",
    epilog=(
        "Examples:\n\n"
        "  recount inspect archive-catalog node0/archive/archive.catalog\n\n"
        "  recount inspect archive-catalog node0            (a member dir: its archive/ is found)\n\n"
        "  recount inspect archive-catalog node0/archive.tar.gz --json | jq '.recordings[] | select(.alias==\"log-cm\")'\n\n"
        "The log recording's stopPosition is how far the member's log reached, whatever recording.log says."
    ),
)
def archive_catalog(
    path: Annotated[str, typer.Argument(help="archive.catalog, an Aeron archive dir (or a member dir holding archive/),"
                                        " or a .tar.gz of one.", show_default=False)],
    json_output: JsonOption = False,
) -> None:
    """Show an Aeron Archive catalog: every recording, its state, channel alias and start/stop positions."""
    catalog = _load(cluster_dir.load_archive_catalog, path)
    document = catalog.to_json()
    for recording, shown in zip(catalog.recordings, document["recordings"], strict=True):
        shown["alias"] = recording.alias
    if json_output:
        output.print_json(document)
    else:
        render_inspect.print_archive_catalog(output.stdout, catalog, path)
    if catalog.problem is not None:  # what could be read is shown above; the damage is the one error line
        raise catalog.problem


def register(app: typer.Typer) -> None:
    app.add_typer(inspect_app, name="inspect")
