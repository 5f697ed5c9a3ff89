"""`recount convert DIR... --out-dir OUT [--engine spark]`: bulk conversion, one replay file per incident.

Not a command of its own: `cli.commands.convert` hands over to `run_bulk` when ``--out-dir`` or
``--engine spark`` is given, and takes its extra options from the `Annotated` types here, so that the
single-file command stays as it is.  The work is `recorder.spark.job.convert_bulk`; this module only
parses options, draws the progress bar (stderr) and prints the result.
"""

from __future__ import annotations

from typing import Annotated

import typer

from cli import output
from cli.errors import UserError
from cli.options import Engine, GroupBy

EngineOption = Annotated[
    Engine | None,
    typer.Option("--engine", help="local (this process) or spark (a Spark job, needs the spark extra; the default for --out-dir when pyspark is installed).",
                 show_default=False),
]
OutDirOption = Annotated[
    str | None,
    typer.Option("--out-dir", help="Bulk mode: write OUT_DIR/<incident>.arrow per incident, and a Parquet catalog"
                                   " in OUT_DIR/catalog/.", show_default=False),
]
MasterOption = Annotated[
    str | None,
    typer.Option("--master", help="Spark master URL (local[*], local[4,2], spark://host:7077, yarn, ...); default"
                                  " local[*,4] (all cores, a failed task tried up to 4 times), or the one"
                                  " spark-submit was given.", show_default=False),
]
ConfOption = Annotated[
    list[str] | None,
    typer.Option("--conf", help="A Spark setting KEY=VALUE, passed through (repeatable).", metavar="KEY=VALUE",
                 show_default=False),
]
IncidentDepthOption = Annotated[
    int,
    typer.Option("--incident-depth", min=0,
                 help="Bulk mode: incidents are the directories this many levels below each DIR (0: DIR itself)."),
]
GroupByOption = Annotated[
    GroupBy,
    typer.Option("--group-by", help="Bulk mode: directory (inputs grouped by incident directory) or file"
                                    " (every input its own incident)."),
]


def wants_bulk(engine: Engine | None, out_dir: str | None) -> bool:
    """Whether `recount convert` runs in bulk mode (``--out-dir``, or ``--engine spark``)."""
    return out_dir is not None or engine == Engine.spark


#: What to run when ``--engine spark`` finds no pyspark (it is the ``spark`` extra, not a default dependency).
PYSPARK_INSTALL = "python -m pip install 'aeron-recount[spark]'"


def _has_pyspark() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("pyspark") is not None
    except ValueError:  # imported as None: treated as missing (as tests do)
        return False


def require_pyspark() -> None:
    """Fail with the one pip command to run when pyspark is not installed."""
    if not _has_pyspark():
        raise UserError(f"--engine spark needs pyspark, which is not installed: run  {PYSPARK_INSTALL}"
                        "  (or use --engine local)")


def run_bulk(
    inputs: list[str],
    *,
    out_dir: str | None,
    out: str | None = None,
    engine: Engine | None = None,
    master: str | None = None,
    conf: list[str] | None = None,
    incident_depth: int = 1,
    group_by: GroupBy = GroupBy.directory,
    members: str | None = None,
    force: bool = False,
    json_output: bool = False,
) -> None:
    """Bulk conversion of ``inputs`` (directories) into ``out_dir``; see `recorder.spark.job`."""
    from recorder.spark import job

    if engine is None and not _has_pyspark():
        output.stderr.print("note: pyspark is not installed, so --out-dir converts here (--engine local);"
                            f" for Spark: {PYSPARK_INSTALL}", markup=False)
        engine = Engine.local
    engine = engine or Engine.spark
    if engine == Engine.spark:
        require_pyspark()
    if out_dir is None:
        raise UserError("--engine spark converts directories of incidents: give --out-dir OUT_DIR")
    if out is not None:
        raise UserError("-o/--out names one replay file; with --out-dir each incident gets its own: drop -o")
    try:
        settings = job.parse_conf(conf or [])
    except ValueError as error:
        raise UserError(str(error)) from None
    with _progress_bar(engine) as progress:
        try:
            result = job.convert_bulk(inputs, out_dir, engine=engine.value, master=master, conf=settings,
                                      incident_depth=incident_depth, group_by=group_by.value, members=members,
                                      force=force, progress=progress)
        except ValueError as error:
            raise UserError(str(error)) from None
        except (FileNotFoundError, NotADirectoryError, PermissionError) as error:
            raise UserError(f"{error.filename or ''}: {error.strerror or error}") from None
    document = result.to_json()
    if json_output:
        output.print_json(document)
    else:
        _print_result(document)
    if result.failed:
        raise UserError(f"{result.failed} incident(s) could not be converted (see {document['catalog']}/errors.parquet)")


class _progress_bar:
    """A rich bar on stderr following the tasks (incidents) of the conversion."""

    def __init__(self, engine: Engine) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        label = "Spark tasks" if engine == Engine.spark else "incidents"
        self._progress = Progress(TextColumn(f"converting ({label})"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=output.stderr, transient=True)
        self._task = None

    def __enter__(self):
        self._progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._progress.__exit__(*exc)

    def __call__(self, done: int, total: int) -> None:
        if self._task is None:
            self._task = self._progress.add_task("convert", total=total)
        self._progress.update(self._task, completed=done, total=total)


def _print_result(document: dict) -> None:
    from rich.table import Table

    table = Table(title=f"{document['outDir']} ({document['engine']})", show_edge=False)
    for column in ("incident", "status", "events", "members", "errors", "replay file"):
        table.add_column(column, justify="right" if column in ("events", "errors") else "left")
    for row in document["incidents"]:
        status = {"converted": "[green]converted[/green]", "failed": "[red]failed[/red]"}.get(row["status"],
                                                                                               row["status"])
        members = ",".join(str(m) for m in row["members"] or [])
        table.add_row(row["incident"], status, str(row["events"] if row["events"] is not None else "-"), members,
                      str(row["errors"]), row["replayFile"] or "-")
    output.stdout.print(table)
    for failure in document["failures"]:
        output.stderr.print(f"[red]{failure['incident']}[/red]: {failure['detail']}", markup=True, highlight=False)
    output.stdout.print(f"{document['converted']} converted, {document['skipped']} skipped (already converted;"
                        f" --force to redo), {document['failed']} failed; catalog in {document['catalog']}")
