"""The inspector: one member's state as of the cursor, what changed at this step, and the event.

Sections, top to bottom: every member in one line each (election state, role, term, leader and what
its node-state.dat holds: enough to read the whole cluster at a glance); then for the selected
member its Election fields, running deadlines with the time left from the cursor's time, the
ClusterMember table it holds, node-state.dat and recording.log decoded; then the event under the
cursor decoded field by field, with its raw bytes.  Values that differ from the state after the
previous event are highlighted (`inspector--changed`).  At the top, what the selected member changed at
this event and the cause each change carries (the message, local event or deadline), and the answer
to the last "when did this value last change" when the cursor is on it.  Every value of the member
(election fields, the cluster table, node-state.dat) is a link: clicking it asks where it last changed
(the app's ``last_change``).  Everything shown comes from each member's `MemberView.to_json()` through `Session.moment`;
this module only lays it out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.style import Style
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from cli.tui.session import Moment, Session, cause_of, format_duration
from formats.describe import describe_cause, describe_event, describe_record
from formats.errors import DecodeError
from formats.sbe import encode

ELECTION_KEYS = (
    "electionState",
    "role",
    "moduleState",
    "leadershipTermId",
    "logLeadershipTermId",
    "candidateTermId",
    "leaderMemberId",
    "logPosition",
    "appendPosition",
    "commitPosition",
    "catchupJoinPosition",
    "isRunning",
)
MEMBER_KEYS = (
    ("memberId", "id"),
    ("leadershipTermId", "term"),
    ("logPosition", "logPos"),
    ("candidateTermId", "cand"),
    ("vote", "vote"),
    ("isBallotSent", "ballot"),
    ("isLeader", "leader"),
    ("timeOfLastAppendPositionNs", "lastAppend"),
    ("catchupReplaySessionId", "catchup"),
)
ENTRY_KEYS = (
    ("entryIndex", "#"),
    ("type", "type"),
    ("leadershipTermId", "term"),
    ("termBaseLogPosition", "base"),
    ("logPosition", "logPosition"),
    ("timestamp", "timestamp"),
    ("recordingId", "recording"),
    ("isValid", "valid"),
)


SECTIONS = ("why", "cluster", "election", "leaders", "deadlines", "members", "files", "event")
#: Record kinds that say what the selected member changed at the cursor, and why.
CHANGE_KINDS = ("election", "state", "role", "moduleState", "nodeState", "markFile", "recordingLog")


def _summary(state: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
    """What the cluster table shows of a member."""
    if state is None:
        return None
    return (
        state.get("electionState"),
        state.get("isRunning"),
        state.get("role"),
        state.get("leadershipTermId"),
        state.get("leaderMemberId"),
        node_state_of(state).get("candidateTermId"),
        state.get("logPosition"),
    )


def _value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def hex_dump(data: bytes, width: int = 16) -> str:
    """``0000  01 02 ...`` lines: offset, bytes in hex."""
    lines = []
    for offset in range(0, len(data), width):
        chunk = data[offset : offset + width]
        lines.append(f"{offset:04x}  " + " ".join(f"{b:02x}" for b in chunk))
    return "\n".join(lines)


def node_state_of(state: Mapping[str, Any]) -> Mapping[str, Any]:
    node_state = state.get("nodeState") or {}
    return node_state.get("candidateTerm", node_state) if isinstance(node_state, Mapping) else {}


class Grid:
    """A small table drawn as plain columns of text, for the inspector's tables.

    Rich's `Table` measures and lays out every cell each time it is drawn, and the inspector is drawn
    again on every step: for these few narrow tables plain padded columns read the same and cost a
    fraction of it.  Cells may be `Text` (styles and links are kept).  A title goes on its own line,
    the header in bold.  What does not fit is wrapped by the widget like any text."""

    def __init__(self, *, show_header: bool = True, title: str | None = None, gap: int = 2, **_: Any) -> None:
        self.show_header = show_header
        self.title = title
        self.gap = gap
        self.columns: list[str] = []
        self.rows: list[list[Text]] = []

    def add_column(self, name: str) -> None:
        self.columns.append(name)

    def add_row(self, *cells: Any) -> None:
        self.rows.append([cell if isinstance(cell, Text) else Text(str(cell)) for cell in cells])

    def __rich__(self) -> Text:
        rows = ([[Text(c, style="bold") for c in self.columns]] if self.show_header else []) + self.rows
        widths = [max((row[i].cell_len for row in rows if i < len(row)), default=0) for i in range(len(self.columns))]
        out = Text()
        if self.title:
            out.append(self.title + "\n")
        for n, row in enumerate(rows):
            for i, cell in enumerate(row):
                out.append_text(cell)
                if i < len(row) - 1:
                    out.append(" " * (widths[i] - cell.cell_len + self.gap))
            if n < len(rows) - 1:
                out.append("\n")
        return out


#: The divergences and invariant violations about the cursor's event listed in the inspector (the rest counted).
PROBLEMS_SHOWN = 8
#: Below this width (cells) the cluster table is drawn as two lines per member.
NARROW_BELOW = 64


class Inspector(VerticalScroll):
    """Shows `Session.moment(cursor)` for the selected member, and the cursor's event."""

    COMPONENT_CLASSES = {
        "inspector--changed",
        "inspector--heading",
        "inspector--muted",
        "inspector--selected",
        "inspector--problem",
    }

    def __init__(self, session: Session, **kwargs) -> None:
        super().__init__(**kwargs)
        self.session = session
        self._bodies: dict[str, tuple[str, RenderableType]] = {}
        self._signatures: dict[str, Any] = {}
        self._highlights: dict[str, list[str]] = {}
        self._section = ""
        self._shown: tuple[Moment, int, int, Any, Any] | None = None
        self._links_for = 0

    @property
    def narrow(self) -> bool:
        """Too narrow for the cluster table's columns (a 100-column terminal): two lines per member."""
        return 0 < self.size.width < NARROW_BELOW

    def on_resize(self) -> None:
        if self._shown is not None:
            moment, member, position, records, last_change = self._shown
            self.show(moment, member, position, records=records, last_change=last_change)

    @property
    def highlighted(self) -> list[str]:
        """The values shown as changed since the previous event, as "section:field" (tests read it)."""
        return [key for name in SECTIONS for key in self._highlights.get(name, ())]

    def compose(self):
        for name in SECTIONS:
            yield Static(id=f"inspector-{name}", classes="inspector-section")

    def _set(self, name: str, title: str, build: Callable[[], RenderableType], signature: Any = None) -> None:
        """Redraw one section, unless what it is drawn from is the same as last time (tables are slow to lay out)."""
        if signature is not None and self._signatures.get(name) == (title, signature):
            return
        self._section = name
        self._highlights[name] = []
        body = build()
        heading = Text(title, style=self.get_component_rich_style("inspector--heading"))
        section = self.query_one(f"#inspector-{name}", Static)
        # A layout pass (every widget of the screen arranged again) costs more than drawing the section:
        # it is asked for only when the section's height changes, which most steps do not do.
        height = section.size.height
        section.update(Group(heading, body), layout=False)
        if not height or section.visual is None or section.visual.get_height(section.styles, section.size.width) != height:
            section.refresh(layout=True)
        self._bodies[name] = (title, body)
        self._signatures[name] = (title, signature) if signature is not None else None

    def text(self, name: str) -> str:
        """The plain text of one section (cluster, election, deadlines, members, files, event)."""
        title, body = self._bodies.get(name, ("", Text("")))
        return title + "\n" + _plain(body)

    def show_pending(self, message: str) -> None:
        for name in SECTIONS[:-1]:
            self._set(name, "", lambda name=name: Text(message if name == "cluster" else ""))

    # -- links: a value asks where it last changed --------------------------------------------------------

    def _link(self, text: Text, path: str, member: int | None = None) -> Text:
        """``text`` as a link: clicking it asks the app where ``member``'s ``path`` last changed."""
        member = self._links_for if member is None else member
        text.stylize(Style(meta={"@click": f"app.last_change_of({path!r}, {member})"}))
        return text

    def _why(self, changes: list[dict[str, Any]], loading: bool, last_change: Any) -> RenderableType:
        muted = self.get_component_rich_style("inspector--muted")
        lines = []
        if last_change is not None:
            text = Text(f"{last_change.path}: {last_change.before} → {last_change.after} here, ",
                        style=self.get_component_rich_style("inspector--changed"))
            text.append(describe_cause(last_change.cause) or "no cause recorded")
            if last_change.is_the_event:
                text.append(" (the event below)", style=muted)
            lines.append(text)
        for record in changes:
            text = Text(describe_record(record))
            cause = describe_cause(cause_of(record))
            if cause:
                text.append("  " + cause, style=muted)
            lines.append(text)
        if not lines:
            lines.append(Text("loading…" if loading else "no change of its election, role or files here", style=muted))
        return Group(*lines)

    def show(
        self,
        moment: Moment,
        member: int,
        position: int,
        *,
        records: list[dict[str, Any]] | None = None,
        last_change: Any = None,
    ) -> None:
        states, previous = moment.states, moment.previous
        now = int(self.session.source.ts[position])
        self._shown = (moment, member, position, records, last_change)
        self._links_for = member
        changes = [r for r in records or () if r.get("node") == member and r.get("kind") in CHANGE_KINDS]
        self._set(
            "why",
            f"member {member} at this event",
            lambda: self._why(changes, records is None, last_change),
            (member, repr(changes), records is None, repr(last_change), self.session.source.wall_clock),
        )
        cluster = [(m, _summary(states.get(m)), _summary(previous.get(m))) for m in self.session.members]
        narrow = self.narrow
        self._set(
            "cluster",
            "cluster at the cursor",
            lambda: self._cluster_lines(states, previous, member) if narrow else self._cluster(states, previous, member),
            (member, cluster, narrow),
        )
        state = states.get(member)
        if state is None:
            muted = self.get_component_rich_style("inspector--muted")
            self._set(
                "election", f"member {member}", lambda: Text("not started yet", style=muted), "not started"
            )
            for name in ("deadlines", "members", "files"):
                self._set(name, "", lambda: Text(""), "not started")
        else:
            before = previous.get(member) or {}
            running = "" if state.get("isRunning", True) else "  (process down: state as it left it)"
            election = [(k, state.get(k), before.get(k)) for k in ELECTION_KEYS]
            started = self.session.election_of(member, position)
            self._set(
                "election",
                f"member {member}: election{running}",
                lambda: Group(self._election_start(started), self._pairs(state, before, ELECTION_KEYS)),
                (election, started, self.session.source.wall_clock),
            )
            self._set(
                "deadlines",
                "deadlines (time left from the cursor)",
                lambda: self._deadlines(state, before, now),
            )
            held = (repr(state.get("members")), repr(before.get("members")))
            self._set(
                "members",
                f"ClusterMember table held by member {member}",
                lambda: self._members(state, before),
                held,
            )
            files = repr(
                (
                    state.get("nodeState"),
                    state.get("recordingLog"),
                    before.get("nodeState"),
                    before.get("recordingLog"),
                )
            )
            self._set(
                "files",
                f"member {member}: node-state.dat and recording.log",
                lambda: self._files(state, before),
                files,
            )
        history = self.session.leader_history(position)
        self._set("leaders", "leaders of the cluster, term by term", lambda: self._leaders(history),
                  (tuple(history), self.session.source.wall_clock))
        self._set("event", f"event #{int(self.session.source.seq[position])}", lambda: self._event(position))

    # -- sections --------------------------------------------------------------------------------------

    def _changed(self, text: str, changed: bool, key: str = "", link: str | None = None,
                 member: int | None = None) -> Text:
        """A value, highlighted when it changed at this event; a link when ``link`` names its path."""
        if changed:
            self._highlights.setdefault(self._section, []).append(key)
            out = Text(text, style=self.get_component_rich_style("inspector--changed"))
        else:
            out = Text(text)
        return self._link(out, link, member) if link else out

    def _cluster_lines(self, states, previous, selected: int) -> Text:
        """The cluster table for a narrow inspector: per member, its state and role on one line and
        the numbers, each named, on the next (nothing cut short)."""
        out = Text()
        for member in self.session.members:
            state = states.get(member)
            marker = "▶" if member == selected else " "
            out.append(f"{marker}{member} ", style=self.get_component_rich_style("inspector--selected") if member == selected else "")
            if state is None:
                out.append("not started\n")
                continue
            before = previous.get(member) or {}
            running = state.get("isRunning", True)
            out.append_text(self._changed(
                _value(state.get("electionState") if running else "DOWN"),
                before.get("electionState") != state.get("electionState"), f"cluster:{member}.electionState",
                "electionState", member))
            out.append(" ")
            out.append_text(self._changed(_value(state.get("role")), before.get("role") != state.get("role"),
                                          f"cluster:{member}.role", "role", member))
            out.append("\n   ")
            candidate = node_state_of(state).get("candidateTermId")
            numbers = (
                ("term", "leadershipTermId", state.get("leadershipTermId"), before.get("leadershipTermId")),
                ("leader", "leaderMemberId", state.get("leaderMemberId"), before.get("leaderMemberId")),
                ("cand", "nodeState.candidateTermId", candidate, node_state_of(before).get("candidateTermId")),
                ("log", "logPosition", state.get("logPosition"), before.get("logPosition")),
            )
            for i, (label, key, value, old) in enumerate(numbers):
                out.append(("  " if i else "") + label + "=", style=self.get_component_rich_style("inspector--muted"))
                out.append_text(self._changed(_value(value), value != old, f"cluster:{member}.{key}", key, member))
            out.append("\n")
        out.rstrip()
        return out

    def _cluster(self, states, previous, selected: int) -> Grid:
        table = Grid(box=None, pad_edge=False, show_edge=False, expand=False)
        for column in ("member", "state", "role", "term", "leader", "node-state cand", "logPos"):
            table.add_column(column)
        for member in self.session.members:
            state = states.get(member)
            marker = "▶" if member == selected else " "
            if state is None:
                table.add_row(f"{marker}{member}", "-", "-", "-", "-", "-", "-")
                continue
            before = previous.get(member) or {}
            cells = [
                ("electionState", state.get("electionState") if state.get("isRunning", True) else "DOWN"),
                ("role", state.get("role")),
                ("leadershipTermId", state.get("leadershipTermId")),
                ("leaderMemberId", state.get("leaderMemberId")),
            ]
            row: list[Any] = [
                Text(
                    f"{marker}{member}",
                    style=self.get_component_rich_style("inspector--selected") if member == selected else "",
                )
            ]
            row += [
                self._changed(_value(v), before.get(k) != state.get(k), f"cluster:{member}.{k}", k, member)
                for k, v in cells
            ]
            candidate = node_state_of(state).get("candidateTermId")
            row.append(
                self._changed(
                    _value(candidate),
                    candidate != node_state_of(before).get("candidateTermId"),
                    f"cluster:{member}.nodeState.candidateTermId",
                    "nodeState.candidateTermId",
                    member,
                )
            )
            row.append(
                self._changed(
                    _value(state.get("logPosition")),
                    before.get("logPosition") != state.get("logPosition"),
                    f"cluster:{member}.logPosition",
                    "logPosition",
                    member,
                )
            )
            table.add_row(*row)
        return table

    def _election_start(self, started) -> Text:
        muted = self.get_component_rich_style("inspector--muted")
        if started is None:
            return Text("no election started yet", style=muted)
        source = self.session.source
        text = Text("started ", style=muted)
        text.append(f"{source.when(started.ts)} at #{int(source.seq[started.position])}")
        text.append(f" in term {started.leadership_term_id}", style=muted)
        if started.reason:
            text.append(f": {started.reason}")
        return text

    def _leaders(self, history) -> RenderableType:
        if not history:
            return Text("no leader yet", style=self.get_component_rich_style("inspector--muted"))
        source = self.session.source
        table = Grid(box=None, pad_edge=False, show_edge=False)
        for column in ("term", "leader", "elected", "election took", "first to start it"):
            table.add_column(column)
        for change in history:
            election = change.election
            table.add_row(
                str(change.term.leadership_term_id),
                str(change.term.leader_member_id),
                source.when(change.term.ts),
                format_duration(change.election_ns) if election is not None else "-",
                f"member {election.node}: {election.reason}" if election is not None else "-",
            )
        return table

    def _pairs(self, state, before, keys) -> Grid:
        table = Grid(box=None, show_header=False, pad_edge=False, show_edge=False)
        table.add_column("field")
        table.add_column("value")
        for key in keys:
            if key in state:
                table.add_row(
                    key,
                    self._changed(
                        _value(state[key]), bool(before) and before.get(key) != state[key], f"election:{key}", key
                    ),
                )
        return table

    def _deadlines(self, state, before, now: int) -> RenderableType:
        deadlines = state.get("deadlines") or {}
        if not deadlines or not state.get("isRunning", True):
            return Text("none running", style=self.get_component_rich_style("inspector--muted"))
        table = Grid(box=None, pad_edge=False, show_edge=False)
        for column in ("deadline", "at", "time left"):
            table.add_column(column)
        old = before.get("deadlines") or {}
        for name in sorted(deadlines, key=lambda n: (deadlines[n], n)):
            at = deadlines[name]
            left = at - now
            left_text = format_duration(left) if left >= 0 else f"overdue {format_duration(-left)}"
            table.add_row(
                name,
                self._changed(self.session.source.when(at), old.get(name) != at, f"deadlines:{name}"),
                left_text,
            )
        return table

    def _members(self, state, before) -> Grid:
        table = Grid(box=None, pad_edge=False, show_edge=False)
        for _, title in MEMBER_KEYS:
            table.add_column(title)
        old = {m.get("memberId"): m for m in before.get("members") or ()}
        for i, entry in enumerate(state.get("members") or ()):
            was = old.get(entry.get("memberId"), {})
            cells = []
            for key, _ in MEMBER_KEYS:
                value = entry.get(key)
                shown = (
                    self.session.source.when(value)
                    if key == "timeOfLastAppendPositionNs" and isinstance(value, int) and value >= 0
                    else _value(value)
                )
                cells.append(
                    self._changed(
                        shown,
                        bool(was) and was.get(key) != value,
                        f"members:{entry.get('memberId')}.{key}",
                        f"members[{i}].{key}",
                    )
                )
            table.add_row(*cells)
        return table

    def _files(self, state, before) -> RenderableType:
        node_state = node_state_of(state)
        old_state = node_state_of(before) if before else {}
        parts = Text("node-state.dat  ")
        for key in ("candidateTermId", "logPosition", "timestamp"):
            parts.append(f"{key}=")
            parts.append(
                self._changed(
                    _value(node_state.get(key)),
                    bool(old_state) and old_state.get(key) != node_state.get(key),
                    f"nodeState:{key}",
                    f"nodeState.{key}",
                )
            )
            parts.append("  ")
        table = Grid(box=None, pad_edge=False, show_edge=False, title="recording.log", title_justify="left")
        for _, title in ENTRY_KEYS:
            table.add_column(title)
        old_entries = {e.get("entryIndex"): e for e in before.get("recordingLog") or ()} if before else {}
        for entry in state.get("recordingLog") or ():
            was = old_entries.get(entry.get("entryIndex"))
            table.add_row(
                *[
                    self._changed(
                        _value(entry.get(key)),
                        bool(before) and (was is None or was.get(key) != entry.get(key)),
                        f"recordingLog:{entry.get('entryIndex')}.{key}",
                    )
                    for key, _ in ENTRY_KEYS
                ]
            )
        if not state.get("recordingLog"):
            return Group(parts, Text("recording.log  (empty)"))
        return Group(parts, table)

    def _event(self, position: int) -> RenderableType:
        source = self.session.source
        try:
            event = source.event(position)
        except DecodeError as error:
            return Text(f"undecodable: {error}")
        lines: list[RenderableType] = [Text(describe_event(event))]
        problems = self.session.problems_at(position)  # what the replay found about this very event
        for problem in problems[:PROBLEMS_SHOWN]:
            lines.append(Text(describe_record(problem.record), style=self.get_component_rich_style("inspector--problem")))
        if len(problems) > PROBLEMS_SHOWN:  # a capture can pin thousands on one event: drawing them all takes seconds
            lines.append(Text(f"… and {len(problems) - PROBLEMS_SHOWN} more about this event (d / D walks the"
                              " events with one; r shows each event's records in the list)",
                              style=self.get_component_rich_style("inspector--muted")))
        table = Grid(box=None, pad_edge=False, show_edge=False)
        table.add_column("field")
        table.add_column("value")
        table.add_row("seq", str(int(source.seq[position])))
        table.add_row("ts", f"{event.ts} ns ({self.session.source.when(event.ts)})")
        table.add_row("node / dir / peer", f"{event.node} / {event.dir} / {_value(event.peer)}")
        table.add_row("channel", event.channel)
        payload = event.payload
        encoded = None
        if event.is_message:
            try:
                message = event.message()
                fields = message.to_fields()
                if payload is None:
                    encoded = encode(message)
            except (DecodeError, ValueError) as error:
                fields = dict(event.fields)
                lines.append(Text(f"cannot decode: {error}"))
            table.add_row("type", event.type)
            for key, value in fields.items():
                table.add_row(f"  {key}", _value(value))
        else:
            table.add_row("type", event.type)
            for key, value in event.fields.items():
                table.add_row(f"  {key}", _value(value))
        lines.append(table)
        if payload is not None:
            lines.append(
                Text(
                    f"raw bytes ({len(payload)}, as recorded)",
                    style=self.get_component_rich_style("inspector--heading"),
                )
            )
            lines.append(Text(hex_dump(payload)))
        elif encoded is not None:
            lines.append(
                Text(
                    f"bytes ({len(encoded)}, encoded from the fields: nothing was recorded)",
                    style=self.get_component_rich_style("inspector--heading"),
                )
            )
            lines.append(Text(hex_dump(encoded)))
        return Group(*lines)


def _plain(renderable: RenderableType) -> str:
    """Text of a renderable (what `Inspector.text` returns)."""
    from rich.console import Console

    console = Console(width=200, record=True, color_system=None, force_terminal=False)
    with console.capture() as capture:
        console.print(renderable)
    return capture.get()
