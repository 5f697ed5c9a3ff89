"""`recount bisect FILE --good V --bad V --check EXPR`: the first release whose answer to a check changes."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from cli import output, progress
from cli.commands.diff import print_changes
from cli.commands.replay import check_until, load_input
from cli.commands.versions import confidence_text
from cli.errors import UserError
from cli.options import DURATION, Mode, duration_ns
from engine.versions import VERSIONS, confidence
from formats.describe import describe_record
from formats.errors import DecodeError
from recorder.bisect import Trial, bisect
from recorder.checks import HELP as CHECK_HELP
from recorder.checks import parse_check


def bisect_command(
    file: Annotated[str, typer.Argument(help="A capture or replay file (anything `recount replay` reads).", show_default=False)],
    good: Annotated[str, typer.Option("--good", help="A release where the check holds.", show_default=False)],
    bad: Annotated[str, typer.Option("--bad", help="A release where the check fails.", show_default=False)],
    check: Annotated[str, typer.Option("--check", help=CHECK_HELP, show_default=False)],
    mode: Annotated[Mode, typer.Option("--mode", help="How each release replays the capture.")] = Mode.cluster,
    versions: Annotated[
        str | None,
        typer.Option("--versions", help="Comma-separated releases to search, oldest first (default: every modelled release).",
                     show_default=False),
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Base seed for the nomination delays.")] = None,
    until: Annotated[int | None, typer.Option("--until", help="Stop each replay at this time (ns or a duration).",
                                              parser=duration_ns, metavar=DURATION, show_default=False)] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
) -> None:
    """Binary search over Aeron releases for the first one where a check on the replay changes."""
    try:
        parsed = parse_check(check)
    except ValueError as error:
        raise UserError(str(error)) from None
    order = tuple(v.strip() for v in versions.split(",") if v.strip()) if versions else VERSIONS
    until_ns = until
    loaded = load_input(file)
    check_until(until_ns, loaded, file)
    try:
        parsed.validate(sorted({event.node for event in loaded.events}))
    except ValueError as error:
        raise UserError(f"--check {check}: {error}") from None

    def on_trial(trial: Trial) -> None:
        note = f" (same flags as {trial.reused_from})" if trial.reused_from else ""
        judged = confidence(trial.version)["level"]
        output.stderr.print(f"{trial.version}: {'holds' if trial.result else 'fails'}{note} ({judged})", markup=False)
        phase(f"bisecting: {trial.version} tried")

    try:
        with progress.phase(f"bisecting between {good} and {bad}") as phase:
            report = bisect(loaded, good=good, bad=bad, check=parsed, versions=order, mode=mode.value, seed=seed,
                            until=until_ns, on_trial=on_trial)
    except DecodeError:
        raise
    except ValueError as error:  # BisectError, an unknown model
        raise UserError(str(error)) from None
    if json_output:
        output.print_json(report)
        return
    console = output.stdout
    verb = "fixed" if report["direction"] == "fixed" else "broke"
    console.print(Text(f"{report['firstChanged']} is the first release where the check changes "
                       f"({report['previous']}: {_word(report['resultBefore'])}, {report['firstChanged']}: "
                       f"{_word(report['resultAt'])}; it {verb} it)", style="bold"))
    console.print(f"check: {report['check']}")
    if report["flagsChanged"]:
        table = Table(title=f"flags changed from {report['previous']} to {report['firstChanged']}", title_justify="left",
                      header_style="bold")
        table.add_column("flag", no_wrap=True)
        for column in ("since", "before", "after"):
            table.add_column(column, overflow="fold")
        for flag in report["flagsChanged"]:
            table.add_row(flag["flag"], flag["since"], flag["before"], flag["after"])
        console.print(table)
    first = report["firstDifference"]
    if first is not None:
        console.print(Text(f"first difference at {first['ts']} ns, member {first['node']} ({first['op']}):", style="bold"))
        console.print(f"  {report['previous']}: {describe_record(first['a']) if first['a'] else 'nothing'}")
        console.print(f"  {report['firstChanged']}: {describe_record(first['b']) if first['b'] else 'nothing'}")
        print_changes(first)
    tried = ", ".join(f"{t['version']} {_word(t['result'])} ({t['confidence']})" for t in report["trials"])
    console.print(f"tried: {tried}")
    for version, judged in report["confidence"].items():
        console.print(f"{version}: {confidence_text(judged)}", markup=False)


def _word(result: bool) -> str:
    return "holds" if result else "fails"


def register(app: typer.Typer) -> None:
    app.command(
        "bisect",
        epilog=(
            "Examples:\n\n"
            "  recount bisect incident.arrow --good 1.40.0 --bad 1.41.0 --check 'leader_elected_within(5s)'\n\n"
            "  recount bisect incident.arrow --bad 1.47.3 --good 1.51.0 --check no_replay_past_commit --json\n\n"
            "  recount bisect incident.arrow --good 1.47.3 --bad 1.50.0 --check 'node[2].electionState == \"CLOSED\"'"
        ),
    )(bisect_command)
