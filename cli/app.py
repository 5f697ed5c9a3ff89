"""The `recount` Typer application and the entry point that turns errors into exit statuses.

Startup is kept light (`recount --help` well under 300 ms): `build(argv)` makes the application for one
command line, with only the command it runs imported and registered; every other command is listed
by its name and one-line help from `COMMANDS` (a test checks them against the real commands), as a
stand-in that is never run.  A module missing from `COMMANDS` is simply imported.  Only Typer's
public API is used: the application is called like any Typer app, and its errors are `typer.Exit`,
`typer.Abort` and `typer.TyperException` (Typer >= 0.29 bundles click).  `command()` gives the whole
tree as click objects, every command imported, through `typer.main.get_command`, the way Typer's
"Using Click" documentation gives it, for tests and tools that walk it.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
import re
import sys
import threading
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from cli import deferred_coercion
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


def _settings() -> dict[str, Any]:
    return dict(
        cls=deferred_coercion.Group,
        name="recount",
        help="Deterministic record-and-replay debugger for Aeron Cluster elections and consensus.",
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


def help_when_bare(ctx: typer.Context) -> None:
    """A group's callback: run without a command, it shows its help on stderr and exits 2."""
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help(), err=True)
        raise typer.Exit(2)


def _options(
    ctx: typer.Context,
    show_progress: Annotated[
        bool | None,
        typer.Option("--progress/--no-progress",
                     help="Progress bars on stderr for long phases (default: only when stderr is a terminal).",
                     show_default=False),
    ] = None,
) -> None:
    from cli import progress

    progress.requested = show_progress
    help_when_bare(ctx)


def _not_imported() -> None:
    """Stands in for a command in the listing; `build` imports the real one before it could run."""
    raise AssertionError("a listed command ran without being imported")


def _command_word(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs: its first word that is not an option (the top-level options take
    no value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def build(argv: Sequence[str] = (), *, every: bool = False) -> typer.Typer:
    """The application for ``argv``: the command it runs (or, with ``every``, every command) imported
    and registered, the others listed by name and help."""
    app = typer.Typer(**_settings())
    app.callback(invoke_without_command=True)(_options)
    wanted = None if every else _command_word(argv)
    for module in COMMAND_MODULES:
        listed = COMMANDS.get(module)
        if listed is not None and not every and listed[0] != wanted:
            name, help = listed
            app.command(name, help=help, short_help=help, add_help_option=False)(_not_imported)
        else:
            importlib.import_module(module).register(app)
    return app


def load_commands(module_name: str) -> dict[str, Any]:
    """The click commands that ``module_name``'s `register` adds, by name (imports the module)."""
    holder = typer.Typer()
    holder.callback()(lambda: None)  # a group, whatever the module registers
    importlib.import_module(module_name).register(holder)
    return dict(typer.main.get_command(holder).commands)


def command() -> Any:
    """The whole command tree as click sees it, every command imported."""
    return typer.main.get_command(build(every=True))


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
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        result = build(argv)(args=argv, standalone_mode=False, prog_name="recount")
    except typer.Abort:
        return _fail("aborted", 130)
    except typer.Exit as error:
        return error.exit_code
    except typer.TyperException as error:  # click's errors: a usage error, a file click could not open
        sys.stderr.write(_usage_line(error) + "\n")
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


#: The garbage collector's thresholds for the command's process (`main`); Python's default is (700, 10, 10).
#: A replay allocates a few objects per event that die young; at 700 allocations between young
#: collections many are still alive, get promoted, and set off full collections that walk everything
#: loaded (the modules, the comparison's runs, the TUI's index): 20 % of `recount replay`'s CPU on a
#: 500k-event file.  At 50,000 they die before a collection sees them (CPU as with the collector off,
#: memory the same: few of them are in cycles).
GC_THRESHOLDS = (50_000, 10, 10)


def tune_collector() -> None:
    """`GC_THRESHOLDS` for this process (what `main` does first; benchmarks that drive a command's parts
    in their own process do it too, to measure what the command does)."""
    gc.set_threshold(*GC_THRESHOLDS)


#: Commands whose process ends without the interpreter's teardown (`exit_now`): every file they write
#: is closed by the time the command returns.  A replay holds the comparison's runs and every member's
#: log to the end: freeing them one at a time took 0.4-0.7 s after the last line of a 500k-event replay.
QUICK_EXIT = frozenset({"convert", "replay"})


def exit_now(code: int) -> None:
    """End the process with ``code`` once its output is flushed and its exit handlers have run, without
    the interpreter's teardown: freeing every module and object one at a time is 50 ms after a large
    conversion.  The ordinary exit where flushing fails (a closed pipe: Python says so as it always
    has), a thread that is not a daemon still runs, or Spark was started (bulk conversion)."""
    others = [thread for thread in threading.enumerate() if thread is not threading.main_thread()]
    if "pyspark" in sys.modules or any(not thread.daemon for thread in others):
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(code)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


#: Commands that do no linear algebra: numpy's OpenBLAS starts them no worker threads (`without_blas_threads`).
NO_BLAS_THREADS = frozenset({"convert", "replay"})


def without_blas_threads() -> None:
    """Have numpy's OpenBLAS, when it loads, start no worker threads (unless the user chose a number):
    its workers (one per core) poll for work after they start, 50 ms of another core's time in a
    conversion that never calls BLAS.  Said in the environment only until numpy has loaded, so that
    what the command starts (Spark's workers) inherits the user's environment."""
    if "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ:
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401  (OpenBLAS reads the variable as it loads)
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


def main() -> None:
    tune_collector()
    command = _command_word(sys.argv[1:])
    if command in NO_BLAS_THREADS:
        without_blas_threads()
    code = run()
    if command in QUICK_EXIT:
        exit_now(code)
    sys.exit(code)
