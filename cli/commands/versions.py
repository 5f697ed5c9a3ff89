"""`recount versions`: the Aeron releases recount models, the behaviour flags of each, and user models."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from cli import output
from cli.errors import UserError
from engine.versions import versions_document


def confidence_text(confidence: dict) -> str:
    """``checked against real capture X``, ``compared with ...``, or ``notes only``."""
    captures = ", ".join(c["capture"] for c in confidence.get("captures", []))
    return {"checked": f"checked against real capture {captures}",
            "compared": f"compared with real capture {captures}, divergences remain",
            "user": "a user model"}.get(confidence.get("level"), "modelled from notes only")


def versions(
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
) -> None:
    """List the modelled Aeron releases, what each behaviour flag changes, and installed user models."""
    try:
        document = versions_document()
    except ValueError as error:  # a broken `recount.models` entry point
        raise UserError(str(error)) from None
    if json_output:
        output.print_json(document)
        return
    console = output.stdout
    releases = Table(title="Modelled Aeron releases (oldest first)", title_justify="left", header_style="bold")
    releases.add_column("release")
    releases.add_column("changes from the release before", overflow="fold")
    releases.add_column("judged by", overflow="fold")
    for release in document["versions"]:
        name = release["version"] + (" (baseline)" if release["baseline"] else "")
        releases.add_row(name, ", ".join(release["changes"]) or "—", confidence_text(release["confidence"]))
    console.print(releases)
    flags = Table(title="Behaviour flags (one per election change)", title_justify="left", header_style="bold")
    flags.add_column("flag", no_wrap=True)
    for column in ("since", "before the change", "since the change"):
        flags.add_column(column, overflow="fold")
    for flag in document["flags"]:
        since = flag["since"] + (f" (and {', '.join(flag['backports'])})" if flag["backports"] else "")
        flags.add_row(flag["flag"], since, flag["before"], flag["after"])
    console.print(flags)
    left = Table(title="Changes not modelled", title_justify="left", header_style="bold")
    for column in ("release", "change", "why"):
        left.add_column(column, overflow="fold")
    for item in document["leftOut"]:
        left.add_row(item["since"], item["change"], item["why"])
    console.print(left)
    if document["userModels"]:
        users = Table(title="User models (entry points in group recount.models)", title_justify="left", header_style="bold")
        for column in ("model", "from", "flags off the 1.47.3 baseline", "own Node"):
            users.add_column(column, overflow="fold")
        baseline = next(r["flags"] for r in document["versions"] if r["baseline"])
        for model in document["userModels"]:
            changed = [f"{k}={v}" for k, v in model["flags"].items() if baseline.get(k) != v]
            users.add_row(model["name"], model["origin"], ", ".join(changed) or "—", "yes" if model["nodeFactory"] else "no")
        console.print(users)


def register(app: typer.Typer) -> None:
    app.command(
        "versions",
        epilog=(
            "Examples:\n\n"
            "  recount versions\n\n"
            "  recount versions --json | jq '.versions[] | {version, changes}'"
        ),
    )(versions)
