"""`recount query FILE... "SQL"`: DuckDB over replay files (table ``events``), as a table, JSON or CSV."""

from __future__ import annotations

import csv
import sys
from typing import Annotated

import typer
from rich.table import Table

from cli import output
from cli.errors import UserError
from recorder import query as replay_query


def _cell(value: object) -> str:
    return "" if value is None else str(value)


def query(
    arguments: Annotated[
        list[str],
        typer.Argument(help="One or more replay files (*.arrow), then the SQL.", metavar="FILE... SQL",
                       show_default=False),
    ],
    json_output: Annotated[bool, typer.Option("--json", help="Print the rows as one JSON list of objects.")] = False,
    csv_output: Annotated[bool, typer.Option("--csv", help="Print the rows as CSV with a header line.")] = False,
) -> None:
    """Run SQL over replay files: they are the table `events` (with a `file` column when several)."""
    if len(arguments) < 2:
        raise UserError("expected one or more replay files and then the SQL, e.g. recount query run.arrow "
                        "\"SELECT type, count(*) FROM events GROUP BY type\"")
    if json_output and csv_output:
        raise UserError("--json and --csv: choose one")
    *files, sql = arguments
    try:
        result = replay_query.query(files, sql)
    except replay_query.QueryError as error:
        raise UserError(f"query: {error}") from None
    except OSError as error:
        raise UserError(f"{error.filename or ''}: {error.strerror or error}") from None
    if json_output:
        output.print_json(result.records())
        return
    if csv_output:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(result.columns)
        for row in result.rows:
            writer.writerow(["" if v is None else v for v in row])
        return
    table = Table(show_lines=False, header_style="bold")
    for column in result.columns:
        table.add_column(column, overflow="fold")
    for row in result.rows:
        table.add_row(*(_cell(v) for v in row))
    output.stdout.print(table)
    output.stderr.print(f"{len(result.rows)} row{'s' if len(result.rows) != 1 else ''}")


def register(app: typer.Typer) -> None:
    app.command(
        "query",
        epilog=(
            "Examples:\n\n"
            "  recount query run.arrow \"SELECT node, type, count(*) AS n FROM events GROUP BY ALL ORDER BY ALL\"\n\n"
            "  recount query run.arrow \"SELECT ts, node, peer, candidateTermId, vote FROM events"
            " WHERE type = 'Vote'\" --json\n\n"
            "  recount query a.arrow b.arrow \"SELECT file, count(*) FROM events GROUP BY file\" --csv"
        ),
    )(query)
