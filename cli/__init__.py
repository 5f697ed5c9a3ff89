"""The `recount` command line and the Textual debugger.

Theory of operation: every command is a thin front-end.  It parses its arguments (Typer),
calls one library function from `recorder`, `engine` or `formats`, and renders the result
through one rendering module: rich tables for people, `--json` for scripts (stdout holds only
JSON; progress goes to stderr).  Bad input is reported as one line on stderr with exit status 2
(`cli.errors`); exit status 1 is kept for our own bugs.  `cli` may import everything; nothing
imports `cli`.
"""
