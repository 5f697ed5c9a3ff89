"""The `recount` Typer application and the entry point that turns errors into exit statuses.

Startup is kept light (`recount --help` well under 300 ms): a command's module, and the engine,
pyarrow, DuckDB or Textual it needs, are imported only when that command runs or shows its own
help.  `COMMANDS` names each command and its one-line help for the top-level listing (a test checks
them against the real commands); a module missing from it is simply imported up front.
"""

from __future__ import annotations

import importlib
import re
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from cli.errors import UserError
from formats.errors import DecodeError

#: One module per command; each has `register(app)`.
COMMAND_MODULES = (
    "cli.commands.inspect",
    "cli.commands.record",
    "cli.commands.convert",
    "cli.commands.query",
    "cli.commands.simulate",
    "cli.commands.replay",
    "cli.commands.tui",
    "cli.commands.versions",
    "cli.commands.diff",
    "cli.commands.bisect",
    "cli.commands.export_scenario",
    "cli.commands.report",
    "cli.commands.export",
)

#: module → (command name, its one-line help): listed by `recount --help` without importing the module.
COMMANDS: dict[str, tuple[str, str]] = {
    "cli.commands.inspect": ("inspect", "Read Aeron Cluster's files: recording.log, node-state.dat, cluster-mark*.dat,"
                                          " archive.catalog, or a whole cluster dir."),
    "cli.commands.record": ("record", "Record a live cluster's consensus and log traffic through a UDP proxy,"
                                      " crash-safe."),
    "cli.commands.convert": ("convert", "Convert captures into one replay file, events in global time order."),
    "cli.commands.query": ("query", "Run SQL over replay files: they are the table `events` (with a `file` column"
                                    " when several)."),
    "cli.commands.simulate": ("simulate", "Simulate a cluster incident: pcaps per host, agent logs, cluster dirs,"
                                          " a replay file, a summary."),
    "cli.commands.replay": ("replay", "Re-run each member from its own recorded inbound events and show where it"
                                      " would differ."),
    "cli.commands.tui": ("tui", "Seek through a replay: member lanes, events, each member's state and files at"
                                " any event."),
    "cli.commands.versions": ("versions", "List the modelled Aeron releases, what each behaviour flag changes, and"
                                          " installed user models."),
    "cli.commands.diff": ("diff", "Align two replays by member, time and log position; show the first divergence"
                                  " and all differences."),
    "cli.commands.bisect": ("bisect", "Binary search over Aeron releases for the first one where a check on the"
                                      " replay changes."),
    "cli.commands.export_scenario": ("export-scenario", "Write a datadriven scenario file that reproduces the"
                                                        " recording (or a window of it), minimised."),
    "cli.commands.report": ("report", "Write an incident as one self-contained HTML page, to attach to an issue."),
    "cli.commands.export": ("export", "Write the replay as a Chrome trace for Perfetto UI or chrome://tracing."),
}


def load_commands(module_name: str) -> dict[str, Any]:
    """The click commands that ``module_name``'s `register` adds, by name (imports the module)."""
    holder = typer.Typer()
    importlib.import_module(module_name).register(holder)
    return dict(typer.main.get_group(holder).commands)


class _Listed(TyperCommand):
    """A command not imported yet: its name and one-line help, for the top-level listing."""

    def __init__(self, name: str, module: str, help: str) -> None:
        super().__init__(name, help=help, short_help=help)
        self.module = module


class LazyGroup(TyperGroup):
    """The top-level group: commands in `COMMANDS` are imported when resolved, not when listed."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for module in COMMAND_MODULES:
            if module in COMMANDS:
                name, help = COMMANDS[module]
                self.commands.setdefault(name, _Listed(name, module, help))
            else:
                self.commands.update(load_commands(module))

    def resolve_command(self, ctx, args):
        listed = self.commands.get(args[0]) if args else None
        if isinstance(listed, _Listed):
            self.commands.update(load_commands(listed.module))
        return super().resolve_command(ctx, args)

    def load_all(self) -> LazyGroup:
        """Every command imported (for tests and tools that walk the real commands)."""
        for command in list(self.commands.values()):
            if isinstance(command, _Listed):
                self.commands.update(load_commands(command.module))
        return self


app = typer.Typer(
    name="recount",
    cls=LazyGroup,
    help="Deterministic record-and-replay debugger for Aeron Cluster elections and consensus.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=(
        "Examples:\n\n"
        "  recount replay samples/leader-failover/incident.arrow\n\n"
        "  recount replay samples/leader-failover      (an incident directory: captures, agent logs, cluster dirs)\n\n"
        "  recount convert incident/ -o incident.arrow\n\n"
        "  recount replay incident.arrow --json | jq 'select(.kind==\"divergence\")'\n\n"
        "Every command has --help with examples.  Exit status: 0 done, 2 bad input or usage, 1 an internal error."
    ),
)



@app.callback()
def _options(
    show_progress: Annotated[
        bool | None,
        typer.Option("--progress/--no-progress",
                     help="Progress bars on stderr for long phases (default: only when stderr is a terminal).",
                     show_default=False),
    ] = None,
) -> None:
    from cli import progress

    progress.requested = show_progress


def command() -> LazyGroup:
    """The whole command tree as click sees it, every command imported."""
    return typer.main.get_command(app).load_all()


def _click_exceptions() -> tuple[tuple[type, ...], ...]:
    """(Abort, ClickException, Exit, NoArgsIsHelpError) classes.  Typer >= 0.29 bundles its own click
    (`typer._click`, with Abort and Exit in `typer.exceptions`); older Typer raises the `click`
    package's.  Catch whichever exist, so a usage error is one line and exit 2 with either."""
    found: dict[str, list[type]] = {"Abort": [], "ClickException": [], "Exit": [], "NoArgsIsHelpError": []}
    for module_name in ("typer.exceptions", "typer._click.exceptions", "click.exceptions"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for name, classes in found.items():
            cls = getattr(module, name, None)
            if isinstance(cls, type) and cls not in classes:
                classes.append(cls)
    return tuple(found["Abort"]), tuple(found["ClickException"]), tuple(found["Exit"]), tuple(found["NoArgsIsHelpError"])


_ABORT, _CLICK_ERROR, _EXIT, _NO_ARGS_IS_HELP = _click_exceptions()


#: Typer's refusal of a value not among an option's choices (an enum), reworded below.
_NOT_A_CHOICE = re.compile(
    r"Invalid value for '?(?P<option>[^':]+)'?: (?:Value error, )?(?P<value>'.*') is not one of (?P<choices>'.*')"
)


def _usage_line(error: Exception) -> str:
    """Click's usage error as the contract's one line: the command, what was wrong, where help is
    (click itself prints the usage synopsis, a hint and the error on three or four lines).  A value
    that is not one of an option's choices is said as the commands have always said it, ``--mode
    must be one of node, cluster, got 'x'``; any other message is Typer's own."""
    message = " ".join(error.format_message().split()).rstrip(".")
    refused = _NOT_A_CHOICE.fullmatch(message)
    if refused is not None:
        choices = ", ".join(re.findall(r"'([^']*)'", refused["choices"]))
        message = f"{refused['option']} must be one of {choices}, got {refused['value']}"
    context = getattr(error, "ctx", None)
    if context is None:
        return f"recount: {message}"
    command = context.command_path
    return f"{command}: {message} (see '{command} --help')"


def _fail(message: str, code: int = 2) -> int:
    sys.stderr.write(f"recount: {message}\n")
    return code


def run(argv: list[str] | None = None) -> int:
    """Run the command line and return its exit status (tests call this directly)."""
    try:
        result = typer.main.get_command(app).main(args=argv, standalone_mode=False, prog_name="recount")
    except _ABORT:
        return _fail("aborted", 130)
    except _NO_ARGS_IS_HELP as error:  # a bare `recount` or `recount inspect`: the help is the answer
        error.show()
        return error.exit_code
    except _CLICK_ERROR as error:
        sys.stderr.write(_usage_line(error) + "\n")
        return error.exit_code
    except _EXIT as error:
        return error.exit_code
    except DecodeError as error:
        return _fail(str(error))
    except UserError as error:
        return _fail(str(error), error.exit_code)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError) as error:
        filename = error.filename if error.filename is not None else ""
        return _fail(f"{filename}: {error.strerror or error}")
    except BrokenPipeError:
        return 0
    return result if isinstance(result, int) else 0


def main() -> None:
    sys.exit(run())
