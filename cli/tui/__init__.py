"""`recount tui`: a Textual debugger over replays.

Theory of operation.  `session.Session` is the one read-only object the widgets read: the replay
file memory-mapped, an index built by one node-replay pass in a background worker, and member state
at any event by re-execution from the nearest engine checkpoint.  `app.RecountApp` holds the cursor
(reactive attributes) and binds keys to `action_*` methods; the widgets in `widgets/` only draw what
the session returns (timeline lanes, the virtualised event list, the inspector, the diff view), and
all styling lives in `recount.tcss`.  `breakpoints` reads conditions over member state in the language
`recorder.expressions` parses (the one `recount bisect --check` speaks).  No protocol logic lives here: every state shown comes from `engine`, every line from
`formats.describe`.

May import: `formats`, `engine`, `recorder` (to load captures), `cli.errors`; and textual/rich.
"""
