"""`RecountApp`: the Textual application of `recount tui`.

The app holds the cursor (`cursor`: an event number in replay order; `member`: the member the
inspector shows) in reactive attributes, binds every key to an ``action_*`` method, and tells the
widgets to redraw when they change.  It never computes protocol state: `Session` answers every
question (state at an event, where the next state change is, when a condition became true), the
widgets draw the answers.  Long work runs in workers: the index (a thread, progress in the status
bar) and breakpoint searches (a thread, cancelled with escape).  The command palette (ctrl+p)
offers every jump; ``g`` takes a jump typed directly; ``?`` lists the keys.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from rich.table import Table
from rich.text import Text
from textual import events, on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.screen import ModalScreen, Screen
from textual.suggester import SuggestFromList
from textual.widgets import Footer, Input, Label, ProgressBar, Static
from textual.worker import Worker, get_current_worker

from cli.tui import breakpoints
from cli.tui.session import (
    INLINE_STEPS,
    DiffRow,
    EventFilter,
    LastChange,
    SeekCancelled,
    Session,
    SessionError,
    align,
    difference_starts,
    story,
)
from cli.tui.widgets import DiffView, EventList, Inspector, Timeline
from cli.tui.widgets.inspector import ELECTION_KEYS
from engine.model.config import parse_duration_ns
from formats.describe import describe_cause
from formats.errors import DecodeError

#: A seek (re-execution for the inspector or the list) that takes longer than this says so.
SEEK_NOTICE_S = 0.1

# -- jumps typed by the user (palette and the `g` prompt) ---------------------------------------------------

JUMP_HELP = (
    "time 12s (from the first event) | seq 123 | event 55 | log 4096 | term 2 | next Vote | prev RequestVote"
)


@dataclass(frozen=True, slots=True)
class Jump:
    kind: str  # time, seq, event, log, term, next, prev
    value: int | str


def parse_jump(text: str) -> Jump:
    """A jump from its words; `ValueError` with a one-line reason when it is not one."""
    words = text.split()
    if len(words) != 2:
        raise ValueError(f"expected one of: {JUMP_HELP}")
    kind, value = words[0].lower(), words[1]
    aliases = {
        "t": "time",
        "at": "time",
        "position": "log",
        "pos": "log",
        "e": "event",
        "#": "seq",
        "previous": "prev",
    }
    kind = aliases.get(kind, kind)
    if kind in ("next", "prev"):
        return Jump(kind, value)
    if kind == "time":
        try:
            return Jump(kind, parse_duration_ns(value))
        except ValueError:
            raise ValueError(f"time takes nanoseconds or a duration such as 1500ms, got {value!r}") from None
    if kind in ("seq", "event", "log", "term"):
        try:
            return Jump(kind, int(value))
        except ValueError:
            raise ValueError(f"{kind} takes an integer, got {value!r}") from None
    raise ValueError(f"unknown jump {kind!r}; expected one of: {JUMP_HELP}")


def _short_name(name: str) -> str:
    """``leader-failover/incident.arrow``: the file and its folder, wherever the checkout is."""
    path = Path(name)
    return str(Path(path.parent.name) / path.name) if path.parent.name else path.name


#: What ``l`` offers to complete: the member values whose last change it can find.
LAST_CHANGE_FIELDS = [
    *ELECTION_KEYS,
    "nodeState.candidateTermId",
    "nodeState.logPosition",
    "nodeState.timestamp",
    "recordingLog",
    "logRecordingId",
    "logSessionId",
    "electionCount",
]

# -- screens ---------------------------------------------------------------------------------------------


def locate(session: Session, jump: Jump, cursor: int = 0) -> tuple[int | None, str]:
    """Where ``jump`` goes from ``cursor``: the event, or None and why there is none (the TUI says it;
    ``recount tui --go`` exits 2 with it)."""
    source = session.source
    if jump.kind == "time":
        at = source.origin + int(jump.value)
        if len(source) and at > int(source.ts[-1]):
            return None, f"after the last event ({source.relative(int(source.ts[-1]))})"
        return source.position_at_time(at), ""
    if jump.kind == "seq":
        return source.position_of_seq(int(jump.value)), f"no event has seq {jump.value}"
    if jump.kind == "event":
        k = int(jump.value)
        return (k if 0 <= k < len(session) else None), f"no event {k} (the replay has {len(session)})"
    if jump.kind == "log":
        return (session.position_of_log_position(int(jump.value)),
                f"no event carries a logPosition at or past {jump.value}")
    if jump.kind == "term":
        return session.position_of_term(int(jump.value)), f"term {jump.value} does not appear"
    positions = source.positions_where("type", str(jump.value))
    if not len(positions):
        return None, f"no {jump.value} event in this replay"
    found = session.next_of(positions, cursor, 1 if jump.kind == "next" else -1)
    return found, f"no {'later' if jump.kind == 'next' else 'earlier'} {jump.value}"


class Prompt(ModalScreen[str | None]):
    """One line of input (a filter, a breakpoint condition, a jump).

    Keys typed right after the key that opened it (``g``, ``f``, ``b``) may arrive before its input
    has focus; they are the start of what the user is typing, so they go into the input, never to
    the main view's bindings."""

    BINDINGS = [Binding("escape", "cancel", "cancel")]
    AUTO_FOCUS = "#prompt-input"

    def __init__(self, title: str, hint: str, value: str = "", suggestions: list[str] | None = None) -> None:
        super().__init__()
        self.title_text = title
        self.hint = hint
        self.value = value
        self.suggestions = suggestions
        self._early: list[str] = []
        self._early_submit = False

    def type_early(self, key: str, character: str | None) -> None:
        """A key meant for this prompt that reached the main view first (see the class doc)."""
        try:
            field = self.query_one("#prompt-input", Input)
        except NoMatches:
            if key == "enter":
                self._early_submit = True
            elif character is not None and character.isprintable() and not self._early_submit:
                self._early.append(character)
            return
        if key == "enter":
            self.dismiss(field.value)
        elif key == "backspace":
            field.action_delete_left()
        elif character is not None and character.isprintable():
            field.insert_text_at_cursor(character)

    def on_mount(self) -> None:
        field = self.query_one("#prompt-input", Input)
        if self._early:
            field.insert_text_at_cursor("".join(self._early))
            self._early.clear()
        field.focus()
        if self._early_submit:  # the whole answer, Enter included, came before the prompt was up
            self.call_later(self.dismiss, field.value)

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt"):
            yield Label(self.title_text, id="prompt-title")
            suggester = SuggestFromList(self.suggestions, case_sensitive=False) if self.suggestions else None
            yield Input(value=self.value, placeholder=self.hint, id="prompt-input", suggester=suggester)
            yield Label(self.hint, id="prompt-hint")

    @on(Input.Submitted)
    def submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class HelpScreen(ModalScreen[None]):
    """The key bindings (``?``)."""

    BINDINGS = [Binding("escape,question_mark,q", "close", "close")]

    def __init__(self, bindings: list[tuple[str, str]]) -> None:
        super().__init__()
        self.rows = bindings

    def compose(self) -> ComposeResult:
        table = Table(title="recount tui: keys", box=None, title_justify="left")
        table.add_column("key", style="bold")
        table.add_column("does")
        for key, description in self.rows:
            table.add_row(key, description)
        table.add_row(
            "ctrl+p", "command palette: every jump (time, seq, term, next message of a type, divergence…)"
        )
        with Vertical(id="help"):
            yield Static(table, id="help-table")
            yield Label("escape or ? closes", id="help-hint")

    def action_close(self) -> None:
        self.dismiss(None)


class DiffScreen(Screen[None]):
    """Two replays side by side (``v``)."""

    BINDINGS = [
        Binding("escape,v", "close", "back"),
        Binding("j,down", "row(1)", "next row"),
        Binding("k,up", "row(-1)", "previous row"),
        Binding("n", "difference(1)", "next difference"),
        Binding("N", "difference(-1)", "previous difference"),
        Binding("f", "first", "first divergence"),
        Binding("enter", "open", "show in main view"),
    ]

    def __init__(
        self, rows: list[DiffRow], left_name: str, right_name: str, origins: tuple[int, int] = (0, 0)
    ) -> None:
        super().__init__()
        self.rows = rows
        self.starts = difference_starts(rows)
        self.view = DiffView(rows, left_name, right_name, origins, id="diff-view")

    def compose(self) -> ComposeResult:
        yield Static(id="diff-header")
        yield self.view
        yield Static(id="diff-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#diff-header", Static).update(self.view.header(self.size.width or 160))
        self.view.focus()
        self.call_after_refresh(self.action_first)  # once the view has a size to scroll in

    def _status(self) -> None:
        count = len(self.starts)
        current = sum(1 for s in self.starts if s <= self.view.row)
        text = f"row {self.view.row + 1}/{len(self.rows)}   differences: {count}" + (
            f" (at {current} of {count})" if count else " — the two replays agree"
        )
        self.query_one("#diff-status", Static).update(text)

    def action_row(self, delta: int) -> None:
        if self.rows:
            self.view.row = min(max(self.view.row + delta, 0), len(self.rows) - 1)
        self._status()

    def action_first(self) -> None:
        self.view.row = self.starts[0] if self.starts else 0
        self._status()

    def action_difference(self, direction: int) -> None:
        row = self.view.row
        candidates = [s for s in self.starts if (s > row if direction > 0 else s < row)]
        if candidates:
            self.view.row = candidates[0] if direction > 0 else candidates[-1]
        else:
            self.app.notify("no more differences" if direction > 0 else "no earlier difference")
        self._status()

    def action_open(self) -> None:
        row = self.rows[self.view.row] if self.rows else None
        line = (row.left or row.right) if row else None
        self.dismiss(None)
        if line is not None and row.left is not None:
            self.app.cursor = line.position

    def action_close(self) -> None:
        self.dismiss(None)


# -- the palette -------------------------------------------------------------------------------------------


class JumpCommands(Provider):
    """Every jump the app knows, for the command palette; typed jumps (``term 2``) too."""

    def _commands(self) -> list[tuple[str, Callable[[], None], str]]:
        app: RecountApp = self.app  # type: ignore[assignment]
        commands = [
            (
                "First divergence or invariant violation",
                partial(app.action_problem, 0),
                "go to the first problem the replay found",
            ),
            ("Next divergence", partial(app.action_problem, 1), "d"),
            ("Previous divergence", partial(app.action_problem, -1), "D"),
            ("Next state change", partial(app.action_state_change, 1), "s"),
            ("Previous state change", partial(app.action_state_change, -1), "S"),
            ("Next state change of the selected member", partial(app.action_member_state_change, 1), ""),
            ("Previous state change of the selected member", partial(app.action_member_state_change, -1), ""),
            ("Next event of the selected member", partial(app.action_member_step, 1), "]"),
            ("Previous event of the selected member", partial(app.action_member_step, -1), "["),
            ("Go to start", partial(app.action_edge, 0), "home"),
            ("Go to end", partial(app.action_edge, 1), "end"),
            ("Go to… (time, seq, event, log position, term)", app.action_goto, "g"),
            ("Toggle bookmark", app.action_bookmark, "m"),
            ("Next bookmark", partial(app.action_next_bookmark, 1), "'"),
            ("Add breakpoint…", app.action_add_breakpoint, "b"),
            ("Continue to the next breakpoint hit", partial(app.action_continue, 1), "c"),
            ("Reverse-continue to the previous breakpoint hit", partial(app.action_continue, -1), "C"),
            ("Clear breakpoints", app.action_clear_breakpoints, "B"),
            ("When did a value of the selected member last change, and why…", app.action_last_change, "l"),
            ("Filter events…", app.action_filter, "f"),
            ("Clear filter", app.action_clear_filter, ""),
            ("Show or hide heartbeats", app.action_toggle_heartbeats, "h"),
            ("Times as UTC or from the first event", app.action_toggle_wall_clock, "w"),
            ("Diff view", app.action_diff, "v"),
            ("Save screenshot (SVG)", app.action_save_screenshot, "ctrl+s"),
            ("Key bindings", app.action_help, "?"),
        ]
        for start in app.session.index.terms:
            commands.append(
                (
                    f"Go to term {start.leadership_term_id}: member {start.leader_member_id} elected leader",
                    partial(app.jump, Jump("term", start.leadership_term_id)),
                    f"#{int(app.session.source.seq[start.position])} at {app.session.source.when(start.ts)}",
                )
            )
        for member in app.session.members:
            commands.append(
                (f"Select member {member}", partial(app.action_select_member, member), str(member))
            )
        for name in sorted(app.session.source.type_names):
            commands.append(
                (f"Next {name}", partial(app.jump, Jump("next", name)), "the next event of this type")
            )
            commands.append(
                (f"Previous {name}", partial(app.jump, Jump("prev", name)), "the previous event of this type")
            )
        return commands

    async def discover(self) -> Hits:
        for name, callback, help_text in self._commands()[:23]:
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        app: RecountApp = self.app  # type: ignore[assignment]
        words = query.split(maxsplit=1)
        if len(words) == 2 and words[0].lower() in ("break", "breakpoint"):
            yield Hit(
                1.0,
                f"Break when {words[1]}",
                partial(app.add_breakpoint, words[1]),
                help="add this breakpoint",
            )
        elif len(words) == 2 and words[0].lower() == "filter":
            yield Hit(
                1.0, f"Filter {words[1]}", partial(app.apply_filter, words[1]), help="node=… channel=… type=…"
            )
        else:
            try:
                jump = parse_jump(query)
            except ValueError:
                jump = None
            if jump is not None:
                yield Hit(1.0, f"Go to {jump.kind} {jump.value}", partial(app.jump, jump), help="jump")
        matcher = self.matcher(query)
        for name, callback, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)


# -- the app -----------------------------------------------------------------------------------------------


class RecountApp(App[None]):
    """Seek through a replay: timeline, event list, inspector; breakpoints; a diff view."""

    CSS_PATH = str(Path(__file__).with_name("recount.tcss"))
    TITLE = "recount"
    COMMANDS = App.COMMANDS | {JumpCommands}

    async def on_event(self, event: events.Event) -> None:
        # Keys typed fast after ``g``/``f``/``b`` are all dispatched to the main view before its
        # binding opens the prompt; when one comes back up unhandled and a prompt is now open, it is
        # the start of the answer: typed into the prompt, not dropped and not run as a command.
        if isinstance(event, events.Key):
            first_seen_on = getattr(event, "recount_screen", None)
            if first_seen_on is None:
                event.recount_screen = self.screen
            elif first_seen_on is not self.screen and isinstance(self.screen, Prompt):
                self.screen.type_early(event.key, event.character)
                event.stop()
                event.prevent_default()
                return
        await super().on_event(event)
    BINDINGS = [
        Binding("j,down", "step(1)", "next"),
        Binding("k,up", "step(-1)", "prev"),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("home", "edge(0)", "start", show=False),
        Binding("end", "edge(1)", "end", show=False),
        Binding("right_square_bracket", "member_step(1)", "member next", show=False),
        Binding("left_square_bracket", "member_step(-1)", "member prev", show=False),
        Binding("s", "state_change(1)", "next state change"),
        Binding("S", "state_change(-1)", "prev state change", show=False),
        Binding("d", "problem(1)", "next divergence", show=False),
        Binding("D", "problem(-1)", "prev divergence", show=False),
        Binding("tab", "next_member", "member", priority=True),
        *[Binding(str(n), f"select_member({n})", f"member {n}", show=False) for n in range(10)],
        Binding("g", "goto", "go to"),
        Binding("m", "bookmark", "bookmark", show=False),
        Binding("apostrophe", "next_bookmark(1)", "next bookmark", show=False),
        Binding("quotation_mark", "next_bookmark(-1)", "prev bookmark", show=False),
        Binding("b", "add_breakpoint", "break"),
        Binding("l", "last_change", "last change", show=False),
        Binding("c", "continue(1)", "continue"),
        Binding("C", "continue(-1)", "reverse", show=True),
        Binding("B", "clear_breakpoints", "clear breakpoints", show=False),
        Binding("escape", "cancel_search", "stop search", show=False),
        Binding("f", "filter", "filter"),
        Binding("r", "toggle_records", "records", show=False),
        Binding("h", "toggle_heartbeats", "heartbeats"),
        Binding("w", "toggle_wall_clock", "UTC/relative time", show=False),
        Binding("plus,equals_sign", "zoom(1)", "zoom in", show=False),
        Binding("minus", "zoom(-1)", "zoom out", show=False),
        Binding("t", "toggle_axis", "time/event axis", show=False),
        Binding("v", "diff", "diff", show=False),
        Binding("ctrl+s", "save_screenshot", "screenshot", show=False),
        Binding("question_mark", "help", "keys"),
        Binding("q", "quit", "quit"),
    ]
    #: What `?` shows, in this order (key as typed, what it does).
    KEYS = [
        ("j / down, k / up", "next / previous event (in the list, after the filter)"),
        ("pagedown / pageup, home / end", "a page of events; first / last event"),
        ("] / [", "next / previous event of the selected member"),
        ("s / S", "next / previous election state or role change (any member)"),
        ("d / D", "next / previous divergence or invariant violation"),
        ("tab, 0-9", "select the member the inspector shows"),
        ("g", "go to: " + JUMP_HELP),
        ("m, ' / \"", "toggle a bookmark; next / previous bookmark"),
        ("b", "add a breakpoint (e.g. node 2 state == FOLLOWER_CATCHUP, candidateTermId > 3)"),
        ("c / C", "continue / reverse-continue to where a breakpoint condition became true"),
        ("l, or click a value", "where the selected member's value last changed, and what changed it"),
        ("B", "clear breakpoints"),
        ("escape", "stop a running search"),
        ("f", "filter the list: node=1,2 channel=consensus type=Vote,RequestVote"),
        ("r", "show / hide the trace records under each event"),
        ("+ / -, t", "zoom the timeline in / out; switch its axis between time and event number"),
        ("v", "diff view (with --diff): n / N walk differences, f first, enter opens, escape back"),
        ("ctrl+s", "save a screenshot (SVG) in the current directory"),
        ("?", "this list"),
        ("q", "quit"),
    ]

    _MAIN_ACTIONS = frozenset(
        {
            "step",
            "page",
            "edge",
            "member_step",
            "state_change",
            "problem",
            "next_member",
            "select_member",
            "goto",
            "bookmark",
            "next_bookmark",
            "add_breakpoint",
            "continue",
            "clear_breakpoints",
            "filter",
            "toggle_records",
            "zoom",
            "toggle_axis",
            "diff",
        }
    )

    cursor: reactive[int] = reactive(0, init=False)
    member: reactive[int] = reactive(0, init=False)

    def __init__(
        self,
        session: Session,
        *,
        other: Session | None = None,
        other_name: str | None = None,
        start: Jump | None = None,
        screenshot_dir: str | None = None,
    ) -> None:
        super().__init__()
        self.session = session
        self.start = start
        self.other = other
        self.other_name = other_name
        self.screenshot_dir = screenshot_dir
        self.bookmarks: set[int] = set()
        self.conditions: list[breakpoints.Condition] = []
        self.diff_rows: list[DiffRow] | None = None
        self.searching = False
        self.message = ""
        self._indexed_seen = -1
        self._laid_out_at = 0.0
        self._index_worker: Worker[None] | None = None
        self._inspector_pending = False
        #: A seek is being worked out in the background (the inspector's moment, the list's records).
        self.seek_pending = False
        self._seek_started = 0.0
        self._seek_target: int | None = None
        #: The events the running seek re-executes (first, last): their blocks and records come with it.
        self._seek_span: tuple[int, int] | None = None
        self._records_wanted: set[tuple[str, int]] = set()  # ("events" | "records", block)
        self._records_loading = False
        #: The last "where did this value last change" answer, shown while the cursor is on it.
        self.last_change_found: LastChange | None = None
        #: How long each move took to be on screen (the cursor or member set, to the refresh after its
        #: seek), and whether "seeking…" was shown meanwhile: what benchmarks/bench_tui.py reads.
        self.seek_log: list[tuple[float, bool]] = []
        self._move_started: float | None = None
        self._move_noticed = False
        self.set_reactive(RecountApp.member, session.members[0] if session.members else 0)
        self.sub_title = f"{Path(session.name).name}  model {session.model}"

    def compose(self) -> ComposeResult:
        yield Static(id="title-bar")
        yield Timeline(self.session, id="timeline")
        with Horizontal(id="main"):
            yield EventList(self.session, id="events")
            yield Inspector(self.session, id="inspector")
        with Horizontal(id="status-bar"):
            yield Static(id="status")
            yield ProgressBar(total=max(len(self.session), 1), show_eta=False, id="index-progress")
        yield Footer()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The main view's keys act only when it is on top (not under a prompt, the help or the diff view)."""
        if action in self._MAIN_ACTIONS and len(self.screen_stack) > 1:
            return False
        return True

    # -- life cycle -----------------------------------------------------------------------------------------

    def on_mount(self) -> None:
        self.query_one("#title-bar", Static).update(self._title())
        self.query_one(EventList).focus()
        self.query_one(Timeline).member = self.member
        self._refresh_all()
        if self.start is not None and self.start.kind in ("time", "seq", "event"):
            self.jump(self.start)  # needs no index
            self.start = None
        # The index starts once the first screen is drawn: its thread would otherwise delay it.
        self.call_after_refresh(self._start_index)
        self._poll = self.set_interval(0.2, self._poll_index)

    async def wait_until_indexed(self) -> None:
        """Wait for the index worker and show its result (tests and --screenshot use it).

        Raises the worker's failure (`WorkerFailed`, `WorkerCancelled`) rather than waiting forever.
        """
        while self._index_worker is None:  # it starts after the first refresh
            await asyncio.sleep(0.01)
        await self._index_worker.wait()
        self._poll_index()

    def _start_index(self) -> None:
        self._index_worker = self.index_replays()

    def _title(self) -> Text:
        text = Text(f"recount tui  {_short_name(self.session.name)}", style="bold")
        text.append(
            f"  model {self.session.model}  {len(self.session)} events  members {', '.join(map(str, self.session.members))}"
        )
        if self.other is not None:
            text.append(f"  diff: {self.other_name}")
        return text

    @work(thread=True, exclusive=True, group="index")
    def index_replays(self) -> None:
        # The index waits while a seek is worked out: the screen's answer comes first.
        worker = get_current_worker()
        self.session.build_index(should_stop=lambda: worker.is_cancelled, should_pause=lambda: self.seek_pending)
        if self.other is not None and not worker.is_cancelled:
            self.other.build_index(
                should_stop=lambda: worker.is_cancelled, should_pause=lambda: self.seek_pending
            )

    def _poll_index(self) -> None:
        index = self.session.index
        done = index.done + (self.other.index.done if self.other is not None else 0)
        total = len(self.session) + (len(self.other) if self.other is not None else 0)
        finished = index.finished and (self.other is None or self.other.index.finished)
        if done == self._indexed_seen and not finished:
            return
        self._indexed_seen = done
        bar = self.query_one("#index-progress", ProgressBar)
        bar.update(total=max(total, 1), progress=done)
        # The list's layout (a pass over every event) and the lanes follow the index once a second.
        now = time.monotonic()
        if finished or now - self._laid_out_at >= 1.0:
            self._laid_out_at = now
            self.query_one(EventList).index_progressed()
            self.query_one(Timeline).refresh()
        if self._inspector_pending:
            self._refresh_inspector()
        if finished:
            bar.display = False
            self._poll.stop()
            self._pin_landmarks()
            if self.start is not None:
                start, self.start = self.start, None
                self.jump(start)
            self._refresh_all()
        self._refresh_status()

    @property
    def indexed(self) -> bool:
        return self.session.index.finished and (self.other is None or self.other.index.finished)

    # -- drawing --------------------------------------------------------------------------------------------

    def watch_cursor(self, _: int) -> None:
        self._move_began()
        self._refresh_all()

    def _move_began(self) -> None:
        if self._move_started is None:
            self._move_started = time.perf_counter()
            self._move_noticed = False
        self.call_after_refresh(self._move_drawn)

    def _move_drawn(self) -> None:
        """After a refresh: a move whose seek is done is on screen now."""
        if self._move_started is not None and not self.seek_pending:
            self.seek_log.append((time.perf_counter() - self._move_started, self._move_noticed))
            self._move_started = None
            if len(self.seek_log) > 10_000:
                del self.seek_log[:5_000]

    def watch_member(self, member: int) -> None:
        self._move_began()
        self.query_one(Timeline).member = member
        self._refresh_inspector()
        self._refresh_status()

    def _refresh_all(self) -> None:
        self.query_one(EventList).cursor = self.cursor
        self.query_one(EventList).refresh()
        self.query_one(Timeline).follow_cursor(self.cursor)
        self._refresh_inspector()
        self._refresh_status()

    def _refresh_inspector(self) -> None:
        inspector = self.query_one(Inspector)
        if not len(self.session):
            inspector.show_pending("the replay holds no events")
            return
        position = self.cursor
        moment = self.session.moment_cached(position)
        if moment is not None:
            self._inspector_pending = False
            self._show_moment(moment, position)
            return
        if not self.session.moment_ready(position):
            self._inspector_pending = True
            inspector.show_pending(
                f"indexing: member state after #{int(self.session.source.seq[position])} is shown once the"
                f" index reaches it ({self.session.pending()})"
            )
            return
        self._inspector_pending = False
        if self.session.steps_to(position) <= INLINE_STEPS:  # well under a millisecond: on the spot
            try:
                moment = self.session.moment(position)
            except (DecodeError, SessionError) as error:
                inspector.show_pending(f"cannot replay to #{int(self.session.source.seq[position])}: {error}")
                return
            self._seek_target = None  # a seek still running for an earlier cursor is not wanted any more
            self._seek_span = None
            self._show_moment(moment, position)
            self._seek_settled()
            return
        self._seek_target = position
        around = self.query_one(EventList).around(position)
        self._seek_span = (min(around, default=position), max(around, default=position))
        self._seek_began()
        self._seek_worker(position, around)

    def _show_moment(self, moment, position: int) -> None:
        found = self.last_change_found
        records = self.session.records_cached(position)
        if records is None:
            self.want_records(position)  # the "at this event" section fills in when they come
        self.query_one(Inspector).show(
            moment,
            self.member,
            position,
            records=records,
            last_change=found if found is not None and found.position == position else None,
        )

    async def wait_until_settled(self) -> None:
        """Wait until the last move's answer is on screen (its seek and records done)."""
        while self.seek_pending:
            await asyncio.sleep(0.01)

    # -- seeks in the background ------------------------------------------------------------------------
    #
    # Re-executing from a checkpoint takes milliseconds to tens of milliseconds (more on a loaded
    # machine); it runs in a worker so that keys are never held up, and the index waits meanwhile.  An
    # answer that is not at hand says "seeking…" in the status bar at once, in the same frame as the
    # cursor's move, until it is on screen: whatever the machine's load, nothing that takes longer than
    # SEEK_NOTICE_S goes unannounced.  The worker works out the cursor's moment and, on the same pass,
    # those of the events the list shows around it (`Session.prepare`): the next keys find them at hand.

    def _seek_began(self) -> None:
        if not self.seek_pending:
            self.seek_pending = True
            self._seek_started = time.monotonic()
            try:
                self._refresh_status()  # "seeking…", drawn with the move
            except NoMatches:  # the app is closing
                return

    def _seek_settled(self) -> None:
        if self._seek_target is None and not self._records_wanted and not self._records_loading:
            if self.seek_pending:
                self.seek_pending = False
                self._refresh_status()
                self.call_after_refresh(self._move_drawn)

    @property
    def seeking(self) -> bool:
        """A seek is under way: its answer was not at hand (the status bar says so)."""
        return self.seek_pending

    @work(thread=True, exclusive=True, group="seek")
    def _seek_worker(self, position: int, around: list[int]) -> None:
        worker = get_current_worker()
        try:
            moment = self.session.prepare(position, around, should_stop=lambda: worker.is_cancelled)
            error = None
        except (SeekCancelled, NoMatches):
            return
        except (DecodeError, SessionError) as failure:  # bad input deep in the file: say it, keep running
            moment, error = None, str(failure)
        if not worker.is_cancelled:
            self.call_from_thread(self._seek_done, position, moment, error)

    @work(thread=True, exclusive=True, group="landmarks")
    def _pin_landmarks(self) -> None:
        """Once indexed, in the background: the moments where s/S/d/D go, worked out ahead (`Session.pin`).
        It steps aside whenever the screen waits for a seek of its own, and starts that landmark again."""
        worker = get_current_worker()
        session = self.session
        event_list = self.query_one(EventList)
        try:
            height = self.call_from_thread(lambda: event_list.size.height)  # widgets are asked on their thread
        except RuntimeError:  # the app is closing
            return
        for position in session.landmarks():
            while not worker.is_cancelled:
                while (self.seek_pending or self.searching) and not worker.is_cancelled:
                    time.sleep(0.02)
                try:
                    session.pin(position, event_list.around(position, height),
                                should_stop=lambda: worker.is_cancelled or self.seek_pending)
                    break
                except SeekCancelled:
                    continue
                except (DecodeError, SessionError):
                    break
            if worker.is_cancelled:
                return

    def _seek_done(self, position: int, moment, error: str | None) -> None:
        if position != self._seek_target:
            return  # the cursor moved on; its own seek is on its way
        self._seek_target = None
        self._seek_span = None
        if not self.is_running:
            return
        self.query_one(EventList).refresh()  # its rows' events and records came with the seek
        if position == self.cursor:
            if error is not None:
                self.query_one(Inspector).show_pending(f"cannot replay to #{int(self.session.source.seq[position])}: {error}")
            else:
                self._show_moment(moment, position)
        self._seek_settled()

    def want_events(self, position: int) -> None:
        """The event list needs ``position``'s block decoded (it draws "…" until it is)."""
        if not self._seek_covers(position):
            self._want(("events", position // self.session.source.block_size))

    def want_records(self, position: int) -> None:
        """The event list needs the records of ``position``'s block (it draws "…" until they are here)."""
        if not self._seek_covers(position):
            self._want(("records", position // self.session.source.block_size))

    def _seek_covers(self, position: int) -> bool:
        """Does the running seek re-execute event ``position``?  Then it decodes the event and keeps its
        records on the way (`Session.records_cached` finds them), and the list is drawn again when it is
        done: loading the block beside it would do the same work twice, competing for the interpreter.
        A row it turns out not to cover asks again then."""
        span = self._seek_span
        return span is not None and self._seek_target is not None and span[0] <= position <= span[1]

    def _want(self, block: tuple[str, int]) -> None:
        if block in self._records_wanted:
            return
        self._records_wanted.add(block)
        self._seek_began()
        if not self._records_loading:
            self._records_loading = True
            self.call_later(self._load_records)

    def _load_records(self) -> None:
        blocks = sorted(self._records_wanted)
        self._records_worker(blocks)

    @work(thread=True, exclusive=False, group="records")
    def _records_worker(self, blocks: list[tuple[str, int]]) -> None:
        for kind, block in blocks:
            try:
                if kind == "events":
                    self.session.source.block(block)
                else:
                    self.session.load_records(block)
            except (DecodeError, SessionError):
                pass  # the index says where the replay stopped; the list shows what there is
        self.call_from_thread(self._records_done, blocks)

    def _records_done(self, blocks: list[tuple[str, int]]) -> None:
        self._records_wanted.difference_update(blocks)
        try:
            event_list = self.query_one(EventList)
        except NoMatches:  # the app is closing
            return
        event_list.refresh()
        if self._records_wanted:
            self._load_records()
            return
        self._records_loading = False
        moment = self.session.moment_cached(self.cursor)
        if moment is not None and self._seek_target is None:
            self._show_moment(moment, self.cursor)  # now with the cursor's records
        self._seek_settled()

    def _refresh_status(self) -> None:
        session = self.session
        if not len(session):
            self.query_one("#status", Static).update("no events")
            return
        k = self.cursor
        source = session.source
        index = session.index
        parts = [
            f"#{int(source.seq[k])} ({k + 1} of {len(session)})",
            source.when(int(source.ts[k])),
            f"member {self.member}",
        ]
        # What is happening and what the last key found come first: a narrow terminal cuts the end.
        if self.searching:
            parts.append("searching… (escape stops)")
        elif self.seeking:
            parts.append("seeking…")
            self._move_noticed = True  # what benchmarks/bench_tui.py counts: said while the move waited
        if self.message:
            parts.append(self.message)
        if not index.finished:
            parts.append(f"indexing {index.done}/{len(session)} ({100 * index.done // len(session)}%)")
        else:
            divergences, invariants = session.problem_counts()
            parts.append(f"divergences {divergences}  invariants {invariants}")
        if index.error:
            parts.append(index.error)
        event_list = self.query_one(EventList)
        if not event_list.filter.is_empty:
            parts.append(f"filter {event_list.filter.describe()}")
        if event_list.hidden_heartbeats:
            parts.append(f"{event_list.hidden_heartbeats} heartbeats hidden (h)")
        if self.conditions:
            parts.append("break: " + " | ".join(c.text for c in self.conditions))
        if self.bookmarks:
            parts.append(f"bookmarks {len(self.bookmarks)}")
        self.query_one("#status", Static).update("  ·  ".join(parts), layout=False)  # one line, always

    def say(self, message: str) -> None:
        self.message = message
        self._refresh_status()

    # -- moving ---------------------------------------------------------------------------------------------

    def go_to(self, position: int | None, why_not: str = "", *, note: str = "") -> None:
        """Move the cursor to ``position``; when there is none, say ``why_not`` instead."""
        if position is None:
            self.say(why_not or "not found")
            return
        self.message = note
        last = len(self.session) - 1
        self.cursor = min(max(int(position), 0), max(last, 0))
        self._refresh_status()

    def _visible(self):
        return self.query_one(EventList).layout_lines.positions

    def action_step(self, delta: int) -> None:
        positions = self._visible()
        if not len(positions):
            return
        target = self.session.next_of(positions, self.cursor, 1 if delta > 0 else -1)
        if target is not None:
            self.go_to(target)

    def action_page(self, direction: int) -> None:
        positions = self._visible()
        if not len(positions):
            return
        event_list = self.query_one(EventList)
        i = event_list.layout_lines.index_of(self.cursor) + direction * max(event_list.size.height - 2, 1)
        self.go_to(int(positions[min(max(i, 0), len(positions) - 1)]))

    def action_edge(self, end: int) -> None:
        positions = self._visible()
        if len(positions):
            self.go_to(int(positions[-1] if end else positions[0]))

    def action_member_step(self, direction: int) -> None:
        positions = self.session.member_positions(self.member)
        self.go_to(
            self.session.next_of(positions, self.cursor, direction),
            f"member {self.member} has no {'later' if direction > 0 else 'earlier'} event",
        )

    def _pending(self, why_not: str) -> str:
        """``why_not``, and, while indexing, that the rest of the replay is still to come."""
        pending = self.session.pending()
        return f"{why_not}; {pending}" if pending else why_not

    def action_state_change(self, direction: int) -> None:
        where = "after" if direction > 0 else "before"
        self.go_to(
            self.session.next_of(self.session.state_changes(), self.cursor, direction),
            self._pending(f"no state change {where} here"),
        )

    def action_member_state_change(self, direction: int) -> None:
        changes = self.session.state_changes(self.member)
        where = "after" if direction > 0 else "before"
        self.go_to(
            self.session.next_of(changes, self.cursor, direction),
            self._pending(f"no state change of member {self.member} {where} here"),
        )

    def action_problem(self, direction: int) -> None:
        """The next (previous) divergence or invariant violation.  While indexing, the answer is the
        index's so far, and it says so: one found past `Session.settled` may yet have one before it."""
        session = self.session
        positions = session.index.problem_positions
        if direction == 0:
            found = positions[0] if positions else None
            self.go_to(found, self._pending("the replay found no divergence or invariant violation"))
            return
        found = session.next_of(positions, self.cursor, direction)
        where = "after" if direction > 0 else "before"
        note = ""
        if found is not None and not session.index.finished and max(found, self.cursor) >= session.settled():
            note = f"(indexing: an earlier one may still be found; {session.pending()})"
        self.go_to(found, self._pending(f"no divergence or invariant violation {where} here"), note=note)

    def action_next_member(self) -> None:
        members = self.session.members
        if members:
            i = members.index(self.member) if self.member in members else -1
            self.member = members[(i + 1) % len(members)]

    def action_select_member(self, member: int) -> None:
        if member in self.session.members:
            self.member = member
        else:
            self.say(f"no member {member} in this replay")

    def action_toggle_records(self) -> None:
        event_list = self.query_one(EventList)
        event_list.show_records = not event_list.show_records

    def action_toggle_heartbeats(self) -> None:
        event_list = self.query_one(EventList)
        event_list.show_heartbeats = not event_list.show_heartbeats
        self._refresh_all()

    def action_toggle_wall_clock(self) -> None:
        source = self.session.source
        source.wall_clock = not source.wall_clock
        self.query_one(EventList).clear_lines()
        self._refresh_all()

    def action_zoom(self, delta: int) -> None:
        timeline = self.query_one(Timeline)
        timeline.zoom = min(max(timeline.zoom + delta, 0), 40)

    def action_toggle_axis(self) -> None:
        timeline = self.query_one(Timeline)
        timeline.by_events = not timeline.by_events

    # -- jumps ----------------------------------------------------------------------------------------------

    def jump(self, jump: Jump) -> None:
        session = self.session
        if not len(session):
            return
        if jump.kind == "term":
            term = int(jump.value)
            leader = next(
                (s.leader_member_id for s in session.index.terms if s.leadership_term_id == term), None
            )
            if leader is not None and leader in session.members:
                self.member = leader  # show the member that was elected
        position, why_not = locate(session, jump, self.cursor)
        self.go_to(position, self._pending(why_not) if jump.kind == "term" else why_not)

    def action_goto(self) -> None:
        def done(text: str | None) -> None:
            if not text:
                return
            try:
                self.jump(parse_jump(text))
            except ValueError as error:
                self.say(str(error))

        self.push_screen(Prompt("go to", JUMP_HELP), done)

    # -- bookmarks ------------------------------------------------------------------------------------------

    def action_bookmark(self) -> None:
        if self.cursor in self.bookmarks:
            self.bookmarks.discard(self.cursor)
        else:
            self.bookmarks.add(self.cursor)
        event_list = self.query_one(EventList)
        event_list.bookmarks = self.bookmarks
        event_list.refresh()
        self._refresh_status()

    def action_next_bookmark(self, direction: int) -> None:
        self.go_to(self.session.next_of(sorted(self.bookmarks), self.cursor, direction), "no more bookmarks")

    # -- filter ---------------------------------------------------------------------------------------------

    def apply_filter(self, text: str) -> None:
        try:
            event_filter = EventFilter.parse(text)
        except ValueError as error:
            self.say(str(error))
            return
        event_list = self.query_one(EventList)
        event_list.set_filter(event_filter)
        positions = event_list.layout_lines.positions
        if len(positions):
            self.cursor = int(
                positions[event_list.layout_lines.index_of(self.cursor)]
            )  # the nearest shown event
        self.message = "" if len(positions) else "no event matches the filter"
        self._refresh_all()

    def action_filter(self) -> None:
        current = self.query_one(EventList).filter.describe()

        def done(text: str | None) -> None:
            if text is not None:
                self.apply_filter(text)

        self.push_screen(
            Prompt(
                "filter events", "node=1,2 channel=consensus type=Vote,RequestVote (empty clears)", current
            ),
            done,
        )

    def action_clear_filter(self) -> None:
        self.apply_filter("")

    # -- breakpoints ----------------------------------------------------------------------------------------

    def add_breakpoint(self, text: str) -> bool:
        try:
            condition = breakpoints.parse(text)
            condition.validate(self.session.members)
        except breakpoints.BreakpointError as error:
            self.say(f"breakpoint: {error}")
            return False
        self.conditions.append(condition)
        self.say(f"breakpoint added: {condition.text}")
        return True

    def action_add_breakpoint(self) -> None:
        def done(text: str | None) -> None:
            if text:
                self.add_breakpoint(text)

        self.push_screen(
            Prompt(
                "break when",
                "node 2 state == FOLLOWER_CATCHUP   role == LEADER and term == 2   watch node 1 candidateTermId",
            ),
            done,
        )

    def last_change(self, field: str, member: int | None = None) -> None:
        """Go to the event after which ``member``'s (the selected member's) ``field`` took the value it has
        at the cursor, and say what changed it: the message it received, the local event, or the deadline
        (the cause its record there carries, `engine.model.outputs.Cause`).  Clicking a value in the
        inspector asks this of that value; ``l`` asks which."""
        field = field.strip()
        if member is not None and member != self.member:
            self.member = member
        try:
            condition = breakpoints.parse(f"node {self.member} {field} changes")
            condition.validate(self.session.members)
        except breakpoints.BreakpointError as error:
            self.say(f"last change: {error}")
            return
        if self.searching:
            return
        self.searching = True
        self._refresh_status()
        self._last_change(self.member, field, self.cursor)

    def action_last_change_of(self, field: str, member: int) -> None:
        """A value in the inspector was clicked (its link names the member and the field)."""
        self.last_change(field, member)

    @work(thread=True, exclusive=True, group="search")
    def _last_change(self, member: int, field: str, position: int) -> None:
        worker = get_current_worker()
        try:
            found = self.session.last_change(member, field, position, should_stop=lambda: worker.is_cancelled)
            if found is not None:
                self.session.moment(found.position)  # ready for the screen
                self.session.records_at(found.position)
        except SeekCancelled:
            return
        except (DecodeError, SessionError, ValueError) as error:
            self.call_from_thread(self._last_change_done, None, member, field, str(error))
            return
        if not worker.is_cancelled:
            self.call_from_thread(self._last_change_done, found, member, field, None)

    def _last_change_done(self, found: LastChange | None, member: int, field: str, error: str | None) -> None:
        self.searching = False
        if error:
            self.say(error)
            return
        if found is None:
            self.say(self._pending(f"member {member}'s {field} has not changed since it started, up to here"))
            return
        self.last_change_found = found
        source = self.session.source
        seq = int(source.seq[found.position])
        how = describe_cause(found.cause) or "(no cause recorded)"
        if found.is_the_event:
            how += ": the event here"
        self.go_to(
            found.position,
            note=f"{field} {found.before} → {found.after} at #{seq}, {how}",  # the member is in the status
        )
        self._refresh_inspector()

    def action_last_change(self) -> None:
        def done(text: str | None) -> None:
            if text:
                self.last_change(text)

        self.push_screen(
            Prompt(
                f"when did member {self.member}'s … last change?",
                "candidateTermId   state   leadershipTermId   nodeState.logPosition   members[1].logPosition",
                suggestions=LAST_CHANGE_FIELDS,
            ),
            done,
        )

    def action_clear_breakpoints(self) -> None:
        self.conditions.clear()
        self.say("breakpoints cleared")

    def action_continue(self, direction: int) -> None:
        if not self.conditions:
            self.say("no breakpoint: add one with b")
            return
        if self.searching:
            return
        self.searching = True
        self._refresh_status()
        self._search(list(self.conditions), self.cursor, direction)

    @work(thread=True, exclusive=True, group="search")
    def _search(self, conditions: list[breakpoints.Condition], position: int, direction: int) -> None:
        worker = get_current_worker()
        try:
            found = self.session.search(
                conditions, position, direction, should_stop=lambda: worker.is_cancelled
            )
            if found is not None:
                self.session.moment(found[0])  # ready for the screen
        except (DecodeError, SessionError, ValueError) as error:
            self.call_from_thread(self._search_done, None, conditions, direction, str(error))
            return
        if not worker.is_cancelled:
            self.call_from_thread(self._search_done, found, conditions, direction, None)

    def _search_done(self, found, conditions, direction: int, error: str | None) -> None:
        self.searching = False
        if error:
            self.say(error)
            return
        if found is None:
            self.say("no breakpoint hit " + ("after" if direction > 0 else "before") + " the cursor")
            return
        position, hits = found
        moment = self.session.moment(position)
        members = sorted({m for i in hits for m in conditions[i].members(moment.states, moment.previous)})
        if members and self.member not in members:
            self.member = members[0]
        self.go_to(position, note="hit: " + " | ".join(conditions[i].text for i in hits))

    def action_cancel_search(self) -> None:
        if self.searching:
            for worker in self.workers:
                if worker.group == "search":
                    worker.cancel()
            self.searching = False
            self.say("search stopped")

    # -- diff, help, screenshot -----------------------------------------------------------------------------

    def action_diff(self) -> None:
        if self.other is None:
            self.say("no diff: start with --diff OTHER (a second replay file, or a model version)")
            return
        if not self.indexed:
            self.say("the diff view opens once both replays are indexed")
            return
        if self.diff_rows is None:
            self.diff_rows = align(story(self.session), story(self.other))
        left = f"{_short_name(self.session.name)} (model {self.session.model})"
        origins = (self.session.source.origin, self.other.source.origin)
        self.push_screen(DiffScreen(self.diff_rows, left, self.other_name or "other", origins))

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.KEYS))

    def action_save_screenshot(self) -> None:
        directory = Path(self.screenshot_dir or ".")
        stem = f"recount-{Path(self.session.name).stem}-event{self.cursor}"
        path = directory / f"{stem}.svg"
        n = 1
        while path.exists():  # never overwrite a file the user has
            path = directory / f"{stem}-{n}.svg"
            n += 1
        saved = self.save_screenshot(filename=path.name, path=str(directory))
        self.say(f"screenshot saved: {saved}")

    @on(EventList.Picked)
    def picked(self, message: EventList.Picked) -> None:
        self.go_to(message.position)
