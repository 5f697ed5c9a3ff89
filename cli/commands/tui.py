"""`recount tui`: open a replay in the Textual debugger (timeline, events, inspector, diff)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cli.errors import UserError

EPILOG = (
    "Examples:\n\n"
    "  recount tui samples/leader-failover/incident.arrow\n\n"
    "  recount tui samples/leader-failover/             (the incident's captures, converted in memory)\n\n"
    "  recount tui incident.arrow --go 'term 2'        (open where term 2 got its leader)\n\n"
    "  recount tui a.arrow --diff b.arrow               (v opens the two replays side by side)\n\n"
    "  recount tui incident.arrow --screenshot shot.svg --go 'term 2'   (no terminal needed)\n\n"
    "Inside: ? lists the keys, ctrl+p offers every jump."
)


def tui_command(
    file: Annotated[
        str,
        typer.Argument(
            help="A replay file (*.arrow), any capture `recount convert` reads, or an incident directory"
                 " (or .tar.gz) holding them.", show_default=False
        ),
    ],
    model: Annotated[str, typer.Option("--model", help="Aeron version to model.")] = "1.47.3",
    diff: Annotated[
        str | None,
        typer.Option(
            "--diff",
            help="A second replay file, or a model version to replay FILE under as well.",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed", help="Base seed for the nomination delays (as recount replay).", show_default=False
        ),
    ] = None,
    go: Annotated[
        str | None,
        typer.Option(
            "--go",
            help="Start at a jump: 'time 12s', 'seq 120', 'event 55', 'log 4096', 'term 2'.",
            show_default=False,
        ),
    ] = None,
    screenshot: Annotated[
        str | None,
        typer.Option(
            "--screenshot",
            help="Draw the first screen (after --go) into this SVG file and exit.",
            show_default=False,
        ),
    ] = None,
    size: Annotated[
        str, typer.Option("--size", help="Terminal size for --screenshot, COLUMNSxROWS.")
    ] = "200x50",
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite the --screenshot file if it exists.")
    ] = False,
) -> None:
    """Seek through a replay: member lanes, events, each member's state and files at any event."""
    # Textual is imported here, not at module level, so that other commands start fast.
    from cli.tui.app import RecountApp, locate, parse_jump
    from cli.tui.session import ReplaySource, Session
    from engine.replay import MODELS, UnknownModelError
    from recorder import discovery

    if model not in MODELS:
        raise UserError(str(UnknownModelError(model)))
    jump = None
    if go is not None:
        try:
            jump = parse_jump(go)
        except ValueError as error:
            raise UserError(f"--go: {error}") from None
    columns_rows = None
    if screenshot is not None:
        out = Path(screenshot)
        if out.exists() and not force:
            raise UserError(f"{out}: exists (use --force to overwrite it)")
        try:
            columns, rows = (int(part) for part in size.lower().split("x"))
        except ValueError:
            raise UserError(f"--size: expected COLUMNSxROWS such as 200x50, got {size!r}") from None
        columns_rows = (columns, rows)
    try:
        if discovery.is_container(file):  # an incident directory or tarball: say what was found in it
            from cli.commands.replay import load_input

            source = ReplaySource.from_loaded(load_input(file), name=file)
        else:
            source = ReplaySource.open(file)
    except OSError as error:
        raise UserError(f"{error.filename or file}: {error.strerror or error}") from None
    if len(source) == 0:
        raise UserError(f"{file}: holds no events, so there is nothing to show")
    session = Session(source, model=model, seed=seed)
    if jump is not None:
        position, why_not = locate(session, jump)
        if position is None:
            raise UserError(f"--go {go}: {why_not}")
    other = other_name = None
    if diff is not None:
        if Path(diff).exists():
            try:
                other = Session.open(diff, model=model, seed=seed)
            except OSError as error:
                raise UserError(f"{error.filename or diff}: {error.strerror or error}") from None
            if len(other) == 0:
                raise UserError(f"{diff}: holds no events, so there is nothing to compare")
            other_name = f"{Path(diff).name} (model {model})"
        elif diff in MODELS:
            other = Session(source, model=diff, seed=seed)
            other_name = f"{Path(file).name} (model {diff})"
        else:
            raise UserError(
                f"--diff: {diff!r} is neither a file nor a known model ({', '.join(sorted(MODELS))})"
            )
    app = RecountApp(session, other=other, other_name=other_name, start=jump)
    if columns_rows is None:
        app.run()
        return
    app.run(headless=True, size=columns_rows, auto_pilot=_screenshot_pilot(Path(screenshot)))
    if app.return_code not in (0, None):
        raise UserError(f"could not draw the screen for {file}")


def _screenshot_pilot(out: Path):
    async def pilot(pilot) -> None:
        app = pilot.app
        await app.wait_until_indexed()
        await pilot.pause()
        await app.wait_until_settled()
        await pilot.pause()
        app.save_screenshot(filename=out.name, path=str(out.parent.resolve()))
        app.exit()

    return pilot


def register(app: typer.Typer) -> None:
    app.command("tui", epilog=EPILOG)(tui_command)
