"""The `recount` Typer application and the entry point that turns errors into exit statuses."""

from __future__ import annotations

import importlib
import sys

import click
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
)

#: One module per command; each has `register(app)`.
COMMAND_MODULES = (
    "cli.commands.inspect",
)

for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def _fail(message: str, code: int = 2) -> int:
    sys.stderr.write(f"recount: {message}\n")
    return code


def run(argv: list[str] | None = None) -> int:
    """Run the command line and return its exit status (tests call this directly)."""
    try:
        result = app(args=argv, standalone_mode=False, prog_name="recount")
    except click.exceptions.Abort:
        return _fail("aborted", 130)
    except click.exceptions.ClickException as error:
        error.show()
        return error.exit_code
    except click.exceptions.Exit as error:
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
