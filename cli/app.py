"""The `recount` Typer application and the entry point that turns errors into exit statuses."""

from __future__ import annotations

import importlib
import sys

import typer

from cli.errors import UserError
from formats.errors import DecodeError

app = typer.Typer(
    name="recount",
    help="Deterministic record-and-replay debugger for Aeron Cluster elections and consensus.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog=(
        "Examples:\n\n"
        "  recount replay samples/leader-failover/incident.arrow\n\n"
        "  recount convert capture.pcap node0/ node1/ node2/ -o incident.arrow\n\n"
        "  recount replay incident.arrow --json | jq 'select(.kind==\"divergence\")'\n\n"
        "Every command has --help with examples.  Exit status: 0 done, 2 bad input or usage, 1 an internal error."
    ),
)

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

for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


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


def _usage_line(error: Exception) -> str:
    """Click's usage error as the contract's one line: the command, what was wrong, where help is
    (click itself prints the usage synopsis, a hint and the error on three or four lines)."""
    message = " ".join(error.format_message().split()).rstrip(".")
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
        result = app(args=argv, standalone_mode=False, prog_name="recount")
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
