"""How the command line reports bad input: one line on stderr, exit status 2, no traceback."""

from __future__ import annotations


class UserError(Exception):
    """Bad input or usage.  The message is one line naming the file and what was expected."""

    exit_code = 2
