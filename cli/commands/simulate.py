"""`recount simulate`: run a scenario on the simulated cluster and write what the incident left behind."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from cli import output
from cli.errors import UserError
from recorder import simulate as simulator
from recorder.simulate.outputs import summary_document

#: Simulated durations above this get a progress bar on stderr.
PROGRESS_THRESHOLD_NS = 30_000_000_000


def _print_format(value: bool) -> None:
    if value:
        from recorder.simulate.scenario import describe_format

        output.stdout.out(describe_format(), end="", highlight=False)
        raise typer.Exit(0)


def simulate(
    scenario: Annotated[str, typer.Argument(help="The scenario file (TOML).", metavar="SCENARIO.toml", show_default=False)],
    out: Annotated[str, typer.Option("--out", "-o", help="Directory to write the incident into.", show_default=False)],
    seed: Annotated[
        int | None,
        typer.Option("--seed", min=0, help="Seed for every random choice (default: the scenario's own `seed`)."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite the simulator's files in OUT if they exist.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON document (the summary) on stdout.")] = False,
    help_format: Annotated[
        bool,
        typer.Option("--help-format", is_eager=True, callback=_print_format, expose_value=False,
                     help="Print the scenario file format (every key, its default, an example) and exit."),
    ] = False,
) -> None:
    """Simulate a cluster incident: pcaps per host, agent logs, cluster dirs, a replay file, a summary."""
    try:
        loaded = simulator.load_scenario(scenario)
    except simulator.ScenarioError as error:
        raise UserError(str(error)) from None
    if not force:  # before the seed line and the run: refusing is then the only thing printed
        try:
            simulator.check_free(Path(out), loaded.member_ids)
        except simulator.OutputExistsError as error:
            raise UserError(str(error)) from None
    chosen_seed = loaded.seed if seed is None else seed
    output.stderr.print(f"scenario {loaded.name!r}: seed {chosen_seed}", markup=False)
    progress = None
    if loaded.duration_ns > PROGRESS_THRESHOLD_NS:
        progress = Progress(
            TextColumn("simulating"),
            BarColumn(),
            TextColumn("{task.fields[done]}/{task.fields[total_s]} s"),
            TimeRemainingColumn(),
            console=output.stderr,
            transient=True,
        )
    try:
        if progress is None:
            run = simulator.run_scenario_file(scenario, out, seed=seed, force=force)
        else:
            with progress:
                task = progress.add_task("simulate", total=loaded.duration_ns, done=0,
                                         total_s=loaded.duration_ns // 1_000_000_000)

                def on_progress(done_ns: int, total_ns: int) -> None:
                    progress.update(task, completed=done_ns, done=done_ns // 1_000_000_000)

                run = simulator.run_scenario_file(scenario, out, seed=seed, force=force, on_progress=on_progress)
    except simulator.ScenarioError as error:
        raise UserError(str(error)) from None
    except simulator.OutputExistsError as error:
        raise UserError(str(error)) from None
    except OSError as error:
        raise UserError(f"{error.filename or out}: {error.strerror or error}") from None

    document = summary_document(run.result, run.files)
    if json_output:
        document["outputDirectory"] = str(out)
        output.print_json(document)
        return
    console = output.stdout
    console.print(f"[bold]{loaded.name}[/bold] (seed {run.result.seed}) → {out}", markup=True)
    if loaded.description:
        console.print(loaded.description, markup=False)
    for leader in document["leaders"]:
        console.print(f"  term {leader['leadershipTermId']}: member {leader['memberId']} led from "
                      f"{leader['at'] / 1e9:.3f} s", markup=False)
    for member_id, state in document["members"].items():
        console.print(f"  member {member_id}: {state['role']} in term {state['leadershipTermId']}, "
                      f"election {state['electionState']}, log at {state['appendPosition']}"
                      + ("" if state["running"] else " (not running)"), markup=False)
    console.print(f"  wrote {len(run.written)} files ({document['events']} events); "
                  f"replay with: recount replay {out}/incident.arrow", markup=False)


def register(app: typer.Typer) -> None:
    app.command(
        "simulate",
        epilog=(
            "Examples:\n\n"
            "  recount simulate samples/leader-failover/scenario.toml -o /tmp/failover\n\n"
            "  recount simulate my-scenario.toml -o incident --seed 42 --force --json\n\n"
            "  recount simulate --help-format      (the scenario file format: every key, its default, an example)\n\n"
            "Regenerate a bundled sample in place:\n\n"
            "  recount simulate samples/leader-failover/scenario.toml -o samples/leader-failover --force"
        ),
    )(simulate)
